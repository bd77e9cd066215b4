import LanchatCore
import LanchatWire

/// Seals in the engine (wire version 4). An author seals what it flushes with one signature (`SealedBatch.seal`); a receiver keeps
/// the few seals a connection sent ahead of their messages and checks each message against them
/// (`SealBook`); a reader of histories checks each seal's signature once while it keeps it (`SealChecks`).
/// The cryptography is `EnvelopeKeys`'s, as for a message's signature.

/// Our own messages of one room and one audience under one seal, and each message's place in it.
public struct SealedBatch: Equatable, Sendable {
    public var seal: Seal
    /// Each message's leaf, in the order the messages were given.
    public var leaves: [SealedLeaf]
    /// Each message's audit path (what a record relayed alone carries), in the same order; empty when
    /// sealed without them (`seal(_:...withPaths: false)`: what is stored live keeps its leaf index).
    public var paths: [[[UInt8]]]
    /// The seal's root, worked out with the paths (the seal would hash its tree again for it).
    public var root: [UInt8]

    /// The messages' seals: pieces of at most 256 in the order given, each with one signature. `messages`
    /// all go to the same recipients (one send, or what is resent to one peer), and every recipient of a
    /// seal gets all of its messages: a seal shows no one the hash of a message it was not sent. Room
    /// messages and direct ones are never in one seal, though: a room message's proof goes on to
    /// newcomers and members in histories, and would carry the hash of a direct message next to it
    /// (a direct message is never handed on). `messages` are `author`'s, in `room`; only those a MESSAGE
    /// carries (text and files with wire ids, as `SessionStateMachine.frame` sends them) are sealed, the
    /// others (notices) left out. `newID` names each seal.
    ///
    /// A receiver holds a connection's last `SealBook.capacity` seals: the sender sends each SEAL right
    /// before its messages, and again before any of them it sends again (a retransmission, or on a new
    /// connection).
    ///
    /// `withPaths`: each message's audit path is worked out too (what a history writes with each record);
    /// without them only the root (what is stored live: `stored` keeps each message's leaf index).
    public static func seal(
        _ messages: [StoredMessage], author: PeerID, room: RoomID, keys: EnvelopeKeys, withPaths: Bool = true, newID: () -> WireID
    ) -> [(batch: SealedBatch, messages: ArraySlice<StoredMessage>)] {
        precondition(messages.allSatisfy { $0.senderID == author.rawValue }, "an author seals its own messages")
        // (Each id read once: what is sealed, and its signing bytes.)
        var ids: [WireID] = []
        ids.reserveCapacity(messages.count)
        let messages = messages.filter { message in
            guard message.kind != .system, let id = WireID(hex: message.id) else { return false }
            ids.append(id)
            return true
        }
        var out: [(batch: SealedBatch, messages: ArraySlice<StoredMessage>)] = []
        var start = messages.startIndex
        while start < messages.endIndex {
            // A piece: up to 256 messages, all to the room or all direct.
            var end = start + 1
            while end < messages.endIndex, end - start < Seal.leafCounts.upperBound, messages[end].direct == messages[start].direct { end += 1 }
            let piece = messages[start..<end]
            let leafHashes = piece.indices.map { Seal.leafHash(signingBytes: SessionStateMachine.signingBytes(of: messages[$0], room: room, id: ids[$0])) }
            let (paths, root) = withPaths ? MerkleTree.auditPaths(leafHashes) : ([], MerkleTree.root(leafHashes))
            let id = newID()
            let signature = keys.signature(
                over: Envelope.sealBytes(author: author.rawValue, id: id, room: room, leafCount: UInt16(leafHashes.count), root: root))
            let seal = Seal(id: id, room: room, signature: signature, leafHashes: leafHashes)
            let leaves = piece.indices.map { SealedLeaf(seal: id, leafIndex: UInt16($0 - start)) }
            out.append((SealedBatch(seal: seal, leaves: leaves, paths: paths, root: root), piece))
            start = end
        }
        return out
    }

    /// Whether `seal` seals this message (a text or a file with a wire id, as a MESSAGE carries it; not a
    /// notice): the others it leaves out.
    public static func seals(_ message: StoredMessage) -> Bool { message.kind != .system && WireID(hex: message.id) != nil }
}

