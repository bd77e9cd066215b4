import LanchatCore
import LanchatWire

/// What a driver asks its host to do: plain I/O, none of it a decision. lanchatd's `SessionNode` does it
/// with NIO, its file thread and the store's sync thread; the simulator with its virtual network.
public enum ShellOutput: Equatable, Sendable {
    /// Write frames on a connection (`flushNow`: at once, not at the end of the event loop's turn).
    case write(LinkHandle, [WireFrame], flushNow: Bool)
    /// Write unreliable frames, unless the connection's output is full (then they are dropped).
    case writeIfRoom(LinkHandle, [WireFrame])
    /// Say GOODBYE and close a connection.
    case close(LinkHandle, WireFrame.Goodbye.Reason, String)
    case dial(PeerID)
    /// The connection that serves a peer now.
    case serves(SessionPeer, LinkHandle)
    /// A message new to the store: report it to the node's users.
    case reportStored(ChatMessage)
    /// Report to the node's users.
    case tell(SessionEvent)
    /// Remember a peer's label (its own file, not the store: a failure there is the host's to log).
    case rememberPeer(label: String, id: PeerID)
    case file(FileAction)
    case stream(WireID, StreamSignal)
    case streamHandedOver(acceptor: UInt64, AcceptedStream?)
    case inviteFinished(WireID, InviteOutcome)
    /// Send a peer a history as a resource.
    case offerHistory(HistoryOffer)
    /// Commit a batch's writes and do its reads (`StoreWorker.answer`, on the thread that owns the
    /// store), then tell the driver `storeAnswered(_:)`. Answer in the order asked.
    case store(StoreRequest)
    /// Make durable everything committed so far (the store's log, `SessionStore.logPath`), then tell the
    /// driver `synced(_:)`. Only one is asked for at a time.
    case startSync
    /// What a waiter (`settle()`, `performOwn`, `performAll`) waited for is done.
    case settled(waiter: UInt64, Settled)
    /// The store refused a batch's writes (what depended on them did not happen).
    case storeFailed(String)
    /// Check a seal's signature off the event loop (`SealCheck.verifies`), then tell the engine
    /// `sealChecked(_:valid:at:)` through the driver (`perform`).
    case checkSeal(SealCheck)
}

/// How what a waiter waited for ended: its writes were refused (nothing of them was done), or they
/// were stored (`synced`: and reached the disk).
public enum Settled: Equatable, Sendable {
    case notStored
    case stored(synced: Bool)
}

/// A history to send a peer as a resource: a newcomer's (exported from the store by the host, in pieces),
/// or a relay answer (messages already read).
public struct HistoryOffer: Equatable, Sendable {
    public enum Content: Equatable, Sendable {
        /// The room's messages since a time, at most `limit` of them.
        case export(sinceMilliseconds: Int64, limit: Int)
        /// A relay answer (`SessionAction.sendSync`).
        case messages([StoredMessage])
    }

    public var room: RoomID
    public var peer: SessionPeer
    /// How its records are laid out (by the version the peer speaks).
    public var layout: HistoryLayout
    public var content: Content
}

/// The shell's rules, once, for lanchatd and the simulator alike: it takes the engine's actions and turns
/// them into plain I/O (`ShellOutput`). It owns what the shell must remember between batches:
///
/// - **The store, elsewhere.** A batch's writes and the reads its I/O needs go to the store as one
///   request (`.store`, answered by `storeAnswered(_:)`), on the thread that owns the store: the driver
///   never calls the store. What depends on the writes waits for the answer: no report of what was not
///   stored, no ACK for what was refused (with `allOrNothing`, nothing at all). The store tries failed
///   writes again, first, with the next request (`StoreWorker`).
/// - **The sync.** With a store that must be synced (`syncs`), the commit does not wait for the disk: the
///   host syncs the store's log on a thread of its own (`.startSync`, answered by `synced(_:)`); one sync
///   covers every commit answered before it started (a group commit).
/// - **Order.** Batches wait in one queue (`BatchQueue`). A batch's reports and events are told once its
///   store answer is in and every earlier batch's were (reports at the commit: readable already); its
///   frames and the rest of its I/O once, in addition, its commit's sync, or the one pending, is done,
///   and every earlier batch's I/O was done: no ACK leaves before its message is on disk, and nothing
///   overtakes anything. A batch that asks nothing of the store, with nothing queued, is done at once.
/// - **The send-first rule** (`performOwn`): our own messages may leave before their commit while nothing
///   but ACKs waits, and only if they continue from our last synced sequence in the room.
/// - **Acknowledgements heard wait.** A batch whose only writes are acknowledgements heard (outbox
///   removals: nothing waits for them, and one lost costs a resend that is de-duplicated) asks nothing of
///   the store by itself: its writes go first in the next request of any batch, or on their own once
///   `acknowledgementDelay` has passed (`nextDeadline`) or `acknowledgementLimit` ids wait. A lone send
///   then costs the store one turn, not two (its own, and the ACK of the one before).
public struct SessionDriver {
    /// How many of a room's latest messages a newcomer is sent (the host's export applies it too).
    public let historyForNewcomers: Int
    /// The store's commits need a sync of their own (`SessionStore.logPath` is set).
    public let syncs: Bool
    /// What was stored in the last moments (a relay answer leaves it to its author).
    public private(set) var arrivals = RecentArrivals()
    /// Per room, the highest of our own sequences seen committed and synced (`sendAheadLimit`).
    public internal(set) var storedThrough: [RoomID: Int64] = [:]
    /// `stop()` was called: nothing more is done.
    public private(set) var stopped = false
    /// A sync of the store failed. On Linux a failed `fsync` may leave the pages it did not write marked
    /// clean, so a later sync that succeeds proves nothing: from then on nothing counts as synced (no ACK
    /// leaves, our sends fail) until the process starts again, as PostgreSQL stops at such a failure.
    public private(set) var syncFailed = false
    /// Store requests asked and not answered.
    public private(set) var unanswered = 0

