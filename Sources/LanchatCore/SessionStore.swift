/// What the session keeps on disk: history, rooms with their members, the outbox of unacknowledged
/// reliable messages, and file transfers to resume. The daemon's is `ChatStore` (one SQLite file); the
/// simulator and unit tests use `MemorySessionStore` (LanchatEngine), which keeps the same rules
/// (the contract tests in LanchatStoreTests run both). Ids are the wire's, as text: peers 52 base32
/// characters, messages and transfers 32 hex characters. Times are milliseconds since the epoch.
/// Signed leaves a store keeps at most (`saveLeave`).
public let maximumStoredLeaves = 2048

public protocol SessionStore: AnyObject {
    /// Runs `body` in one transaction (nested calls join the outer one); nothing of it stays on error.
    func transaction<T>(_ body: () throws -> T) throws -> T
    /// The same; with `durable` false the commit need not be on disk when it returns (for writes whose
    /// loss in a power failure is harmless: a removal from the outbox, whose message is then sent again
    /// and de-duplicated by id). A later durable commit makes it durable too.
    func transaction<T>(durable: Bool, _ body: () throws -> T) throws -> T
    /// Inside a transaction: runs `body` in a savepoint, undone alone if it throws (the transaction goes
    /// on). Outside one: `transaction(body)`. The store's thread groups several batches in one commit so.
    /// Throws `StoreTransactionLost` if the transaction is gone (SQLite rolls a whole transaction back
    /// by itself after some errors: disk full, I/O error, out of memory): nothing of it stayed, and
    /// nothing more may run in it.
    func savepoint<T>(_ body: () throws -> T) throws -> T
    /// The file whose sync makes the commits before it durable (SQLite's write-ahead log): a commit made
    /// with `durable` false is on disk once this file has been synced (`fdatasync`) after it, which the
    /// session does on a thread of its own (`StoreSync`), so that no sync stalls its event loop. Nil for a
    /// store with nothing to sync (in memory): its commits are done when they return.
    var logPath: String? { get }
    /// The database file a second connection may checkpoint on a thread of its own (`StoreSync`); nil:
    /// only `checkpoint()` does (a store in memory, or one on a network file system).
    var checkpointPath: String? { get }
    /// Runs `body` in a transaction left open for more pieces of a bulk write (a received history),
    /// committed by the next `transaction` (with its writes) or by `commitBulk`: nothing that must be
    /// durable belongs in it. A piece that throws is undone alone.
    @discardableResult func bulk<T>(_ body: () throws -> T) throws -> T
    /// Commits an open bulk write (nothing if none is open).
    func commitBulk() throws
    /// Makes what was written durable in the background (between messages); the store stays usable.
    func checkpoint()
    /// Adds up to `limit` of the messages stored since last time to the word index, which is not kept in
    /// the commit that stores a message (it made each one cost a third more); returns whether some still
    /// wait. `search` brings it up to date first. Nothing is done inside a transaction or while a bulk
    /// write is open (it says true: call again after the commit).
    func indexWaiting(limit: Int) throws -> Bool
    /// A bulk write is open (not committed).
    var bulkIsOpen: Bool { get }
    /// A number that changes whenever the stored messages may have changed: at each insert, at each
    /// rollback, when a crash loses commits. While it stays the same, what was read of the messages
    /// still holds (`SessionDriver` keeps what it holds of a room for SYNC_REQUESTs by it).
    var messagesChanged: UInt64 { get }
    /// The store is unusable afterwards.
    func close()

