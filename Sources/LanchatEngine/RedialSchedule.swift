import LanchatCore

/// When to dial each peer we want and are not connected to (`SessionStateMachine.redial`), and the peers
/// we have been connected with in this run (part of `seen`). The peer with the smaller id dials first;
/// the other waits 1.5 s, so that both rarely dial at once. Backoff doubles up to `Limits.reconnect`, or
/// for a member we have never been connected with (one a member introduced, at addresses of its saying)
/// up to `Limits.unseenReconnect`; a peer that discovery sees again (a new generation) is tried again
/// soon. At most `Limits.dialsPerCheck` dials start per look and `Limits.dialsAtOnce` are under way,
/// whatever members introduce: the rest wait their turn, and members only introduced take at most half.
struct RedialSchedule: Equatable, Sendable {
    struct Entry: Equatable, Sendable {
        var attempt = 0
        var notBefore: Int64
        var generation = -1
    }

    struct Limits: Equatable, Sendable {
        var dialsPerCheck: Int
        var dialsAtOnce: Int
        var reconnect: Int64
        var unseenReconnect: Int64
    }

    /// Peers remembered as linked once in this run, at most.
    static let maximumLinkedOnce = 4096

    private var entries: [PeerID: Entry] = [:]
    private var linkedOnce: Set<PeerID> = []

    /// Peers with a backoff under way.
    var count: Int { entries.count }

    /// `peer` spoke to us (frames arrived): its backoff starts again.
    mutating func heard(from peer: PeerID) {
        entries[peer] = nil
    }

    /// Forgets the backoff of peers we no longer want (they left, or we did).
    mutating func keep(only wanted: Set<PeerID>) {
        guard !entries.isEmpty else { return }
        entries = entries.filter { wanted.contains($0.key) }
    }

    /// Whether `peer` was linked to us before in this run.
    func wasLinked(_ peer: PeerID) -> Bool { linkedOnce.contains(peer) }

    /// Remembers that `peer` is linked to us now; false if it was already, or too many are remembered.
    mutating func linked(_ peer: PeerID) -> Bool {
        linkedOnce.count < Self.maximumLinkedOnce && linkedOnce.insert(peer).inserted
    }

    /// The peers to dial now, in order, among `candidates` (wanted and not connected, those `seen` first),
    /// given those `dialing` already; and whether any of them waits (for its time, or its turn).
    mutating func due(
        _ candidates: [PeerID], own: PeerID, dialing: Set<PeerID>, seen: (PeerID) -> Bool, generation: (PeerID) -> Int?,
        limits: Limits, at now: Int64
    ) -> (dials: [PeerID], waiting: Bool) {
        var dials: [PeerID] = []
        var dialingCount = dialing.count
        var unseenDialing = dialing.count { !seen($0) }
        for peer in candidates {
            guard !dialing.contains(peer) else { continue }
            var entry = entries[peer] ?? Entry(notBefore: now + (own < peer ? 0 : 1_500))
            if let generation = generation(peer), generation != entry.generation {
                entry.generation = generation
                if entry.attempt > 0 { entry.notBefore = min(entry.notBefore, now + (own < peer ? 0 : 1_000)) }
            }
            entries[peer] = entry
            let peerSeen = seen(peer)
            guard now >= entry.notBefore, dials.count < limits.dialsPerCheck, dialingCount < limits.dialsAtOnce,
                peerSeen || unseenDialing < limits.dialsAtOnce / 2
            else { continue }
            if !peerSeen { unseenDialing += 1 }
            entry.attempt += 1
            entry.notBefore = now + min(peerSeen ? limits.reconnect : limits.unseenReconnect, 250 * (1 << Int64(min(entry.attempt, 12))))
            entries[peer] = entry
            dialingCount += 1
            dials.append(peer)
        }
        return (dials, !candidates.isEmpty)
    }
}
