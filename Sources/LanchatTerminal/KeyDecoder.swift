/// Keys from a terminal in raw mode, decoded from the bytes it sends (pure: bytes in, keys out).
public enum Key: Equatable, Sendable {
    case text(String)
    case enter, backspace, delete, left, right, up, down, home, end, tab
    /// Ctrl-U (kill to the start), Ctrl-K (kill to the end), Ctrl-W (kill the word before the cursor).
    case killToStart, killToEnd, killWord
    case interrupt  // Ctrl-C
    case endOfInput  // Ctrl-D
    case redraw  // Ctrl-L
    /// Text pasted with bracketed paste (ESC [200~ ... ESC [201~), newlines kept.
    case paste(String)
}

/// Turns the byte stream of a terminal into keys. Keeps an incomplete escape sequence or UTF-8
/// character until the rest arrives; a paste longer than `maximumPaste` is cut there.
public struct KeyDecoder: Sendable {
    public static let maximumPaste = 1 << 20
    private var pending: [UInt8] = []
    private var pasting: [UInt8]?

    public init() {}

    public mutating func feed(_ bytes: [UInt8]) -> [Key] {
        pending += bytes
        var keys: [Key] = []
        var index = 0
        func flushText(_ text: inout [UInt8]) {
            if !text.isEmpty { keys.append(.text(String(decoding: text, as: UTF8.self))); text = [] }
        }
        var text: [UInt8] = []
        while index < pending.count {
            if var paste = pasting {
                // Inside a paste: everything up to ESC [201~ is text.
                if let end = Self.find([0x1b, 0x5b, 0x32, 0x30, 0x31, 0x7e], in: pending, from: index) {
                    paste += pending[index..<end]
                    keys.append(.paste(String(decoding: paste.prefix(Self.maximumPaste), as: UTF8.self)))
                    pasting = nil
                    index = end + 6
                    continue
                }
                // Keep a possible start of the end marker for the next feed.
                let keep = min(5, pending.count - index)
                paste += pending[index..<(pending.count - keep)]
                pasting = Array(paste.prefix(Self.maximumPaste))
                pending = Array(pending[(pending.count - keep)...])
                return keys
            }
            let byte = pending[index]
            switch byte {
            case 0x1b:
                flushText(&text)
                guard let (key, length) = Self.escape(Array(pending[index...])) else {
                    // Incomplete: wait for more (a lone ESC followed by nothing stays pending).
                    pending = Array(pending[index...])
                    return keys
                }
                index += length
                if key == .paste("") {
                    pasting = []
                } else if let key {
                    keys.append(key)
                }
                continue
            case 0x0d, 0x0a: flushText(&text); keys.append(.enter)
            case 0x7f, 0x08: flushText(&text); keys.append(.backspace)
            case 0x09: flushText(&text); keys.append(.tab)
            case 0x01: flushText(&text); keys.append(.home)
            case 0x05: flushText(&text); keys.append(.end)
            case 0x02: flushText(&text); keys.append(.left)
            case 0x06: flushText(&text); keys.append(.right)
            case 0x10: flushText(&text); keys.append(.up)
            case 0x0e: flushText(&text); keys.append(.down)
            case 0x15: flushText(&text); keys.append(.killToStart)
            case 0x0b: flushText(&text); keys.append(.killToEnd)
            case 0x17: flushText(&text); keys.append(.killWord)
            case 0x03: flushText(&text); keys.append(.interrupt)
            case 0x04: flushText(&text); keys.append(.endOfInput)
            case 0x0c: flushText(&text); keys.append(.redraw)
            case ..<0x20: break  // other control characters: ignored
            default:
                // A UTF-8 sequence: wait until it is complete.
                let length = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1
                guard index + length <= pending.count else {
                    flushText(&text)
                    pending = Array(pending[index...])
                    return keys
                }
                text += pending[index..<(index + length)]
                index += length
                continue
            }
            index += 1
        }
        flushText(&text)
        pending = []
        return keys
    }

    /// An escape sequence at the start of `bytes`: the key (nil: a sequence we ignore; `.paste("")`:
    /// the start of a paste) and its length; nil if incomplete.
    static func escape(_ bytes: [UInt8]) -> (Key?, Int)? {
        guard bytes.count >= 2 else { return nil }
        if bytes[1] == 0x4f {  // ESC O x
            guard bytes.count >= 3 else { return nil }
            switch bytes[2] {
            case 0x48: return (.home, 3)
            case 0x46: return (.end, 3)
            case 0x41: return (.up, 3)
            case 0x42: return (.down, 3)
            case 0x43: return (.right, 3)
            case 0x44: return (.left, 3)
            default: return (nil, 3)
            }
        }
        guard bytes[1] == 0x5b else { return (nil, 2) }  // ESC x (Alt-x): ignored
        // CSI: parameters (0x30-0x3f), intermediates (0x20-0x2f), then a final byte (0x40-0x7e).
        var index = 2
        while index < bytes.count, bytes[index] >= 0x20, bytes[index] <= 0x3f { index += 1 }
        guard index < bytes.count else { return bytes.count > 32 ? (nil, bytes.count) : nil }
        let parameters = String(decoding: bytes[2..<index], as: UTF8.self)
        let length = index + 1
        switch bytes[index] {
        case 0x41: return (.up, length)
        case 0x42: return (.down, length)
        case 0x43: return (.right, length)
        case 0x44: return (.left, length)
        case 0x48: return (.home, length)
        case 0x46: return (.end, length)
        case 0x7e:
            switch parameters {
            case "1", "7": return (.home, length)
            case "4", "8": return (.end, length)
            case "3": return (.delete, length)
            case "200": return (.paste(""), length)
            default: return (nil, length)
            }
        default: return (nil, length)
        }
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        for index in start...(haystack.count - needle.count) where haystack[index..<(index + needle.count)].elementsEqual(needle) {
            return index
        }
        return nil
    }
}
