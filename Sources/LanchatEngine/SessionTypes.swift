import LanchatCore
import LanchatWire
import Synchronization

/// A peer as a session sees it (Multipeer Connectivity's `MCPeerID`): its id (key fingerprint) and
/// the display name it announced.
public struct SessionPeer: Hashable, Sendable, CustomStringConvertible {
    public let id: PeerID
    public let name: String

    public init(id: PeerID, name: String) {
        self.id = id
        self.name = name
    }

    public var description: String { name }
}

/// A member's connection state (`MCSessionState`).
public enum SessionPeerState: String, Sendable {
    case notConnected = "not_connected"
    case connecting
    case connected
}

/// An invitation this node received and has not answered yet (the advertiser's side).
public struct IncomingInvitation: Sendable, Equatable {
    /// Written as 32 hex characters; people may type any unique prefix.
    public let id: WireID
    public let from: SessionPeer
    public let room: RoomID
    /// The inviter's context payload (`lanchat invite --message` puts UTF-8 text there).
    public let context: [UInt8]
    /// The code both people can compare ("4821-0937").
    public let shortCode: String
    /// Milliseconds since the epoch.
    public let receivedAt: Int64
    public let expiresAt: Int64

    /// The context as text, if it is valid UTF-8 without control characters other than newline/tab.
    public var message: String? {
        guard !context.isEmpty, let text = String(validating: context, as: UTF8.self),
            !text.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\n" && $0 != "\t") || $0.value == 0x7f })
        else { return nil }
        return text
    }
}

extension IncomingInvitation {
    /// How an invitation this node received ended. The raw value is what the control API sends as the
    /// `invitation_closed` event's `outcome`: never change one.
    public enum Outcome: String, CaseIterable, Sendable, CustomStringConvertible {
        case accepted
        /// Accepted because we had invited the inviter to the same room.
        case acceptedMutually = "accepted (both invited each other)"
        /// Accepted by the `auto-accept` setting.
        case acceptedAutomatically = "accepted automatically"
        /// Accepted without asking: we are in the room already.
        case acceptedAlreadyMember = "accepted (already in the room)"
        case declined
        case expired
        /// The inviter's connection ended before we answered.
        case withdrawn

        /// The wire string, so that `"\(outcome)"` says what the control API says.
        public var description: String { rawValue }
    }
}

/// Why a member is out of a room or lost its connection (`SessionEvent.memberLeft`). The raw value is
/// what the control API sends as the `left` event's `code`: never change one.
public enum MemberLeftCode: String, CaseIterable, Sendable, CustomStringConvertible {
    // Out of the room (`fatal`)
    /// It left (or we did).
    case left
    /// An administrator removed it (or us).
    case removed
    /// An administrator closed the room.
    case closed
    /// It says we are not a member of the room.
    case notAMember = "not_a_member"

    // The connection ended (not fatal): `SessionStateMachine.code(of:)`
    /// No frame for the heartbeat timeout.
    case timedOut = "timed_out"
    /// The connection closed without a GOODBYE.
    case lost
    /// The same identity connected again, from here or another host.
    case duplicate
    /// The peer refused us (a key changed, for example).
    case refused
    /// The peer shut down.
    case shutdown
    /// Something invalid was sent.
    case protocolError = "protocol_error"
    /// The peer said GOODBYE for another reason.
    case leaving
    /// We closed the connection.
    case closedHere = "closed_here"
    /// We closed it: the peer stopped reading what we sent.
    case notReading = "not_reading"

    /// The wire string, so that `"\(code)"` says what the control API says.
    public var description: String { rawValue }
}

/// How an invitation we sent ended (the browser's side).
public enum InviteOutcome: Sendable, Equatable, CustomStringConvertible {
    case accepted
    case declined(String)
    case expired
    /// The peer could not be reached (no address, connection failed, encryption preferences differ).
    case unreachable(String)
    /// The peer refused us (for example: our key changed since it last saw us).
    case refused(String)
    /// The peer is already a member of the room and connected.
    case alreadyMember

