import LanchatCore
import LanchatWire

/// Invitations: Multipeer Connectivity's browser (we invite) and advertiser (we are invited).
///
/// Incoming: an INVITE waits in `pending` until accepted, declined, withdrawn (its connection ends)
/// or expired (a timer); `autoAccept`, a known inviter, or our own invitation to the same peer and room
/// (both invited each other) accept it at once. Outgoing: `beginInvite` settles what needs no network,
/// the shell dials, then `sendInvite` sends the INVITE and starts its timer; the outcome arrives as
/// `.inviteFinished`.
extension SessionStateMachine {
    /// What `beginInvite` decided.
    public enum InviteStart: Equatable, Sendable {
        /// Settled without the network.
        case finished(InviteOutcome)
        /// Dial the peer (`prepareDial`), then call `sendInvite`.
        case dial
    }

    /// What `sendInvite` did.
    public enum InviteSent: Equatable, Sendable {
        /// The INVITE is on its way; its outcome comes as `.inviteFinished(id, ...)`.
        case sent(WireID)
        /// It could not be sent.
        case finished(InviteOutcome)
    }

    public mutating func beginInvite(_ peer: SessionPeer, room: RoomID, at now: EngineTime) -> (InviteStart, [SessionAction]) {
        var out: [SessionAction] = []
        guard peer.id != configuration.ownID else { return (.finished(.refused("that is this daemon")), out) }
        if rooms[room] == nil {
            membership.enter(room)
            membership.metadata.joined(room, at: now.wall)
            saveRoom(room, &out)
            notice(room, "you created \(room)", at: now, &out)
            recordCreation(room, at: now, &out)
        }
        if rooms[room]?.members[peer.id] != nil, links.isLinked(peer.id) { return (.finished(.alreadyMember), out) }
        if rooms[room]?.members[peer.id] == nil, let problem = fullRoom(room) { return (.finished(.refused(problem)), out) }
        do throws(SessionError) { out += try liftRemoval(of: peer.id, in: room, at: now) } catch { return (.finished(.refused(error.message)), out) }
        // They invited us to this room first: inviting back means yes.
        // (The oldest of them, if it invited us more than once: the same choice on every run.)
        if let waiting = invites.pending.filter({ $0.value.peer == peer.id && $0.value.invitation.room == room })
            .min(by: { ($0.value.invitation.receivedAt, $0.key.description) < ($1.value.invitation.receivedAt, $1.key.description) }),
            let accepted = try? accept(waiting.key.description, at: now)
        {
            return (.finished(.accepted), out + accepted.1)
        }
        return (.dial, out)
    }

    /// Sends the INVITE over the peer's connection. Returns its id, or the outcome if the connection is
    /// gone (it closed while we dialed, for example because the peer refused us).
    public mutating func sendInvite(
        _ peer: SessionPeer, room: RoomID, context: [UInt8], timeout: Int64, at now: EngineTime
    ) -> (InviteSent, [SessionAction]) {
        guard let entry = links.entry(peer.id) else {
            if case .goodbye(.refused, let text)? = links.lastCloseReason[peer.id] { return (.finished(.refused(text)), []) }
            return (.finished(.unreachable("the connection closed: \(links.lastCloseReason[peer.id].map { "\($0)" } ?? "unknown reason")")), [])
        }
        let id = environment.ids.wireID()
        let frame = WireFrame.Invite(id: id, timeoutMilliseconds: UInt32(clamping: timeout), room: room, context: context)
        invites.sent(id, OutgoingInvitation(peer: entry.peer, room: room, frame: frame))
        timers.schedule(.outgoingInvitation(id), at: now.monotonic + timeout + configuration.inviteReplyGrace)
        return (.sent(id), [.send(entry.handle, [.invite(frame)])])
    }

    /// Why nobody more can join `room` (it has `maximumRoomMembers` besides us), or nil.
    func fullRoom(_ room: RoomID) -> String? {
        let count = rooms[room]?.members.count ?? 0
        guard count >= configuration.maximumRoomMembers else { return nil }
        return "room \(room) is full (\(count) members besides \(configuration.ownName)); someone must leave or be removed first"
    }

    /// Invitations waiting for the person's answer, oldest first.
    public var invitations: [IncomingInvitation] {
        invites.pending.values.map(\.invitation).sorted { ($0.receivedAt, $0.id.description) < ($1.receivedAt, $1.id.description) }
    }

