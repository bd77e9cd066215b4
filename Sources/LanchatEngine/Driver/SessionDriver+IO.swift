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
            if let io = Self.plainIO(action) {
                output.append(io)
                continue
            }
            switch action {
            case .flushOutbox, .requestHistory, .sendSync:
                // What the store read goes back to the engine, which says what it makes (an input, not a
                // question asked in the middle of the I/O).
                output += engine.storeRead(read(index), for: action, arrivals: arrivals, at: now).compactMap(Self.plainIO)
            case .sendHistory(let room, let since, let peer, let layout, let limit):
                let limit = min(historyForNewcomers, limit ?? .max)
                output.append(.offerHistory(HistoryOffer(room: room, peer: peer, layout: layout, content: .export(sinceMilliseconds: since, limit: limit))))
            case .requestSync(let room, let handle):
                guard case .syncRequest(let held, let joined) = read(index) else { break }
                let since = SessionStateMachine.relayFloor(joinedAt: joined, now: now.wall)
                let request = WireFrame.SyncRequest(room: room, sinceMilliseconds: since, marks: SessionStateMachine.syncMarks(runs: held?.runs ?? [:]))
                output.append(.write(handle, [.syncRequest(request)], flushNow: false))
            default:
                break  // (.persist, .emit, .peerConnected, .dial, .peerDisconnected: told at the commit)
            }
        }
        if let own = batch.own, committed, let last = own.plan.messages.last?.sequence {
            storedThrough[own.room] = max(storedThrough[own.room] ?? 0, last)
        }
        if let waiter = batch.waiter { output.append(.settled(waiter: waiter, batch.committed ? .stored(synced: committed) : .notStored)) }
    }

    /// The output of an action that is plain I/O (nil: it is not: it needs a read of the store, or is
    /// told at the commit).
    static func plainIO(_ action: SessionAction) -> ShellOutput? {
        switch action {
        case .send(let handle, let frames): .write(handle, frames, flushNow: false)
        case .sendUnreliable(let handle, let frames): .writeIfRoom(handle, frames)
        case .close(let handle, let reason, let text): .close(handle, reason, text)
        case .offerRelayAnswer(let room, let messages, let peer, let layout):
            .offerHistory(HistoryOffer(room: room, peer: peer, layout: layout, content: .messages(messages)))
        case .inviteFinished(let id, let outcome): .inviteFinished(id, outcome)
        case .stream(let id, let signal): .stream(id, signal)
        case .streamHandedOver(let acceptor, let accepted): .streamHandedOver(acceptor: acceptor, accepted)
        case .file(let file): .file(file)
        case .flushOutbox, .sendHistory, .requestHistory, .requestSync, .sendSync, .persist, .emit, .peerConnected, .dial, .peerDisconnected,
            .checkSeal:
            nil
        }
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
