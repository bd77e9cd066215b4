import LanchatCore

/// What this node holds of peers' keys (trust on first use; the rules are in `+Links`, `+Invitations`
/// and `+Delivery`): the known-peers record (key -> the name it was met with, a label), the ids a room
/// member proved with its key at least once (kept in the store), and what is said only once: the keys
/// warned about while the node runs, and the peers told on their connection that a live message of
/// theirs was refused. `LinkTable` keeps it: every connection's claim is checked against it.
struct PeerTrust: Sendable, Equatable {
    /// Keys warned about at most before the record starts again (a warning may then come once more).
    static let maximumWarned = 1024

    var known: KnownPeerBook
    /// Ids a room member has proved with its key (TLS) at least once. A plaintext connection
    /// (`--encryption optional`) claiming one of them is refused, and one of them is dialed with TLS
    /// whatever its advertisement says: only an id never seen with a key can go without one.
    private(set) var keyed: Set<PeerID>
    /// Keys already warned about (`SessionStateMachine.warnOfNewKey`) while the node runs.
    private var warned: Set<PeerID> = []
    /// What each peer was told about once on its connection: a live message refused (its signature, its
    /// seal or its time), a SEAL refused. Each is told on its own: a refused message does not silence a
    /// forged seal that follows.
    private var refusedLive: [PeerID: Set<String>] = [:]

    init(known: KnownPeerBook = KnownPeerBook(), keyed: Set<PeerID> = []) {
        self.known = known
        self.keyed = keyed
    }

    /// Remembers that `id` proved itself with its key, within `maximum` ids. Returns whether it is new
    /// (the store must keep it).
    mutating func markKeyed(_ id: PeerID, maximum: Int) -> Bool {
        guard !keyed.contains(id), keyed.count < maximum else { return false }
        keyed.insert(id)
        return true
    }

    /// Whether a person should be warned now about `id`'s key: once per key while the node runs.
    mutating func warn(of id: PeerID) -> Bool {
        if warned.count >= Self.maximumWarned { warned = [] }
        return warned.insert(id).inserted
    }

    /// Whether a refused live `what` ("a message", "a seal") from `peer` is told: once per connection
    /// and kind of frame.
    mutating func refuseLive(_ what: String, from peer: PeerID) -> Bool { refusedLive[peer, default: []].insert(what).inserted }

    /// Authors one of whose seals failed its check in this run: their seals are checked where they come,
    /// before their messages are stored (at most `maximumSealsFailed`; past it, everyone's are).
    private(set) var sealsFailed: Set<PeerID> = []
    static let maximumSealsFailed = 1024

    mutating func sealFailed(_ peer: PeerID) {
        if sealsFailed.count < Self.maximumSealsFailed { sealsFailed.insert(peer) }
    }

    /// Whether `peer`'s seals are checked before their messages are stored.
    func checksSealsFirst(_ peer: PeerID) -> Bool { sealsFailed.contains(peer) || sealsFailed.count >= Self.maximumSealsFailed }

    /// `peer`'s connection ended: the next one's first refusals are told again.
    mutating func connectionEnded(_ peer: PeerID) { refusedLive[peer] = nil }

    /// What does not hold (`SessionStateMachine.consistencyFaults`): each record within its bound.
    func faults(maximumKeyed: Int) -> [String] {
        var faults: [String] = []
        if keyed.count > maximumKeyed { faults.append("\(keyed.count) ids kept as keyed, past \(maximumKeyed)") }
        if warned.count > Self.maximumWarned { faults.append("\(warned.count) keys kept as warned about, past \(Self.maximumWarned)") }
        return faults
    }
}
