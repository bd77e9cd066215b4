import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import LanchatControl

/// Calls the daemon; a failure becomes `lanchat: message` and exit 1.
func request(_ global: GlobalOptions, _ call: ControlCall, timeoutSeconds: Int = 30) -> ControlResponse {
    let client = try! global.connect(timeoutSeconds: timeoutSeconds)
    do { return try client.call(call) } catch { fail(error.message) }
}

struct Invite: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Invite a peer into a room (created if you are not in it).")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "A display name, instance name, or id prefix.") var peer: String
    @Option(help: "The room (default: the room you are in, or 'lobby').") var room: String?
    @Option(help: "A message shown with the invitation.") var message: String?
    @Option(help: "Seconds the peer has to answer (1-3600).") var timeout: Double = 60
    @Flag(help: "Wait for the answer; exit 1 unless accepted.") var wait = false
    @Flag(help: "Print JSON.") var json = false

    /// What this command asks the daemon.
    var call: ControlCall { .invite(.init(peer: peer, room: room, message: message, timeoutSeconds: timeout, wait: wait)) }

    func run() throws {
        let response = request(global, call, timeoutSeconds: wait ? Int(timeout) + 30 : 30)
        guard let result = response.invite else { fail("the daemon sent no invitation result") }
        if json { printJSON(result) }
        let who = "\(printable(result.peer)) (\(result.peerId.prefix(12)))"
        switch result.outcome {
        case "sent":
            if !json { print("invited \(who) to \(result.room); waiting for an answer (see `lanchat watch`)") }
        case "accepted", "already_member":
            if !json { print("\(who) \(result.outcome == "accepted" ? "accepted" : "is already in") \(result.room) (\(result.elapsedMs ?? 0) ms)") }
        default:
            fail("invitation to \(who) \(result.outcome)\(result.reason.map { ": \(printable($0))" } ?? "")")
        }
    }
}

struct Invitations: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Invitations waiting for your answer.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let list = request(global, .invitations).invitations ?? []
        if json { return printJSON(list) }
        if list.isEmpty { return print("no pending invitations") }
        print(
            table(
                ["ID", "FROM", "CODE", "ROOM", "EXPIRES", "MESSAGE"],
                list.map {
                    [String($0.id.prefix(8)), "\(printable($0.from)) (\($0.fromId.prefix(12)))", $0.shortCode, $0.room, $0.expiresAt, printable($0.message ?? "")]
                }))
    }
}

struct Accept: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Accept an invitation (by id or a unique prefix) and join its room.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The invitation id (see `lanchat invitations`).") var id: String
    @Option(help: "The room's history to ask the inviter for: all (what it sends), none, or a number of the latest messages.")
    var history: String = "all"
    @Option(name: .customLong("history-since"), help: "No history older than this: 90s, 30m, 2h, 7d, or a local date and time like 2026-11-23T14:05.")
    var historySince: String?
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if ControlCall.JoinHistory(history) == nil { throw ValidationError("--history must be all, none or a number of messages, not '\(history)'") }
        try validateTimeSpec(historySince, option: "history-since")
    }

    func run() throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let since = historySince.flatMap { TimeSpec.milliseconds($0, now: now) }.map { max(0, $0) }
        let choice = ControlCall.JoinHistory(history, sinceMilliseconds: since) ?? .all
        guard let invitation = request(global, .accept(id: id, history: choice)).invitation else { fail("the daemon sent no invitation") }
        if json { return printJSON(invitation) }
        print("joined \(invitation.room) (invited by \(printable(invitation.from)))")
    }
}

struct Decline: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Decline an invitation.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The invitation id (see `lanchat invitations`).") var id: String
    @Option(help: "A reason the inviter sees.") var reason: String?

    func run() throws {
        guard let invitation = request(global, .decline(id: id, reason: reason)).invitation else { fail("the daemon sent no invitation") }
        print("declined \(printable(invitation.from))'s invitation to \(invitation.room)")
    }
}

struct Rooms: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The rooms you are in.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let rooms = request(global, .rooms).rooms ?? []
        if json { return printJSON(rooms) }
        if rooms.isEmpty { return print("you are in no room; `lanchat invite PEER` creates one") }
        print(
            table(
                ["ROOM", "MEMBERS", "CONNECTED"],
                rooms.map { room in
                    [
                        room.room, room.members.map { printable($0.name) }.joined(separator: ", "),
                        "\(room.members.filter { $0.state == "connected" }.count)/\(room.members.count)",
                    ]
                }))
    }
}

struct Members: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The members of a room and their connection state.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The room (default: the only room you are in).") var room: String?
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        guard let info = request(global, .members(room: room)).room else { fail("the daemon sent no room") }
        if json { return printJSON(info) }
        print(
            table(
                ["NAME", "ID", "STATE", "STATUS", "HAND", "ROLE"],
                info.members.map {
                    [
                        printable($0.name), $0.shortId, $0.state.replacing("_", with: " "),
                        ($0.availability ?? "-") + ($0.statusText.map { $0.isEmpty ? "" : " (\(printable($0)))" } ?? ""), $0.hand == true ? "up" : "",
                        $0.admin == true ? "admin" : "",
                    ]
                }))
        if info.administered == true { print("you administer \(info.room)") }
    }
}

struct Leave: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Leave a room (its history stays).")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The room.") var room: String

    func run() throws {
        _ = request(global, .leave(room: room))
        print("left \(room)")
    }
}

