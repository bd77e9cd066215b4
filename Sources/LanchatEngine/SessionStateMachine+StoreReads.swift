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
            return outboxFrames(queued, on: handle, rooms: Set(rooms.map(\.rawValue)))
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
            let lacking = relayAnswer(latest, room: room, marks: marks, to: peer.id, arrivals: arrivals, at: now)
            let answer = Self.withinRelayLimit(lacking, limit: configuration.transferLimits.maximumRelaySize)
            guard !answer.isEmpty else {
                relayAnswerNotOffered(room, to: peer.id)
                return []
            }
            return [.offerRelayAnswer(room, answer, to: peer)]
        default:
            return []
        }
    }

    /// Every reliable message still waiting for the peer's ACK in these rooms, oldest queued first (our
    /// own signed for a peer that speaks version 2), in writes of at most 512 frames.
    private func outboxFrames(_ queued: [StoredMessage], on handle: LinkHandle, rooms: Set<String>) -> [SessionAction] {
        guard let version = linkVersion(on: handle), !queued.isEmpty else { return [] }
        let signed = version >= 2
        var out: [SessionAction] = []
        var frames: [WireFrame] = []
        for message in queued where rooms.contains(message.room) {
            let message = signed ? Self.signedIfOurs(message, ownID: configuration.ownID, keys: configuration.envelopes) : message
            guard let frame = Self.frame(message, reliable: true, signed: signed) else { continue }
            frames.append(frame)
            if frames.count == 512 {
                out.append(.send(handle, frames))
                frames = []
            }
        }
        if !frames.isEmpty { out.append(.send(handle, frames)) }
        return out
    }
}
