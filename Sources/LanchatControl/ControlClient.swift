import FoundationEssentials
import Glibc

/// Where the control socket lives.
public enum ControlSocketPath {
    public static let systemPath = "/run/lanchat/lanchatd.sock"

    /// The per-user path, `$XDG_RUNTIME_DIR/lanchat/lanchatd.sock`, if that variable is set.
    public static func userPath(environment: [String: String]) -> String? {
        guard let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty else { return nil }
        return joinPath(runtime, "lanchat/lanchatd.sock")
    }

    /// The daemon's default: the per-user path when `XDG_RUNTIME_DIR` is set, else the system path.
    public static func daemonDefault(environment: [String: String]) -> String {
        userPath(environment: environment) ?? systemPath
    }

    /// The client's choice: `--socket`, then `LANCHAT_SOCKET`, then the per-user socket if it exists,
    /// then the system service's socket.
    public static func clientDefault(explicit: String?, environment: [String: String]) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnv = environment["LANCHAT_SOCKET"], !fromEnv.isEmpty { return fromEnv }
        if let user = userPath(environment: environment), FileManager.default.fileExists(atPath: user) { return user }
        if FileManager.default.fileExists(atPath: systemPath) { return systemPath }
        return userPath(environment: environment) ?? systemPath
    }
}

/// A blocking client for the control socket: what the CLI and scripts' Swift helpers use.
/// It does not link NIO.
public final class ControlClient {
    public static let maximumResponseLength = 16 * 1024 * 1024

    public let path: String
    private var fd: Int32
    private var framer = LineFramer(maximumLineLength: ControlClient.maximumResponseLength)
    private var nextID = 1
    private var timeoutSeconds: Int

    /// Connects, or throws an error that says what to do (start the daemon, fix permissions...).
    public init(path: String, timeoutSeconds: Int = 10) throws(ControlError) {
        self.path = path
        self.fd = try Self.openSocket(path)
        self.timeoutSeconds = timeoutSeconds
        setTimeout(seconds: timeoutSeconds)
    }

    private static func openSocket(_ path: String) throws(ControlError) -> Int32 {
        switch connectUnixSocket(path: path) {
        case .success(let fd):
            return fd
        case .failure(let error):
            switch error.code {
            case ENAMETOOLONG:
                throw ControlError(code: .badSocketPath, message: "socket path is too long: \(path)")
            case ENOENT:
                throw ControlError(
                    code: .daemonNotRunning,
                    message: "lanchatd is not running: no socket at \(path) (start it with `lanchatd` or `systemctl start lanchatd`, or pass --socket)")
            case ECONNREFUSED:
                throw ControlError(code: .daemonNotRunning, message: "lanchatd is not running: \(path) refuses connections (a stale socket left by a daemon that died?)")
            case EACCES, EPERM:
                throw ControlError(code: .permissionDenied, message: "permission denied on \(path): the socket belongs to the daemon's user (or its configured group)")
            default:
                throw ControlError(code: .connectFailed, message: "cannot connect to \(path): \(errnoDescription(error.code))")
            }
        }
    }

    private var detached = false

    deinit { if !detached { close(fd) } }

    /// Hands over the socket after a `stream` / `stream-accept` answer: its descriptor (the caller closes
    /// it) and the bytes already read past the answer.
    public func detach() -> (fd: Int32, buffered: [UInt8]) {
        detached = true
        return (fd, framer.takeBuffered())
    }

