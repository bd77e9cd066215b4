import LanchatCore
import LanchatWire

/// Relay for absent members (wire version 2). Because a signed message verifies on its own, any member
/// may hand it on: whenever two members of a room connect, each tells the other what it holds of the
/// room (SYNC_REQUEST: the highest sequence from each author), and each answers with a signed history of
/// what the other lacks, which the receiver checks record by record (`verdict`) as it checks a
/// newcomer's history. So a message reaches a member that was offline when its author was online, through
/// any member that has it, and is stored once (ids de-duplicate). Only what was written while the asker
/// was a member (`relayFloor`): what came before is the history its inviter sent, in the scope the
/// newcomer chose.
extension SessionStateMachine {
    /// On a new version 2 connection with a member: ask it what we lack of each room we share (and again
    /// at every resync, `resyncInterval`: a message that reached it while we were both connected comes too).
    mutating func askForWhatWeLack(from entry: LinkTable.Entry, _ out: inout [SessionAction]) {
        for (room, state) in rooms.sorted(by: { $0.key.rawValue < $1.key.rawValue }) where state.members[entry.peer.id] != nil {
            askForWhatWeLack(in: room, from: entry, &out)
        }
    }

    mutating func askForWhatWeLack(in room: RoomID, from entry: LinkTable.Entry, _ out: inout [SessionAction]) {
        guard entry.version >= 2, configuration.envelopes != nil else { return }
        transfers.histories.asked(RoomMember(room: room, peer: entry.peer.id))
        out.append(.requestSync(room, entry.handle))
    }

    /// Answers per room and member between two of our resyncs: one for its connection, one for its
    /// resync, one to spare (a peer that reconnects in a loop, or floods requests, gets no more: each
    /// answer costs an export).
    static let maximumSyncAnswers = 3

    /// A member asks what it lacks: answered at most `maximumSyncAnswers` times per room between two
    /// resyncs, one answer at a time per room (none while our previous answer to it for that room is still
    /// being written, offered or sent: `TransferTable.relayAnswerOutstanding`), and only within the
    /// outgoing caps (`TransferLimits.maximumOutgoingPerPeer`, `maximumOutgoing`). A request past any of
    /// these is not answered (the member asks again at its next resync). Each answer is an export (an
    /// unlinked file, a descriptor) until it ends: accepted and sent, refused, or not accepted within
    /// `TransferLimits.offerTimeout`.
    mutating func received(_ request: WireFrame.SyncRequest, from entry: LinkTable.Entry, at now: EngineTime, _ out: inout [SessionAction]) {
        let asker = RoomMember(room: request.room, peer: entry.peer.id)
        guard entry.version >= 2, rooms[request.room]?.members[entry.peer.id] != nil,
            transfers.histories.mayAnswer(asker, maximum: Self.maximumSyncAnswers)
        else { return }
        let preparation = transfers.limits.relayAnswerPreparation
        transfers.expireRelayPreparing(at: now.monotonic)
        guard !transfers.relayAnswerOutstanding(request.room, to: entry.peer.id),
            transfers.outgoingRefusal(to: entry.peer.id, name: entry.peer.name) == nil
        else { return }
        transfers.histories.answered(asker)
        transfers.relayPreparing[.init(room: request.room, peer: entry.peer.id)] = now.monotonic
        timers.scheduleNoLaterThan(.outgoingTransfers, at: now.monotonic + preparation)
        var marks: [String: [ClosedRange<UInt64>]] = [:]
        for mark in request.marks { marks[mark.author, default: []].append(mark.first...mark.last) }
        out.append(.sendSync(request.room, sinceMilliseconds: Int64(clamping: request.sinceMilliseconds), marks: marks, to: entry.peer))
    }

    /// The shell made no offer for a `SessionAction.sendSync` (nothing lacking, or the export failed): the
    /// member's next SYNC_REQUEST for `room` may be answered. (An answer it offers, `offerResource` with
    /// `relayAnswer`, stays outstanding until that transfer ends.)
    public mutating func relayAnswerNotOffered(_ room: RoomID, to peer: PeerID) {
        transfers.relayPreparing[.init(room: room, peer: peer)] = nil
        releaseOutgoingTimer()
    }

    /// Whether an incoming history transfer answers a SYNC_REQUEST (relay), not a newcomer's HISTORY_REQUEST.
    public func isRelayTransfer(_ id: WireID) -> Bool { transfers.histories.relayTransfers.contains(id) }

