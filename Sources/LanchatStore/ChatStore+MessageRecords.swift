import CSQLite
import Glibc
import LanchatCore

/// The messages themselves: stored (each once), indexed for search, read back (history, search, what a
/// newcomer or a member is sent, the sequences a resync compares).
extension ChatStore {
    /// Stores a message unless one with its id and author is already there. Returns whether it was new.
    @discardableResult
    public func insert(_ message: StoredMessage, now: Int64) throws(Error) -> Bool {
        try insert(message, queuedFor: "", now: now)
    }

    public func insert(_ message: StoredMessage, queuedFor recipients: String, now: Int64) throws(Error) -> Bool {
        guard try run(.insertMessage, { Self.bind(message, now: now, recipients: recipients, &$0) }) == 1 else { return false }
        changes &+= 1
        try run(.waitForIndex)
        return try keepSeal(of: message)
    }

    /// Stores each message unless one with its id and author is already there (a received history);
    /// returns how many were new. Those wait for the word index together, after the last: one statement
    /// for all, not one for each.
    public func insert(contentsOf messages: [StoredMessage], now: Int64) throws(Error) -> Int {
        // A new row's rowid is one past the largest (SQLite picks another only once one is 2^63 - 1):
        // the new rows are those past the largest before. One that is not waits for the index alone.
        let before = try db.query("SELECT max(rowid) FROM messages").first?.first?.int ?? 0
        var added = 0
        var elsewhere: [Int64] = []
        // What was stored before a failure still waits for the index, and reads of the messages are
        // stale (outside a transaction, it stays; inside one, the caller's rollback undoes both).
        func queue() throws(Error) {
            guard added > 0 else { return }
            changes &+= UInt64(added)
            try db.query("INSERT OR IGNORE INTO messages_unindexed (message_rowid) SELECT rowid FROM messages WHERE rowid > ?", [.integer(before)])
            for rowid in elsewhere { try db.query("INSERT OR IGNORE INTO messages_unindexed (message_rowid) VALUES (?)", [.integer(rowid)]) }
        }
        do {
            for message in messages {
                guard try run(.insertMessage, { Self.bind(message, now: now, &$0) }) == 1, try keepSeal(of: message) else { continue }
                added += 1
                if db.lastInsertedRowID <= before { elsewhere.append(db.lastInsertedRowID) }
            }
        } catch {
            try? queue()
            throw error
        }
        try queue()
        return added
    }

    /// Keeps the seal of a sealed message just stored (the last row inserted), once under its author and
    /// id; if another seal is kept under them (another room, key, count or root), the row is stored as not
    /// sealed. An author that reused a seal id would otherwise have its messages exported under a seal that
    /// is not theirs, and an honest member's history fail its receiver's check. Two seals alike but for the
    /// signature's bytes are one (both verify over the same bytes: an ECDSA signature has more than one
    /// valid form). Only a message that was new keeps a seal: a duplicate leaves nothing behind.
    ///
    /// A message under an unchecked seal (`StoredSeal.checked`) that is not the one kept is not stored at
    /// all (returns false): stored as not sealed, it could be exported before anyone checked it.
    ///
    /// A message whose place is its leaf index alone (`sealProof` of 2 bytes) comes with its seal's leaves:
    /// they are kept with the seal (once), also when the seal was kept before without them. Without them
    /// (or of another size) it is stored as not sealed under a checked seal, and not at all under an
    /// unchecked one (as above).
    private func keepSeal(of message: StoredMessage) throws(Error) -> Bool {
        guard let seal = message.seal, message.isSealed else { return true }
        guard Self.sealed(message) else {
            guard !seal.checked else { return true }
            try forget(db.lastInsertedRowID)
            return false
        }
        // The other messages of a seal just found kept (a SEAL's messages come together).
        if let last = lastKeptSeal, last.names(author: message.senderID, room: message.room, seal: seal), last.leaves || Self.leaves(of: seal).isEmpty {
            return true
        }
        var name = KeptSeal(author: message.senderID, room: message.room, seal: seal)
        let key = Hex.string(seal.authorKey)
        let root = Hex.string(seal.root)
        let new = try run(.insertSeal) {
            $0.text(message.senderID)
            $0.text(seal.id)
            $0.text(message.room)
            $0.text(key)
            $0.text(Hex.string(seal.signature))
            $0.integer(Int64(seal.leafCount))
            $0.text(root)
            $0.integer(seal.checked ? 1 : 0)
            $0.blob(Self.leaves(of: seal))
        }
        name.leaves = !Self.leaves(of: seal).isEmpty
        if new != 1 {
            // Kept already: the same seal (its other messages), or another under the same id.
            let same = try db.query(
                "SELECT 1 FROM seals WHERE author_id = ? AND seal_id = ? AND room = ? AND author_key = ? AND leaf_count = ? AND root = ?",
                [.text(message.senderID), .text(seal.id), .text(message.room), .text(key), .integer(Int64(seal.leafCount)), .text(root)]
            ).count
            guard same == 1 else {
                let row = db.lastInsertedRowID
                if seal.checked {
                    try db.query("UPDATE messages SET seal_id = '', seal_proof = '' WHERE rowid = ?", [.integer(row)])
                } else {
                    try forget(row)
                    return false
                }
                return true
            }
            if name.leaves {
                try run(.keepLeaves) {
                    $0.blob(seal.leaves)
                    $0.text(message.senderID)
                    $0.text(seal.id)
                }
            }
        }
        lastKeptSeal = name
        return true
    }

