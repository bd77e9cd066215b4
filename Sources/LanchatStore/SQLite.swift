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

    /// `create`: make the file if it is not there (false: an error then).
    public init(path: String, create: Bool = true) throws(Error) {
        self.path = path
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

    deinit {
        close()
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

    public enum Value: Equatable, Sendable {
        case integer(Int64)
        case text(String)
        case null
    }

    public typealias Row = [Value]

    /// Runs one statement with bound values; returns its rows. Statements are prepared once and cached.
    @discardableResult
    public func query(_ sql: String, _ binds: [Value] = []) throws(Error) -> [Row] {
        guard handle != nil else { throw error("query failed") }
        let statement: OpaquePointer
        if let cached = statements[sql] {
            statement = cached
        } else {
            var prepared: OpaquePointer?
            guard sqlite3_prepare_v2(handle, sql, -1, &prepared, nil) == SQLITE_OK, let prepared else { throw error("cannot prepare \(sql.prefix(60))") }
            statements[sql] = prepared
            statement = prepared
        }
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        for (index, value) in binds.enumerated() {
            let position = Int32(index + 1)
            switch value {
            case .integer(let number): sqlite3_bind_int64(statement, position, number)
            case .text(let text): sqlite3_bind_text(statement, position, text, -1, transient)
            case .null: sqlite3_bind_null(statement, position)
            }
        }
        var rows: [Row] = []
        while true {
            let step = sqlite3_step(statement)
            if step == SQLITE_DONE { break }
            guard step == SQLITE_ROW else { throw error("query failed (\(sql.prefix(40))...)") }
            var row: Row = []
            for column in 0..<sqlite3_column_count(statement) {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: row.append(.integer(sqlite3_column_int64(statement, column)))
                case SQLITE_NULL: row.append(.null)
                default:
                    if let text = sqlite3_column_text(statement, column) {
                        row.append(.text(String(cString: text)))
                    } else {
                        row.append(.null)
                    }
                }
            }
            rows.append(row)
        }
        return rows
    }

    /// Rows changed by the last INSERT/UPDATE/DELETE.
    public var changes: Int { Int(sqlite3_changes(handle)) }
    /// A transaction is open.
    public var inTransaction: Bool { handle != nil && sqlite3_get_autocommit(handle) == 0 }
}

extension SQLiteDatabase.Value {
    public var int: Int64 { if case .integer(let value) = self { return value } else { return 0 } }
    public var string: String { if case .text(let value) = self { return value } else { return "" } }
}
