/// Whether a peer connection is alive, as a machine of its own: heartbeats and the output budget.
/// Pure: every time is the connection's event loop clock in nanoseconds, passed in, so table tests drive
/// it without a channel (`PeerConnectionHandler` feeds it and does what it says).
///
/// - Heartbeats: a link ends when nothing at all arrived for `timeout`; we send a PING only when no
///   frame but PONGs arrived for an `interval`, and not again before an `interval` has passed (a link in
///   use, or whose peer pings, needs none from us: an idle link settles to one side's PING and the other's
///   PONG each interval, not two of each). The tick comes twice an interval, so a link whose last frame
///   came just after a tick is still checked within the timeout and half an interval more.
/// - The output budget: bytes handed to the connection and not yet written to its socket (each write
///   counts `overhead` more). Past `budget` the link ends (its peer does not read fast enough); with
///   some waiting and none of it written for `stall`, it ends too (the peer stopped reading, whatever it
///   sends).
struct LinkLiveness: Equatable {
    struct Limits: Equatable {
        var interval: Int64
        var timeout: Int64
        var budget: Int
        var overhead: Int
        var stall: Int64
    }

    /// What the heartbeat's tick says.
    enum Verdict: Equatable {
        /// Nothing to do.
        case quiet
        /// Send a PING: nothing but PONGs arrived for an interval.
        case ping
        /// End the link (GOODBYE timeout): nothing arrived for `timeout`.
        case noHeartbeat
        /// End the link: output waited `stall` with none of it written.
        case stalled
    }

    let limits: Limits
    /// When bytes last arrived, and when a frame other than a PONG last did (a PONG answers our PING: it
    /// is not the peer's own).
    private(set) var lastReceived: Int64
    private(set) var lastHeard: Int64
    /// When the tick last said `.ping`.
    private(set) var lastPinged: Int64?
    /// Bytes handed to the connection and not yet written (`queued`, `written`).
    private(set) var pendingOutput = 0
    private var outputWaitingSince: Int64
    /// The budget was passed once (the link is ending: said once).
    private var overBudget = false

    init(limits: Limits, at now: Int64) {
        self.limits = limits
        lastReceived = now
        lastHeard = now
        outputWaitingSince = now
    }

    /// The handshake is done: heartbeats count from now.
    mutating func started(at now: Int64) {
        lastReceived = now
        lastHeard = now
    }

    /// Bytes arrived (a frame or part of one).
    mutating func bytesArrived(at now: Int64) {
        lastReceived = now
    }

    /// A whole frame other than a PONG arrived.
    mutating func heard(at now: Int64) {
        lastHeard = now
    }

    /// The heartbeat's tick (every half `interval`). A `.ping` is counted as sent.
    mutating func tick(at now: Int64) -> Verdict {
        if now - lastReceived > limits.timeout { return .noHeartbeat }
        if pendingOutput > 0, now - outputWaitingSince > limits.stall { return .stalled }
        guard now - lastHeard >= limits.interval else { return .quiet }
        if let lastPinged, now - lastPinged < limits.interval { return .quiet }
        lastPinged = now
        return .ping
    }

    /// `bytes` handed to the connection. Returns what they count (give it back with `written` when their
    /// write completes), and whether they took the output past the budget (once: the link ends).
    mutating func queued(_ bytes: Int, at now: Int64) -> (counted: Int, overBudget: Bool) {
        if pendingOutput == 0 { outputWaitingSince = now }
        let counted = bytes + limits.overhead
        pendingOutput += counted
        guard pendingOutput > limits.budget, !overBudget else { return (counted, false) }
        overBudget = true
        return (counted, true)
    }

    /// A write completed (written to the socket, or failed because the connection closed): what still
    /// waits waits from now.
    mutating func written(_ counted: Int, at now: Int64) {
        pendingOutput -= counted
        outputWaitingSince = now
    }
}
