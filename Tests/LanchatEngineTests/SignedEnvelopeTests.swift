import LanchatCore
import LanchatEngine
import LanchatWire
import Testing

/// Signed envelopes (issue 12, item 1), the engine's part: what we write is signed; on a version 2
/// connection a message is kept only with its author's valid signature (and kept with it); a record of
/// a relayed history only if its signature verifies for its sender, or it is the relay's own words.
/// The signature scheme is the simulator's (unforgeable by construction, no P-256 cost); the real one is
/// tested in LanchatSessionTests.
@Suite struct SignedEnvelopeTests {
    let me = SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice")
    let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    let carol = SessionPeer(id: SessionStateMachineTests.peerID(0x20), name: "carol")
    let lab = RoomID("lab")!
    var ids: [PeerID] { [me.id, bob.id, carol.id] }

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    func engine(signing: Bool = true) -> SessionStateMachine {
        var configuration = SessionStateMachine.Configuration(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .never)
        if signing { configuration.envelopes = SimulatedSignatures.keys(for: 0, ids: ids) }
        var node = SessionStateMachine(
            configuration: configuration,
            restored: .init(rooms: [(lab, [StoredMember(peerID: bob.id.rawValue, name: bob.name, port: 7473, addresses: [])])], knownPeers: KnownPeerBook()),
            addressBook: PeerDirectory(), ids: IDGenerator(seed: 1), shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        return node
    }

    func stored(_ actions: [SessionAction]) -> [StoredMessage] {
        actions.compactMap { if case .persist(.insertMessage(let message, _, _)) = $0 { message } else { nil } }
    }

    func sentMessages(_ actions: [SessionAction]) -> [WireFrame.Message] {
        actions.flatMap { action -> [WireFrame.Message] in
            guard case .send(_, let frames) = action else { return [] }
            return frames.compactMap { if case .message(let message) = $0 { message } else { nil } }
        }
    }

    /// A message by `author` (node index in `ids`), signed with its key unless `signer` says otherwise.
    func message(_ body: String, by author: Int, signer: Int? = nil, sequence: UInt64 = 1) -> WireFrame.Message {
        let id = WireID(bytes: [UInt8](repeating: UInt8(sequence), count: 16))!
        let bytes = Envelope.signingBytes(author: ids[author].rawValue, room: lab, id: id, sequence: sequence, timestamp: 5, kind: .text, body: body)
        let keys = SimulatedSignatures.keys(for: signer ?? author, ids: ids)
        return .init(
            id: id, room: lab, sequence: sequence, timestampMilliseconds: 5, kind: .text, body: body, reliable: true,
            signature: keys.signature(over: bytes))
    }

    @Test func whatWeWriteIsSignedAndGoesSignedOnlyToVersion2Peers() throws {
        var node = engine()
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        let (plan, actions) = try node.send(["hello"], room: lab, at: at(2))
        let mine = try #require(plan.messages.first)
        #expect(mine.isSigned && mine.authorKey == SimulatedSignatures.key(0))
        #expect(stored(actions).first?.signature == mine.signature)
        let frame = try #require(sentMessages(actions).first)
        let bytes = Envelope.signingBytes(
            author: me.id.rawValue, room: lab, id: frame.id, sequence: frame.sequence,
            timestamp: frame.timestampMilliseconds, kind: .text, body: "hello")
        #expect(frame.signature.map { SimulatedSignatures.verifies($0, bytes, me.id, ids: ids) } == true)
        // A version 1 peer gets the same message unsigned (its decoder knows no signature).
        var old = engine()
        _ = old.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 1, at: at(1))
        #expect(sentMessages(try old.send(["hello"], room: lab, at: at(2)).1).first?.signature == nil)
    }

    @Test func aVersion2MessageIsKeptOnlyWithItsAuthorsValidSignature() {
        var node = engine()
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        var tampered = message("genuine", by: 1, sequence: 3)
        tampered.body = "changed on the way"
        var unsigned = message("no signature", by: 1, sequence: 4)
        unsigned.signature = nil
        let frames: [WireFrame] = [
            .message(message("genuine", by: 1, sequence: 1)),
            .message(message("signed by carol's key", by: 1, signer: 2, sequence: 2)),
            .message(tampered), .message(unsigned),
        ]
        let actions = node.received(frames, on: LinkHandle(1), at: at(2))
        let kept = stored(actions)
        #expect(kept.map(\.body) == ["genuine"])
        #expect(kept.first?.isSigned == true && kept.first?.authorKey == SimulatedSignatures.key(1))
        // One security event for the connection, not one per bad message.
        let warnings = actions.compactMap { if case .emit(.security(_, let text)) = $0 { text } else { nil } }
        #expect(warnings.count == 1 && warnings.first?.contains("does not verify") == true)
        // Refused messages are acknowledged all the same (resending them would not change them).
        let acked = actions.flatMap { if case .send(_, let frames) = $0 { frames.flatMap { if case .ack(let ids) = $0 { ids } else { [] } } } else { [] } }
        #expect(acked.count == 4)
    }

