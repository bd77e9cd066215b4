import Glibc
import LanchatCore
import LanchatEngine
@testable import LanchatTransport
import LanchatWire
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing

/// The connection handler on an `EmbeddedChannel`: bytes in, bytes out, time advanced by hand.
@Suite struct PeerConnectionHandlerTests {
    let ours = WireFrame.Hello(peerID: PeerID(digest: [UInt8](repeating: 1, count: 32)).rawValue, name: "alice", capabilities: [])
    let theirs = WireFrame.Hello(peerID: PeerID(digest: [UInt8](repeating: 2, count: 32)).rawValue, name: "bob", capabilities: [])

    final class Events: @unchecked Sendable {  // only touched on the embedded loop (the test's thread)
        var list: [PeerLinkEvent] = []
    }

    /// A plain (unencrypted) connection whose handshake completed; its HELLO already read.
    /// A connection after the handshake; `version`: both ends speak up to it (the default hellos: 1).
    func established(version: UInt16? = nil) throws -> (EmbeddedChannel, PeerConnectionHandler, Events, EventLoopFuture<HandshakeStateMachine.Session>) {
        var ours = self.ours
        var theirs = self.theirs
        if let version { (ours.maximumVersion, theirs.maximumVersion) = (version, version) }
        let loop = EmbeddedEventLoop()
        let promise = loop.makePromise(of: HandshakeStateMachine.Session.self)
        let handler = PeerConnectionHandler(
            configuration: .init(hello: ours, encrypted: false, advertisedID: nil), certificateID: NIOLockedValueBox(nil), established: promise)
        let channel = EmbeddedChannel(handler: handler, loop: loop)
        let events = Events()
        handler.attach { events.list.append($0) }
        channel.pipeline.fireChannelActive()
        let hello = try #require(try decodeAll(channel).first)
        #expect(hello == .hello(ours))
        try channel.writeInbound(bytes([.hello(theirs)]))
        return (channel, handler, events, promise.futureResult)
    }

    func bytes(_ frames: [WireFrame]) throws -> ByteBuffer {
        var out = ByteBuffer()
        for frame in frames { FrameEncoder().encode(data: try frame.encode(), out: &out) }
        return out
    }

