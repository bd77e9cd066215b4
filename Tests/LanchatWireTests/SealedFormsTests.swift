import LanchatCore
import LanchatWire
import NIOCore
import Testing

/// The vector seal (scripts/wire-vectors.py) with its documented signature.
private let vectorSeal = Seal(
    id: vectorSealID, room: lab, signature: Signature(key: vectorSignature.key, bytes: bytes(fromHex: vectorSealSignature)),
    leafHashes: vectorSealLeafHashes.map { bytes(fromHex: $0) })

/// Message `index` of the vector seal as a sealed history record by `vectorAuthor` (`alice@h1`).
private func sealedRecord(_ index: Int) -> HistoryRecord {
    let message = vectorSealedMessages[index]
    return HistoryRecord(
        id: message.id, senderID: vectorAuthor, senderName: "alice@h1", sequence: message.sequence, timestampMilliseconds: message.timestampMilliseconds,
        kind: message.kind, body: message.body, proof: vectorSeal.proof(forLeaf: index))
}

private let signedRecord = HistoryRecord(
    id: ascending, senderID: vectorAuthor, senderName: "alice@h1", sequence: 1, timestampMilliseconds: 1_795_000_000_000, kind: .text,
    body: "héllo\nworld", signature: vectorSignature)

/// A made-up head `n` by `author` (its signature is not checked here) and a record that is its leaf 0.
private func head(_ n: Int, author: String = vectorAuthor, count: UInt16 = 1) -> SealHead {
    SealHead(
        id: WireID(bytes: (0..<16).map { UInt8(truncatingIfNeeded: n >> ($0 % 2 * 8)) ^ UInt8($0) })!, author: author,
        signature: Signature(key: [0x02] + Array(repeating: 7, count: 32), bytes: Array(repeating: 9, count: 64)), leafCount: count,
        root: Array(repeating: UInt8(truncatingIfNeeded: n), count: 32))
}

private func leaf(of head: SealHead, index: UInt16 = 0, sequence: UInt64 = 1) -> HistoryRecord {
    HistoryRecord(
        id: .random(), senderID: head.author, senderName: "a", sequence: sequence, timestampMilliseconds: 1, kind: .text, body: "x",
        proof: SealProof(seal: head.id, leafIndex: index, path: []))
}

private func write(_ entries: [SealedHistory.Entry]) throws -> ByteBuffer {
    var writer = SealedHistory.Writer()
    var buffer = ByteBuffer()
    for entry in entries { try writer.write(entry, into: &buffer) }
    return buffer
}

private func read(_ buffer: ByteBuffer) -> Result<[SealedHistory.Entry], WireError> {
    var reader = SealedHistory.Reader()
    var rest = buffer
    do throws(WireError) {
        let entries = try reader.decodeSome(&rest, maximumCount: .max)
        guard rest.readableBytes == 0 else { return .failure(.truncated(field: "entry")) }
        guard reader.isComplete else { return .failure(.invalidValue(field: "seal_head")) }
        return .success(entries)
    } catch {
        return .failure(error)
    }
}

/// Seals on the wire (version 4, draft): the sealed MESSAGE, a seal's head, the sealed history.
@Suite struct SealedFormsTests {
    @Test func theSealedMessageIsTheScripts() throws {
        var message = vectorSealedMessages[0]
        message.sealed = SealedLeaf(seal: vectorSealID, leafIndex: 0)
        #expect(hex(try WireFrame.message(message).wireBytes()) == vectorSealedMessageFrame)
        var decoder = FrameDecoder(limits: .standard)
        var buffer = ByteBuffer(bytes: bytes(fromHex: vectorSealedMessageFrame))
        let raw = try #require(try decoder.decode(buffer: &buffer))
        #expect(raw.flags == WireFrame.reliableFlag | WireFrame.sealedFlag)
        let decoded = try WireFrame.decode(raw)
        #expect(decoded == .message(message) && decoded.minimumVersion == WireFrame.sealsVersion)
        // Its leaf hash is the seal's leaf 0: what a receiver holding the SEAL checks.
        #expect(Seal.leafHash(of: message, author: vectorAuthor) == vectorSeal.leafHashes[0])
        #expect(WireFrame.message(vectorSealedMessages[0]).minimumVersion == 1)
    }

