import LanchatCore
import NIOCore

/// The payloads of resources (0x40-0x45): files, histories and files shared in a room.
extension WireFrame {
    /// FILE_REQUEST: a member asks for a file shared in `room` by its SHA-256 (`SharedFile`).
    public struct FileRequest: Equatable, Sendable {
        public var id: WireID
        public var room: RoomID
        public var sha256: [UInt8]

        public init(id: WireID, room: RoomID, sha256: [UInt8]) {
            self.id = id
            self.room = room
            self.sha256 = sha256
        }
    }

    public struct ResourceOffer: Equatable, Sendable {
        /// `history`: records in the version 1 layout (unsigned); `signedHistory` (version 2): each record
        /// also carries its author's key and signature (`HistoryRecord`).
        public enum Kind: UInt8, Sendable {
            /// `shared`: a file shared in a room (`SharedFile`), sent only to answer a FILE_REQUEST, under its id.
            /// `sealedHistory` (version 4): entries of `SealedHistory`, signed or sealed records with
            /// their seals' heads.
            case file = 0, history = 1, signedHistory = 2, shared = 3, sealedHistory = 4
            public var isHistory: Bool { self == .history || self == .signedHistory || self == .sealedHistory }
            /// Lost with its connection (not resumed, not kept in the store): histories and shared files,
            /// which the receiver asks for again.
            public var endsWithConnection: Bool { self != .file }
        }
        public static let maximumName = 16 * 1024
        public var id: WireID
        /// `nil`: sent to the peer, not to a room.
        public var room: RoomID?
        public var kind: Kind
        /// The name as the sender has it, unchecked: receivers make it safe (`SafeFileName`).
        public var name: [UInt8]
        public var size: UInt64
        public var sha256: [UInt8]
        public var modifiedMilliseconds: UInt64
        /// The sender hashes while sending: `sha256` is zeros and RESOURCE_DIGEST follows (flag 0x01).
        public var digestFollows: Bool

        public init(
            id: WireID, room: RoomID?, kind: Kind, name: [UInt8], size: UInt64, sha256: [UInt8], modifiedMilliseconds: UInt64,
            digestFollows: Bool = false
        ) {
            self.id = id
            self.room = room
            self.kind = kind
            self.name = name
            self.size = size
            self.sha256 = digestFollows ? [UInt8](repeating: 0, count: 32) : sha256
            self.modifiedMilliseconds = modifiedMilliseconds
            self.digestFollows = digestFollows
        }
    }

    public struct ResourceAccept: Equatable, Sendable {
        public var id: WireID
        public var offset: UInt64

        public init(id: WireID, offset: UInt64) {
            self.id = id
            self.offset = offset
        }
    }

    public struct ResourceChunk: Equatable, Sendable {
        public static let maximumData = 256 * 1024
        public var id: WireID
        public var offset: UInt64
        public var data: ByteBuffer

        public init(id: WireID, offset: UInt64, data: ByteBuffer) {
            self.id = id
            self.offset = offset
            self.data = data
        }
    }

    public struct ResourceEnd: Equatable, Sendable {
        public enum Status: UInt8, Sendable { case complete = 0, refused = 1, cancelled = 2, failed = 3 }
        public var id: WireID
        public var status: Status
        public var text: String

        public init(id: WireID, status: Status, text: String = "") {
            self.id = id
            self.status = status
            self.text = text
        }
    }
}

/// Bulk data written apart from its frame (no copy of it into the frame's buffer).
extension WireFrame {
    /// Data at least this large goes apart (`encodeSplit`); smaller data is copied with its frame.
    public static let splitDataThreshold = 16 * 1024

    /// Writes the frame to `out` as it goes on the wire (length, type, flags, payload), except the data of
    /// a RESOURCE_CHUNK or STREAM_DATA of `splitDataThreshold` bytes or more, which is returned as it is:
    /// the frame is `out`'s new bytes followed by it. A file's chunk is then written to the connection
    /// without two copies (into the payload, then into the frame). Throws as `encode` does.
    public func encodeSplit(into out: inout ByteBuffer, allocator: ByteBufferAllocator = ByteBufferAllocator()) throws(WireError) -> ByteBuffer? {
        let data: ByteBuffer
        let head: WireFrame
        switch self {
        case .resourceChunk(let chunk) where chunk.data.readableBytes >= Self.splitDataThreshold:
            guard chunk.data.readableBytes <= ResourceChunk.maximumData else {
                throw .fieldTooLong(field: "data", length: chunk.data.readableBytes, limit: ResourceChunk.maximumData)
            }
            data = chunk.data
            head = .resourceChunk(ResourceChunk(id: chunk.id, offset: chunk.offset, data: ByteBuffer()))
        case .streamData(let id, let bytes) where bytes.readableBytes >= Self.splitDataThreshold:
            guard bytes.readableBytes <= Self.maximumStreamData else {
                throw .fieldTooLong(field: "data", length: bytes.readableBytes, limit: Self.maximumStreamData)
            }
            data = bytes
            head = .streamData(id: id, data: ByteBuffer())
        default:
            FrameEncoder().encode(data: try encode(allocator: allocator), out: &out)
            return nil
        }
        var raw = try head.encode(allocator: allocator)
        // Both payloads end with the data's length (u32), written as 0 for the empty data.
        raw.payload.setInteger(UInt32(data.readableBytes), at: raw.payload.writerIndex - 4)
        out.writeInteger(UInt32(2 + raw.payload.readableBytes + data.readableBytes))
        out.writeInteger(raw.type)
        out.writeInteger(raw.flags)
        out.writeBuffer(&raw.payload)
        return data
    }
}
