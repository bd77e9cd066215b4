/// The conversation area of the terminal UI laid out for a window (pure: lines, width and height in,
/// rows out). Lines are wrapped by display columns (wide characters take two, combining marks none, a
/// wide character that does not fit at the end of a row goes to the next, as a terminal puts it) and
/// the last rows that fit are returned bottom-aligned, so a full redraw after a resize shows what the
/// scrolling conversation showed, wrapped to the new width, every row on a row of its own.
///
/// The lines may carry the UI's own styling (SGR sequences, `ESC [ … m`): they take no column, and each
/// row is made to stand on its own (the styles in force are repeated at its start and reset at its end),
/// so a row drawn without the one above it keeps its colours. Any other control character (an escape
/// sequence that is not SGR, a tab, a carriage return) is shown as "?": nothing in a line can move the
/// cursor or change the terminal.
public enum ConversationLayout {
    /// The rows of a conversation area `height` rows high and `width` columns wide: exactly `height`
    /// strings, the last rows of the wrapped `lines` at the bottom, empty strings above them when the
    /// conversation is shorter than the area. When the last line alone is taller than the area, its last
    /// rows are shown. Only as many lines as are needed are wrapped, from the last one up.
    public static func rows(_ lines: [String], width: Int, height: Int) -> [String] {
        guard height > 0 else { return [] }
        var bottomUp: [String] = []
        for line in lines.reversed() {
            let wrapped = wrap(line, width: width)
            for row in wrapped.reversed() {
                bottomUp.append(row)
                if bottomUp.count == height { return bottomUp.reversed() }
            }
        }
        return Array(repeating: "", count: height - bottomUp.count) + bottomUp.reversed()
    }

    /// One line cut into rows of at most `width` columns (at least one row: an empty line is one empty
    /// row). A character wider than the whole width (a wide one in a window one column wide) is put on a
    /// row of its own.
    public static func wrap(_ line: String, width: Int) -> [String] {
        let width = max(1, width)
        var rows: [String] = []
        var row = ""
        var used = 0
        /// The SGR sequences in force since the last reset (repeated at the start of the next row).
        var styles: [String] = []
        func breakRow() {
            if !styles.isEmpty { row += reset }
            rows.append(row)
            row = styles.joined()
            used = 0
        }
        for token in tokens(line) {
            switch token {
            case .style(let sequence):
                row += sequence
                if isReset(sequence) { styles = [] } else { styles.append(sequence) }
            case .text(let character, let columns):
                if used + columns > width, used > 0 { breakRow() }
                row += String(character)
                used += columns
            }
        }
        if !styles.isEmpty { row += reset }
        rows.append(row)
        return rows
    }

    /// How many columns `text` takes on a terminal (SGR sequences none, other control characters one,
    /// as the "?" they are shown as).
    public static func displayWidth(_ text: String) -> Int {
        tokens(text).reduce(0) { total, token in
            if case .text(_, let columns) = token { return total + columns }
            return total
        }
    }

    /// The columns one character (grapheme cluster) takes: 2 for East Asian wide and fullwidth
    /// characters and emoji shown as emoji, 0 for a cluster of combining marks and other zero-width
    /// characters alone, 1 otherwise.
    public static func width(of character: Character) -> Int {
        let scalars = character.unicodeScalars
        guard let first = scalars.first else { return 0 }
        if first.properties.generalCategory == .control { return 1 }
        if scalars.contains(where: { $0.properties.isEmojiPresentation }) { return 2 }
        if scalars.contains("\u{FE0F}"), first.properties.isEmoji { return 2 }
        if scalars.allSatisfy(isZeroWidth) { return 0 }
        if isWide(first.value) { return 2 }
        return 1
    }

    // MARK: Tokens

    private static let reset = "\u{1b}[0m"

    private enum Token {
        case style(String)
        case text(Character, columns: Int)
    }

    /// The line as SGR sequences and characters with their widths; other control characters as "?".
    private static func tokens(_ line: String) -> [Token] {
        var result: [Token] = []
        let characters = Array(line)
        var index = 0
        while index < characters.count {
            let character = characters[index]
            if character == "\u{1b}", let end = sgrEnd(characters, from: index) {
                result.append(.style(String(characters[index...end])))
                index = end + 1
                continue
            }
            if let first = character.unicodeScalars.first, first.properties.generalCategory == .control {
                result.append(.text("?", columns: 1))
            } else {
                result.append(.text(character, columns: width(of: character)))
            }
            index += 1
        }
        return result
    }

    /// The index of the final "m" when an SGR sequence (ESC [ digits and semicolons m) starts at `start`.
    private static func sgrEnd(_ characters: [Character], from start: Int) -> Int? {
        guard start + 2 < characters.count, characters[start + 1] == "[" else { return nil }
        var index = start + 2
        while index < characters.count, index - start <= 32 {
            let character = characters[index]
            if character == "m" { return index }
            guard character == ";" || ("0"..."9").contains(character) else { return nil }
            index += 1
        }
        return nil
    }

    private static func isReset(_ sequence: String) -> Bool {
        sequence == "\u{1b}[m" || sequence == "\u{1b}[0m"
    }

    private static func isZeroWidth(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return true
        default: break
        }
        // Hangul medial vowels and final consonants, which join the syllable before them.
        return (0x1160...0x11FF).contains(scalar.value) || (0xD7B0...0xD7FF).contains(scalar.value)
    }

    /// East Asian Wide (W) and Fullwidth (F) code points (Unicode 15), emoji left to `isEmojiPresentation`.
    private static func isWide(_ value: UInt32) -> Bool {
        for range in wideRanges where range.contains(value) { return true }
        return false
    }

    private static let wideRanges: [ClosedRange<UInt32>] = [
        0x1100...0x115F,  // Hangul Jamo initial consonants
        0x2329...0x232A,  // angle brackets
        0x2E80...0x303E,  // CJK radicals, Kangxi, ideographic description, CJK symbols and punctuation
        0x3041...0x33FF,  // Hiragana, Katakana, Bopomofo, Hangul compatibility Jamo, Kanbun, CJK compatibility
        0x3400...0x4DBF,  // CJK extension A
        0x4E00...0x9FFF,  // CJK unified ideographs
        0xA000...0xA4CF,  // Yi
        0xA960...0xA97F,  // Hangul Jamo extended A
        0xAC00...0xD7A3,  // Hangul syllables
        0xF900...0xFAFF,  // CJK compatibility ideographs
        0xFE10...0xFE19,  // vertical forms
        0xFE30...0xFE6F,  // CJK compatibility forms, small form variants
        0xFF00...0xFF60,  // fullwidth forms
        0xFFE0...0xFFE6,  // fullwidth signs
        0x16FE0...0x16FE4,  // ideographic symbols
        0x17000...0x18CFF,  // Tangut, Khitan
        0x1AFF0...0x1B2FF,  // Kana extended, Nushu
        0x1F200...0x1F202, 0x1F210...0x1F23B, 0x1F240...0x1F248, 0x1F250...0x1F251,  // enclosed ideographs
        0x20000...0x2FFFD,  // CJK extensions B to F, compatibility supplement
        0x30000...0x3FFFD,  // CJK extensions G and H
    ]
}
