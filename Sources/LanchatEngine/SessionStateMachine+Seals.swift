import LanchatCore
import LanchatWire

/// Seals received live (wire version 4): a SEAL comes ahead of its messages on the same
/// connection, and is held in that connection's `SealBook` (`LinkTable.Entry.seals`) for the sealed
/// MESSAGEs that follow (`receive`).
extension SessionStateMachine {
    /// A SEAL from the connection's peer: held if its signature verifies. Ignored below version 4 (the
    /// connection refuses it before it gets here), without keys, or from someone who is not a member of
    /// its room. A forged or reused one is told once per connection, as a refused message is; its
    /// messages find no seal held and are neither stored nor acknowledged.
    mutating func received(_ seal: Seal, from link: LinkTable.Entry, _ out: inout [SessionAction]) {
        let sender = link.peer.id
        guard link.version >= WireFrame.sealsVersion, let keys = configuration.envelopes, rooms[seal.room]?.members[sender] != nil else { return }
        let taken = links.withSeals(on: link.handle) { $0.received(seal, from: sender, keys: keys) }
        guard let taken, taken != .kept else { return }
        let problem = taken == .forged ? "its signature does not verify" : "it reuses the id of another seal"
        refusedLive("a seal", from: link, in: seal.room, "\(problem); its messages are refused", &out)
    }
}
