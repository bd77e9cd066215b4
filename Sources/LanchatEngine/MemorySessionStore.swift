import LanchatCore

/// A `SessionStore` in memory, with the rules of the SQLite one (`ChatStore`): for the simulator, where a
/// crashed node keeps exactly what its engine asked to persist, and for unit tests. Transactions are
/// all or nothing (a failing body leaves the store as it was). Not thread-safe: one owner.
public final class MemorySessionStore: SessionStore {
    /// Messages by id and author, as the SQLite store keys them: a record under another author cannot
    /// take a genuine message's id.
    public private(set) var messages: [MessageKey: StoredMessage] = [:]
    /// The first message stored under each id (the outbox's: our own message was stored before any
    /// record that copies its id).
    private var firstByID: [String: MessageKey] = [:]
    /// Per recipient, message ids queued one by one (SQLite's `outbox` rows), oldest queued first.
    public private(set) var queues: [String: [String]] = [:]
    /// Per recipient and room, our sequence through which it holds what was queued for it (SQLite's
    /// `outbox_marks`).
    public private(set) var marks: [String: [String: Int64]] = [:]
    /// Who each of our messages queued by marks was queued for (SQLite's `messages.recipients`): "*" or
    /// ids joined by ",".
    private var recipients: [MessageKey: String] = [:]
    private var roomOrder: [String] = []
    private var members: [String: [StoredMember]] = [:]
    private var joined: [String: Int64] = [:]
    private var saved: [String: (transfer: StoredTransfer, touched: Int64)] = [:]
    private var keyed: [String] = []
    private var storedLeaves: [StoredLeave] = []
    /// Seals of stored messages, each once under its author and id (`MessageKey(id: seal id, sender:
    /// author)`), as the SQLite store's `seals` table: messages are kept without theirs, and `export`
    /// attaches it.
    private var seals: [MessageKey: (seal: StoredSeal, room: String)] = [:]
    /// The seal id of each sealed message (SQLite's `messages.seal_id`).
    private var sealIDs: [MessageKey: String] = [:]
    /// When each message was stored (0, 1, ...), as SQLite's rowid: a search with words takes the last
    /// stored matches.
    private var storedOrder: [MessageKey: Int] = [:]
    private var depth = 0
    public private(set) var messagesChanged: UInt64 = 0

    public init() {}

    /// A message's key in the store: its id and its author.
    public struct MessageKey: Hashable, Sendable {
        public var id: String
        public var sender: String
        public init(id: String, sender: String) {
            self.id = id
            self.sender = sender
        }
        public init(_ message: StoredMessage) { self.init(id: message.id, sender: message.senderID) }
    }

    /// The first message stored under `id` (any author).
    public func message(id: String) -> StoredMessage? { firstByID[id].flatMap { messages[$0] } }

