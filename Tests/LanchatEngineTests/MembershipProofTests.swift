import LanchatCore
import LanchatEngine
import LanchatWire
import Testing

/// Membership with provenance (issue 12, item 2), the engine's part: another member's word adds a member
/// only with that member's own signed proof; ROOM_MEMBERS on a version 2 connection carries proofs, in
/// pages; a leave is signed by the one who leaves, handed on by members, and outranks older proofs. The
/// signature scheme is the simulator's (unforgeable by construction).
@Suite struct MembershipProofTests {
    let me = SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice")
    let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    let carol = SessionPeer(id: SessionStateMachineTests.peerID(0x20), name: "carol")
    let dave = SessionPeer(id: SessionStateMachineTests.peerID(0x30), name: "dave")
    let lab = RoomID("lab")!
    var ids: [PeerID] { [me.id, bob.id, carol.id, dave.id] }

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    /// Alice, in `lab` with bob (and `others`), bob connected at version 2.
    func engine(others: [SessionPeer] = []) -> SessionStateMachine {
        var configuration = SessionStateMachine.Configuration(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .never)
        configuration.envelopes = SimulatedSignatures.keys(for: 0, ids: ids)
        let members = ([bob] + others).map { StoredMember(peerID: $0.id.rawValue, name: $0.name, port: 7473, addresses: []) }
        var node = SessionStateMachine(
            configuration: configuration, restored: .init(rooms: [(lab, members)], knownPeers: KnownPeerBook()),
            addressBook: PeerDirectory(), ids: IDGenerator(seed: 1), shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 3, at: at(1))
        return node
    }

    func index(_ peer: SessionPeer) -> Int { ids.firstIndex(of: peer.id)! }

    func proof(of peer: SessionPeer, signer: SessionPeer? = nil, time: UInt64 = 500) -> WireFrame.MembershipProof {
        let keys = SimulatedSignatures.keys(for: index(signer ?? peer), ids: ids)
        let bytes = Envelope.membershipBytes(room: lab, member: peer.id.rawValue, inviter: bob.id.rawValue, timestamp: time)
        return .init(inviter: bob.id.rawValue, timestampMilliseconds: time, signature: keys.signature(over: bytes))
    }

    func leave(of peer: SessionPeer, signer: SessionPeer? = nil, time: UInt64) -> WireFrame {
        let keys = SimulatedSignatures.keys(for: index(signer ?? peer), ids: ids)
        let bytes = Envelope.leaveBytes(room: lab, member: peer.id.rawValue, timestamp: time)
        return .roomLeave(.init(room: lab, signed: .init(member: peer.id.rawValue, timestampMilliseconds: time, signature: keys.signature(over: bytes))))
    }

    func entry(_ peer: SessionPeer, _ proof: WireFrame.MembershipProof?) -> WireFrame.Member {
        .init(peerID: peer.id.rawValue, name: peer.name, port: 7473, addresses: [], proof: proof)
    }

    func security(_ actions: [SessionAction]) -> [String] {
        actions.compactMap { if case .emit(.security(_, let text)) = $0 { text } else { nil } }
    }

    func sent(_ actions: [SessionAction], on handle: LinkHandle) -> [WireFrame] {
        actions.flatMap { action -> [WireFrame] in
            guard case .send(let to, let frames) = action, to == handle else { return [] }
            return frames
        }
    }

    @Test func anotherMembersWordAddsOnlyMembersWithTheirOwnProof() {
        var node = engine()
        let fakes = (0..<1024).map { n in
            WireFrame.Member(peerID: PeerID(digest: [UInt8(n >> 8), UInt8(n & 0xff)] + [UInt8](repeating: 9, count: 30)).rawValue, name: "fake\(n)")
        }
        var actions = node.received([.roomMembers(.init(room: lab, members: fakes))], on: LinkHandle(1), at: at(2))
        #expect(security(actions).count == 1 && security(actions).first?.contains("introduced 1024 member(s)") == true)
        // Carol's entry with a proof bob signed for her id, then with her own.
        actions = node.received([.roomMembers(.init(room: lab, members: [entry(carol, proof(of: carol, signer: bob))]))], on: LinkHandle(1), at: at(3))
        #expect(node.members(of: lab)?[carol.id] == nil)
        #expect(security(actions).isEmpty)  // told once per connection
        _ = node.received([.roomMembers(.init(room: lab, members: [entry(carol, proof(of: carol))]))], on: LinkHandle(1), at: at(4))
        #expect(Set(node.members(of: lab)?.keys.map { $0 } ?? []) == [bob.id, carol.id])
    }

