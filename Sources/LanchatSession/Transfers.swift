import Crypto
import Glibc
import LanchatCore
import LanchatEngine
import LanchatStore
import LanchatTransfer
import LanchatWire
import NIOCore
import NIOPosix

/// An outgoing file: read in chunks on `fileIO`, sent within the window the receiver allows.
struct OutgoingTransfer {
    var id: WireID
    var peer: SessionPeer
    var path: String
    var name: String
    var fd: Int32
    var size: UInt64
    var machine: OutgoingResource
    /// Sent again (same id) when the connection comes back: the receiver answers where to go on.
    var offer: WireFrame.ResourceOffer
    var reading = false
    var started = ContinuousClock.now
    /// Acknowledged bytes when `started` was set (the rate counts this run only).
    var startOffset: UInt64 = 0
    var state = "offered"
    /// A temporary file (a history export) to delete when done; such transfers are not resumed.
    var removeAfter = false
    /// What the store says was possibly handed to a connection (an upper bound, written ahead).
    var sentMark: UInt64 = 0
    /// The sender hashes what it reads, in order, while sending (RESOURCE_DIGEST once all is read).
    var hasher = SHA256()
    var hashedUpTo: UInt64 = 0
    var digest: [UInt8]?
}

/// An incoming file: chunks written in order to a hidden `.part` file, hashed as they come, verified,
/// then renamed into place.
struct IncomingTransfer {
    var id: WireID
    var peer: SessionPeer
    var offer: WireFrame.ResourceOffer
    var machine: IncomingResource
    var fd: Int32
    var partPath: String
    var hasher = SHA256()
    var queue: [(offset: UInt64, data: ByteBuffer)] = []
    var writing = false
    var verifyWhenWritten = false
    var started = ContinuousClock.now
    var startOffset: UInt64 = 0
    var lastReport: UInt64 = 0
    /// The connection dropped; the `.part` file is kept until the sender offers it again.
    var interrupted = false
    /// Bytes written to the `.part` file, and the last progress reported to the sender.
    var written: UInt64 = 0
    var acknowledged: UInt64 = 0
    /// The SHA-256 to check: from the offer, or from RESOURCE_DIGEST when the offer said it follows.
    var expected: [UInt8]?
}

/// Ended transfers are remembered this long (a late re-offer is answered), and interrupted ones are
/// given up after it (their `.part` file removed).
let transferRetention: Int64 = 7 * 24 * 3600 * 1000

/// A value moved to the file thread and back; only one side touches it at a time.
private struct Handoff<Value>: @unchecked Sendable {
    var value: Value
}

extension SessionNode {
    // MARK: Sending

    /// Offers a file to a peer; progress and the outcome arrive as `.transfer` events. Returns the
    /// transfer id once the file is hashed and the offer is sent.
    public func sendFile(_ path: String, to peer: SessionPeer) async throws(SessionError) -> String {
        try await sendResource(path, to: peer, kind: .file, room: nil, removeAfter: false)
    }

    /// Sends the file open on `descriptor` (the node takes it over and closes it), named after `path`:
    /// for a daemon that cannot open people's files itself (the client passed the descriptor).
    public func sendFile(descriptor: Int32, path: String, to peer: SessionPeer) async throws(SessionError) -> String {
        try await sendResource(path, to: peer, kind: .file, room: nil, removeAfter: false, descriptor: descriptor)
    }

    /// Like `sendFile`, returning a handle to follow and cancel the transfer (Multipeer Connectivity's
    /// `sendResource` returns an `NSProgress`).
    public func sendResource(at path: String, to peer: SessionPeer) async throws(SessionError) -> ResourceProgress {
        ResourceProgress(id: try await sendFile(path, to: peer), node: self)
    }

