import LanchatCore
@testable import LanchatEngine
import LanchatWire
import Testing

/// `OutgoingTransfer`, one input at a time: each input in each state, the legal ones and the refused
/// ones, and what it decides (the cases of the former `OutgoingResource` tests among them).
@Suite struct OutgoingTransferTests {
    typealias Action = OutgoingTransfer.Action
    static let bob = IncomingTransferTests.bob
    static let sha = IncomingTransferTests.sha

    static func limits(chunkSize: Int = 300, window: UInt64 = 600) -> TransferLimits {
        var limits = TransferLimits()
        limits.chunkSize = chunkSize
        limits.window = window
        limits.sentMarkAhead = 100
        limits.stallTimeout = 1000
        limits.offerTimeout = 500
        return limits
    }

    static func file(size: UInt64) -> OfferedFile {
        OfferedFile(path: "/home/a/f.bin", name: "f.bin", size: size, modifiedMilliseconds: 5, identity: "1:2")
    }

    /// Offered at 0 (`digestFollows`: the digest is learnt by reading every byte).
    static func offered(
        size: UInt64, digestFollows: Bool = false, ephemeral: Bool = true, limits: TransferLimits = limits()
    ) -> OutgoingTransfer {
        let file = file(size: size)
        let offer = SessionStateMachine.offer(
            WireID(bytes: [UInt8](repeating: 3, count: 16))!, file, kind: .file, room: nil, digest: digestFollows ? nil : sha)
        return OutgoingTransfer(peer: bob, file: file, offer: offer, ephemeral: ephemeral, relayAnswer: false, limits: limits, at: 0)
    }

    /// The reads asked for.
    static func reads(_ actions: [Action]) -> [UInt64] {
        actions.compactMap { if case .read(let offset, _) = $0 { offset } else { nil } }
    }

    // MARK: Each input in each state

    enum Sample: String, CaseIterable { case offered, active, reading, waiting, ended }

    /// 1000 bytes (the digest follows): `active` accepted from 100 with nothing read yet; `reading` has
    /// a read under way.
    static func sample(_ sample: Sample) -> OutgoingTransfer {
        var transfer = offered(size: 1000, digestFollows: true)
        switch sample {
        case .offered: break
        case .active: _ = transfer.accepted(100, at: 1, linked: false)
        case .reading: #expect(reads(transfer.accepted(100, at: 1, linked: true)) == [100])
        case .waiting:
            transfer = offered(size: 1000, digestFollows: true, ephemeral: false)
            _ = transfer.connectionLost("gone")
        case .ended: _ = transfer.cancel()
        }
        return transfer
    }

    static var table: [(input: String, takenIn: Set<Sample>, apply: (inout OutgoingTransfer) -> [Action])] {
        [
            ("accepted", [.offered, .active, .reading], { $0.accepted(100, at: 2, linked: true) }),
            ("fileRead", [.reading], { $0.fileRead(offset: 100, bytes: 300, digest: nil, linked: true) }),
            ("connected", Set(Sample.allCases).subtracting([.ended]), { $0.connected(at: 2) }),
            ("connectionLost", Set(Sample.allCases).subtracting([.ended]), { $0.connectionLost("gone") }),
            ("timerFired", [.offered, .active, .reading], { $0.timerFired(at: 100_000) }),
            ("receiverEnded", Set(Sample.allCases).subtracting([.ended]), { $0.receiverEnded(.failed, text: "") }),
            ("cancel", Set(Sample.allCases).subtracting([.ended]), { $0.cancel() }),
            ("fail", Set(Sample.allCases).subtracting([.ended]), { $0.fail("EIO") }),
        ]
    }

    @Test func everyInputInEveryState() {
        for row in Self.table {
            for sample in Sample.allCases {
                var transfer = Self.sample(sample)
                let before = transfer
                let actions = row.apply(&transfer)
                if row.takenIn.contains(sample) {
                    #expect(!actions.isEmpty, "\(row.input) in \(sample) is taken")
                } else {
                    #expect(actions.isEmpty, "\(row.input) in \(sample) is refused")
                    #expect(transfer == before, "\(row.input) in \(sample) changes nothing")
                }
            }
        }
        #expect(Sample.allCases.map { Self.sample($0).status } == [.offered, .active, .active, .waiting, .cancelled])
    }

    // MARK: Sending

