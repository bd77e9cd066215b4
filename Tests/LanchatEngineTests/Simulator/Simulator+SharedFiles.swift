import LanchatCore
import LanchatEngine
import LanchatWire

/// Files shared in rooms, as lanchatd handles them: a member announces one (its content kept under its
/// digest), members that hear the announcement live fetch it from the room's connected members, a member
/// asked for it serves it only if it was announced in that room by someone else than the asker, and a
/// fetched copy is checked against the announced digest before it is kept.
extension Simulator {
    /// A program shares a file (1 byte to 8 KiB) in one of the node's rooms.
    func shareFile(from node: Int) {
        guard let names = nodes[node].engine?.roomNames, !names.isEmpty else { return }
        let room = RoomID(names[roll(names.count)])!
        let bytes = randomBytes(1 + roll(8 * 1024))
        let file = SharedFile(sha256: Self.digest(bytes), size: UInt64(bytes.count), type: "application/octet-stream", name: "s\(now).bin")
        sharedContent[file.hex] = bytes
        nodes[node].kept[file.hex] = bytes  // (kept before it is announced, as lanchatd does)
        var announced = false
        drive(node) { driver, engine in
            guard let (plan, actions) = try? engine.share(file, in: room, at: self.time(node)) else { return [] }
            announced = true
            return driver.performOwn(plan, actions, in: room, mayGoFirst: false, engine: &engine, at: self.time(node)).output
        }
        if announced {
            shared.announced += 1
            log("n\(node) shares \(file.hex.prefix(6)) (\(bytes.count) bytes) in \(room)")
        }
    }

    /// A file announced live: fetched at once unless kept here already (lanchatd's `announced`).
    func announced(_ node: Int, _ report: ChatMessage) {
        guard let file = SharedFile(body: report.stored.body), nodes[node].kept[file.hex] == nil, let room = RoomID(report.stored.room) else { return }
        var started = false
        perform(node) {
            guard let (_, actions) = try? $0.fetchShared(file, room: room, author: PeerID(report.stored.senderID), destination: nil, at: self.time(node))
            else { return [] }
            started = true
            return actions
        }
        if started { shared.fetched += 1 }
    }

    /// A member asks for a file (lanchatd's `serveShared`): served if it was announced in that room by
    /// a member or us, not by the asker, and is kept here; refused otherwise, in the same words.
    func serveShared(_ node: Int, _ request: WireFrame.FileRequest, to peer: SessionPeer) {
        guard let engine = nodes[node].engine else { return }
        let found = nodes[node].store.search(
            room: request.room.rawValue, limit: 64,
            filter: HistoryFilter(kind: .file, bodyPrefix: SharedFile.bodyPrefix(sha256: request.sha256)))
        let authors = Set((engine.members(of: request.room) ?? [:]).keys.map(\.rawValue) + [nodes[node].peer.id.rawValue])
        let hex = Hex.string(request.sha256)
        guard SessionStateMachine.mayServe(request, to: peer.id, announcedIn: found, authors: authors), let bytes = nodes[node].kept[hex],
            originals[request.id] == nil
        else {
            shared.refused += 1
            let refusal = SessionStateMachine.notServedText(request, ownName: nodes[node].peer.name)
            perform(node) { $0.notServed(request, to: peer.id, because: refusal) }
            return
        }
        originals[request.id] = bytes
        shared.served += 1
        let file = OfferedFile(path: "/sim/n\(node)/shared/\(hex)", name: hex, size: UInt64(bytes.count), modifiedMilliseconds: 1, identity: "shared:\(hex)")
        perform(node) { $0.serveShared(request, file: file, to: peer.id, at: self.time(node)) }
    }

    /// A fetched copy, verified by the engine: it must be the content announced under that digest.
    func placeShared(_ node: Int, _ id: WireID, _ file: SharedFile) {
        let content = nodes[node].disk.removeValue(forKey: id) ?? []
        if content != sharedContent[file.hex] {
            transferViolations.append(
                "n\(node) kept shared file \(file.hex.prefix(6)) with \(content.count) bytes that differ from the "
                    + "\(sharedContent[file.hex]?.count ?? -1) announced")
        }
        nodes[node].kept[file.hex] = content
        shared.placed += 1
        later(node, .placed(id, path: "/sim/n\(node)/shared/\(file.hex)"))
    }
}
