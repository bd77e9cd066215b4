@testable import LanchatTransport
import Testing

/// `LinkLiveness` as tables: what the heartbeat's tick says after what arrived, and what the output
/// budget says after what was queued and written. Times in milliseconds here (the machine takes any unit).
struct LinkLivenessTests {
    static let limits = LinkLiveness.Limits(interval: 2_000, timeout: 8_000, budget: 10_000, overhead: 100, stall: 30_000)

    enum Step {
        case bytes(Int64)
        case frame(Int64, pong: Bool)
    }

    /// Heartbeats: started at 0, then `steps`, then a tick at `tick`.
    @Test(
        arguments: [
            // Nothing heard for an interval: ping; not before.
            ([], 1_999, LinkLiveness.Verdict.quiet),
            ([], 2_000, .ping),
            // A frame of the peer's own: no ping of ours for an interval after it.
            ([.bytes(1_500), .frame(1_500, pong: false)], 3_000, .quiet),
            ([.bytes(1_500), .frame(1_500, pong: false)], 3_500, .ping),
            // A PONG keeps the link alive but is not the peer's own: we still ping.
            ([.bytes(1_500), .frame(1_500, pong: true)], 2_000, .ping),
            // Nothing at all for the timeout: the end (exactly the timeout is still alive).
            ([], 8_000, .ping),
            ([], 8_001, .noHeartbeat),
            // Bytes of a frame not yet whole count as heard from the link (not for the ping).
            ([.bytes(7_000)], 12_000, .ping),
            ([.bytes(7_000)], 15_001, .noHeartbeat),
        ] as [([Step], Int64, LinkLiveness.Verdict)])
    func heartbeat(steps: [Step], tick: Int64, verdict: LinkLiveness.Verdict) {
        var liveness = LinkLiveness(limits: Self.limits, at: 0)
        liveness.started(at: 0)
        for step in steps {
            switch step {
            case .bytes(let at): liveness.bytesArrived(at: at)
            case .frame(let at, let pong): if !pong { liveness.heard(at: at) }
            }
        }
        #expect(liveness.tick(at: tick) == verdict)
    }

    /// An idle link pings once an interval, not at every tick (the tick comes twice an interval); a frame
    /// of the peer's own puts the next PING an interval after it.
    @Test func aPingAtMostOnceAnInterval() {
        var liveness = LinkLiveness(limits: Self.limits, at: 0)
        liveness.started(at: 0)
        let ticks = stride(from: Int64(1_000), through: 7_000, by: 1_000).map { (at: $0, verdict: liveness.tick(at: $0)) }
        #expect(ticks.filter { $0.verdict == .ping }.map(\.at) == [2_000, 4_000, 6_000])
        liveness.bytesArrived(at: 6_500)
        liveness.heard(at: 6_500)
        #expect(liveness.tick(at: 8_000) == .quiet)
        #expect(liveness.tick(at: 8_499) == .quiet)
        #expect(liveness.tick(at: 8_500) == .ping)
        #expect(liveness.tick(at: 9_000) == .quiet)
    }

    @Test func theBudgetIsPassedOnceAndWritesGiveItBack() {
        var liveness = LinkLiveness(limits: Self.limits, at: 0)
        let first = liveness.queued(4_900, at: 10)
        #expect(first == (5_000, false) && liveness.pendingOutput == 5_000)
        let second = liveness.queued(4_900, at: 11)
        #expect(second == (5_000, false) && liveness.pendingOutput == 10_000)  // (at the budget is within it)
        #expect(liveness.queued(0, at: 12) == (100, true))
        #expect(liveness.queued(0, at: 13) == (100, false))  // (said once: the link is ending)
        liveness.written(first.counted, at: 20)
        liveness.written(second.counted, at: 21)
        liveness.written(100, at: 22)
        liveness.written(100, at: 23)
        #expect(liveness.pendingOutput == 0)
    }

    /// Output that waits with none of it written for `stall` ends the link, whatever arrives meanwhile;
    /// a write that completes starts the wait again; nothing waiting never stalls.
    @Test func outputThatWaitsTooLongStalls() {
        var liveness = LinkLiveness(limits: Self.limits, at: 0)
        liveness.started(at: 0)
        let queued = liveness.queued(1_000, at: 1_000)
        _ = liveness.queued(1_000, at: 5_000)
        for at in stride(from: Int64(1_000), through: 31_000, by: 1_000) {
            liveness.bytesArrived(at: at)
            liveness.heard(at: at)
        }
        #expect(liveness.tick(at: 31_000) == .quiet)
        #expect(liveness.tick(at: 31_001) == .stalled)
        liveness.written(queued.counted, at: 31_001)
        #expect(liveness.tick(at: 32_000) == .quiet)
        liveness.written(1_100, at: 32_000)
        var idle = LinkLiveness(limits: Self.limits, at: 0)
        idle.bytesArrived(at: 100_000)
        #expect(idle.tick(at: 100_001) == .ping)
    }
}