    /// Takes back the row just stored (a message under an unchecked seal it cannot be kept under). (It
    /// waits for the word index first, so that the delete's trigger does not take it out of an index it
    /// is not in.)
    private func forget(_ row: Int64) throws(Error) {
        try db.query("INSERT OR IGNORE INTO messages_unindexed (message_rowid) VALUES (?)", [.integer(row)])
        try db.query("DELETE FROM messages WHERE rowid = ?", [.integer(row)])
    }

    /// The length of a message's place kept as its leaf index alone.
    static let leafIndexLength = 2

    /// Whether the message is stored sealed: a proof and its seal; a leaf index only with the seal's leaves.
    static func sealed(_ message: StoredMessage) -> Bool {
        guard let seal = message.seal, message.isSealed else { return false }
        return message.sealProof.count != leafIndexLength || !leaves(of: seal).isEmpty
    }

    /// A seal's leaves as the store keeps them: one hash (32 bytes) for each of its leaves, or none. (The
    /// engine checked them against the seal's root; the store has no hash to check them again.)
    static func leaves(of seal: StoredSeal) -> [UInt8] {
        seal.hasLeaves ? seal.leaves : []
    }

    public func markSealChecked(author: String, seal: StoredSeal) throws(Error) {
        try db.query("UPDATE seals SET checked = 1 WHERE \(Self.thatSeal) AND checked = 0", Self.thatSeal(author: author, seal))
    }

    @discardableResult
    public func dropSealed(author: String, seal: StoredSeal) throws(Error) -> Int {
        // Through the room's two indexes: the room is the seal's.
        guard let room = try db.query("SELECT room FROM seals WHERE \(Self.thatSeal)", Self.thatSeal(author: author, seal)).first?.first?.string
        else { return 0 }
        var dropped = 0
        for arm in Self.roomArms {
            try db.query(Self.forgetSealSQL(arm: arm), [.text(room), .text(author), .text(seal.id)])
            dropped += db.changes
        }
        try db.query("DELETE FROM seals WHERE \(Self.thatSeal)", Self.thatSeal(author: author, seal))
        changes &+= 1
        lastKeptSeal = nil
        return dropped
    }

    /// The seal row of `author` that is `seal`: its id, and what its check covered (key, signature, count, root).
    static let thatSeal = "author_id = ? AND seal_id = ? AND author_key = ? AND signature = ? AND leaf_count = ? AND root = ?"

    static func thatSeal(author: String, _ seal: StoredSeal) -> [SQLiteDatabase.Value] {
        [
            .text(author), .text(seal.id), .text(Hex.string(seal.authorKey)), .text(Hex.string(seal.signature)), .integer(Int64(seal.leafCount)),
            .text(Hex.string(seal.root)),
        ]
    }

