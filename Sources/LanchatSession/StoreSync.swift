import Glibc
import LanchatStore
import NIOCore
import NIOPosix
import Synchronization

/// The store's syncs, on a thread of their own. The node commits a batch's writes on its event loop
/// without syncing them (`SessionStore.transaction(durable: false)`: SQLite writes the log, a copy into
/// the page cache), and asks for a sync of the log (`SessionStore.logPath`); this thread runs
/// `fdatasync` on it, one at a time. Commits made while a sync runs are covered together by the next
/// one: with many connections, one sync makes many batches durable (a group commit). What must not
/// happen before a batch is on disk (its acknowledgements, and every frame after them) waits for its
/// sync in the node (`SessionNode.perform`); the event loop never waits for the disk's sync.
///
/// Why a sync of the log file is enough: in WAL mode a transaction is durable once its frames, up to
/// the commit frame, are on disk (recovery checks them by checksum). SQLite itself syncs the log before
/// copying it into the database (checkpoint) and when the log starts over; with `synchronous=NORMAL` for
/// these commits it skips only the sync at the commit, which this thread does.
///
/// Checkpoints (copying the log into the database, with SQLite's syncs of both) run on another thread,
/// on a second connection (`LogCheckpointer`), so that neither the event loop nor the syncs that
/// acknowledgements wait for wait for them.
final class StoreSync: Sendable {
    private let path: String
    private let thread = NIOThreadPool(numberOfThreads: 1)
    private let checkpointThread = NIOThreadPool(numberOfThreads: 1)
    /// The second connection: used only on the checkpoint thread.
    private let checkpointer: Mutex<LogCheckpointer?>
    /// The log's descriptor (opened at the first sync): used only on the sync thread.
    private let descriptor = Mutex<Int32>(-1)
    /// Syncs run so far (tests: several commits while one runs share the next).
    let syncs = Atomic<Int>(0)
    /// Checkpoints run so far on the checkpoint thread (tests).
    let checkpoints = Atomic<Int>(0)
    /// Tests only: runs on the sync thread before each sync (a test holds it to see what waits for it).
    let beforeSync = Mutex<(@Sendable () -> Void)?>(nil)

    /// `path`: the log to sync; `checkpointPath`: the database a second connection checkpoints (nil:
    /// `checkpoint(on:)` does nothing).
    init(path: String, checkpointPath: String?) {
        self.path = path
        checkpointer = Mutex(checkpointPath.map(LogCheckpointer.init(path:)))
        thread.start()
        checkpointThread.start()
    }

    /// Checkpoints the log on the checkpoint thread (as far as it can without waiting for the committing
    /// connection); the future completes on `eventLoop` with the log's frames and those copied.
    func checkpoint(on eventLoop: EventLoop) -> EventLoopFuture<(logFrames: Int, copied: Int)> {
        checkpointThread.runIfActive(eventLoop: eventLoop) { [self] in
            try checkpointer.withLock { checkpointer throws(SQLiteDatabase.Error) -> (logFrames: Int, copied: Int) in
                guard let checkpointer else { return (-1, -1) }
                defer { checkpoints.add(1, ordering: .relaxed) }
                return try checkpointer.checkpoint()
            }
        }
    }

    /// Syncs the log (everything committed before this call); the future completes on `eventLoop`.
    func sync(on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        thread.runIfActive(eventLoop: eventLoop) { [self] in
            beforeSync.withLock { $0 }?()
            try descriptor.withLock { fd in
                if fd < 0 {
                    fd = open(path, O_RDONLY | O_CLOEXEC)
                    guard fd >= 0 else { throw SyncError("cannot open \(path): \(String(cString: strerror(errno)))") }
                    // The log's name in its directory is made durable once (SQLite does not sync a directory in WAL mode).
                    let slash = path.lastIndex(of: "/")
                    let directory = open(slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                    if directory >= 0 {
                        _ = fsync(directory)
                        close(directory)
                    }
                }
                while fdatasync(fd) != 0 {
                    guard errno == EINTR else { throw SyncError("cannot sync \(path): \(String(cString: strerror(errno)))") }
                }
            }
            syncs.add(1, ordering: .relaxed)
        }
    }

    /// Waits for a sync that runs, then ends the thread (call once, after the last sync was asked for).
    func shutdown() async {
        try? await thread.shutdownGracefully()
        try? await checkpointThread.shutdownGracefully()
        checkpointer.withLock { $0?.close() }
        descriptor.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    struct SyncError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
