import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import LanchatControl
import Synchronization

struct StreamCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stream",
        abstract: "Pipe bytes to a peer through a named stream, like netcat over the session.",
        discussion: """
            `lanchat stream PEER NAME` sends stdin and writes what comes back to stdout; on the peer,
            `lanchat stream --accept NAME` takes it the same way. Each side ends its direction at the end
            of its stdin (a terminal's at once when the other side's data ended); a side exits once both
            directions ended (0) or the stream broke (1).
            Example: `tar c dir | lanchat stream h2 backup` and, on h2, `lanchat stream --accept backup --from h1 | tar x`
            (without --from, any member of a room you share may be the one whose stream is taken).
            A terminal on stderr shows bytes sent and received.
            """)

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Wait for a stream named NAME from a peer instead of opening one.") var accept = false
    @Option(help: "With --accept: take the stream only from this peer (name or id prefix), not from any member.") var from: String?
    @Flag(help: "Print a JSON summary on stderr at the end.") var json = false
    @Argument(help: "PEER NAME, or with --accept: NAME.") var arguments: [String]

    func validate() throws {
        guard arguments.count == (accept ? 1 : 2) else {
            throw ValidationError(accept ? "usage: lanchat stream --accept NAME [--from PEER]" : "usage: lanchat stream PEER NAME")
        }
        guard accept || from == nil else { throw ValidationError("--from goes with --accept (a stream you open names its peer already)") }
    }

    /// What this command asks the daemon.
    var call: ControlCall { accept ? .streamAccept(name: arguments[0], from: from) : .stream(peer: arguments[0], name: arguments[1]) }

    func run() throws {
        // A reader that goes away is reported (and the peer told), not a silent SIGPIPE death.
        signal(SIGPIPE, SIG_IGN)
        let client = try global.connect(timeoutSeconds: 60)
        client.setTimeout(seconds: 0)
        let response: ControlResponse
        do { response = try client.call(call) } catch { fail(error.message) }
        guard let entry = response.stream else { fail("the daemon sent no stream") }
        let (fd, buffered) = client.detach()
        let progress = StreamProgress(entry: entry, terminal: isatty(2) == 1 && !json)
        let socket = PipeWriter(fd: fd)
        // stdin -> daemon, on its own thread; the end of stdin ends our direction.
        let stdinDone = DispatchSemaphore(value: 0)
        startThread {
            defer { stdinDone.signal() }
            var buffer = [UInt8](repeating: 0, count: 256 * 1024)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
                if n < 0, errno == EINTR { continue }
                if n <= 0 {
                    socket.end(n == 0 ? nil : "cannot read stdin: \(String(cString: strerror(errno)))")
                    return
                }
                guard socket.data(StreamPipe.headerBytes(type: 0, length: n) + buffer[0..<n]) else { return }
                progress.sent(n)
            }
        }
        // daemon -> stdout.
        var decoder = StreamPipe.Decoder()
        decoder.append(buffered)
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        var outcome: String??  // nil: still open; .some(nil): clean end; .some(text): aborted
        reading: while true {
            do {
                while let frame = try decoder.next() {
                    switch frame {
                    case .data(let bytes):
                        guard writeAll(1, bytes) else {
                            socket.end("the reading program stopped (stdout: \(String(cString: strerror(errno))))")
                            outcome = .some("cannot write stdout")
                            break reading
                        }
                        progress.received(bytes.count)
                    case .end(let reason):
                        outcome = .some(reason)
                        break reading
                    }
                }
            } catch {
                outcome = .some("the daemon sent a bad frame: \(error)")
                break
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            decoder.append(chunk[0..<n])
        }
        if case .some(nil) = outcome {
            // The peer's data ended. Ours ends with stdin; a terminal's stdin is not waited for (the
            // person is reading, not typing: `lanchat stream --accept backup > backup.tar`).
            if isatty(0) == 1 {
                socket.end(nil)
            } else {
                outcome = Self.waitForStdin(stdinDone, fd: fd, decoder: &decoder)
            }
        }
        progress.finish(outcome: outcome, json: json)
        close(fd)
        switch outcome {
        case .some(nil): Glibc.exit(0)
        case .some(let reason?): fail("stream '\(printable(entry.name))' with \(printable(entry.peer)) broke: \(printable(reason))")
        case nil: fail("lanchatd closed the stream (it stopped?)")
        }
    }
}

