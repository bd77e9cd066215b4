import LanchatCore
import LanchatTransfer
import LanchatWire

/// The receiving end of transfers: an offer decided (who may send, the caps, the name and size, the
/// part file), chunks handed to the shell to write in order, progress once written, the digest checked,
/// the file placed or a room's history imported (`IncomingResource` per transfer).
extension SessionStateMachine {
    // MARK: Receiving

    mutating func offered(_ offer: WireFrame.ResourceOffer, from entry: LinkTable.Entry, at now: EngineTime, _ out: inout [SessionAction]) {
        let peer = entry.peer
        // An id we send under is never also received under (a member that offers our own id back is ignored).
        guard transfers.outgoing[offer.id] == nil else { return }
        if var transfer = transfers.incoming[offer.id] {
            // Offered again over a new connection: go on from what is held (no byte is asked for twice).
            guard transfer.peer.id == peer.id, transfer.offer.size == offer.size, transfer.offer.sha256 == offer.sha256,
                transfer.stage == .receiving || transfer.stage == .verifying || transfer.stage == .placing,
                var machine = transfer.machine
            else { return }
            transfer.interrupted = false
            transfer.lastProgress = now.monotonic
            timers.scheduleNoLaterThan(.transferStalls, at: now.monotonic + transfers.limits.stallTimeout)
            var actions = machine.resumed()
            if machine.state == .verifying, transfer.expected == nil {
                // Every byte is here but the digest was lost with the connection: the sender sends it
                // again after an accept (at the end: nothing else is sent).
                actions.append(.sendAccept(machine.size))
            }
            transfer.machine = machine
            transfer.lastReport = machine.received
            transfers.incoming[offer.id] = transfer
            performIncoming(actions, offer.id, at: now, &out)
            out.append(.emit(.transfer(info(transfer, id: offer.id, state: .active, at: now))))
            return
        }
        // History only from the member we asked, for the room we asked about: our inviter (as a
        // newcomer), or a member we sent a SYNC_REQUEST (a signed history only: relay).
        if offer.kind.isHistory {
            guard let room = offer.room else {
                out.append(.send(entry.handle, [.resourceEnd(.init(id: offer.id, status: .refused, text: "history was not asked for"))]))
                return
            }
            switch takeHistory(room, from: peer.id, signed: offer.kind == .signedHistory, at: now) {
            case .inviter?: break
            case .relay?: transfers.histories.relayTransferStarted(offer.id)
            case nil:
                out.append(.send(entry.handle, [.resourceEnd(.init(id: offer.id, status: .refused, text: "history was not asked for"))]))
                return
            }
        }
        // A shared file only as the answer to our request, for what we asked (and nothing else under its id).
        if let problem = sharedOfferProblem(offer, from: peer.id) {
            out.append(.send(entry.handle, [.resourceEnd(.init(id: offer.id, status: .refused, text: problem))]))
            if let fetch = sharedFetch(ofAttempt: offer.id), transfers.shared.fetches[fetch]?.asked == peer.id { passOver(fetch, problem, at: now, &out) }
            return
        }
        // Files come only from people we share a room with (they were invited, or invited us).
        guard offer.kind.isHistory || sharesRoom(with: peer.id) else {
            out.append(.send(entry.handle, [.resourceEnd(.init(id: offer.id, status: .refused, text: "you share no room with \(configuration.ownName)"))]))
            if let fetch = sharedFetch(ofAttempt: offer.id) { return passOver(fetch, "no longer in a room with us", at: now, &out) }
            out.append(
                .emit(
                    .transfer(
                        TransferInfo(
                            state: .refused, id: offer.id, direction: .incoming, peer: peer,
                            name: SafeFileName.printable(offer.name), size: offer.size, done: 0, rate: 0, error: "not in a room with us"))))
            return
        }
        transfers.incoming[offer.id] = TransferTable.Incoming(peer: peer, offer: offer, stage: .lookingUp, started: now.monotonic)
        // Offers being looked up have a limit of their own (as many as may be under way): past it, one is
        // refused at once (`incomingLookedUp` finds it over the cap), so that a member's burst of offers
        // holds no more than that while the store is asked. (Under it, an offer past the cap is still
        // looked up: one received before is answered "complete".)
        let limits = transfers.limits
        let lookingUp = transfers.incoming.values.filter { $0.stage == .lookingUp }
        let overLimit = lookingUp.count { $0.peer.id == peer.id } > limits.maximumIncomingPerPeer || lookingUp.count > limits.maximumIncoming
        if offer.kind == .file, !overLimit {
            out.append(.file(.lookUp(offer, from: peer)))
        } else {
            out += incomingLookedUp(offer.id, .none, at: now)
        }
    }

