import LanchatCore
import LanchatWire

/// Delivery: messages to a room or chosen members, and redialing members we should be connected to.
///
/// A reliable message is stored queued for its recipients (`.persist(.insertMessage)` with `queuedFor`,
/// and each recipient's mark in the room opened where it has none: `Outbox`) in the commit of its send
/// (the shell may write it to the connections just before that commit: `sendAheadLimit`); a recipient
/// acknowledges it only after storing it; until then it stays in the outbox, sent
/// again on every new connection and every `retransmitInterval` while connected. Receivers de-duplicate
/// by id (the store's unique key). Unreliable messages go only to connected members whose connection
/// has room, and are never queued.
extension SessionStateMachine {
    /// What `send` decided, for the caller's receipt.
    public struct SendPlan: Equatable, Sendable {
        public var messages: [StoredMessage]
        public var recipients: [PeerID]
        /// Recipients connected now (the frames go to them at once).
        public var connected: Int
    }

    public static let controlCharacterProblem = "message contains control characters (only newline and tab are allowed)"

    /// How many of our own messages may leave before their commit: the shell may write a `send` of at
    /// most this many messages to the connections first and commit after, so that its sync runs while
    /// the members store them (a round trip then waits for one sync per side, not two). A crash between
    /// the two loses the messages from our history while members may hold them; their sequences must
    /// never be used again, or a member would hold two messages under one (author, room, sequence), and
    /// the relay's marks would take one for the other. So the shell goes first only with a send whose
    /// first sequence follows the highest of ours it saw committed in that room since it started (the
    /// first send in a room after a start, and the first after a failed commit, commit first): the
    /// messages out and not stored are then at most one such send, right above the highest stored. A
    /// restart continues this many past the highest sequence stored (`SessionStore.restored`). A send
    /// that fails to commit is reported as an error: members may have it.
    public static let sendAheadLimit = 256

