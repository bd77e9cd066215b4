import LanchatCore
import LanchatTransfer
import LanchatWire
import NIOCore

/// Resources (files, and a room's history for a newcomer): offer, accept, chunks within a window,
/// digest, end; resume after a dropped connection or a restart of either side; progress. The two
/// ends are `OutgoingResource` and `IncomingResource` (LanchatTransfer); this part runs them per
/// transfer and asks the shell for the file work (`FileAction`), which answers with the inputs below.
extension SessionStateMachine {
    // MARK: Sending

    /// Offers an open file (or a history export, `ephemeral`) to a connected peer. Returns its id.
    /// `relayAnswer`: the answer to its SYNC_REQUEST for `room` (`SessionAction.sendSync`), one at a time.
    /// Refused past `TransferLimits.maximumOutgoingPerPeer` or `maximumOutgoing` (the shell closes the file).
    public mutating func offerResource(
        _ file: OfferedFile, to peer: PeerID, kind: WireFrame.ResourceOffer.Kind = .file, room: RoomID? = nil, ephemeral: Bool = false,
        id chosen: WireID? = nil, digest: [UInt8]? = nil, relayAnswer: Bool = false, at now: EngineTime
    ) throws(SessionError) -> (WireID, [SessionAction]) {
        if relayAnswer, let room { transfers.relayPreparing[.init(room: room, peer: peer)] = nil }
        guard let entry = links.entry(peer) else { throw SessionError(.unreachable, "not connected to \(peer.short)") }
        if let refusal = transfers.outgoingRefusal(to: peer, name: entry.peer.name) { throw SessionError(.busy, refusal) }
        var out: [SessionAction] = []
        let id = chosen ?? environment.ids.wireID()
        let offer = Self.offer(id, file, kind: kind, room: room, digest: digest)
        if !ephemeral {
            // Kept until it ends, so that a restarted daemon resumes it.
            out.append(
                .persist(
                    .saveTransfer(
                        StoredTransfer(
                            id: id.description, outgoing: true, peerID: peer.rawValue, peerName: entry.peer.name, path: file.path, name: file.name,
                            size: Int64(file.size), sha256: Hex.string(offer.sha256), modified: Int64(file.modifiedMilliseconds), fileIdentity: file.identity))))
        }
        let transfer = TransferTable.Outgoing(
            peer: entry.peer, file: file, offer: offer,
            machine: OutgoingResource(
                size: file.size, chunkSize: transfers.limits.chunkSize, window: transfers.limits.window),
            ephemeral: ephemeral, started: now.monotonic, relayAnswer: relayAnswer && room != nil, offeredAt: now.monotonic)
        transfers.outgoing[id] = transfer
        timers.scheduleNoLaterThan(.outgoingTransfers, at: now.monotonic + transfers.limits.offerTimeout)
        // A digest known beforehand (a shared file is kept under it) is what the offer says; none follows.
        transfers.outgoing[id]?.digest = digest
        out.append(.send(entry.handle, [.resourceOffer(offer)]))
        out.append(.emit(.transfer(info(transfer, id: id, at: now))))
        return (id, out)
    }

    /// After a restart: an outgoing transfer that had not ended, its file reopened by the shell (the very
    /// same file). It waits for its peer; `digest` is known if it was sent before (zeros otherwise).
    public mutating func restoreOutgoing(
        _ id: WireID, to peer: SessionPeer, file: OfferedFile, digest: [UInt8], sentMark: UInt64, resent: UInt64
    ) {
        let known = digest.count == 32 && !digest.allSatisfy { $0 == 0 }
        let offer = Self.offer(id, file, kind: .file, room: nil, digest: known ? digest : nil)
        var transfer = TransferTable.Outgoing(
            peer: peer, file: file, offer: offer,
            machine: OutgoingResource(
                size: file.size, chunkSize: transfers.limits.chunkSize, window: transfers.limits.window, alreadySent: sentMark, resent: resent),
            ephemeral: false, sentMark: sentMark)
        transfer.state = .waiting
        transfer.everAccepted = sentMark > 0
        transfers.outgoing[id] = transfer
    }

