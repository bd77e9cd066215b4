import Crypto
import Glibc
import LanchatCore
import LanchatEngine
import LanchatStore
import LanchatTransfer
import LanchatWire
import NIOCore
import NIOPosix

/// The receiving side of transfers: offers decided, chunks written in order to a hidden `.part` file and
/// hashed, verified, placed; a room's history imported.
extension SessionNode {
    // MARK: Receiving

    func transferFrame(_ frame: WireFrame, from link: Link) {
        switch frame {
        case .resourceOffer(let offer):
            decideOffer(offer, from: link)
        case .resourceAccept(let accept):
            guard var transfer = outgoingTransfers[accept.id], transfer.peer.id == link.peer.id else { return }
            do { try transfer.machine.accepted(accept.offset) } catch {
                link.connection.send([.resourceEnd(.init(id: accept.id, status: .failed, text: "bad offset \(accept.offset)"))])
                endOutgoingTransfer(accept.id, state: "failed", error: "the receiver sent a bad offset")
                return
            }
            if transfer.state == "offered" {
                transfer.state = "active"
                transfer.started = .now
                transfer.startOffset = accept.offset
                // A receiver that restarted lost the digest it was sent.
                if let digest = transfer.digest { link.connection.send([.resourceDigest(id: accept.id, sha256: digest)]) }
                if transfer.machine.resent > 0 {
                    try? store.updateTransfer(id: accept.id.description, resent: Int64(transfer.machine.resent), now: Self.nowMilliseconds())
                }
            }
            outgoingTransfers[accept.id] = transfer
            report(outgoingInfo(transfer))
            pump(accept.id)
        case .resourceChunk(let chunk):
            guard var transfer = incomingTransfers[chunk.id], transfer.peer.id == link.peer.id else { return }
            let actions = transfer.machine.chunk(offset: chunk.offset, count: chunk.data.readableBytes)
            for case .write(let offset, let count) in actions {
                // After a resume, the start of a chunk may be held already: only the new bytes count.
                var data = chunk.data
                data.moveReaderIndex(forwardBy: Int(offset - chunk.offset))
                data = data.getSlice(at: data.readerIndex, length: count) ?? data
                transfer.queue.append((offset, data))
            }
            incomingTransfers[chunk.id] = transfer
            // Progress is reported as bytes are written (`write`, through the machine's `written`); a sender
            // far past what was reported is stopped by the machine.
            performIncoming(actions, for: chunk.id, link: link)
            write(chunk.id)
        case .resourceDigest(let id, let digest):
            guard var transfer = incomingTransfers[id], transfer.peer.id == link.peer.id, transfer.offer.digestFollows else { return }
            transfer.expected = digest
            incomingTransfers[id] = transfer
            write(id)  // verifies now if every byte is written
        case .resourceEnd(let end):
            if outgoingTransfers[end.id]?.peer.id == link.peer.id {
                let state = switch end.status { case .complete: "complete"; case .refused: "refused"; case .cancelled: "cancelled"; case .failed: "failed" }
                endOutgoingTransfer(end.id, state: state, error: end.text.isEmpty ? nil : end.text)
            } else if var transfer = incomingTransfers[end.id], transfer.peer.id == link.peer.id {
                let actions = transfer.machine.cancel(byPeer: true)
                incomingTransfers[end.id] = transfer
                performIncoming(actions, for: end.id, link: nil)
            } else if end.status == .cancelled, let saved = try? store.transfer(id: end.id.description), !saved.outgoing,
                      saved.state == "active", saved.peerID == link.peer.id.rawValue {
                // Cancelled by the sender while we were apart (this daemon restarted meanwhile).
                unlink(saved.path)
                try? store.updateTransfer(id: saved.id, state: "cancelled", now: Self.nowMilliseconds())
                let info = TransferInfo(state: "cancelled", id: saved.id, direction: .incoming, peer: link.peer, name: saved.name,
                                        size: UInt64(max(0, saved.size)), done: 0, rate: 0, error: "cancelled by the sender")
                keepEnded(info)
                report(info)
            }
        default:
            break
        }
    }

