import LanchatCore
import LanchatWire

/// One incoming transfer, whole: the offer looked up in the store, its part file opened, chunks handed
/// to the shell to write in order, progress once written, the digest checked, the file placed (or a
/// room's history imported). Every input is a method that returns what to do (`Action`); the engine
/// (`SessionStateMachine.performIncoming`) turns those into frames, file work, records and events, and
/// forgets the transfer once it says it ended.
///
/// Offsets are bytes of the resource; `RESOURCE_ACCEPT(offset)` is both "start from here" and, later,
/// "I have written this much" (flow control and the resume point). Progress counts bytes written, not
/// bytes arrived: a disk slower than the network then holds the sender back instead of filling the
/// receiver's memory, and a sender far past what was reported (`TransferLimits.maximumAhead`) is
/// stopped. The receiver reports at least every `progressEvery` bytes; a sender's window is at least
/// twice that, so neither waits for the other.
struct IncomingTransfer: Equatable, Sendable {
    /// The part file, once opened and accepted.
    private struct Part: Equatable, Sendable {
        /// The name it gets (`SafeFileName`).
        let name: String
        /// What the part file held when it was opened (the rate counts what came after).
        let startOffset: UInt64
        /// The connection went: no frame goes to the sender until it offers the transfer again.
        var interrupted = false
    }

    /// Bytes coming.
    private struct Receiving: Equatable, Sendable {
        /// Bytes that came (handed to the shell to write); bytes the shell says it wrote.
        var received: UInt64
        var written: UInt64
        /// The last offset told the sender (RESOURCE_ACCEPT), and the last reported as a transfer event.
        var reported: UInt64
        var reportedEvent: UInt64
        /// The SHA-256 the file must have; nil until RESOURCE_DIGEST comes (an offer that says it follows).
        var expected: [UInt8]?
        /// When a byte last came or was written (monotonic milliseconds; `TransferLimits.stallTimeout`).
        var lastProgress: Int64
    }

    private enum State: Equatable, Sendable {
        /// Offered: the store is asked what it knows of the id (received before, cancelled, a part file).
        case lookingUp
        /// Taken: the shell makes the part file ready and says how much room there is. `maximumSize`: the
        /// largest its kind may be (a file, a history, a relay answer), checked again at the open.
        case opening(maximumSize: UInt64)
        /// Accepted: chunks come and are written; once every byte is written and the digest is known,
        /// it goes on to verifying.
        case receiving(Part, Receiving)
        /// Every byte is written: the shell hashes the part file.
        case verifying(Part, expected: [UInt8])
        /// The digest matched: the shell places the file (or imports the history).
        case placing(Part)
        /// Over: what it had come to, for the report (`name` nil: refused before it had one).
        case ended(name: String?, startOffset: UInt64, done: UInt64)
    }

    let peer: SessionPeer
    let offer: WireFrame.ResourceOffer
    /// When it was offered (monotonic milliseconds).
    let started: Int64
    private let limits: TransferLimits
    private var state: State = .lookingUp

    init(peer: SessionPeer, offer: WireFrame.ResourceOffer, limits: TransferLimits, at now: Int64) {
        self.peer = peer
        self.offer = offer
        self.limits = limits
        self.started = now
    }

    // MARK: What it is

    var stage: Stage {
        switch state {
        case .lookingUp: .lookingUp
        case .opening: .opening
        case .receiving: .receiving
        case .verifying: .verifying
        case .placing: .placing
        case .ended: .ended
        }
    }

    /// Accepted and not ended (it has a part file and a name; `lanchat transfers` lists it).
    var isUnderWay: Bool { part != nil }

    /// The connection went, and it waits for the sender's new offer.
    var interrupted: Bool { part?.interrupted ?? false }

    /// The name it gets (nil before it was accepted, or if it was refused).
    var name: String? {
        if case .ended(let name, _, _) = state { return name }
        return part?.name
    }

    /// Bytes that came.
    var done: UInt64 {
        switch state {
        case .lookingUp, .opening: 0
        case .receiving(_, let receiving): receiving.received
        case .verifying, .placing: offer.size
        case .ended(_, _, let done): done
        }
    }

    var startOffset: UInt64 {
        if case .ended(_, let startOffset, _) = state { return startOffset }
        return part?.startOffset ?? 0
    }

