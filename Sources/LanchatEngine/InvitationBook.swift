import LanchatCore
import LanchatWire

/// Invitations' own state (issue 29: a machine that owns its state; the rules are in `+Invitations`):
/// INVITEs waiting for our person's answer, ours waiting for a reply, and the answers we gave (oldest
/// first, a bounded number) for an INVITE that comes again. Others read it; only its methods change it,
/// so the answers and their order cannot disagree, and the limits on waiting INVITEs hold in one place.
struct InvitationBook: Sendable {
    typealias PendingInvitation = SessionStateMachine.PendingInvitation
    typealias OutgoingInvitation = SessionStateMachine.OutgoingInvitation
    typealias AnsweredInvitation = SessionStateMachine.AnsweredInvitation

    /// INVITEs waiting for our answer, by id.
    private(set) var pending: [WireID: PendingInvitation] = [:]
    /// INVITEs we sent, waiting for a reply, by id.
    private(set) var outgoing: [WireID: OutgoingInvitation] = [:]
    private var answered: [WireID: AnsweredInvitation] = [:]
    private var answeredOrder: [WireID] = []

    /// Why an INVITE cannot wait for an answer.
    enum Refusal: Equatable {
        case tooMany
        case tooManyFrom
    }

    /// Keeps an INVITE until it is answered: at most `maximum` in all, `perPeer` from one peer.
    mutating func wait(_ id: WireID, _ entry: PendingInvitation, maximum: Int, perPeer: Int) -> Refusal? {
        guard pending.count < maximum else { return .tooMany }
        guard pending.values.filter({ $0.peer == entry.peer }).count < perPeer else { return .tooManyFrom }
        pending[id] = entry
        return nil
    }

    /// The waiting INVITE `id`, no longer waiting.
    mutating func takePending(_ id: WireID) -> PendingInvitation? { pending.removeValue(forKey: id) }

    /// The waiting INVITE whose id starts with `prefix` (one only).
    func pendingID(_ prefix: String) throws(SessionError) -> WireID {
        let lower = prefix.lowercased()
        let matches = pending.keys.filter { $0.description.hasPrefix(lower) }
        guard !lower.isEmpty, let first = matches.first else {
            throw SessionError(.unknownInvitation, "no pending invitation '\(prefix)' (it may have expired or been answered; see `lanchat invitations`)")
        }
        guard matches.count == 1 else {
            throw SessionError(
                .ambiguous, "'\(prefix)' matches \(matches.count) invitations: \(matches.map { String($0.description.prefix(8)) }.sorted().joined(separator: ", "))")
        }
        return first
    }

    mutating func sent(_ id: WireID, _ entry: OutgoingInvitation) { outgoing[id] = entry }

    /// Our INVITE `id`, no longer waiting for a reply.
    mutating func takeOutgoing(_ id: WireID) -> OutgoingInvitation? { outgoing.removeValue(forKey: id) }

    /// Ours that match, by id (the same order on every run).
    func outgoing(where matches: (OutgoingInvitation) -> Bool) -> [(id: WireID, invitation: OutgoingInvitation)] {
        outgoing.filter { matches($0.value) }.sorted { $0.key.description < $1.key.description }.map { ($0.key, $0.value) }
    }

    /// The answer we gave `peer` to INVITE `id`, if we remember it.
    func answer(to id: WireID, from peer: PeerID) -> WireFrame.InviteReply? {
        answered[id].flatMap { $0.peer == peer ? $0.reply : nil }
    }

    /// Remembers our answer to `id` (the first one), forgetting the oldest past `keep`.
    mutating func answered(_ id: WireID, from peer: PeerID, _ reply: WireFrame.InviteReply, keep: Int) {
        guard answered.updateValue(AnsweredInvitation(peer: peer, reply: reply), forKey: id) == nil else { return }
        answeredOrder.append(id)
        if answeredOrder.count > keep { answered[answeredOrder.removeFirst()] = nil }
    }

    var answersKept: Int { answered.count }

    /// Whether the answers and their order agree (for the consistency check).
    var answersAgree: Bool { answeredOrder.count == answered.count && Set(answeredOrder) == Set(answered.keys) }
}