    private func decideOffer(_ offer: WireFrame.ResourceOffer, from link: Link) {
        if var transfer = incomingTransfers[offer.id] {
            // Offered again over a new connection: go on from what is held (no byte is asked for twice).
            guard transfer.peer.id == link.peer.id, transfer.offer.size == offer.size, transfer.offer.sha256 == offer.sha256 else { return }
            transfer.interrupted = false
            let actions = transfer.machine.resumed()
            incomingTransfers[offer.id] = transfer
            performIncoming(actions, for: offer.id, link: link)
            report(incomingInfo(transfer, state: "active"))
            return
        }
        guard resumingTransfers[offer.id] == nil else { return }
        // History only from the member we asked, for the room we asked about.
        if offer.kind == .history {
            guard let room = offer.room, historyRequested[room] == link.peer.id else {
                link.connection.send([.resourceEnd(.init(id: offer.id, status: .refused, text: "history was not asked for"))])
                return
            }
        }
        // Files come only from people we share a room with (they were invited, or invited us).
        guard sharesRoom(with: link.peer.id) else {
            link.connection.send([.resourceEnd(.init(id: offer.id, status: .refused, text: "you share no room with \(configuration.ownName)"))])
            report(TransferInfo(state: "refused", id: offer.id.description, direction: .incoming, peer: link.peer,
                                name: SafeFileNamePrintable.text(offer.name), size: offer.size, done: 0, rate: 0, error: "not in a room with us"))
            return
        }
        // A history resource is not a download: its part file goes to the state directory's `incoming`,
        // never the download directory.
        let partPath = storage(for: offer.kind).path + "/.lanchat-" + offer.id.description + ".part"
        // What this peer sent us under this id before (a re-offer after a dropped connection or a restart).
        let saved = offer.kind == .file
            ? (try? store.transfer(id: offer.id.description)).flatMap { !$0.outgoing && $0.peerID == link.peer.id.rawValue ? $0 : nil } : nil
        switch saved?.state {
        case "complete":
            // Received before; the sender missed our answer (the connection dropped): say it again.
            link.connection.send([.resourceEnd(.init(id: offer.id, status: .complete))])
            return
        case "cancelled":
            link.connection.send([.resourceEnd(.init(id: offer.id, status: .cancelled, text: "cancelled by the receiver"))])
            return
        default:
            break  // active (resumed below) or failed before (a new attempt from the start)
        }
        // A member may have a few transfers coming in at once, everyone together a few more: each holds a
        // part file open and reserves disk space (a thousand one-byte offers used up the descriptors).
        let fromPeer = incomingTransfers.values.filter { $0.peer.id == link.peer.id }.count + resumingTransfers.values.filter { $0 == link.peer.id }.count
        let total = incomingTransfers.count + resumingTransfers.count
        guard fromPeer < Self.maximumIncomingPerPeer, total < Self.maximumIncoming else {
            let limit = fromPeer >= Self.maximumIncomingPerPeer ? "\(Self.maximumIncomingPerPeer) from one peer" : "\(Self.maximumIncoming) in all"
            link.connection.send([.resourceEnd(.init(id: offer.id, status: .refused, text: "too many transfers at once (\(limit)); offer it again when one has ended"))])
            // A refused history is not taken later either.
            if offer.kind == .history, let room = offer.room { engine.historyEnded(room) }
            return
        }
        if let saved, saved.state == "active", saved.size == Int64(offer.size), saved.sha256 == Hex.string(offer.sha256), saved.path == partPath {
            resume(offer, from: link, partPath: partPath)
            return
        }
        start(offer, from: link, partPath: partPath, fd: -1, partial: 0, hasher: SHA256())
    }

    /// Incoming transfers at once, from one peer and in all.
    static let maximumIncomingPerPeer = 16
    static let maximumIncoming = 64

