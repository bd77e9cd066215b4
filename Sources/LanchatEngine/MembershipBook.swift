import LanchatCore
import LanchatWire

/// Membership and its bookkeeping (issue 29: a machine that owns its state; the rules are in `+Membership`,
/// `+Proofs`, `+Introductions` and `+Relay`, which route frames here and turn its answers into actions):
/// the claims of peers not yet members, who introduced each member we have not seen, the members shown as
/// left, the invitations whose answer never reached us, the tombstones of members that left, our own
/// proofs and leaves, the signed leaves of others, and what each peer made us check or was told once.
/// And who is in each room we are in, with their proofs (`rooms`), and each room's metadata and
/// administration (`metadata`, a machine of its own: `MetadataBook`). What it needs of the links and
/// the configuration is passed in; the rules for who gets in are the extensions'.
struct MembershipBook: Sendable {
    typealias RoomMember = SessionStateMachine.RoomMember
    typealias Claim = SessionStateMachine.Claim
    typealias Room = SessionStateMachine.Room
    typealias Member = SessionStateMachine.Member
    private typealias Engine = SessionStateMachine

    /// The rooms we are in: their members as we know them, and the members' proofs we hold.
    private(set) var rooms: [RoomID: Room] = [:]
    /// ROOM_MEMBERS from peers we did not know to be members yet, kept until someone introduces them.
    private var claims: [RoomID: [PeerID: Claim]] = [:]
    /// Who introduced each member we have not admitted ourselves (`SessionStateMachine.unseenIntroduced`);
    /// at most `maximumIntroducers` (with keys).
    private var introducers: [RoomMember: PeerID] = [:]
    /// Members for whom a "left" notice was shown, so a reconnection says "rejoined".
    private var departed: Set<RoomMember> = []
    /// Invitations whose answer never reached us (the connection dropped, or the reply timed out):
    /// if that peer later tells us it is in the room, it did accept, and is admitted. Oldest first,
    /// at most `maximumUnansweredInvitations`.
    private var unanswered: [RoomMember] = []
    /// Members that told us themselves that they are not in a room (ROOM_LEAVE), until when: another
    /// member's stale list does not bring them back meanwhile; only a direct admission does.
    private var tombstones: [RoomMember: Int64] = [:]
    /// Membership with provenance (`+Proofs`): our own proof per room, when we last left each room,
    /// the signed leaves of others we hold (when each left; at most `maximumTombstones`), and peers told
    /// about once on their connection for introducing members without proofs (or too many unseen ones).
    private var ownProofs: [RoomID: WireFrame.MembershipProof] = [:]
    private var ownLeaves: [RoomID: UInt64] = [:]
    private var signedLeaves: [RoomMember: UInt64] = [:]
    private var refusedIntroductions: Set<PeerID> = []
    /// Membership proofs from each peer checked since the last resync (`proofChecksLeft`).
    private var proofChecks: [PeerID: Int] = [:]
    /// What each member listed in ROOM_MEMBERS since our last resync, as a digest (`MemberListDigest`):
    /// our resync sends our list only to a member whose own list did not show that it knows ours.
    private var heardLists: [RoomMember: MemberListDigest] = [:]
    /// Each room's metadata and its administration (`+Metadata`, `+Admin`): the winning entry of each
    /// key, when we joined each room, and the closings of rooms we left because they were closed.
    var metadata = MetadataBook()

    /// Introductions remembered (`introducers`), at most: past it, nobody's are taken until some leave.
    static let maximumIntroducers = 8192

    /// Proofs checked from one peer between two resyncs, at most (`proofChecksLeft`).
    static let maximumProofChecks = 512

    init() {}

    /// What the store held: the rooms, our own proofs (`ownProofs`), and the signed leaves, ours (by
    /// `ownID`) and members'.
    init(restoring rooms: [RoomID: Room], ownProofs: [RoomID: WireFrame.MembershipProof], leaves: [StoredLeave], ownID: PeerID) {
        self.rooms = rooms
        self.ownProofs = ownProofs
        for leave in leaves {
            guard let room = RoomID(leave.room), let peer = PeerID(leave.peerID) else { continue }
            if peer == ownID { ownLeaves[room] = leave.timestamp } else { signedLeaves[RoomMember(room: room, peer: peer)] = leave.timestamp }
        }
    }

    // MARK: Joining and leaving

