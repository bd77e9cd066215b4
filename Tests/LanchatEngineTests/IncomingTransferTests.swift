import LanchatCore
@testable import LanchatEngine
import LanchatWire
import Testing

/// `IncomingTransfer`, one input at a time: each input in each state, the legal ones and the refused
/// ones, and what it decides (the cases of the former `IncomingResource` tests among them).
@Suite struct IncomingTransferTests {
    typealias Action = IncomingTransfer.Action
    static let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    static let sha = [UInt8](repeating: 7, count: 32)

    static func offer(
        _ name: String = "a.txt", size: UInt64, kind: WireFrame.ResourceOffer.Kind = .file, digestFollows: Bool = false
    ) -> WireFrame.ResourceOffer {
        WireFrame.ResourceOffer(
            id: WireID(bytes: [UInt8](repeating: 9, count: 16))!, room: kind.isHistory ? RoomID("lab") : nil, kind: kind,
            name: Array(name.utf8), size: size, sha256: sha, modifiedMilliseconds: 5, digestFollows: digestFollows)
    }

    static func limits(progressEvery: UInt64 = 100, maximumAhead: UInt64 = 16 << 20, keptFree: UInt64 = 0) -> TransferLimits {
        var limits = TransferLimits()
        limits.maximumSize = 1 << 30
        limits.progressEvery = progressEvery
        limits.maximumAhead = maximumAhead
        limits.keptFree = keptFree
        limits.reportEvery = 1 << 30
        limits.stallTimeout = 1000
        return limits
    }

    /// Looked up (nothing known) and waiting for its part file.
    static func opening(_ offer: WireFrame.ResourceOffer, limits: TransferLimits = limits()) -> IncomingTransfer {
        var transfer = IncomingTransfer(peer: bob, offer: offer, limits: limits, at: 0)
        #expect(transfer.lookedUp(.none, maximumSize: limits.maximumSize) == [.openPart(resume: false)])
        return transfer
    }

    /// Accepted, its part file holding `held` bytes; what opening it decided.
    static func receiving(
        _ offer: WireFrame.ResourceOffer, held: UInt64 = 0, freeBytes: UInt64 = 1 << 30, limits: TransferLimits = limits()
    ) -> (IncomingTransfer, [Action]) {
        var transfer = opening(offer, limits: limits)
        let actions = transfer.partOpened(.opened(path: "/d/.part", held: held, freeBytes: freeBytes), reserved: 0, at: 0)
        return (transfer, actions)
    }

    static func refusal(_ actions: [Action]) -> String? {
        guard case .end(.refused, let text, true)? = actions.last else { return nil }
        return text
    }

    /// A history (or a relay answer) is held to its own kind's maximum, at the look-up and again when its
    /// part file is open: one larger than `--max-file-size` but within the history's maximum is taken
    /// (it was refused at the open, against the files' maximum), and one past its kind's is refused.
    @Test func aHistoryIsHeldToItsKindsMaximumAtTheOpenToo() {
        var limits = Self.limits()
        limits.maximumSize = 1000
        limits.maximumHistorySize = 5000
        let history = Self.offer("history", size: 3000, kind: .history)
        var transfer = IncomingTransfer(peer: Self.bob, offer: history, limits: limits, at: 0)
        #expect(transfer.lookedUp(.none, maximumSize: limits.maximumHistorySize) == [.openPart(resume: false)])
        let opened = transfer.partOpened(.opened(path: "/d/.part", held: 0, freeBytes: 1 << 30), reserved: 0, at: 0)
        #expect(Self.refusal(opened) == nil && transfer.stage == .receiving)
        // A file of the same size is refused at the look-up, as before.
        var file = IncomingTransfer(peer: Self.bob, offer: Self.offer(size: 3000), limits: limits, at: 0)
        #expect(Self.refusal(file.lookedUp(.none, maximumSize: limits.maximumSize))?.contains("limit") == true)
    }