    /// After a restart: the `.part` file holds what arrived before; hash it (the final check covers it)
    /// and ask the sender for the rest.
    private func resume(_ offer: WireFrame.ResourceOffer, from link: Link, partPath: String) {
        let fd = open(partPath, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            start(offer, from: link, partPath: partPath, fd: -1, partial: 0, hasher: SHA256())
            return
        }
        resumingTransfers[offer.id] = link.peer.id
        let size = offer.size
        let future = fileIO.runIfActive(eventLoop: eventLoop) { () throws -> Handoff<(UInt64, SHA256)> in
            var info = stat()
            guard fstat(fd, &info) == 0, UInt64(info.st_size) <= size else {
                ftruncate(fd, 0)
                return Handoff(value: (0, SHA256()))
            }
            var hasher = SHA256()
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var offset: UInt64 = 0
            while offset < UInt64(info.st_size) {
                let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { break }
                hasher.update(data: buffer[0..<n])
                offset += UInt64(n)
            }
            return Handoff(value: (offset, hasher))
        }
        future.whenComplete { [weak self] result in
            guard let self else { return }
            self.assumeIsolated { node in
                node.resumingTransfers[offer.id] = nil
                guard let link = node.links[link.peer.id] else {
                    close(fd)  // gone again; the next offer starts over from the file
                    return
                }
                switch result {
                case .success(let handoff):
                    node.start(offer, from: link, partPath: partPath, fd: fd, partial: handoff.value.0, hasher: handoff.value.1)
                case .failure:
                    ftruncate(fd, 0)
                    node.start(offer, from: link, partPath: partPath, fd: fd, partial: 0, hasher: SHA256())
                }
            }
        }
    }

    /// Where the part file of a resource of this kind is written (files: the download directory, placed
    /// there when verified; history: the state directory's `incoming`).
    func storage(for kind: WireFrame.ResourceOffer.Kind) -> StorageDirectory {
        switch kind {
        case .history:
            StorageDirectory(role: "the history directory", path: configuration.historyDirectory ?? configuration.downloadDirectory)
        case .file:
            StorageDirectory(role: "the download directory", path: configuration.downloadDirectory,
                             mode: configuration.downloadsForGroup ? 0o750 : 0o700)  // (lanchatd's umask is 077)
        }
    }

