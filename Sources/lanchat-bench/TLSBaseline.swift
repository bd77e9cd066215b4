import FoundationEssentials
import Glibc
import LanchatIdentity
import LanchatSecurity
import NIOCore
import NIOPosix
import NIOTLS

// MARK: TLS with one sync per side (the floor of a durable acknowledged message)

/// Appends 64 bytes to the file and syncs it: what a store must do before it acknowledges.
func durableWrite(_ fd: Int32) {
    var record = [UInt8](repeating: 0x2a, count: 64)
    _ = record.withUnsafeMutableBytes { write(fd, $0.baseAddress, 64) }
    guard fdatasync(fd) == 0 else { die("fdatasync: \(String(cString: strerror(errno)))") }
}

func openSyncFile(_ directory: String, _ name: String) -> Int32 {
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let fd = open(directory + "/" + name, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0o600)
    guard fd >= 0 else { die("cannot open \(directory)/\(name)") }
    return fd
}

func benchTLS(_ directory: String) -> PeerTLS {
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    do { return try PeerTLS(certificate: IdentityCertificate(identity: Identity.loadOrCreate(in: directory))) } catch { die("\(error)") }
}

/// Echoes each 64-byte message once a small write is synced.
final class SyncedEcho: ChannelInboundHandler {  // one channel, on its event loop: made and used there, never sent
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let fd: Int32
    var pending = ByteBuffer()
    init(fd: Int32) { self.fd = fd }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        pending.writeBuffer(&buffer)
        while let message = pending.readSlice(length: 64) {
            durableWrite(fd)
            context.write(wrapOutboundOut(message), promise: nil)
        }
        pending.discardReadBytes()
        context.flush()
    }
}

/// Sends a 64-byte message after a synced write, waits for its echo, `count` + 100 times (100 to warm up).
final class SyncedPing: ChannelInboundHandler {  // one channel, on its event loop: made and used there, never sent
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let fd: Int32
    let count: Int
    let done: EventLoopPromise<[Double]>
    var pending = ByteBuffer()
    var rtts: [Double] = []
    var round = 0
    var started = 0.0
    init(fd: Int32, count: Int, done: EventLoopPromise<[Double]>) {
        self.fd = fd
        self.count = count
        self.done = done
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event { ping(context) }
        context.fireUserInboundEventTriggered(event)
    }

    func ping(_ context: ChannelHandlerContext) {
        started = now()
        durableWrite(fd)
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: [UInt8](repeating: 7, count: 64))), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        pending.writeBuffer(&buffer)
        guard pending.readSlice(length: 64) != nil else { return }
        pending.discardReadBytes()
        if round >= 100 { rtts.append((now() - started) * 1e6) }
        round += 1
        if rtts.count == count { done.succeed(rtts) } else { ping(context) }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) { done.fail(error) }
}

func tlsEcho(directory: String, port: Int) async throws {
    let tls = benchTLS(directory + "/echo")
    let fd = openSyncFile(directory, "echo.sync")
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let server = try await ServerBootstrap(group: group)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(tls.serverHandler { _ in })
                try channel.pipeline.syncOperations.addHandler(SyncedEcho(fd: fd))
            }
        }
        .bind(host: "0.0.0.0", port: port).get()
    print("ready")
    fflush(nil)
    try await server.closeFuture.get()
}

/// `quiet`: no figures (a fixed workload, counted by callgrind).
func tlsPing(directory: String, host: String, port: Int, count: Int, quiet: Bool = false) async throws {
    let tls = benchTLS(directory + "/ping")
    let fd = openSyncFile(directory, "ping.sync")
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let done = group.next().makePromise(of: [Double].self)
    let channel = try await ClientBootstrap(group: group)
        .channelOption(.socketOption(.tcp_nodelay), value: 1)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(try tls.clientHandler(expecting: nil) { _ in })
                try channel.pipeline.syncOperations.addHandler(SyncedPing(fd: fd, count: count, done: done))
            }
        }
        .connect(host: host, port: port).get()
    let rtts = try await done.futureResult.get()
    try? await channel.close()
    if quiet { return }
    emit(["tls_sync_rtt_p50_us": percentile(rtts, 0.5), "tls_sync_rtt_p99_us": percentile(rtts, 0.99), "tls_sync_rtt_count": Double(rtts.count)])
}