    func listed(_ frames: [WireFrame]) -> [WireFrame.Member] {
        frames.flatMap { frame -> [WireFrame.Member] in if case .roomMembers(let page) = frame { page.members } else { [] } }
    }

    /// A resync sends our list to a member only if its own list, since our last resync, did not show that
    /// it knows all of it (the same members, names and proofs, in any order and pages): in a settled
    /// room one of each two members sends its list a round. What it asks (SYNC_REQUEST) is asked anyway.
    @Test func aResyncSparesAMemberWhoseListShowedItKnowsOurs() {
        var node = engine()
        _ = node.received([.roomMembers(.init(room: lab, members: [entry(bob, proof(of: bob))]))], on: LinkHandle(1), at: at(2))
        let interval = node.configuration.resyncInterval
        var now: Int64 = interval + 10
        let first = node.tick(at: at(now))
        let ours = listed(sent(first, on: LinkHandle(1)))
        #expect(Set(ours.map(\.peerID)) == [me.id.rawValue, bob.id.rawValue])
        // Bob lists the same, in another order and in two pages: our next resync spares him our list.
        _ = node.received(
            [.roomMembers(.init(room: lab, members: [ours[1]])), .roomMembers(.init(room: lab, members: [ours[0]]))], on: LinkHandle(1),
            at: at(now + 100))
        now += interval + 10
        let spared = node.tick(at: at(now))
        #expect(listed(sent(spared, on: LinkHandle(1))).isEmpty)
        #expect(spared.contains { if case .requestSync(lab, LinkHandle(1)) = $0 { true } else { false } })
        // Nothing heard from him since: the next resync sends it again.
        now += interval + 10
        #expect(listed(sent(node.tick(at: at(now)), on: LinkHandle(1))) == ours)
        // A list that lacks one of ours (here our own entry), or lists a name or proof other than ours: sent.
        _ = node.received([.roomMembers(.init(room: lab, members: [ours[1]]))], on: LinkHandle(1), at: at(now + 100))
        now += interval + 10
        #expect(listed(sent(node.tick(at: at(now)), on: LinkHandle(1))) == ours)
        var renamed = ours
        renamed[0].name = "someone else"
        _ = node.received([.roomMembers(.init(room: lab, members: renamed))], on: LinkHandle(1), at: at(now + 100))
        now += interval + 10
        #expect(listed(sent(node.tick(at: at(now)), on: LinkHandle(1))) == ours)
        // A list heard on a connection that then ended counts for nothing on the next one.
        _ = node.received([.roomMembers(.init(room: lab, members: ours))], on: LinkHandle(1), at: at(now + 100))
        _ = node.linkDown(LinkHandle(1), reason: .lost, at: at(now + 200))
        _ = node.linkUp(LinkHandle(2), peer: bob, dialedByUs: true, remoteAddress: nil, version: 3, at: at(now + 300))
        now += interval + 10
        #expect(listed(sent(node.tick(at: at(now)), on: LinkHandle(2))) == ours)
    }

