import FoundationEssentials
import Glibc
import LanchatControl
import LanchatCore
import LanchatDiscovery
import LanchatEngine
import LanchatIdentity
import LanchatKit
import LanchatSecurity
import LanchatSession
import LanchatStore
import LanchatTransport
import LanchatWire
import Logging
import NIOCore
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
        // Received files and history: create their directories now, so that a problem is said at startup
        // (the daemon still serves everything else, and refuses files with the same words until fixed).
        let downloads = StorageDirectory(
            role: "the download directory", path: configuration.downloadDirectory, mode: configuration.socketGroup != nil ? 0o750 : 0o700)
        for directory in [downloads, StorageDirectory(role: "the history directory", path: joinPath(configuration.stateDirectory, "incoming"))] {
            if let problem = directory.prepare().problem {
                logger.warning("\(problem); files will be refused until it is fixed", metadata: ["directory": "\(directory.path)"])
            }
        }
        let storePath = joinPath(configuration.stateDirectory, ChatStore.fileName)
        let store: ChatStore
        do { store = try ChatStore(path: storePath) } catch {
            let hint = error.description.contains("in use by another lanchatd") ? "" : " (move it away to start a new one)"
            throw StartupError("cannot open the history database: \(error.description)\(hint)")
        }
        let knownPeers: KnownPeers
        do { knownPeers = try KnownPeers(directory: configuration.stateDirectory) } catch { throw StartupError(error.description) }
        let hub = EventHub(bufferSize: configuration.watchBufferSize)
        // The session is LanchatKit's (the library is what the daemon runs): TLS, the peer port, the node.
        let session: Session
        do {
            let name = PeerAdvertisement.sanitize(configuration.name)
            var host = Session.Host(
                name: name, encryption: EncryptionPreference(rawValue: configuration.encryption.rawValue)!, store: store, knownPeers: knownPeers)
            host.maximumWireVersion = configuration.maximumWireVersion
            // The usual peer port when it is free and none was chosen; else the one chosen (0: any).
            host.ports = configuration.portChosen ? [configuration.port] : [PeerAddress.defaultPort, configuration.port]
            host.loops = eventLoopGroup
            host.logger = logger
            host.events = SessionService.publisher(hub: hub, logger: logger)
            host.startsRunning = false  // (`SessionService` starts it)
            host.configure = { [configuration] session in
                session.autoAccept = AutoAcceptPolicy(rawValue: configuration.autoAccept.rawValue)!
                session.downloadDirectory = configuration.downloadDirectory
                session.historyDirectory = joinPath(configuration.stateDirectory, "incoming")
                session.downloadsForGroup = configuration.socketGroup != nil
                session.historyForNewcomers = configuration.historyForNewcomers
                session.historyWait = .seconds(configuration.historyWait)
                session.maximumFileSize = configuration.maximumFileSize
                if configuration.maximumWireVersion < 2 { session.envelopes = nil }
                session.sharedDirectory = joinPath(configuration.stateDirectory, "shared")
                session.keepSharedFiles = configuration.keepSharedFiles
                session.sharedFilesDays = configuration.sharedFilesDays
                session.sharedFilesQuota = configuration.sharedFilesQuota
                session.sharedAutoFetchLimit = configuration.sharedAutoFetchLimit
                if configuration.autoAwaySeconds > 0 { session.autoAway = .seconds(configuration.autoAwaySeconds) }
            }
            session = try await Session.start(identity: PeerIdentity(host: identity, displayName: name), host: host)
        } catch {
            switch error.code {
            case .network where error.message.hasPrefix(Session.listenFailure):
                throw StartupError("\(error.message) (is another lanchatd using it? try --port 0)")
            case .storage where error.message.hasPrefix(Session.historyFailure):
                throw StartupError("cannot load rooms from the history database: \(error.message.dropFirst(Session.historyFailure.count))")
            default: throw StartupError(error.message)
            }
        }
        do {
            try await serve(
                configuration: configuration, identity: identity, interfaceIndices: interfaceIndices, session: session, hub: hub, downloads: downloads,
                eventLoopGroup: eventLoopGroup, logger: logger)
        } catch {
            await session.close()
            throw error
        }
    }

    /// The daemon's parts around its session, served until SIGTERM or SIGINT.
    private static func serve(
        configuration: DaemonConfiguration, identity: Identity, interfaceIndices: [UInt32], session: Session, hub: EventHub, downloads: StorageDirectory,
        eventLoopGroup: MultiThreadedEventLoopGroup, logger: Logger
    ) async throws {
        let node = session.sessionNode
        let connector = session.peerConnector
        let advertisement = PeerAdvertisement(peerID: identity.peerID, displayName: configuration.name, encryption: configuration.encryption)
        let discovery = DiscoveryService(
            configuration: configuration, advertisement: advertisement, port: UInt16(session.port),
            interfaceIndices: interfaceIndices, hub: hub, directory: session.peerDirectory, logger: logger)
        let staticPeers = StaticPeers(
            stateDirectory: configuration.stateDirectory, configured: configuration.staticPeers, ownID: identity.peerID,
            connector: connector, discovery: discovery, logger: logger, adopt: { connection in await node.accepted(connection) })
        let passedFiles = PassedFiles()
        let handler = DaemonControlHandler(
            advertisement: advertisement, port: session.port, downloads: downloads, discovery: discovery, staticPeers: staticPeers,
            connector: connector, hub: hub,
            startedAt: DiscoveryService.now(), node: node,
            sessions: SessionControl(
                node: node, discovery: discovery, passedFiles: passedFiles, sendsOnlyHandedOverFiles: configuration.socketGroup != nil))
        let control: ControlServer
        do {
            control = try await ControlServer(configuration: configuration, handler: handler, eventLoopGroup: eventLoopGroup, logger: logger)
        } catch let error as ControlSocket.SetupError {
            throw StartupError(error.description)
        } catch {
            throw StartupError("cannot serve the control socket \(configuration.socketPath): \(error)")
        }
        let filePassing: FilePassingServer
        do {
            let group = try configuration.socketGroup.map { name throws(ControlSocket.SetupError) in try ControlSocket.groupID(named: name) }
            filePassing = try FilePassingServer(controlSocket: configuration.socketPath, group: group, files: passedFiles, logger: logger)
        } catch {
            throw StartupError(error.description)
        }
        var services: [any Service] = [SessionService(session: session), discovery, staticPeers, control, filePassing]
        if let web = configuration.web {
            if let server = try await startWeb(
                web, configuration: configuration, handler: handler, passedFiles: passedFiles, eventLoopGroup: eventLoopGroup, logger: logger)
            {
                services.append(server)
            }
        } else {
            // Left by a daemon that did not stop cleanly: `lanchat web` must not print its dead address.
            unlink(WebAccess.filePath(forControlSocket: configuration.socketPath))
        }
        logger.info(
            "lanchatd started",
            metadata: [
                "peer.id": "\(identity.peerID)", "peer.name": "\(advertisement.displayName)", "peer.port": "\(session.port)",
                "control.socket": "\(configuration.socketPath)", "state.dir": "\(configuration.stateDirectory)",
            ])
        let group = ServiceGroup(
            services: services,
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
    let downloads: StorageDirectory
    let discovery: DiscoveryService
    let staticPeers: StaticPeers
    let connector: PeerConnector
    let hub: EventHub
    let startedAt: String
    let node: SessionNode
    let sessions: SessionControl

    /// The one table from a method to what answers it.
    func respond(to call: ControlCall, id: Int) async -> ControlResponse {
        let payload: ControlResponse.Payload
        do throws(ControlError) {
            switch call {
            case .status: payload = .status(await status())
            case .peers: payload = .peers(await peers())
            case .ping(let peer, let count): payload = .ping(try await ping(query: peer, count: count))
            case .invite(let invite): payload = .invite(try await sessions.invite(invite))
            case .invitations: payload = .invitations(await sessions.invitations())
            case .accept(let id, let history): payload = .invitation(try await sessions.answer(id, accept: true, reason: nil, history: history))
            case .decline(let id, let reason): payload = .invitation(try await sessions.answer(id, accept: false, reason: reason))
            case .rooms: payload = .rooms(await sessions.rooms())
            case .members(let room): payload = .room(try await sessions.members(room))
            case .leave(let room): try await sessions.leave(room); payload = .none
            case .send(let send): payload = .sent(try await sessions.send(send))
            case .history(let room, let limit): payload = .history(try await sessions.history(room: room, limit: limit))
            case .search(let search): payload = .history(try await sessions.search(search))
            case .forget(let peer): payload = .forgotten(try await sessions.forget(peer))
            case .trust(let peer): payload = .trusted(try await sessions.trust(peer))
            case .sendFile(let peer, let path, let token):
                // A bare ok only if the transfer left the list (the last 100 ended) before it was looked up.
                payload = try await sessions.sendFile(to: peer, path: path, fileToken: token).map { .transfer($0) } ?? .none
            case .transfers: payload = .transfers(await sessions.transfers())
            case .cancel(let id): payload = .transfer(try await sessions.cancel(id))
            case .connect(let address, let confirm): payload = .connect(try await connect(address, confirm: confirm))
            case .disconnect(let peer): payload = .peers([try await disconnect(peer)])
            case .presence(let availability, let text): payload = .presence(await sessions.presence(availability: availability, text: text))
            case .hand(let up, let room): payload = .presence(try await sessions.hand(up: up, room: room))
            case .meta(let meta): payload = .meta(try await sessions.meta(meta))
            case .typing(let room): try await sessions.typing(room); payload = .none
            case .topicPublish(let publish): payload = .topic(try await sessions.publish(publish))
            case .remove(let peer, let room, let reason): payload = .room(try await sessions.remove(peer, from: room, reason: reason ?? ""))
            case .close(let room, let reason): try await sessions.closeRoom(room, reason: reason ?? ""); payload = .none
            case .admin(let peer, let room, let on): payload = .room(try await sessions.admin(peer, of: room, on))
            case .share(let room, let path, let token): payload = .files([try await sessions.share(room: room, path: path, fileToken: token)])
            case .files(let room, let limit): payload = .files(try await sessions.files(room: room, limit: limit))
            case .fetch(let id, let to): payload = .transfer(try await sessions.fetch(id, to: to))
            case .watch, .stream, .streamAccept, .topicSubscribe: throw .badRequest("\(call.method.rawValue) is not a one-answer method")
            }
        } catch {
            return .failure(id: id, error)
        }
        return ControlResponse(id: id, payload)
    }

    func openStream(named name: String, to peer: String) async throws(ControlError) -> any ControlStream {
        try await sessions.openStream(named: name, to: peer)
    }

    func acceptStream(named name: String, from peer: String?, isAlive: @escaping @Sendable () -> Bool) async throws(ControlError) -> any ControlStream {
        try await sessions.acceptStream(named: name, from: peer, isAlive: isAlive)
    }

    func status() async -> DaemonStatus {
        let advertising = await discovery.advertisingStatus
        let peers = await peers()
        var status = DaemonStatus(
            name: advertisement.displayName, id: advertisement.peerID.rawValue, shortId: advertisement.peerID.short,
            instance: advertising.instance, advertising: advertising.state.rawValue, port: port,
            protocolVersion: advertisement.version, encryption: advertisement.encryption.rawValue,
            peers: peers.filter(\.compatible).count, pid: Int(getpid()), version: Daemon.version, startedAt: startedAt)
        status.advertisementVisible = await discovery.advertisementVisible
        status.downloadDirectory = downloads.path
        switch downloads.prepare() {
        case .usable(let free): status.downloadFreeBytes = free
        case .unusable(let problem): status.downloadProblem = problem
        }
        return status
    }

    /// Discovered peers, with their session state and the rooms we share with them, then the peers with a
    /// live connection that discovery does not list (origin `connected`: typically a peer that dialed us).
    func peers() async -> [PeerInfo] {
        let connections = await node.connections
        var connected = Set<String>()
        var presences: [PeerID: SessionStateMachine.PresenceState] = [:]
        for id in connections.keys {
            if await node.isConnected(id) { connected.insert(id.rawValue) }
            presences[id] = await node.presence(of: id)
        }
        let listed = await discovery.peers.map { peer in
            var info = DiscoveryService.info(peer)
            if let id = peer.advertisement?.peerID {
                info.rooms = connections[id] ?? []
                if connected.contains(id.rawValue) { info.state = "connected" } else if !info.rooms.isEmpty { info.state = "not_connected" }
            }
            return info
        }
        // What each peer told of its presence, discovered or connected alike.
        return PeerListing.merge(listed, links: await node.liveLinks, rooms: connections).map { peer in
            guard let id = peer.id.flatMap(PeerID.init), let presence = presences[id] else { return peer }
            var info = peer
            info.availability = presence.availability.name
            info.statusText = presence.text
            return info
        }
    }

    /// Dials an address and says who answers; with `confirm` (the id the person checked), keeps it.
    func connect(_ text: String, confirm: String?) async throws(ControlError) -> ConnectResult {
        let address: PeerAddress
        switch PeerAddress.parse(text) {
        case .success(let parsed): address = parsed
        case .failure(let error): throw ControlError(code: .badAddress, message: error.description)
        }
        var confirmed: PeerID?
        if let confirm {
            guard let id = PeerID(confirm) else { throw .badRequest("params.confirm must be a full peer id (52 characters)") }
            confirmed = id
        }
        return try await staticPeers.connect(address, confirm: confirmed)
    }

    /// Stops keeping a static peer; the answer is the peer, as it was, marked "removed".
    func disconnect(_ query: String) async throws(ControlError) -> PeerInfo {
        let statics = await discovery.peers.filter { $0.origin == .static }
        let peer: DiscoveredPeer
        switch PeerQuery.match(query, in: statics) {
        case .success(let found): peer = found
        case .failure(.ambiguous(_, let candidates)):
            throw ControlError(code: .ambiguousPeer, message: "'\(query)' matches several static peers: \(candidates.joined(separator: ", "))")
        case .failure:
            throw ControlError(code: .unknownPeer, message: "no static peer matches '\(query)' (see `lanchat peers`)")
        }
        _ = try await staticPeers.disconnect(peer.advertisement!.peerID)
        var info = DiscoveryService.info(peer)
        info.state = "removed"
        return info
    }

    func events() -> AsyncStream<ControlEvent> {
        hub.subscribe()
    }

    func subscribe(topic: String, room: String?) async throws(ControlError) -> AsyncStream<ControlEvent> {
        try await sessions.subscribe(topic: topic, room: room)
    }

    /// Connects to a peer (TLS pinned to its advertised id, then HELLO), sends `count` PINGs, leaves.
    func ping(query: String, count: Int) async throws(ControlError) -> PingResult {
        let peer: DiscoveredPeer
        switch PeerQuery.match(query, in: await discovery.peers) {
        case .success(let found): peer = found
        case .failure(let failure): throw ControlError(code: .unknownPeer, message: failure.description)
        }
        let advertisement = peer.advertisement!
        guard let (address, text) = Self.socketAddress(peer) else {
            throw ControlError(code: .unreachable, message: "\(advertisement.displayName) has no usable address yet")
        }
        let clock = ContinuousClock()
        let started = clock.now
        let connection: PeerConnector.Connection
        // The advertisement is unauthenticated: an id seen with a key is pinged with TLS whatever it says.
        var theirs = EncryptionPreference(rawValue: advertisement.encryption.rawValue)!
        if connector.encryption != .none, await node.isKeyed(advertisement.peerID) { theirs = .required }
        do {
            connection = try await connector.dial(address, expected: advertisement.peerID, theirs: theirs, probe: true)
        } catch {
            throw ControlError(code: .connectFailed, message: "\(advertisement.displayName): \(error.description)")
        }
        let handshake = clock.now - started
        var rtts: [Double] = []
        for _ in 0..<count {
            do { rtts.append(Self.milliseconds(try await connection.ping())) } catch {
                await connection.close()
                throw ControlError(code: .connectionLost, message: "\(advertisement.displayName): \(error)")
            }
        }
        await connection.close()
        return PingResult(
            name: advertisement.displayName, id: advertisement.peerID.rawValue, address: text, port: Int(peer.port),
            encrypted: connection.encrypted, protocolVersion: Int(connection.session.version),
            shortCode: ShortCode.between(self.advertisement.peerID, advertisement.peerID),
            handshakeMs: Self.milliseconds(handshake), rttMs: rtts)
    }

    static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        // One millisecond is 10^15 attoseconds.
        return (Double(seconds) * 1000 + Double(attoseconds) / 1e15).rounded(toPlaces: 3)
    }

    /// The first address we can dial: IPv4 first, then IPv6 (link-local with its scope).
    static func socketAddress(_ peer: DiscoveredPeer) -> (SocketAddress, String)? {
        for text in peer.addresses {
            let parts = text.split(separator: "%", maxSplits: 1)
            if parts.count == 1, let address = try? SocketAddress(ipAddress: text, port: Int(peer.port)) {
                return (address, text)
            }
            // Link-local IPv6: the scope (interface) must go into the socket address.
            var v6 = sockaddr_in6()
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = peer.port.bigEndian
            guard inet_pton(AF_INET6, String(parts[0]), &v6.sin6_addr) == 1 else { continue }
            if parts.count == 2 { v6.sin6_scope_id = if_nametoindex(String(parts[1])) }
            return (SocketAddress(v6, host: String(parts[0])), text)
        }
        return nil
    }
}

extension Double {
    func rounded(toPlaces places: Int) -> Double {
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        return (self * scale).rounded() / scale
    }
}
