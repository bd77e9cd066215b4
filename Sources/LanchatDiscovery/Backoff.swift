/// Exponential backoff for reconnecting to avahi-daemon: `initial`, doubling, capped at `maximum`.
public struct Backoff: Sendable, Equatable {
    public let initial: Duration
    public let maximum: Duration
    private var current: Duration?

    public init(initial: Duration = .milliseconds(250), maximum: Duration = .seconds(5)) {
        self.initial = initial
        self.maximum = maximum
    }

    /// The next delay.
    public mutating func next() -> Duration {
        let delay = current.map { min($0 * 2, maximum) } ?? initial
        current = delay
        return delay
    }

    /// After a success, start again from `initial`.
    public mutating func reset() { current = nil }
}
