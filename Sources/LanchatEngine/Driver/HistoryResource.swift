import LanchatCore
import LanchatWire
import NIOCore

/// How a history resource lays out its records, by the version the two peers speak: plain (version 1,
/// kind 1), each with its signature (2 and 3, kind 2), or signed and sealed records with their seals'
/// heads (4, kind 4: `SealedHistory`).
public enum HistoryLayout: Sendable, Hashable {
    case plain, signed, sealed

    public init(version: UInt16) {
        self = version >= WireFrame.sealsVersion ? .sealed : version >= 2 ? .signed : .plain
    }

    /// The layout of a history resource of `kind` (nil: not a history).
    public init?(kind: WireFrame.ResourceOffer.Kind) {
        switch kind {
        case .history: self = .plain
        case .signedHistory: self = .signed
        case .sealedHistory: self = .sealed
        case .file, .shared: return nil
        }
    }

    public var kind: WireFrame.ResourceOffer.Kind {
        switch self {
        case .plain: .history
        case .signed: .signedHistory
        case .sealed: .sealedHistory
        }
    }

    /// Its records verify on their own (signed or sealed), so that a relay may hand on others' words.
    public var isAuthenticated: Bool { self != .plain }
}

/// Writes stored messages as a history resource's records, piece after piece (one encoder per resource:
/// a sealed history names each seal's head once, before its first record). What a peer cannot check is
/// left out: in a signed history, another author's record that is only sealed (a version 2 or 3 peer
/// knows no seals); our own such records are signed here. In a sealed history, our own records that
/// have neither a signature nor a seal (kept before version 2, or written by a program into the file),
/// or only a seal of fewer than 16 (`sealsHere`), are sealed here: those of one room in a piece, up to
/// 256 under one signature, each record written in its place with its seal's head and proof (records of
/// other authors between them do not cut a seal),
/// so that the receiver checks one signature per seal and can hand them on. Signing each was one
/// signature and one check per record: 1,000,000 of them took 57 s to reach a newcomer.
public struct HistoryEncoder: Sendable {
    public let layout: HistoryLayout
    let ownID: PeerID
    let keys: EnvelopeKeys?
    private var writer = SealedHistory.Writer()
    /// Names the seals made here (the shell's from the system's generator, the simulator's seeded).
    private var ids: IDGenerator
    /// The paths of the last stored seals whose messages keep their leaf index (`proof(of:)`), by author
    /// and seal id: at most `pathsKept`, all forgotten when one more comes.
    private var paths: [PathsKey: (seal: StoredSeal, paths: SealPaths?)] = [:]
    private struct PathsKey: Hashable, Sendable {
        var author: String
        var seal: String
    }
    /// A history is in the order of the messages' times, so the records of a busy room's authors take
    /// turns: kept for one seal only, a seal of 256's paths (some 255 hashes and 2,300 arrays) were made
    /// again at nearly every record. (At most about 150 KiB each.)
    static let pathsKept = 32

    public init(layout: HistoryLayout, ownID: PeerID, keys: EnvelopeKeys?, ids: IDGenerator) {
        self.layout = layout
        self.ownID = ownID
        self.keys = keys
        self.ids = ids
    }

    /// Appends `messages`' records to `buffer`, in their order; returns how many it wrote. A seal made
    /// here covers records of one call only (every record of its is in `buffer` when it returns).
    @discardableResult
    public mutating func append(_ messages: [StoredMessage], into buffer: inout ByteBuffer) -> Int {
        let prepared = prepare(messages)
        return write(prepared, into: &buffer)
    }

    /// `messages`' records made ready to write (`prepare`): what costs (sealing our own, each path made
    /// again from a seal's leaves, signing for a version 2 or 3 peer), done apart from the writing, which
    /// must follow the resource's order (the seal heads a reader keeps).
    public struct Prepared: Sendable {
        enum Item: Sendable {
            /// Written as the layout writes a record with no seal.
            case record(HistoryRecord)
            /// Written with its seal's head; `fallback`: if the writer refuses it (a head under the same
            /// author and id named before, with other values), the message to write without its seal
            /// (ours signed here; another's only sealed is left out).
            case sealed(HistoryRecord, SealHead, fallback: StoredMessage)
        }
        fileprivate var items: [Item] = []
    }

