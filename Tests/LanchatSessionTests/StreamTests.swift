import LanchatCore
import LanchatEngine
@testable import LanchatSession
import NIOCore
import Testing

/// Streams between two nodes over real connections: bytes, ends, credit, aborts, and the records the
/// node keeps of them.
@Suite(.serialized) struct StreamTests {
    @Test func bytesGoBothWaysWithEndsAndCredit() async throws {
        let (alice, bob) = try await TestNode.aliceAndBobInLab()
        let accepting = Task { try await bob.node.acceptStream("echo", isAlive: { true }) }
        try await Task.sleep(for: .milliseconds(100))
        let stream = try await alice.node.openStream("echo", to: bob.peer)
        let other = try await accepting.value
        #expect(other.peer.name == "alice" && other.name == "echo" && stream.peer.name == "bob")
        // 12 MiB is three times the credit window: the writer must wait for grants as the reader reads.
        var payload = ByteBufferAllocator().buffer(capacity: 12 << 20)
        for index in 0..<(12 << 20) { payload.writeInteger(UInt8(truncatingIfNeeded: index &* 7 &+ index >> 12)) }
        let sent = payload
        let writer = Task {
            try await stream.write(sent)
            await stream.finish()
        }
        var received = ByteBufferAllocator().buffer(capacity: 12 << 20)
        while var chunk = try await other.read() { received.writeBuffer(&chunk) }
        try await writer.value
        #expect(received == payload)
        try await other.write(ByteBuffer(string: "thanks"))
        await other.finish()
        #expect(try await stream.read() == ByteBuffer(string: "thanks"))
        #expect(try await stream.read() == nil)
        #expect(await stream.closed() == nil)
        // Bad names are refused before anything is sent.
        await #expect(throws: SessionError.self) { try await alice.node.openStream("../etc", to: bob.peer) }
        // An abort reaches the other side's reads.
        let accepting2 = Task { try await bob.node.acceptStream("second", isAlive: { true }) }
        try await Task.sleep(for: .milliseconds(100))
        let second = try await alice.node.openStream("second", to: bob.peer)
        let secondOther = try await accepting2.value
        await second.abort("changed my mind")
        await #expect(throws: SessionError.self) { _ = try await secondOther.read() }
        #expect(await secondOther.closed()?.contains("changed my mind") == true)
        await alice.stop()
        await bob.stop()
    }

    /// The node keeps a stream's record (what came and was not read, how it ended) while the stream
    /// lives or a `ByteStream` holds it, and no longer.
    @Test func aStreamsRecordGoesOnceItEndedAndNoProgramHoldsIt() async throws {
        let (alice, bob) = try await TestNode.aliceAndBobInLab()
        let accepting = Task { try await bob.node.acceptStream("done", isAlive: { true }) }
        try await Task.sleep(for: .milliseconds(100))
        var stream: ByteStream? = try await alice.node.openStream("done", to: bob.peer)
        let other = try await accepting.value
        #expect(await alice.node.streamRecords == 1)
        await stream?.finish()
        await other.finish()
        #expect(try await stream?.read() == nil)
        #expect(await stream?.closed() == nil)
        #expect(await alice.node.streamRecords == 1)  // ended, still held
        stream = nil
        #expect(await alice.node.streamRecords == 0)

        // Let go while it lives: forgotten at its end.
        let acceptingAgain = Task { try await bob.node.acceptStream("left", isAlive: { true }) }
        try await Task.sleep(for: .milliseconds(100))
        var left: ByteStream? = try await alice.node.openStream("left", to: bob.peer)
        let leftOther = try await acceptingAgain.value
        _ = left
        left = nil
        #expect(await alice.node.streamRecords == 1)
        await leftOther.abort("bye")
        for _ in 0..<100 where await alice.node.streamRecords > 0 { try await Task.sleep(for: .milliseconds(20)) }
        #expect(await alice.node.streamRecords == 0)
        await alice.stop()
        await bob.stop()
    }
}
