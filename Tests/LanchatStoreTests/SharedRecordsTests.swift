import LanchatCore
@testable import LanchatStore
import Testing

/// `StoredMessage` and `StoredSeal` keep their fields in one box that copies share, copied on write: they
/// must still behave as values. And the store's transaction statements, prepared once, behave as they did
/// when parsed at every call.
@Suite struct SharedRecordsTests {
    static func full() -> StoredMessage {
        let seal = StoredSeal(id: String(repeating: "5", count: 32), authorKey: [2, 3], signature: [4, 5], leafCount: 2, root: [6], leaves: [7])
        return StoredMessage(
            id: String(repeating: "a", count: 32), room: "lab", senderID: String(repeating: "b", count: 52), senderName: "bob", sequence: 7,
            timestamp: 1_000, kind: .text, body: "hello", authorKey: [1], signature: [2], direct: true, sealProof: [0, 1], seal: seal)
    }

    /// A copy changed in any field leaves the original as it was, field by field; the original changed
    /// after the copy leaves the copy.
    @Test func aChangedCopyOfAMessageLeavesTheOriginal() {
        let original = Self.full()
        let changes: [(String, (inout StoredMessage) -> Void)] = [
            ("id", { $0.id = "c" }), ("room", { $0.room = "ops" }), ("senderID", { $0.senderID = "d" }), ("senderName", { $0.senderName = "eve" }),
            ("sequence", { $0.sequence += 1 }), ("timestamp", { $0.timestamp += 1 }), ("kind", { $0.kind = .file }), ("body", { $0.body += "!" }),
            ("authorKey", { $0.authorKey.append(9) }), ("signature", { $0.signature = [] }), ("direct", { $0.direct.toggle() }),
            ("sealProof", { $0.sealProof[0] = 9 }), ("seal", { $0.seal?.leafCount = 3 }),
        ]
        for (field, change) in changes {
            var copy = original
            change(&copy)
            #expect(copy != original, "\(field)")
            #expect(original == Self.full(), "\(field)")
        }
        var original2 = Self.full()
        let copy = original2
        original2.body = "changed"
        #expect(copy.body == "hello")
        #expect(original2.body == "changed")
    }

    /// Equal fields are equal values, whether or not they share a box; one field apart is not.
    @Test func messagesAreEqualByTheirFields() {
        #expect(Self.full() == Self.full())
        let shared = Self.full()
        let copy = shared
        #expect(copy == shared)
        var other = Self.full()
        other.seal?.checked = false
        #expect(other != Self.full())
        other.seal?.checked = true
        #expect(other == Self.full())
    }

    /// Printed (a log, a failed test), a message and its seal show their fields, not their box.
    @Test func aMessagePrintsItsFields() {
        let printed = String(describing: Self.full())
        for part in ["room: \"lab\"", "body: \"hello\"", "sequence: 7", "leafCount: 2"] { #expect(printed.contains(part), "\(printed)") }
    }

    /// A value held once stays what it was set to through many changes; a seal copied out of it is a
    /// value of its own.
    @Test func aMessageChangedManyTimesKeepsEachChange() {
        var message = Self.full()
        for index in 0..<1_000 { message.body += "\(index % 10)" }
        #expect(message.body.count == 5 + 1_000)
        var seal = message.seal!
        let kept = seal
        seal.root = [1, 2, 3]
        #expect(kept.root == [6])
        #expect(seal.root == [1, 2, 3])
    }

    /// BEGIN, COMMIT and a savepoint, each prepared once: they run again and again; one that fails says
    /// why (SQLite's words), and the same statement runs again after it.
    @Test func transactionStatementsPreparedOnceRunAgainAndFailClearly() throws {
        let database = try SQLiteDatabase(path: temporaryDirectory() + "/p.sqlite3")
        try database.execute("CREATE TABLE t (n INTEGER)")
        for round in 0..<3 {
            try database.executePrepared("BEGIN IMMEDIATE")
            try database.query("INSERT INTO t VALUES (?)", [.integer(Int64(round))])
            try database.executePrepared("SAVEPOINT piece")
            try database.query("INSERT INTO t VALUES (?)", [.integer(100)])
            try database.executePrepared("ROLLBACK TO piece")
            try database.executePrepared("RELEASE piece")
            try database.executePrepared("COMMIT")
        }
        #expect(try database.query("SELECT n FROM t ORDER BY n").map(\.[0].int) == [0, 1, 2])
        #expect(!database.inTransaction)
        do {
            try database.executePrepared("COMMIT")
            Issue.record("a COMMIT outside a transaction succeeded")
        } catch {
            #expect(error.description.contains("no transaction is active"), "\(error)")
        }
        try database.executePrepared("BEGIN IMMEDIATE")
        #expect(database.inTransaction)
        try database.executePrepared("COMMIT")
        #expect(!database.inTransaction)
    }

    /// Text and blobs are bound where `run` copied them: into the database's scratch space, and past its
    /// end (16 KiB) into copies of their own. Each value is stored whole, in any order of sizes, again and
    /// again; empty text stays empty text (not NULL), and no bytes bind the empty text.
    @Test func valuesBoundInAndPastTheScratchSpaceAreStoredWhole() throws {
        let database = try SQLiteDatabase(path: temporaryDirectory() + "/b.sqlite3")
        try database.execute("CREATE TABLE t (n INTEGER, a TEXT, b BLOB, c TEXT, d TEXT)")
        let insert = try database.statement("INSERT INTO t VALUES (?, ?, ?, ?, ?)")
        func text(_ count: Int, _ seed: Int) -> String { String((0..<count).map { Character(Unicode.Scalar(UInt8(97 + ($0 + seed) % 26))) }) }
        func blob(_ count: Int, _ seed: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 * 7 + seed) } }
        let rows: [(String, [UInt8], String, String)] = [
            (text(10_000, 1), blob(8_000, 2), "", text(20_000, 3)),  // past the end, then one alone past it
            ("é😀", blob(1, 4), text(16 * 1024, 5), "x"),  // exactly the space
            ("", [], "", ""),
            (text(3, 6), blob(40_000, 7), text(3, 8), text(17_000, 9)),
        ]
        for round in 0..<2 {
            for (index, row) in rows.enumerated() {
                try database.run(insert) {
                    $0.integer(Int64(round * 10 + index))
                    $0.text(row.0)
                    $0.blob(row.1)
                    $0.text(row.2)
                    $0.text(row.3)
                }
            }
        }
        let read = try database.query("SELECT n, a, hex(b), c, d, typeof(a), typeof(b) FROM t ORDER BY n")
        #expect(read.count == 2 * rows.count)
        for (number, values) in read.enumerated() {
            let row = rows[number % rows.count]
            #expect(values[1].string == row.0 && values[3].string == row.2 && values[4].string == row.3, "row \(number)")
            #expect(values[5].string == "text")
            if row.1.isEmpty {
                #expect(values[6].string == "text" && values[2].string == "", "row \(number)")  // (no bytes: the empty text)
            } else {
                #expect(values[6].string == "blob" && values[2].string == Hex.string(row.1).uppercased(), "row \(number)")
            }
        }
    }
}
