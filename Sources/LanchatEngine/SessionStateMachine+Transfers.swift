import LanchatCore
import LanchatTransfer
import LanchatWire
import NIOCore

/// Resources (files, and a room's history for a newcomer): offer, accept, chunks within a window,
/// digest, end; resume after a dropped connection or a restart of either side; progress. The two
/// ends are the machines `OutgoingTransfer` and `IncomingTransfer` (`+Receiving`); this part runs
/// them per transfer and asks the shell for the file work (`FileAction`), which answers with the inputs below.
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
        // (A sealed history made for a version 4 connection, which a newer one at a lower version replaced
        // meanwhile: that connection would close on it.)
        guard WireFrame.resourceOffer(offer).minimumVersion <= entry.version else {
            throw SessionError(.unreachable, "\(entry.peer.name) now speaks version \(entry.version): a \(kind) offer needs \(WireFrame.sealsVersion)")
        }
        if !ephemeral {
            // Kept until it ends, so that a restarted daemon resumes it.
            out.append(
                .persist(
                    .saveTransfer(
                        StoredTransfer(
                            id: id.description, outgoing: true, peerID: peer.rawValue, peerName: entry.peer.name, path: file.path, name: file.name,
                            size: Int64(file.size), sha256: Hex.string(offer.sha256), modified: Int64(file.modifiedMilliseconds), fileIdentity: file.identity))))
        }
        // A digest known beforehand (a shared file is kept under it) is what the offer says; none follows.
        let transfer = OutgoingTransfer(
            peer: entry.peer, file: file, offer: offer, ephemeral: ephemeral, relayAnswer: relayAnswer && room != nil, limits: transfers.limits,
            at: now.monotonic)
        transfers.outgoing[id] = transfer
        timers.scheduleNoLaterThan(.outgoingTransfers, at: now.monotonic + transfers.limits.offerTimeout)
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
        transfers.outgoing[id] = OutgoingTransfer(restored: peer, file: file, offer: offer, sentMark: sentMark, resent: resent, limits: transfers.limits)
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
        guard let peer = transfers.outgoing[id]?.peer.id else { return out }
        let linked = links.isLinked(peer)
        feedOutgoing(id, data: data, at: now, &out) { $0.fileRead(offset: offset, bytes: data.readableBytes, digest: digest, linked: linked) }
        return out
    }

    /// Gives outgoing transfer `id` one input (`data`: what the shell read, for `sendChunk`; `link`: the
    /// connection its frames go on, if not the one that serves its peer now), keeps what it became and
    /// performs what it decided.
    mutating func feedOutgoing(
        _ id: WireID, data: ByteBuffer? = nil, on link: LinkHandle? = nil, at now: EngineTime, _ out: inout [SessionAction],
        _ input: (inout OutgoingTransfer) -> [OutgoingTransfer.Action]
    ) {
        guard var transfer = transfers.outgoing[id] else { return }
        let actions = input(&transfer)
        transfers.outgoing[id] = transfer
        performOutgoing(actions, id, data: data, on: link, at: now, &out)
    }

    /// Does what an outgoing transfer's machine decided: the one place its actions become frames, file
    /// work, records, timers and events (on the connection that serves its peer).
    private mutating func performOutgoing(
        _ actions: [OutgoingTransfer.Action], _ id: WireID, data: ByteBuffer?, on link: LinkHandle?, at now: EngineTime,
        _ out: inout [SessionAction]
    ) {
        for action in actions {
            guard let transfer = transfers.outgoing[id] else { return }
            let handle = link ?? links.handle(transfer.peer.id)
            switch action {
            case .sendOffer:
                if let handle { out.append(.send(handle, [.resourceOffer(transfer.offer)])) }
            case .read(let offset, let count):
                out.append(.file(.read(id, offset: offset, count: count)))
            case .sendChunk(let offset):
                if let handle, let data { out.append(.send(handle, [.resourceChunk(.init(id: id, offset: offset, data: data))])) }
            case .sendDigest(let digest):
                if let handle { out.append(.send(handle, [.resourceDigest(id: id, sha256: digest)])) }
            case .saveSentMark(let mark):
                out.append(.persist(.updateTransfer(id, state: nil, sentMark: mark, resent: nil)))
            case .saveResent(let resent):
                out.append(.persist(.updateTransfer(id, state: nil, sentMark: nil, resent: resent)))
            case .watch(let deadline):
                timers.scheduleNoLaterThan(.outgoingTransfers, at: deadline)
            case .progress(let error):
                out.append(.emit(.transfer(info(transfer, id: id, error: error, at: now))))
            case .end(let state, let told, let error, let cancelledHere):
                if let told, let handle {
                    let status: WireFrame.ResourceEnd.Status = state == .cancelled ? .cancelled : .failed
                    out.append(.send(handle, [.resourceEnd(.init(id: id, status: status, text: told))]))
                }
                endOutgoing(id, error: error, cancelledHere: cancelledHere, at: now, &out)
            }
        }
    }

    /// `cancelledHere`: the receiver is told (again) when a connection to it next comes up: it keeps its
    /// part file until it hears, and a RESOURCE_END sent on a connection that then fails may be lost.
    private mutating func endOutgoing(_ id: WireID, error: String?, cancelledHere: Bool, at now: EngineTime, _ out: inout [SessionAction]) {
        guard let transfer = transfers.outgoing.removeValue(forKey: id) else { return }
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
            guard transfers.outgoing[accept.id]?.peer.id == peer.id, links.handle(peer.id) == entry.handle else { return }
            feedOutgoing(accept.id, at: now, &out) { $0.accepted(accept.offset, at: now.monotonic, linked: true) }
        case .resourceChunk(let chunk):
            guard transfers.incoming[chunk.id]?.peer.id == peer.id else { return }
            feedIncoming(chunk.id, data: chunk.data, at: now, &out) { $0.chunk(offset: chunk.offset, count: chunk.data.readableBytes, at: now.monotonic) }
        case .resourceDigest(let id, let digest):
            guard transfers.incoming[id]?.peer.id == peer.id else { return }
            feedIncoming(id, at: now, &out) { $0.digest(digest) }
        case .resourceEnd(let end):
            if transfers.outgoing[end.id]?.peer.id == peer.id {
                feedOutgoing(end.id, at: now, &out) { $0.receiverEnded(end.status, text: end.text) }
            } else if end.status == .cancelled, transfers.tellCancelled[end.id]?.peer == peer.id {
                // The receiver heard our cancel: no need to tell it again.
                transfers.tellCancelled[end.id] = nil
                out.append(.persist(.deleteTransfer(end.id)))
            } else if transfers.incoming[end.id]?.peer.id == peer.id {
                // The sender gave up, or cancelled (answered either way: it tells a cancel until it hears that).
                feedIncoming(end.id, at: now, &out) { $0.senderEnded(end.status, text: end.text) }
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
            feedOutgoing(id, on: handle, at: now, &out) { $0.connected(at: now.monotonic) }
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
            feedOutgoing(id, at: now, &out) { $0.connectionLost(reason) }
        }
        for id in transfers.incoming.orderedKeys where transfers.incoming[id]?.peer.id == peer {
            feedIncoming(id, at: now, &out) { $0.connectionLost(reason) }
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
            guard let transfer = transfers.outgoing[id], transfer.offer.kind != .shared, links.isLinked(transfer.peer.id),
                let deadline = transfer.deadline
            else { continue }
            guard deadline.at <= now.monotonic else {
                next = min(next ?? deadline.at, deadline.at)
                continue
            }
            feedOutgoing(id, at: now, &out) { $0.timerFired(at: now.monotonic) }
        }
        for since in transfers.relayPreparing.values { next = min(next ?? since + limits.relayAnswerPreparation, since + limits.relayAnswerPreparation) }
        if let next { timers.scheduleNoLaterThan(.outgoingTransfers, at: next) }
    }

    /// Peers that outgoing transfers wait for (redialed like room members).
    var transferPeers: Set<PeerID> {
        Set(transfers.outgoing.values.filter { $0.status == .waiting }.map(\.peer.id))
    }

    // MARK: The API

    /// Cancels a transfer in either direction (by id or unique prefix); nil if none matches here.
    /// Too late once a received file is being placed (it is complete).
    public mutating func cancelTransfer(_ prefix: String, at now: EngineTime) throws(SessionError) -> (TransferInfo, [SessionAction])? {
        var out: [SessionAction] = []
        let lower = prefix.lowercased()
        guard !lower.isEmpty else { return nil }
        if let cancelled = try cancelFetch(lower, at: now) { return cancelled }
        if let id = transfers.outgoing.orderedKeys.first(where: { $0.description.hasPrefix(lower) }) {
            feedOutgoing(id, at: now, &out) { $0.cancel() }
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
            throw SessionError(.tooLate, "\(transfer.name ?? "the file") is complete and being put in place")
        }
        // A shared file's transfer is reported under its fetch's id.
        let shown = sharedFetch(ofAttempt: id) ?? id
        feedIncoming(id, at: now, &out) { $0.cancel(byPeer: false) }
        guard let info = transfers.ended.last, info.id == shown else { return nil }
        return (info, out)
    }

    /// Every transfer under way (the last ended ones are `endedTransfers`).
    public func transfersUnderWay(at now: EngineTime) -> [TransferInfo] {
        var list = transfers.outgoing.orderedKeys.compactMap { id in transfers.outgoing[id].map { info($0, id: id, at: now) } }
        for id in transfers.incoming.orderedKeys {
            guard let transfer = transfers.incoming[id], transfer.isUnderWay else { continue }
            list.append(info(transfer, id: id, state: transfer.interrupted ? .interrupted : .active, at: now))
        }
        // Shared files being asked for (one that is coming is listed above, under the same id).
        for (id, fetch) in sharedFetchList where fetch.attempt.flatMap({ transfers.incoming[$0] })?.isUnderWay != true {
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

    func info(_ transfer: OutgoingTransfer, id: WireID, error: String? = nil, at now: EngineTime) -> TransferInfo {
        let done = transfer.acknowledged
        return TransferInfo(
            state: transfer.status, id: id, direction: .outgoing, peer: transfer.peer, name: transfer.file.name,
            size: transfer.file.size, done: done, rate: Self.rate(done - min(transfer.startOffset, done), since: transfer.started, at: now),
            path: transfer.file.path, error: error, resent: transfer.resent)
    }

    func info(
        _ transfer: IncomingTransfer, id: WireID, state: TransferState, path: String? = nil, error: String? = nil, at now: EngineTime
    ) -> TransferInfo {
        let done = transfer.done
        // A shared file goes by its fetch's id, and the name its announcement gave (its sender offers it
        // under its digest).
        let fetch = sharedFetch(ofAttempt: id)
        let name = fetch.flatMap { transfers.shared.fetches[$0]?.file.name } ?? transfer.name ?? SafeFileName.printable(transfer.offer.name)
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
