import LanchatCore
import LanchatEngine
import LanchatWire

/// Topics in the simulated rooms: nodes subscribe to and leave the topic `t` of their rooms, and publish
/// on it (reliable or not). Each message's text names its publisher, the publisher's incarnation, a
/// number no other message has and the sequence it was given, so every delivery is checked as it
/// happens: from the node that published it, with its sequence, to a node subscribed to it, and once.
extension Simulator {
    func topicStep(_ node: Int) {
        guard let names = nodes[node].engine?.roomNames, !names.isEmpty else { return }
        let room = RoomID(names[roll(names.count)])!
        // A member subscribes in all its rooms when it first publishes, and now and then stops in one; it
        // publishes a few messages each time.
        for name in names {
            let other = RoomID(name)!
            let subscribed = nodes[node].engine?.subscriptions(in: other).contains("t") == true
            if !subscribed || (other == room && chance(5)) {
                command(node) { engine throws(SessionError) in try engine.subscribe("t", in: other, !subscribed) }
            }
        }
        for _ in 0..<(1 + roll(4)) {
            let reliable = chance(50)
            let sequence = (nodes[node].engine?.topicSequence("t", in: room) ?? 0) + 1
            topicPublished += 1
            let text = "n\(node)i\(nodes[node].incarnation)c\(topicPublished)s\(sequence)"
            command(node) { engine throws(SessionError) in
                try engine.publish(text, topic: "t", in: room, reliable: reliable, at: self.time(node)).actions
            }
        }
    }

    func topicDelivered(_ message: SessionStateMachine.TopicDelivery, at node: Int) {
        guard topicViolation == nil else { return }
        topicDeliveries += 1
        guard let from = nodes.firstIndex(where: { $0.peer.id == message.from.id }) else {
            topicViolation = "n\(node) got topic message '\(message.text)' from a node that does not exist"
            return
        }
        guard message.text.hasPrefix("n\(from)i"), message.text.hasSuffix("s\(message.sequence)") else {
            topicViolation = "n\(node) got '\(message.text)' as n\(from)'s sequence \(message.sequence)"
            return
        }
        guard nodes[node].engine?.subscriptions(in: message.room).contains(message.topic) == true else {
            topicViolation = "n\(node) got '\(message.text)' on \(message.room)/\(message.topic), which it does not subscribe to"
            return
        }
        guard topicSeen.insert("\(node) \(message.room) \(message.text)").inserted else {
            topicViolation = "n\(node) got '\(message.text)' twice"
            return
        }
    }

    func checkTopics() throws {
        if let topicViolation { throw fail(topicViolation) }
    }
}