    /// The RESOURCE_OFFER for a file (`digest` nil: hashed while sent, RESOURCE_DIGEST follows).
    static func offer(
        _ id: WireID, _ file: OfferedFile, kind: WireFrame.ResourceOffer.Kind, room: RoomID?, digest: [UInt8]?
    ) -> WireFrame.ResourceOffer {
        WireFrame.ResourceOffer(
            id: id, room: room, kind: kind, name: Array(file.name.utf8), size: file.size, sha256: digest ?? [],
            modifiedMilliseconds: file.modifiedMilliseconds, digestFollows: digest == nil)
    }

    /// After a restart: an outgoing transfer cancelled while its receiver was away (it is told when back).
    public mutating func restoreCancelled(_ id: WireID, to peer: PeerID, at now: EngineTime) {
        transfers.tellCancelled[id] = .init(peer: peer, since: now.wall)
    }

    /// The shell found a transfer its sender cancelled while this node was stopped (`FileAction.cancelledWhileApart`),
    /// and removed its part file, or had heard the cancel before: the sender hears that its cancel arrived.
    public mutating func cancelHeard(_ id: WireID, from peer: PeerID) -> [SessionAction] {
        guard let handle = links.handle(peer) else { return [] }
        return [.send(handle, [.resourceEnd(.init(id: id, status: .cancelled, text: "the cancel was received"))])]
    }

    /// The shell read what `FileAction.read` asked for (`digest`: the file's SHA-256 once all of it is hashed).
    public mutating func fileRead(_ id: WireID, offset: UInt64, data: ByteBuffer, digest: [UInt8]?, at now: EngineTime) -> [SessionAction] {
        var out: [SessionAction] = []
        guard var transfer = transfers.outgoing[id], let attempt = transfer.readingAttempt else { return out }
        transfer.readingAttempt = nil
        let current = attempt == transfer.attempt && transfer.state == .active
        let handle = links.handle(transfer.peer.id)
        if current, let handle, data.readableBytes > 0 {
            out.append(.send(handle, [.resourceChunk(.init(id: id, offset: offset, data: data))]))
        }
        if let digest, transfer.digest == nil {
            transfer.digest = digest
            // The file's digest, whichever attempt's read learned it: the receiver may wait for nothing else.
            if transfer.state == .active, let handle { out.append(.send(handle, [.resourceDigest(id: id, sha256: digest)])) }
        }
        transfers.outgoing[id] = transfer
        pump(id, at: now, &out)
        return out
    }

    /// Reads the next chunk if the window allows and no read is under way (or, all sent, the digest).
    mutating func pump(_ id: WireID, at now: EngineTime, _ out: inout [SessionAction]) {
        guard var transfer = transfers.outgoing[id], transfer.readingAttempt == nil, transfer.state == .active,
            links.isLinked(transfer.peer.id)
        else { return }
        let next = transfer.machine.nextChunk()
        if next == nil {
            // Nothing left to send in this attempt; a resumed sender may still owe the digest.
            guard transfer.machine.isFinishedSending, transfer.digest == nil else { return }
        }
        let (offset, count) = next ?? (transfer.file.size, 0)
        if !transfer.ephemeral, offset + UInt64(count) > transfer.sentMark {
            // Written ahead, so that after a crash what was sent twice is never under-counted.
            transfer.sentMark = min(transfer.file.size, offset + UInt64(count) + transfers.limits.sentMarkAhead)
            out.append(.persist(.updateTransfer(id, state: nil, sentMark: transfer.sentMark, resent: nil)))
        }
        transfer.readingAttempt = transfer.attempt
        transfers.outgoing[id] = transfer
        out.append(.file(.read(id, offset: offset, count: count)))
    }

