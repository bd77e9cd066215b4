import Glibc
import LanchatControl
import NIOCore
import NIOHTTP1

/// Plain HTTP: the page's assets, uploads, and received images.
extension WebServer {
    typealias HTTPChannel = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>
    typealias Inbound = NIOAsyncChannelInboundStream<HTTPServerRequestPart>.AsyncIterator

    /// What an upload answers: where the file waits, and one token per `send-file` (each takes one).
    struct UploadResult: Encodable {
        var path: String
        var size: UInt64
        var fileTokens: [String]
    }

    func serve(_ http: HTTPChannel) async throws {
        try await http.executeThenClose { inbound, outbound in
            var iterator = inbound.makeAsyncIterator()
            while let part = try await iterator.next() {
                guard case .head(let head) = part else { continue }
                let outcome = check.check(method: head.method.rawValue, target: head.uri, headers: head.headers.map { ($0.name, $0.value) })
                let answer: Answer
                switch outcome {
                case .refused(let status, let reason):
                    logger.debug("web request refused", metadata: ["web.status": "\(status)", "web.reason": "\(reason)"])
                    // Its body (if any) is not read: the connection closes after the answer.
                    try await send(Answer(status: status, text: reason, close: true), to: outbound, for: head)
                    return
                case .allowed(.upload(let name, let count)):
                    answer = await receiveUpload(name: name, count: count, head: head, from: &iterator)
                    if answer.close {
                        try await send(answer, to: outbound, for: head)
                        return
                    }
                case .allowed(let route):
                    guard try await drainBody(&iterator) else { return }
                    answer = respond(to: route)
                }
                try await send(answer, to: outbound, for: head)
                if answer.close || !head.isKeepAlive { return }
            }
        }
    }

    /// An answer: its status, media type and body.
    struct Answer {
        var status: Int
        var type: String
        var body: ByteBuffer
        var close = false

        init(status: Int, type: String, body: ByteBuffer, close: Bool = false) {
            self.status = status
            self.type = type
            self.body = body
            self.close = close
        }

        init(status: Int, text: String, close: Bool = false) {
            self.init(status: status, type: "text/plain; charset=utf-8", body: ByteBuffer(string: text + "\n"), close: close)
        }
    }

    private func respond(to route: WebRequestCheck.Route) -> Answer {
        switch route {
        case .asset(let name):
            guard let asset = WebAssets.byName[name] else { return Answer(status: 404, text: "not found") }
            return Answer(status: 200, type: asset.type, body: ByteBuffer(string: asset.text))
        case .file(let path):
            return image(at: path)
        case .socket:
            return Answer(status: 400, text: "/ws takes a WebSocket upgrade")
        case .upload:
            return Answer(status: 405, text: "upload takes a POST")
        }
    }

    private func send(_ answer: Answer, to outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>, for head: HTTPRequestHead) async throws {
        var headers = HTTPHeaders(WebRequestCheck.securityHeaders)
        headers.add(name: "Content-Type", value: answer.type)
        headers.add(name: "Content-Length", value: "\(answer.body.readableBytes)")
        if answer.close { headers.add(name: "Connection", value: "close") }
        try await outbound.write(.head(HTTPResponseHead(version: head.version, status: HTTPResponseStatus(statusCode: answer.status), headers: headers)))
        if head.method != .HEAD { try await outbound.write(.body(.byteBuffer(answer.body))) }
        try await outbound.write(.end(nil))
    }

    /// Reads a request's body up to its end, ignoring it; false if the connection ended first or the
    /// body is larger than a request without one should have (then the connection is closed).
    private func drainBody(_ iterator: inout Inbound) async throws -> Bool {
        var seen = 0
        while let part = try await iterator.next() {
            switch part {
            case .body(let buffer):
                seen += buffer.readableBytes
                if seen > 64 * 1024 { return false }
            case .end: return true
            case .head: return false
            }
        }
        return false
    }

