import LanchatCore
import LanchatEngine
import LanchatWire
import NIOCore
import Testing

/// The stream part of the engine, one input at a time.
@Suite struct StreamTableTests {
    let me = SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice")
    let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    let carol = SessionPeer(id: SessionStateMachineTests.peerID(0x20), name: "carol")
    let lab = RoomID("lab")!
    let name = StreamName("logs")!
    let handle = LinkHandle(1)

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    /// In `lab` with bob (handle 1) and carol (handle 2), small windows.
    func engine() -> SessionStateMachine {
        var configuration = SessionStateMachine.Configuration(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .never)
        configuration.streamLimits.window = 100
        configuration.streamLimits.grantEvery = 40
        configuration.streamLimits.chunk = 30
        let members = [bob, carol].map { StoredMember(peerID: $0.id.rawValue, name: $0.name, port: 7473, addresses: []) }
        var node = SessionStateMachine(
            configuration: configuration, restored: .init(rooms: [(lab, members)]), addressBook: NoAddresses(), ids: IDGenerator(seed: 1),
            shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        _ = node.linkUp(handle, peer: bob, dialedByUs: true, remoteAddress: nil, at: at(0))
        _ = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: true, remoteAddress: nil, at: at(0))
        return node
    }

    @Test func openedStreamSendsWithinCreditAndEndsCleanlyWhenBothFinish() throws {
        var node = engine()
        let (id, opened) = try node.openStream(name, to: bob.id, timeout: 30_000, at: at(0))
        #expect(opened == [.send(handle, [.streamOpen(.init(id: id, name: name, credit: 100))])])
        var data = ByteBuffer(bytes: [UInt8](repeating: 7, count: 50))
        #expect(try node.streamSend(id, &data).taken == 0)  // not accepted yet
        #expect(node.received([.streamAccept(id: id, credit: 40)], on: handle, at: at(5)).contains(.stream(id, .opened)))
        let (taken, sent) = try node.streamSend(id, &data)
        #expect(taken == 40)
        #expect(data.readableBytes == 10)
        #expect(sent.count == 1)
        if case .send(_, let frames) = sent[0] { #expect(frames.count == 2) }  // 30 + 10 (chunk 30)
        #expect(try node.streamSend(id, &data).taken == 0)  // no credit left
        #expect(node.received([.streamCredit(id: id, bytes: 10)], on: handle, at: at(6)).contains(.stream(id, .credit)))
        #expect(try node.streamSend(id, &data).taken == 10)
        #expect(node.streamFinish(id) == [.send(handle, [.streamEnd(.init(id: id, status: .finished))])])
        let end = node.received([.streamEnd(.init(id: id, status: .finished))], on: handle, at: at(7))
        #expect(end.contains(.stream(id, .remoteFinished)))
        #expect(end.contains(.stream(id, .ended(failure: nil))))
        #expect(node.streamCount == 0)
        #expect(node.diagnostics.timers.allSatisfy { if case .streamOpen = $0 { false } else { true } })
    }

    /// Each side finishes once; the second to finish ends the stream, whichever it is. Bytes after the
    /// peer's end abort it.
    @Test func theSecondSideToFinishEndsTheStreamAndBytesAfterThePeersEndAbortIt() throws {
        var node = engine()
        let id = WireID(bytes: [UInt8](repeating: 3, count: 16))!
        _ = node.received([.streamOpen(.init(id: id, name: name, credit: 10))], on: handle, at: at(0))
        _ = try node.acceptStream(name, from: nil, acceptor: 1)
        let finished = WireFrame.streamEnd(.init(id: id, status: .finished))
        #expect(node.received([finished], on: handle, at: at(1)) == [.stream(id, .remoteFinished)])
        #expect(node.received([finished], on: handle, at: at(2)).isEmpty)  // (once)
        #expect(node.streamFinish(id) == [.send(handle, [finished]), .stream(id, .ended(failure: nil))])
        #expect(node.streamCount == 0)
        #expect(node.streamFinish(id).isEmpty)

        let other = WireID(bytes: [UInt8](repeating: 4, count: 16))!
        _ = node.received([.streamOpen(.init(id: other, name: name, credit: 10))], on: handle, at: at(3))
        _ = try node.acceptStream(name, from: nil, acceptor: 2)
        let ours = WireFrame.streamEnd(.init(id: other, status: .finished))
        #expect(node.streamFinish(other) == [.send(handle, [ours])])
        #expect(node.streamFinish(other).isEmpty)  // (once)
        _ = node.received([.streamEnd(.init(id: other, status: .finished))], on: handle, at: at(4))
        #expect(node.streamCount == 0)

        let third = WireID(bytes: [UInt8](repeating: 5, count: 16))!
        _ = node.received([.streamOpen(.init(id: third, name: name, credit: 10))], on: handle, at: at(5))
        _ = try node.acceptStream(name, from: nil, acceptor: 3)
        _ = node.received([.streamEnd(.init(id: third, status: .finished))], on: handle, at: at(6))
        let late = node.received([.streamData(id: third, data: ByteBuffer(bytes: [1]))], on: handle, at: at(7))
        #expect(late.contains { if case .stream(third, .ended(let failure?)) = $0 { failure.contains("more than it was allowed") } else { false } })
    }

    @Test func readingGrantsCreditAndTooMuchDataAborts() throws {
        var node = engine()
        let id = WireID(bytes: [UInt8](repeating: 1, count: 16))!
        let accepted = node.received([.streamOpen(.init(id: id, name: name, credit: 10))], on: handle, at: at(0))
        #expect(!accepted.contains { if case .streamHandedOver = $0 { true } else { false } })  // held: nobody accepts yet
        #expect(node.diagnostics.pendingStreamOpens == 1)
        let handed = try node.acceptStream(name, from: nil, acceptor: 9)
        #expect(handed.contains(.send(handle, [.streamAccept(id: id, credit: 100)])))
        #expect(handed.contains(.streamHandedOver(acceptor: 9, AcceptedStream(id: id, peer: bob, name: name))))
        let chunk = ByteBuffer(bytes: [UInt8](repeating: 1, count: 60))
        #expect(node.received([.streamData(id: id, data: chunk)], on: handle, at: at(1)).contains(.stream(id, .data(chunk))))
        #expect(node.streamConsumed(id, 30).isEmpty)  // under grantEvery (40)
        #expect(node.streamConsumed(id, 30) == [.send(handle, [.streamCredit(id: id, bytes: 60)])])
        // Allowance now 100 - 60 + 60 = 100: 101 bytes is more than allowed.
        let flood = node.received([.streamData(id: id, data: ByteBuffer(bytes: [UInt8](repeating: 2, count: 101)))], on: handle, at: at(2))
        #expect(flood.contains(.stream(id, .ended(failure: "bob sent more than it was allowed"))))
        #expect(flood.contains(.send(handle, [.streamEnd(.init(id: id, status: .aborted, text: "bob sent more than it was allowed"))])))
        #expect(node.streamCount == 0)
    }

    @Test func anAcceptorThatNamesAPeerTakesOnlyThatPeersOpen() throws {
        var node = engine()
        #expect(try node.acceptStream(name, from: carol.id, acceptor: 1).isEmpty)
        let fromBob = WireID(bytes: [UInt8](repeating: 2, count: 16))!
        let held = node.received([.streamOpen(.init(id: fromBob, name: name, credit: 10))], on: handle, at: at(0))
        #expect(!held.contains { if case .streamHandedOver = $0 { true } else { false } })
        let fromCarol = WireID(bytes: [UInt8](repeating: 3, count: 16))!
        let taken = node.received([.streamOpen(.init(id: fromCarol, name: name, credit: 10))], on: LinkHandle(2), at: at(1))
        #expect(taken.contains(.streamHandedOver(acceptor: 1, AcceptedStream(id: fromCarol, peer: carol, name: name))))
        // Bob's open waits its 10 s, then is refused.
        let expired = node.tick(at: at(10_001))
        #expect(expired.contains(.send(handle, [.streamEnd(.init(id: fromBob, status: .refused, text: "refused: nobody on alice accepts streams named 'logs'"))])))
        #expect(node.diagnostics.pendingStreamOpens == 0)
    }

    @Test func opensFromOutsideTheRoomsAndFloodsOfOpensAreRefused() {
        var node = engine()
        let stranger = SessionPeer(id: SessionStateMachineTests.peerID(0x30), name: "mallory")
        _ = node.linkUp(LinkHandle(3), peer: stranger, dialedByUs: false, remoteAddress: nil, at: at(0))
        let id = WireID(bytes: [UInt8](repeating: 4, count: 16))!
        #expect(
            node.received([.streamOpen(.init(id: id, name: name, credit: 10))], on: LinkHandle(3), at: at(0))
                == [.send(LinkHandle(3), [.streamEnd(.init(id: id, status: .refused, text: "refused: you share no room with alice"))])])
        // One member may hold at most 16 opens waiting.
        var refused = 0
        for n in 0..<20 {
            let open = WireID(bytes: [UInt8](repeating: UInt8(10 + n), count: 16))!
            let actions = node.received([.streamOpen(.init(id: open, name: name, credit: 10))], on: handle, at: at(1))
            if actions.contains(.send(handle, [.streamEnd(.init(id: open, status: .refused, text: "refused: too many streams waiting"))])) { refused += 1 }
        }
        #expect(refused == 4)
        #expect(node.diagnostics.pendingStreamOpens == 16)
    }

