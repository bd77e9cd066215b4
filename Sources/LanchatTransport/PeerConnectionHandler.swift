import Glibc
import LanchatEngine
import LanchatWire
import NIOConcurrencyHelpers
import NIOCore
import NIOTLS

/// What an established connection delivers to the session layer, in order.
public enum PeerLinkEvent: Sendable {
    /// Frames other than HELLO, PING, PONG and GOODBYE, as one batch per read.
    case frames([WireFrame])
    /// The connection ended; nothing follows.
    case closed(PeerCloseReason)
}

/// Drives one peer connection: frames in and out, the HELLO handshake, heartbeats, then hands every
/// other frame to the session layer (the consumer attached with `attach`, called on the event loop;
/// until one is attached, events wait in order).
///
/// It starts the handshake when the connection is ready: after the TLS handshake on an encrypted
/// connection, at once on a plain one. The handshake's outcome completes `established`; a failure
/// sends GOODBYE and closes. Once established it sends PING when no frame but PONGs arrived for a
/// `heartbeatInterval` (at most once an interval), and closes the connection (GOODBYE timeout) when
/// nothing has arrived for `heartbeatTimeout`.
public final class PeerConnectionHandler: ChannelDuplexHandler {
    public typealias InboundIn = ByteBuffer
    public typealias OutboundIn = Never
    public typealias OutboundOut = ByteBuffer

    public struct Configuration: Sendable {
        public var hello: WireFrame.Hello
        public var helloTimeout: TimeAmount
        /// `true`: start after the TLS handshake; `false`: start when the connection is up; `nil`: not
        /// known yet (an `EncryptionSniffer` decides and tells the handler).
        public var encrypted: Bool?
        /// The id DNS-SD advertised, when we dialed.
        public var advertisedID: String?
        public var heartbeatInterval: TimeAmount
        public var heartbeatTimeout: TimeAmount
        /// A PING when nothing but PONGs arrived for 20 s, and a connection with nothing from the peer for
        /// 60 s closed: the heartbeat finds a peer whose process hangs while its kernel answers. A silent
        /// host is the kernel's to notice, within 8 s (`DeadLinkDetection`), without waking the process.
        public static let defaultHeartbeatInterval: TimeAmount = .seconds(20)
        public static let defaultHeartbeatTimeout: TimeAmount = .seconds(60)
        /// The output budget: at most this many bytes handed to the connection and not yet written to its
        /// socket, each write counted with `writeOverhead` more (what a waiting write costs in memory
        /// beside its bytes: buffers, TLS record, promise; measured: a flood of waiting 14-byte PONGs
        /// cost about 800 bytes each). More than any honest peer makes us queue (a transfer keeps at most
        /// 4 MiB in flight, a stream what the peer granted, 4 MiB); a peer that makes us queue more is closed.
        public var outputBudget: Int = 64 << 20
        public var writeOverhead: Int = 1024
        /// A peer that leaves output waiting and reads none of it for this long is closed (checked with
        /// the heartbeat): it stopped reading, whatever it sends.
        public var outputStall: TimeAmount = .seconds(30)

        public init(
            hello: WireFrame.Hello, helloTimeout: TimeAmount = .seconds(5), encrypted: Bool?, advertisedID: String?,
            heartbeatInterval: TimeAmount = Configuration.defaultHeartbeatInterval, heartbeatTimeout: TimeAmount = Configuration.defaultHeartbeatTimeout
        ) {
            self.hello = hello
            self.helloTimeout = helloTimeout
            self.encrypted = encrypted
            self.advertisedID = advertisedID
            self.heartbeatInterval = heartbeatInterval
            self.heartbeatTimeout = heartbeatTimeout
        }
    }

    public enum ConnectionError: Error, Equatable, CustomStringConvertible {
        case handshake(HandshakeStateMachine.Failure)
        case wire(WireError)
        case closed

        public var description: String {
            switch self {
            case .handshake(let failure): return failure.description
            case .wire(let error): return "the peer sent an invalid frame: \(error)"
            case .closed: return "the connection closed"
            }
        }
    }

