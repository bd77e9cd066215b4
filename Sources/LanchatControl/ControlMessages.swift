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