    // Messages
    /// Stores a message unless one with its id is there. Returns whether it was new.
    @discardableResult func insert(_ message: StoredMessage, now: Int64) throws -> Bool
    /// The same for each of `messages` (a received history); returns how many were new.
    func insert(contentsOf messages: [StoredMessage], now: Int64) throws -> Int
    /// The last `limit` messages (of `room`, or all), oldest first.
    func history(room: String?, limit: Int) throws -> [StoredMessage]
    /// The same, only those `filter` keeps (`lanchat history --grep`).
    func search(room: String?, limit: Int, filter: HistoryFilter) throws -> [StoredMessage]
    /// What a newcomer is sent: the last `limit` text and file messages of `room` from `since` on, oldest first.
    func export(room: String, since: Int64, limit: Int) throws -> [StoredMessage]
    /// `export` in pieces, for a history too large to hold at once: the next at most `count` of those
    /// messages after `cursor` (nil: the first piece), oldest first, and where the next piece starts
    /// (nil: none is left). Messages stored meanwhile after the last one read are included, up to `limit`.
    func exportPage(
        room: String, since: Int64, limit: Int, after cursor: ExportCursor?, count: Int
    ) throws
        -> (messages: [StoredMessage], next: ExportCursor?)
    /// The newest timestamp of a text or file message in `room` (0 if none).
    func latestTimestamp(room: String) throws -> Int64
    /// The last sequence `sender` used in each room it wrote text or files in.
    func lastSequences(sender: String) throws -> [String: Int64]
    /// The author and sequence of the latest `limit` text and file messages of `room` (any order), not
    /// direct ones: what a member holds of the room's recent messages, for a SYNC_REQUEST.
    func recentSequences(room: String, limit: Int) throws -> [(author: String, sequence: Int64)]

    // Outbox: per recipient, in the order queued; a message is queued at most once per recipient. Two
    // kinds, read as one: a recipient's mark in a room (`setMark`) queues each of our
    // messages there past it that was stored for it (`insert(_:queuedFor:now:)`): nothing is written per
    // message and recipient, and an acknowledgement moves one mark. A row per (recipient, message)
    // (`enqueue`) queues one message alone: what an older lanchatd queued, and what is kept for a
    // recipient that left while we still held its queue (`pinOutbox`).
    /// Stores one of our messages as `insert` does, queued for `recipients` ("*": every member of its room
    /// when sent; else peer ids joined by ","; "": for nobody) past their marks in its room.
    @discardableResult func insert(_ message: StoredMessage, queuedFor recipients: String, now: Int64) throws -> Bool
    /// Sets `peerID`'s mark in `room` to `acked` (our sequence in the room through which it holds what was
    /// queued for it), opening it if it has none; a mark already there costs no write.
    func setMark(peerID: String, room: String, acked: Int64) throws
    /// Every mark: (recipient, room, sequence acknowledged through).
    func outboxMarks() throws -> [(peerID: String, room: String, acked: Int64)]
    /// What `peerID`'s mark in `room` queues becomes rows of its own, and the mark goes (the recipient left
    /// the room and its queue is kept: messages sent after must not join it).
    func pinOutbox(peerID: String, room: String) throws
    func enqueue(peerID: String, messageID: String) throws
    func acknowledge(peerID: String, messageID: String) throws
    /// Queued messages for `peerID`, oldest queued first.
    func outbox(peerID: String) throws -> [StoredMessage]
    /// Every queued (recipient, message, room, sequence; `marked`: queued by a mark, not a row), in the
    /// order queued.
    func outboxEntries() throws -> [(peerID: String, messageID: String, room: String, sequence: Int64, marked: Bool)]
    /// Drops what is queued in `room` for `peerID` (nil: for everyone), rows and marks.
    func dropOutbox(peerID: String?, room: String) throws

    // Rooms, in the order first joined; members by name.
    func rooms() throws -> [(room: String, members: [StoredMember])]
    /// Creates the room (first time) and replaces its members.
    func saveRoom(_ room: String, members: [StoredMember], now: Int64) throws
    func deleteRoom(_ room: String) throws
    /// When this daemon joined `room` (milliseconds since the epoch, its own clock), if it is in it.
    func joinedAt(room: String) throws -> Int64?