    /// A stable word for scripts: accepted, declined, expired, unreachable, refused, already_member.
    public var code: String {
        switch self {
        case .accepted: "accepted"
        case .declined: "declined"
        case .expired: "expired"
        case .unreachable: "unreachable"
        case .refused: "refused"
        case .alreadyMember: "already_member"
        }
    }

    public var reason: String? {
        switch self {
        case .declined(let text), .unreachable(let text), .refused(let text): text.isEmpty ? nil : text
        default: nil
        }
    }

    public var description: String { reason.map { "\(code): \($0)" } ?? code }
}

/// A message of a room, received, sent, or a system notice ("h2 joined").
public struct ChatMessage: Sendable, Equatable {
    public var stored: StoredMessage
    public var reliable: Bool
    /// We sent it.
    public var outgoing: Bool

    public init(stored: StoredMessage, reliable: Bool, outgoing: Bool) {
        self.stored = stored
        self.reliable = reliable
        self.outgoing = outgoing
    }
}

/// What a node reports (`MCSessionDelegate` and the advertiser/browser delegates, as one stream).
public enum SessionEvent: Sendable, Equatable {
    case invitation(IncomingInvitation)
    /// An incoming invitation ended: accepted, declined, expired, withdrawn.
    case invitationClosed(IncomingInvitation, outcome: IncomingInvitation.Outcome)
    /// An invitation we sent ended.
    case inviteOutcome(id: WireID, peer: SessionPeer, room: RoomID, outcome: InviteOutcome)
    case memberState(room: RoomID, peer: SessionPeer, state: SessionPeerState)
    /// A member (we, if `peer` is us) is out of a room (`fatal`: `left`, `removed`, `closed`,
    /// `notAMember`), or lost its connection (not fatal: `timedOut`, `lost`, `duplicate`, `refused`,
    /// `shutdown`, `protocolError`, `leaving`, ...): why, as a stable `code`, and a sentence.
    case memberLeft(room: RoomID, peer: SessionPeer, code: MemberLeftCode, text: String, fatal: Bool)
    case message(ChatMessage)
    /// A peer's identity needs a person's attention: a known name with a key not met before, or a plaintext claim of a keyed id.
    case security(peer: SessionPeer, text: String)
    /// A file transfer started, progressed, or ended.
    case transfer(TransferInfo)
    /// A peer's presence changed (availability, text, raised hands); `before`: what it was, if told.
    case presence(peer: SessionPeer, state: SessionStateMachine.PresenceState, before: SessionStateMachine.PresenceState?)
    /// A key of a room's metadata was set or deleted (here or by a member: `authorName`).
    case metadata(room: String, entry: WireFrame.MetaEntry, authorName: String)
    /// A member is typing in a room (for the next few seconds).
    case typing(room: RoomID, peer: SessionPeer)
    /// A message on a topic we subscribe to (the node hands it to its subscribers, not to `events`).
    case topicMessage(SessionStateMachine.TopicDelivery)
}

/// A file transfer as people and programs see it.
public struct TransferInfo: Sendable, Equatable {
    public enum Direction: String, Sendable { case outgoing, incoming }
    /// `offered`, `active`, `waiting` (sender: the connection dropped,
    /// resumes when the peer is back), `interrupted` (receiver: the same), `complete`, `refused`, `failed`, `cancelled`.
    public var state: TransferState
    /// The transfer's id (a shared file's fetch goes by its fetch's id).
    public var id: WireID
    public var direction: Direction
    public var peer: SessionPeer
    /// The name offered (outgoing: the file's name; incoming: the safe name it will get).
    public var name: String
    public var size: UInt64
    public var done: UInt64
    /// Bytes per second since the transfer started.
    public var rate: Double
    /// Incoming: where the file was placed; outgoing: the file sent.
    public var path: String?
    public var error: String?
    /// Outgoing: bytes sent more than once (resumes after a drop or a restart).
    public var resent: UInt64 = 0

