import FoundationEssentials
import Glibc
import LanchatControl
import LanchatDiscovery
import LanchatWire

/// Everything `lanchatd` can be told, with its defaults and limits.
///
/// Sources, later ones winning: built-in defaults, the config file (`--config FILE`, or
/// `LANCHATD_CONFIG`), environment variables (`LANCHATD_NAME`, `LANCHATD_STATE_DIR`, ...), flags.
public struct DaemonConfiguration: Equatable, Sendable {
    public enum AutoAccept: String, Sendable, CaseIterable { case never, known, all }
    public enum LogLevel: String, Sendable, CaseIterable { case trace, debug, info, notice, warning, error, critical }

    /// Display name advertised to peers (default: user@host).
    public var name: String
    public var stateDirectory: String
    public var socketPath: String
    /// A group whose members may also use the control socket (mode 0660); `nil`: owner only (0600).
    public var socketGroup: String?
    /// Peer port; 0 = any free port (DNS-SD tells peers which). When no source sets it, lanchatd tries
    /// `PeerAddress.defaultPort` first (so that `lanchat connect HOST` finds it), then any free port.
    public var port: Int
    /// Whether `port` was set by a flag, the environment or the file (else the default port is tried).
    public var portChosen = false
    /// Peers to keep by address (`static-peer = HOST[:PORT]`, repeatable): trusted on first use.
    public var staticPeers: [PeerAddress] = []
    /// Interfaces to advertise and browse on; empty = all.
    public var interfaces: [String]
    public var encryption: PeerAdvertisement.Encryption
    public var autoAccept: AutoAccept
    /// Where received files go. Default: `downloads` in the state directory for root, for the system
    /// service and whenever the state directory was chosen (flag, environment or file); `~/Downloads`
    /// for a user's daemon with default paths. Created with its parents at startup.
    public var downloadDirectory: String
    public var logLevel: LogLevel
    /// The browser UI (`web = [ADDRESS:]PORT`); nil: off (the default).
    public var web: WebConfiguration?

    // Limits and timings, settable in the config file only.
    /// How often listed peers are resolved again to notice TXT and address changes (seconds).
    public var refreshInterval: Int = 120
    /// After avahi-daemon restarts, peers not reported again within this many seconds are dropped.
    public var sweepDelay: Int = 5
    /// Control connections served at once; more are refused.
    public var maximumControlConnections: Int = 64
    /// Seconds a control connection may stay idle (no call in progress, no watch or stream, no complete
    /// request line) before the daemon closes it, so that idle holders cannot take every connection.
    public var controlIdleTimeout: Int = 60
    /// Longest control request line, in bytes.
    public var maximumRequestLength: Int = 1024 * 1024
    /// Events buffered for a slow `watch` client before the oldest are dropped.
    public var watchBufferSize: Int = 1024
    /// How many of a room's latest messages this daemon sends a newcomer it invited.
    public var historyForNewcomers: Int = 1000
    /// Seconds a newcomer takes its inviter's history offer after joining (`history-wait`): one offer,
    /// the first; later ones are refused, so that an inviter cannot hold the door open.
    public var historyWait: Int = 120
    /// Largest file accepted from a peer, in bytes (`max-file-size`: a number with an optional K, M, G or
    /// T suffix, powers of 1024).
    public var maximumFileSize: UInt64 = 1 << 40
    /// The highest wire protocol version offered (`max-wire-version`): 4 seals what it sends (one
    /// signature per batch); 3 signs every message, as a lanchatd before seals did; 1 speaks as a version
    /// 1 peer does (unsigned): for comparisons and for trying out what an older peer gets.
    public var maximumWireVersion: UInt16 = WireFrame.versions.upperBound
    /// Seconds without a command from a person (send, invite, status...) after which this host turns away
    /// (`auto-away`: minutes, or seconds with an `s`, like `90s`; 0: never).
    public var autoAwaySeconds: Int = 0
    /// Files shared in rooms by others (`shared-files`): `keep` (fetched when announced, up to
    /// `shared-auto-fetch` bytes, kept `shared-files-days` and served to members who ask) or `on-demand`
    /// (fetched only with `lanchat fetch`, and not kept). A host keeps what it shares itself either way.
    public var keepSharedFiles = true
    public var sharedFilesDays = 30
    public var sharedAutoFetchLimit: UInt64 = 256 << 20
    /// `shared-files-quota`: files are fetched by themselves only while what is kept stays within this.
    public var sharedFilesQuota: UInt64 = 4 << 30