    // Ids a room member proved with its key (TLS): a plaintext connection may not claim them.
    /// Room metadata (one row per room and key; a later write of the key replaces it).
    func saveMeta(_ entry: StoredMeta) throws
    func metadata() throws -> [StoredMeta]
    /// Deletes one key's row, or (nil) every row of the room.
    func deleteMeta(room: String, key: String?) throws

    func rememberKeyed(peerID: String, now: Int64) throws
    func keyedPeers() throws -> [String]

    // Signed leaves: when each member (or we) last left each room, by its own signature (one row per
    // room and member, a later one replacing it; the oldest go past `maximumStoredLeaves`).
    func saveLeave(_ leave: StoredLeave) throws
    func leaves() throws -> [StoredLeave]

    // Transfers
    /// Creates or replaces.
    func saveTransfer(_ transfer: StoredTransfer, now: Int64) throws
    func transfer(id: String) throws -> StoredTransfer?
    /// Oldest first (last touched).
    func transfers() throws -> [StoredTransfer]
    /// Sets what is given; a new `state` also marks the transfer touched at `now`.
    func updateTransfer(id: String, state: String?, sentMark: Int64?, resent: Int64?, now: Int64) throws
    func deleteTransfer(id: String) throws
    /// Forgets transfers last touched before `before`; returns them.
    func pruneTransfers(before: Int64) throws -> [StoredTransfer]

    // Seals kept before their signature was checked (`StoredSeal.checked`)
    /// `author`'s `seal` was checked: its messages may be exported. Nothing if it is not kept, or another
    /// seal is kept under its id (other key, signature, count or root: its check says nothing of that one).
    func markSealChecked(author: String, seal: StoredSeal) throws
    /// `author`'s `seal` failed its check: it and its messages go (only that seal, as above). Returns how
    /// many messages went.
    @discardableResult func dropSealed(author: String, seal: StoredSeal) throws -> Int
    /// The seals kept unchecked (a restart found them: their checks were lost with the process).
    func uncheckedSeals() throws -> [UncheckedSeal]
}

/// A seal kept before its signature was checked, with what names it: its author (its messages' sender) and
/// the room it was signed in.
public struct UncheckedSeal: Equatable, Sendable {
    public var author: String
    public var room: String
    public var seal: StoredSeal

    public init(author: String, room: String, seal: StoredSeal) {
        self.author = author
        self.room = room
        self.seal = seal
    }
}

/// Where a piece of `exportPage` starts: after the message with this key (a store's own order of
/// messages with the same timestamp, author and sequence breaks ties), with `remaining` still to read.
public struct ExportCursor: Equatable, Sendable {
    public var timestamp: Int64
    public var senderID: String
    public var sequence: Int64
    public var tiebreak: Int64
    public var remaining: Int

    public init(timestamp: Int64, senderID: String, sequence: Int64, tiebreak: Int64, remaining: Int) {
        self.timestamp = timestamp
        self.senderID = senderID
        self.sequence = sequence
        self.tiebreak = tiebreak
        self.remaining = remaining
    }
}

extension SessionStore {
    /// One `insert` after another (a store with nothing to gain from storing them together).
    public func insert(contentsOf messages: [StoredMessage], now: Int64) throws -> Int {
        var added = 0
        for message in messages {
            if try insert(message, now: now) { added += 1 }
        }
        return added
    }

    /// For a store that holds everything in memory (nothing to gain from reading in pieces): the pieces
    /// of the whole export, by position (`tiebreak`), for tests that write nothing between pieces.
    public func exportPage(
        room: String, since: Int64, limit: Int, after cursor: ExportCursor?, count: Int
    ) throws
        -> (messages: [StoredMessage], next: ExportCursor?)
    {
        let whole = try export(room: room, since: since, limit: limit)
        let start = min(whole.count, max(0, Int(cursor?.tiebreak ?? 0)))
        let end = min(whole.count, start + max(0, count))
        let next =
            whole.indices.contains(end)
            ? ExportCursor(
                timestamp: whole[end].timestamp, senderID: whole[end].senderID,
                sequence: whole[end].sequence, tiebreak: Int64(end), remaining: whole.count - end) : nil
        return (Array(whole[start..<end]), next)
    }

