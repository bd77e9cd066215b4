import LanchatSecurity
import NIOCore
import NIOPosix
import NIOTLS

// MARK: A TLS fan-out with one sync per receiver (the floor of a room's fan-out)

/// The room's fan-out floor (issue 33: "a TLS fan-out of the same bytes with one sync per receiver before
/// its answer"): the leader sends one 64-byte message over TLS 1.3 (the same library) to every receiver
/// (`tls-echo`, which syncs a small write before it answers), and waits `interval` before the next, as the
/// room's leader does; a message's figure is the time until its last echo came back. Lives on its one
/// event loop.
final class FanoutRun {
    let count: Int
    let interval: TimeAmount
    let done: EventLoopPromise<[Double]>
    var channels: [Channel] = []
    var sent: [Double] = []
    var remaining: [Int] = []
    var latencies: [Double] = []
    var finished = false

    init(count: Int, interval: TimeAmount, done: EventLoopPromise<[Double]>) {
        self.count = count
        self.interval = interval
        self.done = done
    }

    func send(on loop: EventLoop) {
        guard !finished else { return }
        sent.append(now())
        remaining.append(channels.count)
        let message = ByteBuffer(bytes: [UInt8](repeating: 7, count: 64))
        for channel in channels { channel.writeAndFlush(message, promise: nil) }
        guard sent.count < count else { return }
        let bound = NIOLoopBound(self, eventLoop: loop)
        loop.scheduleTask(in: interval) { bound.value.send(on: loop) }
    }

    /// A receiver echoed message `index` (each connection's echoes come in order).
    func echoed(_ index: Int) {
        guard !finished else { return }
        guard index < remaining.count else { return fail("an echo of a message not sent") }
        remaining[index] -= 1
        guard remaining[index] == 0 else { return }
        latencies.append((now() - sent[index]) * 1000)
        if latencies.count == count {
            finished = true
            done.succeed(latencies)
        }
    }

    func fail(_ reason: String) {
        guard !finished else { return }
        finished = true
        done.fail(FanoutError(reason: reason))
    }
}

struct FanoutError: Error, CustomStringConvertible {
    var reason: String
    var description: String { reason }
}

/// One receiver's connection: counts its echoes for the run.
final class FanoutEcho: ChannelInboundHandler {  // one channel, on the run's event loop: made and used there
    typealias InboundIn = ByteBuffer
    let run: NIOLoopBound<FanoutRun>
    let handshake: EventLoopPromise<Void>
    var handshook = false
    var pending = ByteBuffer()
    var echoes = 0

    init(run: NIOLoopBound<FanoutRun>, handshake: EventLoopPromise<Void>) {
        self.run = run
        self.handshake = handshake
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event, !handshook {
            handshook = true
            handshake.succeed()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        pending.writeBuffer(&buffer)
        while pending.readSlice(length: 64) != nil {
            run.value.echoed(echoes)
            echoes += 1
        }
        pending.discardReadBytes()
    }

    func channelInactive(context: ChannelHandlerContext) {
        run.value.fail("a receiver's connection closed")
        if !handshook {
            handshook = true
            handshake.fail(FanoutError(reason: "a receiver's connection closed before its handshake"))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        run.value.fail("\(error)")
        context.close(promise: nil)
    }
}

/// `lanchat-bench tls-fanout DIR PORT COUNT INTERVAL_MS HOST,HOST,...`: the fan-out floor against `tls-echo`
/// on every host; JSON result (milliseconds).
func tlsFanout(directory: String, port: Int, count: Int, intervalMS: Int, hosts: [String]) async throws {
    let tls = benchTLS(directory + "/fanout")
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let loop = group.next()
    let done = loop.makePromise(of: [Double].self)
    let run = try await loop.submit {
        NIOLoopBound(FanoutRun(count: count, interval: .milliseconds(Int64(intervalMS)), done: done), eventLoop: loop)
    }.get()
    var channels: [Channel] = []
    var handshakes: [EventLoopFuture<Void>] = []
    for host in hosts {
        let handshake = loop.makePromise(of: Void.self)
        let channel = try await ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(try tls.clientHandler(expecting: nil) { _ in })
                    try channel.pipeline.syncOperations.addHandler(FanoutEcho(run: run, handshake: handshake))
                }
            }
            .connect(host: host, port: port).get()
        channels.append(channel)
        handshakes.append(handshake.futureResult)
    }
    try await EventLoopFuture.andAllSucceed(handshakes, on: loop).get()
    let all = channels
    loop.execute {
        run.value.channels = all
        run.value.send(on: loop)
    }
    // Every wait has a deadline: a receiver that stops answering fails the run.
    let deadline = TimeAmount.seconds(Int64(30 + count * (intervalMS + 100) / 1000))
    loop.scheduleTask(in: deadline) { run.value.fail("not every echo came back within \(deadline.nanoseconds / 1_000_000_000) s") }
    let latencies = try await done.futureResult.get()
    for channel in channels { try? await channel.close() }
    emit([
        "fanout_floor_p50_ms": percentile(latencies, 0.5), "fanout_floor_p99_ms": percentile(latencies, 0.99),
        "fanout_floor_max_ms": latencies.max()!, "fanout_floor_receivers_count": Double(hosts.count),
        "fanout_floor_messages_count": Double(latencies.count),
    ])
}
