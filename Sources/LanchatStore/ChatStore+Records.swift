import LanchatCore

/// What `ChatStore` keeps besides the messages themselves: the outbox of unacknowledged reliable
/// messages, rooms with their members and metadata, peers that proved their key, and file transfers
/// to resume.
extension ChatStore {
    // MARK: Outbox

    /// One row per (recipient, message), keyed by both, without a rowid: queuing a message for a recipient
    /// writes one B-tree page, and its acknowledgement one. `seq` is no longer written (NULL); it stays
    /// so that an older lanchatd, which orders by it, can still open the file.
    static let outboxTableColumns = "peer_id TEXT NOT NULL, message_id TEXT NOT NULL, seq INTEGER, PRIMARY KEY (peer_id, message_id)"

    /// Until 2026-11-27 the outbox was a rowid table with `seq INTEGER PRIMARY KEY AUTOINCREMENT` and a
    /// unique index on (recipient, message): each message queued wrote three pages (the table, the index,
    /// `sqlite_sequence`) into the commit of its send, each acknowledgement two. Such a table is copied
    /// into the keyed one, in one transaction. No new schema number: an older lanchatd names its
    /// columns, and `seq` is still there.
    func keyOutboxByRecipient() throws(Error) {
        let definition = try db.query("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'outbox'").first?.first?.string ?? ""
        guard definition.uppercased().contains("AUTOINCREMENT") else { return }
        try migrating { () throws(Error) in
            try db.execute(
                """
                CREATE TABLE outbox_keyed (\(Self.outboxTableColumns)) WITHOUT ROWID;
                INSERT OR IGNORE INTO outbox_keyed (peer_id, message_id, seq) SELECT peer_id, message_id, seq FROM outbox;
                DROP TABLE outbox;
                ALTER TABLE outbox_keyed RENAME TO outbox;
                """)
        }
    }

    /// One mark per (recipient, room): our sequence in the room through which the recipient holds every
    /// message of ours queued for it (`messages.recipients`). What a mark queues is each of our messages
    /// in the room past it whose recipients name it.
    static let outboxMarksTableColumns = "peer_id TEXT NOT NULL, room TEXT NOT NULL, acked INTEGER NOT NULL, PRIMARY KEY (peer_id, room)"

    /// Our messages a mark `k` queues (joined to `messages m`, through `messages_queued`): in its room, past
    /// it, queued for every member or for its recipient among others.
    static let markQueues = """
        m.room = k.room AND m.recipients != '' AND m.sequence > k.acked
            AND (m.recipients = '*' OR instr(',' || m.recipients || ',', ',' || k.peer_id || ',') > 0)
        """

    public func setMark(peerID: String, room: String, acked: Int64) throws(Error) {
        try run(.setMark) {
            $0.text(peerID)
            $0.text(room)
            $0.integer(acked)
        }
    }

    public func outboxMarks() throws(Error) -> [(peerID: String, room: String, acked: Int64)] {
        try db.query("SELECT peer_id, room, acked FROM outbox_marks ORDER BY peer_id, room").map { ($0[0].string, $0[1].string, $0[2].int) }
    }

    public func pinOutbox(peerID: String, room: String) throws(Error) {
        try db.query(
            "INSERT OR IGNORE INTO outbox (peer_id, message_id) SELECT k.peer_id, m.id FROM outbox_marks k JOIN messages m ON \(Self.markQueues) "
                + "WHERE k.peer_id = ? AND k.room = ? ORDER BY m.rowid", [.text(peerID), .text(room)])
        try db.query("DELETE FROM outbox_marks WHERE peer_id = ? AND room = ?", [.text(peerID), .text(room)])
    }

    public func enqueue(peerID: String, messageID: String) throws(Error) {
        try run(.enqueue) {
            $0.text(peerID)
            $0.text(messageID)
        }
    }

    public func acknowledge(peerID: String, messageID: String) throws(Error) {
        try run(.acknowledge) {
            $0.text(peerID)
            $0.text(messageID)
        }
    }

    /// Unacknowledged messages for `peerID`, in the order they were sent (stored: ours are stored as they
    /// are sent): its rows and what its marks queue. The outbox holds our own messages: of records under
    /// one id (`messages` is keyed by id and author), ours was stored first.
    public func outbox(peerID: String) throws(Error) -> [StoredMessage] {
        try messages(
            """
            SELECT \(Self.messageColumns(prefix: "m."))
            FROM (SELECT \(Self.queuedMessage) AS queued FROM outbox WHERE outbox.peer_id = ?
                UNION SELECT m.rowid FROM outbox_marks k JOIN messages m ON \(Self.markQueues) WHERE k.peer_id = ?) q
            JOIN messages m ON m.rowid = q.queued ORDER BY m.rowid
            """, [.text(peerID), .text(peerID)])
    }