    /// What the store knows of an offered id (answer to `FileAction.lookUp`).
    public mutating func incomingLookedUp(_ id: WireID, _ record: IncomingRecord, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        guard var transfer = transfers.incoming[id], transfer.stage == .lookingUp else { return out }
        let handle = links.handle(transfer.peer.id)
        func answer(_ status: WireFrame.ResourceEnd.Status, _ text: String) {
            transfers.incoming[id] = nil
            if let handle { out.append(.send(handle, [.resourceEnd(.init(id: id, status: status, text: text))])) }
        }
        switch record {
        case .received:
            // Received before; the sender missed our answer (the connection dropped): say it again.
            answer(.complete, "")
            return out
        case .cancelled:
            answer(.cancelled, "cancelled by the receiver")
            return out
        case .none, .partial:
            break
        }
        // A member may have a few transfers coming in at once, everyone together a few more: each holds a
        // part file open and reserves disk space (a thousand one-byte offers used up the descriptors).
        let limits = transfers.limits
        let fromPeer = transfers.incomingCount(from: transfer.peer.id) - 1
        let total = transfers.incoming.count - 1
        guard fromPeer < limits.maximumIncomingPerPeer, total < limits.maximumIncoming else {
            let limit = fromPeer >= limits.maximumIncomingPerPeer ? "\(limits.maximumIncomingPerPeer) from one peer" : "\(limits.maximumIncoming) in all"
            answer(.refused, "too many transfers at once (\(limit)); offer it again when one has ended")
            // A refused history is not taken later either.
            if transfer.offer.kind.isHistory, let room = transfer.offer.room { historyTransferEnded(id, room: room) }
            endFetch(ofAttempt: id, "too many transfers coming in at once here (\(limit)); fetch it again when one has ended", &out)
            return out
        }
        // The name and the size are checked before any file is made for them.
        let (check, refusal) = IncomingResource.offer(
            rawName: transfer.offer.name, size: transfer.offer.size,
            limits: .init(
                maximumSize: transfers.histories.relayTransfers.contains(id)
                    ? limits.maximumRelaySize
                    : transfer.offer.kind.isHistory ? limits.maximumHistorySize : limits.maximumSize, freeBytes: .max),
            partialBytes: 0)
        if case .done = check.state {
            transfer.machine = check
            transfers.incoming[id] = transfer
            performIncoming(refusal, id, at: now, &out)
            return out
        }
        transfer.stage = .opening
        transfers.incoming[id] = transfer
        out.append(.file(.openPart(transfer.offer, resume: record == .partial)))
        return out
    }

    /// Whether an offer waits for its part file (the shell closes a file that comes too late).
    public func isOpeningPart(_ id: WireID) -> Bool { transfers.incoming[id]?.stage == .opening }

