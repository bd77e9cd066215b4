import LanchatCore
import LanchatEngine

/// What a simulated node keeps across a crash: exactly what its engine asked to persist.
struct SimulatedStore {
    var messages: [String: StoredMessage] = [:]
    /// Per recipient, queued message ids in the order they were queued.
    var outbox: [PeerID: [String]] = [:]
    var rooms: [RoomID: [StoredMember]] = [:]
    var known = KnownPeerBook()

    /// Applies one write; returns whether a message insert was new.
    mutating func apply(_ operation: StoreOperation) -> Bool {
        switch operation {
        case .insertMessage(let message, _):
            guard messages[message.id] == nil else { return false }
            messages[message.id] = message
            return true
        case .enqueue(let peer, let ids):
            for id in ids where !(outbox[peer]?.contains(id.description) ?? false) { outbox[peer, default: []].append(id.description) }
        case .acknowledge(let peer, let ids):
            let gone = Set(ids.map(\.description))
            outbox[peer]?.removeAll { gone.contains($0) }
        case .dropOutbox(let peer, let room):
            for recipient in peer.map({ [$0] }) ?? Array(outbox.keys) {
                outbox[recipient]?.removeAll { messages[$0]?.room == room.rawValue }
            }
        case .saveRoom(let room, let members):
            rooms[room] = members
        case .deleteRoom(let room):
            rooms[room] = nil
        case .rememberPeer(let label, let id):
            var entries = known.entries
            entries[label] = id
            known = KnownPeerBook(entries)
        }
        return false
    }

    func queued(for peer: PeerID) -> [StoredMessage] {
        (outbox[peer] ?? []).compactMap { messages[$0] }
    }

    func latestTimestamp(room: RoomID) -> Int64 {
        messages.values.filter { $0.room == room.rawValue }.map(\.timestamp).max() ?? 0
    }

    /// What a restarted node's engine starts from.
    func restored(ownID: PeerID) -> SessionStateMachine.Restored {
        var restored = SessionStateMachine.Restored(knownPeers: known)
        restored.rooms = rooms.keys.sorted { $0.rawValue < $1.rawValue }.map { ($0, rooms[$0]!) }
        for message in messages.values where message.senderID == ownID.rawValue && message.kind != .system {
            guard let room = RoomID(message.room) else { continue }
            restored.lastSequences[room] = max(restored.lastSequences[room] ?? 0, UInt64(max(0, message.sequence)))
        }
        for (peer, ids) in outbox.sorted(by: { $0.key < $1.key }) {
            for id in ids {
                guard let message = messages[id], let wireID = WireID(hex: id), let room = RoomID(message.room) else { continue }
                restored.outbox.append((peer, wireID, room))
            }
        }
        return restored
    }
}
