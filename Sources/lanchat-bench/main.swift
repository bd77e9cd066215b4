// lanchat-bench: session-layer figures between simulated hosts, using the library directly (the way a
// Swift program would), next to a raw TCP baseline. Run by scripts/bench.sh; see README "Benchmarks".
//
//   lanchat-bench tcp-echo PORT                      raw TCP echo server (baseline)
//   lanchat-bench tcp-ping HOST PORT COUNT           raw TCP ping-pong of 64-byte messages; JSON result
//   lanchat-bench tls-echo DIR PORT                  TLS 1.3 echo server that syncs a small write before answering
//   lanchat-bench tls-ping DIR HOST PORT COUNT       TLS 1.3 ping-pong against it, syncing before each ping: the
//                                                    floor of an acknowledged durable message; JSON result
//   lanchat-bench node DIR NAME ADDR RDV N [leader]  a session node; N nodes meet in directory RDV
//   lanchat-bench search DIR N                       `history --grep` over N stored messages (the store's word
//                                                    index) next to a plain LIKE scan of the same file; JSON
import FoundationEssentials
import Glibc
import LanchatCore
import LanchatEngine
import LanchatIdentity
import LanchatSecurity
import LanchatSession
import LanchatStore
import LanchatWire
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

func now() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
}

func emit(_ object: [String: Double]) {
    let text = object.keys.sorted().map { "\"\($0)\": \(($0.hasSuffix("_count") ? String(Int(object[$0]!)) : String(format3(object[$0]!))))" }
    print("{" + text.joined(separator: ", ") + "}")
    fflush(nil)
}

func format3(_ value: Double) -> String {
    let scaled = (value * 1000).rounded() / 1000
    return "\(scaled)"
}

func die(_ message: String) -> Never {
    _ = "lanchat-bench: \(message)\n".withCString { write(2, $0, strlen($0)) }
    exit(1)
}

// MARK: Raw TCP baseline

func tcpSocket() -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var one: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    return fd
}

func readFully(_ fd: Int32, _ buffer: inout [UInt8]) -> Bool {
    var done = 0
    while done < buffer.count {
        let n = buffer[done...].withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { return false }
        done += n
    }
    return true
}

func tcpEcho(port: UInt16) -> Never {
    let server = tcpSocket()
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    listen(server, 4)
    print("ready")
    fflush(nil)
    while true {
        let client = accept(server, nil, nil)
        var buffer = [UInt8](repeating: 0, count: 64)
        while readFully(client, &buffer) { _ = send(client, buffer, 64, 0) }
        close(client)
    }
}

