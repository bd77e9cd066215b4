import LanchatCore
@testable import LanchatEngine
import LanchatWire
import Testing

/// What one member's ROOM_MEMBERS can change (issue 12, item 2, the part without signed admissions):
/// a known member's addresses only by that member itself, and a room's size only up to its limit.
@Suite struct MembershipBoundsTests {
    let me = SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice")
    let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    let carol = SessionPeer(id: SessionStateMachineTests.peerID(0x20), name: "carol")
    let lab = RoomID("lab")!

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    func engine(limit: Int = 255) -> SessionStateMachine {
        var configuration = SessionStateMachine.Configuration(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .never)
        configuration.maximumRoomMembers = limit
        var node = SessionStateMachine(
            configuration: configuration,
            restored: .init(
                rooms: [
                    (
                        lab,
                        [
                            StoredMember(peerID: bob.id.rawValue, name: bob.name, port: 7473, addresses: ["198.18.0.12"]),
                            StoredMember(peerID: carol.id.rawValue, name: carol.name, port: 7473, addresses: ["198.18.0.13"]),
                        ]
                    )
                ],
                knownPeers: KnownPeerBook()),
            addressBook: NoAddresses(), ids: IDGenerator(seed: 1), shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        return node
    }

    @Test func anotherMembersWordDoesNotMoveAKnownMember() {
        var node = engine()
        let lie = WireFrame.roomMembers(
            .init(
                room: lab,
                members: [
                    .init(peerID: bob.id.rawValue, name: "bob", port: 7473, addresses: []),
                    .init(peerID: carol.id.rawValue, name: "carol", port: 9999, addresses: ["10.6.6.6", "10.6.6.7"]),
                ]))
        _ = node.received([lie], on: LinkHandle(1), at: at(2))
        let known = node.members(of: lab)?[carol.id]
        #expect(known?.port == 7473 && known?.addresses == ["198.18.0.13"])
        // Bob's word about himself counts.
        let own = WireFrame.roomMembers(.init(room: lab, members: [.init(peerID: bob.id.rawValue, name: "bob", port: 7600, addresses: ["198.18.0.22"])]))
        _ = node.received([own], on: LinkHandle(1), at: at(3))
        #expect(node.members(of: lab)?[bob.id]?.port == 7600 && node.members(of: lab)?[bob.id]?.addresses.first == "198.18.0.22")
    }

    /// A member's list is saved only when it changes something (every member sends it at every resync:
    /// in a room of 64, 63 synced writes a round); our own resync saves each room once.
    @Test func aListThatChangesNothingIsNotSaved() {
        var node = engine()
        func saves(_ actions: [SessionAction]) -> Int { actions.filter { if case .persist(.saveRoom) = $0 { true } else { false } }.count }
        let same = WireFrame.roomMembers(
            .init(
                room: lab,
                members: [
                    .init(peerID: bob.id.rawValue, name: "bob", port: 7473, addresses: ["198.18.0.12"]),
                    .init(peerID: carol.id.rawValue, name: "carol", port: 7473, addresses: ["198.18.0.13"]),
                ]))
        #expect(saves(node.received([same], on: LinkHandle(1), at: at(2))) == 0)
        let moved = WireFrame.roomMembers(.init(room: lab, members: [.init(peerID: bob.id.rawValue, name: "bob", port: 7600, addresses: ["198.18.0.12"])]))
        #expect(saves(node.received([moved], on: LinkHandle(1), at: at(3))) == 1)
        #expect(saves(node.tick(at: at(node.configuration.resyncInterval + 10))) == 1)
    }

    @Test func aRoomTakesMembersOnlyUpToItsLimit() {
        var node = engine(limit: 10)
        let fakes = (0..<1024).map { index in
            WireFrame.Member(
                peerID: PeerID(digest: [UInt8(index >> 8), UInt8(index & 0xff)] + [UInt8](repeating: 7, count: 30)).rawValue,
                name: "fake\(index)")
        }
        _ = node.received([.roomMembers(.init(room: lab, members: fakes))], on: LinkHandle(1), at: at(2))
        #expect(node.members(of: lab)?.count == 10)
    }
}