    public init(
        state: TransferState, id: WireID, direction: Direction, peer: SessionPeer, name: String, size: UInt64, done: UInt64, rate: Double,
        path: String? = nil, error: String? = nil, resent: UInt64 = 0
    ) {
        self.state = state
        self.id = id
        self.direction = direction
        self.peer = peer
        self.name = name
        self.size = size
        self.done = done
        self.rate = rate
        self.path = path
        self.error = error
        self.resent = resent
    }
}

/// Where a peer can be reached, as discovery (or another member) last saw it.
public struct PeerAddressHint: Sendable, Equatable {
    public var name: String
    public var port: Int
    public var addresses: [String]
    public var encryption: EncryptionPreference?

    public init(name: String, port: Int, addresses: [String], encryption: EncryptionPreference?) {
        self.name = name
        self.port = port
        self.addresses = addresses
        self.encryption = encryption
    }
}

/// Discovery's current view of the peers, shared with the session layer without an actor hop.
/// `generation` changes when a peer (re)appears, so that reconnection can try again at once.
public final class PeerDirectory: Sendable {
    private struct Entry {
        var hint: PeerAddressHint
        var generation: Int
    }

    private let entries = Mutex<[PeerID: Entry]>([:])
    private let counter = Atomic<Int>(0)

    public init() {}

    public func update(_ id: PeerID, _ hint: PeerAddressHint) {
        let generation = counter.add(1, ordering: .relaxed).newValue
        entries.withLock { entries in
            let changedAddress = entries[id].map { $0.hint.addresses != hint.addresses || $0.hint.port != hint.port } ?? true
            entries[id] = Entry(hint: hint, generation: changedAddress ? generation : entries[id]!.generation)
        }
    }

    public func remove(_ id: PeerID) {
        _ = entries.withLock { $0.removeValue(forKey: id) }
    }

    public func lookup(_ id: PeerID) -> (hint: PeerAddressHint, generation: Int)? {
        entries.withLock { $0[id].map { ($0.hint, $0.generation) } }
    }

    /// Every peer currently known with `name`.
    public func peers(named name: String) -> [PeerID] {
        entries.withLock { $0.filter { $0.value.hint.name == name }.map(\.key) }
    }
}

