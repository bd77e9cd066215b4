import Dispatch
import Glibc
import LanchatControl
import Logging
import NIOCore
import NIOPosix
import Testing

@testable import LanchatDaemon

/// The web server on a real loopback socket, with small limits: what it does with requests that are
/// too large, too many connections, idle connections, oversized WebSocket messages and uploads.
@Suite(.serialized) struct WebServerLimitsTests {
    /// Answers every call with a bare `ok`; no events.
    struct Handler: ControlHandler {
        func respond(to call: ControlCall, id: Int) async -> ControlResponse { ControlResponse(id: id) }
        func events() -> AsyncStream<ControlEvent> { AsyncStream { _ in } }
        func subscribe(topic: String, room: String?) async throws(ControlError) -> AsyncStream<ControlEvent> { throw .badRequest("no") }
        func openStream(named name: String, to peer: String) async throws(ControlError) -> any ControlStream { throw .badRequest("no") }
        func acceptStream(named name: String, from peer: String?, isAlive: @escaping @Sendable () -> Bool) async throws(ControlError) -> any ControlStream {
            throw .badRequest("no")
        }
    }

    /// Runs `body` against a server with `configure`d limits, in a directory of its own.
    func withServer(_ configure: (inout WebConfiguration) -> Void = { _ in }, _ body: (WebServer, String) async throws -> Void) async throws {
        var template = Array("/tmp/lanchat-web-test-XXXXXX".utf8CString)
        let directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        var configuration = WebConfiguration(port: 0)
        configuration.maximumConnections = 3
        configuration.maximumMessageSize = 1024
        configuration.maximumUploadSize = 1000
        configuration.minimumFreeAfterUpload = 0
        configuration.requestTimeout = 1
        configure(&configuration)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let files = WebServer.Files(
            downloads: directory + "/downloads", shared: directory + "/shared", uploads: directory + "/uploads", passed: PassedFiles())
        let server = try await WebServer(
            configuration: configuration, controlSocket: directory + "/s.sock", socketGroup: nil, handler: Handler(), files: files,
            eventLoopGroup: group, logger: Logger(label: "test"))
        let running = Task { try await server.run() }
        do {
            try await body(server, directory)
        } catch {
            running.cancel()
            try? await group.shutdownGracefully()
            throw error
        }
        running.cancel()
        _ = try? await running.value
        try? await group.shutdownGracefully()
        _ = system("rm -rf '\(directory)'")
    }

    @Test func aHeaderOverTheLimitIsRefused() async throws {
        try await withServer { server, _ in
            let answer = await Client.exchange(
                port: server.port, "GET / HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nX-Big: \(String(repeating: "a", count: 20000))\r\n\r\n")
            #expect(answer.hasPrefix("HTTP/1.1 4"), "\(answer.prefix(80))")
            #expect(!answer.hasPrefix("HTTP/1.1 200"))
        }
    }

