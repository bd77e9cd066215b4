import LanchatCore
import LanchatEngine
import LanchatSecurity
import LanchatWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// Opens and accepts peer connections: TLS pinned to the peer id (unless encryption is off), then the
/// HELLO handshake.
public struct PeerConnector: Sendable {
    public let hello: WireFrame.Hello
    public let encryption: EncryptionPreference
    private let tls: PeerTLS
    private let group: EventLoopGroup
    /// PING when no frame but PONGs arrived for `heartbeatInterval` (checked twice an interval); a
    /// connection silent for `heartbeatTimeout` is closed: a peer whose process stopped answering. A peer
    /// whose host stopped answering is noticed sooner, by the kernel (`deadLinks`).
    public var heartbeatInterval: TimeAmount = PeerConnectionHandler.Configuration.defaultHeartbeatInterval
    public var heartbeatTimeout: TimeAmount = PeerConnectionHandler.Configuration.defaultHeartbeatTimeout
    /// The kernel's TCP keepalive on every connection: a silent host's link ends within 8 s.
    public var deadLinks = DeadLinkDetection()

    /// All connections run on `group`; a `SessionNode` wants a group of one loop, which it also uses as its
    /// executor, so that frames reach it without a thread hop.
    public init(hello: WireFrame.Hello, encryption: EncryptionPreference, tls: PeerTLS, group: EventLoopGroup) {
        self.hello = hello
        self.encryption = encryption
        self.tls = tls
        self.group = group
    }

    /// The connection's handler, kept so that it can be reached after the channel has closed and its
    /// pipeline was torn down (events that waited are still delivered); bound to the channel's event loop
    /// (made and used only there).
    typealias HandlerReference = NIOLoopBound<PeerConnectionHandler>

    /// An open, handshaken connection.
    public struct Connection: Sendable {
        public let channel: Channel
        public let session: HandshakeStateMachine.Session
        public let encrypted: Bool
        /// Whether we dialed it (the other side accepted).
        public let dialed: Bool
        let reference: HandlerReference

        /// Whether the peer said the connection only measures (PING), as `lanchat ping` dials.
        public var isProbe: Bool { session.capabilities.contains(WireFrame.Hello.probeCapability) }

        init(channel: Channel, session: HandshakeStateMachine.Session, encrypted: Bool, dialed: Bool, reference: HandlerReference) {
            self.channel = channel
            self.session = session
            self.encrypted = encrypted
            self.dialed = dialed
            self.reference = reference
        }

        /// Runs `body` with the handler on the event loop (now, if we are on it).
        private func onLoop(_ body: @escaping @Sendable (PeerConnectionHandler) -> Void) {
            let reference = self.reference
            if channel.eventLoop.inEventLoop { body(reference.value) } else { channel.eventLoop.execute { body(reference.value) } }
        }
        /// Sets who gets the frames from the peer and, last, why the connection ended: `consumer` is
        /// called on the connection's event loop, in order. Events before this call wait for it.
        public func attach(_ consumer: @escaping @Sendable (PeerLinkEvent) -> Void) {
            onLoop { $0.attach(consumer) }
        }

        /// Writes frames for the peer (one flush for the batch, at the end of the event loop's tick, or
        /// at once with `flushNow`). Does not wait.
        public func send(_ frames: [WireFrame], flushNow: Bool = false) {
            onLoop { $0.send(frames, flushNow: flushNow) }
        }

        /// Whether the connection takes more data without queueing it in memory (for unreliable sends).
        public var isWritable: Bool { channel.isWritable }

        /// Says GOODBYE with `reason` and closes, without waiting.
        public func leave(_ reason: WireFrame.Goodbye.Reason, text: String = "") {
            onLoop { $0.leave(reason: reason, text: text) }
        }

        /// Round trip of one PING.
        public func ping() async throws -> Duration {
            let nonce = UInt64.random(in: 0...UInt64.max)
            let clock = ContinuousClock()
            let started = clock.now
            let channel = self.channel
            try await channel.eventLoop.flatSubmit {
                do {
                    return try channel.pipeline.syncOperations.handler(type: PeerConnectionHandler.self).ping(nonce: nonce, eventLoop: channel.eventLoop)
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
            }.get()
            return clock.now - started
        }

        /// Says GOODBYE (leaving) and closes.
        public func close() async {
            let channel = self.channel
            try? await channel.eventLoop.submit {
                try? channel.pipeline.syncOperations.handler(type: PeerConnectionHandler.self).leave(reason: .leaving)
            }.get()
            try? await channel.closeFuture.get()
        }
    }

