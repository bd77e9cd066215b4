import LanchatCore
import LanchatWire

/// Presence (issue 13, item 1): each member's availability (available, away, busy) with an optional
/// line of text, and a hand it raises or lowers per room. Ours goes (PRESENCE, 0x08) to every connected
/// peer we share a room with, when it changes and when a connection comes up, so a member that reconnects
/// or joins learns everyone's current state; each peer's hands are only those of rooms we share. A peer's
/// presence is its own word (the connection proved who it is), kept while we share a room with it.
/// With `autoAway`, we turn away after that long without a person's command (`personActive`) and back
/// to available at the next one.
extension SessionStateMachine {
    public struct PresenceState: Equatable, Sendable {
        public var availability: WireFrame.Presence.Availability
        public var text: String
        public var hands: Set<RoomID>

        public init(availability: WireFrame.Presence.Availability = .available, text: String = "", hands: Set<RoomID> = []) {
            self.availability = availability
            self.text = text
            self.hands = hands
        }
    }

    /// Our availability and text, and the rooms where our hand is up.
    public var presence: PresenceState { presenceState.own }

    /// A peer's presence as it last told us (nil: not told, or an older lanchat).
    public func presence(of peer: PeerID) -> PresenceState? { presenceState.of(peer) }

    /// Whether `peer`'s hand is up in `room`.
    public func handRaised(_ peer: PeerID, in room: RoomID) -> Bool {
        (peer == configuration.ownID ? presenceState.own : presenceState.of(peer))?.hands.contains(room) == true
    }

    /// Sets our availability and text (one line, at most 128 bytes: control characters become spaces).
    public mutating func setStatus(_ availability: WireFrame.Presence.Availability, text: String, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        presenceState.set(availability, text: Self.statusLine(text), at: now.monotonic)
        scheduleAutoAway()
        announcePresence(&out)
        return out
    }

    /// Raises or lowers our hand in `room`.
    public mutating func setHand(_ up: Bool, in room: RoomID, at now: EngineTime) throws(SessionError) -> [SessionAction] {
        guard rooms[room] != nil else { throw SessionError(.unknownRoom, "you are not in room '\(room)'") }
        var out: [SessionAction] = []
        presenceState.setHand(up, in: room)
        out.append(contentsOf: personActive(at: now))
        announcePresence(only: room, &out)
        return out
    }

    /// A person used the daemon (sent, invited, answered, set a status): with auto-away, the idle clock
    /// starts again, and if it had turned us away we are available again.
    public mutating func personActive(at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        if presenceState.personActive(at: now.monotonic) { announcePresence(&out) }
        scheduleAutoAway()
        return out
    }

    mutating func scheduleAutoAway() {
        guard let idle = configuration.autoAway, let deadline = presenceState.autoAwayDeadline(idle: idle) else {
            timers.cancel(.autoAway)
            return
        }
        timers.schedule(.autoAway, at: deadline)
    }

    /// The idle timer fired: away, if we still are available and idle.
    mutating func idleTimerFired(at now: EngineTime, _ out: inout [SessionAction]) {
        guard let idle = configuration.autoAway else { return }
        switch presenceState.idleTimerFired(idle: idle, at: now.monotonic) {
        case .nothing: break
        case .notYet: scheduleAutoAway()
        case .turnedAway: announcePresence(&out)
        }
    }

    /// What we tell `peer` of our presence: its hands only in rooms it shares with us.
    func presenceFrame(for peer: PeerID) -> WireFrame {
        let own = presenceState.own
        let hands = own.hands.filter { rooms[$0]?.members[peer] != nil }.sorted { $0.rawValue < $1.rawValue }
        return .presence(.init(availability: own.availability, text: own.text, hands: Array(hands.prefix(WireFrame.Presence.maximumHands))))
    }

    /// Sends our presence to every connected peer sharing a room with us (`only`: members of that room).
    mutating func announcePresence(only room: RoomID? = nil, _ out: inout [SessionAction]) {
        for peer in links.peers.sorted() where room.map({ rooms[$0]?.members[peer] != nil }) ?? sharesRoom(with: peer) {
            if let handle = links.handle(peer) { out.append(.send(handle, [presenceFrame(for: peer)])) }
        }
    }

    /// A peer's PRESENCE: kept if it shares a room with us (hands only in rooms we share), reported when it changed.
    mutating func received(_ presence: WireFrame.Presence, from link: LinkTable.Entry, _ out: inout [SessionAction]) {
        guard sharesRoom(with: link.peer.id) else { return }
        let state = PresenceState(
            availability: presence.availability, text: Self.statusLine(presence.text),
            hands: Set(presence.hands.filter { rooms[$0]?.members[link.peer.id] != nil }))
        guard let before = presenceState.told(state, by: link.peer.id) else { return }
        out.append(.emit(.presence(peer: link.peer, state: state, before: before)))
    }

    /// Typing (issue 13, item 7): we tell a room's connected members at most once every 3 s (it means
    /// "for the next 5 s"), unreliably; a member's TYPING is reported at most once a second.
    public static let typingInterval: Int64 = 3_000

    public mutating func typing(in room: RoomID, at now: EngineTime) throws(SessionError) -> [SessionAction] {
        guard rooms[room] != nil else { throw SessionError(.unknownRoom, "you are not in room '\(room)'") }
        guard presenceState.typing(in: room, interval: Self.typingInterval, at: now.monotonic) else { return [] }
        var out: [SessionAction] = []
        for member in (rooms[room]?.members.keys.sorted() ?? []) {
            if let handle = links.handle(member) { out.append(.sendUnreliable(handle, [.typing(room)])) }
        }
        return out
    }

    mutating func heardTyping(in room: RoomID, from link: LinkTable.Entry, at now: EngineTime, _ out: inout [SessionAction]) {
        guard rooms[room]?.members[link.peer.id] != nil else { return }
        guard presenceState.heardTyping(RoomMember(room: room, peer: link.peer.id), at: now.monotonic) else { return }
        out.append(.emit(.typing(room: room, peer: link.peer)))
    }

    /// Presence of peers we no longer share a room with is forgotten.
    mutating func forgetPresences() {
        let machine = self
        presenceState.keep(
            rooms: { machine.rooms[$0] != nil }, members: { machine.rooms[$0.room]?.members[$0.peer] != nil },
            peers: { machine.sharesRoom(with: $0) })
    }

    static func statusLine(_ text: String) -> String {
        var line = String(String.UnicodeScalarView(text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? " " : $0 }))
        while line.utf8.count > WireFrame.Presence.maximumText { line.removeLast() }
        return line
    }
}
