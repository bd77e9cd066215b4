import LanchatCore
import LanchatWire

/// Links: connections coming up and going down (which one serves a peer, what a new one is told, what
/// ends with one), and dialing a peer.
extension SessionStateMachine {
    /// A connection to `peer` is established (TLS and HELLO done). Returns the handle that serves the
    /// peer now (the new one, or an existing one the duplicate rule keeps), or nil if it was refused.
    /// `authenticated`: the peer's key was verified against its id (TLS); false for plaintext.
    /// `version`: the wire protocol version the HELLOs agreed on (2: messages are signed).
    public mutating func linkUp(
        _ handle: LinkHandle, peer: SessionPeer, dialedByUs: Bool, remoteAddress: String?, authenticated: Bool = true, version: UInt16 = 1,
        at now: EngineTime
    ) -> (serving: LinkHandle?, actions: [SessionAction]) {
        var out: [SessionAction] = []
        if !authenticated, let refusal = plaintextClaimRefusal(peer) {
            out.append(.close(handle, .refused, refusal.reason))
            out.append(.emit(refusal.event))
            return (nil, out)
        }
        if case .nameKnownWithOtherKeys(let others) = links.trust.known.check(label: peer.name, id: peer.id) {
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
            }
            // What we sent on the old one may be lost with it (the peer kept the other connection
            // and closed ours unread): invitations still waiting go again on this one. With no old one,
            // those waiting were sent on a connection the peer closed as a duplicate before this one
            // came up (`linkDown` keeps them): the peer answers one it already answered the same way.
            for (_, invitation) in invites.outgoing(where: { $0.peer.id == peer.id }) {
                out.append(.send(handle, [.invite(invitation.frame)]))
            }
        }
        if !sharesRoom(with: peer.id), let crowded = strangerToClose(arriving: peer.id) {
            out.append(.close(crowded, .leaving, "too many connections from peers outside \(configuration.ownName)'s rooms"))
            if crowded == handle { return (nil, out) }
        }
        if authenticated, sharesRoom(with: peer.id) { markKeyed(peer.id, &out) }
        if sharesRoom(with: peer.id) { links.noteVersion(version, of: peer.id) }
        // Who introduced it no longer matters (`unseenIntroduced`): the bound is on those never seen.
        if sharesRoom(with: peer.id) { noteSeen(peer.id) }
        // The redial backoff is reset once the peer speaks on the connection (`received`), not here: a
        // peer that accepts TLS and then refuses us must not be redialed at once, again and again.
        for (room, state) in rooms.sorted(by: { $0.key.rawValue < $1.key.rawValue }) where state.members[peer.id] != nil {
            out.append(.emit(.memberState(room: room, peer: peer, state: .connected)))
            if membership.rejoined(RoomMember(room: room, peer: peer.id)) { notice(room, "\(peer.name) rejoined", at: now, &out) }
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
        let busy = Set(invites.pending.values.map(\.peer)).union(invites.outgoing.values.map(\.peer.id))
        let idle = strangers.filter { $0.peer.id != arriving && !busy.contains($0.peer.id) }
        let oldest = idle.min { ($0.since, $0.handle.rawValue) < ($1.since, $1.handle.rawValue) }
        return oldest?.handle ?? links.handle(arriving)
    }

    /// Remembers that `id` proved itself with its key (a room member on a TLS connection).
    mutating func markKeyed(_ id: PeerID, _ out: inout [SessionAction]) {
        guard links.trust.markKeyed(id, maximum: configuration.maximumKeyedPeers) else { return }
        out.append(.persist(.rememberKeyed(id)))
    }