/// The socket's sending side, shared by the stdin thread and the main thread: whole frames only, and
/// nothing after the end frame. Sends and the end are taken in turn under `lock`, a TimedLock, not a
/// Mutex, because `end` needs a lock that gives up after a while (`lock(within:)`): the stdin thread may
/// hold it in a send the peer never lets finish. (`ended` is read and set under it; an atomic so that the
/// class is Sendable as checked.)
private final class PipeWriter: Sendable {
    private let lock = TimedLock()
    private let fd: Int32
    private let ended = Atomic<Bool>(false)

    init(fd: Int32) { self.fd = fd }

    func data(_ frame: [UInt8]) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return !ended.load(ordering: .relaxed) && sendAll(fd, frame)
    }

    func end(_ reason: String?) {
        // The stdin thread may be blocked in a send (the peer grants no more): do not wait for it long.
        guard lock.lock(within: 2) else { return }
        defer { lock.unlock() }
        guard !ended.load(ordering: .relaxed) else { return }
        ended.store(true, ordering: .relaxed)
        _ = sendAll(fd, StreamPipe.encode(.end(reason)))
    }
}

extension StreamCommand {
    /// After the peer's clean end: waits until stdin is sent, unless the stream breaks meanwhile (a
    /// second end frame, with a reason) or the daemon goes away.
    static func waitForStdin(_ done: DispatchSemaphore, fd: Int32, decoder: inout StreamPipe.Decoder) -> String?? {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while done.wait(timeout: .now()) != .success {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 200) > 0 else { continue }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { return nil }
            decoder.append(chunk[0..<n])
            while case .end(let reason?)? = try? decoder.next() { return .some(reason) }
        }
        return .some(nil)
    }
}

private func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n < 0, errno == EINTR { continue }
        guard n > 0 else { return false }
        offset += n
    }
    return true
}

private func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR { continue }
        guard n > 0 else { return false }
        offset += n
    }
    return true
}

/// Bytes each way; on a terminal (stderr) a line updated twice a second.
private final class StreamProgress: Sendable {
    private struct Counts {
        var sentBytes = 0
        var receivedBytes = 0
        var lastShown = Date.distantPast
    }

    private let counts = Mutex(Counts())
    private let entry: StreamEntry
    private let terminal: Bool
    private let started = Date()

    init(entry: StreamEntry, terminal: Bool) {
        self.entry = entry
        self.terminal = terminal
        if terminal {
            StandardStream.error.write(Data("stream '\(printable(entry.name))' with \(printable(entry.peer)) open\n".utf8))
        }
    }

    func sent(_ count: Int) { update { $0.sentBytes += count } }
    func received(_ count: Int) { update { $0.receivedBytes += count } }

    private func update(_ change: (inout Counts) -> Void) {
        let line = counts.withLock { counts -> String? in
            change(&counts)
            let now = Date()
            let show = terminal && now.timeIntervalSince(counts.lastShown) >= 0.5
            if show { counts.lastShown = now }
            return show ? self.line(counts) : nil
        }
        if let line { StandardStream.error.write(Data(("\r\u{1b}[K" + line).utf8)) }
    }

    private func line(_ counts: Counts) -> String {
        let seconds = max(0.001, Date().timeIntervalSince(started))
        let rate = Double(counts.sentBytes + counts.receivedBytes) / seconds / 1e6
        return
            "sent \(Format.decimal(Double(counts.sentBytes) / 1e6, places: 1)) MB, received \(Format.decimal(Double(counts.receivedBytes) / 1e6, places: 1)) MB, \(Format.decimal(rate, places: 1)) MB/s"
    }

    func finish(outcome: String??, json: Bool) {
        counts.withLock { counts in
            if terminal { StandardStream.error.write(Data(("\r\u{1b}[K" + line(counts) + "\n").utf8)) }
            if json {
                struct Summary: Encodable {
                    var id, peer, name, state: String
                    var sent, received: Int
                    var seconds: Double
                    var error: String?
                }
                let state: String
                let error: String?
                switch outcome {
                case .some(nil): (state, error) = ("finished", nil)
                case .some(let reason?): (state, error) = ("aborted", reason)
                case nil: (state, error) = ("lost", "lanchatd closed the stream")
                }
                let summary = Summary(
                    id: entry.id, peer: entry.peer, name: entry.name, state: state, sent: counts.sentBytes,
                    received: counts.receivedBytes, seconds: Date().timeIntervalSince(started), error: error)
                StandardStream.error.write(Data(ControlJSON.line(summary)))
            }
        }
    }
}
