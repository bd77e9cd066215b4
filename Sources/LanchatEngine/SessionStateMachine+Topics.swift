import LanchatCore
import LanchatWire

/// Topics (issue 13, item 3): named channels inside a room for small, frequent messages (cursor positions,
/// drawing points, sensor readings), sent only to the members that subscribe to them.
///
/// - A member tells each connected member of a room every topic it subscribes to there
///   (TOPIC_SUBSCRIPTIONS, 0x0B), when that changes and when a connection comes up; what a peer said
///   lasts while its connection does.
/// - A publisher sends each message (TOPIC_MESSAGE, 0x0C) to the connected subscribers, with a sequence
///   number per topic. Unreliable: dropped for a subscriber whose connection's output is full (behind
///   a file, say). Reliable: always written. Neither is stored, acknowledged or sent again: what is in
///   flight when a connection breaks is lost (messages are for what must arrive).
/// - A subscriber takes only what is newer than the last it had from that publisher and topic (in
///   order, never twice), from a member of the room, on a topic it subscribes to.
/// - Limits: 1024 bytes of one-line text per message; 500 messages a second per publisher and room
///   (bursts of 500), refused at the publisher with `rate_limited`; a subscriber drops what comes faster
///   than twice that once 5,000 came at once (a backlog after a stall passes); 64 topics per member and
///   room.
/// - Topic messages travel only on their author's own connection and are never stored or relayed, so
///   they carry no signature: the connection says who sent them (its TLS proved the key, unless
///   encryption is off).
extension SessionStateMachine {
    public static let topicRate: Int64 = 500
    public static let topicBurst: Int64 = 500
    /// What a subscriber takes from one publisher and room: twice the rate, and ten bursts at once.
    static let receivedTopicRate = 2 * topicRate
    static let receivedTopicBurst = 10 * topicBurst

    /// A message on a topic, for the subscribers on this side.
    public struct TopicDelivery: Equatable, Sendable {
        public var room: RoomID
        public var topic: String
        public var from: SessionPeer
        public var sequence: UInt64
        public var text: String
        public var reliable: Bool
    }

    /// The topics we subscribe to in `room`.
    public func subscriptions(in room: RoomID) -> [String] { topics.subscriptions(in: room) }

    /// The sequence number of the last message we published on `topic` in `room` (0: none).
    public func topicSequence(_ topic: String, in room: RoomID) -> UInt64 { topics.sequence(topic, in: room) }

    /// Topic messages dropped because their publisher sent too fast.
    public var topicDrops: Int { topics.drops }

    /// How many connected members of `room` subscribe to `topic`.
    public func subscribers(of topic: String, in room: RoomID) -> Int {
        (rooms[room]?.members.keys ?? [:].keys).filter { links.isLinked($0) && topics.subscribes(RoomMember(room: room, peer: $0), to: topic) }.count
    }

    static func checkTopic(_ topic: String) throws(SessionError) {
        guard WireFrame.TopicMessage.isTopic(topic) else {
            throw SessionError(.badTopic, "a topic's name is 1-64 of A-Z a-z 0-9 . _ - (got '\(topic.prefix(80))')")
        }
    }

    /// Subscribes to `topic` in `room` (or unsubscribes): the connected members are told.
    public mutating func subscribe(_ topic: String, in room: RoomID, _ on: Bool = true) throws(SessionError) -> [SessionAction] {
        guard rooms[room] != nil else { throw SessionError(.unknownRoom, "you are not in room '\(room)'") }
        try Self.checkTopic(topic)
        guard try topics.subscribe(topic, in: room, on) else { return [] }
        var out: [SessionAction] = []
        for member in (rooms[room]?.members.keys.sorted() ?? []) {
            if let handle = links.handle(member) { sendTopics(room, to: handle, always: true, &out) }
        }
        return out
    }

    /// Publishes one line of text on `topic` in `room`, to the connected members that subscribe to it.
    /// Returns how many it went to.
    public mutating func publish(
        _ text: String, topic: String, in room: RoomID, reliable: Bool, at now: EngineTime
    ) throws(SessionError) -> (recipients: Int, actions: [SessionAction]) {
        guard let members = rooms[room]?.members else { throw SessionError(.unknownRoom, "you are not in room '\(room)'") }
        try Self.checkTopic(topic)
        guard text.utf8.count <= WireFrame.TopicMessage.maximumText else {
            throw SessionError(.tooLong, "a topic message is at most \(WireFrame.TopicMessage.maximumText) bytes (got \(text.utf8.count))")
        }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw SessionError(.badText, "a topic message is one line of text, without control characters")
        }
        let frame = try topics.publish(text, topic: topic, in: room, reliable: reliable, rate: Self.topicRate, burst: Self.topicBurst, at: now.monotonic)
        var out: [SessionAction] = []
        for member in members.keys.sorted() where topics.subscribes(RoomMember(room: room, peer: member), to: topic) {
            guard let handle = links.handle(member) else { continue }
            out.append(reliable ? .send(handle, [frame]) : .sendUnreliable(handle, [frame]))
        }
        return (out.count, out)
    }

    /// Our subscriptions in `room`, to one connection (`always`: even if there are none, to say so).
    func sendTopics(_ room: RoomID, to handle: LinkHandle, always: Bool = false, _ out: inout [SessionAction]) {
        let topics = subscriptions(in: room)
        guard always || !topics.isEmpty else { return }
        out.append(.send(handle, [.topicSubscriptions(.init(room: room, topics: topics))]))
    }

    // MARK: Frames

    /// A peer's subscriptions, kept for a room we are in even before we count the peer as a member (a
    /// newcomer whose proof is on its way): messages go only to members, and it lasts while the connection
    /// does (connections from strangers are capped).
    mutating func received(_ subscriptions: WireFrame.TopicSubscriptions, from link: LinkTable.Entry) {
        guard rooms[subscriptions.room] != nil else { return }
        topics.told(subscriptions.topics, by: RoomMember(room: subscriptions.room, peer: link.peer.id))
    }

    mutating func received(_ message: WireFrame.TopicMessage, from link: LinkTable.Entry, at now: EngineTime, _ out: inout [SessionAction]) {
        let peer = link.peer.id
        guard rooms[message.room]?.members[peer] != nil, topics.subscribes(to: message.topic, in: message.room) else { return }
        let member = RoomMember(room: message.room, peer: peer)
        switch topics.arrived(message, from: member, rate: Self.receivedTopicRate, burst: Self.receivedTopicBurst, at: now.monotonic) {
        case .stale, .flood(tell: false):
            return
        case .flood(tell: true):
            out.append(
                .emit(
                    .security(
                        peer: link.peer,
                        text: "\(link.peer.name) sends topic messages in \(message.room) faster than "
                            + "\(Self.receivedTopicRate) a second: what comes faster is dropped")))
            return
        case .deliver:
            break
        }
        out.append(
            .emit(
                .topicMessage(
                    TopicDelivery(
                        room: message.room, topic: message.topic, from: link.peer, sequence: message.sequence, text: message.text,
                        reliable: message.reliable))))
    }

    /// A connection ended: what the peer said of its subscriptions, and where its sequences were,
    /// start again with the next one.
    mutating func forgetTopics(of peer: PeerID) {
        topics.forget(peer)
    }

    /// Rooms we left and members gone: their topic state goes.
    mutating func forgetTopicsOutsideRooms() {
        let rooms = rooms
        topics.keep(rooms: { rooms[$0] != nil }, members: { rooms[$0.room]?.members[$0.peer] != nil })
    }
}