    /// We are in `room` (we made or joined it, or a member was admitted to it): kept, with no members if new.
    mutating func enter(_ room: RoomID) {
        if rooms[room] == nil { rooms[room] = Room() }
    }

    /// We are no longer in `room`: what we held of it, if we were. (Its bookkeeping goes with `left`.)
    mutating func drop(_ room: RoomID) -> Room? { rooms.removeValue(forKey: room) }

    /// `peer` is a member of `room` (we are in it) as `member` says (new, or its name and addresses updated).
    mutating func setMember(_ member: Member, _ peer: PeerID, in room: RoomID) { rooms[room]!.members[peer] = member }

    /// `peer`'s proof for `room` (we are in it), as we hold it.
    mutating func setProof(_ proof: WireFrame.MembershipProof?, of peer: PeerID, in room: RoomID) { rooms[room]!.proofs[peer] = proof }

    /// `member` is admitted: neither shown as left nor buried any more.
    mutating func admitted(_ member: RoomMember) {
        departed.remove(member)
        tombstones[member] = nil
    }

    /// `member` is no longer a member of its room: neither it nor its proof is held, nobody introduced it,
    /// and it is not shown as left.
    mutating func remove(_ member: RoomMember) {
        rooms[member.room]?.members[member.peer] = nil
        rooms[member.room]?.proofs[member.peer] = nil
        introducers[member] = nil
        departed.remove(member)
        heardLists[member] = nil
    }

    /// We left `room`: what concerns it goes (our proof, its introductions, claims, unanswered invitations,
    /// members shown as left); when we left it (`leave`) stays.
    mutating func left(_ room: RoomID) {
        introducers = introducers.filter { $0.key.room != room }
        ownProofs[room] = nil
        unanswered.removeAll { $0.room == room }
        claims[room] = nil
        departed = departed.filter { $0.room != room }
        heardLists = heardLists.filter { $0.key.room != room }
    }

    /// A member's connection dropped: whether that is news (it was not shown as left; it is now).
    mutating func departed(_ member: RoomMember) -> Bool { departed.insert(member).inserted }

    /// A member connected again: whether it had been shown as left (it is no longer).
    mutating func rejoined(_ member: RoomMember) -> Bool { departed.remove(member) != nil }

    func hasDeparted(_ member: RoomMember) -> Bool { departed.contains(member) }

    /// An invitation's answer never reached us (`keep`: at most that many remembered, the oldest goes).
    mutating func unanswered(_ member: RoomMember, keep: Int) {
        unanswered.append(member)
        if unanswered.count > keep { unanswered.removeFirst() }
    }

    /// Whether `member` is one we invited whose answer was lost (it is no longer).
    mutating func takeUnanswered(_ member: RoomMember) -> Bool {
        guard let index = unanswered.firstIndex(of: member) else { return false }
        unanswered.remove(at: index)
        return true
    }

    /// `member` told us it is not in the room: buried until `until` (at most `keep` tombstones: past it the
    /// expired ones go, then the oldest).
    mutating func bury(_ member: RoomMember, until: Int64, keep: Int, at now: Int64) {
        if tombstones.count >= keep {
            tombstones = tombstones.filter { $0.value > now }
            // (Ties broken by room and peer: a dictionary's order differs between runs, and a seed must replay.)
            if tombstones.count >= keep,
                let oldest = tombstones.min(by: { ($0.value, $0.key.room.rawValue, $0.key.peer) < ($1.value, $1.key.room.rawValue, $1.key.peer) })
            {
                tombstones[oldest.key] = nil
            }
        }
        tombstones[member] = until
    }

    /// Whether another member's list does not bring `member` back: it told us it left, not long ago, and
    /// has not claimed to be in the room since.
    func isBuried(_ member: RoomMember, at now: Int64) -> Bool {
        guard let until = tombstones[member], now < until else { return false }
        return claims[member.room]?[member.peer] == nil
    }

    // MARK: Claims

