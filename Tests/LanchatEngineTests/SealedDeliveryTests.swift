import LanchatCore
import LanchatWire
import Testing

@testable import LanchatEngine

/// Sealed messages received live (wire version 4, draft; issue 33, step 3): a SEAL held per connection,
/// each sealed MESSAGE checked against it and stored with the seal's head and its proof, without a
/// signature of its own. The signature scheme is the simulator's (unforgeable by construction).
@Suite struct SealedDeliveryTests {
    let me = SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice")
    let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    let carol = SessionPeer(id: SessionStateMachineTests.peerID(0x20), name: "carol")
    let stranger = SessionPeer(id: SessionStateMachineTests.peerID(0x30), name: "stranger")
    let lab = RoomID("lab")!
    var ids: [PeerID] { [me.id, bob.id, carol.id, stranger.id] }

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    /// Alice in lab with bob and carol; bob on link 1, carol on link 2, a stranger on link 3, at `version`
    /// (carol at `carolVersion` if given); TLS links unless not `authenticated` (plaintext: seals are
    /// checked where they come, not off the event loop).
    func engine(version: UInt16 = WireFrame.sealsVersion, carolVersion: UInt16? = nil, authenticated: Bool = true) -> SessionStateMachine {
        var node = engine(as: 0, members: [bob, carol])
        for (handle, peer, version) in [(1, bob, version), (2, carol, carolVersion ?? version), (3, stranger, version)] {
            _ = node.linkUp(
                LinkHandle(handle), peer: peer, dialedByUs: true, remoteAddress: nil, authenticated: authenticated, version: version, at: at(1))
        }
        return node
    }

