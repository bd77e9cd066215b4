import LanchatCore
import LanchatEngine
import LanchatWire
import Testing

/// Presence (issue 13, item 1), the engine's part: our availability, text and raised hands go to the
/// connected peers we share a room with (hands only of shared rooms), on change and when a connection
/// comes up; a member's PRESENCE is kept and reported, a stranger's ignored; auto-away turns us away
/// after the idle time and back at the next command.
@Suite struct PresenceTests {
    let me = SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice")
    let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    let carol = SessionPeer(id: SessionStateMachineTests.peerID(0x20), name: "carol")
    let stranger = SessionPeer(id: SessionStateMachineTests.peerID(0x30), name: "stranger")
    let lab = RoomID("lab")!
    let ops = RoomID("ops")!

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    /// Alice in lab (bob, carol) and ops (bob); bob, carol and a stranger connected.
    func engine(autoAway: Int64? = nil) -> SessionStateMachine {
        var configuration = SessionStateMachine.Configuration(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .never)
        configuration.autoAway = autoAway
        let member = { (peer: SessionPeer) in StoredMember(peerID: peer.id.rawValue, name: peer.name, port: 7473, addresses: []) }
        var node = SessionStateMachine(
            configuration: configuration, restored: .init(rooms: [(lab, [member(bob), member(carol)]), (ops, [member(bob)])], knownPeers: KnownPeerBook()),
            addressBook: PeerDirectory(), ids: IDGenerator(seed: 1), shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        _ = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        _ = node.linkUp(LinkHandle(3), peer: stranger, dialedByUs: false, remoteAddress: nil, version: 2, at: at(1))
        return node
    }

    func presences(_ actions: [SessionAction], on handle: LinkHandle) -> [WireFrame.Presence] {
        actions.flatMap { action -> [WireFrame.Presence] in
            guard case .send(let to, let frames) = action, to == handle else { return [] }
            return frames.compactMap { if case .presence(let presence) = $0 { presence } else { nil } }
        }
    }

    @Test func ourPresenceGoesToMembersWithTheirSharedRoomsHandsOnly() throws {
        var node = engine()
        _ = try node.setHand(true, in: ops, at: at(2))
        let actions = node.setStatus(.busy, text: "in a call\u{7}\nback at 3", at: at(3))
        #expect(presences(actions, on: LinkHandle(1)) == [.init(availability: .busy, text: "in a call  back at 3", hands: [ops])])
        #expect(presences(actions, on: LinkHandle(2)) == [.init(availability: .busy, text: "in a call  back at 3", hands: [])])
        #expect(presences(actions, on: LinkHandle(3)).isEmpty)
        #expect(throws: SessionError.self) { _ = try node.setHand(true, in: RoomID("nowhere")!, at: at(4)) }
        // A connection that comes up is told at once.
        _ = node.linkDown(LinkHandle(2), reason: .lost, at: at(5))
        let again = node.linkUp(LinkHandle(4), peer: carol, dialedByUs: true, remoteAddress: nil, version: 2, at: at(6))
        #expect(presences(again.actions, on: LinkHandle(4)).first?.availability == .busy)
    }

    @Test func aMembersPresenceIsKeptAndReportedAStrangersIgnored() throws {
        var node = engine()
        let actions = node.received([.presence(.init(availability: .away, text: "lunch", hands: [lab, RoomID("secret")!]))], on: LinkHandle(2), at: at(2))
        let reported = actions.compactMap { if case .emit(.presence(let peer, let state, _)) = $0 { (peer, state) } else { nil } }
        #expect(reported.count == 1 && reported.first?.0 == carol && reported.first?.1.hands == [lab])
        // Told again unchanged: not reported twice.
        let same = node.received([.presence(.init(availability: .away, text: "lunch", hands: [lab]))], on: LinkHandle(2), at: at(3))
        #expect(!same.contains { if case .emit(.presence) = $0 { true } else { false } })
        let member = try #require(node.room(lab)?.members.first { $0.peer == carol })
        #expect(member.presence?.availability == .away && member.presence?.text == "lunch" && member.hand)
        #expect(node.room(ops)?.members.first?.hand == false)
        _ = node.received([.presence(.init(availability: .busy, text: "spam"))], on: LinkHandle(3), at: at(4))
        #expect(node.presence(of: stranger.id) == nil)
    }

    @Test func autoAwayTurnsUsAwayWhenIdleAndBackAtTheNextCommand() {
        var node = engine(autoAway: 60_000)
        #expect(node.nextDeadline.map { $0 <= 60_000 } == true)
        var actions = node.tick(at: at(30_000))
        #expect(presences(actions, on: LinkHandle(1)).isEmpty)
        _ = node.personActive(at: at(30_000))
        actions = node.tick(at: at(60_000))
        #expect(presences(actions, on: LinkHandle(1)).isEmpty && node.presence.availability == .available)
        actions = node.tick(at: at(90_000))
        #expect(presences(actions, on: LinkHandle(1)).first?.availability == .away && node.presence.text == "idle")
        actions = node.personActive(at: at(95_000))
        #expect(presences(actions, on: LinkHandle(1)).first?.availability == .available)
        // Set away by the person: auto-away leaves it alone.
        _ = node.setStatus(.away, text: "gone fishing", at: at(96_000))
        actions = node.personActive(at: at(97_000))
        #expect(presences(actions, on: LinkHandle(1)).isEmpty && node.presence.availability == .away)
    }
}

/// Typing (issue 13, item 7): told to the room's connected members, unreliably, at most every 3 s;
/// a member's TYPING reported at most once a second, a stranger's never.
@Suite struct TypingTests {
    let base = PresenceTests()

    @Test func typingIsToldAtMostEvery3SecondsAndReportedAtMostOnceASecond() throws {
        var node = base.engine()
        let told = { (actions: [SessionAction]) in
            actions.compactMap { action -> LinkHandle? in
                guard case .sendUnreliable(let handle, let frames) = action, frames == [.typing(base.lab)] else { return nil }
                return handle
            }
        }
        #expect(Set(told(try node.typing(in: base.lab, at: base.at(2)))) == [LinkHandle(1), LinkHandle(2)])
        #expect(told(try node.typing(in: base.lab, at: base.at(2_000))).isEmpty)
        #expect(told(try node.typing(in: base.lab, at: base.at(3_002))).count == 2)
        #expect(throws: SessionError.self) { try node.typing(in: RoomID("nowhere")!, at: base.at(4)) }
        let reported = { (actions: [SessionAction]) in
            actions.filter { if case .emit(.typing) = $0 { true } else { false } }.count
        }
        #expect(reported(node.received([.typing(base.lab)], on: LinkHandle(2), at: base.at(10))) == 1)
        #expect(reported(node.received([.typing(base.lab)], on: LinkHandle(2), at: base.at(500))) == 0)
        #expect(reported(node.received([.typing(base.lab)], on: LinkHandle(2), at: base.at(1_010))) == 1)
        #expect(reported(node.received([.typing(base.ops)], on: LinkHandle(2), at: base.at(1_020))) == 0)  // carol is not in ops
        #expect(reported(node.received([.typing(base.lab)], on: LinkHandle(3), at: base.at(1_030))) == 0)  // a stranger
    }
}
