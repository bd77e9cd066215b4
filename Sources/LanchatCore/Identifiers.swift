// Identifiers shared by every layer: defined once here, in a module that links nothing else (no
// dns_sd, no NIO), so identity, security, the wire format and the engine can name them.

/// A 16-byte identifier (invitation, message, transfer): random, except that a message's begins with
/// the time it was written (`IDGenerator.messageID(at:)`).
public struct WireID: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    public static func random() -> WireID {
        var generator = SystemRandomNumberGenerator()
        return WireID(bytes: (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })!
    }

    public var description: String { Hex.string(bytes) }

    /// Its 16 bytes as two words (an array's own hash takes them one by one, after its count).
    public func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { raw in
            hasher.combine(raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
            hasher.combine(raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        }
    }
}

/// A stream's name: `[A-Za-z0-9._-]{1,64}`.
public struct StreamName: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard (1...64).contains(bytes.count),
            bytes.allSatisfy({
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a) || $0 == 0x2d || $0 == 0x2e || $0 == 0x5f
            })
        else { return nil }
        rawValue = text
    }

    public var description: String { rawValue }
}

/// A room id: `[A-Za-z0-9-]{1,32}`.
public struct RoomID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard (1...32).contains(bytes.count),
            bytes.allSatisfy({
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a) || $0 == 0x2d
            })
        else { return nil }
        rawValue = text
    }

    public var description: String { rawValue }
}

extension WireID {
    public init?(hex: String) {
        guard hex.utf8.count == 32, let bytes = Hex.bytes(hex) else { return nil }
        self.init(bytes: bytes)
    }
}

/// Lowercase hexadecimal, as ids and digests are written in the store and the control API.
public enum Hex {
    public static func bytes(_ text: String) -> [UInt8]? {
        // Read in place where the text is contiguous UTF-8 (a native string), without a copy of its digits:
        // every stored message's id is read from text (four times over for each record a history seals).
        if let bytes = text.utf8.withContiguousStorageIfAvailable({ bytes(digits: $0) }) { return bytes }
        return Array(text.utf8).withUnsafeBufferPointer { bytes(digits: $0) }
    }

    private static func bytes(digits: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard digits.count % 2 == 0 else { return nil }
        // Written in place, each digit's value by comparisons alone (through `value`'s optional, and an
        // append at each byte, a message id took 1,800 instructions).
        var valid = true
        let bytes = [UInt8](unsafeUninitializedCapacity: digits.count / 2) { out, count in
            for index in 0..<digits.count / 2 {
                let high = nibble(digits[2 * index])
                let low = nibble(digits[2 * index + 1])
                guard high | low < 16 else {
                    valid = false
                    break
                }
                out[index] = high << 4 | low
            }
            count = valid ? digits.count / 2 : 0
        }
        return valid ? bytes : nil
    }

    /// Lowercase, two digits a byte (one buffer: ids are written to text for every stored message).
    public static func string(_ bytes: [UInt8]) -> String {
        guard !bytes.isEmpty else { return "" }
        @inline(__always) func digit(_ value: UInt8) -> UInt8 { value < 10 ? 0x30 + value : 0x57 + value }
        return String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            var index = 0
            for byte in bytes {
                out[index] = digit(byte >> 4)
                out[index + 1] = digit(byte & 15)
                index += 2
            }
            return index
        }
    }

    /// The value of one hex digit (either case), or 255.
    @inline(__always) private static func nibble(_ digit: UInt8) -> UInt8 {
        if digit &- 0x30 < 10 { return digit &- 0x30 }
        let lower = digit | 0x20  // (capitals to small letters; no other byte becomes one of a-f)
        return lower &- 0x61 < 6 ? lower &- 0x57 : 255
    }

    /// The value of one hex digit (either case), or nil.
    public static func value(_ digit: UInt8) -> UInt8? {
        let value = nibble(digit)
        return value < 16 ? value : nil
    }
}
