internal import FoundationEssentials
internal import Glibc
internal import LanchatCore
internal import LanchatDiscovery
internal import LanchatEngine
internal import LanchatIdentity
internal import LanchatSecurity
internal import LanchatSession
internal import LanchatStore
internal import LanchatTransport
internal import LanchatWire
internal import Logging
internal import NIOCore
internal import NIOPosix
internal import Synchronization

// How a session starts: TLS, its peer port, its storage and its node (one way, for a program's `start`
// and lanchatd's `start(identity:host:)`).
extension Session {
    /// The one way a session starts, a program's (`start`) or lanchatd's (`start(identity:host:)`): TLS
    /// set up for `identity`, the first of `host.ports` that opens, the node made and run.
    static func launch(
        identity: PeerIdentity, group room: RoomID, serviceType: String, host: sending Host, scratch: String?
    ) async throws(LanchatError)
        -> Session
    {
        // (What is used after the store goes to the node is read first: the store takes `host`'s region with it.)
        let (store, knownPeers, events, startsRunning) = (host.store, host.knownPeers, host.events, host.startsRunning)
        let encryption = Encryption(rawValue: host.encryption.rawValue) ?? .required
        let loops = host.loops ?? MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let ownsLoops = host.loops == nil
        let connector: PeerConnector
        do {
            let tls = try PeerTLS(certificate: IdentityCertificate(identity: identity.identity))
            let hello = WireFrame.Hello(
                minimumVersion: WireFrame.versions.lowerBound, maximumVersion: host.maximumWireVersion,
                peerID: identity.identity.peerID.rawValue, name: host.name, capabilities: ["chat"])
            connector = PeerConnector(hello: hello, encryption: host.encryption, tls: tls, group: loops)
        } catch {
            if ownsLoops { try? await loops.shutdownGracefully() }
            throw LanchatError(.network, "cannot set up TLS: \(error)")
        }
        let box = NodeBox()
        let logger = host.logger
        let refusals = LogThrottle()
        var opened: Channel?
        var failure = ""
        for port in host.ports where opened == nil {
            do {
                opened = try await connector.listen(port: port) { connection in
                    logger.info(
                        "peer connected",
                        metadata: [
                            "peer.id": "\(connection.session.peerID.prefix(12))",
                            "peer.address": "\(connection.channel.remoteAddress.map { "\($0)" } ?? "?")",
                        ])
                    guard let node = box.node else { return connection.leave(.shutdown) }
                    // (Unstructured: NIO's synchronous callback hands the connection to the node's actor; the task
                    // ends once `accepted`, synchronous on the actor, returns.)
                    Task { await node.accepted(connection) }
                } failed: { remote, error in
                    guard let suppressed = refusals.mayLog() else { return }
                    var metadata: Logger.Metadata = ["peer.address": "\(remote)", "error": "\(error)"]
                    if suppressed > 0 { metadata["suppressed"] = "\(suppressed)" }
                    logger.info("peer connection refused or closed", metadata: metadata)
                }
            } catch {
                failure = "\(Self.listenFailure)\(port): \(error)"
            }
        }
        guard let listener = opened else {
            if ownsLoops { try? await loops.shutdownGracefully() }
            throw LanchatError(.network, failure)
        }
        let boundPort = listener.localAddress?.port ?? host.ports.last ?? 0
        var configuration = SessionNode.Configuration(
            ownID: identity.identity.peerID, ownName: host.name, port: boundPort, autoAccept: .never, encryption: host.encryption)
        configuration.envelopes = EnvelopeKeys(signer: EnvelopeSigner(identity: identity.identity))
        host.configure(&configuration)
        let node: SessionNode
        let directory = PeerDirectory()
        do {
            node = try SessionNode(
                configuration: configuration, eventLoop: loops.next(), connector: connector, store: store, knownPeers: knownPeers,
                directory: directory, logger: logger)
        } catch {
            try? await listener.close()
            if ownsLoops { try? await loops.shutdownGracefully() }
            throw LanchatError(.storage, "\(Self.historyFailure)\(error)")
        }
        box.node = node
        let session = Session(
            identity: identity, group: room, serviceType: serviceType, encryption: encryption,
            port: boundPort, node: node, connector: connector, directory: directory, lifetime: Lifetime(loops, owned: ownsLoops), listener: listener,
            scratch: scratch, events: events)
        if startsRunning { session.begin() }
        return session
    }

    static func openStorage(_ storage: Storage) throws(LanchatError) -> (any SessionStore, KnownPeers, String, String?) {
        switch storage {
        case .temporary:
            let parent = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
            var template = Array((parent + "/lanchatkit-XXXXXX").utf8CString)
            guard mkdtemp(&template) != nil else {
                throw LanchatError(.storage, "cannot create a private directory in \(parent): \(String(cString: strerror(errno)))")
            }
            let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            do { return (try ChatStore(path: path + "/" + ChatStore.fileName), KnownPeers.inMemory(), path, path) } catch {
                try? FileManager.default.removeItem(atPath: path)
                throw LanchatError(.storage, error.description)
            }
        case .directory(let path):
            do {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw LanchatError(.storage, "cannot create \(path): \(error)")
            }
            let store: ChatStore
            do { store = try ChatStore(path: path + "/" + ChatStore.fileName) } catch { throw LanchatError(.storage, error.description) }
            do { return (store, try KnownPeers(directory: path), path, nil) } catch { throw LanchatError(.storage, error.description) }
        }
    }
}

/// The listener's way to the node, which is made after the port is open (the node must know its port).
final class NodeBox: Sendable {
    private let stored = Mutex<SessionNode?>(nil)
    var node: SessionNode? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}
