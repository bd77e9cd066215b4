// The records that the store keeps and the engine decides about (plain values, no storage code).

/// A chat message as history keeps it, in one box that its copies share, copied on write (as `StoredSeal`): a message is
/// copied many times on its way (into a store operation and its report, an answer, a batch's arrays, a
/// history's pieces), and a copy of its five strings and four arrays was a retain and a release each
/// (`lanchat-bench workload` under callgrind: some 20 copies a message, 6,600 instructions).
public struct StoredMessage: Equatable, Sendable, CustomReflectable {
    public enum Kind: Int64, Sendable { case text = 0, file = 1, system = 2 }

    struct Fields: Equatable, Sendable {
        var id: String
        var room: String
        var senderID: String
        var senderName: String
        var sequence: Int64
        var timestamp: Int64
        var kind: Kind
        var body: String
        var authorKey: [UInt8]
        var signature: [UInt8]
        var direct: Bool
        var sealProof: [UInt8]
        var seal: StoredSeal?
    }

    private var shared: Shared<Fields>

    /// 32 hex characters (the wire's 16-byte id).
    public var id: String {
        get { shared.fields.id }
        set { shared.fields.id = newValue }
        _modify { yield &shared.fields.id }
    }
    public var room: String {
        get { shared.fields.room }
        set { shared.fields.room = newValue }
        _modify { yield &shared.fields.room }
    }
    public var senderID: String {
        get { shared.fields.senderID }
        set { shared.fields.senderID = newValue }
        _modify { yield &shared.fields.senderID }
    }
    public var senderName: String {
        get { shared.fields.senderName }
        set { shared.fields.senderName = newValue }
        _modify { yield &shared.fields.senderName }
    }
    public var sequence: Int64 {
        get { shared.fields.sequence }
        set { shared.fields.sequence = newValue }
        _modify { yield &shared.fields.sequence }
    }
    /// Milliseconds since the Unix epoch, at the sender.
    public var timestamp: Int64 {
        get { shared.fields.timestamp }
        set { shared.fields.timestamp = newValue }
        _modify { yield &shared.fields.timestamp }
    }
    public var kind: Kind {
        get { shared.fields.kind }
        set { shared.fields.kind = newValue }
        _modify { yield &shared.fields.kind }
    }
    public var body: String {
        get { shared.fields.body }
        set { shared.fields.body = newValue }
        _modify { yield &shared.fields.body }
    }
    /// The author's public key (compressed P-256 point, 33 bytes) and signature (64 bytes) over the
    /// message (wire version 2); both empty for an unsigned message (from a version 1 peer, our own
    /// notices, or history kept before version 2).
    public var authorKey: [UInt8] {
        get { shared.fields.authorKey }
        set { shared.fields.authorKey = newValue }
        _modify { yield &shared.fields.authorKey }
    }
    public var signature: [UInt8] {
        get { shared.fields.signature }
        set { shared.fields.signature = newValue }
        _modify { yield &shared.fields.signature }
    }
    /// Sent to some members of the room only: never relayed, nor sent to newcomers.
    public var direct: Bool {
        get { shared.fields.direct }
        set { shared.fields.direct = newValue }
        _modify { yield &shared.fields.direct }
    }
    /// Where the message sits in its author's seal (wire version 4: the wire's `SealProof`, as bytes;
    /// opaque to the store): the seal's id, the leaf index and the audit path; or, when its seal's leaves
    /// are kept (`StoredSeal.leaves`), the leaf index alone (2 bytes, big-endian). Empty: not sealed.
    public var sealProof: [UInt8] {
        get { shared.fields.sealProof }
        set { shared.fields.sealProof = newValue }
        _modify { yield &shared.fields.sealProof }
    }
    /// The seal the proof names, as the store keeps it (once for all its messages). Written with the
    /// message; read back only by what hands records on (`export`, `exportPage`), nil elsewhere.
    public var seal: StoredSeal? {
        get { shared.fields.seal }
        set { shared.fields.seal = newValue }
        _modify { yield &shared.fields.seal }
    }