    @Test func aMessageIsSignedOrSealedNotBoth() throws {
        var both = vectorSealedMessages[0]
        both.signature = vectorSignature
        both.sealed = SealedLeaf(seal: vectorSealID, leafIndex: 0)
        #expect(throws: WireError.invalidValue(field: "flags")) { try WireFrame.message(both).encode() }
        // Hand-made: both flags, and either trailer.
        var payload = try WireFrame.message(vectorSealedMessages[0]).encode().payload
        payload.writeBytes(vectorSealID.bytes)
        payload.writeInteger(UInt16(0))
        let flags = WireFrame.reliableFlag | WireFrame.signedFlag | WireFrame.sealedFlag
        #expect(throws: WireError.invalidValue(field: "flags")) { try WireFrame.decode(RawFrame(type: 0x10, flags: flags, payload: payload)) }
        // A leaf index past a seal's largest is refused both ways.
        var past = vectorSealedMessages[0]
        past.sealed = SealedLeaf(seal: vectorSealID, leafIndex: 256)
        #expect(throws: WireError.invalidValue(field: "leaf_index")) { try WireFrame.message(past).encode() }
        var raw = try WireFrame.message(vectorSealedMessages[0]).encode().payload
        raw.writeBytes(vectorSealID.bytes)
        raw.writeInteger(UInt16(256))
        #expect(throws: WireError.invalidValue(field: "leaf_index")) {
            try WireFrame.decode(RawFrame(type: 0x10, flags: WireFrame.sealedFlag, payload: raw))
        }
        // Cut inside the trailer.
        var cut = try WireFrame.message(vectorSealedMessages[0]).encode().payload
        cut.writeBytes(vectorSealID.bytes)
        cut.writeInteger(UInt8(0))
        #expect(throws: WireError.truncated(field: "leaf_index")) { try WireFrame.decode(RawFrame(type: 0x10, flags: WireFrame.sealedFlag, payload: cut)) }
    }

    @Test func theHeadAndTheSealedHistoryAreTheScripts() throws {
        let head = vectorSeal.head(author: vectorAuthor)
        #expect(head.leafCount == 3 && hex(head.root) == vectorSealRoot)
        #expect(hex(head.signingBytes(room: lab)) == vectorSealSigningBytes)
        #expect(vectorSealHead.count == 2 * SealHead.length && SealHead.length == 200)
        #expect(vectorSealHead.hasPrefix(hex(vectorSealID.bytes)))
        // The writer sends the head before the first sealed record, then a signed record as kind 2 has it.
        let entries = [SealedHistory.Entry(record: sealedRecord(1), seal: head), SealedHistory.Entry(record: signedRecord)]
        let written = try write(entries)
        #expect(hex(Array(written.readableBytesView)) == vectorSealedHistory)
        #expect(vectorSealedHistory == "01" + vectorSealHead + vectorSealedRecord1 + "00" + vectorSignedRecord)
        #expect(try read(ByteBuffer(bytes: bytes(fromHex: vectorSealedHistory))).get() == entries)
        // The record's proof verifies against the head: one signature (the head's) for all its records.
        let message = vectorSealedMessages[1]
        let record = sealedRecord(1)
        #expect(head.proves(try #require(record.proof), leafHash: Seal.leafHash(signingBytes: record.signingBytes(room: lab))))
        #expect(Seal.leafHash(signingBytes: record.signingBytes(room: lab)) == Seal.leafHash(of: message, author: vectorAuthor))
        #expect(!head.proves(try #require(record.proof), leafHash: vectorSeal.leafHashes[0]))
    }

    @Test func aHeadIsSentOncePerSealWhileTheReaderKeepsIt() throws {
        let vectorHead = vectorSeal.head(author: vectorAuthor)
        let entries = (0..<3).map { SealedHistory.Entry(record: sealedRecord($0), seal: vectorHead) }
        let buffer = try write(entries)
        let heads =
            Array(buffer.readableBytesView).count - entries.count
            - entries.reduce(0) { total, entry in
                var one = ByteBuffer()
                try! entry.record.encode(into: &one)
                try! entry.record.proof!.encode(into: &one)
                return total + one.readableBytes
            }
        #expect(heads == 1 + SealHead.length)
        #expect(try read(buffer).get() == entries)
        // 256 other seals later, the first has left the reader's window: the writer sends its head again.
        let others = (1...SealedHistory.window).map { head($0) }
        let late = try write([entries[0]] + others.map { SealedHistory.Entry(record: leaf(of: $0), seal: $0) } + [entries[2]])
        let decoded = try read(late).get()
        #expect(decoded.count == SealedHistory.window + 2 && decoded.last == entries[2])
        #expect(late.readableBytes > 2 * (1 + SealHead.length) + SealedHistory.window * (1 + SealHead.length))
    }

    @Test func whatAReaderRefuses() throws {
        let first = head(1, count: 2)
        let headBytes: (SealHead) -> [UInt8] = { head in
            var buffer = try! write([SealedHistory.Entry(record: leaf(of: head), seal: head)])
            return [UInt8](buffer.readBytes(length: 1 + SealHead.length)!)
        }
        let sealedBytes: (HistoryRecord) -> [UInt8] = { record in
            var buffer = ByteBuffer(bytes: [2])
            try! record.encode(into: &buffer)
            try! record.proof!.encode(into: &buffer)
            return Array(buffer.readableBytesView)
        }
        var signed = ByteBuffer(bytes: [0])
        try signedRecord.encode(into: &signed, signed: true)
        let signedBytes = Array(signed.readableBytesView)
        let cases: [(String, [UInt8], WireError)] = [
            ("a head with nothing after it", headBytes(first), .invalidValue(field: "seal_head")),
            ("a head then another head", headBytes(first) + headBytes(head(2)), .invalidValue(field: "seal_head")),
            ("a head then a signed record", headBytes(first) + signedBytes, .invalidValue(field: "seal_head")),
            ("a sealed record without its head", sealedBytes(leaf(of: first)), .invalidValue(field: "seal_id")),
            (
                "a head then a record of a seal it does not know", headBytes(first) + sealedBytes(leaf(of: head(3))),
                .invalidValue(field: "seal_head")
            ),
            (
                "right after a head, a record of another author under its id", headBytes(first) + sealedBytes(leaf(of: head(1, author: vectorInviter, count: 2))),
                .invalidValue(field: "seal_head")
            ),
            (
                "a record naming the id of a seal another author made",
                headBytes(first) + sealedBytes(leaf(of: first)) + sealedBytes(leaf(of: head(1, author: vectorInviter, count: 2))),
                .invalidValue(field: "seal_id")
            ),
            ("a leaf index past the count", headBytes(first) + sealedBytes(leaf(of: first, index: 2)), .invalidValue(field: "leaf_index")),
            (
                "the id of a kept head with other values",
                headBytes(first) + sealedBytes(leaf(of: first)) + headBytes(head(1, count: 3)) + sealedBytes(leaf(of: first)),
                .invalidValue(field: "seal_id")
            ),
            ("an unknown tag", [3] + signedBytes.dropFirst(), .invalidValue(field: "entry")),
            ("a head of 0 leaves", Array(headBytes(first).dropLast(34)) + [0, 0] + Array(repeating: 1, count: 32), .invalidValue(field: "leaf_count")),
        ]
        for (what, bytes, error) in cases {
            #expect(read(ByteBuffer(bytes: bytes)) == .failure(error), "\(what)")
        }
        // The same head again (identical), once its record came, is taken.
        let again = headBytes(first) + sealedBytes(leaf(of: first)) + headBytes(first) + sealedBytes(leaf(of: first, index: 1, sequence: 2))
        #expect(try read(ByteBuffer(bytes: again)).get().count == 2)
    }

    /// A seal is its author's: another author's seal under the same id (ids are seen by all, and may be
    /// copied) neither blocks nor stands for the first.
    @Test func aCopiedSealIDNeitherBlocksNorStandsForAnotherAuthorsSeal() throws {
        let honest = head(1, count: 2)
        let copy = head(1, author: vectorInviter, count: 3)
        #expect(honest.id == copy.id)
        let entries = [
            SealedHistory.Entry(record: leaf(of: honest), seal: honest), SealedHistory.Entry(record: leaf(of: copy), seal: copy),
            SealedHistory.Entry(record: leaf(of: honest, index: 1, sequence: 2), seal: honest),
            SealedHistory.Entry(record: leaf(of: copy, index: 2, sequence: 3), seal: copy),
        ]
        let decoded = try read(try write(entries)).get()
        #expect(decoded == entries)
        #expect(decoded.allSatisfy { $0.seal?.author == $0.record.senderID })
    }

    /// An entry the writer refuses leaves nothing behind: the caller may skip it and go on.
    @Test func aRefusedEntryWritesNothing() throws {
        let first = head(1, count: 2)
        var writer = SealedHistory.Writer()
        var buffer = ByteBuffer()
        var notice = leaf(of: first)
        notice.kind = .system
        #expect(throws: WireError.invalidValue(field: "kind")) { try writer.write(SealedHistory.Entry(record: notice, seal: first), into: &buffer) }
        #expect(buffer.readableBytes == 0)
        // The seal was not taken as named either: the next record of it brings its head.
        let next = SealedHistory.Entry(record: leaf(of: first, index: 1, sequence: 2), seal: first)
        try writer.write(next, into: &buffer)
        #expect(try read(buffer).get() == [next])
        #expect(SealedHistory.maximumEntryLength == HistoryRecord.maximumLength + 177)  // (tag, record without its 99 bytes of key and signature, proof)
    }

    @Test func theWriterRefusesWhatAReaderWould() {
        let first = head(1)
        #expect(throws: WireError.invalidValue(field: "author_id")) {
            try write([SealedHistory.Entry(record: leaf(of: head(1, author: vectorInviter)), seal: first)])
        }
        #expect(throws: WireError.invalidValue(field: "leaf_index")) { try write([SealedHistory.Entry(record: leaf(of: first, index: 1), seal: first)]) }
        #expect(throws: WireError.invalidValue(field: "seal_proof")) { try write([SealedHistory.Entry(record: leaf(of: head(2)), seal: first)]) }
        #expect(throws: WireError.invalidValue(field: "seal")) { try write([SealedHistory.Entry(record: leaf(of: first))]) }
        #expect(throws: WireError.invalidValue(field: "seal_id")) {
            try write([SealedHistory.Entry(record: leaf(of: first), seal: first), SealedHistory.Entry(record: leaf(of: first), seal: head(1, count: 2))])
        }
    }

    /// A sealed history read in pieces cut anywhere gives the same entries: an entry cut by a piece's end
    /// waits for the next, and a head is held until its record comes.
    @Test func piecesCutAnywhereGiveTheSameEntries() throws {
        let whole = Array(bytes(fromHex: vectorSealedHistory))
        let expected = try read(ByteBuffer(bytes: whole)).get()
        for cut in 0...whole.count {
            var reader = SealedHistory.Reader()
            var buffer = ByteBuffer(bytes: whole[0..<cut])
            var entries = try reader.decodeSome(&buffer, maximumCount: .max)
            buffer.writeBytes(whole[cut...])
            entries += try reader.decodeSome(&buffer, maximumCount: .max)
            #expect(entries == expected && buffer.readableBytes == 0 && reader.isComplete, "cut at \(cut)")
        }
    }

    @Test func randomBytesNeverCrashAReader() {
        for bytes in mutations(of: bytes(fromHex: vectorSealedHistory), noise: 600) {
            // Whatever is taken keeps the reader's promises: a sealed record is its seal's author's, within its count.
            if case .success(let entries) = read(ByteBuffer(bytes: bytes)) {
                for entry in entries {
                    guard let seal = entry.seal else {
                        #expect(entry.record.proof == nil)
                        continue
                    }
                    #expect(seal.author == entry.record.senderID && entry.record.proof?.seal == seal.id)
                    #expect((entry.record.proof?.leafIndex ?? .max) < seal.leafCount)
                }
            }
        }
    }
}