/// The seals one connection's author sent ahead of their messages, as the receiver holds them: at most
/// `capacity`, the oldest forgotten first (one book per connection: a new connection starts empty). An
/// honest author sends a SEAL right before its messages, and again before any of them it sends again
/// (`SealedBatch.seal`), so a few suffice; a peer that sends SEALs without messages only pushes its own
/// older ones out.
public struct SealBook: Equatable, Sendable {
    /// The most seals held for one connection: each at most 8 KiB of leaf hashes (some 18 KiB as the SEAL
    /// holds them, an array each), and 8 KiB more as its messages are stored with them (`Held.stored`),
    /// so at most about 100 KiB per connection.
    public static let capacity = 4

    struct Held: Equatable, Sendable {
        var seal: Seal
        /// The seal's head (with its root), worked out once, when the seal comes: hashing the tree for
        /// each message would cost a seal of `n` messages `n` times `n - 1` hashes.
        var head: SealHead
        /// The seal as each of its messages is stored with it: its head and every leaf's hash (each
        /// message keeps its leaf index alone), made once for all of them. Its `checked` is `checked`.
        var stored: StoredSeal
        /// Its signature was checked (false: its check runs off the event loop, `SealCheck`).
        var checked: Bool
    }

    /// Oldest first.
    private(set) var held: [Held] = []

    public init() {}

    /// What became of a SEAL.
    public enum Taken: Equatable, Sendable {
        case kept
        /// Kept before its signature was checked: the check to ask for (off the event loop).
        case unchecked(SealCheck)
        /// Its key is not the author's (the connection's peer), or its signature does not verify.
        case forged
        /// It reuses the id of a seal held, with other contents.
        case reused
    }

    /// A SEAL from `author` (the connection's peer): kept if its signature verifies (one check for all its
    /// messages), or, unless `checkNow`, kept unchecked, its check to be asked for (`SealCheck`). The same
    /// seal again (sent again before a retransmission of its messages) is taken as it is.
    public mutating func received(_ seal: Seal, from author: PeerID, keys: EnvelopeKeys, checkNow: Bool = true) -> Taken {
        if let index = held.firstIndex(where: { $0.seal.id == seal.id }) { return held[index].seal == seal ? .kept : .reused }
        guard seal.isWellFormed else { return .forged }
        // One pass up the tree gives the root the signature covers.
        let head = seal.head(author: author.rawValue, root: MerkleTree.root(seal.leafHashes))
        let check = SealCheck(author: author, room: seal.room, head: head)
        guard !checkNow || check.verifies(with: keys) else { return .forged }
        let stored = StoredSeal(head, checked: checkNow, leaves: seal.leafHashes.flatMap { $0 })
        held.append(Held(seal: seal, head: head, stored: stored, checked: checkNow))
        if held.count > Self.capacity { held.removeFirst() }
        return checkNow ? .kept : .unchecked(check)
    }

    /// Checks `check`'s seal now if it is held unchecked (its message cannot wait): whether it verifies
    /// (nil: not held, or held checked). One that does not is forgotten.
    public mutating func checkNow(_ check: SealCheck, keys: EnvelopeKeys) -> Bool? {
        guard let index = held.firstIndex(where: { $0.head == check.head }), !held[index].checked else { return nil }
        let valid = check.verifies(with: keys)
        answered(check, valid: valid)
        return valid
    }

    /// `check` answered: its seal (that head, not another under the same id) checked, or (it failed)
    /// forgotten: its later messages find no seal.
    public mutating func answered(_ check: SealCheck, valid: Bool) {
        guard let index = held.firstIndex(where: { $0.head == check.head }) else { return }
        if valid {
            held[index].checked = true
            held[index].stored.checked = true
        } else {
            held.remove(at: index)
        }
    }

    /// What a sealed MESSAGE is, against the seals held.
    public enum Check: Equatable, Sendable {
        /// Its leaf is the seal's: the seal's head, the seal as the message is stored with it (every leaf's
        /// hash: a record handed on alone gets its audit path made again from them) and the message's leaf
        /// index, and whether the seal's signature was checked yet.
        case sealed(SealHead, StoredSeal, leafIndex: UInt16, checked: Bool)
        /// No SEAL of that id is held (never sent, or pushed out by later ones).
        case unknownSeal
        /// The message names no seal, the seal is another room's, its leaf index is past the seal's count,
        /// or the message's leaf hash is not the seal's leaf at that index: the author did not seal it.
        case notSealed
    }

