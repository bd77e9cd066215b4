import LanchatCore

/// Histories' own state both ways (issue 29: a machine that owns its state; the rules are in
/// `+Membership` for a newcomer's history and `+Relay` for relay): the door each room we join keeps open
/// for its inviter's history, the newcomers that may ask us for a room's history once, the SYNC_REQUESTs
/// we sent (each answer taken once), the answers we gave since the last resync, and the incoming
/// histories that answer ours. Only its methods change it: a door closes when its history is taken or
/// ends, or the room is left, and nothing else opens one. `TransferTable` keeps it: a history goes as a
/// resource.
struct HistoryExchange: Sendable {
    typealias RoomMember = SessionStateMachine.RoomMember
    typealias HistoryDoor = SessionStateMachine.HistoryDoor
    typealias HistorySource = SessionStateMachine.HistorySource

    /// The history each room's inviter may send us while we join, by room.
    private(set) var doors: [RoomID: HistoryDoor] = [:]
    /// Newcomers we invited that may ask us for the room's history once, oldest first.
    private var owed: [RoomMember] = []
    /// SYNC_REQUESTs we sent whose answer is taken (once), per connection.
    private var asked: Set<RoomMember> = []
    /// Answers we gave per member and room since our last resync.
    private var served: [RoomMember: Int] = [:]
    /// Incoming histories that answer a SYNC_REQUEST of ours (relay), not a newcomer's request.
    private(set) var relayTransfers: Set<WireID> = []

    // MARK: Ours, as a newcomer

    /// We join `room` and ask `peer` (our inviter) for its history, taken until `until` (monotonic ms).
    mutating func open(_ room: RoomID, for peer: PeerID, until: Int64) { doors[room] = HistoryDoor(peer: peer, until: until) }

    /// The room's history arrived, failed, or we left the room: nothing more is taken for it.
    mutating func close(_ room: RoomID) { doors[room] = nil }

    /// Whether a history `peer` offers for `room` is taken, and as what (`SessionStateMachine.takeHistory`):
    /// through the room's door if it was opened for `peer` (closing it, however it answers), while it is
    /// open and `peer` is a member (`isMember`); else a signed answer to our SYNC_REQUEST to `peer`.
    mutating func take(_ room: RoomID, from peer: PeerID, authenticated: Bool, isMember: Bool, at now: Int64) -> HistorySource? {
        if let door = doors[room], door.peer == peer {
            doors[room] = nil
            if now <= door.until, isMember { return .inviter }
        }
        guard authenticated, takeAnswer(room, from: peer) else { return nil }
        return .relay
    }

    // MARK: Theirs, as an inviter

    /// `newcomer` may ask us for the room's history once (at most `keep` newcomers at a time).
    mutating func owe(_ newcomer: RoomMember, keep: Int) {
        if !owed.contains(newcomer) { owed.append(newcomer) }
        if owed.count > keep { owed.removeFirst() }
    }

    /// `member` asks for the room's history: whether it is owed (and no longer).
    mutating func takeOwed(_ member: RoomMember) -> Bool {
        guard let index = owed.firstIndex(of: member) else { return false }
        owed.remove(at: index)
        return true
    }

    /// Newcomers no longer owed (a member gone, a room left).
    mutating func forgetOwed(where gone: (RoomMember) -> Bool) { owed.removeAll(where: gone) }

    // MARK: Relay

    mutating func asked(_ member: RoomMember) { asked.insert(member) }

    /// Whether a history from `peer` for `room` answers our SYNC_REQUEST (taken once).
    mutating func takeAnswer(_ room: RoomID, from peer: PeerID) -> Bool {
        asked.remove(RoomMember(room: room, peer: peer)) != nil
    }

    /// A connection ended: what was asked on it is forgotten.
    mutating func forgetAsked(_ peer: PeerID) { asked = asked.filter { $0.peer != peer } }

    var askedNothing: Bool { asked.isEmpty }

    /// Whether `asker` may get one more answer before our next resync (`maximum` per member and room).
    func mayAnswer(_ asker: RoomMember, maximum: Int) -> Bool { served[asker, default: 0] < maximum }

    mutating func answered(_ asker: RoomMember) { served[asker, default: 0] += 1 }

    /// Our resync: every member may be answered again.
    mutating func resync() { served.removeAll() }

    mutating func relayTransferStarted(_ id: WireID) { relayTransfers.insert(id) }

    /// A history transfer ended: whether it answered a SYNC_REQUEST of ours.
    mutating func transferEnded(_ id: WireID) -> Bool { relayTransfers.remove(id) != nil }
}
