/// How a control connection carries a named stream after `stream` / `stream-accept` answered: both
/// directions are frames `type u8 | length u32 (big-endian) | payload`. Type 0: data (at most 1 MiB).
/// Type 1: end; an empty payload is a clean end of data, otherwise it is why the stream was aborted
/// (UTF-8, at most 1 KiB). A connection that closes without an end frame aborts the stream. After a
/// clean end from the daemon, a second end frame with a reason may follow: the stream broke while the
/// client was still sending.
public enum StreamPipe {
    public static let maximumData = 1 << 20
    public static let maximumReason = 1024
    public static let headerLength = 5

    public enum Frame: Equatable, Sendable {
        case data([UInt8])
        /// `nil`: a clean end of data; otherwise why the stream was aborted.
        case end(String?)
    }

    public struct DecodeError: Error, Equatable, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// The header of a frame: its type and payload length, checked against the limits.
    public static func header(_ bytes: some Collection<UInt8>) throws(DecodeError) -> (type: UInt8, length: Int)? {
        guard bytes.count >= headerLength else { return nil }
        var iterator = bytes.makeIterator()
        let type = iterator.next()!
        var length = 0
        for _ in 0..<4 { length = length << 8 | Int(iterator.next()!) }
        switch type {
        case 0: guard length <= maximumData else { throw DecodeError(description: "stream data frame of \(length) bytes (limit \(maximumData))") }
        case 1: guard length <= maximumReason else { throw DecodeError(description: "stream end reason of \(length) bytes (limit \(maximumReason))") }
        default: throw DecodeError(description: "unknown stream frame type \(type)")
        }
        return (type, length)
    }

    public static func headerBytes(type: UInt8, length: Int) -> [UInt8] {
        [
            type, UInt8(truncatingIfNeeded: length >> 24), UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8),
            UInt8(truncatingIfNeeded: length),
        ]
    }

    public static func encode(_ frame: Frame) -> [UInt8] {
        switch frame {
        case .data(let bytes): return headerBytes(type: 0, length: bytes.count) + bytes
        case .end(nil): return headerBytes(type: 1, length: 0)
        case .end(let reason?):
            let text = Array(reason.utf8.prefix(maximumReason - 4))
            return headerBytes(type: 1, length: text.count) + text
        }
    }

    /// Splits received bytes into frames.
    public struct Decoder: Sendable {
        private var buffer: [UInt8] = []
        private var start = 0

        public init() {}

        public mutating func append(_ bytes: some Sequence<UInt8>) {
            if start > 0 && start == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                start = 0
            }
            buffer.append(contentsOf: bytes)
        }

        /// The next complete frame, `nil` if more bytes are needed.
        public mutating func next() throws(DecodeError) -> Frame? {
            guard let (type, length) = try StreamPipe.header(buffer[start...]) else { return nil }
            guard buffer.count - start >= headerLength + length else { return nil }
            let payload = Array(buffer[(start + headerLength)..<(start + headerLength + length)])
            start += headerLength + length
            if start > 1 << 20 {
                buffer.removeSubrange(0..<start)
                start = 0
            }
            if type == 0 { return .data(payload) }
            guard !payload.isEmpty else { return .end(nil) }
            guard let text = String(validating: payload, as: UTF8.self) else { throw DecodeError(description: "stream end reason is not UTF-8") }
            return .end(text)
        }
    }
}
