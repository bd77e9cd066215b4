import Glibc
import LanchatCore
@testable import LanchatStore
import Testing

@Suite struct ChatStoreSchemaTests {
    /// A history file of schema 2 (before transfers recorded which file they send) opens, gains the
    /// column, and keeps its rows.
    /// The outbox is keyed by (recipient, message), without a rowid: one page per message queued, one per
    /// acknowledgement. A file whose outbox was the older rowid table (`seq` AUTOINCREMENT and a unique
    /// index) is copied into it when opened, rows kept; an older lanchatd's statements still work on it.
    @Test func anOutboxOfTheOlderShapeIsKeyedByRecipientWhenOpened() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        do {
            let store = try ChatStore(path: path)
            for id in 1...4 { try store.insert(message(id), now: 0) }
            store.close()
        }
        let raw = try SQLiteDatabase(path: path)
        try raw.execute(
            """
            DROP TABLE outbox;
            CREATE TABLE outbox (
                seq INTEGER PRIMARY KEY AUTOINCREMENT, peer_id TEXT NOT NULL, message_id TEXT NOT NULL,
                UNIQUE (peer_id, message_id));
            INSERT INTO outbox (peer_id, message_id) VALUES ('bob', '\(message(3).id)'), ('bob', '\(message(1).id)'), ('carol', '\(message(2).id)');
            """)
        raw.close()
        let store = try ChatStore(path: path)
        let definition = try store.databaseForTests.query("SELECT sql FROM sqlite_master WHERE name = 'outbox'").first?.first?.string ?? ""
        #expect(definition.contains("WITHOUT ROWID") && !definition.contains("AUTOINCREMENT"))
        #expect(
            try store.databaseForTests.query("SELECT name FROM sqlite_master WHERE name LIKE 'outbox%' ORDER BY name").map { $0[0].string } == ["outbox", "outbox_marks"])
        // Kept, in the order the messages were sent.
        #expect(try store.outbox(peerID: "bob").map(\.sequence) == [1, 3])
        #expect(try store.outboxCounts() == ["bob": 2, "carol": 1])
        try store.enqueue(peerID: "bob", messageID: message(4).id)
        try store.enqueue(peerID: "bob", messageID: message(4).id)  // (once)
        try store.acknowledge(peerID: "bob", messageID: message(1).id)
        #expect(try store.outbox(peerID: "bob").map(\.sequence) == [3, 4])
        // What an older lanchatd runs (it orders by `seq`, now NULL) still works.
        try store.databaseForTests.execute("INSERT OR IGNORE INTO outbox (peer_id, message_id) VALUES ('dave', '\(message(2).id)')")
        #expect(try store.databaseForTests.query("SELECT message_id FROM outbox WHERE peer_id = 'dave' ORDER BY seq").count == 1)
        store.close()
        // Opened again: nothing to copy, nothing lost.
        let again = try ChatStore(path: path)
        #expect(try again.outboxCounts() == ["bob": 2, "carol": 1, "dave": 1])
        again.close()
    }

    @Test func aSchemaTwoFileIsUpgraded() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        let old = try SQLiteDatabase(path: path)
        try old.execute(
            """
            CREATE TABLE transfers (
                id TEXT PRIMARY KEY, outgoing INTEGER NOT NULL, peer_id TEXT NOT NULL, peer_name TEXT NOT NULL,
                path TEXT NOT NULL, name TEXT NOT NULL, size INTEGER NOT NULL, sha256 TEXT NOT NULL,
                modified INTEGER NOT NULL, room TEXT NOT NULL, state TEXT NOT NULL, sent_mark INTEGER NOT NULL,
                resent INTEGER NOT NULL, updated_at INTEGER NOT NULL);
            INSERT INTO transfers VALUES ('\(String(repeating: "a", count: 32))', 1, 'p', 'bob', '/f', 'f', 3, '', 0, '', 'active', 0, 0, 5);
            PRAGMA user_version = 2;
            """)
        old.close()
        let store = try ChatStore(path: path)
        let kept = try #require(try store.transfers().first)
        #expect(kept.name == "f" && kept.state == "active" && kept.fileIdentity == "")
        var next = kept
        next.id = String(repeating: "b", count: 32)
        next.fileIdentity = "2049:1234"
        try store.saveTransfer(next, now: 6)
        #expect(try store.transfer(id: next.id)?.fileIdentity == "2049:1234")
    }

    /// Signed envelopes (wire version 2): a message keeps its author's key and signature through every
    /// read (history, search, the newcomer's export, the outbox); a file from before them opens, and its
    /// messages read as unsigned.
    @Test func signaturesAreKeptAndAnOlderFileReadsAsUnsigned() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        do {
            let raw = try SQLiteDatabase(path: path)
            try raw.execute(
                """
                CREATE TABLE messages (
                    id TEXT PRIMARY KEY, room TEXT NOT NULL, sender_id TEXT NOT NULL, sender_name TEXT NOT NULL,
                    sequence INTEGER NOT NULL, timestamp INTEGER NOT NULL, kind INTEGER NOT NULL, body TEXT NOT NULL,
                    stored_at INTEGER NOT NULL);
                INSERT INTO messages VALUES ('\(String(repeating: "c", count: 32))', 'lab', 's', 'alice', 1, 900, 0, 'from version 1', 0);
                PRAGMA user_version = 3;
                """)
            raw.close()
        }
        let store = try ChatStore(path: path)
        var signed = message(2, body: "signed words")
        signed.authorKey = [0x02] + [UInt8](repeating: 0xAB, count: 32)
        signed.signature = (0..<64).map { UInt8($0) }
        try store.insert(signed, now: 0)
        try store.enqueue(peerID: "p", messageID: signed.id)
        let history = try store.history(room: "lab", limit: 10)
        #expect(history.map(\.body) == ["from version 1", "signed words"])
        #expect(!history[0].isSigned && history[0].authorKey.isEmpty)
        #expect(history[1] == signed)
        #expect(try store.search(room: nil, limit: 10, filter: .init(words: "signed")) == [signed])
        #expect(try store.export(room: "lab", since: 0, limit: 10).last == signed)
        #expect(try store.outbox(peerID: "p") == [signed])
        // The file gains the seal columns and table too: a sealed message is kept, and read after a reopen.
        var sealed = message(3, body: "sealed words")
        sealed.sealProof = [UInt8](repeating: 0x77, count: 19)
        sealed.seal = StoredSeal(
            id: String(repeating: "7", count: 32), authorKey: signed.authorKey, signature: signed.signature, leafCount: 1,
            root: [UInt8](repeating: 1, count: 32))
        try store.insert(sealed, now: 0)
        store.close()
        let reopened = try ChatStore(path: path)
        #expect(try reopened.history(room: "lab", limit: 10).dropLast().last == signed)
        #expect(try reopened.export(room: "lab", since: 0, limit: 10).last == sealed)
    }

    /// A file whose seals table has no `checked` column (every lanchatd before seals were checked off the
    /// event loop, all of whose seals were checked before they were kept) gains it, each seal checked.
    @Test func sealsOfAnOlderFileAreChecked() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        var sealed = message(1, body: "sealed before")
        sealed.sealProof = [UInt8](repeating: 0x77, count: 19)
        sealed.seal = StoredSeal(
            id: String(repeating: "7", count: 32), authorKey: [0x02] + [UInt8](repeating: 0xAB, count: 32), signature: [UInt8](repeating: 3, count: 64),
            leafCount: 1, root: [UInt8](repeating: 1, count: 32))
        do {
            let store = try ChatStore(path: path)
            try store.insert(sealed, now: 0)
            store.close()
            // As an older lanchatd made it: the same table without the column.
            let raw = try SQLiteDatabase(path: path)
            try raw.execute(
                """
                CREATE TABLE old_seals (author_id TEXT NOT NULL, seal_id TEXT NOT NULL, room TEXT NOT NULL, author_key TEXT NOT NULL,
                    signature TEXT NOT NULL, leaf_count INTEGER NOT NULL, root TEXT NOT NULL, PRIMARY KEY (author_id, seal_id)) WITHOUT ROWID;
                INSERT INTO old_seals SELECT author_id, seal_id, room, author_key, signature, leaf_count, root FROM seals;
                DROP TABLE seals;
                ALTER TABLE old_seals RENAME TO seals;
                """)
            #expect(try !raw.query("PRAGMA table_info(seals)").map { $0[1].string }.contains("checked"))
            raw.close()
        }
        let reopened = try ChatStore(path: path)
        #expect(try reopened.uncheckedSeals().isEmpty)
        #expect(try reopened.export(room: "lab", since: 0, limit: 10) == [sealed])
    }

    /// A seal's proof is stored as a blob (275 bytes at most, not 550 hex characters); a proof an earlier
    /// lanchatd wrote as hex text still reads as the same proof, in the history and in an export.
    @Test func aProofIsABlobAndAnOlderHexProofStillReads() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        var sealed = message(1, body: "sealed")
        sealed.sealProof = (0..<275).map { UInt8(truncatingIfNeeded: $0) }
        sealed.seal = StoredSeal(
            id: String(repeating: "7", count: 32), authorKey: [0x02] + [UInt8](repeating: 0xAB, count: 32), signature: [UInt8](repeating: 3, count: 64),
            leafCount: 1, root: [UInt8](repeating: 1, count: 32))
        var older = message(2, body: "sealed earlier")
        older.sealProof = [UInt8](repeating: 0x5C, count: 19)
        older.seal = sealed.seal
        let store = try ChatStore(path: path)
        try store.insert(sealed, now: 0)
        try store.insert(older, now: 0)
        let raw = store.databaseForTests
        #expect(try raw.query("SELECT typeof(seal_proof), length(seal_proof) FROM messages WHERE id = ?", [.text(sealed.id)]).first == [.text("blob"), .integer(275)])
        // As the lanchatd of 2026-11-28 wrote it.
        try raw.execute("UPDATE messages SET seal_proof = '\(String(repeating: "5c", count: 19))' WHERE id = '\(older.id)'")
        #expect(try raw.query("SELECT typeof(seal_proof) FROM messages WHERE id = ?", [.text(older.id)]).first == [.text("text")])
        #expect(try store.export(room: "lab", since: 0, limit: 10) == [sealed, older])
        #expect(try store.history(room: "lab", limit: 10).map(\.sealProof) == [sealed.sealProof, older.sealProof])
        // An unsealed message keeps the empty text.
        let plain = message(3, body: "plain")
        try store.insert(plain, now: 0)
        #expect(try raw.query("SELECT seal_proof FROM messages WHERE id = ?", [.text(plain.id)]).first == [.text("")])
    }

    /// A received history's pieces of messages each under a seal of its own (a member who sends one
    /// message at a time seals each alone) touch pages all over the seals' table: each piece's savepoint
    /// journals megabytes. They are stored whole (a journal kept in memory up to 1 MiB failed to spill,
    /// "database or disk is full").
    @Test func piecesOfMessagesUnderSealsOfTheirOwnAreStored() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        var stored = 0
        for piece in 0..<6 {
            let messages = (0..<6000).map { n -> StoredMessage in
                var sealed = message(piece * 6000 + n + 1, body: "alone")
                // Seal ids spread over the table as random ones are (the same on every run).
                let spread = UInt64(piece * 6000 + n + 1) &* 0x9E37_79B9_7F4A_7C15
                let id = String(spread, radix: 16)
                sealed.seal = StoredSeal(
                    id: String(repeating: "0", count: 32 - id.count) + id, authorKey: [0x02] + [UInt8](repeating: 0xAB, count: 32),
                    signature: [UInt8](repeating: 3, count: 64), leafCount: 1, root: [UInt8](repeating: UInt8(n & 0xff), count: 32))
                sealed.sealProof = [UInt8](repeating: 0x5C, count: 19)
                return sealed
            }
            stored += try store.bulk { try store.insert(contentsOf: messages, now: 0) }
        }
        try store.commitBulk()
        #expect(stored == 36_000)
        #expect(try store.databaseForTests.query("SELECT count(*) FROM seals").first == [.integer(36_000)])
    }

    /// A message whose place is its leaf index alone (2 bytes) comes with its seal's leaves: the store keeps
    /// them once, with the seal, also for a seal kept before without them; an export reads each such
    /// message with its seal's leaves (once a seal: the messages share them), other reads with the 2 bytes.
    /// Without leaves, a leaf index is stored as not sealed. An older file's seals table gains the column.
    @Test func aSealsLeavesAreKeptOnceAndItsMessagesKeepTheirLeafIndex() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        let leaves = (0..<3 * 32).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let seal = StoredSeal(
            id: String(repeating: "7", count: 32), authorKey: [0x02] + [UInt8](repeating: 0xAB, count: 32), signature: [UInt8](repeating: 3, count: 64),
            leafCount: 3, root: [UInt8](repeating: 1, count: 32))
        var withLeaves = seal
        withLeaves.leaves = leaves
        // The first with a whole proof (its seal kept without leaves), the next two by their leaf index.
        var first = message(1, body: "zero")
        first.sealProof = [UInt8](repeating: 0x5C, count: 16) + [0, 0, 2] + [UInt8](repeating: 9, count: 64)
        first.seal = seal
        var second = message(2, body: "one")
        second.sealProof = [0, 1]
        second.seal = withLeaves
        var third = message(3, body: "two")
        third.sealProof = [0, 2]
        third.seal = withLeaves
        var lost = message(4, body: "no leaves")
        lost.sealProof = [0, 1]
        lost.seal = StoredSeal(id: String(repeating: "8", count: 32), authorKey: seal.authorKey, signature: seal.signature, leafCount: 3, root: seal.root)
        let store = try ChatStore(path: path)
        for message in [first, second, third, lost] { try store.insert(message, now: 0) }
        let raw = store.databaseForTests
        #expect(try raw.query("SELECT length(leaves) FROM seals WHERE seal_id = ?", [.text(seal.id)]).first == [.integer(96)])
        #expect(try raw.query("SELECT length(seal_proof) FROM messages ORDER BY timestamp").map { $0[0] } == [.integer(83), .integer(2), .integer(2), .integer(0)])
        #expect(try raw.query("SELECT count(*) FROM seals").first == [.integer(1)])
        let exported = try store.export(room: "lab", since: 0, limit: 10)
        var unsealed = lost
        (unsealed.sealProof, unsealed.seal) = ([], nil)
        #expect(exported.map(\.sealProof) == [first.sealProof, [0, 1], [0, 2], []])
        #expect(exported.map { $0.seal?.leaves } == [[], leaves, leaves, nil])
        #expect(exported[3] == unsealed)
        #expect(try store.history(room: "lab", limit: 10).map(\.sealProof) == [first.sealProof, [0, 1], [0, 2], []])
        // A page of the export reads them the same way.
        let page = try store.exportPage(room: "lab", since: 0, limit: 10, after: nil, count: 10).messages
        #expect(page == exported)
        // A file whose seals table has no leaves column (a lanchatd of 2026-11-29 or before) gains it.
        store.close()
        let older = try SQLiteDatabase(path: path)
        try older.execute("ALTER TABLE seals DROP COLUMN leaves")
        older.close()
        let reopened = try ChatStore(path: path)
        #expect(try reopened.databaseForTests.query("SELECT count(*) FROM pragma_table_info('seals') WHERE name = 'leaves'").first == [.integer(1)])
        #expect(try reopened.export(room: "lab", since: 0, limit: 10).map(\.sealProof) == [first.sealProof, [], [], []])
    }

    /// The relay's reads go through the partial index of shared messages, not over direct ones row by row.
    @Test func relayReadsUseTheIndexOfSharedMessages() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        let raw = store.databaseForTests
        for (query, binds) in [
            (ChatStore.exportSQL, [SQLiteDatabase.Value.text("lab"), .integer(5), .integer(10)]),
            (ChatStore.recentSequencesSQL, [.text("lab"), .integer(10)]),
            (ChatStore.exportStartSQL, [.text("lab"), .integer(5), .integer(10)]),
            (ChatStore.exportPageSQL, [.text("lab"), .integer(5), .text("s"), .integer(1), .integer(1), .integer(10)]),
        ] {
            let plan = try raw.query("EXPLAIN QUERY PLAN " + query, binds).map { $0[3].string }.joined(separator: " ")
            #expect(plan.contains("messages_shared"), "\(plan)")
            #expect(!plan.contains("TEMP B-TREE"), "\(plan)")  // read in the index's order, not sorted
            // Each record's seal by the seals' key, not a scan.
            if query.contains("JOIN seals") { #expect(plan.contains("SEARCH s USING PRIMARY KEY"), "\(plan)") }
        }
    }
}
