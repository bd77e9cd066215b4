import LanchatCore
import NIOCore

/// An author's signature over a message (version 2): the author's P-256 public key as a compressed
/// SEC1 point (33 bytes) and an ECDSA P-256 / SHA-256 signature as `r || s` (64 bytes) over
/// `Envelope.signingBytes`. The key names its author: the author's id is the SHA-256 of the key's
/// SubjectPublicKeyInfo DER, so a signature verifies on its own, whoever relays it.
public struct Signature: Equatable, Sendable {
    public static let keyLength = 33
    public static let length = 64
    public var key: [UInt8]
    public var bytes: [UInt8]

    public init(key: [UInt8], bytes: [UInt8]) {
        self.key = key
        self.bytes = bytes
    }
}

/// What an author signs: every field of a message that says who wrote what, where and when.
public enum Envelope {
    /// Separates these signatures from any other use of the key (the key also signs TLS handshakes).
    public static let context: [UInt8] = Array("LCHT-MSG-2".utf8)

    /// `"LCHT-MSG-2" | author_id (u8 len) | room (u8 len) | message_id [16] | sequence u64 |
    /// timestamp_ms u64 | kind u8 | audience u8 (0 the room, 1 direct: some members only) | body (u32 len)`,
    /// integers big-endian. The sender's display name is not signed: it is a label, never identity. The
    /// audience is: a direct message handed on by one of its recipients as if to the room does not verify.
    public static func signingBytes(
        author: String, room: RoomID, id: WireID, sequence: UInt64, timestamp: UInt64, kind: WireFrame.Message.Kind, direct: Bool = false,
        body: String
    ) -> [UInt8] {
        var buffer = ByteBufferAllocator().buffer(capacity: 128 + body.utf8.count)
        buffer.writeBytes(context)
        buffer.writeLengthPrefixed(Array(author.utf8), as: UInt8.self)
        buffer.writeLengthPrefixed(Array(room.rawValue.utf8), as: UInt8.self)
        buffer.writeBytes(id.bytes)
        buffer.writeInteger(sequence)
        buffer.writeInteger(timestamp)
        buffer.writeInteger(kind.rawValue)
        buffer.writeInteger(UInt8(direct ? 1 : 0))
        buffer.writeLengthPrefixed(Array(body.utf8), as: UInt32.self)
        return Array(buffer.readableBytesView)
    }

    public static let membershipContext: [UInt8] = Array("LCHT-JOIN-2".utf8)
    public static let leaveContext: [UInt8] = Array("LCHT-LEAVE-2".utf8)

    /// What a member signs to say it is in a room (`MembershipProof`): `"LCHT-JOIN-2" | room (u8 len) |
    /// member_id (u8 len) | inviter_id (u8 len, may be empty) | joined_ms u64`.
    public static func membershipBytes(room: RoomID, member: String, inviter: String, timestamp: UInt64) -> [UInt8] {
        var buffer = ByteBufferAllocator().buffer(capacity: 160)
        buffer.writeBytes(membershipContext)
        buffer.writeLengthPrefixed(Array(room.rawValue.utf8), as: UInt8.self)
        buffer.writeLengthPrefixed(Array(member.utf8), as: UInt8.self)
        buffer.writeLengthPrefixed(Array(inviter.utf8), as: UInt8.self)
        buffer.writeInteger(timestamp)
        return Array(buffer.readableBytesView)
    }

    /// What a member signs when it leaves (`SignedLeave`): `"LCHT-LEAVE-2" | room (u8 len) |
    /// member_id (u8 len) | left_ms u64`.
    public static func leaveBytes(room: RoomID, member: String, timestamp: UInt64) -> [UInt8] {
        var buffer = ByteBufferAllocator().buffer(capacity: 100)
        buffer.writeBytes(leaveContext)
        buffer.writeLengthPrefixed(Array(room.rawValue.utf8), as: UInt8.self)
        buffer.writeLengthPrefixed(Array(member.utf8), as: UInt8.self)
        buffer.writeInteger(timestamp)
        return Array(buffer.readableBytesView)
    }

    public static let sealContext: [UInt8] = Array("LCHT-SEAL".utf8)

    /// What an author signs for a batch of its messages (`Seal`, wire version 4): `"LCHT-SEAL" |
    /// author_id (u8 len) | seal_id [16] | room (u8 len) | leaf_count u16 | root [32]`, the root being
    /// `MerkleTree.root` of the messages' leaf hashes (`Seal.leafHash`).
    public static func sealBytes(author: String, id: WireID, room: RoomID, leafCount: UInt16, root: [UInt8]) -> [UInt8] {
        var buffer = ByteBufferAllocator().buffer(capacity: 128)
        buffer.writeBytes(sealContext)
        buffer.writeLengthPrefixed(Array(author.utf8), as: UInt8.self)
        buffer.writeBytes(id.bytes)
        buffer.writeLengthPrefixed(Array(room.rawValue.utf8), as: UInt8.self)
        buffer.writeInteger(leafCount)
        buffer.writeBytes(root)
        return Array(buffer.readableBytesView)
    }

    public static let metaContext: [UInt8] = Array("LCHT-META-2".utf8)

    /// What an author signs for one key of a room's metadata (`WireFrame.MetaEntry`): `"LCHT-META-2" |
    /// room (u8 len) | key (u8 len) | deleted u8 | value (u16 len) | version u64 | timestamp_ms u64 |
    /// author_id (u8 len)`.
    public static func metaBytes(room: RoomID, key: String, deleted: Bool, value: String, version: UInt64, timestamp: UInt64, author: String) -> [UInt8] {
        var buffer = ByteBufferAllocator().buffer(capacity: 128 + value.utf8.count)
        buffer.writeBytes(metaContext)
        buffer.writeLengthPrefixed(Array(room.rawValue.utf8), as: UInt8.self)
        buffer.writeLengthPrefixed(Array(key.utf8), as: UInt8.self)
        buffer.writeInteger(UInt8(deleted ? 1 : 0))
        buffer.writeLengthPrefixed(Array(value.utf8), as: UInt16.self)
        buffer.writeInteger(version)
        buffer.writeInteger(timestamp)
        buffer.writeLengthPrefixed(Array(author.utf8), as: UInt8.self)
        return Array(buffer.readableBytesView)
    }
}
