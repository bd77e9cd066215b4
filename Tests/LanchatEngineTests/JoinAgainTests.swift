import LanchatCore
@testable import LanchatEngine
import LanchatWire
import Testing

/// Found by the simulator once it administered rooms (issue 29): accepting an invitation from a member
/// that had left the room left us alone in it, with no record of its creator; a second invitation,
/// accepted, kept the first inviter for good, so we never took the room's creator record (nor its
/// history) and honoured none of its administrators' removals. Alone in a room whose creator we never
/// heard of, the next accepted invitation is a join, from that inviter.
@Suite struct JoinAgainTests {
    let base = SessionStateMachineTests()
    let carol = SessionPeer(id: SessionStateMachineTests.peerID(0x33), name: "carol")

    func invite(_ byte: UInt8) -> WireFrame.Invite {
        .init(id: WireID(bytes: [UInt8](repeating: byte, count: 16))!, timeoutMilliseconds: 60_000, room: base.lab, context: [])
    }

    @Test func aloneWithoutACreatorTheNextInvitationIsAJoin() throws {
        var node = base.engine(base.small)
        _ = node.start(at: base.at(0))
        _ = node.linkUp(LinkHandle(1), peer: base.large, dialedByUs: false, remoteAddress: nil, at: base.at(0))
        _ = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: false, remoteAddress: nil, at: base.at(0))
        _ = node.received([.invite(invite(1))], on: LinkHandle(1), at: base.at(10))
        _ = node.received([.invite(invite(2))], on: LinkHandle(2), at: base.at(10))
        let first = try node.accept(invite(1).id.description, at: base.at(20)).1
        #expect(first.contains(.requestHistory(base.lab, LinkHandle(1), .all)))
        // bob had left lab: it says we are not a member of its room.
        _ = node.received([.roomLeave(.init(room: base.lab, text: SessionStateMachine.notAMember))], on: LinkHandle(1), at: base.at(30))
        #expect(node.members(of: base.lab)?.isEmpty == true)
        let second = try node.accept(invite(2).id.description, at: base.at(40)).1
        #expect(second.contains(.requestHistory(base.lab, LinkHandle(2), .all)))
        #expect(node.historyRequested[base.lab]?.peer == carol.id)
        #expect(node.members(of: base.lab)?.keys.sorted() == [carol.id])
        #expect(node.consistencyFaults() == [])
    }

    @Test func withAMemberTheNextInvitationIsNoJoin() throws {
        var node = base.roomWith(base.small, base.large)
        _ = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: false, remoteAddress: nil, at: base.at(0))
        _ = node.received([.invite(invite(2))], on: LinkHandle(2), at: base.at(10))
        let actions = try node.accept(invite(2).id.description, at: base.at(20)).1
        #expect(!actions.contains { if case .requestHistory = $0 { true } else { false } })
        #expect(node.members(of: base.lab)?.keys.sorted() == [carol.id, base.large.id].sorted())
    }
}
