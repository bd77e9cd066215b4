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
    /// of every message, never a sort.
    @Test func readsOfARoomByTimeUseItsTwoIndexes() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        let raw = store.databaseForTests
        for (number, index) in ["messages_shared", "messages_private"].enumerated() {
            let arm = ChatStore.roomArms[number]
            // What `search` makes of a room, a time and a kind.
            let search = ChatStore.searchSQL(
                source: "messages m", clause: "m.room = ? AND m.timestamp >= ? AND m.kind = 0 AND " + ChatStore.roomArms(prefix: "m.")[number],
                order: "m.timestamp DESC, m.sender_id DESC, m.sequence DESC")
            for (query, binds) in [
                (ChatStore.roomHistorySQL(arm: arm), [SQLiteDatabase.Value.text("lab"), .integer(10)]),
                (search, [.text("lab"), .integer(5), .integer(10)]),
                (ChatStore.latestTimestampSQL(arm: arm), [.text("lab")]),
                (ChatStore.lastSequenceSQL(arm: arm), [.text("lab"), .text("s")]),
                (ChatStore.forgetSealSQL(arm: arm), [.text("lab"), .text("s"), .text("seal")]),
            ] {
                let plan = try raw.query("EXPLAIN QUERY PLAN " + query, binds).map { $0[3].string }.joined(separator: " ")
                #expect(plan.contains("USING INDEX \(index) (room=?"), "\(plan)")
                #expect(!plan.contains("TEMP B-TREE") && !plan.contains("SCAN"), "\(plan)")
            }
        }
    }

    /// A file with the index of all of a room's messages (a lanchatd before 2026-11-29, or an older one
    /// that opened the file since) has it dropped when opened, and keeps its messages in the two.
    @Test func theIndexOfAllOfARoomsMessagesIsDroppedWhenOpened() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        do {
            let store = try ChatStore(path: path)
            for message in [Self.stored(1), Self.stored(2, direct: true)] { try store.insert(message, now: 0) }
            try store.databaseForTests.execute("CREATE INDEX messages_by_room ON messages (room, timestamp, sender_id, sequence)")
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
