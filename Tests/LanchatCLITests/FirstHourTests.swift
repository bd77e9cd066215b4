@testable import lanchat
import LanchatControl
import Testing

/// Issue 32: what `peers`, `doctor` and `watch` say in the first hour.
@Suite struct FirstHourTests {
    private let bob = String(repeating: "b", count: 52)
    private let carol = String(repeating: "c", count: 52)

    private func peer(_ id: String, origin: String, state: String) -> PeerInfo {
        PeerInfo(
            name: "p", id: id, shortId: String(id.prefix(12)), instance: "p", host: "", port: 7473, addresses: [], interfaces: [],
            state: state, rooms: [], compatible: true, problem: nil, protocolVersion: 2, encryption: nil, origin: origin)
    }

    /// What doctor checks on a host without avahi-daemon (the rest is fine).
    private let withoutAvahi = [
        Doctor.Check(name: "dbus", result: "ok", detail: "system bus answers"),
        Doctor.Check(name: "avahi-daemon", result: "fail", detail: "not running", fix: "apt-get install avahi-daemon"),
        Doctor.Check(name: "multicast", result: "ok", detail: "multicast interfaces up: lan0"),
        Doctor.Check(name: "socket", result: "ok", detail: "lanchatd answers"),
        Doctor.Check(name: "port", result: "ok", detail: "peer port 7473 accepts connections"),
        Doctor.Check(name: "advertisement", result: "fail", detail: "the daemon is not advertised (avahi_unavailable)", fix: "check avahi-daemon"),
    ]

    @Test func withoutAvahiAndWithStaticPeersTheDiscoveryChecksAreWarningsThatSaySo() {
        let checks = Doctor.withoutDiscovery(withoutAvahi, peers: [peer(bob, origin: "static", state: "connected")])
        #expect(checks.map(\.result) == ["ok", "warn", "ok", "ok", "ok", "warn"])
        #expect(!checks.contains { $0.result == "fail" })
        #expect(checks[1].detail == "not running; discovery is off: chat works through 1 static peer (lanchat peers)")
        #expect(checks[5].detail.hasSuffix("discovery is off: chat works through 1 static peer (lanchat peers)"))
        #expect(checks[1].fix == "only to find peers on the link too: apt-get install avahi-daemon")
    }

    @Test func aPeerConnectedToUsCountsAsConnectedAndAStaticOneOnce() {
        let peers = [
            peer(bob, origin: "static", state: "not_connected"), peer(carol, origin: "connected", state: "connected"),
            peer(carol, origin: "connected", state: "connected"),
        ]
        let checks = Doctor.withoutDiscovery(withoutAvahi, peers: peers)
        #expect(checks[1].result == "warn")
        #expect(checks[1].detail.hasSuffix("chat works through 1 static peer and 1 connected peer (lanchat peers)"))
        let two = Doctor.withoutDiscovery(withoutAvahi, peers: [peer(bob, origin: "connected", state: "connected"), peer(carol, origin: "dnssd", state: "connected")])
        #expect(two[1].detail.hasSuffix("chat works through 2 connected peers (lanchat peers)"))
    }

    @Test func withoutAvahiAndNoPeerByAddressOrConnectedTheyStayFailures() {
        #expect(Doctor.withoutDiscovery(withoutAvahi, peers: []).map(\.result) == withoutAvahi.map(\.result))
        // Peers that are only discovered (there, avahi ran a moment ago) are not peers without discovery.
        #expect(
            Doctor.withoutDiscovery(withoutAvahi, peers: [peer(bob, origin: "dnssd", state: "discovered")]).map(\.result)
                == withoutAvahi.map(\.result))
    }

    @Test func withAvahiRunningAFailureIsAFailureWhateverThePeers() {
        var checks = withoutAvahi
        checks[1] = Doctor.Check(name: "avahi-daemon", result: "ok", detail: "answers")
        #expect(
            Doctor.withoutDiscovery(checks, peers: [peer(bob, origin: "static", state: "connected")]).map(\.result)
                == ["ok", "ok", "ok", "ok", "ok", "fail"])
    }

    @Test func notDiscoveryChecksStayFailures() {
        var checks = withoutAvahi
        checks[4] = Doctor.Check(name: "port", result: "fail", detail: "peer port 7473 does not accept connections locally")
        #expect(
            Doctor.withoutDiscovery(checks, peers: [peer(bob, origin: "static", state: "connected")]).map(\.result)
                == ["ok", "warn", "ok", "ok", "fail", "warn"])
    }

    @Test func watchSaysItWatchesOnlyOnATerminal() {
        #expect(
            Watch.startNote(socket: "/run/lanchat/lanchatd.sock", standardOutputIsTerminal: true)
                == "watching lanchatd at /run/lanchat/lanchatd.sock (Ctrl-C to stop)")
        #expect(Watch.startNote(socket: "/run/lanchat/lanchatd.sock", standardOutputIsTerminal: false) == nil)
    }

    @Test func aPeerKnownByItsConnectionSaysWhoDialed() {
        var dialedUs = peer(bob, origin: "connected", state: "connected")
        dialedUs.dialedUs = true
        #expect(Peers.origin(dialedUs) == "connected (dialed us)")
        dialedUs.dialedUs = false
        #expect(Peers.origin(dialedUs) == "connected (we dialed)")
        #expect(Peers.origin(peer(bob, origin: "static", state: "connected")) == "static")
        dialedUs.host = "198.18.0.11"
        #expect(Peers.addresses(dialedUs) == "198.18.0.11")
        #expect(Peers.addresses(peer(bob, origin: "dnssd", state: "discovered")) == "-")
        var old = peer(bob, origin: "dnssd", state: "discovered")
        old.origin = nil
        #expect(Peers.origin(old) == "dnssd")
    }
}
