import LanchatCore
import LanchatEngine
import LanchatStore
import LanchatWire
import NIOCore

/// How the node performs the engine's actions (`perform`): the writes first, in one commit on the loop;
/// the sync of the store's log on its own thread (`StoreSync`), with the batch's I/O waiting for it in
/// order (`afterSync`, `SyncQueue`); our own messages' send-first rule (`performOwn`).
extension SessionNode {
    /// Performs the actions of our own messages (`send`, `share`): before their commit if they may go
    /// first (`mayGoFirst`, and they continue from `storedThrough`), after it otherwise. Returns once
    /// they are on disk: whether they committed (and synced), and whether they went first.
    func performOwn(_ plan: SessionStateMachine.SendPlan, _ actions: [SessionAction], in room: RoomID, mayGoFirst: Bool) async -> (committed: Bool, wentFirst: Bool) {
        let first = plan.messages.first?.sequence ?? 0
        // (Not while frames of earlier batches other than acknowledgements wait for a sync: they would be
        // overtaken. An ACK overtaken changes nothing: it only ends the peer's retransmits.)
        let ahead = mayGoFirst && afterSync.onlyAcknowledgementsWait && storedThrough[room].map { $0 + 1 == first } == true
        guard perform(actions, allOrNothing: true, sendFirst: ahead) else {
            engine.sendNotStored(plan)
            return (false, ahead)
        }
        // (A failed sync: the messages are in the store, maybe not on disk; their numbers stay used.)
        guard await settled() else { return (false, ahead) }
        if let last = plan.messages.last?.sequence { storedThrough[room] = max(storedThrough[room] ?? 0, last) }
        return (true, ahead)
    }

    // MARK: Performing the engine's actions

    /// What we hold of the room's recent messages (twice what a member sends, so that its window lies
    /// within ours), as a SYNC_REQUEST.
    func syncRequest(_ room: RoomID) -> WireFrame.SyncRequest {
        let held = (try? store.recentSequences(room: room.rawValue, limit: 2 * max(500, configuration.historyForNewcomers))) ?? []
        let joined = (try? store.joinedAt(room: room.rawValue)) ?? nil
        let since = SessionStateMachine.relayFloor(joinedAt: joined, now: Self.nowMilliseconds())
        return .init(room: room, sinceMilliseconds: since, marks: SessionStateMachine.syncMarks(held))
    }

    /// Performs a batch of actions: the writes first, in one transaction; then the rest in order. If the
    /// writes fail, what depends on them does not happen: no acknowledgement is sent (the sender keeps
    /// the message and sends it again) and no message is reported; with `allOrNothing` (a message we
    /// send) nothing happens at all. With `sendFirst` (our own messages, when
    /// `SessionStateMachine.sendAheadLimit` allows it), the frames for the peers are written and flushed
    /// before the commit, so that its sync runs while they travel and are stored. Returns whether the
    /// writes committed.
    ///
    /// With a store that syncs (`storeSync`), the commit does not wait for the disk: the sync runs on the
    /// store's thread, and the batch's I/O (frames, closes, file and stream work, answers to API calls)
    /// waits for it in `afterSync`, as does every later batch's, so that nothing overtakes an
    /// acknowledgement and everything keeps its order. Events for local programs (messages stored,
    /// members' changes) are told at once: the commit is visible to every read already; lost in a power
    /// failure before its sync, a message is sent again (it was not acknowledged) and told again.
    @discardableResult
    func perform(_ actions: [SessionAction], allOrNothing: Bool = false, sendFirst: Bool = false) -> Bool {
        guard !stopped else { return false }
        var inserted: Set<String> = []
        var committed = true
        var ticket: UInt64?
        if sendFirst {
            for case .send(let handle, let frames) in actions { openLinks[handle]?.connection.send(frames, flushNow: true) }
        }
        if actions.contains(where: { if case .persist = $0 { true } else { false } }) {
            // Acknowledgements heard (outbox removals) need no sync of their own: lost in a power failure,
            // their messages are sent again and de-duplicated. Anything else is synced before what follows.
            let durable = actions.contains { action in
                guard case .persist(let operation) = action else { return false }
                if case .acknowledge = operation { return false }
                return true
            }
            do {
                try store.transaction(durable: durable && storeSync == nil) {
                    for case .persist(let operation) in actions { try apply(operation, inserted: &inserted) }
                }
                if durable, storeSync != nil { ticket = askSync() }
                if !inserted.isEmpty { arrivals.note(inserted, at: time().monotonic) }
                scheduleCheckpoint()
            } catch {
                logger.error("cannot write to the store", metadata: ["error": "\(error)"])
                committed = false
                if allOrNothing {
                    armTimer()
                    return false
                }
            }
        }
        var later: [SessionAction] = []
        for action in actions {
            if sendFirst, case .send = action { continue }  // (written before the commit)
            switch action {
            case .persist(.insertMessage(let message, let report?)):
                guard inserted.contains(message.id) else { break }
                eventSink.yield(.message(report))
                if report.stored.kind == .file { announced(report) }
            case .persist:
                break
            case .emit(.topicMessage(let message)):
                deliver(message)
            case .emit(let event) where event.isOwnDeparture(configuration.ownID):
                eventSink.yield(event)
                endTopicsOutsideRooms()
            case .emit(let event):
                eventSink.yield(event)
            case .peerConnected(let peer, let handle):
                guard let link = openLinks[handle] else { break }
                links[peer.id] = link
            case .dial(let peer):
                dialRequestSink.yield(peer)
            case .peerDisconnected:
                break
            default:
                later.append(action)
            }
        }
        // Nothing leaves before what was committed before it is on disk.
        if let after = ticket ?? syncPending {
            if !later.isEmpty {
                afterSync.append(after, frames: !later.allSatisfy(Self.sendsOnlyAcknowledgements)) { [committed] synced in self.performLater(later, committed: committed && synced) }
            }
        } else {
            performLater(later, committed: committed)
        }
        armTimer()
        return committed
    }

