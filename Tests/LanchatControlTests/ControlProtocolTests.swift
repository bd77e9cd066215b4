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
        #expect(error.code == .badRequest)
    }

    @Test func invalidUTF8IsABadRequest() {
        guard case .failure(let error) = ControlJSON.decodeRequest([0x7b, 0xff, 0x7d]) else {
            Issue.record("accepted invalid UTF-8")
            return
        }
        #expect(error.message.contains("UTF-8"))
    }

    @Test func responsesUseSnakeCaseAndRoundTrip() throws {
        let peer = PeerInfo(
            name: "a", id: nil, shortId: "abc", instance: "a", host: "h.local", port: 1, addresses: [], interfaces: ["lan0"], state: "discovered", rooms: [],
            compatible: true, problem: nil, protocolVersion: 1, encryption: "required")
        let response = ControlResponse(id: 1, .peers([peer]))
        let line = ControlJSON.line(response)
        let text = String(decoding: line, as: UTF8.self)
        #expect(text.contains("\"short_id\":\"abc\""))
        #expect(text.contains("\"protocol_version\":1"))
        #expect(try ControlJSON.decoder().decode(ControlResponse.self, from: Data(line)) == response)
    }

    @Test func unknownMethodErrorListsTheKnownOnes() {
        let error = ControlError.unknownMethod(String(repeating: "x", count: 10_000))
        #expect(error.code == .unknownMethod)
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
            #expect(error.code == .daemonNotRunning)
            #expect(error.message.contains("not running"))
        }
        do {
            _ = try ControlClient(path: "/" + String(repeating: "x", count: 200))
        } catch {
            #expect(error.code == .badSocketPath)
        }
    }
}

/// Every method's parameters: built by a client, sent as the wire's strings, decoded by the daemon.
@Suite struct ControlCallTests {
    static let everyCall: [ControlCall] = [
        .status, .peers, .watch, .invitations, .rooms, .transfers,
        .ping(peer: "bob", count: 7),
        .invite(.init(peer: "bob", room: "lab", message: "hi", timeoutSeconds: 12.5, wait: true)),
        .invite(.init(peer: "bob")),
        .accept(id: "ab12"), .accept(id: "ab12", history: .init(limit: 0)), .accept(id: "ab12", history: .init(limit: 20, sinceMilliseconds: 1_795_000_000_000)),
        .accept(id: "ab12", history: .init(sinceMilliseconds: 5)), .decline(id: "ab12", reason: "busy"), .decline(id: "ab12", reason: nil),
        .members(room: nil), .members(room: "lab"), .leave(room: "lab"),
        .send(.init(text: "", room: nil, to: nil, reliable: true)),
        .send(.init(text: "hello\nthere", room: "lab", to: ["bob", "carol"], reliable: false)),
        .history(room: nil, limit: 50), .history(room: "lab", limit: 100_000),
        .search(.init(room: "lab", limit: 20, grep: "deploy \"failed\"", from: "bob", sinceMilliseconds: 1_795_000_000_000)),
        .search(.init(room: nil, limit: 50, grep: nil, from: "abcd", sinceMilliseconds: nil)),
        .forget(peer: "bob"),
        .trust(peer: "bob"),
        .sendFile(peer: "bob", path: "/tmp/a b.bin", fileToken: nil), .sendFile(peer: "bob", path: "/x", fileToken: "t0k"),
        .cancel(id: "ff"), .stream(peer: "bob", name: "logs"), .streamAccept(name: "logs", from: nil), .streamAccept(name: "logs", from: "bob"),
        .connect(address: "10.0.0.2:5000", confirm: nil), .connect(address: "h", confirm: String(repeating: "a", count: 52)),
        .disconnect(peer: "bob"),
        .presence(availability: "away", text: "lunch"), .presence(availability: nil, text: nil), .presence(availability: "busy", text: ""),
        .hand(up: true, room: "lab"), .hand(up: false, room: nil),
        .meta(.init(action: .list)), .meta(.init(action: .get, room: "lab", key: "topic")),
        .meta(.init(action: .set, room: "lab", key: "topic", value: "", ifVersion: 0)), .meta(.init(action: .set, key: "k", value: "a\nb")),
        .meta(.init(action: .delete, room: "lab", key: "topic", ifVersion: 3)), .typing(room: nil), .typing(room: "lab"),
        .topicPublish(.init(topic: "cursor", text: "")), .topicPublish(.init(room: "lab", topic: "t", text: "1,2", reliable: true)),
        .topicSubscribe(room: nil, topic: "cursor"), .topicSubscribe(room: "lab", topic: "t"),
        .remove(peer: "bob", room: "lab", reason: "spam"), .remove(peer: "bob", room: nil, reason: nil), .close(room: "lab", reason: "done"),
        .close(room: "lab", reason: nil), .admin(peer: "bob", room: "lab", on: true), .admin(peer: "bob", room: nil, on: false),
        .share(room: "lab", path: "/tmp/a b.png", fileToken: nil), .share(room: "lab", path: "/x", fileToken: "t1"),
        .files(room: nil, limit: 100), .files(room: "lab", limit: 5), .fetch(id: "abcd", to: nil), .fetch(id: "abcdef12", to: "/tmp/out"),
    ]

