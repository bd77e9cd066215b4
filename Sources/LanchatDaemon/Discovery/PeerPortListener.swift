import LanchatSession
import LanchatTransport
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The peer port that DNS-SD advertises. Bound before advertising, so `--port 0` resolves to an actual
/// free port. Each accepted connection gets TLS (pinned by id on the dialing side) and the HELLO
/// handshake; then it goes to whoever `onConnection` names (the session node).
public final class PeerPortListener: Service {
    private let server: Channel
    private let logger: Logger
    public let port: Int
    private let sink = ConnectionSink()

    /// Where established connections go. Until it is set, they are closed.
    public func onConnection(_ handler: @escaping @Sendable (PeerConnector.Connection) -> Void) {
        sink.handler.withLock { $0 = handler }
    }

    public init(port: Int, connector: PeerConnector, eventLoopGroup: MultiThreadedEventLoopGroup, logger: Logger) async throws {
        self.logger = logger
        let sink = self.sink
        server = try await connector.listen(port: port) { connection in
            logger.info(
                "peer connected",
                metadata: ["peer.id": "\(connection.session.peerID.prefix(12))", "peer.address": "\(connection.channel.remoteAddress.map { "\($0)" } ?? "?")"])
            if let handler = sink.handler.withLock({ $0 }) { handler(connection) } else { connection.leave(.shutdown) }
        } failed: { remote, error in
            // At most one line a second (a flood of connections must not become a flood of log lines).
            guard let suppressed = sink.mayLog() else { return }
            var metadata: Logger.Metadata = ["peer.address": "\(remote)", "error": "\(error)"]
            if suppressed > 0 { metadata["suppressed"] = "\(suppressed)" }
            logger.info("peer connection refused or closed", metadata: metadata)
        }
        self.port = server.localAddress?.port ?? port
    }

    public func run() async throws {
        let server = self.server
        // Closed on graceful shutdown, and also when the group is cancelled (another service failed):
        // waiting on the close future is not cancellable by itself.
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                try? await server.closeFuture.get()
            } onGracefulShutdown: {
                server.close(promise: nil)
            }
        } onCancel: {
            server.close(promise: nil)
        }
    }
}

private final class ConnectionSink: Sendable {
    let handler = Mutex<(@Sendable (PeerConnector.Connection) -> Void)?>(nil)
    private let logged = Mutex<(last: ContinuousClock.Instant?, suppressed: Int)>((nil, 0))

    /// Whether to log a refused connection now, and how many were not logged since the last line.
    func mayLog() -> Int? {
        logged.withLock { state in
            let now = ContinuousClock.now
            if let last = state.last, now - last < .seconds(1) {
                state.suppressed += 1
                return nil
            }
            defer { state = (now, 0) }
            return state.suppressed
        }
    }
}
