import LanchatCore
import NIOCore

/// A seal as a history carries it (version 4): what its records need to be checked, without the
/// leaf hashes a SEAL frame carries. `seal_id [16] | author_id (u8 len, 52) | author_key [33] |
/// signature [64] | leaf_count u16 (1-256) | root [32]`: 200 bytes. Its signature is over
/// `Envelope.sealBytes` with the history's room; each of its records carries its audit path (`SealProof`).
public struct SealHead: Equatable, Sendable {
    public static let length = 16 + 1 + 52 + Signature.keyLength + Signature.length + 2 + MerkleTree.hashLength

    public var id: WireID
    public var author: String
    public var signature: Signature
    public var leafCount: UInt16
    public var root: [UInt8]

    public init(id: WireID, author: String, signature: Signature, leafCount: UInt16, root: [UInt8]) {
        self.id = id
        self.author = author
        self.signature = signature
        self.leafCount = leafCount
        self.root = root
    }

    /// What the author signed, in `room` (the same bytes as the full seal's).
    public func signingBytes(room: RoomID) -> [UInt8] {
        Envelope.sealBytes(author: author, id: id, room: room, leafCount: leafCount, root: root)
    }

    /// Whether `proof` shows that `leafHash` is one of this seal's leaves (its signature checked apart, once).
    public func proves(_ proof: SealProof, leafHash: [UInt8]) -> Bool {
        proof.seal == id && proof.verifies(leafHash: leafHash, leafCount: Int(leafCount), root: root)
    }

    func write(into buffer: inout ByteBuffer) throws(WireError) {
        guard WireFrame.isPeerID(author.utf8) else { throw .invalidValue(field: "author_id") }
        try WireFrame.checkSignature(signature, key: "author_key")
        guard Seal.leafCounts.contains(Int(leafCount)) else { throw .invalidValue(field: "leaf_count") }
        guard root.count == MerkleTree.hashLength else { throw .invalidValue(field: "root") }
        buffer.writeBytes(id.bytes)
        buffer.writeLengthPrefixed(Array(author.utf8), as: UInt8.self)
        buffer.writeBytes(signature.key)
        buffer.writeBytes(signature.bytes)
        buffer.writeInteger(leafCount)
        buffer.writeBytes(root)
    }

    static func read(_ reader: inout FieldReader) throws(WireError) -> SealHead {
        let id = WireID(bytes: try reader.bytes("seal_id", count: 16))!
        let author = try reader.peerID("author_id")
        let signature = Signature(
            key: try reader.bytes("author_key", count: Signature.keyLength),
            bytes: try reader.bytes("signature", count: Signature.length))
        let count = try reader.u16("leaf_count")
        guard Seal.leafCounts.contains(Int(count)) else { throw .invalidValue(field: "leaf_count") }
        let root = try reader.bytes("root", count: MerkleTree.hashLength)
        return SealHead(id: id, author: author, signature: signature, leafCount: count, root: root)
    }
}

/// The records of a sealed history (version 4: the layout of a history resource of kind 4). Entries back to back, each a `tag u8` and then:
/// - `0x00`: a record in the signed history layout (`HistoryRecord`, signed or not, as in kind 2);
/// - `0x01`: a seal's head (`SealHead`);
/// - `0x02`: a sealed record: the record in the version 1 layout, then its proof (`SealProof`).
///
/// A seal is known by its author and its id (each author picks its own ids, and anyone sees them: an id
/// alone could be copied to get in the way of another author's records). A reader keeps the last `window`
/// seals named, in the order first named (naming a kept one again does not renew it; once it has left,
/// naming it again is naming it first). What a reader refuses besides bad fields, so that a history
/// costs at most one signature check per record and a reader holds at most `window` heads:
/// - a head not followed at once by a sealed record of that seal (more heads than sealed records);
/// - a sealed record whose seal (its sender's, with the proof's id) is not kept, or whose leaf index is
///   not below that seal's leaf count;
/// - a head under the author and id of one kept, with other values.
/// A writer (`Writer`) sends a head right before the first record of its seal, and again when the seal
/// has left the window. An entry is at most `maximumEntryLength` bytes.
public enum SealedHistory {
    /// The heads a reader keeps: the last 256 seals the resource named.
    public static let window = 256
    /// The longest entry: a sealed record (a record without key and signature, with the longest proof).
    public static let maximumEntryLength = 1 + HistoryRecord.maximumLength - (2 + Signature.keyLength + Signature.length) + SealProof.maximumLength

    enum Tag: UInt8 { case record = 0, head = 1, sealed = 2 }

    /// A record and, if sealed, its seal's head (whose signature the reader has not checked).
    public struct Entry: Equatable, Sendable {
        public var record: HistoryRecord
        public var seal: SealHead?

        public init(record: HistoryRecord, seal: SealHead? = nil) {
            self.record = record
            self.seal = seal
        }
    }

    /// A seal's name: its author and its id.
    struct Name: Hashable, Sendable {
        var author: String
        var id: WireID
    }