    @Test func connectionsPastTheLimitAreClosedAndIdleOnesEnd() async throws {
        try await withServer { server, _ in
            let held = (0..<3).map { _ in Client.open(port: server.port) }
            try await Task.sleep(for: .milliseconds(200))
            let start = ContinuousClock.now
            let refused = await Client.exchange(port: server.port, "GET / HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n\r\n")
            #expect(refused.isEmpty, "\(refused.prefix(80))")
            #expect(ContinuousClock.now - start < .milliseconds(900), "the fourth connection was not closed at once")
            // The held ones sent nothing: the read deadline (1 s) closes them, and room is made.
            let ends = await withTaskGroup(of: Bool.self) { group in
                for fd in held { group.addTask { await Client.readsEndOfFile(fd, within: 4) } }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(ends == [true, true, true])
            try await Task.sleep(for: .milliseconds(200))
            let page = await Client.exchange(port: server.port, "GET / HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nConnection: close\r\n\r\n")
            #expect(page.hasPrefix("HTTP/1.1 200"), "\(page.prefix(80))")
        }
    }

    /// A request head sent a byte at a time (each within the read timeout) is cut off at the head's own
    /// deadline: one slow client cannot hold a connection slot for ever.
    @Test func aHeadThatTricklesInIsCutOffAtItsDeadline() async throws {
        try await withServer({
            $0.requestTimeout = 5
            $0.requestHeadTimeout = 1
        }) { server, _ in
            let fd = Client.open(port: server.port)
            let start = ContinuousClock.now
            var closed = false
            for byte in Array("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8) + Array(repeating: UInt8(ascii: "a"), count: 40) {
                var one = byte
                if send(fd, &one, 1, Int32(MSG_NOSIGNAL)) != 1 {
                    closed = true
                    break
                }
                try await Task.sleep(for: .milliseconds(100))
                if ContinuousClock.now - start > .seconds(4) { break }
            }
            let ended = closed ? true : await Client.readsEndOfFile(fd, within: 2)
            #expect(ended, "a trickling head still held its connection")
            #expect(ContinuousClock.now - start < .seconds(4))
            close(fd)
        }
    }

    /// The page may make only what a person does in it: no file by path, no keys, no links by address,
    /// nothing that turns the connection into something else.
    @Test func theWebSocketRefusesWhatThePageNeverDoes() async throws {
        try await withServer { server, _ in
            let requests = [
                #"{"id":1,"method":"trust","params":{"peer":"bob"}}"#,
                #"{"id":2,"method":"send-file","params":{"peer":"bob","path":"/etc/shadow"}}"#,
                #"{"id":3,"method":"fetch","params":{"id":"ab12","to":"/root/.config/autostart"}}"#,
                #"{"id":4,"method":"connect","params":{"address":"10.0.0.9"}}"#,
                #"{"id":5,"method":"send-file","params":{"peer":"bob","path":"/tmp/x.png","file_token":"t"}}"#,
                #"{"id":6,"method":"send","params":{"text":"hi"}}"#,
            ]
            let answers = await Client.webSocket(port: server.port, token: server.access.token, messages: requests.map { Array($0.utf8) })
            #expect(answers.count == 6, "\(answers)")
            for refused in answers.prefix(4) { #expect(refused.contains(#""ok":false"#) && refused.contains("web socket"), "\(refused)") }
            // (Answered by the handler, which says ok to everything.)
            #expect(answers.suffix(2).sorted() == [#"{"id":5,"ok":true}"#, #"{"id":6,"ok":true}"#], "\(answers)")
        }
    }

    @Test func theWebSocketAnswersARequestAndClosesOnAnOversizedMessage() async throws {
        try await withServer { server, _ in
            let token = server.access.token
            let answers = await Client.webSocket(
                port: server.port, token: token, messages: [Array(#"{"id":7,"method":"status"}"#.utf8), Array(repeating: 0x61, count: 2000)])
            #expect(answers.first == #"{"id":7,"ok":true}"#, "\(answers)")
            // The second (2,000 bytes, over 1,024) closes the connection: a close frame or nothing more.
            #expect(answers.count == 1 || answers[1].hasPrefix("close"), "\(answers)")
        }
    }

    @Test func uploadsAreCheckedForSizeAndSpaceThenHandedOver() async throws {
        try await withServer { server, directory in
            let port = server.port
            let token = server.access.token
            func post(_ query: String, _ body: String, length: Int? = nil) async -> String {
                let header = length.map { "Content-Length: \($0)\r\n" } ?? ""
                return await Client.exchange(
                    port: port, "POST /upload?\(query)&token=\(token) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(header)Connection: close\r\n\r\n\(body)")
            }
            #expect(await post("name=a", "", length: 2000).hasPrefix("HTTP/1.1 413"))
            #expect(await post("name=a", "").hasPrefix("HTTP/1.1 411"))
            #expect(await post("name=..", "abc", length: 3).hasPrefix("HTTP/1.1 400"))
            let ok = await post("name=..%2Fnote.txt&count=2", "0123456789", length: 10)
            #expect(ok.hasPrefix("HTTP/1.1 200"), "\(ok.prefix(200))")
            #expect(ok.contains(#""file_tokens":["#) && ok.contains("/note.txt") && ok.contains(#""size":10"#), "\(ok)")
            #expect(ok.contains(directory + "/uploads/"))
        }
        try await withServer({ $0.minimumFreeAfterUpload = UInt64.max / 4 }) { server, _ in
            let answer = await Client.exchange(
                port: server.port,
                "POST /upload?name=a&token=\(server.access.token) HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: 3\r\n\r\nabc")
            #expect(answer.hasPrefix("HTTP/1.1 507"), "\(answer.prefix(80))")
        }
    }
}

/// Blocking socket clients, run on Dispatch threads (not the cooperative pool the server's tasks use).
enum Client {
    static func open(port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    static func send(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if count <= 0 { return }
            offset += count
        }
    }

    /// Everything read until the peer closes (or 5 s pass).
    static func readAll(_ fd: Int32) -> [UInt8] {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            data += buffer.prefix(count)
        }
        return data
    }

    static func offThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in DispatchQueue.global().async { continuation.resume(returning: work()) } }
    }

    static func exchange(port: Int, _ request: String) async -> String {
        await offThread {
            let fd = open(port: port)
            defer { close(fd) }
            send(fd, Array(request.utf8))
            return String(decoding: readAll(fd), as: UTF8.self)
        }
    }

    static func readsEndOfFile(_ fd: Int32, within seconds: Int) async -> Bool {
        await offThread {
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: 1024)
            let deadline = ContinuousClock.now + .seconds(seconds)
            while ContinuousClock.now < deadline {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count == 0 { return true }
                if count < 0 && errno != EAGAIN && errno != EINTR { return true }
            }
            return false
        }
    }

    /// Upgrades, sends each message as one masked text frame, and returns the text of each frame
    /// received in answer ("close ..." for a close frame), until the server closes or stops answering.
    static func webSocket(port: Int, token: String, messages: [[UInt8]]) async -> [String] {
        await offThread {
            let fd = open(port: port)
            defer { close(fd) }
            send(
                fd,
                Array(
                    ("GET /ws?token=\(token) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8))
            var pending: [UInt8] = []
            func fill(_ count: Int) -> Bool {
                var buffer = [UInt8](repeating: 0, count: 65536)
                while pending.count < count {
                    let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                    if got <= 0 { return false }
                    pending += buffer.prefix(got)
                }
                return true
            }
            // The 101 answer.
            while !String(decoding: pending, as: UTF8.self).contains("\r\n\r\n") { guard fill(pending.count + 1) else { return ["no upgrade"] } }
            let text = String(decoding: pending, as: UTF8.self)
            guard text.hasPrefix("HTTP/1.1 101") else { return ["refused: " + text] }
            let headEnd = text.utf8.count - (text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n").utf8.count)
            pending.removeFirst(headEnd)
            var answers: [String] = []
            for message in messages {
                let mask: [UInt8] = [1, 2, 3, 4]
                var frame: [UInt8] = [0x81]
                if message.count < 126 {
                    frame.append(0x80 | UInt8(message.count))
                } else {
                    frame += [0x80 | 126, UInt8(message.count >> 8), UInt8(message.count & 0xff)]
                }
                frame += mask
                frame += message.enumerated().map { $0.element ^ mask[$0.offset % 4] }
                send(fd, frame)
                guard fill(2) else { return answers }
                let opcode = pending[0] & 0x0f
                var length = Int(pending[1] & 0x7f)
                var header = 2
                if length == 126 {
                    guard fill(4) else { return answers }
                    length = Int(pending[2]) << 8 | Int(pending[3])
                    header = 4
                }
                guard fill(header + length) else { return answers }
                let payload = Array(pending[header..<(header + length)])
                pending.removeFirst(header + length)
                answers.append(opcode == 8 ? "close \(payload.count >= 2 ? Int(payload[0]) << 8 | Int(payload[1]) : 0)" : String(decoding: payload, as: UTF8.self))
                if opcode == 8 { return answers }
            }
            return answers
        }
    }
}
