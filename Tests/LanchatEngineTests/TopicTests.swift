import LanchatCore
import LanchatEngine
import LanchatWire
import Testing

/// Topics (issue 13, item 3), the engine's part: subscriptions go to the room's connected members; a
/// message goes only to subscribers (reliable or not); a subscriber takes messages in order, once, from
/// members, on topics it subscribes to; the publisher's rate limit refuses, the subscriber's drops.
@Suite struct TopicTests: LabFixture {
    func delivered(_ actions: [SessionAction]) -> [String] {
        actions.compactMap { if case .emit(.topicMessage(let message)) = $0 { "\(message.from.name):\(message.sequence):\(message.text)" } else { nil } }
    }

    func message(_ sequence: UInt64, _ text: String, topic: String = "cursor") -> WireFrame {
        .topicMessage(.init(room: lab, topic: topic, sequence: sequence, text: text, reliable: false))
    }

    @Test func subscriptionsGoToTheRoomsConnectedMembersAndToAConnectionThatComesUp() throws {
        var node = engine()
        let told = sent(try node.subscribe("cursor", in: lab))
        #expect(told[LinkHandle(1)] == [.topicSubscriptions(.init(room: lab, topics: ["cursor"]))])
        #expect(told[LinkHandle(2)] == [.topicSubscriptions(.init(room: lab, topics: ["cursor"]))])
        #expect(told[LinkHandle(3)] == nil)
        #expect(try node.subscribe("cursor", in: lab).isEmpty)  // already
        _ = node.linkDown(LinkHandle(1), reason: .lost, at: at(2))
        let again = node.linkUp(LinkHandle(4), peer: bob, dialedByUs: true, remoteAddress: nil, version: 3, at: at(3)).actions
        #expect(sent(again)[LinkHandle(4)]?.contains(.topicSubscriptions(.init(room: lab, topics: ["cursor"]))) == true)
        // Unsubscribing says so: the whole set, now empty.
        #expect(sent(try node.subscribe("cursor", in: lab, false))[LinkHandle(2)] == [.topicSubscriptions(.init(room: lab, topics: []))])
        #expect(throws: SessionError.self) { _ = try node.subscribe("no/slash", in: lab) }
        #expect(throws: SessionError.self) { _ = try node.subscribe("cursor", in: RoomID("elsewhere")!) }
    }

    @Test func aMessageGoesOnlyToSubscribersReliableOrNot() throws {
        var node = engine()
        _ = node.received([.topicSubscriptions(.init(room: lab, topics: ["cursor", "ink"]))], on: LinkHandle(1), at: at(2))
        _ = node.received([.topicSubscriptions(.init(room: lab, topics: ["ink"]))], on: LinkHandle(2), at: at(2))
        // A stranger's subscription gets it nothing (it may be a newcomer on its way in: kept, but only
        // members are sent to).
        _ = node.received([.topicSubscriptions(.init(room: lab, topics: ["cursor"]))], on: LinkHandle(3), at: at(2))
        let (count, actions) = try node.publish("1,2", topic: "cursor", in: lab, reliable: false, at: at(3))
        #expect(count == 1 && actions == [.sendUnreliable(LinkHandle(1), [.topicMessage(.init(room: lab, topic: "cursor", sequence: 1, text: "1,2", reliable: false))])])
        let reliable = try node.publish("3,4", topic: "cursor", in: lab, reliable: true, at: at(4)).actions
        #expect(reliable == [.send(LinkHandle(1), [.topicMessage(.init(room: lab, topic: "cursor", sequence: 2, text: "3,4", reliable: true))])])
        #expect(try node.publish("x", topic: "ink", in: lab, reliable: false, at: at(5)).recipients == 2)
        #expect(try node.publish("x", topic: "none", in: lab, reliable: false, at: at(5)).recipients == 0)
        // Bob's connection ends: what he subscribed to is forgotten until he says it again.
        _ = node.linkDown(LinkHandle(1), reason: .lost, at: at(6))
        #expect(node.subscribers(of: "cursor", in: lab) == 0)
        #expect(throws: SessionError.self) { _ = try node.publish(String(repeating: "a", count: 1025), topic: "ink", in: lab, reliable: false, at: at(7)) }
        #expect(throws: SessionError.self) { _ = try node.publish("two\nlines", topic: "ink", in: lab, reliable: false, at: at(7)) }
        #expect(throws: SessionError.self) { _ = try node.publish("x", topic: "ink", in: RoomID("elsewhere")!, reliable: false, at: at(7)) }
    }