    /// Sends a newcomer the room's history (records in `HistoryRecord` format) as a resource.
    func sendHistory(_ messages: [StoredMessage], room: RoomID, to peer: SessionPeer) {
        guard !messages.isEmpty else { return }
        var buffer = ByteBufferAllocator().buffer(capacity: messages.count * 160)
        for message in messages {
            guard let id = WireID(hex: message.id) else { continue }
            let record = HistoryRecord(
                id: id, senderID: message.senderID, senderName: message.senderName, sequence: UInt64(max(0, message.sequence)),
                timestampMilliseconds: UInt64(max(0, message.timestamp)), kind: message.kind == .file ? .file : .text, body: message.body)
            try? record.encode(into: &buffer)
        }
        var template = Array("/tmp/lanchat-history-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { return }
        let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        let written = buffer.withUnsafeReadableBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == buffer.readableBytes else { unlink(path); return }
        Task {
            do { _ = try await self.sendResource(path, to: peer, kind: .history, room: room, removeAfter: true) } catch { unlink(path) }
        }
    }

    func sendResource(
        _ path: String, to peer: SessionPeer, kind: WireFrame.ResourceOffer.Kind, room: RoomID?, removeAfter: Bool, descriptor: Int32? = nil
    ) async throws(SessionError) -> String {
        var info = stat()
        let fd: Int32
        if let descriptor {
            fd = descriptor
        } else {
            guard stat(path, &info) == 0 else {
                throw SessionError("bad_file", "cannot read \(path): \(String(cString: strerror(errno)))")
            }
            guard (info.st_mode & S_IFMT) == S_IFREG else { throw SessionError("bad_file", "\(path) is not a regular file") }
            fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw SessionError("bad_file", "cannot open \(path): \(String(cString: strerror(errno)))") }
        }
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw SessionError("bad_file", "\(path) is not a regular file")
        }
        let size = UInt64(info.st_size)
        let modified = UInt64(max(0, info.st_mtim.tv_sec)) * 1000 + UInt64(info.st_mtim.tv_nsec / 1_000_000)
        let name = kind == .history ? "history of \(room?.rawValue ?? "?")" : path.split(separator: "/").last.map(String.init) ?? path
        let id = WireID.random()
        let link: Link
        switch await dial(peer.id) {
        case .success(let value): link = value
        case .failure(let error):
            close(fd)
            throw SessionError("unreachable", "\(peer.name): \(error.message)")
        }
        // Hashed while sending (no pass over the file before the first byte goes out).
        let offer = WireFrame.ResourceOffer(
            id: id, room: room, kind: kind, name: Array(name.utf8), size: size, sha256: [], modifiedMilliseconds: modified, digestFollows: true)
        if !removeAfter {
            // Kept until it ends, so that a restarted daemon resumes it.
            try? store.saveTransfer(StoredTransfer(
                id: id.description, outgoing: true, peerID: link.peer.id.rawValue, peerName: link.peer.name, path: path, name: name,
                size: Int64(size), sha256: Hex.string(offer.sha256), modified: Int64(modified)), now: Self.nowMilliseconds())
        }
        outgoingTransfers[id] = OutgoingTransfer(
            id: id, peer: link.peer, path: path, name: name, fd: fd, size: size, machine: OutgoingResource(size: size), offer: offer,
            removeAfter: removeAfter)
        link.connection.send([.resourceOffer(offer)])
        report(outgoingInfo(outgoingTransfers[id]!))
        return id.description
    }

    /// After a restart: outgoing transfers that did not end wait for their peer; incoming ones that
    /// ended long ago are forgotten, and given-up `.part` files removed.
    func restoreTransfers() {
        let now = Self.nowMilliseconds()
        for old in (try? store.pruneTransfers(before: now - transferRetention)) ?? [] where !old.outgoing && old.state == "active" {
            unlink(old.path)
        }
        for saved in (try? store.transfers()) ?? [] where saved.outgoing && saved.state == "active" {
            guard let id = WireID(hex: saved.id), let peerID = PeerID(saved.peerID), let digest = Hex.bytes(saved.sha256) else { continue }
            let peer = SessionPeer(id: peerID, name: saved.peerName)
            var info = stat()
            let fd = open(saved.path, O_RDONLY | O_CLOEXEC)
            let openError = errno
            let modified = fd >= 0 && fstat(fd, &info) == 0
                ? Int64(info.st_mtim.tv_sec) * 1000 + Int64(info.st_mtim.tv_nsec / 1_000_000) : -1
            guard fd >= 0, Int64(info.st_size) == saved.size, modified == saved.modified else {
                if fd >= 0 { close(fd) }
                try? store.updateTransfer(id: saved.id, state: "failed", now: now)
                remember(TransferInfo(
                    state: "failed", id: saved.id, direction: .outgoing, peer: peer, name: saved.name, size: UInt64(max(0, saved.size)),
                    done: 0, rate: 0, path: saved.path,
                    error: fd >= 0 ? "\(saved.path) changed while lanchatd was stopped" : "cannot reopen \(saved.path) after a restart: \(String(cString: strerror(openError)))"))
                continue
            }
            let offer = WireFrame.ResourceOffer(
                id: id, room: nil, kind: .file, name: Array(saved.name.utf8), size: UInt64(saved.size), sha256: digest,
                modifiedMilliseconds: UInt64(max(0, saved.modified)), digestFollows: digest.allSatisfy { $0 == 0 })
            outgoingTransfers[id] = OutgoingTransfer(
                id: id, peer: peer, path: saved.path, name: saved.name, fd: fd, size: UInt64(saved.size),
                machine: OutgoingResource(size: UInt64(saved.size), alreadySent: UInt64(saved.sentMark), resent: UInt64(saved.resent)),
                offer: offer, state: "waiting", sentMark: UInt64(saved.sentMark))
        }
    }

    /// Peers that outgoing transfers wait for (the maintenance loop dials them).
    var transferPeers: Set<PeerID> {
        Set(outgoingTransfers.values.filter { $0.state == "waiting" }.map(\.peer.id))
    }

    /// A connection to `link.peer` is up: offer again what waits for it (the receiver says where to go
    /// on), and tell it about transfers cancelled here meanwhile. Also when this connection replaced
    /// another one (both sides dialed at once): what was sent on the other may be lost.
    func resumeTransfers(to link: Link) {
        for (id, var transfer) in outgoingTransfers where transfer.peer.id == link.peer.id {
            transfer.machine.interrupted()
            transfer.state = "offered"
            outgoingTransfers[id] = transfer
            link.connection.send([.resourceOffer(transfer.offer)])
        }
        for saved in (try? store.transfers()) ?? [] where saved.outgoing && saved.state == "cancelled" && saved.peerID == link.peer.id.rawValue {
            guard let id = WireID(hex: saved.id) else { continue }
            link.connection.send([.resourceEnd(.init(id: id, status: .cancelled, text: "cancelled by the sender"))])
            try? store.deleteTransfer(id: saved.id)
        }
    }

    private func outgoingInfo(_ transfer: OutgoingTransfer, error: String? = nil) -> TransferInfo {
        TransferInfo(
            state: transfer.state, id: transfer.id.description, direction: .outgoing, peer: transfer.peer, name: transfer.name,
            size: transfer.size, done: transfer.machine.acknowledged,
            rate: Self.rate(transfer.machine.acknowledged - min(transfer.startOffset, transfer.machine.acknowledged), since: transfer.started),
            path: transfer.path, error: error, resent: transfer.machine.resent)
    }

    static func rate(_ bytes: UInt64, since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return seconds > 0 ? (Double(bytes) / seconds).rounded() : 0
    }

    /// Reads and sends the next chunk, if the window allows and no read is under way. Reads hash the
    /// file in order as they go; once all of it is hashed, RESOURCE_DIGEST goes out.
    private func pump(_ id: WireID) {
        guard var transfer = outgoingTransfers[id], !transfer.reading, let link = links[transfer.peer.id] else { return }
        let next = transfer.machine.nextChunk()
        if next == nil {
            // Nothing left to send in this attempt; a resumed sender may still owe the digest.
            guard transfer.machine.isFinishedSending, transfer.digest == nil else { return }
        }
        let (offset, count) = next ?? (transfer.size, 0)
        if !transfer.removeAfter, offset + UInt64(count) > transfer.sentMark {
            // Written ahead (8 MiB at a time), so that after a crash what was sent twice is never under-counted.
            transfer.sentMark = min(transfer.size, offset + UInt64(count) + (8 << 20))
            try? store.updateTransfer(id: id.description, sentMark: Int64(transfer.sentMark), now: Self.nowMilliseconds())
        }
        transfer.reading = true
        let hashing = Handoff(value: (transfer.hasher, transfer.hashedUpTo))
        transfer.hasher = SHA256()
        outgoingTransfers[id] = transfer
        let fd = transfer.fd
        let future = fileIO.runIfActive(eventLoop: eventLoop) { () throws -> Handoff<(ByteBuffer, SHA256, UInt64)> in
            var (hasher, hashed) = hashing.value
            // After a restart nothing is hashed yet: first what the receiver already holds.
            if hashed < offset {
                var block = [UInt8](repeating: 0, count: 1 << 20)
                while hashed < offset {
                    let want = Int(min(UInt64(block.count), offset - hashed))
                    let n = block.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, off_t(hashed)) }
                    if n < 0, errno == EINTR { continue }
                    guard n > 0 else { throw SessionError("bad_file", "the file changed while being sent (short read at \(hashed))") }
                    hasher.update(data: block[0..<n])
                    hashed += UInt64(n)
                }
            }
            var buffer = ByteBufferAllocator().buffer(capacity: count)
            if count > 0 {
                let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { pointer in
                    max(0, pread(fd, pointer.baseAddress, count, off_t(offset)))
                }
                guard n == count else { throw SessionError("bad_file", "the file changed while being sent (short read at \(offset))") }
                if offset + UInt64(count) > hashed {
                    let skip = Int(hashed - offset)
                    buffer.withUnsafeReadableBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[skip...])) }
                    hashed = offset + UInt64(count)
                }
            }
            return Handoff(value: (buffer, hasher, hashed))
        }
        future.whenComplete { [weak self] result in
            guard let self else { return }
            self.assumeIsolated { node in
                guard var transfer = node.outgoingTransfers[id] else { return }
                transfer.reading = false
                switch result {
                case .success(let handoff):
                    let (data, hasher, hashed) = handoff.value
                    transfer.hasher = hasher
                    transfer.hashedUpTo = hashed
                    if count > 0 { link.connection.send([.resourceChunk(.init(id: id, offset: offset, data: data))]) }
                    if hashed == transfer.size, transfer.digest == nil {
                        let digest = Array(transfer.hasher.finalize())
                        transfer.digest = digest
                        link.connection.send([.resourceDigest(id: id, sha256: digest)])
                    }
                    node.outgoingTransfers[id] = transfer
                    node.pump(id)
                case .failure(let error):
                    node.outgoingTransfers[id] = transfer
                    link.connection.send([.resourceEnd(.init(id: id, status: .failed, text: "\(error)"))])
                    node.finishOutgoing(transfer: id, state: "failed", error: "\(error)")
                }
            }
        }
    }

    private func finishOutgoing(transfer id: WireID, state: String, error: String?) {
        guard var transfer = outgoingTransfers.removeValue(forKey: id) else { return }
        close(transfer.fd)
        if state == "cancelled", links[transfer.peer.id] == nil, !transfer.removeAfter {
            // The receiver is told when it is back (it keeps a `.part` file until then).
            try? store.updateTransfer(id: id.description, state: "cancelled", now: Self.nowMilliseconds())
        } else {
            try? store.deleteTransfer(id: id.description)
        }
        if transfer.removeAfter { unlink(transfer.path) }
        transfer.state = state
        if state == "complete" { _ = try? transfer.machine.accepted(transfer.size) }
        let info = outgoingInfo(transfer, error: error)
        remember(info)
        report(info)
    }

    // MARK: Receiving

    func transferFrame(_ frame: WireFrame, from link: Link) {
        switch frame {
        case .resourceOffer(let offer):
            received(offer, from: link)
        case .resourceAccept(let accept):
            guard var transfer = outgoingTransfers[accept.id], transfer.peer.id == link.peer.id else { return }
            do { try transfer.machine.accepted(accept.offset) } catch {
                link.connection.send([.resourceEnd(.init(id: accept.id, status: .failed, text: "bad offset \(accept.offset)"))])
                finishOutgoing(transfer: accept.id, state: "failed", error: "the receiver sent a bad offset")
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
            // Progress is reported once bytes are written (see `write`), not when they arrive: a disk
            // slower than the network then holds the sender back instead of filling this daemon's memory.
            perform(actions.filter { if case .sendAccept = $0 { false } else { true } }, for: chunk.id, link: link)
            write(chunk.id)
        case .resourceDigest(let id, let digest):
            guard var transfer = incomingTransfers[id], transfer.peer.id == link.peer.id, transfer.offer.digestFollows else { return }
            transfer.expected = digest
            incomingTransfers[id] = transfer
            write(id)  // verifies now if every byte is written
        case .resourceEnd(let end):
            if outgoingTransfers[end.id]?.peer.id == link.peer.id {
                let state = switch end.status { case .complete: "complete"; case .refused: "refused"; case .cancelled: "cancelled"; case .failed: "failed" }
                finishOutgoing(transfer: end.id, state: state, error: end.text.isEmpty ? nil : end.text)
            } else if var transfer = incomingTransfers[end.id], transfer.peer.id == link.peer.id {
                let actions = transfer.machine.cancel(byPeer: true)
                incomingTransfers[end.id] = transfer
                perform(actions, for: end.id, link: nil)
            } else if end.status == .cancelled, let saved = try? store.transfer(id: end.id.description), !saved.outgoing,
                      saved.state == "active", saved.peerID == link.peer.id.rawValue {
                // Cancelled by the sender while we were apart (this daemon restarted meanwhile).
                unlink(saved.path)
                try? store.updateTransfer(id: saved.id, state: "cancelled", now: Self.nowMilliseconds())
                let info = TransferInfo(state: "cancelled", id: saved.id, direction: .incoming, peer: link.peer, name: saved.name,
                                        size: UInt64(max(0, saved.size)), done: 0, rate: 0, error: "cancelled by the sender")
                remember(info)
                report(info)
            }
        default:
            break
        }
    }

    private func received(_ offer: WireFrame.ResourceOffer, from link: Link) {
        if var transfer = incomingTransfers[offer.id] {
            // Offered again over a new connection: go on from what is held (no byte is asked for twice).
            guard transfer.peer.id == link.peer.id, transfer.offer.size == offer.size, transfer.offer.sha256 == offer.sha256 else { return }
            transfer.interrupted = false
            let actions = transfer.machine.resumed()
            // The sender goes on from what arrived (queued bytes are still written): later progress
            // must not go below it.
            transfer.acknowledged = max(transfer.acknowledged, transfer.machine.received)
            incomingTransfers[offer.id] = transfer
            perform(actions, for: offer.id, link: link)
            report(incomingInfo(transfer, state: "active"))
            return
        }
        guard !resumingTransfers.contains(offer.id) else { return }
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
        if offer.kind == .file, let saved = try? store.transfer(id: offer.id.description), !saved.outgoing,
           saved.peerID == link.peer.id.rawValue {
            switch saved.state {
            case "complete":
                // Received before; the sender missed our answer (the connection dropped): say it again.
                link.connection.send([.resourceEnd(.init(id: offer.id, status: .complete))])
                return
            case "cancelled":
                link.connection.send([.resourceEnd(.init(id: offer.id, status: .cancelled, text: "cancelled by the receiver"))])
                return
            case "active" where saved.size == Int64(offer.size) && saved.sha256 == Hex.string(offer.sha256) && saved.path == partPath:
                resume(offer, from: link, partPath: partPath)
                return
            default:
                break  // failed before: a new attempt from the start
            }
        }
        start(offer, from: link, partPath: partPath, fd: -1, partial: 0, hasher: SHA256())
    }

    /// After a restart: the `.part` file holds what arrived before; hash it (the final check covers it)
    /// and ask the sender for the rest.
    private func resume(_ offer: WireFrame.ResourceOffer, from link: Link, partPath: String) {
        let fd = open(partPath, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else {
            start(offer, from: link, partPath: partPath, fd: -1, partial: 0, hasher: SHA256())
            return
        }
        resumingTransfers.insert(offer.id)
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
                node.resumingTransfers.remove(offer.id)
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
            fd = open(partPath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
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
            startOffset: machine.received, written: machine.received, acknowledged: machine.received,
            expected: offer.digestFollows ? nil : offer.sha256)
        perform(actions, for: offer.id, link: link)
        write(offer.id)  // an empty (or already complete) resource has no chunk to wait for: verify now
        if let transfer = incomingTransfers[offer.id] { report(incomingInfo(transfer, state: "active")) }
    }

    private func incomingInfo(_ transfer: IncomingTransfer, state: String, path: String? = nil, error: String? = nil) -> TransferInfo {
        TransferInfo(
            state: state, id: transfer.id.description, direction: .incoming, peer: transfer.peer,
            name: transfer.machine.name ?? SafeFileNamePrintable.text(transfer.offer.name), size: transfer.machine.size,
            done: transfer.machine.received, rate: Self.rate(transfer.machine.received - min(transfer.startOffset, transfer.machine.received), since: transfer.started),
            path: path, error: error)
    }

    private func perform(_ actions: [IncomingResource.Action], for id: WireID, link: Link?) {
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
                    remember(info)
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
                perform(actions, for: id, link: links[transfer.peer.id])
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
                    // Progress every 1 MiB written (the sender keeps at most 4 MiB past it).
                    if transfer.written > transfer.acknowledged, transfer.written - transfer.acknowledged >= 1 << 20,
                       transfer.written < transfer.machine.size, !transfer.interrupted {
                        transfer.acknowledged = transfer.written
                        node.links[transfer.peer.id]?.connection.send([.resourceAccept(.init(id: id, offset: transfer.written))])
                        if transfer.written - transfer.lastReport >= 8 << 20 {
                            transfer.lastReport = transfer.written
                            node.report(node.incomingInfo(transfer, state: "active"))
                        }
                    }
                }
                node.incomingTransfers[id] = transfer
                if case .failure(let error) = result {
                    let actions = transfer.machine.writeFailed("the receiver cannot write the file: \(error)")
                    node.incomingTransfers[id] = transfer
                    node.perform(actions, for: id, link: node.links[transfer.peer.id])
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
            while true {
                let final = SafeFileName.unique(name) { candidate in access(directory + "/" + candidate, F_OK) == 0 }
                let target = directory + "/" + final
                // link() fails if the name was taken meanwhile: no file is ever overwritten.
                if link(part, target) == 0 {
                    unlink(part)
                    return target
                }
                guard errno == EEXIST else { throw SessionError("write_failed", "cannot place \(final): \(String(cString: strerror(errno)))") }
            }
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
                node.remember(info)
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
                    do {
                        try node.store.transaction {
                            for record in records {
                                let stored = StoredMessage(
                                    id: record.id.description, room: room.rawValue, senderID: record.senderID, senderName: record.senderName,
                                    sequence: Int64(truncatingIfNeeded: record.sequence),
                                    timestamp: Int64(truncatingIfNeeded: min(record.timestampMilliseconds, UInt64(Int64.max))),
                                    kind: record.kind == .file ? .file : .text, body: record.body)
                                if try node.store.insert(stored, now: SessionNode.nowMilliseconds()) { added += 1 }
                            }
                        }
                        node.links[transfer.peer.id]?.connection.send([.resourceEnd(.init(id: id, status: .complete))])
                        node.notice(room, "\(added) earlier message\(added == 1 ? "" : "s") from \(transfer.peer.name)'s history")
                        info = node.incomingInfo(transfer, state: "complete")
                    } catch {
                        node.links[transfer.peer.id]?.connection.send([.resourceEnd(.init(id: id, status: .failed, text: "cannot store the history"))])
                        info = node.incomingInfo(transfer, state: "failed", error: "cannot store the history: \(error)")
                    }
                case .failure(let error):
                    node.links[transfer.peer.id]?.connection.send([.resourceEnd(.init(id: id, status: .failed, text: "invalid history: \(error)"))])
                    info = node.incomingInfo(transfer, state: "failed", error: "invalid history: \(error)")
                }
                node.remember(info)
                node.report(info)
            }
        }
    }

    // MARK: Both

    public var transfers: [TransferInfo] {
        var list = outgoingTransfers.values.map { outgoingInfo($0) }
        list += incomingTransfers.values.map { incomingInfo($0, state: $0.interrupted ? "interrupted" : "active") }
        // Interrupted before this daemon restarted: resumed when the sender offers them again.
        for saved in (try? store.transfers()) ?? [] where !saved.outgoing && saved.state == "active" {
            guard let id = WireID(hex: saved.id), incomingTransfers[id] == nil, let peer = PeerID(saved.peerID) else { continue }
            var info = stat()
            let held = stat(saved.path, &info) == 0 ? UInt64(max(0, info.st_size)) : 0
            list.append(TransferInfo(state: "interrupted", id: saved.id, direction: .incoming, peer: SessionPeer(id: peer, name: saved.peerName),
                                     name: saved.name, size: UInt64(max(0, saved.size)), done: held, rate: 0))
        }
        return list + finishedTransfers
    }

    /// Cancels a transfer in either direction (by id or unique prefix).
    public func cancelTransfer(_ prefix: String) throws(SessionError) -> TransferInfo {
        let lower = prefix.lowercased()
        guard !lower.isEmpty else { throw SessionError("unknown_transfer", "give a transfer id (see `lanchat transfers`)") }
        if let id = outgoingTransfers.keys.first(where: { $0.description.hasPrefix(lower) }) {
            let peer = outgoingTransfers[id]!.peer.id
            links[peer]?.connection.send([.resourceEnd(.init(id: id, status: .cancelled, text: "cancelled by the sender"))])
            finishOutgoing(transfer: id, state: "cancelled", error: "cancelled here")
            return finishedTransfers.last!
        }
        if let id = incomingTransfers.keys.first(where: { $0.description.hasPrefix(lower) }), var transfer = incomingTransfers[id] {
            let actions = transfer.machine.cancel(byPeer: false)
            incomingTransfers[id] = transfer
            perform(actions, for: id, link: links[transfer.peer.id])
            return finishedTransfers.last!
        }
        if let saved = ((try? store.transfers()) ?? []).first(where: { !$0.outgoing && $0.state == "active" && $0.id.hasPrefix(lower) }),
           let peer = PeerID(saved.peerID) {
            // Interrupted and this daemon restarted since: remove the partial file; a later offer is refused.
            unlink(saved.path)
            try? store.updateTransfer(id: saved.id, state: "cancelled", now: Self.nowMilliseconds())
            let info = TransferInfo(state: "cancelled", id: saved.id, direction: .incoming, peer: SessionPeer(id: peer, name: saved.peerName),
                                    name: saved.name, size: UInt64(max(0, saved.size)), done: 0, rate: 0, error: "cancelled here")
            remember(info)
            report(info)
            return info
        }
        throw SessionError("unknown_transfer", "no active transfer '\(prefix)' (see `lanchat transfers`)")
    }

    /// The connection to `peer` ended: files wait to be resumed (sender) or keep their `.part` file
    /// (receiver); a history resource is simply lost (the newcomer asks again when it reconnects).
    func transfersLost(peer: PeerID, reason: String) {
        for (id, var transfer) in outgoingTransfers where transfer.peer.id == peer {
            if transfer.removeAfter {
                finishOutgoing(transfer: id, state: "failed", error: reason)
                continue
            }
            transfer.machine.interrupted()
            transfer.state = "waiting"
            outgoingTransfers[id] = transfer
            report(outgoingInfo(transfer, error: "\(reason); resumes when \(transfer.peer.name) is back"))
        }
        for (id, var transfer) in incomingTransfers where transfer.peer.id == peer {
            if transfer.offer.kind == .history {
                let actions = transfer.machine.writeFailed(reason)
                incomingTransfers[id] = transfer
                perform(actions, for: id, link: nil)
                continue
            }
            transfer.interrupted = true
            incomingTransfers[id] = transfer
            report(incomingInfo(transfer, state: "interrupted", error: "\(reason); resumes when \(transfer.peer.name) offers it again"))
        }
    }

    func closeTransfers() {
        for transfer in outgoingTransfers.values { close(transfer.fd) }
        for transfer in incomingTransfers.values where transfer.fd >= 0 { close(transfer.fd) }
        outgoingTransfers = [:]
        incomingTransfers = [:]
    }

    private func remember(_ info: TransferInfo) {
        finishedTransfers.append(info)
        if finishedTransfers.count > 100 { finishedTransfers.removeFirst(finishedTransfers.count - 100) }
    }

    private func report(_ info: TransferInfo) {
        emitTransfer(info)
    }
}

/// For names that were refused: something printable to show.
enum SafeFileNamePrintable {
    static func text(_ raw: [UInt8]) -> String {
        let decoded = String(decoding: raw.prefix(200), as: UTF8.self)
        return String(String.UnicodeScalarView(decoded.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? "?" : $0 }))
    }
}

/// A transfer as a program follows it: bytes done, total and rate, the state, and a way to cancel.
public struct ResourceProgress: Sendable {
    public let id: String
    let node: SessionNode

    /// The transfer now (`done`, `size`, `rate`, `state`; `path` once an incoming file is placed).
    public func snapshot() async -> TransferInfo? {
        await node.transfers.last { $0.id == id }
    }

    /// Ends it on both sides (the receiver removes its partial file).
    public func cancel() async throws(SessionError) {
        _ = try await node.cancelTransfer(id)
    }
}
