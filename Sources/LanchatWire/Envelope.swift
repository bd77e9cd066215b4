import LanchatCore

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
        var bytes = SignedBytes(context, capacity: 64 + author.utf8.count + room.rawValue.utf8.count + body.utf8.count)
        bytes.append(author, prefix: UInt8.self)
        bytes.append(room.rawValue, prefix: UInt8.self)
        bytes.append(id.bytes)
        bytes.append(sequence)
        bytes.append(timestamp)
        bytes.append(kind.rawValue)
        bytes.append(UInt8(direct ? 1 : 0))
        bytes.append(body, prefix: UInt32.self)
        return bytes.bytes
    }

    public static let membershipContext: [UInt8] = Array("LCHT-JOIN-2".utf8)
    public static let leaveContext: [UInt8] = Array("LCHT-LEAVE-2".utf8)

    /// What a member signs to say it is in a room (`MembershipProof`): `"LCHT-JOIN-2" | room (u8 len) |
    /// member_id (u8 len) | inviter_id (u8 len, may be empty) | joined_ms u64`.
    public static func membershipBytes(room: RoomID, member: String, inviter: String, timestamp: UInt64) -> [UInt8] {
        var bytes = SignedBytes(membershipContext, capacity: 160)
        bytes.append(room.rawValue, prefix: UInt8.self)
        bytes.append(member, prefix: UInt8.self)
        bytes.append(inviter, prefix: UInt8.self)
        bytes.append(timestamp)
        return bytes.bytes
    }

    /// What a member signs when it leaves (`SignedLeave`): `"LCHT-LEAVE-2" | room (u8 len) |
    /// member_id (u8 len) | left_ms u64`.
    public static func leaveBytes(room: RoomID, member: String, timestamp: UInt64) -> [UInt8] {
        var bytes = SignedBytes(leaveContext, capacity: 100)
        bytes.append(room.rawValue, prefix: UInt8.self)
        bytes.append(member, prefix: UInt8.self)
        bytes.append(timestamp)
        return bytes.bytes
    }

    public static let sealContext: [UInt8] = Array("LCHT-SEAL".utf8)

    /// What an author signs for a batch of its messages (`Seal`, wire version 4): `"LCHT-SEAL" |
    /// author_id (u8 len) | seal_id [16] | room (u8 len) | leaf_count u16 | root [32]`, the root being
    /// `MerkleTree.root` of the messages' leaf hashes (`Seal.leafHash`).
    public static func sealBytes(author: String, id: WireID, room: RoomID, leafCount: UInt16, root: [UInt8]) -> [UInt8] {
        var bytes = SignedBytes(sealContext, capacity: 160)
        bytes.append(author, prefix: UInt8.self)
        bytes.append(id.bytes)
        bytes.append(room.rawValue, prefix: UInt8.self)
        bytes.append(leafCount)
        bytes.append(root)
        return bytes.bytes
    }

    public static let metaContext: [UInt8] = Array("LCHT-META-2".utf8)

    /// What an author signs for one key of a room's metadata (`WireFrame.MetaEntry`): `"LCHT-META-2" |
    /// room (u8 len) | key (u8 len) | deleted u8 | value (u16 len) | version u64 | timestamp_ms u64 |
    /// author_id (u8 len)`.
    public static func metaBytes(room: RoomID, key: String, deleted: Bool, value: String, version: UInt64, timestamp: UInt64, author: String) -> [UInt8] {
        var bytes = SignedBytes(metaContext, capacity: 128 + value.utf8.count)
        bytes.append(room.rawValue, prefix: UInt8.self)
        bytes.append(key, prefix: UInt8.self)
        bytes.append(UInt8(deleted ? 1 : 0))
        bytes.append(value, prefix: UInt16.self)
        bytes.append(version)
        bytes.append(timestamp)
        bytes.append(author, prefix: UInt8.self)
        return bytes.bytes
    }
}

/// The bytes a signature covers, written into one array: a `ByteBuffer`, a copy of each text field's
/// UTF-8 and a copy of the result made six allocations for each message signed, sealed as a leaf, or
/// checked (both ends of every message, and every record of a history). Integers are big-endian; a
/// text's length prefix must hold its length (a trap otherwise, as `writeLengthPrefixed`).
struct SignedBytes {
    private(set) var bytes: [UInt8] = []

    init(_ context: [UInt8], capacity: Int) {
        bytes.reserveCapacity(capacity)
        bytes.append(contentsOf: context)
    }

    mutating func append(_ raw: [UInt8]) { bytes.append(contentsOf: raw) }

    mutating func append<I: FixedWidthInteger>(_ value: I) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func append<L: FixedWidthInteger>(_ text: String, prefix: L.Type) {
        var text = text
        text.withUTF8 { utf8 in
            append(L(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }
}
