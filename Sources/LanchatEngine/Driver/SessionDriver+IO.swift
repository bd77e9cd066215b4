import LanchatCore
import LanchatWire

extension SessionDriver {
    /// The rest of a batch: its frames and other I/O, once its writes are on disk, with what the store
    /// read for it.
    mutating func performLater(_ batch: Batch, engine: inout SessionStateMachine, at now: EngineTime, into output: inout [ShellOutput]) {
        // (After a failed sync nothing counts as synced: no ACK leaves.)
        let committed = batch.committed && (batch.syncTicket == nil || !syncFailed)
        func read(_ index: Int) -> StoreReadResult? {
            guard let slot = batch.readSlots[index], let reads = batch.answer?.reads, slot < reads.count else { return nil }
            return reads[slot]
        }
        for (index, action) in batch.actions.enumerated() {
            if !committed, Self.sendsOnlyAcknowledgements(action) { continue }
            switch action {
            case .send(let handle, let frames):
                output.append(.write(handle, frames, flushNow: false))
            case .sendUnreliable(let handle, let frames):
                output.append(.writeIfRoom(handle, frames))
            case .close(let handle, let reason, let text):
                output.append(.close(handle, reason, text))
            case .flushOutbox(_, let handle, let rooms):
                guard case .messages(let queued?) = read(index) else { break }
                flushOutbox(queued, on: handle, rooms: Set(rooms.map(\.rawValue)), engine: engine, into: &output)
            case .sendHistory(let room, let since, let peer, let signed, let limit):
                let limit = min(historyForNewcomers, limit ?? .max)
                output.append(.offerHistory(HistoryOffer(room: room, peer: peer, signed: signed, content: .export(sinceMilliseconds: since, limit: limit))))
            case .requestHistory(let room, let handle, let scope):
                // What we lack (from a minute before the newest message we hold), within what was chosen.
                guard case .timestamp(let latest) = read(index) else { break }
                let since = max((latest ?? 0) - 60_000, scope.sinceMilliseconds ?? 0, 0)
                guard let version = engine.linkVersion(on: handle) else { break }
                // A version 1 peer knows no limit (it sends what its own bound allows).
                let limit = version >= 2 ? scope.limit : nil
                output.append(
                    .write(
                        handle, [.historyRequest(room: room, sinceMilliseconds: UInt64(since), limit: limit.map { UInt32(clamping: $0) })],
                        flushNow: false))
            case .requestSync(let room, let handle):
                guard case .syncRequest(let held, let joined) = read(index) else { break }
                let since = SessionStateMachine.relayFloor(joinedAt: joined, now: now.wall)
                let request = WireFrame.SyncRequest(room: room, sinceMilliseconds: since, marks: SessionStateMachine.syncMarks(runs: held?.runs ?? [:]))
                output.append(.write(handle, [.syncRequest(request)], flushNow: false))
            case .sendSync(let room, _, let marks, let peer):
                // Nothing was read when the asker holds every run we hold (an idle room: each member's
                // resync is answered by each other one): what an answer would send lies within them.
                guard case .relayAnswer(_, let latest) = read(index), let latest else {
                    engine.relayAnswerNotOffered(room, to: peer.id)
                    break
                }
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
                break  // (told at the commit)
            }
        }
        if let own = batch.own, committed, let last = own.plan.messages.last?.sequence {
            storedThrough[own.room] = max(storedThrough[own.room] ?? 0, last)
        }
        if let waiter = batch.waiter { output.append(.settled(waiter: waiter, batch.committed ? .stored(synced: committed) : .notStored)) }
    }

    /// Every reliable message still waiting for the peer's ACK in these rooms, oldest queued first (our
    /// own signed for a peer that speaks version 2), in writes of at most 512 frames.
    private func flushOutbox(
        _ queued: [StoredMessage], on handle: LinkHandle, rooms: Set<String>, engine: SessionStateMachine, into output: inout [ShellOutput]
    ) {
        guard let version = engine.linkVersion(on: handle), !queued.isEmpty else { return }
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
}

/// A batch of the engine's actions on its way through the driver (`SessionDriver`).
struct Batch {
    /// A send of ours: its plan and room.
    struct Own {
        var plan: SessionStateMachine.SendPlan
        var room: RoomID
    }

    /// Its actions (without the sends that went first).
    var actions: [SessionAction]
    var allOrNothing = false
    var own: Own?
    var waiter: UInt64?
    /// It holds frames other than ACKs (what a send of ours that goes first would overtake).
    var frames = false
    /// Which read of the store's answer each action uses (by the action's index).
    var readSlots: [Int: Int] = [:]
    /// The store request asked for it (nil: none) and its answer.
    var ticket: UInt64?
    var answer: StoreAnswer?
    /// Told: its commit's outcome is known and its reports and events went out.
    var told = false
    var committed = true
    /// An `allOrNothing` batch whose writes failed: nothing more of it is done.
    var dropped = false
    /// The sync its I/O waits for (nil: none).
    var syncTicket: UInt64?
}

/// The driver's batches, first in first out, with two cursors: the next to tell, and the first not done.
struct BatchQueue {
    private var items: [Batch] = []
    private var head = 0
    private var toldThrough = 0
    private var holdingFrames = 0

    var isEmpty: Bool { head == items.count }
    var first: Batch? { head < items.count ? items[head] : nil }
    /// Every batch queued was told.
    var allTold: Bool { toldThrough == items.count }
    /// Nothing waits but acknowledgements (and waiters with no frames).
    var onlyAcknowledgementsWait: Bool { holdingFrames == 0 }
    /// The first batch not told.
    var nextToTell: Int? { toldThrough < items.count ? toldThrough : nil }

    subscript(index: Int) -> Batch {
        get { items[index] }
        set { items[index] = newValue }
    }

    mutating func toldOne() { toldThrough += 1 }

    mutating func append(_ batch: Batch) {
        items.append(batch)
        if batch.told, toldThrough == items.count - 1 { toldThrough += 1 }
        if batch.frames { holdingFrames += 1 }
    }

    /// Puts the store's answer on the batch that asked for it.
    mutating func answered(_ answer: StoreAnswer) {
        for index in toldThrough..<items.count where items[index].ticket == answer.ticket {
            items[index].answer = answer
            return
        }
    }

    mutating func popFirst() -> Batch? {
        guard head < items.count else { return nil }
        let item = items[head]
        items[head] = Batch(actions: [])  // (its frames, file data and read answers go now, not at the next compaction)
        if item.frames { holdingFrames -= 1 }
        head += 1
        if toldThrough < head { toldThrough = head }
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
            toldThrough = 0
        } else if head >= 1024, 2 * head >= items.count {
            items.removeFirst(head)
            toldThrough -= head
            head = 0
        }
        return item
    }
}
