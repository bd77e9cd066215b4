import LanchatCore
import NIOCore

/// The frames of lanchat/1 (docs/wire-protocol.md). Each case documents its payload.
public enum WireFrame: Equatable, Sendable {
    /// 0x01. First frame each side sends, both at once. `magic "LCHT" | min_version u16 | max_version u16 |
    /// max_payload u32 | peer_id (u8 len) | name (u8 len, UTF-8) | capabilities: count u8, each (u8 len, ASCII)`.
    case hello(Hello)
    /// 0x02. `invitation_id [16] | timeout_ms u32 | room (u8 len) | context (u32 len, at most 64 KiB)`.
    case invite(Invite)
    /// 0x03. `invitation_id [16] | outcome u8 | reason (u16 len, UTF-8, at most 1 KiB)`.
    case inviteReply(InviteReply)
    /// 0x04. "I am in `room`, and these are its members as I know them" (introductions and resync).
    /// `room (u8 len) | count u16 (<= 1024) | members, each: peer_id (u8 len) | name (u8 len) | port u16 |
    /// address_count u8 (<= 8) | addresses, each (u8 len, <= 64 ASCII)`.
    case roomMembers(RoomMembers)
    /// 0x05. "I leave `room`". `room (u8 len) | text (u16 len, UTF-8, at most 1 KiB)`.
    case roomLeave(RoomLeave)
    /// 0x06. A newcomer asks the member who invited it for the room's history since `since_ms` (what it
    /// lacks). `room (u8 len) | since_ms u64`, and with flag 0x01 (version 2) `limit u32`: at most that many
    /// of the latest messages (the newcomer chooses the scope; 0 is not sent: it asks for nothing).
    case historyRequest(room: RoomID, sinceMilliseconds: UInt64, limit: UInt32? = nil)
    /// 0x07 (version 2). "Of `room`'s recent messages I hold, from these authors, these runs of sequences":
    /// a member sends it to each member it connects to, which answers with a signed history of what the
    /// sender lacks (relay for absent members), none older than `since_ms` (when the sender joined the
    /// room: what it missed as a member). `room (u8 len) | since_ms u64 | count u16 (<= 1024)
    /// | runs, each: author_id (u8 len, 52) | first u64 | last u64`.
    case syncRequest(SyncRequest)
    /// 0x08 (sent with the ignorable flag 0x80: an older peer skips it). The sender's presence: "I am
    /// available / away / busy (`text`), with my hand raised in these rooms (of those we share)".
    /// `availability u8 (0 available, 1 away, 2 busy) | text (u8 len, UTF-8, one line, at most 128 bytes) |
    /// count u8 (<= 64) | rooms, each (u8 len)`.
    case presence(Presence)
    /// 0x09 (sent with the ignorable flag 0x80). Entries of a room's metadata, each signed by its author:
    /// `room (u8 len) | count u8 (<= 64) | entries, each: key (u8 len, 1-64 of A-Z a-z 0-9 . _ -) |
    /// deleted u8 (0, 1) | value (u16 len, UTF-8, at most 4096 bytes) | version u64 | timestamp_ms u64 |
    /// author_id (u8 len, 52) | author_key [33] | signature [64]` (`Envelope.metaBytes`).
    case roomMeta(RoomMeta)
    /// 0x0A (sent with the ignorable flag 0x80, unreliably). "I am typing in `room`" (for the next 5 s).
    /// `room (u8 len)`.
    case typing(RoomID)
    /// 0x0B (sent with the ignorable flag 0x80). Every topic the sender subscribes to in `room` (the
    /// whole set: it replaces what the sender said before; none: it subscribes to nothing there).
    /// `room (u8 len) | count u8 (<= 64) | topics, each (u8 len, 1-64 of A-Z a-z 0-9 . _ -)`.
    case topicSubscriptions(TopicSubscriptions)
    /// 0x0C (sent with the ignorable flag 0x80; flag 0x01 = reliable: never dropped when the
    /// connection's output is full). A message on a topic of `room`, for a subscriber.
    /// `room (u8 len) | topic (u8 len) | sequence u64 | text (u16 len, UTF-8, one line, at most 1024 bytes)`.
    case topicMessage(TopicMessage)
    /// 0x10. Flag 0x01 = reliable, 0x02 = signed (version 2), 0x04 = direct (sent to some members of the
    /// room only: never relayed, nor sent to newcomers). `message_id [16] | room (u8 len) | sequence u64 |
    /// timestamp_ms u64 | kind u8 | body (u32 len, UTF-8, at most 64 KiB)`, and if signed `author_key [33] |
    /// signature [64]` (`Signature`: the author is the connection's peer); flag 0x08 = sealed (version 4):
    /// instead `seal_id [16] | leaf_index u16` (`SealedLeaf`: the leaf of a SEAL the author sent
    /// ahead of it on this connection).
    case message(Message)
    /// 0x12 (version 4; a connection below version 4 refuses it). An
    /// author's one signature over a batch of its messages in a room (`Seal`).
    case seal(Seal)
    /// 0x11. `count u16 | message_id [16] * count` (at most 1024 ids).
    case ack([WireID])
    /// 0x30. Opens a named byte stream to the peer. `stream_id [16] | name (u8 len, 1-64 of A-Z a-z 0-9
    /// . _ -) | credit u32` (bytes the opener accepts before it grants more).
    case streamOpen(StreamOpen)
    /// 0x31. The stream is taken. `stream_id [16] | credit u32`.
    case streamAccept(id: WireID, credit: UInt32)
    /// 0x32. Bytes of the stream, within the credit the other side granted. `stream_id [16] | data (u32
    /// len, at most 256 KiB)`.
    case streamData(id: WireID, data: ByteBuffer)
    /// 0x33. The sender of this frame takes `bytes` more. `stream_id [16] | bytes u32`.
    case streamCredit(id: WireID, bytes: UInt32)
    /// 0x34. `stream_id [16] | status u8 (0 end of data: this side sends no more, 1 refused, 2 aborted)
    /// | text (u16 len, UTF-8, at most 1 KiB)`.
    case streamEnd(StreamEnd)
    /// 0x40. A file (or a room's history) offered to the receiver. `resource_id [16] | room (u8 len, empty:
    /// none) | kind u8 (0 file, 1 history) | name (u16 len, bytes as the sender has them: the receiver
    /// makes them safe) | size u64 | sha256 [32] | mtime_ms u64`.
    case resourceOffer(ResourceOffer)
    /// 0x41. The receiver takes the resource from `offset` (what it already holds, verified): sent once
    /// to accept, then again as progress (flow control: the sender keeps at most a window past it).
    /// `resource_id [16] | offset u64`.
    case resourceAccept(ResourceAccept)
    /// 0x42. `resource_id [16] | offset u64 | data (u32 len, at most 256 KiB)`.
    case resourceChunk(ResourceChunk)
    /// 0x44. The SHA-256 of a resource offered with the "digest follows" flag, sent by the sender once
    /// it has read the whole file (it hashes while sending). `resource_id [16] | sha256 [32]`.
    case resourceDigest(id: WireID, sha256: [UInt8])
    /// 0x43. The end of a resource, from either side: `resource_id [16] | status u8 (0 complete and
    /// verified, 1 refused, 2 cancelled, 3 failed) | text (u16 len, UTF-8, at most 1 KiB)`.
    case resourceEnd(ResourceEnd)
    /// 0x45 (sent with the ignorable flag 0x80). "Send me the file of `room` whose SHA-256 is this, if you
    /// hold it" (a file shared in the room, `SharedFile`): answered with a RESOURCE_OFFER of kind 3 under
    /// `request_id`, or a RESOURCE_END refused. `request_id [16] | room (u8 len) | sha256 [32]`.
    case fileRequest(FileRequest)
    /// 0x20 (ping) and 0x21 (pong). `nonce u64`.
    case ping(UInt64)
    case pong(UInt64)
    /// 0x2F. `reason u8 | text (u16 len, UTF-8, at most 1 KiB)`. The sender closes after it.
    case goodbye(Goodbye)
    /// A frame of a type this version does not know, sent with the ignorable flag (0x80): skipped.
    case ignored(type: UInt8)

