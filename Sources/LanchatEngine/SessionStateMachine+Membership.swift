import LanchatCore
import LanchatWire

/// Membership: who is in each room, as this node knows it.
///
/// A peer becomes a member when it accepts our invitation, when we accept its invitation, or when a
/// member introduces it (ROOM_MEMBERS from a member). ROOM_MEMBERS from a peer not yet known as a
/// member is a claim, kept `claimLifetime` until a member introduces that peer. ROOM_LEAVE removes its
/// sender. Every change is saved with the room. Whoever learns of new members tells the other members
/// it is connected to (an introduction: the new members and itself), so views converge whichever member
/// admitted them, also when two groups that each had a room of the same name meet.
extension SessionStateMachine {
    public struct RoomSummary: Sendable, Equatable {
        public var room: RoomID
        public var members: [MemberSummary]
        /// Whether we administer the room (`+Admin`).
        public var administered = false
    }

    public struct MemberSummary: Sendable, Equatable {
        public var peer: SessionPeer
        public var state: SessionPeerState
        /// What it told us of its presence (nil: nothing, an older lanchat), and whether its hand is up here.
        public var presence: PresenceState?
        public var hand = false
        /// Whether it administers the room.
        public var admin = false
    }

    /// Joins `room` because `link`'s peer invited us (we accepted, or it was accepted for us), and asks
    /// it for the history `history` says (nothing: no request).
    /// Only a room we were not in asks for a history, and only of an inviter we took as a member: one
    /// history per join, from the member we accepted, while we join (`takeHistory`).
    mutating func join(_ room: RoomID, invitedBy link: LinkTable.Entry, history: HistoryScope = .all, at now: EngineTime, _ out: inout [SessionAction]) {
        // (Only a room we are not in is joined: an invitation to a room we are in, even alone in it with no
        // record of its creator, neither re-opens the history door nor takes a creator's record from this
        // inviter. Otherwise an inviter could leave ("not a member") and invite us again, as often as it
        // likes, each time with a history; and claim a room that has no record.)
        let joining = rooms[room] == nil
        if joining {
            membership.enter(room)
            membership.metadata.joined(room, at: now.wall)
            ownProof(room, inviter: link.peer.id, at: now)
            notice(room, "you joined \(room) (invited by \(link.peer.name))\(history.limit == 0 ? "; no earlier messages asked for" : "")", at: now, &out)
        }
        addMember(room, link.peer, hintFrom: link, at: now, &out)
        trustOnFirstUse(link, &out)
        guard joining, history.limit != 0, rooms[room]?.members[link.peer.id] != nil else { return }
        transfers.histories.open(room, for: link.peer.id, until: now.monotonic + configuration.historyOfferTimeout)
        out.append(.requestHistory(room, link.handle, history))
    }

    /// A peer we invited is in: by its INVITE_REPLY, or by its member list when that reply was lost. It is
    /// a member (sent the members, introduced to them), its key is recorded, and it may ask us for the
    /// room's history once (at most `maximumUnansweredInvitations` newcomers are owed it at a time).
    mutating func admitInvitee(_ room: RoomID, from link: LinkTable.Entry, at now: EngineTime, _ out: inout [SessionAction]) {
        addMember(room, link.peer, hintFrom: link, at: now, &out)
        trustOnFirstUse(link, &out)
        transfers.histories.owe(RoomMember(room: room, peer: link.peer.id), keep: configuration.maximumUnansweredInvitations)
    }

