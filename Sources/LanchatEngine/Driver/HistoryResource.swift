import LanchatCore
import LanchatWire

/// A room's history as a resource (RESOURCE_OFFER kind 1 or 2), as lanchatd and the simulator both write
/// and read it: stored messages become records, and records read back get the engine's verdict.
extension HistoryRecord {
    /// A stored message as a record of a history, with its signature and its place in its seal, if it has
    /// them (nil if its id is not a wire id).
    public init?(_ message: StoredMessage) {
        guard let id = WireID(hex: message.id) else { return nil }
        self.init(
            id: id, senderID: message.senderID, senderName: message.senderName, sequence: UInt64(max(0, message.sequence)),
            timestampMilliseconds: UInt64(max(0, message.timestamp)), kind: message.kind == .file ? .file : .text, body: message.body,
            signature: message.isSigned ? Signature(key: message.authorKey, bytes: message.signature) : nil, proof: message.proof)
    }
}

extension SessionStateMachine {
    /// Each record's verdict (`verdict`: what may be kept of a history from `relay`), in order; checking
    /// stops at the forged record that makes `forgedLeft` (each signature check costs about 55 µs).
    public static func verdicts(
        _ records: [HistoryRecord], room: RoomID, relay: PeerID, ownID: PeerID, keys: EnvelopeKeys?, members: [PeerID: String],
        strangers: Bool, now: Int64, forgedLeft: Int
    ) -> [HistoryVerdict] {
        var verdicts: [HistoryVerdict] = []
        var forged = 0
        for record in records {
            let verdict = verdict(record, room: room, relay: relay, ownID: ownID, keys: keys, members: members, strangers: strangers, now: now)
            verdicts.append(verdict)
            if verdict == .forged {
                forged += 1
                if forged >= forgedLeft { break }
            }
        }
        return verdicts
    }
}
