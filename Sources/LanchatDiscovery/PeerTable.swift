import DNSSD
import LanchatCore

/// A lanchat peer as discovery sees it.
public struct DiscoveredPeer: Equatable, Sendable {
    /// The DNS-SD instance name (unique on the LAN; Avahi renames clashes to "name #2").
    public var instanceName: String
    /// `nil` until resolved, and for incompatible services.
    public var advertisement: PeerAdvertisement?
    /// Why the service is not usable, for services of our type that are not lanchat v1 peers.
    public var problem: PeerAdvertisement.Problem?
    public var hostName: String
    public var port: UInt16
    /// IPv4 first, then IPv6 (link-local with a `%interface` scope).
    public var addresses: [String]
    /// The interfaces the instance was reported on.
    public var interfaceIndices: Set<UInt32>
    /// How this daemon knows the peer.
    public var origin: Origin = .dnssd

    public enum Origin: String, Equatable, Sendable {
        /// Found by browsing DNS-SD on the link.
        case dnssd
        /// Added by address (`lanchat connect HOST[:PORT]` or `static-peer` in the config): a peer
        /// discovery cannot see, such as one on another subnet.
        case `static`
    }

    public var isCompatible: Bool { advertisement != nil }

    public init(
        instanceName: String, advertisement: PeerAdvertisement?, problem: PeerAdvertisement.Problem?, hostName: String,
        port: UInt16, addresses: [String], interfaceIndices: Set<UInt32>, origin: Origin = .dnssd
    ) {
        self.instanceName = instanceName
        self.advertisement = advertisement
        self.problem = problem
        self.hostName = hostName
        self.port = port
        self.addresses = addresses
        self.interfaceIndices = interfaceIndices
        self.origin = origin
    }
}

/// What the daemon tells its watchers.
public enum PeerEvent: Equatable, Sendable {
    case found(DiscoveredPeer)
    case changed(DiscoveredPeer)
    case lost(DiscoveredPeer)
}

/// The table of peers seen through DNS-SD: a pure state machine.
///
/// Inputs are browse and resolve results; outputs are actions (resolve this instance) and events
/// (found, changed, lost). It de-duplicates the repeated browse reports Avahi gives (one per interface
/// and address family), recognises our own advertisement by peer id, and after a browse restart
/// (avahi-daemon restarted) drops the peers the new browse did not report again (`sweep`).
///
/// Anyone on the link can announce services: the table holds at most `maximumEntries` instances
/// (later ones are not resolved) and lists at most `maximumPerHost` from one host (by SRV host name
/// or address; more are kept unlisted and not refreshed), so that a flood of announcements neither
/// grows it without bound nor buries real peers.
public struct PeerTable: Sendable {
    public static let maximumEntries = 4096
    /// (Several users of one machine may each run lanchatd; and a daemon that restarts leaves its old
    /// instance listed until Avahi reports it gone: eight was too few for the discovery benchmark.)
    public static let maximumPerHost = 32

    public enum Action: Equatable, Sendable {
        /// Resolve this instance, then call `resolved` (if that fails, the entry simply stays unlisted).
        case resolve(ServiceInstance)
        case emit(PeerEvent)
    }

    private enum EntryState: Equatable {
        /// Browsed, not yet resolved: not listed.
        case resolving
        /// Resolved: listed (compatible or not).
        case listed
        /// Our own advertisement: never listed.
        case ourself
        /// Resolved, but its host already has `maximumPerHost` listed: not listed, not refreshed.
        case crowded
    }

    private struct Entry {
        var state: EntryState
        var peer: DiscoveredPeer
        /// Reported by the current browse generation (false after `browseRestarted` until re-seen).
        var seenInGeneration: Bool
    }

    public let ownID: PeerID
    private var entries: [ServiceInstance.Key: Entry] = [:]

    public init(ownID: PeerID) {
        self.ownID = ownID
    }

    /// Peers listed to users, compatible first, by name.
    public var peers: [DiscoveredPeer] {
        entries.values.filter { $0.state == .listed }.map(\.peer).sorted { lhs, rhs in
            if lhs.isCompatible != rhs.isCompatible { return lhs.isCompatible }
            return lhs.instanceName < rhs.instanceName
        }
    }

    /// The instance names we have seen as our own advertisement.
    public var ownInstanceNames: [String] {
        entries.filter { $0.value.state == .ourself }.map(\.key.name).sorted()
    }

