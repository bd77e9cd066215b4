/// A DNS-SD TXT record (RFC 6763 section 6): a list of `key=value` items, each at most 255 bytes.
///
/// Keys are printable US-ASCII without `=`, compared case-insensitively (stored lowercased: Avahi
/// compares them case-sensitively, so we normalise). A key without `=` is a boolean attribute
/// (value `nil`); `key=` has an empty value. Decoding never fails: items that break the rules are
/// dropped and listed in `problems`, and for a repeated key the first one wins (RFC 6763 6.4).
public struct TXTRecord: Equatable, Sendable {
    public struct Entry: Equatable, Sendable {
        public var key: String
        public var value: [UInt8]?
        public init(key: String, value: [UInt8]?) {
            self.key = key
            self.value = value
        }
    }

    /// The largest item (length byte excluded).
    public static let maximumItemLength = 255
    /// The largest record we encode or register. RFC 6763 6.2 suggests keeping it within a packet
    /// (1300 bytes) and ideally under 400; we refuse more than 1300.
    public static let maximumRecordLength = 1300

    public enum EncodingError: Error, Equatable, Sendable, CustomStringConvertible {
        case invalidKey(String)
        case itemTooLong(key: String, length: Int)
        case recordTooLong(length: Int)

        public var description: String {
            switch self {
            case .invalidKey(let key): return "invalid TXT key \(String(reflecting: key)): use 1-255 printable ASCII characters without '='"
            case .itemTooLong(let key, let length): return "TXT item \(key) is \(length) bytes; the limit is 255"
            case .recordTooLong(let length): return "TXT record is \(length) bytes; the limit is \(TXTRecord.maximumRecordLength)"
            }
        }
    }

    public private(set) var entries: [Entry] = []
    /// What was wrong with the bytes this record was decoded from (empty when built in code).
    public private(set) var problems: [String] = []

    public init() {}

    /// Builds a record from string pairs (values as UTF-8).
    public init(_ pairs: KeyValuePairs<String, String>) {
        for (key, value) in pairs { self[key] = Array(value.utf8) }
    }

    /// The value of `key`: `nil` if absent, `.some(nil)` for a boolean attribute.
    public subscript(key: String) -> [UInt8]?? {
        get {
            let key = key.lowercased()
            guard let entry = entries.first(where: { $0.key == key }) else { return nil }
            return .some(entry.value)
        }
        set {
            let key = key.lowercased()
            if let index = entries.firstIndex(where: { $0.key == key }) {
                if let newValue { entries[index].value = newValue } else { entries.remove(at: index) }
            } else if let newValue {
                entries.append(Entry(key: key, value: newValue))
            }
        }
    }

    /// The value of `key` as text, or `nil` if absent, boolean, or not valid UTF-8.
    public func string(_ key: String) -> String? {
        guard case .some(.some(let bytes)) = self[key] else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }

    public func contains(_ key: String) -> Bool { self[key] != nil }

    static func isValidKey(_ key: String) -> Bool {
        let bytes = Array(key.utf8)
        return !bytes.isEmpty && bytes.count <= maximumItemLength && bytes.allSatisfy { $0 >= 0x20 && $0 <= 0x7E && $0 != UInt8(ascii: "=") }
    }

    /// Encodes the record in wire format. An empty record encodes as no bytes (register passes a
    /// single empty string then, as RFC 6763 6.1 asks).
    public func encode() throws(EncodingError) -> [UInt8] {
        var out: [UInt8] = []
        for entry in entries {
            guard Self.isValidKey(entry.key) else { throw .invalidKey(entry.key) }
            var item = Array(entry.key.utf8)
            if let value = entry.value { item.append(UInt8(ascii: "=")); item += value }
            guard item.count <= Self.maximumItemLength else { throw .itemTooLong(key: entry.key, length: item.count) }
            out.append(UInt8(item.count))
            out += item
        }
        guard out.count <= Self.maximumRecordLength else { throw .recordTooLong(length: out.count) }
        return out
    }

    /// Decodes wire-format bytes, keeping what is valid and noting the rest in `problems`.
    public init(decoding bytes: [UInt8]) {
        var index = 0
        while index < bytes.count {
            let length = Int(bytes[index])
            index += 1
            guard index + length <= bytes.count else {
                problems.append("truncated item at offset \(index - 1): \(length) bytes announced, \(bytes.count - index) left")
                break
            }
            let item = bytes[index..<(index + length)]
            index += length
            if item.isEmpty { continue }  // an empty string (the empty record's placeholder)
            let equals = item.firstIndex(of: UInt8(ascii: "="))
            let keyBytes = item[item.startIndex..<(equals ?? item.endIndex)]
            guard !keyBytes.isEmpty, keyBytes.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E }) else {
                problems.append("item with an invalid key dropped")
                continue
            }
            let key = String(decoding: keyBytes, as: UTF8.self).lowercased()
            if entries.contains(where: { $0.key == key }) {
                problems.append("repeated key \(key) ignored")
                continue
            }
            let value = equals.map { Array(item[item.index(after: $0)...]) }
            entries.append(Entry(key: key, value: value))
        }
    }
}
