/// The messages this process stored in the last moments, by local monotonic time: what a relay answer
/// leaves to their authors while they are most likely still on their way (`SessionStateMachine.lacking`).
/// Local time, not the author's timestamp: an author's clock may be minutes off. At most `capacity`
/// ids are kept (older ones are forgotten first: at worst a message is relayed that did not need to be).
public struct RecentArrivals: Sendable {
    public static let capacity = 8192
    private var order: [(id: String, at: Int64)] = []
    private var start = 0

    public init() {}

    /// Notes `ids` as stored at `now` (monotonic milliseconds, not decreasing between calls).
    public mutating func note(_ ids: some Sequence<String>, at now: Int64) {
        for id in ids { order.append((id, now)) }
        start = max(start, order.count - Self.capacity)
        if start >= Self.capacity {
            order.removeFirst(start)
            start = 0
        }
    }

    /// The ids noted after `since`.
    public func ids(after since: Int64) -> Set<String> {
        var result = Set<String>()
        var index = order.count - 1
        while index >= start, order[index].at > since {
            result.insert(order[index].id)
            index -= 1
        }
        return result
    }

    public var count: Int { order.count - start }
}
