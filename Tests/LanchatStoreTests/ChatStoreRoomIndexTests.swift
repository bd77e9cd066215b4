import LanchatCore
@testable import LanchatStore
import Testing

/// A room's messages by time are in two partial indexes that together hold each message once: the shared
/// ones (`messages_shared`) and notices and direct messages (`messages_private`). What reads a room by
/// time reads both and merges them.
@Suite struct ChatStoreRoomIndexTests {
    static func stored(_ id: Int, kind: StoredMessage.Kind = .text, direct: Bool = false, room: String = "lab") -> StoredMessage {
        var stored = message(id, room: room)
        stored.kind = kind
        stored.direct = direct
        return stored
    }

    /// Shared, direct and notices interleaved in time: a person's history and a search by time take the
    /// newest of both indexes in order; what a newcomer already has (`latestTimestamp`) and an author's
    /// last sequence count direct messages, not notices.
    @Test func aRoomsMessagesByTimeComeFromBothOfItsIndexes() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        let messages = [
            Self.stored(1), Self.stored(2, direct: true), Self.stored(3, kind: .system), Self.stored(4), Self.stored(5, direct: true),
            Self.stored(6, kind: .file), Self.stored(7, direct: true), Self.stored(8, kind: .system), Self.stored(9, room: "ops"),
        ]
        for message in messages { try store.insert(message, now: 0) }
        #expect(try store.history(room: "lab", limit: 4).map(\.sequence) == [5, 6, 7, 8])
        #expect(try store.history(room: "lab", limit: 100).map(\.sequence) == [1, 2, 3, 4, 5, 6, 7, 8])
        #expect(try store.history(room: nil, limit: 100).count == 9)
        #expect(try store.search(room: "lab", limit: 3, filter: HistoryFilter()).map(\.sequence) == [6, 7, 8])
        #expect(try store.search(room: "lab", limit: 100, filter: HistoryFilter(since: 1003, kind: .text)).map(\.sequence) == [4, 5, 7])
        #expect(try store.search(room: "lab", limit: 100, filter: HistoryFilter(kind: .file)).map(\.sequence) == [6])
        #expect(try store.search(room: "lab", limit: 2, filter: HistoryFilter(sender: "alice")).map(\.sequence) == [7, 8])
        #expect(try store.latestTimestamp(room: "lab") == 1007)
        #expect(try store.lastSequence(room: "lab", sender: "s") == 7)
        #expect(try store.latestTimestamp(room: "ops") == 1009)
        #expect(try store.latestTimestamp(room: "none") == 0)
        #expect(try store.lastSequence(room: "none", sender: "s") == 0)
    }

    /// Every read of a room by time goes through one of its two indexes in the index's order: never a scan
    /// of every message, never a sort. (The windows of a search with every filter it has for a room.)
    @Test func readsOfARoomByTimeUseItsTwoIndexes() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        let raw = store.databaseForTests
        let filters = [
            "m.room = ?", "(m.sender_name = ? OR (length(?) >= 4 AND substr(m.sender_id, 1, length(?)) = ?))", "m.timestamp >= ?", "m.kind = 0",
            "substr(m.id, -?) = ?", "substr(m.body, 1, ?) = ?",
        ]
        let filterValues: [SQLiteDatabase.Value] = [
            .text("lab"), .text("bob"), .text("bob"), .text("bob"), .text("bob"), .integer(5), .integer(2), .text("ab"), .integer(2), .text("hi"),
        ]
        for (number, index) in ["messages_shared", "messages_private"].enumerated() {
            let arm = ChatStore.roomArms[number]
            for (query, binds) in [
                (ChatStore.roomHistorySQL(arm: arm), [SQLiteDatabase.Value.text("lab"), .integer(10)]),
                (ChatStore.roomWindowSQL(conditions: ["m.room = ?", ChatStore.roomArms(prefix: "m.")[number]]), [.text("lab"), .integer(1), .integer(9), .integer(10)]),
                (ChatStore.roomWindowSQL(conditions: filters + [ChatStore.roomArms(prefix: "m.")[number]]), filterValues + [.integer(1), .integer(9), .integer(10)]),
                (ChatStore.roomEndSQL(arm: arm, end: "max"), [.text("lab")]),
                (ChatStore.roomEndSQL(arm: arm, end: "min"), [.text("lab")]),
                (ChatStore.latestTimestampSQL(arm: arm), [.text("lab"), .integer(5)]),
                (ChatStore.lastSequenceSQL(arm: arm), [.text("lab"), .text("s")]),
                (ChatStore.forgetSealSQL(arm: arm), [.text("lab"), .text("s"), .text("seal")]),
            ] {
                let plan = try raw.query("EXPLAIN QUERY PLAN " + query, binds).map { $0[3].string }.joined(separator: " ")
                #expect(plan.contains("USING INDEX \(index) (room=?"), "\(plan)")
                #expect(!plan.contains("TEMP B-TREE") && !plan.contains("SCAN"), "\(plan)")
            }
        }
    }

    /// A search of a room by time reads both indexes in windows of time back to its oldest message, over
    /// times far apart (a minute, then twice as long each window, up to 2^62 ms): it finds the newest of
    /// what each filter keeps, whichever index holds them and however far back they are.
    @Test func aSearchOfARoomByTimeFindsTheNewestAcrossWindowsOfTime() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        let times: [Int64] = [0, 5, 59_999, 60_000, 60_001, 120_001, 1_000_000, 1_000_000_000, 1_000_000_000_000, 1 << 62]
        for (number, time) in times.enumerated() {
            var stored = message(number + 1, timestamp: time)
            // Every third from the second direct (bob's), every fourth from the fourth a notice (one both).
            stored.direct = number % 3 == 1
            stored.kind = number % 4 == 3 ? .system : .text
            stored.senderName = stored.direct ? "bob" : "alice"
            try store.insert(stored, now: 0)
        }
        try store.insert(message(99, room: "ops", timestamp: 7), now: 0)
        #expect(try store.search(room: "lab", limit: 100, filter: HistoryFilter()).map(\.timestamp) == times)
        #expect(try store.search(room: "lab", limit: 3, filter: HistoryFilter()).map(\.timestamp) == Array(times.suffix(3)))
        #expect(try store.search(room: "lab", limit: 100, filter: HistoryFilter(sender: "bob")).map(\.timestamp) == [5, 60_001, 1_000_000_000])
        #expect(try store.search(room: "lab", limit: 2, filter: HistoryFilter(sender: "bob")).map(\.timestamp) == [60_001, 1_000_000_000])
        #expect(
            try store.search(room: "lab", limit: 100, filter: HistoryFilter(sender: "alice", since: 60_000)).map(\.timestamp) == [
                60_000, 120_001, 1_000_000, 1_000_000_000_000, 1 << 62,
            ])
        #expect(try store.search(room: "lab", limit: 100, filter: HistoryFilter(kind: .system)).map(\.timestamp) == [60_000, 1_000_000_000])
        #expect(try store.search(room: "lab", limit: 1, filter: HistoryFilter(since: 1 << 62)).map(\.timestamp) == [1 << 62])
        #expect(try store.search(room: "lab", limit: 10, filter: HistoryFilter(since: (1 << 62) + 1)).isEmpty)
        #expect(try store.search(room: "none", limit: 10, filter: HistoryFilter()).isEmpty)
        #expect(try store.search(room: "lab", limit: 0, filter: HistoryFilter()).isEmpty)
        #expect(try store.latestTimestamp(room: "lab") == 1 << 62)
    }

    /// A file with the index of all of a room's messages (a lanchatd before 2026-11-29, or an older one
    /// that opened the file since) has it dropped when opened, and keeps its messages in the two.
    @Test func theIndexOfAllOfARoomsMessagesIsDroppedWhenOpened() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        do {
            let store = try ChatStore(path: path)
            for message in [Self.stored(1), Self.stored(2, direct: true)] { try store.insert(message, now: 0) }
            // (As a lanchatd of before 2026-11-29 left it: no index of the rest.)
            try store.databaseForTests.execute(
                "DROP INDEX messages_private; CREATE INDEX messages_by_room ON messages (room, timestamp, sender_id, sequence)")
            store.close()
        }
        let store = try ChatStore(path: path)
        let indexes = try store.databaseForTests.query("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'messages_%' ORDER BY name")
        #expect(indexes.map { $0[0].string } == ["messages_files", "messages_private", "messages_queued", "messages_shared"])
        #expect(
            try store.databaseForTests.query("SELECT count(*) FROM messages INDEXED BY messages_private WHERE room = 'lab' AND (kind = 2 OR direct != 0)").first == [
                .integer(1)
            ])
        #expect(try store.history(room: "lab", limit: 10).map(\.sequence) == [1, 2])
    }
}
