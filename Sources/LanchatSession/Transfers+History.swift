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
    /// de-duplicate): the file thread decodes up to `historyBatch` records from at most a 1 MiB read,
    /// the store's thread stores them (pieces join one bulk write, committed every `historyCommit` records),
    /// then the next piece. So neither the file nor the event loop is held whole: memory stays at a
    /// piece, and peers are served between pieces.
    func importHistory(_ id: WireID, room: RoomID, from peer: SessionPeer, layout: HistoryLayout) {
        guard let file = files.removeValue(forKey: id) else { return }
        let reader = HistoryFileReader(fd: file.fd, path: file.path, layout: layout)
        // Records carry the names we show (a record's name is the relay's label). A relay answer keeps only
        // current members' messages; a newcomer's history from its inviter also keeps those of authors who
        // are not members here (members who left), under their short id and "not a member".
        let members = (engine.members(of: room) ?? [:]).mapValues(\.name)
        let piece = HistoryPiece(id: id, room: room, relay: peer.id, members: members, strangers: !engine.isRelayTransfer(id))
        storeHistoryPiece(piece, reading: readHistoryPiece(piece, reader: reader, forged: 0), reader: reader, counts: HistoryCounts())
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
    private struct HistoryPiece {
        let id: WireID
        let room: RoomID
        let relay: PeerID
        let members: [PeerID: String]
        let strangers: Bool
    }

    private typealias ReadPiece = (HistoryFileReader, SortedRecords)

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

    /// The store's thread stores a piece once it is read, while the file thread reads the next: the two
    /// take turns no longer (storing a million records took 11 s with each waiting for the other).
    /// `reader`: the file as it was before `reading` (to close it if reading fails).
    private func storeHistoryPiece(_ piece: HistoryPiece, reading: EventLoopFuture<ReadPiece>, reader: HistoryFileReader, counts: HistoryCounts) {
        reading.whenComplete { [weak self] result in
            guard let self else { return }
            self.assumeIsolated { node in
                guard !node.stopped else { return node.historyImportEnded(piece.id, reader: reader, error: nil, counts: counts) }
                let next: HistoryFileReader
                let sorted: SortedRecords
                switch result {
                case .success(let value): (next, sorted) = value
                case .failure(let error): return node.historyImportEnded(piece.id, reader: reader, error: "invalid history: \(error)", counts: counts)
                }
                guard sorted.judged > 0 else { return node.historyImportEnded(piece.id, reader: next, error: nil, counts: counts) }
                let limit = node.engine.configuration.transferLimits.maximumForgedRecords
                let forged = counts.forged + sorted.forged
                // The next piece is read meanwhile, unless this one reached the limit of forged records.
                let following = forged < limit ? node.readHistoryPiece(piece, reader: next, forged: forged) : nil
                var counts = counts
                counts.uncommitted += sorted.judged
                // Pieces join one bulk write, committed every `historyCommit` records and at the end.
                let commit = counts.uncommitted >= Self.historyCommit
                if commit { counts.uncommitted = 0 }
                node.storeThread.run(on: node.eventLoop) { store -> HistoryCounts in
                    var kept = HistoryCounts()
                    kept.refused = sorted.refused
                    kept.forged = sorted.forged
                    kept.added = try store.bulk { try store.insert(contentsOf: sorted.keep, now: SessionNode.nowMilliseconds()) }
                    if commit { try store.commitBulk() }
                    return kept
                }.whenComplete { [weak node, counts] stored in
                    node?.assumeIsolated { node in
                        node.historyPieceStored(piece, stored, counts: counts, committed: commit, following: following, reader: next)
                    }
                }
            }
        }
    }

    /// A piece was stored (or not): the next follows, or the import ends.
    private func historyPieceStored(
        _ piece: HistoryPiece, _ stored: Result<HistoryCounts, any Error>, counts: HistoryCounts, committed: Bool,
        following: EventLoopFuture<ReadPiece>?, reader next: HistoryFileReader
    ) {
        var counts = counts
        switch stored {
        case .success(let kept):
            counts.added += kept.added
            counts.refused += kept.refused
            counts.forged += kept.forged
            if committed { scheduleCheckpoint() }
            guard let following else {
                return historyImportEnded(piece.id, reader: next, error: "\(counts.forged) forged records: the rest was not read", counts: counts)
            }
            storeHistoryPiece(piece, reading: following, reader: next, counts: counts)
        case .failure(let error):
            // The file is closed once the next piece's read (if any) is over: it reads the file.
            let failure = "cannot store the history: \(error)"
            guard let following else { return historyImportEnded(piece.id, reader: next, error: failure, counts: counts) }
            following.whenComplete { [weak self, counts] _ in
                self?.assumeIsolated { node in node.historyImportEnded(piece.id, reader: next, error: failure, counts: counts) }
            }
        }
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
