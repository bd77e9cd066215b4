import Crypto
import Glibc
import LanchatCore
import LanchatEngine
import LanchatWire
import NIOCore
import NIOPosix

/// A transfer's file on this side: the descriptor, and the SHA-256 of its bytes in order (the sender
/// hashes what it reads, the receiver what it writes). The engine decides; this is only the file.
struct TransferFile {
    var fd: Int32
    /// Outgoing: the file sent (never removed here). Incoming: the hidden part file.
    var path: String
    var incoming: Bool
    var size: UInt64 = 0
    var hasher = SHA256()
    var hashedUpTo: UInt64 = 0
    /// Outgoing: the SHA-256, once every byte is hashed.
    var digest: [UInt8]?
    /// Incoming: chunks to write, in order, one batch at a time on the file thread.
    var queue: [(offset: UInt64, data: ByteBuffer)] = []
    // These three are the file thread's work in progress on this descriptor, which the engine cannot
    // know (it asks for work and hears answers; it never sees a pwrite under way): they mirror no engine
    // state. When the engine ends a transfer (`FileAction.close`) its machine is gone at once, but the
    // descriptor must outlive the write or hash still running on it.
    /// A read or write is under way on the file thread: the descriptor is closed only after it.
    var busy = false
    /// The transfer ended while busy: close (and remove the part file, `removeOnClose`) when it is done.
    var closing = false
    var removeOnClose = false
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
                throw SessionError(.badFile, "cannot read \(path): \(String(cString: strerror(errno)))")
            }
            guard (info.st_mode & S_IFMT) == S_IFREG else { throw SessionError(.badFile, "\(path) is not a regular file") }
            fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw SessionError(.badFile, "cannot open \(path): \(String(cString: strerror(errno)))") }
        }
        return try opened(fd, path: path)
    }

    /// A descriptor already open (closed on failure).
    static func opened(_ fd: Int32, path: String) throws(SessionError) -> ResourceFile {
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw SessionError(.badFile, "\(path) is not a regular file")
        }
        let modified = UInt64(max(0, info.st_mtim.tv_sec)) * 1000 + UInt64(info.st_mtim.tv_nsec / 1_000_000)
        return ResourceFile(fd: fd, path: path, size: UInt64(info.st_size), modified: modified, identity: identity(info))
    }
}

/// Ended transfers are remembered this long (a late re-offer is answered), and interrupted ones are
/// given up after it (their `.part` file removed).
let transferRetention: Int64 = 7 * 24 * 3600 * 1000

extension SessionNode {
    // MARK: Sending

    /// Offers a file to a peer; progress and the outcome arrive as `.transfer` events. Returns the
    /// transfer id once the offer is sent.
    public func sendFile(_ path: String, to peer: SessionPeer) async throws(SessionError) -> WireID {
        try await sendResource(path, to: peer)
    }

    /// Sends the file open on `descriptor` (the node takes it over and closes it), named after `path`:
    /// for a daemon that cannot open people's files itself (the client passed the descriptor).
    public func sendFile(descriptor: Int32, path: String, to peer: SessionPeer) async throws(SessionError) -> WireID {
        try await sendResource(path, to: peer, descriptor: descriptor)
    }

    /// Like `sendFile`, returning a handle to follow and cancel the transfer (Multipeer Connectivity's
    /// `sendResource` returns an `NSProgress`).
    public func sendResource(at path: String, to peer: SessionPeer) async throws(SessionError) -> ResourceProgress {
        ResourceProgress(id: try await sendFile(path, to: peer), node: self)
    }

    /// Sends a newcomer the room's history (records in `HistoryRecord` format) as a resource, on the
    /// connection its request came on. The export is a nameless temporary file in the history directory
    /// (under the state directory, not `/tmp`): only its descriptor reads it, so it goes with the transfer.
    /// `layout`: how its records are laid out (`HistoryEncoder`, by the peer's version). The history
    /// is read in pieces of `exportPiece` messages on the reading connection (`readCommitted`: what was
    /// committed, off the store's thread, so that no commit waits behind it), and each piece is written on
    /// the file thread (`fileIO`) while the next is read: a history of a million messages is never held
    /// whole (at most two pieces), and peers are served meanwhile.
    func exportHistory(room: RoomID, since: Int64, limit: Int, to peer: SessionPeer, layout: HistoryLayout) {
        guard let file = historyFile() else { return }
        let export = HistoryExport(file: file, room: room, since: since, limit: limit, peer: peer)
        let encoder = HistoryEncoder(layout: layout, ownID: configuration.ownID, keys: configuration.envelopes, ids: .system())
        exportHistoryPiece(export, after: nil, written: eventLoop.makeSucceededFuture(Written(size: 0, encoder: encoder)))
    }