    private let configuration: Configuration
    /// The id the peer's TLS certificate proved, set by the TLS verification callback.
    private let certificateID: NIOLockedValueBox<String?>
    private let established: EventLoopPromise<HandshakeStateMachine.Session>
    private var machine: HandshakeStateMachine?
    private var decoder = FrameDecoder(limits: .beforeHello)
    /// The start of a frame that has not arrived whole, in storage of this handler's alone (no decoded
    /// frame's payload and no TLS buffer shares it): bytes are appended to it in place.
    private var buffer: ByteBuffer?
    private var timer: Scheduled<Void>?
    private var pings: [UInt64: EventLoopPromise<Void>] = [:]
    private var closed = false
    private var context: ChannelHandlerContext?
    private var consumer: ((PeerLinkEvent) -> Void)?
    private var waiting: [PeerLinkEvent] = []
    private var pendingFrames: [WireFrame] = []
    private var closeReason: PeerCloseReason?
    private var heartbeat: Scheduled<Void>?
    /// Heartbeats and the output budget (`LinkLiveness`), on the loop's clock.
    private var liveness: LinkLiveness
    private var finished = false

    public init(configuration: Configuration, certificateID: NIOLockedValueBox<String?>, established: EventLoopPromise<HandshakeStateMachine.Session>) {
        self.configuration = configuration
        self.certificateID = certificateID
        self.established = established
        liveness = LinkLiveness(
            limits: .init(
                interval: configuration.heartbeatInterval.nanoseconds, timeout: configuration.heartbeatTimeout.nanoseconds,
                budget: configuration.outputBudget, overhead: configuration.writeOverhead, stall: configuration.outputStall.nanoseconds),
            at: NIODeadline.now().nanoseconds)
    }

    /// Sets the consumer of this connection's events and hands it what waited. Call on the event loop.
    func attach(_ consumer: @escaping (PeerLinkEvent) -> Void) {
        self.consumer = consumer
        let waiting = self.waiting
        self.waiting = []
        for event in waiting { consumer(event) }
    }