    @Test func aSubscriberTakesMessagesInOrderOnceFromMembersOnItsTopics() throws {
        var node = engine()
        _ = try node.subscribe("cursor", in: lab)
        #expect(
            delivered(node.received([message(1, "a"), message(3, "c"), message(2, "late"), message(3, "again")], on: LinkHandle(1), at: at(2)))
                == ["bob:1:a", "bob:3:c"])
        // Another publisher has its own sequence; a stranger and an unsubscribed topic are ignored.
        #expect(delivered(node.received([message(1, "b")], on: LinkHandle(2), at: at(3))) == ["carol:1:b"])
        #expect(delivered(node.received([message(9, "s")], on: LinkHandle(3), at: at(3))).isEmpty)
        #expect(delivered(node.received([message(9, "o", topic: "other")], on: LinkHandle(1), at: at(3))).isEmpty)
        // Bob restarted, and his new connection replaced the old one before we saw that one end: his
        // sequences start again, and what he subscribes to is what he says on the new one.
        _ = node.received([.topicSubscriptions(.init(room: lab, topics: ["cursor"]))], on: LinkHandle(1), at: at(4))
        #expect(node.linkUp(LinkHandle(4), peer: bob, dialedByUs: true, remoteAddress: nil, version: 3, at: at(5)).serving == LinkHandle(4))
        #expect(node.subscribers(of: "cursor", in: lab) == 0)
        #expect(delivered(node.received([message(1, "fresh")], on: LinkHandle(4), at: at(6))) == ["bob:1:fresh"])
        // A connection that ends (no replacement) forgets the same.
        _ = node.linkDown(LinkHandle(4), reason: .lost, at: at(7))
        _ = node.linkUp(LinkHandle(5), peer: bob, dialedByUs: true, remoteAddress: nil, version: 3, at: at(8))
        #expect(delivered(node.received([message(1, "again")], on: LinkHandle(5), at: at(9))) == ["bob:1:again"])
    }

    @Test func thePublisherIsRefusedPastItsRateAndTheSubscriberDropsAFlood() throws {
        var node = engine()
        _ = node.received([.topicSubscriptions(.init(room: lab, topics: ["t"]))], on: LinkHandle(1), at: at(2))
        // A burst of 500 at one instant, then 500 a second.
        for _ in 0..<500 { _ = try node.publish("x", topic: "t", in: lab, reliable: false, at: at(10)) }
        #expect { _ = try node.publish("x", topic: "t", in: lab, reliable: false, at: at(10)) } throws: { ($0 as? SessionError)?.code == .rateLimited }
        _ = try node.publish("x", topic: "t", in: lab, reliable: false, at: at(12))  // 2 ms: one more
        #expect(throws: SessionError.self) { _ = try node.publish("x", topic: "t", in: lab, reliable: false, at: at(12)) }
        #expect(try node.publish("x", topic: "t", in: lab, reliable: false, at: at(1_012)).recipients == 1)

        // Bob floods us: past 5,000 at once (a backlog after a stall passes), then twice the rate, dropped,
        // and said once.
        _ = try node.subscribe("t", in: lab)
        let flood = (1...6_000).map { message(UInt64($0), "f", topic: "t") }
        let actions = node.received(flood, on: LinkHandle(1), at: at(2_000))
        #expect(delivered(actions).count == 5_000)
        #expect(node.topicDrops == 1_000)
        #expect(actions.filter { if case .emit(.security) = $0 { true } else { false } }.count == 1)
        let later = (6_001...7_500).map { message(UInt64($0), "f", topic: "t") }
        #expect(delivered(node.received(later, on: LinkHandle(1), at: at(3_000))).count == 1_000)
    }
}
