import LanchatCore
import LanchatEngine
import LanchatWire
import Testing

/// Issue 28, items 6 and 8: what one member's introductions can make us do. It brings in at most
/// `maximumUnseenIntroductions` members we have not been connected with; we do not pass those on to
/// others; we never dial this host's loopback or a multicast group on its word; dials are bounded per
/// look and at once, and members we never saw back off to minutes; a full room refuses an invitation.
@Suite struct IntroductionBoundsTests {
    let me = SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice")
    let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    let carol = SessionPeer(id: SessionStateMachineTests.peerID(0x20), name: "carol")
    let lab = RoomID("lab")!
    /// Bob's keys and 200 of his own making (ids 3...202).
    var fakes: [SessionPeer] {
        (0..<200).map { n in SessionPeer(id: PeerID(digest: [0x77, UInt8(n >> 8), UInt8(n & 0xff)] + [UInt8](repeating: 1, count: 29)), name: "fake\(n)") }
    }
    var ids: [PeerID] { [me.id, bob.id, carol.id] + fakes.map(\.id) }

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    /// Alice in lab with bob and carol, both connected at version 3 (bob over `bobAddress`).
    func engine(bobAddress: String? = "198.18.0.2", configure: (inout SessionStateMachine.Configuration) -> Void = { _ in }) -> SessionStateMachine {
        var configuration = SessionStateMachine.Configuration(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .never)
        configuration.envelopes = SimulatedSignatures.keys(for: 0, ids: ids)
        configure(&configuration)
        let members = [bob, carol].map { StoredMember(peerID: $0.id.rawValue, name: $0.name, port: 7473, addresses: []) }
        var node = SessionStateMachine(
            configuration: configuration, restored: .init(rooms: [(lab, members)], knownPeers: KnownPeerBook()),
            addressBook: PeerDirectory(), ids: IDGenerator(seed: 1), shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: bobAddress, version: 3, at: at(1))
        _ = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: true, remoteAddress: "198.18.0.3", version: 3, at: at(1))
        return node
    }

    /// `peer`'s own proof (it signs with its key), bob named as its inviter.
    func entry(_ peer: SessionPeer, addresses: [String] = ["198.18.0.99"]) -> WireFrame.Member {
        let index = ids.firstIndex(of: peer.id)!
        let bytes = Envelope.membershipBytes(room: lab, member: peer.id.rawValue, inviter: bob.id.rawValue, timestamp: 500)
        let proof = WireFrame.MembershipProof(
            inviter: bob.id.rawValue, timestampMilliseconds: 500,
            signature: SimulatedSignatures.keys(for: index, ids: ids).signature(over: bytes))
        return .init(peerID: peer.id.rawValue, name: peer.name, port: 7473, addresses: addresses, proof: proof)
    }

    func members(_ frames: [WireFrame]) -> [String] {
        frames.flatMap { frame -> [String] in if case .roomMembers(let update) = frame { update.members.map(\.name) } else { [] } }
    }

    func frames(_ actions: [SessionAction], on handle: LinkHandle) -> [WireFrame] {
        actions.flatMap { action -> [WireFrame] in
            guard case .send(let to, let frames) = action, to == handle else { return [] }
            return frames
        }
    }

    func dials(_ actions: [SessionAction]) -> [PeerID] {
        actions.compactMap { if case .dial(let peer) = $0 { peer } else { nil } }
    }

    @Test func oneMemberBringsInAtMostItsShareOfMembersWeNeverSaw() {
        var node = engine()
        let actions = node.received([.roomMembers(.init(room: lab, members: fakes.map { entry($0) }))], on: LinkHandle(1), at: at(2))
        let limit = node.configuration.maximumUnseenIntroductions
        #expect(node.members(of: lab)!.count == 2 + limit)
        #expect(node.unseenIntroduced(by: bob.id, in: lab).count == limit)
        #expect(
            actions.contains {
                if case .emit(.security(_, let text)) = $0 {
                    text.contains("introduced more members to room lab than the \(limit) not yet connected here it may (\(200 - limit) in this list)")
                } else {
                    false
                }
            })
        // Carol is not told about any of them (bob's word is not ours to pass on), not now, not at a resync.
        #expect(!members(frames(actions, on: LinkHandle(2))).contains { $0.hasPrefix("fake") })
        let resync = node.tick(at: at(1 + node.configuration.resyncInterval))
        #expect(members(frames(resync, on: LinkHandle(2))).contains("alice"))
        #expect(!members(frames(resync, on: LinkHandle(2))).contains { $0.hasPrefix("fake") })
        // One that connects to us is seen: it no longer counts, it is passed on, and bob may bring one more.
        let first = fakes[0]
        _ = node.linkUp(LinkHandle(3), peer: first, dialedByUs: false, remoteAddress: "198.18.0.50", version: 3, at: at(3))
        #expect(node.unseenIntroduced(by: bob.id, in: lab).count == limit - 1)
        _ = node.received([.roomMembers(.init(room: lab, members: [entry(fakes[150])]))], on: LinkHandle(1), at: at(4))
        #expect(node.members(of: lab)?[fakes[150].id] != nil)
    }

    @Test func dialsAreBoundedAndMembersWeNeverSawBackOffToMinutes() {
        var node = engine { $0.maximumUnseenIntroductions = 200 }
        var actions = node.received([.roomMembers(.init(room: lab, members: fakes.map { entry($0) }))], on: LinkHandle(1), at: at(2))
        // At most maximumDialsPerCheck start per look, and maximumDialsAtOnce are under way.
        var started = dials(actions)
        #expect(started.count <= node.configuration.maximumDialsPerCheck)
        var time: Int64 = 2
        for _ in 0..<40 {
            time += node.configuration.redialCheckInterval
            actions = node.tick(at: at(time))
            #expect(dials(actions).count <= node.configuration.maximumDialsPerCheck)
            started += dials(actions)
        }
        // Members never seen take at most half the dials under way (the rest stay for members we know).
        #expect(started.count == node.configuration.maximumDialsAtOnce / 2)
        // Each dial fails; over the next 20 minutes a member never seen is dialed about a dozen times (the
        // backoff reaches 5 minutes), not every 10 s (120 times).
        for peer in started { _ = node.dialFinished(peer, at: at(time)) }
        var perPeer: [PeerID: Int] = [:]
        while time < 20 * 60_000 {
            time += node.configuration.redialCheckInterval
            for peer in dials(node.tick(at: at(time))) {
                perPeer[peer, default: 0] += 1
                _ = node.dialFinished(peer, at: at(time))
            }
        }
        let most = perPeer.values.max() ?? 0
        #expect(most >= 5 && most <= 16, "most dials of one unseen member in 20 minutes: \(most)")
    }

    @Test func noMemberMakesUsDialOurLoopbackOrAMulticastGroup() {
        #expect(!SessionStateMachine.dialable("127.0.0.1", via: "198.18.0.2"))
        #expect(!SessionStateMachine.dialable("::1", via: "198.18.0.2"))
        #expect(!SessionStateMachine.dialable("224.0.0.251", via: "198.18.0.2"))
        #expect(!SessionStateMachine.dialable("ff02::fb", via: "198.18.0.2"))
        #expect(!SessionStateMachine.dialable("0.0.0.0", via: "198.18.0.2"))
        #expect(SessionStateMachine.dialable("198.18.0.7", via: "198.18.0.2"))
        #expect(SessionStateMachine.dialable("fe80::1%veth0", via: "198.18.0.2"))
        // Every node on this host (the benchmark's, tests'): loopback is theirs.
        #expect(SessionStateMachine.dialable("127.0.0.1", via: "127.0.0.1"))
        // Every spelling the dialer (inet_pton) takes for those is refused too; names are not addresses.
        for other in [
            "0:0:0:0:0:0:0:1", "::0:1", "::ffff:7f00:1", "::0", "0::", "::ffff:0.0.0.0", "0.1.2.3", "240.0.0.1",
            "255.255.255.255", "::ffff:224.0.0.251", "::127.0.0.1", "example.com", "",
        ] {
            #expect(!SessionStateMachine.dialable(other, via: "198.18.0.2"), "\(other)")
        }
        #expect(SessionStateMachine.dialable("::ffff:198.18.0.7", via: "198.18.0.2"))
        #expect(SessionStateMachine.dialable("::ffff:7f00:1", via: "::1"))
        var node = engine()
        _ = node.received(
            [.roomMembers(.init(room: lab, members: [entry(fakes[0], addresses: ["127.0.0.1", "224.0.0.1", "198.18.0.9"])]))],
            on: LinkHandle(1), at: at(2))
        #expect(node.members(of: lab)?[fakes[0].id]?.addresses == ["198.18.0.9"])
    }

    /// Item 7: a member that never acknowledges is resent its outbox less and less often (5 s, doubling
    /// to 80 s), not every 5 s; one acknowledgement brings the interval back.
    @Test func aMemberThatNeverAcknowledgesIsResentLessAndLessOften() throws {
        var node = engine()
        _ = try node.send(["hello"], room: lab, at: at(10))
        func flushes(_ actions: [SessionAction]) -> Int {
            actions.count { if case .flushOutbox(let peer, _, _) = $0 { peer == bob.id } else { false } }
        }
        var count = 0
        var time: Int64 = 10
        while time < 10 * 60_000 {
            time += 1_000
            count += flushes(node.tick(at: at(time)))
        }
        // 5 + 10 + 20 + 40 + 80 s, then every 80 s: 11 in 10 minutes (every 5 s: 120).
        #expect(count >= 8 && count <= 12, "resends to a member that never acknowledges in 10 minutes: \(count)")
    }

    /// Item 7: membership proofs cost a signature check each; past 512 from one peer between two resyncs
    /// (a room's worth of new members twice), no more are checked.
    @Test func proofsAreCheckedAtMost512TimesPerPeerAndResync() {
        final class Counter: @unchecked Sendable { var value = 0 }  // (one test, one thread)
        let counter = Counter()
        var counted = engine { configuration in
            let keys = configuration.envelopes!
            configuration.envelopes = EnvelopeKeys(
                publicKey: keys.publicKey, sign: { keys.signature(over: $0).bytes },
                verify: { _, _, _ in
                    counter.value += 1
                    return false
                })
        }
        var forged = fakes.map { entry($0) }
        for index in forged.indices { forged[index].proof?.signature = Signature(key: SimulatedSignatures.key(1), bytes: [UInt8](repeating: 1, count: 64)) }
        for second in 2..<6 { _ = counted.received([.roomMembers(.init(room: lab, members: forged))], on: LinkHandle(1), at: at(Int64(second))) }
        #expect(counter.value == 512)
        _ = counted.tick(at: at(1 + counted.configuration.resyncInterval))
        _ = counted.received([.roomMembers(.init(room: lab, members: forged))], on: LinkHandle(1), at: at(2 + counted.configuration.resyncInterval))
        #expect(counter.value == 712)
    }

    /// Item 7: claims (ROOM_MEMBERS from peers not yet members) are bounded in bytes, not only in number.
    @Test func claimsAreBoundedInBytes() {
        var node = engine()
        let long = String(repeating: "n", count: 255)
        let addresses = (0..<8).map { "2001:db8::\($0):ffff:ffff:ffff" }
        for n in 0..<300 {
            let stranger = SessionPeer(id: PeerID(digest: [0x55, UInt8(n >> 8), UInt8(n & 0xff)] + [UInt8](repeating: 2, count: 29)), name: "s\(n)")
            _ = node.linkUp(LinkHandle(100 + n), peer: stranger, dialedByUs: false, remoteAddress: "198.18.0.77", version: 3, at: at(2))
            let members = (0..<1024).map { m in
                WireFrame.Member(
                    peerID: PeerID(digest: [0x66, UInt8(m >> 8), UInt8(m & 0xff)] + [UInt8](repeating: 3, count: 29)).rawValue,
                    name: long, port: 1, addresses: addresses)
            }
            _ = node.received([.roomMembers(.init(room: lab, members: members))], on: LinkHandle(100 + n), at: at(3))
        }
        #expect(node.claimBytes <= 4 << 20, "claims held: \(node.claimBytes) bytes")
        #expect(node.claimBytes > 0)
    }

    /// Item 8: an administrator's removal of a member takes with it, at every member that enacts it, the
    /// members it introduced there that never connected there (members of its own making).
    @Test func aRemovalTakesTheMembersItIntroducedThatNeverConnected() throws {
        // Alice made lab (her creator record), so she administers it.
        let bytes = Envelope.metaBytes(
            room: lab, key: "admin.creator", deleted: false, value: me.id.rawValue, version: 1, timestamp: 1_000_000,
            author: me.id.rawValue)
        let record = StoredMeta(
            room: lab.rawValue, key: "admin.creator", value: me.id.rawValue, deleted: false, version: 1, timestamp: 1_000_000,
            authorID: me.id.rawValue, authorKey: SimulatedSignatures.key(0),
            signature: SimulatedSignatures.keys(for: 0, ids: ids).signature(over: bytes).bytes)
        var node = engine { _ in }
        var restored = SessionStateMachine.Restored(
            rooms: [(lab, [bob, carol].map { StoredMember(peerID: $0.id.rawValue, name: $0.name, port: 7473, addresses: []) })],
            knownPeers: KnownPeerBook())
        restored.metadata = [record]
        node = SessionStateMachine(
            configuration: node.configuration, restored: restored, addressBook: PeerDirectory(), ids: IDGenerator(seed: 1),
            shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: "198.18.0.2", version: 3, at: at(1))
        _ = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: true, remoteAddress: "198.18.0.3", version: 3, at: at(1))
        #expect(node.isAdministrator(me.id, of: lab))
        _ = node.received([.roomMembers(.init(room: lab, members: fakes.prefix(10).map { entry($0) }))], on: LinkHandle(1), at: at(2))
        // One of them connected here: it is not of bob's making as far as we can tell, and stays.
        _ = node.linkUp(LinkHandle(3), peer: fakes[0], dialedByUs: false, remoteAddress: "198.18.0.50", version: 3, at: at(3))
        #expect(node.members(of: lab)!.count == 12)
        _ = try node.remove(bob.id, from: lab, reason: "spam", at: at(4))
        #expect(Set(node.members(of: lab)!.keys) == [carol.id, fakes[0].id])
    }

    /// A member that re-signs its proof (newer each time) in a loop does not make us write the member
    /// list each time (the resync saves each room).
    @Test func aNewerProofOfAMemberWeHoldIsNotSavedAtOnce() {
        var node = engine()
        _ = node.received([.roomMembers(.init(room: lab, members: [entry(fakes[0])]))], on: LinkHandle(1), at: at(2))
        func saves(_ actions: [SessionAction]) -> Int { actions.count { if case .persist(.saveRoom) = $0 { true } else { false } } }
        var newer = entry(fakes[0])
        let index = ids.firstIndex(of: fakes[0].id)!
        for time in UInt64(501)...UInt64(510) {
            let bytes = Envelope.membershipBytes(room: lab, member: fakes[0].id.rawValue, inviter: bob.id.rawValue, timestamp: time)
            newer.proof = .init(inviter: bob.id.rawValue, timestampMilliseconds: time, signature: SimulatedSignatures.keys(for: index, ids: ids).signature(over: bytes))
            #expect(saves(node.received([.roomMembers(.init(room: lab, members: [newer]))], on: LinkHandle(1), at: at(3))) == 0)
        }
    }

    @Test func aFullRoomRefusesAnInvitationAndSaysSo() {
        var node = engine { $0.maximumRoomMembers = 2 }
        let dave = SessionPeer(id: SessionStateMachineTests.peerID(0x40), name: "dave")
        let (start, _) = node.beginInvite(dave, room: lab, at: at(2))
        guard case .finished(.refused(let reason)) = start else {
            Issue.record("not refused: \(start)")
            return
        }
        #expect(reason.contains("lab is full"))
    }
}
