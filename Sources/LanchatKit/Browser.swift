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
/// restarts, and then drops peers that are not seen again within 5 s.
public final class Browser: Sendable {
    public let session: Session
    /// Found and lost peers, for one task to read.
    public let events: AsyncStream<BrowserEvent>
    private let state: BrowseState
    private let task = Mutex<Task<Void, Never>?>(nil)

    public init(session: Session) {
        self.session = session
        let (events, sink) = AsyncStream<BrowserEvent>.makeStream(bufferingPolicy: .bufferingNewest(10_000))
        self.events = events
        state = BrowseState(ownID: session.identity.identity.peerID, directory: session.directory, sink: sink)
    }

    /// Starts browsing (again after `stop`); does nothing if it is browsing.
    public func start() {
        let (type, state) = (session.serviceType, state)
        task.withLock { task in
            guard task == nil else { return }
            // (Unstructured: it runs until `stop`, which cancels and awaits it.)
            task = Task { await state.run(type: type) }
        }
    }

    /// Stops browsing; the peers found stay where the session can dial them.
    public func stop() async {
        let running = task.withLock { task in
            defer { task = nil }; return task
        }
        running?.cancel()
        await running?.value
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
            await browse(type: type)
            resolves.finish()
        }
        self.resolves = nil
    }

    private func browse(type: String) async {
        var delay = Duration.seconds(1)
        var generation = 0
        while !Task.isCancelled {
            do {
                let browser = try await DNSSD.browse(type: type)
                delay = .seconds(1)
                let restarted = generation > 0
                generation += 1
                if restarted { table.browseRestarted() }
                await withDiscardingTaskGroup { group in
                    if restarted {
                        group.addTask {
                            try? await Task.sleep(for: .seconds(5))
                            if !Task.isCancelled { await self.sweep() }
                        }
                    }
                    for await event in browser.events {
                        switch event {
                        case .added(let instance): apply(table.added(instance))
                        case .removed(let instance): apply(table.removed(instance))
                        case .failed: break
                        }
                    }
                    group.cancelAll()
                }
                browser.cancel()
            } catch {}
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(30))
        }
    }

    private func sweep() { apply(table.sweep()) }

    /// Resolves an instance and looks up its addresses, up to three attempts.
    private nonisolated func resolve(_ instance: ServiceInstance) async {
        for attempt in 0..<3 {
            if attempt > 0 { try? await Task.sleep(for: .seconds(1 << (attempt - 1))) }
            guard !Task.isCancelled, await knows(instance) else { return }
            do {
                let service = try await DNSSD.resolve(instance, timeout: .seconds(5))
                let interface = service.interfaceIndex != 0 ? service.interfaceIndex : instance.interfaceIndex
                let addresses = try await DNSSD.queryAddresses(
                    hostName: service.hostName, interfaceIndex: interface, timeout: .seconds(2), settle: .milliseconds(30))
                if addresses.isEmpty && attempt < 2 { continue }
                await resolved(instance, service, addresses: addresses)
                return
            } catch {}
        }
    }

    private func knows(_ instance: ServiceInstance) -> Bool { table.knows(instance) }

    private func resolved(_ instance: ServiceInstance, _ service: ResolvedService, addresses: [String]) {
        info[instance.name] = Self.discoveryInfo(TXTRecord(decoding: service.txt))
        apply(table.resolved(instance, service, addresses: addresses))
    }

    /// The record's keys other than lanchat's own, with text values (others are left out), at most `maximumInfoKeys`.
    static func discoveryInfo(_ record: TXTRecord) -> [String: String] {
        var info: [String: String] = [:]
        for entry in record.entries where !Advertiser.reservedKeys.contains(entry.key) && info.count < maximumInfoKeys {
            guard let bytes = entry.value, let text = String(validating: bytes, as: UTF8.self) else { continue }
            info[entry.key] = text
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
