import LanchatCore
import LanchatWire

/// The protocol engine of one node: every decision about links, invitations, rooms, delivery and
/// redialing, with no sockets, no files, no database and no clock. Inputs are method calls (a link
/// came up or went down, frames arrived, time passed, a command from the API); each returns the
/// `SessionAction`s the shell must perform. The shell (`SessionNode`) owns the connections, the store
/// and the timers' sleeping; the simulator (Tests/LanchatSimulatorTests) drives many engines at once on
/// a virtual clock.
///
/// The engine is composed of one part per conversation, each a machine that owns its state, and this
/// type keeps little more than one field for each: the links (`LinkTable`, with the keys' records and
/// the redial schedule; `+Links`), invitations (`InvitationBook`; `+Invitations`), the rooms
/// (`MembershipBook`, with each room's metadata; `+Membership`, `+Proofs`, `+Introductions`, `+Metadata`,
/// `+Admin`), delivery and the outbox (`Outbox`; `+Delivery`), presence, topics, streams, and transfers
/// (`TransferTable`, with histories and shared files), with their timers in one `TimerTable` and what
/// the node runs with in its `Environment`.
public struct SessionStateMachine: Sendable {
    /// A member of a room as this node knows it.
    public struct Member: Equatable, Sendable {
        public var name: String
        public var port: Int
        public var addresses: [String]
    }

    struct Room: Equatable, Sendable {
        var members: [PeerID: Member] = [:]
        /// Members' own proofs that they are in the room (version 2; `+Proofs`), as far as we hold them.
        var proofs: [PeerID: WireFrame.MembershipProof] = [:]
    }

    struct PendingInvitation: Equatable, Sendable {
        var invitation: IncomingInvitation
        var peer: PeerID
    }

    struct OutgoingInvitation: Equatable, Sendable {
        var peer: SessionPeer
        var room: RoomID
        /// The INVITE as sent: sent again on the connection that replaces the one it went on.
        var frame: WireFrame.Invite
    }

    /// An invitation we answered, and the answer: an INVITE that comes again (sent once more on the
    /// connection that replaced the one our answer was lost with) gets the same answer, not a new question.
    struct AnsweredInvitation: Equatable, Sendable {
        var peer: PeerID
        var reply: WireFrame.InviteReply
    }

    struct Claim: Equatable, Sendable {
        var members: [WireFrame.Member]
        var at: Int64
    }

    /// A history we asked our inviter for as we joined (`historyRequested`).
    public struct HistoryDoor: Equatable, Sendable {
        public var peer: PeerID
        /// Until when (monotonic ms) its offer is taken.
        public var until: Int64
    }

    /// A reliable message of ours a recipient has not acknowledged: its room and sequence, and whether a
    /// mark queues it (`marked`) or a row of its own (what an older lanchatd queued, or what was kept for
    /// a recipient that left: `Outbox`).
    public struct QueuedMessage: Equatable, Sendable {
        public var peer: PeerID
        public var message: WireID
        public var room: RoomID
        public var sequence: UInt64
        public var marked: Bool

        public init(peer: PeerID, message: WireID, room: RoomID, sequence: UInt64, marked: Bool) {
            (self.peer, self.message, self.room, self.sequence, self.marked) = (peer, message, room, sequence, marked)
        }
    }

    struct RoomMember: Hashable, Sendable {
        var room: RoomID
        var peer: PeerID
    }

    /// What the store held when the node started.
    public struct Restored: Sendable {
        public var rooms: [(room: RoomID, members: [StoredMember])]
        /// The last sequence number we used in each room (rooms we left included).
        public var lastSequences: [RoomID: UInt64]
        /// Reliable messages not yet acknowledged, in the order sent.
        public var outbox: [QueuedMessage]
        /// Each recipient's mark per room: our sequence through which it holds what was queued for it.
        public var marks: [(peer: PeerID, room: RoomID, acked: UInt64)] = []
        public var knownPeers: KnownPeerBook
        /// Ids that a room member proved with its key on a TLS connection (see `keyed`).
        public var keyedPeers: Set<PeerID>
        /// Room metadata (`+Metadata`), as the store keeps it.
        public var metadata: [StoredMeta] = []
        /// When we joined each room (milliseconds, our clock).
        public var joinedAt: [RoomID: Int64] = [:]
        /// Signed leaves, ours and members' (`+Proofs`).
        public var leaves: [StoredLeave] = []
        /// Seals kept before their checks, which went with the last process: checked again at `start`.
        public var uncheckedSeals: [SealCheck] = []

