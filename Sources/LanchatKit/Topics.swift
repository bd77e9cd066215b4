internal import LanchatCore
internal import LanchatEngine
internal import LanchatSession

/// A message published on a topic (lanchat's topics: lines of text to the members that subscribe).
public struct TopicMessage: Sendable, Equatable {
    public let from: Peer
    public let group: String
    public let topic: String
    /// Per publisher and topic, from 1: a gap is a message lost (unreliable) or sent before subscribing.
    public let sequence: UInt64
    public let text: String
    public let reliable: Bool
}

extension Session {
    /// Messages on `topic` (1-64 of `A-Za-z0-9._-`) in the session's group (or `group`) from now on, until
    /// the reader stops. A reader that does not keep up loses the oldest of the last 10,000. The members
    /// are told of the subscription, so publishers send the topic here.
    public func subscribe(to topic: String, in group: String? = nil) async throws(LanchatError) -> AsyncStream<TopicMessage> {
        try checkOpen()
        let room = try self.room(group)
        let deliveries: AsyncStream<SessionNode.TopicDelivery>
        do { deliveries = try await node.subscribe(to: topic, in: room) } catch { throw LanchatError(error) }
        let (messages, sink) = AsyncStream<TopicMessage>.makeStream(bufferingPolicy: .bufferingNewest(10_000))
        // (Unstructured: it forwards until the reader stops, whose end cancels it, which ends the node's stream
        // and with it the subscription.)
        let forward = Task {
            for await delivery in deliveries {
                sink.yield(
                    TopicMessage(
                        from: Peer(id: delivery.from.id, displayName: delivery.from.name), group: delivery.room.rawValue, topic: delivery.topic,
                        sequence: delivery.sequence, text: delivery.text, reliable: delivery.reliable))
            }
            sink.finish()
        }
        let closing = whenClosing { sink.finish() }
        sink.onTermination = { [weak self] _ in
            forward.cancel()
            self?.forgetClosing(closing)
        }
        return messages
    }

    /// Publishes one line of text (at most 1,024 bytes) on `topic` to the connected members of the group
    /// that subscribe to it; returns how many it was written to. Unreliable by default (a reading that a
    /// newer one replaces); `.reliable`: acknowledged and resent after a reconnection.
    @discardableResult
    public func publish(_ text: String, on topic: String, in group: String? = nil, mode: SendMode = .unreliable) async throws(LanchatError) -> Int {
        try checkOpen()
        let room = try self.room(group)
        do { return try await node.publish(text, topic: topic, in: room, reliable: mode == .reliable).sentNow } catch { throw LanchatError(error) }
    }
}