    /// The part file is ready, or cannot be (answer to `FileAction.openPart`).
    public mutating func partOpened(_ id: WireID, _ result: PartOpening, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        guard var transfer = transfers.incoming[id], transfer.stage == .opening else { return out }
        var free: UInt64 = 0
        var problem: String?
        var held: UInt64 = 0
        switch result {
        case .opened(let path, let bytes, let freeBytes):
            transfer.partPath = path
            held = bytes
            free = freeBytes
        case .unusable(let text):
            problem = text
            sharedFailsHere(id)
        case .failed(let text):
            sharedFailsHere(id)
            // Ended like any other transfer: the sender is told, and `lanchat transfers` lists it.
            endIncoming(id, .failed, text: text, tell: true, at: now, &out)
            return out
        }
        let reserved = transfers.reserved
        let (machine, actions) = IncomingResource.offer(
            rawName: transfer.offer.name, size: transfer.offer.size,
            limits: .init(
                maximumSize: transfers.limits.maximumSize, freeBytes: free > reserved ? free - reserved : 0, storageProblem: problem,
                progressEvery: transfers.limits.progressEvery, keptFree: transfers.limits.keptFree),
            partialBytes: held)
        transfer.machine = machine
        transfer.stage = .receiving
        transfer.lastProgress = now.monotonic
        timers.scheduleNoLaterThan(.transferStalls, at: now.monotonic + transfers.limits.stallTimeout)
        transfer.written = machine.received
        transfer.startOffset = machine.received
        transfer.lastReport = machine.received
        transfer.expected = transfer.offer.digestFollows ? nil : transfer.offer.sha256
        transfers.incoming[id] = transfer
        if let name = machine.name, transfer.offer.kind == .file {
            out.append(
                .persist(
                    .saveTransfer(
                        StoredTransfer(
                            id: id.description, outgoing: false, peerID: transfer.peer.id.rawValue, peerName: transfer.peer.name, path: transfer.partPath,
                            name: name, size: Int64(transfer.offer.size), sha256: Hex.string(transfer.offer.sha256),
                            modified: Int64(transfer.offer.modifiedMilliseconds)))))
        }
        performIncoming(actions, id, at: now, &out)
        if let current = transfers.incoming[id] { out.append(.emit(.transfer(info(current, id: id, state: .active, at: now)))) }
        return out
    }

    /// The shell wrote every byte before `offset` (answer to `FileAction.write`).
    public mutating func written(_ id: WireID, upTo offset: UInt64, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        guard var transfer = transfers.incoming[id], var machine = transfer.machine else { return out }
        // Past what this attempt received: a write of an earlier attempt under this id, answered late.
        guard offset <= machine.received else { return out }
        if offset > transfer.written { transfer.lastProgress = now.monotonic }
        transfer.written = max(transfer.written, offset)
        // Progress as the machine decides it (every `progressEvery` written; the sender stays within its window of it).
        let progress = transfer.interrupted ? [] : machine.written(upTo: transfer.written)
        transfer.machine = machine
        transfers.incoming[id] = transfer
        performIncoming(progress, id, at: now, &out)
        verifyIfWritten(id, &out)
        return out
    }

    /// Asks for the hash once every byte is written and the expected digest is known.
    mutating func verifyIfWritten(_ id: WireID, _ out: inout [SessionAction]) {
        guard var transfer = transfers.incoming[id], transfer.verifyWhenWritten, transfer.expected != nil,
            let machine = transfer.machine, transfer.written == machine.size
        else { return }
        transfer.verifyWhenWritten = false
        transfer.stage = .verifying
        transfers.incoming[id] = transfer
        releaseStallTimer()
        out.append(.file(.verify(id)))
    }

    /// The stall timer goes once no transfer is receiving on a live connection (one that went on to
    /// verifying or placing kept it for up to `stallTimeout` after it had nothing left to watch).
    mutating func releaseStallTimer() {
        if !transfers.incoming.values.contains(where: { $0.stage == .receiving && !$0.interrupted }) { timers.cancel(.transferStalls) }
    }

    /// The part file's SHA-256 (answer to `FileAction.verify`).
    public mutating func hashed(_ id: WireID, digest: [UInt8], at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        guard var transfer = transfers.incoming[id], transfer.stage == .verifying, var machine = transfer.machine else { return out }
        let actions = machine.verified(digest == transfer.expected)
        transfer.machine = machine
        transfers.incoming[id] = transfer
        performIncoming(actions, id, at: now, &out)
        return out
    }

