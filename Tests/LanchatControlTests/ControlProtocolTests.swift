import Foundation
@testable import LanchatControl
import Testing

@Suite struct LineFramerTests {
    @Test func splitsLinesFedOneByteAtATime() throws {
        var framer = LineFramer(maximumLineLength: 100)
        var lines: [String] = []
        for byte in Array("one\ntwo\n\nthree".utf8) {
            framer.append([byte])
            while let line = try framer.nextLine() { lines.append(String(decoding: line, as: UTF8.self)) }
        }
        #expect(lines == ["one", "two", ""])
        #expect(framer.pendingByteCount == 5)
    }

    @Test func refusesAnOverlongLineBeforeItEnds() {
        var framer = LineFramer(maximumLineLength: 8)
        framer.append(Array(repeating: UInt8(ascii: "x"), count: 9))
        #expect(throws: LineFramer.FramingError.lineTooLong(limit: 8)) { try framer.nextLine() }
    }

    @Test func acceptsALineOfExactlyTheLimit() throws {
        var framer = LineFramer(maximumLineLength: 8)
        framer.append(Array(repeating: UInt8(ascii: "x"), count: 8) + [10])
        #expect(try framer.nextLine()?.count == 8)
    }
}

@Suite struct ControlJSONTests {
    @Test func requestRoundTrips() throws {
        let request = ControlRequest(id: 7, method: "peers", params: ["room": "lab"])
        let line = ControlJSON.line(request)
        #expect(line.last == 10)
        #expect(try ControlJSON.decodeRequest(Array(line.dropLast())).get() == request)
    }

    @Test(arguments: [
        "", "{", "[]", "null", "{\"id\":\"1\",\"method\":\"peers\"}", "{\"method\":\"peers\"}",
        "{\"id\":1}", "{\"id\":1.5,\"method\":\"x\"}", "{\"id\":1,\"method\":5}",
        "{\"id\":99999999999999999999999,\"method\":\"peers\"}",
    ])
    func malformedRequestsAreBadRequests(text: String) {
        guard case .failure(let error) = ControlJSON.decodeRequest(Array(text.utf8)) else {
            Issue.record("accepted \(text)")
            return
        }
        #expect(error.code == "bad_request")
    }

    @Test func invalidUTF8IsABadRequest() {
        guard case .failure(let error) = ControlJSON.decodeRequest([0x7b, 0xff, 0x7d]) else {
            Issue.record("accepted invalid UTF-8")
            return
        }
        #expect(error.message.contains("UTF-8"))
    }

    @Test func responsesUseSnakeCaseAndRoundTrip() throws {
        let peer = PeerInfo(name: "a", id: nil, shortId: "abc", instance: "a", host: "h.local", port: 1, addresses: [], interfaces: ["lan0"], state: "discovered", rooms: [], compatible: true, problem: nil, protocolVersion: 1, encryption: "required")
        let response = ControlResponse(id: 1, peers: [peer])
        let line = ControlJSON.line(response)
        let text = String(decoding: line, as: UTF8.self)
        #expect(text.contains("\"short_id\":\"abc\""))
        #expect(text.contains("\"protocol_version\":1"))
        #expect(try ControlJSON.decoder().decode(ControlResponse.self, from: Data(line)) == response)
    }

    @Test func unknownMethodErrorListsTheKnownOnes() {
        let error = ControlError.unknownMethod(String(repeating: "x", count: 10_000))
        #expect(error.code == "unknown_method")
        #expect(error.message.count < 400)
        #expect(error.message.contains("peers"))
    }
}

@Suite struct ControlSocketPathTests {
    @Test func choosesExplicitThenEnvironment() {
        #expect(ControlSocketPath.clientDefault(explicit: "/x.sock", environment: ["LANCHAT_SOCKET": "/y.sock"]) == "/x.sock")
        #expect(ControlSocketPath.clientDefault(explicit: nil, environment: ["LANCHAT_SOCKET": "/y.sock"]) == "/y.sock")
        #expect(ControlSocketPath.daemonDefault(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"]) == "/run/user/1000/lanchat/lanchatd.sock")
        #expect(ControlSocketPath.daemonDefault(environment: [:]) == "/run/lanchat/lanchatd.sock")
    }

    @Test func clientErrorsSayWhatToDo() {
        #expect(throws: ControlError.self) { try ControlClient(path: "/nonexistent/lanchat.sock") }
        do {
            _ = try ControlClient(path: "/nonexistent/lanchat.sock")
        } catch {
            #expect(error.code == "daemon_not_running")
            #expect(error.message.contains("not running"))
        }
        do {
            _ = try ControlClient(path: "/" + String(repeating: "x", count: 200))
        } catch {
            #expect(error.code == "bad_socket_path")
        }
    }
}