    /// `cancelledHere`: the receiver is told (again) when a connection to it next comes up: it keeps its
    /// part file until it hears, and a RESOURCE_END sent on a connection that then fails may be lost.
    mutating func endOutgoing(
        _ id: WireID, _ state: TransferState, error: String?, cancelledHere: Bool = false, at now: EngineTime, _ out: inout [SessionAction]
    ) {
        guard var transfer = transfers.outgoing.removeValue(forKey: id) else { return }
        out.append(.file(.close(id, removePart: false)))
        if cancelledHere, !transfer.ephemeral {
            out.append(.persist(.updateTransfer(id, state: .cancelled, sentMark: nil, resent: nil)))
            transfers.tellCancelled[id] = .init(peer: transfer.peer.id, since: now.wall)
            if transfers.tellCancelled.count > transfers.limits.keptCancelled,
                let oldest = transfers.tellCancelled.orderedKeys.filter({ $0 != id }).min(by: { transfers.tellCancelled[$0]!.since < transfers.tellCancelled[$1]!.since })
            {
                transfers.tellCancelled[oldest] = nil
                out.append(.persist(.deleteTransfer(oldest)))
            }
        } else if !transfer.ephemeral {
            out.append(.persist(.deleteTransfer(id)))
        }
        transfer.state = state
        if state == .complete { try? transfer.machine.accepted(transfer.file.size) }
        let info = info(transfer, id: id, error: error, at: now)
        transfers.keep(info)
        out.append(.emit(.transfer(info)))
        releaseOutgoingTimer()
    }

    /// The deadline timer of outgoing offers and relay answers (`outgoingDue`) goes once nothing is left
    /// for it to watch: an idle node keeps no timer (the simulator checks it), and one armed 20 minutes
    /// ahead for a transfer that ended would wake it for nothing.
    mutating func releaseOutgoingTimer() {
        guard transfers.relayPreparing.isEmpty, !transfers.outgoing.values.contains(where: { $0.offer.kind != .shared }) else { return }
        timers.cancel(.outgoingTransfers)
    }

    // MARK: Frames

