import LanchatCore
import LanchatWire

/// Seals (wire version 4; `Seal`): one signature over a
/// batch of an author's messages, with the same key, scheme and key cache as a message's signature
/// (ECDSA P-256 / SHA-256 over `Envelope.sealBytes`, `r || s`, the key compressed and hashing to the
/// author's id).
extension EnvelopeSigner {
    /// This signer's seal of the messages whose leaf hashes (`Seal.leafHash`) are `leafHashes`, in that
    /// order: 1 to 256 hashes of 32 bytes (anything else is a programming error).
    public func seal(id: WireID, room: RoomID, leafHashes: [[UInt8]]) -> Seal {
        precondition(Seal.leafCounts.contains(leafHashes.count), "a seal covers 1 to 256 messages, not \(leafHashes.count)")
        precondition(leafHashes.allSatisfy { $0.count == MerkleTree.hashLength }, "a leaf hash is 32 bytes")
        var seal = Seal(id: id, room: room, signature: Signature(key: publicKey, bytes: []), leafHashes: leafHashes)
        seal.signature.bytes = sign(seal.signingBytes(author: peerID.rawValue))
        return seal
    }

    /// Whether `seal` is well formed, its key is `author`'s and its signature is the author's over its id,
    /// room, leaf count and root. One check for all the seal's messages: each of them is then checked
    /// against the leaf hashes (or, alone, with its `SealProof`).
    public func verify(_ seal: Seal, author: PeerID) -> Bool {
        guard seal.isWellFormed else { return false }
        return verify(signature: seal.signature.bytes, over: seal.signingBytes(author: author.rawValue), key: seal.signature.key, author: author)
    }
}
