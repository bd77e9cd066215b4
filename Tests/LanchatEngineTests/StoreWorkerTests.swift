import LanchatCore
import LanchatEngine
import LanchatWire
import Testing

/// The store's half of the driver's rules (`StoreWorker`): failed writes are tried again first with the
/// next request (not those of an all-or-nothing batch), reads see the request's own writes, and what we
/// hold of a room is read once while the store's messages stay the same.
@Suite struct StoreWorkerTests {
    let room = RoomID("lab")!
    let author = String(repeating: "a", count: 52)

    func message(_ sequence: Int64) -> StoredMessage {
        StoredMessage(
            id: String(repeating: "b", count: 31) + String(sequence % 10), room: room.rawValue, senderID: author, senderName: "ann",
            sequence: sequence, timestamp: 100 + sequence, kind: .text, body: "m\(sequence)")
    }

    func request(_ ticket: UInt64, _ operations: [StoreOperation], allOrNothing: Bool = false, reads: [StoreRead] = []) -> StoreRequest {
        StoreRequest(ticket: ticket, now: 0, operations: operations, forceDurable: false, allOrNothing: allOrNothing, reads: reads)
    }

    @Test func aFailedBatchsWritesGoFirstWithTheNextAndAnAllOrNothingOneIsNot() {
        let store = MemorySessionStore()
        var worker = StoreWorker(store: store, syncs: false)
        let first = worker.answer(request(1, [.insertMessage(message(1), report: nil)]))
        #expect(first.failure == nil && first.inserted == [message(1).id] && first.durable)
        store.failsCommit = { true }
        let second = worker.answer(request(2, [.insertMessage(message(2), report: nil)]))
        #expect(second.failure != nil && second.unwritten == 1)
        let refused = worker.answer(request(3, [.insertMessage(message(3), report: nil)], allOrNothing: true))
        #expect(refused.failure != nil && refused.unwritten == 1)  // (the second's still waits; the third's is not kept)
        store.failsCommit = nil
        let fourth = worker.answer(request(4, [.insertMessage(message(4), report: nil)], reads: [.latestTimestamp(room)]))
        #expect(fourth.failure == nil && fourth.unwritten == 0)
        #expect(Set(store.messages.keys.map(\.id)) == Set([1, 2, 4].map { message($0).id }))
        // The read sees the batch's own write.
        #expect(fourth.reads == [.timestamp(104)])
    }

    @Test func acknowledgementsAloneAreNotDurable() {
        var worker = StoreWorker(store: MemorySessionStore(), syncs: true)
        let peer = PeerID(String(repeating: "c", count: 52))!
        let id = WireID(bytes: [UInt8](repeating: 1, count: 16))!
        #expect(!worker.answer(request(1, [.acknowledge(peer, [id])])).durable)
        #expect(!worker.answer(request(2, [.setMark(peer, room, acked: 3), .acknowledge(peer, [id])])).durable)
        #expect(worker.answer(request(2, [.openMark(peer, room, acked: 0)])).durable)
        #expect(!worker.answer(request(3, [])).durable)
    }

    @Test func whatWeHoldIsReadOnceWhileTheMessagesStayTheSame() {
        let store = MemorySessionStore()
        for sequence in Int64(1)...3 { store.insert(message(sequence), now: 0) }
        var worker = StoreWorker(store: store, syncs: false)
        let covered = worker.answer(request(1, [], reads: [.relayAnswer(room, since: 0, exportLimit: 10, runsLimit: 100, marks: [author: [1...3]])]))
        guard case .relayAnswer(let runs, nil)? = covered.reads.first else { Issue.record("covered: \(covered.reads)"); return }
        #expect(runs?.runs == [author: [1...3]] && store.relayReads == (exports: 0, recentSequences: 1))
        let lacking = worker.answer(request(2, [], reads: [.relayAnswer(room, since: 0, exportLimit: 10, runsLimit: 100, marks: [author: [1...2]])]))
        guard case .relayAnswer(_, let messages?)? = lacking.reads.first else { Issue.record("lacking: \(lacking.reads)"); return }
        #expect(messages.count == 3 && store.relayReads == (exports: 1, recentSequences: 1))
        // A new message: read again.
        _ = worker.answer(request(3, [.insertMessage(message(4), report: nil)], reads: [.syncRequest(room, limit: 100)]))
        #expect(store.relayReads.recentSequences == 2)
    }

