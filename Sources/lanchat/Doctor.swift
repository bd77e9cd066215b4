import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import LanchatControl

struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check dbus, avahi-daemon, multicast, the daemon's socket and port; say what is wrong and how to fix it.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print JSON (an array of checks).") var json = false

    struct Check: Codable {
        var name: String
        /// ok, warn or fail.
        var result: String
        var detail: String
        var fix: String?
    }

    func run() async throws {
        var checks: [Check] = []
        checks.append(Self.checkDBus())
        checks.append(Self.checkAvahi())
        checks.append(Self.checkMulticast())
        let (socketCheck, status, peers) = checkSocket()
        checks.append(socketCheck)
        if let status {
            checks.append(Self.checkPort(status.port))
            if let downloads = Self.checkDownloads(status) { checks.append(downloads) }
            checks.append(Self.checkAdvertisement(status))
        }
        checks = Self.withoutDiscovery(checks, peers: peers)
        if json {
            printJSON(checks)
        } else {
            for check in checks {
                let mark = check.result == "ok" ? "ok  " : check.result == "warn" ? "warn" : "FAIL"
                print("\(mark)  \(check.name): \(check.detail)")
                if let fix = check.fix { print("      fix: \(fix)") }
            }
        }
        if checks.contains(where: { $0.result == "fail" }) { throw ExitCode(1) }
    }

    static func canConnect(unixPath path: String) -> Bool {
        guard case .success(let fd) = connectUnixSocket(path: path) else { return false }
        close(fd)
        return true
    }

    static func checkDBus() -> Check {
        var path = "/run/dbus/system_bus_socket"
        if let address = ProcessInfo.processInfo.environment["DBUS_SYSTEM_BUS_ADDRESS"], address.hasPrefix("unix:path=") {
            path = String(address.dropFirst("unix:path=".count).prefix { $0 != "," })
        }
        if canConnect(unixPath: path) {
            return Check(name: "dbus", result: "ok", detail: "system bus answers at \(path)")
        }
        return Check(
            name: "dbus", result: "fail", detail: "no system bus at \(path) (avahi-daemon needs it)",
            fix: "apt-get install dbus && systemctl start dbus (without systemd: dbus-daemon --system --fork)")
    }

    /// Whether avahi-daemon runs: its socket answers. (The client does not link dns_sd: what the daemon
    /// sees of DNS-SD comes from the daemon, below.)
    static func checkAvahi() -> Check {
        let path = "/run/avahi-daemon/socket"
        if canConnect(unixPath: path) {
            return Check(name: "avahi-daemon", result: "ok", detail: "answers at \(path)")
        }
        return Check(
            name: "avahi-daemon", result: "fail", detail: "not running (nothing answers at \(path))",
            fix: "apt-get install avahi-daemon && systemctl start avahi-daemon (without systemd: avahi-daemon -D)")
    }

    static func checkMulticast() -> Check {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else {
            return Check(name: "multicast", result: "warn", detail: "cannot list interfaces")
        }
        defer { freeifaddrs(list) }
        var names: Set<String> = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            let flags = Int32(entry.pointee.ifa_flags)
            if flags & Int32(IFF_UP) != 0, flags & Int32(IFF_MULTICAST) != 0, flags & Int32(IFF_LOOPBACK) == 0,
                let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET) || address.pointee.sa_family == sa_family_t(AF_INET6)
            {
                names.insert(String(cString: entry.pointee.ifa_name))
            }
            cursor = entry.pointee.ifa_next
        }
        if names.isEmpty {
            return Check(
                name: "multicast", result: "fail", detail: "no interface is up with multicast and an address: peers cannot be found",
                fix: "bring up a LAN interface (ip link set IF up) and make sure it has MULTICAST (ip link set IF multicast on)")
        }
        return Check(name: "multicast", result: "ok", detail: "multicast interfaces up: \(names.sorted().joined(separator: ", "))")
    }

    /// The socket check, the daemon's status and its peers (what chat works through without discovery).
    func checkSocket() -> (Check, DaemonStatus?, [PeerInfo]) {
        let path = global.socketPath
        do throws(ControlError) {
            let client = try ControlClient(path: path, timeoutSeconds: 5)
            guard let status = try client.call(.status).status else { throw ControlError(code: .badResponse, message: "no status") }
            let peers = (try? client.call(.peers).peers) ?? []
            return (Check(name: "socket", result: "ok", detail: "lanchatd \(status.version) (pid \(status.pid)) answers at \(path)"), status, peers)
        } catch {
            let fix =
                error.code == .permissionDenied
                ? "run lanchat as the daemon's user, or start lanchatd with --socket-group GROUP and join that group"
                : "start the daemon: lanchatd (or systemctl start lanchatd / systemctl --user start lanchatd)"
            return (Check(name: "socket", result: "fail", detail: error.message, fix: fix), nil, [])
        }
    }

    /// The checks that only discovery (DNS-SD through avahi-daemon) needs.
    static let discoveryChecks: Set<String> = ["dbus", "avahi-daemon", "multicast", "advertisement"]

    /// A host may run without Avahi on purpose, its peers kept by address (`lanchat connect`, `static-peer`)
    /// or connected to it: when avahi-daemon does not run and the daemon has such peers, the discovery
    /// checks that fail are warnings that say discovery is off and what chat works through, not failures
    /// (the exit status is 1 only for a real failure). Without such peers, they stay failures.
    static func withoutDiscovery(_ checks: [Check], peers: [PeerInfo]) -> [Check] {
        guard checks.contains(where: { $0.name == "avahi-daemon" && $0.result == "fail" }) else { return checks }
        let staticPeers = Set(peers.filter { $0.origin == "static" }.compactMap(\.id)).count
        let connected = Set(peers.filter { $0.origin != "static" && $0.state == "connected" }.compactMap(\.id)).count
        guard staticPeers + connected > 0 else { return checks }
        func count(_ number: Int, _ kind: String) -> String? {
            number == 0 ? nil : "\(number) \(kind) peer\(number == 1 ? "" : "s")"
        }
        let through = [count(staticPeers, "static"), count(connected, "connected")].compactMap { $0 }.joined(separator: " and ")
        return checks.map { check in
            guard discoveryChecks.contains(check.name), check.result == "fail" else { return check }
            var relaxed = check
            relaxed.result = "warn"
            relaxed.detail += "; discovery is off: chat works through \(through) (lanchat peers)"
            relaxed.fix = check.fix.map { "only to find peers on the link too: \($0)" }
            return relaxed
        }
    }

    static func checkPort(_ port: Int) -> Check {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let connected =
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            } == 0
        if connected { return Check(name: "port", result: "ok", detail: "peer port \(port) accepts connections") }
        return Check(
            name: "port", result: "fail", detail: "peer port \(port) does not accept connections locally",
            fix: "check that nothing else holds the port and that lanchatd is healthy (its log)")
    }

    /// Whether the daemon can write received files where they go (as the daemon sees it).
    static func checkDownloads(_ status: DaemonStatus) -> Check? {
        guard let path = status.downloadDirectory else { return nil }  // an older daemon
        if let problem = status.downloadProblem {
            return Check(
                name: "downloads", result: "fail", detail: "\(printable(problem)); files sent to this host are refused",
                fix: "make \(printable(path)) a directory the daemon's user may write in (e.g. install -d -m 0700 -o USER \(printable(path))), "
                    + "or start lanchatd with --download-dir DIR")
        }
        let free = status.downloadFreeBytes.map { " (\(Format.decimal(Double($0) / 1e9, places: 1)) GB free)" } ?? ""
        return Check(name: "downloads", result: "ok", detail: "received files go to \(printable(path))\(free)")
    }

    /// Whether our own advertisement is visible through avahi: the daemon's own browse reports it.
    static func checkAdvertisement(_ status: DaemonStatus) -> Check {
        if status.advertising == "registering" {
            return Check(
                name: "advertisement", result: "warn", detail: "still registering (avahi checks that the name is free, which takes about 2 s)",
                fix: "run lanchat doctor again in a few seconds")
        }
        guard status.advertising == "registered", let instance = status.instance else {
            return Check(
                name: "advertisement", result: "fail", detail: "the daemon is not advertised (\(status.advertising))",
                fix: "check avahi-daemon (above) and the daemon's log; it retries on its own")
        }
        switch status.advertisementVisible {
        case true?:
            return Check(name: "advertisement", result: "ok", detail: "visible on DNS-SD as \"\(printable(instance))\"")
        case false?:
            return Check(
                name: "advertisement", result: "warn", detail: "registered as \"\(printable(instance))\" but the daemon's own browse has not seen it",
                fix: "check avahi-daemon's allow-interfaces / deny-interfaces in /etc/avahi/avahi-daemon.conf")
        case nil:
            return Check(name: "advertisement", result: "ok", detail: "registered as \"\(printable(instance))\" (this daemon does not say whether its browse sees it)")
        }
    }
}
