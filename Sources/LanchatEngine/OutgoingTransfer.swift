import LanchatCore
import LanchatWire

/// One outgoing transfer, whole: offered, accepted from where the receiver holds, read and sent a chunk
/// at a time within a window past what the receiver acknowledged, its digest, offered again on the next
/// connection (the receiver says where to go on), ended. Every input is a method that returns what to do
/// (`Action`); the engine (`SessionStateMachine.performOutgoing`) turns those into frames, file work,
/// records, timers and events, and forgets the transfer once it says it ended.
///
/// `RESOURCE_ACCEPT(offset)`: the first on a connection sets where to (re)start; later ones report
/// progress (bytes the receiver wrote). The window is at least twice the receiver's `progressEvery`, so
/// neither end waits for the other.
struct OutgoingTransfer: Equatable, Sendable {
    enum Action: Equatable, Sendable {
        /// RESOURCE_OFFER on the connection that serves the peer.
        case sendOffer
        /// Ask the shell for `count` bytes at `offset` (hashing in order; `count` 0 once every byte is
        /// sent: only the digest). Answer `fileRead`.
        case read(offset: UInt64, count: Int)
        /// Send the bytes read (RESOURCE_CHUNK at `offset`).
        case sendChunk(offset: UInt64)
        /// RESOURCE_DIGEST: the file's SHA-256.
        case sendDigest([UInt8])
        /// Keep the upper bound of what was sent (written ahead: a crash never under-counts what is
        /// sent twice), or what was sent twice.
        case saveSentMark(UInt64)
        case saveResent(UInt64)
        /// Watch it: the outgoing transfers' timer no later than `at` (monotonic milliseconds).
        case watch(at: Int64)
        /// A transfer event: where it is (`error`: what happened).
        case progress(error: String?)
        /// Ended: `told` is said to the receiver (RESOURCE_END, failed or cancelled), then the file is
        /// closed and the outcome kept (`cancelledHere`: the receiver is told again until it answers).
        case end(TransferState, told: String?, error: String?, cancelledHere: Bool)
    }

    private enum State: Equatable, Sendable {
        /// Offered on the connection that serves the peer (`since`, monotonic milliseconds), waiting for
        /// its first RESOURCE_ACCEPT.
        case offered(since: Int64)
        /// Accepted on this connection: `sent` bytes handed to it; the receiver last acknowledged more at
        /// `progressAt`.
        case active(sent: UInt64, progressAt: Int64)
        /// The peer is not connected: offered again when it is.
        case waiting
        /// Over: complete, refused, failed or cancelled.
        case ended(TransferState)
    }

    let peer: SessionPeer
    let file: OfferedFile
    let offer: WireFrame.ResourceOffer
    /// A history export or a shared file served: not saved, not resumed (it ends with its connection).
    let ephemeral: Bool
    /// An answer to a SYNC_REQUEST (relay): one at a time per member and room.
    let relayAnswer: Bool
    private let limits: TransferLimits
    private var state: State
    /// What the receiver last said it wrote (kept across connections: what is shown as done).
    private(set) var acknowledged: UInt64 = 0
    /// The furthest byte ever handed to a connection (across resumes and, by `sentMark`, restarts), and
    /// the bytes sent more than once (each resume from below it adds the difference).
    private var highestSent: UInt64
    private(set) var resent: UInt64
    /// The store's upper bound of what was sent.
    private var sentMark: UInt64
    /// The file's SHA-256, once known (given with the offer, or once the shell hashed every byte).
    private(set) var digest: [UInt8]?
    /// Counts connections: a read asked for on an earlier one is not sent on this one.
    private var attempt = 0
    /// The connection (`attempt`) a read under way was asked for: one read at a time.
    private var reading: Int?
    /// Its receiver accepted it before (on an earlier connection, or before a restart): offered again,
    /// it may be busy checking and placing what it holds, and answers only then.
    private var everAccepted: Bool
    /// When it was last accepted (monotonic milliseconds), and from where: the rate counts from there.
    private(set) var started: Int64
    private(set) var startOffset: UInt64 = 0

