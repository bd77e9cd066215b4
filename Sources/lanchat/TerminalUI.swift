import Dispatch
import FoundationEssentials
import Glibc
import LanchatControl
import LanchatTerminal
import Synchronization

/// The interactive mode on a terminal: messages scroll above a status line and a fixed input line
/// (a scroll region), so what arrives never lands in what the person is typing. Raw mode with the
/// line editor of `LanchatTerminal`; invitations ask in the input line and keep the half-typed text;
/// the terminal is restored on every way out (/quit, Ctrl-C, Ctrl-D, SIGTERM, the daemon stopping).
final class TerminalUI: Sendable {
    /// Everything the screen shows and the terminal's state: three threads use it (the key loop on the
    /// main thread, the event thread, the signal queue), one at a time.
    fileprivate struct Screen {
        var editor = LineEditor()
        var decoder = KeyDecoder()
        var rows = 24
        var columns = 80
        var original = termios()
        var active = false
        let color: Bool
        var scrollback: [String] = []
        static let scrollbackSize = 1000

        // What the status line shows (updated from events).
        var me = ""
        var room: String?
        var members: [String: (connected: Int, total: Int)] = [:]
        /// Members with a raised hand, per room; our own availability when it is not `available`.
        var hands: [String: [String]] = [:]
        var myPresence = ""
        /// Who is typing in which room, until when.
        var typists: [String: [String: ContinuousClock.Instant]] = [:]
        var unread: [String: Int] = [:]
        var transfers: [String: TransferEntry] = [:]
        /// An invitation waiting for y/n: shown instead of the input line, which is kept.
        var question: String?
        var signalSources: [DispatchSourceSignal] = []
    }

    private let screen: Mutex<Screen>
    private let color: Bool

    init(color: Bool) {
        self.color = color
        screen = Mutex(Screen(color: color))
    }

    var me: String {
        get { screen.withLock { $0.me } }
        set { screen.withLock { $0.me = newValue } }
    }

    // MARK: Terminal

    func start() {
        screen.withLock { s in
            tcgetattr(0, &s.original)
            var raw = s.original
            raw.c_lflag &= ~tcflag_t(ECHO | ICANON | ISIG | IEXTEN)
            raw.c_iflag &= ~tcflag_t(IXON | ICRNL | BRKINT | INPCK | ISTRIP)
            withUnsafeMutableBytes(of: &raw.c_cc) { cc in
                cc[Int(VMIN)] = 1
                cc[Int(VTIME)] = 0
            }
            tcsetattr(0, TCSAFLUSH, &raw)
            s.active = true
            s.measure()
            // Bracketed paste on; the screen cleared; the scroll region above the two bottom lines.
            s.write("\u{1b}[?2004h\u{1b}[2J\u{1b}[1;\(max(1, s.rows - 2))r")
            s.redrawAll()
        }
        let queue = DispatchQueue(label: "lanchat.terminal.signals")
        for (number, code) in [(SIGWINCH, Int32(-1)), (SIGTERM, 0), (SIGHUP, 1), (SIGINT, 0)] {
            signal(number, SIG_IGN)
            // Made and kept under the lock: a DispatchSource is not Sendable, so one made outside could not move in.
            screen.withLock { s in
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { [weak self] in
                    guard let self else { return }
                    if code < 0 {
                        self.screen.withLock { s in
                            s.measure()
                            s.write("\u{1b}[r\u{1b}[2J\u{1b}[1;\(max(1, s.rows - 2))r")
                            s.redrawAll()
                        }
                    } else {
                        self.restore()
                        Glibc.exit(code)
                    }
                }
                source.resume()
                s.signalSources.append(source)
            }
        }
    }

    /// Gives the terminal back as it was (idempotent): paste mode off, the whole screen scrolls again,
    /// the cursor below the last line, the saved termios.
    func restore() {
        screen.withLock { s in
            guard s.active else { return }
            s.active = false
            s.write("\u{1b}[?2004l\u{1b}[r\u{1b}[\(s.rows);1H\u{1b}[2K\r\n")
            tcsetattr(0, TCSAFLUSH, &s.original)
        }
    }

    // MARK: Output