    /// Every frame the handler wrote so far.
    func decodeAll(_ channel: EmbeddedChannel) throws -> [WireFrame] {
        var frames: [WireFrame] = []
        var decoder = FrameDecoder(limits: .standard)
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) {
            while let raw = try decoder.decode(buffer: &buffer) { frames.append(try WireFrame.decode(raw)) }
        }
        return frames
    }

    @Test func theHandshakeEstablishesTheSessionWithThePeersHello() throws {
        let (_, _, _, session) = try established()
        let value = try session.wait()
        #expect(value.name == "bob")
        #expect(value.peerID == theirs.peerID)
    }

    @Test func framesOfOneReadArriveAsOneBatch() throws {
        let (channel, _, events, _) = try established()
        let room = RoomID("lab")!
        let one = WireFrame.message(
            .init(
                id: WireID(bytes: [UInt8](repeating: 1, count: 16))!, room: room, sequence: 1,
                timestampMilliseconds: 1, kind: .text, body: "a", reliable: true))
        let two = WireFrame.message(
            .init(
                id: WireID(bytes: [UInt8](repeating: 2, count: 16))!, room: room, sequence: 2,
                timestampMilliseconds: 2, kind: .text, body: "b", reliable: true))
        try channel.writeInbound(bytes([one, two]))
        guard case .frames(let frames)? = events.list.last else { Issue.record("no frames: \(events.list)"); return }
        #expect(frames == [one, two])
    }

    /// Frames cut anywhere (a 256 KiB chunk over many reads, small frames across read boundaries) arrive
    /// whole and in order, whatever the reads' sizes.
    @Test func framesCutAcrossReadsArriveWhole() throws {
        let data = ByteBuffer(bytes: (0..<(256 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let chunk = WireFrame.resourceChunk(.init(id: WireID.random(), offset: 0, data: data))
        let frames: [WireFrame] = [.ping(1), chunk, .pong(2), chunk, .ping(3)]
        let stream = try bytes(frames)
        for piece in [1000, 16 * 1024, 16 * 1024 + 7, 100_000, stream.readableBytes] {
            let (channel, _, events, _) = try established()
            var rest = stream
            while rest.readableBytes > 0 {
                try channel.writeInbound(rest.readSlice(length: min(piece, rest.readableBytes))!)
            }
            (channel.eventLoop as! EmbeddedEventLoop).run()
            let got = events.list.flatMap { event -> [WireFrame] in if case .frames(let frames) = event { frames } else { [] } }
            #expect(got == [chunk, chunk], "reads of \(piece) bytes")  // (PING and PONG stay in the handler)
        }
    }

    /// A peer that announces a large frame and sends a little of it gets room for what it sent (times
    /// 4, at least 64 KiB), not for what it announced; before the length is in, a little.
    @Test func aPartialFrameIsGivenRoomAsItArrives() throws {
        let (channel, handler, _, _) = try established()
        try channel.writeInbound(ByteBuffer(bytes: [0x00, 0x10]))  // half a length
        #expect(handler.partialFrameCapacity >= 2 && handler.partialFrameCapacity <= 8 * 1024)
        let announced = ByteBuffer(bytes: [0x00, 0x00, 0x42, 0x00] + [UInt8](repeating: 0, count: 10))  // (of 1 MiB) and 10 bytes of it
        try channel.writeInbound(announced)
        #expect(handler.partialFrameCapacity >= 16 && handler.partialFrameCapacity <= 128 * 1024)
        try channel.writeInbound(ByteBuffer(repeating: 0, count: 100_000))
        #expect(handler.partialFrameCapacity >= 100_016 && handler.partialFrameCapacity <= 512 * 1024)
    }

    /// A chunk goes out as its frame's head then its data: together exactly the frame.
    @Test func aChunkGoesOutAsTheFrame() throws {
        let (channel, handler, _, _) = try established()
        _ = try decodeAll(channel)
        let chunk = WireFrame.resourceChunk(.init(id: WireID.random(), offset: 7, data: ByteBuffer(repeating: 5, count: 200_000)))
        handler.send([.ping(1), chunk, .ping(2)])
        (channel.eventLoop as! EmbeddedEventLoop).run()
        var all = ByteBuffer()
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) { all.writeBuffer(&buffer) }
        #expect(all == (try bytes([.ping(1), chunk, .ping(2)])))
    }

    @Test func aPingIsAnsweredWithAPong() throws {
        let (channel, _, _, _) = try established()
        _ = try decodeAll(channel)
        try channel.writeInbound(bytes([.ping(42)]))
        (channel.eventLoop as! EmbeddedEventLoop).run()
        #expect(try decodeAll(channel) == [.pong(42)])
    }

    @Test func heartbeatsGoOutAndSilenceClosesTheConnection() throws {
        let (channel, _, events, _) = try established()
        _ = try decodeAll(channel)
        let loop = channel.eventLoop as! EmbeddedEventLoop
        // Ticks every 10 s on this process's grid (its phase is random: these times hold for every phase):
        // the PING once 20 s passed with nothing heard (by 30 s), and the end once nothing arrived for 60 s
        // (by 70 s). A silent host is the kernel's to notice sooner (`DeadLinkDetection`): this is a peer
        // whose process stopped answering.
        loop.advanceTime(by: .seconds(19))
        #expect(try decodeAll(channel).isEmpty)
        loop.advanceTime(by: .seconds(11))
        #expect(try decodeAll(channel).filter { if case .ping = $0 { true } else { false } }.count == 1)
        loop.advanceTime(by: .seconds(29))
        #expect(!events.list.contains { if case .closed = $0 { true } else { false } })
        loop.advanceTime(by: .seconds(11))
        #expect(try decodeAll(channel).contains(.goodbye(.init(reason: .timeout, text: "no heartbeat"))))
        guard case .closed(let reason)? = events.list.last else { Issue.record("not closed: \(events.list)"); return }
        #expect(reason == .timedOut)
    }

    /// The defaults: a PING after 20 s of nothing heard, the end after 60 s (the heartbeat is for a peer
    /// whose process hangs), and the kernel's keepalive ending a silent host's link within 8 s.
    @Test func theHeartbeatIsSlowAndTheKernelNoticesASilentHost() {
        let configuration = PeerConnectionHandler.Configuration(hello: ours, encrypted: false, advertisedID: nil)
        #expect(configuration.heartbeatInterval == .seconds(20) && configuration.heartbeatTimeout == .seconds(60))
        let detection = DeadLinkDetection()
        #expect(detection.idle + detection.interval * detection.count == 8 && detection.userTimeout == 8_000)
    }

    /// A link the kernel ended because the peer's host stopped answering (`ETIMEDOUT` from keepalive or
    /// unacknowledged data, `EHOSTUNREACH` when it no longer answers ARP) timed out; any other error is a
    /// lost connection.
    @Test func theKernelsTimeoutEndsTheLinkAsTimedOut() throws {
        let (channel, _, events, _) = try established()
        channel.pipeline.fireErrorCaught(IOError(errnoCode: ETIMEDOUT, reason: "read(descriptor:pointer:size:)"))
        guard case .closed(let reason)? = events.list.last else { Issue.record("not closed: \(events.list)"); return }
        #expect(reason == .timedOut)
        // A host that no longer answers ARP (a write's retransmissions find no way to it): timed out too.
        let (unreachable, _, unreachableEvents, _) = try established()
        unreachable.pipeline.fireErrorCaught(IOError(errnoCode: EHOSTUNREACH, reason: "write(descriptor:pointer:size:)"))
        guard case .closed(let unreachableReason)? = unreachableEvents.list.last else { Issue.record("not closed: \(unreachableEvents.list)"); return }
        #expect(unreachableReason == .timedOut)
        let (other, _, otherEvents, _) = try established()
        other.pipeline.fireErrorCaught(IOError(errnoCode: ECONNRESET, reason: "read(descriptor:pointer:size:)"))
        guard case .closed(let otherReason)? = otherEvents.list.last else { Issue.record("not closed: \(otherEvents.list)"); return }
        #expect(otherReason != .timedOut)
    }

    /// A peer that pings us hears our PONGs and no PING of ours: both ends hear something every interval
    /// with half the frames. Once it falls silent (or sends only PONGs), we ping again.
    @Test func aLinkThatHearsItsPeerSendsNoPingOfItsOwn() throws {
        let (channel, _, events, _) = try established()
        _ = try decodeAll(channel)
        let loop = channel.eventLoop as! EmbeddedEventLoop
        var out: [WireFrame] = []
        for second in 0..<50 {
            try channel.writeInbound(try bytes([.ping(UInt64(second))]))
            loop.advanceTime(by: .seconds(1))
            out += try decodeAll(channel)
        }
        #expect(out == (0..<50).map { WireFrame.pong(UInt64($0)) })
        // Only PONGs for 30 s: a PING once 20 s passed since the last PING heard, at a tick (every 10 s).
        for second in 0..<30 {
            try channel.writeInbound(try bytes([.pong(UInt64(second))]))
            loop.advanceTime(by: .seconds(1))
        }
        #expect(try decodeAll(channel).filter { if case .ping = $0 { true } else { false } }.count == 1)
        #expect(!events.list.contains { if case .closed = $0 { true } else { false } })
    }

    @Test func anUnknownFrameTypeClosesWithAProtocolError() throws {
        let (channel, _, events, _) = try established()
        _ = try decodeAll(channel)
        // Type 0x7e without the ignorable flag: not a frame of lanchat/1.
        var junk = ByteBuffer()
        junk.writeInteger(UInt32(2))  // length: type and flags, no payload
        junk.writeInteger(UInt8(0x7e))
        junk.writeInteger(UInt8(0))
        try? channel.writeInbound(junk)
        let written = try decodeAll(channel)
        #expect(written.contains { if case .goodbye(let goodbye) = $0 { goodbye.reason == .protocolError } else { false } })
        guard case .closed(.protocolError)? = events.list.last else { Issue.record("not closed as a protocol error: \(events.list)"); return }
    }

    /// Seals need version 4: on a connection below it (the peer speaks at most 3), a SEAL or a sealed
    /// MESSAGE closes the connection it comes on with a protocol error that says why, before the session
    /// layer sees it. At version 4 both pass.
    @Test func aSealOrASealedMessageBelowVersion4ClosesWithAProtocolError() throws {
        let seal = Seal(
            id: WireID(bytes: Array(0x20...0x2f))!, room: RoomID("lab")!,
            signature: Signature(key: [0x02] + Array(repeating: 7, count: 32), bytes: Array(repeating: 9, count: 64)),
            leafHashes: [MerkleTree.leafHash([1])])
        let sealed = WireFrame.Message(
            id: WireID(bytes: Array(0..<16))!, room: RoomID("lab")!, sequence: 1, timestampMilliseconds: 1, kind: .text, body: "hi", reliable: true,
            sealed: SealedLeaf(seal: seal.id, leafIndex: 0))
        for frame in [WireFrame.seal(seal), .message(sealed)] {
            let (current, _, currentEvents, _) = try established(version: WireFrame.sealsVersion)
            _ = try decodeAll(current)
            try current.writeInbound(try bytes([frame]))
            #expect(try decodeAll(current).isEmpty && !currentEvents.list.contains { if case .closed = $0 { true } else { false } })
            let (channel, _, events, _) = try established(version: 3)
            _ = try decodeAll(channel)
            try? channel.writeInbound(try bytes([frame]))
            let goodbyes = try decodeAll(channel).compactMap { if case .goodbye(let goodbye) = $0 { goodbye } else { nil } }
            #expect(goodbyes.count == 1 && goodbyes.first?.reason == .protocolError)
            #expect(goodbyes.first?.text.contains("needs protocol version 4; this connection speaks") == true, "\(goodbyes)")
            guard case .closed(.protocolError)? = events.list.last else { Issue.record("not closed as a protocol error: \(events.list)"); continue }
        }
    }

    /// Holds every write from the handler: a peer that never reads (its socket buffer full).
    final class StuckWrites: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = ByteBuffer
        var held: [EventLoopPromise<Void>?] = []

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) { held.append(promise) }
        func flush(context: ChannelHandlerContext) {}
        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
            for promise in held { promise?.fail(ChannelError.ioOnClosedChannel) }
            held = []
            context.close(mode: mode, promise: promise)
        }
    }

    @Test func aPeerThatSendsButNeverReadsIsClosedAfterTheOutputStall() throws {
        let (channel, _, events, _) = try established()
        _ = try decodeAll(channel)
        try channel.pipeline.syncOperations.addHandler(StuckWrites(), position: .first)
        let loop = channel.eventLoop as! EmbeddedEventLoop
        // It keeps talking (so no heartbeat timeout), and our PONGs and PINGs pile up unread.
        var seconds = 0
        while seconds < 60, !events.list.contains(where: { if case .closed = $0 { true } else { false } }) {
            try? channel.writeInbound(try bytes([.ping(UInt64(seconds))]))
            loop.advanceTime(by: .seconds(1))
            seconds += 1
        }
        guard case .closed(.notReading(let text))? = events.list.last else { Issue.record("not closed as not reading: \(events.list)"); return }
        #expect(text.contains("waited 30 s with none of it read"), "\(text)")
        #expect((30...40).contains(seconds), "closed after \(seconds) s (checked at the heartbeat's tick, every 10 s)")
    }
}
