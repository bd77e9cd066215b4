import DNSSD
import FoundationEssentials
import LanchatCore
import LanchatEngine
import Testing

@testable import LanchatKit

/// What the library refuses before any socket is opened, and two sessions on loopback that talk.
@Suite struct LanchatKitTests {
    @Test func serviceTypes() throws {
        for good in ["_chat-service._tcp", "_a._tcp", "_sensor-2._tcp"] { try ServiceType.check(good) }
        for bad in ["chat._tcp", "_chat._udp", "_._tcp", "_-a._tcp", "_a--b._tcp", "_123._tcp", "_abcdefghijklmnop._tcp", "_chat._tcp.local", ""] {
            #expect(throws: LanchatError.self, "\(bad)") { try ServiceType.check(bad) }
        }
    }

    @Test func badArgumentsAreTypedErrors() async throws {
        let me = PeerIdentity.ephemeral(displayName: "me")
        do {
            _ = try await Session.start(identity: me, group: "no spaces here")
            Issue.record("a bad group name was taken")
        } catch {
            #expect(error.code == .invalidArgument)
        }
        do {
            _ = try await Session.start(identity: me, serviceType: "_chat._udp")
            Issue.record("a UDP service type was taken")
        } catch {
            #expect(error.code == .invalidArgument)
        }
        let session = try await Session.start(identity: me)
        for info in [["v": "9"], ["Upper": "x"], ["": "x"], ["k": String(repeating: "x", count: 300)]] {
            #expect(throws: LanchatError.self, "\(info)") { try Advertiser(session: session, discoveryInfo: info) }
        }
        // Not in its group yet: nothing to send to.
        do {
            try await session.send("hello")
            Issue.record("a send without a group was taken")
        } catch {
            #expect(error.code == .notInGroup || error.code == .other)
        }
        await session.close()
        do {
            try await session.send("after close")
            Issue.record("a closed session sent")
        } catch {
            #expect(error.code == .closed)
        }
    }

    @Test func discoveryInfoKeepsOnlyTextOutsideLanchatsKeys() {
        var record = TXTRecord(["v": "1", "id": "x", "app": "chat", "room": "lab"])
        record["flag"] = .some(nil)
        record["bytes"] = [0xff, 0xfe]
        let info = BrowseState.discoveryInfo(record)
        #expect(info == ["app": "chat", "room": "lab"])
    }

    @Test func identityStoredIsTheSameNextTime() throws {
        let directory = "/tmp/lanchatkit-test-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try PeerIdentity.stored(in: directory, displayName: "pi")
        let second = try PeerIdentity.stored(in: directory, displayName: "pi again")
        #expect(first.id == second.id)
        #expect(first.id.count == 52)
        #expect(PeerIdentity.ephemeral(displayName: "a").id != PeerIdentity.ephemeral(displayName: "a").id)
    }

    /// Two sessions on loopback, over TLS: an invitation with its context, accepted into the inviter's group;
    /// messages both ways; the connected peers; the newcomer's history. (The browser's part, DNS-SD, is the
    /// end-to-end test's: Tests/e2e/test_library_examples.py.)
    @Test func twoSessionsTalk() async throws {
        let alice = try await Session.start(identity: .ephemeral(displayName: "alice"), group: "lab", storage: .memory)
        let bob = try await Session.start(identity: .ephemeral(displayName: "bob"), group: "elsewhere")
        let bobAdvertiser = try Advertiser(session: bob)
        alice.directory.update(
            PeerID(bob.identity.id)!, PeerAddressHint(name: "bob", port: bob.port, addresses: ["127.0.0.1"], encryption: .required))
        async let invited: Void = alice.invite(bob.identity.peer, context: Array("join us".utf8), timeout: .seconds(20))
        var invitations = bobAdvertiser.invitations.makeAsyncIterator()
        let invitation = try #require(await invitations.next())
        #expect(invitation.from == alice.identity.peer)
        #expect(invitation.group == "lab")
        #expect(invitation.text == "join us")
        try await invitation.accept()
        try await invited
        var bobMessages = bob.messages.makeAsyncIterator()
        try await alice.send("hello bob")
        let first = try #require(await bobMessages.next())
        #expect(first.text == "hello bob")
        #expect(first.from == alice.identity.peer && first.group == "lab" && first.signed)
        var aliceMessages = alice.messages.makeAsyncIterator()
        let report = try await bob.send("hello alice", in: "lab")
        #expect(report.recipients == 1)
        let answer = try #require(await aliceMessages.next())
        #expect(answer.text == "hello alice" && answer.from == bob.identity.peer)
        #expect(await alice.connectedPeers == [bob.identity.peer])
        #expect(try await bob.history(limit: 10, in: "lab").map(\.text) == ["hello bob", "hello alice"])
        // A second invitation, over the connection the two have now.
        let clock = ContinuousClock()
        let started = clock.now
        async let second: Void = alice.invite(bob.identity.peer, to: "other", timeout: .seconds(20))
        try await #require(await invitations.next()).accept()
        try await second
        print("second invitation answered in \(clock.now - started)")
        await bob.close()
        await alice.close()
    }
}