    /// Nested calls join the outer one, as in SQLite (`ChatStore`): only the outermost rolls back.
    public var logPath: String? { nil }

    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try transaction(durable: true, body)
    }

    /// With `durable` false (and `losesUnsyncedCommits()`), the commit reaches the disk only with the
    /// next sync of the log (`syncBegins`/`syncEnded`) or durable commit, as SQLite's does.
    public func transaction<T>(durable: Bool, _ body: () throws -> T) throws -> T {
        if depth > 0 {
            depth += 1
            defer { depth -= 1 }
            return try body()
        }
        let before = state
        depth = 1
        defer { depth = 0 }
        do {
            let result = try body()
            if let failsCommit, failsCommit() { throw Refused() }
            commits += 1
            if durable, onDisk != nil { onDisk = (state, commits) }
            return result
        } catch {
            state = before
            messagesChanged &+= 1
            throw error
        }
    }

    /// Inside a transaction, `body` in a savepoint of it: undone alone if it throws (or if `failsCommit`
    /// refuses it: the simulator's disk refuses one batch of a group as it would its own commit).
    public func savepoint<T>(_ body: () throws -> T) throws -> T {
        guard depth > 0 else { return try transaction(body) }
        let before = state
        depth += 1
        defer { depth -= 1 }
        do {
            let result = try body()
            // (As SQLite after a full disk or an I/O error: the whole transaction is undone, by the
            // transaction's own rollback once this error reaches it.)
            if let losesTransaction, losesTransaction() { throw StoreTransactionLost("(simulated)") }
            if let failsCommit, failsCommit() { throw Refused() }
            return result
        } catch let error as StoreTransactionLost {
            throw error
        } catch {
            state = before
            messagesChanged &+= 1
            throw error
        }
    }

    /// Asked at the end of each savepoint: true makes the whole transaction lost (`StoreTransactionLost`).
    public var losesTransaction: (() -> Bool)?

    /// Asked before each commit: true makes it fail, undone (the simulator's full or failing disk).
    public var failsCommit: (() -> Bool)?

    /// A commit `failsCommit` refused.
    public struct Refused: Error, CustomStringConvertible {
        public var description: String { "the disk refused the commit (simulated)" }
    }

    // MARK: What a crash keeps (the simulator's disk)

    fileprivate typealias State = (
        messages: [MessageKey: StoredMessage], queues: [String: [String]], roomOrder: [String], members: [String: [StoredMember]],
        joined: [String: Int64], saved: [String: (transfer: StoredTransfer, touched: Int64)], keyed: [String],
        storedOrder: [MessageKey: Int], firstByID: [String: MessageKey], storedLeaves: [StoredLeave], seals: [MessageKey: (seal: StoredSeal, room: String)],
        sealIDs: [MessageKey: String], marks: [String: [String: Int64]], recipients: [MessageKey: String]
    )

    private var state: State {
        get { (messages, queues, roomOrder, members, joined, saved, keyed, storedOrder, firstByID, storedLeaves, seals, sealIDs, marks, recipients) }
        set {
            (messages, queues, roomOrder, members, joined, saved, keyed, storedOrder, firstByID, storedLeaves, seals, sealIDs, marks, recipients) =
                newValue
        }
    }

    /// What a crash keeps, and the number of the commit or sync it came from; nil: everything (every
    /// commit is durable when it returns, the default).
    private var onDisk: (state: State, commit: UInt64)?
    private var commits: UInt64 = 0

    /// Whether a message with this id would survive a crash now (stored, and its commit synced).
    public func isOnDisk(messageID id: String) -> Bool {
        guard let onDisk else { return firstByID[id] != nil }
        return onDisk.state.firstByID[id] != nil
    }

    /// A sync of the log, begun: what it makes durable when it ends.
    public struct Sync {
        fileprivate let state: State
        fileprivate let commit: UInt64
    }

    /// From now on a commit made with `durable` false, and a write made outside a transaction, reach the
    /// disk only with a later sync or durable commit: `crash()` loses them.
    public func losesUnsyncedCommits() {
        onDisk = (state, commits)
    }

    /// A sync of the log begins: it covers everything committed until now.
    public func syncBegins() -> Sync {
        commits += 1
        return Sync(state: state, commit: commits)
    }

    /// The sync ended: what it covered is on disk (unless a later durable commit already is).
    public func syncEnded(_ sync: Sync) {
        guard let disk = onDisk, sync.commit > disk.commit else { return }
        onDisk = (sync.state, sync.commit)
    }

    /// The process died and the machine with it: the store holds what was on disk.
    public func crash() {
        guard let onDisk else { return }
        state = onDisk.state
        messagesChanged &+= 1
    }

    public func checkpoint() {}
    public func close() {}

    // MARK: Messages

    @discardableResult
    public func insert(_ message: StoredMessage, queuedFor recipients: String, now: Int64) -> Bool {
        guard insert(message, now: now) else { return false }
        if !recipients.isEmpty { self.recipients[MessageKey(message)] = recipients }
        return true
    }

    @discardableResult
    public func insert(_ message: StoredMessage, now: Int64) -> Bool {
        let key = MessageKey(message)
        guard messages[key] == nil else { return false }
        var message = message
        // Its seal kept once (another under the same author and id: stored as not sealed, as SQLite's, or
        // not stored at all if its seal is unchecked; the same but for the signature's bytes is the same seal).
        // A place kept as a leaf index alone comes with the seal's leaves, kept once with the seal (as SQLite's).
        if let seal = message.seal, message.isSealed, message.leafIndex == nil || seal.hasLeaves {
            let sealKey = MessageKey(id: seal.id, sender: message.senderID)
            if seals[sealKey] == nil { seals[sealKey] = (seal.hasLeaves ? seal : seal.withoutLeaves, message.room) }
            if let kept = seals[sealKey], kept.room == message.room, kept.seal.authorKey == seal.authorKey, kept.seal.leafCount == seal.leafCount,
                kept.seal.root == seal.root
            {
                sealIDs[key] = seal.id
                if !kept.seal.hasLeaves, seal.hasLeaves { seals[sealKey]?.seal.leaves = seal.leaves }
            } else if !seal.checked {
                return false
            } else {
                message.sealProof = []
            }
        } else if let seal = message.seal, message.isSealed, !seal.checked {
            return false  // (a leaf index without the seal's leaves, under a seal not checked yet: as SQLite's)
        } else {
            message.sealProof = []
        }
        messagesChanged &+= 1
        message.seal = nil
        messages[key] = message
        storedOrder[key] = storedOrder.count
        if firstByID[message.id] == nil { firstByID[message.id] = key }
        return true
    }

    /// History order: timestamp, then sender, then sequence (as SQLite orders it), then id, so that ties
    /// (which a sender's sequences make rare) never depend on a dictionary's order.
    private static func ordered(_ messages: some Sequence<StoredMessage>) -> [StoredMessage] {
        messages.sorted { ($0.timestamp, $0.senderID, $0.sequence, $0.id) < ($1.timestamp, $1.senderID, $1.sequence, $1.id) }
    }

    public func history(room: String?, limit: Int) -> [StoredMessage] {
        Array(Self.ordered(messages.values.filter { room == nil || $0.room == room }).suffix(max(0, limit)))
    }

    public func search(room: String?, limit: Int, filter: HistoryFilter) -> [StoredMessage] {
        let found = messages.values.filter { (room == nil || $0.room == room) && filter.keeps($0) }
        guard filter.words != nil else { return Array(Self.ordered(found).suffix(max(0, limit))) }
        return Self.ordered(found.sorted { storedOrder[MessageKey($0)]! > storedOrder[MessageKey($1)]! }.prefix(max(0, limit)))
    }

    /// Reads of a room's messages for relay so far (`export`, `recentSequences`): tests count them.
    public private(set) var relayReads = (exports: 0, recentSequences: 0)

    public func export(room: String, since: Int64, limit: Int) -> [StoredMessage] {
        relayReads.exports += 1
        let shared = messages.values.filter { $0.room == room && $0.kind != .system && !$0.direct && $0.timestamp >= since && sealChecked($0) }
        return Array(Self.ordered(shared).suffix(max(0, limit))).map(withSeal)
    }

    /// Whether `message` may be exported: not sealed, or under a seal that was checked (as SQLite's).
    private func sealChecked(_ message: StoredMessage) -> Bool {
        guard let id = sealIDs[MessageKey(message)], let kept = seals[MessageKey(id: id, sender: message.senderID)] else { return true }
        return kept.seal.checked
    }

    /// Whether the seal kept under `seal`'s author and id is `seal` (what its check covered).
    private func keeps(_ seal: StoredSeal, author: String) -> Bool {
        guard let kept = seals[MessageKey(id: seal.id, sender: author)]?.seal else { return false }
        return (kept.authorKey, kept.signature, kept.leafCount, kept.root) == (seal.authorKey, seal.signature, seal.leafCount, seal.root)
    }

    public func markSealChecked(author: String, seal: StoredSeal) {
        if keeps(seal, author: author) { seals[MessageKey(id: seal.id, sender: author)]?.seal.checked = true }
    }

    @discardableResult
    public func dropSealed(author: String, seal: StoredSeal) -> Int {
        let id = seal.id
        guard keeps(seal, author: author), seals.removeValue(forKey: MessageKey(id: id, sender: author)) != nil else { return 0 }
        let gone = sealIDs.filter { $0.key.sender == author && $0.value == id }.map(\.key)
        for key in gone {
            sealIDs[key] = nil
            messages[key] = nil  // (its `storedOrder` stays: the next message's place is counted past it)
            if firstByID[key.id] == key { firstByID[key.id] = messages.keys.first { $0.id == key.id } }
        }
        messagesChanged &+= 1
        return gone.count
    }

    /// Every seal kept (tests check each).
    public func keptSeals() -> [(author: String, room: String, seal: StoredSeal)] {
        seals.map { ($0.key.sender, $0.value.room, $0.value.seal.withoutLeaves) }
    }

    public func uncheckedSeals() -> [UncheckedSeal] {
        seals.filter { !$0.value.seal.checked }.map { UncheckedSeal(author: $0.key.sender, room: $0.value.room, seal: $0.value.seal.withoutLeaves) }
            .sorted { ($0.author, $0.seal.id) < ($1.author, $1.seal.id) }
    }

    /// `message` with its seal (as `export` hands records on).
    public func withSeal(_ message: StoredMessage) -> StoredMessage {
        guard message.isSealed, let id = sealIDs[MessageKey(message)] else { return message }
        var message = message
        message.seal = seals[MessageKey(id: id, sender: message.senderID)]?.seal
        // (A place kept as a leaf index reads as not sealed without its seal's leaves, as SQLite's.)
        if message.seal == nil || (message.leafIndex != nil && message.seal?.hasLeaves != true) {
            message.sealProof = []
            message.seal = nil
        }
        return message
    }

    public func latestTimestamp(room: String) -> Int64 {
        messages.values.filter { $0.room == room && $0.kind != .system }.map(\.timestamp).max() ?? 0
    }

    public func lastSequences(sender: String) -> [String: Int64] {
        var result: [String: Int64] = [:]
        for message in messages.values where message.senderID == sender && message.kind != .system {
            result[message.room] = max(result[message.room] ?? message.sequence, message.sequence)
        }
        return result
    }

    public func recentSequences(room: String, limit: Int) -> [(author: String, sequence: Int64)] {
        relayReads.recentSequences += 1
        return Self.ordered(messages.values.filter { $0.room == room && $0.kind != .system && !$0.direct }).suffix(max(0, limit)).map { ($0.senderID, $0.sequence) }
    }

    // MARK: Outbox

    public func setMark(peerID: String, room: String, acked: Int64) {
        marks[peerID, default: [:]][room] = acked
    }

    public func outboxMarks() -> [(peerID: String, room: String, acked: Int64)] {
        marks.keys.sorted().flatMap { peer in marks[peer, default: [:]].sorted { $0.key < $1.key }.map { (peer, $0.key, $0.value) } }
    }

    public func pinOutbox(peerID: String, room: String) {
        for key in marked(peerID) where messages[key]?.room == room { enqueue(peerID: peerID, messageID: key.id) }
        marks[peerID]?[room] = nil
        if marks[peerID]?.isEmpty == true { marks[peerID] = nil }
    }

    public func enqueue(peerID: String, messageID: String) {
        guard !(queues[peerID]?.contains(messageID) ?? false) else { return }
        queues[peerID, default: []].append(messageID)
    }

    public func acknowledge(peerID: String, messageID: String) {
        queues[peerID]?.removeAll { $0 == messageID }
        if queues[peerID]?.isEmpty == true { queues[peerID] = nil }
    }

    /// In the order their messages were stored (ours: as they were sent), as the SQLite store reads it.
    public func outbox(peerID: String) -> [StoredMessage] {
        queuedIDs(for: peerID).compactMap(message(id:))
    }

    /// By recipient, each in the order its messages were stored (the SQLite store orders them all by
    /// message; per recipient the two agree, and that is what the engine relies on).
    public func outboxEntries() -> [(peerID: String, messageID: String, room: String, sequence: Int64, marked: Bool)] {
        Set(queues.keys).union(marks.keys).sorted().flatMap { peer in
            let rows = Set(queues[peer] ?? [])
            let byMarks = Set(marked(peer).map(\.id))
            var entries: [(String, String, String, Int64, Bool)] = []
            for id in queuedIDs(for: peer) {
                guard let message = message(id: id) else { continue }
                if rows.contains(id) { entries.append((peer, id, message.room, message.sequence, false)) }
                if byMarks.contains(id) { entries.append((peer, id, message.room, message.sequence, true)) }
            }
            return entries
        }
    }

    /// Every message queued for `peer` (its rows and what its marks queue), in the order stored.
    public func queuedIDs(for peer: String) -> [String] {
        let ids = Set(queues[peer] ?? []).union(marked(peer).map(\.id))
        return ids.sorted { (firstByID[$0].flatMap { storedOrder[$0] } ?? .max) < (firstByID[$1].flatMap { storedOrder[$0] } ?? .max) }
    }

    /// Recipients with something queued.
    public var recipientsQueued: [String] { Set(queues.keys).union(marks.keys).filter { !queuedIDs(for: $0).isEmpty }.sorted() }

    /// Our messages `peer`'s marks queue: in each mark's room, past it, queued for every member or for it.
    private func marked(_ peer: String) -> [MessageKey] {
        guard let rooms = marks[peer] else { return [] }
        return recipients.compactMap { key, queuedFor in
            guard let message = messages[key], let acked = rooms[message.room], message.sequence > acked,
                queuedFor == "*" || queuedFor.split(separator: ",").contains(where: { $0 == peer })
            else { return nil }
            return key
        }
    }

    public func dropOutbox(peerID: String?, room: String) {
        for recipient in peerID.map({ [$0] }) ?? Array(queues.keys) {
            queues[recipient]?.removeAll { message(id: $0)?.room == room }
            if queues[recipient]?.isEmpty == true { queues[recipient] = nil }
        }
        for recipient in peerID.map({ [$0] }) ?? Array(marks.keys) {
            marks[recipient]?[room] = nil
            if marks[recipient]?.isEmpty == true { marks[recipient] = nil }
        }
    }

    // MARK: Rooms

    public func rooms() -> [(room: String, members: [StoredMember])] {
        roomOrder.map { ($0, (members[$0] ?? []).sorted { $0.name < $1.name }) }
    }

    public func saveRoom(_ room: String, members list: [StoredMember], now: Int64) {
        if members[room] == nil {
            roomOrder.append(room)
            joined[room] = now
        }
        members[room] = list
    }

    public func joinedAt(room: String) -> Int64? { joined[room] }

    public func deleteRoom(_ room: String) {
        members[room] = nil
        joined[room] = nil
        roomOrder.removeAll { $0 == room }
    }

    public func rememberKeyed(peerID: String, now: Int64) {
        if !keyed.contains(peerID) { keyed.append(peerID) }
    }

    public func keyedPeers() -> [String] { keyed }

    public func saveLeave(_ leave: StoredLeave) {
        storedLeaves.removeAll { $0.room == leave.room && $0.peerID == leave.peerID }
        storedLeaves.append(leave)
        if storedLeaves.count > maximumStoredLeaves {
            storedLeaves.sort { ($0.timestamp, $0.room, $0.peerID) < ($1.timestamp, $1.room, $1.peerID) }
            storedLeaves.removeFirst(storedLeaves.count - maximumStoredLeaves)
        }
    }

    public func leaves() -> [StoredLeave] {
        storedLeaves.sorted { ($0.timestamp, $0.room, $0.peerID) < ($1.timestamp, $1.room, $1.peerID) }
    }

    private var meta: [String: StoredMeta] = [:]

    public func saveMeta(_ entry: StoredMeta) { meta[entry.room + "\u{0}" + entry.key] = entry }

    public func metadata() -> [StoredMeta] { meta.keys.sorted().map { meta[$0]! } }

    public func deleteMeta(room: String, key: String?) {
        meta = meta.filter { $0.value.room != room || (key != nil && $0.value.key != key) }
    }

    // MARK: Transfers

    public func saveTransfer(_ transfer: StoredTransfer, now: Int64) {
        saved[transfer.id] = (transfer, now)
    }

    public func transfer(id: String) -> StoredTransfer? { saved[id]?.transfer }

    public func transfers() -> [StoredTransfer] {
        saved.values.sorted { ($0.touched, $0.transfer.id) < ($1.touched, $1.transfer.id) }.map(\.transfer)
    }

    public func updateTransfer(id: String, state: String?, sentMark: Int64?, resent: Int64?, now: Int64) {
        guard var entry = saved[id] else { return }
        if let state {
            entry.transfer.state = state
            entry.touched = now
        }
        if let sentMark { entry.transfer.sentMark = sentMark }
        if let resent { entry.transfer.resent = resent }
        saved[id] = entry
    }

    public func deleteTransfer(id: String) { saved[id] = nil }

    public func pruneTransfers(before: Int64) -> [StoredTransfer] {
        let old = saved.values.filter { $0.touched < before }.sorted { $0.transfer.id < $1.transfer.id }.map(\.transfer)
        for transfer in old { saved[transfer.id] = nil }
        return old
    }
}

extension StoredSeal {
    /// As the store lists its seals: the leaves only go with the messages handed on (`withSeal`).
    fileprivate var withoutLeaves: StoredSeal {
        var seal = self
        seal.leaves = []
        return seal
    }
}
