internal import LanchatCore
internal import LanchatEngine
internal import LanchatSession
internal import Synchronization

/// A file on its way to or from a peer (Multipeer Connectivity's resources): as `Session.transfers`
/// reports it, and as `Resource.progress()` reads it. Each is checked with SHA-256 before it is placed.
public struct Transfer: Sendable, Equatable {
    public enum Direction: String, Sendable { case incoming, outgoing }

    public enum State: String, Sendable {
        /// Sender: offered, not accepted yet.
        case offered
        case active
        /// Sender: the connection dropped; it resumes when the peer is back.
        case waiting
        /// Receiver: the connection dropped; the partial file is kept until the sender offers it again.
        case interrupted
        /// Whole, its SHA-256 checked, placed (`path`).
        case complete
        case refused, failed, cancelled

        public var ended: Bool { [.complete, .refused, .failed, .cancelled].contains(self) }
    }

    /// 32 hex characters.
    public let id: String
    public let direction: Direction
    public let peer: Peer
    /// The name offered (incoming: the safe name the file gets).
    public let name: String
    public let size: UInt64
    public let done: UInt64
    public let bytesPerSecond: Double
    public let state: State
    /// Incoming: where the file was placed; outgoing: the file sent.
    public let path: String?
    public let error: String?

    /// Done, from 0 to 1 (`Progress.fractionCompleted`).
    public var fractionCompleted: Double { size == 0 ? (state == .complete ? 1 : 0) : Double(done) / Double(size) }

    init(_ info: TransferInfo) {
        id = info.id.description
        direction = info.direction == .incoming ? .incoming : .outgoing
        peer = Peer(id: info.peer.id, displayName: info.peer.name)
        name = info.name
        size = info.size
        done = info.done
        bytesPerSecond = info.rate
        state = State(rawValue: info.state.rawValue) ?? .failed
        path = info.path
        error = info.error
    }
}

/// A resource this session sends: follow it, wait for its end, or cancel it (Multipeer Connectivity's
/// `sendResource` returns a `Progress` and calls a completion handler).
public struct Resource: Sendable {
    /// The transfer's id (as in `Session.transfers`).
    public let id: String
    public let peer: Peer
    let progressHandle: ResourceProgress
    let waiters: TransferWaiters
    let lifetime: Lifetime

    /// The transfer now.
    public func progress() async -> Transfer? {
        await progressHandle.snapshot().map(Transfer.init)
    }

    /// Waits until the peer has the whole file, its SHA-256 checked; throws if it was refused, failed or
    /// was cancelled, or the session closed first. A transfer cut by a lost connection waits for the peer
    /// to be back (it resumes where it stopped); a cancelled task stops waiting (`cancelled`), and the
    /// transfer goes on.
    @discardableResult
    public func finished() async throws(LanchatError) -> Transfer {
        let ended = await waiters.wait(for: id) { await progress() }
        guard let ended else {
            if Task.isCancelled { throw LanchatError(.cancelled, "stopped waiting for the transfer (it goes on)") }
            throw LanchatError(.closed, "the session closed before the transfer ended")
        }
        switch ended.state {
        case .complete: return ended
        case .refused: throw LanchatError(.refused, ended.error ?? "\(peer) refused the file")
        case .cancelled: throw LanchatError(.cancelled, ended.error ?? "the transfer was cancelled")
        default: throw LanchatError(.transferFailed, ended.error ?? "the transfer failed")
        }
    }

    /// Ends it on both sides (the receiver removes its partial file).
    public func cancel() async throws(LanchatError) {
        do { try await progressHandle.cancel() } catch { throw LanchatError(error) }
    }
}

/// The calls waiting for transfers to end, by transfer id; the session's event pump resumes them.
final class TransferWaiters: Sendable {
    private struct State {
        var closed = false
        var next: UInt64 = 0
        /// By transfer id, then by waiter number.
        var byID: [String: [UInt64: CheckedContinuation<Transfer?, Never>]] = [:]
    }

    private let waiting = Mutex(State())

    /// Waits for the end of `id`; `now` reads the transfer once the wait is registered, for one that ended
    /// before. Nil: the session closed, or the waiting task was cancelled.
    func wait(for id: String, now: @escaping @Sendable () async -> Transfer?) async -> Transfer? {
        let number = waiting.withLock { state in
            state.next += 1
            return state.next
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let refused = waiting.withLock { state in
                    guard !state.closed, !Task.isCancelled else { return true }
                    state.byID[id, default: [:]][number] = continuation
                    return false
                }
                if refused { return continuation.resume(returning: nil) }
                // (Unstructured: the read of the transfer's state goes to the node; it ends at once.)
                Task {
                    if let transfer = await now(), transfer.state.ended { self.resume(id, with: transfer) }
                }
            }
        } onCancel: {
            let continuation = waiting.withLock { $0.byID[id]?.removeValue(forKey: number) }
            continuation?.resume(returning: nil)
        }
    }

    func resume(_ id: String, with transfer: Transfer) {
        let continuations = waiting.withLock { $0.byID.removeValue(forKey: id) } ?? [:]
        for continuation in continuations.values { continuation.resume(returning: transfer) }
    }

    func closeAll() {
        let all = waiting.withLock { state in
            state.closed = true
            defer { state.byID = [:] }
            return state.byID.values.flatMap(\.values)
        }
        for continuation in all { continuation.resume(returning: nil) }
    }
}

extension Session {
    /// Sends the file at `path` to `peer`, who must share a group with this session (or be invited into
    /// one first). Returns once it is offered; `Resource.finished()` waits for the end. The receiver places
    /// it in its download directory, after checking its SHA-256; a transfer cut by a lost connection
    /// resumes when the peer is back.
    public func sendResource(at path: String, to peer: Peer) async throws(LanchatError) -> Resource {
        try checkOpen()
        let id = try peer.checkedID()
        do {
            let progress = try await node.sendResource(at: path, to: SessionPeer(id: id, name: peer.displayName))
            return Resource(id: progress.id.description, peer: peer, progressHandle: progress, waiters: transferWaiters, lifetime: lifetime)
        } catch {
            throw LanchatError(error)
        }
    }

    /// Every transfer of this session now, incoming and outgoing (the last 100 ended ones included).
    public var currentTransfers: [Transfer] {
        get async { await node.transfers.map(Transfer.init) }
    }
}
