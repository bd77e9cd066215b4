import ArgumentParser
import LanchatControl

struct Peers: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the lanchat peers on the network.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print JSON (an array of peers).") var json = false
    @Flag(help: "Also list services of our type that are not usable lanchat peers, with the reason.") var all = false

    func run() throws {
        let client = try global.connect()
        let peers = (call(client, .peers).peers ?? []).filter { all || $0.compatible }
        if json {
            printJSON(peers)
            return
        }
        if peers.isEmpty {
            print("no peers found yet (lanchat doctor checks discovery)")
            return
        }
        let rows = peers.map { peer -> [String] in
            [
                printable(peer.name), peer.shortId ?? "-",
                Self.addresses(peer), peer.port == 0 ? "-" : String(peer.port),
                peer.compatible ? peer.state : "incompatible: " + printable(peer.problem ?? "?"),
                peer.rooms.isEmpty ? "-" : peer.rooms.joined(separator: ","),
                (peer.availability ?? "-") + (peer.statusText.map { $0.isEmpty ? "" : " (\(printable($0)))" } ?? ""),
                peer.instance.isEmpty ? "-" : printable(peer.instance), Self.origin(peer),
            ]
        }
        print(table(["NAME", "ID", "ADDRESSES", "PORT", "STATE", "ROOMS", "STATUS", "INSTANCE", "ORIGIN"], rows))
    }

    /// Where the peer is: its addresses, or for a peer known only by its connection, the address the
    /// connection is with (`host`).
    static func addresses(_ peer: PeerInfo) -> String {
        if !peer.addresses.isEmpty { return peer.addresses.joined(separator: ",") }
        return peer.origin == "connected" && !peer.host.isEmpty ? printable(peer.host) : "-"
    }

    /// How the daemon knows the peer: dnssd, static, or "connected (dialed us)" for a peer known only
    /// by its connection (it ran `lanchat connect` to us; discovery does not see it).
    static func origin(_ peer: PeerInfo) -> String {
        let origin = peer.origin ?? "dnssd"
        guard origin == "connected", let dialedUs = peer.dialedUs else { return origin }
        return dialedUs ? "connected (dialed us)" : "connected (we dialed)"
    }
}
