// A terminal chat on LanchatKit: `lanchatkit-chat NAME [GROUP]`. It advertises itself, lists the peers it
// finds, accepts every invitation (printing the code to compare), and sends each line typed; `/invite NAME`
// invites a found peer into GROUP, `/peers` lists the connected ones. It talks with lanchatd as with itself.
import Foundation
import LanchatKit

/// Prints a line now, even into a pipe (a write of its own: stdio's buffer would wait, and `fflush(NULL)`
/// would wait for standard input's lock, which the reading thread holds).
func say(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
}

let arguments = CommandLine.arguments
let name = arguments.count > 1 ? arguments[1] : "chat"
let session = try await Session.start(identity: .ephemeral(displayName: name), group: arguments.count > 2 ? arguments[2] : "lab")
let advertiser = try Advertiser(session: session, discoveryInfo: ["app": "terminal-chat"])
let browser = Browser(session: session)
advertiser.start()
browser.start()
say("\(name) (\(session.identity.shortID)) in \(session.group) on port \(session.port): /invite NAME, /peers, or a message")

Task {
    for await event in browser.events {
        switch event {
        case .found(let found): say("* found \(found.peer.displayName) \(found.discoveryInfo)")
        case .lost(let peer): say("* lost \(peer.displayName)")
        }
    }
}
Task {
    for await invitation in advertiser.invitations {
        say("* \(invitation.from.displayName) invites you to \(invitation.group) (code \(invitation.shortCode)): accepting")
        do { try await invitation.accept() } catch { say("! \(error)") }
    }
}
Task { for await change in session.peerChanges { say("* \(change.peer.displayName) \(change.state.rawValue) in \(change.group)") } }
Task { for await message in session.messages { say("[\(message.group)] \(message.from.displayName): \(message.text)") } }

// Standard input's lines, read by a thread of their own: the main actor stays free for the tasks above.
let input = AsyncStream<String> { lines in
    Thread.detachNewThread {
        while let line = readLine() { lines.yield(line) }
        lines.finish()
    }
}
for await line in input {
    do {
        if line.hasPrefix("/invite ") {
            let wanted = String(line.dropFirst(8))
            guard let found = await browser.peers.first(where: { $0.peer.displayName == wanted }) else {
                say("! no peer named \(wanted) found yet")
                continue
            }
            try await session.invite(found.peer, context: Array("join \(session.group)".utf8))
            say("* \(wanted) accepted")
        } else if line == "/peers" {
            say("* connected: \(await session.connectedPeers.map(\.displayName).sorted().joined(separator: ", "))")
        } else if !line.isEmpty {
            let report = try await session.send(line)
            say("* sent to \(report.sentNow) of \(report.recipients)")
        }
    } catch {
        say("! \(error)")
    }
}
await advertiser.stop()
await session.close()
