import LanchatCore
import LanchatWire

/// The author's key, as the engine uses it (wire version 2): it signs what we write and checks what
/// others wrote. The engine holds no key and does no cryptography itself: the shell gives it these
/// functions (P-256 ECDSA in `LanchatSecurity.EnvelopeSigner`), tests a fake.
public struct EnvelopeKeys: Sendable, Equatable {
    /// Our public key as it goes on the wire (`Signature.key`).
    public let publicKey: [UInt8]
    let sign: @Sendable ([UInt8]) -> [UInt8]
    let verify: @Sendable (_ signature: Signature, _ signed: [UInt8], _ author: PeerID) -> Bool

    /// `verify`: whether `signature.key` is `author`'s key and `signature.bytes` its signature over `signed`.
    public init(
        publicKey: [UInt8], sign: @escaping @Sendable ([UInt8]) -> [UInt8],
        verify: @escaping @Sendable (_ signature: Signature, _ signed: [UInt8], _ author: PeerID) -> Bool
    ) {
        self.publicKey = publicKey
        self.sign = sign
        self.verify = verify
    }

    public func signature(over bytes: [UInt8]) -> Signature { Signature(key: publicKey, bytes: sign(bytes)) }

    public func verifies(_ signature: Signature, over bytes: [UInt8], by author: PeerID) -> Bool {
        signature.key.count == Signature.keyLength && signature.bytes.count == Signature.length && verify(signature, bytes, author)
    }

    public static func == (lhs: EnvelopeKeys, rhs: EnvelopeKeys) -> Bool { lhs.publicKey == rhs.publicKey }
}

extension SessionStateMachine {
    /// What a newcomer does with one record of a history a member relayed to it.
    public enum HistoryVerdict: Equatable, Sendable {
        case keep(StoredMessage)
        /// Not a member's message, or numbers out of range (`storable`), or unsigned and not the relay's own.
        case refused
        /// Signed, but the key is not the sender's or the signature does not verify: the relay lied.
        case forged
        /// Our own message (a member that rejoins): we have it, or never sent it; skipped quietly.
        case ours
    }

    /// The rule for a history record, pure: a signed record (`signed` history) is kept only if its
    /// signature verifies for its sender, whoever relayed it, and its sender is a member of the room
    /// (`members`, as this node knows them, with the names it shows: a record's name is the relay's
    /// label, replaced by ours); an unsigned one only if its sender is the relay itself (the connection
    /// proved who that is: its own words need no signature). So a relay can withhold messages, but not
    /// put words in another member's mouth, nor bring in authors of its own making. Without `keys` (a
    /// node that speaks version 1 only) the relay's word is taken, as version 1 does.
    ///
    /// `now` (our wall clock): a record dated more than `futureTolerance` ahead of it is refused (`storable`).
    ///
    /// `strangers` (our inviter's history, which holds members who left): a signed record whose author
    /// is not a member here is kept, under its short id and "not a member" (`strangerName`), never under
    /// the name the relay gave it: a member's name is ours to show, and the relay may have made the
    /// author up.
    public static func verdict(
        _ record: HistoryRecord, room: RoomID, relay: PeerID, ownID: PeerID, keys: EnvelopeKeys?, members: [PeerID: String]? = nil,
        strangers: Bool = false, now: Int64? = nil
    ) -> HistoryVerdict {
        if record.senderID == ownID.rawValue { return .ours }
        guard
            var stored = storable(
                id: record.id, room: room, senderID: record.senderID, senderName: record.senderName, sequence: record.sequence,
                timestamp: record.timestampMilliseconds, kind: record.kind, body: record.body, ownID: ownID, now: now), let author = PeerID(record.senderID)
        else { return .refused }
        guard let keys else { return .keep(stored) }
        if let signature = record.signature {
            guard keys.verifies(signature, over: record.signingBytes(room: room), by: author) else { return .forged }
            stored.authorKey = signature.key
            stored.signature = signature.bytes
        } else if author != relay {
            return .refused
        }
        return named(stored, author: author, relay: relay, members: members, strangers: strangers)
    }

