import FoundationEssentials

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
