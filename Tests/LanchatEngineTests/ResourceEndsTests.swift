import LanchatCore
@testable import LanchatEngine
import LanchatWire
import Testing

/// Both ends of a transfer together, the sending `OutgoingTransfer` and the receiving `IncomingTransfer`,
/// with random sizes, chunk sizes, windows, resume points and dropped connections: every byte is written
/// exactly once, and what is sent twice is exactly what was lost in flight.
@Suite struct ResourceEndsTests {
    typealias Action = IncomingTransfer.Action

    static func receiver(size: UInt64, held: UInt64, progressEvery: UInt64) -> (IncomingTransfer, [Action]) {
        var limits = IncomingTransferTests.limits(progressEvery: progressEvery)
        limits.maximumSize = 1 << 20
        return IncomingTransferTests.receiving(IncomingTransferTests.offer("f", size: size), held: held, freeBytes: 1 << 20, limits: limits)
    }

    static func sender(size: UInt64, chunkSize: Int, window: UInt64) -> OutgoingTransfer {
        var limits = OutgoingTransferTests.limits(chunkSize: chunkSize, window: window)
        limits.sentMarkAhead = 0
        return OutgoingTransferTests.offered(size: size, ephemeral: false, limits: limits)
    }

    /// Does what the sender's actions ask (each read answered at once). Returns the chunks it sent.
    static func send(_ actions: [OutgoingTransfer.Action], _ sender: inout OutgoingTransfer) -> [(offset: UInt64, count: Int)] {
        var chunks: [(offset: UInt64, count: Int)] = []
        var pending = actions
        var read = 0
        while !pending.isEmpty {
            switch pending.removeFirst() {
            case .read(let offset, let count):
                read = count
                pending += sender.fileRead(offset: offset, bytes: count, digest: nil, linked: true)
            case .sendChunk(let offset): chunks.append((offset, read))
            default: break
            }
        }
        return chunks
    }

    /// Does what the receiver's actions ask (each write done at once, in order; the hash matching).
    /// Returns the offsets for the sender (RESOURCE_ACCEPT).
    static func apply(_ actions: [Action], _ receiver: inout IncomingTransfer, written: inout UInt64, placed: inout Bool) -> [UInt64] {
        var accepts: [UInt64] = []
        var pending = actions
        while !pending.isEmpty {
            switch pending.removeFirst() {
            case .sendAccept(let offset): accepts.append(offset)
            case .write(let offset, _, let count):
                #expect(offset == written)
                written += UInt64(count)
                pending += receiver.written(upTo: written, at: 0)
            case .verify: pending += receiver.hashed(IncomingTransferTests.sha)
            case .place: pending += receiver.placed()
            case .complete: placed = true
            default: break
            }
        }
        return accepts
    }

    @Test func bothEndsTogetherMoveEveryByteOnce() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let size = UInt64.random(in: 0...5000, using: &generator)
            let partial = UInt64.random(in: 0...size, using: &generator)
            // The protocol's rule: a receiver reports progress at least every `progressEvery` bytes, and a
            // sender's window is at least twice that (else both would wait for each other).
            let progressEvery = UInt64.random(in: 1...900, using: &generator)
            var sender = Self.sender(
                size: size, chunkSize: .random(in: 1...700, using: &generator),
                window: .random(in: (2 * progressEvery)...(2 * progressEvery + 3000), using: &generator))
            var (receiver, opened) = Self.receiver(size: size, held: partial, progressEvery: progressEvery)
            var written = partial
            var placed = false
            var accepts = Self.apply(opened, &receiver, written: &written, placed: &placed)
            var inFlight: [(offset: UInt64, count: Int)] = []
            while true {
                for offset in accepts { inFlight += Self.send(sender.accepted(offset, at: 0, linked: true), &sender) }
                guard !inFlight.isEmpty else { break }
                let chunk = inFlight.removeFirst()
                accepts = Self.apply(receiver.chunk(offset: chunk.offset, count: chunk.count, at: 0), &receiver, written: &written, placed: &placed)
            }
            #expect(sender.status == .active)
            #expect(written == size && placed && receiver.stage == .ended)
        }
    }

    @Test func dropsAndResumesWriteEveryByteOnceAndCountWhatIsSentTwice() {
        // Random drops: chunks in flight are lost (some of them), the sender offers again, the receiver
        // says where it is, the sender goes on from there. Every byte is written once; what the sender
        // sent twice is exactly what was lost in flight, so at most one window per drop.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let size = UInt64.random(in: 1...20_000, using: &generator)
            let window = UInt64.random(in: 200...3000, using: &generator)
            var sender = Self.sender(size: size, chunkSize: .random(in: 1...300, using: &generator), window: window)
            var (receiver, opened) = Self.receiver(size: size, held: 0, progressEvery: window / 2)
            var written: UInt64 = 0
            var lost: UInt64 = 0
            var drops = 0
            var inFlight: [(offset: UInt64, count: Int)] = []
            var placed = false
            var toSender = Self.apply(opened, &receiver, written: &written, placed: &placed)
            while !placed {
                for offset in toSender { inFlight += Self.send(sender.accepted(offset, at: 0, linked: true), &sender) }
                toSender = []
                if drops < 5, Int.random(in: 0..<8, using: &generator) == 0, !inFlight.isEmpty {
                    // The connection drops: a random tail of what is in flight never arrives, nor does
                    // what the receiver answers to the rest.
                    let kept = Int.random(in: 0..<inFlight.count, using: &generator)
                    lost += inFlight[kept...].reduce(0) { $0 + UInt64($1.count) }
                    inFlight.removeSubrange(kept...)
                    for chunk in inFlight {
                        _ = Self.apply(receiver.chunk(offset: chunk.offset, count: chunk.count, at: 0), &receiver, written: &written, placed: &placed)
                    }
                    inFlight = []
                    drops += 1
                    _ = sender.connectionLost("dropped")
                    #expect(sender.status == .waiting)
                    #expect(sender.connected(at: 0).first == .sendOffer)
                    _ = receiver.connectionLost("dropped")
                    let again = receiver.offeredAgain(receiver.offer, by: receiver.peer.id, at: 0)
                    toSender = Self.apply(again, &receiver, written: &written, placed: &placed)
                    continue
                }
                guard !inFlight.isEmpty else { break }
                let chunk = inFlight.removeFirst()
                toSender = Self.apply(receiver.chunk(offset: chunk.offset, count: chunk.count, at: 0), &receiver, written: &written, placed: &placed)
            }
            #expect(written == size && placed)
            #expect(sender.resent == lost)
            #expect(sender.resent <= UInt64(drops) * sender.window)
        }
    }
}