    public enum FrameType: UInt8, Sendable {
        case hello = 0x01, invite = 0x02, inviteReply = 0x03, roomMembers = 0x04, roomLeave = 0x05, historyRequest = 0x06, syncRequest = 0x07, presence = 0x08, roomMeta =
            0x09, typing = 0x0A
        case topicSubscriptions = 0x0B, topicMessage = 0x0C
        case message = 0x10, ack = 0x11, seal = 0x12
        case ping = 0x20, pong = 0x21, goodbye = 0x2F
        case streamOpen = 0x30, streamAccept = 0x31, streamData = 0x32, streamCredit = 0x33, streamEnd = 0x34
        case resourceOffer = 0x40, resourceAccept = 0x41, resourceChunk = 0x42, resourceEnd = 0x43, resourceDigest = 0x44, fileRequest = 0x45
    }

    public static let ignorableFlag: UInt8 = 0x80
    public static let reliableFlag: UInt8 = 0x01
    /// On MESSAGE (version 2): the author's key and signature follow the body.
    public static let signedFlag: UInt8 = 0x02
    /// On MESSAGE: sent to some members of the room only; receivers neither relay it nor hand it to newcomers.
    public static let directFlag: UInt8 = 0x04
    /// On MESSAGE (version 4): the seal's id and the message's leaf index follow the body, not a
    /// key and a signature (with `signedFlag` too, the frame is an error).
    public static let sealedFlag: UInt8 = 0x08
    /// ROOM_MEMBERS: each member carries a proof field; ROOM_LEAVE: a `SignedLeave` follows (version 3).
    public static let proofsFlag: UInt8 = 0x02
    /// ROOM_META: no entries, a digest follows.
    public static let digestFlag: UInt8 = 0x01
    /// The protocol versions this implementation speaks: 1 (unsigned messages), 2 (signed envelopes), 3
    /// (membership proofs, signed leaves) and 4 (seals: one signature per batch of messages).
    public static let versions: ClosedRange<UInt16> = 1...4
    /// The first version whose ROOM_MEMBERS carry membership proofs and whose ROOM_LEAVE may be signed
    /// (flag 0x02): a version 2 peer reads neither.
    public static let proofsVersion: UInt16 = 3
    /// The first version with seals (SEAL, a sealed MESSAGE, a sealed history): a connection below it
    /// refuses their frames.
    public static let sealsVersion: UInt16 = 4