/// Errors the node's API reports to its caller: a stable code (compared by programs and tests) and a
/// message a person can act on.
public struct SessionError: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    /// What went wrong, for programs. The raw value is what the control API sends as `error.code`
    /// (`ControlError(_:)` in the daemon passes it through unchanged): never change one.
    public enum Code: String, CaseIterable, Sendable, CustomStringConvertible {
        /// The wire string, so that `"\(code)"` says what the control API says.
        public var description: String { rawValue }

        // The request itself
        /// The request is malformed: an empty or control-character message, a bad stream name, a file id too short.
        case badRequest = "bad_request"
        /// A topic name is not 1-64 of `[A-Za-z0-9._-]`.
        case badTopic = "bad_topic"
        /// A topic message is not one line of text without control characters.
        case badText = "bad_text"
        /// A metadata key is not 1-64 of `[A-Za-z0-9._-]`.
        case badKey = "bad_key"
        /// A metadata value holds control characters other than newline and tab.
        case badValue = "bad_value"
        /// A prefix or id end matches several invitations or shared files: give more of it.
        case ambiguous
        /// A chat message or topic message is longer than the protocol allows.
        case tooLong = "too_long"
        /// A value, a room's metadata or a file is over its size limit.
        case tooLarge = "too_large"

        // Rooms, members, invitations
        /// This daemon is not in that room.
        case unknownRoom = "unknown_room"
        /// That peer is not a member of the room.
        case unknownMember = "unknown_member"
        /// A recipient of a message is not a member of the room.
        case notAMember = "not_a_member"
        /// Only an administrator of the room may do that (the message names them).
        case notAdmin = "not_admin"
        /// Not allowed: the creator cannot be removed or demoted nor its keys changed, or a connection was refused.
        case refused
        /// The peer was removed from the room and only an administrator (or the creator) can invite it back.
        case removed
        /// No pending invitation has that id (it expired or was answered).
        case unknownInvitation = "unknown_invitation"

        // Metadata and topics
        /// The room's metadata has no such key.
        case unknownKey = "unknown_key"
        /// The key is the room's administration, changed only through remove, close and admin.
        case reservedKey = "reserved_key"
        /// The key is not at the version the writer said (`if_version`).
        case versionMismatch = "version_mismatch"
        /// The key has reached its last version: write another key.
        case tooManyVersions = "too_many_versions"
        /// The writer holds as many keys in the room as it may: delete one first.
        case tooManyKeys = "too_many_keys"
        /// The room's metadata needs wire protocol version 2 and this daemon speaks version 1 only.
        case unsupported
        /// The room has as many topics subscribed as it may.
        case tooManyTopics = "too_many_topics"
        /// Too many topic messages a second in the room: slow down.
        case rateLimited = "rate_limited"

        // Peers and connections
        /// The peer is not connected (or could not be dialled), so it cannot be asked.
        case unreachable
        /// Too much is under way already (fetches, transfers, streams, waiting programs): try again later.
        case busy
        /// The daemon is stopping.
        case stopped

        // Files and transfers
        /// The file cannot be read or sent: not a regular file, unreadable, or it changed while being read.
        case badFile = "bad_file"
        /// A file could not be written or placed (the download or shared-files directory).
        case writeFailed = "write_failed"
        /// No active transfer has that id.
        case unknownTransfer = "unknown_transfer"
        /// The transfer is complete and being put in place: too late to cancel it.
        case tooLate = "too_late"
        /// No shared file has that id.
        case notFound = "not_found"
        /// The copy of a shared file kept here no longer matches its SHA-256.
        case corrupt
        /// The room's history could not be read to send it to a new member.
        case history

        // Streams
        /// The peer refused the stream, or did not answer.
        case streamRefused = "stream_refused"
        /// The stream was aborted (by either end, or its connection ended).
        case streamAborted = "stream_aborted"
        /// The stream was finished: nothing more can be written to it.
        case streamFinished = "stream_finished"

        // The store
        /// The history database failed: what was asked was not (or not wholly) stored.
        case storage
    }
}

/// Why a connection to a peer ended.
public enum PeerCloseReason: Equatable, Sendable, CustomStringConvertible {
    /// The peer said GOODBYE.
    case goodbye(WireFrame.Goodbye.Reason, String)
    /// No frame from the peer for the heartbeat timeout.
    case timedOut
    /// The peer sent something invalid.
    case protocolError(String)
    /// The connection closed without a GOODBYE (the peer crashed, or the network failed).
    case lost
    /// We closed it.
    case local
    /// We closed it: the peer stopped reading what we sent (its output budget was spent or nothing of
    /// it was written for the stall time).
    case notReading(String)

    public var description: String {
        switch self {
        case .goodbye(.shutdown, _): return "shut down"
        case .goodbye(.leaving, _): return "left"
        case .goodbye(.timeout, _): return "timed out"
        case .goodbye(_, let text): return text.isEmpty ? "closed the connection" : text
        case .timedOut: return "timed out"
        case .protocolError(let text): return "protocol error: \(text)"
        case .lost: return "connection lost"
        case .local: return "disconnected"
        case .notReading(let text): return "stopped reading: \(text)"
        }
    }
}

/// What history a newcomer asks its inviter for (as XMPP's multi-user chat lets a joiner choose):
/// what the inviter sends (its `history-for-newcomers`), at most the last `limit` messages, those since a
/// time, or nothing (`limit` 0). The inviter's own bound applies on top.
public struct HistoryScope: Equatable, Sendable {
    public var limit: Int?
    public var sinceMilliseconds: Int64?

    public init(limit: Int? = nil, sinceMilliseconds: Int64? = nil) {
        self.limit = limit
        self.sinceMilliseconds = sinceMilliseconds
    }

    public static let all = HistoryScope()
    public static let nothing = HistoryScope(limit: 0)
}
