import LanchatCore
import LanchatEngine
import LanchatWire

/// The fixture of the room-feature tests: alice (us) in lab with bob and carol; bob (link 1), carol
/// (link 2) and a stranger (link 3, no member) connected at version 3.
protocol LabFixture {}

extension LabFixture {
    var me: SessionPeer { SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice") }
    var bob: SessionPeer { SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob") }
    var carol: SessionPeer { SessionPeer(id: SessionStateMachineTests.peerID(0x20), name: "carol") }
    var stranger: SessionPeer { SessionPeer(id: SessionStateMachineTests.peerID(0x30), name: "stranger") }
    var lab: RoomID { RoomID("lab")! }

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    func engine() -> SessionStateMachine { engine(version: 3) }

    /// The same, connected at `version` (1: unsigned messages are kept).
    func engine(version: UInt16) -> SessionStateMachine {
        let member = { (peer: SessionPeer) in StoredMember(peerID: peer.id.rawValue, name: peer.name, port: 7473, addresses: []) }
        var node = SessionStateMachine(
            configuration: .init(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .never),
            restored: .init(rooms: [(lab, [member(bob), member(carol)])], knownPeers: KnownPeerBook()),
            addressBook: PeerDirectory(), ids: IDGenerator(seed: 1), shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        for (handle, peer) in [(1, bob), (2, carol), (3, stranger)] {
            _ = node.linkUp(LinkHandle(handle), peer: peer, dialedByUs: true, remoteAddress: nil, version: version, at: at(1))
        }
        return node
    }

    /// The frames sent, by connection.
    func sent(_ actions: [SessionAction]) -> [LinkHandle: [WireFrame]] {
        var result: [LinkHandle: [WireFrame]] = [:]
        for action in actions {
            switch action {
            case .send(let handle, let frames), .sendUnreliable(let handle, let frames): result[handle, default: []] += frames
            default: break
            }
        }
        return result
    }
}
