import Foundation
import LanchatCore
import LanchatWire
import NIOCore
import Testing

/// A seal of `count` made-up leaves (the signature is not checked here: LanchatSecurityTests does).
private func seal(leaves count: Int) -> Seal {
    Seal(
        id: vectorSealID, room: lab, signature: Signature(key: [0x02] + Array(repeating: 7, count: 32), bytes: Array(repeating: 9, count: 64)),
        leafHashes: (0..<count).map { MerkleTree.leafHash([UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)]) })
}

/// A SEAL frame's payload written field by field, whatever the count says (a hostile peer's).
private func payload(count: UInt16, hashes: Int) -> ByteBuffer {
    var buffer = ByteBuffer()
    buffer.writeBytes(vectorSealID.bytes)
    buffer.writeInteger(UInt8(3))
    buffer.writeString("lab")
    buffer.writeBytes(Array(repeating: 2, count: 33))
    buffer.writeBytes(Array(repeating: 9, count: 64))
    buffer.writeInteger(count)
    for index in 0..<hashes { buffer.writeBytes(Array(repeating: UInt8(truncatingIfNeeded: index), count: 32)) }
    return buffer
}

private func decode(_ payload: ByteBuffer, type: UInt8 = Seal.frameType) -> Result<Seal, WireError> {
    do throws(WireError) {
        return .success(try Seal.decode(RawFrame(type: type, payload: payload)))
    } catch {
        return .failure(error)
    }
}

/// Seals (wire version 4, draft): the vectors of scripts/wire-vectors.py, the SEAL frame and the proof form,
/// and what a hostile peer could send instead.
@Suite struct SealVectorTests {
    @Test func theLeafHashesAreThoseOfTheMessagesSigningBytes() {
        #expect(vectorSealedMessages.map { hex(Seal.leafHash(of: $0, author: vectorAuthor)) } == vectorSealLeafHashes)
        // The first is the version 2 vector's message: its signing bytes are the ones signed today.
        #expect(hex(Seal.leafHash(signingBytes: bytes(fromHex: vectorSigningBytes))) == vectorSealLeafHashes[0])
        // The audience is in the leaf: the same message sent direct is another leaf.
        var direct = vectorSealedMessages[0]
        direct.direct = true
        #expect(hex(Seal.leafHash(of: direct, author: vectorAuthor)) != vectorSealLeafHashes[0])
    }

    @Test func theRootPathProofAndSigningBytesAreTheScripts() throws {
        let leaves = vectorSealLeafHashes.map { bytes(fromHex: $0) }
        #expect(hex(MerkleTree.root(leaves)) == vectorSealRoot)
        #expect(hex(MerkleTree.auditPath(index: 1, leafHashes: leaves).flatMap { $0 }) == vectorSealAuditPath1)
        let sealed = Seal(id: vectorSealID, room: lab, signature: Signature(key: vectorSignature.key, bytes: bytes(fromHex: vectorSealSignature)), leafHashes: leaves)
        #expect(hex(sealed.root) == vectorSealRoot)
        #expect(hex(sealed.signingBytes(author: vectorAuthor)) == vectorSealSigningBytes)
        #expect(
            hex(Envelope.sealBytes(author: vectorAuthor, id: vectorSealID, room: lab, leafCount: 3, root: bytes(fromHex: vectorSealRoot)))
                == vectorSealSigningBytes)
        let proof = sealed.proof(forLeaf: 1)
        #expect(hex(try proof.bytes()) == vectorSealProof1)
        #expect(try SealProof.decode(bytes(fromHex: vectorSealProof1)) == proof)
        #expect(proof.verifies(leafHash: leaves[1], in: sealed))
        #expect(proof.verifies(leafHash: leaves[1], leafCount: 3, root: bytes(fromHex: vectorSealRoot)))
        #expect(!proof.verifies(leafHash: leaves[0], in: sealed))
    }

    @Test func theFrameIsTheScripts() throws {
        let leaves = vectorSealLeafHashes.map { bytes(fromHex: $0) }
        let sealed = Seal(id: vectorSealID, room: lab, signature: Signature(key: vectorSignature.key, bytes: bytes(fromHex: vectorSealSignature)), leafHashes: leaves)
        #expect(hex(try sealed.wireBytes()) == vectorSealFrame)
        // Through the frame decoder, as a connection reads it.
        var decoder = FrameDecoder(limits: .standard)
        var buffer = ByteBuffer(bytes: bytes(fromHex: vectorSealFrame))
        let raw = try #require(try decoder.decode(buffer: &buffer))
        #expect(raw.type == 0x12 && raw.flags == 0 && buffer.readableBytes == 0)
        #expect(try Seal.decode(raw) == sealed)
        // As a frame: a SEAL, which only a version 4 connection takes (`minimumVersion`).
        #expect(try WireFrame.decode(raw) == .seal(sealed))
        #expect(WireFrame.seal(sealed).minimumVersion == WireFrame.sealsVersion && WireFrame.versions.contains(WireFrame.sealsVersion))
    }

    @Test func theSpecificationListsTheSealVectors() throws {
        let spec = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../docs/wire-protocol.md")
        let text = try String(contentsOf: spec, encoding: .utf8)
        let values =
            vectorSealLeafHashes + [
                vectorSealRoot, vectorSealAuditPath1, vectorSealProof1, vectorSealSigningBytes, vectorSealSignature, vectorSealFrame,
                vectorSealedMessageFrame, vectorSealHead, vectorSealedRecord1, vectorSealedHistory,
            ]
        for value in values {
            let listed = text.contains(value)
            #expect(listed, "docs/wire-protocol.md lacks the seal vector \(value.prefix(16))...")
        }
        let documented = text.contains("| `0x12` | SEAL")
        #expect(documented, "docs/wire-protocol.md lacks SEAL in its table of frames")
    }
}