    @Test func everyMethodHasACallAndRoundTrips() throws {
        #expect(Set(Self.everyCall.map(\.method.rawValue)) == Set(ControlMethod.allCases.map(\.rawValue)))
        for call in Self.everyCall {
            let line = ControlJSON.line(call.request(id: 3))
            let request = try ControlJSON.decodeRequest(Array(line.dropLast())).get()
            #expect(try ControlCall(request) == call)
        }
    }

    @Test func presenceParametersAreChecked() {
        #expect(throws: ControlError.self) { try ControlCall(ControlRequest(id: 1, method: "presence", params: ["availability": "asleep"])) }
        #expect(throws: ControlError.self) { try ControlCall(ControlRequest(id: 1, method: "presence", params: ["text": String(repeating: "x", count: 129)])) }
        #expect(throws: ControlError.self) { try ControlCall(ControlRequest(id: 1, method: "hand", params: ["up": "maybe"])) }
        #expect(throws: ControlError.self) { try ControlCall(ControlRequest(id: 1, method: "meta", params: ["action": "drop"])) }
        #expect(throws: ControlError.self) { try ControlCall(ControlRequest(id: 1, method: "meta", params: ["action": "get"])) }
        #expect(throws: ControlError.self) { try ControlCall(ControlRequest(id: 1, method: "meta", params: ["action": "set", "key": "k"])) }
        #expect(throws: ControlError.self) {
            try ControlCall(ControlRequest(id: 1, method: "meta", params: ["action": "set", "key": "k", "value": "v", "if_version": "-1"]))
        }
    }

    @Test func defaultsWhenOptionalParametersAreAbsentOrEmpty() throws {
        #expect(try ControlCall(ControlRequest(id: 1, method: "ping", params: ["peer": "bob"])) == .ping(peer: "bob", count: 1))
        #expect(try ControlCall(ControlRequest(id: 1, method: "history", params: ["room": ""])) == .history(room: nil, limit: 50))
        #expect(
            try ControlCall(ControlRequest(id: 1, method: "invite", params: ["peer": "bob", "wait": "false"]))
                == .invite(.init(peer: "bob", room: nil, message: nil, timeoutSeconds: 60, wait: false)))
        // Comma-separated recipients, spaces and empty entries dropped.
        #expect(
            try ControlCall(ControlRequest(id: 1, method: "send", params: ["text": "x", "to": " bob , carol,,"]))
                == .send(.init(text: "x", to: ["bob", "carol"])))
    }

    @Test(arguments: [
        (ControlRequest(id: 1, method: "ping"), "bad_request", "ping needs params.peer"),
        (ControlRequest(id: 1, method: "ping", params: ["peer": "bob", "count": "0"]), "bad_request", "params.count must be 1-100"),
        (ControlRequest(id: 1, method: "ping", params: ["peer": "bob", "count": "many"]), "bad_request", "params.count must be 1-100"),
        (ControlRequest(id: 1, method: "invite", params: ["peer": "bob", "timeout": "0.5"]), "bad_request", "timeout must be 1-3600 seconds"),
        (ControlRequest(id: 1, method: "invite", params: ["peer": "bob", "wait": "yes"]), "bad_request", "params.wait must be"),
        (ControlRequest(id: 1, method: "invite", params: ["peer": "bob", "message": String(repeating: "é", count: 2049)]), "bad_request", "longer than 4096 bytes"),
        (ControlRequest(id: 1, method: "send", params: ["room": "lab"]), "bad_request", "send needs params.text"),
        (ControlRequest(id: 1, method: "send", params: ["text": "x", "reliable": "no"]), "bad_request", "params.reliable must be"),
        (ControlRequest(id: 1, method: "history", params: ["limit": "100001"]), "bad_request", "params.limit must be 1-100000"),
        (ControlRequest(id: 1, method: "send-file", params: ["peer": "bob", "path": "relative.bin"]), "bad_request", "an absolute path"),
        (ControlRequest(id: 1, method: "accept", params: ["id": ""]), "bad_request", "accept needs params.id"),
        (ControlRequest(id: 1, method: "connect"), "bad_request", "connect needs params.address"),
        (ControlRequest(id: 1, method: "stream-accept"), "bad_request", "stream-accept needs params.name"),
        (ControlRequest(id: 1, method: "drop-tables"), "unknown_method", "unknown method 'drop-tables'"),
    ])
    func refusedWithAReason(request: ControlRequest, code: String, message: String) {
        do throws(ControlError) {
            let call = try ControlCall(request)
            Issue.record("decoded as \(call)")
        } catch {
            #expect(error.code.rawValue == code)
            #expect(error.message.contains(message), "\(error.message)")
        }
    }
}
