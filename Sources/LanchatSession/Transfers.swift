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
    /// A history export: its file has no name (only the descriptor reads it, and it goes when the
    /// transfer ends, a crash included); not saved, not resumed.
    var ephemeral = false
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
    /// Bytes written to the `.part` file (the machine reports progress from it).
    var written: UInt64 = 0
    /// The SHA-256 to check: from the offer, or from RESOURCE_DIGEST when the offer said it follows.
    var expected: [UInt8]?
}

/// A regular file open for sending: its descriptor (the transfer owns it), size, mtime and identity.
struct ResourceFile {
    var fd: Int32
    var path: String
    var size: UInt64
    var modified: UInt64
    /// "device:inode": after a restart, the path is reopened only if it is still this file.
    var identity: String

    static func identity(_ info: stat) -> String { "\(info.st_dev):\(info.st_ino)" }

    /// Opens `path` (or takes over `descriptor`, closing it on failure); only regular files.
    static func open(_ path: String, descriptor: Int32?) throws(SessionError) -> ResourceFile {
        let fd: Int32
        if let descriptor {
            fd = descriptor
        } else {
            var info = stat()
            guard stat(path, &info) == 0 else {
                throw SessionError("bad_file", "cannot read \(path): \(String(cString: strerror(errno)))")
            }
            guard (info.st_mode & S_IFMT) == S_IFREG else { throw SessionError("bad_file", "\(path) is not a regular file") }
            fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw SessionError("bad_file", "cannot open \(path): \(String(cString: strerror(errno)))") }
        }
        return try opened(fd, path: path)
    }

    /// A descriptor already open (closed on failure).
    static func opened(_ fd: Int32, path: String) throws(SessionError) -> ResourceFile {
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw SessionError("bad_file", "\(path) is not a regular file")
        }
        let modified = UInt64(max(0, info.st_mtim.tv_sec)) * 1000 + UInt64(info.st_mtim.tv_nsec / 1_000_000)
        return ResourceFile(fd: fd, path: path, size: UInt64(info.st_size), modified: modified, identity: identity(info))
    }
}

/// Ended transfers are remembered this long (a late re-offer is answered), and interrupted ones are
/// given up after it (their `.part` file removed).
let transferRetention: Int64 = 7 * 24 * 3600 * 1000

/// A value moved to the file thread and back; only one side touches it at a time.
struct Handoff<Value>: @unchecked Sendable {
    var value: Value
}

extension SessionNode {
    // MARK: Sending

    /// Offers a file to a peer; progress and the outcome arrive as `.transfer` events. Returns the
    /// transfer id once the file is hashed and the offer is sent.
    public func sendFile(_ path: String, to peer: SessionPeer) async throws(SessionError) -> String {
        try await sendResource(path, to: peer)
    }

    /// Sends the file open on `descriptor` (the node takes it over and closes it), named after `path`:
    /// for a daemon that cannot open people's files itself (the client passed the descriptor).
    public func sendFile(descriptor: Int32, path: String, to peer: SessionPeer) async throws(SessionError) -> String {
        try await sendResource(path, to: peer, descriptor: descriptor)
    }

    /// Like `sendFile`, returning a handle to follow and cancel the transfer (Multipeer Connectivity's
    /// `sendResource` returns an `NSProgress`).
    public func sendResource(at path: String, to peer: SessionPeer) async throws(SessionError) -> ResourceProgress {
        ResourceProgress(id: try await sendFile(path, to: peer), node: self)
    }

