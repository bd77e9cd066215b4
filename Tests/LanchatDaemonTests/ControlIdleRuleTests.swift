@testable import LanchatDaemon
import Testing

@Suite struct ControlIdleRuleTests {
    private let start = ContinuousClock.now

    /// The rule's decision `seconds` after `start`.
    private func look(_ rule: inout ControlIdleRule, at seconds: Int) -> ControlIdleRule.Decision {
        rule.check(now: start + .seconds(seconds))
    }

    private func at(_ seconds: Int) -> ControlIdleRule.Decision { .checkAt(start + .seconds(seconds)) }

    @Test func anIdleConnectionClosesAtTheDeadlineOnce() {
        var rule = ControlIdleRule(timeout: .seconds(60), now: start)
        let decisions = [look(&rule, at: 0), look(&rule, at: 59), look(&rule, at: 60), look(&rule, at: 61)]
        #expect(decisions == [at(60), at(60), .close, .stop])
        #expect(rule.state == .closed)
    }

    @Test func aLineAfterTheCloseIsNotRun() {
        var rule = ControlIdleRule(timeout: .seconds(60), now: start)
        #expect(look(&rule, at: 90) == .close)
        let started = rule.callStarted()
        #expect(!started)
        rule.callEnded(now: start + .seconds(91))
        rule.exempt()
        #expect(rule.state == .closed)
    }

    @Test func theDeadlineCountsFromTheLastAnswer() {
        var rule = ControlIdleRule(timeout: .seconds(60), now: start)
        let started = rule.callStarted()
        #expect(started)
        rule.callEnded(now: start + .seconds(50))
        let decisions = [look(&rule, at: 60), look(&rule, at: 109), look(&rule, at: 110)]
        #expect(decisions == [at(110), at(110), .close])
    }

    @Test func aLongCallIsNeverIdle() {
        var rule = ControlIdleRule(timeout: .seconds(60), now: start)
        let started = rule.callStarted()
        #expect(started)
        // An `invite --wait` of an hour: looked at once a timeout, never closed.
        for minute in 1...60 {
            let decision = look(&rule, at: 60 * minute)
            #expect(decision == at(60 * minute + 60))
        }
        rule.callEnded(now: start + .seconds(3600))
        #expect(look(&rule, at: 3601) == at(3660))
    }

    @Test func watchesAndStreamsAreExempt() {
        var rule = ControlIdleRule(timeout: .seconds(60), now: start)
        let started = rule.callStarted()
        #expect(started)
        rule.exempt()
        // A stream or watch ends the connection; nothing after it makes it idle again.
        rule.callEnded(now: start + .seconds(1))
        #expect(look(&rule, at: 3600) == .stop)
        #expect(rule.state == .exempt)
    }
}
