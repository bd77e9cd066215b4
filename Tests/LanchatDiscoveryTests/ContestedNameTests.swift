@testable import LanchatDiscovery
import LanchatCore
import Testing

@Suite struct ContestedNameTests {
    private let id = PeerID("abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst")!

    /// The waits and tags of `count` registrations in a row that Avahi never confirms.
    private func run(_ contest: inout ContestedName, _ count: Int) -> [(tag: String?, wait: Int64)] {
        var seen: [(tag: String?, wait: Int64)] = []
        for _ in 0..<count {
            seen.append((contest.tag(for: id), contest.wait.components.seconds))
            _ = contest.notConfirmed()
        }
        return seen
    }

    @Test func aTaggedNameThatStaysContestedGetsLongerTagsThenTheSameOneWithTheWaitDoublingTo160s() {
        var contest = ContestedName()
        let seen = run(&contest, 9)
        #expect(
            seen.map(\.tag) == [
                nil, "abcdef", "abcdefghij", "abcdefghijklmnop", "abcdefghijklmnop", "abcdefghijklmnop",
                "abcdefghijklmnop", "abcdefghijklmnop", "abcdefghijklmnop",
            ])
        #expect(seen.map(\.wait) == [10, 10, 10, 10, 20, 40, 80, 160, 160])
        #expect(contest.unconfirmed == 9)
    }

    @Test func theWatchdogNeverGivesUp() {
        var contest = ContestedName()
        var steps: [ContestedName.Step] = []
        for _ in 0..<1000 { steps.append(contest.notConfirmed()) }
        #expect(Array(steps.prefix(4)) == [.tag(length: 6), .tag(length: 10), .tag(length: 16), .again])
        #expect(steps.dropFirst(3).allSatisfy { $0 == .again })
        #expect(contest.wait == .seconds(160))
    }

    @Test func aConfirmationBringsTheFirstWaitBackAndKeepsTheTag() {
        var contest = ContestedName()
        _ = run(&contest, 6)
        contest.confirmed()
        #expect(contest.wait == .seconds(10))
        #expect(contest.tag(for: id) == "abcdefghijklmnop")
        #expect(contest.unconfirmed == 0)
        // Contested again later (after an Avahi restart, say): the same name, waits from 10 s again.
        #expect(contest.notConfirmed() == .again)
        #expect(contest.wait == .seconds(20))
    }

    @Test func everyTaggedNameFitsADNSLabelAndKeepsItsTag() {
        var contest = ContestedName()
        let base = String(repeating: "é", count: 40)
        for _ in 0..<4 {
            let tag = contest.tag(for: id)
            let name = PeerAdvertisement.instanceName(base: base, attempt: 1, tag: tag)
            #expect(name.utf8.count <= 63)
            if let tag { #expect(name.hasSuffix(" [\(tag)] (2)")) }
            _ = contest.notConfirmed()
        }
    }
}

@Suite struct BackoffTests {
    @Test func backoffDoublesToItsCapAndResets() {
        var backoff = Backoff(initial: .milliseconds(250), maximum: .seconds(1))
        #expect([backoff.next(), backoff.next(), backoff.next(), backoff.next()] == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(1)])
        backoff.reset()
        #expect(backoff.next() == .milliseconds(250))
        #expect(Backoff() == Backoff(initial: .milliseconds(250), maximum: .seconds(5)))
    }
}