    mutating func transferFrame(_ frame: WireFrame, from entry: LinkTable.Entry, at now: EngineTime, _ out: inout [SessionAction]) {
        let peer = entry.peer
        switch frame {
        case .resourceOffer(let offer):
            offered(offer, from: entry, at: now, &out)
        case .resourceAccept(let accept):
            // Only from the connection that serves the peer: when it replaced another, the transfer was
            // offered again on it, and an accept still coming on the old one (progress sent before the
            // receiver heard the new offer) would restart the sender where the receiver no longer is.
            guard var transfer = transfers.outgoing[accept.id], transfer.peer.id == peer.id, links.handle(peer.id) == entry.handle else { return }
            let serving = entry.handle
            do { try transfer.machine.accepted(accept.offset) } catch {
                out.append(.send(serving, [.resourceEnd(.init(id: accept.id, status: .failed, text: "bad offset \(accept.offset)"))]))
                endOutgoing(accept.id, .failed, error: "the receiver sent a bad offset", at: now, &out)
                return
            }
            if transfer.state == .offered || transfer.machine.acknowledged > transfer.acknowledged {
                // Accepted, or more acknowledged: the receiver is there (`outgoingDue`).
                transfer.progressAt = now.monotonic
                transfer.acknowledged = transfer.machine.acknowledged
                timers.scheduleNoLaterThan(.outgoingTransfers, at: now.monotonic + transfers.limits.stallTimeout)
            }
            if transfer.state == .offered {
                transfer.state = .active
                transfer.everAccepted = true
                transfer.started = now.monotonic
                transfer.startOffset = accept.offset
                // A receiver that restarted lost the digest it was sent.
                if let digest = transfer.digest { out.append(.send(serving, [.resourceDigest(id: accept.id, sha256: digest)])) }
                if transfer.machine.resent > 0, !transfer.ephemeral {
                    out.append(.persist(.updateTransfer(accept.id, state: nil, sentMark: nil, resent: transfer.machine.resent)))
                }
            }
            transfers.outgoing[accept.id] = transfer
            out.append(.emit(.transfer(info(transfer, id: accept.id, at: now))))
            pump(accept.id, at: now, &out)
        case .resourceChunk(let chunk):
            guard var transfer = transfers.incoming[chunk.id], transfer.peer.id == peer.id, transfer.stage == .receiving,
                var machine = transfer.machine
            else { return }
            let actions = machine.chunk(offset: chunk.offset, count: chunk.data.readableBytes)
            transfer.machine = machine
            transfer.lastProgress = now.monotonic
            transfers.incoming[chunk.id] = transfer
            for case .write(let offset, let count) in actions {
                // After a resume, the start of a chunk may be held already: only the new bytes are written.
                let skip = Int(offset - chunk.offset)
                guard let data = chunk.data.getSlice(at: chunk.data.readerIndex + skip, length: count) else { continue }
                out.append(.file(.write(chunk.id, offset: offset, data)))
            }
            performIncoming(actions, chunk.id, at: now, &out)
        case .resourceDigest(let id, let digest):
            guard var transfer = transfers.incoming[id], transfer.peer.id == peer.id, transfer.offer.digestFollows, transfer.expected == nil
            else { return }
            transfer.expected = digest
            transfers.incoming[id] = transfer
            verifyIfWritten(id, &out)
        case .resourceEnd(let end):
            if transfers.outgoing[end.id]?.peer.id == peer.id {
                endOutgoing(end.id, TransferState(end.status), error: end.text.isEmpty ? nil : end.text, at: now, &out)
            } else if end.status == .cancelled, transfers.tellCancelled[end.id]?.peer == peer.id {
                // The receiver heard our cancel: no need to tell it again.
                transfers.tellCancelled[end.id] = nil
                out.append(.persist(.deleteTransfer(end.id)))
            } else if let transfer = transfers.incoming[end.id], transfer.peer.id == peer.id, transfer.offer.kind == .shared,
                transfer.stage == .verifying || transfer.stage == .placing
            {
                // Every byte of a shared file is here: its digest decides, not what its sender says now
                // (a server gives up on a receiver that copies a large file for long).
                break
            } else if transfers.incoming[end.id]?.peer.id == peer.id, end.status != .cancelled {
                // The sender gave up (its file failed, or it found our offset bad): said as it said it.
                let text = end.text.isEmpty ? "the sender ended it" : "the sender: \(end.text)"
                endIncoming(end.id, end.status == .refused ? .refused : .failed, text: text, tell: false, at: now, &out)
            } else if let transfer = transfers.incoming[end.id], transfer.peer.id == peer.id {
                // Either way the sender is answered (END cancelled): it tells a cancel until it hears that.
                if var machine = transfer.machine, transfer.stage != .opening, transfer.stage != .lookingUp {
                    let actions = machine.cancel(byPeer: true)
                    transfers.incoming[end.id]?.machine = machine
                    performIncoming(actions, end.id, at: now, &out)
                } else {
                    endIncoming(end.id, .cancelled, text: "cancelled by the sender", tell: true, at: now, &out)
                }
            } else if let fetch = sharedFetch(ofAttempt: end.id), transfers.shared.fetches[fetch]?.asked == peer.id {
                // The member asked for a shared file does not serve it: the next is asked.
                passOver(fetch, end.text.isEmpty ? "refused" : end.text, at: now, &out)
            } else if end.status == .cancelled {
                // Cancelled by the sender while we were apart (this node restarted meanwhile).
                out.append(.file(.cancelledWhileApart(end.id, peer)))
            }
        default:
            break
        }
    }

    // MARK: Links