    /// Sets the receive timeout (0 = wait forever, for watches).
    public func setTimeout(seconds: Int) {
        timeoutSeconds = seconds
        var tv = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends a request and returns its response, turning an error response into a thrown error.
    ///
    /// The daemon closes a connection that stays idle (`control-idle-timeout`) without running anything
    /// sent after it decided so; a call on such a connection connects again and is sent once more, so a
    /// client that keeps one connection for calls now and then (the interactive mode) goes on working.
    public func call(_ call: ControlCall) throws(ControlError) -> ControlResponse {
        let request = ControlJSON.line(call.request(id: nextID))
        nextID += 1
        if hungUp() { try reconnect() }
        var answer = try exchange(request)
        if answer == nil {
            try reconnect()
            answer = try exchange(request)
        }
        guard let response = answer else { throw ControlError(code: .connectionLost, message: "lanchatd closed the connection") }
        if !response.ok { throw response.error ?? ControlError(code: .failed, message: "the daemon reported a failure without a reason") }
        return response
    }

    /// Sends one request line and reads its answer; `nil` if the daemon had closed the connection without
    /// reading the request (it was idle: the send found the connection closed, or the daemon said so).
    private func exchange(_ request: [UInt8]) throws(ControlError) -> ControlResponse? {
        if let error = write(request) {
            if error == EPIPE || error == ECONNRESET { return nil }
            throw ControlError(code: .connectionLost, message: "lost the connection to lanchatd: \(String(cString: strerror(error)))")
        }
        let response = try readResponse()
        if response.id == nil, response.error?.code == .idle { return nil }
        return response
    }

    /// Whether the daemon has closed this connection (after a line saying why, which is read and dropped).
    private func hungUp() -> Bool {
        var waiting = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&waiting, 1, 0) == 1 else { return false }
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                framer.append(chunk[..<n])
                continue
            }
            if n < 0, errno == EINTR { continue }
            if n < 0, errno == EAGAIN || errno == EWOULDBLOCK { return false }
            while let line = try? framer.nextLine() { ControlTrace.record(line) }
            return true
        }
    }

    private func reconnect() throws(ControlError) {
        let fresh = try Self.openSocket(path)
        close(fd)
        fd = fresh
        framer = LineFramer(maximumLineLength: ControlClient.maximumResponseLength)
        setTimeout(seconds: timeoutSeconds)
    }

    /// Sends raw bytes (tests use this for hostile requests).
    public func send(_ bytes: [UInt8]) throws(ControlError) {
        if let error = write(bytes) {
            throw ControlError(code: .connectionLost, message: "lost the connection to lanchatd: \(String(cString: strerror(error)))")
        }
    }

    /// Writes all of `bytes`; the errno if that failed.
    private func write(_ bytes: [UInt8]) -> Int32? {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += n
        }
        return nil
    }

    /// Reads the next line from the daemon (a response or an event). Returns `nil` at end of stream.
    public func readLine() throws(ControlError) -> [UInt8]? {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            do {
                if let line = try framer.nextLine() {
                    ControlTrace.record(line)
                    return line
                }
            } catch {
                throw ControlError(code: .badResponse, message: "the daemon sent a line longer than \(ControlClient.maximumResponseLength) bytes")
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return nil }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    throw ControlError(code: .timeout, message: "lanchatd did not answer in time")
                }
                throw ControlError(code: .connectionLost, message: "lost the connection to lanchatd: \(String(cString: strerror(errno)))")
            }
            framer.append(chunk[..<n])
        }
    }

    /// Reads and decodes the next line.
    public func readResponse() throws(ControlError) -> ControlResponse {
        guard let line = try readLine() else {
            throw ControlError(code: .connectionLost, message: "lanchatd closed the connection")
        }
        do {
            return try ControlJSON.decoder().decode(ControlResponse.self, from: Data(line))
        } catch {
            throw ControlError(code: .badResponse, message: "the daemon sent something that is not a control API response")
        }
    }
}

/// `LANCHAT_CONTROL_TRACE=FILE`: every line a client reads from the daemon is appended to FILE (the
/// end-to-end tests check each against docs/control-api.schema.json). Off unless set.
enum ControlTrace {
    private static let path: String? = {
        guard let value = getenv("LANCHAT_CONTROL_TRACE") else { return nil }
        let text = String(cString: value)
        return text.isEmpty ? nil : text
    }()

    static func record(_ line: [UInt8]) {
        guard let path else { return }
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let record = line + [0x0a]
        // One write with O_APPEND: lines of concurrent clients do not interleave.
        _ = record.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
