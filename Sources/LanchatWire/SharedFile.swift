import LanchatCore

/// A file shared in a room (issue 13, item 4): the body of a MESSAGE of kind 1 (file), signed by its
/// author like every message, so it is stored, relayed and handed to newcomers as history is. Members
/// fetch the content by its SHA-256 from any member that holds it (FILE_REQUEST, then a RESOURCE_OFFER of
/// kind 3), and check it against this digest.
///
/// The body is five lines, in this order, with no line after the last:
/// ```
/// lanchat-file/1
/// sha256: <64 lowercase hex digits>
/// size: <decimal bytes>
/// type: <media type, e.g. image/png; application/octet-stream when unknown>
/// name: <the file's name: 1-255 bytes, one line, no "/" and no control characters>
/// ```
/// Anything else is not an announcement (`init(body:)` answers nil).
public struct SharedFile: Equatable, Sendable {
    public static let header = "lanchat-file/1"
    public static let maximumName = 255

    public var sha256: [UInt8]
    public var size: UInt64
    public var type: String
    public var name: String

    public init(sha256: [UInt8], size: UInt64, type: String, name: String) {
        self.sha256 = sha256
        self.size = size
        self.type = type
        self.name = name
    }

    public var isImage: Bool { type.hasPrefix("image/") }
    public var hex: String { Hex.string(sha256) }

    public var body: String {
        Self.bodyPrefix(sha256: sha256) + ["size: \(size)", "type: " + type, "name: " + name].joined(separator: "\n")
    }

    /// How every announcement of this content begins (its first two lines): what a store looks for.
    public static func bodyPrefix(sha256: [UInt8]) -> String {
        header + "\nsha256: " + Hex.string(sha256) + "\n"
    }

    /// Whether the fields can be announced as they are (what `init(body:)` would read back).
    public var isValid: Bool {
        sha256.count == 32 && Self.isType(type) && Self.isName(name)
    }

    public init?(body: String) {
        let lines = body.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count == 5, lines[0] == Self.header,
            let digest = Self.field(lines[1], "sha256"), let sha256 = Self.bytes(hex: digest),
            let sizeText = Self.field(lines[2], "size"), sizeText.count <= 20, sizeText.allSatisfy({ $0.isASCII && $0.isNumber }),
            sizeText == "0" || !sizeText.hasPrefix("0"), let size = UInt64(sizeText),
            let type = Self.field(lines[3], "type"), let name = Self.field(lines[4], "name")
        else { return nil }
        self.init(sha256: sha256, size: size, type: type, name: name)
        guard isValid else { return nil }
    }

    /// `image/png`: lowercase `[a-z0-9.+-]` on both sides of one "/", at most 64 bytes.
    public static func isType(_ type: String) -> Bool {
        let parts = type.split(separator: "/", omittingEmptySubsequences: false)
        guard type.utf8.count <= 64, parts.count == 2 else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2e || $0 == 0x2b || $0 == 0x2d }
        }
    }

    /// One line of 1-255 bytes, no "/", no control characters, not "." or "..".
    public static func isName(_ name: String) -> Bool {
        let bytes = name.utf8
        guard !bytes.isEmpty, bytes.count <= maximumName, name != ".", name != ".." else { return false }
        return !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7f || $0 == "/" || (0x80...0x9f).contains($0.value) }
    }

    /// The media type of content that starts with these bytes (the first 16 are enough): the common
    /// image formats, PDF, ZIP; `application/octet-stream` otherwise. Content decides, never the name.
    public static func sniff(_ head: [UInt8]) -> String {
        func starts(_ magic: [UInt8], at offset: Int = 0) -> Bool {
            head.count >= offset + magic.count && Array(head[offset..<offset + magic.count]) == magic
        }
        if starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]) { return "image/png" }
        if starts([0xff, 0xd8, 0xff]) { return "image/jpeg" }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return "image/gif" }
        if starts(Array("RIFF".utf8)), starts(Array("WEBP".utf8), at: 8) { return "image/webp" }
        if starts(Array("BM".utf8)), head.count >= 14 { return "image/bmp" }
        if starts(Array("%PDF-".utf8)) { return "application/pdf" }
        if starts([0x50, 0x4b, 0x03, 0x04]) { return "application/zip" }
        return "application/octet-stream"
    }

    static func field(_ line: Substring, _ name: String) -> String? {
        let prefix = name + ": "
        guard line.hasPrefix(prefix) else { return nil }
        return String(line.dropFirst(prefix.count))
    }

    /// 64 lowercase hex digits as 32 bytes (uppercase is not the format: refused).
    public static func bytes(hex: String) -> [UInt8]? {
        guard hex.utf8.count == 64, let bytes = Hex.bytes(hex), Hex.string(bytes) == hex else { return nil }
        return bytes
    }
}