    /// The first half of `append`: may run on any thread, and at once with another encoder's
    /// (`forPreparing`), as long as what it prepares is written in order.
    public mutating func prepare(_ messages: [StoredMessage]) -> Prepared {
        var prepared = Prepared()
        prepared.items.reserveCapacity(messages.count)
        let sealedHere = layout == .sealed ? sealOurs(messages) : []
        for (index, message) in messages.enumerated() {
            switch layout {
            case .plain:
                guard let record = HistoryRecord(message) else { continue }
                prepared.items.append(.record(record))
            case .signed:
                guard let record = unsealed(message) else { continue }
                prepared.items.append(.record(record))
            case .sealed:
                if index < sealedHere.count, let (record, head) = sealedHere[index] {
                    prepared.items.append(.sealed(record, head, fallback: message))
                    continue
                }
                if message.isSealed, let head = message.seal?.head(author: message.senderID), let proof = proof(of: message),
                    let record = HistoryRecord(message, proof: proof)
                {
                    prepared.items.append(.sealed(record, head, fallback: message))
                    continue
                }
                guard let record = unsealed(message) else { continue }
                prepared.items.append(.record(record))
            }
        }
        return prepared
    }

    /// The second half of `append`, in the resource's order: returns how many records it wrote.
    @discardableResult
    public mutating func write(_ prepared: consuming Prepared, into buffer: inout ByteBuffer) -> Int {
        var written = 0
        for item in prepared.items {
            switch (layout, item) {
            case (.plain, .record(let record)):
                guard (try? record.encode(into: &buffer)) != nil else { continue }
            case (.signed, .record(let record)):
                guard (try? record.encode(into: &buffer, signed: true)) != nil else { continue }
            case (.sealed, .record(let record)):
                guard (try? writer.write(.init(record: record), into: &buffer)) != nil else { continue }
            case (.sealed, .sealed(let record, let head, let fallback)):
                if (try? writer.write(.init(record: record, seal: head), into: &buffer)) != nil { break }
                guard let record = unsealed(fallback), (try? writer.write(.init(record: record), into: &buffer)) != nil else { continue }
            case (.plain, .sealed), (.signed, .sealed):
                continue  // (never prepared)
            }
            written += 1
        }
        return written
    }

    /// An encoder to prepare (`prepare`) records that this one writes after its own, at once with it
    /// (on another thread): it names the seals it makes from `ids` (never this one's own generator,
    /// whose names this one gives too). Only its `prepare` may be used: its writer knows nothing of
    /// the heads this one named.
    public func forPreparing(ids: IDGenerator) -> HistoryEncoder {
        var other = HistoryEncoder(layout: layout, ownID: ownID, keys: keys, ids: ids)
        other.paths = paths
        return other
    }

    /// A record without its seal, as a signed history writes it (and a sealed one what it cannot write
    /// sealed): signed (ours, signed here if need be), or the relay's word (unsigned); nil for another's
    /// that is only sealed.
    private func unsealed(_ message: StoredMessage) -> HistoryRecord? {
        let message = SessionStateMachine.signedIfOurs(message, ownID: ownID, keys: keys)
        guard !message.isSealed || message.isSigned, var record = HistoryRecord(message) else { return nil }
        record.proof = nil
        return record
    }

    /// A sealed message's place in its seal: its proof as stored, or, if the store keeps its leaf index
    /// and the seal's leaves, its path made again (every path of the seal at once, kept while the seal's
    /// messages come: one tree a seal, not one a message).
    private mutating func proof(of message: StoredMessage) -> SealProof? {
        guard let index = message.leafIndex else { return message.proof }
        guard let seal = message.seal else { return nil }
        let key = PathsKey(author: message.senderID, seal: seal.id)
        if let kept = paths[key], kept.seal == seal { return kept.paths?.proof(index) }
        if paths.count >= Self.pathsKept { paths = [:] }
        let made = SealPaths(seal)
        paths[key] = (seal, made)
        return made?.proof(index)
    }

    /// Our own records that a seal made here serves better than what they have: those with neither a
    /// signature nor a seal (kept before version 2, or written into the file by a program), and those
    /// sealed in a seal of fewer than `resealBelow` (a message sent alone is a seal of one). The newcomer
    /// checks a signature for each seal: 39 us a record for seals of one (43 s for a history of 1,000,000
    /// messages each sent alone), against sealing them again here, about 3 us a record. Not those with
    /// a signature of their own: we signed them for a member of version 2 or 3 (or one whose version we
    /// did not know), and a newcomer given them sealed could not hand them on to such a member.
    public static func sealsHere(_ message: StoredMessage) -> Bool {
        guard !message.isSigned else { return false }
        guard message.isSealed, let seal = message.seal else { return true }
        return seal.leafCount < resealBelow
    }

    /// Our own records sealed in seals smaller than this are sealed again for a history (`sealsHere`).
    public static let resealBelow = 16