    // MARK: Each input in each state

    enum Sample: String, CaseIterable { case lookingUp, opening, receiving, awaitingDigest, verifying, placing, ended }

    /// One transfer of 100 bytes (its digest follows) in each state: `receiving` has 60 bytes come and 50
    /// written; `awaitingDigest` has every byte written, and waits for the digest.
    static func sample(_ sample: Sample) -> IncomingTransfer {
        let offer = offer(size: 100, digestFollows: true)
        let limits = limits(progressEvery: 10)
        switch sample {
        case .lookingUp: return IncomingTransfer(peer: bob, offer: offer, limits: limits, at: 0)
        case .opening: return opening(offer, limits: limits)
        case .receiving:
            var (transfer, _) = receiving(offer, limits: limits)
            _ = transfer.chunk(offset: 0, count: 60, at: 1)
            _ = transfer.written(upTo: 50, at: 1)
            return transfer
        case .awaitingDigest:
            var (transfer, _) = receiving(offer, limits: limits)
            _ = transfer.chunk(offset: 0, count: 100, at: 1)
            #expect(transfer.written(upTo: 100, at: 1) == [])
            return transfer
        case .verifying:
            var transfer = self.sample(.awaitingDigest)
            #expect(transfer.digest(sha) == [.verify])
            return transfer
        case .placing:
            var transfer = self.sample(.verifying)
            #expect(transfer.hashed(sha) == [.place(name: "a.txt")])
            return transfer
        case .ended:
            var transfer = self.sample(.receiving)
            _ = transfer.cancel(byPeer: false)
            return transfer
        }
    }

    /// Each input, and the states that take it (decide something, or change: a digest before the last
    /// byte is written is kept); in every other state it decides nothing and changes nothing (a chunk that
    /// comes once every byte came is no sign of progress either).
    static var table: [(input: String, takenIn: Set<Sample>, apply: (inout IncomingTransfer) -> [Action])] {
        [
            ("lookedUp", [.lookingUp], { $0.lookedUp(.none, maximumSize: 1000) }),
            ("refuse", [.lookingUp], { $0.refuse("too many") }),
            ("partOpened", [.opening], { $0.partOpened(.opened(path: "/p", held: 0, freeBytes: 1000), reserved: 0, at: 2) }),
            ("offeredAgain", [.receiving, .awaitingDigest, .verifying, .placing], { $0.offeredAgain(offer(size: 100, digestFollows: true), by: bob.id, at: 2) }),
            ("chunk", [.receiving], { $0.chunk(offset: 60, count: 10, at: 2) }),
            ("written", [.receiving], { $0.written(upTo: 60, at: 2) }),
            ("digest", [.receiving, .awaitingDigest], { $0.digest(sha) }),
            ("hashed", [.verifying], { $0.hashed(sha) }),
            ("placed", [.placing], { $0.placed() }),
            ("cancel", [.lookingUp, .opening, .receiving, .awaitingDigest, .verifying], { $0.cancel(byPeer: false) }),
            ("senderEnded", Set(Sample.allCases).subtracting([.ended]), { $0.senderEnded(.failed, text: "disk") }),
            ("fileFailed", [.receiving, .awaitingDigest, .verifying, .placing], { $0.fileFailed("EIO") }),
            ("connectionLost", Set(Sample.allCases).subtracting([.ended]), { $0.connectionLost("lost") }),
            ("stallTimerFired", [.receiving, .awaitingDigest], { $0.stallTimerFired(at: 10_000) }),
        ]
    }

    @Test func everyInputInEveryState() {
        // (Taken, each decides something, except this one: it only changes the transfer.)
        var early = Self.sample(.receiving)
        #expect(early.digest(Self.sha).isEmpty)
        for row in Self.table {
            for sample in Sample.allCases {
                var transfer = Self.sample(sample)
                let before = transfer
                let actions = row.apply(&transfer)
                if row.takenIn.contains(sample) {
                    #expect(!actions.isEmpty || transfer != before, "\(row.input) in \(sample) is taken")
                } else {
                    #expect(actions.isEmpty, "\(row.input) in \(sample) is refused")
                    #expect(transfer == before, "\(row.input) in \(sample) changes nothing")
                }
            }
        }
    }

