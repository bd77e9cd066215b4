import LanchatCore
import LanchatWire
import Testing

@testable import LanchatEngine

private let ids = [PeerID(String(repeating: "a", count: 52))!, PeerID(String(repeating: "b", count: 52))!]
private let alice = ids[0]
private let lab = RoomID("lab")!
private let aliceKeys = SimulatedSignatures.keys(for: 0, ids: ids)
private let bobKeys = SimulatedSignatures.keys(for: 1, ids: ids)

/// Alice's message `n` in `lab` (direct if said).
private func message(_ n: Int, direct: Bool = false) -> StoredMessage {
    var message = StoredMessage(
        id: WireID(bytes: (0..<16).map { UInt8(truncatingIfNeeded: n >> ($0 % 4 * 8)) ^ UInt8($0 * 17) })!.description, room: "lab",
        senderID: alice.rawValue, senderName: "alice", sequence: Int64(n), timestamp: 1_795_000_000_000 + Int64(n), kind: .text, body: "m\(n)")
    message.direct = direct
    return message
}

/// Seal ids 1, 2, 3, ... (deterministic).
private func counter() -> () -> WireID {
    var next: UInt8 = 0
    return {
        next &+= 1
        return WireID(bytes: [next] + Array(repeating: 0xAA, count: 15))!
    }
}

/// The MESSAGE alice sends for `stored` under `leaf`.
private func frame(_ stored: StoredMessage, _ leaf: SealedLeaf?) -> WireFrame.Message {
    guard case .message(var message)? = SessionStateMachine.frame(stored, reliable: true) else { preconditionFailure("no frame") }
    message.sealed = leaf
    return message
}

