import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import LanchatControl

struct TopicCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "topic",
        abstract: "Topics: named channels in a room for small, frequent messages, sent only to the members subscribed to them.",
        discussion: """
            A topic's name is 1-64 of A-Z a-z 0-9 . _ -. A message is one line of text of at most 1024 bytes. Each member may \
            publish at most 500 messages a second in a room (bursts of 500); more are refused (rate_limited). Messages are \
            live data: not stored, not sent again after a broken connection, not for members who are not subscribed. \
            Unreliable (the default): dropped for a subscriber whose connection is full. --reliable: always written.
            """,
        subcommands: [TopicPub.self, TopicSub.self])
}

struct TopicPub: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pub", abstract: "Publish each line of standard input on a topic (one message per line).")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The room.") var room: String
    @Argument(help: "The topic.") var topic: String
    @Flag(help: "Never drop a message for a subscriber whose connection is full (the default drops it for that one).") var reliable = false
    @Flag(help: "Print what each line did (sequence, subscribers written to, dropped) as one JSON object per line.") var json = false

    func run() throws {
        let client = try global.connect()
        var published = 0
        var refused = 0
        while let raw = readLine(strippingNewline: true) {
            let line = raw.hasSuffix("\r") ? String(raw.dropLast()) : raw
            let request = ControlCall.topicPublish(.init(room: room, topic: topic, text: line, reliable: reliable))
            let response: ControlResponse
            do {
                // (A connection the daemon closed for being idle is opened again by `call`.)
                response = try client.call(request)
            } catch  where [.rateLimited, .tooLong, .badText].contains(error.code) {
                refused += 1
                StandardStream.error.write(Data("lanchat: line \(published + refused) refused: \(error.message)\n".utf8))
                continue
            } catch {
                fail(error.message)
            }
            published += 1
            if json, let info = response.topic { StandardStream.output.write(Data(ControlJSON.line(info))) }
        }
        if refused > 0 { fail("\(refused) of \(published + refused) lines refused") }
    }
}

struct TopicSub: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sub", abstract: "Print each message on a topic as it arrives (its text, one per line), until interrupted.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The room.") var room: String
    @Argument(help: "The topic.") var topic: String
    @Flag(help: "Print one JSON object per message (room, topic, sequence, from, from_id, text, reliable).") var json = false

    func run() throws {
        let client = try global.connect()
        _ = call(client, .topicSubscribe(room: room, topic: topic))
        client.setTimeout(seconds: 0)
        while true {
            let line: [UInt8]?
            do { line = try client.readLine() } catch { fail(error.message) }
            guard let line else { fail("lanchatd closed the connection (it stopped, or you left the room?)") }
            guard let response = try? ControlJSON.decoder().decode(ControlResponse.self, from: Data(line)), let info = response.event?.topic else {
                continue
            }
            // One write per message, unbuffered, so a pipe sees each at once.
            let text = json ? String(decoding: ControlJSON.line(info), as: UTF8.self) : printable(info.text ?? "") + "\n"
            StandardStream.output.write(Data(text.utf8))
        }
    }
}
