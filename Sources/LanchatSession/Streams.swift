import LanchatCore
import LanchatEngine
import NIOCore

/// A named byte stream to or from a peer (STREAM_* frames): both directions, each with its own end of
/// data, and credit-based backpressure: a side sends only as many bytes as the other granted, and
/// grants more as the program reading them consumes them. A stream does not survive its connection.
public final class ByteStream: Sendable {
    public let id: String
    public let peer: SessionPeer
    public let name: String
    private let node: SessionNode
    let state: StreamState

    init(node: SessionNode, state: StreamState) {
        self.node = node
        self.state = state
        id = state.id.description
        peer = state.peer
        name = state.name.rawValue
    }

    /// Sends bytes; waits while the peer has granted no credit. Throws once the stream is aborted.
    public func write(_ data: ByteBuffer) async throws(SessionError) {
        try await node.streamWrite(state, data)
    }

    /// Says "no more bytes from here"; the peer's reads return `nil` after what was sent.
    public func finish() async {
        await node.streamFinish(state)
    }

    /// The next bytes from the peer, `nil` at its end of data. Throws if the stream was aborted.
    public func read() async throws(SessionError) -> ByteBuffer? {
        try await node.streamRead(state)
    }

    /// Returns once both directions ended (`nil`) or the stream was aborted (why).
    public func closed() async -> String? {
        await node.streamClosed(state)
    }

    /// Ends both directions now; the peer's reads and writes fail with `reason`.
    public func abort(_ reason: String) async {
        await node.streamAbort(state, reason: reason)
    }
}

/// One stream as the program on our side sees it (the engine decides the protocol): bytes that came
/// and are not read yet, whether each direction ended, and the program's waiting calls. Touched only on
/// the node's executor.
// @unchecked: ByteStream (Sendable, in programs' hands) holds it, but reads and writes it only through
// SessionNode's methods, which run on the node actor; Swift cannot isolate a class to one actor
// instance. What would remove it: ByteStream holding only the id, and the node keeping each stream's
// state (its failure included) in its own table until the last ByteStream is gone.
final class StreamState: @unchecked Sendable {
    let id: WireID
    let peer: SessionPeer
    let name: StreamName
    var inbound = CircularBuffer<ByteBuffer>()
    var opened: Bool
    var remoteFinished = false
    var localFinished = false
    /// The engine forgot the stream: both directions ended, or it was aborted (`failure`).
    var ended = false
    var failure: String?
    var reader: CheckedContinuation<Void, Never>?
    var writer: CheckedContinuation<Void, Never>?
    var opener: CheckedContinuation<Void, Never>?
    /// Waiting for both directions to end, or an abort.
    var closers: [CheckedContinuation<Void, Never>] = []

    init(id: WireID, peer: SessionPeer, name: StreamName, opened: Bool) {
        self.id = id
        self.peer = peer
        self.name = name
        self.opened = opened
    }

    func wakeReader() {
        reader?.resume()
        reader = nil
    }

    func wakeWriter() {
        writer?.resume()
        writer = nil
    }

    func wakeAll() {
        wakeReader()
        wakeWriter()
        opener?.resume()
        opener = nil
        for closer in closers { closer.resume() }
        closers = []
    }
}

/// A program waiting for a stream (`acceptStream`).
struct StreamAcceptor {
    var isAlive: @Sendable () -> Bool
    var continuation: CheckedContinuation<ByteStream?, Never>
}

extension SessionNode {
    /// Opens a stream named `name` to `peer`; returns once a program on the peer accepted it.
    public func openStream(_ name: String, to peer: SessionPeer, timeout: Duration = .seconds(30)) async throws(SessionError) -> ByteStream {
        let streamName = try Self.streamName(name)
        let link: Link
        switch await dial(peer.id) {
        case .success(let value): link = value
        case .failure(let error): throw SessionError(.unreachable, "\(peer.name): \(error.message)")
        }
        let (id, actions) = try engine.openStream(streamName, to: peer.id, timeout: Self.milliseconds(timeout), at: time())
        let state = StreamState(id: id, peer: link.peer, name: streamName, opened: false)
        streams[id] = state
        perform(actions)
        while !state.opened && !state.ended {
            await withCheckedContinuation { state.opener = $0 }
        }
        if !state.opened || state.failure != nil { throw SessionError(.streamRefused, state.failure ?? "the stream was closed") }
        return ByteStream(node: self, state: state)
    }

