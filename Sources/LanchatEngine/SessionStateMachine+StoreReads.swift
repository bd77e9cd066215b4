import LanchatCore
import LanchatWire

/// What the store read for an action's I/O, handed back to the engine as an input. The driver asks the
/// store for the reads an action needs (`SessionDriver`, with the action's batch) and, when the batch's
/// I/O is done, gives each read back here: the engine decides what it makes (from the connection's
/// version, our keys, what it knows of the asker) and returns it as plain I/O, so the driver never asks
/// the engine anything while it does I/O.
extension SessionStateMachine {
    /// The I/O that `result` (what the store read for `action`: `.flushOutbox`, `.requestHistory` or
    /// `.sendSync`; nil if it read nothing) makes: `.send` and `.offerRelayAnswer` actions only, none if
    /// the read failed or the connection is gone. `arrivals`: what the store stored in the last moments
    /// (a relay answer leaves it to its author).
    public mutating func storeRead(_ result: StoreReadResult?, for action: SessionAction, arrivals: RecentArrivals, at now: EngineTime) -> [SessionAction] {
        switch action {
        case .flushOutbox(_, let handle, let rooms):
            guard case .messages(let queued?) = result else { return [] }
            return outboxFrames(queued, on: handle, rooms: Set(rooms.map(\.rawValue)), at: now)
        case .requestHistory(let room, let handle, let scope):
            // What we lack (from a minute before the newest message we hold), within what was chosen.
            guard case .timestamp(let latest) = result, let version = linkVersion(on: handle) else { return [] }
            let since = max((latest ?? 0) - 60_000, scope.sinceMilliseconds ?? 0, 0)
            // A version 1 peer knows no limit (it sends what its own bound allows).
            let limit = version >= 2 ? scope.limit : nil
            return [.send(handle, [.historyRequest(room: room, sinceMilliseconds: UInt64(since), limit: limit.map { UInt32(clamping: $0) })])]
        case .sendSync(let room, _, let marks, let peer):
            // Nothing was read when the asker holds every run we hold (an idle room: each member's
            // resync is answered by each other one): what an answer would send lies within them.
            guard case .relayAnswer(_, let latest) = result, let latest else {
                relayAnswerNotOffered(room, to: peer.id)
                return []
            }
            // (A version 4 asker reads a sealed history: records only sealed go to it too.)
            let layout = HistoryLayout(version: max(2, links.version(of: peer.id) ?? 2))
            let lacking = relayAnswer(latest, room: room, marks: marks, to: peer.id, arrivals: arrivals, sealed: layout == .sealed, at: now)
            let answer = Self.withinRelayLimit(lacking, limit: configuration.transferLimits.maximumRelaySize, sealed: layout == .sealed, ownID: configuration.ownID)
            guard !answer.isEmpty else {
                relayAnswerNotOffered(room, to: peer.id)
                return []
            }
            return [.offerRelayAnswer(room, answer, to: peer, layout: layout)]
        default:
            return []
        }
    }

    /// Every reliable message still waiting for the peer's ACK in these rooms, oldest queued first, in
    /// writes of at most 512 frames: to a peer that speaks version 4, in a room whose members all spoke
    /// version 4 in this run, our own sealed again (each seal's SEAL ahead of its messages, so that one
    /// precedes every message sent again and every new connection); otherwise our own signed for a peer
    /// that speaks version 2 or more (as `send` decides).
    private mutating func outboxFrames(_ queued: [StoredMessage], on handle: LinkHandle, rooms: Set<String>, at now: EngineTime) -> [SessionAction] {
        guard let version = linkVersion(on: handle), !queued.isEmpty else { return [] }
        let own = configuration.ownID
        let signed = version >= 2
        // Per room, in the order queued (a seal is one room's).
        var order: [String] = []
        var byRoom: [String: [StoredMessage]] = [:]
        for message in queued where rooms.contains(message.room) {
            if byRoom[message.room] == nil { order.append(message.room) }
            byRoom[message.room, default: []].append(message)
        }
        var frames: [WireFrame] = []
        for name in order {
            guard let messages = byRoom[name] else { continue }
            if version >= WireFrame.sealsVersion, let keys = configuration.envelopes, let room = RoomID(name), allSpokeSeals(in: room) {
                let ours = messages.filter { $0.senderID == own.rawValue && SealedBatch.seals($0) }
                let batches = SealedBatch.seal(ours, author: own, room: room, keys: keys, withPaths: false) { environment.ids.messageID(at: now.wall) }
                frames += Self.sealedFrames(batches, reliable: true)
            } else {
                for message in messages {
                    let message = signed ? Self.signedIfOurs(message, ownID: own, keys: configuration.envelopes) : message
                    if let frame = Self.frame(message, reliable: true, signed: signed) { frames.append(frame) }
                }
            }
        }
        var out: [SessionAction] = []
        var start = 0
        while start < frames.count {
            let end = min(start + 512, frames.count)
            out.append(.send(handle, Array(frames[start..<end])))
            start = end
        }
        return out
    }

    /// Whether every other member of `room` spoke version 4 (seals) in this run: what we send there may
    /// go sealed only.
    func allSpokeSeals(in room: RoomID) -> Bool {
        guard let members = rooms[room]?.members.keys else { return false }
        return members.allSatisfy { $0 == configuration.ownID || (links.version(of: $0) ?? 0) >= WireFrame.sealsVersion }
    }
}