    /// The lowest protocol version a connection must speak to carry this frame, when it is above 1 and
    /// the engine does not check it itself: a SEAL, a sealed MESSAGE or a sealed history needs `sealsVersion`. A peer that
    /// sends one on a connection below it is closed with a protocol error (`WireError.aboveVersion`).
    public var minimumVersion: UInt16 {
        switch self {
        case .seal: Self.sealsVersion
        case .message(let message) where message.sealed != nil: Self.sealsVersion
        case .resourceOffer(let offer) where offer.kind == .sealedHistory: Self.sealsVersion
        default: 1
        }
    }
    /// On HISTORY_REQUEST (version 2): `limit` follows.
    public static let limitFollowsFlag: UInt8 = 0x01
    /// On RESOURCE_OFFER: `sha256` is zeros; RESOURCE_DIGEST brings it later.
    public static let digestFollowsFlag: UInt8 = 0x01

    public struct Hello: Equatable, Sendable {
        public static let magic: [UInt8] = Array("LCHT".utf8)
        /// The capability of a connection that only measures (`lanchat ping`): the side that accepts it
        /// answers PING and nothing else, and never takes it as the peer's session link (a second link
        /// from a member would replace or be replaced by the first: one of the two would close).
        public static let probeCapability = "probe"
        public var minimumVersion: UInt16
        public var maximumVersion: UInt16
        public var maximumPayload: UInt32
        public var peerID: String
        public var name: String
        public var capabilities: [String]

        public init(
            minimumVersion: UInt16 = 1, maximumVersion: UInt16 = 1, maximumPayload: UInt32 = FrameLimits.standard.maximumPayload, peerID: String, name: String,
            capabilities: [String]
        ) {
            self.minimumVersion = minimumVersion
            self.maximumVersion = maximumVersion
            self.maximumPayload = maximumPayload
            self.peerID = peerID
            self.name = name
            self.capabilities = capabilities
        }
    }

    public struct Invite: Equatable, Sendable {
        public static let maximumContext = 64 * 1024
        public var id: WireID
        public var timeoutMilliseconds: UInt32
        public var room: RoomID
        public var context: [UInt8]

        public init(id: WireID, timeoutMilliseconds: UInt32, room: RoomID, context: [UInt8]) {
            self.id = id
            self.timeoutMilliseconds = timeoutMilliseconds
            self.room = room
            self.context = context
        }
    }

