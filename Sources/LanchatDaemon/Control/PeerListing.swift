import LanchatControl
import LanchatCore
import LanchatDiscovery
import LanchatSession

/// What `peers` lists: the peers discovery knows (DNS-SD, then static peers), then the peers with a live
/// connection that discovery does not list, origin `connected`: a peer that dialed us (`lanchat connect`
/// on its side, from beyond the link or from a host without Avahi) is known only by its connection.
enum PeerListing {
    /// `listed` (discovery's, with their session state already set), then one entry for each live link
    /// whose peer `listed` does not hold.
    static func merge(_ listed: [PeerInfo], links: [SessionNode.LiveLink], rooms: [PeerID: [String]]) -> [PeerInfo] {
        let ids = Set(listed.compactMap(\.id))
        return listed + links.filter { !ids.contains($0.peer.id.rawValue) }.map { info($0, rooms: rooms[$0.peer.id] ?? []) }
    }

    /// A peer known by its connection: its name (from its HELLO), id, and the address the connection is
    /// with as `host` and `instance`. No `addresses` and no port: where it listens is not known (the port
    /// a peer dialed us from is not it), so there is nothing to dial, and what waits for a peer to have
    /// addresses (to be discovered) does not take it for one. No interfaces.
    static func info(_ link: SessionNode.LiveLink, rooms: [String]) -> PeerInfo {
        let address = link.address.map(unmapped) ?? ""
        var info = PeerInfo(
            name: PeerAdvertisement.sanitize(link.peer.name), id: link.peer.id.rawValue, shortId: link.peer.id.short,
            instance: address, host: address, port: 0, addresses: [], interfaces: [],
            state: "connected", rooms: rooms, compatible: true, problem: nil, protocolVersion: link.protocolVersion,
            encryption: nil, origin: "connected")
        info.dialedUs = link.dialedUs
        return info
    }

    /// An IPv4 peer on our dual-stack peer port comes as an IPv4-mapped IPv6 address (::ffff:198.18.0.11):
    /// listed as the IPv4 address it is.
    static func unmapped(_ address: String) -> String {
        let prefix = "::ffff:"
        guard address.lowercased().hasPrefix(prefix) else { return address }
        let rest = address.dropFirst(prefix.count)
        let parts = rest.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.allSatisfy({ part in !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCII) && UInt8(part) != nil })
        else { return address }
        return String(rest)
    }
}
