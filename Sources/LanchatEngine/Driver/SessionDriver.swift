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
    /// Make durable everything committed so far (the store's log, `SessionStore.logPath`), then tell the
    /// driver `synced(_:)`. Only one is asked for at a time.
    case startSync
    /// What a `settle()` or `performOwn` waiter waited for is done (`synced`: it reached the disk).
    case settled(waiter: UInt64, synced: Bool)
    /// The store refused a batch's writes (what depended on them did not happen).
    case storeFailed(String)
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
    /// With each record's signature (a peer that speaks version 2).
    public var signed: Bool
    public var content: Content
}

/// The shell's rules, once, for lanchatd and the simulator alike: it takes the engine's actions and turns
/// them into plain I/O (`ShellOutput`). It owns what the shell must remember between batches:
///
/// - **The commit and its failure.** A batch's writes go first, in one transaction; if they fail, what
///   depends on them does not happen (no ACK, no report; with `allOrNothing`, nothing at all), and they
///   are tried again, first, with the next commit (each write is idempotent).
/// - **The sync.** With a store that must be synced (`syncs`), the commit does not wait for the disk: the
///   host syncs the store's log on a thread of its own (`.startSync`, answered by `synced(_:)`); one sync
///   covers every commit made before it started (a group commit). A batch's I/O waits for its sync in
///   order (`SyncQueue`), and so does every later batch's: no ACK leaves before its message is on disk,
///   and nothing overtakes anything. Reports are told at the commit (it is readable already).
/// - **The send-first rule** (`performOwn`): our own messages may leave before their commit while nothing
///   but ACKs waits for a sync, and only if they continue from our last synced sequence in the room.
/// - **Reads the engine asks for** (an outbox to flush, what we hold for a SYNC_REQUEST, a relay answer),
///   done when the batch's turn comes.
public struct SessionDriver {
    public let store: any SessionStore
    /// How many of a room's latest messages a newcomer is sent (the host's export applies it too).
    public let historyForNewcomers: Int
    /// The store's commits need a sync of their own (`SessionStore.logPath` is set).
    public let syncs: Bool
    /// What was stored in the last moments (a relay answer leaves it to its author).
    public private(set) var arrivals = RecentArrivals()
    /// Per room, the highest of our own sequences seen committed and synced (`sendAheadLimit`).
    public private(set) var storedThrough: [RoomID: Int64] = [:]
    /// `stop()` was called: nothing more is done.
    public private(set) var stopped = false
    /// A sync of the store failed. On Linux a failed `fsync` may leave the pages it did not write marked
    /// clean, so a later sync that succeeds proves nothing: from then on nothing counts as synced (no ACK
    /// leaves, our sends fail) until the process starts again, as PostgreSQL stops at such a failure.
    public private(set) var syncFailed = false

    /// Syncs asked for (each durable commit takes the next number), the last one known done, the one running.
    private var syncsAsked: UInt64 = 0
    private var syncedThrough: UInt64 = 0
    private var syncRunning: UInt64?
    private var afterSync = SyncQueue()
    private var nextWaiter: UInt64 = 0
    /// Writes of batches whose commit failed, tried again with the next commit (at most `maximumUnwritten`,
    /// the newest: a disk that keeps failing loses the oldest, as a crash would).
    private var unwritten: [StoreOperation] = []
    public static let maximumUnwritten = 10_000
    /// What we hold of each room's recent messages, as read for our last SYNC_REQUEST there (`heldRuns`).
    private var held: [RoomID: HeldRuns] = [:]

    /// A room's recent messages as runs of sequences by author (`SessionStateMachine.syncRuns`), and the
    /// store's `messagesChanged` when they were read: they hold while it stays the same.
    struct HeldRuns {
        var stamp: UInt64
        var runs: [String: [ClosedRange<UInt64>]]
        /// No sequence was negative (a relay answer looks those up as 0: then `covered` proves nothing).
        var exact: Bool
    }

    public init(store: any SessionStore, historyForNewcomers: Int, syncs: Bool) {
        self.store = store
        self.historyForNewcomers = historyForNewcomers
        self.syncs = syncs
    }