    public init(
        id: String, room: String, senderID: String, senderName: String, sequence: Int64, timestamp: Int64, kind: Kind, body: String,
        authorKey: [UInt8] = [], signature: [UInt8] = [], direct: Bool = false, sealProof: [UInt8] = [], seal: StoredSeal? = nil
    ) {
        shared = Shared(
            Fields(
                id: id, room: room, senderID: senderID, senderName: senderName, sequence: sequence, timestamp: timestamp, kind: kind, body: body,
                authorKey: authorKey, signature: signature, direct: direct, sealProof: sealProof, seal: seal))
    }

    public static func == (lhs: StoredMessage, rhs: StoredMessage) -> Bool {
        lhs.shared == rhs.shared
    }

    /// Its fields, as a plain struct's would show (in `print`, `dump` and a failed test's message), not its box.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "id": id, "room": room, "senderID": senderID, "senderName": senderName, "sequence": sequence, "timestamp": timestamp, "kind": kind,
                "body": body, "authorKey": authorKey, "signature": signature, "direct": direct, "sealProof": sealProof, "seal": seal as Any,
            ], displayStyle: .struct)
    }

    /// Its author signed it (and the signature was verified before it was stored).
    public var isSigned: Bool { !signature.isEmpty }
    /// Its author sealed it (and the seal and the message's place in it were checked before it was stored).
    public var isSealed: Bool { !sealProof.isEmpty }
    /// Signed or sealed by its author.
    public var isAuthenticated: Bool { isSigned || isSealed }
}

/// An author's seal as the store keeps it (wire version 4's `SealHead`, less what its messages say: the
/// author is their sender, the room theirs): one signature over a Merkle tree of up to 256 messages.
/// Kept once, under its author and id, for all its messages, and in one box that its copies share, copied
/// on write: each of a seal's messages holds it, and a message is copied many times on its way (into a
/// store operation, its answer, a batch's arrays); a copy of the seal's strings and arrays was a retain
/// and a release each.
public struct StoredSeal: Equatable, Sendable, CustomReflectable {
    struct Fields: Equatable {
        var id: String
        var authorKey: [UInt8]
        var signature: [UInt8]
        var leafCount: Int
        var root: [UInt8]
        var checked: Bool
        var leaves: [UInt8]
    }

    private var shared: Shared<Fields>

    /// 32 hex characters (the wire's 16-byte id).
    public var id: String {
        get { shared.fields.id }
        set { shared.fields.id = newValue }
        _modify { yield &shared.fields.id }
    }
    /// The author's public key (compressed P-256 point, 33 bytes) and its signature (64 bytes).
    public var authorKey: [UInt8] {
        get { shared.fields.authorKey }
        set { shared.fields.authorKey = newValue }
        _modify { yield &shared.fields.authorKey }
    }
    public var signature: [UInt8] {
        get { shared.fields.signature }
        set { shared.fields.signature = newValue }
        _modify { yield &shared.fields.signature }
    }
    /// How many messages it seals (1...256), and the root of their tree (32 bytes).
    public var leafCount: Int {
        get { shared.fields.leafCount }
        set { shared.fields.leafCount = newValue }
        _modify { yield &shared.fields.leafCount }
    }
    public var root: [UInt8] {
        get { shared.fields.root }
        set { shared.fields.root = newValue }
        _modify { yield &shared.fields.root }
    }
    /// Whether its signature was checked. A seal received live over a pinned TLS link is kept before
    /// its signature is checked (off the event loop: the link already says who sent it); until it is,
    /// nothing of it leaves this host (no export reads its messages), and if it fails, its messages go
    /// (`SessionStore.dropSealed`).
    public var checked: Bool {
        get { shared.fields.checked }
        set { shared.fields.checked = newValue }
        _modify { yield &shared.fields.checked }
    }
    /// Every leaf's hash, in order (32 bytes each), when the engine knows them, checked against `root` (a
    /// whole seal received); empty otherwise. (The store checks only their size: it hashes nothing.) With them the store keeps each of the seal's messages'
    /// place as its leaf index alone (`StoredMessage.sealProof` of 2 bytes), not its audit path: 32 bytes
    /// a message where a path took 275. Only what reads a message to hand it on gets them (`export`,
    /// `exportPage`), to make each path again (`SealProof`'s, in the engine).
    public var leaves: [UInt8] {
        get { shared.fields.leaves }
        set { shared.fields.leaves = newValue }
        _modify { yield &shared.fields.leaves }
    }