    mutating func addMember(_ room: RoomID, _ peer: SessionPeer, hintFrom link: LinkTable.Entry, at now: EngineTime, _ out: inout [SessionAction]) {
        membership.enter(room)
        guard rooms[room]!.members[peer.id] == nil, rooms[room]!.members.count < configuration.maximumRoomMembers,
            removalTime(peer.id, in: room) == nil
        else { return }
        var member = Member(name: peer.name, port: 0, addresses: [])
        if let (hint, _) = environment.addressBook.lookup(peer.id) {
            member.port = hint.port
            member.addresses = hint.addresses
        } else if let remote = link.remoteAddress {
            member.addresses = [remote]
        }
        membership.setMember(member, peer.id, in: room)
        if links.entry(peer.id)?.authenticated == true { markKeyed(peer.id, &out) }
        noteSeen(peer.id)
        membership.admitted(RoomMember(room: room, peer: peer.id))
        saveRoom(room, &out)
        settleInvitations(from: peer.id, to: room, &out)
        notice(room, "\(peer.name) joined", at: now, &out)
        out.append(.emit(.memberState(room: room, peer: peer, state: links.isLinked(peer.id) ? .connected : .connecting)))
        // The new member learns everyone we know in the room; the others learn of it. What was kept
        // queued for it (it had answered "not a member") goes now.
        if let entry = links.entry(peer.id) { welcome(entry, to: room, at: now, &out) }
        introduce([peer.id], in: room, at: now, &out)
        // What it claimed before it was a member here now counts.
        if let claim = membership.takeClaim(RoomMember(room: room, peer: peer.id)), let entry = links.entry(peer.id) {
            merge(claim.members, into: room, from: entry, at: now, &out)
        }
    }

    /// What a connected peer that just became a member of `room` is sent: the members we know, our
    /// presence, the room's metadata, our subscriptions, and what was kept queued for it.
    mutating func welcome(_ entry: LinkTable.Entry, to room: RoomID, at now: EngineTime, _ out: inout [SessionAction]) {
        sendMembers(room, to: entry, at: now, &out)
        out.append(.send(entry.handle, [presenceFrame(for: entry.peer.id)]))
        sendMeta(room, to: entry.handle, &out)
        sendTopics(room, to: entry.handle, &out)
        flushOutbox(to: entry.peer.id, at: now, &out)
    }

    /// Tells the connected members of `room` (but the new ones) about new members; they connect to
    /// each other directly. On a version 2 connection only members whose proof we hold are introduced
    /// (the others are when their proof reaches us: `merge`).
    mutating func introduce(_ newcomers: [PeerID], in room: RoomID, at now: EngineTime, _ out: inout [SessionAction]) {
        let newcomers = newcomers.filter { vouchable($0, in: room) }
        guard let members = rooms[room]?.members.keys, !newcomers.isEmpty else { return }
        let plain = pages(of: newcomers.map(memberEntry) + [selfEntry()], in: room)
        var proven: [WireFrame] = []
        if configuration.envelopes != nil {
            var entries: [WireFrame.Member] = newcomers.compactMap { id in
                guard let proof = rooms[room]?.proofs[id] else { return nil }
                var member = memberEntry(id)
                member.proof = proof
                return member
            }
            if !entries.isEmpty {
                var own = selfEntry()
                own.proof = ownProof(room, at: now)
                entries.append(own)
                proven = pages(of: entries, in: room)
            }
        }
        let fresh = Set(newcomers)
        for other in members.sorted() where !fresh.contains(other) {
            guard let entry = links.entry(other) else { continue }
            let frames = entry.version >= WireFrame.proofsVersion && configuration.envelopes != nil ? proven : plain
            if !frames.isEmpty { out.append(.send(entry.handle, frames)) }
        }
    }

    /// Removes a member. `keepQueued`: what we sent it stays queued (it answered "not a member": our
    /// views differ, and if they meet again it still gets what it was sent). `code`: why, for programs
    /// (`left`, `removed`, `not_a_member`).
    mutating func removeMember(
        _ room: RoomID, _ peer: SessionPeer, reason: String, code: MemberLeftCode = .left, keepQueued: Bool = false, at now: EngineTime,
        _ out: inout [SessionAction]
    ) {
        membership.remove(RoomMember(room: room, peer: peer.id))
        transfers.histories.forgetOwed { $0 == RoomMember(room: room, peer: peer.id) }
        if keepQueued { pinOutbox(for: peer.id, in: room, &out) } else { dropOutbox(for: peer.id, in: room, &out) }
        saveRoom(room, &out)
        out.append(.emit(.memberState(room: room, peer: peer, state: .notConnected)))
        let text = reason.isEmpty ? "\(peer.name) left" : "\(peer.name) left: \(reason)"
        out.append(.emit(.memberLeft(room: room, peer: peer, code: keepQueued ? .notAMember : code, text: text, fatal: true)))
        notice(room, text, at: now, &out)
        forgetUnwantedRedials()
        forgetPresences()
        forgetTopicsOutsideRooms()
    }

