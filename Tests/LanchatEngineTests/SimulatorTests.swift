import Foundation
import Testing

/// Seeded schedules of whole rooms with faults (see `Simulator`). `SIMULATOR_SCHEDULES=N` sets how many
/// (default 300; `scripts/test.sh` runs 10,000 in a step of their own), `SIMULATOR_SEED=S` replays one,
/// `SIMULATOR_FIRST=S` starts the range elsewhere. The schedules are CPU work: the test yields between
/// them, so that tests with real-time waits running beside it get their turn on the cooperative threads.
@Suite struct SimulatorTests {
    static var environment: [String: String] { ProcessInfo.processInfo.environment }

    @Test func seededSchedulesKeepTheInvariants() async throws {
        if let text = Self.environment["SIMULATOR_SEED"], let seed = UInt64(text) {
            var options = Simulator.Options()
            options.faults = Self.environment["SIMULATOR_FAULTS"] != "0"
            let simulator = Simulator(seed: seed, options: options)
            if Self.environment["SIMULATOR_TRACE"] == "1" { simulator.verbose = true }
            try simulator.run()
            print("simulator: seed \(seed) passed (\(simulator.events) events, \(simulator.sent.count) reliable messages, "
                + "\(simulator.transferStats.count) files sent, \(simulator.filesPlaced) placed)")
            return
        }
        let count = Self.environment["SIMULATOR_SCHEDULES"].flatMap { Int($0) } ?? 300
        let first = Self.environment["SIMULATOR_FIRST"].flatMap { UInt64($0) } ?? 1
        let started = ContinuousClock.now
        var events = 0
        var messages = 0
        var streams = (opened: 0, clean: 0, bytes: 0)
        var files = (sent: 0, placed: 0, bytes: 0, resent: 0, corrupted: 0)
        var forgeries = (injected: 0, refused: 0)
        var fakes = 0
        var metaWrites = 0
        var topics = (published: 0, delivered: 0)
        var failed: [UInt64] = []
        for seed in first..<(first + UInt64(count)) {
            let simulator = Simulator(seed: seed)
            do {
                try simulator.run()
            } catch {
                if failed.isEmpty { Issue.record("\(error)") }
                failed.append(seed)
                if Self.environment["SIMULATOR_ALL"] != "1" { return }
            }
            await Task.yield()
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
            forgeries.injected += simulator.forgeries.injected
            forgeries.refused += simulator.forgeries.refused
            fakes += simulator.fakeMembers
            metaWrites += simulator.metaWrites
            topics.published += simulator.topicPublished
            topics.delivered += simulator.topicDeliveries
        }
        let verdict = failed.isEmpty ? "passed" : "\(failed.count) FAILED (seeds \(failed))"
        print("simulator: \(count) schedules (seeds \(first)...\(first + UInt64(count) - 1)) \(verdict): \(events) events, "
            + "\(messages) reliable messages checked, \(streams.opened) streams opened (\(streams.clean) ended cleanly at the reader, "
            + "\(streams.bytes) bytes read and checked), \(files.sent) files sent (\(files.placed) placed and checked, \(files.bytes) bytes; "
            + "\(files.resent) bytes sent again after interruptions; \(files.corrupted) damaged on disk, none placed), \(forgeries.injected) history records changed by a relay (\(forgeries.refused) "
            + "refused as forged, the rest the newcomer's own; every stored message's signature checked), "
            + "\(fakes) members of no node's making introduced (none added), \(metaWrites) metadata writes (converged), "
            + "\(topics.published) topic messages published (\(topics.delivered) deliveries checked), in \(ContinuousClock.now - started)")
    }

    /// Without faults, the same commands must also keep every invariant (a baseline for the faults).
    @Test func schedulesWithoutFaults() throws {
        for seed in UInt64(1)...50 {
            var options = Simulator.Options()
            options.faults = false
            try Simulator(seed: seed, options: options).run()
        }
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