    /// What the writes of a history so far made: its size, and the encoder to go on with (the heads it
    /// named), or nil if a write failed.
    private struct Written {
        var size: Int
        var encoder: HistoryEncoder
    }

    /// One export of a room's history to a peer (`exportHistory`).
    private struct HistoryExport {
        let file: (fd: Int32, path: String)
        let room: RoomID
        let since: Int64
        let limit: Int
        let peer: SessionPeer
    }

    /// Reads the piece after `cursor` while the one before it is written (`written`: where that write
    /// ends, nil if it failed); once both are done, this piece is written while the next is read.
    private func exportHistoryPiece(_ export: HistoryExport, after cursor: ExportCursor?, written: EventLoopFuture<Written?>) {
        let file = export.file
        guard !stopped else {
            written.whenComplete { _ in close(file.fd) }
            return
        }
        let read = readCommitted { store in
            try store.exportPage(room: export.room.rawValue, since: export.since, limit: export.limit, after: cursor, count: Self.exportPiece)
        }
        // (Neither fails early: a failed read waits for the write before it, which uses the file.)
        let readPiece = read.map { Optional.some($0) }.recover { _ in nil }
        readPiece.and(written).whenComplete { [weak self] result in
            guard let self else {
                close(file.fd)
                return
            }
            self.assumeIsolated { node in
                guard !node.stopped, case .success((let piece?, let before?)) = result else {
                    close(file.fd)
                    return
                }
                let wrote = node.writeHistory(piece.messages, to: file, at: before.size, encoder: before.encoder).map { written in
                    written.map { Written(size: before.size + $0.count, encoder: $0.encoder) }
                }
                guard let next = piece.next else {
                    wrote.whenComplete { [weak node] result in
                        guard let node else {
                            close(file.fd)
                            return
                        }
                        node.assumeIsolated { node in
                            guard !node.stopped, case .success(let written?) = result else {
                                close(file.fd)
                                return
                            }
                            node.offerHistory(file, size: written.size, room: export.room, to: export.peer, kind: written.encoder.layout.kind)
                        }
                    }
                    return
                }
                node.exportHistoryPiece(export, after: next, written: wrote)
            }
        }
    }

    /// Messages read from the store per piece of an exported history (about 160 bytes each).
    static let exportPiece = 5000

    /// The same, for messages already read: a relay answer (a few, within the relay's limit), the answer
    /// to `SessionAction.sendSync`. Written on the file thread, then offered as the relay answer to `peer`
    /// for `room` (one at a time: `SessionStateMachine.received(_:SyncRequest...)`); when none is offered
    /// (nothing lacking, a failure, the caps), the engine hears it (`relayAnswerNotOffered`).
    func sendHistory(_ messages: [StoredMessage], room: RoomID, to peer: SessionPeer, layout: HistoryLayout) {
        guard !messages.isEmpty, let file = historyFile() else { return engine.relayAnswerNotOffered(room, to: peer.id) }
        let encoder = HistoryEncoder(layout: layout, ownID: configuration.ownID, keys: configuration.envelopes, ids: .system())
        writeHistory(messages, to: file, at: 0, encoder: encoder).whenComplete { [weak self] result in
            guard let self else {
                close(file.fd)
                return
            }
            self.assumeIsolated { node in
                guard !node.stopped, case .success(let written?) = result, written.count > 0 else {
                    close(file.fd)
                    if !node.stopped { node.engine.relayAnswerNotOffered(room, to: peer.id) }
                    return
                }
                node.offerHistory(file, size: written.count, room: room, to: peer, kind: layout.kind, relayAnswer: true)
            }
        }
    }