    /// The file is in place (answer to `FileAction.place`).
    public mutating func placed(_ id: WireID, path: String, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        guard let transfer = transfers.incoming[id], transfer.stage == .placing else { return out }
        transfers.incoming[id] = nil
        if transfer.offer.kind == .file { out.append(.persist(.updateTransfer(id, state: .complete, sentMark: nil, resent: nil))) }
        if let handle = links.handle(transfer.peer.id) { out.append(.send(handle, [.resourceEnd(.init(id: id, status: .complete))])) }
        let info = info(transfer, id: id, state: .complete, path: path, at: now)
        if transfer.offer.kind == .shared { sharedPlaced(id) }
        transfers.keep(info)
        out.append(.emit(.transfer(info)))
        return out
    }

    /// A history resource was read and merged: `added` new records, `refused` ones the rules keep out,
    /// `forged` ones whose signature did not verify (`verdict`); `error` if it could not be read or
    /// stored (answer to `FileAction.importHistory`).
    public mutating func historyImported(
        _ id: WireID, added: Int, refused: Int, forged: Int = 0, error: String?, at now: EngineTime
    ) -> [SessionAction] {
        var out: [SessionAction] = []
        guard let transfer = transfers.incoming[id], transfer.stage == .placing, let room = transfer.offer.room else { return out }
        transfers.incoming[id] = nil
        let relayed = transfers.histories.relayTransfers.contains(id)
        historyTransferEnded(id, room: room)
        let handle = links.handle(transfer.peer.id)
        let info: TransferInfo
        if forged > 0 {
            out.append(
                .emit(
                    .security(
                        peer: transfer.peer,
                        text: "\(transfer.peer.name) (\(transfer.peer.id.short)) relayed "
                            + "\(forged) forged message\(forged == 1 ? "" : "s") in room \(room): refused; the genuine ones were kept")))
        }
        if let error {
            if let handle { out.append(.send(handle, [.resourceEnd(.init(id: id, status: .failed, text: error))])) }
            info = self.info(transfer, id: id, state: .failed, error: error, at: now)
        } else {
            if let handle { out.append(.send(handle, [.resourceEnd(.init(id: id, status: .complete))])) }
            var text =
                relayed
                ? "\(added) message\(added == 1 ? "" : "s") you missed, relayed by \(transfer.peer.name)"
                : "\(added) earlier message\(added == 1 ? "" : "s") from \(transfer.peer.name)'s history"
            if refused > 0 { text += "; \(refused) refused (not a member's message, unsigned and not \(transfer.peer.name)'s own, or numbers out of range)" }
            if forged > 0 {
                text +=
                    "; \(forged) refused as forged (the signature does not verify for its sender), sent by "
                    + "\(transfer.peer.name) (\(transfer.peer.id.short))"
            }
            // A relay that brought nothing new (another member was faster) is not worth a line.
            if !relayed || added + refused + forged > 0 { notice(room, text, at: now, &out) }
            info = self.info(transfer, id: id, state: .complete, at: now)
        }
        transfers.keep(info)
        out.append(.emit(.transfer(info)))
        return out
    }

    /// Reading, writing or placing failed (the disk filled up, the file changed while being sent).
    public mutating func fileFailed(_ id: WireID, _ reason: String, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        if let transfer = transfers.outgoing[id] {
            transfers.outgoing[id]?.readingAttempt = nil
            if let handle = links.handle(transfer.peer.id) {
                out.append(.send(handle, [.resourceEnd(.init(id: id, status: .failed, text: reason))]))
            }
            endOutgoing(id, .failed, error: reason, at: now, &out)
        } else if let transfer = transfers.incoming[id], var machine = transfer.machine {
            sharedFailsHere(id)  // this host's disk: another member's copy would not help
            if transfer.stage == .placing {
                endIncoming(id, .failed, text: reason, tell: true, at: now, &out)
                return out
            }
            let actions = machine.writeFailed("the receiver cannot write the file: \(reason)")
            transfers.incoming[id]?.machine = machine
            performIncoming(actions, id, at: now, &out)
        }
        return out
    }

