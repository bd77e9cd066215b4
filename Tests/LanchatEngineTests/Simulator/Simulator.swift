import LanchatCore
import LanchatEngine
import LanchatWire

/// A deterministic simulator of whole rooms: several nodes' engines in one process, joined by a
/// simulated network on a virtual clock, driven by a seeded schedule of commands and faults
/// (connections dropped at any frame, partitions and heals, crashes that keep only what was persisted,
/// slow links, simultaneous dials, skewed wall clocks). Same seed, same run: a failure prints the seed
/// and the trace's tail, and `SIMULATOR_SEED=N swift test --filter SimulatorTests` replays it.
final class Simulator {
    struct Options {
        var nodes = 4
        /// Virtual milliseconds of commands and faults.
        var chaos: Int64 = 20_000
        /// Virtual milliseconds of quiet after the network heals and every node is back.
        var quiet: Int64 = 150_000
        var faults = true
    }

    struct Node {
        let peer: SessionPeer
        var engine: SessionStateMachine?
        /// What survives a crash: exactly what the engine asked to persist (the same rules as the SQLite store).
        let store = MemorySessionStore()
        /// Known peers (their own file, in the daemon).
        var known = KnownPeerBook()
        /// Times each message id was reported as received (must never exceed 1).
        var reported: [String: Int] = [:]
        /// Milliseconds added to the virtual clock for this node's wall clock (skew).
        var skew: Int64 = 0
        var incarnation = 0
        /// Part files (they survive a crash: what was written is on disk), by transfer id.
        var disk: [WireID: [UInt8]] = [:]
        /// What it stored in the last moments (in memory: a crash forgets it).
        var arrivals = RecentArrivals()
    }

    final class Link {
        let id: Int
        let ends: (node: Int, handle: LinkHandle, other: Int, otherHandle: LinkHandle)
        var up = true
        /// Ends whose node has adopted the connection (its shell holds frames that come earlier).
        var adopted: Set<Int> = []
        /// When the last frame in each direction arrives (frames of a direction arrive in order).
        var lastArrival: [Int: Int64] = [:]

        init(id: Int, ends: (node: Int, handle: LinkHandle, other: Int, otherHandle: LinkHandle)) {
            self.id = id
            self.ends = ends
        }
    }

    enum Event {
        case deliver(link: Int, to: Int, [WireFrame])
        case history(link: Int, to: Int, from: Int, RoomID, [StoredMessage])
        case linkDown(node: Int, incarnation: Int, LinkHandle, PeerCloseReason)
        case linkUp(node: Int, incarnation: Int, link: Int)
        case tick(node: Int, incarnation: Int)
        case dial(node: Int, incarnation: Int, PeerID)
        case dialFailed(node: Int, incarnation: Int, PeerID)
        case restart(node: Int)
        /// A crashed node's connections close (after what it wrote before the crash has arrived).
        case dropLinks(node: Int)
        case step
        /// A simulated program on a node: starts waiting for a stream, works on one, or gives up waiting.
        case acceptStream(node: Int, incarnation: Int, plan: Int)
        case program(node: Int, incarnation: Int, WireID)
        case acceptorGivesUp(node: Int, incarnation: Int, acceptor: UInt64)
        /// The simulated file thread finished something a transfer asked for.
        case fileDone(node: Int, incarnation: Int, FileDone)
    }

    /// A reliable message some node's `send` accepted: who must end up with it.
    struct Sent {
        var id: String
        var sender: Int
        var room: RoomID
        var recipients: [PeerID]
        var at: Int64
    }

    struct Violation: Error, CustomStringConvertible {
        var description: String
    }