    /// Checks `message` (sealed, from `author`, the connection's peer) against the seal it names.
    public mutating func check(_ message: WireFrame.Message, author: PeerID) -> Check {
        guard let sealed = message.sealed else { return .notSealed }
        guard let index = held.firstIndex(where: { $0.seal.id == sealed.seal }) else { return .unknownSeal }
        let seal = held[index].seal
        let leaf = Int(sealed.leafIndex)
        guard seal.room == message.room, leaf < seal.leafHashes.count, Seal.leafHash(of: message, author: author.rawValue) == seal.leafHashes[leaf]
        else { return .notSealed }
        return .sealed(held[index].head, held[index].stored, leafIndex: sealed.leafIndex, checked: held[index].checked)
    }
}

/// A seal's signature to check off the event loop: a seal that came live over a pinned TLS link is held and
/// its messages stored and acknowledged before it is checked (the link says who sent it); the shell
/// checks it on another thread and answers `SessionStateMachine.sealChecked(_:valid:at:)`. Until then
/// nothing of it leaves this host (the store exports none of its messages: `StoredSeal.checked`).
public struct SealCheck: Equatable, Sendable {
    public var author: PeerID
    public var room: RoomID
    public var head: SealHead

    public init(author: PeerID, room: RoomID, head: SealHead) {
        self.author = author
        self.room = room
        self.head = head
    }

    /// Whether the head's key is the author's and its signature verifies (the work done off the loop).
    public func verifies(with keys: EnvelopeKeys) -> Bool {
        keys.verifies(head.signature, over: head.signingBytes(room: room), by: author)
    }
}

/// The seal checks asked of the shell and not answered yet, at most `capacity`: past it, a seal is
/// checked where it comes (as on a plaintext link), so a flood of SEALs cannot queue work without bound.
/// A check is its whole head (key, signature, count, root), not only its author and id: its answer says
/// nothing of another seal under the same id (an author could send one after its first was pushed out of
/// a connection's `SealBook`); such a seal is checked where it comes.
struct SealWaits: Equatable, Sendable {
    static let capacity = 64

    private(set) var waiting: [SealCheck] = []

    var isFull: Bool { waiting.count >= Self.capacity }

    func isWaiting(_ check: SealCheck) -> Bool { waiting.contains(check) }

    /// Whether a check of any seal under `author` and `id` waits.
    func waits(for author: PeerID, _ id: WireID) -> Bool { waiting.contains { $0.author == author && $0.head.id == id } }

    /// Notes a check asked for; false if it is asked already (the same seal held by a newer connection).
    mutating func ask(_ check: SealCheck) -> Bool {
        guard !waiting.contains(check) else { return false }
        waiting.append(check)
        return true
    }

    /// The check is answered (or done where its seal came); false if it was not waited for.
    mutating func answered(_ check: SealCheck) -> Bool {
        guard let index = waiting.firstIndex(of: check) else { return false }
        waiting.remove(at: index)
        return true
    }
}

/// The seal heads whose signatures a reader of histories checked, so that each is checked once while it
/// is kept (a sealed history names a head before its first record, and again after 256 others: as many
/// as a reader keeps, `SealedHistory.window`).
public struct SealChecks: Equatable, Sendable {
    public static let capacity = SealedHistory.window

    /// A head checked: who, which, where.
    struct Name: Hashable, Sendable {
        var author: String
        var id: WireID
        var room: RoomID
    }

    /// Heads checked, with the outcome.
    private var checked: [Name: (head: SealHead, verified: Bool)] = [:]
    /// Their names, oldest first.
    private var order: [Name] = []
    /// The head checked last (a history's records of one seal come one after another): found without
    /// hashing its name.
    private var last: (name: Name, head: SealHead, verified: Bool)?
    /// The nodes of the trees of the heads whose records were checked last (at most `treeCapacity`, the
    /// one used last at the end) that their records' audit paths showed: the next record's path hashes
    /// only what is new (about one node, where a whole path is up to 8). Several, for a history whose
    /// authors' seals take turns.
    private var trees: [(head: SealHead, nodes: MerkleTree.KnownNodes, whole: Bool)] = []
    static let treeCapacity = 8
    /// Seals whose every leaf the records checked showed, until taken (`takeWholeSeals`); once each while
    /// its tree is kept.
    private var wholeSeals: [(head: SealHead, leaves: [UInt8])] = []
    /// The last head as the store keeps it: its id as text made once for all its records.
    private var kept: (head: SealHead, seal: StoredSeal)?

    public init() {}

