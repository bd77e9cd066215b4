import LanchatCore
import NIOCore

/// An author's one signature over a batch of its messages in a room (wire version 4; issue 33, "seals"). The batch's leaves are the messages' signing
/// bytes (`Envelope.signingBytes`, as version 2 signs each message), the leaf hashes
/// `SHA-256(0x00 | signing bytes)` (`leafHash`), the root RFC 9162's Merkle tree hash over them
/// (`MerkleTree.root`), and the author signs `Envelope.sealBytes`: its id, the seal's id, the room, the
/// leaf count and the root. A receiver checks a message against the seal's leaf hashes, and a record
/// relayed alone against the root with its audit path (`SealProof`): one signature check per seal.
///
/// The SEAL frame, type 0x12 (no flags defined): `seal_id [16] | room (u8 len) | author_key [33] |
/// signature [64] | leaf_count u16 (1-256) | leaf_hash [32] * leaf_count`. The author is the key's
/// (`author_key` hashes to the author's id, as a version 2 signature's does). It is `WireFrame.seal`;
/// a connection below version 4 refuses it.
public struct Seal: Equatable, Sendable {
    public static let frameType: UInt8 = 0x12
    /// A seal covers 1 to 256 messages (an author seals what it has when it flushes, a lone message too).
    public static let leafCounts: ClosedRange<Int> = 1...256
    /// The longest payload of a SEAL frame: 8,340 bytes.
    public static let maximumPayload = 16 + 1 + 32 + Signature.keyLength + Signature.length + 2 + leafCounts.upperBound * MerkleTree.hashLength

    public var id: WireID
    public var room: RoomID
    /// The author's key and its signature over `signingBytes(author:)`.
    public var signature: Signature
    /// The leaf hashes of the sealed messages, in the order the author sealed them.
    public var leafHashes: [[UInt8]]

    public init(id: WireID, room: RoomID, signature: Signature, leafHashes: [[UInt8]]) {
        self.id = id
        self.room = room
        self.signature = signature
        self.leafHashes = leafHashes
    }

    /// The leaf hash of a message's signing bytes: `SHA-256(0x00 | signing bytes)`.
    public static func leafHash(signingBytes: [UInt8]) -> [UInt8] { MerkleTree.leafHash(signingBytes) }

    /// The leaf hash of `message` by `author` (its version 2 signing bytes; the audience included, so a
    /// direct message never passes for one to the room).
    public static func leafHash(of message: WireFrame.Message, author: String) -> [UInt8] {
        leafHash(
            signingBytes: Envelope.signingBytes(
                author: author, room: message.room, id: message.id, sequence: message.sequence, timestamp: message.timestampMilliseconds,
                kind: message.kind, direct: message.direct, body: message.body))
    }

    /// The Merkle tree hash of the leaf hashes.
    public var root: [UInt8] { MerkleTree.root(leafHashes) }

    /// Whether the fields have the lengths and counts the frame allows (what a decoded seal always has).
    public var isWellFormed: Bool {
        Self.leafCounts.contains(leafHashes.count) && leafHashes.allSatisfy { $0.count == MerkleTree.hashLength }
            && signature.key.count == Signature.keyLength && signature.bytes.count == Signature.length
    }

    /// What `author` signs for this seal (`Envelope.sealBytes`).
    public func signingBytes(author: String) -> [UInt8] {
        Envelope.sealBytes(author: author, id: id, room: room, leafCount: UInt16(clamping: leafHashes.count), root: root)
    }

    /// The seal without its leaf hashes, as a history carries it (`SealHead`), for `author`.
    public func head(author: String) -> SealHead { head(author: author, root: root) }

    /// The same, with its `root` already worked out (with the leaves' audit paths: `MerkleTree.auditPaths`).
    public func head(author: String, root: [UInt8]) -> SealHead {
        SealHead(id: id, author: author, signature: signature, leafCount: UInt16(clamping: leafHashes.count), root: root)
    }

    /// The proof that leaf `index` is in this seal: what a record relayed or stored alone keeps.
    public func proof(forLeaf index: Int) -> SealProof {
        SealProof(seal: id, leafIndex: UInt16(index), path: MerkleTree.auditPath(index: index, leafHashes: leafHashes))
    }

    // MARK: The SEAL frame

    /// Builds the SEAL frame. Refuses what the decoder would refuse, so a peer never receives it.
    public func encode(allocator: ByteBufferAllocator = ByteBufferAllocator()) throws(WireError) -> RawFrame {
        guard Self.leafCounts.contains(leafHashes.count) else {
            guard leafHashes.isEmpty else { throw .fieldTooLong(field: "leaf_hashes", length: leafHashes.count, limit: Self.leafCounts.upperBound) }
            throw .invalidValue(field: "leaf_count")
        }
        guard leafHashes.allSatisfy({ $0.count == MerkleTree.hashLength }) else { throw .invalidValue(field: "leaf_hash") }
        try WireFrame.checkSignature(signature, key: "author_key")
        var payload = allocator.buffer(capacity: Self.maximumPayload - (Self.leafCounts.upperBound - leafHashes.count) * MerkleTree.hashLength)
        payload.writeBytes(id.bytes)
        payload.writeLengthPrefixed(Array(room.rawValue.utf8), as: UInt8.self)
        payload.writeBytes(signature.key)
        payload.writeBytes(signature.bytes)
        payload.writeInteger(UInt16(leafHashes.count))
        for hash in leafHashes { payload.writeBytes(hash) }
        return RawFrame(type: Self.frameType, payload: payload)
    }

    /// Parses a SEAL frame's payload: every field checked, a count outside 1-256 refused before any hash
    /// is read, a payload that ends early or goes on after the last hash refused.
    public static func decode(_ frame: RawFrame) throws(WireError) -> Seal {
        guard frame.type == frameType else { throw .invalidValue(field: "type") }
        var reader = FieldReader(buffer: frame.payload)
        let id = WireID(bytes: try reader.bytes("seal_id", count: 16))!
        let room = try WireFrame.readRoom(&reader)
        let signature = Signature(
            key: try reader.bytes("author_key", count: Signature.keyLength),
            bytes: try reader.bytes("signature", count: Signature.length))
        let count = Int(try reader.u16("leaf_count"))
        guard count > 0 else { throw .invalidValue(field: "leaf_count") }
        guard count <= leafCounts.upperBound else { throw .fieldTooLong(field: "leaf_hashes", length: count, limit: leafCounts.upperBound) }
        var hashes: [[UInt8]] = []
        hashes.reserveCapacity(count)
        for _ in 0..<count { hashes.append(try reader.bytes("leaf_hash", count: MerkleTree.hashLength)) }
        try reader.end("seal")
        return Seal(id: id, room: room, signature: signature, leafHashes: hashes)
    }

    /// The SEAL frame as bytes on the wire (header included): for tests, vectors and simple writers.
    public func wireBytes() throws(WireError) -> [UInt8] {
        var out = ByteBuffer()
        FrameEncoder().encode(data: try encode(), out: &out)
        return Array(out.readableBytesView)
    }
}
