import LanchatCore
import LanchatEngine
import NIOCore
import NIOPosix
import Synchronization

/// The store on a thread of its own: the event loop never waits for SQLite. The connection lives in the
/// store's half of the driver (`StoreWorker`), here behind a lock only this thread takes. What the driver
/// asks (`ShellOutput.store`: a batch's writes, then the reads its I/O needs) and what the node does with
/// the store itself (history and search, transfers' records, a history's import and export, the word
/// index) queue on one thread, first in first out: a read sees every write asked before it. Answers come
/// back on the node's event loop, in the order asked. Syncs and checkpoints keep threads of their own
/// (`StoreSync`): a commit here writes SQLite's log without waiting for the disk.
final class StoreThread: Sendable {
    private let thread = NIOThreadPool(numberOfThreads: 1)
    private let worker: Mutex<StoreWorker>
    /// Tests only: runs on the store's thread before each request the driver asked (a test holds it to
    /// see what waits for it).
    let beforeAnswer = Mutex<(@Sendable () -> Void)?>(nil)
    /// Requests of the driver answered so far (tests).
    let answered = Atomic<Int>(0)

    init(worker: sending StoreWorker) {
        self.worker = Mutex(worker)
        thread.start()
    }

    /// Answers a request of the driver on the store's thread; the future completes on `eventLoop`.
    func answer(_ request: StoreRequest, now: Int64, on eventLoop: EventLoop) -> EventLoopFuture<StoreAnswer> {
        thread.runIfActive(eventLoop: eventLoop) { [self] in
            beforeAnswer.withLock { $0 }?()
            defer { answered.add(1, ordering: .relaxed) }
            return worker.withLock { $0.answer(request, now: now) }
        }
    }

    /// Runs `body` with the store on the store's thread, after everything asked before; the future
    /// completes on `eventLoop`.
    func run<Value: Sendable>(on eventLoop: EventLoop, _ body: @escaping @Sendable (any SessionStore) throws -> Value) -> EventLoopFuture<Value> {
        thread.runIfActive(eventLoop: eventLoop) { [self] in
            try worker.withLock { worker throws -> Value in try body(worker.store) }
        }
    }

    /// Does what was asked, then closes the store (on this thread's last turn); call once, last.
    func shutdown() async {
        try? await thread.shutdownGracefully()
        worker.withLock { $0.store.close() }
    }
}
