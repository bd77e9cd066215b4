import Glibc
import LanchatControl
import LanchatCore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import ServiceLifecycle
import Synchronization

/// Serves the browser UI (`lanchatd --web`): the embedded page, and a WebSocket that carries control
/// calls onto the same `ControlHandler` as the control socket (one request JSON per text message, one
/// response JSON per answer, `watch` events as they come). Uploads and inline images are plain HTTP.
/// Every request passes `WebRequestCheck` first (Host, Origin, token); see docs/web.md.
public final class WebServer: Service {
    /// What a connection became once its first request was read.
    enum Connection: Sendable {
        case socket(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>)
        case http(NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>)
    }

    /// Where the page's files come from and go.
    struct Files: Sendable {
        /// Received files (shown inline when they are images).
        var downloads: String
        /// Files shared in rooms, kept here.
        var shared: String
        /// Uploads from the page wait here to be sent (a directory of the daemon's state).
        var uploads: String
        var passed: PassedFiles
    }

    public let port: Int
    let access: WebAccess
    let configuration: WebConfiguration
    let check: WebRequestCheck
    let handler: any ControlHandler
    let files: Files
    private let accessPath: String
    let logger: Logger
    private let server: NIOAsyncChannel<EventLoopFuture<Connection>, Never>

    /// Binds now (a failure stops the daemon at startup) and writes the access file for `lanchat web`.
    init(
        configuration: WebConfiguration, controlSocket: String, socketGroup: gid_t?, handler: any ControlHandler, files: Files,
        eventLoopGroup: MultiThreadedEventLoopGroup, logger: Logger
    ) async throws {
        self.configuration = configuration
        self.handler = handler
        self.files = files
        self.logger = logger
        let token = WebAccess.newToken()
        let checks = CheckHolder()
        let connections = Arc(Atomic<Int>(0))
        let configuration = configuration
        server = try await ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: configuration.address, port: configuration.port) { channel in
                Self.setUp(channel, configuration: configuration, checks: checks, connections: connections)
            }
        port = server.channel.localAddress?.port ?? configuration.port
        check = WebRequestCheck(port: port, token: token, maximumTargetLength: configuration.maximumTargetLength)
        checks.set(check)
        access = WebAccess(address: configuration.address, port: port, token: token)
        accessPath = WebAccess.filePath(forControlSocket: controlSocket)
        try Self.writeAccess(access, to: accessPath, group: socketGroup)
        Self.clearUploads(files.uploads)
    }

    public func run() async throws {
        defer { unlink(accessPath) }
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingDiscardingTaskGroup { group in
                    try await self.server.executeThenClose { inbound in
                        for try await connection in inbound {
                            group.addTask {
                                do {
                                    switch try await connection.get() {
                                    case .socket(let socket): try await self.serve(socket)
                                    case .http(let http): try await self.serve(http)
                                    }
                                } catch {
                                    self.logger.debug("web connection ended: \(error)")
                                }
                            }
                        }
                    }
                }
            }
        } catch is CancellationError {}
    }

    /// The pipeline of a new connection: a read deadline, HTTP/1.1 with the decoder's limits, and the
    /// WebSocket upgrade for a request that passes the checks. Past the connection limit: closed.
    private static func setUp(
        _ channel: any Channel, configuration: WebConfiguration, checks: CheckHolder, connections: Arc<Atomic<Int>>
    ) -> EventLoopFuture<EventLoopFuture<Connection>> {
        guard connections.value.add(1, ordering: .relaxed).newValue <= configuration.maximumConnections else {
            connections.value.subtract(1, ordering: .relaxed)
            channel.close(promise: nil)
            return channel.eventLoop.makeFailedFuture(TooManyConnections())
        }
        channel.closeFuture.whenComplete { _ in connections.value.subtract(1, ordering: .relaxed) }
        return channel.eventLoop.makeCompletedFuture {
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(IdleStateHandler(readTimeout: .seconds(Int64(configuration.requestTimeout))))
            try sync.addHandler(CloseWhenIdle())
            let upgrader = NIOTypedWebSocketServerUpgrader<Connection>(
                maxFrameSize: configuration.maximumMessageSize,
                shouldUpgrade: { channel, head in
                    // Only a request that passes every check becomes a WebSocket; any other is answered
                    // as plain HTTP (with the reason it was refused).
                    let allowed =
                        checks.get()?.check(method: head.method.rawValue, target: head.uri, headers: head.headers.map { ($0.name, $0.value) }) == .allowed(.socket)
                    return channel.eventLoop.makeSucceededFuture(allowed ? HTTPHeaders(WebRequestCheck.securityHeaders) : nil)
                },
                upgradePipelineHandler: { channel, _ in
                    channel.pipeline.removeHandler(name: WebGate.name).flatMapThrowing {
                        try channel.pipeline.syncOperations.addHandler(
                            NIOWebSocketFrameAggregator(
                                minNonFinalFragmentSize: 1, maxAccumulatedFrameCount: 256, maxAccumulatedFrameSize: configuration.maximumMessageSize))
                        return .socket(try NIOAsyncChannel(wrappingChannelSynchronously: channel))
                    }
                })
            var pipeline = NIOUpgradableHTTPServerPipelineConfiguration(
                upgradeConfiguration: NIOTypedHTTPServerUpgradeConfiguration(
                    upgraders: [upgrader],
                    notUpgradingCompletionHandler: { channel in
                        channel.eventLoop.makeCompletedFuture { .http(try NIOAsyncChannel(wrappingChannelSynchronously: channel)) }
                    }))
            var limits = NIOHTTPDecoderLimitConfiguration()
            limits.maxHeaderFieldSize = configuration.maximumHeaderFieldSize
            limits.maxHeaderListSize = configuration.maximumHeaderListSize
            limits.maxHeaderFieldCount = configuration.maximumHeaderFieldCount
            pipeline.decoderConfiguration = limits
            let upgraded = try sync.configureUpgradableHTTPServerPipeline(configuration: pipeline)
            let upgradeHandler = try sync.handler(type: NIOTypedHTTPServerUpgradeHandler<Connection>.self)
            try sync.addHandler(
                WebGate(checks: checks, headDeadline: .seconds(Int64(configuration.requestHeadTimeout))), name: WebGate.name,
                position: .before(upgradeHandler))
            return upgraded
        }
    }

    private static func writeAccess(_ access: WebAccess, to path: String, group: gid_t?) throws {
        do {
            try DurableFile.replace(path, with: Array(ControlJSON.line(access)))
        } catch {
            throw Daemon.StartupError("cannot write \(path) (how `lanchat web` finds the page): \(error.reason)")
        }
        if let group { chown(path, getuid(), group) }
        chmod(path, group == nil ? 0o600 : 0o640)
    }

    /// Uploads left by an earlier run (sent, or never sent) are removed at start.
    private static func clearUploads(_ directory: String) {
        guard let dir = opendir(directory) else { return }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        closedir(dir)
        for name in names {
            let sub = joinPath(directory, name)
            if let inner = opendir(sub) {
                var files: [String] = []
                while let entry = readdir(inner) {
                    let file = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                    if file != "." && file != ".." { files.append(file) }
                }
                closedir(inner)
                for file in files { unlink(joinPath(sub, file)) }
                rmdir(sub)
            } else {
                unlink(sub)
            }
        }
    }
}

struct TooManyConnections: Error {}

/// The request check, set once the port is known (after bind); connections that come before get none
/// (and are refused).
final class CheckHolder: Sendable {
    private let value = Mutex<WebRequestCheck?>(nil)
    func set(_ check: WebRequestCheck) { value.withLock { $0 = check } }
    func get() -> WebRequestCheck? { value.withLock { $0 } }
}

/// A reference to a value that is not copyable (an `Atomic`), to share it between closures.
final class Arc<Value: ~Copyable & Sendable>: Sendable {
    let value: Value
    init(_ value: consuming Value) { self.value = value }
}

/// Closes a connection that sent nothing within the read deadline (`IdleStateHandler`).
final class CloseWhenIdle: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}
