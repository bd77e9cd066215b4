import DNSSD
import FoundationEssentials
import Glibc
import LanchatCore
import LanchatEngine
import NIOPosix
import Testing

@testable import LanchatKit

/// What the library refuses before any socket is opened, and sessions on loopback that talk. (Serialized:
/// one test sets TMPDIR for the process.)
@Suite(.serialized) struct LanchatKitTests {
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
            #expect(error.code == .notInGroup, "\(error)")
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
        let alice = try await Session.start(identity: .ephemeral(displayName: "alice"), group: "lab", storage: .temporary)
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
        // Bob leaves: alice hears that he is out of the group, not only disconnected.
        try await bob.leave("lab")
        let left = try await within(.seconds(20)) { () async -> PeerChange? in
            for await change in alice.peerChanges where change.left { return change }
            return nil
        }
        #expect(left?.peer == bob.identity.peer)
        #expect(await alice.connectedPeers == [])
        #expect(Peer(id: bob.identity.id, displayName: "someone") == bob.identity.peer)
        #expect(Peer(id: "not an id", displayName: "x") == nil)
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

    /// A pair of sessions in one group, on loopback.
    static func pair() async throws -> (Session, Session) {
        let alice = try await Session.start(identity: .ephemeral(displayName: "alice"), group: "lab")
        let bob = try await Session.start(identity: .ephemeral(displayName: "bob"), group: "lab")
        alice.directory.update(
            PeerID(bob.identity.id)!, PeerAddressHint(name: "bob", port: bob.port, addresses: ["127.0.0.1"], encryption: .required))
        async let invited: Void = alice.invite(bob.identity.peer, timeout: .seconds(20))
        var invitations = try Advertiser(session: bob).invitations.makeAsyncIterator()
        try await #require(await invitations.next()).accept()
        try await invited
        return (alice, bob)
    }

