import LanchatCore

/// Link arbitration: one connection serves each peer, whatever rooms they share.
///
/// When both sides dial at once, each ends up with two connections; both keep the one dialed by the
/// peer with the smaller id, so they agree without a message. A newer connection from the same dialer
/// replaces the old one (the peer restarted before we noticed the old one die).
///
/// With the connections it keeps what they proved and what they are owed: each peer's key as we hold it
/// (`trust`: known names, ids proved with a key, warnings given once) and when to dial each peer we want
/// (`redials`, with the dials under way in `dialing`).
struct LinkTable: Sendable, Equatable {
    struct Entry: Equatable, Sendable {
        var handle: LinkHandle
        var peer: SessionPeer
        /// Who dialed this connection.
        var dialer: PeerID
        var remoteAddress: String?
        /// When it came up (monotonic milliseconds).
        var since: Int64 = 0
        /// TLS with the peer's key verified against its id; false for a plaintext connection, whose
        /// HELLO id is only a claim.
        var authenticated = true
        /// The wire protocol version agreed on (2: messages carry their author's signature).
        var version: UInt16 = 1
        /// The seals the peer sent ahead of their messages on this connection (version 4); a new
        /// connection starts without any.
        var seals = SealBook()
    }

    /// What to do with a new connection.
    enum Decision: Equatable {
        /// It serves the peer; `replaced` (if any) must be closed.
        case adopt(replaced: LinkHandle?)
        /// The existing connection stays; close the new one.
        case keepExisting(LinkHandle)
    }

    /// The most close reasons remembered (an invitation racing a refusal reports it); the oldest go first.
    static let maximumCloseReasons = 1024

    private(set) var byPeer: [PeerID: Entry] = [:]
    private(set) var byHandle: [LinkHandle: PeerID] = [:]
    /// Connections replaced by a newer one, until they close: frames already on their way over them
    /// are still heard (an INVITE sent just before the peer's other dial won, for example).
    private(set) var retired: [LinkHandle: Entry] = [:]
    /// Peers being dialed now.
    private(set) var dialing: Set<PeerID> = []
    private(set) var lastCloseReason: [PeerID: PeerCloseReason] = [:]
    private var closeOrder: [PeerID] = []
    /// What we hold of peers' keys: each connection's claim is checked against it (`PeerTrust`).
    var trust = PeerTrust()
    /// When to dial each peer we want and are not connected to, and the peers linked once in this run
    /// (`RedialSchedule`; the rules are in `+Delivery`).
    var redials = RedialSchedule()
    /// The version each member's last connection in this run spoke (kept after it closes; forgotten
    /// with its redials when it is no longer wanted): whether what we send it may go sealed only.
    private(set) var lastVersion: [PeerID: UInt16] = [:]

    /// The version `peer` speaks now, or spoke last in this run (nil: not linked in this run, or not as a
    /// member).
    func version(of peer: PeerID) -> UInt16? { byPeer[peer]?.version ?? lastVersion[peer] }

    mutating func noteVersion(_ version: UInt16, of peer: PeerID) { lastVersion[peer] = version }

    /// Forgets the versions of peers not in `wanted`.
    mutating func keepVersions(only wanted: Set<PeerID>) {
        guard lastVersion.contains(where: { !wanted.contains($0.key) }) else { return }
        lastVersion = lastVersion.filter { wanted.contains($0.key) }
    }

    func entry(_ peer: PeerID) -> Entry? { byPeer[peer] }
    func handle(_ peer: PeerID) -> LinkHandle? { byPeer[peer]?.handle }
    func peer(on handle: LinkHandle) -> Entry? { byHandle[handle].flatMap { byPeer[$0] } ?? retired[handle] }
    func isLinked(_ peer: PeerID) -> Bool { byPeer[peer] != nil }