    /// A plaintext HELLO proves nothing: it may not speak for an id that was proved with a key (a link
    /// or a probe connection). If `peer`'s id was, why the connection is refused, and the security event.
    public func plaintextClaimRefusal(_ peer: SessionPeer) -> (reason: String, event: SessionEvent)? {
        guard configuration.encryption != .none, links.provedByKey(peer.id) else { return nil }
        return ("\(configuration.ownName) knows \(peer.id.short) by its key: connect with encryption", .security(peer: peer, text: Self.plaintextClaimText(peer)))
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
        let duplicate = Self.code(of: reason) == .duplicate
        if duplicate, links.isLinked(id) {
            // The peer kept another connection, and we have it: nothing is lost.
            scheduleRedial(at: now, &out)
            return out
        }
        // (A "duplicate connection" close that leaves us no connection to the peer: it kept one that is
        // stale on our side (we restarted, it has not noticed). That one times out there; until then we
        // are not connected, and what was under way on ours waits, and makes us dial again.)
        forgetSync(with: id)
        forgetTopics(of: id)
        // Closed as a duplicate: the peer kept a connection of its own to us, which comes up here in a
        // moment (both dialed at once), or is stale on our side. Our invitations wait for it, to go again
        // on it (`linkUp`), or expire at their time; failing them now lost a mutual invitation (both
        // people inviting each other at once: ours failed as unreachable, so theirs was not taken as
        // mutual and waited for an answer).
        for (wireID, _) in invites.outgoing(where: { $0.peer.id == id }) where !duplicate {
            let outcome: InviteOutcome
            if case .goodbye(.refused, let text) = reason { outcome = .refused(text) } else { outcome = .unreachable("connection \(reason)") }
            closeOutgoingInvitation(wireID, outcome, &out)
        }
        out.append(.peerDisconnected(id, reason: "connection \(reason)"))
        transfersLost(id, reason: "connection \(reason)", at: now, &out)
        for (wireID, entry) in invites.pending.sorted(by: { $0.value.invitation.receivedAt < $1.value.invitation.receivedAt }) where entry.peer == id {
            timers.cancel(.incomingInvitation(wireID))
            _ = invites.takePending(wireID)
            out.append(.emit(.invitationClosed(entry.invitation, outcome: .withdrawn)))
        }
        for (room, state) in rooms.sorted(by: { $0.key.rawValue < $1.key.rawValue }) where state.members[id] != nil {
            out.append(.emit(.memberState(room: room, peer: entry.peer, state: .notConnected)))
            if membership.departed(RoomMember(room: room, peer: id)) {
                notice(room, "\(entry.peer.name) left: \(reason)", at: now, &out)
                out.append(
                    .emit(
                        .memberLeft(
                            room: room, peer: entry.peer, code: Self.code(of: reason),
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
        if let (hint, _) = environment.addressBook.lookup(peer) {
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
        if let name, case .nameKnownWithOtherKeys(let others) = links.trust.known.check(label: name, id: peer) {
            warnOfNewKey(SessionPeer(id: peer, name: name), others: others, &out)
        }
        // An id seen with a key is dialed with TLS, whatever its (unauthenticated) TXT record says.
        if links.trust.keyed.contains(peer), configuration.encryption != .none { encryption = .required }
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
        guard links.trust.warn(of: peer.id) else { return }
        out.append(.emit(.security(peer: peer, text: newKeyText(name: peer.name, others: others, now: peer.id))))
    }

    func newKeyText(name: String, others: [PeerID], now: PeerID) -> String {
        let known = others.map { "\($0.short), code \(environment.shortCode($0))" }.joined(separator: "; ")
        if let before = links.trust.known.labels[now] {
            return "WARNING: the peer known as '\(before)' (\(now.short), code \(environment.shortCode(now))) now calls itself '\(name)', "
                + "a name known with \(known). It is not that peer; both are kept apart by their ids (`lanchat peers`)."
        }
        return "WARNING: '\(name)' now comes with a key not met before (\(now.short), code \(environment.shortCode(now))); "
            + "'\(name)' was known with \(known). Another host may have the same name, or this one a new key: compare "
            + "codes with its owner before you trust it. Both are kept apart by their ids (`lanchat peers`)."
    }
}

extension SessionStateMachine {
    /// The wire version agreed on a connection the engine knows (serving, or replaced and closing).
    public func linkVersion(on handle: LinkHandle) -> UInt16? { links.peer(on: handle)?.version }
}
