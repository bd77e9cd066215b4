import Glibc
import CSQLite
import LanchatCore

/// History, rooms and the outbox of unacknowledged reliable messages, in one SQLite file
/// (`history.sqlite3` in the state directory). WAL mode with `synchronous=FULL`: a committed write is
/// on disk (the log is synced at each commit), so it survives a power loss, not only a crash of the
/// daemon. The session's batches commit with `durable: false` and have the log (`logPath`) synced on a
/// thread of their own (LanchatSession's `StoreSync`), one sync for all that committed meanwhile; an
/// acknowledgement is sent only after that sync. Writes happen inside `transaction`, so that a batch
/// (every frame of one read from a connection) costs one commit; a received history's pieces go in a
/// bulk write (`bulk`), which the next `transaction` commits with its own.
public final class ChatStore: SessionStore {
    public static let fileName = "history.sqlite3"
    public static let schemaVersion: Int64 = 4
    let db: SQLiteDatabase
    /// The write-ahead log (`logPath`).
    public let logPath: String?
    /// The `flock` of `<path>.lock` (a file SQLite never opens), held while the store is open: a second
    /// lanchatd on the same state directory is refused at once.
    private var lockDescriptor: Int32 = -1
    /// The database file, which a second connection may checkpoint (`LogCheckpointer`, on a thread of
    /// its own); nil on a network file system, where the store keeps SQLite's exclusive locking (WAL's
    /// shared memory does not work there) and checkpoints only through `checkpoint()`.
    public let checkpointPath: String?
    private(set) var depth = 0
    /// While a transaction `transaction` began is open and nothing has been written in it: the count of
    /// changes then (`SQLiteDatabase.totalChanges`). Nil otherwise (a bulk write's, or once written in).
    private var untouchedAt: Int64?
    /// `SessionStore.messagesChanged`: bumped at each insert and each rollback.
    /// (Bumped by `insert` and at each rollback.)
    var changes: UInt64 = 0
    /// The statements every message runs (`HotStatement`), each prepared at its first use and held: a
    /// statement found by its text (`query`) hashes the whole text at each call (under callgrind, about
    /// 4,000 instructions each, several times per message sent and received).
    var hotStatements = [SQLiteDatabase.Statement?](repeating: nil, count: HotStatement.allCases.count)

    enum HotStatement: Int, CaseIterable {
        /// Stores a message (`insert`).
        case insertMessage
        /// Keeps a message's seal (`keepSeal`).
        case insertSeal
        /// Keeps a seal's leaves, when it was kept without them (`keepSeal`).
        case keepLeaves
        case waitForIndex, enqueue, acknowledge, setMark

        var sql: String {
            switch self {
            case .insertMessage:
                "INSERT OR IGNORE INTO messages (id, room, sender_id, sender_name, sequence, timestamp, kind, body, stored_at, author_key, "
                    + "signature, direct, seal_id, seal_proof, recipients) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
            case .insertSeal:
                "INSERT OR IGNORE INTO seals (author_id, seal_id, room, author_key, signature, leaf_count, root, checked, leaves) "
                    + "VALUES (?,?,?,?,?,?,?,?,?)"
            case .keepLeaves: "UPDATE seals SET leaves = ? WHERE author_id = ? AND seal_id = ? AND coalesce(length(leaves), 0) = 0"
            case .waitForIndex: "INSERT INTO messages_unindexed (message_rowid) VALUES (last_insert_rowid())"
            case .enqueue: "INSERT OR IGNORE INTO outbox (peer_id, message_id) VALUES (?, ?)"
            case .acknowledge: "DELETE FROM outbox WHERE peer_id = ? AND message_id = ?"
            case .setMark:
                "INSERT INTO outbox_marks (peer_id, room, acked) VALUES (?, ?, ?) "
                    + "ON CONFLICT (peer_id, room) DO UPDATE SET acked = excluded.acked WHERE acked != excluded.acked"
            }
        }
    }

