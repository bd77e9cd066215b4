import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import LanchatControl
import Synchronization

/// `lanchat` with no subcommand: messages and notices as they arrive, invitation prompts, /commands.
struct Interactive: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "interactive", abstract: "Chat interactively (the default when no subcommand is given).")

    @OptionGroup var global: GlobalOptions
    @Flag(name: .customLong("line"), help: "Line mode even on a terminal (the default for pipes and TERM=dumb).") var lineMode = false
    @Flag(name: .customLong("no-notify"), help: "No desktop notifications for invitations and messages that mention you.") var noNotify = false
    @Flag(name: .customLong("no-typing"), help: "Neither tell the room when you type nor show who is typing.") var noTyping = false

    static let help = """
        commands:
          TEXT                      send TEXT to the current room
          /invite PEER [ROOM] [MESSAGE]   invite a peer (to ROOM, default: the current room or 'lobby')
          /accept [ID]  /decline [ID]     answer an invitation (default: the oldest one)
          /invitations              pending invitations
          /peers                    peers on the network
          /room [ROOM]              show or switch the current room
          /rooms  /members          your rooms; the current room's members
          /leave [ROOM]             leave a room (default: the current one)
          /history [N]              the last N messages of the current room (default 20, at most \(ControlCall.historyLimitRange.upperBound))
          /grep WORDS               the current room's last 20 messages with these words
          /send-file PATH           send a file to every member of the current room (into their downloads)
          /share PATH               share a file in the current room: it stays there for members who come later
          /files                    the files shared in the current room
          /fetch ID                 a copy of a shared file, into your downloads (from a member who has it)
          /transfers                file transfers
          /away [TEXT]  /busy [TEXT]  /back   your status (the others see it in /members)
          /hand [up|down]           raise (default) or lower your hand in the current room
          /remove MEMBER [REASON]   remove a member from the current room (you must administer it)
          /close [REASON]           close the current room for everyone (you must administer it)
          /admin MEMBER             make a member an administrator of the current room too
          (topics: `lanchat topic pub|sub ROOM TOPIC`; metadata and the topic: `lanchat room ...`)
          /quit                     leave this program (lanchatd keeps running)
        """

    func run() throws {
        let commands = try global.connect(timeoutSeconds: 60)
        let watcher = try global.connect()
        do { _ = try watcher.call(.watch) } catch { fail(error.message) }
        watcher.setTimeout(seconds: 0)
        let environment = ProcessInfo.processInfo.environment
        let term = environment["TERM"] ?? ""
        var ui: TerminalUI?
        if !lineMode, isatty(0) == 1, isatty(1) == 1, !term.isEmpty, term != "dumb" {
            ui = TerminalUI(color: environment["NO_COLOR"].map(\.isEmpty) ?? true)
        }
        let status: DaemonStatus
        let firstRoom: String?
        do {
            guard let value = try commands.call(.status).status else { fail("the daemon sent no status") }
            status = value
            let rooms = try commands.call(.rooms).rooms ?? []
            firstRoom = rooms.first?.room
        } catch { fail(error.message) }
        let state = InteractiveState(
            ui: ui, notify: !noNotify, showTyping: !noTyping, ownName: status.name, ownID: status.id, socketPath: global.socketPath)
        state.room = firstRoom
        if let ui = state.ui {
            ui.me = printable(status.name)
            ui.start()
            ui.setRoom(state.room)
            state.refreshMembers()
        }
        state.say("lanchat: you are \(printable(status.name)) (\(status.shortId)). Type /help for commands.")
        if let room = state.room { state.say("current room: \(room)") } else { state.say("you are in no room yet: /invite PEER starts one") }
        if let pending = try? commands.call(.invitations).invitations {
            for invitation in pending { state.prompt(invitation) }
        }

        let watching = ClientHandoff(watcher)
        startThread {
            watching.client.withLock { client in
                while true {
                    let line: [UInt8]?
                    do { line = try client.readLine() } catch { break }
                    guard let line else { break }
                    guard let response = try? ControlJSON.decoder().decode(ControlResponse.self, from: Data(line)), let event = response.event else { continue }
                    state.handle(event)
                }
            }
            if let ui = state.ui {
                ui.restore()
                StandardStream.error.write(Data("lanchat: lanchatd closed the connection (it stopped?)\n".utf8))
            } else {
                state.say("lanchatd closed the connection (it stopped?)")
            }
            Glibc.exit(1)
        }

        if let ui = state.ui {
            ui.readKeys(
                submit: { line in
                    let text = line.trimmingBlanks()
                    if text.hasPrefix("/") { return command(text, state: state, client: commands) }
                    guard let room = state.room else {
                        state.say("you are in no room: /invite PEER first, or /room NAME")
                        return true
                    }
                    do { _ = try commands.call(.send(.init(text: line, room: room))) } catch {
                        state.say("error: \((error as? ControlError)?.message ?? "\(error)")")
                    }
                    return true
                },
                answer: { yes in
                    _ = state.answerPending(yes ? "y" : "n", commands)
                },
                edited: {
                    // The room is told at most every 3 s (the daemon keeps to that too).
                    guard !noTyping, let room = state.room, state.typingDue() else { return }
                    _ = try? commands.call(.typing(room: room))
                })
            ui.restore()
            return
        }

        while let line = readLine(strippingNewline: true) {
            if state.answerPending(line, commands) { continue }
            let text = line.trimmingBlanks()
            if text.isEmpty { continue }
            if text.hasPrefix("/") {
                if !command(text, state: state, client: commands) { break }
            } else {
                guard let room = state.room else {
                    state.say("you are in no room: /invite PEER first, or /room NAME")
                    continue
                }
                do { _ = try commands.call(.send(.init(text: line, room: room))) } catch { state.say("error: \(error.message)") }
            }
        }
    }

    /// Runs a /command; returns false to quit.
    private func command(_ text: String, state: InteractiveState, client: ControlClient) -> Bool {
        let words = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        let name = words[0].dropFirst().lowercased()
        let arguments = Array(words.dropFirst())
        do {
            switch name {
            case "quit", "exit", "q":
                return false
            case "help", "?":
                state.say(Self.help)
            case "invite":
                guard let peer = arguments.first else { state.say("usage: /invite PEER [ROOM] [MESSAGE]"); return true }
                let room = arguments.count > 1 ? arguments[1] : state.room
                let message = arguments.count > 2 ? arguments[2...].joined(separator: " ") : nil
                let result = try client.call(.invite(.init(peer: peer, room: room, message: message))).invite
                if let result {
                    if result.outcome == "sent" {
                        state.say("invited \(printable(result.peer)) to \(result.room); waiting for an answer")
                        state.room = state.room ?? result.room
                    } else {
                        state.say("invitation to \(printable(result.peer)): \(result.outcome)\(result.reason.map { " (\(printable($0)))" } ?? "")")
                    }
                }
            case "accept", "decline":
                guard let id = arguments.first ?? state.oldestPending() else { state.say("no pending invitation"); return true }
                let invitation = try client.call(name == "accept" ? .accept(id: id) : .decline(id: id, reason: nil)).invitation
                state.resolved(id)
                if name == "accept", let invitation {
                    state.room = invitation.room
                    state.say("joined \(invitation.room); it is now the current room")
                }
            case "invitations":
                let list = try client.call(.invitations).invitations ?? []
                if list.isEmpty { state.say("no pending invitations") }
                for invitation in list { state.say("\(invitation.id.prefix(8)) from \(printable(invitation.from)) (code \(invitation.shortCode)) to \(invitation.room)") }
            case "peers":
                let peers = (try client.call(.peers).peers ?? []).filter(\.compatible)
                if peers.isEmpty { state.say("no peers found yet") }
                for peer in peers {
                    state.say("\(printable(peer.name)) (\(peer.shortId ?? "?")) \(peer.state)\(peer.rooms.isEmpty ? "" : " in \(peer.rooms.joined(separator: ", "))")")
                }
            case "room":
                if let room = arguments.first {
                    let rooms = (try client.call(.rooms).rooms ?? []).map(\.room)
                    guard rooms.contains(room) else { state.say("you are not in \(room); your rooms: \(rooms.joined(separator: ", "))"); return true }
                    state.room = room
                }
                state.say("current room: \(state.room ?? "none")")
            case "rooms":
                let rooms = try client.call(.rooms).rooms ?? []
                if rooms.isEmpty { state.say("you are in no room") }
                for room in rooms { state.say("\(room.room): \(room.members.map { printable($0.name) }.joined(separator: ", "))") }
            case "members":
                guard let room = arguments.first ?? state.room else { state.say("you are in no room"); return true }
                let info = try client.call(.members(room: room)).room
                for member in info?.members ?? [] {
                    let status = member.availability.map { " \($0)" + (member.statusText.map { $0.isEmpty ? "" : " (\(printable($0)))" } ?? "") } ?? ""
                    state.say(
                        "\(printable(member.name)) (\(member.shortId)) \(member.state.replacing("_", with: " "))\(status)\(member.hand == true ? ", hand up" : "")"
                    )
                }
            case "away", "busy", "back":
                let text = arguments.joined(separator: " ")
                let presence = try client.call(.presence(availability: name == "back" ? "available" : String(name), text: text)).presence
                if let presence {
                    state.ui?.setPresence(presence)
                    state.say("you are \(describe(presence))")
                }
            case "hand":
                guard let room = state.room else { state.say("you are in no room"); return true }
                let up = arguments.first != "down"
                if let presence = try client.call(.hand(up: up, room: room)).presence { state.ui?.setPresence(presence) }
                state.say("your hand is \(up ? "up" : "down") in \(room)")
            case "remove", "admin":
                guard let room = state.room else { state.say("you are in no room"); return true }
                guard let peer = arguments.first else { state.say("usage: /\(name) MEMBER\(name == "remove" ? " [REASON]" : "")"); return true }
                if name == "remove" {
                    let reason = arguments.dropFirst().joined(separator: " ")
                    _ = try client.call(.remove(peer: peer, room: room, reason: reason.isEmpty ? nil : reason))
                    state.say("removed \(printable(peer)) from \(room)")
                } else {
                    _ = try client.call(.admin(peer: peer, room: room, on: true))
                    state.say("\(printable(peer)) administers \(room) too")
                }
            case "close":
                guard let room = state.room else { state.say("you are in no room"); return true }
                let reason = arguments.joined(separator: " ")
                _ = try client.call(.close(room: room, reason: reason.isEmpty ? nil : reason))
                state.room = (try client.call(.rooms).rooms ?? []).first?.room
                state.say("closed \(room); current room: \(state.room ?? "none")")
            case "leave":
                guard let room = arguments.first ?? state.room else { state.say("you are in no room"); return true }
                _ = try client.call(.leave(room: room))
                if state.room == room { state.room = (try client.call(.rooms).rooms ?? []).first?.room }
                state.say("left \(room); current room: \(state.room ?? "none")")
            case "send-file":
                guard let room = state.room else { state.say("you are in no room"); return true }
                guard !arguments.isEmpty else { state.say("usage: /send-file PATH"); return true }
                let given = arguments.joined(separator: " ")
                let path = absolutePath(given)
                let members = try client.call(.members(room: room)).room?.members ?? []
                for member in members {
                    let token = try handOver(path, socket: client.path)
                    if let entry = try client.call(.sendFile(peer: member.id, path: path, fileToken: token)).transfer {
                        state.say("sending \(printable(entry.name)) to \(printable(member.name)) (\(entry.id.prefix(8)); /transfers)")
                    }
                }
            case "share":
                guard let room = state.room else { state.say("you are in no room"); return true }
                guard !arguments.isEmpty else { state.say("usage: /share PATH"); return true }
                let path = absolutePath(arguments.joined(separator: " "))
                let token = try handOver(path, socket: client.path)
                if let file = try client.call(.share(room: room, path: path, fileToken: token)).files?.first {
                    state.say("shared \(describe(file)) in \(room) as \(shortFileID(file.id))")
                }
            case "files":
                guard let room = arguments.first ?? state.room else { state.say("you are in no room"); return true }
                let files = try client.call(.files(room: room, limit: 20)).files ?? []
                if files.isEmpty { state.say("no files shared in \(room)") }
                for file in files {
                    state.say("\(shortFileID(file.id))  \(describe(file)) from \(printable(file.from))\(file.held == true ? "" : " (not kept here)")")
                }
            case "fetch":
                guard let id = arguments.first else { state.say("usage: /fetch ID (see /files)"); return true }
                if let entry = try client.call(.fetch(id: id, to: nil)).transfer {
                    state.say(
                        entry.state == "complete"
                            ? "copied \(printable(entry.name)) to \(printable(entry.path ?? "?"))"
                            : "fetching \(printable(entry.name)) from \(printable(entry.peer)) (\(entry.id.prefix(8)); /transfers)")
                }
            case "transfers":
                let list = try client.call(.transfers).transfers ?? []
                if list.isEmpty { state.say("no transfers") }
                for entry in list { state.say("\(entry.id.prefix(8))  \(progressLine(entry))") }
            case "history":
                let range = ControlCall.historyLimitRange
                guard let limit = arguments.first.map({ Int($0) }) ?? 20, range.contains(limit) else {
                    state.say("usage: /history [N], N from \(range.lowerBound) to \(range.upperBound)")
                    return true
                }
                for message in try client.call(.history(room: state.room, limit: limit)).history ?? [] { state.say(describe(message)) }
            case "grep":
                guard !arguments.isEmpty else {
                    state.say("usage: /grep WORDS")
                    return true
                }
                let found = try client.call(.search(.init(room: state.room, limit: 20, grep: arguments.joined(separator: " ")))).history ?? []
                if found.isEmpty { state.say("no message in \(state.room ?? "your rooms") has those words") }
                for message in found { state.say(describe(message)) }
            default:
                state.say("unknown command /\(name); /help lists them")
            }
        } catch {
            state.say("error: \(error.message)")
        }
        return true
    }
}