    /// Its fields, as a plain struct's would show, not its box.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "id": id, "authorKey": authorKey, "signature": signature, "leafCount": leafCount, "root": root, "checked": checked, "leaves": leaves,
            ], displayStyle: .struct)
    }

    /// Its leaves are one hash (32 bytes) for each of its leaves: what the stores keep (none otherwise).
    public var hasLeaves: Bool { !shared.fields.leaves.isEmpty && shared.fields.leaves.count == shared.fields.leafCount * 32 }

    public init(
        id: String, authorKey: [UInt8], signature: [UInt8], leafCount: Int, root: [UInt8], checked: Bool = true, leaves: [UInt8] = []
    ) {
        shared = Shared(Fields(id: id, authorKey: authorKey, signature: signature, leafCount: leafCount, root: root, checked: checked, leaves: leaves))
    }

    public static func == (lhs: StoredSeal, rhs: StoredSeal) -> Bool {
        lhs.shared == rhs.shared
    }
}

/// A room member as this daemon remembers it (to reconnect after a restart).
public struct StoredMember: Equatable, Sendable {
    public var peerID: String
    public var name: String
    public var port: Int
    public var addresses: [String]
    /// The member's own signed proof that it is in the room, as we hold it (our own is kept under our id).
    public var proof: StoredProof?

    public init(peerID: String, name: String, port: Int, addresses: [String], proof: StoredProof? = nil) {
        self.peerID = peerID
        self.name = name
        self.port = port
        self.addresses = addresses
        self.proof = proof
    }
}

/// A member's proof of membership (wire `MembershipProof`) as the store keeps it.
public struct StoredProof: Equatable, Sendable {
    public var inviter: String
    public var timestamp: UInt64
    public var key: [UInt8]
    public var signature: [UInt8]

    public init(inviter: String, timestamp: UInt64, key: [UInt8], signature: [UInt8]) {
        self.inviter = inviter
        self.timestamp = timestamp
        self.key = key
        self.signature = signature
    }

    /// One line: time, key and signature in hex, then the inviter (empty if none).
    public var encoded: String { "\(timestamp) \(Hex.string(key)) \(Hex.string(signature)) \(inviter)" }

    public init?(encoded: String) {
        let parts = encoded.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, let timestamp = UInt64(parts[0]), let key = Hex.bytes(String(parts[1])),
            let signature = Hex.bytes(String(parts[2]))
        else { return nil }
        self.init(inviter: String(parts[3]), timestamp: timestamp, key: key, signature: signature)
    }
}

/// When a member (or we) left a room by its signed leave, as the store keeps it.
public struct StoredLeave: Equatable, Sendable {
    public var room: String
    public var peerID: String
    public var timestamp: UInt64

    public init(room: String, peerID: String, timestamp: UInt64) {
        self.room = room
        self.peerID = peerID
        self.timestamp = timestamp
    }
}

