import ArgumentParser
import Foundation
import LanchatControl

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print events as they happen (peers found, changed, lost).")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print one JSON object per line.") var json = false

    func run() throws {
        let client = try global.connect()
        _ = call(client, .watch)
        client.setTimeout(seconds: 0)
        while true {
            let line: [UInt8]?
            do { line = try client.readLine() } catch { fail(error.message) }
            guard let line else { fail("lanchatd closed the connection (it stopped?)") }
            guard let response = try? ControlJSON.decoder().decode(ControlResponse.self, from: Data(line)), let event = response.event else {
                continue
            }
            // One write per event, unbuffered, so a pipe sees each event at once.
            let text = json ? String(decoding: ControlJSON.line(event), as: UTF8.self) : Self.describe(event) + "\n"
            FileHandle.standardOutput.write(Data(text.utf8))
        }
    }

    static func describe(_ event: ControlEvent) -> String {
        if let peer = event.peer {
            let id = peer.shortId.map { " (\($0))" } ?? ""
            let address = peer.addresses.first.map { " \($0) port \(peer.port)" } ?? ""
            let note = peer.compatible ? "" : " [incompatible: \(printable(peer.problem ?? "?"))]"
            return "\(event.time) \(event.type) \(printable(peer.name))\(id)\(address)\(note)"
        }
        if event.type == "advertising" {
            return "\(event.time) advertising \(event.advertising ?? "?")\(event.instance.map { " as \"\(printable($0))\"" } ?? "")"
        }
        return "\(event.time) \(event.type)"
    }
}