    private func deliver(_ event: PeerLinkEvent) {
        if let consumer { consumer(event) } else { waiting.append(event) }
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: Inbound

    public func channelActive(context: ChannelHandlerContext) {
        if configuration.encrypted == false { start(context: context) }
        context.fireChannelActive()
    }

    /// The caller speaks plain lanchat/1 (decided by an `EncryptionSniffer`): start now, before its
    /// first bytes arrive here.
    func startPlain() {
        guard let context else { return }
        start(context: context)
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event { start(context: context) }
        context.fireUserInboundEventTriggered(event)
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The loop's clock, not the wall's: an EmbeddedEventLoop drives heartbeats in tests.
        // Closing (TLS may still read while it says goodbye): what comes now is dropped, not kept.
        guard !closed else { return }
        liveness.bytesArrived(at: context.eventLoop.now.nanoseconds)
        var bytes = unwrapInboundIn(data)
        let owned = buffer != nil
        if var partial = buffer {
            buffer = nil  // (so that `partial` is the only reference: appending to it copies nothing else)
            Self.makeRoom(in: &partial, for: bytes.readableBytes)
            partial.writeBuffer(&bytes)
            bytes = partial
        }
        do {
            var decoded = false
            while !closed, let raw = try decoder.decode(buffer: &bytes) {
                decoded = true
                let frame = try WireFrame.decode(raw)
                try machine?.admit(frame)
                handle(frame, context: context)
            }
            keepPartial(bytes, owned: owned && !decoded, allocator: context.channel.allocator)
        } catch let error as WireError {
            closeReason = closeReason ?? .protocolError(error.description)
            fail(.wire(error), context: context, goodbye: .init(reason: .protocolError, text: error.description))
        } catch {
            fail(.closed, context: context, goodbye: nil)
        }
    }

    /// Room kept for a frame that has not arrived whole: up to its announced length, at most 4 times what
    /// has arrived of it or this much (a peer that announces a large frame gets room for it as it sends
    /// it, not at once: the length is 4 bytes, the frame up to 16 MiB). Before its length is in, a
    /// little: later small frames are slices of this buffer, and one kept (a stream's data waiting for
    /// its reader) keeps all of it.
    static let minimumFrameRoom = 64 * 1024
    static let unknownFrameRoom = 4 * 1024

    /// The bytes a partial frame should have room for, given how much of it (`buffered`) is in.
    static func frameRoom(_ buffer: ByteBuffer, buffered: Int) -> Int {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else { return max(buffered, unknownFrameRoom) }
        let whole = 4 + Int(length)
        return max(buffered, min(whole, max(minimumFrameRoom, 4 * buffered)))
    }

    /// Grows `partial` (owned) at once to the room its frame needs, rather than doubling step by step
    /// (each step copies what is in).
    private static func makeRoom(in partial: inout ByteBuffer, for incoming: Int) {
        let needed = partial.readableBytes + incoming
        guard partial.writableBytes < incoming else { return }
        let room = frameRoom(partial, buffered: needed)
        partial.reserveCapacity(minimumWritableBytes: room - partial.readableBytes)
    }

    /// Keeps the start of the next frame (nothing if the bytes were all frames). The frames just decoded
    /// are slices of these bytes' storage (as is a TLS handler's buffer): a buffer of our own is started
    /// with a copy of the rest (usually a little), instead of growing or compacting the shared storage,
    /// which would copy every frame in it.
    private func keepPartial(_ rest: ByteBuffer, owned: Bool, allocator: ByteBufferAllocator) {
        guard rest.readableBytes > 0 else {
            buffer = nil
            return
        }
        if owned {
            buffer = rest
        } else {
            var fresh = allocator.buffer(capacity: Self.frameRoom(rest, buffered: rest.readableBytes))
            var rest = rest
            fresh.writeBuffer(&rest)
            buffer = fresh
        }
    }

    /// The capacity kept for a partial frame (tests).
    var partialFrameCapacity: Int { buffer?.capacity ?? 0 }

    public func channelReadComplete(context: ChannelHandlerContext) {
        deliverPending()
        context.fireChannelReadComplete()
    }

    private func deliverPending() {
        guard !pendingFrames.isEmpty else { return }
        let frames = pendingFrames
        pendingFrames = []
        deliver(.frames(frames))
    }

    private func finish() {
        guard !finished else { return }
        finished = true
        deliverPending()
        deliver(.closed(closeReason ?? .lost))
    }

    public func channelInactive(context: ChannelHandlerContext) {
        closed = true
        heartbeat?.cancel()
        finish()
        timer?.cancel()
        established.fail(ConnectionError.closed)
        for promise in pings.values { promise.fail(ConnectionError.closed) }
        pings = [:]
        context.fireChannelInactive()
    }

    public func errorCaught(context: ChannelHandlerContext, error: Error) {
        // The kernel ended a link whose host stopped answering (`DeadLinkDetection`): the peer timed out.
        // So did one whose host stopped answering ARP or neighbour discovery, or that a router says is
        // gone (`EHOSTUNREACH`, when a retransmission found no way to it).
        if let error = error as? IOError, error.errnoCode == ETIMEDOUT || error.errnoCode == EHOSTUNREACH { closeReason = closeReason ?? .timedOut }
        fail(.closed, context: context, goodbye: nil)
        context.fireErrorCaught(error)
    }

    // MARK: Handshake and frames

    private func start(context: ChannelHandlerContext) {
        guard machine == nil else { return }
        var machine = HandshakeStateMachine(
            ours: configuration.hello, certificateID: certificateID.withLockedValue { $0 }, advertisedID: configuration.advertisedID)
        let actions = machine.start()
        self.machine = machine
        perform(actions, context: context)
    }

    private func handle(_ frame: WireFrame, context: ChannelHandlerContext) {
        if case .pong = frame {} else { liveness.heard(at: context.eventLoop.now.nanoseconds) }
        if var machine, !machine.isEstablished {
            let actions = machine.received(frame)
            self.machine = machine
            perform(actions, context: context)
            return
        }
        guard machine != nil else {
            // Bytes before our own start (a peer that does not wait for TLS): not allowed.
            fail(
                .handshake(.unexpectedFrame("data before the connection was ready")), context: context,
                goodbye: .init(reason: .protocolError, text: "data before the connection was ready"))
            return
        }
        switch frame {
        case .ping(let nonce):
            // With the rest of this tick's output (one TLS record, one flush for a burst of PINGs).
            send([.pong(nonce)])
        case .pong(let nonce):
            pings.removeValue(forKey: nonce)?.succeed()
        case .goodbye(let goodbye):
            closeReason = closeReason ?? .goodbye(goodbye.reason, goodbye.text)
            closed = true
            context.close(promise: nil)
        case .hello:
            var machine = self.machine!
            let actions = machine.received(frame)
            self.machine = machine
            perform(actions, context: context)
        case .ignored:
            break
        default:
            pendingFrames.append(frame)
        }
    }

    private func perform(_ actions: [HandshakeStateMachine.Action], context: ChannelHandlerContext) {
        for action in actions {
            switch action {
            case .send(let frame):
                write(frame, context: context)
            case .startTimer:
                // The task runs on this channel's event loop, where handler and context live.
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                timer = context.eventLoop.scheduleTask(in: configuration.helloTimeout) {
                    let (handler, context) = bound.value
                    guard var machine = handler.machine else { return }
                    let actions = machine.timerFired()
                    handler.machine = machine
                    handler.perform(actions, context: context)
                }
            case .cancelTimer:
                timer?.cancel()
                timer = nil
            case .setLimits(let limits):
                decoder.limits = limits
            case .established(let session):
                startHeartbeat(context: context)
                established.succeed(session)
            case .close(let failure):
                closeReason = closeReason ?? .protocolError(failure.description)
                closed = true
                established.fail(ConnectionError.handshake(failure))
                context.close(promise: nil)
            }
        }
    }

    private func startHeartbeat(context: ChannelHandlerContext) {
        liveness.started(at: context.eventLoop.now.nanoseconds)
        scheduleTick(after: context.eventLoop.now.nanoseconds, context: context)
    }

    /// Where this process's ticks fall within a tick period (nanoseconds; random once per process).
    private static let tickPhase = UInt64.random(in: 0..<(1 << 40))

    /// The heartbeat's tick comes twice an interval, at times every link of this process shares (a grid
    /// with one random phase a process): the links of a loop wake it once a tick, together, not each at
    /// its own moment (with 63 links, 0.5 wake-ups a second instead of 31.5). `LinkLiveness` is told the
    /// grid's time, so a tick that runs late does not shift its next PING.
    private func scheduleTick(after now: Int64, context: ChannelHandlerContext) {
        let period = max(1, configuration.heartbeatInterval.nanoseconds / 2)
        let phase = Int64(Self.tickPhase % UInt64(period))
        let next = now - ((now - phase) % period + period) % period + period  // the first grid time after `now`
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        heartbeat = context.eventLoop.scheduleTask(deadline: .uptimeNanoseconds(UInt64(max(0, next)))) {
            let (handler, context) = bound.value
            guard !handler.closed else { return }
            switch handler.liveness.tick(at: next) {
            case .quiet:
                break
            case .ping:
                // (Measured before this rule, with a PING every 2 s a link and a timer each: 63 links'
                // heartbeats were about 0.55 % of a core of a member of a room of 64.)
                handler.write(.ping(UInt64.random(in: 0...UInt64.max)), context: context)
            case .noHeartbeat:
                handler.closeReason = handler.closeReason ?? .timedOut
                handler.fail(.closed, context: context, goodbye: .init(reason: .timeout, text: "no heartbeat"))
                return
            case .stalled:
                let seconds = handler.configuration.outputStall.nanoseconds / 1_000_000_000
                handler.stopReading("output waited \(seconds) s with none of it read", context: context)
                return
            }
            // (A tick that ran late, behind a busy loop, is followed by the next grid time after now, not by
            // the ones it missed.)
            if !handler.closed { handler.scheduleTick(after: max(next, context.eventLoop.now.nanoseconds), context: context) }
        }
    }

    private var flushScheduled = false

    /// Writes frames; they are flushed at the end of this event loop tick, together with whatever else
    /// is written in it (one TLS record and one syscall for many small frames), or at once with
    /// `flushNow` (before a commit the loop then waits on). Call on the channel's event loop. Frames that
    /// do not encode (a programming error upstream) are skipped. A chunk of a file or stream goes as it
    /// is, after its frame's head (`WireFrame.encodeSplit`).
    func send(_ frames: [WireFrame], flushNow: Bool = false) {
        guard !closed, let context else { return }
        let allocator = context.channel.allocator
        var out = allocator.buffer(capacity: 256 * frames.count)
        for frame in frames {
            let data: ByteBuffer?
            do { data = try frame.encodeSplit(into: &out, allocator: allocator) } catch { continue }
            guard let data else { continue }
            context.write(wrapOutboundOut(out), promise: counted(out.readableBytes, context: context))
            context.write(wrapOutboundOut(data), promise: counted(data.readableBytes, context: context))
            out = allocator.buffer(capacity: 256)
        }
        if out.readableBytes > 0 { context.write(wrapOutboundOut(out), promise: counted(out.readableBytes, context: context)) }
        if flushNow, !closed {
            context.flush()
            return
        }
        guard !closed, !flushScheduled else { return }
        flushScheduled = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = bound.value
            handler.flushScheduled = false
            if !handler.closed { context.flush() }
        }
    }