/// What the input loop and the event thread share.
final class InteractiveState: Sendable {
    private struct Shared {
        var room: String?
        var pending: [InvitationInfo] = []
        var lastPresenceRefresh: ContinuousClock.Instant?
        var lastTyping: ContinuousClock.Instant?
    }

    private let shared = Mutex(Shared())
    /// The full-screen UI on a terminal; nil in line mode.
    let ui: TerminalUI?
    let notify: Bool
    let showTyping: Bool
    let ownName: String
    let ownID: String
    let socketPath: String

    init(ui: TerminalUI?, notify: Bool, showTyping: Bool, ownName: String, ownID: String, socketPath: String) {
        self.ui = ui
        self.notify = notify
        self.showTyping = showTyping
        self.ownName = ownName
        self.ownID = ownID
        self.socketPath = socketPath
    }

    var room: String? {
        get { shared.withLock { $0.room } }
        set {
            shared.withLock { $0.room = newValue }
            ui?.setRoom(newValue)
        }
    }

    /// Whether to tell the room we type: at most every 3 s (the daemon keeps to that too).
    func typingDue() -> Bool {
        let now = ContinuousClock.now
        return shared.withLock { state in
            guard state.lastTyping.map({ now - $0 >= .seconds(3) }) ?? true else { return false }
            state.lastTyping = now
            return true
        }
    }