    @Test func membersGoWithProofsInPagesToVersion2AndAllToVersion1() throws {
        var node = engine(others: [carol, dave])
        // Bob's own proof, then dave's (adopted for a member restored without one).
        _ = node.received([.roomMembers(.init(room: lab, members: [entry(bob, proof(of: bob)), entry(dave, proof(of: dave))]))], on: LinkHandle(1), at: at(2))
        var actions = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: true, remoteAddress: nil, version: 3, at: at(3)).actions
        let pages = sent(actions, on: LinkHandle(2)).compactMap { if case .roomMembers(let update) = $0 { update } else { nil } }
        let listed = pages.flatMap(\.members)
        #expect(listed.map(\.peerID) == [me.id, bob.id, dave.id].map(\.rawValue))
        let own = try #require(listed.first?.proof)
        #expect(
            SimulatedSignatures.verifies(
                own.signature,
                Envelope.membershipBytes(
                    room: lab, member: me.id.rawValue, inviter: own.inviter, timestamp: own.timestampMilliseconds), me.id, ids: ids))
        actions = node.linkUp(LinkHandle(3), peer: dave, dialedByUs: true, remoteAddress: nil, version: 1, at: at(4)).actions
        let plain = sent(actions, on: LinkHandle(3)).compactMap { if case .roomMembers(let update) = $0 { update } else { nil } }
        #expect(plain.flatMap(\.members).map(\.peerID).sorted() == [me.id, bob.id, carol.id, dave.id].map(\.rawValue).sorted())
        #expect(plain.flatMap(\.members).allSatisfy { $0.proof == nil })
    }

    /// Issue 28 (honest accidents): proofs, our own and members', and signed leaves outlive a restart.
    /// After one we introduce the members whose proofs we hold with them, our own proof keeps its
    /// inviter, and a member's older proof still does not bring back one whose signed leave we took.
    @Test func proofsAndSignedLeavesOutliveARestart() throws {
        let store = MemorySessionStore()
        func listed(_ actions: [SessionAction], on handle: LinkHandle) -> [WireFrame.Member] {
            sent(actions, on: handle).flatMap { frame -> [WireFrame.Member] in if case .roomMembers(let update) = frame { update.members } else { [] } }
        }
        var node = engine(others: [carol])
        var actions: [SessionAction] = []
        actions += node.received(
            [.roomMembers(.init(room: lab, members: [entry(dave, proof(of: dave)), entry(carol, proof(of: carol))]))],
            on: LinkHandle(1), at: at(3))
        let ownBefore = try #require(
            listed(
                node.linkUp(LinkHandle(2), peer: dave, dialedByUs: true, remoteAddress: nil, version: 3, at: at(3)).actions,
                on: LinkHandle(2)
            ).first?.proof)
        actions += node.received([leave(of: carol, time: 600)], on: LinkHandle(1), at: at(4))
        actions += node.tick(at: at(1 + node.configuration.resyncInterval))  // (saves each room, our own proof with it)
        try store.transaction { for case .persist(let operation) in actions { try store.apply(operation, now: 0) } }

        var restarted = SessionStateMachine(
            configuration: node.configuration, restored: try store.restored(ownID: me.id, knownPeers: KnownPeerBook()),
            addressBook: PeerDirectory(), ids: IDGenerator(seed: 2), shortCode: { _ in "1234-5678" })
        _ = restarted.start(at: at(100_000))
        let told = listed(
            restarted.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 3, at: at(100_001)).actions,
            on: LinkHandle(1))
        #expect(told.first?.peerID == me.id.rawValue && told.first?.proof == ownBefore)
        #expect(told.contains { $0.peerID == dave.id.rawValue && $0.proof == proof(of: dave) })
        // Carol left (signed, at 600): her proof of 500, sent again, does not bring her back.
        _ = restarted.received([.roomMembers(.init(room: lab, members: [entry(carol, proof(of: carol))]))], on: LinkHandle(1), at: at(100_002))
        #expect(restarted.members(of: lab)?[carol.id] == nil)
    }

    /// A signed leave dated more than 10 minutes ahead is not taken: kept leaves are bounded by their
    /// time, and one from the future would outlast the honest ones.
    @Test func aLeaveFromTheFutureIsNotTaken() {
        var node = engine(others: [carol])
        _ = node.received([.roomMembers(.init(room: lab, members: [entry(carol, proof(of: carol))]))], on: LinkHandle(1), at: at(3))
        let ahead = UInt64(at(4).wall + SessionStateMachine.futureTolerance + 1)
        _ = node.received([leave(of: carol, time: ahead)], on: LinkHandle(1), at: at(4))
        #expect(node.members(of: lab)?[carol.id] != nil)
        _ = node.received([leave(of: carol, time: 600)], on: LinkHandle(1), at: at(5))
        #expect(node.members(of: lab)?[carol.id] == nil)
    }

    @Test func aProofNewToUsIntroducesTheMemberToTheOthers() {
        var node = engine(others: [carol])
        _ = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: true, remoteAddress: nil, version: 3, at: at(2))
        let actions = node.received([.roomMembers(.init(room: lab, members: [entry(bob, proof(of: bob))]))], on: LinkHandle(1), at: at(3))
        let toCarol = sent(actions, on: LinkHandle(2)).compactMap { if case .roomMembers(let update) = $0 { update } else { nil } }
        #expect(toCarol.flatMap(\.members).contains { $0.peerID == bob.id.rawValue && $0.proof == proof(of: bob) })
    }

    @Test func aLeaveCountsOnlyWithTheLeaversSignatureIsHandedOnAndOutranksOlderProofs() {
        var node = engine(others: [carol])
        _ = node.linkUp(LinkHandle(2), peer: dave, dialedByUs: true, remoteAddress: nil, version: 3, at: at(2))
        _ = node.received(
            [.roomMembers(.init(room: lab, members: [entry(dave, proof(of: dave)), entry(carol, proof(of: carol))]))],
            on: LinkHandle(1), at: at(3))
        #expect(node.members(of: lab)?[dave.id] != nil)
        // Bob hands on a leave of carol's that bob signed: nothing changes.
        _ = node.received([leave(of: carol, signer: bob, time: 600)], on: LinkHandle(1), at: at(4))
        #expect(node.members(of: lab)?[carol.id] != nil)
        // Carol's own, handed on by bob: she goes, and dave is told.
        let actions = node.received([leave(of: carol, time: 600)], on: LinkHandle(1), at: at(5))
        #expect(node.members(of: lab)?[carol.id] == nil)
        #expect(sent(actions, on: LinkHandle(2)).contains { if case .roomLeave(let l) = $0 { l.signed?.member == carol.id.rawValue } else { false } })
        #expect(sent(actions, on: LinkHandle(1)).isEmpty == true || !sent(actions, on: LinkHandle(1)).contains { if case .roomLeave = $0 { true } else { false } })
        // Her older proof does not bring her back; a newer one (she rejoined) does.
        _ = node.received([.roomMembers(.init(room: lab, members: [entry(carol, proof(of: carol, time: 550))]))], on: LinkHandle(1), at: at(6))
        #expect(node.members(of: lab)?[carol.id] == nil)
        _ = node.received([.roomMembers(.init(room: lab, members: [entry(carol, proof(of: carol, time: 700))]))], on: LinkHandle(1), at: at(7))
        #expect(node.members(of: lab)?[carol.id] != nil)
    }

    @Test func leavingIsSignedForVersion2AndARejoinOutranksIt() throws {
        var node = engine()
        _ = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: true, remoteAddress: nil, version: 1, at: at(2))
        _ = node.received([.roomMembers(.init(room: lab, members: [entry(carol, proof(of: carol))]))], on: LinkHandle(1), at: at(3))
        let actions = try node.leave(lab, at: at(4))
        let signed = sent(actions, on: LinkHandle(1)).compactMap { if case .roomLeave(let l) = $0 { l.signed } else { nil } }
        let left = try #require(signed.first)
        #expect(
            left.member == me.id.rawValue
                && SimulatedSignatures.verifies(
                    left.signature, Envelope.leaveBytes(room: lab, member: me.id.rawValue, timestamp: left.timestampMilliseconds), me.id, ids: ids)
        )
        #expect(sent(actions, on: LinkHandle(2)).allSatisfy { if case .roomLeave(let l) = $0 { l.signed == nil } else { true } })
        // Invited again in the same millisecond: the new proof names bob and is later than the leave.
        let invitation = WireID(bytes: [UInt8](repeating: 0x44, count: 16))!
        _ = node.received([.invite(.init(id: invitation, timeoutMilliseconds: 60_000, room: lab, context: []))], on: LinkHandle(1), at: at(4))
        let (_, joined) = try node.accept(invitation.description, at: at(4))
        let mine = sent(joined, on: LinkHandle(1)).compactMap { if case .roomMembers(let update) = $0 { update.members.first } else { nil } }
        let rejoin = try #require(mine.first?.proof)
        #expect(mine.first?.peerID == me.id.rawValue && rejoin.inviter == bob.id.rawValue)
        #expect(rejoin.timestampMilliseconds > left.timestampMilliseconds)
    }

    @Test func aLeaveOfSomeoneWeDoNotHoldIsNotKept() {
        var node = engine()
        // Dave is no member here: his leave (genuine) is not kept, so his later proof still counts.
        _ = node.received([leave(of: dave, time: 900)], on: LinkHandle(1), at: at(2))
        _ = node.received([.roomMembers(.init(room: lab, members: [entry(dave, proof(of: dave, time: 500))]))], on: LinkHandle(1), at: at(3))
        #expect(node.members(of: lab)?[dave.id] != nil)
    }
}
