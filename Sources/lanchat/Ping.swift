import ArgumentParser
import LanchatControl

struct Ping: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Connect to a peer (TLS pinned to its advertised key), show the short code, and measure round trips.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "A display name, instance name, or id prefix (4+ characters).") var peer: String
    @Option(name: .shortAndLong, help: "PINGs to send (1-100).") var count = 3
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard ControlCall.pingCountRange.contains(count) else {
            throw ValidationError("--count must be \(ControlCall.pingCountRange.lowerBound)-\(ControlCall.pingCountRange.upperBound)")
        }
    }

    func run() throws {
        let client = try global.connect(timeoutSeconds: 30)
        let response: ControlResponse
        do { response = try client.call(.ping(peer: peer, count: count)) } catch { fail(error.message) }
        guard let result = response.ping else { fail("the daemon sent no ping result") }
        if json {
            printJSON(result)
            return
        }
        print(
            "connected to \(printable(result.name)) (\(result.id.prefix(12))) at \(result.address) port \(result.port): "
                + "\(result.encrypted ? "TLS 1.3, key pinned" : "NOT encrypted"), protocol \(result.protocolVersion), handshake \(result.handshakeMs) ms")
        print("short code: \(result.shortCode)  (the other side's `lanchat ping` shows the same code)")
        for (index, rtt) in result.rttMs.enumerated() { print("pong \(index + 1): \(rtt) ms") }
    }
}