    /// Waits for the next stream named `name` from `from` (nil: any peer that shares a room with us).
    /// An open that arrived up to 10 s before is taken too. `isAlive` is asked before an open is
    /// accepted for this program (it may have gone).
    public func acceptStream(_ name: String, from: PeerID? = nil, isAlive: @escaping @Sendable () -> Bool) async throws(SessionError) -> ByteStream {
        let streamName = try Self.streamName(name)
        // Programs that stopped waiting do not count against the limit of waiting programs.
        forgetGoneStreamAcceptors()
        nextStreamAcceptor += 1
        let acceptor = nextStreamAcceptor
        let actions = try engine.acceptStream(streamName, from: from, acceptor: acceptor)
        let stream: ByteStream? = await withCheckedContinuation { continuation in
            streamAcceptors[acceptor] = StreamAcceptor(isAlive: isAlive, continuation: continuation)
            perform(actions)
        }
        guard let stream else { throw SessionError(.stopped, "lanchatd is stopping") }
        return stream
    }

    private static func streamName(_ name: String) throws(SessionError) -> StreamName {
        guard let streamName = StreamName(name) else {
            throw SessionError(.badRequest, "stream name '\(name.prefix(64))' is not valid: use 1-64 letters, digits, '.', '_' or '-'")
        }
        return streamName
    }

    /// Before the engine sees a STREAM_OPEN: programs that stopped waiting are no longer offered it.
    func forgetGoneStreamAcceptors() {
        for (id, acceptor) in streamAcceptors.sorted(by: { $0.key < $1.key }) where !acceptor.isAlive() {
            streamAcceptors[id] = nil
            engine.cancelStreamAcceptor(id)
            acceptor.continuation.resume(returning: nil)
        }
    }

    /// Performs what the engine said about a stream, for the program's side.
    func streamSignal(_ id: WireID, _ signal: StreamSignal) {
        guard let state = streams[id] else { return }
        switch signal {
        case .opened:
            state.opened = true
            state.opener?.resume()
            state.opener = nil
        case .data(let data):
            state.inbound.append(data)
            state.wakeReader()
        case .credit:
            state.wakeWriter()
        case .remoteFinished:
            state.remoteFinished = true
            state.wakeReader()
        case .ended(let failure):
            streams[id] = nil
            state.ended = true
            state.failure = failure
            state.wakeAll()
        }
    }

    func streamHandedOver(_ acceptor: UInt64, _ accepted: AcceptedStream?) {
        guard let waiting = streamAcceptors.removeValue(forKey: acceptor) else { return }
        guard let accepted else { return waiting.continuation.resume(returning: nil) }
        let state = StreamState(id: accepted.id, peer: accepted.peer, name: accepted.name, opened: true)
        streams[accepted.id] = state
        waiting.continuation.resume(returning: ByteStream(node: self, state: state))
    }

    func streamWrite(_ state: StreamState, _ data: ByteBuffer) async throws(SessionError) {
        var rest = data
        while rest.readableBytes > 0 {
            if let failure = state.failure { throw SessionError(.streamAborted, failure) }
            guard !state.localFinished, !state.ended else { throw SessionError(.streamFinished, "the stream was finished") }
            let (taken, actions) = try engine.streamSend(state.id, &rest)
            perform(actions)
            if taken == 0, rest.readableBytes > 0, !state.ended {
                await withCheckedContinuation { state.writer = $0 }
            }
        }
    }

    func streamFinish(_ state: StreamState) {
        guard !state.localFinished, !state.ended else { return }
        state.localFinished = true
        perform(engine.streamFinish(state.id))
    }

    func streamRead(_ state: StreamState) async throws(SessionError) -> ByteBuffer? {
        while true {
            if let data = state.inbound.popFirst() {
                perform(engine.streamConsumed(state.id, data.readableBytes))
                return data
            }
            if let failure = state.failure { throw SessionError(.streamAborted, failure) }
            if state.remoteFinished || state.ended { return nil }
            await withCheckedContinuation { state.reader = $0 }
        }
    }

    func streamAbort(_ state: StreamState, reason: String) {
        perform(engine.streamAbort(state.id, reason: reason))
    }

    func streamClosed(_ state: StreamState) async -> String? {
        while !state.ended {
            await withCheckedContinuation { state.closers.append($0) }
        }
        return state.failure
    }

    /// The node stops: streams aborted (their peers told, before the connections close), waiting
    /// programs answered.
    func closeStreams() {
        perform(engine.stopStreams())
    }
}