    /// Every queued (recipient, message, room, sequence, marked), in the order their messages were sent.
    public func outboxEntries() throws(Error) -> [(peerID: String, messageID: String, room: String, sequence: Int64, marked: Bool)] {
        try db.query(
            """
            SELECT outbox.peer_id, outbox.message_id, m.room, m.sequence, 0, m.rowid FROM outbox JOIN messages m ON m.rowid = \(Self.queuedMessage)
            UNION ALL
            SELECT k.peer_id, m.id, m.room, m.sequence, 1, m.rowid FROM outbox_marks k JOIN messages m ON \(Self.markQueues)
            ORDER BY 6, 1
            """
        ).map { ($0[0].string, $0[1].string, $0[2].string, $0[3].int, $0[4].int != 0) }
    }

    /// Messages queued per recipient, rows and marks (a message both counts once).
    public func outboxCounts() throws(Error) -> [String: Int] {
        var counts: [String: Int] = [:]
        for (peer, entries) in Dictionary(grouping: try outboxEntries(), by: \.peerID) { counts[peer] = Set(entries.map(\.messageID)).count }
        return counts
    }

    /// An outbox row whose message (ours: the first stored under its id, as `outbox` reads it) is in the
    /// room given: another author's message under one of our ids, in another room, does not count.
    static let queuedIn = "(SELECT room FROM messages WHERE rowid = \(queuedMessage)) = ?"

    /// The rowid of an outbox row's message: ours, the first stored under its id (`messages` is keyed by
    /// id and author; another author's record under one of our ids was stored after ours).
    static let queuedMessage = "(SELECT min(rowid) FROM messages WHERE id = outbox.message_id)"

    /// Drops what is queued for `peerID` in `room` (it left the room, or we did): its rows and its mark.
    public func dropOutbox(peerID: String?, room: String) throws(Error) {
        if let peerID {
            try db.query("DELETE FROM outbox WHERE peer_id = ? AND \(Self.queuedIn)", [.text(peerID), .text(room)])
            try db.query("DELETE FROM outbox_marks WHERE peer_id = ? AND room = ?", [.text(peerID), .text(room)])
        } else {
            try db.query("DELETE FROM outbox WHERE \(Self.queuedIn)", [.text(room)])
            try db.query("DELETE FROM outbox_marks WHERE room = ?", [.text(room)])
        }
    }

    // MARK: Rooms

    public func rooms() throws(Error) -> [(room: String, members: [StoredMember])] {
        var result: [(String, [StoredMember])] = []
        for row in try db.query("SELECT room FROM rooms ORDER BY joined_at, room") {
            let room = row[0].string
            let members = try db.query("SELECT peer_id, name, port, addresses, proof FROM members WHERE room = ? ORDER BY name", [.text(room)]).map {
                StoredMember(
                    peerID: $0[0].string, name: $0[1].string, port: Int($0[2].int),
                    addresses: $0[3].string.split(separator: " ").map(String.init), proof: StoredProof(encoded: $0[4].string))
            }
            result.append((room, members))
        }
        return result
    }

    public func saveRoom(_ room: String, members: [StoredMember], now: Int64) throws(Error) {
        try db.query("INSERT OR IGNORE INTO rooms (room, joined_at) VALUES (?, ?)", [.text(room), .integer(now)])
        try db.query("DELETE FROM members WHERE room = ?", [.text(room)])
        for member in members {
            try db.query(
                "INSERT INTO members (room, peer_id, name, port, addresses, proof) VALUES (?,?,?,?,?,?)",
                [
                    .text(room), .text(member.peerID), .text(member.name), .integer(Int64(member.port)),
                    .text(member.addresses.joined(separator: " ")), .text(member.proof?.encoded ?? ""),
                ])
        }
    }

    public func joinedAt(room: String) throws(Error) -> Int64? {
        try db.query("SELECT joined_at FROM rooms WHERE room = ?", [.text(room)]).first?.first?.int
    }

    public func deleteRoom(_ room: String) throws(Error) {
        try db.query("DELETE FROM members WHERE room = ?", [.text(room)])
        try db.query("DELETE FROM rooms WHERE room = ?", [.text(room)])
    }