    mutating func received(_ update: WireFrame.RoomMembers, from link: LinkTable.Entry, at now: EngineTime, _ out: inout [SessionAction]) {
        let sender = link.peer.id
        guard let room = rooms[update.room] else {
            // (The closing first: after the leave the peer no longer counts us as a member, and would ignore it.)
            tellClosed(update.room, to: link.handle, &out)
            out.append(.send(link.handle, [.roomLeave(.init(room: update.room, text: Self.notAMember))]))
            return
        }
        if room.members[sender] == nil, membership.takeUnanswered(RoomMember(room: update.room, peer: sender)) {
            // We invited it and its answer was lost: it accepted.
            admitInvitee(update.room, from: link, at: now, &out)
        }
        guard rooms[update.room]?.members[sender] != nil else {
            keepClaim(update, from: sender, at: now)
            return
        }
        if link.version >= WireFrame.proofsVersion { membership.heard(update.members, in: update.room, from: sender) }
        merge(update.members, into: update.room, from: link, at: now, &out)
    }

    /// Keeps a non-member's claim to be in a room until a member vouches for it or it expires. A
    /// repeated claim (a resync) keeps the time of the first: it expires all the same. One peer holds at
    /// most `maximumClaimsPerPeer` (more are ignored: it sends them again at its next resync); past
    /// `maximumClaims` in all, the oldest goes (each holds up to 1,024 members).
    private mutating func keepClaim(_ update: WireFrame.RoomMembers, from sender: PeerID, at now: EngineTime) {
        guard
            membership.keepClaim(
                update.members, in: update.room, from: sender, perPeer: configuration.maximumClaimsPerPeer,
                maximum: configuration.maximumClaims, roomMembers: configuration.maximumRoomMembers, at: now.monotonic)
        else { return }
        timers.scheduleNoLaterThan(.claims, at: now.monotonic + configuration.claimLifetime)
    }

    /// What the kept claims hold, counted as `bytes(of:)` does.
    public var claimBytes: Int { membership.claimBytes }

    /// What all kept claims may hold together (`keepClaim`), counted as `bytes(of:)` does.
    static let maximumClaimBytes = 4 << 20

    /// About what `members` takes in memory: their ids, names, addresses and proofs.
    static func bytes(of members: [WireFrame.Member]) -> Int {
        members.reduce(0) { total, member in
            total + 64 + member.peerID.utf8.count + member.name.utf8.count + member.addresses.reduce(0) { $0 + 16 + $1.utf8.count }
                + (member.proof.map { 32 + $0.inviter.utf8.count + $0.signature.key.count + $0.signature.bytes.count } ?? 0)
        }
    }

