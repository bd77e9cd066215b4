import Foundation
import Glibc
@testable import LanchatDaemon
import LanchatControl
import LanchatDiscovery
import Testing

private func resolve(_ flags: [(key: String, value: String)] = [], environment: [String: String] = [:]) throws(DaemonConfiguration.Error) -> DaemonConfiguration {
    try DaemonConfiguration.resolve(flags: flags, configPath: nil, environment: environment, userName: "alice", hostName: "h1")
}

@Suite struct DaemonConfigurationTests {
    @Test func defaults() throws {
        let config = try resolve(environment: ["HOME": "/home/alice", "XDG_RUNTIME_DIR": "/run/user/1000"])
        #expect(config.name == "alice@h1")
        #expect(config.port == 0)
        #expect(config.encryption == .required)
        #expect(config.autoAccept == .never)
        #expect(config.socketPath == "/run/user/1000/lanchat/lanchatd.sock")
    }

    @Test func downloadsFollowTheStateDirectoryInEffect() throws {
        func downloads(_ flags: [(key: String, value: String)] = [], _ environment: [String: String] = [:], uid: uid_t) throws -> String {
            try DaemonConfiguration.resolve(
                flags: flags, configPath: nil, environment: ["HOME": "/home/alice"].merging(environment) { $1 },
                userName: "alice", hostName: "h1", uid: uid
            ).downloadDirectory
        }
        #expect(try downloads(uid: 0) == "/var/lib/lanchat/downloads")
        #expect(try downloads(uid: 1000) == "/home/alice/Downloads")
        // Chosen by flag or environment: the downloads go with it (for root and for users alike).
        #expect(try downloads([("state-dir", "/srv/chat")], uid: 0) == "/srv/chat/downloads")
        #expect(try downloads([("state-dir", "/srv/chat")], uid: 1000) == "/srv/chat/downloads")
        #expect(try downloads([], ["LANCHATD_STATE_DIR": "/srv/env"], uid: 0) == "/srv/env/downloads")
        // The system service (systemd's StateDirectory=).
        #expect(try downloads([], ["STATE_DIRECTORY": "/var/lib/lanchat"], uid: 998) == "/var/lib/lanchat/downloads")
        // A download directory that was chosen stays.
        #expect(try downloads([("state-dir", "/srv/chat"), ("download-dir", "/data/in")], uid: 0) == "/data/in")
        #expect(try downloads([("state-dir", "/srv/chat")], ["LANCHATD_DOWNLOAD_DIR": "/data/env"], uid: 0) == "/data/env")
    }

    @Test func aStateDirectoryInTheConfigFileCarriesTheDownloads() throws {
        let path = "/tmp/lanchat-config-test-\(getpid()).conf"
        defer { unlink(path) }
        try "state-dir = /srv/file\n".write(toFile: path, atomically: false, encoding: .utf8)
        let config = try DaemonConfiguration.resolve(flags: [], configPath: path, environment: [:], userName: "a", hostName: "h", uid: 0)
        #expect(config.downloadDirectory == "/srv/file/downloads")
    }

    @Test func staticPeersAreRepeatableAndChecked() throws {
        let config = try resolve(
            [("static-peer", "192.0.2.7"), ("static-peer", "[2001:db8::5]:9000")],
            environment: ["LANCHATD_STATIC_PEER": "ignored.example"])
        #expect(config.staticPeers == [PeerAddress(host: "192.0.2.7", port: 7473), PeerAddress(host: "2001:db8::5", port: 9000)])
        #expect(try resolve(environment: ["LANCHATD_STATIC_PEER": "a.example, b.example:1"]).staticPeers.count == 2)
        #expect(throws: DaemonConfiguration.Error.self) { try resolve([("static-peer", "bad host")]) }
        #expect(try resolve().portChosen == false)
        #expect(try resolve([("port", "0")]).portChosen == true)
    }

    @Test func flagsBeatEnvironment() throws {
        let config = try resolve(
            [("name", "flag"), ("interface", "eth1")], environment: ["LANCHATD_NAME": "env", "LANCHATD_INTERFACE": "eth0,eth2", "LANCHATD_PORT": "7000"])
        #expect(config.name == "flag")
        #expect(config.interfaces == ["eth1"])
        #expect(config.port == 7000)
    }

    @Test func fileSizesTakeBinarySuffixes() throws {
        var config = try resolve()
        #expect(config.maximumFileSize == 1 << 40)
        for (text, bytes) in [("0", UInt64(0)), ("1048576", 1 << 20), ("500K", 500 << 10), ("4g", 4 << 30), ("2T", 2 << 40)] {
            try config.apply(key: "max-file-size", value: text)
            #expect(config.maximumFileSize == bytes, "\(text)")
        }
    }

    @Test func controlIdleTimeoutDefaultsToAMinute() throws {
        #expect(try resolve().controlIdleTimeout == 60)
        #expect(try resolve(environment: ["LANCHATD_CONTROL_IDLE_TIMEOUT": "2"]).controlIdleTimeout == 2)
        let settings = try DaemonConfiguration.parseFile("control-idle-timeout = 300")
        var config = try resolve()
        for (key, value) in settings { try config.apply(key: key, value: value) }
        #expect(config.controlIdleTimeout == 300)
    }

