import LanchatCore
import LanchatWire

/// Membership with provenance (wire version 2).
///
/// Each member signs its own membership of a room (`MembershipProof`: room, its id, who invited it,
/// when), and its leaving (`SignedLeave`). Another member's word that someone is in the room adds that
/// someone only with its proof: so a member can bring in only peers that hold their keys and said they
/// joined, not ids of its making, and it can never change a known member's key (an id is its key's hash).
/// Proofs travel in ROOM_MEMBERS; a signed leave is handed on by each member that takes it, and a proof
/// no newer than a leave we hold (a stale list) adds nobody. An engine without keys (version 1 only)
/// takes a member's word, as version 1 does.
extension SessionStateMachine {
    /// Members listed per ROOM_MEMBERS frame: a room of 255 with 8 addresses of 64 bytes, names of 200
    /// and proofs stays under 32 KiB a page.
    static let membersPerPage = 32

    /// Our own proof for `room`, signed once (`inviter`: who invited us, empty if we created the room or
    /// restored it). Later than any leave of ours we signed, so it outranks it.
    @discardableResult
    mutating func ownProof(_ room: RoomID, inviter: PeerID? = nil, at now: EngineTime) -> WireFrame.MembershipProof? {
        guard let keys = configuration.envelopes else { return nil }
        if inviter == nil, let proof = membership.ownProof(room) { return proof }
        let time = membership.proofTime(room, now: now.wall)
        let inviterID = inviter?.rawValue ?? ""
        let proof = WireFrame.MembershipProof(
            inviter: inviterID, timestampMilliseconds: time,
            signature: keys.signature(over: Envelope.membershipBytes(room: room, member: configuration.ownID.rawValue, inviter: inviterID, timestamp: time)))
        membership.signed(proof, for: room)
        return proof
    }

    /// Whether `proof` is `member`'s own, for `room`, and newer than any leave of it we hold.
    func verifies(_ proof: WireFrame.MembershipProof?, of member: PeerID, in room: RoomID) -> Bool {
        guard let proof, let keys = configuration.envelopes else { return false }
        if let left = membership.leaveTime(RoomMember(room: room, peer: member)), left >= proof.timestampMilliseconds { return false }
        // Removed by an administrator: no proof brings it back (an administrator's invitation lifts that).
        if removalTime(member, in: room) != nil { return false }
        let bytes = Envelope.membershipBytes(room: room, member: member.rawValue, inviter: proof.inviter, timestamp: proof.timestampMilliseconds)
        return keys.verifies(proof.signature, over: bytes, by: member)
    }

    /// Keeps a member's proof if it is newer than the one we hold and verifies; true if we held none
    /// before (the member can now be introduced to members that do not know it; a newer proof of a
    /// member we could introduce already changes nothing for them).
    mutating func adoptProof(_ proof: WireFrame.MembershipProof?, of member: PeerID, in room: RoomID) -> Bool {
        guard let proof, rooms[room]?.members[member] != nil else { return false }
        let held = rooms[room]?.proofs[member]
        if let held, held.timestampMilliseconds >= proof.timestampMilliseconds { return false }
        guard verifies(proof, of: member, in: room) else { return false }
        membership.setProof(proof, of: member, in: room)
        return held == nil
    }

    /// The ROOM_MEMBERS frames that tell `entry`'s peer who is in `room`: everyone on a version 1
    /// connection; on version 2 only members whose proof we hold (the peer would not take the others,
    /// and already has those it knows), with their proofs. In pages of `membersPerPage`.
    mutating func membersFrames(_ room: RoomID, for entry: LinkTable.Entry, at now: EngineTime) -> [WireFrame] {
        var listed = [selfEntry()]
        let others = (rooms[room]?.members.keys.sorted()) ?? []
        if entry.version >= WireFrame.proofsVersion, configuration.envelopes != nil {
            listed[0].proof = ownProof(room, at: now)
            for id in others where vouchable(id, in: room) {
                guard let proof = rooms[room]?.proofs[id] else { continue }
                var member = memberEntry(id)
                member.proof = proof
                listed.append(member)
            }
        } else {
            listed += others.filter { vouchable($0, in: room) }.map(memberEntry)
        }
        return pages(of: listed, in: room)
    }

    func pages(of members: [WireFrame.Member], in room: RoomID) -> [WireFrame] {
        Self.chunks(members, of: Self.membersPerPage).map { .roomMembers(.init(room: room, members: $0)) }
    }

    /// `items` in runs of at most `size` (the pages of ROOM_MEMBERS and ROOM_META).
    static func chunks<T>(_ items: [T], of size: Int) -> [[T]] {
        stride(from: 0, to: items.count, by: size).map { Array(items[$0..<min($0 + size, items.count)]) }
    }