    /// Accepts a pending invitation (by id or unique prefix) and joins its room, asking the inviter for
    /// the history `history` says.
    public mutating func accept(
        _ prefix: String, history: HistoryScope = .all, at now: EngineTime
    ) throws(SessionError) -> (IncomingInvitation, [SessionAction]) {
        let id = try invites.pendingID(prefix)
        let entry = invites.pending[id]!
        guard let link = links.entry(entry.peer) else {
            throw SessionError(.unreachable, "\(entry.invitation.from.name) is no longer connected; ask them to invite you again")
        }
        var out: [SessionAction] = []
        _ = invites.takePending(id)
        timers.cancel(.incomingInvitation(id))
        answer(id, from: entry.peer, .init(id: id, outcome: .accepted), on: link.handle, &out)
        join(entry.invitation.room, invitedBy: link, history: history, at: now, &out)
        out.append(.emit(.invitationClosed(entry.invitation, outcome: .accepted)))
        scheduleResync(at: now)
        return (entry.invitation, out)
    }

    public mutating func decline(_ prefix: String, reason: String = "", at now: EngineTime) throws(SessionError) -> (IncomingInvitation, [SessionAction]) {
        let id = try invites.pendingID(prefix)
        let entry = invites.takePending(id)!
        timers.cancel(.incomingInvitation(id))
        var out: [SessionAction] = []
        answer(id, from: entry.peer, .init(id: id, outcome: .declined, reason: String(reason.prefix(200))), on: links.handle(entry.peer), &out)
        out.append(.emit(.invitationClosed(entry.invitation, outcome: .declined)))
        return (entry.invitation, out)
    }

    // MARK: Frames

    mutating func received(_ invite: WireFrame.Invite, from link: LinkTable.Entry, at now: EngineTime, _ out: inout [SessionAction]) {
        let peer = link.peer
        func reply(_ outcome: WireFrame.InviteReply.Outcome, _ reason: String, _ out: inout [SessionAction]) {
            answer(invite.id, from: peer.id, .init(id: invite.id, outcome: outcome, reason: reason), on: link.handle, &out)
        }
        if let previous = invites.answer(to: invite.id, from: peer.id) {
            // The same INVITE again (sent once more on a connection that replaced the one our answer
            // went on): the same answer.
            out.append(.send(link.handle, [.inviteReply(previous)]))
            return
        }
        if rooms[invite.room]?.members[peer.id] != nil {
            reply(.accepted, "already in the room", &out)
            sendMembers(invite.room, to: link, at: now, &out)
            // It may have left and come back without our noticing (we were down): what it forgot on
            // leaving (the room's metadata) it gets again.
            sendMeta(invite.room, to: link.handle, &out)
            return
        }
        if rooms[invite.room] != nil, removalTime(peer.id, in: invite.room) != nil {
            // Removed from a room we are in: it cannot bring us into it again, nor have us take its history.
            reply(.refused, "\(peer.name) was removed from \(invite.room)", &out)
            return
        }
        let timeout =
            invite.timeoutMilliseconds == 0
            ? configuration.defaultInviteTimeout : min(Int64(invite.timeoutMilliseconds), configuration.maximumInviteTimeout)
        let invitation = IncomingInvitation(
            id: invite.id, from: peer, room: invite.room, context: invite.context,
            shortCode: environment.shortCode(peer.id), receivedAt: now.wall, expiresAt: now.wall + timeout)
        let mutual = invites.outgoing.values.contains { $0.peer.id == peer.id && $0.room == invite.room }
        // Known means known by key: a plaintext connection proves no key.
        let isKnown = link.authenticated && links.trust.known.knows(peer.id)
        if mutual || configuration.autoAccept == .all || (configuration.autoAccept == .known && isKnown) {
            reply(.accepted, "", &out)
            join(invite.room, invitedBy: link, at: now, &out)
            out.append(.emit(.invitationClosed(invitation, outcome: mutual ? .acceptedMutually : .acceptedAutomatically)))
            // Both invited each other: ours is answered too, whether or not its INVITE or the answer
            // to it arrives (either may be lost with a duplicate connection closed unread).
            for (wireID, _) in invites.outgoing(where: { $0.peer.id == peer.id && $0.room == invite.room }) {
                closeOutgoingInvitation(wireID, .accepted, &out)
            }
            return
        }
        if invites.pending[invite.id] != nil { return }
        switch invites.wait(
            invite.id, PendingInvitation(invitation: invitation, peer: peer.id),
            maximum: configuration.maximumPendingInvitations, perPeer: configuration.maximumPendingInvitationsPerPeer)
        {
        case .tooMany?:
            reply(.refused, "too many pending invitations", &out)
            return
        case .tooManyFrom?:
            reply(.refused, "too many pending invitations from \(peer.name) (\(configuration.maximumPendingInvitationsPerPeer)); wait for an answer", &out)
            return
        case nil:
            break
        }
        timers.schedule(.incomingInvitation(invite.id), at: now.monotonic + timeout)
        out.append(.emit(.invitation(invitation)))
    }

