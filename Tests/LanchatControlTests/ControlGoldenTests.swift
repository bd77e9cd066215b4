import Foundation
import LanchatControl
import Testing

/// The control API's JSON, pinned: every response payload and every event type encodes to exactly these
/// lines (written with the types before `ControlResponse` and `ControlEvent` became enums), and decodes
/// back to the same value.
@Suite struct ControlGoldenTests {
    typealias S = ControlGoldenSamples

    static func event(_ kind: ControlEvent.Kind) -> ControlResponse { .event(ControlEvent(time: S.time, kind)) }

    static let samples: [(name: String, value: ControlResponse)] = [
        ("ok", ControlResponse(id: 1)),
        ("failure", .failure(id: 7, ControlError(code: .notAMember, message: "bob is not a member of lab"))),
        ("failure-no-id", .failure(id: nil, ControlError(code: .idle, message: "closing this connection"))),
        ("status", ControlResponse(id: 1, .status(S.status))),
        ("peers", ControlResponse(id: 1, .peers([S.peer, S.incompatiblePeer]))),
        ("peers-empty", ControlResponse(id: 1, .peers([]))),
        ("ping", ControlResponse(id: 1, .ping(S.ping))),
        ("invite", ControlResponse(id: 1, .invite(S.invite))),
        ("invitation", ControlResponse(id: 1, .invitation(S.closedInvitation))),
        ("invitations", ControlResponse(id: 1, .invitations([S.invitation]))),
        ("rooms", ControlResponse(id: 1, .rooms([S.room]))),
        ("room", ControlResponse(id: 1, .room(S.room))),
        ("sent", ControlResponse(id: 1, .sent(S.sent))),
        ("history", ControlResponse(id: 1, .history([S.message, S.fileMessage]))),
        ("forgotten", ControlResponse(id: 1, .forgotten("bob@lab"))),
        ("trusted", ControlResponse(id: 1, .trusted(S.member))),
        ("transfer", ControlResponse(id: 1, .transfer(S.transfer))),
        ("transfers", ControlResponse(id: 1, .transfers([S.transfer, S.activeTransfer]))),
        ("stream", ControlResponse(id: 1, .stream(S.stream))),
        ("connect", ControlResponse(id: 1, .connect(S.connect))),
        ("presence", ControlResponse(id: 1, .presence(S.presence))),
        ("meta", ControlResponse(id: 1, .meta([S.meta, S.deletedMeta]))),
        ("topic", ControlResponse(id: 1, .topic(S.publishedTopic))),
        ("files", ControlResponse(id: 1, .files([S.sharedFile]))),
        ("event-found", event(.found(S.peer))),
        ("event-changed", event(.changed(S.incompatiblePeer))),
        ("event-lost", event(.lost(S.peer))),
        ("event-advertising", event(.advertising(state: "registered", instance: "alice@lab #2"))),
        ("event-advertising-no-instance", event(.advertising(state: "avahi_unavailable", instance: nil))),
        ("event-invitation", event(.invitation(S.invitation))),
        ("event-invitation_closed", event(.invitationClosed(S.closedInvitation))),
        ("event-invite_outcome", event(.inviteOutcome(S.invite))),
        ("event-member", event(.member(S.memberEvent))),
        ("event-message", event(.message(S.fileMessage))),
        ("event-transfer", event(.transfer(S.activeTransfer))),
        ("event-presence", event(.presence(S.presence))),
        ("event-typing", event(.typing(room: "lab", name: "bob@lab", id: S.bobID))),
        ("event-meta", event(.meta(S.deletedMeta))),
        ("event-left", event(.left(S.leftEvent))),
        ("event-security", event(.security(text: "bob@lab's key changed", name: "bob@lab"))),
        ("event-topic", event(.topic(S.receivedTopic))),
    ]

