import LanchatCore

/// Time as the engine sees it. It comes with every input; the engine never reads a clock, so tests
/// and the simulator decide what time it is.
public struct EngineTime: Sendable, Equatable, CustomStringConvertible {
    /// Milliseconds on a monotonic clock: deadlines and intervals.
    public var monotonic: Int64
    /// Milliseconds since the Unix epoch: the timestamps written into messages and invitations.
    public var wall: Int64

    public init(monotonic: Int64, wall: Int64) {
        self.monotonic = monotonic
        self.wall = wall
    }

    public var description: String { "t=\(monotonic)ms" }
}

/// A connection the shell holds, named by a number the shell chose. The engine decides which handle
/// serves a peer; the shell only maps handles to sockets.
public struct LinkHandle: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init(_ rawValue: Int) { self.rawValue = rawValue }
    public var description: String { "link#\(rawValue)" }
}

/// Where peers can be reached, as discovery sees them. `PeerDirectory` is the daemon's; the
/// simulator has its own.
public protocol PeerAddressBook: Sendable {
    func lookup(_ id: PeerID) -> (hint: PeerAddressHint, generation: Int)?
}

extension PeerDirectory: PeerAddressBook {}

/// Ids (messages, invitations, notices). The shell's come from the system's random generator, each on
/// its own: an id seen on the wire says nothing of the next (a seeded generator can be run forward from
/// one id it gave, and a member who can guess an author's next message id can take it first). The
/// simulator's come from a seeded SplitMix64, so that a run can be replayed.
public struct IDGenerator: Sendable {
    private var state: UInt64
    private let random: Bool

    public init(seed: UInt64) {
        state = seed
        random = false
    }

    private init(random: Bool) {
        state = 0
        self.random = random
    }

    public static func system() -> IDGenerator { IDGenerator(random: true) }

    public mutating func next() -> UInt64 {
        if random {
            var generator = SystemRandomNumberGenerator()
            return generator.next()
        }
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A message's id: the time it was written (`wall`, milliseconds since the epoch, 48 bits, big-endian),
    /// then 80 random bits (still unguessable). Ids written in time order sort in time order, so storing
    /// a message adds to the right edge of the id index instead of a random page of it: with random ids,
    /// storing a million received messages wrote most of that index again at each commit (15.7 s for a
    /// million in a test of SQLite alone; 4.6 s with ids in time order).
    public mutating func messageID(at wall: Int64) -> WireID {
        let time = UInt64(clamping: max(0, wall)) & 0xFFFF_FFFF_FFFF
        let random = wireID().bytes
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        for shift in stride(from: 40, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: time >> UInt64(shift))) }
        bytes += random.prefix(10)
        return WireID(bytes: bytes)!
    }

    public mutating func wireID() -> WireID {
        let high = next()
        let low = next()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: high >> UInt64(shift))) }
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: low >> UInt64(shift))) }
        return WireID(bytes: bytes)!
    }
}

/// What the known-peers record says of a key and the name it comes with (trust on first use).
public enum KnownPeerCheck: Equatable, Sendable {
    /// Neither the key nor the name was met before.
    case new
    /// The key was met before (under this name or another: the key is the peer).
    case known
    /// A name known with other keys, from a key not met before (another host of the same name, or this
    /// host with a new key) or from a known key that took that name. A person is warned (with the
    /// codes); nothing is refused.
    case nameKnownWithOtherKeys([PeerID])
}

/// The engine's copy of the known-peers record: key (peer id) -> the name it was met with, a label.
/// The shell loads it at start and writes what `.persist(.rememberPeer)` asks.
public struct KnownPeerBook: Sendable, Equatable {
    public private(set) var labels: [PeerID: String]

    public init(_ labels: [PeerID: String] = [:]) { self.labels = labels }

    public func check(label: String, id: PeerID) -> KnownPeerCheck {
        let others = labels.filter { $0.value == label && $0.key != id }.map(\.key).sorted { $0.rawValue < $1.rawValue }
        // A known key that now takes a name known with other keys is shown too (it is not that peer).
        if labels[id] == label || (labels[id] != nil && others.isEmpty) { return .known }
        return others.isEmpty ? .new : .nameKnownWithOtherKeys(others)
    }

    public func knows(_ id: PeerID) -> Bool { labels[id] != nil }

    mutating func remember(label: String, id: PeerID) { labels[id] = label }

    /// Forgets every key known under `label`, or the key `label` names (its id); returns them.
    mutating func forget(_ label: String) -> [PeerID] {
        let ids = labels.filter { $0.value == label || $0.key.rawValue == label }.map(\.key).sorted { $0.rawValue < $1.rawValue }
        for id in ids { labels[id] = nil }
        return ids
    }
}
