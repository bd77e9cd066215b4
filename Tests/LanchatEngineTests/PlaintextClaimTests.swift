import LanchatCore
import LanchatEngine
import LanchatWire
import Testing

/// `--encryption optional` is not "anyone may claim any id" (issue 11, item 3): a plaintext HELLO proves
/// nothing, so it may not speak for an id a room member proved with its key, and such an id is dialed
/// with TLS whatever its (unauthenticated) advertisement says.
@Suite struct PlaintextClaimTests {
    let me = SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice")
    let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    let carol = SessionPeer(id: SessionStateMachineTests.peerID(0x20), name: "carol")
    let lab = RoomID("lab")!

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    func engine(
        encryption: EncryptionPreference = .optional, autoAccept: AutoAcceptPolicy = .never, keyed: Set<PeerID> = [],
        known: [PeerID: String] = [:], directory: PeerDirectory = PeerDirectory()
    ) -> SessionStateMachine {
        var configuration = SessionStateMachine.Configuration(ownID: me.id, ownName: me.name, port: 7473, autoAccept: autoAccept)
        configuration.encryption = encryption
        var node = SessionStateMachine(
            configuration: configuration,
            restored: .init(
                rooms: [(lab, [StoredMember(peerID: bob.id.rawValue, name: bob.name, port: 7473, addresses: [])])],
                knownPeers: KnownPeerBook(known), keyedPeers: keyed),
            addressBook: directory, ids: IDGenerator(seed: 1), shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        return node
    }

    func refused(_ actions: [SessionAction], _ handle: LinkHandle) -> Bool {
        actions.contains { if case .close(handle, .refused, _) = $0 { true } else { false } }
    }

    func securityEvents(_ actions: [SessionAction]) -> [String] {
        actions.compactMap { if case .emit(.security(_, let text)) = $0 { text } else { nil } }
    }

    @Test func aMemberOnTLSIsRememberedAsKeyed() {
        var node = engine()
        let (serving, actions) = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, authenticated: true, at: at(1))
        #expect(serving == LinkHandle(1))
        #expect(actions.contains(.persist(.rememberKeyed(bob.id))))
        #expect(node.keyed == [bob.id])
        // A stranger on TLS is not remembered: fresh keys from any host must not fill the set.
        let stranger = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: false, remoteAddress: nil, authenticated: true, at: at(2))
        #expect(!stranger.actions.contains(.persist(.rememberKeyed(carol.id))))
    }

    @Test func aPlaintextClaimOfAKeyedIdIsRefusedAndTheRealLinkStays() {
        var node = engine()
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, authenticated: true, at: at(1))
        let (serving, actions) = node.linkUp(LinkHandle(2), peer: bob, dialedByUs: false, remoteAddress: nil, authenticated: false, at: at(2))
        #expect(serving == nil)
        #expect(refused(actions, LinkHandle(2)))
        #expect(securityEvents(actions).first?.contains("without encryption claimed to be 'bob'") == true)
        #expect(!actions.contains { if case .close(LinkHandle(1), _, _) = $0 { true } else { false } })
        #expect(!actions.contains { if case .peerConnected = $0 { true } else { false } })
        #expect(node.connections[bob.id] != nil)
        // What the impostor sends on its connection is not taken as bob's.
        let message = WireFrame.message(
            .init(
                id: WireID(bytes: [UInt8](repeating: 5, count: 16))!, room: lab, sequence: 1, timestampMilliseconds: 5,
                kind: .text, body: "it is me, bob", reliable: true))
        #expect(!node.received([message], on: LinkHandle(2), at: at(3)).contains { if case .persist(.insertMessage) = $0 { true } else { false } })
    }

    @Test func aKeyedIdIsProtectedAfterARestartWithoutAnyLink() {
        var node = engine(keyed: [bob.id])
        let (serving, actions) = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: false, remoteAddress: nil, authenticated: false, at: at(1))
        #expect(serving == nil && refused(actions, LinkHandle(1)))
    }

    @Test func aKeyedIdIsDialedWithTLSWhateverItsAdvertisementSays() {
        let directory = PeerDirectory()
        directory.update(bob.id, PeerAddressHint(name: "bob", port: 7473, addresses: ["198.51.100.7"], encryption: EncryptionPreference.none))
        directory.update(carol.id, PeerAddressHint(name: "carol", port: 7473, addresses: ["198.51.100.8"], encryption: EncryptionPreference.none))
        var node = engine(keyed: [bob.id], directory: directory)
        #expect(node.prepareDial(bob.id).plan?.encryption == .required)
        // An id never seen with a key keeps what it advertises (`optional` meets `none` in plaintext).
        #expect(node.prepareDial(carol.id).plan?.encryption == EncryptionPreference.none)
    }

    @Test func aPlaintextPeerIsNeitherTrustedOnFirstUseNorKnownForAutoAccept() {
        var node = engine(autoAccept: .known, known: [carol.id: "carol"])
        _ = node.linkUp(LinkHandle(1), peer: carol, dialedByUs: false, remoteAddress: nil, authenticated: false, at: at(1))
        let invite = WireFrame.invite(.init(id: WireID(bytes: [UInt8](repeating: 1, count: 16))!, timeoutMilliseconds: 60_000, room: RoomID("den")!, context: []))
        let actions = node.received([invite], on: LinkHandle(1), at: at(2))
        // "known" means known by key: a plaintext HELLO under carol's id and name is asked about, not accepted.
        #expect(node.invitations.count == 1)
        #expect(!actions.contains { if case .send(_, let frames) = $0 { frames.contains { if case .inviteReply = $0 { true } else { false } } } else { false } })

        var fresh = engine(autoAccept: .all)
        _ = fresh.linkUp(LinkHandle(1), peer: carol, dialedByUs: false, remoteAddress: nil, authenticated: false, at: at(1))
        let joined = fresh.received([invite], on: LinkHandle(1), at: at(2))
        #expect(fresh.roomNames.contains("den"))
        #expect(!joined.contains { if case .persist(.rememberPeer) = $0 { true } else { false } })
        #expect(!joined.contains { if case .persist(.rememberKeyed) = $0 { true } else { false } })
    }

    @Test func aTLSConnectionAlwaysReplacesAPlaintextOne() {
        var node = engine()
        // The plaintext link would win by the duplicate rule (dialed by the smaller id, carol's).
        _ = node.linkUp(LinkHandle(1), peer: carol, dialedByUs: false, remoteAddress: nil, authenticated: false, at: at(1))
        let (serving, actions) = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: true, remoteAddress: nil, authenticated: true, at: at(2))
        #expect(serving == LinkHandle(2))
        #expect(actions.contains(.close(LinkHandle(1), .leaving, "duplicate connection")))
    }

    @Test func aKeyThePersonTrustsIsKnownForAutoAccept() {
        var node = engine(autoAccept: .known)
        _ = node.linkUp(LinkHandle(1), peer: carol, dialedByUs: false, remoteAddress: nil, authenticated: true, at: at(1))
        node.trust(carol)
        let invite = WireFrame.invite(.init(id: WireID(bytes: [UInt8](repeating: 1, count: 16))!, timeoutMilliseconds: 60_000, room: RoomID("den")!, context: []))
        _ = node.received([invite], on: LinkHandle(1), at: at(2))
        #expect(node.roomNames.contains("den") && node.invitations.isEmpty)
    }

    @Test func withEncryptionNoneNoIdIsProvedSoNoneIsRefused() {
        var node = engine(encryption: .none, keyed: [bob.id])
        #expect(node.linkUp(LinkHandle(1), peer: bob, dialedByUs: false, remoteAddress: nil, authenticated: false, at: at(1)).serving == LinkHandle(1))
    }
}
