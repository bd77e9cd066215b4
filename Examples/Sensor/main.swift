// A sensor and its subscriber on LanchatKit. `lanchatkit-sensor publish NAME`: advertises itself with the
// discovery info role=sensor, accepts every invitation, and publishes a reading on the topic "readings" of
// the group "sensors" four times a second. `lanchatkit-sensor subscribe`: invites every sensor it finds
// into "sensors" and prints each reading as it comes.
import Foundation
import LanchatKit

func say(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
}

let arguments = CommandLine.arguments
guard arguments.count >= 2, ["publish", "subscribe"].contains(arguments[1]) else {
    say("usage: lanchatkit-sensor publish NAME | lanchatkit-sensor subscribe")
    exit(2)
}
if arguments[1] == "publish" {
    let name = arguments.count > 2 ? arguments[2] : "sensor"
    let session = try await Session.start(identity: .ephemeral(displayName: name), group: "sensors")
    let advertiser = try Advertiser(session: session, discoveryInfo: ["role": "sensor", "unit": "C"])
    advertiser.start()
    Task {
        for await invitation in advertiser.invitations { try? await invitation.accept() }
    }
    say("\(name) publishing on sensors/readings")
    var count = 0
    while true {
        count += 1
        let reading = String(format: "%@ %.1f C n=%d", name, 20 + sin(Double(count) / 10), count)
        let sent = (try? await session.publish(reading, on: "readings")) ?? 0
        if count % 20 == 1 { say("\(reading) to \(sent)") }
        try await Task.sleep(for: .milliseconds(250))
    }
} else {
    let session = try await Session.start(identity: .ephemeral(displayName: "subscriber"), group: "sensors")
    let browser = Browser(session: session)
    browser.start()
    var subscribed = false
    for await case .found(let found) in browser.events where found.discoveryInfo["role"] == "sensor" {
        do {
            try await session.invite(found.peer)
            say("* \(found.peer.displayName) joined (unit \(found.discoveryInfo["unit"] ?? "?"))")
        } catch {
            say("! \(found.peer.displayName): \(error)")
            continue
        }
        guard !subscribed else { continue }
        subscribed = true  // (once in the group: a subscription is to a group's topic)
        let readings = try await session.subscribe(to: "readings")
        Task {
            for await reading in readings { say("\(reading.from.displayName) #\(reading.sequence): \(reading.text)") }
        }
    }
}
