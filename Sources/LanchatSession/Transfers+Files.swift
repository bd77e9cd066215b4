import Crypto
import Glibc
import LanchatCore
import LanchatEngine
import LanchatTransfer
import LanchatWire
import NIOCore
import NIOPosix

/// The file work of transfers, as the engine asks for it (`FileAction`): reads that hash the sent file
/// in order, part files made and resumed, writes in order on the file thread (hashed just before they
/// are written), the hash at the end, placing under a free name, a room's history imported. Each answer
/// goes back to the engine, which decides what follows.
extension SessionNode {
    func performFile(_ action: FileAction) {
        switch action {
        case .read(let id, let offset, let count): read(id, offset: offset, count: count)
        case .lookUp(let offer, let peer): lookUp(offer, from: peer)
        case .openPart(let offer, let resume): openPart(offer.id, kind: offer.kind, size: offer.size, resume: resume)
        case .write(let id, let offset, let data):
            guard files[id] != nil else { return }
            files[id]!.queue.append((offset, data))
            write(id)
        case .verify(let id):
            guard var file = files[id] else {
                perform(engine.fileFailed(id, "its part file is gone", at: time()))
                return
            }
            let digest = Array(file.hasher.finalize())
            file.hasher = SHA256()
            files[id] = file
            perform(engine.hashed(id, digest: digest, at: time()))
        case .place(let id, let name, let modified): place(id, as: name, modified: modified)
        case .serveShared(let request, let peer): serveShared(request, to: peer)
        case .placeShared(let id, let file, let destination): placeShared(id, file, destination: destination)
        case .importHistory(let id, let room, let peer, let layout): importHistory(id, room: room, from: peer, layout: layout)
        case .close(let id, let removePart):
            guard var file = files[id] else {
                // Ended before its part file was handed over (being hashed, or never opened): a part file an
                // earlier attempt left under this id goes (only ever one named after our own transfer id).
                if removePart { for kind in [WireFrame.ResourceOffer.Kind.file, .history, .shared] { unlink(partPath(id, kind)) } }
                return
            }
            guard !file.busy else {
                // A read or write is under way on the file thread with this descriptor: closed after it.
                file.closing = true
                file.removeOnClose = removePart
                files[id] = file
                return
            }
            files[id] = nil
            if file.fd >= 0 { close(file.fd) }
            if removePart, file.incoming { unlink(file.path) }
        case .cancelledWhileApart(let id, let peer):
            savedTransfer(id) { node, saved in node.cancelledWhileApart(id, saved, by: peer) }
        }
    }

    /// The store's record of a transfer (nil: none, or the read failed), read on the store's thread; then
    /// `body`, on the event loop, unless the node stopped meanwhile.
    private func savedTransfer(_ id: WireID, _ body: @escaping @Sendable (isolated SessionNode, StoredTransfer?) -> Void) {
        storeThread.run(on: eventLoop) { try? $0.transfer(id: id.description) }.whenSuccess { [weak self] saved in
            self?.assumeIsolated { node in
                guard !node.stopped else { return }
                body(node, saved)
            }
        }
    }

    /// The sender of a transfer interrupted before a restart cancelled it.
    private func cancelledWhileApart(_ id: WireID, _ saved: StoredTransfer?, by peer: SessionPeer) {
        guard let saved, !saved.outgoing, saved.peerID == peer.id.rawValue else { return }
        guard saved.state == "active" else {
            // Heard before, but the sender missed our answer: it keeps telling until it hears it.
            if saved.state == TransferState.cancelled.rawValue { perform(engine.cancelHeard(id, from: peer.id)) }
            return
        }
        cancelSaved(saved, id: id, peer: peer, error: "cancelled by the sender")
        perform(engine.cancelHeard(id, from: peer.id))
    }

    /// When a read or write with `id`'s descriptor is done on the file thread: the descriptor is no longer
    /// busy; it is closed if the transfer ended meanwhile (or the node stopped); otherwise `body` gets the
    /// file (to store back before anything else runs) and the outcome.
    private func afterFileWork<Value: Sendable>(
        _ id: WireID, _ future: EventLoopFuture<Value>,
        _ body: @escaping @Sendable (isolated SessionNode, TransferFile, Result<Value, any Error>) -> Void
    ) {
        future.whenComplete { [weak self] result in
            guard let self else { return }
            self.assumeIsolated { node in
                guard var file = node.files[id] else { return }
                file.busy = false
                guard !node.closedAfterWork(id, file) else { return }
                body(node, file, result)
            }
        }
    }

