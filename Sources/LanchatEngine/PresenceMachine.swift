import LanchatCore
import LanchatWire

/// Presence's and typing's own state (issue 29: a machine that owns its state; the rules are in
/// `+Presence`): ours, whether auto-away set it, when a person last acted, each peer's as it told us,
/// when we last told each room we type and when we last reported each member typing. What it needs of
/// the rest of the engine (rooms, members) is passed in.
struct PresenceMachine: Sendable, Equatable {
    typealias PresenceState = SessionStateMachine.PresenceState
    typealias RoomMember = SessionStateMachine.RoomMember

    /// Ours.
    private(set) var own = PresenceState()
    /// Auto-away set `own` (a person's next command sets it back).
    private var autoAway = false
    /// When a person last acted (monotonic milliseconds).
    private var lastActivity: Int64 = 0
    private var peers: [PeerID: PresenceState] = [:]
    private var typingTold: [RoomID: Int64] = [:]
    private var typingHeard: [RoomMember: Int64] = [:]

    /// A peer's presence as it last told us.
    func of(_ peer: PeerID) -> PresenceState? { peers[peer] }

    /// A person set our availability and text.
    mutating func set(_ availability: WireFrame.Presence.Availability, text: String, at now: Int64) {
        autoAway = false
        own.availability = availability
        own.text = text
        lastActivity = now
    }

    mutating func setHand(_ up: Bool, in room: RoomID) {
        if up { own.hands.insert(room) } else { own.hands.remove(room) }
    }

    /// A person acted. Returns whether that ends an auto-away (we are available again: tell the peers).
    mutating func personActive(at now: Int64) -> Bool {
        lastActivity = now
        guard autoAway else { return false }
        autoAway = false
        own.availability = .available
        own.text = ""
        return true
    }

    /// When auto-away (after `idle`) would turn us away; nil: it would not (we are not available).
    func autoAwayDeadline(idle: Int64) -> Int64? {
        own.availability == .available ? lastActivity + idle : nil
    }

    /// What the idle timer finds.
    enum IdleCheck: Equatable {
        /// Nothing to do (not available).
        case nothing
        /// A person acted since: not yet.
        case notYet
        /// Turned away: tell the peers.
        case turnedAway
    }

    mutating func idleTimerFired(idle: Int64, at now: Int64) -> IdleCheck {
        guard own.availability == .available else { return .nothing }
        guard now - lastActivity >= idle else { return .notYet }
        autoAway = true
        own.availability = .away
        own.text = "idle"
        return .turnedAway
    }

    /// A peer's presence. Returns what it was before if it changed (`.some(nil)`: it had told nothing), nil if not.
    mutating func told(_ state: PresenceState, by peer: PeerID) -> PresenceState?? {
        guard peers[peer] != state else { return nil }
        let before = peers[peer]
        peers[peer] = state
        return .some(before)
    }

    /// Whether to tell `room` we type now (at most once every `interval`).
    mutating func typing(in room: RoomID, interval: Int64, at now: Int64) -> Bool {
        if let told = typingTold[room], now - told < interval { return false }
        typingTold[room] = now
        return true
    }

    /// Whether to report `member` typing now (at most once a second).
    mutating func heardTyping(_ member: RoomMember, at now: Int64) -> Bool {
        if let heard = typingHeard[member], now - heard < 1_000 { return false }
        typingHeard[member] = now
        return true
    }

    /// Keeps only what concerns rooms we are in (`inRoom`), their members (`isMember`) and peers we
    /// share a room with (`sharesRoom`).
    mutating func keep(rooms inRoom: (RoomID) -> Bool, members isMember: (RoomMember) -> Bool, peers sharesRoom: (PeerID) -> Bool) {
        typingHeard = typingHeard.filter { isMember($0.key) }
        typingTold = typingTold.filter { inRoom($0.key) }
        peers = peers.filter { sharesRoom($0.key) }
        own.hands = own.hands.filter(inRoom)
    }

    /// Rooms whose state is kept here (for the consistency check).
    var rooms: Set<RoomID> { own.hands.union(typingTold.keys).union(typingHeard.keys.map(\.room)) }
}