    /// Bytes still to come (their free space is spoken for).
    var remaining: UInt64 {
        guard case .receiving(_, let receiving) = state else { return 0 }
        return offer.size - receiving.received
    }

    /// Since when it has waited for a byte, if the stall timer watches it (receiving on a live connection).
    var watchedSince: Int64? {
        guard case .receiving(let part, let receiving) = state, !part.interrupted else { return nil }
        return receiving.lastProgress
    }

    /// What is wrong with it (nil: nothing; see `SessionStateMachine.consistencyFaults`).
    var fault: String? {
        guard case .receiving(_, let receiving) = state, receiving.written > receiving.received else { return nil }
        return "wrote \(receiving.written) bytes of \(receiving.received) received"
    }

    private var part: Part? {
        switch state {
        case .receiving(let part, _), .verifying(let part, _), .placing(let part): part
        case .lookingUp, .opening, .ended: nil
        }
    }

    // MARK: Inputs

    /// What the store knows of the id. `maximumSize`: the largest this kind of resource may be.
    mutating func lookedUp(_ record: IncomingRecord, maximumSize: UInt64) -> [Action] {
        guard state == .lookingUp else { return [] }
        switch record {
        case .received:
            // Received before; the sender missed our answer (the connection dropped): say it again.
            return answer(.complete, "")
        case .cancelled:
            return answer(.cancelled, "cancelled by the receiver")
        case .none, .partial:
            break
        }
        // The name and the size are checked before any file is made for them.
        if case .failure(let refusal) = Self.check(offer, maximumSize: maximumSize, storageProblem: nil, freeBytes: .max, keptFree: 0, held: 0) {
            return end(.refused, refusal.text, tell: true)
        }
        state = .opening(maximumSize: maximumSize)
        return [.openPart(resume: record == .partial)]
    }

    /// Refused before anything was made for it (too many at once): answered, and forgotten.
    mutating func refuse(_ text: String) -> [Action] {
        guard state == .lookingUp else { return [] }
        return answer(.refused, text)
    }

    /// The part file is ready (holding `held` bytes, hashed), or cannot be. `reserved`: the bytes other
    /// transfers still expect (their room is spoken for).
    mutating func partOpened(_ result: PartOpening, reserved: UInt64, at now: Int64) -> [Action] {
        guard case .opening(let maximumSize) = state else { return [] }
        var free: UInt64 = 0
        var problem: String?
        var held: UInt64 = 0
        var path = ""
        switch result {
        case .opened(let opened, let bytes, let freeBytes):
            path = opened
            held = bytes
            free = freeBytes > reserved ? freeBytes - reserved : 0
        case .unusable(let text):
            problem = text
        case .failed(let text):
            // Ended like any other transfer: the sender is told, and `lanchat transfers` lists it.
            return end(.failed, text, tell: true)
        }
        var actions: [Action] = [.watchStalls]
        switch Self.check(offer, maximumSize: maximumSize, storageProblem: problem, freeBytes: free, keptFree: limits.keptFree, held: held) {
        case .failure(let refusal):
            return actions + end(.refused, refusal.text, tell: true)
        case .success(let accepted):
            let part = Part(name: accepted.name, startOffset: accepted.resume)
            var receiving = Receiving(
                received: accepted.resume, written: accepted.resume, reported: accepted.resume, reportedEvent: accepted.resume,
                expected: offer.digestFollows ? nil : offer.sha256, lastProgress: now)
            if offer.kind == .file { actions.append(.save(partPath: path, name: accepted.name)) }
            actions += accept(accepted.resume, part, &receiving)
            actions += verifyIfReady(part, &receiving)
            actions.append(.progress)
            return actions
        }
    }