    /// `body` on the seals of every connection of `peer`: the one serving it, and any replaced one still heard.
    mutating func withEverySealBook(of peer: PeerID, _ body: (inout SealBook) -> Void) {
        if byPeer[peer] != nil { body(&byPeer[peer]!.seals) }
        for handle in retired.keys where retired[handle]?.peer.id == peer { body(&retired[handle]!.seals) }
    }

    /// `body` on the seals of the connection `handle` (serving, or replaced and still heard); nil if no
    /// connection has that handle.
    mutating func withSeals<T>(on handle: LinkHandle, _ body: (inout SealBook) -> T) -> T? {
        if let peer = byHandle[handle], byPeer[peer]?.handle == handle { return body(&byPeer[peer]!.seals) }
        guard retired[handle] != nil else { return nil }
        return body(&retired[handle]!.seals)
    }
    var peers: Dictionary<PeerID, Entry>.Keys { byPeer.keys }

    /// Decides about a new connection from `entry.peer` (dialed by `entry.dialer`), given our id.
    mutating func offer(_ new: Entry, ownID: PeerID) -> Decision {
        let id = new.peer.id
        if let existing = byPeer[id] {
            // A connection that proved the key (TLS) always wins over one that did not (plaintext).
            let keepExisting =
                existing.authenticated && !new.authenticated
                || (existing.authenticated == new.authenticated && existing.dialer != new.dialer && existing.dialer == min(ownID, id))
            if keepExisting { return .keepExisting(existing.handle) }
            byHandle[existing.handle] = nil
            retired[existing.handle] = existing
            byPeer[id] = new
            byHandle[new.handle] = id
            return .adopt(replaced: existing.handle)
        }
        byPeer[id] = new
        byHandle[new.handle] = id
        return .adopt(replaced: nil)
    }

    /// A connection ended. Returns the peer it served, or nil if it served none (replaced, or never adopted).
    mutating func closed(_ handle: LinkHandle, reason: PeerCloseReason) -> Entry? {
        if retired.removeValue(forKey: handle) != nil { return nil }
        guard let id = byHandle.removeValue(forKey: handle), let entry = byPeer[id], entry.handle == handle else { return nil }
        byPeer[id] = nil
        if lastCloseReason.updateValue(reason, forKey: id) == nil {
            closeOrder.append(id)
            if closeOrder.count > Self.maximumCloseReasons {
                lastCloseReason[closeOrder.removeFirst()] = nil
            }
        }
        return entry
    }

    /// Whether we have been connected with `peer`: now, before in this run, or it proved its key to us
    /// before (`SessionStateMachine.seen`).
    func seen(_ peer: PeerID) -> Bool { redials.wasLinked(peer) || trust.keyed.contains(peer) || isLinked(peer) }

    /// Remembers that `peer`, linked now, has been seen (`seen`). Returns whether that is new.
    mutating func markSeen(_ peer: PeerID) -> Bool { isLinked(peer) && redials.linked(peer) }

    /// Whether `peer`'s id was proved with its key: once as a room member (kept), or by the connection
    /// that serves it now. A plaintext HELLO may not speak for it.
    func provedByKey(_ peer: PeerID) -> Bool { trust.keyed.contains(peer) || byPeer[peer]?.authenticated == true }

    /// The dials due now among `candidates` (`RedialSchedule.due`, given the dials under way), each
    /// marked as being dialed; and whether a wanted peer still waits its turn.
    mutating func startDueDials(
        _ candidates: [PeerID], own: PeerID, seen: (PeerID) -> Bool, generation: (PeerID) -> Int?, limits: RedialSchedule.Limits, at now: Int64
    ) -> (dials: [PeerID], waiting: Bool) {
        let due = redials.due(candidates, own: own, dialing: dialing, seen: seen, generation: generation, limits: limits, at: now)
        for peer in due.dials { dialing.insert(peer) }
        return due
    }

    mutating func startDialing(_ peer: PeerID) -> Bool { dialing.insert(peer).inserted }
    mutating func stopDialing(_ peer: PeerID) { dialing.remove(peer) }
}