    static let golden: [String: String] = [
        "ok":
            ##"{"id":1,"ok":true}"##,
        "failure":
            ##"{"error":{"code":"not_a_member","message":"bob is not a member of lab"},"id":7,"ok":false}"##,
        "failure-no-id":
            ##"{"error":{"code":"idle","message":"closing this connection"},"ok":false}"##,
        "status":
            ##"{"id":1,"ok":true,"status":{"advertisement_visible":true,"advertising":"registered","download_directory":"/home/alice/Downloads","download_free_bytes":1000000,"download_problem":"not writable","encryption":"required","id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","instance":"alice@lab #2","name":"alice@lab","peers":3,"pid":4242,"port":7470,"protocol_version":2,"short_id":"aaaaaaaaaaaa","started_at":"2026-11-27T04:40:00.123Z","version":"0.9.0"}}"##,
        "peers":
            ##"{"id":1,"ok":true,"peers":[{"addresses":["192.168.1.20","fe80::1%eth0"],"availability":"away","compatible":true,"dialed_us":true,"encryption":"required","host":"lab.local.","id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","instance":"bob@lab","interfaces":["eth0"],"name":"bob@lab","origin":"connected","port":7470,"protocol_version":2,"rooms":["lab"],"short_id":"bbbbbbbbbbbb","state":"connected","status_text":"lunch / back at 2"},{"addresses":[],"compatible":false,"host":"printer.local.","instance":"printer","interfaces":["eth0"],"name":"printer","port":9,"problem":"no \"id\" in the TXT record","rooms":[],"state":"discovered"}]}"##,
        "peers-empty":
            ##"{"id":1,"ok":true,"peers":[]}"##,
        "ping":
            ##"{"id":1,"ok":true,"ping":{"address":"192.168.1.20","encrypted":true,"handshake_ms":3.25,"id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","name":"bob@lab","port":7470,"protocol_version":2,"rtt_ms":[0.5,1,12.125],"short_code":"4821-0937"}}"##,
        "invite":
            ##"{"id":1,"invite":{"elapsed_ms":1500.5,"id":"1c0ffee0000000000000000000000001","outcome":"declined","peer":"bob@lab","peer_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","reason":"busy","room":"lab"},"ok":true}"##,
        "invitation":
            ##"{"id":1,"invitation":{"expires_at":"2026-11-27T04:45:00.000Z","from":"alice@lab","from_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","id":"0123456789abcdef0123456789abcdef","message":"join us","outcome":"accepted (history 12 messages)","received_at":"2026-11-27T04:40:00.123Z","room":"lab","short_code":"4821-0937"},"ok":true}"##,
        "invitations":
            ##"{"id":1,"invitations":[{"expires_at":"2026-11-27T04:45:00.000Z","from":"alice@lab","from_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","id":"0123456789abcdef0123456789abcdef","message":"join us","received_at":"2026-11-27T04:40:00.123Z","room":"lab","short_code":"4821-0937"}],"ok":true}"##,
        "rooms":
            ##"{"id":1,"ok":true,"rooms":[{"administered":true,"members":[{"admin":false,"availability":"busy","hand":true,"id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","name":"bob@lab","short_id":"bbbbbbbbbbbb","state":"connected","status_text":"in a call"},{"id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","name":"alice@lab","short_id":"aaaaaaaaaaaa","state":"known"}],"room":"lab"}]}"##,
        "room":
            ##"{"id":1,"ok":true,"room":{"administered":true,"members":[{"admin":false,"availability":"busy","hand":true,"id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","name":"bob@lab","short_id":"bbbbbbbbbbbb","state":"connected","status_text":"in a call"},{"id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","name":"alice@lab","short_id":"aaaaaaaaaaaa","state":"known"}],"room":"lab"}}"##,
        "sent":
            ##"{"id":1,"ok":true,"sent":{"dropped":1,"id":"m3","recipients":3,"reliable":true,"room":"lab","sent_now":2}}"##,
        "history":
            ##"{"history":[{"id":"m1","kind":"text","room":"lab","sender":"bob@lab","sender_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","sequence":7,"signed":true,"text":"hello \"world\" é / \\ 😀\nsecond line","time":"2026-11-27T04:40:00.123Z","timestamp_ms":1795000000123},{"file":{"from":"alice@lab","from_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","held":true,"id":"0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f","image":false,"name":"notes.pdf","room":"lab","sha256":"0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f","size":123456,"time":"2026-11-27T04:40:00.123Z","timestamp_ms":1795000000000,"type":"application/pdf"},"id":"m2","kind":"file","outgoing":true,"reliable":true,"room":"lab","sender":"alice@lab","sender_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","sequence":8,"signed":true,"text":"shared notes.pdf","time":"2026-11-27T04:40:00.123Z","timestamp_ms":1795000000200}],"id":1,"ok":true}"##,
        "forgotten":
            ##"{"forgotten":"bob@lab","id":1,"ok":true}"##,
        "trusted":
            ##"{"id":1,"ok":true,"trusted":{"admin":false,"availability":"busy","hand":true,"id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","name":"bob@lab","short_id":"bbbbbbbbbbbb","state":"connected","status_text":"in a call"}}"##,
        "transfer":
            ##"{"id":1,"ok":true,"transfer":{"direction":"incoming","done":1048576,"error":"disk full","id":"71000000000000000000000000000001","name":"big.iso","path":"/home/alice/Downloads/big.iso","peer":"bob@lab","peer_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","rate":1048576.5,"resent":4096,"size":1073741824,"state":"failed"}}"##,
        "transfers":
            ##"{"id":1,"ok":true,"transfers":[{"direction":"incoming","done":1048576,"error":"disk full","id":"71000000000000000000000000000001","name":"big.iso","path":"/home/alice/Downloads/big.iso","peer":"bob@lab","peer_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","rate":1048576.5,"resent":4096,"size":1073741824,"state":"failed"},{"direction":"outgoing","done":0,"id":"72000000000000000000000000000002","name":"a.txt","peer":"bob@lab","peer_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","rate":0,"size":10,"state":"offered"}]}"##,
        "stream":
            ##"{"id":1,"ok":true,"stream":{"id":"s1","name":"backup","peer":"bob@lab","peer_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}}"##,
        "connect":
            ##"{"connect":{"address":"lab.example.org:7470","encrypted":true,"id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","ip":"203.0.113.5","name":"bob@lab","port":7470,"saved":false,"short_code":"4821-0937","short_id":"bbbbbbbbbbbb"},"id":1,"ok":true}"##,
        "presence":
            ##"{"id":1,"ok":true,"presence":{"availability":"away","hands":["lab"],"id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","name":"bob@lab","short_id":"bbbbbbbbbbbb","text":"lunch"}}"##,
        "meta":
            ##"{"id":1,"meta":[{"author":"alice@lab","author_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","deleted":false,"key":"topic","room":"lab","time":"2026-11-27T04:40:00.123Z","time_ms":1795000000000,"value":"Q4 planning","version":3},{"author":"bob@lab","author_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","deleted":true,"key":"old","room":"lab","time":"2026-11-27T04:40:00.123Z","time_ms":1795000000001,"version":9}],"ok":true}"##,
        "topic":
            ##"{"id":1,"ok":true,"topic":{"dropped":0,"room":"lab","sent":3,"sequence":41,"topic":"sensors.temp"}}"##,
        "files":
            ##"{"files":[{"from":"alice@lab","from_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","held":true,"id":"0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f","image":false,"name":"notes.pdf","room":"lab","sha256":"0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f","size":123456,"time":"2026-11-27T04:40:00.123Z","timestamp_ms":1795000000000,"type":"application/pdf"}],"id":1,"ok":true}"##,
        "event-found":
            ##"{"event":{"peer":{"addresses":["192.168.1.20","fe80::1%eth0"],"availability":"away","compatible":true,"dialed_us":true,"encryption":"required","host":"lab.local.","id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","instance":"bob@lab","interfaces":["eth0"],"name":"bob@lab","origin":"connected","port":7470,"protocol_version":2,"rooms":["lab"],"short_id":"bbbbbbbbbbbb","state":"connected","status_text":"lunch / back at 2"},"time":"2026-11-27T04:40:00.123Z","type":"found"},"ok":true}"##,
        "event-changed":
            ##"{"event":{"peer":{"addresses":[],"compatible":false,"host":"printer.local.","instance":"printer","interfaces":["eth0"],"name":"printer","port":9,"problem":"no \"id\" in the TXT record","rooms":[],"state":"discovered"},"time":"2026-11-27T04:40:00.123Z","type":"changed"},"ok":true}"##,
        "event-lost":
            ##"{"event":{"peer":{"addresses":["192.168.1.20","fe80::1%eth0"],"availability":"away","compatible":true,"dialed_us":true,"encryption":"required","host":"lab.local.","id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","instance":"bob@lab","interfaces":["eth0"],"name":"bob@lab","origin":"connected","port":7470,"protocol_version":2,"rooms":["lab"],"short_id":"bbbbbbbbbbbb","state":"connected","status_text":"lunch / back at 2"},"time":"2026-11-27T04:40:00.123Z","type":"lost"},"ok":true}"##,
        "event-advertising":
            ##"{"event":{"advertising":"registered","instance":"alice@lab #2","time":"2026-11-27T04:40:00.123Z","type":"advertising"},"ok":true}"##,
        "event-advertising-no-instance":
            ##"{"event":{"advertising":"avahi_unavailable","time":"2026-11-27T04:40:00.123Z","type":"advertising"},"ok":true}"##,
        "event-invitation":
            ##"{"event":{"invitation":{"expires_at":"2026-11-27T04:45:00.000Z","from":"alice@lab","from_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","id":"0123456789abcdef0123456789abcdef","message":"join us","received_at":"2026-11-27T04:40:00.123Z","room":"lab","short_code":"4821-0937"},"time":"2026-11-27T04:40:00.123Z","type":"invitation"},"ok":true}"##,
        "event-invitation_closed":
            ##"{"event":{"invitation":{"expires_at":"2026-11-27T04:45:00.000Z","from":"alice@lab","from_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","id":"0123456789abcdef0123456789abcdef","message":"join us","outcome":"accepted (history 12 messages)","received_at":"2026-11-27T04:40:00.123Z","room":"lab","short_code":"4821-0937"},"time":"2026-11-27T04:40:00.123Z","type":"invitation_closed"},"ok":true}"##,
        "event-invite_outcome":
            ##"{"event":{"invite":{"elapsed_ms":1500.5,"id":"1c0ffee0000000000000000000000001","outcome":"declined","peer":"bob@lab","peer_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","reason":"busy","room":"lab"},"time":"2026-11-27T04:40:00.123Z","type":"invite_outcome"},"ok":true}"##,
        "event-member":
            ##"{"event":{"member":{"id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","name":"bob@lab","room":"lab","state":"not_connected"},"time":"2026-11-27T04:40:00.123Z","type":"member"},"ok":true}"##,
        "event-message":
            ##"{"event":{"message":{"file":{"from":"alice@lab","from_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","held":true,"id":"0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f","image":false,"name":"notes.pdf","room":"lab","sha256":"0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f","size":123456,"time":"2026-11-27T04:40:00.123Z","timestamp_ms":1795000000000,"type":"application/pdf"},"id":"m2","kind":"file","outgoing":true,"reliable":true,"room":"lab","sender":"alice@lab","sender_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","sequence":8,"signed":true,"text":"shared notes.pdf","time":"2026-11-27T04:40:00.123Z","timestamp_ms":1795000000200},"time":"2026-11-27T04:40:00.123Z","type":"message"},"ok":true}"##,
        "event-transfer":
            ##"{"event":{"time":"2026-11-27T04:40:00.123Z","transfer":{"direction":"outgoing","done":0,"id":"72000000000000000000000000000002","name":"a.txt","peer":"bob@lab","peer_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","rate":0,"size":10,"state":"offered"},"type":"transfer"},"ok":true}"##,
        "event-presence":
            ##"{"event":{"presence":{"availability":"away","hands":["lab"],"id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","name":"bob@lab","short_id":"bbbbbbbbbbbb","text":"lunch"},"time":"2026-11-27T04:40:00.123Z","type":"presence"},"ok":true}"##,
        "event-typing":
            ##"{"event":{"member":{"id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","name":"bob@lab","room":"lab","state":"typing"},"time":"2026-11-27T04:40:00.123Z","type":"typing"},"ok":true}"##,
        "event-meta":
            ##"{"event":{"meta":{"author":"bob@lab","author_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","deleted":true,"key":"old","room":"lab","time":"2026-11-27T04:40:00.123Z","time_ms":1795000000001,"version":9},"time":"2026-11-27T04:40:00.123Z","type":"meta"},"ok":true}"##,
        "event-left":
            ##"{"event":{"member":{"code":"removed","fatal":true,"id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","name":"bob@lab","reason":"bob@lab was removed by alice@lab: spam","room":"lab","state":"left"},"time":"2026-11-27T04:40:00.123Z","type":"left"},"ok":true}"##,
        "event-security":
            ##"{"event":{"name":"bob@lab","text":"bob@lab's key changed","time":"2026-11-27T04:40:00.123Z","type":"security"},"ok":true}"##,
        "event-topic":
            ##"{"event":{"time":"2026-11-27T04:40:00.123Z","topic":{"from":"bob@lab","from_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","reliable":false,"room":"lab","sequence":42,"text":"21.5","topic":"sensors.temp"},"type":"topic"},"ok":true}"##,
    ]

