import Glibc
import LanchatControl
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Answers what the control API asks (see docs/control-api.md). Implemented by the daemon.
public protocol ControlHandler: Sendable {
    /// Every method answered by one response (all but `watch`, `stream` and `stream-accept`).
    func respond(to call: ControlCall, id: Int) async -> ControlResponse
    func events() -> AsyncStream<ControlEvent>
    /// `topic` events for each message on `topic` of `room` (nil: the only room), until the consumer stops.
    func subscribe(topic: String, room: String?) async throws(ControlError) -> AsyncStream<ControlEvent>
    /// Opens a named stream to `peer`.
    func openStream(named name: String, to peer: String) async throws(ControlError) -> any ControlStream
    /// Waits for a stream named `name` (from `peer` only, if given). `isAlive`: whether the client that
    /// asked is still connected.
    func acceptStream(named name: String, from peer: String?, isAlive: @escaping @Sendable () -> Bool) async throws(ControlError) -> any ControlStream
}

/// A named stream as the control server pipes it to a client.
public protocol ControlStream: Sendable {
    var entry: StreamEntry { get }
    func write(_ data: ByteBuffer) async throws(ControlError)
    func finish() async
    func read() async throws(ControlError) -> ByteBuffer?
    func abort(_ reason: String) async
    /// Once both directions ended (`nil`) or the stream was aborted (why).
    func closed() async -> String?
}

/// Serves the control API on a Unix socket: one JSON request per line, one JSON response per line;
/// `watch` then streams events until the client hangs up.
public final class ControlServer: Service {
    private let path: String
    private let group: gid_t?
    private let configuration: DaemonConfiguration
    private let handler: any ControlHandler
    private let eventLoopGroup: MultiThreadedEventLoopGroup
    private let logger: Logger
    private let server: NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>
    private let connections = Atomic<Int>(0)

    /// Binds the socket now, so that a failure stops the daemon before it advertises anything.
    public init(configuration: DaemonConfiguration, handler: any ControlHandler, eventLoopGroup: MultiThreadedEventLoopGroup, logger: Logger) async throws {
        self.path = configuration.socketPath
        self.configuration = configuration
        self.handler = handler
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
        let group = try configuration.socketGroup.map { name throws(ControlSocket.SetupError) in try ControlSocket.groupID(named: name) }
        self.group = group
        try ControlSocket.prepare(path: path, group: group)
        self.server = try await ServerBootstrap(group: eventLoopGroup)
            .bind(unixDomainSocketPath: path) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        try ControlSocket.restrict(path: path, group: group)
    }

