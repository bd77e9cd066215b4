import Dispatch
import Glibc
import LanchatControl
import Logging
import ServiceLifecycle
import Synchronization

/// Files handed over by clients (`FilePassing`), by token, until `send-file` takes them (at most 64,
/// each for at most 60 s).
final class PassedFiles: Sendable {
    private let entries = Mutex<[String: (fd: Int32, at: ContinuousClock.Instant)]>([:])
    static let limit = 64

    /// Keeps `fd` under `token`; false (and the caller closes it) when full or the token is taken.
    func put(_ token: String, _ fd: Int32) -> Bool {
        entries.withLock { entries in
            let now = ContinuousClock.now
            for (key, entry) in entries where now - entry.at > .seconds(60) {
                close(entry.fd)
                entries[key] = nil
            }
            guard entries.count < Self.limit, entries[token] == nil else { return false }
            entries[token] = (fd, now)
            return true
        }
    }

    func take(_ token: String) -> Int32? {
        entries.withLock { $0.removeValue(forKey: token)?.fd }
    }

    func closeAll() {
        entries.withLock { entries in
            for entry in entries.values { close(entry.fd) }
            entries = [:]
        }
    }
}

/// Takes file descriptors from clients on `<control socket>.files` (see `FilePassing`): one message
/// per connection, a token with one regular file's descriptor as SCM_RIGHTS. Anything else (no
/// descriptor, several, not a regular file, a bad token) is refused with a reason, and every
/// descriptor that came along is closed.
final class FilePassingServer: Service {
    private let path: String
    private let fd: Int32
    private let files: PassedFiles
    private let logger: Logger

    init(controlSocket: String, group: gid_t?, files: PassedFiles, logger: Logger) throws(ControlSocket.SetupError) {
        path = FilePassing.socketPath(forControlSocket: controlSocket)
        self.files = files
        self.logger = logger
        try ControlSocket.prepare(path: path, group: group)
        let fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ControlSocket.SetupError(description: "cannot create \(path): \(String(cString: strerror(errno)))") }
        guard var address = unixSocketAddress(path) else {
            close(fd)
            throw ControlSocket.SetupError(description: "socket path is too long: \(path)")
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            let text = String(cString: strerror(errno))
            close(fd)
            throw ControlSocket.SetupError(description: "cannot listen on \(path): \(text)")
        }
        self.fd = fd
        try ControlSocket.restrict(path: path, group: group)
    }

    func run() async throws {
        let listening = fd
        let files = files
        let logger = logger
        DispatchQueue(label: "lanchat.file-passing").async {
            while true {
                let connection = accept(listening, nil, nil)
                if connection < 0 {
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    return  // the socket was shut down
                }
                _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
                Self.serve(connection, files: files, logger: logger)
                close(connection)
            }
        }
        try? await gracefulShutdown()
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        unlink(path)
        files.closeAll()
    }

    private static func serve(_ connection: Int32, files: PassedFiles, logger: Logger) {
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var payload = [UInt8](repeating: 0, count: 256)
        // Room for several descriptors, so that a message with more than one is seen (and refused).
        var control = [UInt8](repeating: 0, count: MemoryLayout<cmsghdr>.size + 8 * MemoryLayout<Int32>.size)
        var received: [Int32] = []
        var truncated = false
        var controlLength = 0
        let count = FilePassing.withMessage(payload: &payload, control: &control) { message in
            let n = recvmsg(connection, &message, Int32(MSG_CMSG_CLOEXEC))
            truncated = message.msg_flags & Int32(MSG_CTRUNC) != 0 || message.msg_flags & Int32(MSG_TRUNC) != 0
            controlLength = n >= 0 ? message.msg_controllen : 0
            return n
        }
        // Walk the control messages (CMSG_FIRSTHDR / CMSG_NXTHDR by hand): every descriptor that came.
        control.withUnsafeBytes { controlBytes in
            var offset = 0
            let headerSize = MemoryLayout<cmsghdr>.size
            while offset + headerSize <= controlLength {
                let header = controlBytes.loadUnaligned(fromByteOffset: offset, as: cmsghdr.self)
                guard header.cmsg_len >= headerSize, offset + header.cmsg_len <= controlLength else { break }
                if header.cmsg_level == SOL_SOCKET, header.cmsg_type == Int32(SCM_RIGHTS) {
                    let descriptors = (header.cmsg_len - headerSize) / MemoryLayout<Int32>.size
                    for index in 0..<descriptors {
                        received.append(controlBytes.loadUnaligned(fromByteOffset: offset + headerSize + index * 4, as: Int32.self))
                    }
                }
                offset += (header.cmsg_len + 7) & ~7
            }
        }
        func answer(_ text: String) {
            _ = Array(text.utf8).withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        func refuse(_ text: String) {
            for descriptor in received { close(descriptor) }
            logger.notice("refused a passed file", metadata: ["reason": "\(text)"])
            answer("error: \(text)")
        }
        guard count > 0 else { return refuse("nothing was sent") }
        guard !truncated, received.count == 1 else { return refuse("send exactly one file descriptor with a token") }
        let token = Array(payload[0..<count])
        guard FilePassing.isToken(token) else { return refuse("the token must be 32 lowercase hex characters") }
        var info = stat()
        guard fstat(received[0], &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return refuse("not a regular file") }
        let accmode = fcntl(received[0], F_GETFL) & O_ACCMODE
        guard accmode == O_RDONLY || accmode == O_RDWR else { return refuse("the file is not open for reading") }
        guard files.put(String(decoding: token, as: UTF8.self), received[0]) else { return refuse("too many files waiting, or the token is in use") }
        answer("ok")
    }
}