    /// The sender offered it again (a new connection after a drop): go on from what is held (no byte is
    /// asked for twice). Nothing if the offer is not the same (peer, size, digest) or it had not started.
    mutating func offeredAgain(_ again: WireFrame.ResourceOffer, by sender: PeerID, at now: Int64) -> [Action] {
        guard sender == peer.id, again.size == offer.size, again.sha256 == offer.sha256 else { return [] }
        switch state {
        case .receiving(var part, var receiving):
            part.interrupted = false
            receiving.lastProgress = now
            var actions: [Action] = [.watchStalls]
            receiving.reportedEvent = receiving.received
            if receiving.received < offer.size {
                receiving.reported = receiving.received
                actions += accept(receiving.received, part, &receiving)
            } else if receiving.expected == nil {
                // Every byte is here but the digest was lost with the connection: the sender sends it
                // again after an accept (at the end: nothing else is sent).
                actions += accept(offer.size, part, &receiving)
            }
            state = .receiving(part, receiving)
            return actions + [.progress]
        case .verifying(var part, let expected):
            // The outcome goes to the new connection when known.
            part.interrupted = false
            state = .verifying(part, expected: expected)
            return [.watchStalls, .progress]
        case .placing(var part):
            part.interrupted = false
            state = .placing(part)
            return [.watchStalls, .progress]
        case .lookingUp, .opening, .ended:
            return []
        }
    }

    /// A chunk came. Chunks come in order and not past the size; after a resume, bytes already held may
    /// come again (chunks in flight on the old connection): those are skipped, and `write` says which.
    /// Only new bytes count as progress for the stall timer (a sender that sends nothing new, or empty
    /// chunks, holds no slot, part file or reservation for ever). The window counts from what was told to
    /// the sender and from what was written, whichever is less: an offer made again is told what came,
    /// which may not be written yet, so offers made again never let unwritten bytes pile up past it.
    mutating func chunk(offset: UInt64, count: Int, at now: Int64) -> [Action] {
        guard case .receiving(let part, var receiving) = state else { return [] }
        guard receiving.received < offer.size else { return [] }  // every byte came already
        guard offset <= receiving.received else {
            return end(.failed, "chunk at \(offset), expected \(receiving.received)", tell: true)
        }
        let upTo = offset + UInt64(count)
        guard upTo <= offer.size else {
            return end(.failed, "the sender sent more than the \(offer.size) bytes it offered", tell: true)
        }
        guard upTo <= min(receiving.reported, receiving.written) + limits.maximumAhead else {
            return end(.failed, "the sender sent past its window (more than \(limits.maximumAhead) bytes ahead of what was written)", tell: true)
        }
        guard upTo > receiving.received else { return [] }  // all held already
        let start = receiving.received
        receiving.received = upTo
        receiving.lastProgress = now
        let write = Action.write(offset: start, skip: Int(start - offset), count: Int(upTo - start))
        return [write] + verifyIfReady(part, &receiving)
    }

    /// The shell wrote every byte before `offset`: progress every `progressEvery` bytes (not at the end:
    /// the verdict tells the sender that), and the hash once every byte is written.
    mutating func written(upTo offset: UInt64, at now: Int64) -> [Action] {
        // Past what this attempt received: a write of an earlier attempt under this id, answered late.
        guard case .receiving(let part, var receiving) = state, offset <= receiving.received else { return [] }
        if offset > receiving.written { receiving.lastProgress = now }
        receiving.written = max(receiving.written, offset)
        var actions: [Action] = []
        let progress = receiving.written
        if !part.interrupted, receiving.received < offer.size, progress > receiving.reported,
            progress - receiving.reported >= max(1, limits.progressEvery), progress < offer.size
        {
            receiving.reported = progress
            actions += accept(progress, part, &receiving)
        }
        return actions + verifyIfReady(part, &receiving)
    }

    /// RESOURCE_DIGEST: the SHA-256 the sender computed while sending (an offer that said it follows).
    mutating func digest(_ sha256: [UInt8]) -> [Action] {
        guard offer.digestFollows, case .receiving(let part, var receiving) = state, receiving.expected == nil else { return [] }
        receiving.expected = sha256
        return verifyIfReady(part, &receiving)
    }

    /// The part file's SHA-256.
    mutating func hashed(_ digest: [UInt8]) -> [Action] {
        guard case .verifying(let part, let expected) = state else { return [] }
        guard digest == expected else {
            return end(.failed, "the file's SHA-256 does not match the offer; the partial file was removed", tell: true)
        }
        state = .placing(part)
        return [.place(name: part.name)]
    }

    /// The file is in place (or the history imported).
    mutating func placed() -> [Action] {
        guard case .placing(let part) = state else { return [] }
        state = .ended(name: part.name, startOffset: part.startOffset, done: offer.size)
        return [.complete]
    }