    /// `ids[index]`'s engine in lab with `members`, linked to none.
    func engine(as index: Int, members: [SessionPeer]) -> SessionStateMachine {
        let own = [me, bob, carol, stranger][index]
        var configuration = SessionStateMachine.Configuration(ownID: own.id, ownName: own.name, port: 7473, autoAccept: .never)
        configuration.envelopes = SimulatedSignatures.keys(for: index, ids: ids)
        let member = { (peer: SessionPeer) in StoredMember(peerID: peer.id.rawValue, name: peer.name, port: 7473, addresses: []) }
        var node = SessionStateMachine(
            configuration: configuration, restored: .init(rooms: [(lab, members.map(member))], knownPeers: KnownPeerBook()),
            addressBook: PeerDirectory(), ids: IDGenerator(seed: UInt64(index + 1)), shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        return node
    }

    /// Bob's engine, with alice (link 1, version 4) and carol: what alice sends it.
    func bobsEngine() -> SessionStateMachine {
        var node = engine(as: 1, members: [me, carol])
        _ = node.linkUp(LinkHandle(1), peer: me, dialedByUs: true, remoteAddress: nil, version: WireFrame.sealsVersion, at: at(1))
        return node
    }

    /// The frames of `.send` actions to `handle`.
    func frames(_ actions: [SessionAction], to handle: LinkHandle) -> [WireFrame] {
        actions.flatMap { action -> [WireFrame] in
            switch action {
            case .send(let to, let frames) where to == handle, .sendUnreliable(let to, let frames) where to == handle: frames
            default: []
            }
        }
    }

    /// "s" for a SEAL of n leaves, "m" for a sealed message, "g" for a signed one, "p" for a plain one.
    func shape(_ frames: [WireFrame]) -> String {
        frames.map { frame in
            switch frame {
            case .seal(let seal): "s\(seal.leafHashes.count)"
            case .message(let message): message.sealed != nil ? "m" : message.signature != nil ? "g" : "p"
            default: "?"
            }
        }.joined(separator: " ")
    }

    /// `author`'s (index in `ids`) messages `numbers` in lab.
    func messages(_ numbers: ClosedRange<Int>, by author: Int = 1) -> [StoredMessage] {
        numbers.map { n in
            StoredMessage(
                id: WireID(bytes: [UInt8(author), UInt8(n)] + [UInt8](repeating: 0x11, count: 14))!.description, room: "lab",
                senderID: ids[author].rawValue, senderName: "bob", sequence: Int64(n), timestamp: 5 + Int64(n), kind: .text, body: "m\(n)")
        }
    }

    /// Seal ids from `first` on.
    func sealIDs(from first: UInt8) -> () -> WireID {
        var next = first
        return {
            defer { next &+= 1 }
            return WireID(bytes: [0x5E, next] + [UInt8](repeating: 0, count: 14))!
        }
    }

    /// `stored` sealed by `author` (signed with `signer`'s key): the SEAL and each message's frame.
    func sealed(_ stored: [StoredMessage], by author: Int = 1, signer: Int? = nil, firstID: UInt8 = 1) -> (seal: Seal, frames: [WireFrame.Message]) {
        let keys = SimulatedSignatures.keys(for: signer ?? author, ids: ids)
        let (batch, piece) = SealedBatch.seal(stored, author: ids[author], room: lab, keys: keys, newID: sealIDs(from: firstID))[0]
        let frames = zip(piece, batch.leaves).map { message, leaf -> WireFrame.Message in
            guard case .message(var frame)? = SessionStateMachine.frame(message, reliable: true) else { preconditionFailure() }
            frame.sealed = leaf
            return frame
        }
        return (batch.seal, frames)
    }

    func stored(_ actions: [SessionAction]) -> [StoredMessage] {
        actions.compactMap { if case .persist(.insertMessage(let message, _, _)) = $0 { message } else { nil } }
    }

    func acked(_ actions: [SessionAction]) -> [WireID] {
        actions.flatMap { action -> [WireID] in
            guard case .send(_, let frames) = action else { return [] }
            return frames.flatMap { frame -> [WireID] in if case .ack(let ids) = frame { ids } else { [] } }
        }
    }

    func warnings(_ actions: [SessionAction]) -> [String] {
        actions.compactMap { if case .emit(.security(_, let text)) = $0 { text } else { nil } }
    }

    @Test func aSealThenItsMessagesAreStoredWithTheSealsHeadAndTheirProofs() throws {
        var node = engine()
        let (seal, frames) = sealed(messages(1...3))
        let actions = node.received([.seal(seal)] + frames.map { .message($0) }, on: LinkHandle(1), at: at(2))
        let kept = stored(actions)
        #expect(kept.map(\.body) == ["m1", "m2", "m3"])
        #expect(acked(actions) == frames.map(\.id))
        #expect(warnings(actions).isEmpty)
        var checks = SealChecks()
        for record in kept {
            #expect(record.isSealed && !record.isSigned)
            let head = try #require(record.seal?.head(author: bob.id.rawValue))
            #expect(head == seal.head(author: bob.id.rawValue))
            // Kept with its leaf index and the seal's leaves, from which its path is made again: what a
            // newcomer checks of it later is one signature for the seal, one path for the record.
            #expect(record.leafIndex != nil && record.seal?.hasLeaves == true)
            let history = try #require(HistoryRecord(record, proof: record.proof))
            #expect(checks.verifies(history, seal: head, room: lab, keys: SimulatedSignatures.keys(for: 2, ids: ids)) == true)
        }
        // Unsigned or signed messages still come as before on the same connection.
        var signedLater = messages(9...9)[0]
        let bytes = SessionStateMachine.signingBytes(of: signedLater, room: lab, id: WireID(hex: signedLater.id)!)
        let signature = SimulatedSignatures.keys(for: 1, ids: ids).signature(over: bytes)
        signedLater.authorKey = signature.key
        signedLater.signature = signature.bytes
        let signedFrame = try #require(SessionStateMachine.frame(signedLater, reliable: true, signed: true))
        #expect(stored(node.received([signedFrame], on: LinkHandle(1), at: at(3))).first?.isSigned == true)
    }

    @Test func aMessageWhoseSealIsNotHeldIsNeitherStoredNorAcknowledgedUntilItsSealComes() {
        var node = engine()
        let (seal, frames) = sealed(messages(1...2))
        let early = node.received(frames.map { .message($0) }, on: LinkHandle(1), at: at(2))
        #expect(stored(early).isEmpty && acked(early).isEmpty && warnings(early).isEmpty)
        // Sent again after its SEAL (the author's retransmission): kept.
        let again = node.received([.seal(seal)] + frames.map { .message($0) }, on: LinkHandle(1), at: at(3))
        #expect(stored(again).count == 2 && acked(again).count == 2)
        // A new connection starts without seals: the same messages again, without their SEAL, wait.
        let (serving, _) = node.linkUp(LinkHandle(4), peer: bob, dialedByUs: true, remoteAddress: nil, version: WireFrame.sealsVersion, at: at(4))
        #expect(serving == LinkHandle(4))
        let fresh = node.received(frames.map { .message($0) }, on: LinkHandle(4), at: at(5))
        #expect(acked(fresh).isEmpty && stored(fresh).isEmpty)
    }

    @Test func aMessageTheSealDoesNotCoverIsAcknowledgedRefusedAndToldOnce() {
        var node = engine(authenticated: false)
        let (seal, frames) = sealed(messages(1...3))
        var changed = frames[0]
        changed.body = "changed on the way"
        var pastTheCount = frames[1]
        pastTheCount.sealed?.leafIndex = 7
        var otherLeaf = frames[2]
        otherLeaf.sealed?.leafIndex = 0
        let actions = node.received([.seal(seal), .message(changed), .message(pastTheCount), .message(otherLeaf)], on: LinkHandle(1), at: at(2))
        #expect(stored(actions).isEmpty)
        #expect(acked(actions).count == 3)  // resending it would not change it
        #expect(warnings(actions).count == 1 && warnings(actions).first?.contains("is not sealed by its author") == true)
        // A forged SEAL after that is told on its own (each kind of frame once per connection), and once.
        let (forged, _) = sealed(messages(4...5), signer: 2, firstID: 9)
        let (forgedAgain, _) = sealed(messages(6...7), signer: 2, firstID: 10)
        let later = node.received([.seal(forged), .seal(forgedAgain)], on: LinkHandle(1), at: at(3))
        #expect(warnings(later).count == 1 && warnings(later).first?.contains("its signature does not verify") == true)
        // The next connection tells each again.
        _ = node.linkDown(LinkHandle(1), reason: .lost, at: at(4))
        _ = node.linkUp(
            LinkHandle(4), peer: bob, dialedByUs: true, remoteAddress: nil, authenticated: false, version: WireFrame.sealsVersion, at: at(4))
        let fresh = node.received([.seal(forged)], on: LinkHandle(4), at: at(5))
        #expect(warnings(fresh).count == 1)
    }

    /// On a plaintext link a seal is checked where it comes, before its messages are stored.
    @Test func aForgedSealIsToldAndItsMessagesFindNoSeal() {
        var node = engine(authenticated: false)
        let (forged, frames) = sealed(messages(1...2), signer: 2)  // signed with carol's key
        let actions = node.received([.seal(forged)] + frames.map { .message($0) }, on: LinkHandle(1), at: at(2))
        #expect(stored(actions).isEmpty && acked(actions).isEmpty)
        #expect(warnings(actions).count == 1 && warnings(actions).first?.contains("its signature does not verify") == true)
        // A different seal under an id held: told as a reuse (on another engine, whose connection has not told one yet).
        var node2 = engine()
        let (first, _) = sealed(messages(1...2))
        let (other, _) = sealed(messages(3...4))  // the same first id
        let reused = node2.received([.seal(first), .seal(other)], on: LinkHandle(1), at: at(2))
        #expect(warnings(reused).count == 1 && warnings(reused).first?.contains("reuses the id") == true)
    }

    func checks(_ actions: [SessionAction]) -> [SealCheck] {
        actions.compactMap { if case .checkSeal(let check) = $0 { check } else { nil } }
    }

    /// Over a pinned TLS link a SEAL's signature is checked off the event loop (`.checkSeal`): its messages
    /// are stored unchecked and acknowledged at once, and the answer marks the seal checked (once).
    @Test func aSealOverTLSIsCheckedOffTheLoopItsMessagesStoredMeanwhile() throws {
        var node = engine()
        let (seal, frames) = sealed(messages(1...3))
        let actions = node.received([.seal(seal)] + frames.map { .message($0) }, on: LinkHandle(1), at: at(2))
        let asked = checks(actions)
        #expect(asked == [SealCheck(author: bob.id, room: lab, head: seal.head(author: bob.id.rawValue))])
        #expect(stored(actions).map(\.body) == ["m1", "m2", "m3"])
        #expect(stored(actions).allSatisfy { $0.seal?.checked == false })
        #expect(acked(actions) == frames.map(\.id) && warnings(actions).isEmpty)
        // The same SEAL again (before a retransmission) asks nothing more.
        #expect(checks(node.received([.seal(seal)], on: LinkHandle(1), at: at(3))).isEmpty)
        #expect(node.sealChecked(asked[0], valid: true, at: at(4)) == [.persist(.sealChecked(author: bob.id, seal: StoredSeal(asked[0].head)))])
        #expect(node.sealChecked(asked[0], valid: true, at: at(5)).isEmpty)  // (answered already)
        // Its messages from now on (one sent again) are stored checked.
        #expect(stored(node.received([.message(frames[2])], on: LinkHandle(1), at: at(6))).first?.seal?.checked == true)
    }

    /// A seal over TLS whose check fails: its messages (stored, acknowledged) go, the person is told once,
    /// and that author's later seals are checked before their messages are stored.
    @Test func aForgedSealOverTLSIsDroppedWithItsMessagesAndItsAuthorCheckedFirst() throws {
        var node = engine()
        let (forged, frames) = sealed(messages(1...2), signer: 2)  // signed with carol's key
        let actions = node.received([.seal(forged)] + frames.map { .message($0) }, on: LinkHandle(1), at: at(2))
        #expect(stored(actions).count == 2 && acked(actions).count == 2 && warnings(actions).isEmpty)
        let check = try #require(checks(actions).first)
        let answer = node.sealChecked(check, valid: false, at: at(3))
        #expect(answer.contains(.persist(.dropSealed(author: bob.id, seal: StoredSeal(check.head)))))
        #expect(warnings(answer).count == 1 && warnings(answer).first?.contains("does not verify: its messages were removed") == true)
        // Its messages find no seal now.
        let (_, again) = sealed(messages(1...2), signer: 2)
        #expect(stored(node.received([.message(again[0])], on: LinkHandle(1), at: at(4))).isEmpty)
        // Bob's next seals are checked where they come: a good one is kept checked, a forged one refused.
        let (good, goodFrames) = sealed(messages(3...4), firstID: 7)
        let next = node.received([.seal(good)] + goodFrames.map { .message($0) }, on: LinkHandle(1), at: at(5))
        #expect(checks(next).isEmpty && stored(next).count == 2 && stored(next).allSatisfy { $0.seal?.checked == true })
        let (forgedAgain, forgedFrames) = sealed(messages(5...6), signer: 2, firstID: 8)
        let refused = node.received([.seal(forgedAgain)] + forgedFrames.map { .message($0) }, on: LinkHandle(1), at: at(6))
        #expect(checks(refused).isEmpty && stored(refused).isEmpty && acked(refused).isEmpty)
        #expect(warnings(refused).first?.contains("its signature does not verify") == true)
    }

    /// A file's announcement under a seal not checked yet has its seal checked where it comes (its file is
    /// fetched, then served to others, at once): stored checked, or (forged) refused and the seal dropped.
    @Test func aFileAnnouncementHasItsSealCheckedFirst() throws {
        for forged in [false, true] {
            var node = engine()
            var announced = messages(1...2)
            announced[1].kind = .file
            let (seal, frames) = sealed(announced, signer: forged ? 2 : nil)
            let actions = node.received([.seal(seal)] + frames.map { .message($0) }, on: LinkHandle(1), at: at(2))
            let check = try #require(checks(actions).first)
            if forged {
                #expect(stored(actions).map(\.body) == ["m1"])
                #expect(actions.contains(.persist(.dropSealed(author: bob.id, seal: StoredSeal(check.head)))) && warnings(actions).count == 1)
            } else {
                #expect(stored(actions).map { $0.seal?.checked } == [false, true])
                // Marked checked after the first message was stored unchecked.
                let marked = try #require(actions.firstIndex(of: .persist(.sealChecked(author: bob.id, seal: StoredSeal(check.head)))))
                #expect(marked > actions.firstIndex { if case .persist(.insertMessage) = $0 { true } else { false } }!)
            }
            // The answer from off the loop, when it comes, changes nothing.
            #expect(node.sealChecked(check, valid: !forged, at: at(3)).isEmpty)
        }
    }

    /// A check's answer stands for its seal only (its whole head), not for another under the same id: a
    /// member that sends a good SEAL, pushes it out of the connection's book with four more, then sends a
    /// bad one under the same id has the bad one checked where it comes (refused), and the first's answer
    /// marks only the first in the store. An answer for a seal held by a replaced connection still heard
    /// reaches its book too.
    @Test func aChecksAnswerStandsForItsSealOnly() throws {
        var node = engine()
        let (good, goodFrames) = sealed(messages(1...2), firstID: 1)
        let first = node.received([.seal(good), .message(goodFrames[0])], on: LinkHandle(1), at: at(2))
        let check = try #require(checks(first).first)
        let pushers = (2...5).map { sealed(messages((10 + $0)...(10 + $0)), firstID: UInt8($0)).seal }
        _ = node.received(pushers.map { .seal($0) }, on: LinkHandle(1), at: at(3))
        // The same id, other leaves, signed with carol's key: refused where it comes.
        let (bad, badFrames) = sealed(messages(20...21), signer: 2, firstID: 1)
        #expect(bad.id == good.id)
        let refused = node.received([.seal(bad)] + badFrames.map { .message($0) }, on: LinkHandle(1), at: at(4))
        #expect(checks(refused).isEmpty && stored(refused).isEmpty)
        #expect(warnings(refused).first?.contains("its signature does not verify") == true)
        // The first's answer marks the first, by its whole head.
        #expect(node.sealChecked(check, valid: true, at: at(5)) == [.persist(.sealChecked(author: bob.id, seal: StoredSeal(good.head(author: bob.id.rawValue))))])
        // A replaced connection still heard holds its seal checked after the answer (no new check asked).
        var replaced = engine()
        let (seal, frames) = sealed(messages(1...2), firstID: 1)
        let asked = try #require(checks(replaced.received([.seal(seal), .message(frames[0])], on: LinkHandle(1), at: at(2))).first)
        let (serving, _) = replaced.linkUp(LinkHandle(4), peer: bob, dialedByUs: true, remoteAddress: nil, version: WireFrame.sealsVersion, at: at(3))
        #expect(serving == LinkHandle(4))  // (link 1 replaced, still heard)
        _ = replaced.sealChecked(asked, valid: true, at: at(4))
        let late = replaced.received([.message(frames[1])], on: LinkHandle(1), at: at(5))
        #expect(checks(late).isEmpty && stored(late).first?.seal?.checked == true)
    }

    /// At most `SealWaits.capacity` checks wait off the loop: past it a seal is checked where it comes. A
    /// restart asks again the checks that a store holds unchecked.
    @Test func sealChecksWaitingAreBoundedAndAskedAgainAfterARestart() throws {
        var node = engine()
        var asked: [SealCheck] = []
        for n in 0..<(SealWaits.capacity + 1) {
            let (seal, frames) = sealed(messages((1 + n)...(1 + n)), firstID: UInt8(n + 1))
            let actions = node.received([.seal(seal), .message(frames[0])], on: LinkHandle(1), at: at(2))
            asked += checks(actions)
            #expect(stored(actions).first?.seal?.checked == (n == SealWaits.capacity))
        }
        #expect(asked.count == SealWaits.capacity)
        _ = node.sealChecked(asked[0], valid: true, at: at(3))
        let (seal, frames) = sealed(messages(99...99), firstID: 200)
        #expect(checks(node.received([.seal(seal), .message(frames[0])], on: LinkHandle(1), at: at(4))).count == 1)
        // A restart: what the store holds unchecked is asked again at `start`.
        var configuration = SessionStateMachine.Configuration(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .never)
        configuration.envelopes = SimulatedSignatures.keys(for: 0, ids: ids)
        var restored = SessionStateMachine.Restored(knownPeers: KnownPeerBook())
        restored.uncheckedSeals = Array(asked[1...2])
        var restarted = SessionStateMachine(
            configuration: configuration, restored: restored, addressBook: PeerDirectory(), ids: IDGenerator(seed: 9), shortCode: { _ in "1234-5678" })
        #expect(checks(restarted.start(at: at(0))) == Array(asked[1...2]))
        #expect(restarted.sealChecked(asked[1], valid: true, at: at(1)) == [.persist(.sealChecked(author: bob.id, seal: StoredSeal(asked[1].head)))])
    }

    @Test func aConnectionHoldsItsLastFourSeals() {
        var node = engine()
        let batches = (0..<5).map { sealed(messages((1 + $0 * 2)...(2 + $0 * 2)), firstID: UInt8(1 + $0)) }
        _ = node.received(batches.map { .seal($0.seal) }, on: LinkHandle(1), at: at(2))
        #expect(node.consistencyFaults().isEmpty)
        // The first was pushed out; the others' messages are kept.
        #expect(stored(node.received(batches[0].frames.map { .message($0) }, on: LinkHandle(1), at: at(3))).isEmpty)
        for batch in batches.dropFirst() {
            #expect(stored(node.received(batch.frames.map { .message($0) }, on: LinkHandle(1), at: at(3))).count == 2)
        }
    }

    @Test func sealsFromStrangersOrBelowVersion4AreIgnored() {
        var node = engine()
        let (seal, frames) = sealed(messages(1...2, by: 3), by: 3)
        let actions = node.received([.seal(seal)] + frames.map { .message($0) }, on: LinkHandle(3), at: at(2))
        #expect(stored(actions).isEmpty && acked(actions).isEmpty && warnings(actions).isEmpty)
        // At version 3 a SEAL means nothing (the connection refuses it first); a sealed message there
        // carries no signature and is refused as unsigned.
        var old = engine(version: 3)
        let (bobs, bobFrames) = sealed(messages(1...1))
        let refused = old.received([.seal(bobs), .message(bobFrames[0])], on: LinkHandle(1), at: at(2))
        #expect(stored(refused).isEmpty && acked(refused).count == 1)
        #expect(warnings(refused).first?.contains("is not signed") == true)
    }

    @Test func aSealOnAReplacedConnectionStillServesItsMessages() {
        var node = engine()
        let (seal, frames) = sealed(messages(1...2))
        _ = node.received([.seal(seal)], on: LinkHandle(1), at: at(2))
        // We dial bob again: the newer connection of the same dialer replaces the old one, still heard.
        let (serving, _) = node.linkUp(LinkHandle(4), peer: bob, dialedByUs: true, remoteAddress: nil, version: WireFrame.sealsVersion, at: at(3))
        #expect(serving == LinkHandle(4))
        #expect(stored(node.received(frames.map { .message($0) }, on: LinkHandle(1), at: at(4))).count == 2)
    }

    // MARK: Sending (step 4)

    @Test func toARoomOfVersion4PeersASendIsOneSealAndItsMessagesWithoutSignatures() throws {
        var node = engine()
        let (plan, actions) = try node.send(["one", "two", "three"], room: lab, at: at(2))
        for handle in [LinkHandle(1), LinkHandle(2)] { #expect(shape(frames(actions, to: handle)) == "s3 m m m") }
        // Stored sealed, not signed (every recipient spoke version 4).
        let mine = stored(actions)
        #expect(mine.count == 3 && mine.allSatisfy { $0.isSealed && !$0.isSigned && $0.seal != nil })
        #expect(plan.messages == mine)
        // What bob makes of them: all stored, with their seal, and acknowledged.
        var bobs = bobsEngine()
        let received = bobs.received(frames(actions, to: LinkHandle(1)), on: LinkHandle(1), at: at(3))
        #expect(stored(received).map(\.body) == ["one", "two", "three"])
        #expect(stored(received).allSatisfy { $0.isSealed && $0.senderID == me.id.rawValue })
        #expect(acked(received).count == 3 && warnings(received).isEmpty)
    }

    @Test func aMixedRoomGetsSignedFramesEvenAtVersion4() throws {
        // Bob (version 4) could not hand on to carol (version 3) what he held only sealed: both get the
        // messages signed, and they are stored signed, not sealed.
        var node = engine(carolVersion: 3)
        let (_, actions) = try node.send(["one", "two"], room: lab, at: at(2))
        #expect(shape(frames(actions, to: LinkHandle(1))) == "g g")
        #expect(shape(frames(actions, to: LinkHandle(2))) == "g g")
        #expect(stored(actions).allSatisfy { !$0.isSealed && $0.isSigned })
        // Direct to bob alone (every recipient at version 4): sealed.
        #expect(shape(frames(try node.send(["just bob"], room: lab, to: [bob.id], at: at(3)).1, to: LinkHandle(1))) == "s1 m")
        // A version 1 member gets them plain.
        var old = engine(carolVersion: 1)
        #expect(shape(frames(try old.send(["one"], room: lab, at: at(2)).1, to: LinkHandle(2))) == "p")
    }

    @Test func sealsHoldAtMost256AndDirectMessagesAreSealedApartFromTheRooms() throws {
        var node = engine()
        let (_, many) = try node.send((1...300).map { "m\($0)" }, room: lab, at: at(2))
        let sent = frames(many, to: LinkHandle(1))
        #expect(shape(sent) == (["s256"] + Array(repeating: "m", count: 256) + ["s44"] + Array(repeating: "m", count: 44)).joined(separator: " "))
        var bobs = bobsEngine()
        #expect(stored(bobs.received(sent, on: LinkHandle(1), at: at(3))).count == 300)
        // A direct send's messages share a seal (it goes only to their recipients), apart from the room's.
        let (_, direct) = try node.send(["a", "b"], room: lab, to: [bob.id], at: at(4))
        let directFrames = frames(direct, to: LinkHandle(1))
        #expect(shape(directFrames) == "s2 m m")
        #expect(frames(direct, to: LinkHandle(2)).isEmpty)
        let kept = stored(bobs.received(directFrames, on: LinkHandle(1), at: at(5)))
        #expect(kept.map(\.body) == ["a", "b"] && kept.allSatisfy { $0.isSealed && $0.direct })
        // Given room and direct messages at once, each run of either is a seal of its own.
        var given = messages(1...5)
        given[2].direct = true
        given[3].direct = true
        let mixed = SealedBatch.seal(given, author: ids[1], room: lab, keys: SimulatedSignatures.keys(for: 1, ids: ids), newID: sealIDs(from: 20))
        #expect(mixed.map(\.batch.leaves.count) == [2, 2, 1])
    }

    @Test func aMemberNotSeenInThisRunGetsSignedMessagesAndTheOutboxIsSealedAgainOnEachFlush() throws {
        // Carol is a member we have not been connected with: signed, not sealed (to bob too).
        var node = engine(as: 0, members: [bob, carol])
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: WireFrame.sealsVersion, at: at(1))
        let (_, actions) = try node.send(["one", "two"], room: lab, at: at(2))
        let mine = stored(actions)
        #expect(mine.allSatisfy { !$0.isSealed && $0.isSigned })
        #expect(shape(frames(actions, to: LinkHandle(1))) == "g g")
        // Carol connects at version 4 (now every member has): her outbox is sealed, its SEAL ahead of the messages.
        let (_, up) = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: true, remoteAddress: nil, version: WireFrame.sealsVersion, at: at(3))
        let flush = try #require(up.first { if case .flushOutbox(carol.id, _, _) = $0 { true } else { false } })
        let first = node.storeRead(.messages(mine), for: flush, arrivals: RecentArrivals(), at: at(4))
        let again = node.storeRead(.messages(mine), for: flush, arrivals: RecentArrivals(), at: at(5))
        #expect(shape(frames(first, to: LinkHandle(2))) == "s2 m m")
        #expect(shape(frames(again, to: LinkHandle(2))) == "s2 m m")
        // A new seal each time (a new id): either verifies on its own.
        guard case .seal(let one)? = frames(first, to: LinkHandle(2)).first, case .seal(let two)? = frames(again, to: LinkHandle(2)).first else {
            Issue.record("no SEAL first")
            return
        }
        #expect(one.id != two.id && one.root == two.root)
        var carols = engine(as: 2, members: [me, bob])
        _ = carols.linkUp(LinkHandle(1), peer: me, dialedByUs: true, remoteAddress: nil, version: WireFrame.sealsVersion, at: at(1))
        #expect(stored(carols.received(frames(again, to: LinkHandle(2)), on: LinkHandle(1), at: at(6))).count == 2)
        // Now every member spoke version 4 in this run: the next send is sealed only.
        #expect(stored(try node.send(["three"], room: lab, at: at(7)).1).allSatisfy { $0.isSealed && !$0.isSigned })
    }

