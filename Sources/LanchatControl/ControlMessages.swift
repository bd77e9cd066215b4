import FoundationEssentials

/// The control API: newline-delimited JSON over a Unix stream socket (see docs/control-api.md).
/// Keys are snake_case on the wire (`ControlJSON` sets that up for both ends).

/// A request from a client. `params` is method-specific.
public struct ControlRequest: Codable, Equatable, Sendable {
    public var id: Int
    public var method: String
    public var params: [String: String]?

    public init(id: Int, method: String, params: [String: String]? = nil) {
        self.id = id
        self.method = method
        self.params = params
    }
}

/// The methods this daemon answers.
public enum ControlMethod: String, CaseIterable, Sendable {
    /// The daemon's own identity, advertisement and counts.
    case status
    /// The peers discovery has found.
    case peers
    /// Streams `ControlEvent`s after the response, until the client closes the connection.
    case watch
    /// Connects to a peer (`params.peer`: name or id prefix), PINGs it `params.count` times (default 1).
    case ping
    /// Invites `params.peer` into `params.room` (`message`, `timeout` seconds, `wait` = "true").
    case invite
    /// Pending invitations to this daemon.
    case invitations
    /// Accepts / declines the invitation `params.id` (or a unique prefix).
    case accept, decline
    /// Rooms this daemon is in, with members.
    case rooms
    /// One room's members (`params.room`, default: the only room).
    case members
    /// Leaves `params.room`.
    case leave
    /// Sends `params.text` to `params.room` or to `params.to` (comma-separated peers); `reliable` = "false" for unreliable.
    case send
    /// The last `params.limit` messages (default 50) of `params.room` or of all rooms.
    case history
    /// Forgets the recorded key of `params.peer` (a display name), after a legitimate key change.
    case forget
    /// Records the key of `params.peer` (an id prefix of 8 characters or more) as known, after the person
    /// compared its code: `--auto-accept known` takes it, and no warning is shown for it.
    case trust
    /// Sends the file at `params.path` (read by the daemon) to `params.peer`.
    case sendFile = "send-file"
    /// File transfers: active ones and the last 100 that ended.
    case transfers
    /// Cancels the transfer `params.id` (or a unique prefix), either direction.
    case cancel
    /// Opens a named stream to a peer (`peer`, `name`); the connection then carries `StreamPipe` frames.
    case stream
    /// Waits for a named stream (`name`) from a peer; then like `stream`.
    case streamAccept = "stream-accept"
    /// Dials `params.address` (HOST or HOST:PORT) and says who answers (name, id, short code). With
    /// `params.confirm` (the id the person checked), keeps it as a static peer: listed, and redialed, like
    /// a discovered one.
    case connect
    /// Stops keeping `params.peer` (a static peer's name or id prefix).
    case disconnect
    /// Sets this host's presence: `params.availability` (`available`, `away`, `busy`) and `params.text`
    /// (one line, at most 128 bytes; empty clears it); without them, reads it. Answers `presence`.
    case presence
    /// Raises (`params.up` = "true", the default) or lowers ("false") this host's hand in `params.room`
    /// (or the only room). Answers `presence`.
    case hand
    /// A room's metadata: `params.action` `list` (every key of `params.room`), `get`, `set` (`key`,
    /// `value`, optional `if_version`) or `delete` (`key`, optional `if_version`). Answers `meta`.
    case meta
    /// The person is typing in `params.room` (or the only room): its connected members are told (at
    /// most every 3 s; it means "for the next 5 s"). No result.
    case typing
    /// Publishes `params.text` (one line, at most 1024 bytes) on `params.topic` of `params.room` (or the
    /// only room) to the members subscribed to it; `reliable` = "true": never dropped for a full
    /// connection. At most 500 a second per room (`rate_limited`). Answers `topic`.
    case topicPublish = "topic-pub"
    /// Subscribes to `params.topic` of `params.room` (or the only room): after the answer, a `topic`
    /// event per message, until the client closes the connection.
    case topicSubscribe = "topic-sub"
    /// Removes `params.peer` (a member's name or id prefix) from `params.room` (or the only room), with
    /// `params.reason` (one line, at most 128 bytes); this daemon must administer the room. Answers `room`.
    case remove
    /// Closes `params.room` for every member, with `params.reason`; this daemon must administer it.
    case close
    /// Makes `params.peer` an administrator of `params.room` (or the only room) too; `params.on` =
    /// "false": no longer. This daemon must administer the room. Answers `room`.
    case admin
    /// Shares the file at `params.path` (or handed over under `params.file_token`) in `params.room`: the
    /// daemon keeps a copy and announces it (name, size, SHA-256, type). Answers `files` (the one).
    case share
    /// The files shared in `params.room` (or every room), the last `params.limit` (default 100). Answers `files`.
    case files
    /// A copy of the shared file `params.id` (or a unique end of it) into `params.to` (a directory; default:
    /// the download directory): at once if kept here, else fetched from the room's members and checked
    /// against its SHA-256. Answers `transfer` (`complete` with its path, or `offered`: follow its events).
    case fetch
}