    /// What a batch did: whether its writes committed, and the I/O to do now.
    public struct Performed {
        public var committed: Bool
        public var output: [ShellOutput]
    }

    /// Performs a batch of the engine's actions (see the type's rules). With `sendFirst`, the frames for
    /// the peers are written (and flushed) before the commit, so that the sync runs while they travel.
    public mutating func perform(
        _ actions: [SessionAction], engine: inout SessionStateMachine, at now: EngineTime, allOrNothing: Bool = false, sendFirst: Bool = false
    ) -> Performed {
        guard !stopped else { return Performed(committed: false, output: []) }
        var output: [ShellOutput] = []
        var inserted: Set<String> = []
        var committed = true
        var ticket: UInt64?
        if sendFirst {
            for case .send(let handle, let frames) in actions { output.append(.write(handle, frames, flushNow: true)) }
        }
        // The batch's writes, after those of earlier batches whose commit failed (each is idempotent).
        var operations: [StoreOperation] = []
        for case .persist(let operation) in actions {
            if case .rememberPeer(let label, let id) = operation {
                output.append(.rememberPeer(label: label, id: id))  // (its own file, not the store)
            } else {
                operations.append(operation)
            }
        }
        let retried = unwritten
        // (A batch that only remembers a peer's label commits nothing, but its frames still wait for a
        // sync, as they always have: the order of the link's first frames is part of what was tested.)
        let remembers = operations.isEmpty && actions.contains { if case .persist(.rememberPeer) = $0 { true } else { false } }
        if !operations.isEmpty || !retried.isEmpty || remembers {
            // Acknowledgements heard (outbox removals) need no sync of their own: lost in a power failure,
            // their messages are sent again and de-duplicated. Anything else is synced before what follows.
            let durable = remembers || (retried + operations).contains { if case .acknowledge = $0 { false } else { true } }
            do {
                try store.transaction(durable: durable && !syncs) {
                    for operation in retried + operations {
                        if try store.apply(operation, now: now.wall), case .insertMessage(let message, _) = operation { inserted.insert(message.id) }
                    }
                }
                unwritten = []
                if durable, syncs { ticket = askSync(into: &output) }
                if !inserted.isEmpty { arrivals.note(inserted, at: now.monotonic) }
                // Messages of earlier batches stored now are reported now.
                for case .insertMessage(let message, let report?) in retried where inserted.contains(message.id) {
                    output.append(.reportStored(report))
                    inserted.remove(message.id)  // (once: the batch may hold the same message, sent again)
                }
            } catch {
                output.append(.storeFailed("\(error)"))
                committed = false
                inserted = []  // (rolled back: nothing of it is reported)
                if allOrNothing { return Performed(committed: false, output: output) }
                // The engine goes on as if they were written (a message is not acknowledged, so it comes
                // again): they are tried again, first, with the next commit. A send of ours is not (above:
                // the engine forgets it).
                unwritten = Array((retried + operations).suffix(Self.maximumUnwritten))
            }
        }
        var later: [SessionAction] = []
        for action in actions {
            if sendFirst, case .send = action { continue }  // (written before the commit)
            switch action {
            case .persist(.insertMessage(let message, let report?)):
                if inserted.contains(message.id) { output.append(.reportStored(report)) }
            case .persist, .peerDisconnected:
                break
            case .emit(let event):
                output.append(.tell(event))
            case .peerConnected(let peer, let handle):
                output.append(.serves(peer, handle))
            case .dial(let peer):
                output.append(.dial(peer))
            default:
                later.append(action)
            }
        }
        // Nothing leaves before what was committed before it is on disk.
        if let after = ticket ?? syncPending {
            if !later.isEmpty {
                afterSync.append(after, frames: !later.allSatisfy(Self.sendsOnlyAcknowledgements), .batch(later, committed: committed))
            }
        } else {
            performLater(later, committed: committed, engine: &engine, at: now, into: &output)
        }
        return Performed(committed: committed, output: output)
    }

