import FoundationEssentials
import Glibc
import LanchatCore
import LanchatEngine
import LanchatIdentity
import LanchatSecurity
import LanchatSession
import LanchatStore
import LanchatTransport
import LanchatWire
import Logging
import NIOCore
import NIOPosix

// MARK: Fixed workloads, for instruction counts (bench/instructions.py runs them under callgrind)

/// A session node of its own in this process: its event loop, a listener on loopback, TLS, a SQLite file.
struct WorkNode {
    let node: SessionNode
    let peer: SessionPeer
    let port: Int
    let directory: PeerDirectory

    static func make(_ path: String, name: String) async throws -> WorkNode {
        var logger = Logger(label: "workload")
        logger.logLevel = .critical
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let identity = try Identity.loadOrCreate(in: path)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let hello = WireFrame.Hello(maximumVersion: WireFrame.versions.upperBound, peerID: identity.peerID.rawValue, name: name, capabilities: ["chat"])
        var connector = PeerConnector(hello: hello, encryption: .required, tls: try PeerTLS(certificate: IdentityCertificate(identity: identity)), group: group)
        // Work that comes with time, not with the workload, is kept out: under callgrind a run lasts some
        // 50 times longer, and a redelivery every 5 s of what is not yet acknowledged (or a heartbeat
        // timeout) would then add work that the bare run never does.
        connector.heartbeatTimeout = .seconds(3600)
        let box = NodeBox()
        // Unstructured: a synchronous NIO callback hands the connection to the node actor; the task ends once
        // `accepted` returns.
        let listener = try await connector.listen(port: 0) { connection in Task { await box.node?.accepted(connection) } }
        let port = listener.localAddress!.port!
        var configuration = SessionNode.Configuration(ownID: identity.peerID, ownName: name, port: port, autoAccept: .all, encryption: .required)
        configuration.envelopes = EnvelopeKeys(signer: EnvelopeSigner(identity: identity))
        configuration.downloadDirectory = path + "/downloads"
        configuration.retransmitInterval = .seconds(3600)
        let directory = PeerDirectory()
        let node = try SessionNode(
            configuration: configuration, eventLoop: group.next(), connector: connector,
            store: try ChatStore(path: path + "/" + ChatStore.fileName), knownPeers: try KnownPeers(directory: path),
            directory: directory, logger: logger)
        await box.set(node)
        // Unstructured: the node's maintenance loop, for as long as the workload's process runs (the
        // benchmark exits when the workload is done; nothing waits for the node to stop).
        Task { await node.run() }
        return WorkNode(node: node, peer: SessionPeer(id: identity.peerID, name: name), port: port, directory: directory)
    }

    func knows(_ other: WorkNode) {
        directory.update(other.peer.id, PeerAddressHint(name: other.peer.name, port: other.port, addresses: ["127.0.0.1"], encryption: .required))
    }
}

/// Polls `condition` every 5 ms, for at most 30 minutes (callgrind runs a program some 50 times slower).
/// Only for the last moments of a workload (what is polled costs instructions for as long as it runs,
/// and callgrind stretches that time): the workloads wait for their events first.
func waitUntil(_ what: String, _ condition: () async -> Bool) async {
    let deadline = ContinuousClock.now + .seconds(1800)
    while ContinuousClock.now < deadline {
        if await condition() { return }
        try? await Task.sleep(for: .milliseconds(5))
    }
    die("workload: timed out waiting for \(what)")
}

/// Counts events and wakes a waiter when enough came.
actor Counter {
    var value = 0
    private var waiter: (count: Int, continuation: CheckedContinuation<Void, Never>)?
    func add() {
        value += 1
        if let waiter, value >= waiter.count {
            self.waiter = nil
            waiter.continuation.resume()
        }
    }
    func wait(for count: Int) async {
        if value >= count { return }
        await withCheckedContinuation { waiter = (count, $0) }
    }
}

/// Counts, on `counter`, the events of `node` that `counts` keeps (in a task of its own).
func countEvents(_ node: SessionNode, on counter: Counter, _ counts: @escaping @Sendable (SessionEvent) -> Bool) async {
    let events = await node.events
    // Unstructured: it counts while the workload goes on after this returns; it ends with the node's events
    // (or the process, once the workload is done).
    Task {
        for await event in events where counts(event) { await counter.add() }
    }
}