    /// A new nameless file in the history directory.
    private func historyFile() -> (fd: Int32, path: String)? {
        let directory = storage(for: .history)
        guard case .usable = directory.prepare() else {
            logger.error("cannot export history for a newcomer", metadata: ["directory": "\(directory.path)"])
            return nil
        }
        var template = Array((directory.path + "/.lanchat-history-out-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { return nil }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        unlink(path)
        return (fd, path)
    }

    /// Writes `messages` as history records at `offset` on the file thread (`fileIO`; our own records a
    /// version 2 or 3 peer needs signed are signed there): the bytes written and the encoder to go on
    /// with, nil if the write failed (the caller closes the file). It never fails. A piece of at least
    /// `exportSplit` messages is made ready in two halves at once (`HistoryEncoder.prepare`: sealing
    /// our own records, making paths again), the second on `exportIO`; the writing stays in order.
    private func writeHistory(
        _ messages: [StoredMessage], to file: (fd: Int32, path: String), at offset: Int, encoder: HistoryEncoder
    ) -> EventLoopFuture<(count: Int, encoder: HistoryEncoder)?> {
        let fd = file.fd
        // (A sealed record is some 430 bytes, its seal's head and proof with it: room for them at once.)
        let capacity = messages.count * (encoder.layout == .sealed ? 448 : 160)
        guard messages.count >= Self.exportSplit else {
            return fileIO.runIfActive(eventLoop: eventLoop) {
                Self.written(by: encoder, capacity: capacity, to: fd, at: offset) { $0.append(messages, into: &$1) }
            }.recover { _ in nil }
        }
        let cut = messages.count / 2
        let (first, second) = (Array(messages[..<cut]), Array(messages[cut...]))
        let other = encoder.forPreparing(ids: .system())
        let later = exportIO.runIfActive(eventLoop: eventLoop) { () -> HistoryEncoder.Prepared in
            var other = other
            return other.prepare(second)
        }
        let (fileIO, eventLoop) = (fileIO, eventLoop)
        return fileIO.runIfActive(eventLoop: eventLoop) { () -> (HistoryEncoder, HistoryEncoder.Prepared) in
            var encoder = encoder
            let first = encoder.prepare(first)
            return (encoder, first)
        }.and(later).flatMap { prepared, later in
            fileIO.runIfActive(eventLoop: eventLoop) {
                Self.written(by: prepared.0, capacity: capacity, to: fd, at: offset) {
                    $0.write(prepared.1, into: &$1)
                    $0.write(later, into: &$1)
                }
            }
        }.recover { _ in nil }
    }

    /// What `encode` writes with `encoder` into a buffer, written to `fd` at `offset` (on the file thread):
    /// the bytes written and the encoder to go on with, nil if the write fell short.
    private static func written(
        by encoder: HistoryEncoder, capacity: Int, to fd: Int32, at offset: Int, _ encode: (inout HistoryEncoder, inout ByteBuffer) -> Void
    ) -> (count: Int, encoder: HistoryEncoder)? {
        var encoder = encoder
        var buffer = ByteBufferAllocator().buffer(capacity: capacity)
        encode(&encoder, &buffer)
        let written = buffer.withUnsafeReadableBytes { Glibc.pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
        return written == buffer.readableBytes ? (written, encoder) : nil
    }

    /// A piece of an exported history this big is made ready in two halves at once (`writeHistory`).
    static let exportSplit = 1000

    /// Offers a written history (nothing if it is empty). `relayAnswer`: the answer to a SYNC_REQUEST.
    private func offerHistory(
        _ file: (fd: Int32, path: String), size: Int, room: RoomID, to peer: SessionPeer, kind: WireFrame.ResourceOffer.Kind,
        relayAnswer: Bool = false
    ) {
        guard size > 0, let resource = try? ResourceFile.opened(file.fd, path: file.path) else {  // (closed by `opened` if it fails)
            if size <= 0 { close(file.fd) }
            if relayAnswer { engine.relayAnswerNotOffered(room, to: peer.id) }
            return
        }
        do {
            _ = try offer(
                resource, name: "history of \(room.rawValue)", to: peer.id, kind: kind, room: room,
                ephemeral: true, relayAnswer: relayAnswer)
        } catch {
            logger.notice("history not offered", metadata: ["room": "\(room)", "peer": "\(peer.id.short)", "why": "\(error.message)"])
        }
    }

    /// Opens (or takes over `descriptor`), dials the peer and offers the file.
    func sendResource(_ path: String, to peer: SessionPeer, descriptor: Int32? = nil) async throws(SessionError) -> WireID {
        let file = try ResourceFile.open(path, descriptor: descriptor)
        switch await dial(peer.id) {
        case .success: break
        case .failure(let error):
            close(file.fd)
            throw SessionError(.unreachable, "\(peer.name): \(error.message)")
        }
        let name = file.path.split(separator: "/").last.map(String.init) ?? file.path
        return try offer(file, name: name, to: peer.id, kind: .file, room: nil, ephemeral: false)
    }

    /// Hands an open file to the engine, which offers it (hashed while it is sent: no pass over the
    /// file before the first byte goes out).
    private func offer(
        _ file: ResourceFile, name: String, to peer: PeerID, kind: WireFrame.ResourceOffer.Kind, room: RoomID?, ephemeral: Bool,
        relayAnswer: Bool = false
    ) throws(SessionError) -> WireID {
        let offered = OfferedFile(path: file.path, name: name, size: file.size, modifiedMilliseconds: file.modified, identity: file.identity)
        let id: WireID
        let actions: [SessionAction]
        do {
            (id, actions) = try engine.offerResource(offered, to: peer, kind: kind, room: room, ephemeral: ephemeral, relayAnswer: relayAnswer, at: time())
        } catch {
            close(file.fd)
            throw error
        }
        files[id] = TransferFile(fd: file.fd, path: file.path, incoming: false, size: file.size)
        perform(actions)
        return id
    }

    /// After a restart: outgoing transfers that did not end wait for their peer (if their file is still
    /// the very same); incoming ones that ended long ago are forgotten, and given-up part files removed.
    func restoreTransfers() {
        let now = Self.nowMilliseconds()
        let (pruned, kept) = restoredTransfers  // (read when the node was made)
        restoredTransfers = ([], [])
        for old in pruned where !old.outgoing && old.state == "active" {
            unlink(old.path)
        }
        for saved in kept where saved.outgoing {
            guard let id = WireID(hex: saved.id), let peerID = PeerID(saved.peerID) else { continue }
            if saved.state == "cancelled" {
                engine.restoreCancelled(id, to: peerID, at: time())
                continue
            }
            guard saved.state == "active", let digest = Hex.bytes(saved.sha256) else { continue }
            let peer = SessionPeer(id: peerID, name: saved.peerName)
            var info = stat()
            let fd = open(saved.path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)  // (never blocks on a FIFO put at the path)
            let openError = errno
            let modified =
                fd >= 0 && fstat(fd, &info) == 0
                ? Int64(info.st_mtim.tv_sec) * 1000 + Int64(info.st_mtim.tv_nsec / 1_000_000) : -1
            // The very file that was sent (its device and inode), not whatever the path names now: a
            // client that handed over its own file must not get another one sent under that path.
            let same = fd >= 0 && (saved.fileIdentity.isEmpty || ResourceFile.identity(info) == saved.fileIdentity)
            guard fd >= 0, same, Int64(info.st_size) == saved.size, modified == saved.modified else {
                if fd >= 0 { close(fd) }
                _ = storeThread.run(on: eventLoop) { try? $0.updateTransfer(id: saved.id, state: "failed", now: now) }
                engine.keepEnded(
                    TransferInfo(
                        state: .failed, id: id, direction: .outgoing, peer: peer, name: saved.name,
                        size: UInt64(max(0, saved.size)), done: 0, rate: 0, path: saved.path,
                        error: fd >= 0
                            ? "\(saved.path) changed while the session was stopped"
                            : "cannot reopen \(saved.path) after a restart: \(String(cString: strerror(openError)))")
                )
                continue
            }
            let size = UInt64(saved.size)
            files[id] = TransferFile(fd: fd, path: saved.path, incoming: false, size: size)
            engine.restoreOutgoing(
                id, to: peer,
                file: OfferedFile(
                    path: saved.path, name: saved.name, size: size, modifiedMilliseconds: UInt64(max(0, saved.modified)),
                    identity: saved.fileIdentity),
                digest: digest, sentMark: UInt64(max(0, saved.sentMark)), resent: UInt64(max(0, saved.resent)))
        }
    }

    // MARK: Both

    public var transfers: [TransferInfo] {
        get async {
            let saved = (try? await onStore { try $0.transfers() }) ?? []
            return transfers(saved: saved)
        }
    }

    private func transfers(saved records: [StoredTransfer]) -> [TransferInfo] {
        let now = time()
        var list = engine.transfersUnderWay(at: now)
        let listed = Set(list.map(\.id))
        // Interrupted before this daemon restarted: resumed when the sender offers them again.
        for saved in records where !saved.outgoing && saved.state == "active" {
            guard let id = WireID(hex: saved.id), !listed.contains(id), let peer = PeerID(saved.peerID) else { continue }
            var info = stat()
            let held = stat(saved.path, &info) == 0 ? UInt64(max(0, info.st_size)) : 0
            list.append(
                TransferInfo(
                    state: .interrupted, id: id, direction: .incoming,
                    peer: SessionPeer(id: peer, name: saved.peerName), name: saved.name, size: UInt64(max(0, saved.size)),
                    done: held, rate: 0))
        }
        return list + engine.endedTransfers
    }

    /// Cancels a transfer in either direction (by id or unique prefix).
    public func cancelTransfer(_ prefix: String) async throws(SessionError) -> TransferInfo {
        let lower = prefix.lowercased()
        guard !lower.isEmpty else { throw SessionError(.unknownTransfer, "give a transfer id (see `lanchat transfers`)") }
        if let (info, actions) = try engine.cancelTransfer(lower, at: time()) {
            perform(actions)
            return info
        }
        let records = (try? await onStore { try $0.transfers() }) ?? []
        // (The sender may have offered it again meanwhile: then it is the engine's to cancel.)
        if let (info, actions) = try engine.cancelTransfer(lower, at: time()) {
            perform(actions)
            return info
        }
        if let saved = records.first(where: { !$0.outgoing && $0.state == "active" && $0.id.hasPrefix(lower) }),
            let id = WireID(hex: saved.id), let peer = PeerID(saved.peerID)
        {
            // Interrupted and this daemon restarted since: remove the partial file; a later offer is refused.
            return cancelSaved(saved, id: id, peer: SessionPeer(id: peer, name: saved.peerName), error: "cancelled here")
        }
        throw SessionError(.unknownTransfer, "no active transfer '\(prefix)' (see `lanchat transfers`)")
    }

    /// Cancels an incoming transfer known only to the store (interrupted before a restart): its part
    /// file goes, the store and `lanchat transfers` say cancelled.
    @discardableResult
    func cancelSaved(_ saved: StoredTransfer, id: WireID, peer: SessionPeer, error: String) -> TransferInfo {
        unlink(saved.path)
        // (In a transaction: a bulk write open meanwhile would otherwise hold it uncommitted.)
        let now = Self.nowMilliseconds()
        _ = storeThread.run(on: eventLoop) { store in try? store.transaction { try store.updateTransfer(id: saved.id, state: "cancelled", now: now) } }
        let info = TransferInfo(
            state: .cancelled, id: id, direction: .incoming, peer: peer, name: saved.name,
            size: UInt64(max(0, saved.size)), done: 0, rate: 0, error: error)
        engine.keepEnded(info)
        emitTransfer(info)
        return info
    }

    /// The node stops: every transfer file is closed (one in use on the file thread once that is done).
    func closeTransfers() {
        for (id, file) in files {
            if file.busy {
                files[id]?.closing = true
                continue
            }
            if file.fd >= 0 { close(file.fd) }
            files[id] = nil
        }
    }
}

/// A transfer as a program follows it: bytes done, total and rate, the state, and a way to cancel.
public struct ResourceProgress: Sendable {
    public let id: WireID
    let node: SessionNode

    /// The transfer now (`done`, `size`, `rate`, `state`; `path` once an incoming file is placed).
    public func snapshot() async -> TransferInfo? {
        await node.transfers.last { $0.id == id }
    }

    /// Ends it on both sides (the receiver removes its partial file).
    public func cancel() async throws(SessionError) {
        _ = try await node.cancelTransfer(id.description)
    }
}
