/// Splits a byte stream into `\n`-terminated lines, refusing any line longer than `maximumLineLength`
/// before buffering it all. A trailing `\r` is kept (JSON ignores it as whitespace).
public struct LineFramer: Sendable {
    public enum FramingError: Error, Equatable, Sendable {
        case lineTooLong(limit: Int)
    }

    public let maximumLineLength: Int
    private var buffer: [UInt8] = []
    private var scanned = 0

    public init(maximumLineLength: Int) {
        self.maximumLineLength = maximumLineLength
    }

    public mutating func append(_ bytes: some Sequence<UInt8>) {
        buffer.append(contentsOf: bytes)
    }

    /// The next complete line without its `\n`, `nil` if none is complete yet.
    public mutating func nextLine() throws(FramingError) -> [UInt8]? {
        if let newline = buffer[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
            guard newline <= maximumLineLength else { throw .lineTooLong(limit: maximumLineLength) }
            let line = Array(buffer[..<newline])
            buffer.removeSubrange(...newline)
            scanned = 0
            return line
        }
        scanned = buffer.count
        guard buffer.count <= maximumLineLength else { throw .lineTooLong(limit: maximumLineLength) }
        return nil
    }

    /// Takes the bytes buffered after the last line (a connection switching to another framing).
    public mutating func takeBuffered() -> [UInt8] {
        defer {
            buffer = []
            scanned = 0
        }
        return buffer
    }

    /// Bytes buffered without a newline yet.
    public var pendingByteCount: Int { buffer.count }
}
