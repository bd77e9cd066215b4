import LanchatCore
import LanchatEngine

/// Topics as programs on this side see them: each subscriber has its own stream; the engine subscribes
/// to a topic while at least one program does (`SessionStateMachine+Topics`).
extension SessionNode {
    public typealias TopicDelivery = SessionStateMachine.TopicDelivery

    struct TopicKey: Hashable, Sendable {
        var room: RoomID
        var topic: String
    }

    /// Messages on `topic` in `room` from now on, until the consumer stops iterating (or leaves the room).
    /// A consumer that does not keep up loses the oldest of the last 10,000.
    public func subscribe(to topic: String, in room: RoomID) throws(SessionError) -> AsyncStream<TopicDelivery> {
        let key = TopicKey(room: room, topic: topic)
        if topicSubscribers[key, default: [:]].isEmpty { perform(try engine.subscribe(topic, in: room)) }
        let (stream, continuation) = AsyncStream<TopicDelivery>.makeStream(bufferingPolicy: .bufferingNewest(10_000))
        nextTopicSubscriber += 1
        let id = nextTopicSubscriber
        topicSubscribers[key, default: [:]][id] = continuation
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            // Unstructured: onTermination is a synchronous callback (on whichever thread ended the stream)
            // that hands the end to the node actor; the task ends once `topicSubscriberEnded` returns.
            Task { await self.topicSubscriberEnded(key, id) }
        }
        return stream
    }

    func topicSubscriberEnded(_ key: TopicKey, _ id: UInt64) {
        guard topicSubscribers[key]?.removeValue(forKey: id) != nil else { return }
        guard topicSubscribers[key]?.isEmpty == true else { return }
        topicSubscribers[key] = nil
        if let actions = try? engine.subscribe(key.topic, in: key.room, false) { perform(actions) }
    }

    public struct TopicReceipt: Sendable {
        /// The message's sequence number on its topic.
        public var sequence: UInt64
        /// Connected subscribers it was written to.
        public var sentNow: Int
        /// Unreliable only: subscribers it was dropped for (their connection's output was full).
        public var dropped: Int
    }

    /// Publishes one line of text on `topic` in `room` to the connected members that subscribe to it.
    public func publish(_ text: String, topic: String, in room: RoomID, reliable: Bool = false) throws(SessionError) -> TopicReceipt {
        let (recipients, actions) = try engine.publish(text, topic: topic, in: room, reliable: reliable, at: time())
        unreliableDrops = 0
        perform(actions)
        let dropped = reliable ? 0 : unreliableDrops
        return TopicReceipt(sequence: engine.topicSequence(topic, in: room), sentNow: recipients - dropped, dropped: dropped)
    }

    /// Hands a topic message to this side's subscribers.
    func deliver(_ message: TopicDelivery) {
        for continuation in (topicSubscribers[TopicKey(room: message.room, topic: message.topic)] ?? [:]).values {
            continuation.yield(message)
        }
    }

    /// Subscribers of rooms we are no longer in (we left, were removed, or the room was closed): their streams end.
    func endTopicsOutsideRooms() {
        let rooms = Set(engine.roomIDs)
        for (key, subscribers) in topicSubscribers where !rooms.contains(key.room) {
            topicSubscribers[key] = nil
            subscribers.values.forEach { $0.finish() }
        }
    }
}

extension SessionEvent {
    /// We are out of a room (left, removed, closed).
    func isOwnDeparture(_ ownID: PeerID) -> Bool {
        if case .memberLeft(_, let peer, _, _, true) = self { return peer.id == ownID }
        return false
    }
}