    /// Issue 28: how long a newcomer takes its inviter's history (two minutes unless said), a flag too.
    @Test func historyWaitDefaultsToTwoMinutes() throws {
        #expect(try resolve().historyWait == 120)
        #expect(try resolve(environment: ["LANCHATD_HISTORY_WAIT": "10"]).historyWait == 10)
        var config = try resolve()
        #expect(throws: (any Error).self) { try config.apply(key: "history-wait", value: "0") }
        try config.apply(key: "history-wait", value: "3600")
        #expect(config.historyWait == 3600)
    }

    @Test func parsesAConfigFile() throws {
        let settings = try DaemonConfiguration.parseFile(
            """
            # comment
            name = "lab host"

            port=7001\r
            interface = lan0, lan1
            """)
        var config = try resolve()
        for (key, value) in settings { try config.apply(key: key, value: value) }
        #expect(config.name == "lab host")
        #expect(config.port == 7001)
        #expect(config.interfaces == ["lan0", "lan1"])
    }

    @Test(arguments: [
        "just words", "unknown-key = 1", "= value", "name = a\u{1b}[2Jb",
    ])
    func hostileConfigFilesAreRefusedWithTheLine(text: String) {
        #expect(throws: DaemonConfiguration.Error.self) { try DaemonConfiguration.parseFile("# ok\n" + text) }
        do { _ = try DaemonConfiguration.parseFile("# ok\n" + text) } catch { #expect(error.message.hasPrefix("line 2")) }
    }

    @Test(arguments: [
        ("port", "65536"), ("port", "-1"), ("port", "http"), ("encryption", "sometimes"), ("auto-accept", "yes"),
        ("log-level", "loud"), ("interface", "a/b"), ("interface", String(repeating: "i", count: 20)), ("name", "\u{7}\u{7}"),
        ("state-dir", ""), ("socket-group", "a b"), ("refresh-interval", "0"), ("control-idle-timeout", "0"),
        ("max-file-size", ""), ("max-file-size", "-1"), ("max-file-size", "4X"), ("max-file-size", "1.5G"), ("max-file-size", "G"),
        ("max-file-size", "99999999999999999999"), ("max-file-size", "9999999999T"),
    ])
    func invalidValuesAreRefusedNamingTheKey(key: String, value: String) throws {
        var config = try resolve()
        do {
            try config.apply(key: key, value: value)
            Issue.record("accepted \(key)=\(value)")
        } catch {
            #expect(error.message.hasPrefix(key))
        }
    }

    @Test func environmentErrorsNameTheVariable() {
        do {
            _ = try resolve(environment: ["LANCHATD_PORT": "x"])
            Issue.record("accepted")
        } catch {
            #expect(error.message.hasPrefix("LANCHATD_PORT"))
        }
    }

    @Test func missingConfigFileIsAClearError() {
        do {
            _ = try DaemonConfiguration.resolve(flags: [], configPath: "/nonexistent.conf", environment: [:], userName: "a", hostName: "b")
            Issue.record("accepted")
        } catch {
            #expect(error.message.contains("/nonexistent.conf"))
        }
    }
}

@Suite struct DaemonSupportTests {
    @Test func instanceNamesFitADNSLabel() {
        #expect(PeerAdvertisement.instanceName(base: "alice", attempt: 0) == "alice")
        #expect(PeerAdvertisement.instanceName(base: "alice", attempt: 1) == "alice (2)")
        let long = PeerAdvertisement.instanceName(base: String(repeating: "é", count: 100), attempt: 2)
        #expect(long.utf8.count <= 63)
        #expect(long.hasSuffix(" (3)"))
        // After the name stayed contested on the network: our id's first characters, kept when cut.
        #expect(PeerAdvertisement.instanceName(base: "alice", attempt: 0, tag: "ww7lh5") == "alice [ww7lh5]")
        let tagged = PeerAdvertisement.instanceName(base: String(repeating: "é", count: 100), attempt: 1, tag: "ww7lh5")
        #expect(tagged.utf8.count <= 63 && tagged.hasSuffix("é [ww7lh5] (2)"), "\(tagged)")
    }

    @Test func logValuesCannotForgeLines() {
        #expect(LogfmtLogHandler.quote("plain") == "plain")
        #expect(LogfmtLogHandler.quote("two words") == "\"two words\"")
        #expect(LogfmtLogHandler.quote("a\nlevel=error msg=x") == "\"a\\nlevel=error msg=x\"")
        #expect(LogfmtLogHandler.quote("\u{1b}[2J") == "\"\\x1b[2J\"")
    }

    @Test func eventHubDropsOldestForSlowSubscribers() async {
        let hub = EventHub(bufferSize: 2)
        let stream = hub.subscribe()
        for index in 0..<5 { hub.publish(ControlEvent(time: "e\(index)", .advertising(state: "registered", instance: nil))) }
        hub.finishAll()
        var seen: [String] = []
        for await event in stream { seen.append(event.time) }
        #expect(seen == ["e3", "e4"])
        #expect(hub.subscriberCount == 0)
    }
}