    /// Keeps `sender`'s claim (`members`, at most `roomMembers + 1` of them) to be in `room` until a member
    /// vouches for it or it expires. A repeated claim keeps the time of the first. One peer holds at most
    /// `perPeer` (more are not kept: false); past `maximum` in all, the oldest goes; and the oldest go while
    /// all of them together are past `maximumClaimBytes`.
    mutating func keepClaim(
        _ members: [WireFrame.Member], in room: RoomID, from sender: PeerID, perPeer: Int, maximum: Int, roomMembers: Int,
        at now: Int64
    ) -> Bool {
        let since = claims[room]?[sender]?.at
        if since == nil {
            let held = claims.values.reduce(0) { $0 + ($1[sender] == nil ? 0 : 1) }
            guard held < perPeer else { return false }
            if claims.values.reduce(0, { $0 + $1.count }) >= maximum {
                let oldest = claims.flatMap { room, byPeer in byPeer.map { (room: room, peer: $0.key, at: $0.value.at) } }
                    .min { ($0.at, $0.room.rawValue, $0.peer.rawValue) < ($1.at, $1.room.rawValue, $1.peer.rawValue) }
                if let oldest {
                    claims[oldest.room]?[oldest.peer] = nil
                    if claims[oldest.room]?.isEmpty == true { claims[oldest.room] = nil }
                }
            }
        }
        claims[room, default: [:]][sender] = Claim(members: Array(members.prefix(roomMembers + 1)), at: since ?? now)
        var total = claimBytes
        while total > Engine.maximumClaimBytes {
            guard
                let oldest = claims.flatMap({ room, byPeer in byPeer.map { (room: room, peer: $0.key, claim: $0.value) } })
                    .min(by: { ($0.claim.at, $0.room.rawValue, $0.peer.rawValue) < ($1.claim.at, $1.room.rawValue, $1.peer.rawValue) })
            else { break }
            total -= Engine.bytes(of: oldest.claim.members)
            claims[oldest.room]?[oldest.peer] = nil
            if claims[oldest.room]?.isEmpty == true { claims[oldest.room] = nil }
        }
        return true
    }

    /// What `member` claimed before it was a member, if anything (it goes: it counts now).
    mutating func takeClaim(_ member: RoomMember) -> Claim? { claims[member.room]?.removeValue(forKey: member.peer) }

