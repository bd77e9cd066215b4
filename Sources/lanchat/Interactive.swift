import ArgumentParser
import Foundation
import LanchatControl

/// `lanchat` with no subcommand: messages and notices as they arrive, invitation prompts, /commands.
struct Interactive: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "interactive", abstract: "Chat interactively (the default when no subcommand is given).")

    @OptionGroup var global: GlobalOptions

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
          /history [N]              the last N messages of the current room
          /send-file PATH           send a file to every member of the current room
          /transfers                file transfers
          /quit                     leave this program (lanchatd keeps running)
        """

    func run() throws {
        let commands = try global.connect(timeoutSeconds: 60)
        let watcher = try global.connect()
        do { _ = try watcher.call(.watch) } catch { fail(error.message) }
        watcher.setTimeout(seconds: 0)
        let state = InteractiveState()
        let status: DaemonStatus
        do {
            guard let value = try commands.call(.status).status else { fail("the daemon sent no status") }
            status = value
            let rooms = try commands.call(.rooms).rooms ?? []
            state.room = rooms.first?.room
        } catch { fail(error.message) }
        state.say("lanchat: you are \(printable(status.name)) (\(status.shortId)). Type /help for commands.")
        if let room = state.room { state.say("current room: \(room)") } else { state.say("you are in no room yet: /invite PEER starts one") }
        if let pending = try? commands.call(.invitations).invitations {
            for invitation in pending { state.prompt(invitation) }
        }

        let watching = UncheckedClient(client: watcher)
        let thread = Thread {
            while true {
                let line: [UInt8]?
                do { line = try watching.client.readLine() } catch { break }
                guard let line else { break }
                guard let response = try? ControlJSON.decoder().decode(ControlResponse.self, from: Data(line)), let event = response.event else { continue }
                state.handle(event)
            }
            state.say("lanchatd closed the connection (it stopped?)")
            Foundation.exit(1)
        }
        thread.start()

        while let line = readLine(strippingNewline: true) {
            if state.answerPending(line, commands) { continue }
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.isEmpty { continue }
            if text.hasPrefix("/") {
                if !command(text, state: state, client: commands) { break }
            } else {
                guard let room = state.room else {
                    state.say("you are in no room: /invite PEER first, or /room NAME")
                    continue
                }
                do { _ = try commands.call(.send, params: ["room": room, "text": line]) } catch { state.say("error: \(error.message)") }
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
                var params = ["peer": peer]
                if arguments.count > 1 { params["room"] = arguments[1] } else if let room = state.room { params["room"] = room }
                if arguments.count > 2 { params["message"] = arguments[2...].joined(separator: " ") }
                let result = try client.call(.invite, params: params).invite
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
                let invitation = try client.call(name == "accept" ? .accept : .decline, params: ["id": id]).invitation
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
                let info = try client.call(.members, params: ["room": room]).room
                for member in info?.members ?? [] { state.say("\(printable(member.name)) (\(member.shortId)) \(member.state.replacingOccurrences(of: "_", with: " "))") }
            case "leave":
                guard let room = arguments.first ?? state.room else { state.say("you are in no room"); return true }
                _ = try client.call(.leave, params: ["room": room])
                if state.room == room { state.room = (try client.call(.rooms).rooms ?? []).first?.room }
                state.say("left \(room); current room: \(state.room ?? "none")")
            case "send-file":
                guard let room = state.room else { state.say("you are in no room"); return true }
                guard !arguments.isEmpty else { state.say("usage: /send-file PATH"); return true }
                let given = arguments.joined(separator: " ")
                let path = given.hasPrefix("/") ? given : FileManager.default.currentDirectoryPath + "/" + given
                let members = try client.call(.members, params: ["room": room]).room?.members ?? []
                for member in members {
                    var params = ["peer": member.id, "path": path]
                    params.merge(try handOver(path, socket: client.path)) { $1 }
                    if let entry = try client.call(.sendFile, params: params).transfer {
                        state.say("sending \(printable(entry.name)) to \(printable(member.name)) (\(entry.id.prefix(8)); /transfers)")
                    }
                }
            case "transfers":
                let list = try client.call(.transfers).transfers ?? []
                if list.isEmpty { state.say("no transfers") }
                for entry in list { state.say("\(entry.id.prefix(8))  \(progressLine(entry))") }
            case "history":
                let limit = arguments.first.flatMap { Int($0) } ?? 20
                var params = ["limit": String(max(1, min(limit, 10000)))]
                params["room"] = state.room
                for message in try client.call(.history, params: params).history ?? [] { state.say(describe(message)) }
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
final class InteractiveState: @unchecked Sendable {
    private let lock = NSLock()
    private var currentRoom: String?
    private var pending: [InvitationInfo] = []

    var room: String? {
        get { lock.withLock { currentRoom } }
        set { lock.withLock { currentRoom = newValue } }
    }

    /// Prints a line (whole lines only, never interleaved).
    func say(_ text: String) {
        lock.withLock {
            FileHandle.standardOutput.write(Data((text + "\n").utf8))
        }
    }

    func prompt(_ invitation: InvitationInfo) {
        lock.withLock { pending.append(invitation) }
        let note = invitation.message.map { ": \"\(printable($0))\"" } ?? ""
        say("accept invitation from \(printable(invitation.from)) (fingerprint \(invitation.fromId.prefix(12)), code \(invitation.shortCode)) "
            + "to room '\(invitation.room)'\(note)? [y/N]")
    }

    func oldestPending() -> String? { lock.withLock { pending.first?.id } }

    func resolved(_ id: String) {
        lock.withLock { pending.removeAll { $0.id.hasPrefix(id) } }
    }

    /// If an invitation prompt is open, the line answers it ("y"/"yes" accepts; anything else declines).
    func answerPending(_ line: String, _ client: ControlClient) -> Bool {
        guard let invitation = lock.withLock({ pending.first }) else { return false }
        resolved(invitation.id)
        let answer = line.trimmingCharacters(in: .whitespaces).lowercased()
        do {
            if answer == "y" || answer == "yes" {
                _ = try client.call(.accept, params: ["id": invitation.id])
                room = invitation.room
                say("joined \(invitation.room); it is now the current room")
            } else {
                _ = try client.call(.decline, params: ["id": invitation.id])
                say("declined \(printable(invitation.from))'s invitation")
            }
        } catch {
            say("error: \(error.message)")
        }
        if let next = lock.withLock({ pending.first }) {
            lock.withLock { pending.removeFirst() }
            prompt(next)
        }
        return true
    }

    func handle(_ event: ControlEvent) {
        switch event.type {
        case "invitation":
            if let invitation = event.invitation { prompt(invitation) }
        case "invitation_closed":
            if let invitation = event.invitation {
                resolved(invitation.id)
                if invitation.outcome == "expired" || invitation.outcome == "withdrawn" {
                    say("invitation from \(printable(invitation.from)) to \(invitation.room) \(invitation.outcome!)")
                } else if invitation.outcome?.hasPrefix("accepted ") == true {
                    say("joined \(invitation.room) (\(invitation.outcome!))")
                    if room == nil { room = invitation.room }
                }
            }
        case "message":
            guard let message = event.message, message.outgoing != true else { return }
            say(describe(message))
        case "invite_outcome", "security":
            if let text = describeSession(event) { say(text) }
        case "transfer":
            // Announce files that arrived (or failed to), and how the ones we sent ended.
            if let transfer = event.transfer, ["complete", "refused", "failed", "cancelled"].contains(transfer.state) {
                say(progressLine(transfer))
            }
        default:
            break  // found/lost/member: see /peers and /members
        }
    }
}

/// The watch connection, used only by the event thread once the main thread hands it over.
struct UncheckedClient: @unchecked Sendable {
    let client: ControlClient
}