    public func run() async throws {
        defer { unlink(path) }
        // Graceful shutdown cancels the accept loop; that is a normal end, not an error.
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingDiscardingTaskGroup { group in
                    try await self.server.executeThenClose { inbound in
                        for try await connection in inbound {
                            let count = self.connections.add(1, ordering: .relaxed).newValue
                            group.addTask {
                                defer { self.connections.subtract(1, ordering: .relaxed) }
                                if count > self.configuration.maximumControlConnections {
                                    try? await self.refuse(connection)
                                } else {
                                    try? await self.serve(connection)
                                }
                            }
                        }
                    }
                }
            }
        } catch is CancellationError {}
    }

    private static func send(_ response: ControlResponse, to outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws {
        try await outbound.write(ByteBuffer(bytes: ControlJSON.line(response)))
    }

    private func refuse(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async throws {
        try await connection.executeThenClose { _, outbound in
            let error = ControlError(code: .busy, message: "too many control connections (limit \(configuration.maximumControlConnections))")
            try await Self.send(ControlResponse.failure(id: nil, error), to: outbound)
        }
    }

    private func serve(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async throws {
        let idle = IdleWatch(ControlIdleRule(timeout: .seconds(configuration.controlIdleTimeout), now: .now))
        try await connection.executeThenClose { inbound, outbound in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await self.closeWhenIdle(idle, connection.channel, outbound) }
                do {
                    try await answer(connection, inbound, outbound, idle)
                } catch {
                    group.cancelAll()
                    throw error
                }
                group.cancelAll()
            }
        }
    }

    /// Answers requests until the client leaves, or the connection becomes a watch or a stream and that ends.
    private func answer(
        _ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, _ inbound: NIOAsyncChannelInboundStream<ByteBuffer>,
        _ outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>, _ idle: IdleWatch
    ) async throws {
        func send(_ response: ControlResponse) async throws { try await Self.send(response, to: outbound) }
        var framer = LineFramer(maximumLineLength: configuration.maximumRequestLength)
        var iterator = inbound.makeAsyncIterator()
        while let buffer = try await iterator.next() {
            framer.append(buffer.readableBytesView)
            while true {
                let line: [UInt8]
                do {
                    guard let next = try framer.nextLine() else { break }
                    line = next
                } catch {
                    guard idle.callStarted() else { return }
                    let error = ControlError.badRequest("request longer than \(configuration.maximumRequestLength) bytes; closing")
                    try await send(ControlResponse.failure(id: nil, error))
                    return
                }
                if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0d }) { continue }
                // The idle rule may have closed the connection while this line came in: it is not run.
                guard idle.callStarted() else { return }
                switch ControlJSON.decodeRequest(line) {
                case .failure(let error):
                    try await send(ControlResponse.failure(id: nil, error))
                case .success(let request):
                    let call: ControlCall
                    do throws(ControlError) { call = try ControlCall(request) } catch {
                        try await send(ControlResponse.failure(id: request.id, error))
                        idle.callEnded()
                        continue
                    }
                    logger.debug("control request", metadata: ["control.method": "\(call.method.rawValue)"])
                    // Only how the connection goes on differs: a stream, events, or one answer.
                    let channel = connection.channel
                    let opened: (any ControlStream)?
                    do throws(ControlError) {
                        opened = try await stream(for: call) { channel.isActive }
                    } catch {
                        try await send(ControlResponse.failure(id: request.id, error))
                        idle.callEnded()
                        continue
                    }
                    if let stream = opened {
                        idle.exempt()
                        try await send(ControlResponse(id: request.id, .stream(stream.entry)))
                        try await pipe(stream, buffered: framer.takeBuffered(), from: iterator, to: outbound)
                        return
                    }
                    if case .topicSubscribe(let room, let topic) = call {
                        let messages: AsyncStream<ControlEvent>
                        do throws(ControlError) { messages = try await handler.subscribe(topic: topic, room: room) } catch {
                            try await send(ControlResponse.failure(id: request.id, error))
                            idle.callEnded()
                            continue
                        }
                        idle.exempt()
                        do { try await send(ControlResponse(id: request.id)) } catch {
                            // The client went away: end the subscription (iterating it in a cancelled task does).
                            // Unstructured only to be cancelled before it starts: it ends at its first `next`.
                            Task { for await _ in messages {} }.cancel()
                            throw error
                        }
                        try await streamEvents(messages, to: outbound, until: iterator)
                        return
                    }
                    if call == .watch {
                        idle.exempt()
                        // Subscribe before answering, so no event between the two is missed.
                        let events = handler.events()
                        try await send(ControlResponse(id: request.id))
                        try await streamEvents(events, to: outbound, until: iterator)
                        return
                    }
                    try await send(await handler.respond(to: call, id: request.id))
                }
                idle.callEnded()
            }
        }
    }

    /// Closes the connection once the idle rule says so, first telling the client why (if it reads).
    private func closeWhenIdle(_ idle: IdleWatch, _ channel: any Channel, _ outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) async {
        while true {
            switch idle.check() {
            case .stop:
                return
            case .checkAt(let instant):
                do { try await Task.sleep(until: instant, clock: .continuous) } catch { return }
            case .close:
                let seconds = configuration.controlIdleTimeout
                let error = ControlError(code: .idle, message: "closing this connection: no request in \(seconds) s (control-idle-timeout); connect again to go on")
                try? await Self.send(ControlResponse.failure(id: nil, error), to: outbound)
                logger.debug("control connection closed: idle", metadata: ["control.idle_seconds": "\(seconds)"])
                try? await channel.close()
                return
            }
        }
    }

    /// `stream` and `stream-accept`: the stream, once open; nil for every other method.
    private func stream(for call: ControlCall, isAlive: @escaping @Sendable () -> Bool) async throws(ControlError) -> (any ControlStream)? {
        switch call {
        case .stream(let peer, let name): try await handler.openStream(named: name, to: peer)
        case .streamAccept(let name, let from): try await handler.acceptStream(named: name, from: from, isAlive: isAlive)
        default: nil
        }
    }

    /// Writes events until the client closes its end (or sends anything: a watch takes no more requests).
    /// `inbound` moves into the child task that drains it (the caller no longer touches it).
    private func streamEvents(
        _ events: AsyncStream<ControlEvent>, to outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
        until inbound: sending NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
    ) async throws {
        let inbound = Handover(inbound)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in events {
                    try await Self.send(ControlResponse.event(event), to: outbound)
                }
            }
            group.addTask {
                guard var iterator = inbound.take() else { return }
                while try await iterator.next() != nil {}
            }
            _ = try await group.next()
            group.cancelAll()
        }
    }
}

