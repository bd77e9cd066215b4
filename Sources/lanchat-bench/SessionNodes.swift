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
    // LANCHAT_BENCH_WIRE=1: speak wire version 1 (unsigned messages), for the figures before signing; 3:
    // each message signed (before seals); otherwise the newest, as lanchatd does (version 4: sealed).
    let version: UInt16 =
        switch ProcessInfo.processInfo.environment["LANCHAT_BENCH_WIRE"] {
        case "1": 1
        case "3": 3
        default: WireFrame.versions.upperBound
        }
    let hello = WireFrame.Hello(maximumVersion: version, peerID: identity.peerID.rawValue, name: name, capabilities: ["chat"])
    var connector = PeerConnector(hello: hello, encryption: .required, tls: try PeerTLS(certificate: IdentityCertificate(identity: identity)), group: group)
    // LANCHAT_BENCH_HEARTBEAT_MS: another heartbeat interval (the timeout 4 times it, as lanchatd had when
    // stop 42 measured with it), to measure what the heartbeats cost an idle member (docs/benchmarks.md);
    // lanchatd's are now 20 s and 60 s, with the kernel's TCP keepalive noticing a silent host within 8 s
    // (`DeadLinkDetection`): without the knob, the bench has those.
    if let ms = ProcessInfo.processInfo.environment["LANCHAT_BENCH_HEARTBEAT_MS"].flatMap(Int64.init) {
        connector.heartbeatInterval = .milliseconds(ms)
        connector.heartbeatTimeout = .milliseconds(4 * ms)
    }
    let store = try ChatStore(path: directory + "/" + ChatStore.fileName)
    let directoryOfPeers = PeerDirectory()
    let nodeBox = NodeBox()
    let listener = try await connector.listen(port: 0) { connection in
        // (Unstructured: NIO's synchronous callback hands the connection to the actor; it ends when
        // `accepted` returns.)
        Task { await nodeBox.node?.accepted(connection) }
    }
    let port = listener.localAddress!.port!
    var configuration = SessionNode.Configuration(ownID: identity.peerID, ownName: name, port: port, autoAccept: .all, encryption: .required)
    if version >= 2 { configuration.envelopes = EnvelopeKeys(signer: EnvelopeSigner(identity: identity)) }
    let node = try SessionNode(
        configuration: configuration,
        eventLoop: group.next(), connector: connector, store: store, knownPeers: try KnownPeers(directory: directory),
        directory: directoryOfPeers, logger: logger)
    await nodeBox.set(node)
    // (Unstructured: the node runs beside the measurements; cancelled at the end, then given 300 ms to say GOODBYE.)
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
        // When this member is connected to every other one (the mesh, as it sees it), it says so.
        let meshWatch = Task.detached {
            let deadline = now() + 300
            while now() < deadline {
                if let state = await node.room(room), state.members.count == total - 1, state.members.allSatisfy({ $0.state == .connected }) {
                    writeFile("\(rendezvous)/\(name).mesh", "\(now())\n")
                    return
                }
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        await member(node: node, room: room, rendezvous: rendezvous, name: name)
        meshWatch.cancel()
    }
    maintenance.cancel()
    try? await Task.sleep(for: .milliseconds(300))
}

/// Members answer pings, count the throughput run, and record fan-out arrivals and the links they lose.
func member(node: isolated SessionNode, room: RoomID, rendezvous: String, name: String) async {
    var arrivals: [String: Double] = [:]
    var lost: [String] = []
    var counted = 0
    for await event in node.events {
        if case .memberLeft(_, let peer, let code, _, _) = event {
            lost.append("\(now()) \(code) \(peer.name)")
            continue
        }
        guard case .message(let message) = event, !message.outgoing, message.stored.kind == .text else { continue }
        let body = message.stored.body
        if body.hasPrefix("ping:") {
            _ = try? await node.send("pong:" + body.dropFirst(5), room: room, to: [PeerID(message.stored.senderID)!])
        } else if body.hasPrefix("t:") {
            counted += 1
            if body == "t:last" {
                _ = try? await node.send("tdone:\(counted)", room: room, to: [PeerID(message.stored.senderID)!])
                counted = 0
            }
        } else if body.hasPrefix("fan:") {
            arrivals[String(body.dropFirst(4))] = now()
        } else if body == "done" {
            let lines = arrivals.map { "\($0.key) \($0.value)" }.joined(separator: "\n")
            writeFile("\(rendezvous)/\(name).lost", lost.map { $0 + "\n" }.joined())
            writeFile("\(rendezvous)/\(name).arrivals", lines + "\n")
            return
        }
    }
}

