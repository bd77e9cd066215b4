@testable import LanchatTransfer
import Testing

@Suite struct IncomingResourceTests {
    let limits = IncomingResource.Limits(maximumSize: 1 << 30, freeBytes: 1 << 30, progressEvery: 100)

    @Test func acceptsReceivesInOrderVerifiesAndPlaces() {
        var (machine, actions) = IncomingResource.offer(rawName: Array("../a.txt".utf8), size: 250, limits: limits, partialBytes: 0)
        #expect(actions == [.sendAccept(0)])
        #expect(machine.name == "a.txt")
        #expect(machine.chunk(offset: 0, count: 60) == [.write(offset: 0, count: 60)])
        #expect(machine.chunk(offset: 60, count: 60) == [.write(offset: 60, count: 60)])
        // Progress counts what is written, every 100 bytes.
        #expect(machine.written(upTo: 60).isEmpty)
        #expect(machine.written(upTo: 120) == [.sendAccept(120)])
        #expect(machine.reported == 120)
        #expect(machine.chunk(offset: 120, count: 130) == [.write(offset: 120, count: 130), .verify])
        #expect(machine.verified(true) == [.place(name: "a.txt"), .end(status: .complete, text: "", removePart: false)])
        #expect(machine.state == .done(.complete))
        #expect(machine.chunk(offset: 250, count: 1).isEmpty)
    }

    @Test func resumesFromAPartialFile() {
        var (machine, actions) = IncomingResource.offer(rawName: Array("big.iso".utf8), size: 1000, limits: limits, partialBytes: 700)
        #expect(actions == [.sendAccept(700)])
        #expect(machine.chunk(offset: 700, count: 300) == [.write(offset: 700, count: 300), .verify])
        // A partial file longer than the offer is not trusted: start over.
        let (_, over) = IncomingResource.offer(rawName: Array("big.iso".utf8), size: 10, limits: limits, partialBytes: 700)
        #expect(over == [.sendAccept(0)])
        // Complete already: straight to verification.
        let (_, whole) = IncomingResource.offer(rawName: Array("big.iso".utf8), size: 700, limits: limits, partialBytes: 700)
        #expect(whole == [.sendAccept(700), .verify])
    }