/// An error with a stable code (compared by scripts and tests) and a message a person can act on.
public struct ControlError: Error, Codable, Equatable, Sendable, CustomStringConvertible {
    public var code: Code
    public var message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    public static func badRequest(_ message: String) -> ControlError { ControlError(code: .badRequest, message: message) }
    public static func unknownMethod(_ method: String) -> ControlError {
        ControlError(code: .unknownMethod, message: "unknown method '\(method.prefix(64))'; known: \(ControlMethod.allCases.map(\.rawValue).joined(separator: ", "))")
    }

    /// `error.code` on the wire: a snake_case string, encoded and decoded as that string alone.
    ///
    /// An open set, not an enum: the daemon passes every session error's code through unchanged
    /// (`SessionError.Code`, which this module does not link; the daemon's `ControlError(_:)` maps one to
    /// the other), and a client must still read a code that a newer daemon sends. The constants below are
    /// the codes lanchat sends today: the control layer's own, then the session's. Never change a raw value.
    public struct Code: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String

        public init(rawValue: String) { self.rawValue = rawValue }

        public var description: String { rawValue }

        // The control layer's own (the daemon's control server and the client)
        /// The line is not a valid request, or a parameter is missing, malformed or out of range (also a session code).
        public static let badRequest = Code(rawValue: "bad_request")
        /// `method` is not one this daemon knows (the message lists them).
        public static let unknownMethod = Code(rawValue: "unknown_method")
        /// Too much under way: control connections, host name look-ups, or (the session's) fetches, transfers, streams.
        public static let busy = Code(rawValue: "busy")
        /// The connection was idle too long and is closed.
        public static let idle = Code(rawValue: "idle")
        /// No peer (or no recorded key) matches the name or id given.
        public static let unknownPeer = Code(rawValue: "unknown_peer")
        /// Several peers (or members) match the name or id given.
        public static let ambiguousPeer = Code(rawValue: "ambiguous_peer")
        /// No room was named and this daemon is in no room.
        public static let noRoom = Code(rawValue: "no_room")
        /// No room was named and this daemon is in several.
        public static let ambiguousRoom = Code(rawValue: "ambiguous_room")
        /// This daemon is not in that room (also a session code).
        public static let unknownRoom = Code(rawValue: "unknown_room")
        /// No member of the room matches the name or id given (also a session code).
        public static let unknownMember = Code(rawValue: "unknown_member")
        /// The room's metadata has no such key (also a session code).
        public static let unknownKey = Code(rawValue: "unknown_key")
        /// The peer cannot be reached: no usable address yet (`ping`), or (the session's) not connected.
        public static let unreachable = Code(rawValue: "unreachable")
        /// A connection could not be made: to the daemon's socket (client), or `ping`'s to a peer.
        public static let connectFailed = Code(rawValue: "connect_failed")
        /// The connection closed before the answer: the daemon's (client), or `ping`'s peer's.
        public static let connectionLost = Code(rawValue: "connection_lost")
        /// `connect`: the address cannot be used.
        public static let badAddress = Code(rawValue: "bad_address")
        /// `connect`: the host name does not resolve (or not in time).
        public static let unknownHost = Code(rawValue: "unknown_host")
        /// `connect`: the host name look-up was cancelled.
        public static let cancelled = Code(rawValue: "cancelled")
        /// Not allowed: the session refused `connect`'s connection, or (the session's) a room's rules forbid it.
        public static let refused = Code(rawValue: "refused")
        /// `connect`: as many static peers as allowed already.
        public static let tooMany = Code(rawValue: "too_many")
        /// The static peers file could not be saved.
        public static let io = Code(rawValue: "io")
        /// The file cannot be used: not a readable regular file (the client's or the session's), or not handed over.
        public static let badFile = Code(rawValue: "bad_file")
        /// Client only: no daemon listens on the control socket.
        public static let daemonNotRunning = Code(rawValue: "daemon_not_running")
        /// Client only: the socket path is too long.
        public static let badSocketPath = Code(rawValue: "bad_socket_path")
        /// Client only: the control socket belongs to another user or group.
        public static let permissionDenied = Code(rawValue: "permission_denied")
        /// Client only: the daemon did not answer in time.
        public static let timeout = Code(rawValue: "timeout")
        /// Client only: the daemon sent a line that is not a control API response.
        public static let badResponse = Code(rawValue: "bad_response")
        /// Client only: the daemon reported a failure without an error.
        public static let failed = Code(rawValue: "failed")

