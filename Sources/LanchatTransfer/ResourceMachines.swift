/// The sending end of one resource transfer (a file, or a room's history), as a pure state machine: the
/// caller does the file I/O and the network, this decides what comes next. Offsets are bytes of the
/// resource; `RESOURCE_ACCEPT(offset)` is both "start from here" and, later, "I have written this much"
/// (flow control and the resume point). Rule that keeps both ends from waiting on each other: the
/// receiver (LanchatEngine's `IncomingTransfer`) reports progress at least every `progressEvery` bytes
/// written (1 MiB), and a sender's window is at least twice that (`OutgoingResource` defaults to 4 MiB).

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