    public struct InviteReply: Equatable, Sendable {
        public enum Outcome: UInt8, Sendable { case accepted = 0, declined = 1, expired = 2, refused = 3 }
        public var id: WireID
        public var outcome: Outcome
        public var reason: String

        public init(id: WireID, outcome: Outcome, reason: String = "") {
            self.id = id
            self.outcome = outcome
            self.reason = reason
        }
    }

    /// A room member as another member knows it: enough to dial it without waiting for DNS-SD.
    public struct Member: Equatable, Sendable {
        public var peerID: String
        public var name: String
        public var port: UInt16
        public var addresses: [String]
        /// The member's own signed statement that it is in the room (version 2; ROOM_MEMBERS flag 0x02).
        public var proof: MembershipProof?

        public init(peerID: String, name: String, port: UInt16 = 0, addresses: [String] = [], proof: MembershipProof? = nil) {
            self.peerID = peerID
            self.name = name
            self.port = port
            self.addresses = addresses
            self.proof = proof
        }
    }

    /// A member's signature over `Envelope.membershipBytes`: "I, this key's owner, am in this room,
    /// invited by `inviter`, since `timestampMilliseconds`". Whoever relays it, it verifies on its own; a
    /// member cannot make one for an id whose key it does not hold.
    public struct MembershipProof: Equatable, Sendable {
        /// The peer id of the member that invited it; empty when it created the room or does not know.
        public var inviter: String
        public var timestampMilliseconds: UInt64
        public var signature: Signature

        public init(inviter: String, timestampMilliseconds: UInt64, signature: Signature) {
            self.inviter = inviter
            self.timestampMilliseconds = timestampMilliseconds
            self.signature = signature
        }
    }

    /// A member's signature over `Envelope.leaveBytes` (version 2; ROOM_LEAVE flag 0x02): it left the
    /// room at `timestampMilliseconds`. Members hand it on to the others.
    public struct SignedLeave: Equatable, Sendable {
        public var member: String
        public var timestampMilliseconds: UInt64
        public var signature: Signature

        public init(member: String, timestampMilliseconds: UInt64, signature: Signature) {
            self.member = member
            self.timestampMilliseconds = timestampMilliseconds
            self.signature = signature
        }
    }

    public struct RoomMembers: Equatable, Sendable {
        public static let maximumMembers = 1024
        public static let maximumAddresses = 8
        public var room: RoomID
        public var members: [Member]

        public init(room: RoomID, members: [Member]) {
            self.room = room
            self.members = members
        }
    }

    public struct SyncRequest: Equatable, Sendable {
        public static let maximumMarks = 1024
        /// Sequences `first...last` of one author, all held.
        public struct Mark: Equatable, Sendable {
            public var author: String
            public var first: UInt64
            public var last: UInt64
            public init(author: String, first: UInt64, last: UInt64) {
                self.author = author
                self.first = first
                self.last = last
            }
        }
        public var room: RoomID
        public var sinceMilliseconds: UInt64
        public var marks: [Mark]

        public init(room: RoomID, sinceMilliseconds: UInt64, marks: [Mark]) {
            self.room = room
            self.sinceMilliseconds = sinceMilliseconds
            self.marks = marks
        }
    }

    public struct Presence: Equatable, Sendable {
        public enum Availability: UInt8, Sendable, CaseIterable {
            case available = 0, away = 1, busy = 2
            public var name: String { "\(self)" }
            public init?(name: String) {
                guard let match = Self.allCases.first(where: { "\($0)" == name }) else { return nil }
                self = match
            }
        }
        public static let maximumText = 128
        public static let maximumHands = 64
        public var availability: Availability
        public var text: String
        /// Rooms (shared with the receiver) in which the sender's hand is raised.
        public var hands: [RoomID]

        public init(availability: Availability = .available, text: String = "", hands: [RoomID] = []) {
            self.availability = availability
            self.text = text
            self.hands = hands
        }
    }

    public struct MetaEntry: Equatable, Sendable {
        public static let maximumKey = 64
        public static let maximumValue = 4096
        public var key: String
        public var value: String
        public var deleted: Bool
        public var version: UInt64
        public var timestampMilliseconds: UInt64
        public var author: String
        public var signature: Signature

        public init(key: String, value: String, deleted: Bool, version: UInt64, timestampMilliseconds: UInt64, author: String, signature: Signature) {
            self.key = key
            self.value = value
            self.deleted = deleted
            self.version = version
            self.timestampMilliseconds = timestampMilliseconds
            self.author = author
            self.signature = signature
        }