        // The session's (`SessionError.Code`, passed through), but those above (the codes both send)
        /// A topic name is not 1-64 of `[A-Za-z0-9._-]`.
        public static let badTopic = Code(rawValue: "bad_topic")
        /// A topic message is not one line of text without control characters.
        public static let badText = Code(rawValue: "bad_text")
        /// A metadata key is not 1-64 of `[A-Za-z0-9._-]`.
        public static let badKey = Code(rawValue: "bad_key")
        /// A metadata value holds control characters other than newline and tab.
        public static let badValue = Code(rawValue: "bad_value")
        /// A prefix or id end matches several invitations or shared files: give more of it.
        public static let ambiguous = Code(rawValue: "ambiguous")
        /// A chat message or topic message is longer than the protocol allows.
        public static let tooLong = Code(rawValue: "too_long")
        /// A value, a room's metadata or a file is over its size limit.
        public static let tooLarge = Code(rawValue: "too_large")
        /// A recipient of a message is not a member of the room.
        public static let notAMember = Code(rawValue: "not_a_member")
        /// Only an administrator of the room may do that (the message names them).
        public static let notAdmin = Code(rawValue: "not_admin")
        /// The peer was removed from the room and only an administrator (or the creator) can invite it back.
        public static let removed = Code(rawValue: "removed")
        /// No pending invitation has that id (it expired or was answered).
        public static let unknownInvitation = Code(rawValue: "unknown_invitation")
        /// The key is the room's administration, changed only through remove, close and admin.
        public static let reservedKey = Code(rawValue: "reserved_key")
        /// The key is not at the version the writer said (`if_version`).
        public static let versionMismatch = Code(rawValue: "version_mismatch")
        /// The key has reached its last version: write another key.
        public static let tooManyVersions = Code(rawValue: "too_many_versions")
        /// The writer holds as many keys in the room as it may: delete one first.
        public static let tooManyKeys = Code(rawValue: "too_many_keys")
        /// The room's metadata needs wire protocol version 2 and this daemon speaks version 1 only.
        public static let unsupported = Code(rawValue: "unsupported")
        /// The room has as many topics subscribed as it may.
        public static let tooManyTopics = Code(rawValue: "too_many_topics")
        /// Too many topic messages a second in the room: slow down.
        public static let rateLimited = Code(rawValue: "rate_limited")
        /// The daemon is stopping.
        public static let stopped = Code(rawValue: "stopped")
        /// A file could not be written or placed (the download or shared-files directory).
        public static let writeFailed = Code(rawValue: "write_failed")
        /// No active transfer has that id.
        public static let unknownTransfer = Code(rawValue: "unknown_transfer")
        /// The transfer is complete and being put in place: too late to cancel it.
        public static let tooLate = Code(rawValue: "too_late")
        /// No shared file has that id.
        public static let notFound = Code(rawValue: "not_found")
        /// The copy of a shared file kept here no longer matches its SHA-256.
        public static let corrupt = Code(rawValue: "corrupt")
        /// The room's history could not be read to send it to a new member.
        public static let history = Code(rawValue: "history")
        /// The peer refused the stream, or did not answer.
        public static let streamRefused = Code(rawValue: "stream_refused")
        /// The stream was aborted (by either end, or its connection ended).
        public static let streamAborted = Code(rawValue: "stream_aborted")
        /// The stream was finished: nothing more can be written to it.
        public static let streamFinished = Code(rawValue: "stream_finished")
        /// The history database failed: what was asked was not (or not wholly) stored.
        public static let storage = Code(rawValue: "storage")

        /// Every code above: what the daemon and the client send today.
        public static let known: [Code] = [
            .badRequest, .unknownMethod, .busy, .idle, .unknownPeer, .ambiguousPeer, .noRoom, .ambiguousRoom,
            .unknownRoom, .unknownMember, .unknownKey, .unreachable, .connectFailed, .connectionLost, .badAddress,
            .unknownHost, .cancelled, .refused, .tooMany, .io, .badFile, .daemonNotRunning, .badSocketPath,
            .permissionDenied, .timeout, .badResponse, .failed, .badTopic, .badText, .badKey, .badValue, .ambiguous,
            .tooLong, .tooLarge, .notAMember, .notAdmin, .removed, .unknownInvitation, .reservedKey, .versionMismatch,
            .tooManyVersions, .tooManyKeys, .unsupported, .tooManyTopics, .rateLimited, .stopped, .writeFailed,
            .unknownTransfer, .tooLate, .notFound, .corrupt, .history, .streamRefused, .streamAborted, .streamFinished,
            .storage,
        ]
    }
}

