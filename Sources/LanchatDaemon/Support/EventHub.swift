import LanchatControl
import Synchronization

/// Fans daemon events out to every `watch` client. Each subscriber has a bounded buffer; a client that
/// does not read loses the oldest events rather than growing the daemon's memory.
public final class EventHub: Sendable {
    private struct State {
        var nextID = 0
        var subscribers: [Int: AsyncStream<ControlEvent>.Continuation] = [:]
    }

    private let state = Mutex(State())
    private let bufferSize: Int

    public init(bufferSize: Int) {
        self.bufferSize = bufferSize
    }

    /// A stream of events from now on; it ends when the consumer stops iterating.
    public func subscribe() -> AsyncStream<ControlEvent> {
        let (stream, continuation) = AsyncStream<ControlEvent>.makeStream(bufferingPolicy: .bufferingNewest(bufferSize))
        let id = state.withLock { state in
            state.nextID += 1
            state.subscribers[state.nextID] = continuation
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    public func publish(_ event: ControlEvent) {
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers { subscriber.yield(event) }
    }

    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Ends every subscription (at shutdown).
    public func finishAll() {
        let subscribers = state.withLock { state in
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        subscribers.forEach { $0.finish() }
    }
}
