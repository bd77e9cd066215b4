import NIOCore

/// One frame of lanchat/1 as it travels: `length: u32 | type: u8 | flags: u8 | payload`.
/// `length` counts type, flags and payload (so it is at least 2). Big-endian throughout.
public struct RawFrame: Equatable, Sendable {
    public var type: UInt8
    public var flags: UInt8
    public var payload: ByteBuffer

    public init(type: UInt8, flags: UInt8 = 0, payload: ByteBuffer) {
        self.type = type
        self.flags = flags
        self.payload = payload
    }

    /// Bytes of framing around the payload.
    public static let headerLength = 6
}

/// Limits on frames, set per connection.
public struct FrameLimits: Equatable, Sendable {
    /// The largest payload accepted, in bytes.
    public var maximumPayload: UInt32

    /// Before HELLO has been exchanged: only small frames (HELLO is at most this).
    public static let beforeHello = FrameLimits(maximumPayload: 4096)
    /// lanchat/1's default after HELLO, unless both sides announce a smaller one.
    public static let standard = FrameLimits(maximumPayload: 1 << 20)
    /// The most any peer may announce.
    public static let absoluteMaximumPayload: UInt32 = 16 << 20

    public init(maximumPayload: UInt32) {
        self.maximumPayload = min(maximumPayload, Self.absoluteMaximumPayload)
    }
}

/// Splits a byte stream into `RawFrame`s. It reads the length first and refuses an oversized frame
/// before buffering it, and never consumes a partial frame.
public struct FrameDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = RawFrame

    /// Raised after HELLO by the connection's state machine.
    public var limits: FrameLimits

    public init(limits: FrameLimits = .beforeHello) {
        self.limits = limits
    }

    public mutating func decode(buffer: inout ByteBuffer) throws -> RawFrame? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else { return nil }
        guard length >= 2 else { throw WireError.frameTooShort(length: length) }
        let limit = limits.maximumPayload + 2
        guard length <= limit else { throw WireError.frameTooLarge(length: length, limit: limit) }
        guard buffer.readableBytes >= 4 + Int(length) else { return nil }
        buffer.moveReaderIndex(forwardBy: 4)
        let type = buffer.readInteger(as: UInt8.self)!
        let flags = buffer.readInteger(as: UInt8.self)!
        let payload = buffer.readSlice(length: Int(length) - 2)!
        return RawFrame(type: type, flags: flags, payload: payload)
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> RawFrame? {
        if let frame = try decode(buffer: &buffer) { return frame }
        if buffer.readableBytes > 0 { throw WireError.truncatedFrame(bufferedBytes: buffer.readableBytes) }
        return nil
    }
}

/// Writes `RawFrame`s.
public struct FrameEncoder: MessageToByteEncoder, Sendable {
    public typealias OutboundIn = RawFrame

    public init() {}

    public func encode(data frame: RawFrame, out: inout ByteBuffer) {
        out.writeInteger(UInt32(2 + frame.payload.readableBytes))
        out.writeInteger(frame.type)
        out.writeInteger(frame.flags)
        var payload = frame.payload
        out.writeBuffer(&payload)
    }
}
