import ArgumentParser
import LanchatControl

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show this host's daemon: name, id, advertisement.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let client = try global.connect()
        guard let status = call(client, .status).status else { fail("the daemon sent no status") }
        if json {
            printJSON(status)
            return
        }
        print("""
            name:        \(printable(status.name))
            id:          \(status.id)
            advertising: \(status.advertising)\(status.instance.map { " as \"\(printable($0))\"" } ?? "")
            peer port:   \(status.port)
            encryption:  \(status.encryption)
            peers:       \(status.peers)
            daemon:      lanchatd \(status.version), pid \(status.pid), since \(status.startedAt)
            """)
        if let downloads = status.downloadDirectory {
            print("downloads:   \(printable(downloads))\(status.downloadProblem.map { " (unusable: \(printable($0)))" } ?? "")")
        }
    }
}
