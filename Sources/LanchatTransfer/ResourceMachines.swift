/// The two ends of one resource transfer (a file, or a room's history), as pure state machines: the
/// caller does the file I/O and the network, these decide what comes next. Offsets are bytes of the
/// resource; `RESOURCE_ACCEPT(offset)` is both "start from here" and, later, "I have written this much"
/// (flow control and the resume point). Rule that keeps both ends from waiting on each other: the
/// receiver reports progress at least every `Limits.progressEvery` bytes written (1 MiB), and a sender's
/// window is at least twice that (`OutgoingResource` defaults to 4 MiB). Progress counts bytes written,
/// not bytes arrived: a disk slower than the network then holds the sender back instead of filling the
/// receiver's memory, and a sender far past what was reported (`Limits.maximumAhead`) is stopped.

/// The receiving end.
public struct IncomingResource: Sendable {
    public struct Limits: Sendable {
        /// Largest resource accepted (`--max-file-size`).
        public var maximumSize: UInt64
        /// Bytes free where the file will be written (statvfs), after what other transfers reserved.
        public var freeBytes: UInt64
        /// Why the directory the bytes would go to cannot be used ("cannot use the download directory
        /// /x: Permission denied"), or `nil`. When set, `freeBytes` means nothing and offers are refused
        /// with this text, never as a lack of space.
        public var storageProblem: String?
        /// Send progress (RESOURCE_ACCEPT) after this many new bytes written.
        public var progressEvery: UInt64
        /// How far past the last progress reported the sender may send (its window is 4 MiB; more
        /// would pile up in the receiver's memory).
        public var maximumAhead: UInt64
        /// What an accepted resource leaves free at least (`freeBytes` counts it): a member's files never
        /// take the last of the disk the history database and the logs need too.
        public var keptFree: UInt64

        public init(
            maximumSize: UInt64, freeBytes: UInt64, storageProblem: String? = nil, progressEvery: UInt64 = 1 << 20,
            maximumAhead: UInt64 = 16 << 20, keptFree: UInt64 = 0
        ) {
            self.maximumSize = maximumSize
            self.freeBytes = freeBytes
            self.storageProblem = storageProblem
            self.progressEvery = progressEvery
            self.maximumAhead = maximumAhead
            self.keptFree = keptFree
        }
    }

    public enum Action: Equatable, Sendable {
        /// Tell the sender to start (or resume) at this offset, or report progress (bytes written).
        case sendAccept(UInt64)
        /// Append the chunk's bytes to the `.part` file (they start at `offset`).
        case write(offset: UInt64, count: Int)
        /// All bytes are in: hash the `.part` file and call `verified(_:)`.
        case verify
        /// Move the `.part` file into place under `name` (made unique by the caller) and keep the mtime.
        case place(name: String)
        /// End the transfer: tell the sender (status, text); `removePart` when the partial file must go.
        case end(status: Status, text: String, removePart: Bool)
    }

    public enum Status: UInt8, Equatable, Sendable { case complete = 0, refused = 1, cancelled = 2, failed = 3 }

    public enum State: Equatable, Sendable { case receiving, verifying, done(Status) }

    public let size: UInt64
    public let name: String?
    public private(set) var received: UInt64
    public private(set) var state: State = .receiving
    /// The last offset told to the sender (RESOURCE_ACCEPT).
    public private(set) var reported: UInt64
    private let progressEvery: UInt64
    private let maximumAhead: UInt64

    /// Decides on an offer. `partialBytes`: what a `.part` file from an earlier attempt holds (its bytes
    /// are trusted only because the final SHA-256 check covers them). Returns the first actions.
    public static func offer(rawName: [UInt8], size: UInt64, limits: Limits, partialBytes: UInt64) -> (IncomingResource, [Action]) {
        let name: String
        switch SafeFileName.make(from: rawName) {
        case .success(let safe): name = safe
        case .failure(let refusal):
            return refused(size: size, refusal.description)
        }
        guard size <= limits.maximumSize else {
            return refused(size: size, "\(size) bytes is over this peer's limit of \(limits.maximumSize) bytes")
        }
        if let problem = limits.storageProblem {
            return refused(size: size, problem)
        }
        let resume = partialBytes <= size ? partialBytes : 0
        guard size - resume <= limits.freeBytes, limits.freeBytes - (size - resume) >= limits.keptFree else {
            let kept = limits.keptFree > 0 ? ", \(limits.keptFree) kept free" : ""
            return refused(size: size, "not enough free space (\(size - resume) bytes needed, \(limits.freeBytes) free\(kept))")
        }
        var machine = IncomingResource(size: size, name: name, received: resume, progressEvery: limits.progressEvery, maximumAhead: limits.maximumAhead)
        var actions: [Action] = [.sendAccept(resume)]
        if resume == size {
            machine.state = .verifying
            actions.append(.verify)
        }
        return (machine, actions)
    }

    private init(size: UInt64, name: String?, received: UInt64, progressEvery: UInt64, maximumAhead: UInt64) {
        self.size = size
        self.name = name
        self.received = received
        self.reported = received
        self.progressEvery = max(1, progressEvery)
        self.maximumAhead = maximumAhead
    }

    private static func refused(size: UInt64, _ text: String) -> (IncomingResource, [Action]) {
        var machine = IncomingResource(size: size, name: nil, received: 0, progressEvery: 1, maximumAhead: 0)
        machine.state = .done(.refused)
        return (machine, [.end(status: .refused, text: text, removePart: false)])
    }