    @Test func everySampleIsPinned() {
        #expect(Set(Self.samples.map(\.name)) == Set(Self.golden.keys))
        #expect(Set(Self.samples.map(\.name)).count == Self.samples.count)
    }

    @Test(arguments: samples.map(\.name))
    func encodesToThePinnedLine(name: String) throws {
        let value = try #require(Self.samples.first { $0.name == name }).value
        let line = ControlJSON.line(value)
        #expect(line.last == 10)
        #expect(String(decoding: line.dropLast(), as: UTF8.self) == Self.golden[name])
    }

    @Test(arguments: samples.map(\.name))
    func decodesThePinnedLineBack(name: String) throws {
        let value = try #require(Self.samples.first { $0.name == name }).value
        let text = try #require(Self.golden[name])
        #expect(try ControlJSON.decoder().decode(ControlResponse.self, from: Data(text.utf8)) == value)
    }

    @Test func anUnknownEventTypeDecodesAsOtherWithItsNameOnly() throws {
        let line = #"{"event":{"type":"quorum","time":"2026-11-27T04:40:00.123Z","peer":{"name":"x"},"votes":3},"ok":true}"#
        let response = try ControlJSON.decoder().decode(ControlResponse.self, from: Data(line.utf8))
        let event = try #require(response.event)
        guard case .other(let unknown) = event.kind else {
            Issue.record("decoded as \(event.kind)")
            return
        }
        #expect(unknown.type == "quorum" && event.type == "quorum" && event.time == S.time)
        #expect(event.peer == nil)
        #expect(String(decoding: ControlJSON.line(event).dropLast(), as: UTF8.self) == #"{"time":"2026-11-27T04:40:00.123Z","type":"quorum"}"#)
    }

