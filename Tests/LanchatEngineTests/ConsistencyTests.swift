import LanchatCore
@testable import LanchatEngine
import LanchatWire
import Testing

/// `consistencyFaults` (which the simulator runs after every event) says nothing of a healthy engine and
/// names each broken agreement between its tables.
@Suite struct ConsistencyTests {
    let base = SessionStateMachineTests()

    func healthy() -> SessionStateMachine { base.roomWith(base.small, base.large) }

    @Test func aHealthyEngineHasNoFaults() {
        var node = healthy()
        #expect(node.consistencyFaults() == [])
        _ = node.sendInvite(base.large, room: RoomID("ops")!, context: [], timeout: 30_000, at: base.at(5))
        #expect(node.outgoing.count == 1)
        #expect(node.consistencyFaults() == [])
    }

    @Test func anInvitationWithoutItsTimerIsAFault() throws {
        var node = healthy()
        _ = node.sendInvite(base.large, room: RoomID("ops")!, context: [], timeout: 30_000, at: base.at(5))
        let id = try #require(node.outgoing.keys.first)
        node.timers.cancel(.outgoingInvitation(id))
        #expect(node.consistencyFaults().contains { $0.contains("waits for a reply with no timer") })
    }

    @Test func answersAndTheirOrderMustAgree() {
        var node = healthy()
        node.answeredOrder.append(WireID(bytes: [UInt8](repeating: 7, count: 16))!)
        #expect(node.consistencyFaults().contains { $0.contains("disagree") })
    }

    @Test func aTransferUnderWayWithAPeerNotConnectedIsAFault() {
        var node = healthy()
        _ = node.linkDown(LinkHandle(1), reason: .lost, at: base.at(10))
        let offer = WireFrame.ResourceOffer(
            id: WireID(bytes: [UInt8](repeating: 9, count: 16))!, room: base.lab, kind: .file, name: Array("a".utf8), size: 10,
            sha256: [UInt8](repeating: 0, count: 32), modifiedMilliseconds: 0)
        node.transfers.incoming[offer.id] = .init(peer: base.large, offer: offer, stage: .lookingUp)
        #expect(node.consistencyFaults().contains { $0.contains("who is not connected") })
        node.transfers.incoming[offer.id]?.interrupted = true
        #expect(node.consistencyFaults() == [])
    }
}