    /// Syncs asked for (each durable commit takes the next number), the last one known done, the one running.
    private var syncsAsked: UInt64 = 0
    private var syncedThrough: UInt64 = 0
    private var syncRunning: UInt64?
    /// The store's commit (`StoreAnswer.commit`) the last sync was asked for, and that sync's number.
    private var syncAskedFor: (commit: UInt64, ticket: UInt64) = (0, 0)
    private var queue = BatchQueue()
    private var nextWaiter: UInt64 = 0
    private var nextTicket: UInt64 = 0
    /// The store holds writes of a failed batch to try again (the next batch asks the store even if it writes nothing).
    private var retryPending = false
    /// They were tried again at once after the last failure (`storeAnswered`).
    private var retriedAtOnce = false
    /// Acknowledgements heard and not yet asked of the store.
    private var heard = Heard()
    /// How long acknowledgements heard may wait for another batch's request (milliseconds), and how many
    /// ids at most.
    public static let acknowledgementDelay: Int64 = 50
    public static let acknowledgementLimit = 1024

    public init(historyForNewcomers: Int, syncs: Bool) {
        self.historyForNewcomers = historyForNewcomers
        self.syncs = syncs
    }

    /// How many of a room's latest messages a SYNC_REQUEST describes (twice what a member sends, so that
    /// its window lies within ours).
    var runsLimit: Int { 2 * max(500, historyForNewcomers) }

    /// Performs a batch of the engine's actions (see the type's rules).
    public mutating func perform(_ actions: [SessionAction], engine: inout SessionStateMachine, at now: EngineTime) -> [ShellOutput] {
        enqueue(actions, engine: &engine, at: now)
    }

    /// Performs a batch whose writes must all be stored or none of what it does happen (a metadata write,
    /// administration); `.settled(waiter:)` tells how it ended, once it is on disk.
    public mutating func performAll(_ actions: [SessionAction], engine: inout SessionStateMachine, at now: EngineTime) -> (waiter: UInt64, output: [ShellOutput]) {
        nextWaiter += 1
        let output = enqueue(actions, engine: &engine, at: now, allOrNothing: true, waiter: nextWaiter)
        return (nextWaiter, output)
    }

    /// Performs the actions of our own messages (`send`, `share`): their frames are written before their
    /// commit if they may go first (`mayGoFirst`, nothing but ACKs waits, and they continue from
    /// `storedThrough`), after it otherwise. `.settled(waiter:)` tells how it ended; if they are not
    /// stored, the engine hears it (`sendNotStored`).
    public mutating func performOwn(
        _ plan: SessionStateMachine.SendPlan, _ actions: [SessionAction], in room: RoomID, mayGoFirst: Bool,
        engine: inout SessionStateMachine, at now: EngineTime
    ) -> (waiter: UInt64, wentFirst: Bool, output: [ShellOutput]) {
        let first = plan.messages.first?.sequence ?? 0
        // (Not while frames other than acknowledgements wait: they would be overtaken. An ACK overtaken
        // changes nothing: it only ends the peer's retransmits.)
        let ahead = mayGoFirst && queue.onlyAcknowledgementsWait && storedThrough[room].map { $0 + 1 == first } == true
        nextWaiter += 1
        let output = enqueue(actions, engine: &engine, at: now, allOrNothing: true, sendFirst: ahead, own: .init(plan: plan, room: room), waiter: nextWaiter)
        return (nextWaiter, ahead, output)
    }

