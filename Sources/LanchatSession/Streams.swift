import LanchatCore
import LanchatEngine
import NIOCore
import Synchronization

/// A named byte stream to or from a peer (STREAM_* frames): both directions, each with its own end of
/// data, and credit-based backpressure: a side sends only as many bytes as the other granted, and
/// grants more as the program reading them consumes them. A stream does not survive its connection.
public final class ByteStream: Sendable {
    public let id: String
    public let peer: SessionPeer
    public let name: String
    private let node: SessionNode
    /// The stream, in the node's table (`SessionNode.streams`): what it holds lives there.
    private let stream: WireID

    init(node: SessionNode, id: WireID, peer: SessionPeer, name: StreamName) {
        self.node = node
        stream = id
        self.id = id.description
        self.peer = peer
        self.name = name.rawValue
    }

    deinit {
        node.streamReleased(stream)
    }

    /// Sends bytes; waits while the peer has granted no credit. Throws once the stream is aborted.
    public func write(_ data: ByteBuffer) async throws(SessionError) {
        try await node.streamWrite(stream, data)
    }

    /// Says "no more bytes from here"; the peer's reads return `nil` after what was sent.
    public func finish() async {
        await node.streamFinish(stream)
    }

    /// The next bytes from the peer, `nil` at its end of data. Throws if the stream was aborted.
    public func read() async throws(SessionError) -> ByteBuffer? {
        try await node.streamRead(stream)
    }

    /// Returns once both directions ended (`nil`) or the stream was aborted (why).
    public func closed() async -> String? {
        await node.streamClosed(stream)
    }

    /// Ends both directions now; the peer's reads and writes fail with `reason`.
    public func abort(_ reason: String) async {
        await node.streamAbort(stream, reason: reason)
    }
}

/// The program's side of a stream; its protocol state (opening, credit, which side finished) is the
/// engine's alone (`StreamTable`). Here: the bytes that came and are not read yet, where the peer's side
/// got (in order with those bytes), and the program's waiting calls. It lives in the node's table
/// (`SessionNode.streams`, so only the node's executor touches it) from the open until the stream ended
/// and no `ByteStream` (nor `openStream`) holds it.
final class StreamState {
    /// How far the peer's side got, as the engine's `.stream` signals told it. (Not the engine's own
    /// state: the driver holds a batch's signals back until earlier writes are on disk, so the engine
    /// may have taken a STREAM_END whose bytes the program has not been handed yet; and the engine
    /// forgets a stream when it ends, while the program may still read what came and why it ended.)
    enum Delivery {
        case flowing
        /// The peer sent all it will send: reads end after what is in `inbound`.
        case remoteFinished
        /// The engine forgot the stream: both directions ended (nil), or it was aborted (why).
        case ended(failure: String?)
    }

    var inbound = CircularBuffer<ByteBuffer>()
    var delivery = Delivery.flowing
    /// A `ByteStream` (or `openStream`, until it makes one) holds it: it stays after the stream ended.
    var held = true
    var reader: CheckedContinuation<Void, Never>?
    var writer: CheckedContinuation<Void, Never>?
    /// `openStream` waiting for the peer's answer: true once it accepted, false if the stream ended first.
    var opener: CheckedContinuation<Bool, Never>?
    /// Waiting for both directions to end, or an abort.
    var closers: [CheckedContinuation<Void, Never>] = []

    var ended: Bool { if case .ended = delivery { true } else { false } }

    /// Why the stream was aborted (nil: it was not, or not yet).
    var failure: String? { if case .ended(let failure) = delivery { failure } else { nil } }

    func wakeReader() {
        reader?.resume()
        reader = nil
    }

    func wakeWriter() {
        writer?.resume()
        writer = nil
    }

    func wakeOpener(opened: Bool) {
        opener?.resume(returning: opened)
        opener = nil
    }

    func wakeAll() {
        wakeReader()
        wakeWriter()
        wakeOpener(opened: false)
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
        let state = StreamState()
        streams[id] = state
        perform(actions)
        // (Nothing can end it before this waits: the engine's answer comes with a later frame or timer.)
        let opened = await withCheckedContinuation { state.opener = $0 }
        if !opened || state.failure != nil {
            streams[id] = nil
            throw SessionError(.streamRefused, state.failure ?? "the stream was closed")
        }
        return ByteStream(node: self, id: id, peer: link.peer, name: streamName)
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
        guard let stream else { throw SessionError(.stopped, "the session is stopping") }
        return stream
    }

