// A file drop on LanchatKit. `lanchatkit-drop send FILE`: invites every peer it finds into the group
// "drop", with the file's name and size as the invitation's context, and sends the file to each peer that
// accepts (progress, then the end: the receiver checked its SHA-256). `lanchatkit-drop receive DIR`:
// advertises, accepts every invitation, and prints where each file it receives was placed in DIR.
import Foundation
import LanchatKit

func say(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
}

let arguments = CommandLine.arguments
guard arguments.count == 3, ["send", "receive"].contains(arguments[1]) else {
    say("usage: lanchatkit-drop send FILE | lanchatkit-drop receive DIR")
    exit(2)
}
let name = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "drop"
if arguments[1] == "receive" {
    let session = try await Session.start(identity: .ephemeral(displayName: name), group: "drop", downloadDirectory: arguments[2])
    let advertiser = try Advertiser(session: session, discoveryInfo: ["drop": "receive"])
    advertiser.start()
    say("receiving into \(arguments[2]) as \(name)")
    Task {
        for await invitation in advertiser.invitations {
            say("* \(invitation.from.displayName) offers \(invitation.text ?? "a file") (code \(invitation.shortCode)): accepting")
            try? await invitation.accept()
        }
    }
    for await transfer in session.transfers where transfer.direction == .incoming && transfer.state.ended {
        say("\(transfer.state.rawValue) \(transfer.name) from \(transfer.peer.displayName): \(transfer.path ?? transfer.error ?? "")")
    }
} else {
    let path = arguments[2]
    let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    let session = try await Session.start(identity: .ephemeral(displayName: name), group: "drop")
    let browser = Browser(session: session)
    browser.start()
    say("offering \(path) (\(size) bytes) to every peer found")
    await withTaskGroup(of: Void.self) { group in
        var offered: Set<Peer> = []
        for await case .found(let found) in browser.events where offered.insert(found.peer).inserted {
            group.addTask {
                do {
                    try await session.invite(found.peer, context: Array("\(URL(fileURLWithPath: path).lastPathComponent) (\(size) bytes)".utf8))
                    let resource = try await session.sendResource(at: path, to: found.peer)
                    say("sending to \(found.peer.displayName)")
                    let done = try await resource.finished()
                    say("delivered \(done.name) to \(found.peer.displayName): \(done.size) bytes, SHA-256 checked")
                } catch {
                    say("\(found.peer.displayName): \(error)")
                }
            }
        }
    }
}
