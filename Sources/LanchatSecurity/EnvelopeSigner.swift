import Crypto
import FoundationEssentials
import LanchatCore
import LanchatIdentity
import Synchronization

/// Signs messages with the identity key and checks others' signatures (wire version 2, signed
/// envelopes): ECDSA P-256 with SHA-256, signatures as `r || s` (64 bytes), keys as compressed SEC1
/// points (33 bytes). A key names its author: the author's id is the SHA-256 of the key's
/// SubjectPublicKeyInfo DER (`Identity.peerID(of:)`), so a signature is checked with nothing but
/// itself, whoever relayed it.
public final class EnvelopeSigner: Sendable {
    public static let keyLength = 33
    public static let signatureLength = 64
    /// Keys met, parsed (decompressing a point costs about as much as a check): at most this many.
    static let maximumCachedKeys = 4096

    private let privateKey: P256.Signing.PrivateKey
    public let publicKey: [UInt8]
    /// The id `publicKey` names: the author of what this signer signs.
    public let peerID: PeerID
    private let keys = Mutex<[[UInt8]: (PeerID, P256.Signing.PublicKey)]>([:])

    public init(identity: Identity) {
        privateKey = identity.privateKey
        publicKey = Array(privateKey.publicKey.compressedRepresentation)
        peerID = identity.peerID
    }

    /// The signature of `bytes` (`r || s`).
    public func sign(_ bytes: [UInt8]) -> [UInt8] {
        // Signing with a valid key does not fail.
        Array(try! privateKey.signature(for: bytes).rawRepresentation)
    }

    /// Whether `key` (compressed) is `author`'s key and `signature` (`r || s`) its signature over `bytes`.
    public func verify(signature: [UInt8], over bytes: [UInt8], key: [UInt8], author: PeerID) -> Bool {
        guard signature.count == Self.signatureLength, key.count == Self.keyLength,
            let (owner, publicKey) = parsed(key), owner == author,
            let parsedSignature = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        else { return false }
        return publicKey.isValidSignature(parsedSignature, for: bytes)
    }

    /// The id a compressed key names, or nil if it is not a point of the curve.
    public static func author(ofKey key: [UInt8]) -> PeerID? {
        guard let publicKey = try? P256.Signing.PublicKey(compressedRepresentation: key) else { return nil }
        return Identity.peerID(of: publicKey)
    }

    private func parsed(_ key: [UInt8]) -> (PeerID, P256.Signing.PublicKey)? {
        if let known = keys.withLock({ $0[key] }) { return known }
        guard let publicKey = try? P256.Signing.PublicKey(compressedRepresentation: key) else { return nil }
        let entry = (Identity.peerID(of: publicKey), publicKey)
        keys.withLock {
            if $0.count >= Self.maximumCachedKeys { $0.removeAll(keepingCapacity: true) }
            $0[key] = entry
        }
        return entry
    }
}
