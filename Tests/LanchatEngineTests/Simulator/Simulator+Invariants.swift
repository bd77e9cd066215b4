import LanchatCore
import LanchatEngine
import LanchatWire

/// What must hold once the network has healed and every node has run quietly for a while.
extension Simulator {
    func fail(_ text: String) -> Violation {
        Violation(
            description: "seed \(seed): \(text)\n  replay: SIMULATOR_SEED=\(seed) swift test --filter SimulatorTests\n  last steps:\n    "
                + trace.suffix(40).joined(separator: "\n    "))
    }

    /// Whether a node ever left the room. A member that left (even before a message was sent: the
    /// sender may not have heard yet) is owed nothing it was sent; a rejoin starts over with history.
    private func everLeft(_ node: Int, _ room: RoomID) -> Bool {
        leaves.contains { $0.node == node && $0.room == room }
    }

    /// No two messages anywhere share an author, a room and a sequence: not even after a crash between a
    /// send's frames and its commit, which leaves members holding messages their author no longer has.
    func checkSequences() throws {
        var seen: [String: String] = [:]
        for (index, node) in nodes.enumerated() {
            for message in node.store.messages.values where message.kind != .system {
                let key = "\(message.senderID.prefix(8)) \(message.room) #\(message.sequence)"
                if let other = seen[key], other != message.id {
                    throw fail("two messages under \(key): \(other) and \(message.id) (n\(index) holds the second)")
                }
                seen[key] = message.id
            }
        }
    }

    /// Every reliable message a node's `send` accepted reaches every recipient that stays in the room
    /// (neither it nor the sender ever left it, and at the end both are in the same group of that room),
    /// and no message is reported twice anywhere.
    func checkDelivery() throws {
        for (index, node) in nodes.enumerated() {
            if let (id, count) = node.reported.first(where: { $0.value > 1 && !mayBeLost.contains(["\(index)", $0.key]) }) {
                throw fail("n\(index) reported message \(id.prefix(8)) \(count) times")
            }
        }
        // A message to some members only reaches no one else, live or handed on.
        for (index, node) in nodes.enumerated() {
            for message in node.store.messages.values where message.senderID != node.peer.id.rawValue {
                guard let recipients = directRecipients[message.id], !recipients.contains(node.peer.id) else { continue }
                let sender = nodes.firstIndex { $0.peer.id.rawValue == message.senderID }.map { "n\($0)" } ?? message.senderID.prefix(8).description
                let names = recipients.compactMap { id in nodes.firstIndex { $0.peer.id == id }.map { "n\($0)" } }.sorted()
                throw fail(
                    "n\(index) holds \(message.id) (\"\(message.body)\", in \(message.room), direct: \(message.direct)), sent by \(sender) to \(names) only")
            }
        }
        for message in sent {
            guard !everLeft(message.sender, message.room) else { continue }
            for recipient in message.recipients {
                guard let index = nodes.firstIndex(where: { $0.peer.id == recipient }) else { continue }
                guard !everLeft(index, message.room), !mayBeLost.contains(["\(index)", message.id]),
                    nodes[index].engine?.isMember(nodes[message.sender].peer.id, of: message.room) == true,
                    nodes[message.sender].engine?.isMember(recipient, of: message.room) == true
                else { continue }
                if nodes[index].store.messages[.init(id: message.id, sender: nodes[message.sender].peer.id.rawValue)] == nil {
                    let queued = nodes[message.sender].store.queuedIDs(for: recipient.rawValue).contains(message.id)
                    throw fail(
                        "n\(index) never got \(message.id.prefix(8)) sent by n\(message.sender) to \(message.room) at \(message.at) "
                            + "(still queued at the sender: \(queued); sender's view of the recipient: "
                            + "\(nodes[message.sender].engine?.isMember(recipient, of: message.room) ?? false); recipient's view of the sender: "
                            + "\(nodes[index].engine?.isMember(nodes[message.sender].peer.id, of: message.room) ?? false))")
                }
            }
        }
    }