func tcpPing(host: String, port: UInt16, count: Int) {
    let fd = tcpSocket()
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    inet_pton(AF_INET, host, &address.sin_addr)
    let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    guard connected == 0 else { die("cannot connect to \(host):\(port)") }
    var buffer = [UInt8](repeating: 7, count: 64)
    var rtts: [Double] = []
    for index in 0..<(count + 100) {
        let start = now()
        _ = send(fd, buffer, 64, 0)
        guard readFully(fd, &buffer) else { die("echo closed") }
        if index >= 100 { rtts.append((now() - start) * 1e6) }  // 100 warm-up rounds
    }
    emit(["tcp_rtt_p50_us": percentile(rtts, 0.5), "tcp_rtt_p99_us": percentile(rtts, 0.99), "tcp_rtt_count": Double(rtts.count)])
}

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
final class SyncedEcho: ChannelInboundHandler, @unchecked Sendable {  // one channel, on its event loop
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
final class SyncedPing: ChannelInboundHandler, @unchecked Sendable {  // one channel, on its event loop
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

func tlsPing(directory: String, host: String, port: Int, count: Int) async throws {
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
    emit(["tls_sync_rtt_p50_us": percentile(rtts, 0.5), "tls_sync_rtt_p99_us": percentile(rtts, 0.99), "tls_sync_rtt_count": Double(rtts.count)])
}

// MARK: Searching the history

/// Fills a history of `count` messages (words drawn from a fixed vocabulary, with a rare word in one
/// message of 10,000), then times the store's search for a rare and a common word (the last 50 that
/// match, as `lanchat history --grep`) against `LIKE '%word%'` on the same file, 5 runs each.
func searchBenchmark(directory: String, count: Int) throws {
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let path = directory + "/" + ChatStore.fileName
    unlink(path)
    let vocabulary = ["the", "deploy", "build", "server", "lunch", "meeting", "review", "coffee", "release", "ticket", "merge",
                      "branch", "logs", "cache", "disk", "network", "printer", "badge", "train", "weather", "kernel", "patch"]
    var generator = SystemRandomNumberGenerator()
    let store = try ChatStore(path: path)
    let started = now()
    var inserted = 0
    while inserted < count {
        try store.transaction {
            for _ in 0..<min(10_000, count - inserted) {
                inserted += 1
                var words = (0..<8).map { _ in vocabulary.randomElement(using: &generator)! }
                if inserted % 10_000 == 0 { words.append("zeppelin") }
                let hex = String(inserted, radix: 16)
                try store.insert(StoredMessage(
                    id: String(repeating: "0", count: 32 - hex.count) + hex, room: "lab", senderID: String(repeating: "b", count: 52),
                    senderName: "bob", sequence: Int64(inserted), timestamp: 1_795_000_000_000 + Int64(inserted), kind: .text,
                    body: words.joined(separator: " ")), now: 0)
            }
        }
    }
    let filled = now() - started
    func median(_ run: () throws -> Int) rethrows -> (ms: Double, found: Int) {
        var times: [Double] = []
        var found = 0
        for _ in 0..<5 {
            let start = now()
            found = try run()
            times.append((now() - start) * 1000)
        }
        return (percentile(times, 0.5), found)
    }
    let rare = try median { try store.search(room: "lab", limit: 50, filter: HistoryFilter(words: "zeppelin")).count }
    let common = try median { try store.search(room: "lab", limit: 50, filter: HistoryFilter(words: "deploy")).count }
    store.close()
    let raw = try SQLiteDatabase(path: path)
    func like(_ word: String) throws -> Int {
        try raw.query("SELECT id, body FROM messages WHERE room = 'lab' AND body LIKE ? ORDER BY timestamp DESC LIMIT 50", [.text("%\(word)%")]).count
    }
    let rareLike = try median { try like("zeppelin") }
    let commonLike = try median { try like("deploy") }
    raw.close()
    var info = stat()
    stat(path, &info)
    emit(["messages_count": Double(count), "fill_s": filled, "file_mib": Double(info.st_size) / 1_048_576,
          "rare_index_ms": rare.ms, "rare_like_ms": rareLike.ms, "rare_found_count": Double(rare.found), "rare_like_found_count": Double(rareLike.found),
          "common_index_ms": common.ms, "common_like_ms": commonLike.ms, "common_found_count": Double(common.found)])
}

// MARK: Session nodes

/// What each node publishes in the rendezvous directory.
struct Card: Codable {
    var name: String
    var id: String
    var address: String
    var port: Int
}

func writeFile(_ path: String, _ text: String) {
    let temp = path + ".tmp"
    guard let file = fopen(temp, "w") else { die("cannot write \(path)") }
    fputs(text, file)
    fclose(file)
    rename(temp, path)
}

func readFile(_ path: String) -> String? {
    guard let data = FileManager.default.contents(atPath: path) else { return nil }
    return String(decoding: data, as: UTF8.self)
}

@MainActor
func runNode(directory: String, name: String, address: String, rendezvous: String, total: Int, leader: Bool) async throws {
    var logger = Logger(label: "bench")
    logger.logLevel = .warning
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let identity = try Identity.loadOrCreate(in: directory)
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let hello = WireFrame.Hello(peerID: identity.peerID.rawValue, name: name, capabilities: ["chat"])
    let connector = PeerConnector(hello: hello, encryption: .required, tls: try PeerTLS(certificate: IdentityCertificate(identity: identity)), group: group)
    let store = try ChatStore(path: directory + "/" + ChatStore.fileName)
    let directoryOfPeers = PeerDirectory()
    let nodeBox = NodeBox()
    let listener = try await connector.listen(port: 0) { connection in
        Task { await nodeBox.node?.accepted(connection) }
    }
    let port = listener.localAddress!.port!
    let node = try SessionNode(
        configuration: .init(ownID: identity.peerID, ownName: name, port: port, autoAccept: .all, encryption: .required),
        eventLoop: group.next(), connector: connector, store: store, knownPeers: try KnownPeers(directory: directory),
        directory: directoryOfPeers, logger: logger)
    await nodeBox.set(node)
    let maintenance = Task { await node.run() }

    // Meet the others.
    let card = Card(name: name, id: identity.peerID.rawValue, address: address, port: port)
    writeFile("\(rendezvous)/\(name).card", String(decoding: try JSONEncoder().encode(card), as: UTF8.self))
    var cards: [Card] = []
    while cards.count < total {
        cards = (try FileManager.default.contentsOfDirectory(atPath: rendezvous)).filter { $0.hasSuffix(".card") }.compactMap {
            readFile("\(rendezvous)/\($0)").flatMap { try? JSONDecoder().decode(Card.self, from: Data($0.utf8)) }
        }
        try await Task.sleep(for: .milliseconds(50))
    }
    var peers: [SessionPeer] = []
    for other in cards where other.name != name {
        let id = PeerID(other.id)!
        directoryOfPeers.update(id, PeerAddressHint(name: other.name, port: other.port, addresses: [other.address], encryption: .required))
        peers.append(SessionPeer(id: id, name: other.name))
    }
    peers.sort { $0.name < $1.name }
    let room = RoomID("bench")!

    // The workload runs on the node's own executor (its event loop), as a program that embeds the
    // library would: events arrive and sends go out without thread hops.
    if leader {
        let figures = try await lead(node: node, peers: peers, room: room, rendezvous: rendezvous)
        emit(figures)
    } else {
        await member(node: node, room: room, rendezvous: rendezvous, name: name)
    }
    maintenance.cancel()
    try? await Task.sleep(for: .milliseconds(300))
}

/// Members answer pings, count the throughput run, and record fan-out arrivals.
func member(node: isolated SessionNode, room: RoomID, rendezvous: String, name: String) async {
    var arrivals: [String: Double] = [:]
    var counted = 0
    for await event in node.events {
        guard case .message(let message) = event, !message.outgoing, message.stored.kind == .text else { continue }
        let body = message.stored.body
        if body.hasPrefix("ping:") {
            _ = try? node.send("pong:" + body.dropFirst(5), room: room, to: [PeerID(message.stored.senderID)!])
        } else if body.hasPrefix("t:") {
            counted += 1
            if body == "t:last" {
                _ = try? node.send("tdone:\(counted)", room: room, to: [PeerID(message.stored.senderID)!])
                counted = 0
            }
        } else if body.hasPrefix("fan:") {
            arrivals[String(body.dropFirst(4))] = now()
        } else if body == "done" {
            let lines = arrivals.map { "\($0.key) \($0.value)" }.joined(separator: "\n")
            writeFile("\(rendezvous)/\(name).arrivals", lines + "\n")
            return
        }
    }
}

/// The leader: invitations, then the pair figures with the first member, then fan-out to all.
func lead(node: isolated SessionNode, peers: [SessionPeer], room: RoomID, rendezvous: String) async throws -> [String: Double] {
    var invites: [Double] = []
    for peer in peers {
        let start = now()
        let outcome = await node.invite(peer, room: room, context: [], timeout: .seconds(10))
        guard outcome == .accepted else { die("invitation to \(peer.name): \(outcome)") }
        invites.append((now() - start) * 1000)
    }
    let first = peers[0]
    var iterator = node.events.makeAsyncIterator()
    func next(prefix: String) async -> String {
        while let event = await iterator.next(isolation: node) {
            if case .message(let message) = event, !message.outgoing, message.stored.body.hasPrefix(prefix) { return message.stored.body }
        }
        die("event stream ended")
    }
    // Wait for the mesh, so that introductions do not run during the measurements.
    while !node.room(room)!.members.allSatisfy({ $0.state == .connected }) {
        try await Task.sleep(for: .milliseconds(50))
    }
    try await Task.sleep(for: .milliseconds(500))

    // Round trip of a small reliable message.
    var rtts: [Double] = []
    for index in 0..<2100 {
        let start = now()
        _ = try node.send("ping:\(index)", room: room, to: [first.id])
        _ = await next(prefix: "pong:")
        if index >= 100 { rtts.append((now() - start) * 1e6) }
    }
    // One-way throughput: N small reliable messages, until the member has counted them all; first
    // one call per message, then in batches of 100 (each still its own message, id and ack). The
    // sender yields between calls so that the connection's I/O runs (it shares the thread).
    func throughput(count: Int, batch: Int) async throws -> Double {
        let start = now()
        var index = 0
        while index < count - 1 {
            let end = min(index + batch, count - 1)
            let texts = (index..<end).map { "t:\($0)" }
            if batch == 1 { _ = try node.send(texts[0], room: room, to: [first.id]) } else { _ = try node.send(texts, room: room, to: [first.id]) }
            index = end
            await Task.yield()
        }
        _ = try node.send("t:last", room: room, to: [first.id])
        let done = await next(prefix: "tdone:")
        guard done == "tdone:\(count)" else { die("throughput run: member counted \(done)") }
        return Double(count) / (now() - start)
    }
    let single = try await throughput(count: 20_000, batch: 1)
    try await Task.sleep(for: .milliseconds(500))
    let batched = try await throughput(count: 100_000, batch: 100)
    try await Task.sleep(for: .milliseconds(500))

    // Fan-out to the whole room.
    var sent: [String: Double] = [:]
    for index in 0..<300 {
        sent["\(index)"] = now()
        _ = try node.send("fan:\(index)", room: room)
        try await Task.sleep(for: .milliseconds(5))
    }
    try await Task.sleep(for: .milliseconds(500))
    _ = try node.send("done", room: room)
    var latest: [String: Double] = [:]
    for peer in peers {
        var text: String?
        for _ in 0..<200 {
            text = readFile("\(rendezvous)/\(peer.name).arrivals")
            if text != nil { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        guard let text else { die("\(peer.name) wrote no arrivals") }
        var seen = 0
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let time = Double(parts[1]) else { continue }
            latest[String(parts[0])] = max(latest[String(parts[0])] ?? 0, time)
            seen += 1
        }
        guard seen == sent.count else { die("\(peer.name) got \(seen) of \(sent.count) fan-out messages") }
    }
    let fanout = sent.map { (latest[$0.key]! - $0.value) * 1000 }
    return [
        "members_count": Double(peers.count),
        "invite_first_ms": invites[0], "invite_p50_ms": percentile(invites, 0.5), "invite_max_ms": invites.max()!,
        "rtt_p50_us": percentile(rtts, 0.5), "rtt_p99_us": percentile(rtts, 0.99),
        "throughput_msgs_per_s": batched, "throughput_single_msgs_per_s": single,
        "fanout_p50_ms": percentile(fanout, 0.5), "fanout_p99_ms": percentile(fanout, 0.99), "fanout_max_ms": fanout.max()!,
    ]
}

actor NodeBox {
    var node: SessionNode?
    func set(_ node: SessionNode) { self.node = node }
}

let arguments = CommandLine.arguments
switch arguments.count > 1 ? arguments[1] : "" {
case "tcp-echo" where arguments.count == 3:
    tcpEcho(port: UInt16(arguments[2])!)
case "tcp-ping" where arguments.count == 5:
    tcpPing(host: arguments[2], port: UInt16(arguments[3])!, count: Int(arguments[4])!)
case "tls-echo" where arguments.count == 4:
    do { try await tlsEcho(directory: arguments[2], port: Int(arguments[3])!) } catch { die("\(error)") }
case "tls-ping" where arguments.count == 6:
    do { try await tlsPing(directory: arguments[2], host: arguments[3], port: Int(arguments[4])!, count: Int(arguments[5])!) } catch { die("\(error)") }
case "search" where arguments.count == 4:
    do { try searchBenchmark(directory: arguments[2], count: Int(arguments[3])!) } catch { die("\(error)") }
case "node" where arguments.count >= 7:
    do {
        try await runNode(directory: arguments[2], name: arguments[3], address: arguments[4], rendezvous: arguments[5],
                          total: Int(arguments[6])!, leader: arguments.count > 7 && arguments[7] == "leader")
    } catch {
        die("\(error)")
    }
default:
    die("usage: lanchat-bench tcp-echo PORT | tcp-ping HOST PORT COUNT | tls-echo DIR PORT | tls-ping DIR HOST PORT COUNT | search DIR N | node DIR NAME ADDR RDV N [leader]")
}