    /// Whether a history offered for `room` answers our SYNC_REQUEST to `peer` (taken once).
    public mutating func takeSyncAnswer(_ room: RoomID, from peer: PeerID) -> Bool {
        transfers.histories.takeAnswer(room, from: peer)
    }

    /// A connection ended: what was asked on it is forgotten (the next one asks again). What we answered
    /// stays until the next resync: a peer that reconnects in a loop gets no more answers.
    mutating func forgetSync(with peer: PeerID) {
        transfers.histories.forgetAsked(peer)
        transfers.relayPreparing = transfers.relayPreparing.filter { $0.key.peer != peer }
        releaseOutgoingTimer()
        links.trust.connectionEnded(peer)
        membership.forgetRefusal(of: peer)
        membership.forgetHeardLists(of: peer)
    }

    /// A history transfer ended (any way): a newcomer's history frees the room for the next; a relay
    /// answer only itself.
    mutating func historyTransferEnded(_ id: WireID, room: RoomID) {
        if !transfers.histories.transferEnded(id) { historyEnded(room) }
    }

    /// The newest of `messages` (oldest first) whose signed history fits in `limit` bytes (what the asker
    /// takes at most: the rest goes with its next requests), oldest first. In a sealed history (`sealed`)
    /// each record has a tag, and a sealed one its longest proof and its seal's head as well; so has one
    /// of ours (`ownID`) with neither signature nor seal, which such a history seals (`HistoryEncoder`).
    public static func withinRelayLimit(_ messages: [StoredMessage], limit: UInt64, sealed: Bool = false, ownID: PeerID? = nil) -> [StoredMessage] {
        var total: UInt64 = 0
        var start = messages.endIndex
        while start > messages.startIndex {
            let message = messages[start - 1]
            // A record: the fixed fields, the sender's id and name, the body, the key and the signature.
            let sealedHere = message.isSealed || (message.senderID == ownID?.rawValue && !message.isSigned)
            let entry = sealed ? 1 + (sealedHere ? SealHead.length + SealProof.maximumLength : 0) : 0
            let size = UInt64(HistoryRecord.fixedLength + entry + message.senderName.utf8.count + message.body.utf8.count)
            guard total + size <= limit else { break }
            total += size
            start -= 1
        }
        return Array(messages[start...])
    }

    /// The runs of sequences held from each author, from the (author, sequence) pairs of a room's recent
    /// messages, for a SYNC_REQUEST: at most `SyncRequest.maximumMarks` runs (the latest ones, if there
    /// are more: what is left out is at worst sent again, and ids de-duplicate).
    public static func syncMarks(_ held: [(author: String, sequence: Int64)]) -> [WireFrame.SyncRequest.Mark] {
        syncMarks(runs: syncRuns(held))
    }

    /// The runs of consecutive sequences of each author among `held` (negative sequences left out).
    public static func syncRuns(_ held: [(author: String, sequence: Int64)]) -> [String: [ClosedRange<UInt64>]] {
        var byAuthor: [String: [UInt64]] = [:]
        for (author, sequence) in held where sequence >= 0 { byAuthor[author, default: []].append(UInt64(sequence)) }
        var runs: [String: [ClosedRange<UInt64>]] = [:]
        for (author, sequences) in byAuthor {
            var run: ClosedRange<UInt64>?
            for sequence in Set(sequences).sorted() {
                if let current = run, sequence == current.upperBound + 1 {
                    run = current.lowerBound...sequence
                } else {
                    if let current = run { runs[author, default: []].append(current) }
                    run = sequence...sequence
                }
            }
            if let run { runs[author, default: []].append(run) }
        }
        return runs
    }

    /// `syncRuns` as a SYNC_REQUEST's marks: by author, then sequence; at most `maximumMarks`, the newest.
    public static func syncMarks(runs: [String: [ClosedRange<UInt64>]]) -> [WireFrame.SyncRequest.Mark] {
        var marks: [WireFrame.SyncRequest.Mark] = []
        for (author, ranges) in runs.sorted(by: { $0.key < $1.key }) {
            for range in ranges { marks.append(.init(author: author, first: range.lowerBound, last: range.upperBound)) }
        }
        guard marks.count > WireFrame.SyncRequest.maximumMarks else { return marks }
        return Array(marks.sorted { ($0.last, $0.author) > ($1.last, $1.author) }.prefix(WireFrame.SyncRequest.maximumMarks))
    }

