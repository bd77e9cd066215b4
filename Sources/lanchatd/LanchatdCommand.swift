import ArgumentParser
import FoundationEssentials
import Glibc
import LanchatDaemon
import Logging

@main
struct LanchatdCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lanchatd",
        abstract: "The lanchat daemon: advertises this host's peer on DNS-SD, finds the others, serves the local control API.",
        discussion: """
            Every option can also be set in the config file (same name without --, as `key = value`) or in the
            environment (LANCHATD_NAME, LANCHATD_STATE_DIR, ...). Flags win over the environment, which wins over the file.
            """,
        version: Daemon.version)

    @Option(help: "Display name shown to peers (default: user@host).") var name: String?
    @Option(name: .customLong("state-dir"), help: "Directory for the identity key and state.") var stateDir: String?
    @Option(help: "Control socket path.") var socket: String?
    @Option(name: .customLong("socket-group"), help: "Also let this group use the control socket (mode 0660).") var socketGroup: String?
    @Option(help: "Peer port (0 = any free port; default: 7473 if free, else any).") var port: String?
    @Option(name: .customLong("static-peer"), help: "A peer to keep by address, HOST[:PORT] (repeatable): for peers discovery cannot see.") var staticPeers: [String] = []
    @Option(name: .customLong("interface"), help: "Interface to advertise and browse on (repeatable; default: all).") var interfaces: [String] = []
    @Option(help: "Encryption preference: required, optional, none.") var encryption: String?
    @Option(name: .customLong("auto-accept"), help: "Accept invitations: never, known, all.") var autoAccept: String?
    @Option(name: .customLong("download-dir"), help: "Where received files go.") var downloadDir: String?
    @Option(name: .customLong("max-file-size"), help: "Largest file accepted from a peer, like 500M or 4G (default 1T).") var maxFileSize: String?
    @Option(help: "Config file (key = value lines).") var config: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error, critical.") var logLevel: String?
    @Option(name: .customLong("auto-away"), help: "Turn away after this many minutes (or seconds: 90s) without a command from a person (0 = never, the default).")
    var autoAway: String?

    @Option(
        name: .customLong("shared-files"),
        help:
            "Files others share in rooms: keep (fetch them when announced, keep them, serve them; the default) or on-demand (fetch only with `lanchat fetch`, keep nothing)."
    ) var sharedFiles: String?
    @Option(name: .customLong("shared-files-days"), help: "Days a shared file is kept (default 30).") var sharedFilesDays: String?
    @Option(name: .customLong("shared-auto-fetch"), help: "Largest shared file fetched when announced, like 100M (default 256M; 0: none).") var sharedAutoFetch: String?
    @Option(name: .customLong("history-wait"), help: "Seconds a newcomer takes its inviter's history after joining (default 120; one history, the first).")
    var historyWait: String?
    @Option(
        name: .customLong("web"),
        help: "Serve the browser UI on [ADDRESS:]PORT (default address 127.0.0.1; another is reachable from the network); `lanchat web` prints its URL.")
    var web: String?

    func run() async throws {
        var flags: [(key: String, value: String)] = []
        let single: [(String, String?)] = [
            ("name", name), ("state-dir", stateDir), ("socket", socket), ("socket-group", socketGroup), ("port", port),
            ("encryption", encryption), ("auto-accept", autoAccept), ("download-dir", downloadDir), ("log-level", logLevel),
            ("max-file-size", maxFileSize), ("auto-away", autoAway), ("shared-files", sharedFiles), ("shared-files-days", sharedFilesDays),
            ("shared-auto-fetch", sharedAutoFetch), ("history-wait", historyWait), ("web", web),
        ]
        for (key, value) in single { if let value { flags.append((key, value)) } }
        for interface in interfaces { flags.append(("interface", interface)) }
        for address in staticPeers { flags.append(("static-peer", address)) }

        let environment = ProcessInfo.processInfo.environment
        let configuration: DaemonConfiguration
        do {
            configuration = try DaemonConfiguration.resolve(
                flags: flags, configPath: config, environment: environment, userName: Self.userName(), hostName: Self.hostName())
        } catch {
            Self.fail(error.description)
        }
        let level = Logger.Level(rawValue: configuration.logLevel.rawValue) ?? .info
        LoggingSystem.bootstrap { LogfmtLogHandler(label: $0, level: level) }
        let logger = Logger(label: "lanchatd")
        do {
            try await Daemon.run(configuration: configuration, logger: logger)
        } catch let error as Daemon.StartupError {
            Self.fail(error.description)
        }
    }

    static func fail(_ message: String) -> Never {
        let line = Array("lanchatd: \(message)\n".utf8)
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        Glibc.exit(1)
    }

    static func userName() -> String {
        if let entry = getpwuid(getuid()) { return String(cString: entry.pointee.pw_name) }
        return "user\(getuid())"
    }

    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "localhost" }
        let name = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return String(name.split(separator: ".").first ?? "localhost")
    }
}