    /// A store whose commits are all alike (in memory) has no bulk writes: each piece is a transaction.
    @discardableResult
    public func bulk<T>(_ body: () throws -> T) throws -> T {
        try transaction(body)
    }

    public func commitBulk() throws {}

    public var checkpointPath: String? { nil }

    /// A store without a separate word index has nothing waiting for it.
    public func indexWaiting(limit: Int) throws -> Bool { false }

    public var bulkIsOpen: Bool { false }

    /// A store whose commits are all alike (in memory) ignores `durable`.
    public func transaction<T>(durable: Bool, _ body: () throws -> T) throws -> T {
        try transaction(body)
    }

    public func updateTransfer(id: String, state: String, now: Int64) throws {
        try updateTransfer(id: id, state: state, sentMark: nil, resent: nil, now: now)
    }

    public func updateTransfer(id: String, sentMark: Int64, now: Int64) throws {
        try updateTransfer(id: id, state: nil, sentMark: sentMark, resent: nil, now: now)
    }

    public func updateTransfer(id: String, resent: Int64, now: Int64) throws {
        try updateTransfer(id: id, state: nil, sentMark: nil, resent: resent, now: now)
    }
}

/// What `history` keeps when a person searches it; every part is optional, and all given must hold.
public struct HistoryFilter: Equatable, Sendable {
    /// Words that must all begin a word of the message (case and accents ignored): "deploy fail"
    /// matches "Deployment failed".
    public var words: String?
    /// The sender's display name, or a prefix (4 characters or more) of its id.
    public var sender: String?
    /// Sent at or after this time (milliseconds since the epoch).
    public var since: Int64?
    /// Only messages of this kind (files: the room's shared files).
    public var kind: StoredMessage.Kind?
    /// Only messages whose id ends so (lowercase hex: the random end of a message id, which its short
    /// form shows), and whose body begins so (exactly).
    public var idSuffix: String?
    public var bodyPrefix: String?

    public init(
        words: String? = nil, sender: String? = nil, since: Int64? = nil, kind: StoredMessage.Kind? = nil,
        idSuffix: String? = nil, bodyPrefix: String? = nil
    ) {
        self.words = words
        self.sender = sender
        self.since = since
        self.kind = kind
        self.idSuffix = idSuffix
        self.bodyPrefix = bodyPrefix
    }

    /// The words, as a search would split them: letters and digits, lowercased, accents kept (the
    /// memory store's rule; SQLite's tokenizer also folds accents).
    public static func tokens(_ text: String) -> [String] {
        text.lowercased().split { !$0.isLetter && !$0.isNumber }.map(String.init)
    }

    /// Whether `message` passes (the memory store's rule, the same as the index's for ASCII text).
    public func keeps(_ message: StoredMessage) -> Bool {
        if let since, message.timestamp < since { return false }
        if let kind, message.kind != kind { return false }
        if let idSuffix, !message.id.hasSuffix(idSuffix) { return false }
        if let bodyPrefix, !message.body.hasPrefix(bodyPrefix) { return false }
        if let sender, message.senderName != sender, !(sender.count >= 4 && message.senderID.hasPrefix(sender)) { return false }
        if let words {
            let wanted = Self.tokens(words)
            if wanted.isEmpty { return false }  // no word in it (only punctuation): nothing matches
            let body = Self.tokens(message.body)
            for word in wanted where !body.contains(where: { $0.hasPrefix(word) }) { return false }
        }
        return true
    }
}

/// The store's transaction was rolled back whole underneath a savepoint (`SessionStore.savepoint`):
/// everything written in it since it began is gone.
public struct StoreTransactionLost: Error, CustomStringConvertible {
    public var cause: String
    public init(_ cause: String) { self.cause = cause }
    public var description: String { "the transaction was rolled back whole: \(cause)" }
}