    /// Runs one of the statements every message runs (`HotStatement`), its parameters bound by `bind`;
    /// returns the rows it changed.
    @discardableResult
    func run(_ which: HotStatement, _ bind: (inout SQLiteDatabase.Binder) -> Void = { _ in }) throws(Error) -> Int {
        let statement: SQLiteDatabase.Statement
        if let prepared = hotStatements[which.rawValue] {
            statement = prepared
        } else {
            statement = try db.statement(which.sql)
            hotStatements[which.rawValue] = statement
        }
        return try db.run(statement, bind)
    }
    /// The seal `keepSeal` last found kept (its author, id, room, key, count and root): the other messages
    /// of that seal skip both of its statements. Any rollback forgets it (`rolledBack`): the row may be gone.
    var lastKeptSeal: KeptSeal?

    /// What names a kept seal and what must match for a message's seal to be it (its signature's bytes
    /// aside: `keepSeal`).
    struct KeptSeal: Equatable {
        var author: String
        var id: String
        var room: String
        var key: [UInt8]
        var count: Int
        var root: [UInt8]
        /// Its leaves are kept (`StoredSeal.leaves`).
        var leaves = false

        init(author: String, room: String, seal: StoredSeal) {
            (self.author, id, self.room, key, count, root) = (author, seal.id, room, seal.authorKey, seal.leafCount, seal.root)
        }

        /// Whether it names `seal` of `author` in `room` (without making a name for each message).
        func names(author: String, room: String, seal: StoredSeal) -> Bool {
            self.author == author && id == seal.id && self.room == room && key == seal.authorKey && count == seal.leafCount && root == seal.root
        }
    }
    public var messagesChanged: UInt64 {
        _ = bulkStillOpen()  // (SQLite may have rolled an open bulk write back by itself)
        return changes
    }
    /// A bulk write's transaction is open (`bulk`).
    private var bulkOpen = false
    /// A second connection that only reads (`reader(path:)`).
    private let readOnly: Bool

    public typealias Error = SQLiteDatabase.Error

    public convenience init(path: String) throws(Error) {
        try self.init(path: path, networkFileSystem: Self.onNetworkFileSystem(path))
    }

