import LanchatCore

/// The outbox's own state (issue 29: a machine that owns its state; the rules are in `+Delivery`): our
/// numbering (the last sequence we used in each room, and the notices' counter); per recipient, the
/// reliable messages it has not acknowledged (their rooms and sequences; the store keeps the messages),
/// and how many resends since it last acknowledged one (the retransmit backoff). A recipient whose queue
/// empties, however it does, starts its backoff again.
///
/// What the store keeps of it (issue 33: acknowledgement marks, not a row per message and recipient):
/// each of our reliable messages is stored with whom it was queued for, and each recipient has a mark per
/// room, our sequence through which it holds everything queued for it there. A send writes no row per
/// recipient (it opens a mark where there is none, in its own commit); an acknowledgement moves a mark
/// to just below the oldest message still queued for that recipient in that room (or to our last
/// sequence there, when none is). Rows of one message each remain for what an older lanchatd queued and
/// for what is kept for a recipient that left while its queue stayed (`pin`): those are acknowledged row
/// by row.
struct Outbox: Sendable {
    /// The last sequence we used in each room (rooms we left included), restored from the store.
    private var lastSequences: [RoomID: UInt64]
    /// The last sequence a notice took (`SessionStateMachine.notice`): notices made in the same
    /// millisecond keep their order in history.
    private var notices: Int64 = 0
    private var queues: [PeerID: [WireID: Queued]] = [:]
    /// Per recipient and room, the messages a mark queues, in the order of their sequences (those
    /// acknowledged are passed over when the mark moves, not removed one by one).
    private var runs: [PeerID: [RoomID: Run]] = [:]
    /// Per recipient and room, the mark as this run last wrote or read it.
    private var marks: [PeerID: [RoomID: UInt64]] = [:]
    private var unanswered: [PeerID: Int] = [:]

    /// One message queued for one recipient: queued by its mark, by a row of its own, or both.
    struct Queued: Sendable {
        var room: RoomID
        var sequence: UInt64
        var marked: Bool
        var row: Bool
    }

    /// A recipient's marked messages in one room, by sequence; `head` the first that may still be queued,
    /// `last` the highest sequence queued.
    struct Run: Sendable {
        var entries: [(sequence: UInt64, id: WireID)] = []
        var head = 0
        var last: UInt64 = 0

        mutating func append(_ sequence: UInt64, _ id: WireID) {
            entries.append((sequence, id))
            last = max(last, sequence)
        }
    }

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

    /// The rooms of what `peer` has not acknowledged (nil: nothing).
    func queuedRooms(for peer: PeerID) -> Set<RoomID>? { queues[peer].map { Set($0.values.map(\.room)) } }

    /// The ids `peer` has not acknowledged.
    func queuedIDs(for peer: PeerID) -> [WireID] { queues[peer].map { Array($0.keys) } ?? [] }

    /// Recipients with something queued.
    var recipients: [PeerID] { Array(queues.keys) }

    /// Messages queued, per recipient with any.
    var counts: [PeerID: Int] { queues.filter { !$0.value.isEmpty }.mapValues(\.count) }

    var total: Int { queues.values.reduce(0) { $0 + $1.count } }

    /// Queues our messages (`messages`: ids and sequences, in order) in `room` for `peer`, by its mark.
    /// Returns where the send sets the mark in its own commit (`StoreOperation.openMark`): just below the
    /// oldest message still queued for `peer` there. Every send sets it, not only the first: a send whose
    /// commit failed may have taken the mark's opening with it while later sends committed, and a mark the
    /// store kept that this run does not know of (a member's removal that failed to commit) must not
    /// queue for `peer` what was sent while it was not a recipient. (In the store the write is a seek
    /// when the mark is already there.)
    /// Nil: no messages (nothing is queued, and the mark is not touched: set below nothing queued, it
    /// would queue for `peer` every message of ours in the room).
    mutating func queue(_ messages: [(id: WireID, sequence: UInt64)], in room: RoomID, for peer: PeerID) -> UInt64? {
        guard let first = messages.first else { return nil }
        for (id, sequence) in messages {
            queues[peer, default: [:]][id] = Queued(room: room, sequence: sequence, marked: true, row: false)
            runs[peer, default: [:]][room, default: Run()].append(sequence, id)
        }
        let mark = passAcknowledged(peer, in: room) ?? first.sequence - 1
        marks[peer, default: [:]][room] = mark
        return mark
    }

    /// A mark the store held at the start.
    mutating func restore(mark: UInt64, for peer: PeerID, in room: RoomID) { marks[peer, default: [:]][room] = mark }