    /// Prints a line (whole lines only, never interleaved).
    func say(_ text: String) {
        if let ui {
            ui.addLine(text)
            return
        }
        shared.withLock { _ in
            StandardStream.output.write(Data((text + "\n").utf8))
        }
    }

    func prompt(_ invitation: InvitationInfo) {
        shared.withLock { $0.pending.append(invitation) }
        let note = invitation.message.map { ": \"\(printable($0))\"" } ?? ""
        let question =
            "accept invitation from \(printable(invitation.from)) (fingerprint \(invitation.fromId.prefix(12)), code \(invitation.shortCode)) "
            + "to room '\(invitation.room)'\(note)? [y/N]"
        if let ui {
            // Asked in the input line; what the person was typing stays and comes back after the answer.
            ui.addLine(
                "* invitation from \(printable(invitation.from)) (fingerprint \(invitation.fromId.prefix(12)), "
                    + "code \(invitation.shortCode)) to '\(invitation.room)'\(note)")
            ui.ask("accept invitation from \(printable(invitation.from)) to '\(invitation.room)'? [y/N] ")
        } else {
            say(question)
        }
    }

    /// Members connected / total per room, for the status line (its own connection: this runs on the
    /// event thread while the input thread uses another).
    func refreshMembers() {
        guard let ui, let client = try? ControlClient(path: socketPath, timeoutSeconds: 5),
            let rooms = try? client.call(.rooms).rooms
        else { return }
        ui.setMembers(rooms)
    }

