import CSQLite

/// A second connection to a `ChatStore`'s file that does nothing but checkpoint its write-ahead log
/// (copy the log into the database, with SQLite's own syncs of both), so that this work and its syncs
/// run on a thread of their own instead of the one that commits (LanchatSession's `StoreSync` runs it).
/// A passive checkpoint never waits for the other connection: it copies what was committed and stops
/// where a reader still needs the log. Use it from one thread at a time.
public final class LogCheckpointer {
    private let path: String
    private var db: SQLiteDatabase?

    /// `path`: the database file (`ChatStore`'s path); it is opened at the first checkpoint.
    public init(path: String) {
        self.path = path
    }

    /// Copies the log into the database as far as it can without waiting; returns the log's frames and
    /// those copied so far (both -1 when the database is not in WAL mode).
    @discardableResult
    public func checkpoint() throws(SQLiteDatabase.Error) -> (logFrames: Int, copied: Int) {
        if db == nil {
            let opened = try SQLiteDatabase(path: path, create: false)
            // (It only checkpoints: it never waits for the committing connection's locks.)
            try opened.execute("PRAGMA busy_timeout=0")
            db = opened
        }
        let row = try db?.query("PRAGMA wal_checkpoint(PASSIVE)").first
        return (Int(row?[1].int ?? -1), Int(row?[2].int ?? -1))
    }

    public func close() {
        db?.close()
        db = nil
    }
}
