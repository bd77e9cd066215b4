import LanchatCore
import LanchatEngine
import LanchatWire
import Testing

/// The shell's rules as lanchatd and the simulator both run them (`SessionDriver`): nothing leaves
/// before the sync of what was committed before it, syncs are shared, a failed sync or commit sends no
/// ACK, our own messages go first only under the send-first rule.
@Suite struct SessionDriverTests: LabFixture {
    /// Alice in lab with bob (link 1) and carol (link 2), unsigned (wire version 1): their messages are kept.
    func engine() -> SessionStateMachine { engine(version: 1) }

    func message(_ sequence: UInt64) -> WireFrame {
        .message(
            .init(
                id: WireID(bytes: [UInt8](repeating: UInt8(sequence), count: 16))!, room: lab, sequence: sequence,
                timestampMilliseconds: 5 + sequence, kind: .text, body: "m\(sequence)", reliable: true))
    }

    func writes(_ output: [ShellOutput]) -> [[WireFrame]] {
        output.compactMap { if case .write(_, let frames, _) = $0 { frames } else { nil } }
    }

    func acks(_ output: [ShellOutput]) -> Int {
        writes(output).joined().filter { if case .ack = $0 { true } else { false } }.count
    }

    func starts(_ output: [ShellOutput]) -> Int { output.filter { $0 == .startSync }.count }

    func reports(_ output: [ShellOutput]) -> Int { output.filter { if case .reportStored = $0 { true } else { false } }.count }