    /// Our own records among `messages` that `sealsHere` (texts and files of a room, with wire ids),
    /// sealed: per room, in seals of at most 256 in the order given; by index in
    /// `messages` (none past the last sealed), each as its record with its proof, and its seal's head. Only
    /// records that can be written are sealed: a seal shows no one the hash of a record it was not sent.
    private mutating func sealOurs(_ messages: [StoredMessage]) -> [(HistoryRecord, SealHead)?] {
        guard let keys else { return [] }
        var byRoom: [RoomID: [(index: Int, record: HistoryRecord)]] = [:]
        var rooms: [RoomID] = []
        // (Only what `SealedBatch.seal` seals: its pieces then hold every record given, at the same places.)
        for (index, message) in messages.enumerated()
        where message.senderID == ownID.rawValue && !message.direct && message.kind != .system && Self.sealsHere(message) {
            // (A record is made only of a wire id: what `SealedBatch.seals` also asks.)
            guard let room = RoomID(message.room), let record = HistoryRecord(message), (try? record.validate()) != nil else { continue }
            if byRoom[room] == nil { rooms.append(room) }
            byRoom[room, default: []].append((index, record))
        }
        var sealed: [(HistoryRecord, SealHead)?] = rooms.isEmpty ? [] : Array(repeating: nil, count: messages.count)
        for room in rooms {
            let ours = byRoom[room] ?? []
            for (batch, piece) in SealedBatch.seal(ours.map { messages[$0.index] }, author: ownID, room: room, keys: keys, newID: { ids.wireID() }) {
                let head = batch.seal.head(author: ownID.rawValue, root: batch.root)
                for (place, (leaf, path)) in zip(piece.indices, zip(batch.leaves, batch.paths)) {
                    var record = ours[place].record
                    record.proof = SealProof(seal: leaf.seal, leafIndex: leaf.leafIndex, path: path)
                    sealed[ours[place].index] = (record, head)
                }
            }
        }
        return sealed
    }
}

/// Reads a history resource's records in pieces, in its layout, and gives each its verdict: a sealed
/// record's seal is checked once while the reader keeps it (`SealChecks`), its record by its audit path.
public struct HistoryDecoder: Sendable {
    public let layout: HistoryLayout
    private var reader = SealedHistory.Reader()
    private var checks = SealChecks()

    public init(layout: HistoryLayout) { self.layout = layout }

    /// Whether the resource may end here (a sealed history not right after a seal's head).
    public var isComplete: Bool { layout != .sealed || reader.isComplete }

    /// The next entries (at most `maximumCount`); an entry cut off by the end of `buffer` stays there.
    public mutating func decodeSome(_ buffer: inout ByteBuffer, maximumCount: Int) throws(WireError) -> [SealedHistory.Entry] {
        switch layout {
        case .sealed: try reader.decodeSome(&buffer, maximumCount: maximumCount)
        case .plain, .signed:
            try HistoryRecord.decodeSome(&buffer, maximumCount: maximumCount, signed: layout == .signed).map { SealedHistory.Entry(record: $0) }
        }
    }

    /// Each entry's verdict (`SessionStateMachine.verdict`), in order; checking stops at the forged
    /// record that makes `forgedLeft`.
    public mutating func verdicts(
        _ entries: [SealedHistory.Entry], room: RoomID, relay: PeerID, ownID: PeerID, keys: EnvelopeKeys?, members: [PeerID: String],
        strangers: Bool, now: Int64, forgedLeft: Int
    ) -> [SessionStateMachine.HistoryVerdict] {
        var verdicts: [SessionStateMachine.HistoryVerdict] = []
        judge(entries, room: room, relay: relay, ownID: ownID, keys: keys, members: members, strangers: strangers, now: now, forgedLeft: forgedLeft) {
            verdicts.append($0)
        }
        _ = checks.takeWholeSeals()  // (what `sort` keeps once for each seal)
        return verdicts
    }