/// Seals (version 4, draft): what an author seals, what a receiver holds and checks, and what a reader of
/// histories checks once per seal.
@Suite struct SealsTests {
    /// Our own messages as stored sealed: each with its seal's head and every leaf's hash, and its leaf
    /// index, from which its proof is made again and shows it is a leaf alice signed; a head read back
    /// from the store is the head; a damaged row gives no head. (Sealed as the live path seals, without
    /// audit paths.)
    @Test func ourSealedMessagesAreStoredWithWhatVerifiesThemAlone() throws {
        let messages = (1...5).map { message($0) }
        let (batch, piece) = try #require(
            SealedBatch.seal(messages, author: alice, room: lab, keys: aliceKeys, withPaths: false, newID: counter()).first)
        #expect(batch.paths.isEmpty && batch.root == MerkleTree.root(batch.seal.leafHashes))
        let stored = batch.stored(piece, author: alice)
        #expect(stored.count == 5)
        var checks = SealChecks()
        for (offset, record) in stored.enumerated() {
            #expect(record.isSealed && record.isAuthenticated && !record.isSigned)
            #expect(record.leafIndex == offset && record.sealProof.count == 2 && record.seal?.hasLeaves == true)
            let head = try #require(record.seal?.head(author: alice.rawValue))
            #expect(head == batch.seal.head(author: alice.rawValue))
            let proof = try #require(record.proof)
            #expect(proof.leafIndex == UInt16(offset) && proof.seal == batch.seal.id)
            let history = try #require(HistoryRecord(record, proof: proof))
            #expect(checks.verifies(history, seal: head, room: lab, keys: bobKeys) == true)
        }
        var damaged = try #require(stored.first?.seal)
        damaged.leafCount = 0
        #expect(damaged.head(author: alice.rawValue) == nil)
        var notAProof = stored[0]
        notAProof.sealProof = [1, 2, 3]
        #expect(notAProof.proof == nil)
    }

    @Test func aFlushIsSealedInPiecesOfAtMost256OfOneAudience() {
        var notice = message(304)
        notice.kind = .system
        let messages = (1...300).map { message($0) } + [message(301, direct: true), message(302, direct: true), message(303)]
        let batches = SealedBatch.seal(messages + [notice], author: alice, room: lab, keys: aliceKeys, newID: counter())
        // Direct messages (the same recipients: one send, or what is resent to one peer) in a seal apart
        // from the room's; a notice is not sent.
        #expect(batches.map(\.batch.seal.leafHashes.count) == [256, 44, 2, 1])
        #expect(batches.map { $0.messages.count } == [256, 44, 2, 1])
        #expect(batches.flatMap { Array($0.messages) } == messages)
        for (batch, piece) in batches {
            // One signature per seal, over its id, room, count and root, by alice's key.
            #expect(aliceKeys.verifies(batch.seal.signature, over: batch.seal.signingBytes(author: alice.rawValue), by: alice))
            #expect(Set(piece.map(\.direct)).count == 1)
            for (offset, stored) in piece.enumerated() {
                let leaf = batch.leaves[offset]
                #expect(leaf.seal == batch.seal.id && Int(leaf.leafIndex) == offset)
                // Each leaf is the message's version 2 signing bytes as the receiver computes them from the frame.
                #expect(Seal.leafHash(of: frame(stored, leaf), author: alice.rawValue) == batch.seal.leafHashes[offset])
                #expect(batch.paths[offset] == MerkleTree.auditPath(index: offset, leafHashes: batch.seal.leafHashes))
            }
        }
        #expect(SealedBatch.seal([], author: alice, room: lab, keys: aliceKeys, newID: counter()).isEmpty)
    }

    @Test func aReceiverChecksEachMessageAgainstTheSealItNames() throws {
        let messages = (1...5).map { message($0) }
        let (batch, _) = try #require(SealedBatch.seal(messages, author: alice, room: lab, keys: aliceKeys, newID: counter()).first)
        var book = SealBook()
        #expect(book.received(batch.seal, from: alice, keys: bobKeys) == .kept)
        for (offset, stored) in messages.enumerated() {
            guard case .sealed(let head, let seal, let leafIndex, checked: true) = book.check(frame(stored, batch.leaves[offset]), author: alice)
            else {
                Issue.record("message \(offset) not taken")
                continue
            }
            // Stored with its leaf index and the seal with every leaf's hash, from which the audit path of a
            // record handed on alone is made again; that record verifies with one signature for the seal.
            #expect(head == batch.seal.head(author: alice.rawValue) && Int(leafIndex) == offset)
            #expect(seal == StoredSeal(head, leaves: batch.seal.leafHashes.flatMap { $0 }))
            #expect(stored.sealed(by: seal, leafIndex: leafIndex).leafIndex == offset)
            let proof = try #require(SealPaths(seal)?.proof(offset))
            #expect(proof.path == batch.paths[offset])
            var checks = SealChecks()
            var record = HistoryRecord(
                id: WireID(hex: stored.id)!, senderID: alice.rawValue, senderName: "alice", sequence: UInt64(stored.sequence),
                timestampMilliseconds: UInt64(stored.timestamp), kind: .text, body: stored.body, proof: proof)
            #expect(checks.verifies(record, seal: head, room: lab, keys: bobKeys) == true)
            record.body += "!"
            #expect(checks.verifies(record, seal: head, room: lab, keys: bobKeys) == false)
        }
        // Another message under a leaf of the seal, a leaf past its count, the same leaf as a direct
        // message, another room: not sealed by alice.
        #expect(book.check(frame(message(9), batch.leaves[0]), author: alice) == .notSealed)
        #expect(book.check(frame(messages[0], SealedLeaf(seal: batch.seal.id, leafIndex: 5)), author: alice) == .notSealed)
        var direct = frame(messages[0], batch.leaves[0])
        direct.direct = true
        #expect(book.check(direct, author: alice) == .notSealed)
        var elsewhere = frame(messages[0], batch.leaves[0])
        elsewhere.room = RoomID("lab2")!
        #expect(book.check(elsewhere, author: alice) == .notSealed)
        // A seal not held; a message that is not sealed.
        #expect(book.check(frame(messages[0], SealedLeaf(seal: WireID(bytes: Array(repeating: 7, count: 16))!, leafIndex: 0)), author: alice) == .unknownSeal)
        #expect(book.check(frame(messages[0], nil), author: alice) == .notSealed)
    }

    @Test func aForgedOrReusedSealIsRefusedAndTheBookStaysSmall() throws {
        let messages = (1...3).map { message($0) }
        let (batch, _) = try #require(SealedBatch.seal(messages, author: alice, room: lab, keys: aliceKeys, newID: counter()).first)
        var book = SealBook()
        // Bob's key cannot pass for alice's; a changed leaf breaks the signature; a count of 0 is not a seal.
        #expect(book.received(batch.seal, from: ids[1], keys: bobKeys) == .forged)
        var changed = batch.seal
        changed.leafHashes[1] = MerkleTree.leafHash([1])
        #expect(book.received(changed, from: alice, keys: bobKeys) == .forged)
        var empty = batch.seal
        empty.leafHashes = []
        #expect(book.received(empty, from: alice, keys: bobKeys) == .forged)
        #expect(book.check(frame(messages[0], batch.leaves[0]), author: alice) == .unknownSeal)
        // Kept once; the same again is taken; other contents under its id are not.
        #expect(book.received(batch.seal, from: alice, keys: bobKeys) == .kept)
        #expect(book.received(batch.seal, from: alice, keys: bobKeys) == .kept)
        let resealed = try #require(SealedBatch.seal([message(7)], author: alice, room: lab, keys: aliceKeys, newID: counter()).first).batch.seal
        #expect(book.received(resealed, from: alice, keys: bobKeys) == .reused)
        // At most `capacity` seals: a flood of seals pushes out the oldest, nothing more.
        let next = counter()
        _ = next()
        for n in 0..<(SealBook.capacity * 3) {
            let flood = try #require(SealedBatch.seal([message(100 + n)], author: alice, room: lab, keys: aliceKeys, newID: next).first).batch.seal
            #expect(book.received(flood, from: alice, keys: bobKeys) == .kept)
            #expect(book.held.count <= SealBook.capacity)
        }
        #expect(book.check(frame(messages[0], batch.leaves[0]), author: alice) == .unknownSeal)
    }

    @Test func aReaderChecksEachSealsSignatureOnce() throws {
        final class Counter: @unchecked Sendable { var value = 0 }  // (one test, one thread)
        let counted = Counter()
        let counting = EnvelopeKeys(
            publicKey: bobKeys.publicKey, sign: { bobKeys.signature(over: $0).bytes },
            verify: { signature, bytes, author in
                counted.value += 1
                return bobKeys.verifies(signature, over: bytes, by: author)
            })
        let messages = (1...10).map { message($0) }
        let (batch, _) = try #require(SealedBatch.seal(messages, author: alice, room: lab, keys: aliceKeys, newID: counter()).first)
        let head = batch.seal.head(author: alice.rawValue)
        var checks = SealChecks()
        for (offset, stored) in messages.enumerated() {
            let record = HistoryRecord(
                id: WireID(hex: stored.id)!, senderID: alice.rawValue, senderName: "alice", sequence: UInt64(stored.sequence),
                timestampMilliseconds: UInt64(stored.timestamp), kind: .text, body: stored.body,
                proof: SealProof(seal: batch.seal.id, leafIndex: UInt16(offset), path: batch.paths[offset]))
            #expect(checks.verifies(record, seal: head, room: lab, keys: counting) == true)
            // Not another author's, not in another room.
            var claimed = record
            claimed.senderID = ids[1].rawValue
            #expect(checks.verifies(claimed, seal: head, room: lab, keys: counting) == false)
        }
        #expect(counted.value == 1)
        #expect(checks.verifies(head, room: RoomID("lab2")!, keys: counting) == false)
        #expect(counted.value == 2)
        // A forged head is checked once too, and refused each time.
        var forged = head
        forged.root = Array(repeating: 1, count: 32)
        #expect(checks.verifies(forged, room: lab, keys: counting) == false)
        #expect(checks.verifies(forged, room: lab, keys: counting) == false)
        #expect(counted.value == 3)
    }
}