    /// A connection to `peer` serves it now: offer again what waits for it (the receiver says where to go
    /// on), and tell it about transfers cancelled here meanwhile. Also when this connection replaced
    /// another one (both sides dialed at once): what was sent on the other may be lost.
    mutating func resumeTransfers(to peer: PeerID, on handle: LinkHandle, at now: EngineTime, _ out: inout [SessionAction]) {
        for id in transfers.outgoing.orderedKeys where transfers.outgoing[id]?.peer.id == peer {
            guard var transfer = transfers.outgoing[id] else { continue }
            transfer.machine.interrupted()
            transfer.attempt += 1
            transfer.state = .offered
            transfer.offeredAt = now.monotonic
            transfers.outgoing[id] = transfer
            out.append(.send(handle, [.resourceOffer(transfer.offer)]))
            timers.scheduleNoLaterThan(.outgoingTransfers, at: now.monotonic + transfers.limits.offerTimeout)
        }
        // Kept until the receiver answers that it heard (an END on a connection that then failed is lost).
        for id in transfers.tellCancelled.orderedKeys {
            guard let tell = transfers.tellCancelled[id], tell.peer == peer else { continue }
            guard now.wall - tell.since < transfers.limits.cancelTold else {
                transfers.tellCancelled[id] = nil
                out.append(.persist(.deleteTransfer(id)))
                continue
            }
            out.append(.send(handle, [.resourceEnd(.init(id: id, status: .cancelled, text: "cancelled by the sender"))]))
        }
    }

    /// The connection that served `peer` ended: files wait to be resumed (sender) or keep their part
    /// file (receiver); a history resource is lost (the newcomer asks again when it reconnects).
    mutating func transfersLost(_ peer: PeerID, reason: String, at now: EngineTime, _ out: inout [SessionAction]) {
        for id in transfers.outgoing.orderedKeys where transfers.outgoing[id]?.peer.id == peer {
            guard var transfer = transfers.outgoing[id] else { continue }
            if transfer.ephemeral {
                endOutgoing(id, .failed, error: reason, at: now, &out)
                continue
            }
            transfer.machine.interrupted()
            transfer.attempt += 1
            transfer.state = .waiting
            transfers.outgoing[id] = transfer
            out.append(.emit(.transfer(info(transfer, id: id, error: "\(reason); resumes when \(transfer.peer.name) is back", at: now))))
        }
        for id in transfers.incoming.orderedKeys where transfers.incoming[id]?.peer.id == peer {
            guard var transfer = transfers.incoming[id] else { continue }
            switch transfer.stage {
            case .lookingUp, .opening:
                // Not started: the next offer starts over (its part file, if any, is kept).
                transfers.incoming[id] = nil
                if transfer.stage == .opening { out.append(.file(.close(id, removePart: transfer.offer.kind == .shared))) }
                if transfer.offer.kind.isHistory, let room = transfer.offer.room { historyTransferEnded(id, room: room) }
                if transfer.offer.kind == .shared, let fetch = sharedFetch(ofAttempt: id) { passOver(fetch, reason, at: now, &out) }
            case .receiving, .verifying, .placing:
                if transfer.offer.kind.endsWithConnection, transfer.stage == .receiving, var machine = transfer.machine {
                    let actions = machine.writeFailed(reason)
                    transfers.incoming[id]?.machine = machine
                    performIncoming(actions, id, at: now, &out)
                    continue
                }
                transfer.interrupted = true
                transfers.incoming[id] = transfer
                out.append(
                    .emit(
                        .transfer(
                            info(
                                transfer, id: id, state: .interrupted, error: "\(reason); resumes when \(transfer.peer.name) offers it again", at: now))))
            }
        }
        releaseStallTimer()
        sharedFetchesLost(peer, reason: reason, at: now, &out)
    }

