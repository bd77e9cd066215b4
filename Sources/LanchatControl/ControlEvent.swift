import FoundationEssentials

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
