import LanchatControl
import LanchatCore
@testable import LanchatDaemon
import LanchatEngine
import LanchatSession
import Testing

/// Issue 32: a peer that dialed us (`lanchat connect` on its side) is listed by `peers` with what its
/// connection tells, though discovery does not list it (it said "no peers found yet").
@Suite struct PeerListingTests {
    private let bob = PeerID("abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst")!
    private let carol = PeerID("bbcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst")!

    private func discovered(_ id: PeerID, name: String) -> PeerInfo {
        PeerInfo(
            name: name, id: id.rawValue, shortId: id.short, instance: name, host: "h.local", port: 7473, addresses: ["198.18.0.2"],
            interfaces: ["lan0"], state: "connected", rooms: [], compatible: true, problem: nil, protocolVersion: 2,
            encryption: "required", origin: "dnssd")
    }

    @Test func aPeerThatDialedUsIsListedWithWhatItsConnectionTells() {
        let link = SessionNode.LiveLink(
            peer: SessionPeer(id: bob, name: "bob\u{1b}[2J"), address: "198.18.1.12", dialedUs: true, encrypted: true, protocolVersion: 2)
        let peers = PeerListing.merge([], links: [link], rooms: [:])
        #expect(peers.count == 1)
        let peer = peers[0]
        #expect(peer.name == "bob[2J" && peer.id == bob.rawValue && peer.shortId == bob.short)
        #expect(peer.state == "connected" && peer.origin == "connected" && peer.dialedUs == true)
        #expect(peer.host == "198.18.1.12" && peer.instance == "198.18.1.12" && peer.port == 0 && peer.compatible)
        #expect(peer.addresses.isEmpty && peer.interfaces.isEmpty)  // nothing to dial: where it listens is not known
        #expect(peer.protocolVersion == 2 && peer.rooms.isEmpty)
    }

    @Test func aPeerDiscoveryListsIsListedOnceAsDiscoveryHasIt() {
        let links = [
            SessionNode.LiveLink(peer: SessionPeer(id: bob, name: "bob"), address: "198.18.0.2", dialedUs: false, encrypted: true, protocolVersion: 2),
            SessionNode.LiveLink(peer: SessionPeer(id: carol, name: "carol"), address: nil, dialedUs: true, encrypted: false, protocolVersion: 1),
        ]
        let peers = PeerListing.merge([discovered(bob, name: "bob")], links: links, rooms: [carol: ["lab"]])
        #expect(peers.map(\.name) == ["bob", "carol"])
        #expect(peers.map(\.origin) == ["dnssd", "connected"])
        #expect(peers[0].dialedUs == nil)
        #expect(peers[1].rooms == ["lab"] && peers[1].host.isEmpty && peers[1].instance.isEmpty)
    }

    /// A peer that dialed our dual-stack port over IPv4 is listed by its IPv4 address.
    @Test func anIPv4MappedAddressIsListedAsIPv4() {
        let link = SessionNode.LiveLink(
            peer: SessionPeer(id: bob, name: "bob"), address: "::ffff:198.18.0.11", dialedUs: true, encrypted: true, protocolVersion: 2)
        let peer = PeerListing.info(link, rooms: [])
        #expect(peer.host == "198.18.0.11" && peer.instance == "198.18.0.11")
        #expect(PeerListing.unmapped("::FFFF:10.0.0.1") == "10.0.0.1")
        for address in ["fe80::1%lan0", "::ffff:1.2.3", "::ffff:1.2.3.256", "::ffff:7f00:1", "2001:db8::1", "198.18.0.11"] {
            #expect(PeerListing.unmapped(address) == address)
        }
    }

    @Test func noLinksListsWhatDiscoveryLists() {
        #expect(PeerListing.merge([discovered(bob, name: "bob")], links: [], rooms: [:]) == [discovered(bob, name: "bob")])
        #expect(PeerListing.merge([], links: [], rooms: [:]).isEmpty)
    }
}
