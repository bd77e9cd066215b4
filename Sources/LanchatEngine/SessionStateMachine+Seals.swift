import LanchatCore
import LanchatWire

/// Seals received live (wire version 4): a SEAL comes ahead of its messages on the same
/// connection, and is held in that connection's `SealBook` (`LinkTable.Entry.seals`) for the sealed
/// MESSAGEs that follow (`receive`).
extension SessionStateMachine {
    /// A SEAL from the connection's peer. Over a pinned TLS link (the link says who sent it) it is held
    /// unchecked and its check asked of the shell (`.checkSeal`, off the event loop); its messages are
    /// stored and acknowledged meanwhile, and nothing of them leaves this host until it verifies. It is
    /// checked here, before its messages are stored, on a plaintext link, from an author one of whose
    /// seals failed, and while `SealWaits.capacity` checks wait. Ignored below version 4 (the connection
    /// refuses it before it gets here), without keys, or from someone who is not a member of its room. A
    /// forged or reused one is told once per connection, as a refused message is; its messages find no
    /// seal held and are neither stored nor acknowledged.
    mutating func received(_ seal: Seal, from link: LinkTable.Entry, _ out: inout [SessionAction]) {
        let sender = link.peer.id
        guard link.version >= WireFrame.sealsVersion, let keys = configuration.envelopes, rooms[seal.room]?.members[sender] != nil else { return }
        // (A check waiting under the same author and id is another connection's, or another seal's: this
        // one is checked here, so that one answer never stands for two seals.)
        let checkNow = !link.authenticated || links.trust.checksSealsFirst(sender) || sealWaits.isFull || sealWaits.waits(for: sender, seal.id)
        let taken = links.withSeals(on: link.handle) { $0.received(seal, from: sender, keys: keys, checkNow: checkNow) }
        switch taken {
        case .kept?, nil:
            return
        case .unchecked(let check)?:
            if sealWaits.ask(check) { out.append(.checkSeal(check)) }
        case .forged?, .reused?:
            let problem = taken == .forged ? "its signature does not verify" : "it reuses the id of another seal"
            refusedLive("a seal", from: link, in: seal.room, "\(problem); its messages are refused", &out)
        }
    }

    /// The shell checked a seal's signature (`.checkSeal`): its messages may be exported now, or (it
    /// failed) they go, the person is told, and its author's seals are checked before storing from now on.
    public mutating func sealChecked(_ check: SealCheck, valid: Bool, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        // (Not waited for any more: checked where it came meanwhile, and settled then.)
        guard sealWaits.answered(check) else { return out }
        settle(check, valid: valid, &out)
        return out
    }

    /// What a seal's check decides: on the author's connections (the one serving it, and any replaced one
    /// still heard), in the store (that seal only), and (failed) for the person.
    mutating func settle(_ check: SealCheck, valid: Bool, _ out: inout [SessionAction]) {
        links.withEverySealBook(of: check.author) { $0.answered(check, valid: valid) }
        guard !valid else {
            out.append(.persist(.sealChecked(author: check.author, seal: StoredSeal(check.head))))
            return
        }
        // (Told once per author in a run: from then on its seals are checked where they come, and a forged
        // one is refused as on a plaintext link, told once per connection.)
        let told = links.trust.checksSealsFirst(check.author)
        links.trust.sealFailed(check.author)
        out.append(.persist(.dropSealed(author: check.author, seal: StoredSeal(check.head))))
        guard !told else { return }
        let peer = links.entry(check.author)?.peer ?? SessionPeer(id: check.author, name: rooms[check.room]?.members[check.author]?.name ?? check.author.short)
        out.append(
            .emit(
                .security(
                    peer: peer,
                    text: "a seal from \(peer.name) (\(peer.id.short)) in room \(check.room) does not verify: its messages were removed "
                        + "from the history (none was handed on); \(peer.name)'s seals are checked before their messages are stored from now on")))
    }
}
