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
    private var depth = 0
    /// `SessionStore.messagesChanged`: bumped at each insert and each rollback.
    private var changes: UInt64 = 0
    public var messagesChanged: UInt64 {
        _ = bulkStillOpen()  // (SQLite may have rolled an open bulk write back by itself)
        return changes
    }
    /// A bulk write's transaction is open (`bulk`).
    private var bulkOpen = false

    public typealias Error = SQLiteDatabase.Error

    public convenience init(path: String) throws(Error) {
        try self.init(path: path, networkFileSystem: Self.onNetworkFileSystem(path))
    }

    /// `networkFileSystem`: whether `path` is on one (tests say so for a local file).
    init(path: String, networkFileSystem: Bool) throws(Error) {
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
            CREATE TABLE IF NOT EXISTS outbox (
                seq INTEGER PRIMARY KEY AUTOINCREMENT, peer_id TEXT NOT NULL, message_id TEXT NOT NULL,
                UNIQUE (peer_id, message_id));
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
        try db.execute("BEGIN IMMEDIATE")
        do {
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
            try db.execute("COMMIT")
        } catch {
            try? db.execute("ROLLBACK")
            throw error
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
        for (column, type) in [("author_key", "TEXT NOT NULL DEFAULT ''"), ("signature", "TEXT NOT NULL DEFAULT ''"), ("direct", "INTEGER NOT NULL DEFAULT 0")]
        where !messageColumns.contains(column) {
            try db.execute("ALTER TABLE messages ADD COLUMN \(column) \(type)")
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
        // The files shared in rooms (`lanchat files`): a few among a million messages, found without a scan.
        try db.execute("CREATE INDEX IF NOT EXISTS messages_files ON messages (timestamp) WHERE kind = 1")
        try db.execute("PRAGMA user_version = 4")
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
        do {
            let result = try body()
            depth = 0
            try db.execute("COMMIT")
            return result
        } catch {
            depth = 0
            try? db.execute("ROLLBACK")
            changes &+= 1
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
            changes &+= 1
            throw error
        }
    }

    /// Whether the bulk write's transaction is still open: SQLite rolls a whole transaction back by
    /// itself after some errors (disk full, I/O error, out of memory), and then nothing is open.
    private func bulkStillOpen() -> Bool {
        if bulkOpen, !db.inTransaction {
            bulkOpen = false
            changes &+= 1  // (rolled back by SQLite)
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
            changes &+= 1
            try? db.execute("RELEASE piece")
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

    /// Checkpoints and closes the file; the store is unusable afterwards.
    public func close() {
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

    // MARK: Messages

    /// Stores a message unless one with its id and author is already there. Returns whether it was new.
    @discardableResult
    public func insert(_ message: StoredMessage, now: Int64) throws(Error) -> Bool {
        try db.query(
            "INSERT OR IGNORE INTO messages (id, room, sender_id, sender_name, sequence, timestamp, kind, body, stored_at, author_key, signature, direct) "
                + "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                .text(message.id), .text(message.room), .text(message.senderID), .text(message.senderName), .integer(message.sequence),
                .integer(message.timestamp), .integer(message.kind.rawValue), .text(message.body), .integer(now),
                .text(Hex.string(message.authorKey)), .text(Hex.string(message.signature)),
                .integer(message.direct ? 1 : 0),
            ])
        guard db.changes == 1 else { return false }
        changes &+= 1
        try db.query("INSERT INTO messages_unindexed (message_rowid) VALUES (last_insert_rowid())")
        return true
    }

    public func indexWaiting(limit: Int) throws -> Bool {
        guard depth == 0, !bulkStillOpen() else { return true }
        guard !(try db.query("SELECT 1 FROM messages_unindexed LIMIT 1")).isEmpty else { return false }
        // Not synced: the index and the waiting list change together, and either can be redone.
        try transaction(durable: false) {
            let first = "SELECT message_rowid FROM messages_unindexed ORDER BY message_rowid LIMIT ?"
            try db.query(
                "INSERT INTO messages_fts (rowid, body) SELECT m.rowid, m.body FROM messages m WHERE m.rowid IN (\(first)) ORDER BY m.rowid",
                [.integer(Int64(limit))])
            try db.query("DELETE FROM messages_unindexed WHERE message_rowid IN (\(first))", [.integer(Int64(limit))])
        }
        return !(try db.query("SELECT 1 FROM messages_unindexed LIMIT 1")).isEmpty
    }

    public func contains(messageID: String) throws(Error) -> Bool {
        !(try db.query("SELECT 1 FROM messages WHERE id = ?", [.text(messageID)])).isEmpty
    }

    /// The last `limit` messages (of `room`, or all), oldest first.
    public func history(room: String?, limit: Int) throws(Error) -> [StoredMessage] {
        let columns = Self.messageColumns
        let rows: [SQLiteDatabase.Row]
        if let room {
            rows = try db.query(
                "SELECT \(columns) FROM messages WHERE room = ? ORDER BY timestamp DESC, sender_id DESC, sequence DESC LIMIT ?",
                [.text(room), .integer(Int64(limit))])
        } else {
            rows = try db.query(
                "SELECT \(columns) FROM messages ORDER BY timestamp DESC, sender_id DESC, sequence DESC LIMIT ?", [.integer(Int64(limit))])
        }
        return rows.reversed().map(Self.message)
    }

    /// The last `limit` messages `filter` keeps, oldest first. With words, the index (`messages_fts`)
    /// drives: each word of the query, quoted (so nothing in it is query syntax), must begin a word of
    /// the message, and the index yields matches newest stored first, so the search stops at `limit`
    /// (the last stored matches: a history imported later counts as later). Without words, by time.
    public func search(room: String?, limit: Int, filter: HistoryFilter) throws(Error) -> [StoredMessage] {
        var source = "messages m"
        var order = "m.timestamp DESC, m.sender_id DESC, m.sequence DESC"
        var conditions: [String] = []
        var values: [SQLiteDatabase.Value] = []
        if let words = filter.words {
            // The index first takes what waits for it (an import's bulk write is committed for that; not
            // inside a transaction, where nothing can be committed).
            do {
                if depth == 0 {
                    try commitBulk()
                    while try indexWaiting(limit: 50_000) {}
                }
            } catch let error as Error {
                throw error
            } catch {
                throw Error(description: "\(error)")
            }
            // Quoted, so nothing in it is query syntax. A term SQLite's tokenizer cuts further (a vowel
            // sign in Devanagari, a joiner) becomes a phrase, which the index (with positions) answers.
            let terms = HistoryFilter.tokens(words).map { "\"" + $0.replacing("\"", with: "\"\"") + "\"*" }
            guard !terms.isEmpty else { return [] }  // no word in it (only punctuation): nothing matches
            do {
                // CROSS JOIN keeps the index as the outer loop (SQLite does not reorder it).
                source = "messages_fts f CROSS JOIN messages m ON m.rowid = f.rowid"
                order = "f.rowid DESC"
                conditions.append("messages_fts MATCH ?")
                values.append(.text(terms.joined(separator: " ")))
            }
        }
        if let room {
            conditions.append("m.room = ?")
            values.append(.text(room))
        }
        if let sender = filter.sender {
            conditions.append("(m.sender_name = ? OR (length(?) >= 4 AND substr(m.sender_id, 1, length(?)) = ?))")
            values += [.text(sender), .text(sender), .text(sender), .text(sender)]
        }
        if let since = filter.since {
            conditions.append("m.timestamp >= ?")
            values.append(.integer(since))
        }
        if let kind = filter.kind {
            // A literal, not a parameter: SQLite uses the partial index `messages_files` only so.
            conditions.append("m.kind = \(kind.rawValue)")
        }
        if let suffix = filter.idSuffix {
            // (Read among the rows the other conditions leave: the room's files, by `messages_files`.)
            conditions.append("substr(m.id, -?) = ?")
            values += [.integer(Int64(suffix.utf8.count)), .text(suffix)]
        }
        if let prefix = filter.bodyPrefix {
            conditions.append("substr(m.body, 1, ?) = ?")
            values += [.integer(Int64(prefix.unicodeScalars.count)), .text(prefix)]  // (SQLite counts code points)
        }
        let clause = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
        let rows = try db.query(
            "SELECT \(Self.messageColumns(prefix: "m.")) FROM \(source)\(clause) "
                + "ORDER BY \(order) LIMIT ?",
            values + [.integer(Int64(limit))])
        return rows.map(Self.message).sorted { ($0.timestamp, $0.senderID, $0.sequence, $0.id) < ($1.timestamp, $1.senderID, $1.sequence, $1.id) }
    }

    /// The columns `message(_:)` reads, in its order.
    static let messageColumns = messageColumns(prefix: "")

    static func messageColumns(prefix: String) -> String {
        ["id", "room", "sender_id", "sender_name", "sequence", "timestamp", "kind", "body", "author_key", "signature", "direct"]
            .map { prefix + $0 }.joined(separator: ", ")
    }

    static func message(_ row: SQLiteDatabase.Row) -> StoredMessage {
        StoredMessage(
            id: row[0].string, room: row[1].string, senderID: row[2].string, senderName: row[3].string, sequence: row[4].int,
            timestamp: row[5].int, kind: StoredMessage.Kind(rawValue: row[6].int) ?? .text, body: row[7].string,
            authorKey: bytes(hex: row[8].string), signature: bytes(hex: row[9].string), direct: row[10].int != 0)
    }

    /// The bytes of lowercase hex as `Hex.string` writes it (anything else: none, read as unsigned).
    static func bytes(hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return [] }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return [] }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    /// What a newcomer (or a member, for what it lacks) is sent: the last `limit` text and file messages of
    /// `room` from `since` on, oldest first; not those sent to some members only (`direct`).
    public func export(room: String, since: Int64, limit: Int) throws(Error) -> [StoredMessage] {
        try db.query(Self.exportSQL, [.text(room), .integer(since), .integer(Int64(limit))]).reversed().map(Self.message)
    }

    /// `export` in pieces: each a read through the same index from the cursor on, so a history of a
    /// million messages is never held whole (nor its rows all read at once on the event loop). The first
    /// piece starts at the `limit`th newest (one walk of the index), or at `since` if there are fewer.
    public func exportPage(
        room: String, since: Int64, limit: Int, after cursor: ExportCursor?, count: Int
    ) throws(Error)
        -> (messages: [StoredMessage], next: ExportCursor?)
    {
        var start: ExportCursor
        if let cursor {
            start = cursor
        } else {
            guard limit > 0 else { return ([], nil) }
            let first = try db.query(Self.exportStartSQL, [.text(room), .integer(since), .integer(Int64(limit - 1))]).first
            // Just before the first (the rowid breaks ties, so nothing lies between), or before anything since `since`.
            start =
                first.map {
                    ExportCursor(
                        timestamp: $0[0].int, senderID: $0[1].string, sequence: $0[2].int,
                        tiebreak: $0[3].int - 1, remaining: limit)
                }
                ?? ExportCursor(timestamp: since, senderID: "", sequence: .min, tiebreak: .min, remaining: limit)
        }
        let rows = try db.query(
            Self.exportPageSQL,
            [
                .text(room), .integer(start.timestamp), .text(start.senderID), .integer(start.sequence),
                .integer(start.tiebreak), .integer(Int64(min(count, start.remaining))),
            ])
        guard let last = rows.last else { return ([], nil) }
        let messages = rows.map { Self.message(Array($0.dropLast())) }
        let next = ExportCursor(
            timestamp: last[5].int, senderID: last[2].string, sequence: last[4].int,
            tiebreak: last[last.count - 1].int, remaining: start.remaining - rows.count)
        return (messages, next.remaining > 0 && rows.count == count ? next : nil)
    }

    static let exportStartSQL =
        "SELECT timestamp, sender_id, sequence, rowid FROM messages WHERE room = ? AND kind != 2 AND direct = 0 "
        + "AND timestamp >= ? ORDER BY timestamp DESC, sender_id DESC, sequence DESC, rowid DESC LIMIT 1 OFFSET ?"
    static let exportPageSQL =
        "SELECT \(messageColumns), rowid FROM messages WHERE room = ? AND kind != 2 AND direct = 0 "
        + "AND (timestamp, sender_id, sequence, rowid) > (?, ?, ?, ?) ORDER BY timestamp, sender_id, sequence, rowid LIMIT ?"

    /// (These read through the partial index `messages_shared`; a test checks the plans. Messages alike
    /// in time, author and sequence are told apart by rowid, as in `exportPage`.)
    static let exportSQL =
        "SELECT \(messageColumns) FROM messages WHERE room = ? AND kind != 2 AND direct = 0 AND timestamp >= ? "
        + "ORDER BY timestamp DESC, sender_id DESC, sequence DESC, rowid DESC LIMIT ?"
    static let recentSequencesSQL =
        "SELECT sender_id, sequence FROM messages WHERE room = ? AND kind != 2 AND direct = 0 "
        + "ORDER BY timestamp DESC, sender_id DESC, sequence DESC LIMIT ?"

    /// The newest timestamp of a text or file message in `room` (0 if none): what a newcomer already has.
    public func latestTimestamp(room: String) throws(Error) -> Int64 {
        try db.query("SELECT max(timestamp) FROM messages WHERE room = ? AND kind != 2", [.text(room)]).first?.first?.int ?? 0
    }

    public func messageCount() throws(Error) -> Int {
        Int(try db.query("SELECT count(*) FROM messages").first?.first?.int ?? 0)
    }

    /// The last sequence `sender` used in each room it wrote in (notices, kind 2, have their own count):
    /// a restarted daemon continues after it.
    public func lastSequences(sender: String) throws(Error) -> [String: Int64] {
        var result: [String: Int64] = [:]
        for row in try db.query("SELECT room, max(sequence) FROM messages WHERE sender_id = ? AND kind != 2 GROUP BY room", [.text(sender)]) {
            result[row[0].string] = row[1].int
        }
        return result
    }

    /// The highest sequence `sender` used in `room` (0 if none).
    public func lastSequence(room: String, sender: String) throws(Error) -> Int64 {
        try db.query("SELECT max(sequence) FROM messages WHERE room = ? AND sender_id = ? AND kind != 2", [.text(room), .text(sender)]).first?.first?.int ?? 0
    }

    public func recentSequences(room: String, limit: Int) throws(Error) -> [(author: String, sequence: Int64)] {
        try db.query(Self.recentSequencesSQL, [.text(room), .integer(Int64(limit))]).map { ($0[0].string, $0[1].int) }
    }
}