    func oldestPending() -> String? { shared.withLock { $0.pending.first?.id } }

    func resolved(_ id: String) {
        shared.withLock { state in state.pending.removeAll { $0.id.hasPrefix(id) } }
    }

    /// If an invitation prompt is open, the line answers it ("y"/"yes" accepts; anything else declines).
    func answerPending(_ line: String, _ client: ControlClient) -> Bool {
        guard let invitation = shared.withLock({ $0.pending.first }) else { return false }
        resolved(invitation.id)
        ui?.ask(nil)
        let answer = line.trimmingBlanks().lowercased()
        do {
            if answer == "y" || answer == "yes" {
                _ = try client.call(.accept(id: invitation.id))
                room = invitation.room
                say("joined \(invitation.room); it is now the current room")
            } else {
                _ = try client.call(.decline(id: invitation.id, reason: nil))
                say("declined \(printable(invitation.from))'s invitation")
            }
        } catch {
            say("error: \(error.message)")
        }
        if let next = shared.withLock({ $0.pending.first }) {
            shared.withLock { _ = $0.pending.removeFirst() }
            prompt(next)
        }
        return true
    }

    func handle(_ event: ControlEvent) {
        switch event.kind {
        case .invitation(let invitation):
            prompt(invitation)
            if notify { DesktopNotification.send("lanchat: invitation", "\(invitation.from) invites you to '\(invitation.room)'") }
        case .invitationClosed(let invitation):
            resolved(invitation.id)
            if ui != nil, shared.withLock({ $0.pending.isEmpty }) { ui?.ask(nil) }
            if invitation.outcome == "expired" || invitation.outcome == "withdrawn" {
                say("invitation from \(printable(invitation.from)) to \(invitation.room) \(invitation.outcome!)")
            } else if invitation.outcome?.hasPrefix("accepted ") == true {
                say("joined \(invitation.room) (\(invitation.outcome!))")
                if room == nil { room = invitation.room }
            }
        case .message(let message):
            if let ui {
                // Our own lines too: the input line does not echo them into the conversation.
                ui.message(message, showRoom: message.room != room)
                if message.outgoing != true { ui.unreadMessage(in: message.room) }
            } else if message.outgoing != true {
                say(describe(message))
            }
            if notify, message.outgoing != true, message.kind == "text", Self.mentions(message.text, ownName) {
                DesktopNotification.send("lanchat: \(message.sender) in \(message.room)", message.text)
            }
        case .inviteOutcome, .security:
            if let text = describeSession(event) { say(text) }
        case .transfer(let transfer):
            // Announce files that arrived (or failed to), and how the ones we sent ended; the UI's status
            // line shows the progress meanwhile.
            ui?.transfer(transfer)
            if transfer.hasEnded { say(progressLine(transfer)) }
        case .member:
            refreshMembers()
        case .left(let member):
            // Others' departures are notices in the room; ours (removed, closed) is said here too, with its code.
            refreshMembers()
            if member.fatal == true, member.id == ownID, member.code != "left", let text = describeSession(event) {
                say(text + " (you are no longer in \(member.room))")
            }
        case .typing(let room, let name, _):
            if showTyping { ui?.typing(printable(name), in: room) }
        case .presence:
            // Shown as a line (who changed and to what), and in the status line's raised hands (looked up
            // at most once a second: a member toggling its status costs no connection per change).
            if let text = describeSession(event) { say(text) }
            let now = ContinuousClock.now
            let due = shared.withLock { state in
                guard state.lastPresenceRefresh.map({ now - $0 > .seconds(1) }) ?? true else { return false }
                state.lastPresenceRefresh = now
                return true
            }
            if due { refreshMembers() }
        case .found, .changed, .lost, .advertising, .meta, .topic, .other:
            break  // found/lost: see /peers
        }
    }

    /// Whether a message names the person: their display name, or its part before '@'.
    static func mentions(_ text: String, _ name: String) -> Bool {
        guard !name.isEmpty else { return false }
        let lower = text.lowercased()
        let user = name.split(separator: "@").first.map(String.init) ?? name
        return lower.contains(name.lowercased()) || (user.count >= 3 && lower.contains("@" + user.lowercased()))
    }
}

/// The watch connection, handed over to the event thread: the main thread gives it up (`sending`) and
/// the event thread holds it, under the lock, for as long as it reads.
final class ClientHandoff: Sendable {
    let client: Mutex<ControlClient>
    init(_ client: sending ControlClient) { self.client = Mutex(client) }
}