    /// After a read or write: the descriptor is closed now if the transfer ended meanwhile (or the node
    /// stopped). Returns whether it was.
    private func closedAfterWork(_ id: WireID, _ file: TransferFile) -> Bool {
        guard file.closing || stopped else { return false }
        files[id] = nil
        if file.fd >= 0 { close(file.fd) }
        if file.removeOnClose, file.incoming { unlink(file.path) }
        return true
    }

    /// Hashes the file's bytes from `start` up to `end` (1 MiB at a time, on the file thread). Returns
    /// where it stopped: `end`, or earlier at the end of the file or a read error.
    nonisolated static func hash(_ fd: Int32, from start: UInt64, to end: UInt64, into hasher: inout SHA256) -> UInt64 {
        var block = [UInt8](repeating: 0, count: Int(min(1 << 20, max(1, end - min(start, end)))))
        var done = start
        while done < end {
            let want = Int(min(UInt64(block.count), end - done))
            let n = block.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, off_t(done)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            hasher.update(data: block[0..<n])
            done += UInt64(n)
        }
        return done
    }

    /// Where the part file of a resource of this kind is written (files: the download directory, placed
    /// there when verified; history: the state directory's `incoming`).
    func storage(for kind: WireFrame.ResourceOffer.Kind) -> StorageDirectory {
        switch kind {
        case .history, .signedHistory, .sealedHistory:
            StorageDirectory(role: "the history directory", path: configuration.historyDirectory ?? configuration.downloadDirectory)
        case .file:
            StorageDirectory(
                role: "the download directory", path: configuration.downloadDirectory,
                mode: configuration.downloadsForGroup ? 0o750 : 0o700)  // (lanchatd's umask is 077)
        case .shared:
            sharedStorage
        }
    }

    func partPath(_ id: WireID, _ kind: WireFrame.ResourceOffer.Kind) -> String {
        storage(for: kind).path + "/.lanchat-" + id.description + ".part"
    }

    /// Makes a file in `directory` under a free name made from `name` (`name (1).ext` after a
    /// collision): `create(path)` makes it there, failing with EEXIST when the name was taken meanwhile,
    /// so nothing is ever overwritten. Returns the path. On the file thread.
    nonisolated static func underFreeName(_ name: String, in directory: String, _ create: (String) -> Bool) throws -> String {
        // A name is taken by anything there, a dangling symbolic link included (lstat, not access).
        func taken(_ candidate: String) -> Bool {
            var info = stat()
            return lstat(directory + "/" + candidate, &info) == 0
        }
        for _ in 0..<100 {
            guard let free = SafeFileName.unique(name, exists: taken) else { break }
            let target = directory + "/" + free
            if create(target) { return target }
            guard errno == EEXIST else { throw SessionError(.writeFailed, "cannot place \(free): \(String(cString: strerror(errno)))") }
        }
        throw SessionError(.writeFailed, "no free name for \(name) in \(directory) (too many files of that name)")
    }

    // MARK: Sending