    /// Adds the members `link`'s peer (a member) tells us of. With keys (version 2), one that is new to
    /// us only with its own proof (`+Proofs`); a proof that is new to us for a known member makes it one
    /// we can introduce.
    private mutating func merge(_ members: [WireFrame.Member], into room: RoomID, from link: LinkTable.Entry, at now: EngineTime, _ out: inout [SessionAction]) {
        var introduced: [PeerID] = []
        var proven: [PeerID] = []
        var unproven = 0
        var deferred = 0
        let proofsNeeded = configuration.envelopes != nil
        let before = rooms[room]?.members
        for member in members {
            guard let id = PeerID(member.peerID), id != configuration.ownID else { continue }
            // A member that told us it is not in the room comes back by a direct admission, after a
            // while, or when it claims to be in the room again itself and a member vouches for it.
            if id != link.peer.id, membership.isBuried(RoomMember(room: room, peer: id), at: now.monotonic) { continue }
            // No member makes us dial this host, its loopback or a multicast group (unless we and it talk
            // over loopback: every node is on this host).
            var addresses = member.addresses.filter { Self.dialable($0, via: link.remoteAddress) }
            if id == link.peer.id, let remote = link.remoteAddress { addresses = [remote] + addresses }
            if var known = rooms[room]?.members[id] {
                if proofsNeeded, let proof = member.proof, proofChecksLeft(for: link.peer.id) {
                    // A proof newer than the one held costs a check, whether it verifies or not.
                    if rooms[room]?.proofs[id].map({ $0.timestampMilliseconds < proof.timestampMilliseconds }) ?? true {
                        membership.proofChecked(from: link.peer.id)
                    }
                    if adoptProof(proof, of: id, in: room) { proven.append(id) }
                }
                // Addresses are hints, and only a member's own: another member's word about them (which
                // could send our redials to an address of its choosing) changes nothing.
                guard id == link.peer.id else { continue }
                if member.port > 0 { known.port = Int(member.port) }
                if !addresses.isEmpty {
                    known.addresses = Array((addresses + known.addresses).reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }.prefix(8))
                }
                membership.setMember(known, id, in: room)
                continue
            }
            guard (rooms[room]?.members.count ?? 0) < configuration.maximumRoomMembers else { continue }
            // A member brings in at most `maximumUnseenIntroductions` that we have not been connected with
            // yet (255 keys it made itself and proved would fill the room); the rest wait until those connect.
            let hearsay = id != link.peer.id
            if hearsay, proofsNeeded,
                unseenIntroduced(by: link.peer.id, in: room).count >= configuration.maximumUnseenIntroductions
                    || membership.introducersFull
            {
                deferred += 1
                continue
            }
            if proofsNeeded {
                let checked = member.proof != nil && proofChecksLeft(for: link.peer.id)
                if checked { membership.proofChecked(from: link.peer.id) }
                guard checked, verifies(member.proof, of: id, in: room) else {
                    unproven += 1
                    continue
                }
                membership.setProof(member.proof, of: id, in: room)
            }
            if hearsay { membership.introduced(RoomMember(room: room, peer: id), by: link.peer.id) }
            noteSeen(id)
            membership.setMember(Member(name: member.name, port: Int(member.port), addresses: addresses), id, in: room)
            introduced.append(id)
            notice(room, "\(member.name) joined", at: now, &out)
            let state: SessionPeerState = links.isLinked(id) ? .connected : .connecting
            out.append(.emit(.memberState(room: room, peer: SessionPeer(id: id, name: member.name), state: state)))
        }
        reportUnproven(unproven, in: room, from: link, &out)
        reportDeferred(deferred, in: room, from: link, &out)
        // Only if something changed: every member's list at every resync (each 30 s) was a synced write
        // of the whole list, 63 of them per resync in a room of 64 (our own resync saves it once).
        // A newer proof of a member whose proof we held is not saved at once (the resync saves each room):
        // a member re-signing its proofs in a loop would make every member write the list in a loop.
        if rooms[room]?.members != before || !proven.isEmpty { saveRoom(room, &out) }
        introduce(introduced + proven, in: room, at: now, &out)
        for id in introduced {
            if let entry = links.entry(id) { welcome(entry, to: room, at: now, &out) }
            if let claim = membership.takeClaim(RoomMember(room: room, peer: id)), let entry = links.entry(id) {
                merge(claim.members, into: room, from: entry, at: now, &out)
            }
        }
    }

    /// A claim nobody confirmed in time is answered like a ROOM_MEMBERS for a room we are not in:
    /// "not a member", so that its sender drops us too and both views agree (for example when we gave
    /// up on an invitation whose acceptance never reached us). A later introduction still admits it.
    mutating func expireClaims(at now: EngineTime, _ out: inout [SessionAction]) {
        let (expired, next) = membership.expireClaims(lifetime: configuration.claimLifetime, at: now.monotonic)
        for claim in expired where rooms[claim.room]?.members[claim.peer] == nil {
            if let handle = links.handle(claim.peer) { out.append(.send(handle, [.roomLeave(.init(room: claim.room, text: Self.notAMember))])) }
        }
        if let next { timers.schedule(.claims, at: next) }
    }

    /// Remembers that `member` told us it is not in the room.
    mutating func bury(_ member: RoomMember, at now: EngineTime) {
        membership.bury(member, until: now.monotonic + configuration.tombstoneLifetime, keep: configuration.maximumTombstones, at: now.monotonic)
    }

    /// Schedules the next resync while some room has members.
    mutating func scheduleResync(at now: EngineTime) {
        guard rooms.values.contains(where: { !$0.members.isEmpty }) else {
            timers.cancel(.resync)
            return
        }
        timers.scheduleNoLaterThan(.resync, at: now.monotonic + configuration.resyncInterval)
    }

    mutating func resync(at now: EngineTime, _ out: inout [SessionAction]) {
        // Anti-entropy (relay): each connected member is asked again what we lack, and may ask us again.
        transfers.histories.resync()
        membership.resync()
        for room in rooms.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            // Saved once a round: a list that `merge` found unchanged is not saved there, so a save that
            // failed (a full disk) is repaired here.
            saveRoom(room, &out)
            // Our list, the same for every member with proofs: made once, and sent to those whose own list
            // since our last resync did not show that they know it (in a settled room, one of each two
            // members sends its list each round, not both: a room of 64 made 126 lists of 64 a round).
            var proven: (frames: [WireFrame], digest: MemberListDigest)?
            for member in rooms[room]!.members.keys.sorted() {
                guard let entry = links.entry(member) else { continue }
                if entry.version >= WireFrame.proofsVersion, configuration.envelopes != nil {
                    let list = proven ?? provenList(room, for: entry, at: now)
                    proven = list
                    if !membership.heardAll(list.digest, in: room, from: member) { out.append(.send(entry.handle, list.frames)) }
                } else {
                    sendMembers(room, to: entry, at: now, &out)
                }
                if configuration.envelopes != nil { sendMetaDigest(room, to: entry.handle, &out) }
                askForWhatWeLack(in: room, from: entry, &out)
            }
        }
        membership.forgetHeardLists()
        scheduleResync(at: now)
    }

    /// Leaves a room: tells the connected members, forgets the room (its history stays).
    public mutating func leave(_ room: RoomID, at now: EngineTime) throws(SessionError) -> [SessionAction] {
        guard rooms[room] != nil else { throw SessionError(.unknownRoom, "you are not in room '\(room)'") }
        var out: [SessionAction] = []
        leaveRoom(room, code: .left, reason: "you left \(room)", tell: true, at: now, &out)
        return out
    }

    /// We leave `room`: `tell`, the connected members hear it (signed); `reason` is the notice, and with
    /// `code` the event that tells programs why (`left`, `removed`, `closed`).
    mutating func leaveRoom(_ room: RoomID, code: MemberLeftCode, reason: String, tell: Bool, at now: EngineTime, _ out: inout [SessionAction]) {
        guard let state = membership.drop(room) else { return }
        transfers.histories.forgetOwed { $0.room == room }
        if tell {
            let signed = signLeave(room, at: now, &out)
            for id in state.members.keys.sorted() {
                guard let entry = links.entry(id) else { continue }
                out.append(.send(entry.handle, [.roomLeave(.init(room: room, text: "", signed: entry.version >= WireFrame.proofsVersion ? signed : nil))]))
            }
        }
        membership.left(room)
        // Invitations we sent to it are answered for: an acceptance coming late must not bring the room back.
        for (wireID, _) in invites.outgoing(where: { $0.room == room }) {
            closeOutgoingInvitation(wireID, .refused("you are no longer in \(room)"), &out)
        }
        dropOutbox(for: nil, in: room, &out)
        forgetMeta(room, &out)
        transfers.histories.close(room)
        out.append(.persist(.deleteRoom(room)))
        notice(room, reason, at: now, &out)
        out.append(
            .emit(
                .memberLeft(
                    room: room, peer: SessionPeer(id: configuration.ownID, name: configuration.ownName), code: code,
                    text: reason, fatal: true)))
        scheduleResync(at: now)
        forgetUnwantedRedials()
        forgetPresences()
        forgetTopicsOutsideRooms()
    }

    mutating func saveRoom(_ room: RoomID, _ out: inout [SessionAction]) {
        guard let state = rooms[room] else { return }
        var members = state.members.sorted { $0.key < $1.key }.map {
            StoredMember(
                peerID: $0.key.rawValue, name: $0.value.name, port: $0.value.port, addresses: $0.value.addresses,
                proof: state.proofs[$0.key].map(StoredProof.init))
        }
        // Our own proof, under our id (the members we restore skip it).
        if let own = membership.ownProof(room) {
            members.append(StoredMember(peerID: configuration.ownID.rawValue, name: configuration.ownName, port: 0, addresses: [], proof: StoredProof(own)))
        }
        out.append(.persist(.saveRoom(room, members)))
    }

    func selfEntry() -> WireFrame.Member {
        WireFrame.Member(peerID: configuration.ownID.rawValue, name: configuration.ownName, port: UInt16(clamping: configuration.port), addresses: [])
    }

    func memberEntry(_ id: PeerID) -> WireFrame.Member {
        let member = rooms.keys.sorted { $0.rawValue < $1.rawValue }.lazy.compactMap { self.rooms[$0]?.members[id] }.first
        var addresses = member?.addresses ?? []
        var port = member?.port ?? 0
        if let (hint, _) = environment.addressBook.lookup(id) {
            addresses = hint.addresses
            port = hint.port
        }
        return WireFrame.Member(
            peerID: id.rawValue, name: member?.name ?? links.entry(id)?.peer.name ?? id.short, port: UInt16(clamping: port),
            addresses: Array(addresses.filter { $0.utf8.count <= 64 }.prefix(8)))
    }

    // MARK: Queries

    /// The rooms we are in, by name.
    public var roomIDs: [RoomID] { rooms.keys.sorted { $0.rawValue < $1.rawValue } }

    public var roomNames: [String] { roomIDs.map(\.rawValue) }

    public func sharesRoom(with peer: PeerID) -> Bool {
        rooms.values.contains { $0.members[peer] != nil }
    }

    public func isMember(_ peer: PeerID, of room: RoomID) -> Bool { rooms[room]?.members[peer] != nil }

    public func members(of room: RoomID) -> [PeerID: Member]? { rooms[room]?.members }

    public var roomList: [RoomSummary] {
        rooms.keys.sorted { $0.rawValue < $1.rawValue }.map(summary)
    }

    public func room(_ name: RoomID) -> RoomSummary? {
        rooms[name] == nil ? nil : summary(name)
    }

    private func summary(_ room: RoomID) -> RoomSummary {
        let administrators = administrators(of: room)
        let members = rooms[room]!.members.map { id, member -> MemberSummary in
            // "connecting" while joining; a member that was connected and dropped is "not connected"
            // while we try to reach it again.
            let state: SessionPeerState =
                links.isLinked(id)
                ? .connected
                : links.dialing.contains(id) && !membership.hasDeparted(RoomMember(room: room, peer: id)) ? .connecting : .notConnected
            return MemberSummary(
                peer: SessionPeer(id: id, name: member.name), state: state, presence: presenceState.of(id), hand: handRaised(id, in: room),
                admin: administrators.contains(id))
        }.sorted { ($0.peer.name, $0.peer.id) < ($1.peer.name, $1.peer.id) }
        return RoomSummary(room: room, members: members, administered: administrators.contains(configuration.ownID))
    }

    /// Peers with a live connection, and the rooms each shares with us.
    public var connections: [PeerID: [String]] {
        var result: [PeerID: [String]] = [:]
        for id in links.peers { result[id] = [] }
        for (room, state) in rooms {
            for id in state.members.keys { result[id, default: []].append(room.rawValue) }
        }
        return result.filter { links.isLinked($0.key) || !$0.value.isEmpty }
    }

    public func isConnected(_ id: PeerID) -> Bool { links.isLinked(id) }

    /// The connection that serves `peer` now.
    public func handle(for peer: PeerID) -> LinkHandle? { links.handle(peer) }

    /// The peer a connection serves (a replaced connection serves none).
    public func peer(on handle: LinkHandle) -> SessionPeer? { links.peer(on: handle)?.peer }
}
