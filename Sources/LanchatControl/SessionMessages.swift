/// Control API types for sessions: invitations, rooms, members, messages (see docs/control-api.md).

/// An invitation this daemon received.
public struct InvitationInfo: Codable, Equatable, Sendable {
    /// 32 hex characters; any unique prefix works for `accept` and `decline`.
    public var id: String
    public var from: String
    public var fromId: String
    public var room: String
    /// The inviter's message, when its context is text.
    public var message: String?
    /// The code both people can compare (also shown by `lanchat ping`).
    public var shortCode: String
    public var receivedAt: String
    public var expiresAt: String
    /// In `invitation_closed` events: accepted, declined, expired, withdrawn, or "accepted automatically".
    public var outcome: String?

    public init(
        id: String, from: String, fromId: String, room: String, message: String?, shortCode: String, receivedAt: String, expiresAt: String, outcome: String? = nil
    ) {
        self.id = id
        self.from = from
        self.fromId = fromId
        self.room = room
        self.message = message
        self.shortCode = shortCode
        self.receivedAt = receivedAt
        self.expiresAt = expiresAt
        self.outcome = outcome
    }
}

/// What became of an invitation we sent.
public struct InviteResult: Codable, Equatable, Sendable {
    public var id: String?
    public var peer: String
    public var peerId: String
    public var room: String
    /// `sent` (without `wait`), `accepted`, `declined`, `expired`, `unreachable`, `refused`, `already_member`.
    public var outcome: String
    public var reason: String?
    /// From the request to the outcome.
    public var elapsedMs: Double?

    public init(id: String?, peer: String, peerId: String, room: String, outcome: String, reason: String?, elapsedMs: Double? = nil) {
        self.id = id
        self.peer = peer
        self.peerId = peerId
        self.room = room
        self.outcome = outcome
        self.reason = reason
        self.elapsedMs = elapsedMs
    }
}

public struct MemberInfo: Codable, Equatable, Sendable {
    public var name: String
    public var id: String
    public var shortId: String
    /// `connected`, `connecting`, `not_connected`.
    public var state: String
    /// `available`, `away`, `busy`; nil: not told (an older lanchat).
    public var availability: String?
    public var statusText: String?
    /// In `members`: whether its hand is raised in that room.
    public var hand: Bool?
    /// In `members` and `rooms`: whether it administers the room.
    public var admin: Bool?

    public init(name: String, id: String, shortId: String, state: String) {
        self.name = name
        self.id = id
        self.shortId = shortId
        self.state = state
    }
}

public struct RoomInfo: Codable, Equatable, Sendable {
    public var room: String
    /// The other members (this daemon is always a member of its rooms).
    public var members: [MemberInfo]
    /// Whether this daemon administers the room.
    public var administered: Bool?

    public init(room: String, members: [MemberInfo]) {
        self.room = room
        self.members = members
    }
}

/// A message as history and `watch` show it.
public struct MessageInfo: Codable, Equatable, Sendable {
    public var id: String
    public var room: String
    /// Display name of the sender; `*` for system notices.
    public var sender: String
    public var senderId: String
    public var sequence: Int
    /// Milliseconds since the epoch, at the sender.
    public var timestampMs: Int
    public var time: String
    /// `text`, `file` or `system`.
    public var kind: String
    public var text: String
    /// Only in events: we sent it.
    public var outgoing: Bool?
    /// Only in events: sent reliably.
    public var reliable: Bool?
    /// Text and file messages: signed by its author, and the signature verified (wire version 2).
    /// Absent for system notices.
    public var signed: Bool?
    /// A file message: the file shared in the room, as announced (its `text` is the announcement).
    public var file: SharedFileInfo?

    public init(
        id: String, room: String, sender: String, senderId: String, sequence: Int, timestampMs: Int, time: String, kind: String, text: String,
        outgoing: Bool? = nil, reliable: Bool? = nil, signed: Bool? = nil
    ) {
        self.id = id
        self.room = room
        self.sender = sender
        self.senderId = senderId
        self.sequence = sequence
        self.timestampMs = timestampMs
        self.time = time
        self.kind = kind
        self.text = text
        self.outgoing = outgoing
        self.reliable = reliable
        self.signed = signed
    }
}

public struct SendResult: Codable, Equatable, Sendable {
    public var id: String
    public var room: String
    public var recipients: Int
    /// Written to a live connection now; reliable messages reach the others when they are back.
    public var sentNow: Int
    /// Unreliable messages not sent (recipient not connected or its connection full).
    public var dropped: Int
    public var reliable: Bool

    public init(id: String, room: String, recipients: Int, sentNow: Int, dropped: Int, reliable: Bool) {
        self.id = id
        self.room = room
        self.recipients = recipients
        self.sentNow = sentNow
        self.dropped = dropped
        self.reliable = reliable
    }
}

/// A member's state change, in `member` events.
public struct MemberEvent: Codable, Equatable, Sendable {
    public var room: String
    public var name: String
    public var id: String
    public var state: String
    /// `left` events: why, as a stable code (`left`, `removed`, `closed`, `not_a_member`; a lost
    /// connection: `timed_out`, `lost`, `duplicate`, `refused`, `shutdown`, `protocol_error`, `leaving`,
    /// `closed_here`, `not_reading`), a sentence, and whether the member is out of the room (`fatal`)
    /// or only disconnected.
    public var code: String?
    public var reason: String?
    public var fatal: Bool?

