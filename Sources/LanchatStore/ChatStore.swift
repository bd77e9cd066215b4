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
        let version = try db.query("PRAGMA user_version").first?.first?.int ?? 0
        if version > Self.schemaVersion {
            throw Error(description: "\(path) was written by a newer lanchatd (schema \(version)); this one knows \(Self.schemaVersion)")
        }
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS messages (\(Self.messagesTableColumns));
            CREATE INDEX IF NOT EXISTS messages_by_room ON messages (room, timestamp, sender_id, sequence);
            CREATE TABLE IF NOT EXISTS outbox (\(Self.outboxTableColumns)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS rooms (room TEXT PRIMARY KEY, joined_at INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS members (
                room TEXT NOT NULL, peer_id TEXT NOT NULL, name TEXT NOT NULL, port INTEGER NOT NULL,
                addresses TEXT NOT NULL, PRIMARY KEY (room, peer_id));
            -- Added without a new schema number: an older lanchatd ignores the table.
            CREATE TABLE IF NOT EXISTS keyed_peers (peer_id TEXT PRIMARY KEY, first_seen INTEGER NOT NULL);
            -- Room metadata (added without a new schema number: an older lanchatd ignores the table).
            CREATE TABLE IF NOT EXISTS room_meta (
                room TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, deleted INTEGER NOT NULL, version INTEGER NOT NULL,
                timestamp INTEGER NOT NULL, author_id TEXT NOT NULL, author_key TEXT NOT NULL, signature TEXT NOT NULL,
                PRIMARY KEY (room, key));
            CREATE TABLE IF NOT EXISTS transfers (
                id TEXT PRIMARY KEY, outgoing INTEGER NOT NULL, peer_id TEXT NOT NULL, peer_name TEXT NOT NULL,
                path TEXT NOT NULL, name TEXT NOT NULL, size INTEGER NOT NULL, sha256 TEXT NOT NULL,
                modified INTEGER NOT NULL, room TEXT NOT NULL, state TEXT NOT NULL, sent_mark INTEGER NOT NULL,
                resent INTEGER NOT NULL, updated_at INTEGER NOT NULL, file_identity TEXT NOT NULL DEFAULT '');
            """)
        // The word index of message bodies (`search`). A stored message waits for it in
        // `messages_unindexed` (its rowid): the index is brought up to date in pieces between messages
        // (`indexWaiting`, from the daemon's idle timer) and before each search. Kept in the commit that
        // stores each message, it cost every commit a new index segment (a single message's commit:
        // 238 µs with it, 157 µs with the row that waits). It is not kept by an insert trigger either:
        // inside a trigger, SQLite opens a savepoint on the index for each row, and FTS5 writes its
        // pending words out as a new segment at every savepoint (storing 100,000 messages took 2.4 s
        // longer). The word index's lanchatd of 2026-11-23 made that trigger (schema 3 refuses this
        // file now): it is dropped here. Deleting a message forgets it in the index if it was indexed
        // (the index must be told the body it had), or in the waiting list. A file of an earlier schema
        // (or without the index) gets the index made again, in pieces like any stored message: emptied,
        // and every message waiting for it (a lanchatd of schema 3 from before the index stored rows
        // the index lacks). All of it in one transaction: a crash cannot leave an index made but not filled.
        let indexed = !(try db.query("SELECT 1 FROM sqlite_master WHERE name = 'messages_fts'")).isEmpty
        try migrating { () throws(Error) in
            try db.execute(
                """
                CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
                    body, content='messages', content_rowid='rowid', tokenize='unicode61 remove_diacritics 2', columnsize=0);
                CREATE TABLE IF NOT EXISTS messages_unindexed (message_rowid INTEGER PRIMARY KEY);
                DROP TRIGGER IF EXISTS messages_fts_insert;
                DROP TRIGGER IF EXISTS messages_fts_delete;
                CREATE TRIGGER IF NOT EXISTS messages_fts_forget AFTER DELETE ON messages BEGIN
                    INSERT INTO messages_fts (messages_fts, rowid, body)
                        SELECT 'delete', old.rowid, old.body WHERE NOT EXISTS (SELECT 1 FROM messages_unindexed WHERE message_rowid = old.rowid);
                    DELETE FROM messages_unindexed WHERE message_rowid = old.rowid;
                END;
                """)
            if version < 4 || !indexed {
                try db.execute(
                    """
                    INSERT INTO messages_fts (messages_fts) VALUES ('delete-all');
                    DELETE FROM messages_unindexed;
                    INSERT INTO messages_unindexed (message_rowid) SELECT rowid FROM messages;
                    PRAGMA user_version = 4;
                    """)
            }
        }
        // Schema 3 added `transfers.file_identity` (a file of schema 2 gains it, empty).
        let columns = try db.query("PRAGMA table_info(transfers)").map { $0[1].string }
        if !columns.contains("file_identity") {
            try db.execute("ALTER TABLE transfers ADD COLUMN file_identity TEXT NOT NULL DEFAULT ''")
        }
        // Signed envelopes (wire version 2) added `messages.author_key` and `messages.signature` (hex;
        // empty: unsigned) and `messages.direct` (1: sent to some members only), without a new schema
        // number: an older lanchatd names its columns, so it can still open the file (what it stores is
        // unsigned, and not direct). Older messages show as unsigned.
        let messageColumns = try db.query("PRAGMA table_info(messages)").map { $0[1].string }
        // Seals (wire version 4) added `messages.seal_id` (hex) and `messages.seal_proof` (empty text: not
        // sealed) and the `seals` table (each seal once, under its author and id), the same way. An older
        // lanchatd reads a sealed message as unsigned: it never relays it, and the history it sends has
        // it unsigned, which a receiver refuses (unless the message is its own). The proof is a blob
        // since 2026-11-29 (hex text before, still read: 550 characters a row against 275 bytes; storing
        // 1,000,000 sealed rows in one transaction took 9.1 s with hex and 6.1 s with blobs, in the
        // `sqlite3` shell); a lanchatd of 2026-11-28 reads a blob proof as no proof (the message unsealed).
        let added: [(String, String)] = [
            ("author_key", "TEXT NOT NULL DEFAULT ''"), ("signature", "TEXT NOT NULL DEFAULT ''"), ("direct", "INTEGER NOT NULL DEFAULT 0"),
            ("seal_id", "TEXT NOT NULL DEFAULT ''"), ("seal_proof", "TEXT NOT NULL DEFAULT ''"), ("recipients", "TEXT NOT NULL DEFAULT ''"),
        ]
        for (column, type) in added where !messageColumns.contains(column) {
            try db.execute("ALTER TABLE messages ADD COLUMN \(column) \(type)")
        }
        try db.execute("CREATE TABLE IF NOT EXISTS seals (\(Self.sealsTableColumns)) WITHOUT ROWID")
        // Seals checked off the event loop added `seals.checked` (0 until the signature is checked), the
        // same way: every seal an older lanchatd kept was checked before it was kept. (An older lanchatd
        // opening a file that holds an unchecked seal would export its messages; each receiver of a
        // history checks every seal's signature itself and refuses one that fails.)
        let sealColumns = try db.query("PRAGMA table_info(seals)").map { $0[1].string }
        if !sealColumns.contains("checked") {
            try db.execute("ALTER TABLE seals ADD COLUMN checked INTEGER NOT NULL DEFAULT 1")
        }
        // A whole seal's leaves (2026-11-29) added `seals.leaves` (every leaf's hash, 32 bytes each; NULL or
        // empty: not kept), the same way: with them a message of the seal keeps its leaf index (2 bytes) in
        // `seal_proof`, not its path (275 bytes; 800 or so a row with the indexes). An older lanchatd reads
        // such a message's 2 bytes as no proof: it does not hand the message on in a signed or sealed
        // history (in a plain one, to a version 1 peer, it sends it as a plain record, as any).
        if !sealColumns.contains("leaves") {
            try db.execute("ALTER TABLE seals ADD COLUMN leaves BLOB")
        }
        try keyMessagesByAuthor()
        // Membership with provenance outlives a restart (issue 28): each member's proof with its row (ours
        // under our own id), and signed leaves. Added without a new schema number: an older lanchatd names
        // its columns and ignores the table.
        let memberColumns = try db.query("PRAGMA table_info(members)").map { $0[1].string }
        if !memberColumns.contains("proof") { try db.execute("ALTER TABLE members ADD COLUMN proof TEXT NOT NULL DEFAULT ''") }
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS leaves (room TEXT NOT NULL, peer_id TEXT NOT NULL, left_at INTEGER NOT NULL, PRIMARY KEY (room, peer_id))
            """)
        // What the relay and newcomers' histories read (`export`, `recentSequences`): the room's messages
        // but notices and direct ones, newest first. Without it, a room whose latest 100,000 messages
        // were direct made each SYNC_REQUEST skip them row by row on the event loop (about 100 ms).
        try db.execute(
            """
            CREATE INDEX IF NOT EXISTS messages_shared ON messages (room, timestamp, sender_id, sequence) WHERE kind != 2 AND direct = 0
            """)
        try keyOutboxByRecipient()
        // The outbox as marks (issue 33, 2026-11-29): `messages.recipients` (who one of our messages was
        // queued for: "*" every member, else ids joined by ","; "" nobody), one mark per recipient and
        // room, and an index of our queued messages by room and sequence (what a mark queues is read
        // through it). Added without a new schema number: an older lanchatd names its columns and reads
        // only the rows of `outbox`, so it does not send again what a mark queues: members still get a
        // room's messages through their resyncs, but a direct message waiting for its acknowledgement when
        // the older lanchatd took over is not sent again (it stays queued for this one, which sets each
        // mark again at its next send to that member).
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS outbox_marks (\(Self.outboxMarksTableColumns)) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS messages_queued ON messages (room, sequence) WHERE recipients != '';
            """)
        // The files shared in rooms (`lanchat files`): a few among a million messages, found without a scan.
        try db.execute("CREATE INDEX IF NOT EXISTS messages_files ON messages (timestamp) WHERE kind = 1")
        try db.execute("PRAGMA user_version = 4")
    }

    /// Runs a change of the file's shape while it opens (before any other use), in one transaction: a
    /// crash or an error leaves the file as it was.
    func migrating(_ body: () throws(Error) -> Void) throws(Error) {
        try db.execute("BEGIN IMMEDIATE")
        do {
            try body()
            try db.execute("COMMIT")
        } catch {
            try? db.execute("ROLLBACK")
            throw error
        }
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
        try db.execute("BEGIN IMMEDIATE")
        depth = 1
        untouchedAt = db.totalChanges
        defer { untouchedAt = nil }
        do {
            let result = try body()
            depth = 0
            try db.execute("COMMIT")
            return result
        } catch {
            depth = 0
            try? db.execute("ROLLBACK")
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
            try db.execute("BEGIN IMMEDIATE")
            bulkOpen = true
        }
        return try piece(body)
    }

    /// Commits an open bulk write (nothing if none is open).
    public func commitBulk() throws {
        guard depth == 0, bulkStillOpen() else { return }
        bulkOpen = false
        do {
            try db.execute("COMMIT")
        } catch {
            try? db.execute("ROLLBACK")
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
        try db.execute("SAVEPOINT piece")
        depth = 1
        defer { depth = 0 }
        do {
            let result = try body()
            try db.execute("RELEASE piece")
            return result
        } catch {
            try? db.execute("ROLLBACK TO piece")
            rolledBack()
            try? db.execute("RELEASE piece")
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
                try? db.execute("ROLLBACK")
                do {
                    try db.execute("BEGIN IMMEDIATE")
                } catch let lost {
                    throw StoreTransactionLost("\(error); then: \(lost)")
                }
                untouchedAt = db.totalChanges
                throw error
            }
        }
        try db.execute("SAVEPOINT batch")
        do {
            let result = try body()
            try db.execute("RELEASE batch")
            return result
        } catch {
            rolledBack()
            guard db.inTransaction else { throw StoreTransactionLost("\(error)") }
            try? db.execute("ROLLBACK TO batch")
            try? db.execute("RELEASE batch")
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