/// One line from the daemon: a response to a request, or an event of a watch.
///
/// The daemon builds only valid ones: an answer (`ok` true, no error) with the one payload its method
/// returns (`init(id:_:)`), a failure (`ok` false, with the error, no payload: `failure(id:_:)`), or an
/// event of a watch or topic subscription (`event(_:)`). On the wire the payload is one key beside `id`,
/// `ok` and `error` (docs/control-api.schema.json); a line with none of the keys this version knows
/// decodes as `.none`.
public struct ControlResponse: Codable, Equatable, Sendable {
    public let id: Int?
    public let ok: Bool
    public let error: ControlError?
    public let payload: Payload

    /// What a call returns, under its key on the wire.
    public enum Payload: Equatable, Sendable {
        /// A bare `ok` (`leave`, `typing`, `close`, `watch`, `topic-sub`; and every failure).
        case none
        /// `status`.
        case status(DaemonStatus)
        /// `peers`; `disconnect`: the peer no longer kept (one).
        case peers([PeerInfo])
        /// An event of a `watch` or `topic-sub` connection (no `id`).
        case event(ControlEvent)
        /// `ping`.
        case ping(PingResult)
        /// `invite`.
        case invite(InviteResult)
        /// `accept`, `decline`: the invitation answered.
        case invitation(InvitationInfo)
        /// `invitations`.
        case invitations([InvitationInfo])
        /// `rooms`.
        case rooms([RoomInfo])
        /// `members`, `remove`, `admin`: the room now.
        case room(RoomInfo)
        /// `send`.
        case sent(SendResult)
        /// `history`, `search`.
        case history([MessageInfo])
        /// `forget`: the name whose key was forgotten.
        case forgotten(String)
        /// `trust`: the peer whose key is now known.
        case trusted(MemberInfo)
        /// `send-file`, `cancel`, `fetch`.
        case transfer(TransferEntry)
        /// `transfers`.
        case transfers([TransferEntry])
        /// `stream`, `stream-accept`: the stream opened (the connection then carries its frames).
        case stream(StreamEntry)
        /// `connect`.
        case connect(ConnectResult)
        /// `presence`, `hand`: this host's presence now.
        case presence(PresenceInfo)
        /// `meta`: the keys listed, got, set or deleted.
        case meta([MetaInfo])
        /// `topic-pub`: the message's sequence, and whom it went to.
        case topic(TopicInfo)
        /// `files`; `share`: the file shared (one).
        case files([SharedFileInfo])
    }

    /// A successful answer carrying `payload`.
    public init(id: Int?, _ payload: Payload = .none) {
        self.init(id: id, ok: true, error: nil, payload: payload)
    }

    private init(id: Int?, ok: Bool, error: ControlError?, payload: Payload) {
        self.id = id
        self.ok = ok
        self.error = error
        self.payload = payload
    }

    public static func failure(id: Int?, _ error: ControlError) -> ControlResponse {
        ControlResponse(id: id, ok: false, error: error, payload: .none)
    }

    /// An event line of a `watch` or `topic-sub` connection.
    public static func event(_ event: ControlEvent) -> ControlResponse {
        ControlResponse(id: nil, .event(event))
    }