    public func uncheckedSeals() throws(Error) -> [UncheckedSeal] {
        try db.query("SELECT author_id, room, seal_id, author_key, signature, leaf_count, root FROM seals WHERE checked = 0").map {
            UncheckedSeal(
                author: $0[0].string, room: $0[1].string,
                seal: StoredSeal(
                    id: $0[2].string, authorKey: Self.bytes(hex: $0[3].string), signature: Self.bytes(hex: $0[4].string), leafCount: Int($0[5].int),
                    root: Self.bytes(hex: $0[6].string), checked: false))
        }
    }

    private static func bind(_ message: StoredMessage, now: Int64, recipients: String = "", _ binder: inout SQLiteDatabase.Binder) {
        binder.text(message.id)
        binder.text(message.room)
        binder.text(message.senderID)
        binder.text(message.senderName)
        binder.integer(message.sequence)
        binder.integer(message.timestamp)
        binder.integer(message.kind.rawValue)
        binder.text(message.body)
        binder.integer(now)
        binder.text(message.authorKey.isEmpty ? "" : Hex.string(message.authorKey))
        binder.text(message.signature.isEmpty ? "" : Hex.string(message.signature))
        binder.integer(message.direct ? 1 : 0)
        let sealed = sealed(message)
        binder.text(sealed ? message.seal?.id ?? "" : "")
        binder.blob(sealed ? message.sealProof : [])
        binder.text(recipients)
    }

    public func indexWaiting(limit: Int) throws -> Bool {
        guard depth == 0, !bulkStillOpen() else { return true }
        guard !(try db.query("SELECT 1 FROM messages_unindexed LIMIT 1")).isEmpty else { return false }
        // Not synced: the index and the waiting list change together, and either can be redone.
        try transaction(durable: false) {
            let first = "SELECT message_rowid FROM messages_unindexed ORDER BY message_rowid LIMIT ?"
            try db.query(
                "INSERT INTO messages_fts (rowid, body) SELECT m.rowid, m.body FROM messages m WHERE m.rowid IN (\(first)) ORDER BY m.rowid",
                [.integer(Int64(limit))])
            try db.query("DELETE FROM messages_unindexed WHERE message_rowid IN (\(first))", [.integer(Int64(limit))])
        }
        return !(try db.query("SELECT 1 FROM messages_unindexed LIMIT 1")).isEmpty
    }

    public func contains(messageID: String) throws(Error) -> Bool {
        !(try db.query("SELECT 1 FROM messages WHERE id = ?", [.text(messageID)])).isEmpty
    }

    /// The last `limit` messages (of `room`, or all), oldest first.
    public func history(room: String?, limit: Int) throws(Error) -> [StoredMessage] {
        let columns = Self.messageColumns
        let newest: [StoredMessage]
        if let room {
            // The newest of each of the room's two indexes, merged.
            var both: [StoredMessage] = []
            for arm in Self.roomArms { both += try messages(Self.roomHistorySQL(arm: arm), [.text(room), .integer(Int64(limit))]) }
            newest = Self.newestFirst(both, limit: limit)
        } else {
            newest = try messages(
                "SELECT \(columns) FROM messages ORDER BY timestamp DESC, sender_id DESC, sequence DESC LIMIT ?", [.integer(Int64(limit))])
        }
        return newest.reversed()
    }

