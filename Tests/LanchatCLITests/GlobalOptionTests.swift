import ArgumentParser
@testable import lanchat
import Testing

/// A command that takes the global options (`@OptionGroup var global`), for the tests below.
private protocol TakesGlobalOptions { var global: GlobalOptions { get } }
extension RoomList: TakesGlobalOptions {}
extension RoomGet: TakesGlobalOptions {}
extension RoomSet: TakesGlobalOptions {}
extension RoomDelete: TakesGlobalOptions {}
extension TopicPub: TakesGlobalOptions {}
extension TopicSub: TakesGlobalOptions {}
extension StatusSet: TakesGlobalOptions {}
extension StatusShow: TakesGlobalOptions {}
extension Peers: TakesGlobalOptions {}
extension Send: TakesGlobalOptions {}
extension Watch: TakesGlobalOptions {}
extension Doctor: TakesGlobalOptions {}
extension Hand: TakesGlobalOptions {}

/// Issue 32: every global option works before or after the command, command groups included
/// (`lanchat --socket S room set lab topic x` was "Unknown option '--socket'").
@Suite struct GlobalOptionTests {
    /// What a command line parses as (the way `lanchat` runs it), and the socket its command got.
    private func parsed(_ arguments: [String]) throws -> (type: String, socket: String?) {
        let command = try LanchatCommand.parseAsRoot(LanchatCommand.hoistGlobalOptions(arguments))
        let global = try #require(command as? any TakesGlobalOptions, "\(type(of: command)) takes no global options").global
        return ("\(type(of: command))", global.socket)
    }

    @Test(arguments: [
        (["--socket", "/s", "room", "set", "lab", "topic", "x"], "RoomSet"),
        (["--socket=/s", "room", "set", "lab", "topic", "x"], "RoomSet"),
        (["--socket", "/s", "room", "list", "lab"], "RoomList"),
        (["--socket", "/s", "room", "get", "lab", "topic"], "RoomGet"),
        (["--socket", "/s", "room", "delete", "lab", "topic", "--if-version", "2"], "RoomDelete"),
        // (`topic pub` reads its messages from standard input: `topic pub lab t hi` is refused for "hi".)
        (["--socket", "/s", "topic", "pub", "lab", "t", "--reliable"], "TopicPub"),
        (["--socket", "/s", "topic", "sub", "lab", "t", "--json"], "TopicSub"),
        (["--socket", "/s", "status", "set", "away"], "StatusSet"),
        (["--socket", "/s", "status", "set", "away", "back", "at", "3"], "StatusSet"),
        (["--socket", "/s", "status", "show"], "StatusShow"),
        (["--socket", "/s", "status"], "StatusShow"),
        // Between the group and its subcommand, and after the command.
        (["room", "--socket", "/s", "set", "lab", "topic", "x"], "RoomSet"),
        (["status", "--socket", "/s", "set", "busy"], "StatusSet"),
        (["room", "set", "lab", "topic", "x", "--socket", "/s"], "RoomSet"),
        (["topic", "pub", "--socket", "/s", "lab", "t"], "TopicPub"),
        (["status", "set", "away", "--socket", "/s"], "StatusSet"),
        // Commands without a group, as before.
        (["--socket", "/s", "peers", "--json"], "Peers"),
        (["--socket", "/s", "send", "--room", "lab", "hi"], "Send"),
        (["--socket", "/s", "watch", "--json"], "Watch"),
        (["--socket", "/s", "doctor"], "Doctor"),
        (["--socket", "/s", "hand", "up"], "Hand"),
    ])
    func theSocketBeforeOrAfterTheCommand(arguments: [String], type: String) throws {
        let (parsedType, socket) = try parsed(arguments)
        #expect(parsedType == type)
        #expect(socket == "/s")
    }

    /// The command's own arguments are left as they were, including a value that is a command's name.
    @Test func onlyTheGlobalOptionsMove() {
        #expect(
            LanchatCommand.hoistGlobalOptions(["--socket", "/s", "room", "set", "lab", "topic", "x"])
                == ["room", "set", "--socket", "/s", "lab", "topic", "x"])
        #expect(LanchatCommand.hoistGlobalOptions(["--socket", "/s", "send", "room", "set"]) == ["send", "--socket", "/s", "room", "set"])
        #expect(LanchatCommand.hoistGlobalOptions(["send", "--room", "lab", "--socket", "/s", "hi"]) == ["send", "--room", "lab", "--socket", "/s", "hi"])
        #expect(LanchatCommand.hoistGlobalOptions(["send", "--", "--socket", "/s"]) == ["send", "--", "--socket", "/s"])
        #expect(LanchatCommand.hoistGlobalOptions(["--socket", "/s"]) == ["--socket", "/s"])
        #expect(LanchatCommand.hoistGlobalOptions(["--socket"]) == ["--socket"])
    }

    /// Every command, at any depth: a global option in front of its words ends up right after them, and
    /// the command takes it (`@OptionGroup var global`).
    @Test func everyCommandOfTheTreeTakesTheGlobalOptionsInFront() {
        func walk(_ command: any ParsableCommand.Type, _ path: [String]) {
            let subcommands = command.configuration.subcommands
            if !path.isEmpty {
                #expect(LanchatCommand.hoistGlobalOptions(["--socket", "/s"] + path + ["x"]) == path + ["--socket", "/s", "x"])
            }
            if subcommands.isEmpty {
                #expect(command.helpMessage().contains("--socket"), "\(path.joined(separator: " ")) has no --socket")
            }
            for subcommand in subcommands { walk(subcommand, path + [subcommand._commandName]) }
        }
        walk(LanchatCommand.self, [])
    }

    /// `GlobalOptions.names` (what the hoist moves) is every option of the group.
    @Test func theHoistKnowsEveryGlobalOption() {
        let help = GlobalOptions.helpMessage()
        let options = Set(
            help.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," || $0 == "=" || $0 == "[" || $0 == "]" })
                .filter { $0.hasPrefix("--") }.map(String.init)
        ).subtracting(["--help"])
        #expect(!options.isEmpty)
        #expect(options == Set(GlobalOptions.names.map(\.name)), "\(help)")
    }
}