    /// Reads a chunk on the file thread, hashing the file in order (after a restart, first what the
    /// receiver already holds); the digest goes back with the read that hashed the last byte.
    private func read(_ id: WireID, offset: UInt64, count: Int) {
        guard var file = files[id], !file.busy else { return }
        file.busy = true
        let hashing = (file.hasher, file.hashedUpTo)
        file.hasher = SHA256()
        files[id] = file
        let fd = file.fd
        let size = file.size
        let future = fileIO.runIfActive(eventLoop: eventLoop) { () throws -> (ByteBuffer, SHA256, UInt64) in
            var (hasher, hashed) = hashing
            if hashed < offset {
                hashed = SessionNode.hash(fd, from: hashed, to: offset, into: &hasher)
                guard hashed == offset else { throw SessionError(.badFile, "the file changed while being sent (short read at \(hashed))") }
            }
            var buffer = ByteBufferAllocator().buffer(capacity: count)
            if count > 0 {
                let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { pointer in
                    max(0, pread(fd, pointer.baseAddress, count, off_t(offset)))
                }
                guard n == count else { throw SessionError(.badFile, "the file changed while being sent (short read at \(offset))") }
                if offset + UInt64(count) > hashed {
                    let skip = Int(hashed - offset)
                    buffer.withUnsafeReadableBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[skip...])) }
                    hashed = offset + UInt64(count)
                }
            }
            return (buffer, hasher, hashed)
        }
        afterFileWork(id, future) { node, file, result in
            var file = file
            switch result {
            case .success(let (data, hasher, hashed)):
                file.hasher = hasher
                if hashed == size, file.digest == nil { file.digest = Array(hasher.finalize()) }
                file.hashedUpTo = hashed
                let digest = file.digest
                node.files[id] = file
                node.perform(node.engine.fileRead(id, offset: offset, data: data, digest: digest, at: node.time()))
            case .failure(let error):
                node.files[id] = file
                node.perform(node.engine.fileFailed(id, "\(error)", at: node.time()))
            }
        }
    }

    // MARK: Receiving

    /// What the store says of an offered id from this peer (the engine hears it).
    private func lookUp(_ offer: WireFrame.ResourceOffer, from peer: SessionPeer) {
        savedTransfer(offer.id) { node, saved in
            let record = IncomingRecord.of(saved, offer: offer, from: peer) { saved in
                saved.sha256 == Hex.string(offer.sha256) && saved.path == node.partPath(offer.id, offer.kind)
            }
            node.perform(node.engine.incomingLookedUp(offer.id, record, at: node.time()))
        }
    }

    /// Makes the part file ready: a new one (never one found there: a link planted at its name
    /// included), or after a restart the one that holds what arrived before, hashed on the file thread
    /// (the final check covers it) so that the sender is asked only for the rest.
    private func openPart(_ id: WireID, kind: WireFrame.ResourceOffer.Kind, size: UInt64, resume: Bool) {
        let directory = storage(for: kind)
        let status = directory.prepare()
        guard case .usable(let free) = status else {
            perform(engine.partOpened(id, .unusable(status.problem ?? "cannot use \(directory.role) \(directory.path)"), at: time()))
            return
        }
        let path = partPath(id, kind)
        if resume {
            let fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
            if fd >= 0 {
                hashPart(id, fd: fd, path: path, size: size, free: free)
                return
            }
        }
        unlink(path)
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let text = "cannot write in \(directory.role) \(directory.path): \(String(cString: strerror(errno)))"
            perform(engine.partOpened(id, .failed(text), at: time()))
            return
        }
        files[id] = TransferFile(fd: fd, path: path, incoming: true)
        perform(engine.partOpened(id, .opened(path: path, held: 0, freeBytes: free), at: time()))
    }

    private func hashPart(_ id: WireID, fd: Int32, path: String, size: UInt64, free: UInt64) {
        let future = fileIO.runIfActive(eventLoop: eventLoop) { () throws -> (UInt64, SHA256) in
            var info = stat()
            // Longer than the offer: not this offer's bytes; start over.
            guard fstat(fd, &info) == 0, UInt64(info.st_size) <= size else {
                ftruncate(fd, 0)
                return (0, SHA256())
            }
            var hasher = SHA256()
            let held = SessionNode.hash(fd, from: 0, to: UInt64(info.st_size), into: &hasher)
            return (held, hasher)
        }
        future.whenComplete { [weak self] result in
            guard let self else { return }
            self.assumeIsolated { node in
                // Gone meanwhile (the connection dropped): the next offer starts over from the file.
                guard !node.stopped, node.engine.isOpeningPart(id), node.files[id] == nil else {
                    close(fd)
                    return
                }
                var held: UInt64 = 0
                var hasher = SHA256()
                switch result {
                case .success(let value): (held, hasher) = value
                case .failure: ftruncate(fd, 0)
                }
                node.files[id] = TransferFile(fd: fd, path: path, incoming: true, hasher: hasher, hashedUpTo: held)
                node.perform(node.engine.partOpened(id, .opened(path: path, held: held, freeBytes: free), at: node.time()))
            }
        }
    }

    /// Writes queued chunks in order, one batch at a time, on the file thread, hashing them just before
    /// (the bytes are still in the cache), not on the event loop that decrypts.
    private func write(_ id: WireID) {
        guard var file = files[id], !file.busy, !file.queue.isEmpty else { return }
        let batch = file.queue
        file.queue = []
        file.busy = true
        let hashing = file.hasher
        file.hasher = SHA256()
        files[id] = file
        let fd = file.fd
        let future = fileIO.runIfActive(eventLoop: eventLoop) { () throws -> SHA256 in
            var hasher = hashing
            for (offset, data) in batch {
                data.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
                var written = 0
                let total = data.readableBytes
                while written < total {
                    let n = data.withUnsafeReadableBytes { pointer in
                        pwrite(fd, pointer.baseAddress! + written, total - written, off_t(offset) + off_t(written))
                    }
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw SessionError(.writeFailed, String(cString: strerror(errno)))
                    }
                    written += n
                }
            }
            // Start writing the batch to the disk now (DONTNEED starts the writeback of dirty pages, and
            // drops the page cache once they are written), and keep at most 8 MiB in flight: dirty pages
            // of a large file would otherwise pile up until a sync (ours at the end, or a chat message's
            // commit, which on ext4 waits for them) has to write them all at once. Measured: chat p99
            // during a 1 GiB transfer 103 ms without either, 65 ms with DONTNEED, 9 ms with both; the
            // transfer's rate unchanged (bench/files.py).
            if let first = batch.first, let last = batch.last {
                let end = last.offset + UInt64(last.data.readableBytes)
                _ = posix_fadvise(fd, off_t(first.offset), off_t(end - first.offset), POSIX_FADV_DONTNEED)
                // And at most 8 MiB are in flight: every 8 MiB this thread waits until they are written.
                // Its error must not be lost: a failed write-back is reported once, to the first sync.
                if end >> 23 > first.offset >> 23, fdatasync(fd) != 0 {
                    throw SessionError(.writeFailed, String(cString: strerror(errno)))
                }
            }
            return hasher
        }
        afterFileWork(id, future) { node, file, result in
            var file = file
            switch result {
            case .success(let hasher):
                file.hasher = hasher
                node.files[id] = file
                if let last = batch.last {
                    node.perform(node.engine.written(id, upTo: last.offset + UInt64(last.data.readableBytes), at: node.time()))
                }
                node.write(id)
            case .failure(let error):
                node.files[id] = file
                node.perform(node.engine.fileFailed(id, "\(error)", at: node.time()))
            }
        }
    }

    /// fsync, then the part file gets a free name in the download directory (never overwriting a file),
    /// keeping the sender's mtime.
    private func place(_ id: WireID, as name: String, modified: UInt64) {
        guard let file = files.removeValue(forKey: id) else { return }
        let directory = configuration.downloadDirectory
        let fd = file.fd
        let part = file.path
        let mode: mode_t = configuration.downloadsForGroup ? 0o640 : 0o600
        let future = fileIO.runIfActive(eventLoop: eventLoop) { () throws -> String in
            defer { close(fd) }
            guard fsync(fd) == 0 else { throw SessionError(.writeFailed, String(cString: strerror(errno))) }
            fchmod(fd, mode)
            var times = [timespec](repeating: timespec(), count: 2)
            times[0].tv_nsec = (1 << 30) - 2  // UTIME_OMIT: leave the access time
            times[1].tv_sec = Int(modified / 1000)
            times[1].tv_nsec = Int(modified % 1000) * 1_000_000
            futimens(fd, times)
            // link() fails if the name was taken meanwhile: no file is ever overwritten.
            let target = try Self.underFreeName(name, in: directory) { link(part, $0) == 0 }
            unlink(part)
            // The new name is on disk only once the directory is: a power loss after "received" must not
            // lose the file. (A failure here, EIO, leaves the file in place.)
            DurableFile.syncDirectory(containing: target)
            return target
        }
        future.whenComplete { [weak self] result in
            guard let self else { return }
            self.assumeIsolated { node in
                guard !node.stopped else { return }
                switch result {
                case .success(let path):
                    node.perform(node.engine.placed(id, path: path, at: node.time()))
                case .failure(let error):
                    unlink(part)
                    node.perform(node.engine.fileFailed(id, "\(error)", at: node.time()))
                }
            }
        }
    }
}