/// A file transfer that must outlive the daemon (to resume it), or an ended one a peer may ask about
/// again (so that a re-offer of a file already received is answered "complete", not received twice).
public struct StoredTransfer: Equatable, Sendable {
    /// 32 hex characters (the wire's resource id).
    public var id: String
    public var outgoing: Bool
    public var peerID: String
    public var peerName: String
    /// Outgoing: the file sent. Incoming: the hidden `.part` file.
    public var path: String
    /// Outgoing: the name offered. Incoming: the safe name it gets.
    public var name: String
    public var size: Int64
    /// 64 hex characters.
    public var sha256: String
    /// Milliseconds since the epoch (the sent file's mtime).
    public var modified: Int64
    public var room: String
    /// `active`, `complete`, `cancelled`, `failed`.
    public var state: String
    /// Outgoing: an upper bound of the bytes handed to a connection so far (to count what is sent twice).
    public var sentMark: Int64
    /// Outgoing: bytes sent more than once so far (resumes).
    public var resent: Int64
    /// Outgoing: which file it is ("device:inode" when it was opened), so that after a restart the path is
    /// reopened only if it is still that very file ("": not recorded, by a store of schema 2).
    public var fileIdentity: String

    public init(
        id: String, outgoing: Bool, peerID: String, peerName: String, path: String, name: String, size: Int64, sha256: String,
        modified: Int64, room: String = "", state: String = "active", sentMark: Int64 = 0, resent: Int64 = 0,
        fileIdentity: String = ""
    ) {
        self.id = id
        self.outgoing = outgoing
        self.peerID = peerID
        self.peerName = peerName
        self.path = path
        self.name = name
        self.size = size
        self.sha256 = sha256
        self.modified = modified
        self.room = room
        self.state = state
        self.sentMark = sentMark
        self.resent = resent
        self.fileIdentity = fileIdentity
    }
}

/// One key of a room's metadata as a member last wrote it (issue 13, item 2): the value (or a deletion),
/// its version, when and by whom, with the author's signature so that anyone can hand it on.
public struct StoredMeta: Equatable, Sendable {
    public var room: String
    public var key: String
    public var value: String
    public var deleted: Bool
    public var version: UInt64
    public var timestamp: Int64
    public var authorID: String
    public var authorKey: [UInt8]
    public var signature: [UInt8]

    public init(
        room: String, key: String, value: String, deleted: Bool, version: UInt64, timestamp: Int64, authorID: String,
        authorKey: [UInt8], signature: [UInt8]
    ) {
        self.room = room
        self.key = key
        self.value = value
        self.deleted = deleted
        self.version = version
        self.timestamp = timestamp
        self.authorID = authorID
        self.authorKey = authorKey
        self.signature = signature
    }
}

/// A value's fields in one box that its copies share, copied on write (`StoredSeal`, `StoredMessage`): a
/// copy is one reference, not one for each of its strings and arrays.
///
/// The box is a `ManagedBuffer` whose header is the fields (it has no elements), read and changed through
/// a pointer to them: a stored property of a class (the box was `final class Box { var fields }` before)
/// is checked for exclusive access at run time at every read, which cost more than the copies it saved
/// where a message's fields are read one by one (binding a row: 13 reads).
struct Shared<Fields: Equatable & Sendable>: Equatable, @unchecked Sendable {
    /// Changed only through `fields`, which copies it first unless this value is its only holder.
    private typealias Box = ManagedBuffer<Fields, Void>

    private var box: Box

    init(_ fields: Fields) { box = Box.create(minimumCapacity: 0) { _ in fields } }

    /// The fields in the box. (The pointer is used only while `box` holds the box: during a read or a
    /// change of `fields`, which `self` outlives.)
    private var pointer: UnsafeMutablePointer<Fields> { box.withUnsafeMutablePointerToHeader { $0 } }

    /// (Read in place: a field read copies that field, not them all.)
    var fields: Fields {
        _read { yield pointer.pointee }
        _modify {
            if !isKnownUniquelyReferenced(&box) {
                let copy = pointer.pointee
                box = Box.create(minimumCapacity: 0) { _ in copy }
            }
            yield &pointer.pointee
        }
    }

    static func == (lhs: Shared, rhs: Shared) -> Bool { lhs.box === rhs.box || lhs.pointer.pointee == rhs.pointer.pointee }
}
