import Glibc
import LanchatCore
import LanchatEngine
import LanchatWire
import NIOCore
import NIOPosix

/// A room's history received as a resource (from the inviter, or a member's relay answer), read and
/// merged in pieces: the file thread decodes and checks signatures, the store's thread stores batches.
extension SessionNode {
    /// Reads a received history resource in pieces and keeps each record the engine's rule allows (ids
    /// de-duplicate): the file thread decodes up to `historyBatch` records from at most a 1 MiB read and
    /// checks them, the store's thread stores them (pieces join one bulk write, committed every
    /// `historyCommit` records). The file thread reads ahead of the store's, up to `historyReadAhead`
    /// pieces waiting (one piece ahead, each thread waited for the other: each ran at three quarters of a
    /// core through a history of a million records). So neither the file nor the event loop is held
    /// whole: memory stays at a few pieces (at most 4 and the part read: 3 waiting, 1 being stored), and
    /// peers are served between pieces.
    func importHistory(_ id: WireID, room: RoomID, from peer: SessionPeer, layout: HistoryLayout) {
        guard let file = files.removeValue(forKey: id) else { return }
        let reader = HistoryFileReader(fd: file.fd, path: file.path, layout: layout)
        // Records carry the names we show (a record's name is the relay's label). A relay answer keeps only
        // current members' messages; a newcomer's history from its inviter also keeps those of authors who
        // are not members here (members who left), under their short id and "not a member".
        let members = (engine.members(of: room) ?? [:]).mapValues(\.name)
        let piece = HistoryPiece(id: id, room: room, relay: peer.id, members: members, strangers: !engine.isRelayTransfer(id))
        // (A second resource under the id of one still being imported is not read: the engine hears of the
        // id once, when the first ends.)
        guard historyImports[id] == nil else {
            reader.close()
            logger.notice("a history under the id of one being imported is not read", metadata: ["peer": "\(peer.id.short)"])
            return
        }
        historyImports[id] = HistoryImport(piece: piece, reader: reader)
        pumpHistory(id)
    }

    /// What an import kept and refused so far.
    struct HistoryCounts: Sendable {
        var added = 0
        var refused = 0
        var forged = 0
        /// Records read since the last commit.
        var uncommitted = 0
    }

    /// What every piece of one import is checked against.
    struct HistoryPiece {
        let id: WireID
        let room: RoomID
        let relay: PeerID
        let members: [PeerID: String]
        let strangers: Bool
    }

    /// One import under way (`importHistory`), on the event loop: the file thread's reads, one at a
    /// time, and the store's thread's stores, one at a time, of the pieces read.
    struct HistoryImport {
        let piece: HistoryPiece
        /// The file as the last read left it.
        var reader: HistoryFileReader
        var reading = false
        var storing = false
        /// Nothing more is read: the file's end, a read or a store failed, too many forged records, the node stopped.
        var readEnded = false
        /// Read and checked, not stored yet, in order.
        var waiting: [SortedRecords] = []
        var counts = HistoryCounts()
        /// Forged records among those read.
        var forgedRead = 0
        var forgedTooMany = false
        var error: String?
    }

    private typealias ReadPiece = (HistoryFileReader, SortedRecords)

    /// Pieces read and not yet stored, at most, while this is the only import (each at most
    /// `historyBatch` records from one read of 1 MiB, and the part of a record that read cut); with more
    /// than one under way, each reads one piece ahead, so that many imports hold no more than before.
    static let historyReadAhead = 3

    /// Starts what an import can do now: the next read, the next store; or ends it. The import's state
    /// is saved before any work starts: a future may complete at once (a pool that stopped), and its
    /// callback must find what this call decided.
    private func pumpHistory(_ id: WireID) {
        guard var job = historyImports[id] else { return }
        if stopped {
            job.readEnded = true
            job.waiting = []
        }
        let ahead = historyImports.count > 1 ? 1 : Self.historyReadAhead
        let read = !job.reading && !job.readEnded && job.waiting.count < ahead
        if read { job.reading = true }
        var store: (sorted: SortedRecords, commit: Bool)?
        if !job.storing, !job.waiting.isEmpty {
            let sorted = job.waiting.removeFirst()
            job.storing = true
            job.counts.uncommitted += sorted.judged
            // Pieces join one bulk write, committed every `historyCommit` records and at the end.
            let commit = job.counts.uncommitted >= Self.historyCommit
            if commit { job.counts.uncommitted = 0 }
            store = (sorted, commit)
        }
        guard job.readEnded, !job.reading, !job.storing, job.waiting.isEmpty else {
            historyImports[id] = job
            if read {
                readHistoryPiece(job.piece, reader: job.reader, forged: job.forgedRead).whenComplete { [weak self] result in
                    self?.assumeIsolated { node in node.historyPieceRead(id, result) }
                }
            }
            if let (sorted, commit) = store {
                storeThread.run(on: eventLoop) { store -> HistoryCounts in
                    var kept = HistoryCounts()
                    kept.refused = sorted.refused
                    kept.forged = sorted.forged
                    kept.added = try store.bulk { try store.insert(contentsOf: sorted.keep, now: SessionNode.nowMilliseconds()) }
                    if commit { try store.commitBulk() }
                    return kept
                }.whenComplete { [weak self] stored in
                    self?.assumeIsolated { node in node.historyPieceStored(id, stored, committed: commit) }
                }
            }
            return
        }
        historyImports[id] = nil
        let error = job.error ?? (job.forgedTooMany ? "\(job.counts.forged) forged records: the rest was not read" : nil)
        historyImportEnded(id, reader: job.reader, error: error, counts: job.counts)
    }