    /// Outgoing transfers on a live connection whose offer was not accepted within `offerTimeout` (ten times
    /// `stallTimeout` for one its receiver accepted on an earlier connection), or whose
    /// receiver acknowledged nothing more for `stallTimeout` (ten times that once every byte is sent), end:
    /// the receiver is told why (RESOURCE_END failed), the file is closed (an export's with it). Shared
    /// files served go by `sharedServesDue`; relay answers being written that the shell never offered
    /// are forgotten after `relayAnswerPreparation`.
    mutating func outgoingDue(at now: EngineTime, _ out: inout [SessionAction]) {
        let limits = transfers.limits
        transfers.expireRelayPreparing(at: now.monotonic)
        var next: Int64?
        for id in transfers.outgoing.orderedKeys {
            guard let transfer = transfers.outgoing[id], transfer.offer.kind != .shared, let handle = links.handle(transfer.peer.id) else { continue }
            let deadline: Int64
            let problem: String
            switch transfer.state {
            case .offered where transfer.everAccepted:
                // Offered again after a dropped connection (a person's file: an export ends with its
                // connection): its receiver may be checking and placing every byte, and answers then.
                deadline = transfer.offeredAt + 10 * limits.stallTimeout
                problem = "no answer for \(10 * limits.stallTimeout / 1000) s"
            case .offered:
                deadline = transfer.offeredAt + limits.offerTimeout
                problem = "not accepted within \(limits.offerTimeout / 1000) s"
            case .active:
                let stall = transfer.machine.isFinishedSending ? 10 * limits.stallTimeout : limits.stallTimeout
                deadline = transfer.progressAt + stall
                problem = "nothing acknowledged for \(stall / 1000) s"
            default:
                continue
            }
            guard deadline <= now.monotonic else {
                next = min(next ?? deadline, deadline)
                continue
            }
            out.append(.send(handle, [.resourceEnd(.init(id: id, status: .failed, text: problem))]))
            endOutgoing(id, .failed, error: problem, at: now, &out)
        }
        for since in transfers.relayPreparing.values { next = min(next ?? since + limits.relayAnswerPreparation, since + limits.relayAnswerPreparation) }
        if let next { timers.scheduleNoLaterThan(.outgoingTransfers, at: next) }
    }

    /// Peers that outgoing transfers wait for (redialed like room members).
    var transferPeers: Set<PeerID> {
        Set(transfers.outgoing.values.filter { $0.state == .waiting }.map(\.peer.id))
    }

    // MARK: The API

    /// Cancels a transfer in either direction (by id or unique prefix); nil if none matches here.
    /// Too late once a received file is being placed (it is complete).
    public mutating func cancelTransfer(_ prefix: String, at now: EngineTime) throws(SessionError) -> (TransferInfo, [SessionAction])? {
        var out: [SessionAction] = []
        let lower = prefix.lowercased()
        guard !lower.isEmpty else { return nil }
        if let cancelled = try cancelFetch(lower, at: now) { return cancelled }
        if let id = transfers.outgoing.orderedKeys.first(where: { $0.description.hasPrefix(lower) }), let transfer = transfers.outgoing[id] {
            if let handle = links.handle(transfer.peer.id) {
                out.append(.send(handle, [.resourceEnd(.init(id: id, status: .cancelled, text: "cancelled by the sender"))]))
            }
            endOutgoing(id, .cancelled, error: "cancelled here", cancelledHere: true, at: now, &out)
            return (transfers.ended.last!, out)
        }
        // (A shared file's transfer goes by its fetch's id, never its own: see `cancelFetch`.)
        if let id = transfers.incoming.orderedKeys.first(where: { $0.description.hasPrefix(lower) && sharedFetch(ofAttempt: $0) == nil }) {
            return try cancelIncoming(id, at: now)
        }
        return nil
    }