    /// Adds a line above the status line: wrapped to the width by `ConversationLayout` (as a full redraw
    /// wraps it), each row scrolled in at the bottom of the scroll region.
    func addLine(_ text: String) {
        screen.withLock { s in
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                s.scrollback.append(String(line))
                if s.scrollback.count > Screen.scrollbackSize { s.scrollback.removeFirst() }
                guard s.active else { continue }
                for row in ConversationLayout.wrap(String(line), width: s.columns) {
                    s.write("\u{1b}[\(max(1, s.rows - 2));1H\n" + row)
                }
            }
            if s.active { s.drawBottom() }
        }
    }

    /// A chat message, the sender in a colour of its own (unless NO_COLOR).
    func message(_ message: MessageInfo, showRoom: Bool) {
        let line = describe(message, showRoom: showRoom)
        guard color, message.kind != "system" else { return addLine(line) }
        let sender = senderLabel(message)
        let palette = [31, 32, 33, 34, 35, 36]
        let hash = message.senderId.unicodeScalars.reduce(0) { ($0 &* 31 &+ Int($1.value)) & 0xffff }
        let colored = line.replacing(" \(sender): ", with: " \u{1b}[1;\(palette[hash % palette.count])m\(sender)\u{1b}[0m: ")
        addLine(colored)
    }

    // MARK: State the status line shows

    func setRoom(_ name: String?) {
        screen.withLock { s in
            s.room = name
            if let name { s.unread[name] = nil }
            if s.active { s.drawBottom() }
        }
    }

    func setMembers(_ rooms: [RoomInfo]) {
        screen.withLock { s in
            s.members = Dictionary(uniqueKeysWithValues: rooms.map { ($0.room, ($0.members.filter { $0.state == "connected" }.count, $0.members.count)) })
            s.hands = Dictionary(uniqueKeysWithValues: rooms.map { ($0.room, $0.members.filter { $0.hand == true }.map { printable($0.name) }) })
            if s.active { s.drawBottom() }
        }
    }

    /// `name` is typing in `room`: shown in the status line for 5 s.
    func typing(_ name: String, in room: String) {
        let until = ContinuousClock.now + .seconds(5)
        screen.withLock { s in
            s.typists[room, default: [:]][name] = until
            if s.active { s.drawBottom() }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + 5.1) { [weak self] in
            guard let self else { return }
            self.screen.withLock { if $0.active { $0.drawBottom() } }
        }
    }

    /// Our presence as the status line shows it ("" when available with no text).
    func setPresence(_ presence: PresenceInfo) {
        screen.withLock { s in
            s.myPresence =
                presence.availability == "available" && presence.text.isEmpty
                ? ""
                : presence.availability + (presence.text.isEmpty ? "" : ": \(printable(presence.text))")
            if let room = s.room, presence.hands.contains(room) { s.myPresence += s.myPresence.isEmpty ? "hand up" : ", hand up" }
            if s.active { s.drawBottom() }
        }
    }

    func unreadMessage(in name: String) {
        screen.withLock { s in
            if name != s.room { s.unread[name, default: 0] += 1 }
            if s.active { s.drawBottom() }
        }
    }

    func transfer(_ entry: TransferEntry) {
        screen.withLock { s in
            if entry.hasEnded { s.transfers[entry.id] = nil } else { s.transfers[entry.id] = entry }
            if s.active { s.drawBottom() }
        }
    }

    func ask(_ text: String?) {
        screen.withLock { s in
            s.question = text
            if s.active { s.drawBottom() }
        }
    }

    var asking: Bool { screen.withLock { $0.question != nil } }

    // MARK: Input

    /// Reads keys until the person leaves; `submit` gets each line sent (false: quit), `answer` gets
    /// y/n for an open question.
    func readKeys(submit: (String) -> Bool, answer: (Bool) -> Void, edited: () -> Void = {}) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
            let keys = screen.withLock { $0.decoder.feed(Array(buffer[0..<count])) }
            for key in keys {
                if asking {
                    switch key {
                    case .text(let text) where text.lowercased().hasPrefix("y"): answer(true)
                    case .text, .enter: answer(false)
                    case .interrupt: return
                    default: break
                    }
                    continue
                }
                let outcome = screen.withLock { s -> LineEditor.Outcome in
                    let outcome = s.editor.apply(key)
                    if s.active { s.drawBottom() }
                    return outcome
                }
                switch outcome {
                case .none:
                    if case .text(let text) = key, !text.hasPrefix("/"), !screen.withLock({ $0.editor.text.hasPrefix("/") }) { edited() }
                case .submit(let lines):
                    for line in lines where !submit(line) { return }
                case .interrupt, .endOfInput: return
                case .redraw: screen.withLock { $0.redrawAll() }
                }
            }
        }
    }
}

