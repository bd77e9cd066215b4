/// When the daemon closes an idle control connection (docs/control-api.md, "Limits"), so that clients
/// that hold connections and do nothing cannot take every one of the `max-control-connections` slots.
///
/// Idle means: no call in progress, not watching or streaming, and no complete request line for
/// `timeout`. Bytes without a newline do not count, so a line that never ends cannot hold a connection
/// either. Watches and streams are long-lived by design and never idle.
struct ControlIdleRule: Sendable {
    typealias Instant = ContinuousClock.Instant

    enum State: Equatable, Sendable {
        case idle(since: Instant)
        case calling
        /// Watching or streaming.
        case exempt
        case closed
    }

    enum Decision: Equatable, Sendable {
        /// Tell the client and close the connection (the rule is `closed` from now on).
        case close
        /// Nothing to do before then.
        case checkAt(Instant)
        /// Watching, streaming or closed: the rule has nothing more to say.
        case stop
    }

    let timeout: Duration
    private(set) var state: State

    init(timeout: Duration, now: Instant) {
        self.timeout = timeout
        self.state = .idle(since: now)
    }

    /// A complete request line arrived. False if the connection was already closed for idleness: the
    /// line is not run (the client was told why, and may send it again on a new connection).
    mutating func callStarted() -> Bool {
        guard state != .closed else { return false }
        state = .calling
        return true
    }

    /// The call was answered: the connection is idle from `now`.
    mutating func callEnded(now: Instant) {
        guard state == .calling else { return }
        state = .idle(since: now)
    }

    /// The connection turned into a watch or a stream.
    mutating func exempt() {
        guard state != .closed else { return }
        state = .exempt
    }

    /// What to do at `now`. During a call the next look is one `timeout` later (a call may end
    /// meanwhile; the connection is then idle from its end, not from the look).
    mutating func check(now: Instant) -> Decision {
        switch state {
        case .exempt, .closed:
            return .stop
        case .calling:
            return .checkAt(now + timeout)
        case .idle(let since):
            guard now - since >= timeout else { return .checkAt(since + timeout) }
            state = .closed
            return .close
        }
    }
}