    /// Cancels the incoming transfer `id` (too late once it is being placed).
    mutating func cancelIncoming(_ id: WireID, at now: EngineTime) throws(SessionError) -> (TransferInfo, [SessionAction])? {
        var out: [SessionAction] = []
        guard let transfer = transfers.incoming[id] else { return nil }
        guard transfer.stage != .placing else {
            throw SessionError(.tooLate, "\(transfer.machine?.name ?? "the file") is complete and being put in place")
        }
        // A shared file's transfer is reported under its fetch's id.
        let shown = sharedFetch(ofAttempt: id) ?? id
        if var machine = transfer.machine, transfer.stage != .lookingUp, transfer.stage != .opening {
            let actions = machine.cancel(byPeer: false)
            transfers.incoming[id]?.machine = machine
            performIncoming(actions, id, at: now, &out)
        } else {
            endIncoming(id, .cancelled, text: "cancelled by the receiver", tell: true, at: now, &out)
        }
        guard let info = transfers.ended.last, info.id == shown else { return nil }
        return (info, out)
    }

    /// Every transfer under way (the last ended ones are `endedTransfers`).
    public func transfersUnderWay(at now: EngineTime) -> [TransferInfo] {
        var list = transfers.outgoing.orderedKeys.compactMap { id in transfers.outgoing[id].map { info($0, id: id, at: now) } }
        for id in transfers.incoming.orderedKeys {
            guard let transfer = transfers.incoming[id], transfer.machine != nil else { continue }
            list.append(info(transfer, id: id, state: transfer.interrupted ? .interrupted : .active, at: now))
        }
        // Shared files being asked for (one that is coming is listed above, under the same id).
        for (id, fetch) in sharedFetchList where fetch.attempt.flatMap({ transfers.incoming[$0]?.machine }) == nil {
            list.append(fetchInfo(id, fetch, peer: fetch.asked.flatMap { links.entry($0)?.peer }, state: .offered, error: nil))
        }
        return list
    }

    /// The last ended transfers, oldest first.
    public var endedTransfers: [TransferInfo] { transfers.ended }

    /// Remembers an ended transfer the shell reported itself (one the engine never held).
    public mutating func keepEnded(_ info: TransferInfo) {
        transfers.keep(info)
    }

    // MARK: Reports

    func info(_ transfer: TransferTable.Outgoing, id: WireID, error: String? = nil, at now: EngineTime) -> TransferInfo {
        let done = transfer.machine.acknowledged
        return TransferInfo(
            state: transfer.state, id: id, direction: .outgoing, peer: transfer.peer, name: transfer.file.name,
            size: transfer.file.size, done: done, rate: Self.rate(done - min(transfer.startOffset, done), since: transfer.started, at: now),
            path: transfer.file.path, error: error, resent: transfer.machine.resent)
    }

    func info(
        _ transfer: TransferTable.Incoming, id: WireID, state: TransferState, path: String? = nil, error: String? = nil, at now: EngineTime
    ) -> TransferInfo {
        let done = transfer.machine?.received ?? 0
        // A shared file goes by its fetch's id, and the name its announcement gave (its sender offers it
        // under its digest).
        let fetch = sharedFetch(ofAttempt: id)
        let name = fetch.flatMap { transfers.shared.fetches[$0]?.file.name } ?? transfer.machine?.name ?? SafeFileName.printable(transfer.offer.name)
        return TransferInfo(
            state: state, id: fetch ?? id, direction: .incoming, peer: transfer.peer,
            name: name, size: transfer.offer.size, done: done,
            rate: Self.rate(done - min(transfer.startOffset, done), since: transfer.started, at: now), path: path, error: error)
    }

    static func rate(_ bytes: UInt64, since start: Int64, at now: EngineTime) -> Double {
        let elapsed = now.monotonic - start
        return elapsed > 0 ? (Double(bytes) * 1000 / Double(elapsed)).rounded() : 0
    }
}

extension Dictionary where Key == WireID {
    /// The ids in a fixed order (the engine's output must not depend on hashing).
    var orderedKeys: [WireID] { keys.sorted { $0.description < $1.description } }
}
