/// What the page may show inline: a received file whose first bytes say it is a PNG, JPEG, GIF or WebP
/// image (never what its name or the sender claims). Anything else is not served.
public enum ImageSniffer {
    /// The media type the first bytes (12 are enough) tell, or nil.
    public static func imageType(_ bytes: some Collection<UInt8>) -> String? {
        let head = Array(bytes.prefix(12))
        func starts(_ prefix: [UInt8]) -> Bool { head.count >= prefix.count && Array(head.prefix(prefix.count)) == prefix }
        if starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]) { return "image/png" }
        if starts([0xff, 0xd8, 0xff]) { return "image/jpeg" }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return "image/gif" }
        if head.count >= 12, starts(Array("RIFF".utf8)), Array(head[8..<12]) == Array("WEBP".utf8) { return "image/webp" }
        return nil
    }
}