    private func write(_ frame: WireFrame, context: ChannelHandlerContext) {
        guard let raw = try? frame.encode(allocator: context.channel.allocator) else { return }
        var out = context.channel.allocator.buffer(capacity: raw.payload.readableBytes + RawFrame.headerLength)
        FrameEncoder().encode(data: raw, out: &out)
        context.writeAndFlush(wrapOutboundOut(out), promise: counted(out.readableBytes, context: context))
    }

    /// Counts `bytes` against the output budget until their write completes (written to the socket, or
    /// failed because the connection closed); a write past the budget closes the connection.
    private func counted(_ bytes: Int, context: ChannelHandlerContext) -> EventLoopPromise<Void>? {
        let loop = context.eventLoop
        let (counted, overBudget) = liveness.queued(bytes, at: loop.now.nanoseconds)
        let promise = loop.makePromise(of: Void.self)
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        promise.futureResult.whenComplete { _ in
            bound.value.0.liveness.written(counted, at: loop.now.nanoseconds)
        }
        if overBudget, !closed {
            // Closed on the next tick, not inside the caller's send.
            loop.execute {
                let (handler, context) = bound.value
                handler.stopReading(
                    "\(handler.liveness.pendingOutput >> 20) MiB of output waiting, over the budget of \(handler.configuration.outputBudget >> 20) MiB", context: context)
            }
        }
        return promise
    }