    /// A received file, if it is an image (by its first bytes) in the download or shared-files directory.
    private func image(at path: String) -> Answer {
        guard let resolved = Self.realPath(path) else { return Answer(status: 404, text: "no such file") }
        let roots = [files.downloads, files.shared].compactMap(Self.realPath)
        guard roots.contains(where: { resolved.hasPrefix($0 + "/") }) else {
            return Answer(status: 403, text: "refused: only received and shared files are shown")
        }
        let fd = open(resolved, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return Answer(status: 404, text: "cannot open the file") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return Answer(status: 404, text: "not a file") }
        guard UInt64(info.st_size) <= configuration.maximumInlineImageSize else { return Answer(status: 413, text: "too large to show inline") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, $0.count - done) }
            guard count > 0 else { break }
            done += count
        }
        bytes.removeLast(bytes.count - done)
        guard let type = ImageSniffer.imageType(bytes) else { return Answer(status: 415, text: "not a PNG, JPEG, GIF or WebP image") }
        return Answer(status: 200, type: type, body: ByteBuffer(bytes: bytes))
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Streams an upload to a file of its own under the uploads directory (its name kept, for the
    /// receiver), after checking its declared size against the limit and the free space; then hands
    /// `count` descriptors of it over as file tokens, for `send-file` calls on the WebSocket.
    private func receiveUpload(name: String, count: Int, head: HTTPRequestHead, from iterator: inout Inbound) async -> Answer {
        guard let lengthText = head.headers.first(name: "content-length"), let length = UInt64(lengthText) else {
            return Answer(status: 411, text: "upload: Content-Length is needed", close: true)
        }
        guard length <= configuration.maximumUploadSize else {
            return Answer(status: 413, text: "upload: larger than the limit (\(configuration.maximumUploadSize) bytes)", close: true)
        }
        let safe = Self.safeName(name)
        guard !safe.isEmpty else { return Answer(status: 400, text: "upload: not a usable file name", close: true) }
        mkdir(files.uploads, 0o700)
        var space = statvfs()
        guard statvfs(files.uploads, &space) == 0 else { return Answer(status: 507, text: "upload: cannot read the free space", close: true) }
        let free = UInt64(space.f_bavail) * UInt64(space.f_frsize)
        guard free >= length + configuration.minimumFreeAfterUpload else {
            return Answer(status: 507, text: "upload: not enough free space (\(free) bytes free, \(length) needed)", close: true)
        }
        let directory = joinPath(files.uploads, RandomToken.hex(bytes: 8))
        guard mkdir(directory, 0o700) == 0 else { return Answer(status: 500, text: "upload: cannot create a directory", close: true) }
        let path = joinPath(directory, safe)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return Answer(status: 500, text: "upload: cannot create the file", close: true) }
        func discard(_ answer: Answer) -> Answer {
            close(fd)
            unlink(path)
            rmdir(directory)
            return answer
        }
        var received: UInt64 = 0
        do {
            reading: while let part = try await iterator.next() {
                switch part {
                case .body(let buffer):
                    received += UInt64(buffer.readableBytes)
                    guard received <= length else { return discard(Answer(status: 400, text: "upload: more bytes than Content-Length", close: true)) }
                    let ok = buffer.withUnsafeReadableBytes { bytes in
                        var offset = 0
                        while offset < bytes.count {
                            let written = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                            if written <= 0 { return false }
                            offset += written
                        }
                        return true
                    }
                    guard ok else { return discard(Answer(status: 507, text: "upload: write failed: \(String(cString: strerror(errno)))", close: true)) }
                case .end: break reading
                case .head: return discard(Answer(status: 400, text: "upload: unexpected request", close: true))
                }
            }
        } catch {
            return discard(Answer(status: 400, text: "upload: connection failed", close: true))
        }
        guard received == length else { return discard(Answer(status: 400, text: "upload: the body ended early", close: true)) }
        close(fd)
        var tokens: [String] = []
        for _ in 0..<count {
            let reader = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            let token = RandomToken.hex(bytes: 16)
            guard reader >= 0, files.passed.put(token, reader) else {
                if reader >= 0 { close(reader) }
                for token in tokens { if let fd = files.passed.take(token) { close(fd) } }
                return Answer(status: 503, text: "upload: too many files waiting to be sent", close: true)
            }
            tokens.append(token)
        }
        // Its descriptors are all it is now: gone from the disk once they are (sent, or their tokens
        // unclaimed), not at the next start. (`send-file` and `share` take the path for its name only.)
        unlink(path)
        rmdir(directory)
        logger.info("web upload", metadata: ["web.path": "\(path)", "web.size": "\(length)"])
        let body = ControlJSON.line(UploadResult(path: path, size: length, fileTokens: tokens))
        return Answer(status: 200, type: "application/json", body: ByteBuffer(bytes: body))
    }

    /// The last path component, without control characters or slashes; "" for nothing left, `.` or `..`.
    static func safeName(_ name: String) -> String {
        let last = name.split(separator: "/").last.map(String.init) ?? ""
        let clean = String(String.UnicodeScalarView(last.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f && $0 != "\\" }))
        if clean == "." || clean == ".." { return "" }
        var name = clean
        while name.utf8.count > 200 { name.removeLast() }
        return name
    }
}