    /// Whether `action` sends ACKs and nothing else (what a failed commit does not send, and what may be
    /// overtaken by a send of ours that goes first).
    static func sendsOnlyAcknowledgements(_ action: SessionAction) -> Bool {
        guard case .send(_, let frames) = action else { return false }
        return frames.allSatisfy { if case .ack = $0 { true } else { false } }
    }

    /// The rest of a batch (`perform`): its frames and other I/O, once its writes are on disk.
    private func performLater(_ actions: [SessionAction], committed: Bool) {
        guard !stopped else { return }
        // A resync asks every member of a room at once: what we hold is read once per room.
        var syncRequests: [RoomID: WireFrame.SyncRequest] = [:]
        for action in actions {
            if !committed, Self.sendsOnlyAcknowledgements(action) { continue }
            switch action {
            case .send(let handle, let frames):
                openLinks[handle]?.connection.send(frames)
            case .sendUnreliable(let handle, let frames):
                guard let link = openLinks[handle], link.connection.isWritable else { unreliableDrops += 1; continue }
                link.connection.send(frames)
            case .close(let handle, let reason, let text):
                openLinks[handle]?.connection.leave(reason, text: text)
            case .flushOutbox(let peer, let handle, let rooms):
                flushOutbox(to: peer, on: handle, rooms: Set(rooms.map(\.rawValue)))
            case .sendHistory(let room, let since, let peer, let signed, let limit):
                exportHistory(room: room, since: since, limit: min(configuration.historyForNewcomers, limit ?? .max), to: peer, signed: signed)
            case .requestHistory(let room, let handle, let scope):
                // What we lack (from a minute before the newest message we hold), within what was chosen.
                let latest = (try? store.latestTimestamp(room: room.rawValue)) ?? 0
                let since = max(latest - 60_000, scope.sinceMilliseconds ?? 0, 0)
                // A version 1 peer knows no limit (it sends what its own bound allows).
                let limit = openLinks[handle].flatMap { $0.connection.session.version >= 2 ? scope.limit : nil }
                openLinks[handle]?.connection.send([.historyRequest(room: room, sinceMilliseconds: UInt64(since), limit: limit.map { UInt32(clamping: $0) })])
            case .requestSync(let room, let handle):
                let request = syncRequests[room] ?? syncRequest(room)
                syncRequests[room] = request
                openLinks[handle]?.connection.send([.syncRequest(request)])
            case .sendSync(let room, let since, let marks, let peer):
                let latest = (try? store.export(room: room.rawValue, since: since, limit: configuration.historyForNewcomers)) ?? []
                let lacking = engine.relayAnswer(latest, room: room, marks: marks, to: peer.id, arrivals: arrivals, at: time())
                sendHistory(SessionStateMachine.withinRelayLimit(lacking, limit: engine.configuration.transferLimits.maximumRelaySize),
                            room: room, to: peer, signed: true)
            case .inviteFinished(let id, let outcome):
                inviteWaiters.removeValue(forKey: id)?.resume(returning: outcome)
            case .stream(let id, let signal):
                streamSignal(id, signal)
            case .streamHandedOver(let acceptor, let accepted):
                streamHandedOver(acceptor, accepted)
            case .file(let file):
                performFile(file)
            case .persist, .emit, .peerConnected, .dial, .peerDisconnected:
                break  // (done in `perform`)
            }
        }
    }

