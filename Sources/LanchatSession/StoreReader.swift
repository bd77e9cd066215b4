import LanchatCore
import LanchatStore
import NIOCore
import NIOPosix
import Synchronization

/// Reads that need only what was committed (a person's history and search, the shared files' list, the
/// pieces of a newcomer's history) on
/// a second, read-only connection (`ChatStore.reader`) and a thread of their own:
/// a large one never holds up the commits on the store's thread (`StoreThread`), which every ACK and
/// send waits for. What is committed is readable there (WAL); what must be read in order with writes
/// still queued (a transfer's record, the transfers' list, a relay answer, an outbox) stays on the
/// store's thread. Where no second connection may open the file (a network file system) there is none, and
/// these reads queue on the store's thread (`SessionNode.onReader`).
final class StoreReader: Sendable {
    private let thread = NIOThreadPool(numberOfThreads: 1)
    private let path: String
    /// Opened at the first read; used only on this thread.
    private let store = Mutex<ChatStore?>(nil)

    init(path: String) {
        self.path = path
        thread.start()
    }

    /// Runs `body` with the reading connection on its thread; the future completes on `eventLoop`.
    func run<Value: Sendable>(on eventLoop: EventLoop, _ body: @escaping @Sendable (any SessionStore) throws -> Value) -> EventLoopFuture<Value> {
        thread.runIfActive(eventLoop: eventLoop) { [self] in
            try store.withLock { store throws -> Value in
                let reader = try store ?? ChatStore.reader(path: path)
                store = reader
                return try body(reader)
            }
        }
    }

    /// Waits for a read under way, then closes the connection (call once, last).
    func shutdown() async {
        try? await thread.shutdownGracefully()
        store.withLock { store in
            store?.close()
            store = nil
        }
    }
}
