import Foundation
import LanchatControl
import LanchatCore
@testable import LanchatDaemon
@testable import LanchatEngine
import Testing

/// The session's events carry typed ids, states and codes; `SessionService.controlEvent` alone turns them
/// into the control API's strings, and the JSON is what it was when the events carried those strings.
@Suite struct SessionEventMappingTests {
    static let bob = SessionPeer(id: PeerID(String(repeating: "b", count: 52))!, name: "bob@lab")
    static let lab = RoomID("lab")!
    static let time = "2026-11-27T04:40:00.123Z"

    func line(_ event: SessionEvent) -> String? {
        SessionService.controlEvent(event).map { String(decoding: ControlJSON.line(ControlResponse.event(ControlEvent(time: Self.time, $0))), as: UTF8.self) }
    }

    @Test func aMemberLeftEventSaysItsCode() {
        let event = SessionEvent.memberLeft(room: Self.lab, peer: Self.bob, code: .removed, text: "bob@lab was removed by alice@lab: spam", fatal: true)
        #expect(
            line(event)
                == ##"{"event":{"member":{"code":"removed","fatal":true,"id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","name":"bob@lab","reason":"bob@lab was removed by alice@lab: spam","room":"lab","state":"left"},"time":"2026-11-27T04:40:00.123Z","type":"left"},"ok":true}"##
                + "\n")
    }

    /// Every code, as the control API's schema lists them (`docs/control-api.schema.json`, `code`).
    @Test func everyMemberLeftCodeIsItsWireString() {
        #expect(
            MemberLeftCode.allCases.map(\.rawValue) == [
                "left", "removed", "closed", "not_a_member", "timed_out", "lost", "duplicate", "refused", "shutdown", "protocol_error", "leaving",
                "closed_here", "not_reading",
            ])
        for code in MemberLeftCode.allCases {
            guard case .left(let member)? = SessionService.controlEvent(.memberLeft(room: Self.lab, peer: Self.bob, code: code, text: "", fatal: false))
            else {
                Issue.record("no left event for \(code)")
                continue
            }
            #expect(member.code == code.rawValue && member.fatal == false)
        }
    }

    /// Every outcome, as `docs/control-api.md` lists them for `invitation_closed`.
    @Test func everyInvitationOutcomeIsItsWireString() {
        #expect(
            Set(IncomingInvitation.Outcome.allCases.map(\.rawValue)) == [
                "accepted", "accepted automatically", "accepted (both invited each other)", "accepted (already in the room)", "declined", "expired",
                "withdrawn",
            ])
        let invitation = IncomingInvitation(
            id: WireID(hex: "0123456789abcdef0123456789abcdef")!, from: Self.bob, room: Self.lab, context: Array("join us".utf8), shortCode: "4821-0937",
            receivedAt: 1_795_754_400_125, expiresAt: 1_795_754_700_000)
        for outcome in IncomingInvitation.Outcome.allCases {
            guard case .invitationClosed(let info)? = SessionService.controlEvent(.invitationClosed(invitation, outcome: outcome)) else {
                Issue.record("no invitation_closed event for \(outcome)")
                continue
            }
            #expect(info.outcome == outcome.rawValue && info.id == "0123456789abcdef0123456789abcdef" && info.room == "lab")
        }
        #expect(
            line(.invitationClosed(invitation, outcome: .acceptedAutomatically))
                == ##"{"event":{"invitation":{"expires_at":"2026-11-27T04:45:00.000Z","from":"bob@lab","from_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","id":"0123456789abcdef0123456789abcdef","message":"join us","outcome":"accepted automatically","received_at":"2026-11-27T04:40:00.125Z","room":"lab","short_code":"4821-0937"},"time":"2026-11-27T04:40:00.123Z","type":"invitation_closed"},"ok":true}"##
                + "\n")
    }

    @Test func anInviteOutcomeSaysItsIdAndRoom() {
        let event = SessionEvent.inviteOutcome(
            id: WireID(hex: "1c0ffee0000000000000000000000001")!, peer: Self.bob, room: Self.lab, outcome: .declined("busy"))
        #expect(
            line(event)
                == ##"{"event":{"invite":{"id":"1c0ffee0000000000000000000000001","outcome":"declined","peer":"bob@lab","peer_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","reason":"busy","room":"lab"},"time":"2026-11-27T04:40:00.123Z","type":"invite_outcome"},"ok":true}"##
                + "\n")
    }

    @Test func aMemberStateAndTypingSayTheRoom() {
        #expect(
            line(.memberState(room: Self.lab, peer: Self.bob, state: .notConnected))
                == ##"{"event":{"member":{"id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","name":"bob@lab","room":"lab","state":"not_connected"},"time":"2026-11-27T04:40:00.123Z","type":"member"},"ok":true}"##
                + "\n")
        #expect(
            line(.typing(room: Self.lab, peer: Self.bob))
                == ##"{"event":{"member":{"id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","name":"bob@lab","room":"lab","state":"typing"},"time":"2026-11-27T04:40:00.123Z","type":"typing"},"ok":true}"##
                + "\n")
    }

    @Test func aTransferSaysItsIdAndState() {
        let info = TransferInfo(
            state: .offered, id: WireID(hex: "72000000000000000000000000000002")!, direction: .outgoing, peer: Self.bob, name: "a.txt", size: 10,
            done: 0, rate: 0)
        #expect(
            line(.transfer(info))
                == ##"{"event":{"time":"2026-11-27T04:40:00.123Z","transfer":{"direction":"outgoing","done":0,"id":"72000000000000000000000000000002","name":"a.txt","peer":"bob@lab","peer_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","rate":0,"size":10,"state":"offered"},"type":"transfer"},"ok":true}"##
                + "\n")
        let states: [TransferState] = [.offered, .active, .waiting, .interrupted, .complete, .refused, .failed, .cancelled]
        #expect(
            states.map { SessionService.entry(TransferInfo(state: $0, id: info.id, direction: .incoming, peer: Self.bob, name: "", size: 0, done: 0, rate: 0)).state }
                == ["offered", "active", "waiting", "interrupted", "complete", "refused", "failed", "cancelled"])
    }

    /// A topic's message goes to its subscribers only.
    @Test func aTopicMessageIsNoWatchEvent() {
        let delivery = SessionStateMachine.TopicDelivery(room: Self.lab, topic: "t", from: Self.bob, sequence: 1, text: "x", reliable: true)
        #expect(SessionService.controlEvent(.topicMessage(delivery)) == nil)
    }

    /// Times in events and answers carry their exact millisecond: every one of a second's thousand, and
    /// before 1970 too (a Double of milliseconds / 1000 read some of them 1 ms early).
    @Test func timesKeepTheirExactMillisecond() {
        for millisecond: Int64 in 0..<1000 {
            let text = SessionService.time(milliseconds: 1_700_000_000_000 + millisecond)
            let digits = String(millisecond)
            #expect(text == "2023-11-14T22:13:20." + String(repeating: "0", count: 3 - digits.count) + digits + "Z")
        }
        #expect(SessionService.time(milliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(SessionService.time(milliseconds: -1) == "1969-12-31T23:59:59.999Z")
    }
}
