@testable import LanchatTransfer
import Testing

/// The sending end alone (both ends together: LanchatEngineTests' `ResourceEndsTests`, with the
/// receiving end, `IncomingTransfer`).
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

    @Test func aRestartedSenderCountsWhatItMaySendTwice() throws {
        var sender = OutgoingResource(size: 1000, chunkSize: 100, window: 400, alreadySent: 600, resent: 50)
        try sender.accepted(350)
        #expect(sender.resent == 300)
        #expect(sender.nextChunk()! == (350, 100))
    }
}
