/// Makes a file name offered by a peer safe to create in the download directory (pure; no file system).
///
/// The result is one path component: no `/` or `\`, not `.` or `..`, no leading dot (no hidden-file
/// surprises), no control or bidirectional-format characters (each becomes `_`), at most
/// `maximumBytes` of UTF-8 with the extension kept. Invalid UTF-8 becomes `_` too. A name with nothing
/// left is refused with a reason a person can read.
public enum SafeFileName {
    public static let maximumBytes = 255

    public struct Refusal: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
    }

    public static func make(from raw: [UInt8]) -> Result<String, Refusal> {
        // Invalid UTF-8 decodes to U+FFFD, which is replaced below like any other unsafe character.
        let decoded = String(decoding: raw, as: UTF8.self)
        // Work on Unicode scalars, not characters: "/" followed by a combining mark is one Character
        // but still a path separator on disk.
        var components: [[Unicode.Scalar]] = [[]]
        for scalar in decoded.unicodeScalars {
            if scalar == "/" || scalar == "\\" { components.append([]) } else { components[components.count - 1].append(scalar) }
        }
        guard let last = components.last(where: { !$0.isEmpty }) else {
            return .failure(Refusal(description: "the offered name is empty"))
        }
        var scalars = last.map { isUnsafe($0) ? "_" : $0 }
        // No hidden files, no "." or "..", nothing that starts with a mark or ends with a dot or space.
        while let first = scalars.first, first == "." || first == " " || isMark(first) { scalars.removeFirst() }
        while let final = scalars.last, final == "." || final == " " { scalars.removeLast() }
        guard !scalars.isEmpty else {
            return .failure(Refusal(description: "the offered name '\(printable(decoded))' has no usable characters"))
        }
        return .success(truncate(String(String.UnicodeScalarView(scalars))))
    }

    static func isMark(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark: return true
        default: return false
        }
    }

    static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned: return true
        default: return scalar == "\u{FFFD}"
        }
    }

    /// Cuts a name to `maximumBytes` of UTF-8, keeping an extension of up to 16 bytes.
    static func truncate(_ name: String) -> String {
        guard name.utf8.count > maximumBytes else { return name }
        let (stem, suffix) = split(name)
        let keep = suffix.utf8.count <= 16 ? suffix : ""
        return cut(stem, toBytes: maximumBytes - keep.utf8.count) + keep
    }

    /// The longest start of `text` of at most `limit` UTF-8 bytes: whole characters if at least one
    /// fits, else whole scalars (one character can be hundreds of bytes of combining marks). Never empty
    /// for a non-empty `text` and `limit >= 4`, so a cut stem never leaves a bare ".ext" (a hidden file).
    static func cut(_ text: String, toBytes limit: Int) -> String {
        var result = ""
        for character in text {
            if result.utf8.count + character.utf8.count > limit { break }
            result.append(character)
        }
        guard result.isEmpty else { return result }
        var scalars = String.UnicodeScalarView()
        var bytes = 0
        for scalar in text.unicodeScalars {
            let width = UTF8.width(scalar)
            if bytes + width > limit { break }
            scalars.append(scalar)
            bytes += width
        }
        return String(scalars)
    }

    /// "report.tar.gz" -> ("report.tar", ".gz"); "README" -> ("README", "").
    static func split(_ name: String) -> (stem: String, suffix: String) {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return (name, "") }
        return (String(name[..<dot]), String(name[dot...]))
    }

    /// The first of `name`, `name (1).ext`, `name (2).ext`, ... for which `exists` is false, each within
    /// `maximumBytes` (the stem is cut to make room for the counter, so a name of the maximum length
    /// still gets distinct candidates); nil after `attempts` taken names. Always ends.
    public static func unique(_ name: String, attempts: Int = 10_000, exists: (String) -> Bool) -> String? {
        guard exists(name) else { return name }
        let (stem, suffix) = split(name)
        for counter in 1...max(1, attempts) {
            let tag = " (\(counter))"
            let tail = tag.utf8.count + suffix.utf8.count <= 64 ? tag + suffix : tag
            let candidate = cut(stem, toBytes: maximumBytes - tail.utf8.count) + tail
            if !exists(candidate) { return candidate }
        }
        return nil
    }

    /// For messages: the name with control characters shown as `?` and cut to 80 characters.
    static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.prefix(80).map { isUnsafe($0) ? "?" : $0 }))
    }
}
