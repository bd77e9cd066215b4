import LanchatCore
import NIOCore

/// Where a sealed record sits in its seal (wire version 4; `Seal`): the seal's id, the record's
/// leaf index and its audit path (RFC 9162, section 2.1.3.1). A record stored or relayed alone keeps it,
/// beside the seal it names (stored once for all its records); with the seal's leaf count and root it
/// shows that the record's leaf hash is one the author signed, with at most 8 hashes and no signature.
///
/// Encoded as `seal_id [16] | leaf_index u16 (< 256) | path_count u8 (<= 8) | path_hash [32] * path_count`,
/// the leaf's own sibling first.
public struct SealProof: Equatable, Sendable {
    /// The longest audit path of a seal's tree: ceil(log2(256)).
    public static let maximumPath = 8
    /// The longest encoded proof: 275 bytes.
    public static let maximumLength = 16 + 2 + 1 + maximumPath * MerkleTree.hashLength

    public var seal: WireID
    public var leafIndex: UInt16
    public var path: [[UInt8]]

    public init(seal: WireID, leafIndex: UInt16, path: [[UInt8]]) {
        self.seal = seal
        self.leafIndex = leafIndex
        self.path = path
    }

    /// Whether `leafHash` is leaf `leafIndex` of a seal of `leafCount` leaves with this `root` (the seal's
    /// signed fields: check its signature once, and each of its records with this).
    public func verifies(leafHash: [UInt8], leafCount: Int, root: [UInt8]) -> Bool {
        MerkleTree.verifyAuditPath(path, leafHash: leafHash, index: Int(leafIndex), count: leafCount, root: root)
    }

    /// Whether `leafHash` is leaf `leafIndex` of `seal` (which must be the seal this proof names).
    public func verifies(leafHash: [UInt8], in seal: Seal) -> Bool {
        seal.id == self.seal && verifies(leafHash: leafHash, leafCount: seal.leafHashes.count, root: seal.root)
    }

    /// Appends the proof; refuses what `decode` would refuse.
    public func encode(into buffer: inout ByteBuffer) throws(WireError) {
        try check()
        buffer.writeBytes(seal.bytes)
        buffer.writeInteger(leafIndex)
        buffer.writeInteger(UInt8(path.count))
        for hash in path { buffer.writeBytes(hash) }
    }

    /// Refuses what `decode` would refuse.
    private func check() throws(WireError) {
        guard Int(leafIndex) < Seal.leafCounts.upperBound else { throw .invalidValue(field: "leaf_index") }
        guard path.count <= Self.maximumPath else { throw .fieldTooLong(field: "audit_path", length: path.count, limit: Self.maximumPath) }
        guard path.allSatisfy({ $0.count == MerkleTree.hashLength }) else { throw .invalidValue(field: "path_hash") }
    }

    /// The proof as bytes (as `encode` writes it).
    public func bytes() throws(WireError) -> [UInt8] {
        try check()
        // Written directly (a buffer and a copy for each record stored made a fifth of a history's checks).
        var bytes: [UInt8] = []
        bytes.reserveCapacity(19 + path.count * MerkleTree.hashLength)
        bytes.append(contentsOf: seal.bytes)
        bytes.append(UInt8(leafIndex >> 8))
        bytes.append(UInt8(leafIndex & 0xFF))
        bytes.append(UInt8(path.count))
        for hash in path { bytes.append(contentsOf: hash) }
        return bytes
    }

    /// Reads one proof from the front of `buffer`. On an error `buffer` is left as it was.
    public static func decode(from buffer: inout ByteBuffer) throws(WireError) -> SealProof {
        var reader = FieldReader(buffer: buffer)
        let seal = WireID(bytes: try reader.bytes("seal_id", count: 16))!
        let index = try reader.u16("leaf_index")
        guard Int(index) < Seal.leafCounts.upperBound else { throw .invalidValue(field: "leaf_index") }
        let count = Int(try reader.u8("path_count"))
        guard count <= maximumPath else { throw .fieldTooLong(field: "audit_path", length: count, limit: maximumPath) }
        var path: [[UInt8]] = []
        path.reserveCapacity(count)
        for _ in 0..<count { path.append(try reader.bytes("path_hash", count: MerkleTree.hashLength)) }
        buffer = reader.buffer
        return SealProof(seal: seal, leafIndex: index, path: path)
    }

    /// Decodes `bytes`, which must hold exactly one proof.
    public static func decode(_ bytes: [UInt8]) throws(WireError) -> SealProof {
        var buffer = ByteBuffer(bytes: bytes)
        let proof = try decode(from: &buffer)
        guard buffer.readableBytes == 0 else { throw .trailingBytes(frame: "seal proof", count: buffer.readableBytes) }
        return proof
    }
}

/// Where a live sealed MESSAGE sits in the SEAL its author sent ahead of it on the same connection
/// (version 4; MESSAGE flag 0x08): the seal's id and the message's leaf index, `seal_id [16] |
/// leaf_index u16 (< 256)`, in place of a version 2 message's key and signature. The receiver holds that
/// seal's leaf hashes, so it needs no audit path.
public struct SealedLeaf: Equatable, Sendable {
    public static let length = 16 + 2
    public var seal: WireID
    public var leafIndex: UInt16

    public init(seal: WireID, leafIndex: UInt16) {
        self.seal = seal
        self.leafIndex = leafIndex
    }

    func write(into buffer: inout ByteBuffer) throws(WireError) {
        guard Int(leafIndex) < Seal.leafCounts.upperBound else { throw .invalidValue(field: "leaf_index") }
        buffer.writeBytes(seal.bytes)
        buffer.writeInteger(leafIndex)
    }

    static func read(_ reader: inout FieldReader) throws(WireError) -> SealedLeaf {
        let seal = WireID(bytes: try reader.bytes("seal_id", count: 16))!
        let index = try reader.u16("leaf_index")
        guard Int(index) < Seal.leafCounts.upperBound else { throw .invalidValue(field: "leaf_index") }
        return SealedLeaf(seal: seal, leafIndex: index)
    }
}
