import ArgumentParser
import LanchatControl

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show this host's daemon (name, id, advertisement, presence), or set this host's presence.",
        subcommands: [StatusShow.self, StatusSet.self], defaultSubcommand: StatusShow.self)
}

struct StatusSet: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Set this host's availability (available, away, busy) and an optional line of text.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "available, away or busy.") var availability: String
    @Argument(help: "A line of text (at most 128 bytes), e.g. \"back at 3\"; none clears it.") var text: [String] = []
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard ControlCall.availabilities.contains(availability) else {
            throw ValidationError("availability must be \(ControlCall.availabilities.joined(separator: ", ")), not '\(availability)'")
        }
    }

    func run() throws {
        guard let presence = request(global, .presence(availability: availability, text: text.joined(separator: " "))).presence else {
            fail("the daemon sent no presence")
        }
        if json { return printJSON(presence) }
        print("you are \(describe(presence))")
    }
}

struct StatusShow: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show this host's daemon: name, id, advertisement, presence.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let client = try global.connect()
        guard let status = call(client, .status).status else { fail("the daemon sent no status") }
        if json {
            printJSON(status)
            return
        }
        print(
            """
            name:        \(printable(status.name))
            id:          \(status.id)
            advertising: \(status.advertising)\(status.instance.map { " as \"\(printable($0))\"" } ?? "")
            peer port:   \(status.port)
            encryption:  \(status.encryption)
            peers:       \(status.peers)
            daemon:      lanchatd \(status.version), pid \(status.pid), since \(status.startedAt)
            """)
        if let presence = try? client.call(.presence(availability: nil, text: nil)).presence {
            print("presence:    \(describe(presence))")
        }
        if let downloads = status.downloadDirectory {
            print("downloads:   \(printable(downloads))\(status.downloadProblem.map { " (unusable: \(printable($0)))" } ?? "")")
        }
    }
}

/// "away (lunch), hand up in lab".
func describe(_ presence: PresenceInfo) -> String {
    let text = presence.text.isEmpty ? "" : " (\(printable(presence.text)))"
    let hands = presence.hands.isEmpty ? "" : ", hand up in \(presence.hands.joined(separator: ", "))"
    return "\(presence.availability)\(text)\(hands)"
}

struct Hand: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Raise or lower your hand in a room (the others see it in members and watch).")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "up or down.") var position: String
    @Option(help: "The room (default: the only room you are in).") var room: String?
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard ["up", "down"].contains(position) else { throw ValidationError("say up or down, not '\(position)'") }
    }

    func run() throws {
        guard let presence = request(global, .hand(up: position == "up", room: room)).presence else { fail("the daemon sent no presence") }
        if json { return printJSON(presence) }
        print("your hand is \(position)\(room.map { " in \($0)" } ?? "")")
    }
}
