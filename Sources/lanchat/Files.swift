import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import LanchatControl

struct SendFile: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send-file", abstract: "Send files to peers: a progress bar on a terminal, JSON progress lines otherwise.")

    @OptionGroup var global: GlobalOptions
    @Option(help: "Send to every member of this room.") var room: String?
    @Option(name: .customLong("to"), help: "A peer to send to (repeatable).") var to: [String] = []
    @Flag(help: "Print JSON progress lines even on a terminal.") var json = false
    @Argument(help: "The files.") var paths: [String]

    func validate() throws {
        guard !paths.isEmpty else { throw ValidationError("give at least one file") }
        guard room != nil || !to.isEmpty else { throw ValidationError("say who gets the files: --to PEER or --room ROOM") }
    }

    func run() throws {
        var peers = to
        if let room {
            guard let info = request(global, .members(room: room)).room else { fail("the daemon sent no room") }
            peers += info.members.map(\.id)
        }
        let watcher = try global.connect()
        do { _ = try watcher.call(.watch) } catch { fail(error.message) }
        watcher.setTimeout(seconds: 0)
        var waiting: [String: TransferEntry] = [:]
        for path in paths {
            let absolute = absolutePath(path)
            for peer in peers {
                let token: String?
                do { token = try handOver(absolute, socket: global.socketPath) } catch { fail(error.message) }
                guard let entry = request(global, .sendFile(peer: peer, path: absolute, fileToken: token), timeoutSeconds: 600).transfer else {
                    fail("the daemon sent no transfer")
                }
                waiting[entry.id] = entry
            }
        }
        let terminal = isatty(1) == 1 && !json
        var failed = 0
        while !waiting.isEmpty {
            let line: [UInt8]?
            do { line = try watcher.readLine() } catch { fail(error.message) }
            guard let line else { fail("lanchatd closed the connection (it stopped?)") }
            guard let event = try? ControlJSON.decoder().decode(ControlResponse.self, from: Data(line)).event,
                let entry = event.transfer, waiting[entry.id] != nil
            else { continue }
            waiting[entry.id] = entry
            let ended = entry.hasEnded
            if terminal {
                StandardStream.output.write(Data(("\r\u{1b}[K" + progressLine(entry) + (ended ? "\n" : "")).utf8))
            } else {
                StandardStream.output.write(Data(ControlJSON.line(entry)))
            }
            if ended {
                waiting[entry.id] = nil
                if entry.state != "complete" { failed += 1 }
            }
        }
        if failed > 0 { fail("\(failed) of the transfers did not complete") }
    }
}

/// Opens the file here, as the person running lanchat, and hands the descriptor to the daemon (which may
/// run as another user that cannot read it: the system service). Returns the `send-file` parameter
/// naming it; nothing if this daemon takes no descriptors (then it opens the path itself).
/// `path` as the daemon needs it: absolute, relative ones joined to the working directory ("/" included).
func absolutePath(_ path: String, in directory: String = FileManager.default.currentDirectoryPath) -> String {
    if path.hasPrefix("/") { return path }
    return directory.hasSuffix("/") ? directory + path : directory + "/" + path
}

/// Hands the open file to the daemon (`FilePassing`); the token to send with `send-file`, or nil when
/// the daemon offers no file passing (it then opens the path itself).
func handOver(_ path: String, socket: String) throws(ControlError) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw ControlError(code: .badFile, message: "cannot read \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { throw ControlError(code: .badFile, message: "\(path) is not a regular file") }
    guard access(FilePassing.socketPath(forControlSocket: socket), F_OK) == 0 else { return nil }
    return try FilePassing.pass(fd, controlSocket: socket)
}

/// "notes.txt -> bob  [#####.....]  52%  12.3 MB/s  ETA 4s"
func progressLine(_ entry: TransferEntry) -> String {
    let fraction = entry.size > 0 ? Double(entry.done) / Double(entry.size) : (entry.state == "complete" ? 1 : 0)
    let filled = Int((fraction * 20).rounded(.down))
    let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: 20 - filled)
    let rate = entry.rate / 1_000_000
    var text = "\(printable(entry.name)) \(entry.direction == "outgoing" ? "->" : "<-") \(printable(entry.peer))  [\(bar)] \(Int(fraction * 100))%"
    text += "  \(Format.decimal(rate, places: 1)) MB/s"
    if entry.state == "active", entry.rate > 0 {
        text += "  ETA \(Int(Double(entry.size - entry.done) / entry.rate))s"
    } else if entry.state != "active" {
        text += "  \(entry.state)\(entry.error.map { ": \(printable($0))" } ?? "")\(entry.path.map { " \(printable($0))" } ?? "")"
    }
    if let resent = entry.resent, resent > 0 {
        text += " (resumed; \(Format.decimal(Double(resent) / 1e6, places: 1)) MB sent twice)"
    }
    return text
}

struct Transfers: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "File transfers: active ones and the last ones that ended.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let list = request(global, .transfers).transfers ?? []
        if json { return printJSON(list) }
        if list.isEmpty { return print("no transfers") }
        for entry in list { print("\(entry.id.prefix(8))  \(progressLine(entry))") }
    }
}

struct Cancel: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Cancel a file transfer (either direction).")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The transfer id (see `lanchat transfers`).") var id: String

    func run() throws {
        guard let entry = request(global, .cancel(id: id)).transfer else { fail("the daemon sent no transfer") }
        print("cancelled \(printable(entry.name)) (\(entry.direction) \(entry.peer))")
    }
}
