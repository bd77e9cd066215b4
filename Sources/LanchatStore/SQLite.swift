import CSQLite

/// A small synchronous wrapper over the system's SQLite: open, execute, prepared statements.
/// Not thread-safe: its owner (one actor) serializes every call.
public final class SQLiteDatabase {
    public struct Error: Swift.Error, CustomStringConvertible {
        public let description: String
    }

    private var handle: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    public let path: String
    /// Where `run` copies the text and blobs it binds, for SQLite to read in place while the statement
    /// runs (`Binder`); made once, freed with the database.
    private let scratch = UnsafeMutableRawPointer.allocate(byteCount: SQLiteDatabase.scratchCapacity, alignment: 8)
    static let scratchCapacity = 16 * 1024
    /// A statement is binding or running (`run`).
    private var running = false

    /// `create`: make the file if it is not there (false: an error then).
    public init(path: String, create: Bool = true) throws(Error) {
        self.path = path
        _ = Self.configured
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(path, &db, flags, nil) == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw Error(description: "cannot open \(path): \(message)")
        }
        handle = db
        sqlite3_busy_timeout(db, 5000)
    }

    /// SQLite's process-wide settings, made once before its first use: no count of the memory it
    /// allocates (`lanchat_sqlite_without_memory_status`: a mutex taken at every allocation). A savepoint's
    /// journal stays SQLite's: in memory up to 64 KiB, then in a temporary file. (Kept in memory up to 1 or
    /// 8 MiB, storing a history's pieces took a sixth less time, but a journal that grew past that failed
    /// to spill, "database or disk is full", with SQLite 3.40: a history of 50,000 records each under a
    /// seal of its own, whose pieces touch pages all over the seals' table.)
    private static let configured: Void = { _ = lanchat_sqlite_without_memory_status() }()

    deinit {
        close()
        scratch.deallocate()
    }

    /// Closes the file (and releases its lock). Later calls fail with "closed".
    public func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements = [:]
        if let handle { sqlite3_close(handle) }
        handle = nil
    }

    private func error(_ what: String) -> Error {
        guard let handle else { return Error(description: "\(what): the database is closed") }
        return Error(description: "\(what): \(String(cString: sqlite3_errmsg(handle)))")
    }

    /// Runs SQL without results (several statements allowed).
    public func execute(_ sql: String) throws(Error) {
        guard handle != nil else { throw error("SQL failed") }
        guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else { throw error("SQL failed (\(sql.prefix(40))...)") }
    }

    /// Runs one statement that takes no values and returns no rows (BEGIN, COMMIT, ROLLBACK, a
    /// SAVEPOINT, RELEASE), prepared once and cached: `execute` parses its SQL at every call, and a lone
    /// message's commits on both ends ran about eleven of these (some 4,000 instructions each to parse).
    /// Not a PRAGMA: SQLite applies most of them when it prepares the statement and prepares it again at
    /// each run, so a cached one saves nothing.
    public func executePrepared(_ sql: String) throws(Error) {
        guard handle != nil else { throw error("SQL failed") }
        let statement = try cached(sql)
        let step = sqlite3_step(statement)
        sqlite3_reset(statement)
        guard step == SQLITE_DONE || step == SQLITE_ROW else { throw error("SQL failed (\(sql.prefix(40))...)") }
    }

    public enum Value: Equatable, Sendable {
        case integer(Int64)
        case text(String)
        case null
    }

    public typealias Row = [Value]

    /// Runs one statement with bound values; returns its rows. Statements are prepared once and cached.
    @discardableResult
    public func query(_ sql: String, _ binds: [Value] = []) throws(Error) -> [Row] {
        var rows: [Row] = []
        try forEachRow(sql, binds) { columns in rows.append(columns.row()) }
        return rows
    }

    /// Runs one statement with bound values and hands each row to `body` as it is read, without making
    /// a `Row` of it (what a read of many rows costs least with). Prepared once and cached, as `query`.
    public func forEachRow(_ sql: String, _ binds: [Value] = [], _ body: (Columns) throws(Error) -> Void) throws(Error) {
        guard handle != nil else { throw error("query failed") }
        let statement = try cached(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (index, value) in binds.enumerated() {
            let position = Int32(index + 1)
            switch value {
            case .integer(let number): sqlite3_bind_int64(statement, position, number)
            case .text(let text): Self.bind(text, at: position, in: statement)
            case .null: sqlite3_bind_null(statement, position)
            }
        }
        while true {
            let step = sqlite3_step(statement)
            if step == SQLITE_DONE { return }
            guard step == SQLITE_ROW else { throw error("query failed (\(sql.prefix(40))...)") }
            try body(Columns(statement: statement))
        }
    }

    /// The current row of a statement being stepped (`forEachRow`): valid only inside the call it is
    /// handed to.
    public struct Columns {
        fileprivate let statement: OpaquePointer

        /// Every column, as `query` returns them.
        func row() -> Row {
            let count = sqlite3_column_count(statement)
            var row: Row = []
            row.reserveCapacity(Int(count))
            for column in 0..<count {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: row.append(.integer(sqlite3_column_int64(statement, column)))
                case SQLITE_NULL: row.append(.null)
                default: row.append(optionalText(column).map(Value.text) ?? .null)
                }
            }
            return row
        }

        /// The column as an integer (0 if it is NULL).
        public func int(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }

        /// The column as text ("" if it is NULL).
        public func text(_ column: Int32) -> String { optionalText(column) ?? "" }

        /// The column's bytes if it holds a blob (nil if it holds anything else).
        public func blob(_ column: Int32) -> [UInt8]? {
            guard sqlite3_column_type(statement, column) == SQLITE_BLOB else { return nil }
            let count = Int(sqlite3_column_bytes(statement, column))
            guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return [] }
            return Array(UnsafeRawBufferPointer(start: bytes, count: count))
        }

        /// The column as text (nil if it is NULL), its bytes taken as they are: no search for a NUL.
        public func optionalText(_ column: Int32) -> String? {
            guard let text = sqlite3_column_text(statement, column) else { return nil }
            let count = Int(sqlite3_column_bytes(statement, column))
            return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
        }
    }

    /// A statement prepared once and run many times (`run`), held by its user: what `query` finds by its
    /// text in a cache, which hashes the text at each call.
    public struct Statement {
        fileprivate let handle: OpaquePointer
    }

    /// Prepares `sql` (or finds it prepared) for `run`. Valid until the database is closed.
    public func statement(_ sql: String) throws(Error) -> Statement {
        guard handle != nil else { throw error("cannot prepare") }
        return Statement(handle: try cached(sql))
    }

    /// Binds a statement's parameters in order, for `run`. Text and blobs are copied into the database's
    /// scratch space (or, past its end, into a copy of their own) and bound where they were copied
    /// (`SQLITE_STATIC`), which stays as it is until the statement has run: SQLite's own copy of each
    /// (`SQLITE_TRANSIENT`) cost an allocation and a free for every value, about a fifth of what storing
    /// a message cost outside SQLite's tables.
    public struct Binder {
        fileprivate let statement: OpaquePointer
        fileprivate var position: Int32 = 1
        fileprivate let scratch: UnsafeMutableRawPointer
        fileprivate var used = 0
        /// Copies that did not fit in the scratch space (freed once the statement has run).
        fileprivate var spilled: [UnsafeMutableRawPointer] = []

        public mutating func integer(_ value: Int64) {
            sqlite3_bind_int64(statement, position, value)
            position += 1
        }

        public mutating func text(_ value: String) {
            var value = value
            value.withUTF8 { bytes in
                let at = place(UnsafeRawBufferPointer(bytes))
                sqlite3_bind_text(statement, position, at.bindMemory(to: CChar.self, capacity: bytes.count), Int32(bytes.count), nil)
            }
            position += 1
        }

        /// `bytes` as a blob; no bytes bind the empty text.
        public mutating func blob(_ bytes: [UInt8]) {
            guard !bytes.isEmpty else { return text("") }
            bytes.withUnsafeBytes { bytes in
                let at = place(bytes)
                sqlite3_bind_blob(statement, position, at, Int32(bytes.count), nil)
            }
            position += 1
        }

        /// A copy of `bytes` that stays until the statement has run.
        private mutating func place(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawPointer {
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return UnsafeRawPointer(scratch) }
            let at: UnsafeMutableRawPointer
            if bytes.count <= SQLiteDatabase.scratchCapacity - used {
                at = scratch + used
                used += bytes.count
            } else {
                at = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 1)
                spilled.append(at)
            }
            at.copyMemory(from: base, byteCount: bytes.count)
            return UnsafeRawPointer(at)
        }
    }

    /// Runs a prepared statement that returns no rows, its parameters bound by `bind`; returns the rows
    /// it changed. (Its bindings are cleared after it ran: nothing is left pointing at the copies.)
    @discardableResult
    public func run(_ statement: Statement, _ bind: (inout Binder) -> Void) throws(Error) -> Int {
        guard handle != nil else { throw error("statement failed") }
        let prepared = statement.handle
        // (One statement at a time uses the scratch space: a run from inside a bind would write over the
        // values bound before it.)
        precondition(!running, "SQLiteDatabase.run inside a bind")
        running = true
        var binder = Binder(statement: prepared, scratch: scratch)
        defer {
            running = false
            sqlite3_reset(prepared)
            sqlite3_clear_bindings(prepared)
            for copy in binder.spilled { copy.deallocate() }
        }
        bind(&binder)
        let step = sqlite3_step(prepared)
        guard step == SQLITE_DONE || step == SQLITE_ROW else { throw error("statement failed") }
        return changes
    }

    /// The rowid of the last row inserted.
    public var lastInsertedRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    private func cached(_ sql: String) throws(Error) -> OpaquePointer {
        if let cached = statements[sql] { return cached }
        var prepared: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &prepared, nil) == SQLITE_OK, let prepared else { throw error("cannot prepare \(sql.prefix(60))") }
        statements[sql] = prepared
        return prepared
    }

    /// Binds text from its UTF-8 bytes as they are (SQLite copies them): no NUL-terminated copy first.
    static func bind(_ text: String, at position: Int32, in statement: OpaquePointer) {
        var text = text
        text.withUTF8 { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else {
                sqlite3_bind_text(statement, position, "", 0, transient)
                return
            }
            _ = base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                sqlite3_bind_text(statement, position, $0, Int32(bytes.count), transient)
            }
        }
    }

    /// SQLite copies what is bound with it.
    fileprivate static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Rows changed by the last INSERT/UPDATE/DELETE.
    public var changes: Int { Int(sqlite3_changes(handle)) }
    /// Rows changed by every INSERT/UPDATE/DELETE since the connection opened (with their triggers').
    public var totalChanges: Int64 { sqlite3_total_changes64(handle) }
    /// A transaction is open.
    public var inTransaction: Bool { handle != nil && sqlite3_get_autocommit(handle) == 0 }
}

extension SQLiteDatabase.Value {
    public var int: Int64 { if case .integer(let value) = self { return value } else { return 0 } }
    public var string: String { if case .text(let value) = self { return value } else { return "" } }
}