    /// Closes a connection whose peer does not read (no GOODBYE: it would wait behind the rest).
    private func stopReading(_ text: String, context: ChannelHandlerContext) {
        closeReason = closeReason ?? .notReading(text)
        fail(.closed, context: context, goodbye: nil)
    }

    private func fail(_ error: ConnectionError, context: ChannelHandlerContext, goodbye: WireFrame.Goodbye?) {
        guard !closed else { return }
        closed = true
        if let goodbye { write(.goodbye(goodbye), context: context) }
        established.fail(error)
        context.close(promise: nil)
        // The session layer hears of it now, not when TLS has finished closing (which can wait for a
        // peer that is gone).
        finish()
    }

    /// Says GOODBYE and closes. Call on the channel's event loop.
    func leave(reason: WireFrame.Goodbye.Reason, text: String = "") {
        guard !closed, let context else { return }
        closed = true
        closeReason = closeReason ?? .local
        write(.goodbye(.init(reason: reason, text: text)), context: context)
        context.close(promise: nil)
    }

    /// Sends PING and completes when the PONG comes back. Call on the channel's event loop.
    func ping(nonce: UInt64, eventLoop: EventLoop) -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        guard !closed, machine?.isEstablished == true, let context else {
            promise.fail(ConnectionError.closed)
            return promise.futureResult
        }
        pings[nonce] = promise
        write(.ping(nonce), context: context)
        return promise.futureResult
    }
}

/// `PeerConnectionHandler` is used only on its channel's event loop.
@available(*, unavailable)
extension PeerConnectionHandler: Sendable {}

extension NIODeadline {
    /// The loop's clock as `LinkLiveness` takes it.
    fileprivate var nanoseconds: Int64 { Int64(clamping: uptimeNanoseconds) }
}