    /// Decides on an offer (name, size limit, the directory and its free space) and starts receiving at `partial`.
    private func start(_ offer: WireFrame.ResourceOffer, from link: Link, partPath: String, fd given: Int32, partial: UInt64, hasher: SHA256) {
        // Free space where the bytes will be written; a directory that cannot be used is said as such.
        let status = storage(for: offer.kind).prepare()
        let free: UInt64 = if case .usable(let bytes) = status { bytes } else { 0 }
        let reserved = incomingTransfers.values.reduce(UInt64(0)) { $0 + ($1.machine.size - $1.machine.received) }
        let limits = IncomingResource.Limits(
            maximumSize: configuration.maximumFileSize, freeBytes: free > reserved ? free - reserved : 0, storageProblem: status.problem)
        let (machine, actions) = IncomingResource.offer(rawName: offer.name, size: offer.size, limits: limits, partialBytes: partial)
        var fd = given
        if machine.name == nil {
            if fd >= 0 { close(fd) }
            fd = -1
            unlink(partPath)
            try? store.updateTransfer(id: offer.id.description, state: "failed", now: Self.nowMilliseconds())
        } else if fd < 0 {
            // A new part file, never one found there (a link planted at its name included).
            unlink(partPath)
            fd = open(partPath, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd < 0 {
                let text = "cannot write in \(storage(for: offer.kind).role) \(storage(for: offer.kind).path): \(String(cString: strerror(errno)))"
                link.connection.send([.resourceEnd(.init(id: offer.id, status: .failed, text: text))])
                report(TransferInfo(state: "failed", id: offer.id.description, direction: .incoming, peer: link.peer,
                                    name: machine.name ?? "?", size: offer.size, done: 0, rate: 0, error: text))
                return
            }
        }
        if let name = machine.name, offer.kind == .file {
            try? store.saveTransfer(StoredTransfer(
                id: offer.id.description, outgoing: false, peerID: link.peer.id.rawValue, peerName: link.peer.name, path: partPath,
                name: name, size: Int64(offer.size), sha256: Hex.string(offer.sha256), modified: Int64(offer.modifiedMilliseconds)),
                now: Self.nowMilliseconds())
        }
        incomingTransfers[offer.id] = IncomingTransfer(
            id: offer.id, peer: link.peer, offer: offer, machine: machine, fd: fd, partPath: partPath, hasher: hasher,
            startOffset: machine.received, written: machine.received,
            expected: offer.digestFollows ? nil : offer.sha256)
        performIncoming(actions, for: offer.id, link: link)
        write(offer.id)  // an empty (or already complete) resource has no chunk to wait for: verify now
        if let transfer = incomingTransfers[offer.id] { report(incomingInfo(transfer, state: "active")) }
    }

    func incomingInfo(_ transfer: IncomingTransfer, state: String, path: String? = nil, error: String? = nil) -> TransferInfo {
        TransferInfo(
            state: state, id: transfer.id.description, direction: .incoming, peer: transfer.peer,
            name: transfer.machine.name ?? SafeFileNamePrintable.text(transfer.offer.name), size: transfer.machine.size,
            done: transfer.machine.received, rate: Self.rate(transfer.machine.received - min(transfer.startOffset, transfer.machine.received), since: transfer.started),
            path: path, error: error)
    }

    /// Performs what an incoming transfer's machine (`IncomingResource`) decided.
    func performIncoming(_ actions: [IncomingResource.Action], for id: WireID, link: Link?) {
        for action in actions {
            guard var transfer = incomingTransfers[id] else { return }
            switch action {
            case .sendAccept(let offset):
                link?.connection.send([.resourceAccept(.init(id: id, offset: offset))])
                if offset - transfer.lastReport >= 8 << 20 {
                    transfer.lastReport = offset
                    incomingTransfers[id] = transfer
                    report(incomingInfo(transfer, state: "active"))
                }
            case .write:
                break  // queued by the caller, written by `write(_:)`
            case .verify:
                transfer.verifyWhenWritten = true
                incomingTransfers[id] = transfer
            case .place(let name):
                if transfer.offer.kind == .history { importHistory(id) } else { place(id, as: name) }
            case .end(let status, let text, let removePart):
                // "complete" is said by `place` once the file is in place, not before.
                guard status != .complete else { continue }
                links[transfer.peer.id]?.connection.send([.resourceEnd(.init(id: id, status: WireFrame.ResourceEnd.Status(rawValue: status.rawValue)!, text: text))])
                do {
                    incomingTransfers[id] = nil
                    if transfer.fd >= 0 { close(transfer.fd) }
                    if removePart || transfer.fd >= 0 { unlink(transfer.partPath) }
                    let state = switch status { case .refused: "refused"; case .cancelled: "cancelled"; default: "failed" }
                    try? store.updateTransfer(id: id.description, state: state, now: Self.nowMilliseconds())
                    let info = incomingInfo(transfer, state: state, error: text)
                    keepEnded(info)
                    report(info)
                }
            }
        }
    }

    /// Writes queued chunks in order, one at a time, on the file thread; then verifies when all are in.
    private func write(_ id: WireID) {
        guard var transfer = incomingTransfers[id], !transfer.writing else { return }
        if transfer.queue.isEmpty {
            // Every byte written; verify once the digest is known (it may come after the last chunk).
            if transfer.verifyWhenWritten, let expected = transfer.expected {
                transfer.verifyWhenWritten = false
                let matches = Array(transfer.hasher.finalize()) == expected
                let actions = transfer.machine.verified(matches)
                incomingTransfers[id] = transfer
                performIncoming(actions, for: id, link: links[transfer.peer.id])
            }
            return
        }
        let batch = transfer.queue
        transfer.queue = []
        transfer.writing = true
        incomingTransfers[id] = transfer
        let fd = transfer.fd
        // Hashed on the file thread just before it is written (in order: one batch at a time; the bytes
        // are still in the cache), not on the event loop that decrypts.
        let handoff = Handoff(value: (batch, transfer.hasher))
        transfer.hasher = SHA256()
        incomingTransfers[id] = transfer
        let future = fileIO.runIfActive(eventLoop: eventLoop) { () throws -> Handoff<SHA256> in
            var hasher = handoff.value.1
            for (offset, data) in handoff.value.0 {
                data.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
                var written = 0
                let total = data.readableBytes
                while written < total {
                    let n = data.withUnsafeReadableBytes { pointer in
                        pwrite(fd, pointer.baseAddress! + written, total - written, off_t(offset) + off_t(written))
                    }
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw SessionError("write_failed", String(cString: strerror(errno)))
                    }
                    written += n
                }
            }
            return Handoff(value: hasher)
        }
        future.whenComplete { [weak self] result in
            guard let self else { return }
            self.assumeIsolated { node in
                guard var transfer = node.incomingTransfers[id] else { return }
                transfer.writing = false
                if case .success(let hasher) = result {
                    transfer.hasher = hasher.value
                    if let last = batch.last { transfer.written = last.offset + UInt64(last.data.readableBytes) }
                }
                // Progress as the machine decides it (every 1 MiB written; the sender keeps at most 4 MiB past it).
                let progress = transfer.interrupted ? [] : transfer.machine.written(upTo: transfer.written)
                node.incomingTransfers[id] = transfer
                if !progress.isEmpty { node.performIncoming(progress, for: id, link: node.links[transfer.peer.id]) }
                guard var current = node.incomingTransfers[id] else { return }
                if case .failure(let error) = result {
                    let actions = current.machine.writeFailed("the receiver cannot write the file: \(error)")
                    node.incomingTransfers[id] = current
                    node.performIncoming(actions, for: id, link: node.links[current.peer.id])
                    return
                }
                node.write(id)
            }
        }
    }