/// `messages N`: two nodes, one room; N signed reliable messages one way in calls of `call` (100 unless
/// given: 1 shows what each lone send costs), until the receiver
/// has stored them all and the sender has every acknowledgement (and both have them in the word index). `file PATH`: the same two nodes; the file
/// from one to the other, until both ends say complete (the receiver has it on disk, verified).
func workload(directory: String, kind: String, argument: String, call: Int = 100) async throws {
    let sender = try await WorkNode.make(directory + "/sender", name: "sender")
    let receiver = try await WorkNode.make(directory + "/receiver", name: "receiver")
    sender.knows(receiver)
    let room = RoomID("work")!
    guard await sender.node.invite(receiver.peer, room: room, context: [], timeout: .seconds(600)) == .accepted else { die("invitation refused") }
    let started = now()
    switch kind {
    case "messages":
        guard let count = Int(argument), count >= 0 else { die("messages: a count") }
        let arrived = Counter()
        await countEvents(receiver.node, on: arrived) { event in
            if case .message(let message) = event { !message.outgoing && message.stored.kind == .text } else { false }
        }
        var sent = 0
        while sent < count {
            let end = min(sent + call, count)
            _ = try await sender.node.send((sent..<end).map { "w:\($0)" }, room: room)
            sent = end
        }
        await arrived.wait(for: count)
        await waitUntil("the acknowledgements of \(count) messages") { await sender.node.unacknowledged().isEmpty }
        // The word index takes stored messages between messages, when the node has time: a search
        // brings it up to date, so that every run counts all of it.
        for node in [sender.node, receiver.node] { _ = try await node.search(room: nil, limit: 1, filter: HistoryFilter(words: "w")) }
    case "file":
        let complete = Counter()
        for node in [sender.node, receiver.node] {
            await countEvents(node, on: complete) { event in if case .transfer(let info) = event { info.state == .complete } else { false } }
        }
        _ = try await sender.node.sendFile(argument, to: receiver.peer)
        await complete.wait(for: 2)
    default:
        die("workload: messages N or file PATH")
    }
    emit(["workload_seconds": now() - started])
}

// MARK: The floors of the same workloads, with the same TLS library in this process

/// `tls-ping N`: N round trips of 64 bytes over TLS 1.3 on loopback, each side syncing a small write
/// before it sends (the `tls-ping` baseline, both ends here). `tls-copy PATH`: the file's bytes over TLS
/// 1.3 on loopback into a file that is synced at the end (what a file transfer cannot do without).
func floorWorkload(directory: String, kind: String, argument: String) async throws {
    let started = now()
    switch kind {
    case "tls-ping":
        guard let count = Int(argument), count >= 0 else { die("tls-ping: a count") }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let serverTLS = benchTLS(directory + "/echo")
        let echoFile = openSyncFile(directory, "echo.sync")
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(serverTLS.serverHandler { _ in })
                    try channel.pipeline.syncOperations.addHandler(SyncedEcho(fd: echoFile))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        try await tlsPing(directory: directory, host: "127.0.0.1", port: server.localAddress!.port!, count: count, quiet: true)
        try await server.close()
    case "tls-copy":
        try await tlsCopy(directory: directory, path: argument)
    default:
        die("floor: tls-ping N or tls-copy PATH")
    }
    emit(["workload_seconds": now() - started])
}

/// Writes what arrives to a file; syncs it and completes `done` once `size` bytes are in.
final class FileSink: ChannelInboundHandler {  // one channel, on its event loop: made and used there, never sent
    typealias InboundIn = ByteBuffer
    let fd: Int32
    let size: Int
    let done: EventLoopPromise<Void>
    var received = 0
    init(fd: Int32, size: Int, done: EventLoopPromise<Void>) {
        self.fd = fd
        self.size = size
        self.done = done
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        buffer.withUnsafeReadableBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                guard written > 0 else { die("write: \(String(cString: strerror(errno)))") }
                offset += written
            }
        }
        received += buffer.readableBytes
        if received == size {
            guard fsync(fd) == 0 else { die("fsync: \(String(cString: strerror(errno)))") }
            done.succeed()
        }
    }
}

func tlsCopy(directory: String, path: String) async throws {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let source = open(path, O_RDONLY | O_CLOEXEC)
    guard source >= 0 else { die("cannot open \(path)") }
    var info = stat()
    fstat(source, &info)
    let size = Int(info.st_size)
    let target = openSyncFile(directory, "copy.bin")
    let done = group.next().makePromise(of: Void.self)
    let serverTLS = benchTLS(directory + "/sink")
    let server = try await ServerBootstrap(group: group)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(serverTLS.serverHandler { _ in })
                try channel.pipeline.syncOperations.addHandler(FileSink(fd: target, size: size, done: done))
            }
        }
        .bind(host: "127.0.0.1", port: 0).get()
    let clientTLS = benchTLS(directory + "/source")
    let channel = try await ClientBootstrap(group: group)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(try clientTLS.clientHandler(expecting: nil) { _ in }) }
        }
        .connect(host: "127.0.0.1", port: server.localAddress!.port!).get()
    // 256 KiB reads (lanchat's chunk), each written once the previous one is.
    var chunk = [UInt8](repeating: 0, count: 256 * 1024)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
        guard count >= 0 else { die("read: \(String(cString: strerror(errno)))") }
        if count == 0 { break }
        try await channel.writeAndFlush(ByteBuffer(bytes: chunk[0..<count])).get()
    }
    close(source)
    try await done.futureResult.get()
    try await channel.close()
    try await server.close()
}