    public static func == (lhs: SealChecks, rhs: SealChecks) -> Bool {
        lhs.order == rhs.order && lhs.order.allSatisfy { lhs.checked[$0]?.head == rhs.checked[$0]?.head && lhs.checked[$0]?.verified == rhs.checked[$0]?.verified }
    }

    /// Whether `head` is its author's seal in `room`: its key hashes to the author's id and the signature
    /// verifies. Checked once per head while it is kept (another head under the same author and id is
    /// checked on its own, and takes the place of the first).
    public mutating func verifies(_ head: SealHead, room: RoomID, keys: EnvelopeKeys) -> Bool {
        if let last, last.name.room == room, last.head == head { return last.verified }  // (the last is always kept: it is the newest)
        let name = Name(author: head.author, id: head.id, room: room)
        if let known = checked[name], known.head == head {
            last = (name, head, known.verified)
            return known.verified
        }
        let verified =
            PeerID(head.author).map { keys.verifies(head.signature, over: head.signingBytes(room: room), by: $0) } ?? false
        if checked.updateValue((head, verified), forKey: name) == nil {
            order.append(name)
            if order.count > Self.capacity { checked[order.removeFirst()] = nil }
        }
        last = (name, head, verified)
        return verified
    }

    /// The seals whose every leaf hash became known (checked against the root) by the records checked since
    /// the last call: the store keeps those once for each seal, and each record's place as its leaf index.
    public mutating func takeWholeSeals() -> [(head: SealHead, leaves: [UInt8])] {
        defer { wholeSeals = [] }
        return wholeSeals
    }

    /// `head` as the store keeps it (`StoredSeal(head)`), made once while its records come.
    public mutating func stored(_ head: SealHead) -> StoredSeal {
        if let kept, kept.head == head { return kept.seal }
        let seal = StoredSeal(head)
        kept = (head, seal)
        return seal
    }

    /// Whether `record` (a sealed history's, with its `seal`) is a leaf its author sealed in `room`: the
    /// seal's signature (checked once) and the record's audit path.
    public mutating func verifies(_ record: HistoryRecord, seal: SealHead, room: RoomID, keys: EnvelopeKeys) -> Bool {
        guard let proof = record.proof, seal.author == record.senderID, proof.seal == seal.id, verifies(seal, room: room, keys: keys) else {
            return false
        }
        let at: Int
        if let found = trees.lastIndex(where: { $0.head == seal }) {
            // The one used last goes to the end: the tree forgotten first is the one unused longest.
            if found != trees.count - 1 { trees.append(trees.remove(at: found)) }
            at = trees.count - 1
        } else {
            if trees.count >= Self.treeCapacity { trees.removeFirst() }
            trees.append((seal, MerkleTree.KnownNodes(count: Int(seal.leafCount), root: seal.root), false))
            at = trees.count - 1
        }
        let leafHash = Seal.leafHash(signingBytes: record.signingBytes(room: room))
        guard trees[at].nodes.verifies(proof.path, leafHash: leafHash, index: Int(proof.leafIndex)) else { return false }
        if !trees[at].whole, trees[at].nodes.knowsEveryLeaf, let leaves = trees[at].nodes.leafHashes {
            trees[at].whole = true
            wholeSeals.append((seal, leaves))
        }
        return true
    }
}

// A seal and a message's place in it as the store keeps them (`StoredSeal`, `StoredMessage.sealProof`).
extension StoredSeal {
    /// `leaves`: every leaf's hash (32 bytes each, checked against the head's root), or none.
    public init(_ head: SealHead, checked: Bool = true, leaves: [UInt8] = []) {
        self.init(
            id: head.id.description, authorKey: head.signature.key, signature: head.signature.bytes, leafCount: Int(head.leafCount),
            root: head.root, checked: checked, leaves: leaves)
    }

    /// The head it is, for `author` (its messages' sender); nil if a field does not fit one (a damaged row).
    public func head(author: String) -> SealHead? {
        guard let id = WireID(hex: id), let count = UInt16(exactly: leafCount), Seal.leafCounts.contains(leafCount) else { return nil }
        return SealHead(id: id, author: author, signature: Signature(key: authorKey, bytes: signature), leafCount: count, root: root)
    }
}

