import LanchatCore
import LanchatEngine
import LanchatWire
import Testing

/// The shell's rules as lanchatd and the simulator both run them (`SessionDriver`): nothing leaves
/// before the sync of what was committed before it, syncs are shared, a failed sync or commit sends no
/// ACK, our own messages go first only under the send-first rule.
@Suite struct SessionDriverTests: LabFixture {
    /// A driver and its store's half (`StoreWorker`), answered at once (as lanchatd's store thread does,
    /// only sooner), or, while `holding`, when `release` is called: the harness does the `.store` outputs
    /// and returns the rest, in order.
    struct Driven {
        var driver: SessionDriver
        var worker: StoreWorker
        var holding = false
        var held: [StoreRequest] = []

        init(store: MemorySessionStore = MemorySessionStore(), syncs: Bool) {
            driver = SessionDriver(historyForNewcomers: 1000, syncs: syncs)
            worker = StoreWorker(store: store, syncs: syncs)
        }

        mutating func run(_ output: [ShellOutput], engine: inout SessionStateMachine, at now: EngineTime) -> [ShellOutput] {
            var done: [ShellOutput] = []
            var work = output[...]
            while let item = work.popFirst() {
                guard case .store(let request) = item else {
                    done.append(item)
                    continue
                }
                if holding {
                    held.append(request)
                    continue
                }
                work = driver.storeAnswered(worker.answer(request), engine: &engine, at: now)[...] + work
            }
            return done
        }

        mutating func perform(_ actions: [SessionAction], engine: inout SessionStateMachine, at now: EngineTime) -> [ShellOutput] {
            run(driver.perform(actions, engine: &engine, at: now), engine: &engine, at: now)
        }

        mutating func performOwn(
            _ plan: SessionStateMachine.SendPlan, _ actions: [SessionAction], engine: inout SessionStateMachine, at now: EngineTime
        )
            -> (waiter: UInt64, wentFirst: Bool, output: [ShellOutput])
        {
            let room = RoomID(plan.messages[0].room)!
            let own = driver.performOwn(plan, actions, in: room, mayGoFirst: true, engine: &engine, at: now)
            return (own.waiter, own.wentFirst, run(own.output, engine: &engine, at: now))
        }

        mutating func synced(_ ok: Bool, engine: inout SessionStateMachine, at now: EngineTime) -> [ShellOutput] {
            run(driver.synced(ok, engine: &engine, at: now), engine: &engine, at: now)
        }

        /// Answers what was held in one turn of the store's thread (one commit for them all), as lanchatd's
        /// store thread does.
        mutating func answerTogether(engine: inout SessionStateMachine, at now: EngineTime) -> [ShellOutput] {
            holding = false
            let answers = worker.answer(held)
            held = []
            return answers.flatMap { run(driver.storeAnswered($0, engine: &engine, at: now), engine: &engine, at: now) }
        }

        /// Answers what was held, in order, and stops holding.
        mutating func release(engine: inout SessionStateMachine, at now: EngineTime) -> [ShellOutput] {
            holding = false
            let requests = held
            held = []
            return requests.flatMap { run([.store($0)], engine: &engine, at: now) }
        }
    }

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

    func failed(_ output: [ShellOutput]) -> Bool { output.contains { if case .storeFailed = $0 { true } else { false } } }

