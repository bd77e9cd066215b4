import LanchatCore
import LanchatEngine
import LanchatWire
import Testing

/// Issue 28, item 1: a newcomer takes one history per join, from the member it accepted, while it
/// joins; an INVITE to a room it is already in asks for nothing; a member removed from the room cannot
/// bring it in again; an inviter's history cannot put invented authors under a member's name.
@Suite struct HistoryDoorTests {
    let me = SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice")
    let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    let carol = SessionPeer(id: SessionStateMachineTests.peerID(0x20), name: "carol")
    let lab = RoomID("lab")!
    var ids: [PeerID] { [me.id, bob.id, carol.id] }

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    /// Alice (auto-accept all, signing) connected to bob (link 1) and carol (link 2) at version 3.
    func node(restored: SessionStateMachine.Restored = .init()) -> SessionStateMachine {
        var configuration = SessionStateMachine.Configuration(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .all)
        configuration.envelopes = SimulatedSignatures.keys(for: 0, ids: ids)
        var node = SessionStateMachine(
            configuration: configuration, restored: restored, addressBook: PeerDirectory(), ids: IDGenerator(seed: 1),
            shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: false, remoteAddress: nil, version: 3, at: at(1))
        _ = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: false, remoteAddress: nil, version: 3, at: at(1))
        return node
    }

    func invite(_ byte: UInt8) -> WireFrame {
        .invite(.init(id: WireID(bytes: [UInt8](repeating: byte, count: 16))!, timeoutMilliseconds: 60_000, room: lab, context: []))
    }

    func offer(_ byte: UInt8) -> WireFrame {
        .resourceOffer(
            .init(
                id: WireID(bytes: [UInt8](repeating: byte, count: 16))!, room: lab, kind: .signedHistory, name: [0x68],
                size: 1, sha256: [UInt8](repeating: 0, count: 32), modifiedMilliseconds: 0))
    }

    func historyRequests(_ actions: [SessionAction]) -> Int {
        actions.count { if case .requestHistory = $0 { true } else { false } }
    }

    func refusals(_ actions: [SessionAction]) -> [String] {
        actions.flatMap { action -> [String] in
            guard case .send(_, let frames) = action else { return [] }
            return frames.compactMap { frame in
                if case .resourceEnd(let end) = frame, end.status == .refused {
                    end.text
                } else if case .inviteReply(let reply) = frame, reply.outcome == .refused {
                    reply.reason
                } else {
                    nil
                }
            }
        }
    }

    @Test func aSecondInviteToARoomWeAreInAsksForNoHistory() {
        var alice = node()
        #expect(historyRequests(alice.received([invite(1)], on: LinkHandle(1), at: at(10))) == 1)
        // Carol, not a member here, invites us to lab too: we are in it already; no history from her.
        #expect(historyRequests(alice.received([invite(2)], on: LinkHandle(2), at: at(20))) == 0)
        #expect(alice.historyRequested[lab]?.peer == bob.id)
    }

    @Test func oneHistoryPerJoinFromTheInviterWhileJoining() {
        var alice = node()
        _ = alice.received([invite(1)], on: LinkHandle(1), at: at(10))
        // A history offered by someone else than the inviter is refused.
        #expect(refusals(alice.received([offer(7)], on: LinkHandle(2), at: at(20))) == ["history was not asked for"])
        // The inviter's first offer is taken; a second (two histories at once) is refused.
        #expect(refusals(alice.received([offer(8)], on: LinkHandle(1), at: at(30))).isEmpty)
        #expect(alice.historyRequested[lab] == nil)
        #expect(refusals(alice.received([offer(9)], on: LinkHandle(1), at: at(40))) == ["history was not asked for"])
    }

    @Test func anInviterThatHoldsTheRequestPastTheDeadlineIsRefused() {
        var alice = node()
        _ = alice.received([invite(1)], on: LinkHandle(1), at: at(10))
        let late = at(10 + alice.configuration.historyOfferTimeout + 1)
        #expect(refusals(alice.received([offer(8)], on: LinkHandle(1), at: late)) == ["history was not asked for"])
        #expect(alice.historyRequested[lab] == nil)
    }

    @Test func aMemberRemovedFromTheRoomCannotInviteUsBackNorSendItsHistory() throws {
        // Alice made lab and has bob and carol in it; she removes bob.
        var alice = node()
        _ = alice.beginInvite(bob, room: lab, at: at(5))
        let sent = alice.sendInvite(bob, room: lab, context: [], timeout: 10_000, at: at(6))
        guard case .sent(let id) = sent.0 else { Issue.record("not sent: \(sent.0)"); return }
        _ = alice.received([.inviteReply(.init(id: id, outcome: .accepted))], on: LinkHandle(1), at: at(7))
        #expect(alice.members(of: lab)?[bob.id] != nil)
        _ = try alice.remove(bob.id, from: lab, reason: "spam", at: at(8))
        #expect(alice.members(of: lab)?[bob.id] == nil)
        // Bob invites alice (auto-accept all) to lab again: refused, and nothing is asked of him.
        let actions = alice.received([invite(3)], on: LinkHandle(1), at: at(20))
        #expect(historyRequests(actions) == 0)
        #expect(refusals(actions) == ["bob was removed from lab"])
        #expect(alice.members(of: lab)?[bob.id] == nil)
        #expect(refusals(alice.received([offer(8)], on: LinkHandle(1), at: at(30))) == ["history was not asked for"])
    }

    @Test func anInviterCannotPutAnInventedAuthorUnderAMembersName() throws {
        // Dave's key was made up by the inviter (bob); it signs as dave and labels him "carol".
        let dave = SessionStateMachineTests.peerID(0x40)
        let all = ids + [dave]
        let keys = SimulatedSignatures.keys(for: 0, ids: all)
        let id = WireID(bytes: [UInt8](repeating: 5, count: 16))!
        var record = HistoryRecord(
            id: id, senderID: dave.rawValue, senderName: "carol", sequence: 1, timestampMilliseconds: 1_000,
            kind: .text, body: "words under carol's name")
        record.signature = SimulatedSignatures.keys(for: 3, ids: all).signature(over: record.signingBytes(room: lab))
        let members = [bob.id: "bob", carol.id: "carol"]
        // From the inviter's history: kept (a member who left looks the same), under dave's short id.
        guard
            case .keep(let kept) = SessionStateMachine.verdict(
                record, room: lab, relay: bob.id, ownID: me.id, keys: keys,
                members: members, strangers: true)
        else {
            Issue.record("not kept")
            return
        }
        #expect(kept.senderName == "\(dave.short) (not a member)" && kept.senderID == dave.rawValue)
        // From a relay answer: refused.
        #expect(SessionStateMachine.verdict(record, room: lab, relay: bob.id, ownID: me.id, keys: keys, members: members) == .refused)
        // Carol's own record, labelled anything by the relay, shows under the name we know her by.
        var hers = HistoryRecord(
            id: id, senderID: carol.id.rawValue, senderName: "someone", sequence: 1, timestampMilliseconds: 1_000,
            kind: .text, body: "carol's words")
        hers.signature = SimulatedSignatures.keys(for: 2, ids: all).signature(over: hers.signingBytes(room: lab))
        guard
            case .keep(let genuine) = SessionStateMachine.verdict(
                hers, room: lab, relay: bob.id, ownID: me.id, keys: keys,
                members: members, strangers: true)
        else {
            Issue.record("carol's record not kept")
            return
        }
        #expect(genuine.senderName == "carol")
        // An unsigned record of a stranger is refused even from the inviter.
        record.signature = nil
        #expect(SessionStateMachine.verdict(record, room: lab, relay: bob.id, ownID: me.id, keys: keys, members: members, strangers: true) == .refused)
    }

    @Test func aRecordUnderAnotherAuthorCannotTakeAGenuineMessagesId() {
        let store = MemorySessionStore()
        let forged = StoredMessage(
            id: "aa", room: "lab", senderID: "dave", senderName: "dave (not a member)", sequence: 1, timestamp: 1,
            kind: .text, body: "first under this id")
        let genuine = StoredMessage(
            id: "aa", room: "lab", senderID: "carol", senderName: "carol", sequence: 1, timestamp: 2,
            kind: .text, body: "carol's words")
        #expect(store.insert(forged, now: 1))
        #expect(store.insert(genuine, now: 2))
        #expect(!store.insert(genuine, now: 3))
        #expect(store.history(room: "lab", limit: 10).map(\.body) == ["first under this id", "carol's words"])
    }
}
