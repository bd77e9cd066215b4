import LanchatCore
import LanchatEngine
import LanchatWire

/// What the schedule makes nodes do (invite, answer, send, write metadata, administer, leave) and its faults.
extension Simulator {
    // MARK: Commands and faults

    func command(_ node: Int, _ body: (inout SessionStateMachine) throws(SessionError) -> [SessionAction]) {
        do {
            try perform(node) { (engine: inout SessionStateMachine) throws -> [SessionAction] in try body(&engine) }
        } catch {}
    }

    func step() {
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

    func invite(from node: Int) {
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

    func sendIntents(from node: Int, to target: Int) {
        let mine = intents.filter { $0.from == node && $0.to == target }
        intents.removeAll { $0.from == node && $0.to == target }
        for intent in mine {
            perform(node) { $0.sendInvite(self.nodes[target].peer, room: intent.room, context: [], timeout: intent.timeout, at: self.time(node)).1 }
        }
    }

    func answer(_ node: Int, accept: Bool) {
        guard let invitations = nodes[node].engine?.invitations, !invitations.isEmpty else { return }
        let invitation = invitations[roll(invitations.count)]
        log("n\(node) \(accept ? "accepts" : "declines") \(invitation.id.description.prefix(6)) to \(invitation.room)")
        command(node) { engine throws(SessionError) in
            accept ? try engine.accept(invitation.id.description, at: self.time(node)).1 : try engine.decline(invitation.id.description, at: self.time(node)).1
        }
    }

    func send(from node: Int) {
        guard let names = nodes[node].engine?.roomNames, !names.isEmpty else { return }
        let room = RoomID(names[roll(names.count)])!
        let reliable = !chance(10)
        let count = 1 + (chance(20) ? roll(5) : 0)
        let texts = (0..<count).map { "m\(node)-\(now)-\($0)" }
        // Now and then to some members only (direct: never handed on, sealed apart from the room's).
        let others = (nodes[node].engine?.members(of: room)?.keys.filter { $0 != nodes[node].peer.id } ?? []).sorted()
        var to: [PeerID]?
        if !others.isEmpty, chance(6) {
            let some = others.filter { _ in chance(2) }
            to = some.isEmpty ? [others[roll(others.count)]] : some
        }
        // A crash between a send's frames and its commit (the daemon writes a send first when it follows
        // the node's own sequences it saw committed in the room: `sendAheadLimit`): members may hold the
        // messages, the sender's history does not, and their sequences must never be used again
        // (`checkSequences`).
        if options.faults, now < options.chaos, chance(3), var engine = nodes[node].engine, let driver = nodes[node].driver,
            driver.onlyAcknowledgementsWait, let (plan, actions) = try? engine.send(texts, room: room, to: to, reliable: reliable, at: time(node)),
            let first = plan.messages.first?.sequence, driver.storedThrough[room] == first - 1
        {
            nodes[node].engine = engine
            lostByAuthor.formUnion(plan.messages.map(\.id))
            noteDirect(plan)
            log("n\(node) sends \(plan.messages.count) to \(room) and crashes before its commit")
            for case .send(let handle, let frames) in actions { transmit(frames, from: node, on: handle) }
            // What was written arrives; then the connections close.
            let arrived = upLinks(of: node).compactMap { $0.lastArrival[$0.ends.node == node ? $0.ends.other : $0.ends.node] }.max() ?? now
            crash(node, linksUntil: max(now, arrived) + 1)
            schedule(.restart(node: node), at: max(now, arrived) + Int64(500 + roll(5_000)))
            return
        }
        // As `SessionNode.send`: through the driver's send-first rule; `send` returns (and the messages
        // count as accepted) once their commit is synced.
        drive(node) { driver, engine in
            guard let (plan, actions) = try? engine.send(texts, room: room, to: to, reliable: reliable, at: self.time(node)) else { return [] }
            self.noteDirect(plan)
            let own = driver.performOwn(plan, actions, in: room, mayGoFirst: texts.count <= SessionStateMachine.sendAheadLimit, engine: &engine, at: self.time(node))
            // Accepted once stored and synced (`.settled`; the store may answer before this returns).
            if reliable {
                self.syncing[node, default: [:]][own.waiter] = plan.messages.map { Sent(id: $0.id, sender: node, room: room, recipients: plan.recipients, at: self.now) }
            }
            // Not stored after its frames went first: members may hold what its author never will.
            if own.wentFirst { self.wentFirst[node, default: [:]][own.waiter] = plan.messages.map(\.id) }
            return own.output
        }
    }

    /// Keeps the recipients of a send's messages that went to some members only (`checkDelivery`).
    func noteDirect(_ plan: SessionStateMachine.SendPlan) {
        for message in plan.messages where message.direct { directRecipients[message.id] = Set(plan.recipients) }
    }

    /// A metadata write: one of three keys, set (half the time with compare-and-set on the version this
    /// node holds) or deleted.
    func writeMeta(_ node: Int) {
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
    func administer(_ node: Int) {
        guard let mine = nodes[node].engine, case let names = mine.roomNames, !names.isEmpty else { return }
        let room = RoomID(names[roll(names.count)])!
        // Mostly an administrator of the room gives the command (some members try and are refused).
        var node = node
        let admins = mine.administrators(of: room)
        if !admins.contains(nodes[node].peer.id), chance(75),
            let admin = nodes.indices.first(where: { admins.contains(nodes[$0].peer.id) && nodes[$0].engine?.roomNames.contains(room.rawValue) == true })
        {
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

    func leaveRandomRoom(_ node: Int) {
        guard let names = nodes[node].engine?.roomNames, !names.isEmpty else { return }
        let room = RoomID(names[roll(names.count)])!
        log("n\(node) leaves \(room)")
        leaves.append((node, room, now))
        command(node) { engine throws(SessionError) in try engine.leave(room, at: self.time(node)) }
    }

    func fault() {
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