    @Test func anAcknowledgementWaitsForItsSyncAndLaterBatchesWaitBehindIt() {
        var engine = engine()
        var driven = Driven(syncs: true)
        let first = driven.perform(engine.received([message(1)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        #expect(!failed(first))
        // Stored and reported at the commit; the ACK waits for the sync asked for.
        #expect(reports(first) == 1 && starts(first) == 1 && acks(first) == 0)
        // Two more arrive while the sync runs: no second sync yet, no ACK.
        let second = driven.perform(engine.received([message(2)], on: LinkHandle(1), at: at(11)), engine: &engine, at: at(11))
        let third = driven.perform(engine.received([message(3)], on: LinkHandle(2), at: at(12)), engine: &engine, at: at(12))
        #expect(starts(second + third) == 0 && acks(second + third) == 0)
        #expect(reports(second + third) == 2)
        // The first sync ends: the first ACK leaves, and one sync starts for both later commits.
        let afterFirst = driven.synced(true, engine: &engine, at: at(13))
        #expect(acks(afterFirst) == 1 && starts(afterFirst) == 1)
        // It ends: both ACKs leave, in order, and nothing more is asked.
        let afterSecond = driven.synced(true, engine: &engine, at: at(14))
        #expect(acks(afterSecond) == 2 && starts(afterSecond) == 0)
        #expect(afterSecond.compactMap { if case .write(let handle, _, _) = $0 { handle } else { nil } } == [LinkHandle(1), LinkHandle(2)])
        #expect(driven.synced(true, engine: &engine, at: at(15)).isEmpty)  // (none ran)
    }

    @Test func aFailedSyncSendsNoAcknowledgementButWhatElseWaited() {
        var engine = engine()
        var driven = Driven(syncs: true)
        _ = driven.perform(engine.received([message(1)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        // A frame that is not an ACK, queued behind the sync.
        let ping = driven.perform([.send(LinkHandle(2), [.ping(7)])], engine: &engine, at: at(11))
        #expect(ping.isEmpty)
        let after = driven.synced(false, engine: &engine, at: at(12))
        #expect(acks(after) == 0)
        #expect(writes(after) == [[.ping(7)]])
        // A later sync that succeeds proves nothing (the failed one may have left pages marked clean):
        // no ACK leaves for anything from now on.
        let next = driven.perform(engine.received([message(2)], on: LinkHandle(1), at: at(13)), engine: &engine, at: at(13))
        #expect(driven.driver.syncFailed && starts(next) == 1)
        #expect(acks(driven.synced(true, engine: &engine, at: at(14))) == 0)
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
        var driven = Driven(store: store, syncs: false)
        func answered(_ marks: [ClosedRange<UInt64>]) -> [StoredMessage]? {
            let output = driven.perform([.sendSync(lab, sinceMilliseconds: 0, marks: [me.id.rawValue: marks], to: bob)], engine: &engine, at: at(20))
            for case .offerHistory(let offer) in output { if case .messages(let messages) = offer.content { return messages } }
            return nil
        }
        let request = writes(driven.perform([.requestSync(lab, LinkHandle(1))], engine: &engine, at: at(10)))
        guard case .syncRequest(let sent)? = request.first?.first else { Issue.record("no SYNC_REQUEST: \(request)"); return }
        #expect(sent.marks == [.init(author: me.id.rawValue, first: 1, last: 3)])
        #expect(store.relayReads.recentSequences == 1)
        // Bob holds all of it: no answer, nothing read.
        #expect(answered([1...2, 3...3]) == nil)
        #expect(store.relayReads.exports == 0)
        // Our next resync reads nothing either.
        _ = driven.perform([.requestSync(lab, LinkHandle(2))], engine: &engine, at: at(30))
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
        var driven = Driven(syncs: false)
        let done = driven.perform(engine.received([message(1)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        #expect(reports(done) == 1 && acks(done) == 1 && starts(done) == 0)
        #expect(driven.driver.settle() == .now(synced: true))
    }

    @Test func ourSendGoesFirstOnlyAfterOurLastSyncedSequenceAndWhileOnlyAcknowledgementsWait() throws {
        var engine = engine()
        var driven = Driven(syncs: true)
        func send(_ text: String) throws -> (waiter: UInt64, wentFirst: Bool, output: [ShellOutput]) {
            let (plan, actions) = try engine.send([text], room: lab, reliable: true, at: at(20))
            return driven.performOwn(plan, actions, engine: &engine, at: at(20))
        }
        // The first: no sequence of ours is known synced yet, so it waits for its sync.
        let one = try send("one")
        #expect(!one.wentFirst && writes(one.output).isEmpty && one.waiter == 1)
        let synced = driven.synced(true, engine: &engine, at: at(21))
        #expect(synced.contains(.settled(waiter: 1, .stored(synced: true))) && writes(synced).count == 2)  // (to bob and carol)
        // The second continues from it: out before its commit, flushed at once.
        let two = try send("two")
        #expect(two.wentFirst && two.waiter == 2)
        #expect(two.output.first.map { if case .write(_, _, flushNow: true) = $0 { true } else { false } } == true)
        // A message of bob's arrives: only its ACK waits, so a third still goes first... after the second syncs.
        _ = driven.perform(engine.received([message(1)], on: LinkHandle(1), at: at(22)), engine: &engine, at: at(22))
        let three = try send("three")
        #expect(!three.wentFirst)  // (the second's sequence is not synced yet)
        _ = driven.synced(true, engine: &engine, at: at(23))
        _ = driven.synced(true, engine: &engine, at: at(24))
        // Now a batch with a frame other than an ACK waits: a send of ours may not overtake it.
        let start = driven.perform([.persist(.rememberKeyed(bob.id)), .send(LinkHandle(2), [.ping(7)])], engine: &engine, at: at(25))
        #expect(starts(start) == 1)
        let four = try send("four")
        #expect(!four.wentFirst)
    }

    @Test func aFailedCommitReportsNothingAcknowledgesNothingAndIsTriedAgainOnce() {
        var engine = engine()
        let store = MemorySessionStore()
        var failing = true
        store.failsCommit = { failing }
        var driven = Driven(store: store, syncs: false)
        let failedOnce = driven.perform(engine.received([message(1)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        #expect(failed(failedOnce) && reports(failedOnce) == 0 && acks(failedOnce) == 0)
        #expect(store.messages.isEmpty)
        // The disk is back, and bob sends the message again: stored (by the retried write), reported once,
        // acknowledged.
        failing = false
        let again = driven.perform(engine.received([message(1)], on: LinkHandle(1), at: at(11)), engine: &engine, at: at(11))
        #expect(!failed(again) && store.messages.count == 1 && reports(again) == 1 && acks(again) == 1)
        // Retried with any next commit, even one of other writes: reported then.
        failing = true
        _ = driven.perform(engine.received([message(2)], on: LinkHandle(1), at: at(12)), engine: &engine, at: at(12))
        failing = false
        let other = driven.perform([.persist(.rememberKeyed(bob.id))], engine: &engine, at: at(13))
        #expect(!failed(other) && store.messages.count == 2 && reports(other) == 1)
    }

    /// Writes the store refused are tried again at once (the frames of their batch may have left), once:
    /// a disk that keeps refusing is not asked again in a loop.
    @Test func refusedWritesAreTriedAgainAtOnceButNotInALoop() {
        var engine = engine()
        let store = MemorySessionStore()
        var refusals = 1
        store.failsCommit = {
            refusals -= 1
            return refusals >= 0
        }
        var driven = Driven(store: store, syncs: false)
        let once = driven.perform(engine.received([message(1)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        #expect(once.filter { if case .storeFailed = $0 { true } else { false } }.count == 1)
        #expect(store.messages.count == 1 && reports(once) == 1 && driven.driver.unanswered == 0)  // (stored by the retry, reported then)
        refusals = 1_000
        let refused = driven.perform(engine.received([message(2)], on: LinkHandle(1), at: at(11)), engine: &engine, at: at(11))
        #expect(refused.filter { if case .storeFailed = $0 { true } else { false } }.count == 2)  // (the batch, and one retry)
        #expect(driven.driver.unanswered == 0 && store.messages.count == 1)
    }

    @Test func stoppingTellsEveryWaiterItDidNotSync() {
        var engine = engine()
        var driven = Driven(syncs: true)
        _ = driven.perform(engine.received([message(1)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        guard case .later(let waiter) = driven.driver.settle() else { Issue.record("a sync runs: the waiter waits"); return }
        #expect(driven.driver.stop() == [.settled(waiter: waiter, .stored(synced: false))])
        #expect(driven.driver.synced(true, engine: &engine, at: at(11)).isEmpty)
        #expect(driven.perform([.send(LinkHandle(1), [.ping(7)])], engine: &engine, at: at(12)).isEmpty)
    }

    // MARK: A store that answers later (lanchatd's store thread)

    /// An ACK waits for its commit's answer, then for the sync that answer asks for; a report comes with
    /// the answer, before the sync.
    @Test func anAcknowledgementWaitsForItsCommitsAnswerAndThenItsSync() {
        var engine = engine()
        var driven = Driven(syncs: true)
        driven.holding = true
        let asked = driven.perform(engine.received([message(1)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        #expect(asked.isEmpty && driven.held.count == 1 && driven.driver.unanswered == 1)
        let answered = driven.release(engine: &engine, at: at(11))
        #expect(reports(answered) == 1 && starts(answered) == 1 && acks(answered) == 0)
        #expect(acks(driven.synced(true, engine: &engine, at: at(12))) == 1)
    }

    /// Requests answered in one commit share one sync: the sync asked for the first answer began after
    /// that commit, so it covers the others too (not a second sync for them).
    @Test func answersOfOneCommitShareOneSync() {
        var engine = engine()
        var driven = Driven(syncs: true)
        driven.holding = true
        for sequence: UInt64 in 1...3 {
            _ = driven.perform(engine.received([message(sequence)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        }
        let answered = driven.answerTogether(engine: &engine, at: at(11))
        #expect(reports(answered) == 3 && starts(answered) == 1 && acks(answered) == 0)
        let synced = driven.synced(true, engine: &engine, at: at(12))
        #expect(acks(synced) == 3 && starts(synced) == 0)
    }

    /// A later batch's events are not told before an earlier batch's reports, nor its frames written
    /// before the earlier batch's.
    @Test func nothingOvertakesABatchWhoseAnswerIsAwaited() {
        var engine = engine()
        var driven = Driven(syncs: false)
        driven.holding = true
        _ = driven.perform(engine.received([message(1)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        let typing = SessionEvent.typing(room: lab, peer: bob)
        let later = driven.perform([.emit(typing), .send(LinkHandle(2), [.ping(7)])], engine: &engine, at: at(11))
        #expect(later.isEmpty)
        let answered = driven.release(engine: &engine, at: at(12))
        let order = answered.compactMap { item -> String? in
            switch item {
            case .reportStored: "report"
            case .tell(typing): "typing"
            case .write(_, let frames, _) where frames == [.ping(7)]: "ping"
            case .write(_, let frames, _) where frames.allSatisfy({ if case .ack = $0 { true } else { false } }): "ack"
            default: nil
            }
        }
        #expect(order == ["report", "ack", "typing", "ping"])
    }

    /// `settle()` waits for a commit that is not answered yet, even with nothing to sync.
    @Test func settleWaitsForAnUnansweredCommit() {
        var engine = engine()
        var driven = Driven(syncs: false)
        driven.holding = true
        _ = driven.perform(engine.received([message(1)], on: LinkHandle(1), at: at(10)), engine: &engine, at: at(10))
        guard case .later(let waiter) = driven.driver.settle() else { Issue.record("a commit is awaited: the waiter waits"); return }
        #expect(driven.release(engine: &engine, at: at(11)).contains(.settled(waiter: waiter, .stored(synced: true))))
        #expect(driven.driver.settle() == .now(synced: true))
    }

    /// A send of ours does not go first while the commit of the one before it is unanswered (its sequence
    /// is not known stored), and a refused send is settled `.notStored`.
    @Test func aSendDoesNotGoFirstWhileItsPredecessorIsUnansweredAndARefusedOneIsNotStored() throws {
        var engine = engine()
        let store = MemorySessionStore()
        var driven = Driven(store: store, syncs: false)
        func send(_ text: String) throws -> (waiter: UInt64, wentFirst: Bool, output: [ShellOutput]) {
            let (plan, actions) = try engine.send([text], room: lab, reliable: true, at: at(20))
            return driven.performOwn(plan, actions, engine: &engine, at: at(20))
        }
        _ = try send("one")  // (answered at once: stored)
        driven.holding = true
        let two = try send("two")
        #expect(two.wentFirst)
        let three = try send("three")
        #expect(!three.wentFirst)
        _ = driven.release(engine: &engine, at: at(21))
        store.failsCommit = { true }
        let four = try send("four")
        #expect(four.output.contains(.settled(waiter: four.waiter, .notStored)))
    }

    // MARK: Acknowledgements heard wait

    func heardAck(_ byte: UInt8, count: Int = 1) -> SessionAction {
        .persist(.acknowledge(bob.id, (0..<count).map { WireID(bytes: [UInt8](repeating: byte &+ UInt8(truncatingIfNeeded: $0), count: 16))! }))
    }

    /// A batch that only removes acknowledged messages from the outbox asks nothing of the store by itself
    /// (nothing waits for it): its writes go first in the next batch's request, in the order heard.
    @Test func acknowledgementsHeardGoFirstInTheNextRequest() {
        var engine = engine()
        var driven = Driven(syncs: true)
        driven.holding = true
        #expect(driven.perform([heardAck(1)], engine: &engine, at: at(10)).isEmpty)
        #expect(driven.perform([heardAck(2)], engine: &engine, at: at(20)).isEmpty)
        #expect(driven.held.isEmpty && driven.driver.unanswered == 0)
        #expect(driven.driver.acknowledgementsWaiting == 2 && driven.driver.nextDeadline == 10 + SessionDriver.acknowledgementDelay)
        // A message arrives: one request, the acknowledgements first, then its own writes.
        _ = driven.perform(engine.received([message(1)], on: LinkHandle(1), at: at(30)), engine: &engine, at: at(30))
        #expect(driven.held.count == 1 && driven.driver.acknowledgementsWaiting == 0 && driven.driver.nextDeadline == nil)
        let operations = driven.held.first?.operations ?? []
        #expect(operations.count >= 3 && Array(operations.prefix(2)) == [heardAck(1), heardAck(2)].map { if case .persist(let o) = $0 { o } else { fatalError() } })
        #expect(operations.dropFirst(2).contains { if case .insertMessage = $0 { true } else { false } })
        // Its ACK still waits for its commit's answer and sync, as before.
        let answered = driven.release(engine: &engine, at: at(31))
        #expect(reports(answered) == 1 && starts(answered) == 1 && acks(answered) == 0)
        #expect(acks(driven.synced(true, engine: &engine, at: at(32))) == 1)
    }

    /// With no other batch, they are asked of the store on their own once `acknowledgementDelay` passed
    /// (the host's timer calls `perform` at `nextDeadline`), or at once when `acknowledgementLimit` ids wait.
    @Test func acknowledgementsHeardAreWrittenAloneAfterTheirDelayOrPastTheLimit() {
        var engine = engine()
        var driven = Driven(syncs: true)
        driven.holding = true
        _ = driven.perform([heardAck(1)], engine: &engine, at: at(10))
        let deadline = driven.driver.nextDeadline!
        _ = driven.perform([], engine: &engine, at: at(deadline - 1))
        #expect(driven.held.isEmpty)
        _ = driven.perform(engine.tick(at: at(deadline)), engine: &engine, at: at(deadline))
        #expect(driven.held.map(\.operations.count) == [1] && driven.driver.nextDeadline == nil)
        // Not durable: no sync is asked for them.
        #expect(starts(driven.release(engine: &engine, at: at(deadline))) == 0)
        // Many at once: asked for at once.
        driven.holding = true
        _ = driven.perform([heardAck(3, count: SessionDriver.acknowledgementLimit - 1)], engine: &engine, at: at(200))
        #expect(driven.held.isEmpty)
        _ = driven.perform([heardAck(9)], engine: &engine, at: at(201))
        #expect(driven.held.count == 1 && driven.held[0].operations.count == 2 && driven.driver.acknowledgementsWaiting == 0)
    }

    /// A node that stops still asks the store for the acknowledgements heard (fewer resends after it
    /// starts again); a stopped driver has no deadline.
    @Test func acknowledgementsHeardAreWrittenWhenTheNodeStops() {
        var engine = engine()
        var driven = Driven(syncs: true)
        _ = driven.perform([heardAck(1)], engine: &engine, at: at(10))
        let stop = driven.driver.stop()
        let requests = stop.compactMap { if case .store(let request) = $0 { request } else { nil } }
        #expect(requests.count == 1 && requests[0].operations.count == 1 && requests[0].now == at(10).wall)
        #expect(driven.driver.nextDeadline == nil && driven.driver.stop().isEmpty)
    }
}