    @Test func aVersion1MessageIsKeptUnsigned() {
        var node = engine()
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 1, at: at(1))
        var plain = message("from an older peer", by: 1)
        plain.signature = nil
        let kept = stored(node.received([.message(plain)], on: LinkHandle(1), at: at(2)))
        #expect(kept.map(\.body) == ["from an older peer"] && kept.first?.isSigned == false)
    }

    func record(_ body: String, by author: Int, signer: Int? = nil, signed: Bool = true) -> HistoryRecord {
        let wire = message(body, by: author, signer: signer)
        return HistoryRecord(
            id: wire.id, senderID: ids[author].rawValue, senderName: "label", sequence: 1, timestampMilliseconds: 5, kind: .text,
            body: body, signature: signed ? wire.signature : nil)
    }

    @Test func aRelayedRecordIsKeptOnlyIfItsSignatureVerifiesOrItIsTheRelaysOwn() {
        let keys = SimulatedSignatures.keys(for: 0, ids: ids)
        func verdict(_ record: HistoryRecord) -> SessionStateMachine.HistoryVerdict {
            SessionStateMachine.verdict(record, room: lab, relay: bob.id, ownID: me.id, keys: keys)
        }
        // Carol's genuine words, relayed by bob: kept, with carol's signature.
        guard case .keep(let kept) = verdict(record("carol's words", by: 2)) else { Issue.record("carol's record refused"); return }
        #expect(kept.senderID == carol.id.rawValue && kept.authorKey == SimulatedSignatures.key(2) && kept.isSigned)
        // Words put in carol's mouth: signed with bob's key, or changed after carol signed them.
        #expect(verdict(record("bob's words as carol's", by: 2, signer: 1)) == .forged)
        var changed = record("carol's words", by: 2)
        changed.body = "something carol never said"
        #expect(verdict(changed) == .forged)
        // Unsigned: only the relay's own words (its connection proved who it is).
        #expect(verdict(record("carol, unsigned", by: 2, signed: false)) == .refused)
        if case .keep(let own) = verdict(record("bob's own, unsigned", by: 1, signed: false)) {
            #expect(!own.isSigned)
        } else {
            Issue.record("the relay's own unsigned record was refused")
        }
        // Our own records: skipped. A node that speaks version 1 only (no keys) takes the relay's word, as
        // version 1 does.
        #expect(verdict(record("mine", by: 0)) == .ours)
        if case .keep = SessionStateMachine.verdict(record("carol, unsigned", by: 2, signed: false), room: lab, relay: bob.id, ownID: me.id, keys: nil) {
        } else {
            Issue.record("a version 1 node refused its inviter's record")
        }
        // A signature is for one room.
        #expect(SessionStateMachine.verdict(record("carol's words", by: 2), room: RoomID("ops")!, relay: bob.id, ownID: me.id, keys: keys) == .forged)
    }

    @Test func aRelayedRecordsAuthorMustBeAMemberAndItsNameIsOurs() {
        let keys = SimulatedSignatures.keys(for: 0, ids: ids)
        let members: [PeerID: String] = [bob.id: "bob", carol.id: "carol (as we know her)"]
        func verdict(_ record: HistoryRecord, members: [PeerID: String]) -> SessionStateMachine.HistoryVerdict {
            SessionStateMachine.verdict(record, room: lab, relay: bob.id, ownID: me.id, keys: keys, members: members)
        }
        var labelled = record("carol's words", by: 2)
        labelled.senderName = "alice"  // the relay's label
        guard case .keep(let kept) = verdict(labelled, members: members) else { Issue.record("a member's record refused"); return }
        #expect(kept.senderName == "carol (as we know her)")
        // A valid signature by an author who is not a member (a key the relay made): refused, not forged.
        #expect(verdict(record("carol's words", by: 2), members: [bob.id: "bob"]) == .refused)
        // Forged stays forged, member or not.
        #expect(verdict(record("bob's words as carol's", by: 2, signer: 1), members: [bob.id: "bob"]) == .forged)
    }
}
