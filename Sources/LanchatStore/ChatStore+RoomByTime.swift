import LanchatCore

/// A room's messages by time. They are in two partial indexes that together hold each message once
/// (`prepareSchema`): the shared ones (`messages_shared`: not notices, not direct) and the rest
/// (`messages_private`). What reads a room by time reads both and merges them.
extension ChatStore {
    /// What each of a room's two indexes holds: a condition SQLite reads through the index only when a
    /// query's WHERE has it as written here.
    static let roomArms = roomArms(prefix: "")

    static func roomArms(prefix: String) -> [String] {
        ["\(prefix)kind != 2 AND \(prefix)direct = 0", "(\(prefix)kind = 2 OR \(prefix)direct != 0)"]
    }

    /// The newest `limit` messages of a room that `arm` (one of `roomArms`) holds, newest first.
    static func roomHistorySQL(arm: String) -> String {
        "SELECT \(messageColumns) FROM messages WHERE room = ? AND \(arm) ORDER BY timestamp DESC, sender_id DESC, sequence DESC LIMIT ?"
    }

    /// The newest `limit` of messages read from a room's two indexes, newest first.
    static func newestFirst(_ messages: [StoredMessage], limit: Int) -> [StoredMessage] {
        Array(
            messages.sorted { ($0.timestamp, $0.senderID, $0.sequence, $0.id) > ($1.timestamp, $1.senderID, $1.sequence, $1.id) }
                .prefix(max(0, limit)))
    }

    /// The newest `limit` messages of `room` that `conditions` keep (over `m`, with `values` bound in
    /// order; `since`, if any, among them), newest first. Each index is read in windows of time from the
    /// room's newest message back, each twice as long as the one before, until `limit` are found: a
    /// filter that keeps few of one index's messages (a sender who wrote only direct messages, text among
    /// many notices) reads about what one index of all of the room's messages read to find them, not all
    /// of the other index's messages of the room.
    func roomNewest(room: String, conditions: [String], values: [SQLiteDatabase.Value], since: Int64?, limit: Int) throws(Error) -> [StoredMessage] {
        var newest: Int64?
        var oldest: Int64?
        for arm in Self.roomArms {
            if let top = Self.integer(try db.query(Self.roomEndSQL(arm: arm, end: "max"), [.text(room)]).first?.first) {
                newest = max(newest ?? top, top)
            }
            if let bottom = Self.integer(try db.query(Self.roomEndSQL(arm: arm, end: "min"), [.text(room)]).first?.first) {
                oldest = min(oldest ?? bottom, bottom)
            }
        }
        guard limit > 0, var upper = newest, let oldest else { return [] }
        let bottom = max(oldest, since ?? oldest)
        var span: Int64 = 60_000  // a minute, then 2, 4, ...: at most 64 windows for any times
        var found: [StoredMessage] = []
        while found.count < limit, upper >= bottom {
            let (start, overflow) = upper.subtractingReportingOverflow(span)
            let lower = overflow ? bottom : max(bottom, start)
            var window: [StoredMessage] = []
            for arm in Self.roomArms(prefix: "m.") {
                window += try messages(
                    Self.roomWindowSQL(conditions: conditions + [arm]),
                    values + [.integer(lower), .integer(upper), .integer(Int64(limit - found.count))])
            }
            found += Self.newestFirst(window, limit: limit - found.count)
            guard lower > bottom else { break }
            upper = lower - 1
            span = span > Int64.max / 2 ? Int64.max : span * 2
        }
        return found
    }

    /// An integer a query read (NULL, as `max` of no rows: none).
    static func integer(_ value: SQLiteDatabase.Value?) -> Int64? {
        if case .integer(let number) = value { number } else { nil }
    }

    /// The newest (`end` "max") or oldest ("min") time of a room's messages in `arm`.
    static func roomEndSQL(arm: String, end: String) -> String {
        "SELECT \(end)(timestamp) FROM messages WHERE room = ? AND \(arm)"
    }

    /// A window of `roomNewest`: `conditions` (`m.room = ?` among them), then the window's first and last
    /// time and the limit.
    static func roomWindowSQL(conditions: [String]) -> String {
        "SELECT \(messageColumns(prefix: "m.")) FROM messages m WHERE \((conditions + ["m.timestamp BETWEEN ? AND ?"]).joined(separator: " AND ")) "
            + "ORDER BY m.timestamp DESC, m.sender_id DESC, m.sequence DESC LIMIT ?"
    }

    /// The newest timestamp of a text or file message in `room` (0 if none): what a newcomer already has.
    /// The shared messages' newest, then a direct one newer than it (not every notice read to find none).
    public func latestTimestamp(room: String) throws(Error) -> Int64 {
        var latest: Int64 = -1
        for arm in Self.roomArms {
            latest = Self.integer(try db.query(Self.latestTimestampSQL(arm: arm), [.text(room), .integer(latest)]).first?.first) ?? latest
        }
        return max(0, latest)
    }

    static func latestTimestampSQL(arm: String) -> String {
        "SELECT max(timestamp) FROM messages WHERE room = ? AND \(arm) AND kind != 2 AND timestamp > ?"
    }

    /// The highest sequence `sender` used in `room` (0 if none).
    public func lastSequence(room: String, sender: String) throws(Error) -> Int64 {
        var last: Int64 = 0
        for arm in Self.roomArms {
            last = max(last, try db.query(Self.lastSequenceSQL(arm: arm), [.text(room), .text(sender)]).first?.first?.int ?? 0)
        }
        return last
    }

    static func lastSequenceSQL(arm: String) -> String {
        "SELECT max(sequence) FROM messages WHERE room = ? AND sender_id = ? AND \(arm) AND kind != 2"
    }

    static func forgetSealSQL(arm: String) -> String {
        "DELETE FROM messages WHERE room = ? AND sender_id = ? AND seal_id = ? AND \(arm)"
    }
}
