import LanchatCore
import LanchatEngine
import LanchatWire

/// The simulated network: connections, their latency and order, dials, partitions, crashes and restarts.
extension Simulator {
    func connects(_ link: Link, _ a: Int, _ b: Int) -> Bool {
        (link.ends.node == a && link.ends.other == b) || (link.ends.node == b && link.ends.other == a)
    }

    func link(of node: Int, _ handle: LinkHandle) -> Link? {
        links.values.first { ($0.ends.node == node && $0.ends.handle == handle) || ($0.ends.other == node && $0.ends.otherHandle == handle) }
    }

    func latency(_ a: Int, _ b: Int) -> Int64 {
        Int64(1 + roll(20)) + (slow[a] ?? 0) + (slow[b] ?? 0)
    }

    /// When a frame sent now from the other end arrives at `to` (after every earlier frame that way).
    func arrival(_ link: Link, to: Int) -> Int64 {
        let from = link.ends.node == to ? link.ends.other : link.ends.node
        let time = max(link.lastArrival[to] ?? 0, now + latency(from, to))
        link.lastArrival[to] = time
        return time
    }

    func transmit(_ frames: [WireFrame], from node: Int, on handle: LinkHandle) {
        guard let link = link(of: node, handle), link.up else { return }
        var frames = frames
        if options.faults, now < options.chaos, chance(5) { frames = frames.map { withFakeMembers($0, from: node) } }
        if options.faults, now < options.chaos, chance(10) { frames = frames.map { withBrokenSeal($0) } }
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

    func reachable(_ a: Int, _ b: Int) -> Bool {
        nodes[a].engine != nil && nodes[b].engine != nil && side[a] == side[b]
    }

    /// A dial: TLS and HELLO take a few milliseconds; then both sides adopt the connection, in either order.
    func dial(from node: Int, to peer: PeerID) {
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

    func boot(_ index: Int) {
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
        nodes[index].driver = SessionDriver(historyForNewcomers: 1000, syncs: true)
        nodes[index].worker = StoreWorker(store: nodes[index].store, syncs: true)
        nodes[index].store.losesUnsyncedCommits()
        // Now and then the disk refuses a commit (full, or failing), before the network heals.
        nodes[index].store.failsCommit = { [unowned self] in self.options.faults && self.now < self.options.chaos && self.chance(1) }
        // Rarer: the disk fails so that the whole transaction is lost (a group's batches all fail).
        nodes[index].store.losesTransaction = { [unowned self] in self.options.faults && self.now < self.options.chaos && self.roll(500) == 0 }
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
        nodes[index].driver = nil
        nodes[index].worker = nil
        syncing[index] = nil
        storeCrashes(index)
        // What was committed and not synced is gone: messages reported from it are told again when they
        // come again (their ACK never left); our own are lost by their author (members may hold those
        // that went first).
        syncRunning[index] = nil
        let held = Set(nodes[index].store.messages.keys)
        nodes[index].store.crash()
        let lost = held.subtracting(nodes[index].store.messages.keys)
        lostUnsynced += lost.count
        for key in lost {
            if let count = nodes[index].reported[key.id], count > 0 { nodes[index].reported[key.id] = count - 1 }
            if key.sender == nodes[index].peer.id.rawValue { lostByAuthor.insert(key.id) }
        }
        if !lost.isEmpty { log("n\(index) loses \(lost.count) unsynced messages") }
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
}
