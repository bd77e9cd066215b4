import LanchatCore
import LanchatEngine
import LanchatStore
import Testing

/// The rules every `SessionStore` keeps, run on the daemon's SQLite store and on the memory store the
/// simulator uses: if they ever differ, the simulator proves something about a store the daemon does
/// not have.
@Suite struct SessionStoreContractTests {
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case sqlite, memory
        var testDescription: String { rawValue }
        func make() throws -> any SessionStore {
            switch self {
            case .sqlite: try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
            case .memory: MemorySessionStore()
            }
        }
    }

    static let bob = String(repeating: "b", count: 52)
    static let carol = String(repeating: "c", count: 52)

    /// `history --grep` (issue 13, item 6): words begin words of the body, case ignored; by sender name or
    /// id prefix; since a time; in a room; the last `limit`; query syntax in the words is taken as text.
    @Test(arguments: Kind.allCases) func searchKeepsWhatTheFilterSays(kind: Kind) throws {
        let store = try kind.make()
        var bobs = message(3, sender: Self.bob, body: "Deployment failed on h2")
        bobs.senderName = "bob"
        try store.insert(bobs, now: 0)
        try store.insert(message(1, body: "the deploy is green"), now: 0)
        try store.insert(message(2, body: "lunch?"), now: 0)
        try store.insert(message(4, room: "other", body: "deploy again, failed again"), now: 0)
        try store.insert(message(5, body: "say \"NEAR\" OR * deploy"), now: 0)
        func found(_ filter: HistoryFilter, room: String? = nil, limit: Int = 100) throws -> [Int64] {
            try store.search(room: room, limit: limit, filter: filter).map(\.sequence)
        }
        #expect(try found(.init(words: "deploy")) == [1, 3, 4, 5])
        #expect(try found(.init(words: "DEPLOY fail")) == [3, 4])
        #expect(try found(.init(words: "deploy"), room: "lab") == [1, 3, 5])
        #expect(try found(.init(words: "deploy"), limit: 2) == [4, 5])
        #expect(try found(.init(words: "ploy")) == [])  // words begin words
        #expect(try found(.init(words: "\"NEAR\" OR *")) == [5])  // syntax is text
        #expect(try found(.init(words: "\" * ")) == [])  // no word at all: nothing
        #expect(try found(.init(sender: "bob")) == [3])
        #expect(try found(.init(sender: String(Self.bob.prefix(6)))) == [3])
        #expect(try found(.init(sender: "bbb")) == [])  // an id prefix needs 4 characters
        #expect(try found(.init(since: 1004)) == [4, 5])
        #expect(try found(.init(words: "deploy", sender: "alice", since: 1002)) == [4, 5])
    }

    /// Shared files (issue 13, item 4): file messages found by kind, by the end of their id (the short id
    /// the CLI shows) and by the exact beginning of their body (the announcement's digest line).
    @Test(arguments: Kind.allCases) func fileMessagesByIdSuffixAndBodyPrefix(kind: Kind) throws {
        let store = try kind.make()
        for (index, body) in ["lanchat-file/1\nsha256: aa\nx", "lanchat-file/1\nsha256: ab\nx", "lanchat-file/1\nsha256: aa"].enumerated() {
            var file = message(index + 1, body: body)
            file.kind = .file
            try store.insert(file, now: 0)
        }
        try store.insert(message(9, body: "lanchat-file/1\nsha256: aa\nx"), now: 0)  // text, not a file
        func found(_ filter: HistoryFilter, room: String? = "lab") throws -> [Int64] {
            try store.search(room: room, limit: 100, filter: filter).map(\.sequence).sorted()
        }
        #expect(try found(.init(kind: .file)) == [1, 2, 3])
        #expect(try found(.init(kind: .file, bodyPrefix: "lanchat-file/1\nsha256: aa\n")) == [1])
        #expect(try found(.init(kind: .file, bodyPrefix: "lanchat-file/1\nsha256: a")) == [1, 2, 3])
        #expect(try found(.init(kind: .file, bodyPrefix: "lanchat-file/1\nsha256: aa\n"), room: "other").isEmpty)
        let ids = try store.search(room: nil, limit: 100, filter: .init(kind: .file)).map(\.id).sorted()
        #expect(try store.search(room: nil, limit: 100, filter: .init(kind: .file, idSuffix: ids[0])).map(\.id) == [ids[0]])
        #expect(try store.search(room: nil, limit: 100, filter: .init(kind: .file, idSuffix: String(ids[1].suffix(2)))).map(\.id) == [ids[1]])
        let ends = try store.search(room: nil, limit: 100, filter: .init(idSuffix: String(ids[0].suffix(1))))
        #expect(!ends.isEmpty && ends.allSatisfy { $0.id.hasSuffix(ids[0].suffix(1)) })
        #expect(try store.search(room: nil, limit: 100, filter: .init(kind: .file, idSuffix: "zz")).isEmpty)
    }

    @Test(arguments: Kind.allCases) func messagesHistoryAndExport(kind: Kind) throws {
        let store = try kind.make()
        #expect(try store.insert(message(1), now: 0))
        #expect(try !store.insert(message(1, body: "changed"), now: 0))
        for id in 2...9 { try store.insert(message(id, timestamp: 1000), now: 0) }  // same time: by sender, then sequence
        try store.insert(message(20, sender: "a", timestamp: 1000), now: 0)
        var notice = message(30, timestamp: 5000)
        notice.kind = .system
        try store.insert(notice, now: 0)
        try store.insert(message(40, room: "other", timestamp: 4000), now: 0)
        #expect(try store.history(room: "lab", limit: 3).map(\.sequence) == [9, 1, 30])  // 1 is at 1001
        #expect(try store.history(room: nil, limit: 2).map(\.sequence) == [40, 30])
        #expect(try store.export(room: "lab", since: 1000, limit: 4).map(\.sequence) == [7, 8, 9, 1])  // no notices
        #expect(try store.export(room: "lab", since: 0, limit: 100).first?.sequence == 20)  // "a" before "s" at 1000
        #expect(try store.latestTimestamp(room: "lab") == 1001)  // notices do not count
        #expect(try store.latestTimestamp(room: "none") == 0)
        #expect(try store.lastSequences(sender: "s") == ["lab": 9, "other": 40])
    }

    /// The export in pieces is the export: every piece size, fewer or more messages than the limit, and
    /// messages alike in time, author and sequence (only their ids differ) split across pieces.
    @Test(arguments: Kind.allCases) func theExportInPiecesIsTheExport(kind: Kind) throws {
        let store = try kind.make()
        for id in 1...40 {
            var stored = message(id, sender: id % 3 == 0 ? "b" : "s", timestamp: Int64(1000 + id / 4))
            if id % 5 == 0 { stored.sequence = 7 }  // the same key as others at that time
            if id == 13 { stored.direct = true }
            if id == 17 { stored.kind = .system }
            try store.insert(stored, now: 0)
        }
        try store.insert(message(99, room: "other"), now: 0)
        // (5 and 7 are alike in time, author and sequence, the 6th and 7th oldest of the 38 exported:
        // limit 32 starts between them.)
        for (since, limit) in [(Int64(0), 100), (0, 25), (0, 32), (0, 33), (1003, 10), (1003, 100), (0, 1)] {
            let whole = try store.export(room: "lab", since: since, limit: limit)
            for count in [1, 2, 3, 7, 50] {
                var pieces: [StoredMessage] = []
                var cursor: ExportCursor?
                var reads = 0
                repeat {
                    let page = try store.exportPage(room: "lab", since: since, limit: limit, after: cursor, count: count)
                    #expect(page.messages.count <= count)
                    pieces += page.messages
                    cursor = page.next
                    reads += 1
                } while cursor != nil && reads < 100
                #expect(Set(pieces.map(\.id)) == Set(whole.map(\.id)), "since \(since), limit \(limit), pieces of \(count)")
                #expect(pieces.count == whole.count)
                #expect(pieces.map(\.timestamp) == whole.map(\.timestamp))
            }
        }
        #expect(try store.exportPage(room: "lab", since: 0, limit: 0, after: nil, count: 10).messages.isEmpty)
    }

    @Test(arguments: Kind.allCases) func outboxPerRecipientInOrder(kind: Kind) throws {
        let store = try kind.make()
        for id in 1...4 { try store.insert(message(id, room: id == 4 ? "other" : "lab"), now: 0) }
        for id in [3, 1, 2, 4] { try store.enqueue(peerID: Self.bob, messageID: message(id).id) }
        try store.enqueue(peerID: Self.bob, messageID: message(3).id)  // queued once
        try store.enqueue(peerID: Self.carol, messageID: message(1).id)
        // In the order the messages were stored (ours are stored as they are sent), whatever the order queued.
        #expect(try store.outbox(peerID: Self.bob).map(\.sequence) == [1, 2, 3, 4])
        try store.acknowledge(peerID: Self.bob, messageID: message(1).id)
        try store.acknowledge(peerID: Self.bob, messageID: message(99).id)  // unknown: nothing
        #expect(try store.outbox(peerID: Self.bob).map(\.sequence) == [2, 3, 4])
        try store.dropOutbox(peerID: Self.bob, room: "other")
        #expect(try store.outbox(peerID: Self.bob).map(\.sequence) == [2, 3])
        let entries = try store.outboxEntries()
        #expect(entries.filter { $0.peerID == Self.bob }.map(\.messageID) == [message(2).id, message(3).id])
        #expect(entries.contains { $0.peerID == Self.carol && $0.messageID == message(1).id && $0.room == "lab" })
        try store.dropOutbox(peerID: nil, room: "lab")
        #expect(try store.outboxEntries().isEmpty)
    }

    @Test(arguments: Kind.allCases) func roomsAndRestore(kind: Kind) throws {
        let store = try kind.make()
        let zed = StoredMember(peerID: Self.bob, name: "zed", port: 1, addresses: ["10.0.0.2"])
        let amy = StoredMember(peerID: Self.carol, name: "amy", port: 2, addresses: ["10.0.0.3", "fe80::1%eth0"])
        try store.saveRoom("lab", members: [zed, amy], now: 1)
        try store.saveRoom("ops", members: [zed], now: 2)
        try store.saveRoom("lab", members: [zed], now: 3)  // replaces members, keeps its place
        #expect(try store.rooms().map(\.room) == ["lab", "ops"])
        #expect(try store.rooms().first?.members == [zed])
        try store.saveRoom("lab", members: [zed, amy], now: 4)
        #expect(try store.rooms().first?.members.map(\.name) == ["amy", "zed"])
        try store.deleteRoom("ops")
        #expect(try store.rooms().map(\.room) == ["lab"])

        let own = try #require(PeerID(String(repeating: "a", count: 52)))
        var mine = message(7, sender: own.rawValue)
        try store.insert(mine, now: 0)
        mine = message(8, sender: own.rawValue)
        mine.kind = .system
        try store.insert(mine, now: 0)
        try store.enqueue(peerID: Self.bob, messageID: message(7).id)
        let restored = try store.restored(ownID: own, knownPeers: KnownPeerBook())
        #expect(restored.rooms.map(\.room.rawValue) == ["lab"])
        #expect(restored.lastSequences == [RoomID("lab")!: 7 + UInt64(SessionStateMachine.sendAheadLimit)])
        #expect(restored.outbox.map(\.message.description) == [message(7).id])
    }

    /// The outbox as marks (issue 33): what a recipient's mark in a room queues is each of our messages
    /// there past it queued for every member or for it by name; a mark moved passes what it acknowledged;
    /// another room's messages, those queued for others and those queued for nobody are never its. A
    /// recipient pinned (it left, its queue kept) keeps what its mark queued as rows, and nothing sent after.
    @Test(arguments: Kind.allCases) func marksQueueWhatWasQueuedForTheirRecipient(kind: Kind) throws {
        let store = try kind.make()
        let dave = String(repeating: "d", count: 52)
        let queuedFor = ["*", Self.bob, "\(dave),\(Self.carol)", "", "*", Self.carol]
        for (index, recipients) in queuedFor.enumerated() { try store.insert(message(index + 1), queuedFor: recipients, now: 0) }
        try store.insert(message(7, room: "ops"), queuedFor: "*", now: 0)
        #expect(try store.outboxEntries().isEmpty)
        for peer in [Self.bob, Self.carol, dave] { try store.setMark(peerID: peer, room: "lab", acked: 4) }
        for peer in [Self.bob, Self.carol, dave] { try store.setMark(peerID: peer, room: "lab", acked: 0) }  // (set, not kept)
        func queued(_ peer: String) throws -> [Int64] { try store.outbox(peerID: peer).map(\.sequence) }
        #expect(try queued(Self.bob) == [1, 2, 5] && queued(Self.carol) == [1, 3, 5, 6] && queued(dave) == [1, 3, 5])
        try store.setMark(peerID: Self.bob, room: "lab", acked: 2)
        try store.setMark(peerID: Self.carol, room: "lab", acked: 1)
        #expect(try queued(Self.bob) == [5] && queued(Self.carol) == [3, 5, 6])
        #expect(try store.outboxMarks().map { "\($0.peerID.prefix(1)) \($0.room) \($0.acked)" } == ["b lab 2", "c lab 1", "d lab 0"])
        let entries = try store.outboxEntries().map { "\($0.peerID.prefix(1)) \($0.sequence) \($0.marked)" }
        #expect(Set(entries) == ["b 5 true", "c 3 true", "c 5 true", "c 6 true", "d 1 true", "d 3 true", "d 5 true"])
        // Carol left and her queue stays: rows, and her mark goes; what is sent after is not hers.
        try store.pinOutbox(peerID: Self.carol, room: "lab")
        try store.insert(message(8), queuedFor: "*", now: 0)
        #expect(try queued(Self.carol) == [3, 5, 6] && queued(Self.bob) == [5, 8])
        #expect(try store.outboxEntries().filter { $0.peerID == Self.carol }.allSatisfy { !$0.marked })
        try store.acknowledge(peerID: Self.carol, messageID: message(5).id)
        #expect(try queued(Self.carol) == [3, 6])
        // A restart reads marks and what they queue.
        let restored = try store.restored(ownID: try #require(PeerID(String(repeating: "a", count: 52))), knownPeers: KnownPeerBook())
        #expect(restored.marks.map { "\($0.peer.rawValue.prefix(1)) \($0.acked)" } == ["b 2", "d 0"])
        #expect(restored.outbox.filter { $0.peer.rawValue == Self.bob }.map(\.sequence) == [5, 8])
        try store.dropOutbox(peerID: Self.bob, room: "lab")
        #expect(try queued(Self.bob).isEmpty && store.outboxMarks().map(\.peerID) == [dave])
        try store.dropOutbox(peerID: nil, room: "lab")
        #expect(try store.outboxEntries().isEmpty && store.outboxMarks().isEmpty)
    }

    /// Issue 28: members' proofs are kept with their rows, and signed leaves (one per room and member,
    /// the latest; the oldest go past `maximumStoredLeaves`).
    @Test(arguments: Kind.allCases) func proofsAndSignedLeavesAreKept(kind: Kind) throws {
        let store = try kind.make()
        let proof = StoredProof(inviter: "", timestamp: 500, key: [2, 1, 3], signature: [9, 9])
        let zed = StoredMember(peerID: Self.bob, name: "zed", port: 1, addresses: ["10.0.0.2"], proof: proof)
        try store.saveRoom("lab", members: [zed], now: 1)
        #expect(try store.rooms().first?.members == [zed])
        try store.saveLeave(StoredLeave(room: "lab", peerID: Self.carol, timestamp: 700))
        try store.saveLeave(StoredLeave(room: "lab", peerID: Self.carol, timestamp: 800))
        #expect(try store.leaves() == [StoredLeave(room: "lab", peerID: Self.carol, timestamp: 800)])
        for n in 0..<(maximumStoredLeaves + 10) { try store.saveLeave(StoredLeave(room: "r\(n)", peerID: Self.bob, timestamp: UInt64(1_000 + n))) }
        let kept = try store.leaves()
        #expect(kept.count == maximumStoredLeaves && kept.first?.timestamp == UInt64(1_010))
    }

    @Test(arguments: Kind.allCases) func engineWritesApplyAndRollBackTogether(kind: Kind) throws {
        struct Refused: Error {}
        let store = try kind.make()
        let bob = try #require(PeerID(Self.bob))
        let id = try #require(WireID(hex: message(1).id))
        #expect(try store.apply(.insertMessage(message(1), report: nil), now: 0))
        #expect(try !store.apply(.insertMessage(message(1), report: nil), now: 0))
        try store.apply(.saveRoom(RoomID("lab")!, []), now: 0)
        #expect(throws: Refused.self) {
            try store.transaction {
                try store.apply(.insertMessage(message(2), report: nil, queuedFor: "*"), now: 0)
                try store.apply(.openMark(bob, RoomID("lab")!, acked: 1), now: 0)
                try store.apply(.acknowledge(bob, [id]), now: 0)
                try store.apply(.deleteRoom(RoomID("lab")!), now: 0)
                throw Refused()
            }
        }
        #expect(try store.history(room: nil, limit: 10).map(\.sequence) == [1])
        #expect(try store.outboxEntries().isEmpty && store.outboxMarks().isEmpty)
        #expect(try store.rooms().map(\.room) == ["lab"])
        try store.transaction { try store.enqueue(peerID: Self.bob, messageID: id.description) }
        #expect(try store.outbox(peerID: Self.bob).map(\.sequence) == [1])
    }

    /// A savepoint that throws is undone alone, the transaction goes on: the first of a transaction nothing
    /// was written in (SQLite's store then undoes the transaction and begins it again), a later one, and
    /// a first one after a write of the transaction's own.
    @Test(arguments: Kind.allCases) func aSavepointThatThrowsIsUndoneAloneAndTheTransactionGoesOn(kind: Kind) throws {
        struct Refused: Error {}
        let store = try kind.make()
        let bob = try #require(PeerID(Self.bob))
        try store.transaction {
            #expect(throws: Refused.self) {
                try store.savepoint {
                    try store.insert(message(1), queuedFor: "*", now: 0)
                    try store.apply(.openMark(bob, RoomID("lab")!, acked: 0), now: 0)
                    throw Refused()
                }
            }
            try store.savepoint { try store.insert(message(2), now: 0) }
            #expect(throws: Refused.self) {
                try store.savepoint {
                    try store.insert(message(3), now: 0)
                    throw Refused()
                }
            }
            try store.savepoint { try store.insert(message(4), now: 0) }
        }
        #expect(try store.history(room: "lab", limit: 10).map(\.sequence) == [2, 4])
        #expect(try store.outboxEntries().isEmpty && store.outboxMarks().isEmpty)
        try store.transaction {
            try store.insert(message(5), now: 0)
            #expect(throws: Refused.self) {
                try store.savepoint {
                    try store.insert(message(6), now: 0)
                    throw Refused()
                }
            }
            try store.savepoint { try store.insert(message(7), now: 0) }
        }
        #expect(try store.history(room: "lab", limit: 10).map(\.sequence) == [2, 4, 5, 7])
        // Nothing stayed open: a write outside a transaction is durable at once, and read back.
        try store.insert(message(8), now: 0)
        #expect(try store.history(room: "lab", limit: 10).map(\.sequence) == [2, 4, 5, 7, 8])
    }

    @Test(arguments: Kind.allCases) func aNestedTransactionJoinsTheOuterOne(kind: Kind) throws {
        struct Refused: Error {}
        let store = try kind.make()
        try store.transaction {
            try store.insert(message(1), now: 0)
            // An inner failure the outer body catches does not undo the inner writes (no savepoints).
            try? store.transaction {
                try store.insert(message(2), now: 0)
                throw Refused()
            }
        }
        #expect(try store.history(room: "lab", limit: 10).map(\.sequence) == [1, 2])
    }

    @Test(arguments: Kind.allCases) func transfers(kind: Kind) throws {
        let store = try kind.make()
        func transfer(_ n: Int, state: String = "active") -> StoredTransfer {
            StoredTransfer(
                id: String(repeating: String(n), count: 32), outgoing: n % 2 == 0, peerID: Self.bob, peerName: "bob", path: "/p\(n)",
                name: "f\(n)", size: 10, sha256: String(repeating: "0", count: 64), modified: 0, state: state)
        }
        try store.saveTransfer(transfer(1), now: 100)
        try store.saveTransfer(transfer(2), now: 50)
        #expect(try store.transfers().map(\.name) == ["f2", "f1"])
        try store.updateTransfer(id: transfer(2).id, state: "complete", now: 200)
        try store.updateTransfer(id: transfer(2).id, sentMark: 7, now: 300)
        try store.updateTransfer(id: transfer(2).id, resent: 3, now: 400)
        let two = try #require(try store.transfer(id: transfer(2).id))
        #expect(two.state == "complete" && two.sentMark == 7 && two.resent == 3)
        #expect(try store.transfers().map(\.name) == ["f1", "f2"])  // a new state touches it
        #expect(try store.pruneTransfers(before: 150).map(\.name) == ["f1"])
        #expect(try store.transfer(id: transfer(1).id) == nil)
        try store.deleteTransfer(id: transfer(2).id)
        #expect(try store.transfers().isEmpty)
    }

    /// `room`'s export (the latest 100) read in pieces of 2 (`exportPage`).
    static func inPieces(_ store: any SessionStore, room: String) throws -> [StoredMessage] {
        var pieces: [StoredMessage] = []
        var cursor: ExportCursor?
        repeat {
            let page = try store.exportPage(room: room, since: 0, limit: 100, after: cursor, count: 2)
            pieces += page.messages
            cursor = page.next
        } while cursor != nil && pieces.count < 100
        return pieces
    }
}
