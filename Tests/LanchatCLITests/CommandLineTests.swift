import ArgumentParser
@testable import lanchat
import LanchatControl
import Testing

/// What each command line asks the daemon, and which command lines are refused before any call.
@Suite struct CommandLineTests {
    private func parse<C: ParsableCommand>(_ arguments: [String], as _: C.Type) throws -> C {
        let command = try LanchatCommand.parseAsRoot(LanchatCommand.hoistGlobalOptions(arguments))
        return try #require(command as? C, "parsed as \(type(of: command)), not \(C.self)")
    }

    @Test func inviteBecomesOneTypedCall() throws {
        let invite = try parse(["invite", "bob", "--room", "lab", "--message", "come in", "--timeout", "5", "--wait"], as: Invite.self)
        #expect(invite.call == .invite(ControlCall.Invite(peer: "bob", room: "lab", message: "come in", timeoutSeconds: 5, wait: true)))
        let plain = try parse(["invite", "bob"], as: Invite.self)
        #expect(plain.call == .invite(ControlCall.Invite(peer: "bob", room: nil, message: nil, timeoutSeconds: 60, wait: false)))
    }

    @Test func sendWithRecipientsAndUnreliable() throws {
        let send = try parse(["send", "--room", "lab", "--to", "bob", "--to", "carol", "--unreliable", "hello", "there"], as: Send.self)
        #expect(send.text == ["hello", "there"])
        #expect(send.call(text: "hello there") == .send(ControlCall.Send(text: "hello there", room: "lab", to: ["bob", "carol"], reliable: false)))
        let plain = try parse(["send", "hi"], as: Send.self)
        #expect(plain.call(text: "hi") == .send(ControlCall.Send(text: "hi", room: nil, to: nil, reliable: true)))
    }

    @Test(arguments: [
        ["send"],  // no text
        ["send", "--to", "bob,carol", "hi"],  // one peer per --to
        ["send-file", "photo.bin"],  // nobody to send to
        ["send-file", "--room", "lab"],  // no file
        ["history", "--limit", "0"],
        ["ping", "bob", "--count", "101"],
        ["stream", "bob"],  // PEER NAME
        ["stream", "--accept", "a", "b"],  // only NAME
        ["stream", "bob", "logs", "--from", "carol"],  // --from only with --accept
        ["invite"],  // no peer
        ["no-such-command"],
    ])
    func refusedBeforeAnyCall(arguments: [String]) {
        #expect(throws: (any Error).self) { try LanchatCommand.parseAsRoot(arguments) }
    }

    @Test func socketIsGlobalBeforeOrAfterTheSubcommand() throws {
        #expect(LanchatCommand.hoistGlobalOptions(["--socket", "/s", "peers", "--json"]) == ["peers", "--socket", "/s", "--json"])
        #expect(LanchatCommand.hoistGlobalOptions(["--socket=/s", "status"]) == ["status", "--socket=/s"])
        let before = try parse(["--socket", "/s", "peers", "--json"], as: Peers.self)
        let after = try parse(["peers", "--json", "--socket", "/s"], as: Peers.self)
        #expect(before.global.socket == "/s")
        #expect(after.global.socket == "/s")
        #expect(before.json && after.json)
    }

    @Test func noSubcommandIsInteractive() throws {
        let interactive = try parse([], as: Interactive.self)
        #expect(!interactive.lineMode)
        #expect(try parse(["--line"], as: Interactive.self).lineMode)
    }

    @Test func streamAndFileCommands() throws {
        let open = try parse(["stream", "bob", "logs"], as: StreamCommand.self)
        #expect(!open.accept && open.arguments == ["bob", "logs"])
        let accept = try parse(["stream", "--accept", "logs", "--json"], as: StreamCommand.self)
        #expect(accept.accept && accept.json && accept.arguments == ["logs"] && accept.from == nil)
        #expect(try parse(["stream", "--accept", "logs", "--from", "bob"], as: StreamCommand.self).call == .streamAccept(name: "logs", from: "bob"))
        #expect(accept.call == .streamAccept(name: "logs", from: nil))
        #expect(open.call == .stream(peer: "bob", name: "logs"))
        let sendFile = try parse(["send-file", "--to", "bob", "--to", "carol", "a.bin", "b.bin"], as: SendFile.self)
        #expect(sendFile.to == ["bob", "carol"] && sendFile.paths == ["a.bin", "b.bin"] && sendFile.room == nil)
        let history = try parse(["history", "--room", "lab", "--limit", "7"], as: History.self)
        #expect(history.room == "lab" && history.limit == 7)
        let connect = try parse(["connect", "10.0.0.2:5000", "--yes"], as: Connect.self)
        #expect(connect.address == "10.0.0.2:5000" && connect.yes)
    }
}

@Suite struct PathTests {
    @Test func relativePathsJoinTheWorkingDirectoryOnce() {
        #expect(absolutePath("photo.bin", in: "/") == "/photo.bin")
        #expect(absolutePath("photo.bin", in: "/root") == "/root/photo.bin")
        #expect(absolutePath("a/b.bin", in: "/root/") == "/root/a/b.bin")
        #expect(absolutePath("/etc/hosts", in: "/root") == "/etc/hosts")
    }
}
