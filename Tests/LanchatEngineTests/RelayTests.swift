import LanchatCore
@testable import LanchatEngine
import LanchatWire
import Testing

/// Relay for absent members (issue 12, item 3), the engine's part: members ask each other what they lack
/// (SYNC_REQUEST) on every version 2 connection and resync; each answers once per resync; a signed history
/// is taken from a member only in answer to our request; direct messages are never handed on.
@Suite struct RelayTests {
    let me = SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice")
    let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    let carol = SessionPeer(id: SessionStateMachineTests.peerID(0x20), name: "carol")
    let lab = RoomID("lab")!

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    func engine() -> SessionStateMachine {
        var configuration = SessionStateMachine.Configuration(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .never)
        configuration.envelopes = SimulatedSignatures.keys(for: 0, ids: [me.id, bob.id, carol.id])
        var node = SessionStateMachine(
            configuration: configuration,
            restored: .init(rooms: [(lab, [StoredMember(peerID: bob.id.rawValue, name: bob.name, port: 7473, addresses: [])])], knownPeers: KnownPeerBook()),
            addressBook: PeerDirectory(), ids: IDGenerator(seed: 1), shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        return node
    }

    func syncRequests(_ actions: [SessionAction]) -> [RoomID] {
        actions.compactMap { if case .requestSync(let room, _) = $0 { room } else { nil } }
    }

    func sent(_ actions: [SessionAction]) -> [LinkHandle: [WireFrame]] {
        var result: [LinkHandle: [WireFrame]] = [:]
        for case .send(let handle, let frames) in actions { result[handle, default: []] += frames }
        return result
    }

    func syncAnswers(_ actions: [SessionAction]) -> [[String: [ClosedRange<UInt64>]]] {
        actions.compactMap { if case .sendSync(_, _, let marks, _) = $0 { marks } else { nil } }
    }

    func offer(_ byte: UInt8, kind: WireFrame.ResourceOffer.Kind = .signedHistory) -> WireFrame {
        .resourceOffer(
            .init(
                id: WireID(bytes: [UInt8](repeating: byte, count: 16))!, room: lab, kind: kind, name: Array("history".utf8), size: 10,
                sha256: [UInt8](repeating: 1, count: 32), modifiedMilliseconds: 0))
    }

    func refused(_ actions: [SessionAction]) -> Bool {
        actions.contains {
            if case .send(_, let frames) = $0 { frames.contains { if case .resourceEnd(let end) = $0 { end.status == .refused } else { false } } } else { false }
        }
    }

    @Test func aMemberIsAskedOnEveryVersion2ConnectionAndResync() {
        var node = engine()
        #expect(syncRequests(node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1)).actions) == [lab])
        // Again at the resync (the timer's own deadline).
        let resync = node.tick(at: at(node.configuration.resyncInterval + 10))
        #expect(syncRequests(resync) == [lab])
        // Not on a version 1 connection, and not a stranger.
        var old = engine()
        #expect(syncRequests(old.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 1, at: at(1)).actions).isEmpty)
        #expect(syncRequests(node.linkUp(LinkHandle(2), peer: carol, dialedByUs: true, remoteAddress: nil, version: 2, at: at(2)).actions).isEmpty)
    }

    @Test func aMembersRequestIsAnsweredOncePerResyncAndAStrangersNever() {
        var node = engine()
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        _ = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        let request = WireFrame.syncRequest(
            .init(
                room: lab, sinceMilliseconds: 0,
                marks: [
                    .init(author: carol.id.rawValue, first: 1, last: 4),
                    .init(author: carol.id.rawValue, first: 6, last: 9),
                ]))
        #expect(syncAnswers(node.received([request], on: LinkHandle(1), at: at(2))) == [[carol.id.rawValue: [1...4, 6...9]]])
        // (The shell had nothing to offer: the next request may be answered.) One answer at a time, three per resync.
        node.relayAnswerNotOffered(lab, to: bob.id)
        #expect(syncAnswers(node.received([request, request, request, request], on: LinkHandle(1), at: at(3))).count == 1)
        node.relayAnswerNotOffered(lab, to: bob.id)
        #expect(syncAnswers(node.received([request, request], on: LinkHandle(1), at: at(3))).count == 1)
        node.relayAnswerNotOffered(lab, to: bob.id)
        #expect(syncAnswers(node.received([request], on: LinkHandle(1), at: at(3))).isEmpty)
        // Reconnecting does not buy more answers before the next resync.
        _ = node.linkDown(LinkHandle(1), reason: .lost, at: at(4))
        _ = node.linkUp(LinkHandle(3), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(5))
        #expect(syncAnswers(node.received([request], on: LinkHandle(3), at: at(6))).isEmpty)
        #expect(syncAnswers(node.received([request], on: LinkHandle(2), at: at(3))).isEmpty)  // carol is not a member
        _ = node.tick(at: at(node.configuration.resyncInterval + 10))
        #expect(syncAnswers(node.received([request], on: LinkHandle(3), at: at(node.configuration.resyncInterval + 20))).count == 1)
    }

    // MARK: Issue 28, item 3: one answer at a time, within the outgoing caps

    /// A member that asks again while our answer to it for that room is still being written gets nothing
    /// (each answer is an export: an unlinked file and a descriptor until it ends).
    @Test func aSecondRequestWhileOurAnswerIsBeingWrittenIsNotAnswered() {
        var node = engine()
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        let request = WireFrame.syncRequest(.init(room: lab, sinceMilliseconds: 0, marks: []))
        let first = syncAnswers(node.received([request], on: LinkHandle(1), at: at(2))).count
        let second = syncAnswers(node.received([request], on: LinkHandle(1), at: at(3))).count
        let batch = syncAnswers(node.received([request, request], on: LinkHandle(1), at: at(4))).count
        print("relay answers to 4 requests while the first is being written: \(first + second + batch)")
        #expect(first == 1 && second == 0 && batch == 0)
        // A shell that never says what became of it: the member is answered again after 10 s.
        #expect(syncAnswers(node.received([request], on: LinkHandle(1), at: at(2 + 10_000))).count == 1)
    }

    @Test func aRelayAnswerOfferedIsOutstandingUntilItEndsAndEndsUnacceptedAfterTheOfferTimeout() throws {
        var node = engine()
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        let request = WireFrame.syncRequest(.init(room: lab, sinceMilliseconds: 0, marks: []))
        #expect(syncAnswers(node.received([request], on: LinkHandle(1), at: at(2))).count == 1)
        let export = OfferedFile(path: "/state/history/.lanchat-history-out-x", name: "history of lab", size: 500, modifiedMilliseconds: 0, identity: "1:9")
        let (id, _) = try node.offerResource(export, to: bob.id, kind: .signedHistory, room: lab, ephemeral: true, relayAnswer: true, at: at(3))
        // Offered, not accepted: no other answer, even after the time a shell has to write one.
        #expect(syncAnswers(node.received([request], on: LinkHandle(1), at: at(20_000))).isEmpty)
        // Not accepted within the offer timeout: ended, the member told, the export closed.
        let timeout = node.configuration.transferLimits.offerTimeout
        #expect(timeout == 60_000)
        let due = node.tick(at: at(3 + timeout))
        let end = sent(due)[LinkHandle(1)]?.compactMap { if case .resourceEnd(let end) = $0 { end } else { nil } }.first
        print("an unaccepted relay answer after \(timeout / 1000) s: \(end.map { "\($0.status) \($0.text)" } ?? "still offered")")
        #expect(end?.id == id && end?.status == .failed && end?.text == "not accepted within 60 s")
        #expect(due.contains(.file(.close(id, removePart: false))))
        #expect(node.transfersUnderWay(at: at(3 + timeout)).isEmpty)
        // Its slot is free: the member's next request is answered.
        #expect(syncAnswers(node.received([request], on: LinkHandle(1), at: at(4 + timeout))).count == 1)
    }

    @Test func aRequestPastTheOutgoingCapsIsNotAnswered() throws {
        var node = engine()
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        for index in 0..<16 {
            let file = OfferedFile(path: "/home/alice/\(index)", name: "\(index)", size: 10, modifiedMilliseconds: 0, identity: "1:\(index)")
            _ = try node.offerResource(file, to: bob.id, at: at(2))
        }
        let request = WireFrame.syncRequest(.init(room: lab, sinceMilliseconds: 0, marks: []))
        let answers = syncAnswers(node.received([request], on: LinkHandle(1), at: at(3))).count
        print("relay answers with 16 transfers going out to the member: \(answers)")
        #expect(answers == 0)
    }

    @Test func aSignedHistoryIsTakenOnlyInAnswerToOurRequest() {
        var node = engine()
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        // Asked at the connection: one answer is taken, a second is not, nor an unsigned (kind 1) one.
        #expect(!refused(node.received([offer(1)], on: LinkHandle(1), at: at(2))))
        #expect(node.transfers.histories.relayTransfers.count == 1)
        #expect(refused(node.received([offer(2)], on: LinkHandle(1), at: at(3))))
        var other = engine()
        _ = other.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        #expect(refused(other.received([offer(3, kind: .history)], on: LinkHandle(1), at: at(2))))
        // After the connection ends, nothing asked on it is taken.
        var gone = engine()
        _ = gone.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        _ = gone.linkDown(LinkHandle(1), reason: .lost, at: at(2))
        #expect(gone.transfers.histories.askedNothing && !gone.takeSyncAnswer(lab, from: bob.id))
    }

    @Test func whatIsHandedOnIsWhatTheAskerLacksAndNeverDirect() {
        func message(_ sequence: Int64, by sender: PeerID, direct: Bool = false, signed: Bool = true) -> StoredMessage {
            StoredMessage(
                id: String(format: "%032x", sequence + Int64(sender.rawValue.hashValue & 0xffff) << 16), room: "lab", senderID: sender.rawValue,
                senderName: "x", sequence: sequence, timestamp: sequence, kind: .text, body: "m\(sequence)",
                authorKey: signed ? [2] : [], signature: signed ? [1] : [], direct: direct)
        }
        let messages = [
            message(1, by: carol.id), message(2, by: carol.id), message(3, by: carol.id, direct: true), message(4, by: carol.id),
            message(5, by: carol.id), message(7, by: carol.id), message(1, by: bob.id), message(5, by: me.id, signed: false),
            message(6, by: carol.id, signed: false),
        ]
        // bob holds carol's 2 and 5: carol's 1, 4 and 7 are lacking; 3 is direct; 6 unsigned; bob's own
        // never; our own unsigned, yes.
        let members: Set<PeerID> = [bob.id, carol.id]
        let lacking = SessionStateMachine.lacking(messages, marks: [carol.id.rawValue: [2...2, 5...5]], requester: bob.id, ownID: me.id, members: members)
        #expect(lacking.map(\.body) == ["m1", "m4", "m7", "m5"])
        #expect(
            SessionStateMachine.lacking(messages, marks: [:], requester: bob.id, ownID: me.id, members: members).map(\.body)
                == ["m1", "m2", "m4", "m5", "m7", "m5"])
        // carol left: her messages are not handed on (the requester would not keep them).
        #expect(SessionStateMachine.lacking(messages, marks: [:], requester: bob.id, ownID: me.id, members: [bob.id]).map(\.body) == ["m5"])
        // Stored here a moment ago by an author connected to us, or ours and queued for the asker: left to its author.
        let held = [carol.id.rawValue: [2...2, 5...5] as [ClosedRange<UInt64>]]
        var arrivals = RecentArrivals()
        arrivals.note([messages[0].id], at: 100)  // carol's 1, long ago
        arrivals.note([messages[5].id, messages[7].id], at: 10_000)  // carol's 7, our 5, a moment ago
        let recent = arrivals.ids(after: 10_001 - SessionStateMachine.relayGrace)
        #expect(recent == [messages[5].id, messages[7].id])
        #expect(
            SessionStateMachine.lacking(
                messages, marks: held, requester: bob.id, ownID: me.id, members: members,
                leftToAuthors: [carol.id], recent: recent
            ).map(\.body) == ["m1", "m4", "m5"])
        #expect(
            SessionStateMachine.lacking(
                messages, marks: held, requester: bob.id, ownID: me.id, members: members,
                leftToAuthors: [], recent: recent, queued: [messages[7].id]
            ).map(\.body) == ["m1", "m4", "m7"])
    }

    @Test func recentArrivalsKeepTheNewestWithinTheirCapacity() {
        var arrivals = RecentArrivals()
        arrivals.note((0..<RecentArrivals.capacity * 3).map { "m\($0)" }, at: 7)
        #expect(arrivals.count == RecentArrivals.capacity)
        let ids = arrivals.ids(after: 6)
        #expect(ids.count == RecentArrivals.capacity && ids.contains("m\(RecentArrivals.capacity * 3 - 1)") && !ids.contains("m0"))
        arrivals.note(["late"], at: 9)
        #expect(arrivals.ids(after: 7) == ["late"])
    }

    @Test func aRelayAnswerKeepsTheNewestThatFitItsLimit() {
        let messages = (1...10).map {
            StoredMessage(
                id: String(format: "%032x", $0), room: "lab", senderID: carol.id.rawValue, senderName: "carol", sequence: Int64($0),
                timestamp: Int64($0), kind: .text, body: String(repeating: "x", count: 1000))
        }
        let record = UInt64(HistoryRecord.fixedLength + "carol".utf8.count + 1000)
        #expect(SessionStateMachine.withinRelayLimit(messages, limit: 3 * record + 1).map(\.sequence) == [8, 9, 10])
        #expect(SessionStateMachine.withinRelayLimit(messages, limit: .max).count == 10)
        #expect(SessionStateMachine.withinRelayLimit(messages, limit: 10).isEmpty)
    }

    /// What the store read for an action's I/O goes back to the engine (`storeRead`), which makes the I/O:
    /// nothing when nothing was read or nothing is lacking (then the member's next request is answered),
    /// an offer of what it lacks, a HISTORY_REQUEST within the connection's version, nothing on a
    /// connection that is gone.
    @Test func whatTheStoreReadForAnActionMakesItsIOInTheEngine() {
        var node = engine()
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        _ = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: true, remoteAddress: nil, version: 1, at: at(1))
        let request = WireFrame.syncRequest(.init(room: lab, sinceMilliseconds: 0, marks: []))
        let asked = node.received([request], on: LinkHandle(1), at: at(2)).filter { if case .sendSync = $0 { true } else { false } }
        #expect(asked.count == 1)
        #expect(node.storeRead(.relayAnswer(nil, messages: nil), for: asked[0], arrivals: RecentArrivals(), at: at(3)).isEmpty)
        #expect(syncAnswers(node.received([request], on: LinkHandle(1), at: at(4))).count == 1)
        let mine = StoredMessage(
            id: String(format: "%032x", 1), room: "lab", senderID: me.id.rawValue, senderName: me.name, sequence: 1, timestamp: 1, kind: .text, body: "hi")
        #expect(
            node.storeRead(.relayAnswer(nil, messages: [mine]), for: asked[0], arrivals: RecentArrivals(), at: at(5)) == [
                .offerRelayAnswer(lab, [mine], to: bob, layout: .signed)
            ])
        // (That answer is outstanding: a request now is not answered.)
        #expect(syncAnswers(node.received([request], on: LinkHandle(1), at: at(6))).isEmpty)

        let scope = HistoryScope(limit: 20, sinceMilliseconds: 500)
        #expect(
            node.storeRead(.timestamp(100_000), for: .requestHistory(lab, LinkHandle(1), scope), arrivals: RecentArrivals(), at: at(7)) == [
                .send(LinkHandle(1), [.historyRequest(room: lab, sinceMilliseconds: 40_000, limit: 20)])
            ])
        #expect(
            node.storeRead(.timestamp(nil), for: .requestHistory(lab, LinkHandle(2), scope), arrivals: RecentArrivals(), at: at(7)) == [
                .send(LinkHandle(2), [.historyRequest(room: lab, sinceMilliseconds: 500, limit: nil)])
            ])
        #expect(node.storeRead(.timestamp(nil), for: .requestHistory(lab, LinkHandle(9), scope), arrivals: RecentArrivals(), at: at(7)).isEmpty)
        #expect(node.storeRead(.messages([mine]), for: .flushOutbox(bob.id, LinkHandle(9), rooms: [lab]), arrivals: RecentArrivals(), at: at(7)).isEmpty)
        #expect(node.storeRead(.messages(nil), for: .flushOutbox(bob.id, LinkHandle(1), rooms: [lab]), arrivals: RecentArrivals(), at: at(7)).isEmpty)
    }

    @Test func theRunsHeldAreCompactAndBounded() {
        let held: [(author: String, sequence: Int64)] = [("b", 3), ("a", 1), ("a", 2), ("a", 4), ("b", 3), ("a", 3), ("a", 9)]
        #expect(
            SessionStateMachine.syncMarks(held) == [
                .init(author: "a", first: 1, last: 4), .init(author: "a", first: 9, last: 9),
                .init(author: "b", first: 3, last: 3),
            ])
        let gappy = (0..<3000).map { (author: "a", sequence: Int64($0 * 2)) }
        let marks = SessionStateMachine.syncMarks(gappy)
        #expect(marks.count == WireFrame.SyncRequest.maximumMarks && marks.first?.last == 5998)
    }
}