        /// A key: 1-64 of A-Z a-z 0-9 . _ -
        public static func isKey(_ key: String) -> Bool {
            StreamName(key) != nil  // the same characters and length as a stream's name
        }
    }

    public struct RoomMeta: Equatable, Sendable {
        public static let maximumEntries = 64
        public var room: RoomID
        public var entries: [MetaEntry]
        /// Flag 0x01 (no entries): a digest of everything the sender holds for the room (resync); a
        /// receiver that holds otherwise sends all it holds.
        public var digest: UInt64?

        public init(room: RoomID, entries: [MetaEntry], digest: UInt64? = nil) {
            self.room = room
            self.entries = entries
            self.digest = digest
        }
    }

    public struct TopicSubscriptions: Equatable, Sendable {
        public static let maximumTopics = 64
        public var room: RoomID
        public var topics: [String]

        public init(room: RoomID, topics: [String]) {
            self.room = room
            self.topics = topics
        }
    }

    public struct TopicMessage: Equatable, Sendable {
        public static let maximumText = 1024
        public var room: RoomID
        public var topic: String
        /// Per publisher and topic, from 1: a receiver drops what is not newer than what it last had.
        public var sequence: UInt64
        public var text: String
        public var reliable: Bool

        public init(room: RoomID, topic: String, sequence: UInt64, text: String, reliable: Bool) {
            self.room = room
            self.topic = topic
            self.sequence = sequence
            self.text = text
            self.reliable = reliable
        }

        /// A topic's name: 1-64 of A-Z a-z 0-9 . _ -
        public static func isTopic(_ name: String) -> Bool { StreamName(name) != nil }
    }

    public struct RoomLeave: Equatable, Sendable {
        public var room: RoomID
        public var text: String
        /// The leaver's signature (version 2): it may be about another member than the sender (relayed).
        public var signed: SignedLeave?

        public init(room: RoomID, text: String = "", signed: SignedLeave? = nil) {
            self.room = room
            self.text = text
            self.signed = signed
        }
    }

    public struct Message: Equatable, Sendable {
        public enum Kind: UInt8, Sendable { case text = 0, file = 1, system = 2 }
        public static let maximumBody = 64 * 1024
        public var id: WireID
        public var room: RoomID
        public var sequence: UInt64
        public var timestampMilliseconds: UInt64
        public var kind: Kind
        public var body: String
        public var reliable: Bool
        /// The author's signature (version 2; nil on a version 1 connection).
        public var signature: Signature?
        /// Sent to some members of the room only (`lanchat send --to`).
        public var direct: Bool
        /// Where the author sealed it (version 4; nil: not sealed). A message is signed or sealed,
        /// not both.
        public var sealed: SealedLeaf?

        public init(
            id: WireID, room: RoomID, sequence: UInt64, timestampMilliseconds: UInt64, kind: Kind, body: String, reliable: Bool,
            signature: Signature? = nil, direct: Bool = false, sealed: SealedLeaf? = nil
        ) {
            self.sealed = sealed
            self.id = id
            self.room = room
            self.sequence = sequence
            self.timestampMilliseconds = timestampMilliseconds
            self.kind = kind
            self.body = body
            self.reliable = reliable
            self.signature = signature
            self.direct = direct
        }
    }

    public struct StreamOpen: Equatable, Sendable {
        public var id: WireID
        public var name: StreamName
        public var credit: UInt32

        public init(id: WireID, name: StreamName, credit: UInt32) {
            self.id = id
            self.name = name
            self.credit = credit
        }
    }

    public static let maximumStreamData = 256 * 1024

    public struct StreamEnd: Equatable, Sendable {
        public enum Status: UInt8, Sendable { case finished = 0, refused = 1, aborted = 2 }
        public var id: WireID
        public var status: Status
        public var text: String

        public init(id: WireID, status: Status, text: String = "") {
            self.id = id
            self.status = status
            self.text = text
        }
    }

    public struct Goodbye: Equatable, Sendable {
        public enum Reason: UInt8, Sendable { case shutdown = 0, leaving = 1, protocolError = 2, timeout = 3, refused = 4 }
        public var reason: Reason
        public var text: String

        public init(reason: Reason, text: String = "") {
            self.reason = reason
            self.text = text
        }
    }
}
