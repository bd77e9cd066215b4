import Foundation
import Glibc
import LanchatControl
import Testing

/// A stand-in daemon on a Unix socket: each accepted connection is handled by the next script, in order.
private final class FakeDaemon: @unchecked Sendable {
    let path: String
    private let listener: Int32
    private let done = DispatchSemaphore(value: 0)
    /// The request lines the daemon read, per connection.
    private(set) var requests: [[String]] = []

    init(_ scripts: [@Sendable (FakeDaemon, Int32) -> Void]) throws {
        path = NSTemporaryDirectory() + "lanchat-client-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard var address = unixSocketAddress(path) else { throw POSIXError(.ENAMETOOLONG) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(listener, 8) == 0 else { throw POSIXError(.EADDRINUSE) }
        Thread { [self] in
            for script in scripts {
                let fd = accept(listener, nil, nil)
                requests.append([])
                script(self, fd)
            }
            done.signal()
        }.start()
    }

    deinit {
        close(listener)
        unlink(path)
    }

    /// Reads one request line from `fd` (and records it); nil at end of stream.
    func readRequest(_ fd: Int32) -> String? {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1 {
            if byte == 0x0a {
                let text = String(decoding: line, as: UTF8.self)
                requests[requests.count - 1].append(text)
                return text
            }
            line.append(byte)
        }
        return nil
    }

    func write(_ text: String, to fd: Int32) {
        let bytes = Array((text + "\n").utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    /// Answers a request line with success, echoing its id.
    func answer(_ request: String, on fd: Int32) {
        let id = (try? JSONSerialization.jsonObject(with: Data(request.utf8)) as? [String: Any])?["id"] as? Int ?? 0
        write("{\"id\":\(id),\"ok\":true}", to: fd)
    }

    /// Waits until every script ran.
    func finished() -> Bool { done.wait(timeout: .now() + 10) == .success }

    /// Whether a client connected beyond the scripts.
    var anotherConnectionWaiting: Bool {
        var waiting = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        return poll(&waiting, 1, 200) == 1
    }

    static let idleLine = #"{"ok":false,"error":{"code":"idle","message":"closing this connection: no request in 60 s"}}"#
}

@Suite struct ControlClientTests {
    @Test func aCallOnAConnectionTheDaemonClosedWhileIdleConnectsAgain() throws {
        let closed = DispatchSemaphore(value: 0)
        let daemon = try FakeDaemon([
            { daemon, fd in
                daemon.write(FakeDaemon.idleLine, to: fd)
                close(fd)
                closed.signal()
            },
            { daemon, fd in
                if let request = daemon.readRequest(fd) { daemon.answer(request, on: fd) }
                close(fd)
            },
        ])
        let client = try ControlClient(path: daemon.path, timeoutSeconds: 5)
        #expect(closed.wait(timeout: .now() + 5) == .success)
        #expect(try client.call(.status).ok)
        #expect(daemon.finished())
        #expect(daemon.requests.map(\.count) == [0, 1])
    }

    @Test func aRequestTheDaemonDidNotRunBecauseItWasIdleIsSentAgain() throws {
        let daemon = try FakeDaemon([
            { daemon, fd in
                // The request arrived as the daemon decided to close: it says idle instead of answering.
                _ = daemon.readRequest(fd)
                daemon.write(FakeDaemon.idleLine, to: fd)
                close(fd)
            },
            { daemon, fd in
                if let request = daemon.readRequest(fd) { daemon.answer(request, on: fd) }
                close(fd)
            },
        ])
        let client = try ControlClient(path: daemon.path, timeoutSeconds: 5)
        #expect(try client.call(.send(.init(text: "once", room: "lab"))).ok)
        #expect(daemon.finished())
        #expect(daemon.requests.count == 2 && daemon.requests[0] == daemon.requests[1])
    }

    @Test func aConnectionLostAfterTheRequestIsNotRetried() throws {
        // The daemon may have run it (a `send` stored): sending it again could repeat it.
        let daemon = try FakeDaemon([
            { daemon, fd in
                _ = daemon.readRequest(fd)
                close(fd)
            }
        ])
        let client = try ControlClient(path: daemon.path, timeoutSeconds: 5)
        #expect(throws: ControlError(code: .connectionLost, message: "lanchatd closed the connection")) {
            try client.call(.send(.init(text: "once", room: "lab")))
        }
        #expect(daemon.finished())
        #expect(!daemon.anotherConnectionWaiting)
    }
}
