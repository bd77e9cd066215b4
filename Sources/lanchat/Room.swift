import ArgumentParser
import LanchatControl

struct RoomCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "room",
        abstract: "A room's metadata, shared with its members: list, get, set, delete keys (the key 'topic' is the room's topic).",
        discussion: """
            Keys are 1-64 of A-Z a-z 0-9 . _ -; a value is text of at most 4096 bytes; a room holds at most 64 KiB of keys and \
            values and 256 keys. Every write is signed and versioned; when two members write a key at once, the higher version \
            wins, then the later time, then the greater author id, the same everywhere. --if-version N writes only if the key \
            is at version N here (0: it does not exist).
            """,
        subcommands: [RoomList.self, RoomGet.self, RoomSet.self, RoomDelete.self])
}

func printMeta(_ entries: [MetaInfo], json: Bool) {
    if json { return printJSON(entries) }
    print(
        table(
            ["KEY", "VALUE", "VERSION", "BY", "TIME"],
            entries.map {
                [$0.key, printable(replacingScalar("\n", with: "\\n", in: $0.value ?? "")), String($0.version), printable($0.author), $0.time]
            }))
}

struct RoomList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "Every key of a room's metadata.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The room (default: the only room you are in).") var room: String?
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        printMeta(request(global, .meta(.init(action: .list, room: room))).meta ?? [], json: json)
    }
}

struct RoomGet: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "One key's value.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The room.") var room: String
    @Argument(help: "The key.") var key: String
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        guard let entry = request(global, .meta(.init(action: .get, room: room, key: key))).meta?.first else { fail("the daemon sent no entry") }
        if json { return printJSON(entry) }
        print(entry.value ?? "")
    }
}

struct RoomSet: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "set", abstract: "Set a key (the members are told at once).")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The room.") var room: String
    @Argument(help: "The key.") var key: String
    @Argument(help: "The value (several words are joined with spaces).") var value: [String]
    @Option(name: .customLong("if-version"), help: "Only if the key is at this version here (0: it does not exist yet).") var ifVersion: UInt64?
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let call = ControlCall.meta(.init(action: .set, room: room, key: key, value: value.joined(separator: " "), ifVersion: ifVersion))
        guard let entry = request(global, call).meta?.first else { fail("the daemon sent no entry") }
        if json { return printJSON(entry) }
        print("\(room): \(key) set (version \(entry.version))")
    }
}

struct RoomDelete: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete a key.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The room.") var room: String
    @Argument(help: "The key.") var key: String
    @Option(name: .customLong("if-version"), help: "Only if the key is at this version here.") var ifVersion: UInt64?
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        guard let entry = request(global, .meta(.init(action: .delete, room: room, key: key, ifVersion: ifVersion))).meta?.first else {
            fail("the daemon sent no entry")
        }
        if json { return printJSON(entry) }
        print("\(room): \(key) deleted (version \(entry.version))")
    }
}
