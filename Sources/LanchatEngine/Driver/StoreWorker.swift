import LanchatCore
import LanchatWire

/// What a driver asks of the store for one batch (`ShellOutput.store`): its writes, committed in one
/// transaction, then the reads its I/O needs. The host answers with `StoreWorker.answer` on whatever
/// thread owns the store (lanchatd: the store thread, `StoreThread`; the simulator: a virtual time
/// later), in the order asked: so each read sees the batch's own writes and every earlier one.
public struct StoreRequest: Equatable, Sendable {
    /// The driver's number for the batch (1, 2, 3…: answered in that order).
    public var ticket: UInt64
    /// The wall clock when it was asked (milliseconds since the epoch): the time of its writes.
    public var now: Int64
    public var operations: [StoreOperation]
    /// Commit durably even if every write is an acknowledgement (a batch that remembers a peer: its
    /// frames wait for a sync, as they always have).
    public var forceDurable: Bool
    /// If the writes fail they are not tried again (the caller hears it: a send, a metadata write).
    public var allOrNothing: Bool
    public var reads: [StoreRead]

    public init(ticket: UInt64, now: Int64, operations: [StoreOperation], forceDurable: Bool, allOrNothing: Bool, reads: [StoreRead]) {
        self.ticket = ticket
        self.now = now
        self.operations = operations
        self.forceDurable = forceDurable
        self.allOrNothing = allOrNothing
        self.reads = reads
    }
}

/// A read a batch's I/O needs (`SessionDriver.performLater`).
public enum StoreRead: Equatable, Sendable {
    /// What waits in the outbox for a peer.
    case outbox(PeerID)
    /// The newest message of a room (what we lack starts a minute before).
    case latestTimestamp(RoomID)
    /// What we hold of a room (runs of the latest `limit` messages) and when we joined it: a SYNC_REQUEST.
    case syncRequest(RoomID, limit: Int)
    /// A relay answer: nothing is read if the asker holds every run we hold (`marks`); else the room's
    /// latest `exportLimit` messages since `since`.
    case relayAnswer(RoomID, since: Int64, exportLimit: Int, runsLimit: Int, marks: [String: [ClosedRange<UInt64>]])
}

/// What a read found (nil parts: the read failed; the driver then does what it did when a read threw).
public enum StoreReadResult: Equatable, Sendable {
    case messages([StoredMessage]?)
    case timestamp(Int64?)
    case syncRequest(HeldRuns?, joinedAt: Int64?)
    /// `messages` nil: the asker is covered (nothing was read but the runs).
    case relayAnswer(HeldRuns?, messages: [StoredMessage]?)
}

/// A room's recent messages as runs of sequences by author (`SessionStateMachine.syncRuns`), and the
/// store's `messagesChanged` when they were read: they hold while it stays the same.
public struct HeldRuns: Equatable, Sendable {
    public var stamp: UInt64
    public var runs: [String: [ClosedRange<UInt64>]]
    /// No sequence was negative (a relay answer looks those up as 0: then `covered` proves nothing).
    public var exact: Bool
}

/// How the store answered a batch.
public struct StoreAnswer: Equatable, Sendable {
    public var ticket: UInt64
    /// Nil: committed. Otherwise the error (nothing of the batch stayed).
    public var failure: String?
    /// The commit had to be durable (something else than acknowledgements): a sync must follow it.
    public var durable: Bool
    /// Ids of the messages that were new to the store.
    public var inserted: Set<String>
    /// Messages of earlier failed batches stored now: to report now.
    public var retriedReports: [ChatMessage]
    /// In the order asked.
    public var reads: [StoreReadResult]
    /// `SessionStore.messagesChanged` after the batch.
    public var stamp: UInt64
    /// Writes of failed batches the store holds to try again with the next request.
    public var unwritten: Int
    /// The number of the commit that stored it (consecutive requests share one: one sync started after
    /// any of their answers covers them all); 0 if it wrote nothing.
    public var commit: UInt64 = 0
}

/// The store's half of the driver's rules, written once: lanchatd runs it on its store thread, the
/// simulator at a virtual time. It owns the retry of failed writes: a batch's writes that failed are
/// tried again, first, with the next batch (each write is idempotent; `maximumUnwritten` at most, the
/// newest: a disk that keeps failing loses the oldest, as a crash would). A batch asked with
/// `allOrNothing` is not tried again.
public struct StoreWorker {
    public let store: any SessionStore
    /// The host syncs the store's log itself (`SessionDriver.syncs`): commits need not wait for the disk.
    public let syncs: Bool
    private var unwritten: [StoreOperation] = []
    /// What we hold of each room's recent messages, as last read (`heldRuns`).
    private var held: [RoomID: (limit: Int, runs: HeldRuns)] = [:]
    /// Commits made (`StoreAnswer.commit`).
    private var commits: UInt64 = 0
    public static let maximumUnwritten = 10_000

    public init(store: any SessionStore, syncs: Bool) {
        self.store = store
        self.syncs = syncs
    }

    /// Writes of failed batches waiting to be tried again.
    public var unwrittenCount: Int { unwritten.count }

    /// Commits a request's writes (after those of earlier failed batches), then does its reads.
    public mutating func answer(_ request: StoreRequest) -> StoreAnswer {
        answer([request])[0]
    }

    /// Answers requests in order. The writes of consecutive ones commit together, each in a savepoint (a
    /// batch that fails is undone alone): one commit for what several connections asked meanwhile. A
    /// request with reads ends its group: its reads run after the commit, so they never see a write that
    /// could still be undone.
    public mutating func answer(_ requests: [StoreRequest]) -> [StoreAnswer] {
        var answers: [StoreAnswer] = []
        answers.reserveCapacity(requests.count)
        var start = requests.startIndex
        while start < requests.endIndex {
            var end = start
            while end < requests.endIndex - 1, requests[end].reads.isEmpty { end += 1 }
            answers += group(requests[start...end])
            start = end + 1
        }
        return answers
    }

