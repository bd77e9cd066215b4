import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// Holds the peer port that DNS-SD advertises. Bound before advertising so the port is real and
/// `--port 0` resolves to an actual free port.
///
/// Sessions (TLS, the wire protocol) are not implemented yet: an incoming connection is closed at
/// once. The session layer replaces this accept loop.
public final class PeerPortListener: Service {
    private let server: NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>
    private let logger: Logger
    public let port: Int

    public init(port: Int, eventLoopGroup: MultiThreadedEventLoopGroup, logger: Logger) async throws {
        self.logger = logger
        let bootstrap = ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        let initializer: @Sendable (Channel) -> EventLoopFuture<NIOAsyncChannel<ByteBuffer, ByteBuffer>> = { channel in
            channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
        }
        // "::" accepts IPv4 too on Linux (v4-mapped); fall back to IPv4 where IPv6 is disabled.
        do {
            server = try await bootstrap.bind(host: "::", port: port, childChannelInitializer: initializer)
        } catch {
            server = try await bootstrap.bind(host: "0.0.0.0", port: port, childChannelInitializer: initializer)
        }
        self.port = server.channel.localAddress?.port ?? port
    }

    public func run() async throws {
        // Graceful shutdown cancels the accept loop; that is a normal end, not an error.
        do {
        try await cancelWhenGracefulShutdown {
            try await self.server.executeThenClose { inbound in
                for try await connection in inbound {
                    self.logger.debug("peer connection closed: sessions are not implemented yet",
                                      metadata: ["peer.address": "\(connection.channel.remoteAddress.map { "\($0)" } ?? "?")"])
                    try? await connection.executeThenClose { _, _ in }
                }
            }
        }
        } catch is CancellationError {}
    }
}
