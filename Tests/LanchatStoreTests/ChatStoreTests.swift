import Glibc
import LanchatCore
@testable import LanchatStore
import Testing

func temporaryDirectory() -> String {
    var template = Array("/tmp/lanchat-store-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
}

func message(_ id: Int, room: String = "lab", sender: String = "s", timestamp: Int64? = nil, body: String = "hi") -> StoredMessage {
    StoredMessage(
        id: String(repeating: "0", count: 32 - String(id, radix: 16).count) + String(id, radix: 16), room: room, senderID: sender,
        senderName: "alice", sequence: Int64(id), timestamp: timestamp ?? Int64(1000 + id), kind: .text, body: body)
}

@Suite struct ChatStoreTests {
    /// A seal kept in a piece of a bulk write or in a savepoint that is undone is kept again by the next
    /// of its messages (`keepSeal` skips the seal's statements only while nothing was rolled back).
    @Test func aSealUndoneWithItsPieceOrSavepointIsKeptAgain() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        struct Undone: Error {}
        func seal(_ n: UInt8) -> StoredSeal {
            StoredSeal(
                id: String(repeating: "7", count: 31) + String(n), authorKey: [0x02] + [UInt8](repeating: n, count: 32),
                signature: [UInt8](repeating: 1, count: 64), leafCount: 4, root: [UInt8](repeating: n, count: 32))
        }
        func sealed(_ id: Int, by seal: StoredSeal) -> StoredMessage {
            var stored = message(id)
            stored.sealProof = [UInt8](repeating: 0x77, count: 16) + [0, UInt8(id % 4), 0]
            stored.seal = seal
            return stored
        }
        #expect(throws: Undone.self) {
            try store.bulk {
                try store.insert(sealed(1, by: seal(1)), now: 0)
                throw Undone()
            }
        }
        try store.bulk { try store.insert(sealed(2, by: seal(1)), now: 0) }
        try store.commitBulk()
        try store.transaction {
            #expect(throws: Undone.self) {
                try store.savepoint {
                    try store.insert(sealed(3, by: seal(2)), now: 0)
                    throw Undone()
                }
            }
            try store.insert(sealed(4, by: seal(2)), now: 0)
        }
        let exported = try store.export(room: "lab", since: 0, limit: 10)
        #expect(exported.map(\.sequence) == [2, 4])
        #expect(exported.map(\.seal) == [seal(1), seal(2)])
    }

    /// Pieces of a bulk write share one transaction until something commits it; a piece that fails is
    /// undone alone; a transaction commits the bulk write with its own.
    @Test func bulkPiecesShareACommit() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        let store = try ChatStore(path: path)
        struct Refused: Error {}
        try store.bulk { try store.insert(message(1), now: 0) }
        #expect(store.bulkIsOpen)
        #expect(throws: Refused.self) {
            try store.bulk {
                try store.insert(message(2), now: 0); throw Refused()
            }
        }
        #expect(store.bulkIsOpen)
        store.checkpoint()  // (not inside a transaction: skipped)
        try store.transaction { try store.insert(message(3), now: 0) }
        #expect(!store.bulkIsOpen)
        #expect(try store.history(room: "lab", limit: 10).map(\.sequence) == [1, 3])
        try store.bulk { try store.insert(message(4), now: 0) }
        #expect(throws: Refused.self) {
            try store.transaction {
                try store.insert(message(6), now: 0); throw Refused()
            }
        }
        #expect(store.bulkIsOpen)  // the failed transaction undid only its own writes
        #expect(try store.history(room: "lab", limit: 10).map(\.sequence) == [1, 3, 4])
        // A commit that need not sync cannot change the setting inside the bulk write: it syncs, and commits both.
        try store.transaction(durable: false) { try store.insert(message(7), now: 0) }
        #expect(!store.bulkIsOpen && store.synchronousSetting == 2)
        try store.bulk { try store.insert(message(8), now: 0) }
        try store.commitBulk()
        #expect(!store.bulkIsOpen)
        try store.bulk { try store.insert(message(5), now: 0) }
        store.close()  // commits it
        #expect(try ChatStore(path: path).history(room: "lab", limit: 10).map(\.sequence) == [1, 3, 4, 5, 7, 8])
    }

    /// A history file made before the word index gets it built when opened.
    @Test func anOlderFileIsIndexedWhenOpened() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        do {
            let store = try ChatStore(path: path)
            try store.insert(message(1, body: "kept from before"), now: 0)
            store.close()
        }
        let raw = try SQLiteDatabase(path: path)
        try raw.execute("DROP TRIGGER messages_fts_forget; DROP TABLE messages_fts; DROP TABLE messages_unindexed;")
        raw.close()
        let store = try ChatStore(path: path)
        #expect(try store.search(room: nil, limit: 10, filter: .init(words: "before")).map(\.body) == ["kept from before"])
        try store.insert(message(2, body: "and after"), now: 0)
        #expect(try store.search(room: nil, limit: 10, filter: .init(words: "after")).count == 1)
    }

    /// Stored messages wait for the word index (not in their commit): it takes them in pieces, not
    /// while a bulk write is open, and a search brings it up to date first. Deleting a message, indexed
    /// or waiting, leaves the index whole (FTS5's own check), and what waits survives a reopening.
    @Test func theWordIndexCatchesUpInPiecesAndBeforeASearch() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        var store = try ChatStore(path: path)
        for id in 1...5 { try store.insert(message(id, body: "word \(id)"), now: 0) }
        let waiting = { (store: ChatStore) throws -> Int64 in try store.databaseForTests.query("SELECT count(*) FROM messages_unindexed").first![0].int }
        #expect(try waiting(store) == 5)
        #expect(try store.indexWaiting(limit: 2) == true)
        #expect(try waiting(store) == 3)
        try store.bulk { try store.insert(message(6, body: "word 6"), now: 0) }
        #expect(try store.indexWaiting(limit: 100) == true && waiting(store) == 4)  // nothing while the bulk write is open
        try store.commitBulk()
        #expect(try store.indexWaiting(limit: 100) == false && waiting(store) == 0)
        #expect(try store.indexWaiting(limit: 100) == false)
        try store.insert(message(7, body: "word 7"), now: 0)
        try store.insert(message(8, body: "word 8"), now: 0)
        store.close()
        store = try ChatStore(path: path)
        #expect(try waiting(store) == 2)
        // One indexed, one waiting, deleted (lanchat deletes none itself; the triggers must keep the index whole).
        try store.databaseForTests.execute("DELETE FROM messages WHERE sequence IN (3, 8)")
        #expect(try store.search(room: nil, limit: 10, filter: .init(words: "word")).map(\.sequence) == [1, 2, 4, 5, 6, 7])
        #expect(try waiting(store) == 0)
        try store.databaseForTests.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
        // The highest rowid was deleted: the next message takes it again, and is indexed as itself.
        try store.insert(message(9, body: "reused rowid"), now: 0)
        #expect(try store.search(room: nil, limit: 10, filter: .init(words: "reused")).map(\.sequence) == [9])
        // A search while an import's bulk write is open commits it and finds what it stored.
        try store.bulk { try store.insert(message(10, body: "imported word"), now: 0) }
        #expect(try store.search(room: nil, limit: 10, filter: .init(words: "imported")).map(\.sequence) == [10])
        #expect(!store.bulkIsOpen)
        try store.databaseForTests.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
        store.close()
    }

    /// A received history is stored many messages at a time: each once (by id and author), the count of
    /// new ones returned, and every new one waits for the word index, even one whose rowid is not past
    /// the largest (SQLite picks a free one once the largest is 2^63 - 1).
    @Test func messagesStoredTogetherAreEachStoredOnceAndWaitForTheIndex() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        let waiting = { try store.databaseForTests.query("SELECT count(*) FROM messages_unindexed").first![0].int }
        try store.insert(message(2, body: "word two"), now: 0)
        #expect(try store.bulk { try store.insert(contentsOf: [], now: 0) } == 0)
        let batch = (1...5).map { message($0, body: "word \($0)") } + [message(3, sender: "t", body: "word three by t")]
        #expect(try store.bulk { try store.insert(contentsOf: batch, now: 0) } == 5)  // 2 was there
        #expect(try store.bulk { try store.insert(contentsOf: batch, now: 0) } == 0)
        try store.commitBulk()
        #expect(try waiting() == 6)
        #expect(try store.history(room: "lab", limit: 10).map(\.sequence) == [1, 2, 3, 3, 4, 5])
        // Rowids past 2^63 - 1 do not exist: SQLite picks free ones below it.
        try store.databaseForTests.execute(
            "INSERT INTO messages (rowid, id, room, sender_id, sender_name, sequence, timestamp, kind, body, stored_at) "
                + "VALUES (9223372036854775807, 'ff', 'other', 's', 'alice', 99, 1, 0, 'last rowid', 0); "
                + "INSERT INTO messages_unindexed (message_rowid) VALUES (9223372036854775807)")
        #expect(try store.insert(contentsOf: [message(6, body: "word six"), message(7, body: "word seven")], now: 0) == 2)
        #expect(try waiting() == 9)
        #expect(try store.search(room: "lab", limit: 10, filter: .init(words: "word")).map(\.sequence) == [1, 2, 3, 3, 4, 5, 6, 7])
        #expect(try waiting() == 0)
        try store.databaseForTests.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
    }

    /// Issue 28: messages are keyed by id and author, so a record under another author cannot take a
    /// genuine message's id and have it dropped as a duplicate. A file keyed by id alone (every lanchatd
    /// before) is made again so, its rows, rowids and word index kept; the outbox (our own messages) reads
    /// the first message stored under each id.
    @Test func messagesAreKeyedByIdAndAuthorAndAnOlderFileIsMadeSo() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        do {
            let store = try ChatStore(path: path)
            try store.insert(message(1, body: "indexed before"), now: 0)
            try store.insert(message(2, body: "queued before"), now: 0)
            try store.enqueue(peerID: "bob", messageID: message(2).id)
            _ = try store.indexWaiting(limit: 10)
            store.close()
        }
        // The table as every earlier lanchatd made it: keyed by id alone.
        let raw = try SQLiteDatabase(path: path)
        try raw.execute(
            """
            CREATE TABLE old_messages (id TEXT PRIMARY KEY, room TEXT NOT NULL, sender_id TEXT NOT NULL, sender_name TEXT NOT NULL,
                sequence INTEGER NOT NULL, timestamp INTEGER NOT NULL, kind INTEGER NOT NULL, body TEXT NOT NULL, stored_at INTEGER NOT NULL,
                author_key TEXT NOT NULL DEFAULT '', signature TEXT NOT NULL DEFAULT '', direct INTEGER NOT NULL DEFAULT 0);
            INSERT INTO old_messages (rowid, id, room, sender_id, sender_name, sequence, timestamp, kind, body, stored_at)
                SELECT rowid, id, room, sender_id, sender_name, sequence, timestamp, kind, body, stored_at FROM messages;
            DROP TABLE messages;
            ALTER TABLE old_messages RENAME TO messages;
            """)
        #expect(try raw.query("PRAGMA table_info(messages)").filter { $0[5].int > 0 }.map { $0[1].string } == ["id"])
        raw.close()
        let store = try ChatStore(path: path)
        #expect(try store.databaseForTests.query("PRAGMA table_info(messages)").filter { $0[5].int > 0 }.map { $0[1].string } == ["id", "sender_id"])
        #expect(try store.search(room: nil, limit: 10, filter: .init(words: "indexed")).map(\.sequence) == [1])
        // A record of another author under message 2's id is stored beside it; the same author's is a duplicate.
        #expect(try store.insert(message(2, sender: "dave", body: "a record under that id"), now: 1))
        #expect(try !store.insert(message(2, body: "queued before"), now: 1))
        #expect(try store.history(room: "lab", limit: 10).map(\.body).sorted() == ["a record under that id", "indexed before", "queued before"])
        #expect(try store.outbox(peerID: "bob").map(\.body) == ["queued before"])
        #expect(try store.outboxEntries().count == 1)
        #expect(try store.search(room: nil, limit: 10, filter: .init(words: "record")).map(\.senderID) == ["dave"])
        try store.databaseForTests.execute("DELETE FROM messages WHERE sequence = 1")
        try store.databaseForTests.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
        #expect(try store.search(room: nil, limit: 10, filter: .init(words: "indexed")).isEmpty)
        store.close()
    }

    /// A record of another author under one of our ids, in another room, does not take our queued message
    /// out of the outbox when that other room's queue is dropped (the outbox is of our own messages).
    @Test func droppingARoomsQueueLeavesOurMessageOfAnotherRoomUnderTheSameId() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        try store.insert(message(7, room: "y", sender: "me"), now: 0)
        try store.enqueue(peerID: "v", messageID: message(7).id)
        try store.insert(message(7, room: "x", sender: "dave"), now: 1)
        try store.dropOutbox(peerID: "v", room: "x")
        try store.dropOutbox(peerID: nil, room: "x")
        #expect(try store.outbox(peerID: "v").map(\.room) == ["y"])
        try store.dropOutbox(peerID: "v", room: "y")
        #expect(try store.outbox(peerID: "v").isEmpty)
    }

    /// A file of schema 3 may hold messages its index lacks (a lanchatd of schema 3 from before the
    /// index stored them without): opened, its index is made again from every message.
    @Test func aSchema3FileHasItsIndexMadeAgain() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        do {
            let store = try ChatStore(path: path)
            try store.insert(message(1, body: "indexed before"), now: 0)
            _ = try store.indexWaiting(limit: 10)
            store.close()
        }
        let raw = try SQLiteDatabase(path: path)
        try raw.execute(
            """
            DROP TRIGGER messages_fts_forget; DROP TABLE messages_unindexed;
            CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
                INSERT INTO messages_fts (messages_fts, rowid, body) VALUES ('delete', old.rowid, old.body);
            END;
            INSERT INTO messages (id, room, sender_id, sender_name, sequence, timestamp, kind, body, stored_at)
                VALUES ('\(String(repeating: "e", count: 32))', 'lab', 's', 'alice', 2, 900, 0, 'stored unindexed', 0);
            PRAGMA user_version = 3;
            """)
        raw.close()
        let store = try ChatStore(path: path)
        #expect(try store.search(room: nil, limit: 10, filter: .init(words: "unindexed")).map(\.sequence) == [2])
        #expect(try store.search(room: nil, limit: 10, filter: .init(words: "indexed")).map(\.sequence) == [1])
        try store.databaseForTests.execute("DELETE FROM messages WHERE sequence = 2")
        try store.databaseForTests.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
        #expect(try store.databaseForTests.query("PRAGMA user_version").first![0].int == 4)
        store.close()
    }

    /// The word index's first lanchatd kept the index by an insert trigger, and makes it again when it
    /// opens the file; a newer one drops it (it indexes rows itself), so no row is indexed twice.
    @Test func theOldInsertTriggerIsDroppedAndNoRowIsIndexedTwice() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        do {
            let store = try ChatStore(path: path)
            try store.insert(message(1, body: "word from the newer one"), now: 0)
            store.close()
        }
        let raw = try SQLiteDatabase(path: path)
        try raw.execute(
            """
            CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
                INSERT INTO messages_fts (rowid, body) VALUES (new.rowid, new.body);
            END;
            INSERT INTO messages (id, room, sender_id, sender_name, sequence, timestamp, kind, body, stored_at)
                VALUES ('\(String(repeating: "d", count: 32))', 'lab', 's', 'alice', 2, 900, 0, 'word from the older one', 0);
            """)
        raw.close()
        let store = try ChatStore(path: path)
        try store.insert(message(3, body: "word again from the newer one"), now: 0)
        #expect(try store.search(room: nil, limit: 10, filter: .init(words: "word")).count == 3)
        #expect(try store.search(room: nil, limit: 10, filter: .init(words: "older")).count == 1)
        #expect(try store.search(room: nil, limit: 10, filter: .init(words: "again")).count == 1)
        store.close()
        let check = try SQLiteDatabase(path: path)
        #expect(try check.query("SELECT 1 FROM sqlite_master WHERE name = 'messages_fts_insert'").isEmpty)
        // A row indexed twice would make FTS5's own check fail.
        try check.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
        check.close()
    }

    @Test func insertIsIdempotentByID() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        #expect(try store.insert(message(1), now: 0))
        #expect(try !store.insert(message(1, body: "changed"), now: 0))
        #expect(try store.history(room: "lab", limit: 10).map(\.body) == ["hi"])
    }

    @Test func historyIsOrderedAndLimitedToTheLatest() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        try store.transaction {
            for id in (1...50).reversed() { try store.insert(message(id), now: 0) }
            try store.insert(message(99, room: "other"), now: 0)
        }
        let last = try store.history(room: "lab", limit: 5)
        #expect(last.map(\.sequence) == [46, 47, 48, 49, 50])
        #expect(try store.history(room: nil, limit: 100).count == 51)
        #expect(try store.lastSequence(room: "lab", sender: "s") == 50)
    }

    @Test func survivesReopenAndKeepsOutboxOrder() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        do {
            let store = try ChatStore(path: path)
            try store.transaction {
                for id in 1...3 {
                    try store.insert(message(id), now: 0)
                    try store.enqueue(peerID: "bob", messageID: message(id).id)
                }
            }
            try store.acknowledge(peerID: "bob", messageID: message(2).id)
            try store.saveRoom("lab", members: [StoredMember(peerID: "bob", name: "bob@h2", port: 7000, addresses: ["198.18.0.12", "fe80::1%lan0"])], now: 1)
        }
        let store = try ChatStore(path: path)
        #expect(try store.outbox(peerID: "bob").map(\.sequence) == [1, 3])
        #expect(try store.outboxCounts() == ["bob": 2])
        let rooms = try store.rooms()
        #expect(rooms.count == 1 && rooms[0].members[0].addresses == ["198.18.0.12", "fe80::1%lan0"])
        try store.dropOutbox(peerID: "bob", room: "lab")
        #expect(try store.outbox(peerID: "bob").isEmpty)
        try store.deleteRoom("lab")
        #expect(try store.rooms().isEmpty)
    }

    @Test func failedTransactionRollsBack() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try store.transaction {
                try store.insert(message(1), now: 0)
                throw Boom()
            }
        }
        #expect(try store.messageCount() == 0)
    }

    @Test func hostileTextIsStoredVerbatim() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        let nasty = "'); DROP TABLE messages; --\n\u{1F600}\t\"quoted\""
        try store.insert(message(1, body: nasty), now: 0)
        #expect(try store.history(room: "lab", limit: 1).first?.body == nasty)
    }

    @Test func aFileThatIsNotADatabaseIsAClearError() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        let fd = open(path, O_WRONLY | O_CREAT, 0o600)
        _ = "this is not sqlite, just text that is long enough to be read as a header......".withCString { write(fd, $0, 80) }
        close(fd)
        #expect(throws: ChatStore.Error.self) { try ChatStore(path: path) }
        // Nothing was overwritten.
        var info = stat()
        stat(path, &info)
        #expect(info.st_size == 80)
    }

    @Test func fileIsPrivate() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        _ = try ChatStore(path: path)
        var info = stat()
        stat(path, &info)
        #expect(info.st_mode & 0o777 == 0o600)
    }
}