extension TerminalUI.Screen {
    mutating func measure() {
        var size = winsize()
        if ioctl(1, UInt(TIOCGWINSZ), &size) == 0, size.ws_row >= 3, size.ws_col >= 10 {
            rows = Int(size.ws_row)
            columns = Int(size.ws_col)
        }
    }

    func write(_ text: String) {
        StandardStream.output.write(Data(text.utf8))
    }

    /// Draws the whole screen again (after a resize, Ctrl-L, the start): the conversation laid out from
    /// the bottom up at the current width, as many rows as fit above the status line, bottom-aligned,
    /// every row cleared and written on its own.
    func redrawAll() {
        let rows = ConversationLayout.rows(scrollback, width: columns, height: max(1, self.rows - 2))
        var screen = ""
        for (index, row) in rows.enumerated() {
            screen += "\u{1b}[\(index + 1);1H\u{1b}[2K" + row
        }
        write(screen)
        drawBottom()
    }

    /// The status line and the input line (or the invitation question), and the cursor in it.
    func drawBottom() {
        var status = " \(me)" + (myPresence.isEmpty ? "" : " (\(myPresence))")
        if let room {
            let count = members[room].map { " \($0.connected)/\($0.total)" } ?? ""
            status += " | [\(room)]\(count)"
            if let raised = hands[room], !raised.isEmpty { status += " | hand up: " + raised.joined(separator: ", ") }
            let now = ContinuousClock.now
            let typing = (typists[room] ?? [:]).filter { $0.value > now }.keys.sorted()
            if !typing.isEmpty { status += " | " + typing.joined(separator: ", ") + (typing.count == 1 ? " is" : " are") + " typing…" }
        } else {
            status += " | no room (/invite PEER)"
        }
        let moving = transfers.values.sorted { $0.id < $1.id }.prefix(2).map { entry -> String in
            let percent = entry.size > 0 ? entry.done * 100 / entry.size : 0
            return "\(entry.direction == "outgoing" ? "↑" : "↓") \(printable(entry.name)) \(percent)%"
        }
        if !moving.isEmpty { status += " | " + moving.joined(separator: ", ") + (transfers.count > 2 ? " +\(transfers.count - 2)" : "") }
        let others = unread.filter { $0.key != room && $0.value > 0 }.sorted { $0.key < $1.key }
        if !others.isEmpty { status += " | unread: " + others.map { "\($0.key) \($0.value)" }.joined(separator: ", ") }
        status = fit(status, columns)
        let reverse = color ? "\u{1b}[7m" : ""
        let plain = color ? "\u{1b}[0m" : ""
        write("\u{1b}[\(rows - 1);1H\u{1b}[2K" + reverse + status + String(repeating: " ", count: max(0, columns - status.count)) + plain)
        if let question {
            let text = fit(question, columns - 1)
            write("\u{1b}[\(rows);1H\u{1b}[2K" + text)
            return
        }
        let prompt = "[\(room ?? "-")] "
        let width = max(1, columns - prompt.count - 1)
        let characters = editor.characters
        // A window of the line around the cursor.
        let start = max(0, editor.cursor - width + 1)
        let shown = String(characters[start..<min(characters.count, start + width)].map { $0.isASCII && ($0.asciiValue ?? 32) < 32 ? "?" : $0 })
        write("\u{1b}[\(rows);1H\u{1b}[2K" + prompt + shown + "\u{1b}[\(rows);\(prompt.count + editor.cursor - start + 1)H")
    }

    func fit(_ text: String, _ width: Int) -> String {
        text.count <= width ? text : String(text.prefix(max(0, width - 1))) + "…"
    }
}

/// A desktop notification (notify-send) when a desktop session exists; never required, failures ignored.
enum DesktopNotification {
    static func send(_ title: String, _ body: String) {
        let environment = ProcessInfo.processInfo.environment
        guard environment["DISPLAY"] != nil || environment["WAYLAND_DISPLAY"] != nil else { return }
        let candidates = (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map { "\($0)/notify-send" }
        guard let tool = candidates.first(where: { access($0, X_OK) == 0 }) else { return }
        spawnDetached(tool, ["--app-name=lanchat", "--", title, body])
    }
}
