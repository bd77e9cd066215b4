import LanchatCore
@testable import LanchatEngine
import Testing

/// `RedialSchedule` on its own: who dials first, the backoff, and how many dials at once.
struct RedialScheduleTests {
    static let limits = RedialSchedule.Limits(dialsPerCheck: 8, dialsAtOnce: 4, reconnect: 10_000, unseenReconnect: 60_000)
    static let peers = (0..<8).map { PeerID(digest: [UInt8($0)]) }.sorted()
    static let own = peers[3]

    func due(
        _ schedule: inout RedialSchedule, _ candidates: [PeerID], dialing: Set<PeerID> = [], seen: Set<PeerID>? = nil,
        at now: Int64
    ) -> [PeerID] {
        schedule.due(
            candidates, own: Self.own, dialing: dialing, seen: { seen?.contains($0) ?? true }, generation: { _ in nil },
            limits: Self.limits, at: now
        ).dials
    }

    /// Of two peers, the one with the smaller id dials at once: we dial a larger id now, and give a
    /// smaller one 1.5 s to dial us, so that both rarely dial at once.
    @Test func theSmallerIdDialsFirst() {
        var schedule = RedialSchedule()
        let (smaller, larger) = (Self.peers[0], Self.peers[7])
        #expect(due(&schedule, [smaller, larger], at: 0) == [larger])
        #expect(due(&schedule, [smaller], at: 1_499) == [])
        #expect(due(&schedule, [smaller], at: 1_500) == [smaller])
    }

    /// Each attempt doubles the wait (500 ms, 1 s, 2 s ...) up to the longest; a frame heard starts again.
    @Test func backoffDoublesUpToTheLongestAndHearingResetsIt() {
        var schedule = RedialSchedule()
        let peer = Self.peers[7]
        var now: Int64 = 0
        var waits: [Int64] = []
        #expect(due(&schedule, [peer], at: now) == [peer])
        for _ in 0..<8 {
            var next = now + 1
            while due(&schedule, [peer], at: next).isEmpty { next += 1 }  // (the first that is not empty dials)
            waits.append(next - now)
            now = next
        }
        #expect(waits == [500, 1_000, 2_000, 4_000, 8_000, 10_000, 10_000, 10_000])
        schedule.heard(from: peer)
        #expect(schedule.count == 0)
        #expect(due(&schedule, [peer], at: now + 1) == [peer])
    }

    /// At most `dialsAtOnce` under way, and members only introduced to us take at most half of them.
    @Test func dialsAtOnceAndUnseenAtMostHalf() {
        var schedule = RedialSchedule()
        let larger = Array(Self.peers[4..<7])  // (all above `own`: none waits its 1.5 s)
        #expect(due(&schedule, larger, dialing: [Self.peers[0], Self.peers[1]], at: 0) == Array(larger[0..<2]))
        var fresh = RedialSchedule()
        #expect(due(&fresh, larger, seen: [], at: 0) == Array(larger[0..<2]))
        var keep = RedialSchedule()
        _ = due(&keep, larger, at: 0)
        keep.keep(only: [larger[0]])
        #expect(keep.count == 1)
    }

    @Test func linkedOnceIsRemembered() {
        var schedule = RedialSchedule()
        let first = schedule.linked(Self.peers[0])
        let again = schedule.linked(Self.peers[0])
        #expect(first && !again)
        #expect(schedule.wasLinked(Self.peers[0]) && !schedule.wasLinked(Self.peers[1]))
    }
}
