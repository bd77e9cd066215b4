/// Why bytes from a peer are not a valid lanchat/1 frame. Every case closes the connection
/// (after a GOODBYE saying why, where the state allows).
public enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The length field is below the 2-byte minimum (type and flags).
    case frameTooShort(length: UInt32)
    /// The length field announces more than the limit in force; nothing of it was buffered.
    case frameTooLarge(length: UInt32, limit: UInt32)
    /// A frame type this version does not know, without the ignorable flag.
    case unknownFrameType(UInt8)
    /// A payload ended inside the named field.
    case truncated(field: String)
    /// A payload had bytes left after its last field.
    case trailingBytes(frame: String, count: Int)
    /// A text field is not valid UTF-8, or contains characters it must not.
    case invalidText(field: String)
    /// A field's value is outside what the spec allows.
    case invalidValue(field: String)
    /// A field is longer than its limit.
    case fieldTooLong(field: String, length: Int, limit: Int)
    /// The stream ended inside a frame.
    case truncatedFrame(bufferedBytes: Int)
    /// A frame (or a flag of one) of a protocol version above the connection's.
    case aboveVersion(frame: String, needs: UInt16, connection: UInt16)

    public var description: String {
        switch self {
        case .frameTooShort(let length): return "frame length \(length) is below the minimum of 2"
        case .frameTooLarge(let length, let limit): return "frame of \(length) bytes exceeds the limit of \(limit)"
        case .unknownFrameType(let type): return "unknown frame type 0x\(String(type, radix: 16))"
        case .truncated(let field): return "payload ends inside '\(field)'"
        case .trailingBytes(let frame, let count): return "\(count) unexpected bytes after a \(frame) frame"
        case .invalidText(let field): return "'\(field)' is not valid text"
        case .invalidValue(let field): return "'\(field)' has an invalid value"
        case .fieldTooLong(let field, let length, let limit): return "'\(field)' is \(length) bytes; the limit is \(limit)"
        case .truncatedFrame(let buffered): return "connection ended inside a frame (\(buffered) bytes buffered)"
        case .aboveVersion(let frame, let needs, let connection):
            return "\(frame) needs protocol version \(needs); this connection speaks \(connection)"
        }
    }
}