    /// A new offer (on the connection that serves `peer`), at `now`.
    init(
        peer: SessionPeer, file: OfferedFile, offer: WireFrame.ResourceOffer, ephemeral: Bool, relayAnswer: Bool, limits: TransferLimits,
        at now: Int64
    ) {
        self.peer = peer
        self.file = file
        self.offer = offer
        self.ephemeral = ephemeral
        self.relayAnswer = relayAnswer
        self.limits = limits
        self.state = .offered(since: now)
        self.highestSent = 0
        self.resent = 0
        self.sentMark = 0
        self.digest = offer.digestFollows ? nil : offer.sha256
        self.everAccepted = false
        self.started = now
    }

    /// After a restart: one that had not ended waits for its peer. `sentMark`: what an earlier run may
    /// have sent; `resent`: what it sent twice.
    init(restored peer: SessionPeer, file: OfferedFile, offer: WireFrame.ResourceOffer, sentMark: UInt64, resent: UInt64, limits: TransferLimits) {
        self.init(peer: peer, file: file, offer: offer, ephemeral: false, relayAnswer: false, limits: limits, at: 0)
        self.state = .waiting
        self.highestSent = min(sentMark, file.size)
        self.resent = resent
        self.sentMark = sentMark
        self.everAccepted = sentMark > 0
        // (Its digest, if the offer has it, is not sent again after an accept: the shell hashes the file
        // once every byte is sent, and a RESOURCE_DIGEST for an offer that had it is ignored.)
        self.digest = nil
    }

    // MARK: What it is

    /// Offered, active, waiting, or how it ended.
    var status: TransferState {
        switch state {
        case .offered: .offered
        case .active: .active
        case .waiting: .waiting
        case .ended(let outcome): outcome
        }
    }

    /// Every byte was handed to the connection (the receiver's RESOURCE_END says whether it arrived intact).
    var isFinishedSending: Bool {
        guard case .active(let sent, _) = state else { return false }
        return sent == file.size
    }

    /// When its receiver must have answered (accepted, or acknowledged more), and what is said if not.
    /// (Shared files served have their own times: `SessionStateMachine.sharedServesDue`.)
    var deadline: (at: Int64, problem: String)? {
        let stall = limits.stallTimeout
        switch state {
        case .offered(let since) where everAccepted:
            // Offered again after a dropped connection (a person's file: an export ends with its
            // connection): its receiver may be checking and placing every byte, and answers then.
            return (since + 10 * stall, "no answer for \(10 * stall / 1000) s")
        case .offered(let since):
            return (since + limits.offerTimeout, "not accepted within \(limits.offerTimeout / 1000) s")
        case .active(_, let progressAt):
            // Once every byte is sent the receiver checks and places it (a large copy takes a while).
            let wait = isFinishedSending ? 10 * stall : stall
            return (progressAt + wait, "nothing acknowledged for \(wait / 1000) s")
        case .waiting, .ended:
            return nil
        }
    }

    private var chunkSize: Int { max(1, limits.chunkSize) }
    /// Bytes sent but not yet acknowledged, at most.
    var window: UInt64 { max(UInt64(chunkSize), limits.window) }

    // MARK: Inputs

    /// RESOURCE_ACCEPT: the first on a connection says where to (re)start; later ones report progress.
    /// `linked`: the peer is connected (chunks go only then).
    mutating func accepted(_ offset: UInt64, at now: Int64, linked: Bool) -> [Action] {
        var actions: [Action] = []
        switch state {
        case .offered:
            guard offset <= file.size else { return badOffset(offset) }
            if offset < highestSent { resent += highestSent - offset }
            acknowledged = offset
            state = .active(sent: offset, progressAt: now)
            everAccepted = true
            started = now
            startOffset = offset
            actions.append(.watch(at: now + limits.stallTimeout))
            // A receiver that restarted lost the digest it was sent.
            if let digest { actions.append(.sendDigest(digest)) }
            if resent > 0, !ephemeral { actions.append(.saveResent(resent)) }
        case .active(let sent, var progressAt):
            // It never goes back, nor past what was sent.
            guard offset <= file.size, offset >= acknowledged, offset <= sent else { return badOffset(offset) }
            if offset > acknowledged {
                progressAt = now
                actions.append(.watch(at: now + limits.stallTimeout))
            }
            acknowledged = offset
            state = .active(sent: sent, progressAt: progressAt)
        case .waiting, .ended:
            return []
        }
        return actions + [.progress(error: nil)] + pump(linked: linked)
    }