    // MARK: The store's syncs

    /// Asks for a sync of everything committed so far; returns its number.
    private func askSync() -> UInt64 {
        syncsAsked += 1
        startSync()
        return syncsAsked
    }

    /// Starts a sync of what was committed until now, unless one runs (then the next covers these).
    private func startSync() {
        guard !stopped, !syncRunning, syncedThrough < syncsAsked, let storeSync else { return }
        syncRunning = true
        let target = syncsAsked
        storeSync.sync(on: eventLoop).whenComplete { [weak self] result in
            self?.assumeIsolated { node in
                node.syncRunning = false
                var synced = true
                if case .failure(let error) = result {
                    // The writes are in the store, perhaps not on disk: nothing is acknowledged for them.
                    node.logger.error("cannot sync the store", metadata: ["error": "\(error)"])
                    synced = false
                }
                node.syncedThrough = target
                while let first = node.afterSync.first, first.ticket <= target {
                    _ = node.afterSync.popFirst()
                    first.work(synced)
                }
                node.startSync()
                node.armTimer()
            }
        }
    }

    /// The last sync asked for, if it is not done.
    private var syncPending: UInt64? { syncedThrough < syncsAsked ? syncsAsked : nil }

    /// Waits until what was performed so far is done (its syncs included); returns whether they synced.
    func settled() async -> Bool {
        guard !stopped, let last = syncPending else { return !stopped }
        return await withCheckedContinuation { waiter in afterSync.append(last, frames: false) { waiter.resume(returning: $0) } }
    }

    private func apply(_ operation: StoreOperation, inserted: inout Set<String>) throws {
        if case .rememberPeer(let label, let id) = operation {
            // Its own file, not the database: a failure is logged, and the peer is asked about again.
            do { try knownPeers.remember(label: label, id: id) } catch {
                logger.error("cannot save the known-peers record", metadata: ["error": "\(error)"])
            }
        } else if try store.apply(operation, now: Self.nowMilliseconds()), case .insertMessage(let message, _) = operation {
            inserted.insert(message.id)
        }
    }

    private func flushOutbox(to peer: PeerID, on handle: LinkHandle, rooms: Set<String>) {
        guard let link = openLinks[handle], let queued = try? store.outbox(peerID: peer.rawValue), !queued.isEmpty else { return }
        let signed = link.connection.session.version >= 2
        var frames: [WireFrame] = []
        for message in queued where rooms.contains(message.room) {
            let message = signed ? SessionStateMachine.signedIfOurs(message, ownID: configuration.ownID, keys: configuration.envelopes) : message
            guard let frame = SessionStateMachine.frame(message, reliable: true, signed: signed) else { continue }
            frames.append(frame)
            if frames.count == 512 {
                link.connection.send(frames)
                frames = []
            }
        }
        if !frames.isEmpty { link.connection.send(frames) }
    }
}


/// Work waiting for a sync of the store, first in first out (`SessionNode.afterSync`): each item runs
/// once the sync numbered `ticket` is done, with whether it succeeded.
struct SyncQueue {
    struct Waiting {
        var ticket: UInt64
        /// It holds frames other than ACKs.
        var frames: Bool
        var work: (_ synced: Bool) -> Void
    }

    private var items: [Waiting] = []
    private var head = 0
    private var holdingFrames = 0

    var first: Waiting? { head < items.count ? items[head] : nil }
    /// Nothing waits but acknowledgements (and waiters with no frames).
    var onlyAcknowledgementsWait: Bool { holdingFrames == 0 }

    mutating func append(_ ticket: UInt64, frames: Bool, _ work: @escaping (_ synced: Bool) -> Void) {
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