    /// The last `limit` messages `filter` keeps, oldest first. With words, the index (`messages_fts`)
    /// drives: each word of the query, quoted (so nothing in it is query syntax), must begin a word of
    /// the message, and the index yields matches newest stored first, so the search stops at `limit`
    /// (the last stored matches: a history imported later counts as later). Without words, by time.
    public func search(room: String?, limit: Int, filter: HistoryFilter) throws(Error) -> [StoredMessage] {
        var source = "messages m"
        var order = "m.timestamp DESC, m.sender_id DESC, m.sequence DESC"
        var conditions: [String] = []
        var values: [SQLiteDatabase.Value] = []
        if let words = filter.words {
            // The index first takes what waits for it (an import's bulk write is committed for that; not
            // inside a transaction, where nothing can be committed).
            do {
                if depth == 0 {
                    try commitBulk()
                    while try indexWaiting(limit: 50_000) {}
                }
            } catch let error as Error {
                throw error
            } catch {
                throw Error(description: "\(error)")
            }
            // Quoted, so nothing in it is query syntax. A term SQLite's tokenizer cuts further (a vowel
            // sign in Devanagari, a joiner) becomes a phrase, which the index (with positions) answers.
            let terms = HistoryFilter.tokens(words).map { "\"" + $0.replacing("\"", with: "\"\"") + "\"*" }
            guard !terms.isEmpty else { return [] }  // no word in it (only punctuation): nothing matches
            do {
                // CROSS JOIN keeps the index as the outer loop (SQLite does not reorder it).
                source = "messages_fts f CROSS JOIN messages m ON m.rowid = f.rowid"
                order = "f.rowid DESC"
                conditions.append("messages_fts MATCH ?")
                values.append(.text(terms.joined(separator: " ")))
            }
        }
        if let room {
            conditions.append("m.room = ?")
            values.append(.text(room))
        }
        if let sender = filter.sender {
            conditions.append("(m.sender_name = ? OR (length(?) >= 4 AND substr(m.sender_id, 1, length(?)) = ?))")
            values += [.text(sender), .text(sender), .text(sender), .text(sender)]
        }
        if let since = filter.since {
            conditions.append("m.timestamp >= ?")
            values.append(.integer(since))
        }
        if let kind = filter.kind {
            // A literal, not a parameter: SQLite uses the partial index `messages_files` only so.
            conditions.append("m.kind = \(kind.rawValue)")
        }
        if let suffix = filter.idSuffix {
            // (Read among the rows the other conditions leave: the room's files, by `messages_files`.)
            conditions.append("substr(m.id, -?) = ?")
            values += [.integer(Int64(suffix.utf8.count)), .text(suffix)]
        }
        if let prefix = filter.bodyPrefix {
            conditions.append("substr(m.body, 1, ?) = ?")
            values += [.integer(Int64(prefix.unicodeScalars.count)), .text(prefix)]  // (SQLite counts code points)
        }
        let found: [StoredMessage]
        if let room, filter.words == nil, filter.kind != .file {
            // A room's messages by time, from its two indexes (files alone: by their own, `messages_files`).
            found = try roomNewest(room: room, conditions: conditions, values: values, since: filter.since, limit: limit)
        } else {
            let clause = conditions.joined(separator: " AND ")
            found = try messages(Self.searchSQL(source: source, clause: clause, order: order), values + [.integer(Int64(limit))])
        }
        return found.sorted { ($0.timestamp, $0.senderID, $0.sequence, $0.id) < ($1.timestamp, $1.senderID, $1.sequence, $1.id) }
    }

    static func searchSQL(source: String, clause: String, order: String) -> String {
        "SELECT \(messageColumns(prefix: "m.")) FROM \(source)\(clause.isEmpty ? "" : " WHERE " + clause) ORDER BY \(order) LIMIT ?"
    }

    /// The columns `message(_:)` reads, in its order.
    static let messageColumns = messageColumns(prefix: "")

    static func messageColumns(prefix: String) -> String {
        messageColumnNames.map { prefix + $0 }.joined(separator: ", ")
    }

    static let messageColumnNames = [
        "id", "room", "sender_id", "sender_name", "sequence", "timestamp", "kind", "body", "author_key", "signature", "direct", "seal_proof",
    ]

    /// A message from the columns `messageColumns` names, read in place (`forEachRow`).
    static func message(_ columns: SQLiteDatabase.Columns) -> StoredMessage {
        StoredMessage(
            id: columns.text(0), room: columns.text(1), senderID: columns.text(2), senderName: columns.text(3), sequence: columns.int(4),
            timestamp: columns.int(5), kind: StoredMessage.Kind(rawValue: columns.int(6)) ?? .text, body: columns.text(7),
            authorKey: bytes(hex: columns.text(8)), signature: bytes(hex: columns.text(9)), direct: columns.int(10) != 0,
            sealProof: columns.blob(11) ?? bytes(hex: columns.text(11)))
    }

    /// The seal columns (`sealColumns`, after `messageColumns` from `first` on) as a seal, if the message
    /// has one kept (a LEFT JOIN leaves them NULL).
    static func seal(_ columns: SQLiteDatabase.Columns, from first: Int32) -> StoredSeal? {
        guard let id = columns.optionalText(first) else { return nil }
        return StoredSeal(
            id: id, authorKey: bytes(hex: columns.text(first + 1)), signature: bytes(hex: columns.text(first + 2)),
            leafCount: Int(columns.int(first + 3)), root: bytes(hex: columns.text(first + 4)))
    }