    public struct Error: Swift.Error, Equatable, CustomStringConvertible {
        public let message: String
        public init(_ message: String) { self.message = message }
        public var description: String { message }
    }

    /// Keys accepted in the config file; flags use the same names with `--`.
    public static let fileKeys: Set<String> = [
        "name", "state-dir", "socket", "socket-group", "port", "interface", "encryption", "auto-accept",
        "download-dir", "log-level", "refresh-interval", "sweep-delay", "max-control-connections",
        "control-idle-timeout", "max-request-length", "watch-buffer", "history-for-newcomers", "history-wait", "max-file-size", "static-peer",
        "max-wire-version", "auto-away", "shared-files", "shared-files-days", "shared-auto-fetch", "shared-files-quota", "web",
    ]

    /// Defaults for the current user and environment.
    public static func defaults(environment: [String: String], uid: uid_t = getuid(), userName: String, hostName: String) -> DaemonConfiguration {
        let home = environment["HOME"] ?? "/"
        let stateDirectory: String
        if let fromSystemd = environment["STATE_DIRECTORY"], !fromSystemd.isEmpty {
            stateDirectory = fromSystemd.split(separator: ":").first.map(String.init) ?? fromSystemd
        } else if uid == 0 {
            stateDirectory = "/var/lib/lanchat"
        } else if let xdg = environment["XDG_STATE_HOME"], !xdg.isEmpty {
            stateDirectory = joinPath(xdg, "lanchat")
        } else {
            stateDirectory = joinPath(home, ".local/state/lanchat")
        }
        let downloads =
            uid == 0 || environment["STATE_DIRECTORY"].map({ !$0.isEmpty }) == true
            ? joinPath(stateDirectory, "downloads") : joinPath(home, "Downloads")
        return DaemonConfiguration(
            name: "\(userName)@\(hostName)", stateDirectory: stateDirectory,
            socketPath: ControlSocketPath.daemonDefault(environment: environment), socketGroup: nil, port: 0,
            interfaces: [], encryption: .required, autoAccept: .never, downloadDirectory: downloads, logLevel: .info)
    }