    private mutating func group(_ requests: ArraySlice<StoreRequest>) -> [StoreAnswer] {
        var answers = requests.map {
            StoreAnswer(ticket: $0.ticket, failure: nil, durable: false, inserted: [], retriedReports: [], reads: [], stamp: 0, unwritten: 0)
        }
        let carriedIn = unwritten
        if !carriedIn.isEmpty || requests.contains(where: { !$0.operations.isEmpty || $0.forceDurable }) {
            let durable = requests.contains { Self.durable($0.operations, force: $0.forceDurable) } || Self.durable(carriedIn, force: false)
            commits += 1
            for index in answers.indices { answers[index].commit = commits }
            do {
                try store.transaction(durable: durable && !syncs) {
                    // (A transaction lost whole ends the group: nothing more may run in it.)
                    for (index, request) in requests.enumerated() { try commit(request, into: &answers[index]) }
                }
            } catch {
                // The commit itself failed, or the transaction was lost whole: nothing of the group
                // stayed. Every write not of an all-or-nothing batch is tried again, in the order asked.
                for index in answers.indices where answers[index].failure == nil {
                    answers[index].failure = "\(error)"
                    answers[index].durable = false
                    answers[index].inserted = []
                    answers[index].retriedReports = []
                }
                let again = carriedIn + requests.filter { !$0.allOrNothing }.flatMap(\.operations)
                unwritten = Array(again.suffix(Self.maximumUnwritten))
            }
        }
        for (index, request) in requests.enumerated() where !request.reads.isEmpty {
            answers[index].reads = request.reads.map { read($0) }
        }
        let stamp = store.messagesChanged
        for index in answers.indices {
            answers[index].stamp = stamp
            answers[index].unwritten = unwritten.count
        }
        return answers
    }

    /// One request's writes, after the writes still to be tried again, in a savepoint of the group.
    private mutating func commit(_ request: StoreRequest, into answer: inout StoreAnswer) throws(StoreTransactionLost) {
        let retried = unwritten
        // (Not `retried + request.operations` when nothing waits: that copied every operation of every request.)
        let operations = retried.isEmpty ? request.operations : retried + request.operations
        guard !operations.isEmpty || request.forceDurable else { return }
        var inserted: Set<String> = []
        inserted.reserveCapacity(operations.count)
        do {
            try store.savepoint {
                for operation in operations {
                    if try store.apply(operation, now: request.now), case .insertMessage(let message, _, _) = operation { inserted.insert(message.id) }
                }
            }
            unwritten = []
            answer.durable = Self.durable(operations, force: request.forceDurable)
            // Messages of earlier batches stored now are reported now (once: the batch may hold the same
            // message, sent again).
            for case .insertMessage(let message, let report?, _) in retried where inserted.contains(message.id) {
                answer.retriedReports.append(report)
                inserted.remove(message.id)
            }
            answer.inserted = inserted
        } catch let lost as StoreTransactionLost {
            throw lost
        } catch {
            answer.failure = "\(error)"
            // The engine goes on as if they were written (a message is not acknowledged, so it comes
            // again): they are tried again, first, with the next request. A send of ours is not.
            unwritten = request.allOrNothing ? retried : Array(operations.suffix(Self.maximumUnwritten))
        }
    }

    /// Acknowledgements heard (outbox rows removed, marks moved) need no sync of their own: lost in a power failure, their
    /// messages are sent again and de-duplicated. Nor does a seal's check (lost, the seal is kept unchecked,
    /// and checked again at the next start). Anything else is synced before what follows.
    static func durable(_ operations: [StoreOperation], force: Bool) -> Bool {
        force
            || operations.contains {
                switch $0 {
                case .acknowledge, .setMark, .sealChecked, .dropSealed: false
                default: true
                }
            }
    }

    /// The runs we hold of a room's latest `limit` messages: kept from the last read while the store's
    /// messages have not changed since (`SessionStore.messagesChanged`; an idle room's resyncs read
    /// nothing), read again otherwise (nil if the read fails).
    public mutating func heldRuns(_ room: RoomID, limit: Int) -> HeldRuns? {
        let stamp = store.messagesChanged
        if let kept = held[room], kept.runs.stamp == stamp, kept.limit == limit { return kept.runs }
        guard let rows = try? store.recentSequences(room: room.rawValue, limit: limit) else { return nil }
        if held.count >= 1024 { held = [:] }  // (rooms left long ago; one read each brings a room back)
        let runs = HeldRuns(stamp: stamp, runs: SessionStateMachine.syncRuns(rows), exact: rows.allSatisfy { $0.sequence >= 0 })
        held[room] = (limit, runs)
        return runs
    }

    private mutating func read(_ read: StoreRead) -> StoreReadResult {
        switch read {
        case .outbox(let peer):
            return .messages(try? store.outbox(peerID: peer.rawValue))
        case .latestTimestamp(let room):
            return .timestamp(try? store.latestTimestamp(room: room.rawValue))
        case .syncRequest(let room, let limit):
            return .syncRequest(heldRuns(room, limit: limit), joinedAt: (try? store.joinedAt(room: room.rawValue)) ?? nil)
        case .relayAnswer(let room, let since, let exportLimit, let runsLimit, let marks):
            let runs = heldRuns(room, limit: runsLimit)
            if let runs, runs.exact, SessionStateMachine.covered(runs.runs, by: marks) { return .relayAnswer(runs, messages: nil) }
            return .relayAnswer(runs, messages: (try? store.export(room: room.rawValue, since: since, limit: exportLimit)) ?? [])
        }
    }
}
