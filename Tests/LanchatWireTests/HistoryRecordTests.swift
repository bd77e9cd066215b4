import LanchatCore
@testable import LanchatWire
import NIOCore
import Testing

@Suite struct HistoryRecordTests {
    let sender = "liv7cafetkqmp7ikrkyn5tpg3ew5x7vemexztpkyp6oliklhtr2a"

    @Test func roundTripOfManyRecords() throws {
        var buffer = ByteBuffer()
        let records = (0..<500).map {
            HistoryRecord(
                id: .random(), senderID: sender, senderName: "alice@h1", sequence: UInt64($0), timestampMilliseconds: 1_795_000_000_000 + UInt64($0),
                kind: $0 % 7 == 0 ? .file : .text, body: "line \($0)\n\ttabbed é 😀")
        }
        for record in records { try record.encode(into: &buffer) }
        #expect(try HistoryRecord.decodeAll(buffer) == records)
        #expect(try HistoryRecord.decodeAll(ByteBuffer()).isEmpty)
    }

    @Test func recordsReadInPiecesOfAnySizeAreTheSame() throws {
        var whole = ByteBuffer()
        let records = (0..<40).map {
            HistoryRecord(
                id: .random(), senderID: sender, senderName: "bob", sequence: UInt64($0), timestampMilliseconds: 7,
                kind: .text, body: String(repeating: "x", count: $0 * 37))
        }
        var longest = 0
        for record in records {
            let before = whole.readableBytes
            try record.encode(into: &whole)
            longest = max(longest, whole.readableBytes - before)
        }
        for piece in [1, 2, 7, 64, 1000, whole.readableBytes] {
            var buffer = ByteBuffer()
            var decoded: [HistoryRecord] = []
            var offset = 0
            while offset < whole.readableBytes {
                let length = min(piece, whole.readableBytes - offset)
                buffer.writeImmutableBuffer(whole.getSlice(at: offset, length: length)!)
                offset += length
                while case let more = try HistoryRecord.decodeSome(&buffer, maximumCount: 3), !more.isEmpty { decoded += more }
                // What stays is part of one record: a reader holds at most one record beyond a piece.
                #expect(buffer.readableBytes < longest)
            }
            #expect(decoded == records)
            #expect(buffer.readableBytes == 0)
        }
        // An invalid length is refused before its bytes arrive.
        var header = ByteBuffer(bytes: [UInt8](repeating: 1, count: 16))
        header.writeInteger(UInt8(200))
        #expect(throws: WireError.self) { try HistoryRecord.decodeSome(&header, maximumCount: 10) }
    }