    @Test func aPeerBackAtVersion3GetsItsOutboxSignedAndASealedHistoryIsNotOfferedOnIt() throws {
        var node = engine()
        let (_, actions) = try node.send(["one", "two"], room: lab, at: at(2))
        #expect(stored(actions).allSatisfy { $0.isSealed && !$0.isSigned })
        // Carol comes back at version 3: her outbox goes signed (ours, signed now), and so does what follows.
        _ = node.linkDown(LinkHandle(2), reason: .timedOut, at: at(3))
        let (_, up) = node.linkUp(LinkHandle(5), peer: carol, dialedByUs: true, remoteAddress: nil, version: 3, at: at(4))
        let flush = try #require(up.first { if case .flushOutbox(carol.id, _, _) = $0 { true } else { false } })
        let resent = frames(node.storeRead(.messages(stored(actions)), for: flush, arrivals: RecentArrivals(), at: at(5)), to: LinkHandle(5))
        #expect(shape(resent) == "g g")
        #expect(shape(frames(try node.send(["three"], room: lab, at: at(6)).1, to: LinkHandle(1))) == "g")
        // A sealed history made for her earlier connection is not offered on this one.
        let file = OfferedFile(path: "/h", name: "history of lab", size: 10, modifiedMilliseconds: 1, identity: "h")
        #expect(throws: SessionError.self) {
            try node.offerResource(file, to: carol.id, kind: .sealedHistory, room: lab, ephemeral: true, at: at(7))
        }
    }
}