    /// A message the store held queued at the start (in the order sent).
    mutating func restore(_ entry: SessionStateMachine.QueuedMessage) {
        var queued = queues[entry.peer]?[entry.message] ?? Queued(room: entry.room, sequence: entry.sequence, marked: false, row: false)
        if entry.marked, !queued.marked {
            queued.marked = true
            runs[entry.peer, default: [:]][entry.room, default: Run()].append(entry.sequence, entry.message)
        }
        if !entry.marked { queued.row = true }
        queues[entry.peer, default: [:]][entry.message] = queued
    }

    /// What `peer` acknowledging `ids` changes in the store: the rows to delete (those of rows, and ids
    /// this run does not track: deleting what is not there costs nothing), and the marks that move.
    struct Acknowledged {
        var emptied = false
        var rows: [WireID] = []
        var marks: [(room: RoomID, acked: UInt64)] = []
    }

    /// `peer` acknowledged `ids`: if it acknowledged one we queued, its backoff starts again.
    mutating func acknowledged(_ ids: [WireID], by peer: PeerID) -> Acknowledged {
        var result = Acknowledged()
        guard queues[peer] != nil else {
            result.rows = ids
            return result
        }
        var moved: Set<RoomID> = []
        var any = false
        // In place: a copy of a large outbox per ACK frame made the message path quadratic.
        for id in ids {
            guard let queued = queues[peer]?.removeValue(forKey: id) else {
                result.rows.append(id)
                continue
            }
            any = true
            if queued.row { result.rows.append(id) }
            if queued.marked { moved.insert(queued.room) }
        }
        if any { unanswered[peer] = nil }
        for room in moved.sorted(by: { $0.rawValue < $1.rawValue }) {
            guard let acked = passAcknowledged(peer, in: room), acked > marks[peer]?[room] ?? 0 else { continue }
            marks[peer, default: [:]][room] = acked
            result.marks.append((room, acked))
        }
        result.emptied = emptied(peer)
        return result
    }

    /// Moves `peer`'s run in `room` past what it acknowledged; returns where its mark goes: just below the
    /// first message still queued, or the highest one queued if none is (not our last sequence in the
    /// room: sequences a failed commit took may be used again after a restart). Nil: no run.
    private mutating func passAcknowledged(_ peer: PeerID, in room: RoomID) -> UInt64? {
        guard var run = runs[peer]?[room] else { return nil }
        runs[peer]?[room] = nil  // (changed in place, not copied)
        while run.head < run.entries.count {
            let id = run.entries[run.head].id
            if let queued = queues[peer]?[id], queued.marked, queued.room == room { break }
            run.head += 1
        }
        if run.head == run.entries.count {
            runs[peer]?[room] = Run(last: run.last)
            return run.last
        }
        if run.head > 64, run.head * 2 > run.entries.count {
            run.entries.removeFirst(run.head)
            run.head = 0
        }
        let first = run.entries[run.head].sequence
        runs[peer]?[room] = run
        return first - 1
    }

    /// Takes `ids` out of `peer`'s queue (their commit failed: nothing of them is in the store, and the
    /// mark the commit may have opened not either: the next send opens it again, below what is still
    /// queued). Returns whether the queue emptied (it had some).
    mutating func remove(_ ids: [WireID], in room: RoomID, for peer: PeerID) -> Bool {
        marks[peer]?[room] = nil
        guard queues[peer] != nil else { return false }
        for id in ids { queues[peer]?.removeValue(forKey: id) }
        return emptied(peer)
    }

    /// Takes what is queued in `room` out of `peer`'s queue (nil: every recipient's), marks and all.
    /// Returns the recipients whose queue emptied.
    mutating func drop(_ room: RoomID, for peer: PeerID?) -> [PeerID] {
        var emptied: [PeerID] = []
        for recipient in peer.map({ [$0] }) ?? Array(Set(recipients).union(marks.keys)) {
            runs[recipient]?[room] = nil
            marks[recipient]?[room] = nil
            guard let queued = queues[recipient] else { continue }
            queues[recipient] = queued.filter { $0.value.room != room }
            if self.emptied(recipient) { emptied.append(recipient) }
        }
        return emptied
    }

    /// `peer` left `room` and what was queued for it there stays queued (`SessionStore.pinOutbox`): each
    /// message a row of its own, and its mark gone, so that what we send after does not join it.
    mutating func pin(_ room: RoomID, for peer: PeerID) {
        runs[peer]?[room] = nil
        marks[peer]?[room] = nil
        guard var queued = queues[peer] else { return }
        queues[peer] = nil  // (changed in place, not copied)
        for (id, entry) in queued where entry.room == room && entry.marked {
            queued[id]?.marked = false
            queued[id]?.row = true
        }
        queues[peer] = queued
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
        runs[peer] = nil
        unanswered[peer] = nil
        return true
    }
}
