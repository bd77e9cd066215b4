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
        /// The newest wire version it speaks (a link speaks the lower of its two ends'): 4 (seals), or 3
        /// (per-message signatures), as `versions` picks per schedule.
        var maximumVersion = WireFrame.versions.upperBound
        var incarnation = 0
        /// Part files (they survive a crash: what was written is on disk), by transfer id.
        var disk: [WireID: [UInt8]] = [:]
        /// Shared files it keeps (its own, and those it fetched), by digest: on disk too.
        var kept: [String: [UInt8]] = [:]
        /// The shell's rules (`SessionDriver`, as lanchatd runs them): in memory, a crash forgets it.
        var driver: SessionDriver?
        /// The store's half of those rules (`StoreWorker`, lanchatd's store thread): a crash forgets it too.
        var worker: StoreWorker?
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
        /// The store's sync the driver asked for is done.
        case synced(node: Int, incarnation: Int)
        /// The store's thread takes what was asked of it (`Simulator+StoreThread.swift`), and its answers
        /// reach the node.
        case storeTurn(node: Int, incarnation: Int)
        case storeAnswers(node: Int, incarnation: Int, [StoreAnswer])
        /// The thread that checks seals answered (`ShellOutput.checkSeal`).
        case sealChecked(node: Int, incarnation: Int, SealCheck, valid: Bool)
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
    /// The recipients of each message sent to some members only (`to:`): nobody else may ever hold it.
    var directRecipients: [String: Set<PeerID>] = [:]
    /// Messages whose author crashed between sending them and storing them (members may hold them; the
    /// author never gets its own messages back from a relay).
    var lostByAuthor: Set<String> = []
    /// Per node, reliable messages its `send` committed whose sync is not done yet, by the driver's waiter:
    /// once it is, `send` returns, and they join `sent`.
    var syncing: [Int: [UInt64: [Sent]]] = [:]
    /// Own sends whose frames went before their commit, by node and waiter: if the store refuses them,
    /// members may hold what their author never will.
    var wentFirst: [Int: [UInt64: [String]]] = [:]
    /// What each node's driver asked of its store and its thread has not taken yet; turns taken; requests
    /// a crash took from a queue.
    var storeQueue: [Int: [StoreRequest]] = [:]
    var storeTurns = 0
    var storeRequestsLost = 0
    /// Syncs of the store the nodes' drivers asked for (each covers every commit before it), the one
    /// running on each node, and messages crashes took from stores (committed, their sync not done).
    var syncs = 0
    var syncRunning: [Int: MemorySessionStore.Sync] = [:]
    /// Batches whose commit the simulated disk refused (a fault, before the network heals): what depended
    /// on them did not happen (no ACK, no report; a send of ours fails).
    var failedCommits = 0
    var lostUnsynced = 0
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
    /// Shared files: the content of each announced (by digest), announcements made, fetches started by
    /// a live announcement, files served and refused, and fetched copies placed (each checked).
    var sharedContent: [String: [UInt8]] = [:]
    var shared = (announced: 0, fetched: 0, served: 0, refused: 0, placed: 0)
    /// Histories offered as resources (a newcomer's, a relay's answer), and those read and merged.
    var historiesOffered = 0
    /// Seals at work (version 4): SEAL frames delivered, sealed histories offered, and others' records
    /// stored sealed that `checkSignatures` checked by their seal; broken by their author, checks asked
    /// of the shell (off the event loop) and those that failed.
    var seals = (frames: 0, histories: 0, records: 0, byIndex: 0, broken: 0, checks: 0, failed: 0)
    /// Broken seals a node was sent (receiver, author, id), and the messages it was sent under them: its
    /// author is hostile to it, so it may lose those (acknowledged, stored unchecked, then dropped when
    /// the check fails) and may report one again if it comes back by another way.
    var brokenSealsSent: Set<[String]> = []
    var mayBeLost: Set<[String]> = []
    /// Records a hostile relay changed in each history offered (by its transfer id): an import finds at
    /// most that many forged (an honest history, none).
    var tampered: [WireID: Int] = [:]
    var historiesImported = 0
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
    var cancelledBySender: Set<WireID> = []
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
        for (index, version) in Self.versions(seed: seed, nodes: nodes.count).enumerated() { nodes[index].maximumVersion = version }
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
        try checkSealsSettled()
        try checkRelay()
        try checkProvenance()
        try checkMetadata()
        try checkTopics()
        try checkInvitations()
        try checkStreams()
        try checkTransfers()
        // Everyone leaves every room: nothing may stay scheduled or queued.
        for index in nodes.indices {
            for room in nodes[index].engine?.roomIDs ?? [] { command(index) { engine throws(SessionError) in try engine.leave(room, at: self.time(index)) } }
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
            guard alive(node, incarnation), let deadline = nextDeadline(node), deadline <= now else { return }
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
            // The connection refuses a frame above its version (`HandshakeStateMachine.admit`): an engine
            // that sends one is wrong.
            let version = linkVersion(link.ends.node, link.ends.other)
            if let above = frames.first(where: { $0.minimumVersion > version }) {
                if stateFault == nil { stateFault = "n\(to) was sent \(HandshakeStateMachine.name(of: above)) on a version \(version) link" }
                return
            }
            seals.frames += frames.count { if case .seal = $0 { true } else { false } }
            let from = link.ends.node == to ? link.ends.other : link.ends.node
            seals.broken += noteBrokenSeals(in: frames, from: from, to: to)
            perform(to) { $0.received(frames, on: handle, at: self.time(to)) }
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
                let result = $0.linkUp(
                    handle, peer: self.nodes[other].peer, dialedByUs: mine, remoteAddress: nil, version: self.linkVersion(node, other),
                    at: self.time(node))
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
        case .storeTurn(let node, let incarnation):
            guard alive(node, incarnation) else { return }
            storeTurn(node)
        case .storeAnswers(let node, let incarnation, let answers):
            guard alive(node, incarnation) else { return }
            storeAnswered(node, answers)
        case .synced(let node, let incarnation):
            guard alive(node, incarnation) else { return }
            if let sync = syncRunning.removeValue(forKey: node) { nodes[node].store.syncEnded(sync) }
            drive(node) { driver, engine in driver.synced(true, engine: &engine, at: self.time(node)) }
        case .sealChecked(let node, let incarnation, let check, let valid):
            guard alive(node, incarnation) else { return }
            if !valid { seals.failed += 1 }
            perform(node) { $0.sealChecked(check, valid: valid, at: self.time(node)) }
        }
    }

    // MARK: The shell's part

    /// Feeds an input to a node's engine and performs what it returns through the node's driver, as
    /// `SessionNode` does.
    func perform(_ node: Int, _ input: (inout SessionStateMachine) throws -> [SessionAction]) rethrows {
        try drive(node) { driver, engine in
            let actions = try input(&engine)
            return driver.perform(actions, engine: &engine, at: self.time(node))
        }
    }

    /// Runs `body` on a node's driver and engine, checks the engine's tables, then does the I/O it returns.
    func drive(_ node: Int, _ body: (inout SessionDriver, inout SessionStateMachine) throws -> [ShellOutput]) rethrows {
        guard var engine = nodes[node].engine, var driver = nodes[node].driver else { return }
        nodes[node].driver = nil  // (so that it is not copied on write)
        let output: [ShellOutput]
        do {
            output = try body(&driver, &engine)
        } catch {
            nodes[node].driver = driver
            throw error
        }
        nodes[node].engine = engine
        nodes[node].driver = driver
        // The engine's tables must agree after every input, not only at the end of the schedule.
        if stateFault == nil, case let faults = engine.consistencyFaults(), !faults.isEmpty {
            stateFault = "n\(node)'s state after event \(events): " + faults.joined(separator: "; ")
        }
        carryOut(output, node: node)
        if let deadline = nextDeadline(node) {
            schedule(.tick(node: node, incarnation: nodes[node].incarnation), at: max(now, deadline))
        }
    }

    /// When a node's timer fires: its engine's next deadline, or its driver's (acknowledgements heard
    /// that wait), as `SessionNode.armTimer`.
    func nextDeadline(_ node: Int) -> Int64? {
        guard let engine = nodes[node].engine else { return nil }
        return nodes[node].driver?.nextWakeUp(engineDeadline: engine.nextDeadline) ?? engine.nextDeadline
    }

}

/// The simulated network needs no addresses: a dial names the peer.
struct NoAddresses: PeerAddressBook {
    func lookup(_ id: PeerID) -> (hint: PeerAddressHint, generation: Int)? { nil }
}
