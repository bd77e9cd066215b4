import LanchatEngine
import LanchatSecurity

extension EnvelopeKeys {
    /// The engine's view of the identity key (`EnvelopeSigner`: P-256 ECDSA).
    public init(signer: EnvelopeSigner) {
        self.init(
            publicKey: signer.publicKey, sign: { signer.sign($0) },
            verify: { signature, bytes, author in signer.verify(signature: signature.bytes, over: bytes, key: signature.key, author: author) })
    }
}
