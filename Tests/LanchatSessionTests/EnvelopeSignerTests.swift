import Crypto
import FoundationEssentials
import LanchatCore
import LanchatIdentity
import LanchatSecurity
import LanchatWire
import Testing

/// The real signature scheme (P-256 ECDSA, `EnvelopeSigner`) against the independent vectors of
/// scripts/wire-vectors.py (computed with openssl), and against forgeries.
@Suite struct EnvelopeSignerTests {
    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    // scripts/wire-vectors.py: its fixed key, the signing bytes of its sample message, one signature it made.
    let scalar = bytes("682dc3001b76d8ed3d95d33bee2f9383d37b4ad4923a766f62bbce379830050c")
    let key = bytes("031ee0bf1a3c0062bde8d92cf7422906ed41586bb7d802ff2a2a16b123fa894ffa")
    let author = PeerID("onyecdxw77442ullggcaxjj2cjczrvealz7ce7bu32qp45t5rhja")!
    let signingBytes = bytes(
        "4c4348542d4d53472d32346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a61036c6162000102030405060708090a0b0c0d0e0f0000000000000001000001a1ee565e0000000000000c68c3a96c6c6f0a776f726c64"
    )
    let signature = bytes("af858f9dece6ca86e30719dd0c229dcf7283cf93299f35d73101b872597323fde62f3b3bcecaf0ed7b83b331cf49189d586acf23b68de3268a160da3e1397054")

    func vectorSigner() throws -> EnvelopeSigner {
        EnvelopeSigner(identity: Identity(privateKey: try P256.Signing.PrivateKey(rawRepresentation: scalar)))
    }

    @Test func theKeyAndIdMatchTheIndependentScript() throws {
        let signer = try vectorSigner()
        #expect(signer.publicKey == key)
        #expect(EnvelopeSigner.author(ofKey: key) == author)
        #expect(Identity(privateKey: try P256.Signing.PrivateKey(rawRepresentation: scalar)).peerID == author)
        // Our signing bytes are the script's.
        let ours = Envelope.signingBytes(
            author: author.rawValue, room: RoomID("lab")!, id: WireID(bytes: Array(0...15))!, sequence: 1,
            timestamp: 1_795_000_000_000, kind: .text, body: "héllo\nworld")
        #expect(ours == signingBytes)
    }

    @Test func theScriptsSignatureVerifiesAndNothingElseDoes() throws {
        let signer = EnvelopeSigner(identity: Identity(privateKey: P256.Signing.PrivateKey()))  // any verifier will do
        #expect(signer.verify(signature: signature, over: signingBytes, key: key, author: author))
        var changed = signingBytes
        changed[changed.count - 1] ^= 1
        #expect(!signer.verify(signature: signature, over: changed, key: key, author: author))
        // The right key and signature, claimed for another author.
        #expect(!signer.verify(signature: signature, over: signingBytes, key: key, author: signer.peerIDForTests))
        // r || r, a signature of zeros, a short one, a key that is not a point.
        #expect(!signer.verify(signature: Array(signature[0..<32]) + Array(signature[0..<32]), over: signingBytes, key: key, author: author))
        #expect(!signer.verify(signature: [UInt8](repeating: 0, count: 64), over: signingBytes, key: key, author: author))
        #expect(!signer.verify(signature: Array(signature.dropLast()), over: signingBytes, key: key, author: author))
        var notAPoint = key
        notAPoint[0] = 0x05
        #expect(!signer.verify(signature: signature, over: signingBytes, key: notAPoint, author: author))
        #expect(EnvelopeSigner.author(ofKey: notAPoint) == nil)
    }

    @Test func whatWeSignVerifiesAsOursOnly() throws {
        let alice = Identity(privateKey: P256.Signing.PrivateKey())
        let bob = Identity(privateKey: P256.Signing.PrivateKey())
        let signer = EnvelopeSigner(identity: alice)
        let words = Array("words".utf8)
        let signed = signer.sign(words)
        #expect(signed.count == 64 && signer.publicKey.count == 33)
        #expect(EnvelopeSigner.author(ofKey: signer.publicKey) == alice.peerID)
        let checker = EnvelopeSigner(identity: bob)
        #expect(checker.verify(signature: signed, over: words, key: signer.publicKey, author: alice.peerID))
        #expect(!checker.verify(signature: signed, over: words, key: signer.publicKey, author: bob.peerID))
        #expect(!checker.verify(signature: signed, over: words, key: checker.publicKey, author: bob.peerID))
    }
}

extension EnvelopeSigner {
    /// The id of this signer's own key.
    var peerIDForTests: PeerID { EnvelopeSigner.author(ofKey: publicKey)! }
}
