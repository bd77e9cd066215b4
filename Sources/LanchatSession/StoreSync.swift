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
///
/// **A sync starts at the commit, not at the loop's request.** The store's thread counts its commits
/// (`committed`) and, after one that must be durable, starts a sync itself (unless one runs: then the next
/// covers it). The driver's request (`sync(on:)`, after the answer reached the loop) then waits for the
/// first sync that began after every commit made before the request: often the one already running. A
/// lone send's sync so begins one thread hop sooner (the store's thread wakes this one directly, not
/// through the loop), and there is still one sync at a time, covering every commit made before it began.
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
    private let state = Mutex(State())

    private struct State {
        /// Commits made on the store's connection (and the node's own uses of it), counted after each.
        var committed: UInt64 = 0
        /// The highest count some commit wants synced (a durable commit, a waiter).
        var wanted: UInt64 = 0
        /// The count when the running sync began (nil: none runs).
        var running: UInt64?
        /// Every commit up to this count is on disk.
        var syncedThrough: UInt64 = 0
        var waiters: [(through: UInt64, promise: EventLoopPromise<Void>)] = []
        var closed = false
    }

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

    /// The store's thread made a commit (`durable`: one that must reach the disk: a sync starts now).
    func committed(durable: Bool) {
        let start = state.withLock { state -> Bool in
            state.committed += 1
            guard durable else { return false }
            state.wanted = state.committed
            return beginIfWanted(&state)
        }
        if start { submitSync() }
    }

    /// Makes durable everything committed before this call (a sync that began after it, perhaps the one
    /// running); the future completes on `eventLoop`.
    func sync(on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        let (start, closed, done) = state.withLock { state -> (Bool, Bool, Bool) in
            guard !state.closed else { return (false, true, false) }
            let through = state.committed
            if state.syncedThrough >= through { return (false, false, true) }
            state.waiters.append((through, promise))
            state.wanted = max(state.wanted, through)
            return (beginIfWanted(&state), false, false)
        }
        if closed { promise.fail(SyncError("the store's sync thread has stopped")) }
        if done { promise.succeed() }
        if start { submitSync() }
        return promise.futureResult
    }

    /// Marks a sync as begun if one is wanted and none runs.
    private func beginIfWanted(_ state: inout State) -> Bool {
        guard state.running == nil, !state.closed, state.wanted > state.syncedThrough else { return false }
        state.running = state.committed
        return true
    }

    private func submitSync() {
        thread.submit { [self] work in
            let result: Result<Void, any Error> = if case .active = work { Result { try syncNow() } } else { .failure(SyncError("the store's sync thread has stopped")) }
            let (ready, again) = state.withLock { state -> ([EventLoopPromise<Void>], Bool) in
                let began = state.running ?? state.committed
                state.running = nil
                if case .success = result { state.syncedThrough = max(state.syncedThrough, began) }
                // (A failed sync fails what it was to cover; a later request gets a sync of its own.)
                let covered = state.waiters.filter { $0.through <= began }.map(\.promise)
                state.waiters.removeAll { $0.through <= began }
                if case .failure = result, state.wanted <= began { state.wanted = state.syncedThrough }
                return (covered, beginIfWanted(&state))
            }
            for promise in ready { promise.completeWith(result) }
            if again { submitSync() }
        }
    }

    /// Syncs the log now, on the sync thread.
    private func syncNow() throws {
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

    /// Waits for a sync that runs, then ends the thread (call once, after the last sync was asked for).
    func shutdown() async {
        state.withLock { $0.closed = true }
        try? await thread.shutdownGracefully()
        let left = state.withLock { state in
            defer { state.waiters = [] }
            return state.waiters.map(\.promise)
        }
        for promise in left { promise.fail(SyncError("the store's sync thread has stopped")) }
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