    /// The verdict on a sealed record of a sealed history (version 4): as `verdict`, its seal (`seal`, its
    /// sender's, checked once while `checks` keeps it) and its audit path in place of a signature.
    public static func verdict(
        _ record: HistoryRecord, sealedBy seal: SealHead, room: RoomID, relay: PeerID, ownID: PeerID, keys: EnvelopeKeys?,
        members: [PeerID: String]? = nil, strangers: Bool = false, now: Int64? = nil, checks: inout SealChecks
    ) -> HistoryVerdict {
        if record.senderID == ownID.rawValue { return .ours }
        guard
            let stored = storable(
                id: record.id, room: room, senderID: record.senderID, senderName: record.senderName, sequence: record.sequence,
                timestamp: record.timestampMilliseconds, kind: record.kind, body: record.body, ownID: ownID, now: now),
            let author = PeerID(record.senderID), let proof = record.proof
        else { return .refused }
        guard let keys else { return .keep(stored) }
        guard checks.verifies(record, seal: seal, room: room, keys: keys) else { return .forged }
        return named(stored.sealed(by: checks.stored(seal), proof: proof), author: author, relay: relay, members: members, strangers: strangers)
    }

    /// A record kept, under the name we show for its author: a member's own (or the relay's for itself),
    /// or for an author who is not a member, its short id (`strangers` only, and only for a record its
    /// author signed or sealed). Refused otherwise.
    private static func named(
        _ stored: consuming StoredMessage, author: PeerID, relay: PeerID, members: [PeerID: String]?, strangers: Bool
    ) -> HistoryVerdict {
        guard let members else { return .keep(stored) }
        var stored = stored
        if let name = members[author] ?? (author == relay ? stored.senderName : nil) {
            stored.senderName = name
        } else if strangers, stored.isAuthenticated {
            stored.senderName = strangerName(author)
        } else {
            return .refused
        }
        return .keep(stored)
    }

    /// How a history record's author that is not a member of the room is shown: its short id, never a
    /// name someone else gave it.
    public static func strangerName(_ author: PeerID) -> String { "\(author.short) (not a member)" }

    /// Signs a message we write (nothing without keys: an engine that speaks only version 1).
    func signed(_ message: StoredMessage, room: RoomID, id: WireID) -> StoredMessage {
        Self.signed(message, room: room, id: id, keys: configuration.envelopes)
    }

    /// Our message with its signature: for one we wrote before signatures, still queued for a peer that
    /// now speaks version 2 (which refuses an unsigned message). Others' messages and signed ones as they are.
    public static func signedIfOurs(_ message: StoredMessage, ownID: PeerID, keys: EnvelopeKeys?) -> StoredMessage {
        guard !message.isSigned, message.senderID == ownID.rawValue, message.kind != .system,
            let id = WireID(hex: message.id), let room = RoomID(message.room)
        else { return message }
        return signed(message, room: room, id: id, keys: keys)
    }

    static func signed(_ message: StoredMessage, room: RoomID, id: WireID, keys: EnvelopeKeys?) -> StoredMessage {
        guard let keys else { return message }
        let signature = keys.signature(over: signingBytes(of: message, room: room, id: id))
        var message = message
        message.authorKey = signature.key
        message.signature = signature.bytes
        return message
    }

    /// What the author of `message` (a text or a file, ours) signs, or seals as a leaf: the fields of the
    /// MESSAGE `frame` makes of it.
    static func signingBytes(of message: StoredMessage, room: RoomID, id: WireID) -> [UInt8] {
        Envelope.signingBytes(
            author: message.senderID, room: room, id: id, sequence: UInt64(max(0, message.sequence)),
            timestamp: UInt64(max(0, message.timestamp)), kind: message.kind == .file ? .file : .text, direct: message.direct, body: message.body)
    }

    /// Whether a live message on a version 2 connection is signed by its author, the connection's peer.
    func verifiesLive(_ message: WireFrame.Message, from sender: PeerID) -> Bool {
        guard let signature = message.signature, let keys = configuration.envelopes else { return false }
        let bytes = Envelope.signingBytes(
            author: sender.rawValue, room: message.room, id: message.id, sequence: message.sequence,
            timestamp: message.timestampMilliseconds, kind: message.kind, direct: message.direct, body: message.body)
        return keys.verifies(signature, over: bytes, by: sender)
    }
}