    /// The person (`byPeer` false) or the sender cancelled: too late once it is being placed.
    mutating func cancel(byPeer: Bool) -> [Action] {
        switch state {
        case .placing, .ended: return []
        default: return end(.cancelled, byPeer ? "cancelled by the sender" : "cancelled by the receiver", tell: true)
        }
    }

    /// The sender's RESOURCE_END: cancelled (answered, as a cancel is), or it gave up (its file failed,
    /// or it found our offset bad: said as it said it). Every byte of a shared file here: its digest
    /// decides, not what its sender says now (a server gives up on a receiver that copies a large file
    /// for long).
    mutating func senderEnded(_ status: WireFrame.ResourceEnd.Status, text: String) -> [Action] {
        if offer.kind == .shared, stage == .verifying || stage == .placing { return [] }
        if status == .cancelled { return cancel(byPeer: true) }
        guard stage != .ended else { return [] }
        return end(status == .refused ? .refused : .failed, text.isEmpty ? "the sender ended it" : "the sender: \(text)", tell: false)
    }

    /// Writing, hashing or placing failed (the disk filled up).
    mutating func fileFailed(_ reason: String) -> [Action] {
        switch state {
        case .placing: end(.failed, reason, tell: true)
        case .receiving, .verifying: end(.failed, "the receiver cannot write the file: \(reason)", tell: true)
        case .lookingUp, .opening, .ended: []
        }
    }

    /// The connection from the sender ended: a file waits for the sender's new offer (its part file
    /// kept); a history or shared file being received ends with it; one not started is forgotten.
    mutating func connectionLost(_ reason: String) -> [Action] {
        switch state {
        case .lookingUp, .opening:
            let opening = if case .opening = state { true } else { false }
            state = .ended(name: nil, startOffset: 0, done: 0)
            return [.forget(reason: reason, partOpening: opening)]
        case .receiving where offer.kind.endsWithConnection:
            return end(.failed, reason, tell: true)
        case .receiving(var part, let receiving):
            part.interrupted = true
            state = .receiving(part, receiving)
        case .verifying(var part, let expected):
            part.interrupted = true
            state = .verifying(part, expected: expected)
        case .placing(var part):
            part.interrupted = true
            state = .placing(part)
        case .ended:
            return []
        }
        return [.interrupted(reason: reason)]
    }

    /// The stall timer: receiving on a live connection with no byte come or written for `stallTimeout`,
    /// it fails (a member that offers and never sends must not keep a slot and its reservation).
    mutating func stallTimerFired(at now: Int64) -> [Action] {
        guard let since = watchedSince, since + limits.stallTimeout <= now else { return [] }
        return end(.failed, "no data for \(limits.stallTimeout / 1000) s", tell: true)
    }

    // MARK: Steps

    /// RESOURCE_ACCEPT(offset) (none while the connection is gone), and a transfer event every
    /// `reportEvery` bytes.
    private func accept(_ offset: UInt64, _ part: Part, _ receiving: inout Receiving) -> [Action] {
        var actions: [Action] = part.interrupted ? [] : [.sendAccept(offset)]
        if offset >= receiving.reportedEvent + limits.reportEvery {
            receiving.reportedEvent = offset
            actions.append(.progress)
        }
        return actions
    }

    /// Keeps `receiving`, or goes on to verifying once every byte is written and the digest is known.
    private mutating func verifyIfReady(_ part: Part, _ receiving: inout Receiving) -> [Action] {
        guard receiving.written == offer.size, receiving.received == offer.size, let expected = receiving.expected else {
            state = .receiving(part, receiving)
            return []
        }
        state = .verifying(part, expected: expected)
        return [.verify]
    }

    private mutating func answer(_ status: WireFrame.ResourceEnd.Status, _ text: String) -> [Action] {
        state = .ended(name: nil, startOffset: 0, done: 0)
        return [.answer(status, text: text)]
    }

    private mutating func end(_ outcome: TransferState, _ text: String, tell: Bool) -> [Action] {
        state = .ended(name: name, startOffset: startOffset, done: done)
        return [.end(outcome, text: text, tell: tell)]
    }
}