    /// How a send of ours ended in the store: refused, stored and synced, or stored with its sync to come
    /// (`.settled(waiter:synced:)` tells it).
    public enum OwnOutcome: Equatable, Sendable {
        case notStored
        case stored
        case syncing(waiter: UInt64)
    }

    /// Performs the actions of our own messages (`send`, `share`): before their commit if they may go
    /// first (`mayGoFirst`, nothing but ACKs waits for a sync, and they continue from `storedThrough`),
    /// after it otherwise. If they are not stored, the engine hears it (`sendNotStored`).
    public mutating func performOwn(
        _ plan: SessionStateMachine.SendPlan, _ actions: [SessionAction], in room: RoomID, mayGoFirst: Bool,
        engine: inout SessionStateMachine, at now: EngineTime
    ) -> (outcome: OwnOutcome, wentFirst: Bool, output: [ShellOutput]) {
        let first = plan.messages.first?.sequence ?? 0
        // (Not while frames of earlier batches other than acknowledgements wait for a sync: they would be
        // overtaken. An ACK overtaken changes nothing: it only ends the peer's retransmits.)
        let ahead = mayGoFirst && afterSync.onlyAcknowledgementsWait && storedThrough[room].map { $0 + 1 == first } == true
        let done = perform(actions, engine: &engine, at: now, allOrNothing: true, sendFirst: ahead)
        guard done.committed else {
            engine.sendNotStored(plan)
            return (.notStored, ahead, done.output)
        }
        let last = plan.messages.last?.sequence
        if let pending = syncPending {
            nextWaiter += 1
            afterSync.append(pending, frames: false, .own(room, through: last, waiter: nextWaiter))
            return (.syncing(waiter: nextWaiter), ahead, done.output)
        }
        if let last { storedThrough[room] = max(storedThrough[room] ?? 0, last) }
        return (.stored, ahead, done.output)
    }

    /// Whether what was performed so far is done (its syncs included): now (and whether it synced), or
    /// later, told by `.settled(waiter:synced:)`.
    public enum Settlement: Equatable, Sendable {
        case now(synced: Bool)
        case later(waiter: UInt64)
    }

    public mutating func settle() -> Settlement {
        guard !stopped else { return .now(synced: false) }
        guard let last = syncPending else { return .now(synced: true) }
        nextWaiter += 1
        afterSync.append(last, frames: false, .waiter(nextWaiter))
        return .later(waiter: nextWaiter)
    }

    /// The sync asked for by the last `.startSync` ended (`ok`: it reached the disk). What waited for it
    /// is done now, in order; a failed sync sends no acknowledgement for what it covered, nor for what
    /// any later sync covers (`syncFailed`).
    public mutating func synced(_ ok: Bool, engine: inout SessionStateMachine, at now: EngineTime) -> [ShellOutput] {
        guard !stopped, let target = syncRunning else { return [] }
        syncRunning = nil
        if !ok { syncFailed = true }
        let ok = ok && !syncFailed
        syncedThrough = target
        var output: [ShellOutput] = []
        while let first = afterSync.first, first.ticket <= target {
            _ = afterSync.popFirst()
            switch first.work {
            case .batch(let actions, let committed):
                performLater(actions, committed: committed && ok, engine: &engine, at: now, into: &output)
            case .waiter(let waiter):
                output.append(.settled(waiter: waiter, synced: ok))
            case .own(let room, let last, let waiter):
                if ok, let last { storedThrough[room] = max(storedThrough[room] ?? 0, last) }
                output.append(.settled(waiter: waiter, synced: ok))
            }
        }
        startSync(into: &output)
        return output
    }

    /// The node stops: what waited for a sync is not done; waiters hear that it did not sync.
    public mutating func stop() -> [ShellOutput] {
        stopped = true
        var output: [ShellOutput] = []
        while let waiting = afterSync.popFirst() {
            switch waiting.work {
            case .batch: break
            case .waiter(let waiter), .own(_, _, let waiter): output.append(.settled(waiter: waiter, synced: false))
            }
        }
        return output
    }