struct Send: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Send a message to a room, or to chosen members of it.")

    @OptionGroup var global: GlobalOptions
    @Option(help: "The room (default: the only room you are in).") var room: String?
    @Option(name: .customLong("to"), help: "A member to send to (repeatable; default: the whole room).") var to: [String] = []
    @Flag(help: "Send unreliably: no acknowledgement, dropped if a member is not connected.") var unreliable = false
    @Flag(help: "Print JSON.") var json = false
    @Argument(help: "The text ('-' reads it from standard input).") var text: [String]

    func validate() throws {
        guard !text.isEmpty else { throw ValidationError("give the text to send") }
        guard to.allSatisfy({ !$0.contains(",") }) else { throw ValidationError("--to takes one peer each; repeat it") }
    }

    /// What this command asks the daemon, for `body` (the text, read from standard input for '-').
    func call(text body: String) -> ControlCall {
        .send(.init(text: body, room: room, to: to.isEmpty ? nil : to, reliable: !unreliable))
    }

    func run() throws {
        var body = text.joined(separator: " ")
        if body == "-" {
            body = String(decoding: StandardStream.readInput(), as: UTF8.self)
            if body.hasSuffix("\n") { body.removeLast() }
        }
        guard body.utf8.count <= 65536 else { fail("message is \(body.utf8.count) bytes; the limit is 65536") }
        guard let sent = request(global, call(text: body)).sent else { fail("the daemon sent no receipt") }
        if json { return printJSON(sent) }
        let pending = sent.recipients - sent.sentNow
        var line = "sent to \(sent.sentNow) of \(sent.recipients) in \(sent.room)"
        if sent.reliable, pending > 0 { line += "; \(pending) will get it when they are back" }
        if !sent.reliable, sent.dropped > 0 { line += "; dropped for \(sent.dropped)" }
        print(line)
    }
}

struct History: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Messages kept in this daemon's history; with --grep, --from or --since, those that match (through an index).")

    @OptionGroup var global: GlobalOptions
    @Option(help: "Only this room.") var room: String?
    @Option(help: "The last N messages, 1-\(ControlCall.historyLimitRange.upperBound); more is an error, not a shorter list.") var limit = 50
    @Option(help: "Only messages with these words (each must begin a word of the message; case and accents ignored).") var grep: String?
    @Option(help: "Only messages from this peer (display name, or id prefix of 4 or more characters).") var from: String?
    @Option(help: "Only messages since then: 90s, 30m, 2h, 7d, or a local date and time like 2026-11-23 or 2026-11-23T14:05.") var since: String?
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard ControlCall.historyLimitRange.contains(limit) else {
            throw ValidationError("--limit must be \(ControlCall.historyLimitRange.lowerBound)-\(ControlCall.historyLimitRange.upperBound)")
        }
        try validateTimeSpec(since, option: "since")
    }

    func run() throws {
        let call: ControlCall
        if grep != nil || from != nil || since != nil {
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            call = .search(.init(room: room, limit: limit, grep: grep, from: from, sinceMilliseconds: since.flatMap { TimeSpec.milliseconds($0, now: now) }))
        } else {
            call = .history(room: room, limit: limit)
        }
        let messages = request(global, call, timeoutSeconds: 120).history ?? []
        if json { return printJSON(messages) }
        for message in messages { print(describe(message, showRoom: room == nil)) }
    }
}

struct Trust: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record a peer's key as known, after comparing its code with its owner: `--auto-accept known` takes it, and no warning is shown for it.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The peer's id, or its first 8 characters or more (see `lanchat peers`): trust goes to a key, not a name.") var peer: String
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        guard let trusted = request(global, .trust(peer: peer)).trusted else { fail("the daemon sent no answer") }
        if json {
            printJSON(trusted)
            return
        }
        print("trusted \(printable(trusted.name)) (\(trusted.shortId)): its key is known from now on")
    }
}

struct Forget: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Forget the keys recorded for a peer name (or one key, by its id): the next key met under that name is new, with no warning.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The peer's display name, or a peer id.") var peer: String

    func run() throws {
        let ids = (request(global, .forget(peer: peer)).forgotten ?? "?").split(separator: ",").map { String($0.prefix(12)) }
        print("forgot \(ids.count == 1 ? "the key" : "\(ids.count) keys") of \(printable(peer)) (\(ids.joined(separator: ", ")))")
    }
}

/// The sender as a line shows it: its name, and "(unsigned)" for a message without its author's
/// signature (from a version 1 peer, or kept from before signatures).
func senderLabel(_ message: MessageInfo) -> String {
    printable(message.sender) + (message.signed == false ? " (unsigned)" : "")
}

/// "12:01:02 [lab] alice: hello", with continuation lines indented; system notices as "* ...".
func describe(_ message: MessageInfo, showRoom: Bool = true) -> String {
    let prefix = "\(Format.clock(milliseconds: Int64(message.timestampMs)))\(showRoom ? " [\(message.room)]" : "")"
    let lines = message.text.split(separator: "\n", omittingEmptySubsequences: false).map { printable(String($0)) }
    if message.kind == "system" { return "\(prefix) * \(lines.joined(separator: " "))" }
    if let file = message.file {
        return "\(prefix) \(senderLabel(message)) shared \(describe(file)): lanchat fetch \(shortFileID(file.id))"
    }
    let head = "\(prefix) \(senderLabel(message)): "
    return head + lines.joined(separator: "\n" + String(repeating: " ", count: head.count))
}

/// Checks an option that takes a time (`--since`, `--history-since`) before anything is sent.
func validateTimeSpec(_ value: String?, option: String) throws {
    if let value, TimeSpec.milliseconds(value, now: 0) == nil {
        throw ValidationError("--\(option) must be a duration (90s, 30m, 2h, 7d) or a date and time (2026-11-23, 2026-11-23T14:05), not '\(value)'")
    }
}