    /// The shell read what `read` asked for (`bytes` of them; `digest`: the file's SHA-256 once all of
    /// it is hashed). Sent only on the connection it was asked for.
    mutating func fileRead(offset: UInt64, bytes: Int, digest read: [UInt8]?, linked: Bool) -> [Action] {
        guard let asked = reading else { return [] }
        reading = nil
        var actions: [Action] = []
        let active = status == .active
        if asked == attempt, active, bytes > 0 { actions.append(.sendChunk(offset: offset)) }
        if let read, digest == nil {
            digest = read
            // The file's digest, whichever attempt's read learned it: the receiver may wait for nothing else.
            if active { actions.append(.sendDigest(read)) }
        }
        return actions + pump(linked: linked)
    }

    /// A connection to the peer serves it now (also one that replaced another: what was sent on that
    /// may be lost): offered again; the receiver says where to go on.
    mutating func connected(at now: Int64) -> [Action] {
        if case .ended = state { return [] }
        attempt += 1
        state = .offered(since: now)
        return [.sendOffer, .watch(at: now + limits.offerTimeout)]
    }

    /// The connection that served the peer ended: a file waits for it to be back; an export or a
    /// shared file ends.
    mutating func connectionLost(_ reason: String) -> [Action] {
        if case .ended = state { return [] }
        guard !ephemeral else { return end(.failed, told: nil, error: reason) }
        attempt += 1
        state = .waiting
        return [.progress(error: "\(reason); resumes when \(peer.name) is back")]
    }

    /// The outgoing transfers' timer: ends it if its receiver did not answer in time (`deadline`).
    mutating func timerFired(at now: Int64) -> [Action] {
        guard let deadline, deadline.at <= now else { return [] }
        return fail(deadline.problem)
    }

    /// The receiver's RESOURCE_END: complete, refused, failed or cancelled (`text`: why).
    mutating func receiverEnded(_ status: WireFrame.ResourceEnd.Status, text: String) -> [Action] {
        end(TransferState(status), told: nil, error: text.isEmpty ? nil : text)
    }

    /// Cancelled here: the receiver is told (now, and when it is next connected until it answers).
    mutating func cancel() -> [Action] {
        end(.cancelled, told: "cancelled by the sender", error: "cancelled here", cancelledHere: true)
    }

    /// It fails (its file could not be read, or it changed; or a shared file's receiver went quiet): the
    /// receiver is told why.
    mutating func fail(_ reason: String) -> [Action] {
        reading = nil
        return end(.failed, told: reason, error: reason)
    }

    // MARK: Steps

    /// Reads the next chunk if the window allows and no read is under way (or, all sent, the digest).
    private mutating func pump(linked: Bool) -> [Action] {
        guard reading == nil, case .active(var sent, let progressAt) = state, linked else { return [] }
        let offset = sent
        var count = 0
        if sent < file.size, sent - acknowledged < window {
            count = Int(min(UInt64(chunkSize), file.size - sent, window - (sent - acknowledged)))
            sent += UInt64(count)
            highestSent = max(highestSent, sent)
            state = .active(sent: sent, progressAt: progressAt)
        } else {
            // Nothing left to send on this connection; a resumed sender may still owe the digest.
            guard sent == file.size, digest == nil else { return [] }
        }
        var actions: [Action] = []
        if !ephemeral, offset + UInt64(count) > sentMark {
            sentMark = min(file.size, offset + UInt64(count) + limits.sentMarkAhead)
            actions.append(.saveSentMark(sentMark))
        }
        reading = attempt
        return actions + [.read(offset: offset, count: count)]
    }

    private mutating func badOffset(_ offset: UInt64) -> [Action] {
        end(.failed, told: "bad offset \(offset)", error: "the receiver sent a bad offset")
    }

    private mutating func end(_ outcome: TransferState, told: String?, error: String?, cancelledHere: Bool = false) -> [Action] {
        if case .ended = state { return [] }
        if outcome == .complete {
            // Shown as done in full: an offer answered "received before", or every byte sent.
            switch state {
            case .active(let sent, _): if sent == file.size { acknowledged = file.size }
            default: acknowledged = file.size
            }
        }
        state = .ended(outcome)
        return [.end(outcome, told: told, error: error, cancelledHere: cancelledHere)]
    }
}
