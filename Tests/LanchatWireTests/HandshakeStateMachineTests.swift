import LanchatCore
@testable import LanchatWire
import Testing

private let aliceID = String(repeating: "a", count: 52)
private let bobID = String(repeating: "b", count: 52)
private let malloryID = String(repeating: "m", count: 52)

private func hello(_ id: String, versions: ClosedRange<UInt16> = 1...1, payload: UInt32 = 1 << 20) -> WireFrame.Hello {
    .init(minimumVersion: versions.lowerBound, maximumVersion: versions.upperBound, maximumPayload: payload, peerID: id, name: "peer", capabilities: ["chat"])
}

@Suite struct HandshakeStateMachineTests {
    @Test func startSendsHelloAndStartsTheTimer() {
        var machine = HandshakeStateMachine(ours: hello(aliceID), certificateID: bobID, advertisedID: bobID)
        #expect(machine.start() == [.send(.hello(hello(aliceID))), .startTimer])
        #expect(machine.start() == [])
    }

    @Test func matchingHelloEstablishesWithTheSmallerLimit() {
        var machine = HandshakeStateMachine(ours: hello(aliceID, payload: 1 << 20), certificateID: bobID, advertisedID: bobID)
        _ = machine.start()
        let limits = FrameLimits(maximumPayload: 65536)
        let session = HandshakeStateMachine.Session(version: 1, peerID: bobID, name: "peer", capabilities: ["chat"], limits: limits)
        #expect(machine.received(.hello(hello(bobID, payload: 65536))) == [.cancelTimer, .setLimits(limits), .established(session)])
        #expect(machine.isEstablished)
    }

    @Test func theHighestCommonVersionWins() {
        var machine = HandshakeStateMachine(ours: hello(aliceID, versions: 1...3), certificateID: nil, advertisedID: nil)
        _ = machine.start()
        guard case .established(let session)? = machine.received(.hello(hello(bobID, versions: 2...5))).last else {
            Issue.record("not established")
            return
        }
        #expect(session.version == 3)
    }

    @Test func disjointVersionsAreRefusedWithAGoodbye() {
        var machine = HandshakeStateMachine(ours: hello(aliceID, versions: 1...1), certificateID: nil, advertisedID: nil)
        _ = machine.start()
        let actions = machine.received(.hello(hello(bobID, versions: 2...3)))
        #expect(actions.last == .close(.noCommonVersion(ours: 1...1, theirs: 2...3)))
        guard case .send(.goodbye(let goodbye)) = actions[1] else {
            Issue.record("no goodbye: \(actions)")
            return
        }
        #expect(goodbye.reason == .refused && goodbye.text.contains("1-1") && goodbye.text.contains("2-3"))
    }

    @Test func anIDOtherThanTheCertificatesIsRefused() {
        var machine = HandshakeStateMachine(ours: hello(aliceID), certificateID: bobID, advertisedID: nil)
        _ = machine.start()
        #expect(machine.received(.hello(hello(malloryID))).last == .close(.idDiffersFromCertificate(hello: malloryID, certificate: bobID)))
    }

    @Test func anIDOtherThanTheAdvertisedIsRefused() {
        var machine = HandshakeStateMachine(ours: hello(aliceID), certificateID: nil, advertisedID: bobID)
        _ = machine.start()
        #expect(machine.received(.hello(hello(malloryID))).last == .close(.idDiffersFromAdvertised(hello: malloryID, advertised: bobID)))
    }

    @Test func anyOtherFrameFirstIsAProtocolError() {
        var machine = HandshakeStateMachine(ours: hello(aliceID), certificateID: nil, advertisedID: nil)
        _ = machine.start()
        let actions = machine.received(.ping(1))
        #expect(actions.last == .close(.unexpectedFrame("PING")))
        // Closed: nothing more happens.
        #expect(machine.received(.hello(hello(bobID))) == [])
        #expect(machine.timerFired() == [])
    }

    @Test func ignorableFramesAreSkipped() {
        var machine = HandshakeStateMachine(ours: hello(aliceID), certificateID: nil, advertisedID: nil)
        _ = machine.start()
        #expect(machine.received(.ignored(type: 0x7e)) == [])
        #expect(machine.received(.hello(hello(bobID))).count == 3)
    }

    @Test func theTimerClosesASilentPeer() {
        var machine = HandshakeStateMachine(ours: hello(aliceID), certificateID: nil, advertisedID: nil)
        _ = machine.start()
        #expect(machine.timerFired().last == .close(.timedOut))
    }

    @Test func aGoodbyeInsteadOfHelloCloses() {
        var machine = HandshakeStateMachine(ours: hello(aliceID), certificateID: nil, advertisedID: nil)
        _ = machine.start()
        let goodbye = WireFrame.Goodbye(reason: .refused, text: "busy")
        #expect(machine.received(.goodbye(goodbye)) == [.cancelTimer, .close(.peerSaidGoodbye(goodbye))])
    }

    @Test func aSecondHelloAfterEstablishingIsAProtocolError() {
        var machine = HandshakeStateMachine(ours: hello(aliceID), certificateID: nil, advertisedID: nil)
        _ = machine.start()
        _ = machine.received(.hello(hello(bobID)))
        #expect(machine.received(.hello(hello(bobID))).last == .close(.unexpectedFrame("second HELLO")))
    }
}

@Suite struct EncryptionPreferenceTests {
    @Test(arguments: [
        (EncryptionPreference.required, EncryptionPreference.required, true as Bool?),
        (.required, .optional, true), (.optional, .required, true), (.optional, .optional, true),
        (.optional, .none, false), (.none, .optional, false), (.none, .none, false),
        (.required, .none, nil), (.none, .required, nil),
    ])
    func negotiation(ours: EncryptionPreference, theirs: EncryptionPreference, tls: Bool?) {
        switch EncryptionPreference.negotiate(ours: ours, theirs: theirs) {
        case .success(let useTLS): #expect(useTLS == tls)
        case .failure(let mismatch):
            #expect(tls == nil)
            #expect(mismatch.description.contains("cannot meet"))
        }
    }
}