    // For readers: the payload, if it is that one.
    public var status: DaemonStatus? { if case .status(let value) = payload { value } else { nil } }
    public var peers: [PeerInfo]? { if case .peers(let value) = payload { value } else { nil } }
    public var event: ControlEvent? { if case .event(let value) = payload { value } else { nil } }
    public var ping: PingResult? { if case .ping(let value) = payload { value } else { nil } }
    public var invite: InviteResult? { if case .invite(let value) = payload { value } else { nil } }
    public var invitation: InvitationInfo? { if case .invitation(let value) = payload { value } else { nil } }
    public var invitations: [InvitationInfo]? { if case .invitations(let value) = payload { value } else { nil } }
    public var rooms: [RoomInfo]? { if case .rooms(let value) = payload { value } else { nil } }
    public var room: RoomInfo? { if case .room(let value) = payload { value } else { nil } }
    public var sent: SendResult? { if case .sent(let value) = payload { value } else { nil } }
    public var history: [MessageInfo]? { if case .history(let value) = payload { value } else { nil } }
    public var forgotten: String? { if case .forgotten(let value) = payload { value } else { nil } }
    public var trusted: MemberInfo? { if case .trusted(let value) = payload { value } else { nil } }
    public var transfer: TransferEntry? { if case .transfer(let value) = payload { value } else { nil } }
    public var transfers: [TransferEntry]? { if case .transfers(let value) = payload { value } else { nil } }
    public var stream: StreamEntry? { if case .stream(let value) = payload { value } else { nil } }
    public var connect: ConnectResult? { if case .connect(let value) = payload { value } else { nil } }
    public var presence: PresenceInfo? { if case .presence(let value) = payload { value } else { nil } }
    public var meta: [MetaInfo]? { if case .meta(let value) = payload { value } else { nil } }
    public var topic: TopicInfo? { if case .topic(let value) = payload { value } else { nil } }
    public var files: [SharedFileInfo]? { if case .files(let value) = payload { value } else { nil } }

    fileprivate enum CodingKeys: String, CodingKey {
        case id, ok, error
        case status, peers, event, ping, invite, invitation, invitations, rooms, room, sent, history, forgotten, trusted
        case transfer, transfers, stream, connect, presence, meta, topic, files
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decodeIfPresent(Int.self, forKey: .id)
        ok = try container.decode(Bool.self, forKey: .ok)
        error = try container.decodeIfPresent(ControlError.self, forKey: .error)
        payload = try Payload(from: container)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(id, forKey: .id)
        try container.encode(ok, forKey: .ok)
        try container.encodeIfPresent(error, forKey: .error)
        switch payload {
        case .none: break
        case .status(let value): try container.encode(value, forKey: .status)
        case .peers(let value): try container.encode(value, forKey: .peers)
        case .event(let value): try container.encode(value, forKey: .event)
        case .ping(let value): try container.encode(value, forKey: .ping)
        case .invite(let value): try container.encode(value, forKey: .invite)
        case .invitation(let value): try container.encode(value, forKey: .invitation)
        case .invitations(let value): try container.encode(value, forKey: .invitations)
        case .rooms(let value): try container.encode(value, forKey: .rooms)
        case .room(let value): try container.encode(value, forKey: .room)
        case .sent(let value): try container.encode(value, forKey: .sent)
        case .history(let value): try container.encode(value, forKey: .history)
        case .forgotten(let value): try container.encode(value, forKey: .forgotten)
        case .trusted(let value): try container.encode(value, forKey: .trusted)
        case .transfer(let value): try container.encode(value, forKey: .transfer)
        case .transfers(let value): try container.encode(value, forKey: .transfers)
        case .stream(let value): try container.encode(value, forKey: .stream)
        case .connect(let value): try container.encode(value, forKey: .connect)
        case .presence(let value): try container.encode(value, forKey: .presence)
        case .meta(let value): try container.encode(value, forKey: .meta)
        case .topic(let value): try container.encode(value, forKey: .topic)
        case .files(let value): try container.encode(value, forKey: .files)
        }
    }
}

extension ControlResponse.Payload {
    /// The first payload key present (the daemon sends at most one), or `.none`. `null` counts as absent.
    fileprivate init(from container: KeyedDecodingContainer<ControlResponse.CodingKeys>) throws {
        func value<T: Decodable>(_ type: T.Type, _ key: ControlResponse.CodingKeys) throws -> T? {
            try container.decodeIfPresent(type, forKey: key)
        }
        if let value = try value(DaemonStatus.self, .status) {
            self = .status(value)
        } else if let value = try value([PeerInfo].self, .peers) {
            self = .peers(value)
        } else if let value = try value(ControlEvent.self, .event) {
            self = .event(value)
        } else if let value = try value(PingResult.self, .ping) {
            self = .ping(value)
        } else if let value = try value(InviteResult.self, .invite) {
            self = .invite(value)
        } else if let value = try value(InvitationInfo.self, .invitation) {
            self = .invitation(value)
        } else if let value = try value([InvitationInfo].self, .invitations) {
            self = .invitations(value)
        } else if let value = try value([RoomInfo].self, .rooms) {
            self = .rooms(value)
        } else if let value = try value(RoomInfo.self, .room) {
            self = .room(value)
        } else if let value = try value(SendResult.self, .sent) {
            self = .sent(value)
        } else if let value = try value([MessageInfo].self, .history) {
            self = .history(value)
        } else if let value = try value(String.self, .forgotten) {
            self = .forgotten(value)
        } else if let value = try value(MemberInfo.self, .trusted) {
            self = .trusted(value)
        } else if let value = try value(TransferEntry.self, .transfer) {
            self = .transfer(value)
        } else if let value = try value([TransferEntry].self, .transfers) {
            self = .transfers(value)
        } else if let value = try value(StreamEntry.self, .stream) {
            self = .stream(value)
        } else if let value = try value(ConnectResult.self, .connect) {
            self = .connect(value)
        } else if let value = try value(PresenceInfo.self, .presence) {
            self = .presence(value)
        } else if let value = try value([MetaInfo].self, .meta) {
            self = .meta(value)
        } else if let value = try value(TopicInfo.self, .topic) {
            self = .topic(value)
        } else if let value = try value([SharedFileInfo].self, .files) {
            self = .files(value)
        } else {
            self = .none
        }
    }
}