    /// Relay (wire version 2): once the network has healed, every message of a room that any member
    /// holds (sent to the whole room) is held by every member it is connected with in that room, also when
    /// its author was never online at the same time as that member, if it was written (by its author's
    /// clock) no earlier than that member joined (by its clock): what came before is the history its
    /// inviter sent; and if its author is a member of the room as both see it (messages of
    /// members who left are not relayed). (Members that ever left are owed nothing, as in `checkDelivery`;
    /// an author that crashed between sending a message and storing it does not get it back.)
    func checkRelay() throws {
        for room in rooms {
            for (index, node) in nodes.enumerated() where !everLeft(index, room) {
                guard let members = node.engine?.members(of: room) else { continue }
                for other in members.keys.sorted() {
                    guard let peer = nodes.firstIndex(where: { $0.peer.id == other }), !everLeft(peer, room),
                        nodes[peer].engine?.isMember(node.peer.id, of: room) == true
                    else { continue }
                    let floor = Int64(SessionStateMachine.relayFloor(joinedAt: nodes[peer].store.joinedAt(room: room.rawValue), now: 0))
                    for message in node.store.messages.values.sorted(by: { $0.id < $1.id })
                    where message.room == room.rawValue && message.kind != .system && !message.direct && message.timestamp >= floor
                        && nodes[peer].store.messages[.init(message)] == nil
                        && !(lostByAuthor.contains(message.id) && message.senderID == nodes[peer].peer.id.rawValue)
                    {
                        let writer = PeerID(message.senderID)
                        let authorIsMember = { (index: Int) in
                            writer == self.nodes[index].peer.id || writer.map { self.nodes[index].engine?.isMember($0, of: room) == true } == true
                        }
                        guard authorIsMember(index), authorIsMember(peer) else { continue }
                        // Another author's record only sealed is handed on only to a member that reads seals.
                        if !message.isSigned, message.senderID != node.peer.id.rawValue, linkVersion(index, peer) < WireFrame.sealsVersion { continue }
                        let author = nodes.firstIndex { $0.peer.id.rawValue == message.senderID }.map { "n\($0)" } ?? message.senderID.prefix(8).description
                        throw fail("n\(peer) lacks \(message.id.prefix(8)) by \(author) in \(room), which its fellow member n\(index) holds")
                    }
                }
            }
        }
    }

    /// Membership views converge. Rooms are named, not registered: two groups can each have a room
    /// called "lab". So for each name, the members a node lists and the node itself form a group that
    /// every one of them sees the same way (views are symmetric and closed).
    ///
    /// Where rooms are administered, a member with no record of the room's creator takes no removal
    /// (docs/threat-model.md): it may go on listing a member an administrator removed, and that member,
    /// if it never heard, goes on with it. Such a removed member's own view is left out, and taken out of
    /// the views of members with no record; each time that changes a view is counted (`removalsNotTaken`).
    func checkMembership() throws {
        let name = { (ids: Set<PeerID>) in ids.compactMap { id in self.nodes.firstIndex { $0.peer.id == id }.map { "n\($0)" } }.sorted() }
        for room in rooms {
            var views: [PeerID: Set<PeerID>] = [:]
            for node in nodes where node.engine?.roomNames.contains(room.rawValue) == true {
                views[node.peer.id] = Set(node.engine?.members(of: room)?.keys.map { $0 } ?? []).union([node.peer.id])
            }
            /// The first disagreement between `views`, if any.
            func disagreement(_ views: [PeerID: Set<PeerID>]) -> String? {
                for (id, view) in views.sorted(by: { $0.key < $1.key }) {
                    let index = nodes.firstIndex { $0.peer.id == id }!
                    for other in view.sorted() where other != id {
                        guard let theirs = views[other] else { return "n\(index) lists \(name([other])) in \(room), which is not in it" }
                        if theirs != view { return "n\(index) sees \(room) as \(name(view)) but \(name([other])) sees it as \(name(theirs))" }
                    }
                }
                return nil
            }
            guard let problem = disagreement(views) else { continue }
            guard administered else { throw fail(problem) }
            // Members whose removal a node with a record of the creator holds: left out of the views of
            // members with no record (they took no removal), with their own views.
            let removed = Set(
                nodes.flatMap { node -> [PeerID] in
                    guard let engine = node.engine, engine.creator(of: room) != nil else { return [] }
                    return nodes.map(\.peer.id).filter { engine.metaEntry("removed." + $0.rawValue, in: room).map { !$0.deleted } ?? false }
                })
            var taken = views
            for id in removed { taken[id] = nil }
            for node in nodes where node.engine?.creator(of: room) == nil {
                if let view = taken[node.peer.id] { taken[node.peer.id] = view.subtracting(removed) }
            }
            guard taken != views, disagreement(taken) == nil else { throw fail(problem) }
            removalsNotTaken += 1
        }
    }

