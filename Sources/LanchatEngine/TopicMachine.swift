import LanchatCore
import LanchatWire

/// Topics' own state (issue 29: a machine that owns its state; the rules are in `+Topics`): our
/// subscriptions per room, what each connected member subscribes to, our sequence per topic, the last
/// sequence heard per publisher and topic, the rate limits both ways, and the peers told once that they
/// send too fast. What it needs of the rest of the engine (who is a member, who is connected) is passed in.
struct TopicMachine: Sendable, Equatable {
    typealias RoomMember = SessionStateMachine.RoomMember

    struct RoomTopic: Hashable, Sendable {
        var room: RoomID
        var topic: String
    }

    struct TopicSource: Hashable, Sendable {
        var peer: PeerID
        var room: RoomID
        var topic: String
    }

    /// A token bucket in thousandths of a message: `rate` per second, at most `burst` saved up.
    struct TopicBucket: Equatable, Sendable {
        var tokens: Int64
        var at: Int64

        init(burst: Int64, at now: Int64) {
            tokens = burst * 1000
            at = now
        }

        mutating func take(rate: Int64, burst: Int64, at now: Int64) -> Bool {
            tokens = min(burst * 1000, tokens + max(0, now - at) * rate)
            at = max(at, now)
            guard tokens >= 1000 else { return false }
            tokens -= 1000
            return true
        }
    }

    /// What to do with a TOPIC_MESSAGE from a member.
    enum Arrival: Equatable {
        /// Deliver it to our subscribers.
        case deliver
        /// Older than one already delivered (or the same): dropped.
        case stale
        /// Faster than the member may send: dropped; `tell` the first time on this connection.
        case flood(tell: Bool)
    }

    private var own: [RoomID: Set<String>] = [:]
    private var peers: [RoomMember: Set<String>] = [:]
    private var sequences: [RoomTopic: UInt64] = [:]
    private var lastHeard: [TopicSource: UInt64] = [:]
    private var buckets: [RoomID: TopicBucket] = [:]
    private var peerBuckets: [RoomMember: TopicBucket] = [:]
    private var floodTold: Set<PeerID> = []
    /// Messages dropped because their publisher sent too fast.
    private(set) var drops = 0

    /// Our topics in `room`, sorted.
    func subscriptions(in room: RoomID) -> [String] { own[room].map { $0.sorted() } ?? [] }

    func subscribes(to topic: String, in room: RoomID) -> Bool { own[room]?.contains(topic) == true }

    /// Whether `member` said it subscribes to `topic` (on its present connection).
    func subscribes(_ member: RoomMember, to topic: String) -> Bool { peers[member]?.contains(topic) == true }

    /// The sequence of the last message we published on `topic` in `room` (0: none).
    func sequence(_ topic: String, in room: RoomID) -> UInt64 { sequences[RoomTopic(room: room, topic: topic)] ?? 0 }

    /// Subscribes to `topic` in `room` (or unsubscribes). Returns whether that changed anything.
    mutating func subscribe(_ topic: String, in room: RoomID, _ on: Bool) throws(SessionError) -> Bool {
        var topics = own[room] ?? []
        if on {
            guard topics.count < WireFrame.TopicSubscriptions.maximumTopics || topics.contains(topic) else {
                throw SessionError(.tooManyTopics, "at most \(WireFrame.TopicSubscriptions.maximumTopics) topics per room")
            }
            guard topics.insert(topic).inserted else { return false }
        } else {
            guard topics.remove(topic) != nil else { return false }
        }
        own[room] = topics.isEmpty ? nil : topics
        return true
    }

    /// Takes one message from our rate limit for `room` and numbers it: the frame to send.
    mutating func publish(_ text: String, topic: String, in room: RoomID, reliable: Bool, rate: Int64, burst: Int64, at now: Int64) throws(SessionError) -> WireFrame {
        var bucket = buckets[room] ?? TopicBucket(burst: burst, at: now)
        let allowed = bucket.take(rate: rate, burst: burst, at: now)
        buckets[room] = bucket
        guard allowed else {
            throw SessionError(.rateLimited, "more than \(rate) topic messages a second in \(room) (bursts of \(burst)): slow down")
        }
        let key = RoomTopic(room: room, topic: topic)
        let sequence = (sequences[key] ?? 0) + 1
        sequences[key] = sequence
        return .topicMessage(.init(room: room, topic: topic, sequence: sequence, text: text, reliable: reliable))
    }

    /// What `member` says it subscribes to now.
    mutating func told(_ topics: [String], by member: RoomMember) {
        peers[member] = topics.isEmpty ? nil : Set(topics)
    }

    /// A message from `member` on a topic we subscribe to: within its rate, and newer than the last.
    mutating func arrived(_ message: WireFrame.TopicMessage, from member: RoomMember, rate: Int64, burst: Int64, at now: Int64) -> Arrival {
        var bucket = peerBuckets[member] ?? TopicBucket(burst: burst, at: now)
        let allowed = bucket.take(rate: rate, burst: burst, at: now)
        peerBuckets[member] = bucket
        guard allowed else {
            drops += 1
            return .flood(tell: floodTold.insert(member.peer).inserted)
        }
        let source = TopicSource(peer: member.peer, room: member.room, topic: message.topic)
        guard message.sequence > (lastHeard[source] ?? 0) else { return .stale }
        lastHeard[source] = message.sequence
        return .deliver
    }

    /// A connection ended: what the peer said, and where its sequences were, start again with the next one.
    mutating func forget(_ peer: PeerID) {
        peers = peers.filter { $0.key.peer != peer }
        lastHeard = lastHeard.filter { $0.key.peer != peer }
        peerBuckets = peerBuckets.filter { $0.key.peer != peer }
        floodTold.remove(peer)
    }

    /// Keeps only what concerns rooms we are in (`inRoom`) and their members (`isMember`).
    mutating func keep(rooms inRoom: (RoomID) -> Bool, members isMember: (RoomMember) -> Bool) {
        peers = peers.filter { inRoom($0.key.room) }
        lastHeard = lastHeard.filter { isMember(RoomMember(room: $0.key.room, peer: $0.key.peer)) }
        peerBuckets = peerBuckets.filter { isMember($0.key) }
        own = own.filter { inRoom($0.key) }
        sequences = sequences.filter { inRoom($0.key.room) }
        buckets = buckets.filter { inRoom($0.key) }
    }

    /// Rooms whose state is kept here (for the consistency check: every one is a room we are in).
    var rooms: Set<RoomID> {
        Set(own.keys).union(peers.keys.map(\.room)).union(sequences.keys.map(\.room)).union(buckets.keys)
    }
}
