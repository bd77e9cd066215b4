internal import LanchatCore
internal import LanchatEngine
internal import LanchatSession
internal import NIOCore
internal import Synchronization

/// A named byte stream with a peer, both ways (Multipeer Connectivity's `startStream` and `didReceive
/// stream`): each side writes and finishes its own direction; reading grants the writer more credit, so a
/// writer waits while the reader is behind. Iterate it for the peer's bytes. A stream does not outlive
/// its connection.
public final class PeerStream: Sendable {
    public let name: String
    public let peer: Peer
    private let stream: ByteStream
    private let lifetime: Lifetime

    init(_ stream: ByteStream, lifetime: Lifetime) {
        self.stream = stream
        self.lifetime = lifetime
        name = stream.name
        peer = Peer(id: stream.peer.id, displayName: stream.peer.name)
    }

    /// Sends bytes; waits while the peer has granted no credit.
    public func write(_ bytes: [UInt8]) async throws(LanchatError) {
        do { try await stream.write(ByteBuffer(bytes: bytes)) } catch { throw LanchatError(error) }
    }

    /// No more bytes from this side: the peer's reading ends after what was sent.
    public func finish() async { await stream.finish() }

    /// The next bytes from the peer, nil at its end.
    public func read() async throws(LanchatError) -> [UInt8]? {
        do { return try await stream.read().map { Array($0.readableBytesView) } } catch { throw LanchatError(error) }
    }

    /// Ends both directions now; the peer's reads and writes fail with `reason`.
    public func abort(_ reason: String) async { await stream.abort(reason) }

    /// Returns once both directions ended (nil) or the stream was aborted (why).
    public func closed() async -> String? { await stream.closed() }
}

extension PeerStream: AsyncSequence {
    public typealias Element = [UInt8]
    public typealias Failure = LanchatError

    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: PeerStream

        public mutating func next() async throws(LanchatError) -> [UInt8]? { try await stream.read() }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(LanchatError) -> [UInt8]? { try await stream.read() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: self) }
}

extension Session {
    /// Opens a stream named `name` (1-64 of `A-Za-z0-9._-`) to `peer`, a member of one of the session's
    /// groups; returns once a program on the peer accepted it (lanchatd: `lanchat stream-accept`).
    public func openStream(named name: String, to peer: Peer, timeout: Duration = .seconds(30)) async throws(LanchatError) -> PeerStream {
        try checkOpen()
        let id = try peer.checkedID()
        do {
            return PeerStream(try await node.openStream(name, to: SessionPeer(id: id, name: peer.displayName), timeout: timeout), lifetime: lifetime)
        } catch {
            throw LanchatError(error)
        }
    }

    /// Waits for the next stream named `name` from `peer` (nil: any member of the session's groups). An
    /// open that came up to 10 s before is taken too. A cancelled task stops waiting (`cancelled`).
    public func acceptStream(named name: String, from peer: Peer? = nil) async throws(LanchatError) -> PeerStream {
        try checkOpen()
        let from = try peer?.checkedID()
        let waiting = Atomic<Bool>(true)
        let node = self.node
        do {
            let stream = try await withTaskCancellationHandler {
                try await node.acceptStream(name, from: from, isAlive: { waiting.load(ordering: .acquiring) })
            } onCancel: {
                waiting.store(false, ordering: .releasing)
                // (Unstructured: the cancel handler is synchronous; the node lets the waiter go at once.)
                Task { await node.letGoneStreamAcceptorsGo() }
            }
            return PeerStream(stream, lifetime: lifetime)
        } catch {
            if Task.isCancelled { throw LanchatError(.cancelled, "stopped waiting for a stream") }
            throw (error as? SessionError).map(LanchatError.init) ?? LanchatError(.other, "\(error)")
        }
    }
}
