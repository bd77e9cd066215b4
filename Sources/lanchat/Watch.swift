import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import LanchatControl

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print events as they happen: peers found and lost, invitations, members, messages.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print one JSON object per line.") var json = false

    func run() throws {
        let client = try global.connect()
        _ = call(client, .watch)
        // Nothing else is printed until an event: on a terminal, say that it watches (on stderr, so that
        // what stdout carries, JSON lines included, stays the events only).
        if let note = Self.startNote(socket: global.socketPath, standardOutputIsTerminal: isatty(STDOUT_FILENO) == 1) {
            StandardStream.error.write(Data((note + "\n").utf8))
        }
        client.setTimeout(seconds: 0)
        while true {
            let line: [UInt8]?
            do { line = try client.readLine() } catch { fail(error.message) }
            guard let line else { fail("lanchatd closed the connection (it stopped?)") }
            guard let response = try? ControlJSON.decoder().decode(ControlResponse.self, from: Data(line)), let event = response.event else {
                continue
            }
            // As text, a departure is the room's notice (a message event) already, and the administration's
            // entries are said by their effect (a removal, a closing): neither is printed twice.
            if !json {
                if case .left = event.kind { continue }
                if case .meta(let meta) = event.kind, Self.isAdministration(meta.key) { continue }
            }
            // One write per event, unbuffered, so a pipe sees each event at once.
            let text = json ? String(decoding: ControlJSON.line(event), as: UTF8.self) : Self.describe(event) + "\n"
            StandardStream.output.write(Data(text.utf8))
        }
    }

    /// The line said at start on a terminal (none when stdout is a pipe or a file: a script reads it).
    static func startNote(socket: String, standardOutputIsTerminal: Bool) -> String? {
        standardOutputIsTerminal ? "watching lanchatd at \(printable(socket)) (Ctrl-C to stop)" : nil
    }

    /// The keys of a room's metadata that hold its administration (removals, the closing, administrators).
    static func isAdministration(_ key: String) -> Bool {
        key == "closed" || key.hasPrefix("removed.") || (key.hasPrefix("admin.") && key != "admin.creator")
    }

    static func describe(_ event: ControlEvent) -> String {
        switch event.kind {
        case .found(let peer), .changed(let peer), .lost(let peer):
            let id = peer.shortId.map { " (\($0))" } ?? ""
            let address = peer.addresses.first.map { " \($0) port \(peer.port)" } ?? ""
            let note = peer.compatible ? "" : " [incompatible: \(printable(peer.problem ?? "?"))]"
            return "\(event.time) \(event.type) \(printable(peer.name))\(id)\(address)\(note)"
        case .advertising(let state, let instance):
            return "\(event.time) advertising \(state)\(instance.map { " as \"\(printable($0))\"" } ?? "")"
        default:
            if let text = describeSession(event) { return "\(event.time) \(text)" }
            return "\(event.time) \(event.type)"
        }
    }
}

/// One line for a session event (shared by `watch` and the interactive mode), or `nil`.
func describeSession(_ event: ControlEvent) -> String? {
    switch event.kind {
    case .message(let message):
        return describe(message)
    case .invitation(let invitation):
        let from = "\(printable(invitation.from)) (fingerprint \(invitation.fromId.prefix(12)), code \(invitation.shortCode))"
        let note = invitation.message.map { ": \"\(printable($0))\"" } ?? ""
        return "invitation \(invitation.id.prefix(8)) from \(from) to room '\(invitation.room)'\(note)"
    case .invitationClosed(let invitation):
        return "invitation \(invitation.id.prefix(8)) from \(printable(invitation.from)) to '\(invitation.room)': \(invitation.outcome ?? "closed")"
    case .inviteOutcome(let invite):
        return "invitation to \(printable(invite.peer)) (\(invite.room)): \(invite.outcome)\(invite.reason.map { " (\(printable($0)))" } ?? "")"
    case .left(let member):
        return "[\(member.room)] \(printable(member.reason ?? "\(member.name) left"))" + (member.code.map { " [\($0)]" } ?? "")
    case .member(let member):
        return "[\(member.room)] \(printable(member.name)) is \(member.state.replacing("_", with: " "))"
    case .typing(let room, let name, _):
        return "[\(room)] \(printable(name)) is typing"
    case .security(let text, _):
        return "SECURITY: \(printable(text))"
    case .presence(let presence):
        return "\(printable(presence.name)) is \(describe(presence))"
    case .meta(let meta):
        return "[\(meta.room)] \(printable(meta.author)) " + (meta.deleted ? "deleted \(meta.key)" : "set \(meta.key) = \(printable(meta.value ?? ""))")
            + " (version \(meta.version))"
    case .transfer(let transfer):
        return "transfer " + progressLine(transfer)
    case .found, .changed, .lost, .advertising, .topic, .other:
        return nil
    }
}
