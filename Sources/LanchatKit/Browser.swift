internal import DNSSD
internal import LanchatCore
internal import LanchatDiscovery
internal import LanchatEngine
internal import Synchronization

/// A peer a `Browser` found: Multipeer Connectivity's `foundPeer` with its `discoveryInfo`.
public struct FoundPeer: Sendable, Equatable {
    public let peer: Peer
    /// The advertiser's discovery info (the TXT record's keys other than lanchat's own).
    public let discoveryInfo: [String: String]
    /// Its addresses (IPv4 first) and peer port.
    public let addresses: [String]
    public let port: Int
}

/// What a browser saw.
public enum BrowserEvent: Sendable, Equatable {
    /// A peer appeared, or its advertisement changed (its name, its discovery info).
    case found(FoundPeer)
    /// A peer's advertisement is gone.
    case lost(Peer)
}

/// Finds the peers that advertise the session's service type on the local network (DNS-SD through
/// avahi-daemon): Multipeer Connectivity's `MCNearbyServiceBrowser`. A found peer can be invited at once
/// (`Session.invite`): the browser tells the session where it is. It browses again when avahi-daemon
/// restarts (or `start` follows `stop`), and then drops peers that are not seen again within 5 s. It stops
/// when the session closes (its `events` end then), or when it is released.
public final class Browser: Sendable {
    public let session: Session
    /// Found and lost peers, for one task to read.
    public let events: AsyncStream<BrowserEvent>
    private let state: BrowseState
    private let task = TaskSlot()
    private let closing: UInt64

    public init(session: Session) {
        self.session = session
        let (events, sink) = AsyncStream<BrowserEvent>.makeStream(bufferingPolicy: .bufferingNewest(10_000))
        self.events = events
        state = BrowseState(ownID: session.identity.identity.peerID, directory: session.directory, sink: sink)
        let task = self.task
        closing = session.whenClosing {
            await task.stop()
            sink.finish()
        }
    }

    deinit {
        task.cancel()
        session.forgetClosing(closing)
    }

    /// Starts browsing (again after `stop`); does nothing if it is browsing.
    public func start() {
        guard session.isOpen else { return }
        let (type, state) = (session.serviceType, state)
        task.start {
            // (Unstructured: it runs until `stop`, which cancels and awaits it.)
            Task { await state.run(type: type) }
        }
    }

    /// Stops browsing; the peers found stay where the session can dial them.
    public func stop() async {
        await task.stop()
    }

    /// The peers found and not lost.
    public var peers: [FoundPeer] { get async { await state.found } }
}