    public mutating func added(_ instance: ServiceInstance) -> [Action] {
        let key = instance.key
        if var entry = entries[key] {
            // Another report of a known instance (another interface or address family, or the same one
            // again after a browse restart): note where it was seen; nothing to resolve.
            entry.seenInGeneration = true
            entry.peer.interfaceIndices.insert(instance.interfaceIndex)
            entries[key] = entry
            return []
        }
        guard entries.count < Self.maximumEntries else { return [] }
        entries[key] = Entry(
            state: .resolving,
            peer: DiscoveredPeer(
                instanceName: instance.name, advertisement: nil, problem: nil, hostName: "", port: 0,
                addresses: [], interfaceIndices: [instance.interfaceIndex]),
            seenInGeneration: true)
        return [.resolve(instance)]
    }

    public mutating func removed(_ instance: ServiceInstance) -> [Action] {
        let key = instance.key
        guard var entry = entries[key] else { return [] }
        entry.peer.interfaceIndices.remove(instance.interfaceIndex)
        if !entry.peer.interfaceIndices.isEmpty {
            entries[key] = entry
            return []
        }
        entries[key] = nil
        return entry.state == .listed ? [.emit(.lost(entry.peer))] : []
    }

    /// A resolve (and address lookup) finished for `instance`.
    public mutating func resolved(_ instance: ServiceInstance, _ service: ResolvedService, addresses: [String]) -> [Action] {
        let key = instance.key
        guard var entry = entries[key] else { return [] }  // removed while resolving
        let txt = TXTRecord(decoding: service.txt)
        var peer = entry.peer
        peer.hostName = service.hostName
        peer.port = service.port
        peer.addresses = addresses
        switch PeerAdvertisement.parse(txt) {
        case .success(let advertisement):
            if advertisement.peerID == ownID {
                entry.state = .ourself
                entry.peer = peer
                entries[key] = entry
                return []
            }
            peer.advertisement = advertisement
            peer.problem = nil
        case .failure(let problem):
            peer.advertisement = nil
            peer.problem = problem
        }
        let wasListed = entry.state == .listed
        if !wasListed, crowds(peer, other: key) {
            entry.state = .crowded
            entry.peer = peer
            entries[key] = entry
            return []
        }
        let old = entry.peer
        entry.state = .listed
        entry.peer = peer
        entries[key] = entry
        if !wasListed { return [.emit(.found(peer))] }
        return old == peer ? [] : [.emit(.changed(peer))]
    }

    /// Whether `peer`'s host (its SRV host name, or its first address) already has `maximumPerHost`
    /// instances listed besides `other`.
    private func crowds(_ peer: DiscoveredPeer, other key: ServiceInstance.Key) -> Bool {
        let host = peer.hostName.lowercased()
        let address = peer.addresses.first
        var same = 0
        for (entryKey, entry) in entries where entryKey != key && entry.state == .listed {
            guard (address != nil && entry.peer.addresses.first == address) || entry.peer.hostName.lowercased() == host else { continue }
            same += 1
            if same >= Self.maximumPerHost { return true }
        }
        return false
    }

    /// Whether the instance is still in the table (a resolve for it is still wanted).
    public func knows(_ instance: ServiceInstance) -> Bool {
        entries[instance.key] != nil
    }

    /// The browse was started again (after avahi-daemon restarted): every entry must be reported
    /// again before `sweep()`, or it is dropped.
    public mutating func browseRestarted() {
        for key in entries.keys { entries[key]?.seenInGeneration = false }
    }

    /// Drops the entries the current browse has not reported.
    public mutating func sweep() -> [Action] {
        var actions: [Action] = []
        for (key, entry) in entries where !entry.seenInGeneration {
            entries[key] = nil
            if entry.state == .listed { actions.append(.emit(.lost(entry.peer))) }
        }
        return actions
    }

    /// Instances to resolve again to notice TXT or address changes (Avahi's resolve refs would report
    /// TXT changes, but Debian's 0.8 can crash long-lived ones, so the daemon re-resolves instead).
    public var instancesToRefresh: [ServiceInstance] {
        entries.compactMap { key, entry in
            guard entry.state == .listed, let index = entry.peer.interfaceIndices.min() else { return nil }
            return ServiceInstance(name: key.name, type: key.type, domain: key.domain, interfaceIndex: index)
        }.sorted { $0.name < $1.name }
    }
}