    public init(room: String, name: String, id: String, state: String) {
        self.room = room
        self.name = name
        self.id = id
        self.state = state
    }
}

/// A file transfer, in `transfers` and in `transfer` events.
/// A file shared in a room (`lanchat files`).
public struct SharedFileInfo: Codable, Equatable, Sendable {
    /// The announcement's message id (`lanchat fetch` takes it, or a unique end of it, 4 digits or more:
    /// the CLI shows its last 8, since a message id begins with its time).
    public var id: String
    public var room: String
    public var name: String
    public var size: Int
    public var sha256: String
    /// The media type its first bytes tell (`image/png`, `application/octet-stream`...).
    public var type: String
    /// An image: announced as one, and, when kept here, its content is one.
    public var image: Bool
    /// Its content is kept here (and served to members who ask). Only in `files` and `share` answers (not
    /// in messages, whose `file` says what was announced).
    public var held: Bool?
    /// Who shared it.
    public var from: String
    public var fromId: String
    public var timestampMs: Int
    public var time: String

    public init(
        id: String, room: String, name: String, size: Int, sha256: String, type: String, image: Bool, held: Bool?,
        from: String, fromId: String, timestampMs: Int, time: String
    ) {
        self.id = id
        self.room = room
        self.name = name
        self.size = size
        self.sha256 = sha256
        self.type = type
        self.image = image
        self.held = held
        self.from = from
        self.fromId = fromId
        self.timestampMs = timestampMs
        self.time = time
    }
}

public struct TransferEntry: Codable, Equatable, Sendable {
    /// `complete`, `refused`, `failed` or `cancelled`: nothing more will come of it.
    public var hasEnded: Bool { ["complete", "refused", "failed", "cancelled"].contains(state) }

    public var id: String
    /// `outgoing` or `incoming`.
    public var direction: String
    public var peer: String
    public var peerId: String
    public var name: String
    public var size: Int
    public var done: Int
    /// Bytes per second since it started.
    public var rate: Double
    /// `offered`, `active`, `waiting` / `interrupted` (the connection dropped: resumes when the peer is
    /// back), `complete`, `refused`, `failed`, `cancelled`.
    public var state: String
    public var path: String?
    public var error: String?
    /// Outgoing: bytes sent more than once because of resumes (absent when none).
    public var resent: Int?

    public init(
        id: String, direction: String, peer: String, peerId: String, name: String, size: Int, done: Int, rate: Double, state: String,
        path: String?, error: String?, resent: Int? = nil
    ) {
        self.id = id
        self.direction = direction
        self.peer = peer
        self.peerId = peerId
        self.name = name
        self.size = size
        self.done = done
        self.rate = rate
        self.state = state
        self.path = path
        self.error = error
        self.resent = resent
    }
}

/// A named stream, as `stream` and `stream-accept` answer.
public struct StreamEntry: Codable, Equatable, Sendable {
    public var id: String
    public var peer: String
    public var peerId: String
    public var name: String

    public init(id: String, peer: String, peerId: String, name: String) {
        self.id = id
        self.peer = peer
        self.peerId = peerId
        self.name = name
    }
}

/// A member's presence: availability, its line of text, and the rooms where its hand is raised.
public struct PresenceInfo: Codable, Equatable, Sendable {
    public var name: String
    public var id: String
    public var shortId: String
    /// `available`, `away`, `busy`.
    public var availability: String
    public var text: String
    public var hands: [String]

    public init(name: String, id: String, shortId: String, availability: String, text: String, hands: [String]) {
        self.name = name
        self.id = id
        self.shortId = shortId
        self.availability = availability
        self.text = text
        self.hands = hands
    }
}

/// One key of a room's metadata: its value (absent when deleted), version, and who wrote it when.
public struct MetaInfo: Codable, Equatable, Sendable {
    public var room: String
    public var key: String
    public var value: String?
    public var deleted: Bool
    public var version: UInt64
    public var author: String
    public var authorId: String
    public var timeMs: Int64
    public var time: String

    public init(room: String, key: String, value: String?, deleted: Bool, version: UInt64, author: String, authorId: String, timeMs: Int64, time: String) {
        self.room = room
        self.key = key
        self.value = value
        self.deleted = deleted
        self.version = version
        self.author = author
        self.authorId = authorId
        self.timeMs = timeMs
        self.time = time
    }
}

/// A message on a topic (a `topic` event), or what `topic-pub` did (`sequence`, `sent`, `dropped`).
public struct TopicInfo: Codable, Equatable, Sendable {
    public var room: String
    public var topic: String
    public var sequence: UInt64
    /// Events: the publisher.
    public var from: String?
    public var fromId: String?
    public var text: String?
    public var reliable: Bool?
    /// `topic-pub`: subscribers it was written to, and dropped for (unreliable, their connection full).
    public var sent: Int?
    public var dropped: Int?

    public init(room: String, topic: String, sequence: UInt64) {
        self.room = room
        self.topic = topic
        self.sequence = sequence
    }
}