@Suite struct SealCodecTests {
    @Test(arguments: [1, 2, 3, 17, 255, 256])
    func roundTrips(count: Int) throws {
        let original = seal(leaves: count)
        let raw = try original.encode()
        #expect(raw.type == Seal.frameType)
        #expect(raw.payload.readableBytes == 16 + 4 + 33 + 64 + 2 + 32 * count)
        #expect(try Seal.decode(raw) == original)
        #expect(original.isWellFormed)
    }

    @Test func theLargestFrameIsTheDocumentedMaximum() throws {
        var largest = seal(leaves: 256)
        largest.room = RoomID(String(repeating: "r", count: 32))!
        #expect(try largest.encode().payload.readableBytes == Seal.maximumPayload)
        #expect(Seal.maximumPayload == 8340)
    }

    @Test func everyTruncationIsAClearError() throws {
        let full = Array(try seal(leaves: 3).encode().payload.readableBytesView)
        for length in 0..<full.count {
            let result = decode(ByteBuffer(bytes: full[0..<length]))
            guard case .failure(.truncated(let field)) = result else {
                Issue.record("a payload of \(length) of \(full.count) bytes gave \(result)")
                continue
            }
            let expected =
                switch length {
                case 0..<16: "seal_id"
                case 16..<20: "room"
                case 20..<53: "author_key"
                case 53..<117: "signature"
                case 117..<119: "leaf_count"
                default: "leaf_hash"
                }
            #expect(field == expected, "cut after \(length) bytes")
        }
        // And on the wire: a connection that ends inside the frame.
        let wire = try seal(leaves: 3).wireBytes()
        for length in 1..<wire.count {
            var decoder = FrameDecoder(limits: .standard)
            var buffer = ByteBuffer(bytes: wire[0..<length])
            #expect(throws: WireError.truncatedFrame(bufferedBytes: length)) { try decoder.decodeLast(buffer: &buffer, seenEOF: true) }
        }
    }

    @Test func countsOutsideOneTo256AreRefusedBeforeAnyHashIsRead() throws {
        #expect(decode(payload(count: 0, hashes: 0)) == .failure(.invalidValue(field: "leaf_count")))
        #expect(decode(payload(count: 0, hashes: 1)) == .failure(.invalidValue(field: "leaf_count")))
        #expect(decode(payload(count: 257, hashes: 257)) == .failure(.fieldTooLong(field: "leaf_hashes", length: 257, limit: 256)))
        #expect(decode(payload(count: 0xFFFF, hashes: 0)) == .failure(.fieldTooLong(field: "leaf_hashes", length: 65535, limit: 256)))
        #expect(try decode(payload(count: 256, hashes: 256)).get().leafHashes.count == 256)
        #expect(try decode(payload(count: 1, hashes: 1)).get().leafHashes.count == 1)
    }

    @Test func aCountThatLiesIsRefused() {
        // Fewer hashes than announced: truncated; more: trailing bytes.
        #expect(decode(payload(count: 3, hashes: 2)) == .failure(.truncated(field: "leaf_hash")))
        #expect(decode(payload(count: 2, hashes: 3)) == .failure(.trailingBytes(frame: "seal", count: 32)))
        var partial = payload(count: 2, hashes: 2)
        partial.writeBytes([1, 2, 3])
        #expect(decode(partial) == .failure(.trailingBytes(frame: "seal", count: 3)))
    }

    @Test func aBadRoomOrAnotherTypeIsRefused() {
        var badRoom = ByteBuffer()
        badRoom.writeBytes(vectorSealID.bytes)
        badRoom.writeInteger(UInt8(4))
        badRoom.writeString("../x")
        #expect(decode(badRoom) == .failure(.invalidValue(field: "room")))
        #expect(decode(payload(count: 1, hashes: 1), type: WireFrame.FrameType.message.rawValue) == .failure(.invalidValue(field: "type")))
    }

    @Test func theEncoderRefusesWhatTheDecoderWould() {
        #expect(throws: WireError.invalidValue(field: "leaf_count")) { try seal(leaves: 0).encode() }
        #expect(throws: WireError.fieldTooLong(field: "leaf_hashes", length: 257, limit: 256)) { try seal(leaves: 257).encode() }
        var short = seal(leaves: 2)
        short.leafHashes[1].removeLast()
        #expect(throws: WireError.invalidValue(field: "leaf_hash")) { try short.encode() }
        #expect(!short.isWellFormed)
        var badKey = seal(leaves: 2)
        badKey.signature.key.removeLast()
        #expect(throws: WireError.invalidValue(field: "author_key")) { try badKey.encode() }
        var badSignature = seal(leaves: 2)
        badSignature.signature.bytes.append(0)
        #expect(throws: WireError.invalidValue(field: "signature")) { try badSignature.encode() }
        #expect(!seal(leaves: 0).isWellFormed && !seal(leaves: 257).isWellFormed)
    }