    private static func streamName(_ name: String) throws(SessionError) -> StreamName {
        guard let streamName = StreamName(name) else {
            throw SessionError(.badRequest, "stream name '\(name.prefix(64))' is not valid: use 1-64 letters, digits, '.', '_' or '-'")
        }
        return streamName
    }

    /// Before the engine sees a STREAM_OPEN: programs that stopped waiting are no longer offered it.
    /// Programs that stopped waiting for a stream (their `isAlive` says no) hear nil now, not when the next
    /// stream comes (LanchatKit: a task that waited was cancelled).
    public func letGoneStreamAcceptorsGo() { forgetGoneStreamAcceptors() }

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
            state.wakeOpener(opened: true)
        case .data(let data):
            state.inbound.append(data)
            state.wakeReader()
        case .credit:
            state.wakeWriter()
        case .remoteFinished:
            state.delivery = .remoteFinished
            state.wakeReader()
        case .ended(let failure):
            if !state.held { streams[id] = nil }
            state.delivery = .ended(failure: failure)
            state.wakeAll()
        }
    }

    func streamHandedOver(_ acceptor: UInt64, _ accepted: AcceptedStream?) {
        guard let waiting = streamAcceptors.removeValue(forKey: acceptor) else { return }
        guard let accepted else { return waiting.continuation.resume(returning: nil) }
        streams[accepted.id] = StreamState()
        waiting.continuation.resume(returning: ByteStream(node: self, id: accepted.id, peer: accepted.peer, name: accepted.name))
    }

    /// A stream's record (a stand-in, ended, if it is gone: only the node's stop forgets one a
    /// `ByteStream` still holds).
    private func streamRecord(_ id: WireID) -> StreamState {
        if let state = streams[id] { return state }
        let gone = StreamState()
        gone.delivery = .ended(failure: nil)
        return gone
    }

    func streamWrite(_ id: WireID, _ data: ByteBuffer) async throws(SessionError) {
        let state = streamRecord(id)
        var rest = data
        while rest.readableBytes > 0 {
            if let failure = state.failure { throw SessionError(.streamAborted, failure) }
            // (Finished by the program: the engine says so.)
            guard !state.ended else { throw SessionError(.streamFinished, "the stream was finished") }
            let (taken, actions) = try engine.streamSend(id, &rest)
            perform(actions)
            if taken == 0, rest.readableBytes > 0, !state.ended {
                await withCheckedContinuation { state.writer = $0 }
            }
        }
    }

    func streamFinish(_ id: WireID) {
        guard !streamRecord(id).ended else { return }
        perform(engine.streamFinish(id))  // (nothing if it was finished already)
    }

    func streamRead(_ id: WireID) async throws(SessionError) -> ByteBuffer? {
        let state = streamRecord(id)
        while true {
            if let data = state.inbound.popFirst() {
                perform(engine.streamConsumed(id, data.readableBytes))
                return data
            }
            switch state.delivery {
            case .flowing: break
            case .remoteFinished, .ended(failure: nil): return nil
            case .ended(let failure?): throw SessionError(.streamAborted, failure)
            }
            await withCheckedContinuation { state.reader = $0 }
        }
    }

    func streamAbort(_ id: WireID, reason: String) {
        perform(engine.streamAbort(id, reason: reason))
    }

    func streamClosed(_ id: WireID) async -> String? {
        let state = streamRecord(id)
        while !state.ended {
            await withCheckedContinuation { state.closers.append($0) }
        }
        return state.failure
    }

    /// The last `ByteStream` of a stream is gone (its deinit, on any thread): the node forgets the
    /// stream's record once it ended (now, or at its end). Not after the node stopped: its event loop
    /// may be shut down, and nothing is left to forget.
    nonisolated func streamReleased(_ id: WireID) {
        guard !streamsClosed.load(ordering: .acquiring) else { return }
        if eventLoop.inEventLoop {
            assumeIsolated { $0.forgetReleasedStream(id) }
        } else {
            eventLoop.execute { self.assumeIsolated { $0.forgetReleasedStream(id) } }
        }
    }

    private func forgetReleasedStream(_ id: WireID) {
        guard let state = streams[id] else { return }
        if state.ended { streams[id] = nil } else { state.held = false }
    }

    /// How many streams' records the node holds (live streams, and ended ones a program still holds).
    var streamRecords: Int { streams.count }

    /// The node stops: streams aborted (their peers told, before the connections close), waiting
    /// programs answered.
    func closeStreams() {
        perform(engine.stopStreams())
        streamsClosed.store(true, ordering: .releasing)
    }
}