    /// Whether `action` sends ACKs and nothing else (what a failed commit does not send, and what may be
    /// overtaken by a send of ours that goes first).
    public static func sendsOnlyAcknowledgements(_ action: SessionAction) -> Bool {
        guard case .send(_, let frames) = action else { return false }
        return frames.allSatisfy { if case .ack = $0 { true } else { false } }
    }

    /// Nothing waits but acknowledgements (and waiters with no frames).
    public var onlyAcknowledgementsWait: Bool { afterSync.onlyAcknowledgementsWait }

    // MARK: The batch's I/O

    /// The rest of a batch (`perform`): its frames and other I/O, once its writes are on disk.
    private mutating func performLater(
        _ actions: [SessionAction], committed: Bool, engine: inout SessionStateMachine, at now: EngineTime, into output: inout [ShellOutput]
    ) {
        // A resync asks every member of a room at once: what we hold is read once per room.
        var syncRequests: [RoomID: WireFrame.SyncRequest] = [:]
        for action in actions {
            if !committed, Self.sendsOnlyAcknowledgements(action) { continue }
            switch action {
            case .send(let handle, let frames):
                output.append(.write(handle, frames, flushNow: false))
            case .sendUnreliable(let handle, let frames):
                output.append(.writeIfRoom(handle, frames))
            case .close(let handle, let reason, let text):
                output.append(.close(handle, reason, text))
            case .flushOutbox(let peer, let handle, let rooms):
                flushOutbox(to: peer, on: handle, rooms: Set(rooms.map(\.rawValue)), engine: engine, into: &output)
            case .sendHistory(let room, let since, let peer, let signed, let limit):
                let limit = min(historyForNewcomers, limit ?? .max)
                output.append(.offerHistory(HistoryOffer(room: room, peer: peer, signed: signed, content: .export(sinceMilliseconds: since, limit: limit))))
            case .requestHistory(let room, let handle, let scope):
                // What we lack (from a minute before the newest message we hold), within what was chosen.
                let latest = (try? store.latestTimestamp(room: room.rawValue)) ?? 0
                let since = max(latest - 60_000, scope.sinceMilliseconds ?? 0, 0)
                guard let version = engine.linkVersion(on: handle) else { break }
                // A version 1 peer knows no limit (it sends what its own bound allows).
                let limit = version >= 2 ? scope.limit : nil
                output.append(
                    .write(
                        handle, [.historyRequest(room: room, sinceMilliseconds: UInt64(since), limit: limit.map { UInt32(clamping: $0) })],
                        flushNow: false))
            case .requestSync(let room, let handle):
                let request = syncRequests[room] ?? syncRequest(room, at: now)
                syncRequests[room] = request
                output.append(.write(handle, [.syncRequest(request)], flushNow: false))
            case .sendSync(let room, let since, let marks, let peer):
                // Nothing read when the asker holds every run we hold (an idle room: each member's resync is
                // answered by each other one): what an answer would send lies within them (`syncRequest`).
                if let ours = heldRuns(room, read: false), ours.exact, SessionStateMachine.covered(ours.runs, by: marks) {
                    engine.relayAnswerNotOffered(room, to: peer.id)
                    break
                }
                let latest = (try? store.export(room: room.rawValue, since: since, limit: historyForNewcomers)) ?? []
                let lacking = engine.relayAnswer(latest, room: room, marks: marks, to: peer.id, arrivals: arrivals, at: now)
                let answer = SessionStateMachine.withinRelayLimit(lacking, limit: engine.configuration.transferLimits.maximumRelaySize)
                if answer.isEmpty {
                    engine.relayAnswerNotOffered(room, to: peer.id)
                } else {
                    output.append(.offerHistory(HistoryOffer(room: room, peer: peer, signed: true, content: .messages(answer))))
                }
            case .inviteFinished(let id, let outcome):
                output.append(.inviteFinished(id, outcome))
            case .stream(let id, let signal):
                output.append(.stream(id, signal))
            case .streamHandedOver(let acceptor, let accepted):
                output.append(.streamHandedOver(acceptor: acceptor, accepted))
            case .file(let file):
                output.append(.file(file))
            case .persist, .emit, .peerConnected, .dial, .peerDisconnected:
                break  // (done in `perform`)
            }
        }
    }