    /// A chunk arrived. Chunks come in order and not past `size`; after a resume, bytes already held
    /// may come again (chunks in flight on the old connection): those are skipped, and `.write` says
    /// where the new bytes start (the caller skips `offset - chunkOffset` bytes of the chunk).
    public mutating func chunk(offset: UInt64, count: Int) -> [Action] {
        guard state == .receiving else { return [] }
        guard offset <= received else {
            return fail("chunk at \(offset), expected \(received)", removePart: false)
        }
        let end = offset + UInt64(count)
        guard end <= size else {
            return fail("the sender sent more than the \(size) bytes it offered", removePart: true)
        }
        guard end <= reported + maximumAhead else {
            return fail("the sender sent past its window (more than \(maximumAhead) bytes ahead of what was written)", removePart: true)
        }
        guard end > received else { return [] }  // all held already
        let fresh = Int(end - received)
        let start = received
        received = end
        var actions: [Action] = [.write(offset: start, count: fresh)]
        if received == size {
            state = .verifying
            actions.append(.verify)
        }
        return actions
    }

    /// The bytes before `offset` are on disk: report progress every `progressEvery` bytes (not at the
    /// end: the verdict tells the sender that).
    public mutating func written(upTo offset: UInt64) -> [Action] {
        guard state == .receiving, offset > reported, offset - reported >= progressEvery, offset < size else { return [] }
        reported = offset
        return [.sendAccept(offset)]
    }

    /// The sender offered this resource again (a new connection after a drop): tell it where to go on.
    /// Nothing while verifying: the outcome goes to the new connection when known.
    public mutating func resumed() -> [Action] {
        guard state == .receiving else { return [] }
        reported = received
        return [.sendAccept(received)]
    }

    /// The hash of the `.part` file was computed.
    public mutating func verified(_ matches: Bool) -> [Action] {
        guard state == .verifying, let name else { return [] }
        guard matches else {
            return fail("the file's SHA-256 does not match the offer; the partial file was removed", removePart: true)
        }
        state = .done(.complete)
        return [.place(name: name), .end(status: .complete, text: "", removePart: false)]
    }

    /// The person (or the sender, with RESOURCE_END cancelled) cancelled.
    public mutating func cancel(byPeer: Bool) -> [Action] {
        if case .done = state { return [] }
        state = .done(.cancelled)
        return [.end(status: .cancelled, text: byPeer ? "cancelled by the sender" : "cancelled by the receiver", removePart: true)]
    }

    /// Writing failed (for example: the disk filled up).
    public mutating func writeFailed(_ reason: String) -> [Action] {
        fail(reason, removePart: true)
    }

    private mutating func fail(_ text: String, removePart: Bool) -> [Action] {
        state = .done(.failed)
        return [.end(status: .failed, text: text, removePart: removePart)]
    }
}

/// The sending end: which chunk to send next, within a window past what the receiver holds.
public struct OutgoingResource: Sendable {
    public let size: UInt64
    public let chunkSize: Int
    /// Bytes sent but not yet reported held by the receiver, at most.
    public let window: UInt64
    public private(set) var acknowledged: UInt64 = 0
    public private(set) var sent: UInt64 = 0
    public private(set) var started = false
    /// The furthest byte ever handed to a connection (across resumes).
    public private(set) var highestSent: UInt64
    /// Bytes sent more than once: each resume from below `highestSent` adds the difference.
    public private(set) var resent: UInt64 = 0

    /// `alreadySent`: after a restart, what an earlier run may have sent (to count what is sent twice).
    public init(size: UInt64, chunkSize: Int = 128 * 1024, window: UInt64 = 4 << 20, alreadySent: UInt64 = 0, resent: UInt64 = 0) {
        self.size = size
        self.chunkSize = max(1, chunkSize)
        self.window = max(UInt64(chunkSize), window)
        self.highestSent = min(alreadySent, size)
        self.resent = resent
    }

    /// The connection dropped: wait for a new RESOURCE_ACCEPT (after the offer is made again).
    public mutating func interrupted() {
        started = false
    }

    public enum Failure: Error, Equatable, Sendable {
        /// The receiver claims more than exists, or goes backwards after the start.
        case badOffset(UInt64)
    }

    /// RESOURCE_ACCEPT: the first one sets where to (re)start; later ones report progress.
    public mutating func accepted(_ offset: UInt64) throws(Failure) {
        guard offset <= size else { throw .badOffset(offset) }
        if !started {
            started = true
            if offset < highestSent { resent += highestSent - offset }
            acknowledged = offset
            sent = offset
            return
        }
        guard offset >= acknowledged, offset <= sent else { throw .badOffset(offset) }
        acknowledged = offset
    }

    /// The next chunk to read and send, or `nil` when the window is full or everything is sent.
    public mutating func nextChunk() -> (offset: UInt64, count: Int)? {
        guard started, sent < size, sent - acknowledged < window else { return nil }
        let count = Int(min(UInt64(chunkSize), size - sent, window - (sent - acknowledged)))
        defer {
            sent += UInt64(count)
            highestSent = max(highestSent, sent)
        }
        return (sent, count)
    }

    /// Everything has been sent (the receiver's RESOURCE_END says whether it arrived intact).
    public var isFinishedSending: Bool { started && sent == size }
}