    /// A message with its seal, from `messageColumns(prefix: "m.")` and `sealColumns`.
    static func exported(_ columns: SQLiteDatabase.Columns) -> StoredMessage {
        var message = message(columns)
        if message.isSealed {
            message.seal = seal(columns, from: Int32(messageColumnNames.count))
            if message.seal == nil { message.sealProof = [] }  // (a seal not kept: read as not sealed)
        }
        return message
    }

    /// The seal's columns, read by `seal(_:from:)`.
    static let sealColumns = "s.seal_id, s.author_key, s.signature, s.leaf_count, s.root"
    /// Joins each message to its seal, by the seal table's key.
    static let sealJoin = "LEFT JOIN seals s ON s.author_id = m.sender_id AND s.seal_id = m.seal_id"
    /// What an export keeps (in WHERE, not in the join: a message whose seal the join does not find reads
    /// as not sealed, and would go as the relay's word): not sealed, or under a seal that was checked.
    static let sealChecked = "coalesce(s.checked, 1) = 1"

    /// The messages a query of `messageColumns` (and maybe more columns after them) reads, in its order.
    func messages(_ sql: String, _ binds: [SQLiteDatabase.Value]) throws(Error) -> [StoredMessage] {
        var messages: [StoredMessage] = []
        try db.forEachRow(sql, binds) { messages.append(Self.message($0)) }
        return messages
    }

    /// The bytes of hex as `Hex.string` writes it (anything else: none, read as unsigned).
    static func bytes(hex: String) -> [UInt8] { Hex.bytes(hex) ?? [] }

    /// What a newcomer (or a member, for what it lacks) is sent: the last `limit` text and file messages of
    /// `room` from `since` on, oldest first; not those sent to some members only (`direct`).
    public func export(room: String, since: Int64, limit: Int) throws(Error) -> [StoredMessage] {
        var messages: [StoredMessage] = []
        try db.forEachRow(Self.exportSQL, [.text(room), .integer(since), .integer(Int64(limit))]) { messages.append(Self.exported($0)) }
        try withLeaves(&messages)
        return messages.reversed()
    }

    /// Gives each message whose place is kept as its leaf index its seal's leaves (`StoredSeal.leaves`),
    /// read once a seal (not joined to every row: 8 KiB a seal of 256); the messages of one seal share
    /// them. One whose seal has none reads as not sealed (a damaged row).
    func withLeaves(_ messages: inout [StoredMessage]) throws(Error) {
        var leaves: [String: [UInt8]] = [:]
        for index in messages.indices where messages[index].sealProof.count == Self.leafIndexLength {
            guard let seal = messages[index].seal else { continue }
            let key = messages[index].senderID + "/" + seal.id
            if leaves[key] == nil {
                var found: [UInt8] = []
                try db.forEachRow("SELECT leaves FROM seals WHERE author_id = ? AND seal_id = ?", [.text(messages[index].senderID), .text(seal.id)]) {
                    found = $0.blob(0) ?? []
                }
                leaves[key] = found
            }
            messages[index].seal?.leaves = leaves[key] ?? []
            if messages[index].seal.map(Self.leaves(of:))?.isEmpty != false {
                messages[index].sealProof = []
                messages[index].seal = nil
            }
        }
    }