    /// What we hold of the room's recent messages (twice what a member sends, so that its window lies
    /// within ours), as a SYNC_REQUEST.
    public mutating func syncRequest(_ room: RoomID, at now: EngineTime) -> WireFrame.SyncRequest {
        let runs = heldRuns(room, read: true)?.runs ?? [:]
        let joined = (try? store.joinedAt(room: room.rawValue)) ?? nil
        let since = SessionStateMachine.relayFloor(joinedAt: joined, now: now.wall)
        return .init(room: room, sinceMilliseconds: since, marks: SessionStateMachine.syncMarks(runs: runs))
    }

    /// The runs we hold of a room's latest `2 * max(500, historyForNewcomers)` messages: kept from the last
    /// read while the store's messages have not changed since (`SessionStore.messagesChanged`); read again
    /// if `read` (nil otherwise, or if the read fails). An export for a relay answer (the latest
    /// `historyForNewcomers` since a time, in the same order) lies within them.
    mutating func heldRuns(_ room: RoomID, read: Bool) -> HeldRuns? {
        let stamp = store.messagesChanged
        if let kept = held[room], kept.stamp == stamp { return kept }
        guard read, let rows = try? store.recentSequences(room: room.rawValue, limit: 2 * max(500, historyForNewcomers)) else { return nil }
        if held.count >= 1024 { held = [:] }  // (rooms left long ago; one read each brings a room back)
        let kept = HeldRuns(stamp: stamp, runs: SessionStateMachine.syncRuns(rows), exact: rows.allSatisfy { $0.sequence >= 0 })
        held[room] = kept
        return kept
    }

    /// Every reliable message still waiting for the peer's ACK in these rooms, oldest queued first (our
    /// own signed for a peer that speaks version 2), in writes of at most 512 frames.
    private func flushOutbox(to peer: PeerID, on handle: LinkHandle, rooms: Set<String>, engine: SessionStateMachine, into output: inout [ShellOutput]) {
        guard let version = engine.linkVersion(on: handle), let queued = try? store.outbox(peerID: peer.rawValue), !queued.isEmpty else { return }
        let signed = version >= 2
        var frames: [WireFrame] = []
        for message in queued where rooms.contains(message.room) {
            let message = signed ? SessionStateMachine.signedIfOurs(message, ownID: engine.configuration.ownID, keys: engine.configuration.envelopes) : message
            guard let frame = SessionStateMachine.frame(message, reliable: true, signed: signed) else { continue }
            frames.append(frame)
            if frames.count == 512 {
                output.append(.write(handle, frames, flushNow: false))
                frames = []
            }
        }
        if !frames.isEmpty { output.append(.write(handle, frames, flushNow: false)) }
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

/// Work waiting for a sync of the store, first in first out (`SessionDriver`): each item is done once the
/// sync numbered `ticket` is.
struct SyncQueue {
    enum Work {
        /// The rest of a batch (`performLater`), and whether its writes committed.
        case batch([SessionAction], committed: Bool)
        /// A `settle()` waiter.
        case waiter(UInt64)
        /// A send of ours: its last sequence, and its waiter.
        case own(RoomID, through: Int64?, waiter: UInt64)
    }

    struct Waiting {
        var ticket: UInt64
        /// It holds frames other than ACKs.
        var frames: Bool
        var work: Work
    }

    private var items: [Waiting] = []
    private var head = 0
    private var holdingFrames = 0

    var first: Waiting? { head < items.count ? items[head] : nil }
    /// Nothing waits but acknowledgements (and waiters with no frames).
    var onlyAcknowledgementsWait: Bool { holdingFrames == 0 }

    mutating func append(_ ticket: UInt64, frames: Bool, _ work: Work) {
        items.append(Waiting(ticket: ticket, frames: frames, work: work))
        if frames { holdingFrames += 1 }
    }

    mutating func popFirst() -> Waiting? {
        guard head < items.count else { return nil }
        let item = items[head]
        if item.frames { holdingFrames -= 1 }
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, 2 * head >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return item
    }
}