    public struct DialError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Connects to a peer advertised with `expected` id and encryption preference `theirs`. With
    /// `expected` nil (an address someone typed), the peer's id is learnt from its certificate, which
    /// needs TLS: the caller shows it to the person before trusting it.
    /// With `probe`, the HELLO says so (`WireFrame.Hello.probeCapability`): the connection is for PING only.
    public func dial(
        _ address: SocketAddress, expected: PeerID?, theirs: EncryptionPreference, probe: Bool = false, timeout: TimeAmount = .seconds(5)
    ) async throws(DialError) -> Connection {
        let useTLS: Bool
        switch EncryptionPreference.negotiate(ours: encryption, theirs: theirs) {
        case .success(let value): useTLS = value
        case .failure(let mismatch): throw DialError(description: mismatch.description)
        }
        guard expected != nil || useTLS else {
            throw DialError(description: "an address can only be trusted over TLS (this daemon's encryption is 'none')")
        }
        let certificateID = NIOLockedValueBox<String?>(nil)
        let pinFailure = NIOLockedValueBox<PeerPinning.Failure?>(nil)
        let established = group.next().makePromise(of: HandshakeStateMachine.Session.self)
        var hello = self.hello
        if probe { hello.capabilities.append(WireFrame.Hello.probeCapability) }
        var configuration = PeerConnectionHandler.Configuration(hello: hello, encrypted: useTLS, advertisedID: expected?.rawValue)
        configuration.heartbeatInterval = heartbeatInterval
        configuration.heartbeatTimeout = heartbeatTimeout
        let handlerConfiguration = configuration
        let tls = self.tls
        let reference = NIOLockedValueBox<HandlerReference?>(nil)
        let channel: Channel
        do {
            channel = try await ClientBootstrap(group: group)
                .connectTimeout(timeout)
                .channelOption(.tcpOption(.tcp_nodelay), value: 1)
                .detectingDeadLinks(deadLinks)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if useTLS {
                            try channel.pipeline.syncOperations.addHandler(
                                try tls.clientHandler(expecting: expected) { result in
                                    switch result {
                                    case .success(let id): certificateID.withLockedValue { $0 = id.rawValue }
                                    case .failure(let failure): pinFailure.withLockedValue { $0 = failure }
                                    }
                                })
                        }
                        let handler = PeerConnectionHandler(configuration: handlerConfiguration, certificateID: certificateID, established: established)
                        reference.withLockedValue { $0 = HandlerReference(handler, eventLoop: channel.eventLoop) }
                        try channel.pipeline.syncOperations.addHandler(handler)
                    }
                }
                .connect(to: address).get()
        } catch {
            established.fail(error)
            throw DialError(description: "cannot connect to \(address): \(error)")
        }
        do {
            let session = try await established.futureResult.get()
            return Connection(channel: channel, session: session, encrypted: useTLS, dialed: true, reference: reference.withLockedValue { $0! })
        } catch {
            try? await channel.close()
            if let failure = pinFailure.withLockedValue({ $0 }) { throw DialError(description: failure.description) }
            throw DialError(description: "\(error)")
        }
    }

    /// What a listener accepts at once: connections still in TLS and HELLO (a host that opens many and
    /// stays silent holds each for the handshake timeout, 10 s) and open connections (each a
    /// descriptor), in all and from one address (a LAN host needs one or two; others keep their share).
    /// Past a cap a new connection is closed at once.
    public struct AcceptLimits: Sendable {
        public var handshakes = 64
        public var handshakesPerAddress = 8
        public var connections = 512
        public var connectionsPerAddress = 32
        public init() {}
    }

    /// Counts what `AcceptLimits` caps, for one listener.
    final class AcceptGate: Sendable {
        struct Counts {
            var handshakes = 0
            var connections = 0
            var byAddress: [String: (handshakes: Int, connections: Int)] = [:]
        }
        let limits: AcceptLimits
        private let counts = NIOLockedValueBox(Counts())
        init(_ limits: AcceptLimits) { self.limits = limits }

        /// Whether a new connection from `address` may start its handshake (counted if so).
        func enter(_ address: String) -> Bool {
            counts.withLockedValue { counts in
                let mine = counts.byAddress[address] ?? (0, 0)
                guard counts.connections < limits.connections, counts.handshakes < limits.handshakes,
                    mine.connections < limits.connectionsPerAddress, mine.handshakes < limits.handshakesPerAddress
                else { return false }
                counts.connections += 1
                counts.handshakes += 1
                counts.byAddress[address] = (mine.handshakes + 1, mine.connections + 1)
                return true
            }
        }

        func handshakeDone(_ address: String) { change(address, handshakes: -1, connections: 0) }
        func closed(_ address: String) { change(address, handshakes: 0, connections: -1) }

        private func change(_ address: String, handshakes: Int, connections: Int) {
            counts.withLockedValue { counts in
                counts.handshakes += handshakes
                counts.connections += connections
                let mine = counts.byAddress[address] ?? (0, 0)
                let now = (mine.handshakes + handshakes, mine.connections + connections)
                counts.byAddress[address] = now == (0, 0) ? nil : now
            }
        }
    }

    public struct Refused: Error, CustomStringConvertible {
        public let description: String
    }

    /// Listens for peers on `port` (0 = any free port; IPv6 and IPv4 where the host has IPv6, else IPv4).
    /// Each connection that completes TLS and HELLO goes to `established`; failures, and connections
    /// closed at once because a cap of `limits` was reached, go to `failed`.
    public func listen(
        port: Int, limits: AcceptLimits = AcceptLimits(), established: @escaping @Sendable (Connection) -> Void,
        failed: @escaping @Sendable (_ remote: String, Error) -> Void = { _, _ in }
    ) async throws -> Channel {
        let connector = self
        let gate = AcceptGate(limits)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .detectingDeadLinks(deadLinks)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let remote = channel.remoteAddress.map { "\($0)" } ?? "?"
                    let address = channel.remoteAddress?.ipAddress ?? "?"
                    guard gate.enter(address) else {
                        let refused = Refused(
                            description: "too many connections being set up (at most \(limits.handshakes), "
                                + "\(limits.handshakesPerAddress) from one address) or open (\(limits.connections), \(limits.connectionsPerAddress) from one address)")
                        failed(remote, refused)
                        throw refused
                    }
                    channel.closeFuture.whenComplete { _ in gate.closed(address) }
                    do {
                        try connector.configureAccepted(channel) { result in
                            gate.handshakeDone(address)
                            switch result {
                            case .success(let connection): established(connection)
                            case .failure(let error): failed(remote, error)
                            }
                        }
                    } catch {
                        gate.handshakeDone(address)
                        throw error
                    }
                }
            }
        do {
            return try await bootstrap.bind(host: "::", port: port).get()
        } catch {
            return try await bootstrap.bind(host: "0.0.0.0", port: port).get()
        }
    }

    /// Sets up an accepted connection: TLS if this daemon's preference is `required`, plain if `none`,
    /// and whichever the caller starts with if `optional`.
    /// `established` is told the outcome of the handshake.
    /// A caller that has not finished TLS and HELLO within `handshakeTimeout` is disconnected (a silent
    /// or slow caller must not hold a connection).
    public func configureAccepted(
        _ channel: Channel, handshakeTimeout: TimeAmount = .seconds(10),
        established: @escaping @Sendable (Result<Connection, Error>) -> Void
    ) throws {
        let certificateID = NIOLockedValueBox<String?>(nil)
        let promise = channel.eventLoop.makePromise(of: HandshakeStateMachine.Session.self)
        let deadline = channel.eventLoop.scheduleTask(in: handshakeTimeout) { channel.close(promise: nil) }
        let encryption = self.encryption
        let tls = self.tls
        let makeTLSHandler = {
            tls.serverHandler { result in
                if case .success(let id) = result { certificateID.withLockedValue { $0 = id.rawValue } }
            }
        }
        let encrypted: Bool? = encryption == .required ? true : encryption == .none ? false : nil
        let connection = PeerConnectionHandler(
            configuration: .init(hello: hello, encrypted: encrypted, advertisedID: nil, heartbeatInterval: heartbeatInterval, heartbeatTimeout: heartbeatTimeout),
            certificateID: certificateID, established: promise)
        let reference = HandlerReference(connection, eventLoop: channel.eventLoop)
        promise.futureResult.whenComplete { result in
            deadline.cancel()
            // With `optional`, the TLS handler is in the pipeline only if the caller chose TLS.
            let encrypted =
                encryption == .required
                || (encryption == .optional && (try? channel.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self)) != nil)
            established(result.map { Connection(channel: channel, session: $0, encrypted: encrypted, dialed: false, reference: reference) })
        }
        switch encryption {
        case .required:
            try channel.pipeline.syncOperations.addHandler(makeTLSHandler())
        case .optional:
            try channel.pipeline.syncOperations.addHandler(EncryptionSniffer(makeTLSHandler: makeTLSHandler, plain: { connection.startPlain() }))
        case .none:
            break
        }
        try channel.pipeline.syncOperations.addHandler(connection)
    }
}