    @Test func whatEachStateIs() {
        let stages = Sample.allCases.map { Self.sample($0).stage }
        #expect(stages == [.lookingUp, .opening, .receiving, .receiving, .verifying, .placing, .ended])
        #expect(Sample.allCases.map { Self.sample($0).done } == [0, 0, 60, 100, 100, 100, 60])
        #expect(Sample.allCases.map { Self.sample($0).remaining } == [0, 0, 40, 0, 0, 0, 0])
        #expect(Sample.allCases.map { Self.sample($0).isUnderWay } == [false, false, true, true, true, true, false])
        #expect(Sample.allCases.map { Self.sample($0).watchedSince } == [nil, nil, 1, 1, nil, nil, nil])
        #expect(Sample.allCases.map { Self.sample($0).name } == [nil, nil, "a.txt", "a.txt", "a.txt", "a.txt", "a.txt"])
        #expect(Sample.allCases.allSatisfy { Self.sample($0).fault == nil })
    }

    // MARK: Looked up

    @Test func lookedUp() {
        var received = IncomingTransfer(peer: Self.bob, offer: Self.offer(size: 10), limits: Self.limits(), at: 0)
        // Received (or cancelled) before: the sender missed our answer; said again, nothing started.
        #expect(received.lookedUp(.received, maximumSize: 100) == [.answer(.complete, text: "")])
        #expect(received.stage == .ended && received.name == nil)
        var cancelled = IncomingTransfer(peer: Self.bob, offer: Self.offer(size: 10), limits: Self.limits(), at: 0)
        #expect(cancelled.lookedUp(.cancelled, maximumSize: 100) == [.answer(.cancelled, text: "cancelled by the receiver")])
        var partial = IncomingTransfer(peer: Self.bob, offer: Self.offer(size: 10), limits: Self.limits(), at: 0)
        #expect(partial.lookedUp(.partial, maximumSize: 100) == [.openPart(resume: true)])
        var busy = IncomingTransfer(peer: Self.bob, offer: Self.offer(size: 10), limits: Self.limits(), at: 0)
        #expect(busy.refuse("too many") == [.answer(.refused, text: "too many")])
    }