/// A peer as the control API shows it.
public struct PeerInfo: Codable, Equatable, Sendable {
    /// Display name from the peer's TXT record (or the instance name for incompatible services).
    public var name: String
    /// Full peer id (52 base32 characters); `nil` for incompatible services.
    public var id: String?
    /// The first 12 characters of the id, as people see it.
    public var shortId: String?
    /// DNS-SD instance name (unique on the LAN).
    public var instance: String
    public var host: String
    public var port: Int
    public var addresses: [String]
    public var interfaces: [String]
    /// `discovered` (found through DNS-SD, no connection yet).
    public var state: String
    public var rooms: [String]
    public var compatible: Bool
    /// Why the service is not usable, when `compatible` is false.
    public var problem: String?
    public var protocolVersion: Int?
    public var encryption: String?
    /// How the daemon knows the peer: `dnssd` (discovered on the link), `static` (added by address
    /// with `lanchat connect`, or `static-peer` in the config), or `connected` (only by a live connection
    /// that discovery does not list, e.g. the peer dialed us with `lanchat connect`). Absent from older daemons.
    public var origin: String?
    /// With origin `connected`: whether the peer dialed the connection (true) or we did.
    public var dialedUs: Bool?
    /// What the peer told us of its presence (a member of a room we share): `available`, `away`, `busy`.
    public var availability: String?
    public var statusText: String?

    public init(
        name: String, id: String?, shortId: String?, instance: String, host: String, port: Int, addresses: [String], interfaces: [String], state: String, rooms: [String],
        compatible: Bool, problem: String?, protocolVersion: Int?, encryption: String?, origin: String? = nil
    ) {
        self.name = name
        self.id = id
        self.shortId = shortId
        self.instance = instance
        self.host = host
        self.port = port
        self.addresses = addresses
        self.interfaces = interfaces
        self.state = state
        self.rooms = rooms
        self.compatible = compatible
        self.problem = problem
        self.protocolVersion = protocolVersion
        self.encryption = encryption
        self.origin = origin
    }
}

/// The daemon's own state.
public struct DaemonStatus: Codable, Equatable, Sendable {
    public var name: String
    public var id: String
    public var shortId: String
    /// The instance name we are advertised under (may carry a " #2" suffix after a clash), or `nil`.
    public var instance: String?
    /// `registered`, `registering`, or `avahi_unavailable`.
    public var advertising: String
    public var port: Int
    public var protocolVersion: Int
    public var encryption: String
    public var peers: Int
    public var pid: Int
    public var version: String
    public var startedAt: String
    /// Where received files go, and why they cannot go there (`nil` when the directory is usable; the
    /// daemon refuses files with this text until it is fixed). Checked when asked.
    public var downloadDirectory: String?
    public var downloadProblem: String?
    public var downloadFreeBytes: UInt64?
    /// Whether the daemon's own DNS-SD browse sees its advertisement (`nil`: an older daemon).
    public var advertisementVisible: Bool?

    public init(
        name: String, id: String, shortId: String, instance: String?, advertising: String, port: Int, protocolVersion: Int, encryption: String, peers: Int, pid: Int,
        version: String, startedAt: String
    ) {
        self.name = name
        self.id = id
        self.shortId = shortId
        self.instance = instance
        self.advertising = advertising
        self.port = port
        self.protocolVersion = protocolVersion
        self.encryption = encryption
        self.peers = peers
        self.pid = pid
        self.version = version
        self.startedAt = startedAt
    }
}

/// What `ping` found: the connection, the code to compare, the round trips.
public struct PingResult: Codable, Equatable, Sendable {
    public var name: String
    public var id: String
    public var address: String
    public var port: Int
    /// TLS 1.3 with the peer's key pinned to its advertised id.
    public var encrypted: Bool
    public var protocolVersion: Int
    /// The code both people see for this pair of daemons ("4821-0937").
    public var shortCode: String
    /// TCP connect, TLS and HELLO.
    public var handshakeMs: Double
    public var rttMs: [Double]

