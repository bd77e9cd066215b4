import LanchatCore
@testable import LanchatEngine
import LanchatWire
import Testing

/// An inviter that says it is not in the room ("not a member") and invites us again gets no second
/// history, however often it does it: only a room we are not in is joined (issue 28's one history per
/// join). A change that made such an invitation a join (to take a creator's record a lone member never
/// had) was undone for this, after review; the simulator counts those members instead.
@Suite struct InviteAgainTests {
    let base = SessionStateMachineTests()

    func invite(_ byte: UInt8) -> WireFrame.Invite {
        .init(id: WireID(bytes: [UInt8](repeating: byte, count: 16))!, timeoutMilliseconds: 60_000, room: base.lab, context: [])
    }

    func asksHistory(_ actions: [SessionAction]) -> Bool {
        actions.contains { if case .requestHistory = $0 { true } else { false } }
    }

    @Test func anInviterThatLeftAndInvitesAgainGetsNoSecondHistory() throws {
        var node = base.engine(base.small)
        _ = node.start(at: base.at(0))
        _ = node.linkUp(LinkHandle(1), peer: base.large, dialedByUs: false, remoteAddress: nil, at: base.at(0))
        _ = node.received([.invite(invite(1))], on: LinkHandle(1), at: base.at(10))
        #expect(asksHistory(try node.accept(invite(1).id.description, at: base.at(20)).1))
        for round in 0..<3 {
            let at = Int64(100 * (round + 1))
            _ = node.received([.roomLeave(.init(room: base.lab, text: SessionStateMachine.notAMember))], on: LinkHandle(1), at: base.at(at))
            #expect(node.members(of: base.lab)?.isEmpty == true)
            _ = node.received([.invite(invite(UInt8(2 + round)))], on: LinkHandle(1), at: base.at(at + 10))
            let accepted = try node.accept(invite(UInt8(2 + round)).id.description, at: base.at(at + 20)).1
            #expect(!asksHistory(accepted))
            #expect(node.members(of: base.lab)?.keys.sorted() == [base.large.id])
        }
        #expect(node.consistencyFaults() == [])
    }
}
