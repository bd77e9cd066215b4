import LanchatCore

/// The file's shape: made when it is new, brought up to date when an older lanchatd wrote it (each change
/// in one transaction, or added without a new schema number where an older lanchatd can still use it).
extension ChatStore {
    /// Makes or upgrades the schema of the file at `path` (`init`, before any other use).
    func prepareSchema(path: String) throws(Error) {
        let version = try db.query("PRAGMA user_version").first?.first?.int ?? 0
        if version > Self.schemaVersion {
            throw Error(description: "\(path) was written by a newer lanchatd (schema \(version)); this one knows \(Self.schemaVersion)")
        }
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS messages (\(Self.messagesTableColumns));
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
        // A room's messages by time, in two partial indexes that together hold each message once: the shared
        // ones (`messages_shared`: what the relay and newcomers' histories read, `export` and
        // `recentSequences`; without it, a room whose latest 100,000 messages were direct made each
        // SYNC_REQUEST skip them row by row, about 100 ms) and the rest, notices and direct messages
        // (`messages_private`). A person's history reads both and merges them (`roomArms`). Until
        // 2026-11-29 an index of all of a room's messages (`messages_by_room`) held every shared message a
        // second time: one more entry to write for each message stored, and one more page in each
        // commit. It is dropped here, without a new schema number: an older lanchatd makes it again when it
        // opens the file (its `CREATE INDEX IF NOT EXISTS`), and this one drops it again.
        try db.execute(
            """
            CREATE INDEX IF NOT EXISTS messages_shared ON messages (room, timestamp, sender_id, sequence) WHERE \(Self.roomArms[0]);
            CREATE INDEX IF NOT EXISTS messages_private ON messages (room, timestamp, sender_id, sequence) WHERE \(Self.roomArms[1]);
            DROP INDEX IF EXISTS messages_by_room;
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
}
