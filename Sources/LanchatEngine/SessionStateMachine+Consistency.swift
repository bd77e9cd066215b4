import LanchatCore
import LanchatWire

/// What must hold between the engine's tables after every input, whatever came in: the records that
/// describe one thing agree (a link's two indexes, an invitation and its timer, a stream and its
/// connection, a transfer and its stage), and every table that outside input fills stays within its
/// limit. The simulator checks it after every event; it is not used in the daemon (it reads every table).
extension SessionStateMachine {
    /// What does not hold now: one line each, empty when all is well.
    public func consistencyFaults() -> [String] {
        var faults: [String] = []
        linkFaults(&faults)
        invitationFaults(&faults)
        streamFaults(&faults)
        transferFaults(&faults)
        for room in topics.rooms.sorted(by: { $0.rawValue < $1.rawValue }) where rooms[room] == nil {
            faults.append("topic state is kept for \(room), a room we are not in")
        }
        for room in transfers.histories.doors.keys.sorted(by: { $0.rawValue < $1.rawValue }) where rooms[room] == nil {
            faults.append("the door for \(room)'s history is open, but we are not in \(room)")
        }
        for room in presenceState.rooms.sorted(by: { $0.rawValue < $1.rawValue }) where rooms[room] == nil {
            faults.append("presence or typing state is kept for \(room), a room we are not in")
        }
        for room in membership.metadata.rooms.sorted(by: { $0.rawValue < $1.rawValue }) where rooms[room] == nil {
            faults.append("metadata is kept for \(room), a room we are not in")
        }
        for room in membership.roomsKept.sorted(by: { $0.rawValue < $1.rawValue }) where rooms[room] == nil {
            faults.append("claims, introductions or departures are kept for \(room), a room we are not in")
        }
        if membership.claimCount > configuration.maximumClaims || membership.claimBytes > Self.maximumClaimBytes {
            faults.append("\(membership.claimCount) claims kept (\(membership.claimBytes) bytes), past \(configuration.maximumClaims) (\(Self.maximumClaimBytes) bytes)")
        }
        if membership.tombstoneCount > configuration.maximumTombstones {
            faults.append("\(membership.tombstoneCount) tombstones kept, past \(configuration.maximumTombstones)")
        }
        if membership.unansweredCount > configuration.maximumUnansweredInvitations {
            faults.append("\(membership.unansweredCount) unanswered invitations kept, past \(configuration.maximumUnansweredInvitations)")
        }
        if membership.metadata.closedRoomsKept > MetadataBook.maximumClosedRooms {
            faults.append("\(membership.metadata.closedRoomsKept) closed rooms kept, past \(MetadataBook.maximumClosedRooms)")
        }
        return faults
    }

    private func linkFaults(_ faults: inout [String]) {
        for peer in links.peers {
            guard let entry = links.entry(peer), links.byHandle[entry.handle] == peer else {
                faults.append("link to \(peer.short) is not found under its handle")
                continue
            }
            if entry.peer.id != peer { faults.append("link to \(peer.short) is filed as \(entry.peer.id.short)'s") }
        }
        for (handle, peer) in links.byHandle where links.handle(peer) != handle {
            faults.append("handle \(handle) names \(peer.short), whose link is \(links.handle(peer).map { "\($0)" } ?? "none")")
        }
        for handle in links.retired.keys where links.byHandle[handle] != nil {
            faults.append("handle \(handle) is both retired and serving")
        }
        for entry in links.byPeer.values.sorted(by: { $0.peer.id < $1.peer.id }) + links.retired.values.sorted(by: { $0.handle.rawValue < $1.handle.rawValue })
        where entry.seals.held.count > SealBook.capacity {
            faults.append("the connection to \(entry.peer.id.short) holds \(entry.seals.held.count) seals, past \(SealBook.capacity)")
        }
        faults += links.trust.faults(maximumKeyed: configuration.maximumKeyedPeers)
    }

    private func invitationFaults(_ faults: inout [String]) {
        for id in invites.pending.keys where timers.deadlines[.incomingInvitation(id)] == nil {
            faults.append("invitation \(id.description.prefix(8)) waits for an answer with no timer to expire it")
        }
        for id in invites.outgoing.keys where timers.deadlines[.outgoingInvitation(id)] == nil {
            faults.append("invite \(id.description.prefix(8)) waits for a reply with no timer to end it")
        }
        if invites.pending.count > configuration.maximumPendingInvitations {
            faults.append("\(invites.pending.count) invitations wait, past the limit of \(configuration.maximumPendingInvitations)")
        }
        if !invites.answersAgree { faults.append("answered invitations and their order disagree") }
        if invites.answersKept > configuration.maximumPendingInvitations {
            faults.append("\(invites.answersKept) answers kept, past the limit of \(configuration.maximumPendingInvitations)")
        }
    }

