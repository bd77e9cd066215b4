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
                peer.addresses.isEmpty ? "-" : peer.addresses.joined(separator: ","), String(peer.port),
                peer.compatible ? peer.state : "incompatible: " + printable(peer.problem ?? "?"),
                peer.rooms.isEmpty ? "-" : peer.rooms.joined(separator: ","),
                (peer.availability ?? "-") + (peer.statusText.map { $0.isEmpty ? "" : " (\(printable($0)))" } ?? ""),
                printable(peer.instance), peer.origin ?? "dnssd",
            ]
        }
        print(table(["NAME", "ID", "ADDRESSES", "PORT", "STATE", "ROOMS", "STATUS", "INSTANCE", "ORIGIN"], rows))
    }
}