extension StoredMessage {
    /// Its place in its seal; nil if it is not sealed (or the bytes are not a proof: a damaged row). A
    /// place kept as a leaf index alone is made again from the seal's leaves (all of the tree's hashes:
    /// what hands many on keeps `SealPaths` for the seal instead).
    public var proof: SealProof? {
        guard isSealed else { return nil }
        guard let leafIndex else { return try? SealProof.decode(sealProof) }
        return seal.flatMap(SealPaths.init)?.proof(leafIndex)
    }

    /// Its leaf index, when its place is kept as that alone (its seal's leaves kept: `StoredSeal.leaves`).
    public var leafIndex: Int? { sealProof.count == 2 ? Int(sealProof[0]) << 8 | Int(sealProof[1]) : nil }

    /// The message with its place kept as its leaf index alone, and its seal with every leaf's hash
    /// (`leaves`, checked against the seal's root); as it is if it has no proof to take the index from.
    public func keepingLeaves(_ leaves: [UInt8]) -> StoredMessage {
        var message = self
        message.keepLeaves(leaves)
        return message
    }

    /// `keepingLeaves`, in place.
    public mutating func keepLeaves(_ leaves: [UInt8]) {
        guard var seal else { return }
        seal.leaves = leaves
        keepLeaves(sealedBy: seal)
    }

    /// `keepLeaves`, its seal with the leaves given whole (`sealedBy`: the same seal, made once for a run of
    /// its messages, which then share it rather than a copy each).
    public mutating func keepLeaves(sealedBy seal: StoredSeal) {
        guard sealProof.count >= 19, self.seal != nil else { return }
        sealProof = [sealProof[16], sealProof[17]]  // (a proof: the seal's id, 16 bytes, then the index)
        self.seal = seal
    }

    /// The message as stored sealed: with its seal's head (its signature checked, or not yet) and its proof.
    public func sealed(by head: SealHead, proof: SealProof, checked: Bool = true) -> StoredMessage {
        sealed(by: StoredSeal(head, checked: checked), proof: proof)
    }

    public func sealed(by seal: StoredSeal, proof: SealProof) -> StoredMessage {
        var message = self
        message.seal = seal
        message.sealProof = (try? proof.bytes()) ?? []
        return message
    }

    /// The message as stored sealed by `seal` (with every leaf's hash, `StoredSeal.leaves`) at `leafIndex`:
    /// its place kept as the index alone.
    public func sealed(by seal: StoredSeal, leafIndex: UInt16) -> StoredMessage {
        var message = self
        message.seal = seal
        message.sealProof = [UInt8(leafIndex >> 8), UInt8(leafIndex & 0xFF)]
        return message
    }
}

extension SealedBatch {
    /// Our own `messages` (the ones this batch seals, in order) as stored sealed: each with the seal's
    /// head and every leaf's hash (one `StoredSeal` for all), and its leaf index. (A path is 32 bytes a
    /// level, some 250 bytes a message in a seal of 100; the leaves are 32 bytes a message, kept once.)
    public func stored(_ messages: some Collection<StoredMessage>, author: PeerID) -> [StoredMessage] {
        let stored = StoredSeal(seal.head(author: author.rawValue, root: root), leaves: seal.leafHashes.flatMap { $0 })
        return zip(messages, leaves).map { message, leaf in message.sealed(by: stored, leafIndex: leaf.leafIndex) }
    }
}

/// Every audit path of a stored seal whose leaves are kept (`StoredSeal.leaves`), made once for all its
/// messages: what hands on the messages of a seal kept that way (`HistoryEncoder`) keeps one of these.
public struct SealPaths: Sendable {
    public let seal: WireID
    private let paths: [[[UInt8]]]

    /// Nil unless the leaves are `leafCount` hashes whose tree has the seal's root (a damaged row: its
    /// messages then read as not sealed).
    public init?(_ stored: StoredSeal) {
        let length = MerkleTree.hashLength
        guard let id = WireID(hex: stored.id), Seal.leafCounts.contains(stored.leafCount), stored.leaves.count == stored.leafCount * length else {
            return nil
        }
        let hashes = (0..<stored.leafCount).map { Array(stored.leaves[$0 * length..<($0 + 1) * length]) }
        let (paths, root) = MerkleTree.auditPaths(hashes)
        guard root == stored.root else { return nil }
        seal = id
        self.paths = paths
    }

    public func proof(_ leafIndex: Int) -> SealProof? {
        paths.indices.contains(leafIndex) ? SealProof(seal: seal, leafIndex: UInt16(leafIndex), path: paths[leafIndex]) : nil
    }
}