        public init(
            rooms: [(room: RoomID, members: [StoredMember])] = [], lastSequences: [RoomID: UInt64] = [:],
            outbox: [QueuedMessage] = [], knownPeers: KnownPeerBook = KnownPeerBook(),
            keyedPeers: Set<PeerID> = []
        ) {
            self.rooms = rooms
            self.lastSequences = lastSequences
            self.outbox = outbox
            self.knownPeers = knownPeers
            self.keyedPeers = keyedPeers
        }
    }

    /// The text of a ROOM_LEAVE that answers a ROOM_MEMBERS from someone we do not count as a member.
    public static let notAMember = "not a member"

    /// The configuration and what the shell gives (the address book, short codes, ids): `Environment`.
    var environment: Environment
    public var configuration: Configuration { environment.configuration }
    /// The known-peers record (trust on first use), kept with the links (`PeerTrust`).
    public var known: KnownPeerBook { links.trust.known }
    /// Ids a room member has proved with its key (TLS) at least once, kept in the store (`PeerTrust.keyed`).
    public var keyed: Set<PeerID> { links.trust.keyed }
    /// One connection per peer, and with them what their keys proved (`PeerTrust`) and when to dial
    /// whom (`RedialSchedule`; `+Links`, `+Delivery`).
    var links = LinkTable()
    var timers = TimerTable()
    /// Who is in each room we are in (`MembershipBook` keeps it; its methods change it).
    var rooms: [RoomID: Room] { membership.rooms }
    /// Invitations waiting both ways, and the answers we gave (`+Invitations`, `InvitationBook`).
    var invites = InvitationBook()
    /// The rooms (`+Membership`, `+Proofs`, `+Introductions`, `MembershipBook`): their members, claims,
    /// introducers, members shown as left, unanswered invitations, tombstones, proofs and leaves; and
    /// each room's metadata and administration (`+Metadata`, `+Admin`, `MetadataBook`).
    var membership = MembershipBook()
    /// Our numbering (each room's last sequence, the notices' counter), reliable messages each recipient
    /// has not acknowledged yet, and the retransmit backoff (`+Delivery`, `Outbox`).
    var outbox: Outbox
    /// Presence and typing (`+Presence`, `PresenceMachine`).
    var presenceState = PresenceMachine()
    /// Topics (`+Topics`, `TopicMachine`).
    var topics = TopicMachine()
    /// Named byte streams (`+Streams`).
    var streamTable = StreamTable()
    /// Files and history resources both ways (`+Transfers`, `+Receiving`), with the histories we take
    /// and give (`HistoryExchange`; `+Membership`, `+Relay`) and the fetches and serves of shared files
    /// (`SharedFileTable`; `+SharedFiles`).
    var transfers = TransferTable()
    /// The seal checks asked of the shell (`+Seals`), and those a restart found to ask again at `start`.
    var sealWaits = SealWaits()
    var restoredSealChecks: [SealCheck] = []

