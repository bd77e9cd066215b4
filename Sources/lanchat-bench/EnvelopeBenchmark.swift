import Crypto
import LanchatCore
import LanchatIdentity
import LanchatSecurity
import LanchatWire

/// The cost of signed envelopes per message, on one core: signing what we write (`EnvelopeSigner.sign`)
/// and checking what a peer wrote (`verify`, the key already parsed, as for a member met before), over
/// the signing bytes of a typical chat message, in `rounds` interleaved rounds of `count` each. Next to
/// them, SHA-256 of the same bytes (what any message costs to hash at all) as the baseline. JSON: each
/// figure's median, min and max microseconds per message, and the bytes a signature adds. Then the same
/// messages under seals of 1, 10, 100 and 256 (`seal_author_us_N`, `seal_receiver_us_N`, `seal_record_us_N`:
/// wire version 4; see below).
func envelopeBenchmark(count: Int, rounds: Int) {
    let author = Identity(privateKey: P256.Signing.PrivateKey())
    let signer = EnvelopeSigner(identity: author)
    let checker = EnvelopeSigner(identity: Identity(privateKey: P256.Signing.PrivateKey()))
    let body = "a chat message of ordinary length, about sixty bytes of text."
    let inputs = (0..<count).map {
        Envelope.signingBytes(
            author: author.peerID.rawValue, room: RoomID("lab")!, id: WireID.random(), sequence: UInt64($0 + 1),
            timestamp: 1_795_000_000_000 + UInt64($0), kind: .text, body: body)
    }
    var sign: [Double] = []
    var verify: [Double] = []
    var hash: [Double] = []
    var signatures: [[UInt8]] = []
    for _ in 0..<rounds {
        var started = ContinuousClock.now
        signatures = inputs.map { signer.sign($0) }
        sign.append(microseconds(ContinuousClock.now - started) / Double(count))
        started = ContinuousClock.now
        var valid = 0
        for (input, signature) in zip(inputs, signatures) where checker.verify(signature: signature, over: input, key: signer.publicKey, author: author.peerID) {
            valid += 1
        }
        verify.append(microseconds(ContinuousClock.now - started) / Double(count))
        guard valid == count else { die("only \(valid) of \(count) signatures verified") }
        started = ContinuousClock.now
        var sink: UInt8 = 0
        for input in inputs { sink ^= SHA256.hash(data: input).withUnsafeBytes { $0[0] } }
        hash.append(microseconds(ContinuousClock.now - started) / Double(count))
        if sink == 0x5A { print("", terminator: "") }  // keeps the hashing from being optimized away
    }
    // Seals (version 4): per message, the author's leaf hash and its share of one tree and one
    // signature per seal; the receiver's leaf hash check and its share of one signature check (the SEAL
    // holds every leaf hash); a record relayed alone: its leaf hash and audit path, and its share of the
    // seal's check (a reader checks a seal once while it keeps it).
    var sealFigures: [String: [Double]] = [:]
    let room = RoomID("lab")!
    for size in sealSizes where size <= count {
        let pieces = stride(from: 0, to: count - count % size, by: size).map { Array(inputs[$0..<$0 + size]) }
        for _ in 0..<rounds {
            var started = ContinuousClock.now
            let seals = pieces.map { piece in signer.seal(id: WireID.random(), room: room, leafHashes: piece.map { Seal.leafHash(signingBytes: $0) }) }
            let sealed = pieces.count * size
            sealFigures["seal_author_us_\(size)", default: []].append(microseconds(ContinuousClock.now - started) / Double(sealed))
            started = ContinuousClock.now
            var valid = 0
            for (piece, seal) in zip(pieces, seals) where checker.verify(seal, author: author.peerID) {
                for (index, input) in piece.enumerated() where Seal.leafHash(signingBytes: input) == seal.leafHashes[index] { valid += 1 }
            }
            sealFigures["seal_receiver_us_\(size)", default: []].append(microseconds(ContinuousClock.now - started) / Double(sealed))
            guard valid == sealed else { die("only \(valid) of \(sealed) sealed messages checked") }
            let proofs = zip(pieces, seals).map { piece, seal in (seal.head(author: author.peerID.rawValue), MerkleTree.auditPaths(seal.leafHashes).paths) }
            started = ContinuousClock.now
            valid = 0
            for (piece, (head, paths)) in zip(pieces, proofs)
            where checker.verify(signature: head.signature.bytes, over: head.signingBytes(room: room), key: head.signature.key, author: author.peerID) {
                for (index, input) in piece.enumerated()
                where head.proves(SealProof(seal: head.id, leafIndex: UInt16(index), path: paths[index]), leafHash: Seal.leafHash(signingBytes: input)) {
                    valid += 1
                }
            }
            sealFigures["seal_record_us_\(size)", default: []].append(microseconds(ContinuousClock.now - started) / Double(sealed))
            guard valid == sealed else { die("only \(valid) of \(sealed) sealed records checked") }
        }
    }
    var result: [String: Double] = [
        "messages_count": Double(count), "rounds_count": Double(rounds), "signing_bytes_count": Double(inputs[0].count),
        "bytes_added_message_count": Double(Signature.keyLength + Signature.length),
        "bytes_added_record_count": Double(2 + Signature.keyLength + Signature.length),
    ]
    for (name, values) in [("sign_us", sign), ("verify_us", verify), ("sha256_us", hash)] + sealFigures.map({ ($0.key, $0.value) }) {
        let sorted = values.sorted()
        result[name + "_median"] = sorted[sorted.count / 2]
        result[name + "_min"] = sorted.first!
        result[name + "_max"] = sorted.last!
    }
    emit(result)
}

/// The seal sizes measured: a lone message, and batches of 10, 100 (a call of 100) and 256 (the most).
private let sealSizes = [1, 10, 100, 256]

private func microseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
}