    @Test func anOpenNotAcceptedInTimeAndALostLinkEndTheStream() throws {
        var node = engine()
        let (id, _) = try node.openStream(name, to: bob.id, timeout: 500, at: at(0))
        #expect(node.tick(at: at(501)).contains(.stream(id, .ended(failure: "bob did not accept stream 'logs' in time"))))
        let (other, _) = try node.openStream(name, to: carol.id, timeout: 30_000, at: at(600))
        _ = node.received([.streamAccept(id: other, credit: 10)], on: LinkHandle(2), at: at(601))
        let down = node.linkDown(LinkHandle(2), reason: .lost, at: at(700))
        #expect(down.contains { if case .stream(other, .ended(let failure?)) = $0 { failure.hasPrefix("the connection to carol was lost") } else { false } })
        #expect(node.streamCount == 0)
    }

    @Test func stoppingAbortsStreamsAndAnswersWaitingPrograms() throws {
        var node = engine()
        let (id, _) = try node.openStream(name, to: bob.id, timeout: 30_000, at: at(0))
        _ = try node.acceptStream(StreamName("other")!, from: nil, acceptor: 5)
        let stop = node.stopStreams()
        #expect(stop.contains(.stream(id, .ended(failure: "the session is stopping"))))
        #expect(stop.contains(.streamHandedOver(acceptor: 5, nil)))
        #expect(node.diagnostics.streamAcceptors == 0 && node.streamCount == 0)
    }
}