    @Test func anAcknowledgementWaitsForItsSyncAndLaterBatchesWaitBehindIt() {
        var engine = engine()
        var driver = SessionDriver(store: MemorySessionStore(), historyForNewcomers: 1000, syncs: true)
        let first = driver.perform(engine.received([message(1)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        #expect(first.committed)
        // Stored and reported at the commit; the ACK waits for the sync asked for.
        #expect(reports(first.output) == 1 && starts(first.output) == 1 && acks(first.output) == 0)
        // Two more arrive while the sync runs: no second sync yet, no ACK.
        let second = driver.perform(engine.received([message(2)], on: LinkHandle(1), at: at(11)), engine: &engine, at: at(11))
        let third = driver.perform(engine.received([message(3)], on: LinkHandle(2), at: at(12)), engine: &engine, at: at(12))
        #expect(starts(second.output + third.output) == 0 && acks(second.output + third.output) == 0)
        #expect(reports(second.output + third.output) == 2)
        // The first sync ends: the first ACK leaves, and one sync starts for both later commits.
        let afterFirst = driver.synced(true, engine: &engine, at: at(13))
        #expect(acks(afterFirst) == 1 && starts(afterFirst) == 1)
        // It ends: both ACKs leave, in order, and nothing more is asked.
        let afterSecond = driver.synced(true, engine: &engine, at: at(14))
        #expect(acks(afterSecond) == 2 && starts(afterSecond) == 0)
        #expect(afterSecond.compactMap { if case .write(let handle, _, _) = $0 { handle } else { nil } } == [LinkHandle(1), LinkHandle(2)])
        #expect(driver.synced(true, engine: &engine, at: at(15)).isEmpty)  // (none ran)
    }

    @Test func aFailedSyncSendsNoAcknowledgementButWhatElseWaited() {
        var engine = engine()
        var driver = SessionDriver(store: MemorySessionStore(), historyForNewcomers: 1000, syncs: true)
        _ = driver.perform(engine.received([message(1)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        // A frame that is not an ACK, queued behind the sync.
        let ping = driver.perform([.send(LinkHandle(2), [.ping(7)])], engine: &engine, at: at(11))
        #expect(ping.output.isEmpty)
        let after = driver.synced(false, engine: &engine, at: at(12))
        #expect(acks(after) == 0)
        #expect(writes(after) == [[.ping(7)]])
        // A later sync that succeeds proves nothing (the failed one may have left pages marked clean):
        // no ACK leaves for anything from now on.
        let next = driver.perform(engine.received([message(2)], on: LinkHandle(1), at: at(13)), engine: &engine, at: at(13))
        #expect(driver.syncFailed && starts(next.output) == 1)
        #expect(acks(driver.synced(true, engine: &engine, at: at(14))) == 0)
    }

    /// A resync in an idle room reads nothing: what we hold is read once for our SYNC_REQUEST and kept
    /// while the store's messages do not change; an asker that holds all of it is not answered, without
    /// an export. An asker that lacks something, or a store that changed, is answered as before.
    @Test func anIdleResyncReadsNothingAndAnAskerThatLacksSomethingIsAnswered() throws {
        var engine = engine(version: 2)
        let store = MemorySessionStore()
        func own(_ sequence: Int64) -> StoredMessage {
            StoredMessage(
                id: String(repeating: "a", count: 31) + String(sequence), room: lab.rawValue, senderID: me.id.rawValue, senderName: me.name,
                sequence: sequence, timestamp: 100 + sequence, kind: .text, body: "m\(sequence)")
        }
        for sequence in Int64(1)...3 { store.insert(own(sequence), now: 0) }
        var driver = SessionDriver(store: store, historyForNewcomers: 1000, syncs: false)
        func answered(_ marks: [ClosedRange<UInt64>]) -> [StoredMessage]? {
            let output = driver.perform([.sendSync(lab, sinceMilliseconds: 0, marks: [me.id.rawValue: marks], to: bob)], engine: &engine, at: at(20)).output
            for case .offerHistory(let offer) in output { if case .messages(let messages) = offer.content { return messages } }
            return nil
        }
        let request = writes(driver.perform([.requestSync(lab, LinkHandle(1))], engine: &engine, at: at(10)).output)
        guard case .syncRequest(let sent)? = request.first?.first else { Issue.record("no SYNC_REQUEST: \(request)"); return }
        #expect(sent.marks == [.init(author: me.id.rawValue, first: 1, last: 3)])
        #expect(store.relayReads.recentSequences == 1)
        // Bob holds all of it: no answer, nothing read.
        #expect(answered([1...2, 3...3]) == nil)
        #expect(store.relayReads.exports == 0)
        // Our next resync reads nothing either.
        _ = driver.perform([.requestSync(lab, LinkHandle(2))], engine: &engine, at: at(30))
        #expect(store.relayReads.recentSequences == 1)
        // Bob lacks the third: answered, with it.
        #expect(answered([1...2])?.map(\.sequence) == [3])
        #expect(store.relayReads.exports == 1)
        // A new message: what was kept no longer holds, so an asker with the old runs is answered.
        store.insert(own(4), now: 0)
        #expect(answered([1...3])?.map(\.sequence) == [4])
        #expect(store.relayReads.exports == 2)
    }

    @Test func coveredRunsMergeTheAskersAdjacentRanges() {
        let covered = SessionStateMachine.covered
        #expect(covered(["a": [1...10]], ["a": [1...4, 5...7, 6...10]]))
        #expect(!covered(["a": [1...10]], ["a": [1...4, 6...10]]))
        #expect(!covered(["a": [1...1], "b": [2...2]], ["a": [1...1]]))
        #expect(covered([:], [:]))
        #expect(covered(["a": [5...5, UInt64.max...UInt64.max]], ["a": [0...UInt64.max]]))
        #expect(covered(["a": [3...UInt64.max]], ["a": [UInt64.max - 1...UInt64.max, 0...UInt64.max - 2]]))
    }

    @Test func aStoreWithNothingToSyncDoesItAllAtOnce() {
        var engine = engine()
        var driver = SessionDriver(store: MemorySessionStore(), historyForNewcomers: 1000, syncs: false)
        let done = driver.perform(engine.received([message(1)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        #expect(reports(done.output) == 1 && acks(done.output) == 1 && starts(done.output) == 0)
        #expect(driver.settle() == .now(synced: true))
    }

    @Test func ourSendGoesFirstOnlyAfterOurLastSyncedSequenceAndWhileOnlyAcknowledgementsWait() throws {
        var engine = engine()
        var driver = SessionDriver(store: MemorySessionStore(), historyForNewcomers: 1000, syncs: true)
        func send(_ text: String) throws -> (outcome: SessionDriver.OwnOutcome, wentFirst: Bool, output: [ShellOutput]) {
            let (plan, actions) = try engine.send([text], room: lab, reliable: true, at: at(20))
            return driver.performOwn(plan, actions, in: lab, mayGoFirst: true, engine: &engine, at: at(20))
        }
        // The first: no sequence of ours is known synced yet, so it waits for its sync.
        let one = try send("one")
        #expect(!one.wentFirst && writes(one.output).isEmpty && one.outcome == .syncing(waiter: 1))
        let synced = driver.synced(true, engine: &engine, at: at(21))
        #expect(synced.contains(.settled(waiter: 1, synced: true)) && writes(synced).count == 2)  // (to bob and carol)
        // The second continues from it: out before its commit, flushed at once.
        let two = try send("two")
        #expect(two.wentFirst && two.outcome == .syncing(waiter: 2))
        #expect(two.output.first.map { if case .write(_, _, flushNow: true) = $0 { true } else { false } } == true)
        // A message of bob's arrives: only its ACK waits, so a third still goes first... after the second syncs.
        _ = driver.perform(engine.received([message(1)], on: LinkHandle(1), at: at(22)), engine: &engine, at: at(22))
        let three = try send("three")
        #expect(!three.wentFirst)  // (the second's sequence is not synced yet)
        _ = driver.synced(true, engine: &engine, at: at(23))
        _ = driver.synced(true, engine: &engine, at: at(24))
        // Now a batch with a frame other than an ACK waits: a send of ours may not overtake it.
        let start = driver.perform([.persist(.rememberKeyed(bob.id)), .send(LinkHandle(2), [.ping(7)])], engine: &engine, at: at(25))
        #expect(starts(start.output) == 1)
        let four = try send("four")
        #expect(!four.wentFirst)
    }

    @Test func aFailedCommitReportsNothingAcknowledgesNothingAndIsTriedAgainOnce() {
        var engine = engine()
        let store = MemorySessionStore()
        var failing = true
        store.failsCommit = { failing }
        var driver = SessionDriver(store: store, historyForNewcomers: 1000, syncs: false)
        let failed = driver.perform(engine.received([message(1)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        #expect(!failed.committed && reports(failed.output) == 0 && acks(failed.output) == 0)
        #expect(failed.output.contains { if case .storeFailed = $0 { true } else { false } })
        #expect(store.messages.isEmpty)
        // The disk is back, and bob sends the message again: stored (by the retried write), reported once,
        // acknowledged.
        failing = false
        let again = driver.perform(engine.received([message(1)], on: LinkHandle(1), at: at(11)), engine: &engine, at: at(11))
        #expect(again.committed && store.messages.count == 1 && reports(again.output) == 1 && acks(again.output) == 1)
        // Retried with any next commit, even one of other writes: reported then.
        failing = true
        _ = driver.perform(engine.received([message(2)], on: LinkHandle(1), at: at(12)), engine: &engine, at: at(12))
        failing = false
        let other = driver.perform([.persist(.rememberKeyed(bob.id))], engine: &engine, at: at(13))
        #expect(other.committed && store.messages.count == 2 && reports(other.output) == 1)
    }

    @Test func stoppingTellsEveryWaiterItDidNotSync() {
        var engine = engine()
        var driver = SessionDriver(store: MemorySessionStore(), historyForNewcomers: 1000, syncs: true)
        _ = driver.perform(engine.received([message(1)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        guard case .later(let waiter) = driver.settle() else { Issue.record("a sync runs: the waiter waits"); return }
        #expect(driver.stop() == [.settled(waiter: waiter, synced: false)])
        #expect(driver.synced(true, engine: &engine, at: at(11)).isEmpty)
        #expect(driver.perform([.send(LinkHandle(1), [.ping(7)])], engine: &engine, at: at(12)).output.isEmpty)
    }
}
