/// The simulator's pending events, earliest first: a binary min-heap on (time, order). `order` is unique
/// and grows with each `push`, so events due at the same time come out in the order they were scheduled,
/// exactly as the linear scan this replaces took them (a seed replays the same run).
struct EventQueue<Event> {
    private var heap: [(time: Int64, order: Int, event: Event)] = []
    private var order = 0

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }
    /// When the earliest event is due.
    var nextTime: Int64? { heap.first?.time }

    mutating func push(_ event: Event, at time: Int64) {
        order += 1
        heap.append((time, order, event))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard earlier(child, than: parent) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest event, if any.
    mutating func pop() -> (time: Int64, event: Event)? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let first = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count, earlier(left, than: smallest) { smallest = left }
            if right < heap.count, earlier(right, than: smallest) { smallest = right }
            guard smallest != parent else { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
        return (first.time, first.event)
    }

    private func earlier(_ a: Int, than b: Int) -> Bool {
        (heap[a].time, heap[a].order) < (heap[b].time, heap[b].order)
    }
}