    /// `export` in pieces: each a read through the same index from the cursor on, so a history of a
    /// million messages is never held whole (nor its rows all read at once on the event loop). The first
    /// piece starts at the `limit`th newest (one walk of the index), or at `since` if there are fewer.
    public func exportPage(
        room: String, since: Int64, limit: Int, after cursor: ExportCursor?, count: Int
    ) throws(Error)
        -> (messages: [StoredMessage], next: ExportCursor?)
    {
        var start: ExportCursor
        if let cursor {
            start = cursor
        } else {
            guard limit > 0 else { return ([], nil) }
            let first = try db.query(Self.exportStartSQL, [.text(room), .integer(since), .integer(Int64(limit - 1))]).first
            // Just before the first (the rowid breaks ties, so nothing lies between), or before anything since `since`.
            start =
                first.map {
                    ExportCursor(
                        timestamp: $0[0].int, senderID: $0[1].string, sequence: $0[2].int,
                        tiebreak: $0[3].int - 1, remaining: limit)
                }
                ?? ExportCursor(timestamp: since, senderID: "", sequence: .min, tiebreak: .min, remaining: limit)
        }
        var messages: [StoredMessage] = []
        messages.reserveCapacity(min(count, start.remaining))
        var lastRowID: Int64 = 0
        try db.forEachRow(
            Self.exportPageSQL,
            [
                .text(room), .integer(start.timestamp), .text(start.senderID), .integer(start.sequence),
                .integer(start.tiebreak), .integer(Int64(min(count, start.remaining))),
            ]
        ) { columns in
            messages.append(Self.exported(columns))
            lastRowID = columns.int(Self.exportRowIDColumn)
        }
        guard let last = messages.last else { return ([], nil) }
        try withLeaves(&messages)
        let next = ExportCursor(
            timestamp: last.timestamp, senderID: last.senderID, sequence: last.sequence,
            tiebreak: lastRowID, remaining: start.remaining - messages.count)
        return (messages, next.remaining > 0 && messages.count == count ? next : nil)
    }

    static let exportStartSQL =
        "SELECT m.timestamp, m.sender_id, m.sequence, m.rowid FROM messages m \(sealJoin) WHERE m.room = ? AND m.kind != 2 AND m.direct = 0 "
        + "AND m.timestamp >= ? AND \(sealChecked) ORDER BY m.timestamp DESC, m.sender_id DESC, m.sequence DESC, m.rowid DESC LIMIT 1 OFFSET ?"
    static let exportPageSQL =
        "SELECT \(messageColumns(prefix: "m.")), \(sealColumns), m.rowid FROM messages m \(sealJoin) "
        + "WHERE m.room = ? AND m.kind != 2 AND m.direct = 0 AND \(sealChecked) AND (m.timestamp, m.sender_id, m.sequence, m.rowid) > (?, ?, ?, ?) "
        + "ORDER BY m.timestamp, m.sender_id, m.sequence, m.rowid LIMIT ?"
    /// Where `exportPageSQL` reads the rowid: after the message's and the seal's columns.
    static let exportRowIDColumn = Int32(messageColumnNames.count + 5)

    /// (These read through the partial index `messages_shared`, and each message's seal by the seal
    /// table's key; a test checks the plans. Messages alike in time, author and sequence are told apart
    /// by rowid, as in `exportPage`.)
    static let exportSQL =
        "SELECT \(messageColumns(prefix: "m.")), \(sealColumns) FROM messages m \(sealJoin) "
        + "WHERE m.room = ? AND m.kind != 2 AND m.direct = 0 AND m.timestamp >= ? AND \(sealChecked) "
        + "ORDER BY m.timestamp DESC, m.sender_id DESC, m.sequence DESC, m.rowid DESC LIMIT ?"
    static let recentSequencesSQL =
        "SELECT sender_id, sequence FROM messages WHERE room = ? AND kind != 2 AND direct = 0 "
        + "ORDER BY timestamp DESC, sender_id DESC, sequence DESC LIMIT ?"

    public func messageCount() throws(Error) -> Int {
        Int(try db.query("SELECT count(*) FROM messages").first?.first?.int ?? 0)
    }

    /// The last sequence `sender` used in each room it wrote in (notices, kind 2, have their own count):
    /// a restarted daemon continues after it.
    public func lastSequences(sender: String) throws(Error) -> [String: Int64] {
        var result: [String: Int64] = [:]
        for row in try db.query("SELECT room, max(sequence) FROM messages WHERE sender_id = ? AND kind != 2 GROUP BY room", [.text(sender)]) {
            result[row[0].string] = row[1].int
        }
        return result
    }

    public func recentSequences(room: String, limit: Int) throws(Error) -> [(author: String, sequence: Int64)] {
        try db.query(Self.recentSequencesSQL, [.text(room), .integer(Int64(limit))]).map { ($0[0].string, $0[1].int) }
    }
}