    /// When the acknowledgements heard must be asked of the store (monotonic milliseconds; nil: none
    /// wait): the host then calls `perform` (with the engine's tick, or nothing), which asks for them.
    public var nextDeadline: Int64? {
        heard.operations.isEmpty || stopped ? nil : heard.since + Self.acknowledgementDelay
    }

    /// When the host wakes the engine and this driver next: the sooner of the engine's deadline
    /// (`SessionStateMachine.nextDeadline`) and this driver's (lanchatd's timer and the simulator's tick).
    /// (It takes the engine's deadline, not the engine: an engine held by a class and passed as an
    /// argument was copied whole for the call, at every batch.)
    public func nextWakeUp(engineDeadline: Int64?) -> Int64? {
        guard let engineDeadline else { return nextDeadline }
        guard let nextDeadline else { return engineDeadline }
        return min(engineDeadline, nextDeadline)
    }

    /// Acknowledgements heard that the store has not been asked for (ids).
    public var acknowledgementsWaiting: Int { heard.ids }

    /// Whether what was performed so far is done (its syncs included): now (and whether it synced), or
    /// later, told by `.settled(waiter:)`.
    public enum Settlement: Equatable, Sendable {
        case now(synced: Bool)
        case later(waiter: UInt64)
    }

    public mutating func settle() -> Settlement {
        guard !stopped else { return .now(synced: false) }
        guard !queue.isEmpty || syncPending != nil else { return .now(synced: true) }
        nextWaiter += 1
        var waiting = Batch(actions: [], waiter: nextWaiter)
        // (Told at once if nothing before it waits for the store: it then waits for the pending sync.)
        if queue.allTold {
            waiting.told = true
            waiting.syncTicket = syncPending
        }
        queue.append(waiting)
        return .later(waiter: nextWaiter)
    }

    /// The store answered a request (`.store`): what waited for it is done, in order.
    public mutating func storeAnswered(_ answer: StoreAnswer, engine: inout SessionStateMachine, at now: EngineTime) -> [ShellOutput] {
        guard !stopped else { return [] }
        unanswered -= 1
        retryPending = answer.unwritten > 0
        queue.answered(answer)
        var output: [ShellOutput] = []
        advance(engine: &engine, at: now, into: &output)
        // Writes the store could not make are tried again at once (their frames may have left: the sooner
        // they are on disk, the smaller the window in which a crash loses them), once per failure: a disk
        // that keeps refusing is tried again with the next batch, not in a loop.
        if !retryPending {
            retriedAtOnce = false
        } else if unanswered == 0, !retriedAtOnce {
            retriedAtOnce = true
            output += enqueue([], engine: &engine, at: now)
        }
        return output
    }

    /// The sync asked for by the last `.startSync` ended (`ok`: it reached the disk). What waited for it
    /// is done now, in order; a failed sync sends no acknowledgement for what it covered, nor for what
    /// any later sync covers (`syncFailed`).
    public mutating func synced(_ ok: Bool, engine: inout SessionStateMachine, at now: EngineTime) -> [ShellOutput] {
        guard !stopped, let target = syncRunning else { return [] }
        syncRunning = nil
        if !ok { syncFailed = true }
        syncedThrough = target
        var output: [ShellOutput] = []
        advance(engine: &engine, at: now, into: &output)
        startSync(into: &output)
        return output
    }

    /// The node stops: what waited is not done; waiters hear that it did not sync (or, if the store had
    /// not answered, that it was not stored).
    public mutating func stop() -> [ShellOutput] {
        var output: [ShellOutput] = []
        if !stopped, !heard.operations.isEmpty {
            // (The acknowledgements heard are still written, answered or not: fewer resends after a restart.)
            let wall = heard.wall
            output.append(ask(heard.take(), now: wall))
        }
        stopped = true
        while let batch = queue.popFirst() {
            guard let waiter = batch.waiter, !batch.dropped else { continue }  // (a dropped one was settled at its answer)
            output.append(.settled(waiter: waiter, batch.told && batch.committed ? .stored(synced: false) : .notStored))
        }
        return output
    }

    /// A request of the store under the next ticket.
    private mutating func ask(
        _ operations: [StoreOperation], now: Int64, forceDurable: Bool = false, allOrNothing: Bool = false, reads: [StoreRead] = []
    ) -> ShellOutput {
        nextTicket += 1
        unanswered += 1
        return .store(
            StoreRequest(ticket: nextTicket, now: now, operations: operations, forceDurable: forceDurable, allOrNothing: allOrNothing, reads: reads))
    }