/// The newcomer chooses the scope of the history it asks for (issue 12, item 5).
@Suite struct HistoryScopeTests {
    let me = SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice")
    let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    let lab = RoomID("lab")!

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    /// Bob invited us to lab; the invitation waits for our answer.
    func invited() -> SessionStateMachine {
        var node = SessionStateMachine(
            configuration: .init(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .never), restored: .init(),
            addressBook: NoAddresses(), ids: IDGenerator(seed: 1), shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: false, remoteAddress: nil, version: 2, at: at(0))
        let invite = WireFrame.invite(.init(id: WireID(bytes: [UInt8](repeating: 1, count: 16))!, timeoutMilliseconds: 60_000, room: lab, context: []))
        _ = node.received([invite], on: LinkHandle(1), at: at(1))
        return node
    }

    func scopes(_ actions: [SessionAction]) -> [HistoryScope] {
        actions.compactMap { if case .requestHistory(_, _, let scope) = $0 { scope } else { nil } }
    }

    @Test func theNewcomersChoiceGoesWithItsRequestAndNothingMeansNoRequest() throws {
        var all = invited()
        #expect(scopes(try all.accept("01", at: at(2)).1) == [.all])
        var some = invited()
        let chosen = HistoryScope(limit: 20, sinceMilliseconds: 500)
        #expect(scopes(try some.accept("01", history: chosen, at: at(2)).1) == [chosen])
        var none = invited()
        let actions = try none.accept("01", history: .nothing, at: at(2)).1
        #expect(scopes(actions).isEmpty && none.historyRequested[lab] == nil)
        #expect(actions.contains { if case .persist(.insertMessage(let notice, _, _)) = $0 { notice.body.contains("no earlier messages asked for") } else { false } })
        // So a history offered anyway is refused.
        let offer = WireFrame.resourceOffer(
            .init(
                id: WireID(bytes: [UInt8](repeating: 7, count: 16))!, room: lab, kind: .signedHistory, name: [0x68],
                size: 1, sha256: [UInt8](repeating: 0, count: 32), modifiedMilliseconds: 0))
        let refused = none.received([offer], on: LinkHandle(1), at: at(3)).contains {
            if case .send(_, let frames) = $0 { frames.contains { if case .resourceEnd(let end) = $0 { end.status == .refused } else { false } } } else { false }
        }
        #expect(refused)
    }

    @Test func anInviterHonoursTheNewcomersLimit() {
        var node = SessionStateMachine(
            configuration: .init(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .never),
            restored: .init(rooms: [(lab, [])], knownPeers: KnownPeerBook()),
            addressBook: NoAddresses(), ids: IDGenerator(seed: 1), shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(0))
        // Bob is a member we invited: he is owed the room's history once.
        node.transfers.histories.owe(SessionStateMachine.RoomMember(room: lab, peer: bob.id), keep: 16)
        node.membership.enter(lab)
        node.membership.setMember(.init(name: "bob", port: 0, addresses: []), bob.id, in: lab)
        let actions = node.received([.historyRequest(room: lab, sinceMilliseconds: 5, limit: 20)], on: LinkHandle(1), at: at(2))
        #expect(actions.contains { if case .sendHistory(lab, 5, bob, .signed, 20) = $0 { true } else { false } })
    }
}