    mutating func received(_ reply: WireFrame.InviteReply, from link: LinkTable.Entry, at now: EngineTime, _ out: inout [SessionAction]) {
        guard let entry = invites.outgoing[reply.id], entry.peer.id == link.peer.id else { return }
        switch reply.outcome {
        case .accepted:
            if rooms[entry.room]?.members[link.peer.id] == nil, let problem = fullRoom(entry.room) {
                // Filled while the invitation waited: the invitee hears why, as we do.
                out.append(.send(link.handle, [.roomLeave(.init(room: entry.room, text: problem))]))
                closeOutgoingInvitation(reply.id, .refused(problem), &out)
                return
            }
            admitInvitee(entry.room, from: link, at: now, &out)
            closeOutgoingInvitation(reply.id, .accepted, &out)
        case .declined: closeOutgoingInvitation(reply.id, .declined(reply.reason), &out)
        case .expired: closeOutgoingInvitation(reply.id, .expired, answered: true, &out)
        case .refused: closeOutgoingInvitation(reply.id, .refused(reply.reason), &out)
        }
    }

    /// Sends `reply` (if connected) and remembers it for an INVITE that comes again.
    mutating func answer(_ id: WireID, from peer: PeerID, _ reply: WireFrame.InviteReply, on handle: LinkHandle?, _ out: inout [SessionAction]) {
        if let handle { out.append(.send(handle, [.inviteReply(reply)])) }
        invites.answered(id, from: peer, reply, keep: configuration.maximumPendingInvitations)
    }

    mutating func expireIncoming(_ id: WireID, _ out: inout [SessionAction]) {
        guard let entry = invites.takePending(id) else { return }
        answer(id, from: entry.peer, .init(id: id, outcome: .expired, reason: "not answered in time"), on: links.handle(entry.peer), &out)
        out.append(.emit(.invitationClosed(entry.invitation, outcome: .expired)))
    }

    /// Ends an invitation we sent. `answered`: the peer said so itself (an `expired` reply), as opposed
    /// to our timer or a lost connection.
    mutating func closeOutgoingInvitation(_ id: WireID, _ outcome: InviteOutcome, answered: Bool = false, _ out: inout [SessionAction]) {
        guard let entry = invites.takeOutgoing(id) else { return }
        timers.cancel(.outgoingInvitation(id))
        switch outcome {
        case .expired where !answered, .unreachable:
            // The peer may have accepted and its answer been lost with the connection.
            membership.unanswered(RoomMember(room: entry.room, peer: entry.peer.id), keep: configuration.maximumUnansweredInvitations)
        default:
            break
        }
        out.append(.emit(.inviteOutcome(id: id, peer: entry.peer, room: entry.room, outcome: outcome)))
        out.append(.inviteFinished(id, outcome))
    }

    /// Settles invitations from `peer` to `room` still waiting here: joining the room answers them.
    mutating func settleInvitations(from peer: PeerID, to room: RoomID, _ out: inout [SessionAction]) {
        for (wireID, entry) in invites.pending.sorted(by: { $0.key.description < $1.key.description })
        where entry.peer == peer && entry.invitation.room == room {
            timers.cancel(.incomingInvitation(wireID))
            _ = invites.takePending(wireID)
            answer(wireID, from: peer, .init(id: wireID, outcome: .accepted, reason: "already in the room"), on: links.handle(peer), &out)
            out.append(.emit(.invitationClosed(entry.invitation, outcome: .acceptedAlreadyMember)))
        }
    }

    /// Records the peer's key under its name the first time we share a room (trust on first use), on a
    /// connection that proved the key (TLS).
    /// A known key under a new name is the same peer: its label follows. Only a connection that proved
    /// the key (TLS) counts.
    mutating func trustOnFirstUse(_ link: LinkTable.Entry, _ out: inout [SessionAction]) {
        let peer = link.peer
        guard link.authenticated, links.trust.known.labels[peer.id] != peer.name else { return }
        links.trust.known.remember(label: peer.name, id: peer.id)
        out.append(.persist(.rememberPeer(label: peer.name, id: peer.id)))
    }

    /// The person vouches for `peer`'s key (the shell has saved it): known from now on.
    public mutating func trust(_ peer: SessionPeer) {
        links.trust.known.remember(label: peer.name, id: peer.id)
    }

    /// Forgets the keys recorded under `name` (or the key whose id is `name`); returns them.
    public mutating func forget(_ name: String) -> [PeerID] {
        links.trust.known.forget(name)
    }
}
