import LanchatCore

/// The outbox's own state (issue 29: a machine that owns its state; the rules are in `+Delivery`): our
/// numbering (the last sequence we used in each room, and the notices' counter); per recipient, the
/// reliable messages it has not acknowledged (their ids and rooms; the store keeps the messages), and
/// how many resends since it last acknowledged one (the retransmit backoff). A recipient whose queue
/// empties, however it does, starts its backoff again.
struct Outbox: Sendable {
    /// The last sequence we used in each room (rooms we left included), restored from the store.
    private var lastSequences: [RoomID: UInt64]
    /// The last sequence a notice took (`SessionStateMachine.notice`): notices made in the same
    /// millisecond keep their order in history.
    private var notices: Int64 = 0
    private var queues: [PeerID: [WireID: RoomID]] = [:]
    private var unanswered: [PeerID: Int] = [:]

    init(lastSequences: [RoomID: UInt64] = [:]) { self.lastSequences = lastSequences }

    /// The sequence of our next message in `room` (taken: it is never used again).
    mutating func nextSequence(in room: RoomID) -> UInt64 {
        let sequence = (lastSequences[room] ?? 0) + 1
        lastSequences[room] = sequence
        return sequence
    }

    /// The sequence of our next notice (taken).
    mutating func nextNoticeSequence() -> Int64 {
        notices += 1
        return notices
    }

    /// What `peer` has not acknowledged (nil: nothing).
    func queued(for peer: PeerID) -> [WireID: RoomID]? { queues[peer] }

    /// Recipients with something queued.
    var recipients: [PeerID] { Array(queues.keys) }

    /// Messages queued, per recipient with any.
    var counts: [PeerID: Int] { queues.filter { !$0.value.isEmpty }.mapValues(\.count) }

    var total: Int { queues.values.reduce(0) { $0 + $1.count } }

    mutating func queue(_ ids: [WireID], in room: RoomID, for peer: PeerID) {
        for id in ids { queues[peer, default: [:]][id] = room }
    }

    /// `peer` acknowledged `ids`: if it acknowledged one we queued, its backoff starts again. Returns
    /// whether its queue emptied.
    mutating func acknowledged(_ ids: [WireID], by peer: PeerID) -> Bool {
        if let queued = queues[peer], ids.contains(where: { queued[$0] != nil }) { unanswered[peer] = nil }
        return remove(ids, for: peer)
    }

    /// Takes `ids` out of `peer`'s queue. Returns whether it emptied (it had some).
    mutating func remove(_ ids: [WireID], for peer: PeerID) -> Bool {
        guard queues[peer] != nil else { return false }
        // In place: a copy of a large outbox per ACK frame made the message path quadratic.
        for id in ids { queues[peer]?.removeValue(forKey: id) }
        return emptied(peer)
    }

    /// Takes what is queued in `room` out of `peer`'s queue (nil: every recipient's). Returns the
    /// recipients whose queue emptied.
    mutating func drop(_ room: RoomID, for peer: PeerID?) -> [PeerID] {
        var emptied: [PeerID] = []
        for recipient in peer.map({ [$0] }) ?? recipients {
            guard let queued = queues[recipient] else { continue }
            queues[recipient] = queued.filter { $0.value != room }
            if self.emptied(recipient) { emptied.append(recipient) }
        }
        return emptied
    }

    /// A resend to `peer` (with something queued): one more unanswered.
    mutating func resending(to peer: PeerID) {
        if queues[peer]?.isEmpty == false { unanswered[peer, default: 0] += 1 }
    }

    /// Resends to `peer` since it last acknowledged one.
    func unanswered(_ peer: PeerID) -> Int { unanswered[peer] ?? 0 }

    private mutating func emptied(_ peer: PeerID) -> Bool {
        guard queues[peer]?.isEmpty == true else { return false }
        queues[peer] = nil
        unanswered[peer] = nil
        return true
    }
}
