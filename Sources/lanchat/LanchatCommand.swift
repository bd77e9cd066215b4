import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import LanchatControl

@main
struct LanchatCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lanchat",
        abstract: "Chat with lanchat peers on your network (through lanchatd). Without a subcommand: interactive mode.",
        discussion: "The daemon's socket: --socket, else $LANCHAT_SOCKET, else $XDG_RUNTIME_DIR/lanchat/lanchatd.sock, else /run/lanchat/lanchatd.sock.",
        version: lanchatVersion,
        subcommands: [
            Interactive.self, Peers.self, Invite.self, Invitations.self, Accept.self, Decline.self, Rooms.self, Members.self,
            Leave.self, Send.self, History.self, SendFile.self, Share.self, Files.self, Fetch.self, Transfers.self, Cancel.self, Watch.self, Status.self, Hand.self,
            RoomCommand.self, TopicCommand.self, Remove.self, Close.self, Admin.self, Ping.self,
            Trust.self, Forget.self, StreamCommand.self, Connect.self, Disconnect.self, Doctor.self, Web.self,
        ],
        defaultSubcommand: Interactive.self)

    /// `--socket` is global (`lanchat --socket PATH peers`, `lanchat --socket PATH room set ...`), but
    /// ArgumentParser knows it per leaf command (each has `@OptionGroup var global`): the command groups
    /// (`room`, `topic`, `status`, ...) and the root have no options of their own, so a global option
    /// left in front of a group's subcommand is an "Unknown option" there.
    static func main() async {
        let arguments = hoistGlobalOptions(Array(CommandLine.arguments.dropFirst()))
        do {
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }

    /// Moves the global options (`GlobalOptions.names`) given before or between the words of the command
    /// (`lanchat --socket S room set lab topic x`, `lanchat room --socket S set ...`) to just after its last
    /// word (`room set --socket S lab topic x`), where the leaf command's `@OptionGroup var global` takes
    /// them. Walks the command tree, so every group, at any depth, is covered. Stops at the first argument
    /// that is neither a global option nor a subcommand's name (the command's own options and arguments
    /// are left in place), and at `--`.
    static func hoistGlobalOptions(_ arguments: [String]) -> [String] {
        var path: [String] = []
        var global: [String] = []
        var node: any ParsableCommand.Type = LanchatCommand.self
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" { break }
            if let option = GlobalOptions.names.first(where: { argument == $0.name || argument.hasPrefix($0.name + "=") }) {
                if argument == option.name, option.takesValue {
                    guard index + 1 < arguments.count else { break }
                    global += [argument, arguments[index + 1]]
                    index += 2
                } else {
                    global.append(argument)
                    index += 1
                }
                continue
            }
            if let subcommand = node.configuration.subcommands.first(where: {
                $0._commandName == argument || $0.configuration.aliases.contains(argument)
            }) {
                path.append(argument)
                node = subcommand
                index += 1
                continue
            }
            break
        }
        guard !global.isEmpty else { return arguments }
        // The command's words, then the global options, then the rest.
        return path + global + arguments[index...]
    }
}

/// Options every subcommand takes.
struct GlobalOptions: ParsableArguments {
    @Option(help: "The daemon's control socket.") var socket: String?

    /// The options above, as `LanchatCommand.hoistGlobalOptions` moves them (CommandLineTests checks that
    /// this list names every option of the group).
    static let names: [(name: String, takesValue: Bool)] = [("--socket", true)]

    var socketPath: String {
        ControlSocketPath.clientDefault(explicit: socket, environment: ProcessInfo.processInfo.environment)
    }

    func connect(timeoutSeconds: Int = 10) throws -> ControlClient {
        do { return try ControlClient(path: socketPath, timeoutSeconds: timeoutSeconds) } catch { fail(error.message) }
    }
}

/// Prints `lanchat: message` on stderr and exits 1.
func fail(_ message: String) -> Never {
    StandardStream.error.write(Data("lanchat: \(message)\n".utf8))
    Glibc.exit(1)
}

/// Runs a control call, turning errors into a one-line failure.
func call(_ client: ControlClient, _ call: ControlCall) -> ControlResponse {
    do { return try client.call(call) } catch { fail(error.message) }
}

func printJSON<T: Encodable>(_ value: T) {
    let encoder = ControlJSON.encoder()
    encoder.outputFormatting.insert(.prettyPrinted)
    let data = (try? encoder.encode(value)) ?? Data("null".utf8)
    StandardStream.output.write(data + Data("\n".utf8))
}

/// Makes text from the network safe to print on a terminal (no escape sequences, no newlines).
func printable(_ text: String) -> String {
    String(
        String.UnicodeScalarView(
            text.unicodeScalars.map { scalar in
                scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format ? "?" : scalar
            }))
}

/// Left-aligned columns.
func table(_ header: [String], _ rows: [[String]]) -> String {
    let all = [header] + rows
    let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
    return all.map { row in
        row.enumerated().map { index, cell in
            index == row.count - 1 ? cell : cell.padded(to: widths[index])
        }.joined(separator: "  ")
    }.joined(separator: "\n")
}
