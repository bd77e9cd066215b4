import Glibc
import LanchatDiscovery
import LanchatSecurity
import LanchatStore
import LanchatWire
import Logging
import NIOCore
import NIOPosix

/// One peer's side of lanchat sessions: Multipeer Connectivity's advertiser, browser and session in
/// one actor, over TLS connections (`PeerConnector`) and a SQLite store (`ChatStore`).
///
/// - Browser: `invite(_:room:context:timeout:)` invites a discovered peer into a room
///   (`MCNearbyServiceBrowser.invitePeer(_:to:withContext:timeout:)`).
/// - Advertiser: incoming invitations are accepted by `autoAccept`, or reported as
///   `SessionEvent.invitation` and answered with `accept(_:)` / `decline(_:)`
///   (`MCNearbyServiceAdvertiserDelegate`'s invitation handler).
/// - Session: a room (`MCSession`) whose members are all connected to each other (a mesh). `send(_:room:to:reliable:)`
///   sends to the room or chosen members; `events` reports member state changes and received messages.
///
/// One connection per pair of peers carries every room they share. When both sides dial at once, the
/// connection dialed by the peer with the smaller id is kept. Reliable messages are stored, queued per
/// recipient until acknowledged (the outbox survives restarts), resent after a reconnection and every
/// `retransmitInterval`, and de-duplicated by id. Members that are not connected are redialed with
/// backoff; the peer with the smaller id dials first.
public actor SessionNode {
    public struct Configuration: Sendable {
        public var ownID: PeerID
        public var ownName: String
        /// Our peer port, told to other members so they can dial us.
        public var port: Int
        public var autoAccept: AutoAcceptPolicy
        public var encryption: EncryptionPreference
        public var defaultInviteTimeout: Duration = .seconds(60)
        public var maximumPendingInvitations = 64
        public var retransmitInterval: Duration = .seconds(5)
        public var maximumReconnectDelay: Duration = .seconds(10)
        /// Where received files go (created if missing).
        public var downloadDirectory: String = "/tmp"
        /// Where a room's history from its inviter is received before it is merged (a part file);
        /// `nil`: the download directory. lanchatd uses `incoming` in its state directory.
        public var historyDirectory: String?
        /// The largest file accepted from a peer.
        public var maximumFileSize: UInt64 = 1 << 40
        /// Received files readable by the daemon's group (0640, directory 0750): for the system service,
        /// whose users share its group. Otherwise 0600 / 0700.
        public var downloadsForGroup = false
        /// How many of a room's latest messages a member sends a newcomer it invited.
        public var historyForNewcomers = 1000

        public init(ownID: PeerID, ownName: String, port: Int, autoAccept: AutoAcceptPolicy, encryption: EncryptionPreference) {
            self.ownID = ownID
            self.ownName = ownName
            self.port = port
            self.autoAccept = autoAccept
            self.encryption = encryption
        }
    }

    /// A live connection to a peer. Used only on the node's executor (its event loop).
    final class Link: @unchecked Sendable {
        let connection: PeerConnector.Connection
        let peer: SessionPeer
        /// The peer whose side dialed.
        let dialer: PeerID
        var lastReliableSend = ContinuousClock.now

        init(connection: PeerConnector.Connection, peer: SessionPeer, dialer: PeerID) {
            self.connection = connection
            self.peer = peer
            self.dialer = dialer
        }

        var remoteAddress: String? { connection.channel.remoteAddress?.ipAddress }
    }

    struct Member {
        var name: String
        var port: Int
        var addresses: [String]
    }

    struct Room {
        var members: [PeerID: Member] = [:]
    }

    struct Pending {
        var invitation: IncomingInvitation
        var peer: PeerID
        var timer: Task<Void, Never>
    }

    struct Outgoing {
        var peer: SessionPeer
        var room: RoomID
        var continuation: CheckedContinuation<InviteOutcome, Never>
        var timer: Task<Void, Never>
    }

    struct Redial {
        var attempt = 0
        var notBefore = ContinuousClock.now
        var generation = -1
    }

    public let configuration: Configuration
    /// The node runs on this event loop (its connections' loop): frames arrive without a thread hop.
    public nonisolated let eventLoop: EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { eventLoop.executor.asUnownedSerialExecutor() }
    public nonisolated let events: AsyncStream<SessionEvent>
    private let eventSink: AsyncStream<SessionEvent>.Continuation
    private let connector: PeerConnector
    let store: ChatStore
    private var knownPeers: KnownPeers
    private let directory: PeerDirectory
    private let logger: Logger

    var links: [PeerID: Link] = [:]
    private var dialing: Set<PeerID> = []
    private var rooms: [RoomID: Room] = [:]
    private var sequences: [RoomID: UInt64] = [:]
    private var pending: [WireID: Pending] = [:]
    private var outgoing: [WireID: Outgoing] = [:]
    /// ROOM_MEMBERS from peers we did not know to be members yet, kept until someone introduces them.
    private var claims: [RoomID: [PeerID: (members: [WireFrame.Member], at: ContinuousClock.Instant)]] = [:]
    private var redials: [PeerID: Redial] = [:]
    /// (room, peer) pairs for which a "left" notice was shown, so a reconnection says "rejoined".
    private var departed: Set<String> = []
    /// Why the last connection to each peer ended (an invitation racing a refusal reports it).
    private var lastCloseReason: [PeerID: PeerCloseReason] = [:]
    /// File transfers (Transfers.swift).
    var outgoingTransfers: [WireID: OutgoingTransfer] = [:]
    var incomingTransfers: [WireID: IncomingTransfer] = [:]
    var finishedTransfers: [TransferInfo] = []
    /// Named byte streams (Streams.swift).
    var streams: [WireID: StreamState] = [:]
    var pendingStreamOpens: [PendingStreamOpen] = []
    var streamAcceptors: [StreamAcceptor] = []
    /// Offers being resumed from a `.part` file (hashing what it holds).
    var resumingTransfers: Set<WireID> = []
    private var noticeSequence: Int64 = 0
    /// Rooms whose history we asked for, and whom we asked.
    var historyRequested: [RoomID: PeerID] = [:]
    let fileIO: NIOThreadPool

    public init(
        configuration: Configuration, eventLoop: EventLoop, connector: PeerConnector, store: ChatStore, knownPeers: KnownPeers,
        directory: PeerDirectory, logger: Logger
    ) throws {
        self.configuration = configuration
        self.eventLoop = eventLoop
        fileIO = NIOThreadPool(numberOfThreads: 1)
        fileIO.start()
        self.connector = connector
        self.store = store
        self.knownPeers = knownPeers
        self.directory = directory
        self.logger = logger
        (events, eventSink) = AsyncStream<SessionEvent>.makeStream(bufferingPolicy: .bufferingNewest(100_000))
        for (name, members) in try store.rooms() {
            guard let room = RoomID(name) else { continue }
            var state = Room()
            for member in members {
                guard let id = PeerID(member.peerID), id != configuration.ownID else { continue }
                state.members[id] = Member(name: member.name, port: member.port, addresses: member.addresses)
            }
            rooms[room] = state
            sequences[room] = UInt64(try store.lastSequence(room: name, sender: configuration.ownID.rawValue))
        }
    }

    // MARK: Running

    /// Redials members and retransmits unacknowledged messages until cancelled; then says GOODBYE to
    /// every peer.
    public func run() async {
        restoreTransfers()
        while !Task.isCancelled {
            if maintain() {
                try? await Task.sleep(for: .milliseconds(250))
            } else {
                // Nothing to redial, retransmit or checkpoint: sleep until something changes (an idle
                // daemon makes no wake-ups of its own).
                await withTaskCancellationHandler {
                    await withCheckedContinuation { wakeup = $0 }
                } onCancel: {
                    Task { await self.nudge() }
                }
            }
        }
        for link in links.values { link.connection.leave(.shutdown) }
        links = [:]
        closeTransfers()
        closeStreams()
        eventSink.finish()
        store.close()
        try? await fileIO.shutdownGracefully()
    }

    private var lastCheckpoint = ContinuousClock.now

    private var wakeup: CheckedContinuation<Void, Never>?
    /// Something was written since the last checkpoint.
    private var dirty = false

    /// Wakes the maintenance loop (state changed: a member to reach, a message queued, a write).
    private func nudge() {
        wakeup?.resume()
        wakeup = nil
    }

    /// One round of maintenance; returns whether another round is needed soon.
    private func maintain() -> Bool {
        let now = ContinuousClock.now
        if dirty, now - lastCheckpoint > .seconds(2) {
            lastCheckpoint = now
            dirty = false
            store.checkpoint()
        }
        var busy = dirty
        // Redial members we should be connected to.
        var wanted = Set<PeerID>()
        for room in rooms.values { wanted.formUnion(room.members.keys) }
        wanted.formUnion(transferPeers)
        if wanted.contains(where: { links[$0] == nil }) { busy = true }
        for peer in wanted where links[peer] == nil && !dialing.contains(peer) {
            var redial = redials[peer] ?? Redial(notBefore: now + (configuration.ownID < peer ? .zero : .milliseconds(1500)))
            if let generation = directory.lookup(peer)?.generation, generation != redial.generation {
                // Discovery saw it (again): try soon.
                redial.generation = generation
                if redial.attempt > 0 { redial.notBefore = min(redial.notBefore, now + (configuration.ownID < peer ? .zero : .milliseconds(1000))) }
            }
            redials[peer] = redial
            guard now >= redial.notBefore else { continue }
            redial.attempt += 1
            let delay = min(configuration.maximumReconnectDelay, .milliseconds(250) * (1 << min(redial.attempt, 6)))
            redial.notBefore = now + delay
            redials[peer] = redial
            dialing.insert(peer)
            Task { _ = await self.dial(peer) }
        }
        // Retransmit what is still unacknowledged.
        guard let counts = try? store.outboxCounts() else { return true }
        if !counts.isEmpty { busy = true }
        for (peerText, _) in counts {
            guard let peer = PeerID(peerText), let link = links[peer], now - link.lastReliableSend >= configuration.retransmitInterval else { continue }
            flushOutbox(to: link)
        }
        // Forget stale claims.
        for (room, byPeer) in claims {
            let kept = byPeer.filter { now - $0.value.at < .seconds(30) }
            claims[room] = kept.isEmpty ? nil : kept
        }
        return busy || !claims.isEmpty
    }

    // MARK: Connections

    /// Dials a peer unless connected; returns the link or why not.
    func dial(_ peer: PeerID) async -> Result<Link, SessionError> {
        defer { dialing.remove(peer) }
        if let link = links[peer] { return .success(link) }
        var candidates: [(String, Int)] = []
        var theirs = configuration.encryption
        var name: String?
        if let (hint, _) = directory.lookup(peer) {
            candidates += hint.addresses.map { ($0, hint.port) }
            theirs = hint.encryption ?? theirs
            name = hint.name
        }
        for room in rooms.values {
            if let member = room.members[peer], member.port > 0 {
                candidates += member.addresses.map { ($0, member.port) }
                name = name ?? member.name
            }
        }
        if let name, case .changed(let previous) = knownPeers.check(label: name, id: peer) {
            let text = keyChangeText(name: name, previous: previous, now: peer)
            eventSink.yield(.security(peer: SessionPeer(id: peer, name: name), text: text))
            return .failure(SessionError("key_changed", text))
        }
        var seen = Set<String>()
        var lastError = "no address known (not discovered on the network)"
        for (address, port) in candidates where seen.insert("\(address) \(port)").inserted {
            guard let socketAddress = Self.socketAddress(address, port: port) else { continue }
            do {
                let connection = try await connector.dial(socketAddress, expected: peer, theirs: theirs)
                if let link = adopt(connection) { return .success(link) }
                return .failure(SessionError("refused", "the connection to \(name ?? peer.short) was refused"))
            } catch {
                lastError = error.description
                if error.description.contains("preferences cannot meet") { break }
            }
        }
        return .failure(SessionError("unreachable", lastError))
    }

    static func socketAddress(_ text: String, port: Int) -> SocketAddress? {
        let parts = text.split(separator: "%", maxSplits: 1)
        if parts.count == 1 { return try? SocketAddress(ipAddress: text, port: port) }
        var v6 = sockaddr_in6()
        v6.sin6_family = sa_family_t(AF_INET6)
        v6.sin6_port = UInt16(port).bigEndian
        guard inet_pton(AF_INET6, String(parts[0]), &v6.sin6_addr) == 1 else { return nil }
        v6.sin6_scope_id = if_nametoindex(String(parts[1]))
        return SocketAddress(v6, host: String(parts[0]))
    }

    /// Takes over an established connection (dialed or accepted). Returns the link that serves the
    /// peer now, or `nil` if the connection was refused.
    @discardableResult
    public func accepted(_ connection: PeerConnector.Connection) -> Bool {
        adopt(connection) != nil
    }

    private func adopt(_ connection: PeerConnector.Connection) -> Link? {
        guard let id = PeerID(connection.session.peerID) else {
            connection.leave(.protocolError, text: "bad peer id")
            return nil
        }
        let peer = SessionPeer(id: id, name: connection.session.name)
        if case .changed(let previous) = knownPeers.check(label: peer.name, id: id) {
            let text = keyChangeText(name: peer.name, previous: previous, now: id)
            logger.warning("refused a known name with another key", metadata: ["peer.name": "\(peer.name)", "peer.id": "\(id.short)"])
            connection.leave(.refused, text: "\(configuration.ownName) knows '\(peer.name)' with another key; refused")
            eventSink.yield(.security(peer: peer, text: text))
            return nil
        }
        let link = Link(connection: connection, peer: peer, dialer: connection.dialed ? configuration.ownID : id)
        if let existing = links[id] {
            // Keep the connection dialed by the smaller id; a newer one from the same dialer replaces
            // a stale one (the peer restarted before we noticed).
            let keepExisting = existing.dialer != link.dialer && existing.dialer == min(configuration.ownID, id)
            if keepExisting {
                connection.leave(.leaving, text: "duplicate connection")
                return existing
            }
            links[id] = link
            existing.connection.leave(.leaving, text: "duplicate connection")
        } else {
            links[id] = link
        }
        redials[id] = nil
        connected(link)
        connection.attach { [weak self] event in
            guard let self else { return }
            if self.eventLoop.inEventLoop {
                self.assumeIsolated { $0.handle(event, from: link) }
            } else {
                Task { await self.handle(event, from: link) }
            }
        }
        return link
    }

    private func keyChangeText(name: String, previous: PeerID, now: PeerID) -> String {
        "REFUSED: '\(name)' presents a different key than before (known fingerprint \(previous.short), now \(now.short)). "
            + "Someone may be impersonating it. If it was reinstalled, compare short codes and run `lanchat forget \(name)`."
    }

    private func connected(_ link: Link) {
        let id = link.peer.id
        for (room, state) in rooms where state.members[id] != nil {
            eventSink.yield(.memberState(room: room.rawValue, peer: link.peer, state: .connected))
            if departed.remove("\(room)|\(id)") != nil { notice(room, "\(link.peer.name) rejoined") }
            link.connection.send([.roomMembers(membersFrame(room))])
        }
        flushOutbox(to: link)
        resumeTransfers(to: link)
    }

    private func flushOutbox(to link: Link) {
        guard let queued = try? store.outbox(peerID: link.peer.id.rawValue), !queued.isEmpty else { return }
        link.lastReliableSend = .now
        var frames: [WireFrame] = []
        for message in queued {
            guard let frame = Self.frame(message, reliable: true) else { continue }
            frames.append(frame)
            if frames.count == 512 {
                link.connection.send(frames)
                frames = []
            }
        }
        if !frames.isEmpty { link.connection.send(frames) }
    }

    private func handle(_ event: PeerLinkEvent, from link: Link) {
        defer {
            dirty = true
            nudge()
        }
        switch event {
        case .frames(let frames):
            var acks: [WireID] = []
            do {
                try store.transaction {
                    for frame in frames { try process(frame, from: link, acks: &acks) }
                }
            } catch {
                // Not stored, so not acknowledged: the sender keeps it and resends.
                logger.error("cannot store frames from a peer", metadata: ["peer.name": "\(link.peer.name)", "error": "\(error)"])
                return
            }
            var index = 0
            while index < acks.count {
                let end = min(index + 1024, acks.count)
                link.connection.send([.ack(Array(acks[index..<end]))])
                index = end
            }
        case .closed(let reason):
            disconnected(link, reason: reason)
        }
    }

    private func disconnected(_ link: Link, reason: PeerCloseReason) {
        let id = link.peer.id
        guard links[id] === link else { return }  // replaced by another connection
        links[id] = nil
        lastCloseReason[id] = reason
        if case .goodbye(.leaving, "duplicate connection") = reason { return }
        // Invitations over this connection end with it.
        for (wireID, entry) in outgoing where entry.peer.id == id {
            let outcome: InviteOutcome
            if case .goodbye(.refused, let text) = reason { outcome = .refused(text) } else { outcome = .unreachable("connection \(reason)") }
            finishOutgoing(wireID, outcome)
        }
        transfersLost(peer: id, reason: "connection \(reason)")
        streamsLost(peer: id, reason: "connection \(reason)")
        for (wireID, entry) in pending where entry.peer == id {
            entry.timer.cancel()
            pending[wireID] = nil
            eventSink.yield(.invitationClosed(entry.invitation, outcome: "withdrawn"))
        }
        for (room, state) in rooms where state.members[id] != nil {
            eventSink.yield(.memberState(room: room.rawValue, peer: link.peer, state: .notConnected))
            if departed.insert("\(room)|\(id)").inserted { notice(room, "\(link.peer.name) left: \(reason)") }
        }
    }

    // MARK: Frames

    private func process(_ frame: WireFrame, from link: Link, acks: inout [WireID]) throws {
        switch frame {
        case .message(let message):
            let sender = link.peer.id
            guard rooms[message.room]?.members[sender] != nil else {
                logger.debug("message for a room the sender is not in here", metadata: ["room": "\(message.room)", "peer.name": "\(link.peer.name)"])
                return
            }
            let kind: StoredMessage.Kind = message.kind == .file ? .file : message.kind == .system ? .system : .text
            let stored = StoredMessage(
                id: message.id.description, room: message.room.rawValue, senderID: sender.rawValue, senderName: link.peer.name,
                sequence: Int64(truncatingIfNeeded: message.sequence), timestamp: Int64(truncatingIfNeeded: min(message.timestampMilliseconds, UInt64(Int64.max))),
                kind: kind, body: message.body)
            if try store.insert(stored, now: Self.nowMilliseconds()) {
                eventSink.yield(.message(ChatMessage(stored: stored, reliable: message.reliable, outgoing: false)))
            }
            if message.reliable { acks.append(message.id) }
        case .ack(let ids):
            for id in ids { try store.acknowledge(peerID: link.peer.id.rawValue, messageID: id.description) }
        case .invite(let invite):
            received(invite, from: link)
        case .inviteReply(let reply):
            guard let entry = outgoing[reply.id], entry.peer.id == link.peer.id else { return }
            switch reply.outcome {
            case .accepted:
                addMember(entry.room, link.peer, hintFrom: link)
                remember(link.peer)
                link.connection.send([.roomMembers(membersFrame(entry.room))])
                // Introduce the newcomer to the others; they connect to each other directly.
                let introduction = WireFrame.roomMembers(.init(room: entry.room, members: [memberEntry(link.peer.id), selfEntry()]))
                for other in rooms[entry.room]!.members.keys where other != link.peer.id {
                    links[other]?.connection.send([introduction])
                }
                finishOutgoing(reply.id, .accepted)
            case .declined: finishOutgoing(reply.id, .declined(reply.reason))
            case .expired: finishOutgoing(reply.id, .expired)
            case .refused: finishOutgoing(reply.id, .refused(reply.reason))
            }
        case .roomMembers(let update):
            members(update, from: link)
        case .roomLeave(let leave):
            guard rooms[leave.room]?.members[link.peer.id] != nil else { return }
            removeMember(leave.room, link.peer, reason: leave.text)
        case .resourceOffer, .resourceAccept, .resourceChunk, .resourceEnd, .resourceDigest:
            transferFrame(frame, from: link)
        case .streamOpen, .streamAccept, .streamData, .streamCredit, .streamEnd:
            streamFrame(frame, from: link)
        case .historyRequest(let room, let since):
            guard rooms[room]?.members[link.peer.id] != nil else { return }
            let messages = (try? store.export(room: room.rawValue, since: Int64(clamping: since), limit: configuration.historyForNewcomers)) ?? []
            sendHistory(messages, room: room, to: link.peer)
        default:
            break
        }
    }

    private func members(_ update: WireFrame.RoomMembers, from link: Link) {
        let sender = link.peer.id
        guard let room = rooms[update.room] else {
            link.connection.send([.roomLeave(.init(room: update.room, text: "not a member"))])
            return
        }
        guard room.members[sender] != nil else {
            claims[update.room, default: [:]][sender] = (update.members, .now)
            return
        }
        merge(update.members, into: update.room, from: link)
    }

    private func merge(_ members: [WireFrame.Member], into room: RoomID, from link: Link) {
        var introduced: [PeerID] = []
        for member in members {
            guard let id = PeerID(member.peerID), id != configuration.ownID else { continue }
            var addresses = member.addresses
            if id == link.peer.id, let remote = link.remoteAddress { addresses = [remote] + addresses }
            if var known = rooms[room]?.members[id] {
                if member.port > 0 { known.port = Int(member.port) }
                if !addresses.isEmpty { known.addresses = Array(Set(addresses + known.addresses)).sorted().prefix(8).map { $0 } }
                rooms[room]!.members[id] = known
                continue
            }
            rooms[room]!.members[id] = Member(name: member.name, port: Int(member.port), addresses: addresses)
            introduced.append(id)
            notice(room, "\(member.name) joined")
            let state: SessionPeerState = links[id] != nil ? .connected : .connecting
            eventSink.yield(.memberState(room: room.rawValue, peer: SessionPeer(id: id, name: member.name), state: state))
        }
        saveRoom(room)
        for id in introduced {
            if let link = links[id] { link.connection.send([.roomMembers(membersFrame(room))]); flushOutbox(to: link) }
            if let claim = claims[room]?.removeValue(forKey: id), let link = links[id] { merge(claim.members, into: room, from: link) }
        }
    }

    private func received(_ invite: WireFrame.Invite, from link: Link) {
        let peer = link.peer
        let reply = { (outcome: WireFrame.InviteReply.Outcome, reason: String) in
            link.connection.send([.inviteReply(.init(id: invite.id, outcome: outcome, reason: reason))])
        }
        if rooms[invite.room]?.members[peer.id] != nil {
            reply(.accepted, "already in the room")
            link.connection.send([.roomMembers(membersFrame(invite.room))])
            return
        }
        let now = Self.nowMilliseconds()
        let timeout = invite.timeoutMilliseconds == 0 ? Int64(configuration.defaultInviteTimeout.components.seconds * 1000) : Int64(min(invite.timeoutMilliseconds, 3_600_000))
        let invitation = IncomingInvitation(
            id: invite.id.description, from: peer, room: invite.room.rawValue, context: invite.context,
            shortCode: ShortCode.between(configuration.ownID, peer.id), receivedAt: now, expiresAt: now + timeout)
        let mutual = outgoing.values.contains { $0.peer.id == peer.id && $0.room == invite.room }
        let known = knownPeers.check(label: peer.name, id: peer.id) == .known
        if mutual || configuration.autoAccept == .all || (configuration.autoAccept == .known && known) {
            reply(.accepted, "")
            join(invite.room, invitedBy: link)
            eventSink.yield(.invitationClosed(invitation, outcome: mutual ? "accepted (both invited each other)" : "accepted automatically"))
            return
        }
        guard pending.count < configuration.maximumPendingInvitations else {
            reply(.refused, "too many pending invitations")
            return
        }
        if pending[invite.id] != nil { return }
        let id = invite.id
        let timer = Task { [weak self] in
            try? await Task.sleep(for: .milliseconds(timeout))
            guard !Task.isCancelled else { return }
            await self?.expire(id)
        }
        pending[invite.id] = Pending(invitation: invitation, peer: peer.id, timer: timer)
        eventSink.yield(.invitation(invitation))
    }

    private func expire(_ id: WireID) {
        guard let entry = pending.removeValue(forKey: id) else { return }
        links[entry.peer]?.connection.send([.inviteReply(.init(id: id, outcome: .expired, reason: "not answered in time"))])
        eventSink.yield(.invitationClosed(entry.invitation, outcome: "expired"))
    }

    private func join(_ room: RoomID, invitedBy link: Link) {
        if rooms[room] == nil {
            rooms[room] = Room()
            sequences[room] = UInt64((try? store.lastSequence(room: room.rawValue, sender: configuration.ownID.rawValue)) ?? 0)
            notice(room, "you joined \(room) (invited by \(link.peer.name))")
        }
        addMember(room, link.peer, hintFrom: link)
        remember(link.peer)
        // Ask the inviter for what we lack of the room's history (overlap is harmless: ids de-duplicate).
        let latest = (try? store.latestTimestamp(room: room.rawValue)) ?? 0
        historyRequested[room] = link.peer.id
        link.connection.send([.historyRequest(room: room, sinceMilliseconds: UInt64(max(0, latest - 60_000)))])
    }

    private func remember(_ peer: SessionPeer) {
        guard knownPeers.check(label: peer.name, id: peer.id) == .new else { return }
        do { try knownPeers.remember(label: peer.name, id: peer.id) } catch {
            logger.error("cannot save the known-peers record", metadata: ["error": "\(error)"])
        }
    }

    private func addMember(_ room: RoomID, _ peer: SessionPeer, hintFrom link: Link) {
        if rooms[room] == nil { rooms[room] = Room() }
        guard rooms[room]!.members[peer.id] == nil else { return }
        var member = Member(name: peer.name, port: 0, addresses: [])
        if let (hint, _) = directory.lookup(peer.id) {
            member.port = hint.port
            member.addresses = hint.addresses
        } else if let remote = link.remoteAddress {
            member.addresses = [remote]
        }
        rooms[room]!.members[peer.id] = member
        departed.remove("\(room)|\(peer.id)")
        saveRoom(room)
        // An invitation from that peer to this room, still waiting here, is settled by joining.
        for (wireID, entry) in pending where entry.peer == peer.id && entry.invitation.room == room.rawValue {
            entry.timer.cancel()
            pending[wireID] = nil
            links[peer.id]?.connection.send([.inviteReply(.init(id: wireID, outcome: .accepted, reason: "already in the room"))])
            eventSink.yield(.invitationClosed(entry.invitation, outcome: "accepted (already in the room)"))
        }
        notice(room, "\(peer.name) joined")
        eventSink.yield(.memberState(room: room.rawValue, peer: peer, state: links[peer.id] != nil ? .connected : .connecting))
    }

    private func removeMember(_ room: RoomID, _ peer: SessionPeer, reason: String) {
        rooms[room]?.members[peer.id] = nil
        try? store.dropOutbox(peerID: peer.id.rawValue, room: room.rawValue)
        saveRoom(room)
        departed.remove("\(room)|\(peer.id)")
        eventSink.yield(.memberState(room: room.rawValue, peer: peer, state: .notConnected))
        notice(room, reason.isEmpty ? "\(peer.name) left" : "\(peer.name) left: \(reason)")
    }

    private func saveRoom(_ room: RoomID) {
        dirty = true
        nudge()
        guard let state = rooms[room] else { return }
        let members = state.members.map { StoredMember(peerID: $0.key.rawValue, name: $0.value.name, port: $0.value.port, addresses: $0.value.addresses) }
        do { try store.saveRoom(room.rawValue, members: members, now: Self.nowMilliseconds()) } catch {
            logger.error("cannot save a room", metadata: ["room": "\(room)", "error": "\(error)"])
        }
    }

    private func selfEntry() -> WireFrame.Member {
        WireFrame.Member(peerID: configuration.ownID.rawValue, name: configuration.ownName, port: UInt16(clamping: configuration.port), addresses: [])
    }

    private func memberEntry(_ id: PeerID) -> WireFrame.Member {
        let member = rooms.values.lazy.compactMap { $0.members[id] }.first
        var addresses = member?.addresses ?? []
        var port = member?.port ?? 0
        if let (hint, _) = directory.lookup(id) {
            addresses = hint.addresses
            port = hint.port
        }
        return WireFrame.Member(
            peerID: id.rawValue, name: member?.name ?? links[id]?.peer.name ?? id.short, port: UInt16(clamping: port),
            addresses: Array(addresses.filter { $0.utf8.count <= 64 }.prefix(8)))
    }

    private func membersFrame(_ room: RoomID) -> WireFrame.RoomMembers {
        let others = (rooms[room]?.members.keys).map(Array.init) ?? []
        return WireFrame.RoomMembers(room: room, members: [selfEntry()] + others.sorted().map(memberEntry))
    }

    func sharesRoom(with peer: PeerID) -> Bool {
        rooms.values.contains { $0.members[peer] != nil }
    }

    func emitTransfer(_ info: TransferInfo) {
        eventSink.yield(.transfer(info))
    }

    /// A system message, kept in history and reported.
    func notice(_ room: RoomID, _ text: String) {
        // Notices made in the same millisecond keep their order in history (it sorts by time, then sequence).
        noticeSequence += 1
        let stored = StoredMessage(
            id: WireID.random().description, room: room.rawValue, senderID: configuration.ownID.rawValue, senderName: "*",
            sequence: noticeSequence, timestamp: Self.nowMilliseconds(), kind: .system, body: text)
        _ = try? store.insert(stored, now: stored.timestamp)
        eventSink.yield(.message(ChatMessage(stored: stored, reliable: true, outgoing: false)))
    }

    private func finishOutgoing(_ id: WireID, _ outcome: InviteOutcome) {
        guard let entry = outgoing.removeValue(forKey: id) else { return }
        entry.timer.cancel()
        eventSink.yield(.inviteOutcome(id: id.description, peer: entry.peer, room: entry.room.rawValue, outcome: outcome))
        entry.continuation.resume(returning: outcome)
    }

    static func frame(_ message: StoredMessage, reliable: Bool) -> WireFrame? {
        guard let id = WireID(hex: message.id), let room = RoomID(message.room) else { return nil }
        let kind: WireFrame.Message.Kind = message.kind == .file ? .file : message.kind == .system ? .system : .text
        return .message(.init(id: id, room: room, sequence: UInt64(max(0, message.sequence)), timestampMilliseconds: UInt64(max(0, message.timestamp)),
                              kind: kind, body: message.body, reliable: reliable))
    }

    static func nowMilliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }

    // MARK: API: browser

    /// Invites a peer into `room` (created here if we are not in it). `sent` is called once the
    /// INVITE is on its way; the result is the outcome (which may take up to `timeout`).
    public func invite(
        _ peer: SessionPeer, room: RoomID, context: [UInt8], timeout: Duration, sent: @escaping @Sendable (String) -> Void = { _ in }
    ) async -> InviteOutcome {
        guard peer.id != configuration.ownID else { return .refused("that is this daemon") }
        if rooms[room] == nil {
            rooms[room] = Room()
            sequences[room] = UInt64((try? store.lastSequence(room: room.rawValue, sender: configuration.ownID.rawValue)) ?? 0)
            saveRoom(room)
            notice(room, "you created \(room)")
        }
        if rooms[room]?.members[peer.id] != nil, links[peer.id] != nil { return .alreadyMember }
        // They invited us to this room first: inviting back means yes.
        if let waiting = pending.first(where: { $0.value.peer == peer.id && $0.value.invitation.room == room.rawValue }),
           (try? accept(waiting.key.description)) != nil {
            return .accepted
        }
        let link: Link
        dialing.insert(peer.id)
        switch await dial(peer.id) {
        case .success(let value): link = value
        case .failure(let error): return error.code == "key_changed" ? .refused(error.message) : .unreachable(error.message)
        }
        guard links[peer.id] === link else {
            // The connection closed while we dialed (for example: the peer refused us).
            if case .goodbye(.refused, let text)? = lastCloseReason[peer.id] { return .refused(text) }
            return .unreachable("the connection closed: \(lastCloseReason[peer.id].map { "\($0)" } ?? "unknown reason")")
        }
        let id = WireID.random()
        let milliseconds = UInt32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        return await withCheckedContinuation { continuation in
            let timer = Task { [weak self] in
                try? await Task.sleep(for: timeout + .seconds(2))
                guard !Task.isCancelled else { return }
                await self?.finishOutgoing(id, .expired)
            }
            outgoing[id] = Outgoing(peer: link.peer, room: room, continuation: continuation, timer: timer)
            link.connection.send([.invite(.init(id: id, timeoutMilliseconds: milliseconds, room: room, context: context))])
            sent(id.description)
        }
    }

    // MARK: API: advertiser

    public var invitations: [IncomingInvitation] {
        pending.values.map(\.invitation).sorted { $0.receivedAt < $1.receivedAt }
    }

    private func pendingInvitation(_ prefix: String) throws(SessionError) -> WireID {
        let lower = prefix.lowercased()
        let matches = pending.keys.filter { $0.description.hasPrefix(lower) }
        guard !lower.isEmpty, let first = matches.first else {
            throw SessionError("unknown_invitation", "no pending invitation '\(prefix)' (it may have expired or been answered; see `lanchat invitations`)")
        }
        guard matches.count == 1 else {
            throw SessionError("ambiguous", "'\(prefix)' matches \(matches.count) invitations: \(matches.map { String($0.description.prefix(8)) }.joined(separator: ", "))")
        }
        return first
    }

    /// Accepts a pending invitation (by id or unique prefix) and joins its room.
    public func accept(_ prefix: String) throws(SessionError) -> IncomingInvitation {
        let id = try pendingInvitation(prefix)
        let entry = pending[id]!
        guard let link = links[entry.peer] else {
            throw SessionError("unreachable", "\(entry.invitation.from.name) is no longer connected; ask them to invite you again")
        }
        pending[id] = nil
        entry.timer.cancel()
        link.connection.send([.inviteReply(.init(id: id, outcome: .accepted))])
        join(RoomID(entry.invitation.room)!, invitedBy: link)
        eventSink.yield(.invitationClosed(entry.invitation, outcome: "accepted"))
        return entry.invitation
    }

    public func decline(_ prefix: String, reason: String = "") throws(SessionError) -> IncomingInvitation {
        let id = try pendingInvitation(prefix)
        let entry = pending.removeValue(forKey: id)!
        entry.timer.cancel()
        links[entry.peer]?.connection.send([.inviteReply(.init(id: id, outcome: .declined, reason: String(reason.prefix(200))))])
        eventSink.yield(.invitationClosed(entry.invitation, outcome: "declined"))
        return entry.invitation
    }

    // MARK: API: session

    public struct RoomSummary: Sendable {
        public var room: String
        public var members: [(peer: SessionPeer, state: SessionPeerState)]
    }

    public var roomList: [RoomSummary] {
        rooms.keys.sorted { $0.rawValue < $1.rawValue }.map(summary)
    }

    public func room(_ name: RoomID) -> RoomSummary? {
        rooms[name] == nil ? nil : summary(name)
    }

    private func summary(_ room: RoomID) -> RoomSummary {
        let members = rooms[room]!.members.map { id, member -> (SessionPeer, SessionPeerState) in
            // "connecting" while joining; a member that was connected and dropped is "not connected"
            // while we try to reach it again.
            let state: SessionPeerState = links[id] != nil ? .connected
                : dialing.contains(id) && !departed.contains("\(room)|\(id)") ? .connecting : .notConnected
            return (SessionPeer(id: id, name: member.name), state)
        }.sorted { $0.0.name < $1.0.name }
        return RoomSummary(room: room.rawValue, members: members)
    }

    /// Peers with a live connection, and the rooms each shares with us.
    public var connections: [PeerID: [String]] {
        var result: [PeerID: [String]] = [:]
        for id in links.keys { result[id] = [] }
        for (room, state) in rooms {
            for id in state.members.keys { result[id, default: []].append(room.rawValue) }
        }
        return result.filter { links[$0.key] != nil || !$0.value.isEmpty }
    }

    public func isConnected(_ id: PeerID) -> Bool { links[id] != nil }

    public struct SendReceipt: Sendable {
        public var message: StoredMessage
        public var recipients: Int
        /// Recipients it was written to now; the others get it when they are back (reliable).
        public var sentNow: Int
        /// Unreliable only: recipients it was dropped for (not connected, or the connection is full).
        public var dropped: Int
    }

    /// Sends text to the room's members (or `to`, a subset of them). Reliable messages are stored
    /// and queued per recipient before this returns.
    public func send(_ text: String, room: RoomID, to: [PeerID]? = nil, reliable: Bool = true) throws(SessionError) -> SendReceipt {
        try send([text], room: room, to: to, reliable: reliable)[0]
    }

    /// Sends several messages at once: each is its own message (id, sequence, acknowledgement), but
    /// they share one database commit and one write per recipient.
    public func send(_ texts: [String], room: RoomID, to: [PeerID]? = nil, reliable: Bool = true) throws(SessionError) -> [SendReceipt] {
        for text in texts {
            guard text.utf8.count <= WireFrame.Message.maximumBody else {
                throw SessionError("too_long", "message is \(text.utf8.count) bytes; the limit is \(WireFrame.Message.maximumBody)")
            }
            guard !text.isEmpty else { throw SessionError("bad_request", "empty message") }
            guard !text.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\n" && $0 != "\t") || $0.value == 0x7f }) else {
                throw SessionError("bad_request", "message contains control characters (only newline and tab are allowed)")
            }
        }
        guard let state = rooms[room] else {
            throw SessionError("unknown_room", "you are not in room '\(room)' (see `lanchat rooms`)")
        }
        let recipients: [PeerID]
        if let to {
            for id in to where state.members[id] == nil {
                throw SessionError("not_a_member", "\(links[id]?.peer.name ?? id.short) is not a member of \(room)")
            }
            recipients = to
        } else {
            recipients = Array(state.members.keys)
        }
        var messages: [StoredMessage] = []
        let timestamp = Self.nowMilliseconds()
        for text in texts {
            let sequence = (sequences[room] ?? 0) + 1
            sequences[room] = sequence
            messages.append(StoredMessage(
                id: WireID.random().description, room: room.rawValue, senderID: configuration.ownID.rawValue, senderName: configuration.ownName,
                sequence: Int64(sequence), timestamp: timestamp, kind: .text, body: text))
        }
        do {
            try store.transaction {
                for stored in messages {
                    try store.insert(stored, now: timestamp)
                    if reliable { for id in recipients { try store.enqueue(peerID: id.rawValue, messageID: stored.id) } }
                }
            }
        } catch {
            throw SessionError("storage", "cannot store the message: \(error)")
        }
        dirty = true
        nudge()
        let frames = messages.compactMap { Self.frame($0, reliable: reliable) }
        var sentNow = 0
        var dropped = 0
        for id in recipients {
            guard let link = links[id], reliable || link.connection.isWritable else { dropped += 1; continue }
            if reliable { link.lastReliableSend = .now }
            link.connection.send(frames)
            sentNow += 1
        }
        return messages.map { stored in
            eventSink.yield(.message(ChatMessage(stored: stored, reliable: reliable, outgoing: true)))
            return SendReceipt(message: stored, recipients: recipients.count, sentNow: sentNow, dropped: reliable ? 0 : dropped)
        }
    }

    /// Leaves a room: tells the connected members, forgets the room (its history stays).
    public func leave(_ room: RoomID) throws(SessionError) {
        guard let state = rooms.removeValue(forKey: room) else {
            throw SessionError("unknown_room", "you are not in room '\(room)'")
        }
        for id in state.members.keys { links[id]?.connection.send([.roomLeave(.init(room: room, text: ""))]) }
        try? store.dropOutbox(peerID: nil, room: room.rawValue)
        try? store.deleteRoom(room.rawValue)
        notice(room, "you left \(room)")
    }

    /// Forgets the key recorded for `name`, so that its next (new) key is accepted.
    public func forget(_ name: String) throws(SessionError) -> PeerID? {
        guard let entry = knownPeers.entries[name] else { return nil }
        do { try knownPeers.forget(label: name) } catch { throw SessionError("storage", error.description) }
        return entry.id
    }

    public var knownPeerEntries: [KnownPeers.Entry] { knownPeers.entries.values.sorted { $0.label < $1.label } }

    public func history(room: String?, limit: Int) throws(SessionError) -> [StoredMessage] {
        do { return try store.history(room: room, limit: limit) } catch { throw SessionError("storage", error.description) }
    }

    public var roomNames: [String] { rooms.keys.map(\.rawValue).sorted() }

    /// Reliable messages not yet acknowledged, per recipient.
    public func unacknowledged() -> [PeerID: Int] {
        var result: [PeerID: Int] = [:]
        for (text, count) in (try? store.outboxCounts()) ?? [:] { if let id = PeerID(text) { result[id] = count } }
        return result
    }
}