    /// Validates and sends messages to the room's members (or `to`, a subset of them).
    public mutating func send(
        _ texts: [String], room: RoomID, to: [PeerID]? = nil, reliable: Bool = true, kind: StoredMessage.Kind = .text, at now: EngineTime
    ) throws(SessionError) -> (SendPlan, [SessionAction]) {
        for text in texts {
            guard text.utf8.count <= WireFrame.Message.maximumBody else {
                throw SessionError(.tooLong, "message is \(text.utf8.count) bytes; the limit is \(WireFrame.Message.maximumBody)")
            }
            guard !text.isEmpty else { throw SessionError(.badRequest, "empty message") }
            guard !text.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\n" && $0 != "\t") || $0.value == 0x7f }) else {
                throw SessionError(.badRequest, Self.controlCharacterProblem)
            }
        }
        guard let state = rooms[room] else {
            throw SessionError(.unknownRoom, "you are not in room '\(room)' (see `lanchat rooms`)")
        }
        let recipients: [PeerID]
        if let to {
            for id in to where state.members[id] == nil {
                throw SessionError(.notAMember, "\(links.entry(id)?.peer.name ?? id.short) is not a member of \(room)")
            }
            recipients = to
        } else {
            recipients = state.members.keys.sorted()
        }
        // To some members only: the others never get it, from us or through anyone (`direct`).
        let direct = to != nil && Set(recipients) != Set(state.members.keys)
        // Sealed (one signature for the send, version 4) when every recipient spoke version 4 in this
        // run; otherwise each message signed, and sent signed to every recipient (a version 4 one too:
        // what it holds only sealed it could not hand on to a version 2 or 3 member, in a relay answer or
        // a newcomer's history).
        let keys = configuration.envelopes
        let sealing = keys != nil && !recipients.isEmpty && recipients.allSatisfy { (links.version(of: $0) ?? 0) >= WireFrame.sealsVersion }
        let signing = !sealing
        var out: [SessionAction] = []
        var messages: [StoredMessage] = []
        var wireIDs: [WireID] = []
        for text in texts {
            let sequence = outbox.nextSequence(in: room)
            let id = environment.ids.messageID(at: now.wall)
            wireIDs.append(id)
            let message = StoredMessage(
                id: id.description, room: room.rawValue, senderID: configuration.ownID.rawValue, senderName: configuration.ownName,
                sequence: Int64(sequence), timestamp: now.wall, kind: kind, body: text, direct: direct)
            messages.append(signing ? signed(message, room: room, id: id) : message)
        }
        var batches: [(batch: SealedBatch, messages: ArraySlice<StoredMessage>)] = []
        if sealing, let keys {
            batches = SealedBatch.seal(messages, author: configuration.ownID, room: room, keys: keys, withPaths: false) {
                environment.ids.messageID(at: now.wall)
            }
            // (Each message is in one batch, in order: ours, texts or files, all with wire ids.)
            messages = batches.flatMap { $0.batch.stored($0.messages, author: configuration.ownID) }
        }
        // Queued for every member ("*") or for those named (a direct send), past each one's mark.
        let queuedFor = !reliable || recipients.isEmpty ? "" : direct ? recipients.map(\.rawValue).joined(separator: ",") : "*"
        for stored in messages {
            out.append(.persist(.insertMessage(stored, report: ChatMessage(stored: stored, reliable: reliable, outgoing: true), queuedFor: queuedFor)))
        }
        if reliable {
            let queued = zip(wireIDs, messages).map { (id: $0, sequence: UInt64(max(1, $1.sequence))) }
            for peer in recipients {
                if let mark = outbox.queue(queued, in: room, for: peer) { out.append(.persist(.openMark(peer, room, acked: mark))) }
            }
        }
        // Per recipient's version: sealed (when the send is), signed (version 2 and up) or plain (version
        // 1); the same frames for all of one form.
        var framesFor: [FrameForm: [WireFrame]] = [:]
        var connected = 0
        for peer in recipients {
            guard let entry = links.entry(peer) else { continue }
            let handle = entry.handle
            let form = FrameForm(version: entry.version, sealed: sealing)
            let frames =
                framesFor[form]
                ?? (form == .sealed
                    ? Self.sealedFrames(batches, reliable: reliable)
                    : messages.compactMap { Self.frame($0, reliable: reliable, signed: form == .signed) })
            framesFor[form] = frames
            connected += 1
            if reliable {
                out.append(.send(handle, frames))
                noteReliableSend(to: peer, at: now)
            } else {
                out.append(.sendUnreliable(handle, frames))
            }
        }
        return (SendPlan(messages: messages, recipients: recipients, connected: connected), out)
    }

    /// How messages go to a peer: as they are (version 1), each with its signature (2 and 3), or
    /// sealed (4, when the messages were sealed).
    enum FrameForm: Hashable {
        case plain, signed, sealed

        init(version: UInt16, sealed: Bool) {
            self = version >= WireFrame.sealsVersion && sealed ? .sealed : version >= 2 ? .signed : .plain
        }
    }

    /// Each batch's SEAL, then its messages, each naming its leaf (a receiver holds a connection's last
    /// few seals, so never all the SEALs first).
    static func sealedFrames(_ batches: [(batch: SealedBatch, messages: ArraySlice<StoredMessage>)], reliable: Bool) -> [WireFrame] {
        var frames: [WireFrame] = []
        frames.reserveCapacity(batches.reduce(0) { $0 + 1 + $1.messages.count })
        for (batch, messages) in batches {
            frames.append(.seal(batch.seal))
            for (message, leaf) in zip(messages, batch.leaves) {
                guard case .message(var frame)? = frame(message, reliable: reliable) else { continue }
                frame.sealed = leaf
                frames.append(.message(frame))
            }
        }
        return frames
    }

    /// The wire frame of a stored message (`signed`: with its signature, for a version 2 peer).
    public static func frame(_ message: StoredMessage, reliable: Bool, signed: Bool = false) -> WireFrame? {
        guard let id = WireID(hex: message.id), let room = RoomID(message.room) else { return nil }
        let kind: WireFrame.Message.Kind = message.kind == .file ? .file : message.kind == .system ? .system : .text
        let signature = signed && message.isSigned ? Signature(key: message.authorKey, bytes: message.signature) : nil
        return .message(
            .init(
                id: id, room: room, sequence: UInt64(max(0, message.sequence)), timestampMilliseconds: UInt64(max(0, message.timestamp)),
                kind: kind, body: message.body, reliable: reliable, signature: signature, direct: message.direct))
    }

    /// The ids of our messages queued for `peer` (sent again until it acknowledges them).
    func queued(for peer: PeerID) -> Set<String> {
        Set(outbox.queuedIDs(for: peer).map(\.description))
    }

    /// Reliable messages not yet acknowledged, per recipient.
    public var unacknowledged: [PeerID: Int] { outbox.counts }

    // MARK: Frames

    mutating func receive(_ message: WireFrame.Message, from link: LinkTable.Entry, at now: EngineTime, acks: inout [WireID], _ out: inout [SessionAction]) {
        let sender = link.peer.id
        // Only members speak in a room; a message from anyone else is neither stored nor acknowledged.
        guard rooms[message.room]?.members[sender] != nil else { return }
        // A sealed message (version 4) against the seals its author sent ahead of it on this connection.
        // One whose seal is not held is neither stored nor acknowledged: its author sends it again after
        // its SEAL (a forged SEAL's messages end here too).
        var sealCheck: SealBook.Check?
        if link.version >= WireFrame.sealsVersion, message.sealed != nil {
            sealCheck = links.withSeals(on: link.handle) { $0.check(message, author: sender) } ?? .unknownSeal
            if sealCheck == .unknownSeal { return }
        }
        // Acknowledged either way (a refused message is not sent again), stored only if it may be.
        if message.reliable { acks.append(message.id) }
        if let timestamp = Int64(exactly: message.timestampMilliseconds), Self.isAhead(timestamp, of: now.wall) {
            // Said once per connection, as a refused signature is: an honest member's clock may be wrong.
            refusedLive(
                "a message", from: link, in: message.room,
                "it is dated \((timestamp - now.wall + 59_999) / 60_000) minutes ahead of this host's clock (more than "
                    + "\(Self.futureTolerance / 60_000) allowed); check both clocks", &out)
            return
        }
        guard
            var stored = Self.storable(
                id: message.id, room: message.room, senderID: sender.rawValue, senderName: link.peer.name, sequence: message.sequence,
                timestamp: message.timestampMilliseconds, kind: message.kind, body: message.body, ownID: configuration.ownID)
        else { return }
        // On a version 2 connection every message is signed by its author, and kept with its signature
        // (so that it can be relayed to a newcomer, who checks it); on a version 4 one it may be sealed
        // instead, and is kept with its seal's head and its place in it. One that is neither is refused.
        if let sealCheck {
            guard case .sealed(let head, var seal, let leafIndex, var checked) = sealCheck else {
                refusedLive("a message", from: link, in: message.room, "it is not sealed by its author", &out)
                return
            }
            let check = SealCheck(author: sender, room: message.room, head: head)
            if !checked, let keys = configuration.envelopes {
                let waiting = sealWaits.isWaiting(check)
                if message.kind == .file || links.trust.checksSealsFirst(sender) || (!waiting && sealWaits.isFull) {
                    // Checked here: a file's announcement goes on at once (its file is fetched, then served to
                    // others); an author one of whose seals failed is checked first; so is a seal whose check
                    // would wait past the bound.
                    let valid = links.withSeals(on: link.handle) { $0.checkNow(check, keys: keys) } ?? nil
                    if let valid {
                        _ = sealWaits.answered(check)  // (its answer from the shell, when it comes, is not waited for)
                        settle(check, valid: valid, &out)
                    }
                    guard valid == true else { return }
                    checked = true
                } else if !waiting, sealWaits.ask(check) {
                    // Held unchecked with no check waiting (its answer came while the message was on its way
                    // over a replaced connection): asked again, so that its row does not stay unchecked.
                    out.append(.checkSeal(check))
                }
            }
            if seal.checked != checked { seal.checked = checked }  // (checked here just now: a copy of the held one's)
            stored = stored.sealed(by: seal, leafIndex: leafIndex)
        } else if link.version >= 2 {
            guard let signature = message.signature, verifiesLive(message, from: sender) else {
                // Told once per connection: a flood of bad messages is not a flood of events.
                let problem = message.signature == nil ? "it is not signed" : "it has a signature that does not verify"
                refusedLive("a message", from: link, in: message.room, problem, &out)
                return
            }
            stored.authorKey = signature.key
            stored.signature = signature.bytes
        }
        stored.direct = message.direct
        out.append(.persist(.insertMessage(stored, report: ChatMessage(stored: stored, reliable: message.reliable, outgoing: false))))
    }

    /// A security event for something refused from `link`'s peer (a message, a seal) in `room`, told once
    /// per connection and `what`: a flood of bad frames is not a flood of events.
    mutating func refusedLive(_ what: String, from link: LinkTable.Entry, in room: RoomID, _ problem: String, _ out: inout [SessionAction]) {
        guard links.trust.refuseLive(what, from: link.peer.id) else { return }
        out.append(
            .emit(
                .security(
                    peer: link.peer,
                    text: "refused \(what) from \(link.peer.name) (\(link.peer.id.short)) in room \(room): \(problem) "
                        + "(any more like it on this connection are refused without a word)")))
    }

    /// A message from a peer (live, or a record of a history resource) as history keeps it, or nil if
    /// it must not be kept: a notice (only this daemon writes notices: a member's "system" message would
    /// show as one, without a sender), a message under our own id (we know what we sent), or numbers
    /// the store cannot hold (a sequence past 2^63 - 1 would be stored negative and break the count our
    /// next messages continue from).
    ///
    /// `now` (our wall clock, ms): a message stamped more than `futureTolerance` ahead of it is refused.
    /// Every window of history (relay answers, newcomers' histories, `history`) is the latest by author
    /// time: a member that stamped its messages years ahead would hold those windows for years.
    public static func storable(
        id: WireID, room: RoomID, senderID: String, senderName: String, sequence: UInt64, timestamp: UInt64,
        kind: WireFrame.Message.Kind, body: String, ownID: PeerID, now: Int64? = nil
    ) -> StoredMessage? {
        guard kind != .system, senderID != ownID.rawValue, PeerID(senderID) != nil,
            let sequence = Int64(exactly: sequence), let timestamp = Int64(exactly: timestamp),
            !isAhead(timestamp, of: now)
        else { return nil }
        return StoredMessage(
            id: id.description, room: room.rawValue, senderID: senderID, senderName: senderName, sequence: sequence, timestamp: timestamp,
            kind: kind == .file ? .file : .text, body: body)
    }

    /// How far ahead of our wall clock a message's time may be (ms): 10 minutes, for clocks that drift
    /// on hosts without time synchronisation; past it the message is refused (`storable`).
    public static let futureTolerance: Int64 = 600_000

    /// Whether `timestamp` is more than `futureTolerance` ahead of `now` (nil: not checked).
    public static func isAhead(_ timestamp: Int64, of now: Int64?) -> Bool {
        guard let now else { return false }
        return timestamp > now &+ futureTolerance
    }

    mutating func acknowledged(_ ids: [WireID], by peer: PeerID, at now: EngineTime, _ out: inout [SessionAction]) {
        guard !ids.isEmpty else { return }
        // Marks move; rows go, and every id this engine does not track leaves the store's rows too (after
        // a failed write, for example): deleting what is not there costs nothing.
        let done = outbox.acknowledged(ids, by: peer)
        for (room, acked) in done.marks { out.append(.persist(.setMark(peer, room, acked: acked))) }
        if !done.rows.isEmpty { out.append(.persist(.acknowledge(peer, done.rows))) }
        if done.emptied { timers.cancel(.retransmit(peer)) }
    }

    // MARK: Outbox

    /// Resends what `peer` has not acknowledged, in the rooms it is a member of (what was kept for it
    /// after it answered "not a member" waits until it is admitted again).
    mutating func flushOutbox(to peer: PeerID, at now: EngineTime, _ out: inout [SessionAction]) {
        guard let handle = links.handle(peer), let queued = outbox.queuedRooms(for: peer), !queued.isEmpty else { return }
        let rooms = queued.filter { isMember(peer, of: $0) }
        guard !rooms.isEmpty else {
            timers.cancel(.retransmit(peer))
            return
        }
        out.append(.flushOutbox(peer, handle, rooms: rooms))
        noteReliableSend(to: peer, at: now)
    }

    /// The retransmit timer: `retransmitInterval`, doubled for each resend that brought no acknowledgement
    /// (up to 16 times it): a member that never acknowledges does not have us read and send its whole
    /// outbox every 5 s.
    private mutating func noteReliableSend(to peer: PeerID, at now: EngineTime) {
        let unanswered = Int64(min(outbox.unanswered(peer), Self.maximumRetransmitDoublings))
        timers.schedule(.retransmit(peer), at: now.monotonic + configuration.retransmitInterval << unanswered)
    }

    /// How many times the retransmit interval doubles at most (`noteReliableSend`).
    static let maximumRetransmitDoublings = 4

    mutating func retransmit(to peer: PeerID, at now: EngineTime, _ out: inout [SessionAction]) {
        outbox.resending(to: peer)
        flushOutbox(to: peer, at: now, &out)
    }

    /// The shell could not commit a send (`plan`): its messages are not in the store, so nothing is
    /// left to resend. They leave the outbox (a member that got them first has acknowledged them).
    public mutating func sendNotStored(_ plan: SendPlan) {
        let ids = plan.messages.compactMap { WireID(hex: $0.id) }
        guard let room = plan.messages.first.flatMap({ RoomID($0.room) }) else { return }
        for peer in plan.recipients where outbox.remove(ids, in: room, for: peer) { timers.cancel(.retransmit(peer)) }
    }

    /// `peer` left `room`, and what it was sent stays queued (`removeMember`'s `keepQueued`), but not by
    /// its mark: what we send after is not for it.
    mutating func pinOutbox(for peer: PeerID, in room: RoomID, _ out: inout [SessionAction]) {
        outbox.pin(room, for: peer)
        out.append(.persist(.pinOutbox(peer, room)))
    }

    mutating func dropOutbox(for peer: PeerID?, in room: RoomID, _ out: inout [SessionAction]) {
        for emptied in outbox.drop(room, for: peer) { timers.cancel(.retransmit(emptied)) }
        out.append(.persist(.dropOutbox(peer, room)))
    }

    // MARK: Redial

    /// Peers we should be connected to: every member of our rooms, and the peers of pending transfers.
    var wantedPeers: Set<PeerID> {
        var wanted = transferPeers
        for room in rooms.values { wanted.formUnion(room.members.keys) }
        wanted.remove(configuration.ownID)
        return wanted
    }

    /// Forgets the backoff of peers we no longer want (they left, or we did).
    mutating func forgetUnwantedRedials() {
        guard links.redials.count > 0 || links.lastVersion.count > 0 else { return }  // (spares computing `wantedPeers`)
        let wanted = wantedPeers
        links.redials.keep(only: wanted)
        links.keepVersions(only: wanted)
    }

    /// Makes sure the redial schedule is looked at soon if a wanted peer is not connected.
    /// (Every batch of frames received asks this: it looks for one wanted peer not linked without making
    /// the set of them, which in a room of 64 took about a sixth of each member's event loop.)
    mutating func scheduleRedial(at now: EngineTime, _ out: inout [SessionAction]) {
        guard wantedPeerUnlinked else { return }
        timers.scheduleNoLaterThan(.redial, at: now.monotonic)
    }

    /// Whether a peer of `wantedPeers` is not linked.
    var wantedPeerUnlinked: Bool {
        let own = configuration.ownID
        for room in rooms.values {
            for peer in room.members.keys where peer != own && !links.isLinked(peer) { return true }
        }
        for transfer in transfers.outgoing.values where transfer.status == .waiting && transfer.peer.id != own && !links.isLinked(transfer.peer.id) {
            return true
        }
        return false
    }

    /// Dials the wanted peers that are due (`RedialSchedule`: who first, backoff, how many at once):
    /// members we have been connected with first, then members only introduced to us (perhaps of
    /// someone's making, with ids ground to sort first).
    mutating func redial(at now: EngineTime, _ out: inout [SessionAction]) {
        let wanted = wantedPeers.sorted()
        let seenPeers = Set(wanted.filter(seen)).union(links.dialing.filter(seen))
        let candidates = (wanted.filter(seenPeers.contains) + wanted.filter({ !seenPeers.contains($0) })).filter { !links.isLinked($0) }
        var generations: [PeerID: Int] = [:]
        for peer in candidates { generations[peer] = environment.addressBook.lookup(peer)?.generation }
        let limits = RedialSchedule.Limits(
            dialsPerCheck: configuration.maximumDialsPerCheck, dialsAtOnce: configuration.maximumDialsAtOnce,
            reconnect: configuration.maximumReconnectDelay, unseenReconnect: configuration.maximumUnseenReconnectDelay)
        let (dials, waiting) = links.startDueDials(
            candidates, own: configuration.ownID, seen: seenPeers.contains, generation: { generations[$0] }, limits: limits, at: now.monotonic)
        for peer in dials { out.append(.dial(peer)) }
        forgetUnwantedRedials()
        if waiting { timers.schedule(.redial, at: now.monotonic + configuration.redialCheckInterval) }
    }
}