    public init(name: String, id: String, address: String, port: Int, encrypted: Bool, protocolVersion: Int, shortCode: String, handshakeMs: Double, rttMs: [Double]) {
        self.name = name
        self.id = id
        self.address = address
        self.port = port
        self.encrypted = encrypted
        self.protocolVersion = protocolVersion
        self.shortCode = shortCode
        self.handshakeMs = handshakeMs
        self.rttMs = rttMs
    }
}

/// An event of the watch stream (or, `topic`, of a `topic-sub` connection): when, and what happened.
///
/// On the wire: `type` and `time`, and the keys of that type's payload (docs/control-api.schema.json).
public struct ControlEvent: Codable, Equatable, Sendable {
    /// ISO 8601 time at the daemon.
    public var time: String
    public var kind: Kind

    public init(time: String, _ kind: Kind) {
        self.time = time
        self.kind = kind
    }

    /// Each event type with exactly what it carries (the wire's keys in the comments).
    public enum Kind: Equatable, Sendable {
        /// `found`, `changed`, `lost` (`peer`): discovery (or a static peer) saw a peer appear, change, go.
        case found(PeerInfo), changed(PeerInfo), lost(PeerInfo)
        /// `advertising` (`advertising`, `instance`): this daemon's advertisement changed state.
        case advertising(state: String, instance: String?)
        /// `invitation` (`invitation`): an invitation to this daemon arrived.
        case invitation(InvitationInfo)
        /// `invitation_closed` (`invitation`, with its `outcome`): it was answered, expired or withdrawn.
        case invitationClosed(InvitationInfo)
        /// `invite_outcome` (`invite`): a peer answered an invitation from this daemon.
        case inviteOutcome(InviteResult)
        /// `member` (`member`): a member's connection state changed.
        case member(MemberEvent)
        /// `left` (`member`, state `left`, with `code`, `reason`, `fatal`): a member left or was removed.
        case left(MemberEvent)
        /// `typing` (`member`, state `typing`): a member is typing in the room.
        case typing(room: String, name: String, id: String)
        /// `message` (`message`): a message in a room, sent or received.
        case message(MessageInfo)
        /// `transfer` (`transfer`): a file transfer progressed or ended.
        case transfer(TransferEntry)
        /// `presence` (`presence`): a member's availability, text or raised hands changed.
        case presence(PresenceInfo)
        /// `meta` (`meta`): a key of a room's metadata was set or deleted.
        case meta(MetaInfo)
        /// `security` (`text`, `name`): a warning about a peer (e.g. its key changed).
        case security(text: String, name: String)
        /// `topic` (`topic`), only on a `topic-sub` connection: a message on the topic.
        case topic(TopicInfo)
        /// A type this version does not know (a newer daemon's): its name only, the rest is dropped.
        /// Only decoding makes one.
        case other(Unknown)

        /// The wire's `type`.
        public var type: String {
            switch self {
            case .found: "found"
            case .changed: "changed"
            case .lost: "lost"
            case .advertising: "advertising"
            case .invitation: "invitation"
            case .invitationClosed: "invitation_closed"
            case .inviteOutcome: "invite_outcome"
            case .member: "member"
            case .left: "left"
            case .typing: "typing"
            case .message: "message"
            case .transfer: "transfer"
            case .presence: "presence"
            case .meta: "meta"
            case .security: "security"
            case .topic: "topic"
            case .other(let unknown): unknown.type
            }
        }
    }

    /// An event type this version does not know.
    public struct Unknown: Equatable, Sendable {
        public let type: String
        fileprivate init(type: String) { self.type = type }
    }

    /// The wire's `type`.
    public var type: String { kind.type }

    // For readers: the payload, if the event carries that one.
    /// `found`, `changed`, `lost`.
    public var peer: PeerInfo? {
        switch kind {
        case .found(let peer), .changed(let peer), .lost(let peer): peer
        default: nil
        }
    }
    /// `invitation`, `invitation_closed`.
    public var invitation: InvitationInfo? {
        switch kind {
        case .invitation(let invitation), .invitationClosed(let invitation): invitation
        default: nil
        }
    }
    /// `member`, `left`, `typing`, as on the wire.
    public var member: MemberEvent? {
        switch kind {
        case .member(let member), .left(let member): member
        case .typing(let room, let name, let id): MemberEvent(room: room, name: name, id: id, state: "typing")
        default: nil
        }
    }
    public var message: MessageInfo? { if case .message(let value) = kind { value } else { nil } }
    public var transfer: TransferEntry? { if case .transfer(let value) = kind { value } else { nil } }
    public var topic: TopicInfo? { if case .topic(let value) = kind { value } else { nil } }