    private func streamFaults(_ faults: inout [String]) {
        let table = streamTable
        if table.streams.count > table.limits.maximumStreams {
            faults.append("\(table.streams.count) streams open, past the limit of \(table.limits.maximumStreams)")
        }
        if table.pendingOpens.count > table.limits.maximumPendingOpens {
            faults.append("\(table.pendingOpens.count) opens held, past the limit of \(table.limits.maximumPendingOpens)")
        }
        if table.acceptors.count > table.limits.maximumAcceptors {
            faults.append("\(table.acceptors.count) acceptors wait, past the limit of \(table.limits.maximumAcceptors)")
        }
        if Set(table.acceptors.map(\.id)).count != table.acceptors.count { faults.append("an acceptor is listed twice") }
        for (id, stream) in table.streams {
            let name = "stream \(id.description.prefix(8))"
            if links.peer(on: stream.handle)?.peer.id != stream.peer.id {
                faults.append("\(name) runs on \(stream.handle), which does not serve \(stream.peer.id.short)")
            }
            if stream.opening, timers.deadlines[.streamOpen(id)] == nil {
                faults.append("\(name) waits for its accept with no timer to end it")
            }
            if !(0...StreamTable.maximumCredit).contains(stream.sendCredit) || !(0...StreamTable.maximumCredit).contains(stream.receiveAllowance) {
                faults.append("\(name) has credit \(stream.sendCredit) to send and \(stream.receiveAllowance) to receive")
            }
        }
        for open in table.pendingOpens {
            if links.peer(on: open.handle)?.peer.id != open.peer.id {
                faults.append("open \(open.open.id.description.prefix(8)) is held for \(open.handle), which does not serve \(open.peer.id.short)")
            }
            if timers.deadlines[.pendingStreamOpen(open.open.id)] == nil {
                faults.append("open \(open.open.id.description.prefix(8)) is held with no timer to refuse it")
            }
        }
    }

    private func transferFaults(_ faults: inout [String]) {
        let limits = transfers.limits
        // Under way, and being looked up (each within the same limits: `offered`).
        for lookingUp in [false, true] {
            let some = transfers.incoming.values.filter { ($0.stage == .lookingUp) == lookingUp }
            let what = lookingUp ? "offers being looked up" : "transfers coming in"
            if some.count > limits.maximumIncoming {
                faults.append("\(some.count) \(what), past the limit of \(limits.maximumIncoming)")
            }
            for (peer, count) in Dictionary(grouping: some, by: \.peer.id).mapValues(\.count) where count > limits.maximumIncomingPerPeer {
                faults.append("\(count) \(what) from \(peer.short), past the limit of \(limits.maximumIncomingPerPeer)")
            }
        }
        for (id, transfer) in transfers.incoming {
            let name = "incoming \(id.description.prefix(8)) (\(transfer.stage.rawValue))"
            // (One that ended is forgotten as it ends.)
            if transfer.stage == .ended { faults.append("\(name) has ended but is still held") }
            if let fault = transfer.fault { faults.append("\(name) \(fault)") }
            if !transfer.interrupted, !links.isLinked(transfer.peer.id) {
                faults.append("\(name) is under way with \(transfer.peer.id.short), who is not connected")
            }
            if transfer.watchedSince != nil, timers.deadlines[.transferStalls] == nil {
                faults.append("\(name) receives with no timer to fail it if it stalls")
            }
        }
        for (id, transfer) in transfers.outgoing {
            let name = "outgoing \(id.description.prefix(8)) (\(transfer.status.rawValue))"
            if transfer.status.ended { faults.append("\(name) has ended but is still held") }
            if transfer.status == .active || transfer.status == .offered, !links.isLinked(transfer.peer.id) {
                faults.append("\(name) goes to \(transfer.peer.id.short), who is not connected")
            }
            // Offers and sends are ended by a timer if their receiver goes quiet (shared files served by their own).
            let watchedBy: EngineTimer = transfer.offer.kind == .shared ? .sharedServes : .outgoingTransfers
            if transfer.status == .active || transfer.status == .offered, timers.deadlines[watchedBy] == nil,
                transfer.offer.kind != .shared || transfers.shared.served[id] != nil
            {
                faults.append("\(name) waits for its receiver with no timer to end it")
            }
        }
        if !transfers.relayPreparing.isEmpty, timers.deadlines[.outgoingTransfers] == nil {
            faults.append("\(transfers.relayPreparing.count) relay answers are being written with no timer to forget them")
        }
        faults += transfers.shared.faults
        if !transfers.shared.served.isEmpty, timers.deadlines[.sharedServes] == nil {
            faults.append("\(transfers.shared.served.count) shared files are served with no timer to end them if they stall")
        }
        if transfers.ended.count > limits.keptEnded { faults.append("\(transfers.ended.count) ended transfers kept, past \(limits.keptEnded)") }
        if transfers.tellCancelled.count > limits.keptCancelled {
            faults.append("\(transfers.tellCancelled.count) cancellations to tell, past \(limits.keptCancelled)")
        }
    }
}
