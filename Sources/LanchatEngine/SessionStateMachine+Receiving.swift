import LanchatCore
import LanchatTransfer
import LanchatWire
import NIOCore

/// The receiving end of transfers: an offer decided (who may send, the caps, the name and size, the
/// part file), chunks handed to the shell to write in order, progress once written, the digest checked,
/// the file placed or a room's history imported. Each transfer is an `IncomingTransfer` machine: its
/// inputs come through `feedIncoming`, and what it decides is done by `performIncoming`, in one place.
extension SessionStateMachine {
    // MARK: Receiving

    mutating func offered(_ offer: WireFrame.ResourceOffer, from entry: LinkTable.Entry, at now: EngineTime, _ out: inout [SessionAction]) {
        let peer = entry.peer
        // An id we send under is never also received under (a member that offers our own id back is ignored).
        guard transfers.outgoing[offer.id] == nil else { return }
        if transfers.incoming[offer.id] != nil {
            // Offered again over a new connection: go on from what is held (no byte is asked for twice).
            feedIncoming(offer.id, at: now, &out) { $0.offeredAgain(offer, by: peer.id, at: now.monotonic) }
            return
        }
        // History only from the member we asked, for the room we asked about: our inviter (as a
        // newcomer), or a member we sent a SYNC_REQUEST (a signed or sealed history only: relay).
        if offer.kind.isHistory {
            guard let room = offer.room else {
                out.append(.send(entry.handle, [.resourceEnd(.init(id: offer.id, status: .refused, text: "history was not asked for"))]))
                return
            }
            switch takeHistory(room, from: peer.id, authenticated: HistoryLayout(kind: offer.kind)?.isAuthenticated == true, at: now) {
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
        transfers.incoming[offer.id] = IncomingTransfer(peer: peer, offer: offer, limits: transfers.limits, at: now.monotonic)
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
        guard let transfer = transfers.incoming[id], transfer.stage == .lookingUp else { return out }
        // A member may have a few transfers coming in at once, everyone together a few more: each holds a
        // part file open and reserves disk space (a thousand one-byte offers used up the descriptors).
        // (One received or cancelled before is answered as such whatever the count.)
        let limits = transfers.limits
        let fromPeer = transfers.incomingCount(from: transfer.peer.id) - 1
        let total = transfers.incoming.count - 1
        if record == .none || record == .partial, fromPeer >= limits.maximumIncomingPerPeer || total >= limits.maximumIncoming {
            let limit = fromPeer >= limits.maximumIncomingPerPeer ? "\(limits.maximumIncomingPerPeer) from one peer" : "\(limits.maximumIncoming) in all"
            feedIncoming(id, at: now, &out) { $0.refuse("too many transfers at once (\(limit)); offer it again when one has ended") }
            // A refused history is not taken later either.
            if transfer.offer.kind.isHistory, let room = transfer.offer.room { historyTransferEnded(id, room: room) }
            endFetch(ofAttempt: id, "too many transfers coming in at once here (\(limit)); fetch it again when one has ended", &out)
            return out
        }
        let maximumSize =
            transfers.histories.relayTransfers.contains(id)
            ? limits.maximumRelaySize : transfer.offer.kind.isHistory ? limits.maximumHistorySize : limits.maximumSize
        feedIncoming(id, at: now, &out) { $0.lookedUp(record, maximumSize: maximumSize) }
        return out
    }

    /// Whether an offer waits for its part file (the shell closes a file that comes too late).
    public func isOpeningPart(_ id: WireID) -> Bool { transfers.incoming[id]?.stage == .opening }

    /// The part file is ready, or cannot be (answer to `FileAction.openPart`).
    public mutating func partOpened(_ id: WireID, _ result: PartOpening, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        guard transfers.incoming[id]?.stage == .opening else { return out }
        if case .opened = result {} else { sharedFailsHere(id) }  // this host's disk: another member's copy would not help
        let reserved = transfers.reserved
        feedIncoming(id, at: now, &out) { $0.partOpened(result, reserved: reserved, at: now.monotonic) }
        return out
    }

    /// The shell wrote every byte before `offset` (answer to `FileAction.write`).
    public mutating func written(_ id: WireID, upTo offset: UInt64, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        feedIncoming(id, at: now, &out) { $0.written(upTo: offset, at: now.monotonic) }
        return out
    }

    /// The stall timer goes once no transfer is receiving on a live connection (one that went on to
    /// verifying or placing kept it for up to `stallTimeout` after it had nothing left to watch).
    mutating func releaseStallTimer() {
        if !transfers.incoming.values.contains(where: { $0.watchedSince != nil }) { timers.cancel(.transferStalls) }
    }

    /// The part file's SHA-256 (answer to `FileAction.verify`).
    public mutating func hashed(_ id: WireID, digest: [UInt8], at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        feedIncoming(id, at: now, &out) { $0.hashed(digest) }
        return out
    }

    /// The file is in place (answer to `FileAction.place`).
    public mutating func placed(_ id: WireID, path: String, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        guard let transfer = finishIncoming(id, at: now, &out) else { return out }
        if transfer.offer.kind == .file { out.append(.persist(.updateTransfer(id, state: .complete, sentMark: nil, resent: nil))) }
        if let handle = links.handle(transfer.peer.id) { out.append(.send(handle, [.resourceEnd(.init(id: id, status: .complete))])) }
        let info = info(transfer, id: id, state: .complete, path: path, at: now)
        if transfer.offer.kind == .shared { sharedPlaced(id) }
        transfers.keep(info)
        out.append(.emit(.transfer(info)))
        return out
    }

    /// An incoming transfer being placed is complete: forgotten here, returned for its report.
    private mutating func finishIncoming(_ id: WireID, at now: EngineTime, _ out: inout [SessionAction]) -> IncomingTransfer? {
        guard feedIncoming(id, at: now, &out, { $0.placed() }) == [.complete] else { return nil }
        return transfers.incoming.removeValue(forKey: id)
    }

    /// A history resource was read and merged: `added` new records, `refused` ones the rules keep out,
    /// `forged` ones whose signature did not verify (`verdict`); `error` if it could not be read or
    /// stored (answer to `FileAction.importHistory`).
    public mutating func historyImported(
        _ id: WireID, added: Int, refused: Int, forged: Int = 0, error: String?, at now: EngineTime
    ) -> [SessionAction] {
        var out: [SessionAction] = []
        guard transfers.incoming[id]?.offer.room != nil, let transfer = finishIncoming(id, at: now, &out), let room = transfer.offer.room else { return out }
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
        if transfers.outgoing[id] != nil {
            feedOutgoing(id, at: now, &out) { $0.fail(reason) }
        } else if transfers.incoming[id]?.isUnderWay == true {
            sharedFailsHere(id)  // this host's disk: another member's copy would not help
            feedIncoming(id, at: now, &out) { $0.fileFailed(reason) }
        }
        return out
    }

    /// Gives incoming transfer `id` one input (`data`: the chunk that came, for `write`), keeps what it
    /// became and performs what it decided. Returns that.
    @discardableResult
    mutating func feedIncoming(
        _ id: WireID, data: ByteBuffer? = nil, at now: EngineTime, _ out: inout [SessionAction],
        _ input: (inout IncomingTransfer) -> [IncomingTransfer.Action]
    ) -> [IncomingTransfer.Action] {
        guard var transfer = transfers.incoming[id] else { return [] }
        let actions = input(&transfer)
        transfers.incoming[id] = transfer
        performIncoming(actions, id, data: data, at: now, &out)
        return actions
    }

    /// Does what an incoming transfer's machine decided: the one place its actions become frames, file
    /// work, records, timers and events.
    private mutating func performIncoming(
        _ actions: [IncomingTransfer.Action], _ id: WireID, data: ByteBuffer?, at now: EngineTime, _ out: inout [SessionAction]
    ) {
        for action in actions {
            guard let transfer = transfers.incoming[id] else { return }
            switch action {
            case .sendAccept(let offset):
                if let handle = links.handle(transfer.peer.id) { out.append(.send(handle, [.resourceAccept(.init(id: id, offset: offset))])) }
            case .progress:
                out.append(.emit(.transfer(info(transfer, id: id, state: .active, at: now))))
            case .watchStalls:
                timers.scheduleNoLaterThan(.transferStalls, at: now.monotonic + transfers.limits.stallTimeout)
            case .openPart(let resume):
                out.append(.file(.openPart(transfer.offer, resume: resume)))
            case .save(let path, let name):
                out.append(
                    .persist(
                        .saveTransfer(
                            StoredTransfer(
                                id: id.description, outgoing: false, peerID: transfer.peer.id.rawValue, peerName: transfer.peer.name, path: path,
                                name: name, size: Int64(transfer.offer.size), sha256: Hex.string(transfer.offer.sha256),
                                modified: Int64(transfer.offer.modifiedMilliseconds)))))
            case .write(let offset, let skip, let count):
                // After a resume, the start of a chunk may be held already: only the new bytes are written.
                guard let data, let bytes = data.getSlice(at: data.readerIndex + skip, length: count) else { continue }
                out.append(.file(.write(id, offset: offset, bytes)))
            case .verify:
                releaseStallTimer()
                out.append(.file(.verify(id)))
            case .place(let name):
                if transfer.offer.kind.isHistory, let room = transfer.offer.room {
                    out.append(.file(.importHistory(id, room, from: transfer.peer, layout: HistoryLayout(kind: transfer.offer.kind) ?? .plain)))
                } else if transfer.offer.kind == .shared, let fetch = sharedFetch(ofAttempt: id).flatMap({ transfers.shared.fetches[$0] }) {
                    out.append(.file(.placeShared(id, fetch.file, destination: fetch.destination)))
                } else {
                    out.append(.file(.place(id, name: name, modifiedMilliseconds: transfer.offer.modifiedMilliseconds)))
                }
            case .complete:
                break  // reported by the caller (`placed`, `historyImported`), with where it went
            case .end(let state, let text, let tell):
                endIncoming(id, state, text: text, tell: tell, at: now, &out)
            case .answer(let status, let text):
                transfers.incoming[id] = nil
                if let handle = links.handle(transfer.peer.id) { out.append(.send(handle, [.resourceEnd(.init(id: id, status: status, text: text))])) }
            case .forget(let reason, let partOpening):
                // Not started: the next offer starts over (its part file, if any, is kept).
                transfers.incoming[id] = nil
                if partOpening { out.append(.file(.close(id, removePart: transfer.offer.kind == .shared))) }
                if transfer.offer.kind.isHistory, let room = transfer.offer.room { historyTransferEnded(id, room: room) }
                if transfer.offer.kind == .shared, let fetch = sharedFetch(ofAttempt: id) { passOver(fetch, reason, at: now, &out) }
            case .interrupted(let reason):
                let error = "\(reason); resumes when \(transfer.peer.name) offers it again"
                out.append(.emit(.transfer(info(transfer, id: id, state: .interrupted, error: error, at: now))))
            }
        }
    }

    /// Incoming transfers receiving on a live connection with no byte come or written for the stall
    /// timeout fail (a member that offers and never sends must not keep a slot and its reservation).
    mutating func failStalledTransfers(at now: EngineTime, _ out: inout [SessionAction]) {
        for id in transfers.incoming.orderedKeys {
            feedIncoming(id, at: now, &out) { $0.stallTimerFired(at: now.monotonic) }
        }
        if let oldest = transfers.incoming.values.compactMap(\.watchedSince).min() {
            timers.schedule(.transferStalls, at: oldest + transfers.limits.stallTimeout)
        }
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