    /// The last `window` seals named, oldest first.
    struct Window: Sendable {
        private var heads: [Name: SealHead] = [:]
        private var order: [Name] = []
        /// The head kept last (the newest: never the one that leaves), which the records after it name:
        /// found without hashing a name for each.
        private var last: SealHead?

        subscript(author: String, id: WireID) -> SealHead? {
            if let last, last.id == id, last.author == author { return last }
            return heads[Name(author: author, id: id)]
        }

        /// Keeps `head` unless a head of its name is kept (which the caller compared first).
        mutating func add(_ head: SealHead) {
            let name = Name(author: head.author, id: head.id)
            guard heads[name] == nil else { return }
            heads[name] = head
            last = head
            order.append(name)
            guard order.count > SealedHistory.window else { return }
            let gone = order.removeFirst()
            heads[gone] = nil
            if let last, last.id == gone.id, last.author == gone.author { self.last = nil }
        }
    }

    /// Writes entries, with each seal's head where a reader needs it.
    public struct Writer: Sendable {
        private var window = Window()

        public init() {}

        /// Appends `entry`; refuses what a reader would refuse (a seal by another author than the record's,
        /// a leaf index past the count, a proof of another seal, a field the record layout refuses), and
        /// then writes nothing: a caller may skip the entry and go on.
        public mutating func write(_ entry: Entry, into buffer: inout ByteBuffer) throws(WireError) {
            var bytes = ByteBuffer()
            guard let seal = entry.seal else {
                guard entry.record.proof == nil else { throw .invalidValue(field: "seal") }
                bytes.writeInteger(Tag.record.rawValue)
                try entry.record.encode(into: &bytes, signed: true)
                buffer.writeBuffer(&bytes)
                return
            }
            guard let proof = entry.record.proof, proof.seal == seal.id else { throw .invalidValue(field: "seal_proof") }
            guard seal.author == entry.record.senderID else { throw .invalidValue(field: "author_id") }
            guard proof.leafIndex < seal.leafCount else { throw .invalidValue(field: "leaf_index") }
            let kept = window[seal.author, seal.id]
            if kept == nil {
                bytes.writeInteger(Tag.head.rawValue)
                try seal.write(into: &bytes)
            } else if kept != seal {
                throw .invalidValue(field: "seal_id")
            }
            bytes.writeInteger(Tag.sealed.rawValue)
            try entry.record.encode(into: &bytes, signed: false)
            try proof.encode(into: &bytes)
            // Only now, with the whole entry made: the window changes as the reader's will.
            if kept == nil { window.add(seal) }
            buffer.writeBuffer(&bytes)
        }
    }

    /// Reads entries in pieces, as `HistoryRecord.decodeSome` reads records: an entry cut off by the end
    /// of the buffer stays there for the next piece; anything invalid throws at once.
    public struct Reader: Sendable {
        private var window = Window()
        /// The seal whose head was just read, whose own record must come next.
        private var awaiting: Name?

        public init() {}

        /// Whether the resource may end here (not right after a head).
        public var isComplete: Bool { awaiting == nil }

        public mutating func decodeSome(_ buffer: inout ByteBuffer, maximumCount: Int) throws(WireError) -> [Entry] {
            var entries: [Entry] = []
            while buffer.readableBytes > 0, entries.count < maximumCount {
                var reader = FieldReader(buffer: buffer)
                do throws(WireError) {
                    if let entry = try read(&reader) { entries.append(entry) }
                } catch {
                    if case .truncated = error { break }
                    throw error
                }
                buffer = reader.buffer
            }
            return entries
        }

        /// One entry; nil for a head (kept for the record that must follow it). Changes nothing unless the
        /// whole entry is there and valid.
        private mutating func read(_ reader: inout FieldReader) throws(WireError) -> Entry? {
            guard let tag = Tag(rawValue: try reader.u8("entry")) else { throw .invalidValue(field: "entry") }
            switch tag {
            case .record:
                guard awaiting == nil else { throw .invalidValue(field: "seal_head") }
                return Entry(record: try HistoryRecord.decode(&reader, signed: true))
            case .head:
                guard awaiting == nil else { throw .invalidValue(field: "seal_head") }
                let head = try SealHead.read(&reader)
                if let held = window[head.author, head.id], held != head { throw .invalidValue(field: "seal_id") }
                window.add(head)
                awaiting = Name(author: head.author, id: head.id)
                return nil
            case .sealed:
                var record = try HistoryRecord.decode(&reader, signed: false)
                var rest = reader.buffer
                let proof = try SealProof.decode(from: &rest)
                reader.buffer = rest
                if let awaiting, awaiting != Name(author: record.senderID, id: proof.seal) { throw .invalidValue(field: "seal_head") }
                // Its seal is its sender's: a record cannot name another author's seal.
                guard let head = window[record.senderID, proof.seal] else { throw .invalidValue(field: "seal_id") }
                guard proof.leafIndex < head.leafCount else { throw .invalidValue(field: "leaf_index") }
                record.proof = proof
                awaiting = nil
                return Entry(record: record, seal: head)
            }
        }
    }
}