    /// Whether every run of `ours` lies within the asker's `marks` (runs by author, as a SYNC_REQUEST gives
    /// them): then no message we hold among those runs is lacking there, and a relay answer would be empty.
    public static func covered(_ ours: [String: [ClosedRange<UInt64>]], by marks: [String: [ClosedRange<UInt64>]]) -> Bool {
        for (author, runs) in ours {
            // The asker's ranges merged (sorted, overlapping or adjacent joined): a run is covered when one holds it.
            var merged: [ClosedRange<UInt64>] = []
            for range in (marks[author] ?? []).sorted(by: { $0.lowerBound < $1.lowerBound }) {
                if let last = merged.last, last.upperBound == .max || range.lowerBound <= last.upperBound + 1 {
                    merged[merged.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
                } else {
                    merged.append(range)
                }
            }
            for run in runs where !merged.contains(where: { $0.lowerBound <= run.lowerBound && run.upperBound <= $0.upperBound }) {
                return false
            }
        }
        return true
    }

    /// How recently (ms, by our clock) a message must have been stored for a relay answer to leave it to
    /// its connected author (`lacking`).
    public static let relayGrace: Int64 = 5_000

    /// The `since_ms` of our SYNC_REQUEST: when we joined the room (by our clock; now if we do not know).
    /// Relay brings what was written while we were a member; what came before is our inviter's history,
    /// in the scope we chose (a margin for clocks would hand on what we chose not to get).
    public static func relayFloor(joinedAt: Int64?, now: Int64) -> UInt64 {
        UInt64(max(0, joinedAt ?? now))
    }

    /// Which of a member's messages a SYNC_REQUEST lacks: of `messages` (the room's latest, oldest
    /// first), those by authors other than `requester` who are members of the room (`members`, or us:
    /// the requester keeps no one else's), signed, or sealed for a requester that reads seals (`sealed`;
    /// an unsigned one would be refused unless it is the relay's own) and not direct, whose sequence is in none of the runs the requester holds from their
    /// author. (The requester looks at twice as many recent messages as are sent, so what it left out is
    /// older than what is sent, or at worst sent again: ids de-duplicate.)
    ///
    /// Left out as well: our own messages in `queued` (our outbox for the requester: they go to it
    /// anyway), and messages in `recent` (stored here less than `relayGrace` ago: `RecentArrivals`) by an
    /// author in `leftToAuthors` (those connected to us). Such a message is most likely on its way from
    /// its author; relaying it too made every resync of a busy room a storm of histories of one message
    /// each (in a room of 64, a second or two during which every core was busy). If its author cannot
    /// reach the requester, or did not queue it (unreliable), a later request brings it (the next
    /// resync, `resyncInterval`).
    /// What a relay answer to `requester` hands on of `messages` (the room's latest, oldest first):
    /// `lacking`, leaving out our own messages queued for it and, on a link up for more than `relayGrace`
    /// (not the first answer to a member back from an outage), what `arrivals` stored since whose author
    /// is connected to us.
    public func relayAnswer(
        _ messages: [StoredMessage], room: RoomID, marks: [String: [ClosedRange<UInt64>]], to requester: PeerID,
        arrivals: RecentArrivals, sealed: Bool = false, at now: EngineTime
    ) -> [StoredMessage] {
        let settled = links.entry(requester).map { now.monotonic - $0.since > Self.relayGrace } ?? false
        return Self.lacking(
            messages, marks: marks, requester: requester, ownID: configuration.ownID, members: Set((rooms[room]?.members ?? [:]).keys), sealed: sealed,
            leftToAuthors: settled ? Set(links.peers) : [], recent: settled ? arrivals.ids(after: now.monotonic - Self.relayGrace) : [],
            queued: queued(for: requester))
    }

    public static func lacking(
        _ messages: [StoredMessage], marks: [String: [ClosedRange<UInt64>]], requester: PeerID, ownID: PeerID, members: Set<PeerID>,
        sealed: Bool = false, leftToAuthors: Set<PeerID> = [], recent: Set<String> = [], queued: Set<String> = []
    ) -> [StoredMessage] {
        let recentAuthors = Set(leftToAuthors.map(\.rawValue))
        return messages.filter { message in
            guard message.kind != .system, !message.direct, message.senderID != requester.rawValue, !queued.contains(message.id),
                !recent.contains(message.id) || !recentAuthors.contains(message.senderID),
                message.isSigned || (sealed && message.isSealed) || message.senderID == ownID.rawValue,
                message.senderID == ownID.rawValue || PeerID(message.senderID).map(members.contains) == true
            else { return false }
            let sequence = UInt64(max(0, message.sequence))
            return !(marks[message.senderID] ?? []).contains { $0.contains(sequence) }
        }
    }
}