    /// fsync, then rename the `.part` file to a free name in the download directory, keeping the mtime.
    private func place(_ id: WireID, as name: String) {
        guard let transfer = incomingTransfers[id] else { return }
        let directory = configuration.downloadDirectory
        let fd = transfer.fd
        let part = transfer.partPath
        let modified = transfer.offer.modifiedMilliseconds
        let mode: mode_t = configuration.downloadsForGroup ? 0o640 : 0o600
        let future = fileIO.runIfActive(eventLoop: eventLoop) { () throws -> String in
            guard fsync(fd) == 0 else { throw SessionError("write_failed", String(cString: strerror(errno))) }
            fchmod(fd, mode)
            var times = [timespec](repeating: timespec(), count: 2)
            times[0].tv_nsec = (1 << 30) - 2  // UTIME_OMIT: leave the access time
            times[1].tv_sec = Int(modified / 1000)
            times[1].tv_nsec = Int(modified % 1000) * 1_000_000
            futimens(fd, times)
            close(fd)
            // A name is taken by anything there, a dangling symbolic link included (lstat, not access).
            func taken(_ candidate: String) -> Bool {
                var info = stat()
                return lstat(directory + "/" + candidate, &info) == 0
            }
            for _ in 0..<100 {
                guard let final = SafeFileName.unique(name, exists: taken) else { break }
                let target = directory + "/" + final
                // link() fails if the name was taken meanwhile: no file is ever overwritten.
                if link(part, target) == 0 {
                    unlink(part)
                    return target
                }
                guard errno == EEXIST else { throw SessionError("write_failed", "cannot place \(final): \(String(cString: strerror(errno)))") }
            }
            throw SessionError("write_failed", "no free name for \(name) in \(directory) (too many files of that name)")
        }
        future.whenComplete { [weak self] result in
            guard let self else { return }
            self.assumeIsolated { node in
                guard var transfer = node.incomingTransfers.removeValue(forKey: id) else { return }
                transfer.fd = -1
                let info: TransferInfo
                switch result {
                case .success(let path):
                    try? node.store.updateTransfer(id: id.description, state: "complete", now: SessionNode.nowMilliseconds())
                    node.links[transfer.peer.id]?.connection.send([.resourceEnd(.init(id: id, status: .complete))])
                    info = node.incomingInfo(transfer, state: "complete", path: path)
                case .failure(let error):
                    unlink(transfer.partPath)
                    try? node.store.updateTransfer(id: id.description, state: "failed", now: SessionNode.nowMilliseconds())
                    node.links[transfer.peer.id]?.connection.send([.resourceEnd(.init(id: id, status: .failed, text: "\(error)"))])
                    info = node.incomingInfo(transfer, state: "failed", error: "\(error)")
                }
                node.keepEnded(info)
                node.report(info)
            }
        }
    }