    /// Applies one setting by its key (file, environment and flags share this).
    public mutating func apply(key: String, value: String) throws(Error) {
        func integer(_ range: ClosedRange<Int>) throws(Error) -> Int {
            guard let number = Int(value), range.contains(number) else {
                throw Error("\(key): expected a whole number in \(range.lowerBound)...\(range.upperBound), got '\(value.prefix(64))'")
            }
            return number
        }
        func path() throws(Error) -> String {
            guard !value.isEmpty, !value.contains("\0") else { throw Error("\(key): expected a path") }
            return value
        }
        func oneOf<T: RawRepresentable & CaseIterable>(_: T.Type) throws(Error) -> T where T.RawValue == String {
            guard let parsed = T(rawValue: value) else {
                throw Error("\(key): expected one of \(T.allCases.map(\.rawValue).joined(separator: ", ")), got '\(value.prefix(64))'")
            }
            return parsed
        }
        switch key {
        case "name":
            let clean = PeerAdvertisement.sanitize(value)
            guard !clean.isEmpty else { throw Error("name: must contain at least one visible character") }
            name = clean
        case "state-dir": stateDirectory = try path()
        case "socket": socketPath = try path()
        case "socket-group":
            guard !value.isEmpty, value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: ":") }) else {
                throw Error("socket-group: expected a group name")
            }
            socketGroup = value
        case "port":
            port = try integer(0...65535)
            portChosen = true
        case "static-peer":
            // Repeatable; a comma-separated list in the file or environment.
            for text in value.split(separator: ",").map({ String($0).trimmingSpaces() }) where !text.isEmpty {
                switch PeerAddress.parse(text) {
                case .success(let address): if !staticPeers.contains(address) { staticPeers.append(address) }
                case .failure(let error): throw Error("static-peer: \(error.description)")
                }
            }
        case "interface":
            // Repeatable; a comma-separated list in the file or environment.
            for name in value.split(separator: ",").map({ String($0).trimmingSpaces() }) where !name.isEmpty {
                guard name.utf8.count < 16, !name.contains("/"), name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
                    throw Error("interface: '\(name.prefix(64))' is not an interface name")
                }
                if !interfaces.contains(name) { interfaces.append(name) }
            }
        case "web":
            guard let parsed = WebConfiguration.parse(value) else {
                throw Error("web: expected [ADDRESS:]PORT, like 8080 or 127.0.0.1:8080, not '\(value.prefix(64))'")
            }
            web = parsed
        case "encryption": encryption = try oneOf(PeerAdvertisement.Encryption.self)
        case "auto-accept": autoAccept = try oneOf(AutoAccept.self)
        case "download-dir": downloadDirectory = try path()
        case "log-level": logLevel = try oneOf(LogLevel.self)
        case "refresh-interval": refreshInterval = try integer(1...86400)
        case "sweep-delay": sweepDelay = try integer(1...600)
        case "max-control-connections": maximumControlConnections = try integer(1...10000)
        case "control-idle-timeout": controlIdleTimeout = try integer(1...86400)
        case "max-request-length": maximumRequestLength = try integer(1024...(16 * 1024 * 1024))
        case "watch-buffer": watchBufferSize = try integer(16...1_000_000)
        case "history-for-newcomers": historyForNewcomers = try integer(0...1_000_000)
        case "history-wait": historyWait = try integer(1...3600)
        case "max-wire-version": maximumWireVersion = UInt16(try integer(Int(WireFrame.versions.lowerBound)...Int(WireFrame.versions.upperBound)))
        case "auto-away":
            if value.hasSuffix("s"), let seconds = Int(value.dropLast()), (1...86400).contains(seconds) {
                autoAwaySeconds = seconds
            } else if let minutes = Int(value), (0...1440).contains(minutes) {
                autoAwaySeconds = minutes * 60
            } else {
                throw Error("auto-away: expected minutes (0-1440; 0 = never) or seconds like 90s, not '\(value.prefix(32))'")
            }
        case "shared-files":
            guard value == "keep" || value == "on-demand" else { throw Error("shared-files: expected keep or on-demand, not '\(value.prefix(32))'") }
            keepSharedFiles = value == "keep"
        case "shared-files-days": sharedFilesDays = try integer(1...3650)
        case "shared-auto-fetch":
            guard let bytes = Self.size(value) else {
                throw Error("shared-auto-fetch: expected a size like 100M or 1G (0: fetch nothing when announced)")
            }
            sharedAutoFetchLimit = bytes
        case "shared-files-quota":
            guard let bytes = Self.size(value) else { throw Error("shared-files-quota: expected a size like 4G") }
            sharedFilesQuota = bytes
        case "max-file-size":
            guard let bytes = Self.size(value) else {
                throw Error("max-file-size: expected a size like 500M, 4G or 1073741824 (0 refuses every file)")
            }
            maximumFileSize = bytes
        default:
            throw Error("unknown setting '\(key.prefix(64))'; known: \(Self.fileKeys.sorted().joined(separator: ", "))")
        }
    }

    /// "4G" -> 4 GiB; digits with an optional K, M, G or T (powers of 1024); `nil` if malformed or over 2^62.
    static func size(_ text: String) -> UInt64? {
        var digits = Substring(text)
        var unit: UInt64 = 1
        if let last = digits.last, let shift = ["K": 10, "M": 20, "G": 30, "T": 40][last.uppercased()] {
            unit = 1 << UInt64(shift)
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.count <= 19, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let number = UInt64(digits) else { return nil }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: unit)
        guard !overflow, bytes <= 1 << 62 else { return nil }
        return bytes
    }

    /// Parses a config file: `key = value` lines, `#` comments, blank lines. Errors name the line.
    public static func parseFile(_ text: String) throws(Error) -> [(key: String, value: String)] {
        var settings: [(key: String, value: String)] = []
        for (number, rawLine) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = String(rawLine).trimmingSpaces()
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw Error("line \(number + 1): expected 'key = value'")
            }
            let key = String(line[..<equals]).trimmingSpaces()
            var value = String(line[line.index(after: equals)...]).trimmingSpaces()
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            guard fileKeys.contains(key) else {
                throw Error("line \(number + 1): unknown setting '\(key.prefix(64))'")
            }
            guard !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control && $0 != "\t" }) else {
                throw Error("line \(number + 1): control characters in the value of '\(key)'")
            }
            settings.append((key, value))
        }
        return settings
    }

    /// Loads a config file from disk (at most 1 MiB).
    public static func loadFile(_ path: String) throws(Error) -> [(key: String, value: String)] {
        var info = stat()
        guard stat(path, &info) == 0 else { throw Error("cannot read config file \(path): \(errnoDescription(errno))") }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw Error("config file \(path) is not a regular file") }
        guard info.st_size <= 1024 * 1024 else { throw Error("config file \(path) is larger than 1 MiB") }
        guard let data = FileManager.default.contents(atPath: path) else { throw Error("cannot read config file \(path): \(errnoDescription(errno))") }
        guard let text = String(validating: data, as: UTF8.self) else { throw Error("config file \(path) is not UTF-8 text") }
        do { return try parseFile(text) } catch { throw Error("\(path): \(error.message)") }
    }

    /// The environment variable for a key: `state-dir` -> `LANCHATD_STATE_DIR`.
    public static func environmentName(for key: String) -> String {
        "LANCHATD_" + String(key.uppercased().map { $0 == "-" ? "_" : $0 })
    }

    /// Builds the configuration from every source.
    ///
    /// - Parameters:
    ///   - flags: settings given on the command line, in order (repeatable keys may appear twice).
    ///   - configPath: `--config`, if given (else `LANCHATD_CONFIG`).
    public static func resolve(
        flags: [(key: String, value: String)], configPath: String?, environment: [String: String],
        userName: String, hostName: String, uid: uid_t = getuid()
    ) throws(Error) -> DaemonConfiguration {
        var config = defaults(environment: environment, uid: uid, userName: userName, hostName: hostName)
        var chosen: Set<String> = []
        if let path = configPath ?? environment["LANCHATD_CONFIG"] {
            for (key, value) in try loadFile(path) {
                try config.apply(key: key, value: value)
                chosen.insert(key)
            }
        }
        for key in fileKeys.sorted() {
            if let value = environment[environmentName(for: key)] {
                do { try config.apply(key: key, value: value) } catch { throw Error("\(environmentName(for: key)): \(error.message)") }
                chosen.insert(key)
            }
        }
        // Flags for a repeatable key replace what the file and environment said.
        if flags.contains(where: { $0.key == "interface" }) { config.interfaces = [] }
        if flags.contains(where: { $0.key == "static-peer" }) { config.staticPeers = [] }
        for (key, value) in flags {
            try config.apply(key: key, value: value)
            chosen.insert(key)
        }
        // A state directory someone chose holds the downloads too, unless they chose those as well: the
        // default was derived from the default state directory, which this daemon does not use.
        if chosen.contains("state-dir"), !chosen.contains("download-dir") {
            config.downloadDirectory = joinPath(config.stateDirectory, "downloads")
        }
        return config
    }
}
