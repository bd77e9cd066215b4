import LanchatCore
import LanchatEngine
import NIOCore
import NIOPosix
import Synchronization

/// The store on a thread of its own: the event loop never waits for SQLite. The connection lives in the
/// store's half of the driver (`StoreWorker`), here behind a lock only this thread takes. What the driver
/// asks (`ShellOutput.store`: a batch's writes, then the reads its I/O needs) and what the node does with
/// the store itself (transfers' records, a history's import, the word index; what only reads what was
/// committed goes to `StoreReader` where there is one) wait in one queue, first in first out: a read
/// sees every write asked before it.
///
/// A turn takes everything queued and answers it in order: the driver's requests that come one after
/// the other commit together, a savepoint each (`StoreWorker.answer(_:)`: one commit for what every
/// connection asked meanwhile, as one sync covers them all), and their answers go back to the event loop
/// in one hop. Syncs and checkpoints keep threads of their own (`StoreSync`): a commit here writes
/// SQLite's log without waiting for the disk, and tells the sync's thread (`StoreSync.committed`), which
/// starts a sync at once after one that must be durable.
final class StoreThread: Sendable {
    private let thread = NIOThreadPool(numberOfThreads: 1)
    private let worker: Mutex<StoreWorker>
    private let queue = Mutex(Queue())
    /// Told of every commit (nil: a store with nothing to sync).
    private let sync: StoreSync?
    /// Tests only: runs on the store's thread before each turn that answers the driver (a test holds it
    /// to see what waits for it).
    let beforeAnswer = Mutex<(@Sendable () -> Void)?>(nil)
    /// Turns taken, and the driver's requests answered (tests, and a measure of the grouping).
    let turns = Atomic<Int>(0)
    let answered = Atomic<Int>(0)

    private enum Item {
        case request(StoreRequest, EventLoopPromise<StoreAnswer>)
        /// The node's own use of the store, and how it fails if the thread has stopped.
        case work(@Sendable (any SessionStore) -> Void, fail: @Sendable (any Error) -> Void)
    }

    private struct Queue {
        var items: [Item] = []
        /// A turn is asked of the thread, or under way: it takes what is queued meanwhile.
        var draining = false
        /// `shutdown` took what was left: what is asked from now on fails.
        var closed = false
    }

    init(worker: sending StoreWorker, sync: StoreSync?) {
        self.worker = Mutex(worker)
        self.sync = sync
        thread.start()
    }

    /// Answers a request of the driver on the store's thread; the future completes on `eventLoop`.
    func answer(_ request: StoreRequest, on eventLoop: EventLoop) -> EventLoopFuture<StoreAnswer> {
        let promise = eventLoop.makePromise(of: StoreAnswer.self)
        enqueue(.request(request, promise))
        return promise.futureResult
    }

    /// Runs `body` with the store on the store's thread, after everything asked before; the future
    /// completes on `eventLoop`.
    func run<Value: Sendable>(on eventLoop: EventLoop, _ body: @escaping @Sendable (any SessionStore) throws -> Value) -> EventLoopFuture<Value> {
        let promise = eventLoop.makePromise(of: Value.self)
        enqueue(.work({ store in promise.completeWith(Result { try body(store) }) }, fail: { promise.fail($0) }))
        return promise.futureResult
    }

    /// Does what was asked (the engine counts on it: its writes are idempotent), then closes the store;
    /// call once, last. What is asked afterwards fails.
    func shutdown() async {
        try? await thread.shutdownGracefully()
        // The thread is gone (a drain asked as it stopped may never have run): what is left runs here.
        let left = queue.withLock { queue -> [Item] in
            queue.closed = true
            defer { queue.items = [] }
            return queue.items
        }
        if !left.isEmpty { turn(left) }
        worker.withLock { $0.store.close() }
    }

    struct Stopped: Error, CustomStringConvertible {
        var description: String { "the store is closed (the session is stopping)" }
    }

    private func enqueue(_ item: Item) {
        let (first, closed) = queue.withLock { queue -> (Bool, Bool) in
            guard !queue.closed else { return (false, true) }
            queue.items.append(item)
            defer { queue.draining = true }
            return (!queue.draining, false)
        }
        if closed { return fail(item) }
        guard first else { return }
        thread.submit { [self] state in
            // (Cancelled: the thread is stopping; `shutdown` runs what is queued.)
            guard case .active = state else { return }
            drain()
        }
    }

    /// Turns until nothing is queued.
    private func drain() {
        while true {
            let items = queue.withLock { queue -> [Item] in
                if queue.items.isEmpty { queue.draining = false }
                defer { queue.items = [] }
                return queue.items
            }
            guard !items.isEmpty else { return }
            turn(items)
        }
    }

    private func turn(_ items: [Item]) {
        turns.add(1, ordering: .relaxed)
        var answers: [(EventLoopPromise<StoreAnswer>, StoreAnswer)] = []
        var index = 0
        while index < items.count {
            var requests: [StoreRequest] = []
            var promises: [EventLoopPromise<StoreAnswer>] = []
            while index < items.count, case .request(let request, let promise) = items[index] {
                requests.append(request)
                promises.append(promise)
                index += 1
            }
            if !requests.isEmpty {
                beforeAnswer.withLock { $0 }?()
                let answered = worker.withLock { $0.answer(requests) }
                self.answered.add(requests.count, ordering: .relaxed)
                sync?.committed(durable: answered.contains { $0.durable })
                answers += zip(promises, answered)
            }
            if index < items.count, case .work(let body, _) = items[index] {
                // (The driver's answers so far go first: what it asked came before.)
                deliver(answers)
                answers = []
                worker.withLock { body($0.store) }
                sync?.committed(durable: false)  // (it may have committed: a later sync must cover it)
                index += 1
            }
        }
        deliver(answers)
    }

    /// Completes the driver's answers on their event loop in one hop, in order.
    private func deliver(_ answers: [(EventLoopPromise<StoreAnswer>, StoreAnswer)]) {
        guard let loop = answers.first?.0.futureResult.eventLoop else { return }
        loop.execute {
            for (promise, answer) in answers { promise.succeed(answer) }
        }
    }

    /// The store is closed: what is asked fails.
    private func fail(_ item: Item) {
        switch item {
        case .request(_, let promise): promise.fail(Stopped())
        case .work(_, let fail): fail(Stopped())
        }
    }
}