    @Test func refusesWithReasons() {
        func reason(_ actions: [IncomingResource.Action]) -> String? {
            if case .end(.refused, let text, false)? = actions.first { return text }
            return nil
        }
        let tooBig = IncomingResource.offer(rawName: Array("x".utf8), size: 2 << 30, limits: limits, partialBytes: 0).1
        #expect(reason(tooBig)?.contains("over this peer's limit") == true)
        let small = IncomingResource.Limits(maximumSize: 1 << 30, freeBytes: 500)
        #expect(reason(IncomingResource.offer(rawName: Array("x".utf8), size: 1000, limits: small, partialBytes: 0).1)?.contains("free space") == true)
        // What a partial file already holds does not need space again.
        #expect(IncomingResource.offer(rawName: Array("x".utf8), size: 1000, limits: small, partialBytes: 600).1 == [.sendAccept(600)])
        #expect(reason(IncomingResource.offer(rawName: [], size: 1, limits: limits, partialBytes: 0).1)?.contains("empty") == true)
        #expect(reason(IncomingResource.offer(rawName: Array("..".utf8), size: 1, limits: limits, partialBytes: 0).1) != nil)
        // Issue 28, item 7: a resource never takes the last `keptFree` bytes of the disk (it could take all).
        let margin = IncomingResource.Limits(maximumSize: 1 << 30, freeBytes: 10_000, keptFree: 2_000)
        #expect(IncomingResource.offer(rawName: Array("x".utf8), size: 8_000, limits: margin, partialBytes: 0).1 == [.sendAccept(0)])
        #expect(
            reason(IncomingResource.offer(rawName: Array("x".utf8), size: 8_001, limits: margin, partialBytes: 0).1)
                == "not enough free space (8001 bytes needed, 10000 free, 2000 kept free)")
        // The status says "refused"; the text is only the reason (no "refused: refused: ..." on screen).
        #expect(reason(tooBig)?.hasPrefix("refused") == false)
    }

    @Test func anUnusableDirectoryIsRefusedAsWhatItIsNotAsSpace() {
        let problem = "cannot use the download directory /x/y: Permission denied"
        let broken = IncomingResource.Limits(maximumSize: 1 << 30, freeBytes: 0, storageProblem: problem)
        let (machine, actions) = IncomingResource.offer(rawName: Array("a.txt".utf8), size: 10, limits: broken, partialBytes: 0)
        #expect(actions == [.end(status: .refused, text: problem, removePart: false)])
        #expect(machine.state == .done(.refused))
        // Even an empty file: nothing can be placed there.
        #expect(
            IncomingResource.offer(rawName: Array("e".utf8), size: 0, limits: broken, partialBytes: 0).1.first
                == .end(status: .refused, text: problem, removePart: false))
        // A bad name is still refused as a bad name (it says what the sender can change).
        #expect(
            IncomingResource.offer(rawName: [], size: 1, limits: broken, partialBytes: 0).1.first
                != .end(status: .refused, text: problem, removePart: false))
    }

    @Test func hostileSendersFailTheTransfer() {
        var (gap, _) = IncomingResource.offer(rawName: Array("a".utf8), size: 100, limits: limits, partialBytes: 0)
        #expect(gap.chunk(offset: 10, count: 5) == [.end(status: .failed, text: "chunk at 10, expected 0", removePart: false)])
        var (over, _) = IncomingResource.offer(rawName: Array("a".utf8), size: 100, limits: limits, partialBytes: 0)
        _ = over.chunk(offset: 0, count: 90)
        guard case .end(.failed, _, true)? = over.chunk(offset: 90, count: 20).first else {
            Issue.record("more than offered must fail and remove the partial file")
            return
        }
        var (corrupt, _) = IncomingResource.offer(rawName: Array("a".utf8), size: 1, limits: limits, partialBytes: 0)
        _ = corrupt.chunk(offset: 0, count: 1)
        guard case .end(.failed, let text, true)? = corrupt.verified(false).first else {
            Issue.record("a hash mismatch must fail and remove the partial file")
            return
        }
        #expect(text.contains("SHA-256"))
    }

    @Test func cancelAndDiskFull() {
        var (machine, _) = IncomingResource.offer(rawName: Array("a".utf8), size: 100, limits: limits, partialBytes: 0)
        _ = machine.chunk(offset: 0, count: 10)
        #expect(machine.cancel(byPeer: true) == [.end(status: .cancelled, text: "cancelled by the sender", removePart: true)])
        #expect(machine.cancel(byPeer: false).isEmpty)
        var (full, _) = IncomingResource.offer(rawName: Array("a".utf8), size: 100, limits: limits, partialBytes: 0)
        #expect(full.writeFailed("No space left on device") == [.end(status: .failed, text: "No space left on device", removePart: true)])
    }
}

@Suite struct OutgoingResourceTests {
    @Test func sendsWithinTheWindowAndResumes() throws {
        var machine = OutgoingResource(size: 1000, chunkSize: 300, window: 600)
        #expect(machine.nextChunk() == nil)  // not accepted yet
        try machine.accepted(100)  // the receiver already holds 100 bytes
        #expect(machine.nextChunk()! == (100, 300))
        #expect(machine.nextChunk()! == (400, 300))
        #expect(machine.nextChunk() == nil)  // 600 in flight: window full
        try machine.accepted(400)
        #expect(machine.nextChunk()! == (700, 300))
        #expect(machine.isFinishedSending)
        #expect(machine.nextChunk() == nil)
        #expect(throws: OutgoingResource.Failure.self) { try machine.accepted(2000) }
        #expect(throws: OutgoingResource.Failure.self) { try machine.accepted(50) }  // backwards
    }