    let seed: UInt64
    let options: Options
    var random: IDGenerator
    var now: Int64 = 0
    var nodes: [Node] = []
    var links: [Int: Link] = [:]
    var nextLink = 1
    var nextHandle = 1
    private var queue = EventQueue<Event>()
    var sent: [Sent] = []
    /// Messages whose author crashed between sending them and storing them (members may hold them; the
    /// author never gets its own messages back from a relay).
    var lostByAuthor: Set<String> = []
    /// Per node and room, the highest of its own sequences its shell saw committed since it started: as
    /// in `SessionNode`, only a send that follows it may leave before its commit.
    var storedThrough: [Int: [RoomID: Int64]] = [:]
    /// (node, room) pairs that left a room at some time, and when.
    var leaves: [(node: Int, room: RoomID, at: Int64)] = []
    /// Nodes that cannot reach each other (a partition): node index -> side.
    var side: [Int: Int] = [:]
    /// Extra latency per node while its link is "slow".
    var slow: [Int: Int64] = [:]
    /// Invitations to send once the dial they waited for ends: (inviter, invitee, room, timeout).
    var intents: [(from: Int, to: Int, room: RoomID, timeout: Int64)] = []
    /// Streams the simulated programs opened, their programs, and programs waiting to accept one.
    var streamPlans: [StreamPlan] = []
    var programs: [ProgramKey: StreamProgram] = [:]
    var waitingAcceptors: [UInt64: (node: Int, plan: Int)] = [:]
    var nextAcceptor: UInt64 = 0
    var streamViolations: [String] = []
    var cleanStreams = 0
    var streamBytes = 0
    /// Files the simulated programs sent (their bytes, by transfer id), and what each transfer cost.
    var originals: [WireID: [UInt8]] = [:]
    var transferStats: [WireID: TransferStats] = [:]
    var transferViolations: [String] = []
    var filesPlaced = 0
    /// Transfers whose part file the simulated disk damaged.
    var corrupted: Set<WireID> = []
    var placedBytes = 0
    /// Records a hostile relay changed in a history (a fault), and forged records newcomers refused.
    var forgeries = (injected: 0, refused: 0)
    /// Members of no node's making a hostile member put in its ROOM_MEMBERS (a fault).
    var fakeMembers = 0
    /// Metadata writes made, and administration commands given (removals, administrators named or
    /// demoted, closings; some refused).
    var metaWrites = 0
    var adminCommands = 0
    /// Members at the end with no record of their room's creator, beside one that holds it (`checkMetadata`),
    /// and views of members that took no removal for that reason (`checkMembership`).
    var recordless = 0
    var removalsNotTaken = 0
    /// Outgoing transfers a sender cancelled, and those whose receiver never heard by the end (`checkTransfers`).
    var cancelledBySender: Set<String> = []
    var cancelsNotHeard = 0
    /// Nodes out of a room by an administrator's removal, and by its closing.
    var removals = 0
    var closings = 0
    /// Topics (`+Topics`): messages published, delivered, what each node got, the first fault seen.
    var topicPublished = 0
    var topicDeliveries = 0
    var topicSeen: Set<String> = []
    var topicViolation: String?
    var trace: [String] = []
    var events = 0
    /// The first fault `SessionStateMachine.consistencyFaults` found (checked after every engine input).
    var stateFault: String?
    let rooms = [RoomID("lab")!, RoomID("ops")!, RoomID("x")!]

