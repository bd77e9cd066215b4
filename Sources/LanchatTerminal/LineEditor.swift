/// The input line of the terminal UI: a buffer with a cursor, editing keys and a history of what was
/// sent (pure: keys in, outcomes out).
public struct LineEditor: Sendable {
    public enum Outcome: Equatable, Sendable {
        case none
        /// Lines to send (one per pasted line; empty lines are left out).
        case submit([String])
        case interrupt
        case endOfInput
        case redraw
    }

    public static let maximumLength = 64 * 1024
    public static let historySize = 500

    public private(set) var characters: [Character] = []
    public private(set) var cursor = 0
    private var history: [String] = []
    /// Where up/down is in the history (`history.count`: the line being typed).
    private var browsing = 0
    private var draft: [Character] = []

    public init() {}

    public var text: String { String(characters) }

    public mutating func apply(_ key: Key) -> Outcome {
        switch key {
        case .text(let text):
            insert(text.filter { !$0.isNewline })
        case .paste(let text):
            // Every complete line is sent; the last piece (no newline after it) stays to be edited.
            // "\r\n" is one Character: drop carriage returns as scalars before splitting.
            let lines = String(String.UnicodeScalarView(text.unicodeScalars.filter { $0 != "\r" }))
            var pieces = lines.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let last = pieces.removeLast()
            if pieces.isEmpty {
                insert(last)
                return .none
            }
            pieces[0] = surround(pieces[0])
            let sent = pieces.filter { !$0.allSatisfy { $0 == " " } }
            characters = Array(last)
            cursor = characters.count
            for line in sent { remember(line) }
            return sent.isEmpty ? .none : .submit(sent)
        case .enter:
            let line = text
            characters = []
            cursor = 0
            guard !line.allSatisfy({ $0 == " " }) else { return .none }
            remember(line)
            return .submit([line])
        case .backspace:
            if cursor > 0 {
                characters.remove(at: cursor - 1)
                cursor -= 1
            }
        case .delete:
            if cursor < characters.count { characters.remove(at: cursor) }
        case .left: cursor = max(0, cursor - 1)
        case .right: cursor = min(characters.count, cursor + 1)
        case .home: cursor = 0
        case .end: cursor = characters.count
        case .killToStart:
            characters.removeFirst(cursor)
            cursor = 0
        case .killToEnd:
            characters.removeLast(characters.count - cursor)
        case .killWord:
            var start = cursor
            while start > 0, characters[start - 1] == " " { start -= 1 }
            while start > 0, characters[start - 1] != " " { start -= 1 }
            characters.removeSubrange(start..<cursor)
            cursor = start
        case .up:
            guard browsing > 0 else { break }
            if browsing == history.count { draft = characters }
            browsing -= 1
            characters = Array(history[browsing])
            cursor = characters.count
        case .down:
            guard browsing < history.count else { break }
            browsing += 1
            characters = browsing == history.count ? draft : Array(history[browsing])
            cursor = characters.count
        case .tab:
            insert("    ")
        case .interrupt: return .interrupt
        case .endOfInput:
            if characters.isEmpty { return .endOfInput }
            if cursor < characters.count { characters.remove(at: cursor) }
        case .redraw: return .redraw
        }
        return .none
    }

    private mutating func insert(_ text: String) {
        let room = Self.maximumLength - characters.count
        guard room > 0 else { return }
        let new = Array(text.prefix(room))
        characters.insert(contentsOf: new, at: cursor)
        cursor += new.count
    }

    /// The first pasted line continues what was typed before the cursor.
    private func surround(_ pasted: String) -> String {
        String(characters[..<cursor]) + pasted + String(characters[cursor...])
    }

    private mutating func remember(_ line: String) {
        if history.last != line { history.append(line) }
        if history.count > Self.historySize { history.removeFirst(history.count - Self.historySize) }
        browsing = history.count
        draft = []
    }
}