    @Test func sendsWithinTheWindowAndResumes() {
        var transfer = Self.offered(size: 1000)
        // The receiver already holds 100 bytes: one read at a time, within the window (600).
        #expect(
            transfer.accepted(100, at: 1, linked: true) == [.watch(at: 1001), .sendDigest(Self.sha), .progress(error: nil), .read(offset: 100, count: 300)])
        #expect(transfer.fileRead(offset: 100, bytes: 300, digest: nil, linked: true) == [.sendChunk(offset: 100), .read(offset: 400, count: 300)])
        #expect(transfer.fileRead(offset: 400, bytes: 300, digest: nil, linked: true) == [.sendChunk(offset: 400)])  // window full
        #expect(transfer.accepted(400, at: 2, linked: true) == [.watch(at: 1002), .progress(error: nil), .read(offset: 700, count: 300)])
        #expect(transfer.fileRead(offset: 700, bytes: 300, digest: nil, linked: true) == [.sendChunk(offset: 700)])
        #expect(transfer.isFinishedSending)
        #expect(transfer.accepted(2000, at: 3, linked: true) == [.end(.failed, told: "bad offset 2000", error: "the receiver sent a bad offset", cancelledHere: false)])
        var backwards = Self.offered(size: 1000)
        _ = backwards.accepted(100, at: 1, linked: true)
        #expect(backwards.accepted(50, at: 1, linked: true).first == .end(.failed, told: "bad offset 50", error: "the receiver sent a bad offset", cancelledHere: false))
        // Not past what was sent either; the same offset again is no progress (no new watch).
        var ahead = Self.offered(size: 1000)
        _ = ahead.accepted(0, at: 1, linked: true)
        #expect(ahead.accepted(0, at: 2, linked: true) == [.progress(error: nil)])
        #expect(ahead.accepted(301, at: 2, linked: true).first == .end(.failed, told: "bad offset 301", error: "the receiver sent a bad offset", cancelledHere: false))
    }

    @Test func emptyAndExactSizesAndTheDigest() {
        var empty = Self.offered(size: 0)
        #expect(Self.reads(empty.accepted(0, at: 1, linked: true)).isEmpty && empty.isFinishedSending)
        var exact = Self.offered(size: 256, limits: Self.limits(chunkSize: 128, window: 1024))
        #expect(Self.reads(exact.accepted(0, at: 1, linked: true)) == [0])
        #expect(exact.fileRead(offset: 0, bytes: 128, digest: nil, linked: true) == [.sendChunk(offset: 0), .read(offset: 128, count: 128)])
        #expect(exact.fileRead(offset: 128, bytes: 128, digest: nil, linked: true) == [.sendChunk(offset: 128)])
        // Hashed while sent: the digest goes once every byte is read (a read of nothing, if need be).
        var hashed = Self.offered(size: 10, digestFollows: true, limits: Self.limits(chunkSize: 10))
        _ = hashed.accepted(0, at: 1, linked: true)
        #expect(hashed.fileRead(offset: 0, bytes: 10, digest: Self.sha, linked: true) == [.sendChunk(offset: 0), .sendDigest(Self.sha)])
        var late = Self.offered(size: 10, digestFollows: true, limits: Self.limits(chunkSize: 10))
        _ = late.accepted(0, at: 1, linked: true)
        #expect(late.fileRead(offset: 0, bytes: 10, digest: nil, linked: true) == [.sendChunk(offset: 0), .read(offset: 10, count: 0)])
        #expect(late.fileRead(offset: 10, bytes: 0, digest: Self.sha, linked: true) == [.sendDigest(Self.sha)])
        // Known beforehand: said again at each accept (a receiver that restarted lost it).
        var known = Self.offered(size: 10, limits: Self.limits(chunkSize: 10))
        #expect(known.accepted(0, at: 1, linked: false) == [.watch(at: 1001), .sendDigest(Self.sha), .progress(error: nil)])
    }

    @Test func theSentMarkIsWrittenAhead() {
        var transfer = Self.offered(size: 1000, ephemeral: false)
        #expect(
            transfer.accepted(0, at: 1, linked: true) == [
                .watch(at: 1001), .sendDigest(Self.sha), .progress(error: nil), .saveSentMark(400), .read(offset: 0, count: 300),
            ])
        #expect(transfer.fileRead(offset: 0, bytes: 300, digest: nil, linked: true) == [.sendChunk(offset: 0), .saveSentMark(700), .read(offset: 300, count: 300)])
    }

    // MARK: Connections

    @Test func aReadOfAnEarlierConnectionIsNotSent() {
        var transfer = Self.offered(size: 1000, ephemeral: false)
        _ = transfer.accepted(0, at: 1, linked: true)
        #expect(transfer.connectionLost("gone") == [.progress(error: "gone; resumes when bob is back")])
        #expect(transfer.status == .waiting && transfer.deadline == nil)
        #expect(transfer.connected(at: 5) == [.sendOffer, .watch(at: 505)])
        #expect(transfer.fileRead(offset: 0, bytes: 300, digest: nil, linked: true).isEmpty)
        // Accepted again from where the receiver is: what it lacks is sent again (and counted).
        #expect(Self.reads(transfer.accepted(0, at: 6, linked: true)) == [0])
        #expect(transfer.resent == 300)
    }

    @Test func aRestartedSenderCountsWhatItMaySendTwice() {
        let file = Self.file(size: 1000)
        let offer = SessionStateMachine.offer(WireID(bytes: [UInt8](repeating: 3, count: 16))!, file, kind: .file, room: nil, digest: Self.sha)
        var transfer = OutgoingTransfer(
            restored: Self.bob, file: file, offer: offer, sentMark: 600, resent: 50, limits: Self.limits(chunkSize: 100, window: 400))
        #expect(transfer.status == .waiting)
        _ = transfer.connected(at: 1)
        // Accepted before the restart: answered late is fine (ten times the stall time).
        #expect(transfer.deadline?.at == 10_001)
        #expect(transfer.accepted(350, at: 2, linked: true) == [.watch(at: 1002), .saveResent(300), .progress(error: nil), .read(offset: 350, count: 100)])
        #expect(transfer.resent == 300)
    }

    @Test func anExportEndsWithItsConnection() {
        var export = Self.offered(size: 10)
        #expect(export.connectionLost("gone") == [.end(.failed, told: nil, error: "gone", cancelledHere: false)])
    }

    @Test func deadlines() {
        var transfer = Self.offered(size: 1000)
        #expect(transfer.deadline?.at == 500 && transfer.deadline?.problem == "not accepted within 0 s")
        #expect(transfer.timerFired(at: 499).isEmpty)
        _ = transfer.accepted(0, at: 10, linked: false)
        #expect(transfer.deadline?.at == 1010 && transfer.deadline?.problem == "nothing acknowledged for 1 s")
        #expect(transfer.timerFired(at: 1010) == [.end(.failed, told: "nothing acknowledged for 1 s", error: "nothing acknowledged for 1 s", cancelledHere: false)])
        // Every byte sent: ten times as long (the receiver checks and places it).
        var sent = Self.offered(size: 10, limits: Self.limits(chunkSize: 10))
        _ = sent.accepted(0, at: 10, linked: true)
        _ = sent.fileRead(offset: 0, bytes: 10, digest: nil, linked: true)
        #expect(sent.deadline?.at == 10_010)
    }

    @Test func ends() {
        // "Received before": shown as done in full.
        var complete = Self.offered(size: 1000)
        #expect(complete.receiverEnded(.complete, text: "") == [.end(.complete, told: nil, error: nil, cancelledHere: false)])
        #expect(complete.acknowledged == 1000 && complete.status == .complete)
        // Every byte not sent: what was acknowledged stays.
        var partly = Self.offered(size: 1000)
        _ = partly.accepted(200, at: 1, linked: true)
        _ = partly.receiverEnded(.complete, text: "")
        #expect(partly.acknowledged == 200)
        var cancelled = Self.offered(size: 1000)
        #expect(cancelled.cancel() == [.end(.cancelled, told: "cancelled by the sender", error: "cancelled here", cancelledHere: true)])
        #expect(cancelled.cancel().isEmpty)
        var refused = Self.offered(size: 1000)
        #expect(refused.receiverEnded(.refused, text: "too big") == [.end(.refused, told: nil, error: "too big", cancelledHere: false)])
        var failed = Self.sample(.reading)
        #expect(failed.fail("the file changed") == [.end(.failed, told: "the file changed", error: "the file changed", cancelledHere: false)])
    }
}