/// The browse, its resolves, and the table of what they found (`PeerTable`, the same as lanchatd's).
actor BrowseState {
    private var table: PeerTable
    /// Discovery info by instance name, from the last resolve.
    private var info: [String: [String: String]] = [:]
    private let directory: PeerDirectory
    private let sink: AsyncStream<BrowserEvent>.Continuation
    private var resolves: AsyncStream<ServiceInstance>.Continuation?
    /// A browse ran before (the table holds what it found).
    private var hasBrowsed = false
    /// How often a listed peer is resolved again (its discovery info or addresses may change).
    static let refreshInterval = Duration.seconds(60)

    /// At most this many discovery keys are kept of a peer's record.
    static let maximumInfoKeys = 64

    init(ownID: PeerID, directory: PeerDirectory, sink: AsyncStream<BrowserEvent>.Continuation) {
        table = PeerTable(ownID: ownID)
        self.directory = directory
        self.sink = sink
    }

    var found: [FoundPeer] { table.peers.compactMap(foundPeer) }

    func run(type: String) async {
        let (requests, resolves) = AsyncStream<ServiceInstance>.makeStream()
        self.resolves = resolves
        await withDiscardingTaskGroup { group in
            group.addTask { await PeerTable.resolveEach(requests) { await self.resolve($0) } }
            group.addTask { await self.refresh() }
            await browse(type: type)
            resolves.finish()
            group.cancelAll()
        }
        self.resolves = nil
    }

    /// lanchatd's browsing loop (`BrowseLoop`), into this browser's table. A run after the first (`start`
    /// after `stop`) starts as a restart: what is not seen again goes.
    private func browse(type: String) async {
        await BrowseLoop.run(type: type, sweepDelay: .seconds(5), firstIsRestart: hasBrowsed) { event in
            await self.browsed(event)
        }
    }

    private func browsed(_ event: BrowseLoop.Event) {
        switch event {
        case .browsing(let restarted):
            hasBrowsed = true
            if restarted { table.browseRestarted() }
        case .added(let instance): apply(table.added(instance))
        case .removed(let instance): apply(table.removed(instance))
        case .sweepDue: apply(table.sweep())
        case .lost, .unavailable: break
        }
    }

    private func refresh() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: Self.refreshInterval)
            for instance in table.instancesToRefresh { resolves?.yield(instance) }
        }
    }

    /// Resolves an instance and looks up its addresses (`BrowseLoop.resolve`: up to three attempts).
    private nonisolated func resolve(_ instance: ServiceInstance) async {
        guard let (service, addresses) = await BrowseLoop.resolve(instance, stillWanted: { await self.knows(instance) }) else { return }
        await resolved(instance, service, addresses: addresses)
    }

    private func knows(_ instance: ServiceInstance) -> Bool { table.knows(instance) }

    private func resolved(_ instance: ServiceInstance, _ service: ResolvedService, addresses: [String]) {
        let actions = table.resolved(instance, service, addresses: addresses)
        if table.knows(instance) { info[instance.name] = Self.discoveryInfo(TXTRecord(decoding: service.txt)) }
        apply(actions)
    }

    /// The record's keys other than lanchat's own that an advertiser could have set (1-32 of `a-z0-9-_`),
    /// with text values, control characters removed (others are left out); at most `maximumInfoKeys`.
    static func discoveryInfo(_ record: TXTRecord) -> [String: String] {
        var info: [String: String] = [:]
        for entry in record.entries where !Advertiser.reservedKeys.contains(entry.key) && info.count < maximumInfoKeys {
            guard Advertiser.isKey(entry.key), let bytes = entry.value, let text = String(validating: bytes, as: UTF8.self) else { continue }
            info[entry.key] = PeerAdvertisement.sanitize(text)
        }
        return info
    }

    private func foundPeer(_ peer: DiscoveredPeer) -> FoundPeer? {
        guard let advertisement = peer.advertisement else { return nil }
        return FoundPeer(
            peer: Peer(id: advertisement.peerID, displayName: advertisement.displayName), discoveryInfo: info[peer.instanceName] ?? [:],
            addresses: peer.addresses, port: Int(peer.port))
    }

    private func apply(_ actions: [PeerTable.Action]) {
        defer {
            // (What the table no longer lists: withdrawn, refused, swept.)
            if info.count > table.peers.count {
                let listed = Set(table.peers.map(\.instanceName))
                info = info.filter { listed.contains($0.key) }
            }
        }
        for action in actions {
            switch action {
            case .resolve(let instance):
                resolves?.yield(instance)
            case .emit(.found(let peer)), .emit(.changed(let peer)):
                guard let found = foundPeer(peer), let advertisement = peer.advertisement else { continue }
                directory.update(
                    advertisement.peerID,
                    PeerAddressHint(
                        name: advertisement.displayName, port: Int(peer.port), addresses: peer.addresses,
                        encryption: EncryptionPreference(rawValue: advertisement.encryption.rawValue)))
                sink.yield(.found(found))
            case .emit(.lost(let peer)):
                info[peer.instanceName] = nil
                guard let advertisement = peer.advertisement else { continue }
                directory.remove(advertisement.peerID)
                sink.yield(.lost(Peer(id: advertisement.peerID, displayName: advertisement.displayName)))
            }
        }
    }
}