    /// Acknowledgements heard, waiting: their writes, the ids they name, since when they wait (monotonic
    /// milliseconds) and the wall clock then.
    private struct Heard {
        var operations: [StoreOperation] = []
        var ids = 0
        var since: Int64 = 0
        var wall: Int64 = 0

        mutating func add(_ more: [StoreOperation], ids count: Int, at now: EngineTime) {
            if operations.isEmpty { (since, wall) = (now.monotonic, now.wall) }
            operations += more
            ids += count
        }

        /// Their writes; none wait any more.
        mutating func take() -> [StoreOperation] {
            defer { self = Heard() }
            return operations
        }
    }

    /// The number of ids if every operation is an acknowledgement heard (a row deleted, a mark moved:
    /// one each); nil otherwise. (A seal's check
    /// passed does not wait with them: riding in an all-or-nothing batch whose commit failed, it was lost
    /// with it, and the seal's messages were never exported; the simulator found it, seed 2736.)
    static func acknowledgedIDs(_ operations: [StoreOperation]) -> Int? {
        var count = 0
        for operation in operations {
            switch operation {
            case .acknowledge(_, let ids): count += ids.count
            case .setMark: count += 1
            default: return nil
            }
        }
        return count
    }

    /// Whether `action` sends ACKs and nothing else (what a failed commit does not send, and what may be
    /// overtaken by a send of ours that goes first).
    public static func sendsOnlyAcknowledgements(_ action: SessionAction) -> Bool {
        guard case .send(_, let frames) = action else { return false }
        return frames.allSatisfy { if case .ack = $0 { true } else { false } }
    }

    /// Nothing waits but acknowledgements (and waiters with no frames).
    public var onlyAcknowledgementsWait: Bool { queue.onlyAcknowledgementsWait }

    // MARK: The queue

    private mutating func enqueue(
        _ actions: [SessionAction], engine: inout SessionStateMachine, at now: EngineTime, allOrNothing: Bool = false, sendFirst: Bool = false,
        own: Batch.Own? = nil, waiter: UInt64? = nil
    ) -> [ShellOutput] {
        guard !stopped else { return waiter.map { [.settled(waiter: $0, .notStored)] } ?? [] }
        var output: [ShellOutput] = []
        var actions = actions
        if sendFirst {
            for case .send(let handle, let frames) in actions { output.append(.write(handle, frames, flushNow: true)) }
            actions.removeAll { if case .send = $0 { true } else { false } }
        }
        var operations: [StoreOperation] = []
        var reads: [StoreRead] = []
        var slots: [Int: Int] = [:]
        var syncRooms: [RoomID: Int] = [:]
        var frames = false
        for (index, action) in actions.enumerated() {
            switch action {
            case .persist(.rememberPeer(let label, let id)):
                output.append(.rememberPeer(label: label, id: id))  // (its own file, not the store)
            case .persist(let operation):
                operations.append(operation)
            case .emit, .peerConnected, .dial, .peerDisconnected:
                continue
            case .checkSeal(let check):
                output.append(.checkSeal(check))  // (pure work on another thread: it waits for nothing)
                continue
            case .flushOutbox(let peer, _, _):
                slots[index] = reads.count
                reads.append(.outbox(peer))
            case .requestHistory(let room, _, _):
                slots[index] = reads.count
                reads.append(.latestTimestamp(room))
            case .requestSync(let room, _):
                // A resync asks every member of a room at once: what we hold is read once per room.
                if let slot = syncRooms[room] {
                    slots[index] = slot
                } else {
                    syncRooms[room] = reads.count
                    slots[index] = reads.count
                    reads.append(.syncRequest(room, limit: runsLimit))
                }
            case .sendSync(let room, let since, let marks, _):
                slots[index] = reads.count
                reads.append(.relayAnswer(room, since: since, exportLimit: historyForNewcomers, runsLimit: runsLimit, marks: marks))
            default:
                break
            }
            if !Self.sendsOnlyAcknowledgements(action), !Self.toldAtOnce(action) { frames = true }
        }
        // (A batch that only remembers a peer's label commits nothing, but its frames still wait for a
        // sync, as they always have: the order of the link's first frames is part of what was tested.)
        let remembers = operations.isEmpty && actions.contains { if case .persist(.rememberPeer) = $0 { true } else { false } }
        var batch = Batch(actions: actions, allOrNothing: allOrNothing, own: own, waiter: waiter, frames: frames, readSlots: slots)
        // The store is asked even with no write (reads, a label remembered, writes to try again).
        let asksAnyway = remembers || !reads.isEmpty || (retryPending && unanswered == 0)
        if !asksAnyway, waiter == nil, !operations.isEmpty, let ids = Self.acknowledgedIDs(operations) {
            // Only acknowledgements heard: they wait (nothing of the batch waits for them).
            heard.add(operations, ids: ids, at: now)
            operations = []
        }
        if !heard.operations.isEmpty,
            asksAnyway || waiter != nil || !operations.isEmpty || heard.ids >= Self.acknowledgementLimit
                || now.monotonic >= heard.since + Self.acknowledgementDelay
        {
            // They go first: heard before anything of this batch.
            operations = heard.take() + operations
        }
        if !operations.isEmpty || asksAnyway {
            output.append(ask(operations, now: now.wall, forceDurable: remembers, allOrNothing: allOrNothing, reads: reads))
            batch.ticket = nextTicket
        }
        queue.append(batch)
        advance(engine: &engine, at: now, into: &output)
        return output
    }

