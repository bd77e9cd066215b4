import DNSSD
import FoundationEssentials
import Glibc
import LanchatControl
import LanchatDiscovery
import LanchatIdentity
import Logging
import NIOPosix
import ServiceLifecycle

/// `lanchatd`: wires identity, the peer port, discovery and the control API into one service group
/// that stops in reverse order on SIGTERM/SIGINT (control API first, then the advertisement is
/// withdrawn, then the peer port closes).
public enum Daemon {
    public static let version = lanchatVersion

    public struct StartupError: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    public static func run(configuration: DaemonConfiguration, logger: Logger) async throws {
        umask(0o077)
        do {
            try FileManager.default.createDirectory(atPath: configuration.stateDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw StartupError("cannot create the state directory \(configuration.stateDirectory): \(error)")
        }
        let identity: Identity
        do { identity = try Identity.loadOrCreate(in: configuration.stateDirectory) } catch { throw StartupError(error.description) }

        var interfaceIndices: [UInt32] = []
        for name in configuration.interfaces {
            let index = if_nametoindex(name)
            guard index != 0 else { throw StartupError("interface '\(name)' does not exist (see `ip link`)") }
            interfaceIndices.append(index)
        }

        let eventLoopGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            try await run(configuration: configuration, identity: identity, interfaceIndices: interfaceIndices, eventLoopGroup: eventLoopGroup, logger: logger)
        } catch {
            try? await eventLoopGroup.shutdownGracefully()
            throw error
        }
        try? await eventLoopGroup.shutdownGracefully()
    }

    private static func run(
        configuration: DaemonConfiguration, identity: Identity, interfaceIndices: [UInt32],
        eventLoopGroup: MultiThreadedEventLoopGroup, logger: Logger
    ) async throws {
        let listener: PeerPortListener
        do {
            listener = try await PeerPortListener(port: configuration.port, eventLoopGroup: eventLoopGroup, logger: logger)
        } catch {
            throw StartupError("cannot listen on peer port \(configuration.port): \(error) (is another lanchatd using it? try --port 0)")
        }
        let advertisement = PeerAdvertisement(peerID: identity.peerID, displayName: configuration.name, encryption: configuration.encryption)
        let hub = EventHub(bufferSize: configuration.watchBufferSize)
        let discovery = DiscoveryService(
            configuration: configuration, advertisement: advertisement, port: UInt16(listener.port),
            interfaceIndices: interfaceIndices, hub: hub, logger: logger)
        let handler = DaemonControlHandler(
            advertisement: advertisement, port: listener.port, discovery: discovery, hub: hub, startedAt: DiscoveryService.now())
        let control: ControlServer
        do {
            control = try await ControlServer(configuration: configuration, handler: handler, eventLoopGroup: eventLoopGroup, logger: logger)
        } catch let error as ControlSocket.SetupError {
            throw StartupError(error.description)
        } catch {
            throw StartupError("cannot serve the control socket \(configuration.socketPath): \(error)")
        }
        logger.info("lanchatd started", metadata: [
            "peer.id": "\(identity.peerID)", "peer.name": "\(advertisement.displayName)", "peer.port": "\(listener.port)",
            "control.socket": "\(configuration.socketPath)", "state.dir": "\(configuration.stateDirectory)",
        ])
        let group = ServiceGroup(
            services: [listener, discovery, control],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger)
        try await group.run()
        hub.finishAll()
        logger.info("lanchatd stopped")
    }
}

/// The control API's answers, from the daemon's parts.
struct DaemonControlHandler: ControlHandler {
    let advertisement: PeerAdvertisement
    let port: Int
    let discovery: DiscoveryService
    let hub: EventHub
    let startedAt: String

    func status() async -> DaemonStatus {
        let advertising = await discovery.advertisingStatus
        let peers = await discovery.peers
        return DaemonStatus(
            name: advertisement.displayName, id: advertisement.peerID.rawValue, shortId: advertisement.peerID.short,
            instance: advertising.instance, advertising: advertising.state.rawValue, port: port,
            protocolVersion: advertisement.version, encryption: advertisement.encryption.rawValue,
            peers: peers.filter(\.isCompatible).count, pid: Int(getpid()), version: Daemon.version, startedAt: startedAt)
    }

    func peers() async -> [PeerInfo] {
        await discovery.peers.map(DiscoveryService.info)
    }

    func events() -> AsyncStream<ControlEvent> {
        hub.subscribe()
    }
}
