import Crypto
import LanchatCore
import LanchatIdentity
import LanchatSecurity
import LanchatWire
import Testing

private func hexBytes(_ text: String) -> [UInt8] {
    var out: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        out.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return out
}

private let lab = RoomID("lab")!
private let sealID = WireID(bytes: Array(0x20...0x2f))!

private func leafHashes(_ count: Int) -> [[UInt8]] { (0..<count).map { MerkleTree.leafHash(Array("message \($0)".utf8)) } }

/// Seals (wire version 4, draft): a seal made with `EnvelopeSigner.seal` verifies, one altered in any
/// signed part or claimed for another author does not, and scripts/wire-vectors.py's seal (made with its
/// fixed key and verified with openssl) verifies here.
@Suite struct SealSignerTests {
    // scripts/wire-vectors.py: its fixed key and author, the leaf hashes of its three sealed messages, the
    // seal's signing bytes and one signature it made (the same values as LanchatWireTests' TestVectors.swift).
    let scalar = hexBytes("682dc3001b76d8ed3d95d33bee2f9383d37b4ad4923a766f62bbce379830050c")
    let key = hexBytes("031ee0bf1a3c0062bde8d92cf7422906ed41586bb7d802ff2a2a16b123fa894ffa")
    let author = PeerID("onyecdxw77442ullggcaxjj2cjczrvealz7ce7bu32qp45t5rhja")!
    let vectorLeaves = [
        "c5e5c9047f3b18c2cc6c4cda3aab9527050d45bf002e75bb790c7c045969e97d",
        "8a39180ce763d7dc0ad761010fe3fe48f8be8e821ff5128511268d63df6c5d3a",
        "b0a0fa64e798cb987a69602a88af888212368f0f07e9854b8bc347dcc5c28a55",
    ].map(hexBytes)
    let vectorSigningBytes = hexBytes(
        "4c4348542d5345414c346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a61202122232425262728292a2b2c2d2e2f036c6162000301c539bacb5b9682631fba2e2e84ec08f365558bdcdc7547fa822a5861e60be3"
    )
    let vectorSignature = hexBytes(
        "4c85d8df75fb8c89bce8983d7ff04550c91628dd8617e3ac1c239576cd55b319a7a2d7906ce494ecdb0a5865aacbcae7a3ca93e0d0da202ba563d78dfaa90798")

    var vectorSeal: Seal { Seal(id: sealID, room: lab, signature: Signature(key: key, bytes: vectorSignature), leafHashes: vectorLeaves) }

    func newSigner() -> EnvelopeSigner { EnvelopeSigner(identity: Identity(privateKey: P256.Signing.PrivateKey())) }

    @Test func theScriptsSealVerifies() {
        let checker = newSigner()  // any verifier will do
        #expect(vectorSeal.signingBytes(author: author.rawValue) == vectorSigningBytes)
        #expect(checker.verify(vectorSeal, author: author))
        #expect(checker.verify(signature: vectorSignature, over: vectorSigningBytes, key: key, author: author))
        // Claimed for another author, or over a message's bytes: no.
        #expect(!checker.verify(vectorSeal, author: checker.peerID))
        var reordered = vectorSeal
        reordered.leafHashes.swapAt(0, 2)
        #expect(!checker.verify(reordered, author: author))
    }

    @Test func theScriptsKeySealsTheSameBytes() throws {
        let signer = EnvelopeSigner(identity: Identity(privateKey: try P256.Signing.PrivateKey(rawRepresentation: scalar)))
        #expect(signer.peerID == author && signer.publicKey == key)
        let ours = signer.seal(id: sealID, room: lab, leafHashes: vectorLeaves)
        #expect(ours.signature.key == key)
        #expect(ours.signingBytes(author: author.rawValue) == vectorSigningBytes)
        #expect(newSigner().verify(ours, author: author))
    }

    @Test(arguments: [1, 2, 3, 100, 256])
    func aSignedSealVerifies(count: Int) {
        let signer = newSigner()
        let sealed = signer.seal(id: sealID, room: lab, leafHashes: leafHashes(count))
        #expect(sealed.leafHashes.count == count && sealed.signature.key == signer.publicKey)
        #expect(newSigner().verify(sealed, author: signer.peerID))
        #expect(signer.verify(sealed, author: signer.peerID))
    }

    @Test func anAlteredSealDoesNotVerify() {
        let signer = newSigner()
        let sealed = signer.seal(id: sealID, room: lab, leafHashes: leafHashes(5))
        let checker = newSigner()
        func refused(_ change: (inout Seal) -> Void, _ what: String) {
            var altered = sealed
            change(&altered)
            #expect(!checker.verify(altered, author: signer.peerID), "\(what)")
        }
        refused({ $0.leafHashes[2][0] ^= 1 }, "a leaf hash changed")
        refused({ $0.leafHashes[4] = MerkleTree.leafHash(Array("forged".utf8)) }, "a message replaced")
        refused({ $0.leafHashes.removeLast() }, "a message dropped")
        refused({ $0.leafHashes.append(MerkleTree.leafHash(Array("forged".utf8))) }, "a message added")
        refused({ $0.leafHashes.swapAt(0, 1) }, "two messages swapped")
        refused({ $0.room = RoomID("lab2")! }, "another room")
        refused({ $0.id = WireID(bytes: Array(0...15))! }, "another seal id")
        refused({ $0.signature.bytes[10] ^= 1 }, "a signature byte flipped")
        refused({ $0.signature.bytes = Array($0.signature.bytes[0..<32]) + Array($0.signature.bytes[0..<32]) }, "r || r")
        refused({ $0.signature.bytes = Array(repeating: 0, count: 64) }, "a signature of zeros")
        refused({ $0.signature.bytes.removeLast() }, "a short signature")
        refused({ $0.signature.key[5] ^= 1 }, "another key (or no point)")
        refused({ $0.signature.key = checker.publicKey }, "the checker's key")
        refused({ $0.leafHashes = [] }, "no leaves")
        refused({ $0.leafHashes = Array(repeating: $0.leafHashes[0], count: 257) }, "257 leaves")
        refused({ $0.leafHashes[1].removeLast() }, "a short leaf hash")
        // Signed right, but not by the claimed author: another signer's seal of the same leaves.
        let other = checker.seal(id: sealID, room: lab, leafHashes: sealed.leafHashes)
        #expect(!checker.verify(other, author: signer.peerID))
        #expect(checker.verify(other, author: checker.peerID))
        // A signature over the same fields by the same key, but as a message (another context), is not a seal's.
        var asMessage = sealed
        asMessage.signature.bytes = signer.sign(Array(sealed.signingBytes(author: signer.peerID.rawValue).dropFirst(Envelope.sealContext.count)))
        #expect(!checker.verify(asMessage, author: signer.peerID))
    }

    @Test func aRecordAloneVerifiesWithItsProofAndTheSealsSignature() {
        let signer = newSigner()
        let hashes = leafHashes(7)
        let sealed = signer.seal(id: sealID, room: lab, leafHashes: hashes)
        #expect(newSigner().verify(sealed, author: signer.peerID))
        for index in hashes.indices {
            let proof = sealed.proof(forLeaf: index)
            #expect(proof.verifies(leafHash: hashes[index], leafCount: 7, root: sealed.root))
            #expect(!proof.verifies(leafHash: hashes[(index + 1) % 7], leafCount: 7, root: sealed.root))
        }
    }
}