    /// Requests answered together commit together, a savepoint each: the one the disk refuses is undone
    /// alone and its writes go first with the next; a commit refused undoes the whole group.
    @Test func aGroupCommitsOnceAndUndoesARefusedBatchAlone() {
        let store = MemorySessionStore()
        var worker = StoreWorker(store: store, syncs: true)
        var calls = 0
        store.failsCommit = {
            calls += 1
            return calls == 2  // (the second batch's savepoint)
        }
        let report = ChatMessage(stored: message(2), reliable: true, outgoing: false)
        let answers = worker.answer([
            request(1, [.insertMessage(message(1), report: nil)]),
            request(2, [.insertMessage(message(2), report: report)]),
            request(3, [.insertMessage(message(3), report: nil)], reads: [.latestTimestamp(room)]),
        ])
        #expect(answers.map(\.ticket) == [1, 2, 3])
        #expect(answers[0].failure == nil && answers[1].failure != nil && answers[2].failure == nil)
        #expect(calls == 4)  // (three savepoints and one commit)
        // The refused batch's message is stored with the third, and reported with it.
        #expect(answers[2].retriedReports == [report] && answers[2].inserted == [message(3).id])
        #expect(answers[2].reads == [.timestamp(103)] && answers[2].unwritten == 0)
        // Now the commit itself is refused: nothing of the group stayed, everything is tried again next.
        calls = 0
        store.failsCommit = {
            calls += 1
            return calls == 3  // (after two savepoints)
        }
        let refused = worker.answer([
            request(4, [.insertMessage(message(4), report: nil)]),
            request(5, [.insertMessage(message(5), report: nil)], allOrNothing: true),
        ])
        #expect(refused.allSatisfy { $0.failure != nil && $0.inserted.isEmpty } && refused[1].unwritten == 1)
        store.failsCommit = nil
        let next = worker.answer(request(6, []))
        #expect(next.failure == nil && next.inserted == [message(4).id])
        #expect(store.message(id: message(5).id) == nil)
    }

    /// A transaction lost whole in the middle of a group (SQLite rolls it back by itself after a full disk
    /// or an I/O error) ends the group: nothing of it is stored or reported, no later batch runs in it,
    /// and every write not all-or-nothing goes first with the next request, reported then, once.
    @Test func aTransactionLostWholeEndsTheGroupAndEverythingIsTriedAgain() {
        let store = MemorySessionStore()
        var worker = StoreWorker(store: store, syncs: true)
        var savepoints = 0
        store.losesTransaction = {
            savepoints += 1
            return savepoints == 2
        }
        let reports = (1...3).map { ChatMessage(stored: message(Int64($0)), reliable: true, outgoing: false) }
        let answers = worker.answer([
            request(1, [.insertMessage(message(1), report: reports[0])]),
            request(2, [.insertMessage(message(2), report: reports[1])]),
            request(3, [.insertMessage(message(3), report: reports[2])]),
            request(4, [.insertMessage(message(4), report: nil)], allOrNothing: true),
        ])
        #expect(answers.allSatisfy { $0.failure != nil && $0.inserted.isEmpty && $0.retriedReports.isEmpty })
        #expect(savepoints == 2 && store.messages.isEmpty)  // (the third and fourth never ran)
        store.losesTransaction = nil
        let next = worker.answer(request(5, []))
        #expect(next.failure == nil && next.retriedReports == reports && next.unwritten == 0)
        #expect(store.message(id: message(4).id) == nil)
    }
}
