import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import LanchatControl

/// `lanchat connect HOST[:PORT]`: a peer discovery cannot see (another subnet, a VPN).
struct Connect: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Connect to a peer by address (one discovery cannot see) and keep it as a static peer.",
        discussion: """
            Shows who answers at HOST[:PORT] (name, id, short code; the port defaults to 7473, where lanchatd \
            listens unless given --port) and asks you to confirm: compare the short code with the peer's owner \
            (their `lanchat ping` or `lanchat connect` shows the same). Once confirmed, the peer is listed by \
            `lanchat peers` (origin static), can be invited like a discovered one, and is redialed after restarts, \
            pinned to the key you confirmed. `lanchat disconnect PEER` forgets it.
            """)

    @OptionGroup var global: GlobalOptions
    @Argument(help: "HOST, HOST:PORT, or [IPv6]:PORT.") var address: String
    @Flag(name: .shortAndLong, help: "Keep the peer without asking (for scripts: check the short code another way).") var yes = false
    @Flag(help: "Print JSON (the peer and whether it was kept).") var json = false

    func run() throws {
        let first = request(global, .connect(address: address, confirm: nil), timeoutSeconds: 30).connect
        guard let first else { fail("the daemon sent no answer") }
        let who = "\(printable(first.name)) (\(first.shortId)) at \(first.ip) port \(first.port)"
        if !yes {
            guard isatty(0) == 1 else {
                fail("\(who), short code \(first.shortCode): not kept; compare the short code with its owner, then run again with --yes")
            }
            StandardStream.error.write(
                Data(
                    "\(who)\nshort code: \(first.shortCode)  (the other side's `lanchat ping` shows the same code)\nkeep \(printable(first.name)) as a static peer? [y/N] "
                        .utf8))
            let answer = readLine()?.trimmingBlanks().lowercased() ?? ""
            guard answer == "y" || answer == "yes" else {
                StandardStream.error.write(Data("not kept\n".utf8))
                throw ExitCode(1)
            }
        }
        guard let kept = request(global, .connect(address: address, confirm: first.id), timeoutSeconds: 30).connect else {
            fail("the daemon sent no answer")
        }
        if json {
            printJSON(kept)
        } else {
            print("connected to \(printable(kept.name)) (\(kept.shortId)) at \(kept.ip) port \(kept.port), short code \(kept.shortCode); kept as a static peer")
        }
    }
}

/// `lanchat disconnect PEER`: forget a static peer.
struct Disconnect: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Stop keeping a static peer (added with `lanchat connect`).")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The static peer's name or id prefix.") var peer: String

    func run() throws {
        let removed = request(global, .disconnect(peer: peer)).peers?.first
        print("no longer keeping \(printable(removed?.name ?? peer)) (\(removed?.shortId ?? "?")) as a static peer")
    }
}