    @Test(arguments: [
        #"{"type":"found","time":"t"}"#, #"{"type":"security","time":"t","text":"x"}"#,
        #"{"type":"advertising","time":"t","instance":"a"}"#, #"{"type":"typing","time":"t"}"#, #"{"time":"t","peer":null}"#,
    ])
    func aKnownEventTypeWithoutItsPayloadDoesNotDecode(line: String) {
        #expect(throws: DecodingError.self) { try ControlJSON.decoder().decode(ControlEvent.self, from: Data(line.utf8)) }
    }

    @Test func aResponseWithoutAKnownPayloadKeyIsABareOk() throws {
        let line = #"{"id":3,"ok":true,"quorum":{"votes":3},"status":null}"#
        let response = try ControlJSON.decoder().decode(ControlResponse.self, from: Data(line.utf8))
        #expect(response == ControlResponse(id: 3))
        #expect(response.payload == .none && response.status == nil)
    }

    @Test func aFailureWithoutAnErrorStillDecodes() throws {
        // The client turns it into a `failed` error (ControlClient.call).
        let response = try ControlJSON.decoder().decode(ControlResponse.self, from: Data(#"{"id":3,"ok":false}"#.utf8))
        #expect(!response.ok && response.error == nil && response.payload == .none)
    }

    @Test func typingCarriesTheMemberAsOnTheWire() {
        let event = ControlEvent(time: S.time, .typing(room: "lab", name: "bob@lab", id: S.bobID))
        #expect(event.member == MemberEvent(room: "lab", name: "bob@lab", id: S.bobID, state: "typing"))
    }
}