    /// The file thread reads a piece and checks each record's signature or seal (`SessionStateMachine.verdict`:
    /// the costly part, off the event loop), and sorts the records by verdict. Checking stops at the forged record that reaches the limit
    /// (each check costs about 55 µs); `forged`: how many the import met before this piece.
    private func readHistoryPiece(_ piece: HistoryPiece, reader: HistoryFileReader, forged: Int) -> EventLoopFuture<ReadPiece> {
        let keys = configuration.envelopes
        let ownID = configuration.ownID
        let forgedLeft = engine.configuration.transferLimits.maximumForgedRecords - forged
        return fileIO.runIfActive(eventLoop: eventLoop) { () throws -> ReadPiece in
            var reader = reader
            let entries = try reader.next(maximumCount: Self.historyBatch)
            let sorted = reader.decoder.sort(
                entries, room: piece.room, relay: piece.relay, ownID: ownID, keys: keys, members: piece.members,
                strangers: piece.strangers, now: SessionNode.nowMilliseconds(), forgedLeft: forgedLeft)
            return (reader, sorted)
        }
    }

    /// A piece was read (or not): it waits for the store's thread; the next read follows, unless this
    /// one was the last.
    private func historyPieceRead(_ id: WireID, _ result: Result<ReadPiece, any Error>) {
        guard var job = historyImports[id] else { return }
        job.reading = false
        switch result {
        case .success((let next, let sorted)):
            job.reader = next
            if sorted.judged == 0 {
                job.readEnded = true
            } else if !job.readEnded {
                job.waiting.append(sorted)
                job.forgedRead += sorted.forged
                if job.forgedRead >= engine.configuration.transferLimits.maximumForgedRecords {
                    job.readEnded = true
                    job.forgedTooMany = true
                }
            }
        case .failure(let error):
            job.readEnded = true
            job.error = job.error ?? "invalid history: \(error)"
        }
        historyImports[id] = job
        pumpHistory(id)
    }

    /// A piece was stored (or not): the next follows, or the import ends (a failed store ends it once
    /// the read under way, which uses the file, is over).
    private func historyPieceStored(_ id: WireID, _ stored: Result<HistoryCounts, any Error>, committed: Bool) {
        guard var job = historyImports[id] else { return }
        job.storing = false
        switch stored {
        case .success(let kept):
            job.counts.added += kept.added
            job.counts.refused += kept.refused
            job.counts.forged += kept.forged
            if committed { scheduleCheckpoint() }
        case .failure(let error):
            job.error = "cannot store the history: \(error)"
            job.readEnded = true
            job.waiting = []
        }
        historyImports[id] = job
        pumpHistory(id)
    }

    /// The import ended: what it stored is committed (on the store's thread), then the engine hears it.
    private func historyImportEnded(_ id: WireID, reader: HistoryFileReader, error: String?, counts: HistoryCounts) {
        reader.close()
        guard !stopped else { return }  // (the store's thread commits what was stored before it closes the store)
        storeThread.run(on: eventLoop) { try $0.commitBulk() }.whenComplete { [weak self] result in
            self?.assumeIsolated { node in
                guard !node.stopped else { return }
                var error = error
                switch result {
                case .success: node.scheduleCheckpoint()
                case .failure(let failure): error = error ?? "cannot store the history: \(failure)"
                }
                node.perform(node.engine.historyImported(id, added: counts.added, refused: counts.refused, forged: counts.forged, error: error, at: node.time()))
            }
        }
    }

    /// Records read, checked and stored per piece when a history is imported (one turn of the event loop).
    static let historyBatch = 5000
    /// Records stored per commit: pieces join one bulk write until then (or until anything else commits).
    static let historyCommit = 50_000
}

/// Reads a history resource from its part file in pieces (on the file thread, one call at a time).
struct HistoryFileReader {
    let fd: Int32
    let path: String
    /// Reads the records in the history's layout, and checks each seal once while it keeps it.
    var decoder: HistoryDecoder
    private var offset = 0
    private var buffer = ByteBufferAllocator().buffer(capacity: 0)
    private var ended = false

    init(fd: Int32, path: String, layout: HistoryLayout = .plain) {
        self.fd = fd
        self.path = path
        decoder = HistoryDecoder(layout: layout)
    }

    /// The next records (at most `maximumCount`); none once the file is read to its end. Throws if a
    /// record is invalid or the file ends inside one.
    mutating func next(maximumCount: Int) throws -> [SealedHistory.Entry] {
        while true {
            let entries = try decoder.decodeSome(&buffer, maximumCount: maximumCount)
            if !entries.isEmpty { return entries }
            if ended {
                guard buffer.readableBytes == 0 else { throw SessionError(.history, "the history ends inside a record") }
                guard decoder.isComplete else { throw SessionError(.history, "the history ends after a seal, without its record") }
                return []
            }
            buffer.discardReadBytes()
            let piece = 1 << 20
            var failure: Int32 = 0
            let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: piece) { bytes in
                let count = pread(fd, bytes.baseAddress, piece, offset)
                if count < 0 { failure = errno }
                return max(0, count)
            }
            guard failure == 0 else { throw SessionError(.history, "cannot read the history: \(String(cString: strerror(failure)))") }
            if n == 0 { ended = true }
            offset += n
        }
    }

    /// Closes and removes the part file.
    func close() {
        Glibc.close(fd)
        unlink(path)
    }
}