    /// Topics, resources and byte streams between two sessions.
    @Test func topicsResourcesAndStreams() async throws {
        let (alice, bob) = try await Self.pair()
        // A topic: the subscription reaches alice, then her readings reach bob.
        var readings = try await bob.subscribe(to: "temperature").makeAsyncIterator()
        let deadline = ContinuousClock.now + .seconds(10)
        while try await alice.publish("21.5", on: "temperature") == 0 {
            #expect(ContinuousClock.now < deadline, "the subscription never reached the publisher")
            if ContinuousClock.now >= deadline { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        let reading = try #require(await readings.next())
        #expect(reading.text == "21.5" && reading.topic == "temperature" && reading.from == alice.identity.peer && reading.sequence >= 1)

        // A resource: the whole file, checked, placed in bob's download directory.
        let source = "/tmp/lanchatkit-resource-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: source) }
        let content = (0..<(1 << 20) + 123).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        #expect(FileManager.default.createFile(atPath: source, contents: Data(content)))
        let resource = try await alice.sendResource(at: source, to: bob.identity.peer)
        let sent = try await resource.finished()
        #expect(sent.state == .complete && sent.direction == .outgoing && sent.size == UInt64(content.count))
        let received = try await within(.seconds(20)) { () async -> Transfer? in
            for await transfer in bob.transfers where transfer.state.ended { return transfer }
            return nil
        }
        let arrived = try #require(received ?? nil)
        #expect(arrived.state == .complete && arrived.direction == .incoming && arrived.fractionCompleted == 1)
        #expect(FileManager.default.contents(atPath: try #require(arrived.path)).map(Array.init) == content)
        let missing = await #expect(throws: LanchatError.self) { try await alice.sendResource(at: source + ".absent", to: bob.identity.peer) }
        #expect(missing?.code == .invalidArgument)

        // A byte stream: chunks in order, then its end.
        async let accepted = bob.acceptStream(named: "feed", from: alice.identity.peer)
        let outgoing = try await alice.openStream(named: "feed", to: bob.identity.peer)
        let incoming = try await accepted
        let chunks: [[UInt8]] = [Array("one ".utf8), Array(repeating: 7, count: 200_000), Array(" three".utf8)]
        async let writing: Void = {
            for chunk in chunks { try await outgoing.write(chunk) }
            await outgoing.finish()
        }()
        var bytes: [UInt8] = []
        for try await chunk in incoming { bytes += chunk }
        try await writing
        #expect(bytes == chunks.flatMap { $0 })
        await bob.close()
        await alice.close()
    }

    /// After `close`, every call answers (none waits forever), and what was waiting ends.
    @Test func closeEndsEverything() async throws {
        let (alice, bob) = try await Self.pair()
        let readings = try await bob.subscribe(to: "temperature")
        let browser = Browser(session: bob)
        let waitingForStream = Task { try await bob.acceptStream(named: "never") }
        let source = "/tmp/lanchatkit-close-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: source) }
        #expect(FileManager.default.createFile(atPath: source, contents: Data(repeating: 1, count: 1000)))
        let resource = try await alice.sendResource(at: source, to: bob.identity.peer)
        try await resource.finished()
        await bob.close()
        await bob.close()  // (a second close returns too)
        _ = try await within(.seconds(20)) {
            for await _ in readings {}
            for await _ in browser.events {}
            _ = await bob.connectedPeers
            _ = await bob.currentTransfers
            return true
        }
        let stream = await #expect(throws: LanchatError.self) { try await waitingForStream.value }
        #expect(stream?.code == .closed)
        let afterClose = await #expect(throws: LanchatError.self) { try await bob.invite(alice.identity.peer) }
        #expect(afterClose?.code == .closed)
        await alice.close()
        _ = await resource.progress()
    }

    /// lanchatd's way in (`Session.start(identity:host:)`, package access): the first of its ports that
    /// opens (one in use is passed over), its own event loops (still running after `close`: the host shuts
    /// them down), its node configuration, its node run when it says (`startRunning`), and every event of
    /// the node to its handler (the library's streams stay empty).
    @Test func aHostsSessionTakesItsPortsLoopsAndEveryEvent() async throws {
        let taken = try await Session.start(identity: .ephemeral(displayName: "taken"))
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let (events, eventSink) = AsyncStream<SessionEvent>.makeStream()
        var host = Session.Host(name: "host", encryption: .required, store: MemorySessionStore(), knownPeers: .inMemory())
        host.ports = [taken.port, 0]
        host.loops = loops
        host.configure = { $0.autoAccept = .all }
        host.events = { eventSink.yield($0) }
        host.startsRunning = false
        let daemon = try await Session.start(identity: .ephemeral(displayName: "host"), host: host)
        // Its node runs once the host says so (its other parts up).
        #expect(!daemon.isOpen)
        daemon.startRunning()
        #expect(daemon.isOpen)
        #expect(daemon.port != taken.port && daemon.port > 0)
        await taken.close()
        let alice = try await Session.start(identity: .ephemeral(displayName: "alice"), group: "lab")
        alice.directory.update(
            PeerID(daemon.identity.id)!, PeerAddressHint(name: "host", port: daemon.port, addresses: ["127.0.0.1"], encryption: .required))
        // Accepted by the host's configuration (no one answers the invitation).
        try await alice.invite(daemon.identity.peer, timeout: .seconds(20))
        try await alice.send("hello host")
        let heard = try await within(.seconds(20)) { () async -> String? in
            for await event in events {
                if case .message(let message) = event, !message.outgoing, message.stored.kind == .text { return message.stored.body }
            }
            return nil
        }
        #expect(heard == "hello host")
        await daemon.close()
        eventSink.finish()
        // The library's own streams had nothing: the host took every event.
        let unread = try await within(.seconds(5)) { () async -> Int in
            var count = 0
            for await _ in daemon.messages { count += 1 }
            return count
        }
        #expect(unread == 0)
        // The session ran on the host's loops, and does not own them: they outlive it.
        #expect(!daemon.lifetime.owned && daemon.lifetime.loops === loops)
        #expect(try await loops.next().submit { 7 }.get() == 7)
        await alice.close()
        try await loops.shutdownGracefully()
    }

    /// A task that stops waiting for a stream is let go at once; a context longer than the wire allows is
    /// refused before anything is sent; a failed start leaves no temporary directory.
    @Test func cancellationAndLimits() async throws {
        let (alice, bob) = try await Self.pair()
        let waiting = Task { try await bob.acceptStream(named: "feed") }
        try await Task.sleep(for: .milliseconds(50))
        waiting.cancel()
        let cancelled = try await within(.seconds(10)) { () async -> LanchatError? in
            do {
                _ = try await waiting.value
                return nil
            } catch { return error as? LanchatError }
        }
        #expect(cancelled?.code == .cancelled)
        let tooLong = await #expect(throws: LanchatError.self) {
            try await alice.invite(bob.identity.peer, context: Array(repeating: 0x41, count: 64 * 1024 + 1))
        }
        #expect(tooLong?.code == .invalidArgument)
        let parent = "/tmp/lanchatkit-parent-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: parent) }
        setenv("TMPDIR", parent, 1)
        defer { unsetenv("TMPDIR") }
        let taken = await #expect(throws: LanchatError.self) { try await Session.start(identity: .ephemeral(displayName: "x"), port: alice.port) }
        #expect(taken?.code == .network)
        #expect(try FileManager.default.contentsOfDirectory(atPath: parent) == [])
        await bob.close()
        await alice.close()
    }

    /// What a host on the LAN puts in its TXT record reaches a program only as discovery keys an advertiser
    /// could have set, without control characters.
    @Test func hostileDiscoveryInfo() {
        var record = TXTRecord()
        record["app"] = Array("a\u{1b}[2Jb\nc".utf8)
        record["UPPER-IS-LOWERED"] = Array("x".utf8)
        record["bad key!"] = Array("x".utf8)
        record[String(repeating: "k", count: 33)] = Array("x".utf8)
        for index in 0..<100 { record["k\(index)"] = Array("v".utf8) }
        let info = BrowseState.discoveryInfo(record)
        #expect(info["app"] == "a[2Jbc")
        #expect(info["bad key!"] == nil && info[String(repeating: "k", count: 33)] == nil)
        #expect(info.count == BrowseState.maximumInfoKeys)
    }
}

/// Runs `body`, failing the test (by throwing) if it takes longer than `limit`: a regression fails, not hangs.
func within<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        guard let first = try await group.next(), let value = first else {
            group.cancelAll()
            throw LanchatError(.expired, "timed out after \(limit)")
        }
        group.cancelAll()
        return value
    }
}