    private enum CodingKeys: String, CodingKey {
        case type, time, peer, advertising, instance, invitation, invite, member, message, text, name, transfer, presence, meta, topic
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        time = try container.decode(String.self, forKey: .time)
        func value<T: Decodable>(_ key: CodingKeys) throws -> T { try container.decode(T.self, forKey: key) }
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case "found": kind = .found(try value(.peer))
        case "changed": kind = .changed(try value(.peer))
        case "lost": kind = .lost(try value(.peer))
        case "advertising": kind = .advertising(state: try value(.advertising), instance: try container.decodeIfPresent(String.self, forKey: .instance))
        case "invitation": kind = .invitation(try value(.invitation))
        case "invitation_closed": kind = .invitationClosed(try value(.invitation))
        case "invite_outcome": kind = .inviteOutcome(try value(.invite))
        case "member": kind = .member(try value(.member))
        case "left": kind = .left(try value(.member))
        case "typing":
            let member: MemberEvent = try value(.member)
            kind = .typing(room: member.room, name: member.name, id: member.id)
        case "message": kind = .message(try value(.message))
        case "transfer": kind = .transfer(try value(.transfer))
        case "presence": kind = .presence(try value(.presence))
        case "meta": kind = .meta(try value(.meta))
        case "security": kind = .security(text: try value(.text), name: try value(.name))
        case "topic": kind = .topic(try value(.topic))
        default: kind = .other(Unknown(type: type))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(kind.type, forKey: .type)
        try container.encode(time, forKey: .time)
        switch kind {
        case .found(let peer), .changed(let peer), .lost(let peer): try container.encode(peer, forKey: .peer)
        case .advertising(let state, let instance):
            try container.encode(state, forKey: .advertising)
            try container.encodeIfPresent(instance, forKey: .instance)
        case .invitation(let invitation), .invitationClosed(let invitation): try container.encode(invitation, forKey: .invitation)
        case .inviteOutcome(let invite): try container.encode(invite, forKey: .invite)
        case .member, .left, .typing: try container.encode(member, forKey: .member)
        case .message(let message): try container.encode(message, forKey: .message)
        case .transfer(let transfer): try container.encode(transfer, forKey: .transfer)
        case .presence(let presence): try container.encode(presence, forKey: .presence)
        case .meta(let meta): try container.encode(meta, forKey: .meta)
        case .security(let text, let name):
            try container.encode(text, forKey: .text)
            try container.encode(name, forKey: .name)
        case .topic(let topic): try container.encode(topic, forKey: .topic)
        case .other: break
        }
    }
}

/// Encoders and decoders configured for the wire format.
public enum ControlJSON {
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return decoder
    }

    /// Encodes one line (JSON followed by `\n`).
    public static func line<T: Encodable>(_ value: T) -> [UInt8] {
        // Our own types always encode; a failure here is a programming error.
        var bytes = Array(try! encoder().encode(value))
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    /// Decodes a request line, mapping every failure to a `bad_request` error.
    public static func decodeRequest(_ line: [UInt8]) -> Result<ControlRequest, ControlError> {
        guard String(validating: line, as: UTF8.self) != nil else { return .failure(.badRequest("request is not valid UTF-8")) }
        do {
            return .success(try decoder().decode(ControlRequest.self, from: Data(line)))
        } catch {
            return .failure(.badRequest("request is not a JSON object with an integer 'id' and a string 'method'"))
        }
    }
}

/// Who answered at an address (`connect`), and whether it is now kept as a static peer.
public struct ConnectResult: Codable, Equatable, Sendable {
    public var name: String
    public var id: String
    public var shortId: String
    /// The short code both people compare (`lanchat ping` shows the same on the other side).
    public var shortCode: String
    /// The address as given, the IP address dialed, and the port.
    public var address: String
    public var ip: String
    public var port: Int
    public var encrypted: Bool
    /// True once the peer is kept (after `confirm`); false for a first look.
    public var saved: Bool

    public init(name: String, id: String, shortId: String, shortCode: String, address: String, ip: String, port: Int, encrypted: Bool, saved: Bool) {
        self.name = name
        self.id = id
        self.shortId = shortId
        self.shortCode = shortCode
        self.address = address
        self.ip = ip
        self.port = port
        self.encrypted = encrypted
        self.saved = saved
    }
}