    @Test func hostileHistoryIsRefusedWhole() throws {
        var good = ByteBuffer()
        try HistoryRecord(id: .random(), senderID: sender, senderName: "a", sequence: 1, timestampMilliseconds: 2, kind: .text, body: "hi").encode(into: &good)
        // Every truncation of a valid record is refused.
        for cut in 1..<good.readableBytes {
            #expect(throws: WireError.self) { try HistoryRecord.decodeAll(good.getSlice(at: 0, length: cut)!) }
        }
        func record(sender: [UInt8], name: [UInt8], kind: UInt8, body: [UInt8]) -> ByteBuffer {
            var buffer = ByteBuffer(bytes: [UInt8](repeating: 1, count: 16))
            buffer.writeInteger(UInt8(sender.count)); buffer.writeBytes(sender)
            buffer.writeInteger(UInt8(name.count)); buffer.writeBytes(name)
            buffer.writeInteger(UInt64(1)); buffer.writeInteger(UInt64(2)); buffer.writeInteger(kind)
            buffer.writeInteger(UInt32(body.count)); buffer.writeBytes(body)
            return buffer
        }
        let id = Array(sender.utf8)
        #expect(throws: WireError.self) { try HistoryRecord.decodeAll(record(sender: Array("../etc".utf8), name: [0x61], kind: 0, body: [0x61])) }
        #expect(throws: WireError.self) { try HistoryRecord.decodeAll(record(sender: id, name: Array("\u{1b}[2J".utf8), kind: 0, body: [0x61])) }
        #expect(throws: WireError.self) { try HistoryRecord.decodeAll(record(sender: id, name: [0x61], kind: 2, body: [0x61])) }  // system notices are local
        #expect(throws: WireError.self) { try HistoryRecord.decodeAll(record(sender: id, name: [0x61], kind: 9, body: [0x61])) }
        #expect(throws: WireError.self) { try HistoryRecord.decodeAll(record(sender: id, name: [0x61], kind: 0, body: [0xff, 0xfe])) }
        // The encoder writes these very bytes (its layout pinned, not only its round trip).
        var encoded = ByteBuffer()
        try HistoryRecord(
            id: WireID(bytes: [UInt8](repeating: 1, count: 16))!, senderID: sender, senderName: "a", sequence: 1, timestampMilliseconds: 2,
            kind: .text, body: "a"
        ).encode(into: &encoded)
        #expect(encoded == record(sender: id, name: [0x61], kind: 0, body: [0x61]))
        // Control characters (C0 and DEL) are refused in a name; a body allows only newline and tab among them.
        for byte in UInt8(0)...0x7f where byte < 0x20 || byte == 0x7f {
            #expect(throws: WireError.self) { try HistoryRecord.decodeAll(record(sender: id, name: [0x61, byte], kind: 0, body: [0x61])) }
            let body = { try HistoryRecord.decodeAll(record(sender: id, name: [0x61], kind: 0, body: [0x61, byte, 0x62])) }
            if byte == 0x0a || byte == 0x09 {
                #expect(try body().first?.body == "a\(Character(Unicode.Scalar(byte)))b")
            } else {
                #expect(throws: WireError.self) { try body() }
            }
        }
        // Characters beyond ASCII pass, C1 controls (U+0080-U+009F) too, as they always did.
        #expect(try HistoryRecord.decodeAll(record(sender: id, name: Array("é😀".utf8), kind: 0, body: Array("\u{85}x".utf8))).first?.senderName == "é😀")
        var lying = record(sender: id, name: [0x61], kind: 0, body: [0x61])
        lying.moveWriterIndex(to: lying.writerIndex - 1)
        #expect(throws: WireError.self) { try HistoryRecord.decodeAll(lying) }
        // The encoder refuses what the decoder would.
        #expect(throws: WireError.self) {
            var out = ByteBuffer()
            try HistoryRecord(id: .random(), senderID: "x", senderName: "a", sequence: 0, timestampMilliseconds: 0, kind: .text, body: "").encode(into: &out)
        }
    }

    // MARK: Signed histories (version 2)

    let vectorRecord = HistoryRecord(
        id: WireID(bytes: Array(0...15))!, senderID: vectorAuthor, senderName: "alice@h1", sequence: 1, timestampMilliseconds: 1_795_000_000_000,
        kind: .text, body: "héllo\nworld", signature: vectorSignature)

    @Test func aSignedRecordMatchesTheIndependentVector() throws {
        var buffer = ByteBuffer()
        try vectorRecord.encode(into: &buffer, signed: true)
        #expect(hex(Array(buffer.readableBytesView)) == vectorSignedRecord)
        #expect(try HistoryRecord.decodeAll(ByteBuffer(bytes: bytes(fromHex: vectorSignedRecord)), signed: true) == [vectorRecord])
        var unsigned = vectorRecord
        unsigned.signature = nil
        buffer.clear()
        try unsigned.encode(into: &buffer, signed: true)
        #expect(hex(Array(buffer.readableBytesView)) == vectorUnsignedRecord)
        #expect(try HistoryRecord.decodeAll(ByteBuffer(bytes: bytes(fromHex: vectorUnsignedRecord)), signed: true) == [unsigned])
        // In the version 1 layout the signature is not written.
        buffer.clear()
        try vectorRecord.encode(into: &buffer)
        #expect(try HistoryRecord.decodeAll(buffer) == [unsigned])
    }

    @Test func theSigningBytesMatchTheIndependentVector() {
        #expect(hex(vectorRecord.signingBytes(room: lab)) == vectorSigningBytes)
        #expect(
            hex(
                Envelope.signingBytes(
                    author: vectorAuthor, room: lab, id: ascending, sequence: 1, timestamp: 1_795_000_000_000, kind: .text,
                    body: "héllo\nworld")) == vectorSigningBytes)
        // Every signed field changes them (the name does not: it is a label).
        var other = vectorRecord
        other.senderName = "mallory"
        #expect(hex(other.signingBytes(room: lab)) == vectorSigningBytes)
        for change in [
            { (r: inout HistoryRecord) in r.body += "!" }, { $0.sequence += 1 }, { $0.timestampMilliseconds += 1 }, { $0.kind = .file },
            { $0.id = descending },
        ] {
            var changed = vectorRecord
            change(&changed)
            #expect(hex(changed.signingBytes(room: lab)) != vectorSigningBytes)
        }
        #expect(hex(vectorRecord.signingBytes(room: RoomID("lab2")!)) != vectorSigningBytes)
    }

    @Test(arguments: [
        ("a key without a signature", "21" + String(repeating: "02", count: 33) + "00"),
        ("a signature without a key", "00" + "40" + String(repeating: "11", count: 64)),
        ("a short key", "20" + String(repeating: "02", count: 32) + "00"),
        ("a long signature", "21" + String(repeating: "02", count: 33) + "41" + String(repeating: "11", count: 65)),
    ])
    func aSignedRecordWithBadSignatureFieldsIsRefused(_ problem: String, _ tail: String) {
        let unsignedPrefix = String(vectorUnsignedRecord.dropLast(4))
        #expect(throws: WireError.self, "\(problem)") {
            try HistoryRecord.decodeAll(ByteBuffer(bytes: bytes(fromHex: unsignedPrefix + tail)), signed: true)
        }
    }
}
