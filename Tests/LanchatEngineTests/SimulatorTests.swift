import Foundation
import Testing
import LanchatEngine

/// Seeded schedules of whole rooms with faults (see `Simulator`). `SIMULATOR_SCHEDULES=N` sets how many
/// (default 300; `scripts/test.sh` runs 10,000 in a step of their own), `SIMULATOR_SEED=S` replays one,
/// `SIMULATOR_FIRST=S` starts the range elsewhere, `SIMULATOR_WORKERS=N` runs them on N tasks (default: one
/// per core). The schedules are CPU work: each worker yields between them, so that tests with real-time
/// waits running beside it get their turn on the cooperative threads.
@Suite struct SimulatorTests {
    static var environment: [String: String] { ProcessInfo.processInfo.environment }

    @Test func seededSchedulesKeepTheInvariants() async throws {
        if let text = Self.environment["SIMULATOR_SEED"], let seed = UInt64(text) {
            var options = Simulator.Options()
            options.faults = Self.environment["SIMULATOR_FAULTS"] != "0"
            let simulator = Simulator(seed: seed, options: options)
            if Self.environment["SIMULATOR_TRACE"] == "1" { simulator.verbose = true }
            try simulator.run()
            print(
                "simulator: seed \(seed) passed (\(simulator.events) events, \(simulator.sent.count) reliable messages, "
                    + "\(simulator.transferStats.count) files sent, \(simulator.filesPlaced) placed)")
            return
        }
        let count = Self.environment["SIMULATOR_SCHEDULES"].flatMap { Int($0) } ?? 300
        let first = Self.environment["SIMULATOR_FIRST"].flatMap { UInt64($0) } ?? 1
        let workers = max(1, Self.environment["SIMULATOR_WORKERS"].flatMap { Int($0) } ?? ProcessInfo.processInfo.activeProcessorCount)
        let all = Self.environment["SIMULATOR_ALL"] == "1"
        let started = ContinuousClock.now
        // The schedules are independent: each worker runs every `workers`-th seed, and their totals add up.
        var totals = Totals()
        await withTaskGroup(of: Totals.self) { group in
            for worker in 0..<min(workers, max(1, count)) {
                group.addTask {
                    var totals = Totals()
                    for seed in stride(from: first + UInt64(worker), to: first + UInt64(count), by: workers) {
                        if Task.isCancelled { break }
                        let simulator = Simulator(seed: seed)
                        do {
                            try simulator.run()
                        } catch {
                            totals.failures.append((seed, "\(error)"))
                            if !all { break }
                        }
                        totals.add(simulator)
                        await Task.yield()
                    }
                    return totals
                }
            }
            for await part in group {
                totals.merge(part)
                if !part.failures.isEmpty && !all { group.cancelAll() }
            }
        }
        let failed = totals.failures.sorted { $0.seed < $1.seed }
        if let lowest = failed.first { Issue.record("\(lowest.description)") }
        // Seals were at work: sent, stored, and handed on in histories.
        if count >= 100 {
            #expect(
                totals.seals.frames > 0 && totals.seals.histories > 0 && totals.seals.records > 0 && totals.seals.byIndex > 0 && totals.seals.broken > 0
                    && totals.seals.checks > 0
                    && totals.seals.failed > 0)
        }
        let verdict = failed.isEmpty ? "passed" : "\(failed.count) FAILED (seeds \(failed.map(\.seed)))"
        print(
            "simulator: \(count) schedules (seeds \(first)...\(first + UInt64(count) - 1)) \(verdict): \(totals.events) events, "
                + "\(totals.messages) reliable messages checked, \(totals.streams.opened) streams opened (\(totals.streams.clean) ended cleanly at the reader, "
                + "\(totals.streams.bytes) bytes read and checked), \(totals.files.sent) files sent (\(totals.files.placed) placed and checked, \(totals.files.bytes) bytes; "
                + "\(totals.files.resent) bytes sent again after interruptions; \(totals.files.corrupted) damaged on disk, none placed; "
                + "\(totals.files.cancelsNotHeard) left interrupted at a receiver that never heard its sender's cancel), \(totals.forgeries.injected) history records changed by a relay (\(totals.forgeries.refused) "
                + "refused as forged, the rest the newcomer's own or in a history that did not arrive; every stored message's signature checked), "
                + "\(totals.histories.offered) histories offered as resources (\(totals.histories.imported) read and merged), "
                + "\(totals.seals.frames) seals delivered (version 4 in three schedules of four; \(totals.seals.broken) of them broken by their author (forged, truncated or changed; "
                + "every record stored sealed is checked by its seal), \(totals.seals.histories) sealed histories offered, "
                + "\(totals.seals.records) records stored sealed and checked by their seal (\(totals.seals.byIndex) of them kept as their leaf index, with their "
                + "seal's leaves); \(totals.seals.checks) seals checked off the event loop, "
                + "\(totals.seals.failed) of them failed and dropped with their messages), "
                + "\(totals.shared.announced) files shared in rooms (\(totals.shared.fetched) fetched on their announcement, \(totals.shared.served) served, "
                + "\(totals.shared.refused) requests refused, \(totals.shared.placed) copies kept and checked), "
                + "\(totals.fakes) members of no node's making introduced (none added), \(totals.metaWrites) metadata writes (converged), "
                + "\(totals.admin.commands) administration commands in the even seeds (\(totals.admin.removed) nodes removed from a room, \(totals.admin.closed) "
                + "out of one by its closing; converged; \(totals.admin.recordless) members with no record of their room's creator, "
                + "\(totals.admin.notTaken) views where such a member took no removal), "
                + "\(totals.topics.published) topic messages published (\(totals.topics.delivered) deliveries checked), "
                + "\(totals.store.turns) turns of a store's thread (\(totals.store.lost) requests lost in a crash before their turn), "
                + "\(totals.syncs.done) syncs of a store (\(totals.syncs.lost) messages committed and lost in a crash before theirs; \(totals.syncs.failed) commits refused by the disk), in \(ContinuousClock.now - started) "
                + "on \(workers) worker\(workers == 1 ? "" : "s") (SIMULATOR_WORKERS)")
    }

    /// What a range of schedules did, added up (per worker, then merged).
    struct Totals: Sendable {
        var events = 0
        var messages = 0
        var streams = (opened: 0, clean: 0, bytes: 0)
        var files = (sent: 0, placed: 0, bytes: 0, resent: 0, corrupted: 0, cancelsNotHeard: 0)
        var forgeries = (injected: 0, refused: 0)
        var fakes = 0
        var metaWrites = 0
        var admin = (commands: 0, removed: 0, closed: 0, recordless: 0, notTaken: 0)
        var topics = (published: 0, delivered: 0)
        var syncs = (done: 0, lost: 0, failed: 0)
        var store = (turns: 0, lost: 0)
        var histories = (offered: 0, imported: 0)
        var seals = (frames: 0, histories: 0, records: 0, byIndex: 0, broken: 0, checks: 0, failed: 0)
        var shared = (announced: 0, fetched: 0, served: 0, refused: 0, placed: 0)
        var failures: [(seed: UInt64, description: String)] = []

        mutating func add(_ simulator: Simulator) {
            events += simulator.events
            messages += simulator.sent.count
            streams.opened += simulator.streamPlans.count
            streams.clean += simulator.cleanStreams
            streams.bytes += simulator.streamBytes
            files.sent += simulator.transferStats.count
            files.placed += simulator.filesPlaced
            files.bytes += simulator.placedBytes
            files.resent += simulator.transferStats.values.reduce(0) { $0 + $1.resent }
            files.corrupted += simulator.corrupted.count
            files.cancelsNotHeard += simulator.cancelsNotHeard
            forgeries.injected += simulator.forgeries.injected
            forgeries.refused += simulator.forgeries.refused
            fakes += simulator.fakeMembers
            metaWrites += simulator.metaWrites
            admin = (
                admin.commands + simulator.adminCommands,
                admin.removed + simulator.removals, admin.closed + simulator.closings, admin.recordless + simulator.recordless,
                admin.notTaken + simulator.removalsNotTaken
            )
            topics.published += simulator.topicPublished
            topics.delivered += simulator.topicDeliveries
            syncs = (syncs.done + simulator.syncs, syncs.lost + simulator.lostUnsynced, syncs.failed + simulator.failedCommits)
            store = (store.turns + simulator.storeTurns, store.lost + simulator.storeRequestsLost)
            histories = (histories.offered + simulator.historiesOffered, histories.imported + simulator.historiesImported)
            seals = Self.sum(seals, simulator.seals)
            shared = Self.sum(shared, simulator.shared)
        }

        static func sum(
            _ a: (frames: Int, histories: Int, records: Int, byIndex: Int, broken: Int, checks: Int, failed: Int),
            _ b: (frames: Int, histories: Int, records: Int, byIndex: Int, broken: Int, checks: Int, failed: Int)
        ) -> (frames: Int, histories: Int, records: Int, byIndex: Int, broken: Int, checks: Int, failed: Int) {
            (a.frames + b.frames, a.histories + b.histories, a.records + b.records, a.byIndex + b.byIndex, a.broken + b.broken, a.checks + b.checks, a.failed + b.failed)
        }

        static func sum(
            _ a: (announced: Int, fetched: Int, served: Int, refused: Int, placed: Int),
            _ b: (announced: Int, fetched: Int, served: Int, refused: Int, placed: Int)
        )
            -> (announced: Int, fetched: Int, served: Int, refused: Int, placed: Int)
        {
            (a.announced + b.announced, a.fetched + b.fetched, a.served + b.served, a.refused + b.refused, a.placed + b.placed)
        }

        mutating func merge(_ other: Totals) {
            events += other.events
            messages += other.messages
            streams = (streams.opened + other.streams.opened, streams.clean + other.streams.clean, streams.bytes + other.streams.bytes)
            files = (
                files.sent + other.files.sent, files.placed + other.files.placed, files.bytes + other.files.bytes,
                files.resent + other.files.resent, files.corrupted + other.files.corrupted,
                files.cancelsNotHeard + other.files.cancelsNotHeard
            )
            forgeries = (forgeries.injected + other.forgeries.injected, forgeries.refused + other.forgeries.refused)
            seals = Self.sum(seals, other.seals)
            fakes += other.fakes
            metaWrites += other.metaWrites
            admin = (
                admin.commands + other.admin.commands,
                admin.removed + other.admin.removed, admin.closed + other.admin.closed, admin.recordless + other.admin.recordless, admin.notTaken + other.admin.notTaken
            )
            topics = (topics.published + other.topics.published, topics.delivered + other.topics.delivered)
            syncs = (syncs.done + other.syncs.done, syncs.lost + other.syncs.lost, syncs.failed + other.syncs.failed)
            store = (store.turns + other.store.turns, store.lost + other.store.lost)
            histories = (histories.offered + other.histories.offered, histories.imported + other.histories.imported)
            shared = Self.sum(shared, other.shared)
            failures += other.failures
        }
    }

    /// Without faults, the same commands must also keep every invariant (a baseline for the faults).
    @Test func schedulesWithoutFaults() throws {
        for seed in UInt64(1)...50 {
            var options = Simulator.Options()
            options.faults = false
            try Simulator(seed: seed, options: options).run()
        }
    }

    /// The event queue gives events by time, and those due at the same time in the order they were scheduled.
    @Test func theEventQueueKeepsTimeThenScheduleOrder() {
        var queue = EventQueue<Int>()
        var generator = IDGenerator(seed: 7)
        var expected: [(time: Int64, value: Int)] = []
        for value in 0..<2_000 {
            let time = Int64(generator.next() % 50)
            queue.push(value, at: time)
            expected.append((time, value))
        }
        expected.sort { ($0.time, $0.value) < ($1.time, $1.value) }
        var got: [(time: Int64, value: Int)] = []
        while let next = queue.pop() { got.append((next.time, next.event)) }
        #expect(got.map(\.value) == expected.map(\.value))
        #expect(queue.isEmpty && queue.nextTime == nil)
    }

    @Test func aSeedReplaysIdentically() throws {
        let first = Simulator(seed: 42)
        try? first.run()
        let second = Simulator(seed: 42)
        try? second.run()
        #expect(first.trace == second.trace)
        #expect(first.events == second.events)
    }
}
