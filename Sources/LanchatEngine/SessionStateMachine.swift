import LanchatCore
import LanchatWire

/// The protocol engine of one node: every decision about links, invitations, rooms, delivery and
/// redialing, with no sockets, no files, no database and no clock. Inputs are method calls (a link
/// came up or went down, frames arrived, time passed, a command from the API); each returns the
/// `SessionAction`s the shell must perform. The shell (`SessionNode`) owns the connections, the store
/// and the timers' sleeping; the simulator (Tests/LanchatSimulatorTests) drives many engines at once on
/// a virtual clock.
///
/// The engine is composed of one part per conversation: `LinkTable` (one connection per pair),
/// invitations (`SessionStateMachine+Invitations.swift`), membership (`+Membership`), delivery and the
/// outbox (`+Delivery`), the redial schedule (`+Redial`), with their timers in one `TimerTable`.
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

    struct Redial: Equatable, Sendable {
        var attempt = 0
        var notBefore: Int64
        var generation = -1
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
        /// Reliable messages not yet acknowledged: (recipient, message, room).
        public var outbox: [(peer: PeerID, message: WireID, room: RoomID)]
        public var knownPeers: KnownPeerBook
        /// Ids that a room member proved with its key on a TLS connection (see `keyed`).
        public var keyedPeers: Set<PeerID>
        /// Room metadata (`+Metadata`), as the store keeps it.
        public var metadata: [StoredMeta] = []
        /// When we joined each room (milliseconds, our clock).
        public var joinedAt: [RoomID: Int64] = [:]

        public init(rooms: [(room: RoomID, members: [StoredMember])] = [], lastSequences: [RoomID: UInt64] = [:],
                    outbox: [(peer: PeerID, message: WireID, room: RoomID)] = [], knownPeers: KnownPeerBook = KnownPeerBook(),
                    keyedPeers: Set<PeerID> = []) {
            self.rooms = rooms
            self.lastSequences = lastSequences
            self.outbox = outbox
            self.knownPeers = knownPeers
            self.keyedPeers = keyedPeers
        }
    }

    /// The text of a ROOM_LEAVE that answers a ROOM_MEMBERS from someone we do not count as a member.
    public static let notAMember = "not a member"

    public let configuration: Configuration
    let addressBook: any PeerAddressBook
    let shortCode: @Sendable (PeerID) -> String
    var ids: IDGenerator
    public internal(set) var known: KnownPeerBook
    /// Keys already warned about (`warnOfNewKey`) while the node runs.
    var warnedKeys: Set<PeerID> = []
    /// Ids a room member has proved with its key (TLS) at least once, kept in the store. A plaintext
    /// connection (`--encryption optional`) claiming one of them is refused, and one of them is dialed
    /// with TLS whatever its advertisement says: only an id never seen with a key can go without one.
    public internal(set) var keyed: Set<PeerID>
    var links = LinkTable()
    var timers = TimerTable()
    var rooms: [RoomID: Room] = [:]
    var sequences: [RoomID: UInt64] = [:]
    var pending: [WireID: PendingInvitation] = [:]
    var outgoing: [WireID: OutgoingInvitation] = [:]
    /// Answers we gave, oldest first, at most `maximumPendingInvitations` (`AnsweredInvitation`).
    var answered: [WireID: AnsweredInvitation] = [:]
    var answeredOrder: [WireID] = []
    /// ROOM_MEMBERS from peers we did not know to be members yet, kept until someone introduces them.
    var claims: [RoomID: [PeerID: Claim]] = [:]
    var redials: [PeerID: Redial] = [:]
    /// Members for whom a "left" notice was shown, so a reconnection says "rejoined".
    var departed: Set<RoomMember> = []
    /// Reliable messages each recipient has not acknowledged yet (ids and their rooms); the store keeps
    /// the messages themselves.
    var outbox: [PeerID: [WireID: RoomID]] = [:]
    var noticeSequence: Int64 = 0
    /// Rooms whose history we asked for, and whom we asked.
    public internal(set) var historyRequested: [RoomID: PeerID] = [:]
    /// Invitations whose answer never reached us (the connection dropped, or the reply timed out):
    /// if that peer later tells us it is in the room, it did accept, and is admitted. Oldest first,
    /// at most `maximumUnansweredInvitations`.
    var unanswered: [RoomMember] = []
    /// Members that told us themselves that they are not in a room (ROOM_LEAVE), until when: another
    /// member's stale list does not bring them back meanwhile; only a direct admission does.
    var tombstones: [RoomMember: Int64] = [:]
    /// Newcomers we invited that may ask us for the room's history once (HISTORY_REQUEST is answered
    /// once per join, not on demand: each answer reads and sends up to `history-for-newcomers` messages).
    /// Oldest first, at most `maximumUnansweredInvitations`.
    var historyOwed: [RoomMember] = []
    /// Relay (version 2): SYNC_REQUESTs we sent and may get a history for, and those we answered, per
    /// connection (forgotten when it ends); histories under way that answer one.
    var syncAsked: Set<RoomMember> = []
    var syncServed: [RoomMember: Int] = [:]
    var relayTransfers: Set<WireID> = []
    /// Peers told about once on their connection for a live message refused for its signature.
    var refusedLive: Set<PeerID> = []
    /// Membership with provenance (`+Proofs`): our own proof per room, when we last left each room,
    /// the signed leaves of others we hold (when each left; at most `maximumTombstones`), and peers told
    /// about once on their connection for introducing members without proofs.
    var ownProofs: [RoomID: WireFrame.MembershipProof] = [:]
    var ownLeaves: [RoomID: UInt64] = [:]
    var signedLeaves: [RoomMember: UInt64] = [:]
    var refusedIntroductions: Set<PeerID> = []
    /// Presence (`+Presence`): ours, whether auto-away set it, when a person last acted, and each
    /// peer's as it told us (peers we share a room with).
    var ownPresence = PresenceState()
    var autoAway = false
    var lastActivity: Int64 = 0
    var presences: [PeerID: PresenceState] = [:]
    /// Room metadata (`+Metadata`): the winning entry of each key, deletions included.
    var meta: [RoomID: [String: WireFrame.MetaEntry]] = [:]
    /// Typing (`+Presence`): when we last told each room, when we last reported each member.
    var typingTold: [RoomID: Int64] = [:]
    var typingHeard: [RoomMember: Int64] = [:]
    /// Topics (`+Topics`): ours per room; what each connected member subscribes to; our next sequence
    /// per topic; the last sequence heard per publisher and topic; the rate limits both ways; peers told
    /// about once on their connection for sending too fast; messages dropped for that.
    var ownTopics: [RoomID: Set<String>] = [:]
    /// Administration (`+Admin`): when we joined each room (our clock), and the closing of rooms we left
    /// because an administrator closed them (at most 64), for members that come back unaware.
    var joinedAt: [RoomID: Int64] = [:]
    var closedRooms: [RoomID: WireFrame.MetaEntry] = [:]
    var peerTopics: [RoomMember: Set<String>] = [:]
    var topicSequences: [RoomTopic: UInt64] = [:]
    var topicHeard: [TopicSource: UInt64] = [:]
    var topicBuckets: [RoomID: TopicBucket] = [:]
    var peerTopicBuckets: [RoomMember: TopicBucket] = [:]
    var topicFloodTold: Set<PeerID> = []
    public internal(set) var topicDrops = 0
    /// Named byte streams (`+Streams`).
    var streamTable = StreamTable()
    /// Files and history resources (`+Transfers`).
    var transfers = TransferTable()

    public init(
        configuration: Configuration, restored: Restored, addressBook: any PeerAddressBook, ids: IDGenerator,
        shortCode: @escaping @Sendable (PeerID) -> String
    ) {
        self.configuration = configuration
        self.addressBook = addressBook
        self.ids = ids
        self.shortCode = shortCode
        streamTable.limits = configuration.streamLimits
        transfers.limits = configuration.transferLimits
        known = restored.knownPeers
        keyed = restored.keyedPeers
        sequences = restored.lastSequences
        joinedAt = restored.joinedAt
        for (room, members) in restored.rooms {
            var state = Room()
            for member in members {
                guard let id = PeerID(member.peerID), id != configuration.ownID else { continue }
                state.members[id] = Member(name: member.name, port: member.port, addresses: member.addresses)
            }
            rooms[room] = state
        }
        for stored in restored.metadata {
            // What a store holds beyond the limits a receiver keeps (an older file, or one edited) is not loaded.
            guard let room = RoomID(stored.room), WireFrame.MetaEntry.isKey(stored.key), rooms[room] != nil,
                  (meta[room]?.count ?? 0) < 2 * Self.maximumMetaKeys, stored.version <= Self.maximumMetaNumber else { continue }
            meta[room, default: [:]][stored.key] = WireFrame.MetaEntry(
                key: stored.key, value: stored.value, deleted: stored.deleted, version: stored.version,
                timestampMilliseconds: UInt64(max(0, stored.timestamp)), author: stored.authorID,
                signature: Signature(key: stored.authorKey, bytes: stored.signature))
        }
        for entry in restored.outbox where rooms[entry.room] != nil {
            outbox[entry.peer, default: [:]][entry.message] = entry.room
        }
    }

    /// Starts the node's own schedule (redialing the members it remembers). Call once, first.
    public mutating func start(at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        scheduleRedial(at: now, &out)
        scheduleResync(at: now)
        lastActivity = now.monotonic
        scheduleAutoAway()
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
            }
        }
        return out
    }

    // MARK: Links

    /// A connection to `peer` is established (TLS and HELLO done). Returns the handle that serves the
    /// peer now (the new one, or an existing one the duplicate rule keeps), or nil if it was refused.
    /// `authenticated`: the peer's key was verified against its id (TLS); false for plaintext.
    /// `version`: the wire protocol version the HELLOs agreed on (2: messages are signed).
    public mutating func linkUp(
        _ handle: LinkHandle, peer: SessionPeer, dialedByUs: Bool, remoteAddress: String?, authenticated: Bool = true, version: UInt16 = 1,
        at now: EngineTime
    ) -> (serving: LinkHandle?, actions: [SessionAction]) {
        var out: [SessionAction] = []
        if !authenticated, configuration.encryption != .none, keyed.contains(peer.id) || links.entry(peer.id)?.authenticated == true {
            // A plaintext HELLO proves nothing: it may not speak for an id that was proved with a key.
            out.append(.close(handle, .refused, "\(configuration.ownName) knows \(peer.id.short) by its key: connect with encryption"))
            out.append(.emit(.security(peer: peer, text: Self.plaintextClaimText(peer))))
            return (nil, out)
        }
        if case .nameKnownWithOtherKeys(let others) = known.check(label: peer.name, id: peer.id) {
            warnOfNewKey(peer, others: others, &out)
        }
        let entry = LinkTable.Entry(
            handle: handle, peer: peer, dialer: dialedByUs ? configuration.ownID : peer.id, remoteAddress: remoteAddress, since: now.monotonic,
            authenticated: authenticated, version: version)
        switch links.offer(entry, ownID: configuration.ownID) {
        case .keepExisting(let existing):
            out.append(.close(handle, .leaving, "duplicate connection"))
            return (existing, out)
        case .adopt(let replaced):
            if let replaced {
                out.append(.close(replaced, .leaving, "duplicate connection"))
                // The peer may have restarted: its subscriptions and topic sequences start again.
                forgetTopics(of: peer.id)
                // What we sent on the old one may be lost with it (the peer kept the other connection
                // and closed ours unread): invitations still waiting go again on this one.
                for (_, invitation) in outgoing.sorted(by: { $0.key.description < $1.key.description }) where invitation.peer.id == peer.id {
                    out.append(.send(handle, [.invite(invitation.frame)]))
                }
            }
        }
        if !sharesRoom(with: peer.id), let crowded = strangerToClose(arriving: peer.id) {
            out.append(.close(crowded, .leaving, "too many connections from peers outside \(configuration.ownName)'s rooms"))
            if crowded == handle { return (nil, out) }
        }
        if authenticated, sharesRoom(with: peer.id) { markKeyed(peer.id, &out) }
        // The redial backoff is reset once the peer speaks on the connection (`received`), not here: a
        // peer that accepts TLS and then refuses us must not be redialed at once, again and again.
        for (room, state) in rooms.sorted(by: { $0.key.rawValue < $1.key.rawValue }) where state.members[peer.id] != nil {
            out.append(.emit(.memberState(room: room.rawValue, peer: peer, state: .connected)))
            if departed.remove(RoomMember(room: room, peer: peer.id)) != nil { notice(room, "\(peer.name) rejoined", at: now, &out) }
            if let entry = links.entry(peer.id) { sendMembers(room, to: entry, at: now, &out) }
            sendMeta(room, to: handle, &out)
        }
        if sharesRoom(with: peer.id) { out.append(.send(handle, [presenceFrame(for: peer.id)])) }
        for room in rooms.keys.sorted(by: { $0.rawValue < $1.rawValue }) where rooms[room]?.members[peer.id] != nil {
            sendTopics(room, to: handle, &out)
        }
        flushOutbox(to: peer.id, at: now, &out)
        if let entry = links.entry(peer.id) { askForWhatWeLack(from: entry, &out) }
        out.append(.peerConnected(peer, handle))
        resumeTransfers(to: peer.id, on: handle, at: now, &out)
        scheduleResync(at: now)
        return (handle, out)
    }

    /// With more stranger links (peers sharing no room with us) than allowed: the oldest one with no
    /// invitation under way (either way), or the arriving one if all are busy; nil while within the cap.
    func strangerToClose(arriving: PeerID) -> LinkHandle? {
        let strangers = links.peers.filter { !sharesRoom(with: $0) }.compactMap { links.entry($0) }
        guard strangers.count > configuration.maximumStrangerLinks else { return nil }
        let busy = Set(pending.values.map(\.peer)).union(outgoing.values.map(\.peer.id))
        let idle = strangers.filter { $0.peer.id != arriving && !busy.contains($0.peer.id) }
        let oldest = idle.min { ($0.since, $0.handle.rawValue) < ($1.since, $1.handle.rawValue) }
        return oldest?.handle ?? links.handle(arriving)
    }

    /// Remembers that `id` proved itself with its key (a room member on a TLS connection).
    mutating func markKeyed(_ id: PeerID, _ out: inout [SessionAction]) {
        guard !keyed.contains(id), keyed.count < configuration.maximumKeyedPeers else { return }
        keyed.insert(id)
        out.append(.persist(.rememberKeyed(id)))
    }

    static func plaintextClaimText(_ peer: SessionPeer) -> String {
        "REFUSED: a connection without encryption claimed to be '\(peer.name)' (\(peer.id.short)), an id known by its key. "
            + "Someone on the network may be impersonating it."
    }

    /// A connection ended (whether or not it served its peer).
    public mutating func linkDown(_ handle: LinkHandle, reason: PeerCloseReason, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        // Streams live on their own connection, whether or not it was the one serving the peer.
        streamsLost(on: handle, reason: "\(reason)", &out)
        guard let entry = links.closed(handle, reason: reason) else { return out }
        let id = entry.peer.id
        timers.cancel(.retransmit(id))
        if case .goodbye(.leaving, "duplicate connection") = reason, links.isLinked(id) {
            // The peer kept another connection, and we have it: nothing is lost.
            scheduleRedial(at: now, &out)
            return out
        }
        // (A "duplicate connection" close that leaves us no connection to the peer: it kept one that is
        // stale on our side (we restarted, it has not noticed). That one times out there; until then we
        // are not connected, and what was under way on ours waits, and makes us dial again.)
        forgetSync(with: id)
        forgetTopics(of: id)
        for (wireID, invitation) in outgoing.sorted(by: { $0.key.description < $1.key.description }) where invitation.peer.id == id {
            let outcome: InviteOutcome
            if case .goodbye(.refused, let text) = reason { outcome = .refused(text) } else { outcome = .unreachable("connection \(reason)") }
            closeOutgoingInvitation(wireID, outcome, &out)
        }
        out.append(.peerDisconnected(id, reason: "connection \(reason)"))
        transfersLost(id, reason: "connection \(reason)", at: now, &out)
        for (wireID, entry) in pending.sorted(by: { $0.value.invitation.receivedAt < $1.value.invitation.receivedAt }) where entry.peer == id {
            timers.cancel(.incomingInvitation(wireID))
            pending[wireID] = nil
            out.append(.emit(.invitationClosed(entry.invitation, outcome: "withdrawn")))
        }
        for (room, state) in rooms.sorted(by: { $0.key.rawValue < $1.key.rawValue }) where state.members[id] != nil {
            out.append(.emit(.memberState(room: room.rawValue, peer: entry.peer, state: .notConnected)))
            if departed.insert(RoomMember(room: room, peer: id)).inserted {
                notice(room, "\(entry.peer.name) left: \(reason)", at: now, &out)
                out.append(.emit(.memberLeft(room: room.rawValue, peer: entry.peer, code: Self.code(of: reason),
                                             text: "\(entry.peer.name) left: \(reason)", fatal: false)))
            }
        }
        scheduleRedial(at: now, &out)
        return out
    }

    /// Where to dial `peer` (and a warning if a known name comes with its new key). Marks the peer as being dialed
    /// until `dialFinished`.
    public mutating func prepareDial(_ peer: PeerID) -> (plan: DialPlan?, error: SessionError?, actions: [SessionAction]) {
        var candidates: [PeerCandidate] = []
        var encryption: EncryptionPreference?
        var name: String?
        if let (hint, _) = addressBook.lookup(peer) {
            candidates += hint.addresses.map { PeerCandidate(address: $0, port: hint.port) }
            encryption = hint.encryption
            name = hint.name
        }
        for room in rooms.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            if let member = rooms[room]?.members[peer], member.port > 0 {
                candidates += member.addresses.map { PeerCandidate(address: $0, port: member.port) }
                name = name ?? member.name
            }
        }
        var out: [SessionAction] = []
        if let name, case .nameKnownWithOtherKeys(let others) = known.check(label: name, id: peer) {
            warnOfNewKey(SessionPeer(id: peer, name: name), others: others, &out)
        }
        // An id seen with a key is dialed with TLS, whatever its (unauthenticated) TXT record says.
        if keyed.contains(peer), configuration.encryption != .none { encryption = .required }
        _ = links.startDialing(peer)
        return (DialPlan(peer: peer, name: name, candidates: candidates, encryption: encryption), nil, out)
    }

    /// A dial ended (connected or not; a connection reports `linkUp` on its own).
    public mutating func dialFinished(_ peer: PeerID, at now: EngineTime) -> [SessionAction] {
        links.stopDialing(peer)
        var out: [SessionAction] = []
        scheduleRedial(at: now, &out)
        return out
    }

    /// Tells the person, once per key while the node runs, that a name it knows comes with a new key.
    /// Nothing is refused: the key is the peer, the name only a label, and two hosts may share one.
    mutating func warnOfNewKey(_ peer: SessionPeer, others: [PeerID], _ out: inout [SessionAction]) {
        if warnedKeys.count >= 1024 { warnedKeys = [] }
        guard warnedKeys.insert(peer.id).inserted else { return }
        out.append(.emit(.security(peer: peer, text: newKeyText(name: peer.name, others: others, now: peer.id))))
    }

    func newKeyText(name: String, others: [PeerID], now: PeerID) -> String {
        let known = others.map { "\($0.short), code \(shortCode($0))" }.joined(separator: "; ")
        if let before = self.known.labels[now] {
            return "WARNING: the peer known as '\(before)' (\(now.short), code \(shortCode(now))) now calls itself '\(name)', "
                + "a name known with \(known). It is not that peer; both are kept apart by their ids (`lanchat peers`)."
        }
        return "WARNING: '\(name)' now comes with a key not met before (\(now.short), code \(shortCode(now))); "
            + "'\(name)' was known with \(known). Another host may have the same name, or this one a new key: compare "
            + "codes with its owner before you trust it. Both are kept apart by their ids (`lanchat peers`)."
    }

    // MARK: Frames

    /// Frames that arrived on a connection, as one batch (the shell commits their writes at once).
    public mutating func received(_ frames: [WireFrame], on handle: LinkHandle, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        guard let entry = links.peer(on: handle) else { return out }
        redials[entry.peer.id] = nil
        var acks: [WireID] = []
        for frame in frames {
            switch frame {
            case .message(let message): receive(message, from: entry, acks: &acks, &out)
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
            case .syncRequest(let request): received(request, from: entry, &out)
            case .presence(let presence): received(presence, from: entry, &out)
            case .roomMeta(let update): received(update, from: entry, at: now, &out)
            case .typing(let room): heardTyping(in: room, from: entry, at: now, &out)
            case .topicSubscriptions(let subscriptions): received(subscriptions, from: entry)
            case .topicMessage(let message): received(message, from: entry, at: now, &out)
            case .historyRequest(let room, let since, let limit):
                guard rooms[room]?.members[entry.peer.id] != nil,
                      let owed = historyOwed.firstIndex(of: RoomMember(room: room, peer: entry.peer.id)) else { break }
                historyOwed.remove(at: owed)
                out.append(.sendHistory(room, sinceMilliseconds: Int64(clamping: since), to: entry.peer, signed: entry.version >= 2,
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
        historyRequested[room] = nil
    }

    /// A system message, kept in history and reported ("bob joined").
    mutating func notice(_ room: RoomID, _ text: String, at now: EngineTime, _ out: inout [SessionAction]) {
        // Notices made in the same millisecond keep their order in history (it sorts by time, then sequence).
        noticeSequence += 1
        let stored = StoredMessage(
            id: ids.wireID().description, room: room.rawValue, senderID: configuration.ownID.rawValue, senderName: "*",
            sequence: noticeSequence, timestamp: now.wall, kind: .system, body: text)
        out.append(.persist(.insertMessage(stored, report: ChatMessage(stored: stored, reliable: true, outgoing: false))))
    }
}