    /// Our list of `room` for a peer with proofs (`entry`'s version), and its digest (`MemberListDigest`).
    mutating func provenList(_ room: RoomID, for entry: LinkTable.Entry, at now: EngineTime) -> (frames: [WireFrame], digest: MemberListDigest) {
        let frames = membersFrames(room, for: entry, at: now)
        var digest = MemberListDigest()
        for case .roomMembers(let page) in frames { digest.add(page.members) }
        return (frames, digest)
    }

    /// Sends `entry`'s peer the members of `room`.
    mutating func sendMembers(_ room: RoomID, to entry: LinkTable.Entry, at now: EngineTime, _ out: inout [SessionAction]) {
        out.append(.send(entry.handle, membersFrames(room, for: entry, at: now)))
    }

    /// Tells once per connection that a member's introduction brought peers without their proofs (a
    /// member that speaks a version before proofs cannot send them: its introductions are refused quietly).
    mutating func reportUnproven(_ count: Int, in room: RoomID, from link: LinkTable.Entry, _ out: inout [SessionAction]) {
        guard count > 0, link.version >= WireFrame.proofsVersion, membership.firstRefusal(of: link.peer.id) else { return }
        out.append(
            .emit(
                .security(
                    peer: link.peer,
                    text: "\(link.peer.name) (\(link.peer.id.short)) introduced \(count) member(s) to room \(room) "
                        + "without their own signed membership: not added (any more from it on this connection are refused without a word)")))
    }

    // MARK: Leaving

    /// Our signed leave of `room` (nil without keys).
    mutating func signLeave(_ room: RoomID, at now: EngineTime, _ out: inout [SessionAction]) -> WireFrame.SignedLeave? {
        guard let keys = configuration.envelopes else { return nil }
        let time = membership.leave(room, now: now.wall)
        out.append(.persist(.saveLeave(StoredLeave(room: room.rawValue, peerID: configuration.ownID.rawValue, timestamp: time))))
        let own = configuration.ownID.rawValue
        return WireFrame.SignedLeave(
            member: own, timestampMilliseconds: time,
            signature: keys.signature(over: Envelope.leaveBytes(room: room, member: own, timestamp: time)))
    }

    /// A ROOM_LEAVE with a leaver's signature, from the leaver or handed on by a member. It removes the
    /// leaver if it is newer than the proof we hold of it (a stale leave does not undo a rejoin) and is
    /// handed on to the members we are connected to; it is kept so that an older proof adds no one.
    mutating func received(
        signed leave: WireFrame.SignedLeave, room: RoomID, text: String, from link: LinkTable.Entry, at now: EngineTime,
        _ out: inout [SessionAction]
    ) {
        guard let keys = configuration.envelopes, let member = PeerID(leave.member), member != configuration.ownID,
            rooms[room]?.members[link.peer.id] != nil,
            keys.verifies(leave.signature, over: Envelope.leaveBytes(room: room, member: leave.member, timestamp: leave.timestampMilliseconds), by: member)
        else { return }
        let key = RoomMember(room: room, peer: member)
        // Not dated far ahead: kept leaves are bounded by their time, and one from the future would
        // outlast the honest ones (and outrank every proof until then).
        guard !Self.isAhead(Int64(clamping: leave.timestampMilliseconds), of: now.wall) else { return }
        // Kept only for a member we hold (so ids of nobody's making cannot push out the leaves that matter).
        guard let known = rooms[room]?.members[member] else { return }
        guard membership.keepLeave(key, at: leave.timestampMilliseconds, keep: configuration.maximumTombstones) else { return }
        out.append(.persist(.saveLeave(StoredLeave(room: room.rawValue, peerID: member.rawValue, timestamp: leave.timestampMilliseconds))))
        if member != link.peer.id {
            // Handed on: only a leave newer than the membership we know of counts.
            guard let proof = rooms[room]?.proofs[member], proof.timestampMilliseconds < leave.timestampMilliseconds else { return }
        }
        let relayed = member != link.peer.id
        let peer = SessionPeer(id: member, name: known.name)
        removeMember(room, peer, reason: relayed ? "\(text.isEmpty ? "" : "\(text); ")told by \(link.peer.name)" : text, at: now, &out)
        if !relayed { bury(key, at: now) }
        let frame = WireFrame.roomLeave(.init(room: room, text: text, signed: leave))
        for other in (rooms[room]?.members.keys.sorted() ?? []) where other != link.peer.id {
            if let entry = links.entry(other), entry.version >= WireFrame.proofsVersion { out.append(.send(entry.handle, [frame])) }
        }
    }
}

/// A membership proof as the store keeps it, and back (`saveRoom`, the restore).
extension StoredProof {
    init(_ proof: WireFrame.MembershipProof) {
        self.init(inviter: proof.inviter, timestamp: proof.timestampMilliseconds, key: proof.signature.key, signature: proof.signature.bytes)
    }
}

extension WireFrame.MembershipProof {
    init(_ stored: StoredProof) {
        self.init(inviter: stored.inviter, timestampMilliseconds: stored.timestamp, signature: Signature(key: stored.key, bytes: stored.signature))
    }
}