    /// Reads a received history resource, merges it into the store (ids de-duplicate), and reports.
    private func importHistory(_ id: WireID) {
        guard let transfer = incomingTransfers[id], let room = transfer.offer.room else { return }
        let fd = transfer.fd
        let size = Int(transfer.machine.size)
        let future = fileIO.runIfActive(eventLoop: eventLoop) { () throws -> Handoff<[HistoryRecord]> in
            var buffer = ByteBufferAllocator().buffer(capacity: size)
            let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { max(0, pread(fd, $0.baseAddress, size, 0)) }
            guard n == size else { throw SessionError("history", "short read of the history") }
            close(fd)
            return Handoff(value: try HistoryRecord.decodeAll(buffer))
        }
        future.whenComplete { [weak self] result in
            guard let self else { return }
            self.assumeIsolated { node in
                guard var transfer = node.incomingTransfers.removeValue(forKey: id) else { return }
                transfer.fd = -1
                unlink(transfer.partPath)
                node.engine.historyEnded(room)
                let info: TransferInfo
                switch result {
                case .success(let handoff):
                    let records = handoff.value
                    var added = 0
                    var refused = 0
                    do {
                        try node.store.transaction {
                            for record in records {
                                // Our own messages (a member that rejoins) we have, or never sent: skipped quietly.
                                if record.senderID == node.configuration.ownID.rawValue { continue }
                                guard let stored = SessionStateMachine.storable(
                                    id: record.id, room: room, senderID: record.senderID, senderName: record.senderName, sequence: record.sequence,
                                    timestamp: record.timestampMilliseconds, kind: record.kind, body: record.body, ownID: node.configuration.ownID)
                                else {
                                    refused += 1
                                    continue
                                }
                                if try node.store.insert(stored, now: SessionNode.nowMilliseconds()) { added += 1 }
                            }
                        }
                        node.links[transfer.peer.id]?.connection.send([.resourceEnd(.init(id: id, status: .complete))])
                        var text = "\(added) earlier message\(added == 1 ? "" : "s") from \(transfer.peer.name)'s history"
                        if refused > 0 { text += "; \(refused) refused (not a member's message, or numbers out of range)" }
                        node.notice(room, text)
                        info = node.incomingInfo(transfer, state: "complete")
                    } catch {
                        node.links[transfer.peer.id]?.connection.send([.resourceEnd(.init(id: id, status: .failed, text: "cannot store the history"))])
                        info = node.incomingInfo(transfer, state: "failed", error: "cannot store the history: \(error)")
                    }
                case .failure(let error):
                    node.links[transfer.peer.id]?.connection.send([.resourceEnd(.init(id: id, status: .failed, text: "invalid history: \(error)"))])
                    info = node.incomingInfo(transfer, state: "failed", error: "invalid history: \(error)")
                }
                node.keepEnded(info)
                node.report(info)
            }
        }
    }
}