extension ControlServer {
    /// Carries a stream between the client (StreamPipe frames both ways) and the peer, until both
    /// directions ended or the stream was aborted. A client that goes away without an end frame aborts it.
    /// `inbound` moves into the child task that reads the client (the caller no longer touches it).
    private func pipe(
        _ stream: any ControlStream, buffered: [UInt8], from inbound: sending NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator,
        to outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    ) async throws {
        let inbound = Handover(inbound)
        await withTaskGroup(of: Bool.self) { group in
            // Client -> peer. Returns false if the stream was aborted.
            group.addTask {
                guard var iterator = inbound.take() else { return false }
                var decoder = StreamPipe.Decoder()
                decoder.append(buffered)
                do {
                    while true {
                        while let frame = try decoder.next() {
                            switch frame {
                            case .data(let bytes):
                                try await stream.write(ByteBuffer(bytes: bytes))
                            case .end(nil):
                                await stream.finish()
                                // Still watch the client: if it goes away before the peer's data
                                // ended, the peer must hear that nobody reads any more.
                                while try await iterator.next() != nil {}
                                await stream.abort("the program on the other end went away")
                                return true
                            case .end(let reason?):
                                await stream.abort(reason)
                                return false
                            }
                        }
                        guard let buffer = try await iterator.next() else {
                            await stream.abort("the program on the other end went away")
                            return false
                        }
                        decoder.append(buffer.readableBytesView)
                    }
                } catch {
                    await stream.abort("\(error)")
                    return false
                }
            }
            // Peer -> client.
            group.addTask {
                do {
                    while let data = try await stream.read() {
                        var frame = ByteBuffer(bytes: StreamPipe.headerBytes(type: 0, length: data.readableBytes))
                        frame.writeImmutableBuffer(data)
                        try await outbound.write(frame)
                    }
                    try await outbound.write(ByteBuffer(bytes: StreamPipe.encode(.end(nil))))
                    // The client may still be sending: if the stream breaks meanwhile, it hears why.
                    if let reason = await stream.closed() {
                        try await outbound.write(ByteBuffer(bytes: StreamPipe.encode(.end(reason))))
                        return false
                    }
                    return true
                } catch let error as ControlError {
                    try? await outbound.write(ByteBuffer(bytes: StreamPipe.encode(.end(error.message))))
                    return false
                } catch {
                    await stream.abort("the program on the other end went away")
                    return false
                }
            }
            for await clean in group where !clean {
                group.cancelAll()
            }
        }
    }
}

/// The idle rule of one connection, shared by the task that answers it and the one that closes it.
private final class IdleWatch: Sendable {
    private let rule: Mutex<ControlIdleRule>

    init(_ rule: ControlIdleRule) { self.rule = Mutex(rule) }

    func callStarted() -> Bool { rule.withLock { $0.callStarted() } }
    func callEnded() { rule.withLock { $0.callEnded(now: .now) } }
    func exempt() { rule.withLock { $0.exempt() } }
    func check() -> ControlIdleRule.Decision { rule.withLock { $0.check(now: .now) } }
}

/// Hands a value that is not Sendable (an inbound iterator) from a task to one child task: the child
/// takes it out. A plain capture would not do: a task group's body cannot send what it captures.
private final class Handover<Value>: Sendable {
    private let slot: Mutex<Value?>

    init(_ value: sending Value) { slot = Mutex(value) }

    func take() -> sending Value? { slot.withLock { $0.take() } }
}
