import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import LanchatControl

/// "notes.pdf (1.2 MB, image)"
func describe(_ file: SharedFileInfo) -> String {
    "\(printable(file.name)) (\(sizeText(file.size))\(file.image ? ", image" : ""))"
}

/// A shared file's short id: the last 8 hex digits of its announcement's id (`lanchat fetch` takes
/// them). Not the first: a message id begins with the time it was written.
func shortFileID(_ id: String) -> String {
    String(id.suffix(8))
}

/// 1234567 -> "1.2 MB" (powers of 1000, as the progress lines).
func sizeText(_ bytes: Int) -> String {
    switch bytes {
    case ..<1000: "\(bytes) B"
    case ..<1_000_000: Format.decimal(Double(bytes) / 1e3, places: 1) + " kB"
    case ..<1_000_000_000: Format.decimal(Double(bytes) / 1e6, places: 1) + " MB"
    default: Format.decimal(Double(bytes) / 1e9, places: 2) + " GB"
    }
}

struct Share: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Share files in a room: announced to its members (name, size, SHA-256), kept by this daemon and by members who keep shared files, fetched by the others with `lanchat fetch`."
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The room.") var room: String
    @Argument(help: "The files.") var paths: [String]
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard !paths.isEmpty else { throw ValidationError("give at least one file") }
    }

    func run() throws {
        var shared: [SharedFileInfo] = []
        for path in paths {
            let absolute = absolutePath(path)
            if !json, isatty(1) == 1 { StandardStream.output.write(Data("sharing \(printable(path))...\r".utf8)) }
            let token: String?
            do { token = try handOver(absolute, socket: global.socketPath) } catch { fail(error.message) }
            guard let file = request(global, .share(room: room, path: absolute, fileToken: token), timeoutSeconds: 3600).files?.first else {
                fail("the daemon sent no file")
            }
            shared.append(file)
            if !json { print("shared \(describe(file)) in \(printable(file.room)) as \(shortFileID(file.id)) (sha256 \(file.sha256.prefix(16))...)") }
        }
        if json { printJSON(shared) }
    }
}

struct Files: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The files shared in a room (or every room): who shared them, whether this daemon keeps them, images marked.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "Only this room.") var room: String?
    @Option(help: "The last N files, 1-\(ControlCall.historyLimitRange.upperBound).") var limit = 100
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard ControlCall.historyLimitRange.contains(limit) else {
            throw ValidationError("--limit must be \(ControlCall.historyLimitRange.lowerBound)-\(ControlCall.historyLimitRange.upperBound)")
        }
    }

    func run() throws {
        let files = request(global, .files(room: room, limit: limit)).files ?? []
        if json { return printJSON(files) }
        if files.isEmpty { return print(room.map { "no files shared in \(printable($0))" } ?? "no files shared") }
        print(
            table(
                ["ID", "ROOM", "SIZE", "KEPT", "FROM", "NAME"],
                files.map { file in
                    [
                        shortFileID(file.id), printable(file.room), sizeText(file.size), file.held == true ? "yes" : "no", printable(file.from),
                        printable(file.name) + (file.image ? "  [image]" : ""),
                    ]
                }))
    }
}

struct Fetch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Get a copy of a file shared in a room: from this daemon if it keeps it, else from any member who does (checked against its SHA-256).")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The file's id, or its last 4 characters or more (`lanchat files` shows the last 8).") var id: String
    @Option(help: "Put it in this directory (default: the daemon's download directory).") var to: String?
    @Flag(help: "Print JSON progress lines even on a terminal.") var json = false

    func run() throws {
        let watcher = try global.connect()
        do { _ = try watcher.call(.watch) } catch { fail(error.message) }
        watcher.setTimeout(seconds: 0)
        guard var entry = request(global, .fetch(id: id, to: to.map { absolutePath($0) }), timeoutSeconds: 600).transfer else {
            fail("the daemon sent no transfer")
        }
        let terminal = isatty(1) == 1 && !json
        var shown = ""
        func show(_ entry: TransferEntry, ended: Bool) {
            if terminal {
                let line =
                    entry.state == "offered"
                    ? "\(printable(entry.name)): asking \(printable(entry.peer))\(entry.error.map { " (\(printable($0)))" } ?? "")"
                    : progressLine(entry)
                guard line != shown || ended else { return }
                shown = line
                StandardStream.output.write(Data(("\r\u{1b}[K" + line + (ended ? "\n" : "")).utf8))
            } else {
                StandardStream.output.write(Data(ControlJSON.line(entry)))
            }
        }
        if entry.state == "complete" {
            // Kept here: copied at once.
            if terminal { print("\(printable(entry.name)) was kept here: copied to \(printable(entry.path ?? "?"))") } else { show(entry, ended: true) }
            return
        }
        show(entry, ended: false)
        while !entry.hasEnded {
            let line: [UInt8]?
            do { line = try watcher.readLine() } catch { fail(error.message) }
            guard let line else { fail("lanchatd closed the connection (it stopped?)") }
            guard let event = try? ControlJSON.decoder().decode(ControlResponse.self, from: Data(line)).event,
                let update = event.transfer, update.id == entry.id
            else { continue }
            entry = update
            show(entry, ended: entry.hasEnded)
        }
        if entry.state != "complete" { fail("\(printable(entry.name)) was not fetched: \(printable(entry.error ?? entry.state))") }
    }
}