    @Test func randomPayloadsNeverCrash() {
        for bytes in mutations(of: Array(try! seal(leaves: 5).encode().payload.readableBytesView), noise: 400) {
            if case .success(let decoded) = decode(ByteBuffer(bytes: bytes)) {
                #expect(Array((try? decoded.encode().payload.readableBytesView) ?? []) == bytes)
            }
        }
    }
}

@Suite struct SealProofTests {
    @Test(arguments: [1, 2, 3, 5, 8, 100, 255, 256])
    func everyLeafsProofRoundTripsAndVerifies(count: Int) throws {
        let sealed = seal(leaves: count)
        for index in 0..<count {
            let proof = sealed.proof(forLeaf: index)
            let bytes = try proof.bytes()
            #expect(bytes.count == 16 + 2 + 1 + 32 * proof.path.count && bytes.count <= SealProof.maximumLength)
            #expect(try SealProof.decode(bytes) == proof)
            #expect(proof.verifies(leafHash: sealed.leafHashes[index], in: sealed))
            #expect(!proof.verifies(leafHash: MerkleTree.leafHash([0xFF, 0xFF, 0xFF]), in: sealed))
        }
    }

    @Test func aProofForAnotherSealDoesNotVerify() {
        let sealed = seal(leaves: 4)
        var proof = sealed.proof(forLeaf: 2)
        proof.seal = descending
        #expect(!proof.verifies(leafHash: sealed.leafHashes[2], in: sealed))
    }

    @Test func proofsReadFromAStreamOneAtATime() throws {
        let sealed = seal(leaves: 6)
        var buffer = ByteBuffer()
        for index in 0..<6 { try sealed.proof(forLeaf: index).encode(into: &buffer) }
        for index in 0..<6 { #expect(try SealProof.decode(from: &buffer) == sealed.proof(forLeaf: index)) }
        #expect(buffer.readableBytes == 0)
    }

    @Test func hostileProofsAreClearErrors() throws {
        func proof(index: UInt16, pathCount: UInt8, hashes: Int) -> [UInt8] {
            vectorSealID.bytes + [UInt8(index >> 8), UInt8(index & 0xFF), pathCount] + Array(repeating: 5, count: 32 * hashes)
        }
        #expect(throws: WireError.fieldTooLong(field: "audit_path", length: 9, limit: 8)) { try SealProof.decode(proof(index: 0, pathCount: 9, hashes: 9)) }
        #expect(throws: WireError.fieldTooLong(field: "audit_path", length: 255, limit: 8)) { try SealProof.decode(proof(index: 0, pathCount: 255, hashes: 0)) }
        #expect(throws: WireError.invalidValue(field: "leaf_index")) { try SealProof.decode(proof(index: 256, pathCount: 0, hashes: 0)) }
        #expect(try SealProof.decode(proof(index: 255, pathCount: 8, hashes: 8)).path.count == 8)
        #expect(throws: WireError.trailingBytes(frame: "seal proof", count: 32)) { try SealProof.decode(proof(index: 0, pathCount: 1, hashes: 2)) }
        // Every truncation, and a failed read leaves the buffer as it was.
        let full = proof(index: 3, pathCount: 2, hashes: 2)
        for length in 0..<full.count {
            var buffer = ByteBuffer(bytes: full[0..<length])
            #expect(throws: WireError.self) { try SealProof.decode(from: &buffer) }
            #expect(buffer.readableBytes == length)
        }
        // The encoder refuses the same.
        #expect(throws: WireError.self) { try SealProof(seal: vectorSealID, leafIndex: 0, path: Array(repeating: Array(repeating: 0, count: 32), count: 9)).bytes() }
        #expect(throws: WireError.self) { try SealProof(seal: vectorSealID, leafIndex: 256, path: []).bytes() }
        #expect(throws: WireError.self) { try SealProof(seal: vectorSealID, leafIndex: 0, path: [[1, 2]]).bytes() }
    }
}

/// `rounds` inputs made from `valid`, in turn: a few of its bytes changed, a prefix of it, or random bytes
/// of any length up to `noise` (what a hostile peer might send instead of it).
func mutations(of valid: [UInt8], rounds: Int = 2000, noise: Int) -> [[UInt8]] {
    var generator = SystemRandomNumberGenerator()
    return (0..<rounds).map { round in
        var bytes = valid
        switch round % 3 {
        case 0:
            for _ in 0..<3 { bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator) }
        case 1: bytes = Array(bytes[0..<Int.random(in: 0...bytes.count, using: &generator)])
        default: bytes = (0..<Int.random(in: 0...noise, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }
        return bytes
    }
}