    /// Sends a newcomer the room's history (records in `HistoryRecord` format) as a resource, on the
    /// connection its request came on. The export is a temporary file in the history directory (under
    /// the state directory, not `/tmp`), removed when the transfer ends.
    func sendHistory(_ messages: [StoredMessage], room: RoomID, to peer: SessionPeer) {
        guard !messages.isEmpty, let link = links[peer.id] else { return }
        var buffer = ByteBufferAllocator().buffer(capacity: messages.count * 160)
        for message in messages {
            guard let id = WireID(hex: message.id) else { continue }
            let record = HistoryRecord(
                id: id, senderID: message.senderID, senderName: message.senderName, sequence: UInt64(max(0, message.sequence)),
                timestampMilliseconds: UInt64(max(0, message.timestamp)), kind: message.kind == .file ? .file : .text, body: message.body)
            try? record.encode(into: &buffer)
        }
        let directory = storage(for: .history)
        guard case .usable = directory.prepare() else {
            logger.error("cannot export history for a newcomer", metadata: ["directory": "\(directory.path)"])
            return
        }
        var template = Array((directory.path + "/.lanchat-history-out-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { return }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        // Only the descriptor reads it from here on: nameless, it cannot outlive the transfer.
        unlink(path)
        let written = buffer.withUnsafeReadableBytes { Glibc.pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard written == buffer.readableBytes else {
            close(fd)
            return
        }
        _ = try? offerResource(ResourceFile.opened(fd, path: path), on: link, kind: .history, room: room, ephemeral: true)
    }

    /// Opens (or takes over `descriptor`), dials the peer and offers the file.
    func sendResource(_ path: String, to peer: SessionPeer, descriptor: Int32? = nil) async throws(SessionError) -> String {
        let file = try ResourceFile.open(path, descriptor: descriptor)
        let link: Link
        switch await dial(peer.id) {
        case .success(let value): link = value
        case .failure(let error):
            close(file.fd)
            throw SessionError("unreachable", "\(peer.name): \(error.message)")
        }
        return try offerResource(file, on: link, kind: .file, room: nil, ephemeral: false)
    }

    /// Offers an open file on a connection (hashed while it is sent: no pass over the file before the
    /// first byte goes out). Returns the transfer id.
    private func offerResource(
        _ file: ResourceFile, on link: Link, kind: WireFrame.ResourceOffer.Kind, room: RoomID?, ephemeral: Bool
    ) throws(SessionError) -> String {
        let name = kind == .history ? "history of \(room?.rawValue ?? "?")" : file.path.split(separator: "/").last.map(String.init) ?? file.path
        let id = WireID.random()
        let offer = WireFrame.ResourceOffer(
            id: id, room: room, kind: kind, name: Array(name.utf8), size: file.size, sha256: [], modifiedMilliseconds: file.modified,
            digestFollows: true)
        if !ephemeral {
            // Kept until it ends, so that a restarted daemon resumes it.
            try? store.saveTransfer(StoredTransfer(
                id: id.description, outgoing: true, peerID: link.peer.id.rawValue, peerName: link.peer.name, path: file.path, name: name,
                size: Int64(file.size), sha256: Hex.string(offer.sha256), modified: Int64(file.modified), fileIdentity: file.identity),
                now: Self.nowMilliseconds())
        }
        outgoingTransfers[id] = OutgoingTransfer(
            id: id, peer: link.peer, path: file.path, name: name, fd: file.fd, size: file.size, machine: OutgoingResource(size: file.size),
            offer: offer, ephemeral: ephemeral)
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
            let fd = open(saved.path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)  // (never blocks on a FIFO put at the path)
            let openError = errno
            let modified = fd >= 0 && fstat(fd, &info) == 0
                ? Int64(info.st_mtim.tv_sec) * 1000 + Int64(info.st_mtim.tv_nsec / 1_000_000) : -1
            // The very file that was sent (its device and inode), not whatever the path names now: a
            // client that handed over its own file must not get another one sent under that path.
            let same = fd >= 0 && (saved.fileIdentity.isEmpty || ResourceFile.identity(info) == saved.fileIdentity)
            guard fd >= 0, same, Int64(info.st_size) == saved.size, modified == saved.modified else {
                if fd >= 0 { close(fd) }
                try? store.updateTransfer(id: saved.id, state: "failed", now: now)
                keepEnded(TransferInfo(
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

    func outgoingInfo(_ transfer: OutgoingTransfer, error: String? = nil) -> TransferInfo {
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
    func pump(_ id: WireID) {
        guard var transfer = outgoingTransfers[id], !transfer.reading, let link = links[transfer.peer.id] else { return }
        let next = transfer.machine.nextChunk()
        if next == nil {
            // Nothing left to send in this attempt; a resumed sender may still owe the digest.
            guard transfer.machine.isFinishedSending, transfer.digest == nil else { return }
        }
        let (offset, count) = next ?? (transfer.size, 0)
        if !transfer.ephemeral, offset + UInt64(count) > transfer.sentMark {
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
                    node.endOutgoingTransfer(id, state: "failed", error: "\(error)")
                }
            }
        }
    }

    func endOutgoingTransfer(_ id: WireID, state: String, error: String?) {
        guard var transfer = outgoingTransfers.removeValue(forKey: id) else { return }
        close(transfer.fd)
        if state == "cancelled", links[transfer.peer.id] == nil, !transfer.ephemeral {
            // The receiver is told when it is back (it keeps a `.part` file until then).
            try? store.updateTransfer(id: id.description, state: "cancelled", now: Self.nowMilliseconds())
        } else {
            try? store.deleteTransfer(id: id.description)
        }
        transfer.state = state
        if state == "complete" { _ = try? transfer.machine.accepted(transfer.size) }
        let info = outgoingInfo(transfer, error: error)
        keepEnded(info)
        report(info)
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
            endOutgoingTransfer(id, state: "cancelled", error: "cancelled here")
            return finishedTransfers.last!
        }
        if let id = incomingTransfers.keys.first(where: { $0.description.hasPrefix(lower) }), var transfer = incomingTransfers[id] {
            let actions = transfer.machine.cancel(byPeer: false)
            incomingTransfers[id] = transfer
            performIncoming(actions, for: id, link: links[transfer.peer.id])
            return finishedTransfers.last!
        }
        if let saved = ((try? store.transfers()) ?? []).first(where: { !$0.outgoing && $0.state == "active" && $0.id.hasPrefix(lower) }),
           let peer = PeerID(saved.peerID) {
            // Interrupted and this daemon restarted since: remove the partial file; a later offer is refused.
            unlink(saved.path)
            try? store.updateTransfer(id: saved.id, state: "cancelled", now: Self.nowMilliseconds())
            let info = TransferInfo(state: "cancelled", id: saved.id, direction: .incoming, peer: SessionPeer(id: peer, name: saved.peerName),
                                    name: saved.name, size: UInt64(max(0, saved.size)), done: 0, rate: 0, error: "cancelled here")
            keepEnded(info)
            report(info)
            return info
        }
        throw SessionError("unknown_transfer", "no active transfer '\(prefix)' (see `lanchat transfers`)")
    }

    /// The connection to `peer` ended: files wait to be resumed (sender) or keep their `.part` file
    /// (receiver); a history resource is simply lost (the newcomer asks again when it reconnects).
    func transfersLost(peer: PeerID, reason: String) {
        for (id, var transfer) in outgoingTransfers where transfer.peer.id == peer {
            if transfer.ephemeral {
                endOutgoingTransfer(id, state: "failed", error: reason)
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
                performIncoming(actions, for: id, link: nil)
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

    /// Keeps an ended transfer in `lanchat transfers` (the last 100).
    func keepEnded(_ info: TransferInfo) {
        finishedTransfers.append(info)
        if finishedTransfers.count > 100 { finishedTransfers.removeFirst(finishedTransfers.count - 100) }
    }

    func report(_ info: TransferInfo) {
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
