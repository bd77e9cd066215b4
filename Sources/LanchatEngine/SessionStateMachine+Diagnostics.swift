extension SessionStateMachine {
    /// Counts of what the engine holds, for tests, the simulator's leak checks and `lanchat status`.
    public struct Diagnostics: Equatable, Sendable, CustomStringConvertible {
        public var links: Int
        public var dialing: Int
        public var pendingInvitations: Int
        public var outgoingInvitations: Int
        public var timers: [EngineTimer]
        public var claims: Int
        public var redials: Int
        public var outbox: Int
        public var streams: Int
        public var pendingStreamOpens: Int
        public var streamAcceptors: Int
        public var outgoingTransfers: Int
        public var incomingTransfers: Int

        public var description: String {
            "links \(links), dialing \(dialing), invitations \(pendingInvitations) in / \(outgoingInvitations) out, timers \(timers), "
                + "claims \(claims), redials \(redials), outbox \(outbox), streams \(streams) (+\(pendingStreamOpens) waiting, "
                + "\(streamAcceptors) acceptors), transfers \(outgoingTransfers) out / \(incomingTransfers) in"
        }
    }

    public var diagnostics: Diagnostics {
        Diagnostics(
            links: links.peers.count, dialing: links.dialing.count, pendingInvitations: invites.pending.count, outgoingInvitations: invites.outgoing.count,
            timers: timers.deadlines.keys.sorted { $0.description < $1.description }, claims: membership.claimCount,
            redials: links.redials.count, outbox: outbox.total, streams: streamTable.streams.count,
            pendingStreamOpens: streamTable.pendingOpens.count, streamAcceptors: streamTable.acceptors.count,
            outgoingTransfers: transfers.outgoing.count, incomingTransfers: transfers.incoming.count)
    }
}