    @Test func refusesWithReasons() {
        func lookedUp(_ name: String, size: UInt64) -> [Action] {
            var transfer = IncomingTransfer(peer: Self.bob, offer: Self.offer(name, size: size), limits: Self.limits(), at: 0)
            return transfer.lookedUp(.none, maximumSize: 1 << 30)
        }
        let tooBig = lookedUp("x", size: 2 << 30)
        #expect(Self.refusal(tooBig)?.contains("over this peer's limit") == true)
        #expect(Self.refusal(lookedUp("", size: 1))?.contains("empty") == true)
        #expect(Self.refusal(lookedUp("..", size: 1)) != nil)
        // The status says "refused"; the text is only the reason (no "refused: refused: ..." on screen).
        #expect(Self.refusal(tooBig)?.hasPrefix("refused") == false)
        // Free space is checked once the part file says how much there is.
        #expect(Self.refusal(Self.receiving(Self.offer(size: 1000), freeBytes: 500).1)?.contains("free space") == true)
        // What a partial file already holds does not need space again.
        #expect(Self.receiving(Self.offer(size: 1000), held: 600, freeBytes: 500).1.contains(.sendAccept(600)))
        // Issue 28, item 7: a resource never takes the last `keptFree` bytes of the disk (it could take all).
        let margin = Self.limits(keptFree: 2_000)
        #expect(Self.receiving(Self.offer(size: 8_000), freeBytes: 10_000, limits: margin).1.contains(.sendAccept(0)))
        #expect(
            Self.refusal(Self.receiving(Self.offer(size: 8_001), freeBytes: 10_000, limits: margin).1)
                == "not enough free space (8001 bytes needed, 10000 free, 2000 kept free)")
        // What other transfers still expect is spoken for.
        var other = Self.opening(Self.offer(size: 1000))
        #expect(
            Self.refusal(other.partOpened(.opened(path: "/p", held: 0, freeBytes: 1500), reserved: 600, at: 0))
                == "not enough free space (1000 bytes needed, 900 free)")
    }

    @Test func anUnusableDirectoryIsRefusedAsWhatItIsNotAsSpace() {
        let problem = "cannot use the download directory /x/y: Permission denied"
        for size: UInt64 in [10, 0] {  // even an empty file: nothing can be placed there
            var transfer = Self.opening(Self.offer(size: size))
            #expect(transfer.partOpened(.unusable(problem), reserved: 0, at: 0) == [.watchStalls, .end(.refused, text: problem, tell: true)])
            #expect(transfer.stage == .ended)
        }
        // A part file that cannot be made fails (as any transfer does: the sender is told).
        var failed = Self.opening(Self.offer(size: 10))
        #expect(failed.partOpened(.failed("EACCES"), reserved: 0, at: 0) == [.end(.failed, text: "EACCES", tell: true)])
    }

    // MARK: Receiving

    @Test func acceptsReceivesInOrderVerifiesAndPlaces() {
        var (transfer, opened) = Self.receiving(Self.offer("../a.txt", size: 250))
        #expect(opened == [.watchStalls, .save(partPath: "/d/.part", name: "a.txt"), .sendAccept(0), .progress])
        #expect(transfer.name == "a.txt")
        #expect(transfer.chunk(offset: 0, count: 60, at: 1) == [.write(offset: 0, skip: 0, count: 60)])
        #expect(transfer.chunk(offset: 60, count: 60, at: 1) == [.write(offset: 60, skip: 0, count: 60)])
        // Progress counts what is written, every 100 bytes.
        #expect(transfer.written(upTo: 60, at: 2).isEmpty)
        #expect(transfer.written(upTo: 120, at: 2) == [.sendAccept(120)])
        // Every byte came: verified once every byte is written.
        #expect(transfer.chunk(offset: 120, count: 130, at: 3) == [.write(offset: 120, skip: 0, count: 130)])
        #expect(transfer.written(upTo: 250, at: 4) == [.verify])
        #expect(transfer.hashed(Self.sha) == [.place(name: "a.txt")])
        #expect(transfer.placed() == [.complete])
        #expect(transfer.stage == .ended && transfer.done == 250)
        #expect(transfer.chunk(offset: 250, count: 1, at: 5).isEmpty)
    }

    @Test func onlyAFileIsSavedAndADigestThatFollowsIsWaitedFor() {
        #expect(!Self.receiving(Self.offer(size: 5, kind: .history)).1.contains { if case .save = $0 { true } else { false } })
        var (transfer, _) = Self.receiving(Self.offer(size: 5, digestFollows: true))
        #expect(transfer.chunk(offset: 0, count: 5, at: 1) == [.write(offset: 0, skip: 0, count: 5)])
        #expect(transfer.written(upTo: 5, at: 1).isEmpty)
        #expect(transfer.digest(Self.sha) == [.verify])
        #expect(transfer.digest(Self.sha).isEmpty)  // once
    }

    @Test func resumesFromAPartialFile() {
        var (transfer, actions) = Self.receiving(Self.offer(size: 1000), held: 700)
        #expect(actions == [.watchStalls, .save(partPath: "/d/.part", name: "a.txt"), .sendAccept(700), .progress])
        #expect(transfer.chunk(offset: 700, count: 300, at: 1) == [.write(offset: 700, skip: 0, count: 300)])
        // A partial file longer than the offer is not trusted: start over.
        #expect(Self.receiving(Self.offer(size: 10), held: 700).1.contains(.sendAccept(0)))
        // Complete already: straight to verification.
        let (whole, complete) = Self.receiving(Self.offer(size: 700), held: 700)
        #expect(complete == [.watchStalls, .save(partPath: "/d/.part", name: "a.txt"), .sendAccept(700), .verify, .progress])
        #expect(whole.stage == .verifying)
    }

    @Test func hostileSendersFailTheTransfer() {
        var (gap, _) = Self.receiving(Self.offer(size: 100))
        #expect(gap.chunk(offset: 10, count: 5, at: 1) == [.end(.failed, text: "chunk at 10, expected 0", tell: true)])
        var (over, _) = Self.receiving(Self.offer(size: 100))
        _ = over.chunk(offset: 0, count: 90, at: 1)
        #expect(over.chunk(offset: 90, count: 20, at: 1) == [.end(.failed, text: "the sender sent more than the 100 bytes it offered", tell: true)])
        #expect(over.stage == .ended && over.done == 90)
        var (corrupt, _) = Self.receiving(Self.offer(size: 1))
        _ = corrupt.chunk(offset: 0, count: 1, at: 1)
        #expect(corrupt.written(upTo: 1, at: 1) == [.verify])
        #expect(
            corrupt.hashed([UInt8](repeating: 1, count: 32))
                == [.end(.failed, text: "the file's SHA-256 does not match the offer; the partial file was removed", tell: true)])
    }

    @Test func cancelAndDiskFull() {
        var (transfer, _) = Self.receiving(Self.offer(size: 100))
        _ = transfer.chunk(offset: 0, count: 10, at: 1)
        #expect(transfer.cancel(byPeer: true) == [.end(.cancelled, text: "cancelled by the sender", tell: true)])
        #expect(transfer.cancel(byPeer: false).isEmpty)
        var (full, _) = Self.receiving(Self.offer(size: 100))
        #expect(full.fileFailed("No space left on device") == [.end(.failed, text: "the receiver cannot write the file: No space left on device", tell: true)])
        // Placing: too late to cancel; a failure is said as it is.
        var placing = Self.sample(.placing)
        #expect(placing.cancel(byPeer: true).isEmpty && placing.cancel(byPeer: false).isEmpty)
        #expect(placing.fileFailed("EXDEV") == [.end(.failed, text: "EXDEV", tell: true)])
        // Before it started, a cancel ends it as well.
        var opening = Self.opening(Self.offer(size: 1))
        #expect(opening.cancel(byPeer: false) == [.end(.cancelled, text: "cancelled by the receiver", tell: true)])
    }

    @Test func theSenderEnds() {
        var gaveUp = Self.sample(.receiving)
        #expect(gaveUp.senderEnded(.failed, text: "") == [.end(.failed, text: "the sender ended it", tell: false)])
        var refused = Self.sample(.lookingUp)
        #expect(refused.senderEnded(.refused, text: "bad offset") == [.end(.refused, text: "the sender: bad offset", tell: false)])
        var cancelled = Self.sample(.verifying)
        #expect(cancelled.senderEnded(.cancelled, text: "x") == [.end(.cancelled, text: "cancelled by the sender", tell: true)])
        // Every byte of a shared file here: its digest decides, not what its sender says now.
        var shared = Self.opening(Self.offer(size: 1, kind: .shared))
        _ = shared.partOpened(.opened(path: "/p", held: 1, freeBytes: 1 << 30), reserved: 0, at: 0)
        #expect(shared.stage == .verifying)
        #expect(shared.senderEnded(.failed, text: "too slow").isEmpty)
        #expect(shared.senderEnded(.cancelled, text: "").isEmpty)
    }

    @Test func aSenderFarPastWhatWasReportedIsStopped() {
        let limits = Self.limits(progressEvery: 100, maximumAhead: 500)
        var (transfer, _) = Self.receiving(Self.offer(size: 10_000), limits: limits)
        #expect(transfer.chunk(offset: 0, count: 500, at: 1) == [.write(offset: 0, skip: 0, count: 500)])
        // Nothing written yet, so nothing reported: the next byte is past the window.
        guard case .end(.failed, let text, true)? = transfer.chunk(offset: 500, count: 1, at: 1).first else {
            Issue.record("a chunk past the window was taken")
            return
        }
        #expect(text.contains("past its window"))
        #expect(transfer.stage == .ended)
        // Once progress is reported, the window moves with it.
        var (honest, _) = Self.receiving(Self.offer(size: 10_000), limits: limits)
        _ = honest.chunk(offset: 0, count: 500, at: 1)
        #expect(honest.written(upTo: 400, at: 1) == [.sendAccept(400)])
        #expect(honest.chunk(offset: 500, count: 400, at: 1) == [.write(offset: 500, skip: 0, count: 400)])
    }

    /// A hostile sender that offers the same transfer again and again (each offer is told what came)
    /// cannot pile up bytes that are not written: the window counts from what was written.
    @Test func offersMadeAgainDoNotWidenTheWindowPastWhatWasWritten() {
        let limits = Self.limits(progressEvery: 100, maximumAhead: 500)
        var (transfer, _) = Self.receiving(Self.offer(size: 10_000), limits: limits)
        _ = transfer.chunk(offset: 0, count: 500, at: 1)
        #expect(transfer.offeredAgain(Self.offer(size: 10_000), by: Self.bob.id, at: 2) == [.watchStalls, .sendAccept(500), .progress])
        guard case .end(.failed, let text, true)? = transfer.chunk(offset: 500, count: 1, at: 3).first else {
            Issue.record("a chunk past what was written, plus the window, was taken after an offer made again")
            return
        }
        #expect(text.contains("past its window"))
        // Once the bytes are written, the window moves with them.
        var (honest, _) = Self.receiving(Self.offer(size: 10_000), limits: limits)
        _ = honest.chunk(offset: 0, count: 500, at: 1)
        _ = honest.offeredAgain(Self.offer(size: 10_000), by: Self.bob.id, at: 2)
        #expect(honest.written(upTo: 500, at: 3) == [])
        #expect(honest.chunk(offset: 500, count: 500, at: 4) == [.write(offset: 500, skip: 0, count: 500)])
    }

    /// Chunks with no new byte (held already, or empty) are no progress: the stall timer goes on.
    @Test func chunksWithNoNewByteDoNotHoldOffTheStallTimer() {
        var transfer = Self.sample(.receiving)  // 60 bytes came, last progress at 1; the timeout is 1 s
        #expect(transfer.chunk(offset: 0, count: 10, at: 900).isEmpty)
        #expect(transfer.chunk(offset: 60, count: 0, at: 950).isEmpty)
        #expect(transfer.stallTimerFired(at: 1500) == [.end(.failed, text: "no data for 1 s", tell: true)])
        var fed = Self.sample(.receiving)
        #expect(fed.chunk(offset: 60, count: 1, at: 900) == [.write(offset: 60, skip: 0, count: 1)])
        #expect(fed.stallTimerFired(at: 1500).isEmpty)
    }

    // MARK: The connection

    @Test func chunksAlreadyHeldAreSkippedAfterAResume() {
        var (transfer, _) = Self.receiving(Self.offer(size: 100), limits: Self.limits(progressEvery: 1000))
        #expect(transfer.chunk(offset: 0, count: 40, at: 1) == [.write(offset: 0, skip: 0, count: 40)])
        #expect(transfer.connectionLost("gone") == [.interrupted(reason: "gone")])
        #expect(transfer.interrupted && transfer.watchedSince == nil)
        #expect(transfer.offeredAgain(Self.offer(size: 100), by: Self.bob.id, at: 5) == [.watchStalls, .sendAccept(40), .progress])
        #expect(!transfer.interrupted && transfer.watchedSince == 5)
        // A stale chunk from the old connection, wholly held: nothing; partly held: only the new bytes.
        #expect(transfer.chunk(offset: 0, count: 30, at: 6).isEmpty)
        #expect(transfer.chunk(offset: 30, count: 20, at: 6) == [.write(offset: 40, skip: 10, count: 10)])
        #expect(transfer.chunk(offset: 50, count: 50, at: 6) == [.write(offset: 50, skip: 0, count: 50)])
        // Every byte came (not yet written): offered again, nothing is asked for.
        #expect(transfer.offeredAgain(Self.offer(size: 100), by: Self.bob.id, at: 7) == [.watchStalls, .progress])
        // Past the end is still refused.
        var (over, _) = Self.receiving(Self.offer(size: 10))
        guard case .end(.failed, _, true)? = over.chunk(offset: 0, count: 20, at: 1).first else {
            Issue.record("a chunk past the end was not refused")
            return
        }
    }

    @Test func offeredAgain() {
        var transfer = Self.sample(.receiving)
        // Not the same offer (another peer, size or digest): nothing.
        #expect(transfer.offeredAgain(Self.offer(size: 100, digestFollows: true), by: SessionStateMachineTests.peerID(0x30), at: 2).isEmpty)
        #expect(transfer.offeredAgain(Self.offer(size: 99, digestFollows: true), by: Self.bob.id, at: 2).isEmpty)
        #expect(transfer.offeredAgain(Self.offer(size: 100), by: Self.bob.id, at: 2).isEmpty)
        // Every byte here but the digest was lost with the connection: an accept at the end asks for it again.
        var awaiting = Self.sample(.awaitingDigest)
        _ = awaiting.connectionLost("gone")
        #expect(awaiting.offeredAgain(Self.offer(size: 100, digestFollows: true), by: Self.bob.id, at: 2) == [.watchStalls, .sendAccept(100), .progress])
        // While the connection is gone, progress goes to no one.
        var quiet = Self.sample(.receiving)
        _ = quiet.connectionLost("gone")
        #expect(quiet.written(upTo: 60, at: 3).isEmpty)
    }

    @Test func whatEndsWithItsConnection() {
        // A history (or a shared file) being received ends with its connection; a file waits.
        var (history, _) = Self.receiving(Self.offer(size: 10, kind: .history))
        #expect(history.connectionLost("gone") == [.end(.failed, text: "gone", tell: true)])
        var placingHistory = Self.opening(Self.offer(size: 0, kind: .history))
        _ = placingHistory.partOpened(.opened(path: "/p", held: 0, freeBytes: 1 << 30), reserved: 0, at: 0)
        #expect(placingHistory.hashed(Self.sha) == [.place(name: "a.txt")])
        #expect(placingHistory.connectionLost("gone") == [.interrupted(reason: "gone")])
        // Not started: forgotten (the next offer starts over).
        var lookingUp = Self.sample(.lookingUp)
        #expect(lookingUp.connectionLost("gone") == [.forget(reason: "gone", partOpening: false)])
        var opening = Self.sample(.opening)
        #expect(opening.connectionLost("gone") == [.forget(reason: "gone", partOpening: true)])
    }

    @Test func aStalledTransferFails() {
        var transfer = Self.sample(.receiving)  // last progress at 1; the timeout is 1 s
        #expect(transfer.stallTimerFired(at: 1000).isEmpty)
        #expect(transfer.written(upTo: 55, at: 500) == [])
        #expect(transfer.stallTimerFired(at: 1001).isEmpty)
        #expect(transfer.stallTimerFired(at: 1500) == [.end(.failed, text: "no data for 1 s", tell: true)])
    }
}