    /// No invitation waits past its timeout, on either side.
    func checkInvitations() throws {
        for (index, node) in nodes.enumerated() {
            guard let diagnostics = node.engine?.diagnostics else { continue }
            if diagnostics.pendingInvitations > 0 || diagnostics.outgoingInvitations > 0 {
                throw fail("n\(index) still holds invitations long after their timeouts: \(diagnostics)")
            }
        }
    }

    /// After everyone left every room: no timers, dials, claims or queued messages remain.
    func checkQuiet() throws {
        for (index, node) in nodes.enumerated() {
            guard let diagnostics = node.engine?.diagnostics else { continue }
            if !diagnostics.timers.isEmpty || diagnostics.dialing > 0 || diagnostics.claims > 0 || diagnostics.redials > 0 || diagnostics.outbox > 0 {
                throw fail("n\(index) is not idle after leaving every room: \(diagnostics)")
            }
            if let recipient = node.store.recipientsQueued.first {
                throw fail("n\(index)'s store still queues \(node.store.queuedIDs(for: recipient).count) message(s) for \(recipient.prefix(8))")
            }
            if let marked = node.store.marks.first {
                throw fail("n\(index)'s store still keeps \(marked.key.prefix(8))'s marks in \(marked.value.keys.sorted())")
            }
        }
    }

    /// Metadata converges: fellow members of a room (each in the other's view) hold the same entry for
    /// every key, deletions included, whatever order the writes reached them in; and, where rooms have one
    /// maker (`administered`), two that hold a record of the room's creator hold the same one and the same
    /// administrators. (A member whose inviter held no record, or had left, never takes one from another
    /// member: a room without a record cannot be claimed later. It does not administer, and honours no
    /// removal: `recordless` counts them.)
    func checkMetadata() throws {
        for room in rooms {
            for (index, node) in nodes.enumerated() {
                guard let engine = node.engine, let members = engine.members(of: room) else { continue }
                if administered, engine.creator(of: room) == nil,
                    members.keys.contains(where: { other in
                        self.nodes.first { $0.peer.id == other }?.engine?.creator(of: room) != nil
                    })
                {
                    recordless += 1
                }
                for other in members.keys.sorted() {
                    guard let peer = nodes.firstIndex(where: { $0.peer.id == other }), let theirs = nodes[peer].engine,
                        theirs.isMember(node.peer.id, of: room)
                    else { continue }
                    if administered, engine.creator(of: room) != nil, theirs.creator(of: room) != nil,
                        engine.creator(of: room) != theirs.creator(of: room) || engine.administrators(of: room) != theirs.administrators(of: room)
                    {
                        let names = { (ids: Set<PeerID>) in ids.map { id in self.nodes.firstIndex { $0.peer.id == id }.map { "n\($0)" } ?? id.short }.sorted() }
                        throw fail(
                            "n\(index) and its fellow member n\(peer) disagree on who administers \(room): "
                                + "\(names(engine.administrators(of: room))) and \(names(theirs.administrators(of: room)))")
                    }
                    for key in ["topic", "color", "size"] where engine.metaEntry(key, in: room) != theirs.metaEntry(key, in: room) {
                        let describe = { (entry: WireFrame.MetaEntry?) in entry.map { "v\($0.version) \($0.deleted ? "deleted" : $0.value)" } ?? "none" }
                        throw fail(
                            "n\(index) holds \(room)'s \(key) as \(describe(engine.metaEntry(key, in: room))) but its fellow member n\(peer) as "
                                + describe(theirs.metaEntry(key, in: room)))
                    }
                }
            }
        }
    }
}
