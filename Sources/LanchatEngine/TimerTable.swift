import LanchatCore

/// The engine's timers. Time is an input: the shell asks `nextDeadline`, sleeps until then (or until
/// something else happens), and calls `tick(at:)`, which fires every timer that is due.
public enum EngineTimer: Hashable, Sendable, CustomStringConvertible {
    /// An invitation we received expires unanswered.
    case incomingInvitation(WireID)
    /// An invitation we sent gets no answer (its timeout plus a grace period).
    case outgoingInvitation(WireID)
    /// Resend the outbox to a connected peer that has not acknowledged it.
    case retransmit(PeerID)
    /// Look at the members we should be connected to and dial the ones that are due.
    case redial
    /// Forget membership claims nobody confirmed.
    case claims
    /// Tell connected members again who is in each room (anti-entropy for lost introductions and leaves).
    case resync
    /// A stream we opened was not accepted in time.
    case streamOpen(WireID)
    /// An open nobody here accepted is refused.
    case pendingStreamOpen(WireID)
    /// Incoming transfers that got no byte for the stall timeout fail.
    case transferStalls
    /// No command from a person for the auto-away time: we turn away.
    case autoAway
    /// Members asked for a shared file that did not answer in time are passed over.
    case sharedFetches
    /// Shared files served that are not accepted, or no longer acknowledged, end.
    case sharedServes
    /// Outgoing transfers not accepted in time, or no longer acknowledged, end.
    case outgoingTransfers

    public var description: String {
        switch self {
        case .incomingInvitation(let id): "invitation \(id.description.prefix(8)) expires"
        case .outgoingInvitation(let id): "invite \(id.description.prefix(8)) times out"
        case .retransmit(let peer): "retransmit to \(peer.short)"
        case .redial: "redial"
        case .claims: "claims expire"
        case .resync: "resync members"
        case .streamOpen(let id): "stream \(id.description.prefix(8)) not accepted"
        case .pendingStreamOpen(let id): "open \(id.description.prefix(8)) refused"
        case .transferStalls: "stalled transfers fail"
        case .autoAway: "auto-away"
        case .sharedFetches: "shared-file requests time out"
        case .sharedServes: "shared files served stall"
        case .outgoingTransfers: "outgoing transfers not accepted or stalled end"
        }
    }
}

struct TimerTable: Sendable, Equatable {
    private(set) var deadlines: [EngineTimer: Int64] = [:]

    mutating func schedule(_ timer: EngineTimer, at deadline: Int64) { deadlines[timer] = deadline }

    /// Schedules unless it is already due earlier.
    mutating func scheduleNoLaterThan(_ timer: EngineTimer, at deadline: Int64) {
        if let existing = deadlines[timer], existing <= deadline { return }
        deadlines[timer] = deadline
    }

    mutating func cancel(_ timer: EngineTimer) { deadlines[timer] = nil }

    var next: Int64? { deadlines.values.min() }

    /// Removes and returns the timers due at `now`, earliest first.
    mutating func due(at now: Int64) -> [EngineTimer] {
        let fired = deadlines.filter { $0.value <= now }.sorted { ($0.value, $0.key.description) < ($1.value, $1.key.description) }.map(\.key)
        for timer in fired { deadlines[timer] = nil }
        return fired
    }

    var isEmpty: Bool { deadlines.isEmpty }
}
