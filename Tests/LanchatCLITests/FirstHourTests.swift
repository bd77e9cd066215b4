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
