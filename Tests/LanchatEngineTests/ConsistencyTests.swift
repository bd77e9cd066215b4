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
        #expect(node.invites.outgoing.count == 1)
        #expect(node.consistencyFaults() == [])
    }

    @Test func anInvitationWithoutItsTimerIsAFault() throws {
        var node = healthy()
        _ = node.sendInvite(base.large, room: RoomID("ops")!, context: [], timeout: 30_000, at: base.at(5))
        let id = try #require(node.invites.outgoing.keys.first)
        node.timers.cancel(.outgoingInvitation(id))
        #expect(node.consistencyFaults().contains { $0.contains("waits for a reply with no timer") })
    }

    /// The invitation book keeps its answers and their order together, and forgets the oldest past its bound.
    @Test func answersAreKeptInOrderAndBounded() {
        var book = InvitationBook()
        let ids = (1...5).map { WireID(bytes: [UInt8](repeating: UInt8($0), count: 16))! }
        for id in ids { book.answered(id, from: base.large.id, .init(id: id, outcome: .declined), keep: 3) }
        book.answered(ids[4], from: base.large.id, .init(id: ids[4], outcome: .accepted), keep: 3)  // (replaces the first, in its place)
        #expect(book.answersAgree && book.answersKept == 3)
        #expect(book.answer(to: ids[0], from: base.large.id) == nil)
        #expect(book.answer(to: ids[4], from: base.large.id)?.outcome == .accepted)
        #expect(book.answer(to: ids[4], from: base.small.id) == nil)
    }

    @Test func aTransferUnderWayWithAPeerNotConnectedIsAFault() {
        var node = healthy()
        _ = node.linkDown(LinkHandle(1), reason: .lost, at: base.at(10))
        let offer = WireFrame.ResourceOffer(
            id: WireID(bytes: [UInt8](repeating: 9, count: 16))!, room: base.lab, kind: .file, name: Array("a".utf8), size: 10,
            sha256: [UInt8](repeating: 0, count: 32), modifiedMilliseconds: 0)
        var transfer = IncomingTransfer(peer: base.large, offer: offer, limits: TransferLimits(), at: 10)
        node.transfers.incoming[offer.id] = transfer
        #expect(node.consistencyFaults().contains { $0.contains("who is not connected") })
        // Receiving, then interrupted (the connection went): it waits for the sender, no fault.
        _ = transfer.lookedUp(.none, maximumSize: 1000)
        _ = transfer.partOpened(.opened(path: "/d/.a.part", held: 0, freeBytes: 1 << 30), reserved: 0, at: 10)
        node.transfers.incoming[offer.id] = transfer
        #expect(node.consistencyFaults().contains { $0.contains("who is not connected") })
        _ = transfer.connectionLost("lost")
        #expect(transfer.interrupted)
        node.transfers.incoming[offer.id] = transfer
        #expect(node.consistencyFaults() == [])
    }
}
