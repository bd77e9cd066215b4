import ArgumentParser
import LanchatControl

/// Administration: the member who created a room administers it and may name others; an administrator
/// removes members and closes the room, each with a reason the others see.
struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove a member from a room (you must administer it): its daemon leaves the room and tells its person why.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The member: its name or an id prefix.") var peer: String
    @Option(help: "The room (default: the only room you are in).") var room: String?
    @Option(help: "Why (one line, at most 128 bytes), shown to the member and to the others.") var reason: String?
    @Flag(help: "Print the room's members after, as JSON.") var json = false

    func run() throws {
        guard let info = request(global, .remove(peer: peer, room: room, reason: reason)).room else { fail("the daemon sent no room") }
        if json { return printJSON(info) }
        print("removed \(printable(peer)) from \(info.room)\(reason.map { ": \(printable($0))" } ?? "")")
    }
}

struct Close: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Close a room for every member (you must administer it); each sees who closed it and why.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The room.") var room: String
    @Option(help: "Why (one line, at most 128 bytes).") var reason: String?

    func run() throws {
        _ = request(global, .close(room: room, reason: reason))
        print("closed \(room)")
    }
}

struct Admin: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a member an administrator of a room too (you must administer it); --revoke: no longer.",
        discussion: "The member who created a room always administers it; nobody can remove it or take that away.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The member: its name or an id prefix.") var peer: String
    @Option(help: "The room (default: the only room you are in).") var room: String?
    @Flag(help: "No longer an administrator.") var revoke = false
    @Flag(help: "Print the room's members after, as JSON.") var json = false

    func run() throws {
        guard let info = request(global, .admin(peer: peer, room: room, on: !revoke)).room else { fail("the daemon sent no room") }
        if json { return printJSON(info) }
        print("\(printable(peer)) \(revoke ? "no longer administers" : "administers") \(info.room)")
    }
}
