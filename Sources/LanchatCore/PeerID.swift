/// A peer's id: the SHA-256 of its public key (SubjectPublicKeyInfo DER), in lowercase RFC 4648
/// base32 without padding (52 characters). People see a prefix (`short`); any unique prefix names a peer.
public struct PeerID: Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
    public let rawValue: String

    public static let length = 52
    static let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)

    /// Validates `text` (case-insensitive); `nil` if it is not a well-formed id.
    public init?(_ text: String) {
        // ASCII only: read in place (a native string's bytes), a byte at a time, lowercased only if it has
        // capitals (ids are read in every record of a history and in every message stored or checked: through
        // `String.UTF8View`'s iterator, 4,000 instructions an id).
        let shape = text.utf8.withContiguousStorageIfAvailable(Self.shape) ?? Array(text.utf8).withUnsafeBufferPointer(Self.shape)
        switch shape {
        case .lowercase: rawValue = text
        case .capitals: rawValue = text.lowercased()
        case .invalid: return nil
        }
    }

    private enum Shape { case lowercase, capitals, invalid }

    private static func shape(_ bytes: UnsafeBufferPointer<UInt8>) -> Shape {
        guard bytes.count == length else { return .invalid }
        var capitals = false
        for byte in bytes {
            // (Each range by one unsigned comparison.)
            if byte &- UInt8(ascii: "a") < 26 || byte &- UInt8(ascii: "2") < 6 { continue }
            guard byte &- UInt8(ascii: "A") < 26 else { return .invalid }
            capitals = true
        }
        return capitals ? .capitals : .lowercase
    }

    /// Whether `text` (case-insensitive) could begin an id and names a key, not a name: at least
    /// `minimumLength` characters of the id's alphabet.
    public static func isPrefix(_ text: String, minimumLength: Int) -> Bool {
        let bytes = Array(text.lowercased().utf8)
        return bytes.count >= minimumLength && bytes.count <= length && bytes.allSatisfy { alphabet.contains($0) }
    }

    /// The id of a public key, from the SHA-256 digest of its SubjectPublicKeyInfo DER.
    public init(digest: some Sequence<UInt8>) {
        self.rawValue = Self.base32(Array(digest))
    }

    /// Hashes the id's bytes as they are (what `String`'s hash also does, after checks an id does not
    /// need): a peer's id is a key of most of the engine's tables, hashed several times for each message.
    /// All of them, with the process's seed: ids read from the wire need only be well formed, so a member
    /// could pick many that share a prefix, and a hash of the prefix alone would put them all in one slot.
    public func hash(into hasher: inout Hasher) {
        let hashed = rawValue.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if hashed == nil { Array(rawValue.utf8).withUnsafeBytes { hasher.combine(bytes: $0) } }
    }

    /// The first 12 characters: what `lanchat peers` shows.
    public var short: String { String(rawValue.prefix(12)) }
    public var description: String { rawValue }
    public static func < (lhs: PeerID, rhs: PeerID) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(from decoder: Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let id = PeerID(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a peer id"))
        }
        self = id
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public static func base32(_ data: [UInt8]) -> String {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for byte in data {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                out.append(alphabet[Int((buffer >> UInt32(bits - 5)) & 31)])
                bits -= 5
            }
        }
        if bits > 0 { out.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return String(decoding: out, as: UTF8.self)
    }
}