    public init(
        configuration: Configuration, restored: Restored, addressBook: any PeerAddressBook, ids: IDGenerator,
        shortCode: @escaping @Sendable (PeerID) -> String
    ) {
        environment = Environment(configuration: configuration, addressBook: addressBook, shortCode: shortCode, ids: ids)
        streamTable.limits = configuration.streamLimits
        transfers.limits = configuration.transferLimits
        links.trust = PeerTrust(known: restored.knownPeers, keyed: restored.keyedPeers)
        outbox = Outbox(lastSequences: restored.lastSequences)
        var ownProofs: [RoomID: WireFrame.MembershipProof] = [:]
        var rooms: [RoomID: Room] = [:]
        for (room, members) in restored.rooms {
            var state = Room()
            for member in members {
                guard let id = PeerID(member.peerID) else { continue }
                // Proofs outlive a restart: we introduce those whose proofs we hold, with our own.
                let proof = member.proof.map(WireFrame.MembershipProof.init)
                if id == configuration.ownID {
                    ownProofs[room] = proof
                    continue
                }
                state.members[id] = Member(name: member.name, port: member.port, addresses: member.addresses)
                state.proofs[id] = proof
            }
            rooms[room] = state
        }
        membership = MembershipBook(restoring: rooms, ownProofs: ownProofs, leaves: restored.leaves, ownID: configuration.ownID)
        membership.metadata = MetadataBook(restoring: restored.metadata, joinedAt: restored.joinedAt, in: Set(rooms.keys))
        // A mark queues for a member only (one the store kept for a member it no longer has, after a removal
        // whose commit failed, would queue what was sent to the room since); rows stay for whoever they were
        // kept for (a member that left while its queue stayed).
        for mark in restored.marks where rooms[mark.room]?.members[mark.peer] != nil { outbox.restore(mark: mark.acked, for: mark.peer, in: mark.room) }
        for entry in restored.outbox where entry.marked ? rooms[entry.room]?.members[entry.peer] != nil : rooms[entry.room] != nil {
            outbox.restore(entry)
        }
        restoredSealChecks = restored.uncheckedSeals
    }

    /// Starts the node's own schedule (redialing the members it remembers). Call once, first.
    public mutating func start(at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        scheduleRedial(at: now, &out)
        scheduleResync(at: now)
        _ = presenceState.personActive(at: now.monotonic)  // (the idle clock starts now; nobody was auto-away yet)
        scheduleAutoAway()
        // Seals kept unchecked before a restart are checked again (their messages are not exported until):
        // off the loop while the bound allows, here past it.
        for check in restoredSealChecks {
            if !sealWaits.isFull {
                if sealWaits.ask(check) { out.append(.checkSeal(check)) }
            } else if let keys = configuration.envelopes {
                settle(check, valid: check.verifies(with: keys), &out)
            }
        }
        restoredSealChecks = []
        return out
    }

    // MARK: Time

    /// When `tick(at:)` should next be called (monotonic milliseconds), or nil if nothing is scheduled.
    public var nextDeadline: Int64? { timers.next }

    /// Fires every timer that is due.
    public mutating func tick(at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        for timer in timers.due(at: now.monotonic) {
            switch timer {
            case .incomingInvitation(let id): expireIncoming(id, &out)
            case .outgoingInvitation(let id): closeOutgoingInvitation(id, .expired, &out)
            case .retransmit(let peer): retransmit(to: peer, at: now, &out)
            case .redial: redial(at: now, &out)
            case .claims: expireClaims(at: now, &out)
            case .resync: resync(at: now, &out)
            case .streamOpen(let id): streamOpenTimedOut(id, &out)
            case .pendingStreamOpen(let id): pendingStreamOpenExpired(id, &out)
            case .transferStalls: failStalledTransfers(at: now, &out)
            case .autoAway: idleTimerFired(at: now, &out)
            case .sharedFetches: sharedFetchesDue(at: now, &out)
            case .sharedServes: sharedServesDue(at: now, &out)
            case .outgoingTransfers: outgoingDue(at: now, &out)
            }
        }
        return out
    }

    // MARK: Frames