    /// Claims `lifetime` old or older go: returned (by room, then peer), with when the next kept one expires.
    mutating func expireClaims(lifetime: Int64, at now: Int64) -> (expired: [RoomMember], next: Int64?) {
        var next: Int64?
        var expired: [RoomMember] = []
        for (room, byPeer) in claims.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            var kept: [PeerID: Claim] = [:]
            for (peer, claim) in byPeer.sorted(by: { $0.key < $1.key }) {
                if now - claim.at < lifetime {
                    kept[peer] = claim
                    next = min(next ?? .max, claim.at + lifetime)
                } else {
                    expired.append(RoomMember(room: room, peer: peer))
                }
            }
            claims[room] = kept.isEmpty ? nil : kept
        }
        return (expired, next)
    }

    /// What the kept claims hold, counted as `SessionStateMachine.bytes(of:)` does.
    var claimBytes: Int { claims.values.reduce(0) { $0 + $1.values.reduce(0) { $0 + Engine.bytes(of: $1.members) } } }

    var claimCount: Int { claims.values.reduce(0) { $0 + $1.count } }

    // MARK: Introductions

    /// `introducer` introduced `member`, whom we have not been connected with.
    mutating func introduced(_ member: RoomMember, by introducer: PeerID) { introducers[member] = introducer }

    /// `peer` was connected with us: who introduced it no longer matters.
    mutating func forgetIntroducer(of peer: PeerID) { introducers = introducers.filter { $0.key.peer != peer } }

    /// Whether `member` is only another member's word to us (introduced, not admitted by us).
    func isIntroduced(_ member: RoomMember) -> Bool { introducers[member] != nil }

    /// Whether no more introductions are remembered (`maximumIntroducers`).
    var introducersFull: Bool { introducers.count >= Self.maximumIntroducers }

    /// The members of `room` that `introducer` introduced to us and that `unseen` (not connected with us,
    /// still members), in order.
    func introduced(by introducer: PeerID, in room: RoomID, where unseen: (PeerID) -> Bool) -> [PeerID] {
        introducers.filter { $0.key.room == room && $0.value == introducer && unseen($0.key.peer) }.map(\.key.peer).sorted()
    }

    /// Whether `peer` is told (once per connection) that its introductions were refused; false if it was.
    mutating func firstRefusal(of peer: PeerID) -> Bool { refusedIntroductions.insert(peer).inserted }

    /// `peer`'s connection ended: the next one is told again.
    mutating func forgetRefusal(of peer: PeerID) { refusedIntroductions.remove(peer) }

    // MARK: Proofs and leaves

    /// Whether a proof `peer` sent is still checked (at most `maximumProofChecks` between two resyncs).
    func proofChecksLeft(for peer: PeerID) -> Bool { (proofChecks[peer] ?? 0) < Self.maximumProofChecks }

    /// A proof `peer` sent cost a check.
    mutating func proofChecked(from peer: PeerID) { proofChecks[peer, default: 0] += 1 }

    /// Our resync: every peer's proofs are checked again.
    mutating func resync() { proofChecks.removeAll() }

    // MARK: Lists heard

    /// A member's ROOM_MEMBERS (a page of its list): added to what it listed since our last resync.
    mutating func heard(_ members: [WireFrame.Member], in room: RoomID, from peer: PeerID) {
        heardLists[RoomMember(room: room, peer: peer), default: MemberListDigest()].add(members)
    }

    /// Whether `peer` listed, since our last resync, exactly the members and proofs of `ours` (so our
    /// list would tell it nothing).
    func heardAll(_ ours: MemberListDigest, in room: RoomID, from peer: PeerID) -> Bool {
        heardLists[RoomMember(room: room, peer: peer)] == ours
    }

    /// Our resync decided what to send: what members list from now on counts toward the next one.
    mutating func forgetHeardLists() { heardLists.removeAll() }

    /// `peer`'s connection ended: what it listed on it is forgotten.
    mutating func forgetHeardLists(of peer: PeerID) { heardLists = heardLists.filter { $0.key.peer != peer } }

    /// Our own proof for `room`, if we signed one.
    func ownProof(_ room: RoomID) -> WireFrame.MembershipProof? { ownProofs[room] }

    /// When a proof of ours for `room` signed now (`wall`) is dated: later than any leave of ours, so it
    /// outranks it.
    func proofTime(_ room: RoomID, now wall: Int64) -> UInt64 { max(UInt64(max(0, wall)), (ownLeaves[room] ?? 0) + 1) }

    mutating func signed(_ proof: WireFrame.MembershipProof, for room: RoomID) { ownProofs[room] = proof }

    /// We leave `room` now (`wall`): our proof goes, and the time of our leave (later than that proof) is
    /// kept and returned.
    mutating func leave(_ room: RoomID, now wall: Int64) -> UInt64 {
        let time = max(UInt64(max(0, wall)), (ownProofs[room]?.timestampMilliseconds ?? 0) + 1)
        ownProofs[room] = nil
        ownLeaves[room] = time
        return time
    }

    /// When `member` left by its signed leave, as far as we hold one.
    func leaveTime(_ member: RoomMember) -> UInt64? { signedLeaves[member] }

    /// Keeps `member`'s signed leave of `time` unless we hold one as new (false); past `keep` leaves held,
    /// the oldest goes.
    mutating func keepLeave(_ member: RoomMember, at time: UInt64, keep: Int) -> Bool {
        if let held = signedLeaves[member], held >= time { return false }
        if signedLeaves.count >= keep, signedLeaves[member] == nil,
            let oldest = signedLeaves.min(by: { ($0.value, $0.key.peer, $0.key.room.rawValue) < ($1.value, $1.key.peer, $1.key.room.rawValue) })
        {
            signedLeaves[oldest.key] = nil
        }
        signedLeaves[member] = time
        return true
    }

    // MARK: Consistency

    /// Rooms whose claims, introductions or departures are kept here (for the consistency check).
    var roomsKept: Set<RoomID> {
        Set(claims.keys).union(introducers.keys.map(\.room)).union(departed.map(\.room))
    }

    var tombstoneCount: Int { tombstones.count }
    var unansweredCount: Int { unanswered.count }
}

/// The members of a list, as a digest that does not depend on their order or pages: how many entries,
/// and the wrapping sum of a hash of each one's id, name and proof time (Swift's `Hasher`, seeded per
/// process: a peer cannot make two lists collide on purpose, and a list that only looks like ours
/// could only spare it our list). Addresses and ports are left out: each member lists its own view of
/// them, and only a member's own count (its own entry, in ROOM_MEMBERS on each connection).
struct MemberListDigest: Equatable, Sendable {
    private(set) var count = 0
    private var sum: UInt64 = 0

    mutating func add(_ members: [WireFrame.Member]) {
        for member in members {
            var hasher = Hasher()
            hasher.combine(member.peerID)
            hasher.combine(member.name)
            hasher.combine(member.proof?.timestampMilliseconds)
            sum &+= UInt64(bitPattern: Int64(hasher.finalize()))
            count += 1
        }
    }
}
