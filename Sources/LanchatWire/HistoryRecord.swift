import LanchatCore
import NIOCore

/// One message in a history resource (RESOURCE_OFFER kind 1): what a member sends a newcomer.
/// `message_id [16] | sender_id (u8 len, 52) | sender_name (u8 len, text) | sequence u64 |
/// timestamp_ms u64 | kind u8 (0 text, 1 file) | body (u32 len, text with newlines, <= 64 KiB)`,
/// records back to back, nothing else. In a signed history (RESOURCE_OFFER kind 2, version 2) each record
/// then has `author_key (u8 len, 0 or 33) | signature (u8 len, 0 or 64)`: the author's `Signature` over
/// `Envelope.signingBytes` (lengths 0: an unsigned record, kept only if its sender is the relay itself).
public struct HistoryRecord: Equatable, Sendable {
    public var id: WireID
    public var senderID: String
    public var senderName: String
    public var sequence: UInt64
    public var timestampMilliseconds: UInt64
    public var kind: WireFrame.Message.Kind
    public var body: String
    /// The author's signature (signed histories only; nil: unsigned).
    public var signature: Signature?
    /// Where the author sealed it (a sealed history's sealed record, version 4; `SealedHistory`).
    public var proof: SealProof?

    public init(
        id: WireID, senderID: String, senderName: String, sequence: UInt64, timestampMilliseconds: UInt64, kind: WireFrame.Message.Kind, body: String,
        signature: Signature? = nil, proof: SealProof? = nil
    ) {
        self.proof = proof
        self.id = id
        self.senderID = senderID
        self.senderName = senderName
        self.sequence = sequence
        self.timestampMilliseconds = timestampMilliseconds
        self.kind = kind
        self.body = body
        self.signature = signature
    }

    /// What the author signed (`Envelope.signingBytes`), with `room` the history's room.
    public func signingBytes(room: RoomID) -> [UInt8] {
        Envelope.signingBytes(author: senderID, room: room, id: id, sequence: sequence, timestamp: timestampMilliseconds, kind: kind, body: body)
    }

    /// Appends the record (`signed`: in the layout of a signed history); refuses values the decoder would refuse.
    public func encode(into buffer: inout ByteBuffer, signed: Bool = false) throws(WireError) {
        if signed, let signature {
            guard signature.key.count == Signature.keyLength else { throw .invalidValue(field: "author_key") }
            guard signature.bytes.count == Signature.length else { throw .invalidValue(field: "signature") }
        }
        try validate()
        buffer.writeBytes(id.bytes)
        buffer.writeInteger(UInt8(senderID.utf8.count))
        buffer.writeString(senderID)
        buffer.writeInteger(UInt8(senderName.utf8.count))
        buffer.writeString(senderName)
        buffer.writeInteger(sequence)
        buffer.writeInteger(timestampMilliseconds)
        buffer.writeInteger(kind.rawValue)
        buffer.writeInteger(UInt32(body.utf8.count))
        buffer.writeString(body)
        if signed {
            buffer.writeLengthPrefixed(signature?.key ?? [], as: UInt8.self)
            buffer.writeLengthPrefixed(signature?.bytes ?? [], as: UInt8.self)
        }
    }

    /// Refuses the record's own values that the decoder would refuse (its signature aside): what `encode`
    /// checks before it writes anything.
    public func validate() throws(WireError) {
        guard WireFrame.isPeerID(senderID.utf8) else { throw .invalidValue(field: "sender_id") }
        guard senderName.utf8.count <= WireFrame.maximumNameBytes else {
            throw .fieldTooLong(field: "sender_name", length: senderName.utf8.count, limit: WireFrame.maximumNameBytes)
        }
        guard body.utf8.count <= WireFrame.Message.maximumBody else {
            throw .fieldTooLong(field: "body", length: body.utf8.count, limit: WireFrame.Message.maximumBody)
        }
        guard kind != .system else { throw .invalidValue(field: "kind") }
    }

    /// Decodes every record of a history resource; any bad record makes the whole resource invalid.
    public static func decodeAll(_ bytes: ByteBuffer, limit: Int = 1_000_000, signed: Bool = false) throws(WireError) -> [HistoryRecord] {
        var buffer = bytes
        let records = try decodeSome(&buffer, maximumCount: limit, signed: signed)
        guard buffer.readableBytes == 0 else {
            if records.count == limit { throw .fieldTooLong(field: "records", length: limit + 1, limit: limit) }
            throw .truncated(field: "record")
        }
        return records
    }

    /// Decodes complete records from the front of `buffer` (at most `maximumCount`), for reading a
    /// history resource in pieces: a record cut off by the end of the buffer stays there, to be
    /// completed by the next piece; any invalid field throws at once. A record is at most
    /// `maximumLength` bytes, so a reader never needs to hold more than that beyond a piece.
    public static func decodeSome(_ buffer: inout ByteBuffer, maximumCount: Int, signed: Bool = false) throws(WireError) -> [HistoryRecord] {
        var records: [HistoryRecord] = []
        while buffer.readableBytes > 0, records.count < maximumCount {
            var reader = FieldReader(buffer: buffer)
            do throws(WireError) {
                records.append(try decode(&reader, signed: signed))
            } catch {
                if case .truncated = error { break }
                throw error
            }
            buffer = reader.buffer
        }
        return records
    }

    /// The largest encoded record.
    public static let maximumLength = fixedLength + WireFrame.maximumNameBytes + WireFrame.Message.maximumBody

    /// A signed record's length but its name and body.
    public static let fixedLength = 16 + 1 + 52 + 1 + 8 + 8 + 1 + 4 + 1 + Signature.keyLength + 1 + Signature.length

    static func decode(_ reader: inout FieldReader, signed: Bool) throws(WireError) -> HistoryRecord {
        let id = WireID(bytes: try reader.bytes("message_id", count: 16))!
        let sender = try reader.peerID("sender_id")
        let name = try reader.text("sender_name", lengthType: UInt8.self, limit: WireFrame.maximumNameBytes)
        let sequence = try reader.u64("sequence")
        let timestamp = try reader.u64("timestamp_ms")
        guard let kind = WireFrame.Message.Kind(rawValue: try reader.u8("kind")), kind != .system else { throw .invalidValue(field: "kind") }
        let body = try reader.text("body", lengthType: UInt32.self, limit: WireFrame.Message.maximumBody, multiline: true)
        var signature: Signature?
        if signed {
            let key = try reader.lengthPrefixed("author_key", lengthType: UInt8.self, limit: Signature.keyLength)
            let bytes = try reader.lengthPrefixed("signature", lengthType: UInt8.self, limit: Signature.length)
            switch (key.count, bytes.count) {
            case (0, 0): break
            case (Signature.keyLength, Signature.length): signature = Signature(key: key, bytes: bytes)
            default: throw .invalidValue(field: key.count == Signature.keyLength ? "signature" : "author_key")
            }
        }
        return HistoryRecord(
            id: id, senderID: sender, senderName: name, sequence: sequence,
            timestampMilliseconds: timestamp, kind: kind, body: body, signature: signature)
    }
}