    /// Frames that arrived on a connection, as one batch (the shell commits their writes at once).
    public mutating func received(_ frames: [WireFrame], on handle: LinkHandle, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        guard let entry = links.peer(on: handle) else { return out }
        links.redials.heard(from: entry.peer.id)
        var acks: [WireID] = []
        for frame in frames {
            switch frame {
            case .message(let message): receive(message, from: entry, at: now, acks: &acks, &out)
            case .seal(let seal): received(seal, from: entry, &out)
            case .ack(let ids): acknowledged(ids, by: entry.peer.id, at: now, &out)
            case .invite(let invite): received(invite, from: entry, at: now, &out)
            case .inviteReply(let reply): received(reply, from: entry, at: now, &out)
            case .roomMembers(let update): received(update, from: entry, at: now, &out)
            case .roomLeave(let leave):
                if let signed = leave.signed {
                    received(signed: signed, room: leave.room, text: leave.text, from: entry, at: now, &out)
                    break
                }
                guard rooms[leave.room]?.members[entry.peer.id] != nil else { break }
                removeMember(leave.room, entry.peer, reason: leave.text, keepQueued: leave.text == Self.notAMember, at: now, &out)
                bury(RoomMember(room: leave.room, peer: entry.peer.id), at: now)
            case .syncRequest(let request): received(request, from: entry, at: now, &out)
            case .presence(let presence): received(presence, from: entry, &out)
            case .roomMeta(let update): received(update, from: entry, at: now, &out)
            case .typing(let room): heardTyping(in: room, from: entry, at: now, &out)
            case .topicSubscriptions(let subscriptions): received(subscriptions, from: entry)
            case .topicMessage(let message): received(message, from: entry, at: now, &out)
            case .fileRequest(let request): received(request, from: entry, &out)
            case .historyRequest(let room, let since, let limit):
                guard rooms[room]?.members[entry.peer.id] != nil, transfers.histories.takeOwed(RoomMember(room: room, peer: entry.peer.id)) else { break }
                out.append(
                    .sendHistory(
                        room, sinceMilliseconds: Int64(clamping: since), to: entry.peer, layout: HistoryLayout(version: entry.version),
                        limit: limit.map { Int($0) }))
            case .streamOpen, .streamAccept, .streamData, .streamCredit, .streamEnd:
                streamFrame(frame, from: entry, on: handle, at: now, &out)
            case .resourceOffer, .resourceAccept, .resourceChunk, .resourceDigest, .resourceEnd:
                // On the connection that serves the peer (frames on a replaced one still count).
                transferFrame(frame, from: entry, at: now, &out)
            default:
                break
            }
        }
        var index = 0
        while index < acks.count {
            let end = min(index + 1024, acks.count)
            out.append(.send(handle, [.ack(Array(acks[index..<end]))]))
            index = end
        }
        scheduleRedial(at: now, &out)
        scheduleResync(at: now)
        return out
    }

    // MARK: Notices

    /// A notice from the shell's own conversations ("12 earlier messages from bob's history").
    public mutating func notice(_ room: RoomID, _ text: String, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        notice(room, text, at: now, &out)
        return out
    }

    /// The history we asked for in `room` arrived (or failed): nothing more is accepted for it.
    public mutating func historyEnded(_ room: RoomID) {
        transfers.histories.close(room)
    }

    /// Rooms whose history we asked for as we joined: whom we asked, and until when (monotonic ms) its
    /// offer is taken (`takeHistory`). One history per join: the door closes when its offer is taken.
    public var historyRequested: [RoomID: HistoryDoor] { transfers.histories.doors }

    /// Where a history resource comes from, when it is taken (`takeHistory`).
    public enum HistorySource: Equatable, Sendable {
        /// Our inviter's, asked for as we joined: records of authors who are not members are kept,
        /// labelled as such (`verdict`'s `strangers`).
        case inviter
        /// A member's answer to our SYNC_REQUEST: only current members' records.
        case relay
    }

    /// Whether a history `peer` offers for `room` is taken, and as what: our inviter's, once, while we
    /// join (before `historyOfferTimeout` has passed), from a member of the room; or the answer to a
    /// SYNC_REQUEST we sent it (a signed or sealed history only: `authenticated`). Taking it closes the
    /// door it came through: a second offer, or a late one, is refused.
    public mutating func takeHistory(_ room: RoomID, from peer: PeerID, authenticated: Bool, at now: EngineTime) -> HistorySource? {
        transfers.histories.take(room, from: peer, authenticated: authenticated, isMember: rooms[room]?.members[peer] != nil, at: now.monotonic)
    }

    /// A system message, kept in history and reported ("bob joined").
    mutating func notice(_ room: RoomID, _ text: String, at now: EngineTime, _ out: inout [SessionAction]) {
        // Notices made in the same millisecond keep their order in history (it sorts by time, then sequence).
        let sequence = outbox.nextNoticeSequence()
        let stored = StoredMessage(
            id: environment.ids.messageID(at: now.wall).description, room: room.rawValue, senderID: configuration.ownID.rawValue, senderName: "*",
            sequence: sequence, timestamp: now.wall, kind: .system, body: text)
        out.append(.persist(.insertMessage(stored, report: ChatMessage(stored: stored, reliable: true, outgoing: false))))
    }
}