    /// Performs what an incoming transfer's machine decided.
    mutating func performIncoming(_ actions: [IncomingResource.Action], _ id: WireID, at now: EngineTime, _ out: inout [SessionAction]) {
        for action in actions {
            guard var transfer = transfers.incoming[id] else { return }
            switch action {
            case .sendAccept(let offset):
                if !transfer.interrupted, let handle = links.handle(transfer.peer.id) {
                    out.append(.send(handle, [.resourceAccept(.init(id: id, offset: offset))]))
                }
                if offset >= transfer.lastReport + transfers.limits.reportEvery {
                    transfer.lastReport = offset
                    transfers.incoming[id] = transfer
                    out.append(.emit(.transfer(info(transfer, id: id, state: .active, at: now))))
                }
            case .write:
                break  // handed to the shell by the caller, with the chunk's bytes
            case .verify:
                transfers.incoming[id]?.verifyWhenWritten = true
                verifyIfWritten(id, &out)
            case .place(let name):
                transfers.incoming[id]?.stage = .placing
                if transfer.offer.kind.isHistory, let room = transfer.offer.room {
                    out.append(.file(.importHistory(id, room, from: transfer.peer, signed: transfer.offer.kind == .signedHistory)))
                } else if transfer.offer.kind == .shared, let fetch = sharedFetch(ofAttempt: id).flatMap({ transfers.shared.fetches[$0] }) {
                    out.append(.file(.placeShared(id, fetch.file, destination: fetch.destination)))
                } else {
                    out.append(.file(.place(id, name: name, modifiedMilliseconds: transfer.offer.modifiedMilliseconds)))
                }
            case .end(let status, let text, _):
                // "complete" is said once the file is in place, not before.
                guard status != .complete else { continue }
                let state: TransferState =
                    switch status {
                    case .refused: .refused;
                    case .cancelled: .cancelled;
                    default: .failed
                    }
                endIncoming(id, state, text: text, tell: true, at: now, &out)
            }
        }
    }

    /// Incoming transfers receiving on a live connection with no byte come or written for the stall
    /// timeout fail (a member that offers and never sends must not keep a slot and its reservation).
    mutating func failStalledTransfers(at now: EngineTime, _ out: inout [SessionAction]) {
        let timeout = transfers.limits.stallTimeout
        for id in transfers.incoming.orderedKeys {
            guard let transfer = transfers.incoming[id], transfer.stage == .receiving, !transfer.interrupted,
                transfer.lastProgress + timeout <= now.monotonic
            else { continue }
            endIncoming(id, .failed, text: "no data for \(timeout / 1000) s", tell: true, at: now, &out)
        }
        let waiting = transfers.incoming.values.filter { $0.stage == .receiving && !$0.interrupted }.map(\.lastProgress)
        if let oldest = waiting.min() { timers.schedule(.transferStalls, at: oldest + timeout) }
    }

    /// Ends an incoming transfer: the sender is told (`tell`), the part file goes, the store keeps the outcome.
    mutating func endIncoming(
        _ id: WireID, _ state: TransferState, text: String, tell: Bool, at now: EngineTime, _ out: inout [SessionAction]
    ) {
        guard let transfer = transfers.incoming.removeValue(forKey: id) else { return }
        releaseStallTimer()
        if tell, let handle = links.handle(transfer.peer.id) {
            let status: WireFrame.ResourceEnd.Status =
                switch state {
                case .refused: .refused;
                case .cancelled: .cancelled;
                default: .failed
                }
            out.append(.send(handle, [.resourceEnd(.init(id: id, status: status, text: text))]))
        }
        // (Also before a part file was opened: one an earlier attempt left under this id goes too.)
        out.append(.file(.close(id, removePart: true)))
        if transfer.offer.kind == .file { out.append(.persist(.updateTransfer(id, state: state, sentMark: nil, resent: nil))) }
        if transfer.offer.kind.isHistory, let room = transfer.offer.room { historyTransferEnded(id, room: room) }
        let info = info(transfer, id: id, state: state, error: text, at: now)
        // A shared file goes on with the next member that may hold it, under the same id.
        if transfer.offer.kind == .shared, sharedTransferEnded(id, state, text: text, at: now, &out) { return }
        transfers.keep(info)
        out.append(.emit(.transfer(info)))
    }
}