    /// The entries' records by their verdicts (as `verdicts` gives them), as an import stores them: the
    /// records to keep, in order, with no verdict made for each (copying a verdict's message and then
    /// dropping it was a fifth of the store thread's time in an import). A record of a seal whose every
    /// leaf is known by the end of the piece (`SealChecks.takeWholeSeals`) keeps its leaf index, and its
    /// seal the leaves; the seal's records in earlier pieces, and in later ones, keep their paths.
    public mutating func sort(
        _ entries: [SealedHistory.Entry], room: RoomID, relay: PeerID, ownID: PeerID, keys: EnvelopeKeys?, members: [PeerID: String],
        strangers: Bool, now: Int64, forgedLeft: Int
    ) -> SortedRecords {
        var sorted = SortedRecords()
        sorted.keep.reserveCapacity(entries.count)
        judge(entries, room: room, relay: relay, ownID: ownID, keys: keys, members: members, strangers: strangers, now: now, forgedLeft: forgedLeft) {
            sorted.judged += 1
            switch consume $0 {
            case .keep(let message): sorted.keep.append(message)
            case .refused: sorted.refused += 1
            case .forged: sorted.forged += 1
            case .ours: break  // we have it, or never sent it: skipped quietly
            }
        }
        // The records of a seal whose every leaf became known in this piece are kept as their leaf
        // index, with the seal's leaves once (a record's path was 275 of its 800 or so bytes in the store).
        // A seal is its author's head whole (id, count and root): another author may name a seal of hers with
        // the same id, and an author may sign two heads under one id; neither lends its leaves to the other.
        let whole = checks.takeWholeSeals()
        guard !whole.isEmpty else { return sorted }
        var leaves: [WholeSeal: [UInt8]] = [:]
        for (head, hashes) in whole {
            leaves[WholeSeal(author: head.author, id: head.id.description, count: Int(head.leafCount), root: head.root)] = hashes
        }
        // (A seal's records come one after another: looked up once a run, and the seal with its leaves
        // made once for the run's records to share.)
        var run: (seal: WholeSeal, withLeaves: StoredSeal?)?
        for index in sorted.keep.indices {
            guard let seal = sorted.keep[index].seal else { continue }
            let author = sorted.keep[index].senderID
            let same = run.map { $0.seal.author == author && $0.seal.id == seal.id && $0.seal.count == seal.leafCount && $0.seal.root == seal.root }
            if same != true {
                let name = WholeSeal(author: author, id: seal.id, count: seal.leafCount, root: seal.root)
                run = (
                    name,
                    leaves[name].map { whole in
                        var withLeaves = seal
                        withLeaves.leaves = whole
                        return withLeaves
                    }
                )
            }
            guard let withLeaves = run?.withLeaves else { continue }
            sorted.keep[index].keepLeaves(sealedBy: withLeaves)
        }
        return sorted
    }

    private mutating func judge(
        _ entries: [SealedHistory.Entry], room: RoomID, relay: PeerID, ownID: PeerID, keys: EnvelopeKeys?, members: [PeerID: String],
        strangers: Bool, now: Int64, forgedLeft: Int, _ body: (consuming SessionStateMachine.HistoryVerdict) -> Void
    ) {
        var forged = 0
        for entry in entries {
            let verdict: SessionStateMachine.HistoryVerdict
            if let seal = entry.seal {
                verdict = SessionStateMachine.verdict(
                    entry.record, sealedBy: seal, room: room, relay: relay, ownID: ownID, keys: keys, members: members, strangers: strangers,
                    now: now, checks: &checks)
            } else {
                verdict = SessionStateMachine.verdict(
                    entry.record, room: room, relay: relay, ownID: ownID, keys: keys, members: members, strangers: strangers, now: now)
            }
            let isForged = if case .forged = verdict { true } else { false }
            body(verdict)  // (its last use: the message moves on, not copied)
            if isForged {
                forged += 1
                if forged >= forgedLeft { break }
            }
        }
    }
}

/// A seal as `HistoryDecoder.sort` finds its records: its author's head (id, leaf count, root).
private struct WholeSeal: Hashable {
    var author: String
    var id: String
    var count: Int
    var root: [UInt8]
}

/// A piece of a history's records by verdict (`HistoryDecoder.sort`).
public struct SortedRecords: Sendable {
    /// The records to keep, in order.
    public var keep: [StoredMessage] = []
    public var refused = 0
    public var forged = 0
    /// How many records got a verdict (all of the piece's, unless its forged records reached the limit).
    public var judged = 0
}

/// A room's history as a resource (RESOURCE_OFFER kind 1, 2 or 4), as lanchatd and the simulator both
/// write and read it: stored messages become records (`HistoryEncoder`), and records read back
/// (`HistoryDecoder`) get the engine's verdict.
extension HistoryRecord {
    /// A stored message as a record of a history, with its signature and its place in its seal (`proof`,
    /// or as stored: a place kept as a leaf index alone is left out, see `HistoryEncoder.proof(of:)`), if it
    /// has them (nil if its id is not a wire id).
    public init?(_ message: StoredMessage, proof: SealProof? = nil) {
        guard let id = WireID(hex: message.id) else { return nil }
        self.init(
            id: id, senderID: message.senderID, senderName: message.senderName, sequence: UInt64(max(0, message.sequence)),
            timestampMilliseconds: UInt64(max(0, message.timestamp)), kind: message.kind == .file ? .file : .text, body: message.body,
            signature: message.isSigned ? Signature(key: message.authorKey, bytes: message.signature) : nil,
            proof: proof ?? (message.leafIndex == nil ? message.proof : nil))
    }
}
