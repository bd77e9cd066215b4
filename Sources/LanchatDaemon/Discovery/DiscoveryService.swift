import DNSSD
import FoundationEssentials
import Glibc
import LanchatControl
import LanchatCore
import LanchatDiscovery
import LanchatEngine
import Logging
import ServiceLifecycle

/// Advertises this daemon as `_chat-service._tcp`, browses for the others, and keeps the peer table.
///
/// Each loop (advertise, browse) survives avahi-daemon being absent or restarting: when its operation
/// dies (Avahi reports -65537) it starts again with backoff. After a browse restart, peers the new
/// browse does not report again within `sweepDelay` are dropped.
public actor DiscoveryService: Service {
    public enum AdvertisingState: String, Sendable {
        case registering
        case registered
        case avahiUnavailable = "avahi_unavailable"
    }

    private let configuration: DaemonConfiguration
    private let advertisement: PeerAdvertisement
    private let port: UInt16
    private let hub: EventHub
    private let directory: PeerDirectory
    private let logger: Logger
    /// 0 = all interfaces; else one entry per `--interface`.
    private let interfaceIndices: [UInt32]
    private var table: PeerTable
    private var advertising: [UInt32: (state: AdvertisingState, name: String?)] = [:]
    private let resolveRequests: AsyncStream<ServiceInstance>
    private let resolveContinuation: AsyncStream<ServiceInstance>.Continuation

    public init(
        configuration: DaemonConfiguration, advertisement: PeerAdvertisement, port: UInt16, interfaceIndices: [UInt32], hub: EventHub,
        directory: PeerDirectory = PeerDirectory(), logger: Logger
    ) {
        self.directory = directory
        self.configuration = configuration
        self.advertisement = advertisement
        self.port = port
        self.interfaceIndices = interfaceIndices.isEmpty ? [0] : interfaceIndices
        self.hub = hub
        self.logger = logger
        self.table = PeerTable(ownID: advertisement.peerID)
        (resolveRequests, resolveContinuation) = AsyncStream<ServiceInstance>.makeStream()
        for index in self.interfaceIndices { advertising[index] = (.registering, nil) }
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                for index in self.interfaceIndices {
                    group.addTask { await self.advertiseLoop(interfaceIndex: index) }
                    group.addTask { await self.browseLoop(interfaceIndex: index) }
                }
                group.addTask { await self.resolveWorker() }
                group.addTask { await self.refreshLoop() }
            }
        }
        resolveContinuation.finish()
    }

    // MARK: Queries

    /// Peers found on the link, then static peers (by address) that DNS-SD does not also list.
    public var peers: [DiscoveredPeer] {
        let discovered = table.peers
        let seen = Set(discovered.compactMap { $0.advertisement?.peerID })
        return discovered + staticPeers.values.filter { !seen.contains($0.advertisement!.peerID) }.sorted { $0.instanceName < $1.instanceName }
    }

    // MARK: Static peers

    /// Peers added by address (`StaticPeers`), by id.
    private var staticPeers: [PeerID: DiscoveredPeer] = [:]

    /// Lists a static peer (or updates it) and tells the session layer where to dial it.
    public func setStatic(_ peer: DiscoveredPeer) {
        guard let advertisement = peer.advertisement else { return }
        let id = advertisement.peerID
        let previous = staticPeers.updateValue(peer, forKey: id)
        directory.update(id, Self.hint(peer))
        guard previous != peer else { return }
        logger.info(
            previous == nil ? "static peer added" : "static peer changed",
            metadata: [
                "peer.id": "\(id.short)", "peer.name": "\(advertisement.displayName)", "peer.address": "\(peer.instanceName)",
            ])
        hub.publish(ControlEvent(time: Self.now(), previous == nil ? .found(Self.info(peer)) : .changed(Self.info(peer))))
    }

    /// Stops listing a static peer; DNS-SD's view of it, if any, stays.
    public func removeStatic(_ id: PeerID) {
        guard let peer = staticPeers.removeValue(forKey: id) else { return }
        if let discovered = table.peers.first(where: { $0.advertisement?.peerID == id }) {
            directory.update(id, Self.hint(discovered))
        } else {
            directory.remove(id)
        }
        hub.publish(ControlEvent(time: Self.now(), .lost(Self.info(peer))))
    }

    static func hint(_ peer: DiscoveredPeer) -> PeerAddressHint {
        let advertisement = peer.advertisement!
        return PeerAddressHint(
            name: advertisement.displayName, port: Int(peer.port), addresses: peer.addresses,
            encryption: EncryptionPreference(rawValue: advertisement.encryption.rawValue))
    }

    /// The overall advertising state and the instance name (of the first interface).
    public var advertisingStatus: (state: AdvertisingState, instance: String?) {
        let states = interfaceIndices.compactMap { advertising[$0] }
        if states.contains(where: { $0.state == .avahiUnavailable }) { return (.avahiUnavailable, states.first?.name) }
        if states.allSatisfy({ $0.state == .registered }) { return (.registered, states.first?.name) }
        return (.registering, states.first?.name)
    }

    /// Whether our browse has seen our own advertisement under the name it is registered with.
    public var advertisementVisible: Bool {
        guard let instance = advertisingStatus.instance else { return false }
        return table.ownInstanceNames.contains(instance)
    }

    // MARK: Advertising

    private func setAdvertising(_ state: AdvertisingState, name: String?, interfaceIndex: UInt32) {
        let previous = advertising[interfaceIndex]
        advertising[interfaceIndex] = (state, name)
        guard previous?.state != state || previous?.name != name else { return }
        hub.publish(ControlEvent(time: Self.now(), .advertising(state: state.rawValue, instance: name)))
    }

    private func advertiseLoop(interfaceIndex: UInt32) async {
        let txt: [UInt8]
        do { txt = try advertisement.txtRecord.encode() } catch {
            logger.critical("cannot encode our TXT record", metadata: ["error": "\(error)"])
            return
        }
        await AdvertiseLoop.run(
            base: advertisement.displayName, peerID: advertisement.peerID, type: DNSSD.chatServiceType, port: port, txt: txt,
            interfaceIndex: interfaceIndex
        ) { event in
            await self.advertised(event, interfaceIndex: interfaceIndex)
        }
    }

    /// What the advertising loop reports, in the log and as `advertising` events.
    private func advertised(_ event: AdvertiseLoop.Event, interfaceIndex: UInt32) {
        switch event {
        case .registering:
            setAdvertising(.registering, name: nil, interfaceIndex: interfaceIndex)
        case .registered(let name, let requested):
            if name != requested {
                logger.notice("advertised under another name: the name is taken on the network", metadata: ["dnssd.instance": "\(name)"])
            } else {
                logger.info("advertised", metadata: ["dnssd.instance": "\(name)", "peer.port": "\(port)"])
            }
            setAdvertising(.registered, name: name, interfaceIndex: interfaceIndex)
        case .lost(let error):
            logger.warning("advertisement lost; registering again", metadata: ["error": "\(error)"])
            setAdvertising(.avahiUnavailable, name: nil, interfaceIndex: interfaceIndex)
        case .withdrawn:
            logger.info("advertisement withdrawn")
        case .contested(let name, let next, let step, let waited, let attempt, let nextWait):
            let metadata: Logger.Metadata = [
                "dnssd.instance": "\(next)", "dnssd.contested": "\(name)", "waited_s": "\(waited.components.seconds)",
                "attempt": "\(attempt)", "next_wait_s": "\(nextWait.components.seconds)",
            ]
            switch step {
            case .tag(let length) where length == ContestedName.tagLengths[0]:
                logger.warning("the name stayed contested on the network; advertising under a name of our own", metadata: metadata)
            case .tag:
                logger.warning("the name of our own is contested on the network too; advertising under a longer one", metadata: metadata)
            case .again:
                logger.warning(
                    "our name is still contested on the network (a host may be answering for every name we try); registering it again", metadata: metadata)
            }
        case .takenOnHost(let name):
            logger.notice("name taken on this host; trying another", metadata: ["dnssd.instance": "\(name)"])
        case .unavailable(let error, let first):
            if first {
                logger.warning("cannot advertise; retrying with backoff", metadata: ["error": "\(error)"])
            } else {
                logger.debug("cannot advertise", metadata: ["error": "\(error)"])
            }
            setAdvertising(.avahiUnavailable, name: nil, interfaceIndex: interfaceIndex)
        }
    }

    // MARK: Browsing

    private func browseLoop(interfaceIndex: UInt32) async {
        await BrowseLoop.run(type: DNSSD.chatServiceType, interfaceIndex: interfaceIndex, sweepDelay: .seconds(configuration.sweepDelay)) { event in
            await self.browsed(event)
        }
    }

    /// What the browsing loop reports: into the peer table, and the log.
    private func browsed(_ event: BrowseLoop.Event) {
        switch event {
        case .browsing(let restarted):
            guard restarted else { return }
            table.browseRestarted()
            logger.info("browsing again")
        case .added(let instance):
            logger.trace("browse add", metadata: ["dnssd.instance": "\(instance)"])
            apply(table.added(instance))
        case .removed(let instance):
            logger.trace("browse remove", metadata: ["dnssd.instance": "\(instance)"])
            apply(table.removed(instance))
        case .sweepDue:
            apply(table.sweep())
        case .lost(let error):
            logger.warning("browse lost; browsing again", metadata: ["error": "\(error)"])
        case .unavailable(let error, let first):
            if first { logger.warning("cannot browse; retrying with backoff", metadata: ["error": "\(error)"]) }
        }
    }

    // MARK: Resolving

    private func resolveWorker() async {
        await PeerTable.resolveEach(resolveRequests) { await self.resolve($0) }
    }

    /// Resolves an instance and looks up its addresses (`BrowseLoop.resolve`: up to three attempts).
    private nonisolated func resolve(_ instance: ServiceInstance) async {
        let logger = logger
        let found = await BrowseLoop.resolve(instance, stillWanted: { await self.isKnown(instance) }) { event in
            switch event {
            case .resolved(let instance, let resolveMilliseconds, let addressMilliseconds):
                logger.debug(
                    "resolved",
                    metadata: [
                        "dnssd.instance": "\(instance.name)", "dnssd.resolve_ms": "\(resolveMilliseconds)", "dnssd.address_ms": "\(addressMilliseconds)",
                    ])
            case .noAddressYet(let host):
                logger.debug("no address yet", metadata: ["dnssd.host": "\(host)"])
            case .failed(let instance, let error):
                logger.debug("resolve failed", metadata: ["dnssd.instance": "\(instance)", "error": "\(error)"])
            case .gaveUp(let instance):
                logger.info("could not resolve a service; it stays unlisted", metadata: ["dnssd.instance": "\(instance.name)"])
            }
        }
        if let (service, addresses) = found { await resolved(instance, service, addresses: addresses) }
    }

    private func isKnown(_ instance: ServiceInstance) -> Bool {
        table.knows(instance)
    }

    private func resolved(_ instance: ServiceInstance, _ service: ResolvedService, addresses: [String]) {
        apply(table.resolved(instance, service, addresses: addresses))
    }

    private func refreshLoop() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(configuration.refreshInterval))
            for instance in table.instancesToRefresh {
                resolveContinuation.yield(instance)
            }
        }
    }

    // MARK: Actions

    private func apply(_ actions: [PeerTable.Action]) {
        for action in actions {
            switch action {
            case .resolve(let instance):
                resolveContinuation.yield(instance)
            case .emit(let event):
                let (type, peer): (String, DiscoveredPeer)
                switch event {
                case .found(let p): (type, peer) = ("found", p)
                case .changed(let p): (type, peer) = ("changed", p)
                case .lost(let p): (type, peer) = ("lost", p)
                }
                var metadata: Logger.Metadata = ["dnssd.instance": "\(peer.instanceName)"]
                if let id = peer.advertisement?.peerID { metadata["peer.id"] = "\(id.short)" }
                if let problem = peer.problem { metadata["problem"] = "\(problem)" }
                logger.info("peer \(type)", metadata: metadata)
                if let advertisement = peer.advertisement {
                    if type == "lost" {
                        // A static peer stays reachable at its address when the link stops seeing it.
                        if let kept = staticPeers[advertisement.peerID] {
                            directory.update(advertisement.peerID, Self.hint(kept))
                        } else {
                            directory.remove(advertisement.peerID)
                        }
                    } else {
                        directory.update(advertisement.peerID, Self.hint(peer))
                    }
                }
                let info = Self.info(peer)
                let kind: ControlEvent.Kind =
                    switch event {
                    case .found: .found(info)
                    case .changed: .changed(info)
                    case .lost: .lost(info)
                    }
                hub.publish(ControlEvent(time: Self.now(), kind))
            }
        }
    }

    static func now() -> String {
        Date.now.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    /// The control API's view of a peer.
    public static func info(_ peer: DiscoveredPeer) -> PeerInfo {
        let interfaces = peer.interfaceIndices.sorted().map { index -> String in
            var name = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
            guard index != 0, if_indextoname(index, &name) != nil else { return "\(index)" }
            return name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        }
        return PeerInfo(
            name: peer.advertisement?.displayName ?? peer.instanceName,
            id: peer.advertisement?.peerID.rawValue, shortId: peer.advertisement?.peerID.short,
            instance: peer.instanceName, host: peer.hostName, port: Int(peer.port), addresses: peer.addresses,
            interfaces: interfaces, state: "discovered", rooms: [], compatible: peer.isCompatible,
            problem: peer.problem?.description, protocolVersion: peer.advertisement?.version,
            encryption: peer.advertisement?.encryption.rawValue, origin: peer.origin.rawValue)
    }
}

extension Duration {
    /// Whole milliseconds, for log metadata.
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