    init(seed: UInt64, options: Options = Options()) {
        self.seed = seed
        self.options = options
        random = IDGenerator(seed: seed)
        for index in 0..<options.nodes {
            var digest: [UInt8] = []
            var keys = IDGenerator(seed: seed &+ UInt64(index) &* 7919)
            for _ in 0..<4 { let value = keys.next(); for shift in stride(from: 0, to: 64, by: 8) { digest.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) } }
            let peer = SessionPeer(id: PeerID(digest: digest), name: "n\(index)")
            var node = Node(peer: peer)
            node.skew = options.faults ? Int64(random.next() % 600_000) - 300_000 : 0
            nodes.append(node)
        }
        for index in nodes.indices { boot(index) }
    }

    // MARK: Running

    func roll(_ n: Int) -> Int { Int(random.next() % UInt64(max(1, n))) }
    func chance(_ percent: Int) -> Bool { roll(100) < percent }

    func time(_ node: Int) -> EngineTime { EngineTime(monotonic: now, wall: 1_800_000_000_000 + now + nodes[node].skew) }

    func schedule(_ event: Event, at time: Int64) {
        queue.push(event, at: time)
    }

    /// Print every step as it happens, and frames of membership too (SIMULATOR_TRACE=1 with a seed).
    var verbose = false

    func log(_ text: String) {
        if verbose { print("[\(now)] \(text)") }
        trace.append("[\(now)] \(text)")
        if trace.count > 400 { trace.removeFirst(100) }
    }

    /// Runs the whole schedule and checks the invariants; throws the first violation.
    func run() throws {
        var at: Int64 = 0
        while true {
            at += Int64(50 + roll(400))
            guard at < options.chaos else { break }
            schedule(.step, at: at)
        }
        runUntil(options.chaos)
        if let stateFault { throw fail(stateFault) }
        heal()
        runUntil(options.chaos + options.quiet)
        if let stateFault { throw fail(stateFault) }
        try checkMembership()
        try checkDelivery()
        try checkSequences()
        try checkSignatures()
        try checkRelay()
        try checkProvenance()
        try checkMetadata()
        try checkTopics()
        try checkInvitations()
        try checkStreams()
        try checkTransfers()
        // Everyone leaves every room: nothing may stay scheduled or queued.
        for index in nodes.indices {
            for room in nodes[index].engine?.roomNames ?? [] { command(index) { engine throws(SessionError) in try engine.leave(RoomID(room)!, at: self.time(index)) } }
        }
        runUntil(options.chaos + options.quiet + 40_000)
        if let stateFault { throw fail(stateFault) }
        try checkQuiet()
    }

    func runUntil(_ end: Int64) {
        while stateFault == nil {
            guard let due = queue.nextTime, due <= end, let next = queue.pop() else { break }
            now = max(now, next.time)
            events += 1
            handle(next.event)
        }
        now = max(now, end)
    }

    func alive(_ node: Int, _ incarnation: Int) -> Bool {
        nodes[node].engine != nil && nodes[node].incarnation == incarnation
    }

    private func handle(_ event: Event) {
        switch event {
        case .step:
            step()
        case .tick(let node, let incarnation):
            guard alive(node, incarnation), let deadline = nodes[node].engine?.nextDeadline, deadline <= now else { return }
            perform(node) { $0.tick(at: self.time(node)) }
        case .deliver(let id, let to, let frames):
            guard let link = links[id], link.up, nodes[to].engine != nil else { return }
            guard link.adopted.contains(to) else {
                // Not adopted yet at this end: the connection handler keeps frames until then.
                schedule(.deliver(link: id, to: to, frames), at: now + 1)
                return
            }
            let handle = link.ends.node == to ? link.ends.handle : link.ends.otherHandle
            if verbose, frames.contains(where: { if case .roomLeave = $0 { true } else { false } }) {
                log("n\(to) gets ROOM_LEAVE on \(handle) from \(nodes[to].engine?.peer(on: handle)?.name ?? "nobody (not a serving link)")")
            }
            perform(to) { $0.received(frames, on: handle, at: self.time(to)) }
        case .history(let id, let to, let from, let room, let messages):
            guard let link = links[id], link.up, var engine = nodes[to].engine else { return }
            // As the shell: a history resource is taken only from the member we asked: our inviter, or a
            // member we sent a SYNC_REQUEST (relay).
            guard let source = engine.takeHistory(room, from: nodes[from].peer.id, signed: engine.configuration.envelopes != nil, at: time(to)) else {
                if verbose { log("n\(to): history from n\(from) for \(room) not asked for") }
                nodes[to].engine = engine
                return
            }
            // As the shell: each record (signed) through the engine's rule for what may be kept. A hostile
            // relay (a fault, like the others only before the network heals) changes one record's words and
            // keeps its signature: it must be refused.
            let tamper = options.faults && now < options.chaos && !messages.isEmpty && chance(10) ? roll(messages.count) : nil
            for (index, message) in messages.enumerated() {
                guard let id = WireID(hex: message.id) else { continue }
                var record = HistoryRecord(
                    id: id, senderID: message.senderID, senderName: message.senderName, sequence: UInt64(max(0, message.sequence)),
                    timestampMilliseconds: UInt64(max(0, message.timestamp)), kind: message.kind == .file ? .file : .text, body: message.body,
                    signature: message.isSigned ? Signature(key: message.authorKey, bytes: message.signature) : nil)
                if index == tamper {
                    record.body += " (forged by n\(from))"
                    forgeries.injected += 1
                }
                let members = (engine.members(of: room) ?? [:]).mapValues(\.name)
                let verdict = SessionStateMachine.verdict(record, room: room, relay: nodes[from].peer.id, ownID: nodes[to].peer.id,
                                                          keys: engine.configuration.envelopes, members: members,
                                                          strangers: source == .inviter, now: time(to).wall)
                if verbose, case .keep = verdict {} else if verbose { log("n\(to): record \(message.id.prefix(8)) from n\(from): \(verdict)") }
                switch verdict {
                case .keep(let kept): nodes[to].store.insert(kept, now: time(to).wall)
                case .forged: forgeries.refused += 1
                case .refused, .ours: break
                }
            }
            nodes[to].engine = engine
        case .linkDown(let node, let incarnation, let handle, let reason):
            guard alive(node, incarnation) else { return }
            if verbose { log("n\(node): \(handle) down (\(reason))") }
            perform(node) { $0.linkDown(handle, reason: reason, at: self.time(node)) }
        case .linkUp(let node, let incarnation, let id):
            guard alive(node, incarnation), let link = links[id] else { return }
            let mine = link.ends.node == node
            guard link.up else {
                // The connection died during its handshake: the dial failed (the shell always reports it).
                if mine { perform(node) { $0.dialFinished(self.nodes[link.ends.other].peer.id, at: self.time(node)) } }
                return
            }
            let handle = mine ? link.ends.handle : link.ends.otherHandle
            let other = mine ? link.ends.other : link.ends.node
            var serving: LinkHandle?
            link.adopted.insert(node)
            if verbose { log("n\(node): \(handle) up to n\(other)") }
            perform(node) {
                let result = $0.linkUp(handle, peer: self.nodes[other].peer, dialedByUs: mine, remoteAddress: nil, version: WireFrame.versions.upperBound, at: self.time(node))
                serving = result.serving
                return result.actions
            }
            if mine {
                perform(node) { $0.dialFinished(self.nodes[other].peer.id, at: self.time(node)) }
                if serving != nil { sendIntents(from: node, to: other) }
            }
        case .dial(let node, let incarnation, let peer):
            guard alive(node, incarnation) else { return }
            dial(from: node, to: peer)
        case .dialFailed(let node, let incarnation, let peer):
            guard alive(node, incarnation) else { return }
            perform(node) { $0.dialFinished(peer, at: self.time(node)) }
            if let target = nodes.firstIndex(where: { $0.peer.id == peer }) { intents.removeAll { $0.from == node && $0.to == target } }
        case .restart(let node):
            if nodes[node].engine == nil { boot(node) }
        case .dropLinks(let node):
            for link in upLinks(of: node) { drop(link, reason: .lost, closer: nil) }
        case .acceptStream(let node, let incarnation, let plan):
            guard alive(node, incarnation) else { return }
            startAccepting(node, plan: plan)
        case .program(let node, let incarnation, let id):
            guard alive(node, incarnation) else { return }
            runProgram(node, id)
        case .acceptorGivesUp(let node, let incarnation, let acceptor):
            guard alive(node, incarnation), waitingAcceptors.removeValue(forKey: acceptor) != nil else { return }
            nodes[node].engine?.cancelStreamAcceptor(acceptor)
        case .fileDone(let node, let incarnation, let done):
            guard alive(node, incarnation) else { return }
            fileDone(node, done)
        }
    }

    // MARK: The shell's part

    /// Feeds an input to a node's engine and performs what it returns, as `SessionNode` does.
    func perform(_ node: Int, _ input: (inout SessionStateMachine) throws -> [SessionAction]) rethrows {
        guard var engine = nodes[node].engine else { return }
        let actions = try input(&engine)
        nodes[node].engine = engine
        // The engine's tables must agree after every input, not only at the end of the schedule.
        if stateFault == nil, case let faults = engine.consistencyFaults(), !faults.isEmpty {
            stateFault = "n\(node)'s state after event \(events): " + faults.joined(separator: "; ")
        }
        var inserted: Set<String> = []
        for case .persist(let operation) in actions {
            if case .rememberPeer(let label, let id) = operation {
                var labels = nodes[node].known.labels
                labels[id] = label
                nodes[node].known = KnownPeerBook(labels)
            } else if try! nodes[node].store.apply(operation, now: time(node).wall), case .insertMessage(let message, _) = operation {
                inserted.insert(message.id)
            }
        }
        nodes[node].arrivals.note(inserted, at: now)
        for action in actions { perform(action, node: node, inserted: inserted) }
        if let deadline = nodes[node].engine?.nextDeadline {
            schedule(.tick(node: node, incarnation: nodes[node].incarnation), at: max(now, deadline))
        }
    }

    private func perform(_ action: SessionAction, node: Int, inserted: Set<String>) {
        switch action {
        case .persist(.insertMessage(let message, let report?)):
            if inserted.contains(message.id), !report.outgoing, message.kind != .system {
                nodes[node].reported[message.id, default: 0] += 1
                // Checked here too, so that the trace ends where it happened.
                if nodes[node].reported[message.id] == 2, stateFault == nil { stateFault = "n\(node) reported message \(message.id.prefix(8)) twice" }
            }
        case .persist:
            break
        case .send(let handle, let frames):
            countTransfers(frames)
            transmit(frames, from: node, on: handle)
        case .sendUnreliable(let handle, let frames):
            if !chance(10) { transmit(frames, from: node, on: handle) }
        case .close(let handle, let reason, let text):
            guard let link = link(of: node, handle), link.up else {
                schedule(.linkDown(node: node, incarnation: nodes[node].incarnation, handle, .local), at: now)
                return
            }
            drop(link, reason: .goodbye(reason, text), closer: node)
        case .dial(let peer):
            schedule(.dial(node: node, incarnation: nodes[node].incarnation, peer), at: now + 1)
        case .flushOutbox(let peer, let handle, let rooms):
            let frames = nodes[node].store.outbox(peerID: peer.rawValue).filter { rooms.contains(RoomID($0.room)!) }
                .compactMap { SessionStateMachine.frame($0, reliable: true, signed: true) }
            if !frames.isEmpty { transmit(frames, from: node, on: handle) }
        case .sendHistory(let room, let since, let peer, _, _):
            guard let to = nodes.firstIndex(where: { $0.peer.id == peer.id }), let link = links.values.sorted(by: { $0.id < $1.id }).first(where: { $0.up && connects($0, node, to) }) else { return }
            let messages = nodes[node].store.export(room: room.rawValue, since: since, limit: 1000)
            schedule(.history(link: link.id, to: to, from: node, room, messages), at: arrival(link, to: to))
        case .requestSync(let room, let handle):
            let marks = SessionStateMachine.syncMarks(nodes[node].store.recentSequences(room: room.rawValue, limit: 2000))
            let since = SessionStateMachine.relayFloor(joinedAt: nodes[node].store.joinedAt(room: room.rawValue), now: time(node).wall)
            transmit([.syncRequest(.init(room: room, sinceMilliseconds: since, marks: marks))], from: node, on: handle)
        case .sendSync(let room, let since, let marks, let peer):
            guard let to = nodes.firstIndex(where: { $0.peer.id == peer.id }), let link = links.values.sorted(by: { $0.id < $1.id }).first(where: { $0.up && connects($0, node, to) }) else { return }
            let lacking = nodes[node].engine?.relayAnswer(nodes[node].store.export(room: room.rawValue, since: since, limit: 1000), room: room, marks: marks,
                                                          to: peer.id, arrivals: nodes[node].arrivals, at: time(node)) ?? []
            if verbose { log("n\(node) -> n\(to): sync answer \(room) since \(since) \(lacking.map { $0.id.prefix(8) }) for marks \(marks.mapValues { $0.map { "\($0.lowerBound)-\($0.upperBound)" } })") }
            if !lacking.isEmpty { schedule(.history(link: link.id, to: to, from: node, room, lacking), at: arrival(link, to: to)) }
        case .requestHistory(let room, let handle, _):
            let latest = nodes[node].store.latestTimestamp(room: room.rawValue)
            transmit([.historyRequest(room: room, sinceMilliseconds: UInt64(max(0, latest - 60_000)))], from: node, on: handle)
        case .emit(.transfer(let info)):
            if info.state != "active" { log("n\(node): transfer \(info.id.prefix(6)) \(info.direction) \(info.state)\(info.error.map { ": \($0)" } ?? "")") }
        case .emit(.topicMessage(let message)):
            topicDelivered(message, at: node)
        case .emit(.memberLeft(let room, let peer, let code, let text, true)) where peer.id == nodes[node].peer.id:
            // Out of a room by our own leave, or by an administrator's removal or closing: owed nothing
            // sent there any more (a rejoin starts over), as with `leaveRandomRoom`.
            if code != "left" { log("n\(node) is out of \(room): \(code) (\(text))") }
            if code == "removed" { removals += 1 } else if code == "closed" { closings += 1 }
            if let room = RoomID(room) { leaves.append((node, room, now)) }
        case .emit(.memberLeft(let room, let peer, "removed", _, true)):
            // A member an administrator removed is owed nothing it was sent, as one that left, whether or
            // not it heard (its queued messages are dropped here; invited back, it starts over with history).
            if let index = nodes.firstIndex(where: { $0.peer.id == peer.id }), let room = RoomID(room) { leaves.append((index, room, now)) }
        case .emit(let event):
            if case .invitationClosed(let invitation, let outcome) = event { log("n\(node): invitation \(invitation.id.prefix(6)) \(outcome)") }
        case .inviteFinished(let id, let outcome):
            log("n\(node): invite \(id.description.prefix(6)) -> \(outcome)")
        case .peerConnected, .peerDisconnected:
            break
        case .file(let action):
            performFile(action, node: node)
        case .stream(let id, let signal):
            streamSignal(node, id, signal)
        case .streamHandedOver(let acceptor, let accepted):
            handedOver(node, acceptor, accepted)
        }
    }

    private func connects(_ link: Link, _ a: Int, _ b: Int) -> Bool {
        (link.ends.node == a && link.ends.other == b) || (link.ends.node == b && link.ends.other == a)
    }

    private func link(of node: Int, _ handle: LinkHandle) -> Link? {
        links.values.first { ($0.ends.node == node && $0.ends.handle == handle) || ($0.ends.other == node && $0.ends.otherHandle == handle) }
    }

    private func latency(_ a: Int, _ b: Int) -> Int64 {
        Int64(1 + roll(20)) + (slow[a] ?? 0) + (slow[b] ?? 0)
    }

    /// When a frame sent now from the other end arrives at `to` (after every earlier frame that way).
    private func arrival(_ link: Link, to: Int) -> Int64 {
        let from = link.ends.node == to ? link.ends.other : link.ends.node
        let time = max(link.lastArrival[to] ?? 0, now + latency(from, to))
        link.lastArrival[to] = time
        return time
    }

    private func transmit(_ frames: [WireFrame], from node: Int, on handle: LinkHandle) {
        guard let link = link(of: node, handle), link.up else { return }
        var frames = frames
        if options.faults, now < options.chaos, chance(5) { frames = frames.map { withFakeMembers($0, from: node) } }
        let to = link.ends.node == node ? link.ends.other : link.ends.node
        // A fault may cut the connection at any frame: the frame is lost, both sides see the drop.
        if options.faults, now < options.chaos, chance(2) {
            log("cut link \(link.id) n\(link.ends.node)-n\(link.ends.other) at a frame")
            drop(link, reason: .lost, closer: nil)
            return
        }
        if verbose {
            for frame in frames {
                switch frame {
                case .roomMembers(let update): log("n\(node) -> n\(to): ROOM_MEMBERS \(update.room) \(update.members.map(\.name))")
                case .roomLeave(let leave): log("n\(node) -> n\(to): ROOM_LEAVE \(leave.room) \(leave.text)")
                case .inviteReply(let reply): log("n\(node) -> n\(to): INVITE_REPLY \(reply.outcome)")
                default: break
                }
            }
        }
        schedule(.deliver(link: link.id, to: to, frames), at: arrival(link, to: to))
    }

    /// Ends a link: frames in flight are lost; each side hears of it (the closer at once).
    func drop(_ link: Link, reason: PeerCloseReason, closer: Int?) {
        guard link.up else { return }
        link.up = false
        for (node, handle) in [(link.ends.node, link.ends.handle), (link.ends.other, link.ends.otherHandle)] {
            let mine = node == closer
            let heard: PeerCloseReason = mine ? .local : reason
            let at = mine ? now : (reason == .timedOut ? now + 8_000 : now + latency(link.ends.node, link.ends.other))
            schedule(.linkDown(node: node, incarnation: nodes[node].incarnation, handle, heard), at: at)
        }
    }

    private func reachable(_ a: Int, _ b: Int) -> Bool {
        nodes[a].engine != nil && nodes[b].engine != nil && side[a] == side[b]
    }

    /// A dial: TLS and HELLO take a few milliseconds; then both sides adopt the connection, in either order.
    private func dial(from node: Int, to peer: PeerID) {
        guard let target = nodes.firstIndex(where: { $0.peer.id == peer }) else { return }
        var planned = false
        perform(node) {
            let (plan, _, actions) = $0.prepareDial(peer)
            planned = plan != nil
            return actions
        }
        guard planned else {
            perform(node) { $0.dialFinished(peer, at: self.time(node)) }
            return
        }
        guard reachable(node, target) else {
            schedule(.dialFailed(node: node, incarnation: nodes[node].incarnation, peer), at: now + 5 + Int64(roll(50)))
            return
        }
        let link = Link(id: nextLink, ends: (node, LinkHandle(nextHandle), target, LinkHandle(nextHandle + 1)))
        nextLink += 1
        nextHandle += 2
        links[link.id] = link
        let base = now + latency(node, target) * 2
        schedule(.linkUp(node: node, incarnation: nodes[node].incarnation, link: link.id), at: base + Int64(roll(3)))
        schedule(.linkUp(node: target, incarnation: nodes[target].incarnation, link: link.id), at: base + Int64(roll(3)))
    }

    private func boot(_ index: Int) {
        nodes[index].incarnation += 1
        var configuration = SessionStateMachine.Configuration(ownID: nodes[index].peer.id, ownName: nodes[index].peer.name, port: 7473, autoAccept: .never)
        configuration.defaultInviteTimeout = 20_000
        configuration.streamLimits = Self.streamLimits
        configuration.transferLimits = Self.transferLimits
        configuration.envelopes = SimulatedSignatures.keys(for: index, ids: nodes.map(\.peer.id))
        let ids = IDGenerator(seed: seed ^ UInt64(index &* 1_000_003) ^ UInt64(nodes[index].incarnation) << 40)
        let engine = SessionStateMachine(
            configuration: configuration, restored: try! nodes[index].store.restored(ownID: nodes[index].peer.id, knownPeers: nodes[index].known),
            addressBook: NoAddresses(), ids: ids, shortCode: { _ in "0000-0000" })
        nodes[index].engine = engine
        restoreTransfers(index)
        log("n\(index) starts (incarnation \(nodes[index].incarnation))")
        perform(index) { $0.start(at: self.time(index)) }
    }

    /// A node's process dies. Its connections close at once, or at `linksUntil` (what it wrote before
    /// still arrives: the kernel sends it).
    func crash(_ index: Int, linksUntil: Int64? = nil) {
        guard nodes[index].engine != nil else { return }
        log("n\(index) crashes")
        noteCrash(index)
        nodes[index].engine = nil
        nodes[index].arrivals = RecentArrivals()
        storedThrough[index] = nil
        if let linksUntil {
            schedule(.dropLinks(node: index), at: linksUntil)
        } else {
            for link in upLinks(of: index) { drop(link, reason: .lost, closer: nil) }
        }
        intents.removeAll { $0.from == index }
    }

    /// A node's connections that are up, in the order they were made.
    func upLinks(of node: Int) -> [Link] {
        links.values.sorted(by: { $0.id < $1.id }).filter { $0.up && ($0.ends.node == node || $0.ends.other == node) }
    }

    /// Ends the chaos: every node runs again, partitions heal, links are fast.
    func heal() {
        side = [:]
        slow = [:]
        for index in nodes.indices where nodes[index].engine == nil { boot(index) }
        log("healed")
    }

    // MARK: Commands and faults

    func command(_ node: Int, _ body: (inout SessionStateMachine) throws(SessionError) -> [SessionAction]) {
        do {
            try perform(node) { (engine: inout SessionStateMachine) throws -> [SessionAction] in try body(&engine) }
        } catch {}
    }

    private func step() {
        let node = roll(nodes.count)
        guard nodes[node].engine != nil else { return }
        let dice = roll(100)
        switch dice {
        case 0..<25: invite(from: node)
        case 25..<40: answer(node, accept: !chance(15))
        case 40..<73: send(from: node)
        case 73..<77: topicStep(node)
        case 77..<80: if administered && chance(70) { administer(node) } else { writeMeta(node) }
        case 80..<83: leaveRandomRoom(node)
        case 83..<86: openStream(from: node)
        case 86..<89: sendFile(from: node)
        default: if options.faults { fault() } else { send(from: node) }
        }
    }

    /// In half the schedules (even seeds) each room has one maker, as people use rooms: only node i makes
    /// room i, the others invite only to rooms they are in, and the rooms are administered (`administer`).
    /// In the others any node makes any room, so that rooms of one name made apart merge (members of
    /// both, one room) as they may on a LAN; those are not administered: merged, they keep two creators
    /// and two views of who administers (a removal then splits the members' lists; see `administer`).
    var administered: Bool { seed % 2 == 0 }

    private func invite(from node: Int) {
        var node = node
        var target = (node + 1 + roll(nodes.count - 1)) % nodes.count
        let room = rooms[roll(rooms.count)]
        if administered, nodes[node].engine?.roomNames.contains(room.rawValue) != true, rooms.firstIndex(of: room)! % nodes.count != node {
            // Not its room to make: its maker invites it instead (if the maker is up).
            let maker = rooms.firstIndex(of: room)! % nodes.count
            guard nodes[maker].engine != nil else { return }
            (node, target) = (maker, node)
        }
        let peer = nodes[target].peer
        let timeout = Int64(2_000 + roll(20_000))
        var start: SessionStateMachine.InviteStart = .dial
        perform(node) {
            let (decision, actions) = $0.beginInvite(peer, room: room, at: self.time(node))
            start = decision
            return actions
        }
        log("n\(node) invites n\(target) to \(room): \(start)")
        guard start == .dial else { return }
        intents.append((node, target, room, timeout))
        if nodes[node].engine?.isConnected(peer.id) == true {
            sendIntents(from: node, to: target)
        } else {
            dial(from: node, to: peer.id)
        }
    }

    private func sendIntents(from node: Int, to target: Int) {
        let mine = intents.filter { $0.from == node && $0.to == target }
        intents.removeAll { $0.from == node && $0.to == target }
        for intent in mine {
            perform(node) { $0.sendInvite(self.nodes[target].peer, room: intent.room, context: [], timeout: intent.timeout, at: self.time(node)).1 }
        }
    }

    private func answer(_ node: Int, accept: Bool) {
        guard let invitations = nodes[node].engine?.invitations, !invitations.isEmpty else { return }
        let invitation = invitations[roll(invitations.count)]
        log("n\(node) \(accept ? "accepts" : "declines") \(invitation.id.prefix(6)) to \(invitation.room)")
        command(node) { engine throws(SessionError) in
            accept ? try engine.accept(invitation.id, at: self.time(node)).1 : try engine.decline(invitation.id, at: self.time(node)).1
        }
    }

    private func send(from node: Int) {
        guard let names = nodes[node].engine?.roomNames, !names.isEmpty else { return }
        let room = RoomID(names[roll(names.count)])!
        let reliable = !chance(10)
        let count = 1 + (chance(20) ? roll(5) : 0)
        let texts = (0..<count).map { "m\(node)-\(now)-\($0)" }
        // A crash between a send's frames and its commit (the daemon writes a send first when it follows
        // the node's own sequences it saw committed in the room: `sendAheadLimit`): members may hold the
        // messages, the sender's history does not, and their sequences must never be used again
        // (`checkSequences`).
        if options.faults, now < options.chaos, chance(3), var engine = nodes[node].engine,
           let (plan, actions) = try? engine.send(texts, room: room, reliable: reliable, at: time(node)),
           let first = plan.messages.first?.sequence, storedThrough[node]?[room] == first - 1 {
            nodes[node].engine = engine
            lostByAuthor.formUnion(plan.messages.map(\.id))
            log("n\(node) sends \(plan.messages.count) to \(room) and crashes before its commit")
            for case .send(let handle, let frames) in actions { transmit(frames, from: node, on: handle) }
            // What was written arrives; then the connections close.
            let arrived = upLinks(of: node).compactMap { $0.lastArrival[$0.ends.node == node ? $0.ends.other : $0.ends.node] }.max() ?? now
            crash(node, linksUntil: max(now, arrived) + 1)
            schedule(.restart(node: node), at: max(now, arrived) + Int64(500 + roll(5_000)))
            return
        }
        command(node) { engine throws(SessionError) in
            let (plan, actions) = try engine.send(texts, room: room, reliable: reliable, at: self.time(node))
            if let last = plan.messages.last?.sequence { self.storedThrough[node, default: [:]][room] = last }
            if reliable {
                for message in plan.messages { self.sent.append(Sent(id: message.id, sender: node, room: room, recipients: plan.recipients, at: self.now)) }
            }
            return actions
        }
    }

    /// A metadata write: one of three keys, set (half the time with compare-and-set on the version this
    /// node holds) or deleted.
    private func writeMeta(_ node: Int) {
        guard let names = nodes[node].engine?.roomNames, !names.isEmpty else { return }
        let room = RoomID(names[roll(names.count)])!
        let key = ["topic", "color", "size"][roll(3)]
        let value: String? = chance(5) ? nil : "v\(node)-\(now)"
        let held = nodes[node].engine?.metaEntry(key, in: room)?.version ?? 0
        metaWrites += 1
        command(node) { engine throws(SessionError) in
            try engine.setMeta(key, to: value, in: room, ifVersion: self.chance(2) ? held : nil, at: self.time(node)).1
        }
    }

    /// Administration: a member removes another, names or demotes an administrator, or (rarely) closes
    /// the room. Members that do not administer the room are refused, as are removals of its creator;
    /// what the rest does travels as the room's metadata, with its faults.
    private func administer(_ node: Int) {
        guard let mine = nodes[node].engine, case let names = mine.roomNames, !names.isEmpty else { return }
        let room = RoomID(names[roll(names.count)])!
        // Mostly an administrator of the room gives the command (some members try and are refused).
        var node = node
        let admins = mine.administrators(of: room)
        if !admins.contains(nodes[node].peer.id), chance(75),
           let admin = nodes.indices.first(where: { admins.contains(nodes[$0].peer.id) && nodes[$0].engine?.roomNames.contains(room.rawValue) == true }) {
            node = admin
        }
        guard let engine = nodes[node].engine else { return }
        let members = (engine.members(of: room) ?? [:]).keys.sorted()
        let dice = roll(100)
        // With one maker per room, the nodes in a room hold one creator at most (none: nobody administers it).
        let creators = Set(nodes.compactMap { $0.engine?.roomNames.contains(room.rawValue) == true ? $0.engine?.creator(of: room) : nil })
        if creators.count > 1, stateFault == nil {
            stateFault = "the nodes in \(room) hold \(creators.count) creators, though only n\(rooms.firstIndex(of: room)! % nodes.count) makes it"
        }
        adminCommands += 1
        if dice < 4 {
            log("n\(node) closes \(room)")
            command(node) { engine throws(SessionError) in try engine.close(room, reason: "closed by n\(node)", at: self.time(node)) }
            return
        }
        guard !members.isEmpty else { return }
        let member = members[roll(members.count)]
        let name = nodes.firstIndex { $0.peer.id == member }.map { "n\($0)" } ?? member.short
        if dice < 50 {
            log("n\(node) removes \(name) from \(room)")
            command(node) { engine throws(SessionError) in try engine.remove(member, from: room, reason: "removed by n\(node)", at: self.time(node)) }
        } else {
            let on = dice < 85
            log("n\(node) \(on ? "names" : "demotes") \(name) as administrator of \(room)")
            command(node) { engine throws(SessionError) in try engine.setAdministrator(member, of: room, on, at: self.time(node)) }
        }
    }

    private func leaveRandomRoom(_ node: Int) {
        guard let names = nodes[node].engine?.roomNames, !names.isEmpty else { return }
        let room = RoomID(names[roll(names.count)])!
        log("n\(node) leaves \(room)")
        leaves.append((node, room, now))
        command(node) { engine throws(SessionError) in try engine.leave(room, at: self.time(node)) }
    }

    private func fault() {
        switch roll(5) {
        case 0:
            let up = links.values.filter(\.up).sorted { $0.id < $1.id }
            guard !up.isEmpty else { return }
            let link = up[roll(up.count)]
            log("drop link \(link.id) n\(link.ends.node)-n\(link.ends.other)")
            drop(link, reason: chance(50) ? .lost : .timedOut, closer: nil)
        case 1:
            let node = roll(nodes.count)
            guard nodes[node].engine != nil else { return }
            crash(node)
            schedule(.restart(node: node), at: now + Int64(500 + roll(5_000)))
        case 2:
            let node = roll(nodes.count)
            side[node] = 1
            log("partition n\(node)")
            for link in links.values.sorted(by: { $0.id < $1.id }) where link.up && (side[link.ends.node] != side[link.ends.other]) {
                drop(link, reason: .timedOut, closer: nil)
            }
        case 3:
            side = [:]
            log("heal partitions")
        default:
            let node = roll(nodes.count)
            slow[node] = slow[node] == nil ? Int64(50 + roll(500)) : nil
            log("n\(node) link \(slow[node] == nil ? "fast" : "slow")")
        }
    }
}

/// The simulated network needs no addresses: a dial names the peer.
struct NoAddresses: PeerAddressBook {
    func lookup(_ id: PeerID) -> (hint: PeerAddressHint, generation: Int)? { nil }
}
