import LanchatCore

// How the engine's writes reach a store, and what a (re)started engine is given from one: written once,
// for the daemon's SQLite store and the simulator's memory store alike.
extension SessionStore {
    /// Performs one write the engine asked for. Returns whether it stored a message that was new.
    /// `rememberPeer` is not the store's (known peers live in their own file): nothing happens here.
    @discardableResult
    public func apply(_ operation: StoreOperation, now: Int64) throws -> Bool {
        switch operation {
        case .insertMessage(let message, _, let recipients):
            return try insert(message, queuedFor: recipients, now: now)
        case .openMark(let peer, let room, let acked), .setMark(let peer, let room, let acked):
            try setMark(peerID: peer.rawValue, room: room.rawValue, acked: Int64(clamping: acked))
        case .pinOutbox(let peer, let room):
            try pinOutbox(peerID: peer.rawValue, room: room.rawValue)
        case .acknowledge(let peer, let ids):
            for id in ids { try acknowledge(peerID: peer.rawValue, messageID: id.description) }
        case .dropOutbox(let peer, let room):
            try dropOutbox(peerID: peer?.rawValue, room: room.rawValue)
        case .saveRoom(let room, let members):
            try saveRoom(room.rawValue, members: members, now: now)
        case .deleteRoom(let room):
            try deleteRoom(room.rawValue)
        case .saveMeta(let entry):
            try saveMeta(entry)
        case .deleteMeta(let room, let key):
            try deleteMeta(room: room.rawValue, key: key)
        case .rememberPeer:
            break
        case .rememberKeyed(let peer):
            try rememberKeyed(peerID: peer.rawValue, now: now)
        case .saveLeave(let leave):
            try saveLeave(leave)
        case .saveTransfer(let transfer):
            try saveTransfer(transfer, now: now)
        case .updateTransfer(let id, let state, let sentMark, let resent):
            try updateTransfer(
                id: id.description, state: state?.rawValue, sentMark: sentMark.map { Int64(clamping: $0) },
                resent: resent.map { Int64(clamping: $0) }, now: now)
        case .deleteTransfer(let id):
            try deleteTransfer(id: id.description)
        case .sealChecked(let author, let seal):
            try markSealChecked(author: author.rawValue, seal: seal)
        case .dropSealed(let author, let seal):
            try dropSealed(author: author.rawValue, seal: seal)
        }
        return false
    }

    /// What an engine starts from: rooms and members, our last sequence per room, the outbox. Rows a
    /// newer or damaged file holds that do not parse (a room name, an id) are skipped.
    public func restored(ownID: PeerID, knownPeers: KnownPeerBook) throws -> SessionStateMachine.Restored {
        var restored = SessionStateMachine.Restored(knownPeers: knownPeers)
        for (name, members) in try rooms() {
            guard let room = RoomID(name) else { continue }
            restored.rooms.append((room, members))
            if let joined = try joinedAt(room: name) { restored.joinedAt[room] = joined }
        }
        // Past what a send that left before its commit may have used (`sendAheadLimit`: only one that
        // followed a stored message of ours in the room, so a room without one needs no margin).
        let ahead = UInt64(SessionStateMachine.sendAheadLimit)
        for (name, sequence) in try lastSequences(sender: ownID.rawValue) {
            guard let room = RoomID(name) else { continue }
            restored.lastSequences[room] = UInt64(max(0, sequence)) + ahead
        }
        for mark in try outboxMarks() {
            guard let peer = PeerID(mark.peerID), let room = RoomID(mark.room) else { continue }
            restored.marks.append((peer, room, UInt64(max(0, mark.acked))))
        }
        for entry in try outboxEntries() {
            guard let peer = PeerID(entry.peerID), let message = WireID(hex: entry.messageID), let room = RoomID(entry.room) else { continue }
            restored.outbox.append(.init(peer: peer, message: message, room: room, sequence: UInt64(max(0, entry.sequence)), marked: entry.marked))
        }
        for id in try keyedPeers() {
            if let peer = PeerID(id) { restored.keyedPeers.insert(peer) }
        }
        restored.metadata = try metadata()
        restored.leaves = try leaves()
        for unchecked in try uncheckedSeals() {
            // (A damaged row that makes no head stays unchecked: never exported.)
            guard let author = PeerID(unchecked.author), let room = RoomID(unchecked.room), let head = unchecked.seal.head(author: unchecked.author)
            else { continue }
            restored.uncheckedSeals.append(SealCheck(author: author, room: room, head: head))
        }
        return restored
    }
}