    /// Tells what can be told and does what can be done, in order: each batch's I/O as soon as it may
    /// (before the next batch is told, as when the store answered at once).
    private mutating func advance(engine: inout SessionStateMachine, at now: EngineTime, into output: inout [ShellOutput]) {
        while true {
            while let first = queue.first, first.told, first.dropped || first.syncTicket.map({ $0 <= syncedThrough }) ?? true {
                let batch = queue.popFirst()!
                if !batch.dropped { performLater(batch, engine: &engine, at: now, into: &output) }
            }
            guard let index = queue.nextToTell, queue[index].ticket == nil || queue[index].answer != nil else { return }
            var batch = queue[index]
            queue[index].answer = nil  // (not copied twice)
            tell(&batch, engine: &engine, at: now, into: &output)
            queue[index] = batch
            queue.toldOne()
        }
    }

    /// What a batch tells at its commit: whether it failed, its reports, its events.
    private mutating func tell(_ batch: inout Batch, engine: inout SessionStateMachine, at now: EngineTime, into output: inout [ShellOutput]) {
        batch.told = true
        var inserted: Set<String> = []
        if let answer = batch.answer {
            if let failure = answer.failure {
                output.append(.storeFailed(failure))
                batch.committed = false
                if batch.allOrNothing {
                    batch.dropped = true
                    if let own = batch.own { engine.sendNotStored(own.plan) }
                    if let waiter = batch.waiter { output.append(.settled(waiter: waiter, .notStored)) }
                    return
                }
            } else {
                if answer.durable, syncs {
                    // (Stored by the commit an earlier answer asked a sync for: that sync covers it.)
                    batch.syncTicket = answer.commit == syncAskedFor.commit ? syncAskedFor.ticket : askSync(into: &output)
                    syncAskedFor = (answer.commit, batch.syncTicket!)
                }
                inserted = answer.inserted
                let stored = inserted.union(answer.retriedReports.map(\.stored.id))
                if !stored.isEmpty { arrivals.note(stored, at: now.monotonic) }
                for report in answer.retriedReports { output.append(.reportStored(report)) }
            }
        }
        for action in batch.actions {
            switch action {
            case .persist(.insertMessage(let message, let report?, _)):
                if inserted.contains(message.id) { output.append(.reportStored(report)) }
            case .emit(let event):
                output.append(.tell(event))
            case .peerConnected(let peer, let handle):
                output.append(.serves(peer, handle))
            case .dial(let peer):
                output.append(.dial(peer))
            default:
                break
            }
        }
        // Nothing leaves before what was committed before it is on disk.
        batch.syncTicket = batch.syncTicket ?? syncPending
    }

    /// Actions done when the batch is told (`tell`), not with its I/O.
    static func toldAtOnce(_ action: SessionAction) -> Bool {
        switch action {
        case .persist, .emit, .peerConnected, .dial, .peerDisconnected: true
        default: false
        }
    }

    // MARK: The syncs

    /// Asks for a sync of everything committed so far; returns its number.
    private mutating func askSync(into output: inout [ShellOutput]) -> UInt64 {
        syncsAsked += 1
        startSync(into: &output)
        return syncsAsked
    }

    /// Starts a sync of what was committed until now, unless one runs (then the next covers these).
    private mutating func startSync(into output: inout [ShellOutput]) {
        guard !stopped, syncRunning == nil, syncedThrough < syncsAsked else { return }
        syncRunning = syncsAsked
        output.append(.startSync)
    }

    /// The last sync asked for, if it is not done.
    private var syncPending: UInt64? { syncedThrough < syncsAsked ? syncsAsked : nil }
}
