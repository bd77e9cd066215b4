import Crypto
import FoundationEssentials
import Glibc
import LanchatCore
import LanchatEngine
import LanchatIdentity
import LanchatSecurity
import LanchatSession
import LanchatStore
import LanchatWire
import NIOCore

// MARK: A newcomer's history, phase by phase, in one process

/// The three phases of a sealed history of `count` messages, each timed on its own and on one thread,
/// with what lanchatd runs in each (no sockets, no files but the store): the inviter's encoding of its
/// unsigned records (`HistoryEncoder`: sealed here, 256 per signature), the newcomer's decoding and
/// checking (`HistoryDecoder`: each seal's signature once, each record's audit path), and its storing
/// (`ChatStore.insert(contentsOf:)` in pieces of 5,000, a commit every 50,000, as an import does). In
/// lanchatd the second and third run at once on two threads, and the first on the inviter: the sum is
/// not the benchmark's end-to-end figure, but where it goes. JSON: seconds per phase, bytes encoded.
///
/// `per` > 0: the author sealed its messages itself, `per` to a seal (as lanchatd seals what it sends:
/// a seal per flush, a lone message a seal of one), and another member hands them on: the newcomer then
/// checks a signature per seal (`seal_us` in `envelopes` is one), and the relay writes stored proofs.
/// `byAuthor`: the author hands them on itself, and seals again those in seals of fewer than 16
/// (`HistoryEncoder.resealBelow`).
func historyBenchmark(directory: String, count: Int, per: Int = 0, byAuthor: Bool = false) throws {
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let path = directory + "/" + ChatStore.fileName
    for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
    let author = Identity(privateKey: P256.Signing.PrivateKey())
    let newcomer = Identity(privateKey: P256.Signing.PrivateKey())
    let authorKeys = EnvelopeKeys(signer: EnvelopeSigner(identity: author))
    let newcomerKeys = EnvelopeKeys(signer: EnvelopeSigner(identity: newcomer))
    let room = RoomID("big")!
    let piece = 5000
    var generator = SystemRandomNumberGenerator()
    let base: Int64 = 1_795_000_000_000
    let messages = (0..<count).map { index in
        let suffix = (0..<10).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let id = WireID(bytes: Array(withUnsafeBytes(of: UInt64(base + Int64(index)).bigEndian) { Array($0[2...]) }) + suffix)!
        return StoredMessage(
            id: id.description, room: room.rawValue, senderID: author.peerID.rawValue, senderName: "alice", sequence: Int64(index + 1),
            timestamp: base + Int64(index), kind: .text, body: "message \(index) " + String(repeating: "x", count: 40))
    }

    let relay = Identity(privateKey: P256.Signing.PrivateKey())
    var history = messages
    var started = now()
    if per > 0 {
        history = []
        history.reserveCapacity(count)
        for start in stride(from: 0, to: count, by: per) {
            let piece = Array(messages[start..<min(count, start + per)])
            for (batch, sealed) in SealedBatch.seal(piece, author: author.peerID, room: room, keys: authorKeys, newID: { WireID.random() }) {
                history += batch.stored(sealed, author: author.peerID)
            }
        }
    }
    let sealSeconds = now() - started
    let writer = per > 0 && !byAuthor ? relay : author
    started = now()
    var encoder = HistoryEncoder(layout: .sealed, ownID: writer.peerID, keys: EnvelopeKeys(signer: EnvelopeSigner(identity: writer)), ids: .system())
    var encoded = ByteBufferAllocator().buffer(capacity: count * 400)
    for start in stride(from: 0, to: count, by: piece) {
        encoder.append(Array(history[start..<min(count, start + piece)]), into: &encoded)
    }
    let encodeSeconds = now() - started
    let bytes = encoded.readableBytes

    started = now()
    var decoder = HistoryDecoder(layout: .sealed)
    var pieces: [[SealedHistory.Entry]] = []
    while true {
        let entries = try decoder.decodeSome(&encoded, maximumCount: piece)
        if entries.isEmpty { break }
        pieces.append(entries)
    }
    guard decoder.isComplete, encoded.readableBytes == 0 else { die("the history did not decode whole") }
    let decodeSeconds = now() - started

    started = now()
    let members = [author.peerID: "alice"]
    let sortedPieces = pieces.map { entries in
        decoder.sort(
            entries, room: room, relay: writer.peerID, ownID: newcomer.peerID, keys: newcomerKeys, members: members, strangers: true,
            now: base + Int64(count), forgedLeft: 1000)
    }
    let checkSeconds = now() - started

    let store = try ChatStore(path: path)
    started = now()
    var added = 0
    var uncommitted = 0
    for sorted in sortedPieces {
        guard sorted.keep.count == sorted.judged else { die("\(sorted.judged - sorted.keep.count) records were not kept") }
        added += try store.bulk { try store.insert(contentsOf: sorted.keep, now: base) }
        uncommitted += sorted.judged
        if uncommitted >= 50_000 {
            try store.commitBulk()
            uncommitted = 0
        }
    }
    try store.commitBulk()
    let storeSeconds = now() - started
    guard added == count else { die("stored \(added) of \(count)") }
    emit([
        "messages_count": Double(count), "bytes_count": Double(bytes), "encode_s": encodeSeconds, "decode_s": decodeSeconds,
        "check_s": checkSeconds, "store_s": storeSeconds, "seals_per_count": Double(per), "author_sealing_s": sealSeconds,
        "by_author_count": byAuthor ? 1 : 0,
    ])
}
