import LanchatCore
import NIOCore

/// Reads payload fields, turning every shortfall into an error that names the field.
struct FieldReader {
    var buffer: ByteBuffer

    mutating func integer<T: FixedWidthInteger>(_ field: String, as: T.Type = T.self) throws(WireError) -> T {
        guard let value = buffer.readInteger(as: T.self) else { throw .truncated(field: field) }
        return value
    }

    mutating func u8(_ field: String) throws(WireError) -> UInt8 { try integer(field) }
    mutating func u16(_ field: String) throws(WireError) -> UInt16 { try integer(field) }
    mutating func u32(_ field: String) throws(WireError) -> UInt32 { try integer(field) }
    mutating func u64(_ field: String) throws(WireError) -> UInt64 { try integer(field) }

    mutating func bytes(_ field: String, count: Int) throws(WireError) -> [UInt8] {
        guard let value = buffer.readBytes(length: count) else { throw .truncated(field: field) }
        return value
    }

    /// A length-prefixed byte string (`u8`, `u16` or `u32` length) of at most `limit` bytes.
    mutating func lengthPrefixed<L: FixedWidthInteger>(_ field: String, lengthType: L.Type, limit: Int) throws(WireError) -> [UInt8] {
        try bytes(field, count: try lengthPrefix(field, lengthType: L.self, limit: limit))
    }

    /// A field's length (`u8`, `u16` or `u32`), at most `limit`, with that many bytes there to read.
    private mutating func lengthPrefix<L: FixedWidthInteger>(_ field: String, lengthType: L.Type, limit: Int) throws(WireError) -> Int {
        guard let length = buffer.readInteger(as: L.self) else { throw .truncated(field: field) }
        guard Int(length) <= limit else { throw .fieldTooLong(field: field, length: Int(length), limit: limit) }
        guard buffer.readableBytes >= Int(length) else { throw .truncated(field: field) }
        return Int(length)
    }

    /// UTF-8 text without control characters (tab and newline allowed where `multiline`). Checked where
    /// it lies in the buffer, and made a string from there: no array of its bytes first.
    mutating func text<L: FixedWidthInteger>(_ field: String, lengthType: L.Type, limit: Int, multiline: Bool = false) throws(WireError) -> String {
        let count = try lengthPrefix(field, lengthType: L.self, limit: limit)
        // (A control character is one byte in UTF-8: no byte of a longer character is below 0x80.)
        let shape = buffer.withUnsafeReadableBytes { raw -> (control: Bool, ascii: Bool) in
            var ascii = true
            for byte in UnsafeRawBufferPointer(rebasing: raw[..<count]) {
                if byte >= 0x80 {
                    ascii = false
                } else if (byte < 0x20 || byte == 0x7f) && !(multiline && (byte == 0x0a || byte == 0x09)) {
                    return (true, ascii)
                }
            }
            return (false, ascii)
        }
        guard !shape.control else { throw .invalidText(field: field) }
        // ASCII is valid UTF-8 as it is: only other text is validated (`String(validating:)` looks up
        // generic metadata at each call, a seventh of what decoding a history's record cost).
        if shape.ascii, let text = buffer.readString(length: count) { return text }
        guard let raw = buffer.readBytes(length: count), let text = String(validating: raw, as: UTF8.self) else { throw .invalidText(field: field) }
        return text
    }

    /// A peer's id (`u8` length, 52 characters of its alphabet), checked where it lies in the buffer and
    /// made a string from there (what each record of a history names).
    mutating func peerID(_ field: String) throws(WireError) -> String {
        let count = try lengthPrefix(field, lengthType: UInt8.self, limit: PeerID.length)
        let valid = buffer.withUnsafeReadableBytes { WireFrame.isPeerID(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        guard valid, let id = buffer.readString(length: count) else { throw .invalidValue(field: field) }
        return id
    }

    /// Nothing must follow. (The frame's name is made only for the error: a frame type's name, made by
    /// reflection, cost 8,000 instructions at every frame decoded.)
    mutating func end(_ frame: @autoclosure () -> String) throws(WireError) {
        guard buffer.readableBytes == 0 else { throw .trailingBytes(frame: frame(), count: buffer.readableBytes) }
    }
}

extension ByteBuffer {
    mutating func writeLengthPrefixed<L: FixedWidthInteger>(_ bytes: some Collection<UInt8>, as: L.Type) {
        writeInteger(L(bytes.count))
        writeBytes(bytes)
    }
}