    @Test func emptyAndExactSizes() throws {
        var empty = OutgoingResource(size: 0)
        try empty.accepted(0)
        #expect(empty.nextChunk() == nil && empty.isFinishedSending)
        var exact = OutgoingResource(size: 256, chunkSize: 128, window: 1024)
        try exact.accepted(0)
        #expect(exact.nextChunk()! == (0, 128) && exact.nextChunk()! == (128, 128) && exact.nextChunk() == nil)
    }

    @Test func bothEndsTogetherMoveEveryByteOnce() throws {
        // Random sizes, chunk sizes, windows and a resume point: every byte is written exactly once.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let size = UInt64.random(in: 0...5000, using: &generator)
            let partial = UInt64.random(in: 0...size, using: &generator)
            // The protocol's rule: a receiver reports progress at least every `progressEvery` bytes, and a
            // sender's window is at least twice that (else both would wait for each other).
            let progressEvery = UInt64.random(in: 1...900, using: &generator)
            var sender = OutgoingResource(
                size: size, chunkSize: .random(in: 1...700, using: &generator),
                window: .random(in: (2 * progressEvery)...(2 * progressEvery + 3000), using: &generator))
            var (receiver, actions) = IncomingResource.offer(
                rawName: Array("f".utf8), size: size, limits: .init(maximumSize: 10_000, freeBytes: 10_000, progressEvery: progressEvery),
                partialBytes: partial)
            var written = partial
            var pending = actions
            var verified = false
            while !pending.isEmpty
                || sender.nextChunk().map({ chunk -> Bool in
                    pending = receiver.chunk(offset: chunk.offset, count: chunk.count); return true
                }) == true
            {
                let action = pending.removeFirst()
                switch action {
                case .sendAccept(let offset): try sender.accepted(offset)
                case .write(let offset, let count):
                    #expect(offset == written)
                    written += UInt64(count)
                    pending += receiver.written(upTo: written)
                case .verify: pending += receiver.verified(true); verified = true
                case .place, .end: break
                }
            }
            #expect(written == size && verified && receiver.state == .done(.complete))
        }
    }

    @Test func dropsAndResumesWriteEveryByteOnceAndCountWhatIsSentTwice() throws {
        // Random drops: chunks in flight are lost (some of them), the sender offers again, the receiver
        // says where it is, the sender goes on from there. Every byte is written once; what the sender
        // sent twice is exactly what was lost in flight, so at most one window per drop.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let size = UInt64.random(in: 1...20_000, using: &generator)
            let window = UInt64.random(in: 200...3000, using: &generator)
            var sender = OutgoingResource(size: size, chunkSize: .random(in: 1...300, using: &generator), window: window)
            var (receiver, first) = IncomingResource.offer(
                rawName: Array("f".utf8), size: size, limits: .init(maximumSize: 1 << 20, freeBytes: 1 << 20, progressEvery: window / 2),
                partialBytes: 0)
            var written: UInt64 = 0
            var lost: UInt64 = 0
            var drops = 0
            var inFlight: [(offset: UInt64, count: Int)] = []
            var toSender = first
            var done = false
            while !done {
                for action in toSender {
                    if case .sendAccept(let offset) = action { try sender.accepted(offset) }
                }
                toSender = []
                while let chunk = sender.nextChunk() { inFlight.append(chunk) }
                if drops < 5, Int.random(in: 0..<8, using: &generator) == 0, !inFlight.isEmpty {
                    // The connection drops: a random tail of what is in flight never arrives.
                    let kept = Int.random(in: 0..<inFlight.count, using: &generator)
                    lost += inFlight[kept...].reduce(0) { $0 + UInt64($1.count) }
                    inFlight.removeSubrange(kept...)
                    for chunk in inFlight { written += Self.apply(receiver.chunk(offset: chunk.offset, count: chunk.count), &receiver, &done) }
                    inFlight = []
                    drops += 1
                    sender.interrupted()
                    #expect(sender.nextChunk() == nil)
                    toSender = receiver.resumed()
                    continue
                }
                guard !inFlight.isEmpty else { break }
                let chunk = inFlight.removeFirst()
                let actions = receiver.chunk(offset: chunk.offset, count: chunk.count)
                written += Self.apply(actions, &receiver, &done)
                toSender = receiver.written(upTo: written)
            }
            #expect(written == size && receiver.state == .done(.complete))
            #expect(sender.resent == lost)
            #expect(sender.resent <= UInt64(drops) * sender.window)
        }
    }

    /// Applies a receiver's actions; returns the bytes written.
    private static func apply(_ actions: [IncomingResource.Action], _ receiver: inout IncomingResource, _ done: inout Bool) -> UInt64 {
        var written: UInt64 = 0
        for action in actions {
            switch action {
            case .write(_, let count): written += UInt64(count)
            case .verify:
                _ = receiver.verified(true)
                done = true
            default: break
            }
        }
        return written
    }

    @Test func aSenderFarPastWhatWasReportedIsStopped() {
        var (machine, _) = IncomingResource.offer(
            rawName: Array("f".utf8), size: 10_000, limits: .init(maximumSize: 1 << 20, freeBytes: 1 << 20, progressEvery: 100, maximumAhead: 500),
            partialBytes: 0)
        #expect(machine.chunk(offset: 0, count: 500) == [.write(offset: 0, count: 500)])
        // Nothing written yet, so nothing reported: the next byte is past the window.
        guard case .end(.failed, let text, true)? = machine.chunk(offset: 500, count: 1).first else {
            Issue.record("a chunk past the window was taken")
            return
        }
        #expect(text.contains("past its window"))
        #expect(machine.state == .done(.failed))
        // Once progress is reported, the window moves with it.
        var (honest, _) = IncomingResource.offer(
            rawName: Array("f".utf8), size: 10_000, limits: .init(maximumSize: 1 << 20, freeBytes: 1 << 20, progressEvery: 100, maximumAhead: 500),
            partialBytes: 0)
        _ = honest.chunk(offset: 0, count: 500)
        #expect(honest.written(upTo: 400) == [.sendAccept(400)])
        #expect(honest.chunk(offset: 500, count: 400) == [.write(offset: 500, count: 400)])
    }

    @Test func chunksAlreadyHeldAreSkippedAfterAResume() {
        var (machine, _) = IncomingResource.offer(
            rawName: Array("f".utf8), size: 100, limits: .init(maximumSize: 1000, freeBytes: 1000, progressEvery: 1000), partialBytes: 0)
        #expect(machine.chunk(offset: 0, count: 40) == [.write(offset: 0, count: 40)])
        #expect(machine.resumed() == [.sendAccept(40)])
        // A stale chunk from the old connection, wholly held: nothing; partly held: only the new bytes.
        #expect(machine.chunk(offset: 0, count: 30).isEmpty)
        #expect(machine.chunk(offset: 30, count: 20) == [.write(offset: 40, count: 10)])
        #expect(machine.chunk(offset: 50, count: 50) == [.write(offset: 50, count: 50), .verify])
        #expect(machine.resumed().isEmpty)
        // Past the end is still refused.
        var (over, _) = IncomingResource.offer(
            rawName: Array("f".utf8), size: 10, limits: .init(maximumSize: 1000, freeBytes: 1000), partialBytes: 0)
        guard case .end(.failed, _, true)? = over.chunk(offset: 0, count: 20).first else {
            Issue.record("a chunk past the end was not refused")
            return
        }
    }

    @Test func aRestartedSenderCountsWhatItMaySendTwice() throws {
        var sender = OutgoingResource(size: 1000, chunkSize: 100, window: 400, alreadySent: 600, resent: 50)
        try sender.accepted(350)
        #expect(sender.resent == 300)
        #expect(sender.nextChunk()! == (350, 100))
    }
}