    public func saveMeta(_ entry: StoredMeta) throws(Error) {
        try db.query(
            "INSERT OR REPLACE INTO room_meta (room, key, value, deleted, version, timestamp, author_id, author_key, signature) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                .text(entry.room), .text(entry.key), .text(entry.value), .integer(entry.deleted ? 1 : 0), .integer(Int64(clamping: entry.version)),
                .integer(entry.timestamp), .text(entry.authorID), .text(Hex.string(entry.authorKey)), .text(Hex.string(entry.signature)),
            ])
    }

    public func deleteMeta(room: String, key: String?) throws(Error) {
        if let key {
            try db.query("DELETE FROM room_meta WHERE room = ? AND key = ?", [.text(room), .text(key)])
        } else {
            try db.query("DELETE FROM room_meta WHERE room = ?", [.text(room)])
        }
    }

    public func metadata() throws(Error) -> [StoredMeta] {
        try db.query("SELECT room, key, value, deleted, version, timestamp, author_id, author_key, signature FROM room_meta ORDER BY room, key").map {
            StoredMeta(
                room: $0[0].string, key: $0[1].string, value: $0[2].string, deleted: $0[3].int != 0, version: UInt64(max(0, $0[4].int)),
                timestamp: $0[5].int, authorID: $0[6].string, authorKey: Self.bytes(hex: $0[7].string), signature: Self.bytes(hex: $0[8].string))
        }
    }

    public func rememberKeyed(peerID: String, now: Int64) throws(Error) {
        try db.query("INSERT OR IGNORE INTO keyed_peers (peer_id, first_seen) VALUES (?, ?)", [.text(peerID), .integer(now)])
    }

    public func saveLeave(_ leave: StoredLeave) throws(Error) {
        try db.query(
            "INSERT OR REPLACE INTO leaves (room, peer_id, left_at) VALUES (?, ?, ?)",
            [.text(leave.room), .text(leave.peerID), .integer(Int64(clamping: leave.timestamp))])
        try db.query(
            """
            DELETE FROM leaves WHERE rowid IN (SELECT rowid FROM leaves ORDER BY left_at, room, peer_id
                LIMIT max(0, (SELECT count(*) FROM leaves) - ?))
            """, [.integer(Int64(maximumStoredLeaves))])
    }

    public func leaves() throws(Error) -> [StoredLeave] {
        try db.query("SELECT room, peer_id, left_at FROM leaves ORDER BY left_at, room, peer_id").map {
            StoredLeave(room: $0[0].string, peerID: $0[1].string, timestamp: UInt64(max(0, $0[2].int)))
        }
    }

    public func keyedPeers() throws(Error) -> [String] {
        try db.query("SELECT peer_id FROM keyed_peers ORDER BY first_seen, peer_id").map { $0[0].string }
    }

    // MARK: Transfers

    public func saveTransfer(_ transfer: StoredTransfer, now: Int64) throws(Error) {
        try db.query(
            """
            INSERT OR REPLACE INTO transfers (id, outgoing, peer_id, peer_name, path, name, size, sha256, modified, room, state, sent_mark, resent, updated_at, file_identity)
            VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
            """,
            [
                .text(transfer.id), .integer(transfer.outgoing ? 1 : 0), .text(transfer.peerID), .text(transfer.peerName), .text(transfer.path),
                .text(transfer.name), .integer(transfer.size), .text(transfer.sha256), .integer(transfer.modified), .text(transfer.room),
                .text(transfer.state), .integer(transfer.sentMark), .integer(transfer.resent), .integer(now), .text(transfer.fileIdentity),
            ])
    }

    public func transfer(id: String) throws(Error) -> StoredTransfer? {
        try db.query("SELECT \(Self.transferColumns) FROM transfers WHERE id = ?", [.text(id)]).first.map(Self.transfer)
    }

    /// All stored transfers, oldest first.
    public func transfers() throws(Error) -> [StoredTransfer] {
        try db.query("SELECT \(Self.transferColumns) FROM transfers ORDER BY updated_at, id").map(Self.transfer)
    }

    public func updateTransfer(id: String, state: String?, sentMark: Int64?, resent: Int64?, now: Int64) throws(Error) {
        if let state { try db.query("UPDATE transfers SET state = ?, updated_at = ? WHERE id = ?", [.text(state), .integer(now), .text(id)]) }
        if let sentMark { try db.query("UPDATE transfers SET sent_mark = ? WHERE id = ?", [.integer(sentMark), .text(id)]) }
        if let resent { try db.query("UPDATE transfers SET resent = ? WHERE id = ?", [.integer(resent), .text(id)]) }
    }

    public func deleteTransfer(id: String) throws(Error) {
        try db.query("DELETE FROM transfers WHERE id = ?", [.text(id)])
    }

    /// Forgets transfers last touched before `before` (milliseconds); returns them (to remove `.part` files).
    public func pruneTransfers(before: Int64) throws(Error) -> [StoredTransfer] {
        let old = try db.query("SELECT \(Self.transferColumns) FROM transfers WHERE updated_at < ?", [.integer(before)]).map(Self.transfer)
        try db.query("DELETE FROM transfers WHERE updated_at < ?", [.integer(before)])
        return old
    }

    private static let transferColumns = "id, outgoing, peer_id, peer_name, path, name, size, sha256, modified, room, state, sent_mark, resent, file_identity"

    private static func transfer(_ row: SQLiteDatabase.Row) -> StoredTransfer {
        StoredTransfer(
            id: row[0].string, outgoing: row[1].int != 0, peerID: row[2].string, peerName: row[3].string, path: row[4].string,
            name: row[5].string, size: row[6].int, sha256: row[7].string, modified: row[8].int, room: row[9].string,
            state: row[10].string, sentMark: row[11].int, resent: row[12].int, fileIdentity: row[13].string)
    }
}