/// The leader: invitations, then the pair figures with the first member, then fan-out to all.
func lead(node: isolated SessionNode, peers: [SessionPeer], room: RoomID, rendezvous: String) async throws -> [String: Double] {
    var invites: [Double] = []
    let meshStart = now()
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
    // Wait for the mesh, so that introductions do not run during the measurements. (The leader's view:
    // every member connected to it; members introduce themselves to each other meanwhile.)
    let meshDeadline = now() + 300
    while !node.room(room)!.members.allSatisfy({ $0.state == .connected }) {
        guard now() < meshDeadline else { die("the mesh did not complete in 300 s") }
        try await Task.sleep(for: .milliseconds(20))
    }
    let leaderMesh = now()
    // And every member's own view: connected to all the others.
    var meshTimes: [Double] = []
    while meshTimes.count < peers.count {
        guard now() < meshDeadline else { die("only \(meshTimes.count) of \(peers.count) members saw the whole mesh in 300 s") }
        try await Task.sleep(for: .milliseconds(20))
        meshTimes = peers.compactMap { readFile("\(rendezvous)/\($0.name).mesh").flatMap { Double($0.split(separator: "\n").first ?? "") } }
    }
    let mesh = (max(leaderMesh, meshTimes.max()!) - meshStart) * 1000
    try await Task.sleep(for: .milliseconds(500))

    // Round trip of a small reliable message.
    var rtts: [Double] = []
    for index in 0..<2100 {
        let start = now()
        _ = try await node.send("ping:\(index)", room: room, to: [first.id])
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
            if batch == 1 { _ = try await node.send(texts[0], room: room, to: [first.id]) } else { _ = try await node.send(texts, room: room, to: [first.id]) }
            index = end
            await Task.yield()
        }
        _ = try await node.send("t:last", room: room, to: [first.id])
        let done = await next(prefix: "tdone:")
        guard done == "tdone:\(count)" else { die("throughput run: member counted \(done)") }
        return Double(count) / (now() - start)
    }
    let single = try await throughput(count: 20_000, batch: 1)
    try await Task.sleep(for: .milliseconds(500))
    let batched = try await throughput(count: 100_000, batch: 100)
    try await Task.sleep(for: .milliseconds(500))

    // Fan-out to the whole room: one message every 5 ms, or every half millisecond per member in a bigger
    // room (each member syncs its own commit, and all of them share this machine's disk and 2 cores).
    var sent: [String: Double] = [:]
    var sentDone: [String: Double] = [:]
    let fanStart = now()
    let interval = max(5, peers.count / 2)
    for index in 0..<300 {
        sent["\(index)"] = now()
        _ = try await node.send("fan:\(index)", room: room)
        sentDone["\(index)"] = now()
        try await Task.sleep(for: .milliseconds(interval))
    }
    try await Task.sleep(for: .milliseconds(500))
    let fanEnd = now()

    // Idle with every link up (LANCHAT_BENCH_IDLE_SECONDS, 0 by default: skipped): the CPU this process
    // spends on heartbeats and timers, from its own accounting.
    var idle: [String: Double] = [:]
    if let seconds = ProcessInfo.processInfo.environment["LANCHAT_BENCH_IDLE_SECONDS"].flatMap(Double.init), seconds > 0 {
        try await Task.sleep(for: .seconds(2))
        let (cpu0, wall0) = (cpuSeconds(), now())
        try await Task.sleep(for: .seconds(seconds))
        let connected = node.room(room)!.members.filter { $0.state == .connected }.count
        idle = [
            "idle_cpu_percent": (cpuSeconds() - cpu0) / (now() - wall0) * 100, "idle_links_count": Double(connected),
            "idle_seconds": now() - wall0,
        ]
    }
    _ = try await node.send("done", room: room)
    var latest: [String: Double] = [:]
    // LANCHAT_BENCH_FANOUT_TRACE=PATH: where the fan-out's tail comes from. PATH gets the leader's sends
    // that took over 100 ms (its own commit and sync) and each arrival over 200 ms late ("member index
    // late at", milliseconds since the fan-out began): a stall of the leader's disk shows in both.
    let tracePath = ProcessInfo.processInfo.environment["LANCHAT_BENCH_FANOUT_TRACE"]
    var lateArrivals = ""
    var linksLost = 0
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
            if tracePath != nil, let at = sent[String(parts[0])], time - at > 0.2 {
                lateArrivals += "\(peer.name) \(parts[0]) \(Int((time - at) * 1000)) ms at \(Int((at - fanStart) * 1000))\n"
            }
        }
        guard seen == sent.count else { die("\(peer.name) got \(seen) of \(sent.count) fan-out messages") }
        // (written before the arrivals) Links this member lost during the fan-out, whatever the reason.
        for line in (readFile("\(rendezvous)/\(peer.name).lost") ?? "").split(separator: "\n") {
            if let time = line.split(separator: " ").first.flatMap({ Double($0) }), time >= fanStart, time <= fanEnd { linksLost += 1 }
        }
    }
    if let tracePath {
        let slowSends = sent.keys.sorted { Int($0)! < Int($1)! }.compactMap { index -> String? in
            let took = sentDone[index]! - sent[index]!
            return took > 0.1 ? "send \(index) took \(Int(took * 1000)) ms at \(Int((sent[index]! - fanStart) * 1000))\n" : nil
        }
        writeFile(tracePath, slowSends.joined() + lateArrivals)
    }
    let fanout = sent.map { (latest[$0.key]! - $0.value) * 1000 }
    return [
        "members_count": Double(peers.count),
        "invite_first_ms": invites[0], "invite_p50_ms": percentile(invites, 0.5), "invite_max_ms": invites.max()!,
        "rtt_p50_us": percentile(rtts, 0.5), "rtt_p99_us": percentile(rtts, 0.99),
        "throughput_msgs_per_s": batched, "throughput_single_msgs_per_s": single,
        "fanout_p50_ms": percentile(fanout, 0.5), "fanout_p99_ms": percentile(fanout, 0.99), "fanout_max_ms": fanout.max()!,
        "fanout_interval_ms": Double(interval), "fanout_links_lost_count": Double(linksLost), "mesh_ms": mesh,
    ].merging(idle) { first, _ in first }
}

actor NodeBox {
    var node: SessionNode?
    func set(_ node: SessionNode) { self.node = node }
}
