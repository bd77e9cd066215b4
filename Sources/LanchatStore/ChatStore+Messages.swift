/// The messages table's shape, and bringing an older file to it.
extension ChatStore {
    /// The messages table: a message is keyed by its id and its author (`PRIMARY KEY (id, sender_id)`), so
    /// that a record under another author cannot take a genuine message's id first and have it dropped
    /// as a duplicate when it arrives (a hostile inviter's history did that).
    static let messagesTableColumns = """
        id TEXT NOT NULL, room TEXT NOT NULL, sender_id TEXT NOT NULL, sender_name TEXT NOT NULL,
        sequence INTEGER NOT NULL, timestamp INTEGER NOT NULL, kind INTEGER NOT NULL, body TEXT NOT NULL,
        stored_at INTEGER NOT NULL, author_key TEXT NOT NULL DEFAULT '', signature TEXT NOT NULL DEFAULT '',
        direct INTEGER NOT NULL DEFAULT 0, seal_id TEXT NOT NULL DEFAULT '', seal_proof TEXT NOT NULL DEFAULT '',
        recipients TEXT NOT NULL DEFAULT '', PRIMARY KEY (id, sender_id)
        """

    /// The seals of stored messages (wire version 4), each once under its author and id (hex, as the
    /// messages' `sender_id` and `seal_id` name it), with what it signs: the key, the signature, the leaf
    /// count and the root, in `room` (what it was signed in: a message of another room is not its).
    /// `checked` 0: kept before its signature was checked (`StoredSeal.checked`); its messages are not
    /// exported until it is 1.
    static let sealsTableColumns = """
        author_id TEXT NOT NULL, seal_id TEXT NOT NULL, room TEXT NOT NULL, author_key TEXT NOT NULL, signature TEXT NOT NULL,
        leaf_count INTEGER NOT NULL, root TEXT NOT NULL, checked INTEGER NOT NULL DEFAULT 1, PRIMARY KEY (author_id, seal_id)
        """

    /// A file whose messages are keyed by id alone (every lanchatd before 2026-11-26) gets the table made
    /// again keyed by id and author, in one transaction, rows and rowids as they were (the word index
    /// refers to rowids), with the word index's trigger made again (its indexes are made after it, with
    /// every file's: `prepareSchema`). Without a new schema
    /// number: an older lanchatd reads and writes the new table as before.
    func keyMessagesByAuthor() throws(Error) {
        // `pk` (the 6th column of table_info) is 1 for id alone, 1 and 2 for id and sender_id.
        let keyed = try db.query("PRAGMA table_info(messages)").filter { $0[5].int > 0 }.map { $0[1].string }
        guard keyed == ["id"] else { return }
        let columns = "id, room, sender_id, sender_name, sequence, timestamp, kind, body, stored_at, author_key, signature, direct, seal_id, seal_proof"
        try migrating { () throws(Error) in
            try db.execute(
                """
                CREATE TABLE messages_by_author (\(Self.messagesTableColumns));
                INSERT INTO messages_by_author (rowid, \(columns)) SELECT rowid, \(columns) FROM messages;
                DROP TABLE messages;
                ALTER TABLE messages_by_author RENAME TO messages;
                CREATE TRIGGER IF NOT EXISTS messages_fts_forget AFTER DELETE ON messages BEGIN
                    INSERT INTO messages_fts (messages_fts, rowid, body)
                        SELECT 'delete', old.rowid, old.body WHERE NOT EXISTS (SELECT 1 FROM messages_unindexed WHERE message_rowid = old.rowid);
                    DELETE FROM messages_unindexed WHERE message_rowid = old.rowid;
                END;
                """)
        }
    }
}