    /// `networkFileSystem`: whether `path` is on one (tests say so for a local file).
    init(path: String, networkFileSystem: Bool) throws(Error) {
        readOnly = false
        let lockPath = path + ".lock"
        let lock = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw Error(description: "cannot open \(lockPath): \(String(cString: strerror(errno)))") }
        guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
            let busy = errno == EWOULDBLOCK
            let reason = String(cString: strerror(errno))
            Glibc.close(lock)
            throw Error(description: busy ? "\(path) is in use by another lanchatd (one daemon per state directory)" : "cannot lock \(lockPath): \(reason)")
        }
        lockDescriptor = lock
        do { db = try SQLiteDatabase(path: path) } catch {
            Glibc.close(lock)
            throw error
        }
        logPath = path + "-wal"
        chmod(path, 0o600)
        let shared = !networkFileSystem
        checkpointPath = shared ? path : nil
        // WAL: a commit is one append to the log (its sync is `StoreSync`'s, or the commit's when durable).
        // Checkpoints run from `checkpoint()` between messages, or on a second connection on a thread of
        // their own (`LogCheckpointer`), not inside a commit (unless the log grows past 16k pages). Normal
        // locking, so that the second connection can checkpoint (the `flock` above keeps other daemons
        // out); exclusive on a network file system, where WAL's shared memory does not work.
        try db.execute(
            (shared ? "" : "PRAGMA locking_mode=EXCLUSIVE; ")
                + "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=OFF; PRAGMA wal_autocheckpoint=16384; PRAGMA cache_size=-8192;"
        )
        try prepareSchema(path: path)
    }

    /// Something was rolled back (a transaction, a savepoint, or SQLite by itself): reads of the messages
    /// are stale, and a seal found kept may be gone.
    private func rolledBack() {
        changes &+= 1
        lastKeptSeal = nil
    }

    /// Runs `body` in one transaction (nested calls join the outer one). Rolls back on error. If a bulk
    /// write is open (`bulk`), its writes join it, and the commit makes both durable.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        if depth > 0 {
            depth += 1
            defer { depth -= 1 }
            return try body()
        }
        if bulkStillOpen() {
            let result = try piece(body)  // (if it throws, the bulk write stays open)
            try commitBulk()
            return result
        }
        try db.executePrepared("BEGIN IMMEDIATE")
        depth = 1
        untouchedAt = db.totalChanges
        defer { untouchedAt = nil }
        do {
            let result = try body()
            depth = 0
            try db.executePrepared("COMMIT")
            return result
        } catch {
            depth = 0
            try? db.executePrepared("ROLLBACK")
            rolledBack()
            throw error
        }
    }

    /// Runs `body` in a transaction left open for the next piece of a bulk write (a received history):
    /// many pieces then cost one commit, not one each (storing a million messages in pieces of 5,000
    /// wrote most pages of the id index again at each commit). Nothing that must be durable belongs in
    /// it: a crash loses what is not committed. The next `transaction` commits it with its own writes;
    /// `commitBulk` commits it. A piece that fails is undone alone.
    @discardableResult
    public func bulk<T>(_ body: () throws -> T) throws -> T {
        guard depth == 0 else { return try transaction(body) }
        if !bulkStillOpen() {
            try db.executePrepared("BEGIN IMMEDIATE")
            bulkOpen = true
        }
        return try piece(body)
    }

    /// Commits an open bulk write (nothing if none is open).
    public func commitBulk() throws {
        guard depth == 0, bulkStillOpen() else { return }
        bulkOpen = false
        do {
            try db.executePrepared("COMMIT")
        } catch {
            try? db.executePrepared("ROLLBACK")
            rolledBack()
            throw error
        }
    }

    /// Whether the bulk write's transaction is still open: SQLite rolls a whole transaction back by
    /// itself after some errors (disk full, I/O error, out of memory), and then nothing is open.
    func bulkStillOpen() -> Bool {
        if bulkOpen, !db.inTransaction {
            bulkOpen = false
            rolledBack()  // (by SQLite)
        }
        return bulkOpen
    }

    /// `body` in a savepoint of the open transaction: undone alone if it throws.
    private func piece<T>(_ body: () throws -> T) throws -> T {
        try db.executePrepared("SAVEPOINT piece")
        depth = 1
        defer { depth = 0 }
        do {
            let result = try body()
            try db.executePrepared("RELEASE piece")
            return result
        } catch {
            try? db.executePrepared("ROLLBACK TO piece")
            rolledBack()
            try? db.executePrepared("RELEASE piece")
            throw error
        }
    }

    /// Inside a transaction, `body` in a savepoint of it: undone alone if it throws.
    /// If SQLite rolled the whole transaction back by itself (disk full, I/O error, out of memory), it
    /// throws `StoreTransactionLost`: a SAVEPOINT outside a transaction would open one of its own, and
    /// its RELEASE would commit it.
    ///
    /// The first savepoint of a transaction that nothing has written in yet is not one: undoing its body
    /// is undoing the transaction, which then begins again. A savepoint keeps a journal of every page its
    /// body changes (SQLite's copy of each, in memory up to 64 KiB, then in a temporary file opened and
    /// unlinked each time); most groups of the store's thread are one request (`StoreWorker`), and without
    /// it a stream of room messages took an eighth less time (`lanchat-bench workload`).
    public func savepoint<T>(_ body: () throws -> T) throws -> T {
        guard depth > 0 else { return try transaction(body) }
        guard db.inTransaction else { throw StoreTransactionLost("no transaction is open") }
        if let untouched = untouchedAt, db.totalChanges == untouched {
            untouchedAt = nil
            do {
                return try body()
            } catch {
                rolledBack()
                guard db.inTransaction else { throw StoreTransactionLost("\(error)") }
                try? db.executePrepared("ROLLBACK")
                do {
                    try db.executePrepared("BEGIN IMMEDIATE")
                } catch let lost {
                    throw StoreTransactionLost("\(error); then: \(lost)")
                }
                untouchedAt = db.totalChanges
                throw error
            }
        }
        try db.executePrepared("SAVEPOINT batch")
        do {
            let result = try body()
            try db.executePrepared("RELEASE batch")
            return result
        } catch {
            rolledBack()
            guard db.inTransaction else { throw StoreTransactionLost("\(error)") }
            try? db.executePrepared("ROLLBACK TO batch")
            try? db.executePrepared("RELEASE batch")
            throw error
        }
    }

    /// A commit with `durable` false skips the sync of the log (`synchronous=NORMAL` for that commit).
    public func transaction<T>(durable: Bool, _ body: () throws -> T) throws -> T {
        // (Inside an open bulk write SQLite cannot change the setting: that commit syncs.)
        guard !durable, depth == 0, !bulkStillOpen() else { return try transaction(body) }
        try db.execute("PRAGMA synchronous=NORMAL")
        defer { try? db.execute("PRAGMA synchronous=FULL") }
        return try transaction(body)
    }

    /// A bulk write is open (not committed).
    public var bulkIsOpen: Bool { bulkStillOpen() }

    /// The database itself, for tests that look at query plans.
    var databaseForTests: SQLiteDatabase { db }

    /// SQLite's `synchronous` setting now (2: FULL, 1: NORMAL).
    var synchronousSetting: Int64 { (try? db.query("PRAGMA synchronous").first?.first?.int) ?? -1 }

    /// A second connection to a store's file that only reads: what was committed when each read began
    /// (WAL lets it read while the store's own connection commits). No lock, no schema work, and SQLite
    /// refuses it any write (`query_only`). Not on a network file system (the store keeps exclusive
    /// locking there: `checkpointPath` is nil).
    public static func reader(path: String) throws(Error) -> ChatStore {
        try ChatStore(readingFrom: path)
    }

    private init(readingFrom path: String) throws(Error) {
        readOnly = true
        db = try SQLiteDatabase(path: path, create: false)
        logPath = nil
        checkpointPath = nil
        try db.execute("PRAGMA query_only=1; PRAGMA cache_size=-4096;")
    }

    /// Checkpoints and closes the file; the store is unusable afterwards.
    public func close() {
        guard !readOnly else { return db.close() }
        try? commitBulk()
        checkpoint()
        db.close()
        releaseLock()
    }

    deinit {
        db.close()
        releaseLock()
    }

    /// Whether `path` is on NFS, SMB/CIFS, 9p, FUSE or another file system whose locks and shared memory
    /// SQLite's WAL cannot rely on.
    static func onNetworkFileSystem(_ path: String) -> Bool {
        var info = statfs()
        guard statfs(path, &info) == 0 else { return false }
        let network: Set<Int64> = [
            0x6969,  // NFS
            0x517B,  // SMB
            0xFF53_4D42,  // CIFS
            0xFE53_4D42,  // SMB2
            0x0102_1997,  // 9p (v9fs)
            0x6573_5546,  // FUSE (sshfs and the like)
            0x7364_6170,  // ceph
            0x0BD0_0BD0,  // Lustre
        ]
        return network.contains(Int64(info.f_type))
    }

    private func releaseLock() {
        if lockDescriptor >= 0 { Glibc.close(lockDescriptor) }
        lockDescriptor = -1
    }

    /// Copies the write-ahead log into the database without waiting for readers (call when idle-ish).
    public func checkpoint() {
        guard !bulkOpen else { return }  // (not inside a transaction)
        try? db.execute("PRAGMA wal_checkpoint(PASSIVE)")
    }
}
