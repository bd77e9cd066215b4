import Glibc
import LanchatCore
@testable import LanchatStore
import Testing

/// The store's transactions and connections: commits and their sync setting, savepoints in a group
/// commit, a reading connection, one daemon per file, checkpoints on a second connection.
@Suite struct ChatStoreTransactionTests {
    /// Commits sync the log (FULL) unless asked not to, for that commit only, even if it fails.
    @Test func commitsAreSyncedButOneMayOptOut() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        #expect(store.synchronousSetting == 2)
        let inside = try store.transaction(durable: false) { store.synchronousSetting }
        #expect(inside == 1)
        #expect(store.synchronousSetting == 2)
        struct Refused: Error {}
        #expect(throws: Refused.self) { try store.transaction(durable: false) { throw Refused() } }
        #expect(store.synchronousSetting == 2)
        try store.transaction(durable: false) { try store.insert(message(1), now: 0) }
        #expect(try store.history(room: "lab", limit: 10).count == 1)
        // Every time, not the first only (the setting is applied by each run of the PRAGMA).
        for _ in 0..<2 {
            #expect(try store.transaction(durable: false) { store.synchronousSetting } == 1)
            #expect(try store.transaction { store.synchronousSetting } == 2)
        }
    }

    /// Savepoints in a transaction: one that throws is undone alone; once SQLite rolled the whole
    /// transaction back by itself (here by hand, as it does after a full disk or an I/O error), a
    /// savepoint throws `StoreTransactionLost` and writes nothing (it would otherwise open a transaction
    /// of its own and commit it).
    @Test func aSavepointIsUndoneAloneAndRefusedOnceTheTransactionIsLost() throws {
        let store = try ChatStore(path: temporaryDirectory() + "/h.sqlite3")
        struct Refused: Error {}
        try store.transaction {
            try store.savepoint { try store.insert(message(1), now: 0) }
            #expect(throws: Refused.self) {
                try store.savepoint {
                    try store.insert(message(2), now: 0)
                    throw Refused()
                }
            }
            try store.savepoint { try store.insert(message(3), now: 0) }
        }
        #expect(try store.history(room: "lab", limit: 10).map(\.sequence) == [1, 3])
        #expect(throws: StoreTransactionLost.self) {
            try store.transaction {
                try store.savepoint { try store.insert(message(4), now: 0) }
                try store.db.execute("ROLLBACK")  // (what SQLite does by itself after SQLITE_FULL)
                try store.savepoint { try store.insert(message(5), now: 0) }
            }
        }
        #expect(try store.history(room: "lab", limit: 10).map(\.sequence) == [1, 3])
        #expect(!store.db.inTransaction)
    }

    /// A second connection that only reads sees what the store committed, not what its open transaction
    /// holds, and may write nothing.
    @Test func aReaderSeesWhatWasCommittedAndWritesNothing() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        let store = try ChatStore(path: path)
        try store.transaction { try store.insert(message(1), now: 0) }
        let reader = try ChatStore.reader(path: path)
        #expect(try reader.history(room: "lab", limit: 10).map(\.sequence) == [1])
        try store.transaction {
            try store.insert(message(2), now: 0)
            #expect(try reader.history(room: "lab", limit: 10).map(\.sequence) == [1])
        }
        #expect(try reader.history(room: "lab", limit: 10).map(\.sequence) == [1, 2])
        #expect(throws: ChatStore.Error.self) { try reader.insert(message(3), now: 0) }
        reader.close()
        #expect(try store.history(room: "lab", limit: 10).map(\.sequence) == [1, 2])
    }
}

@Suite struct LogCheckpointTests {
    /// One daemon per state directory: a second store on the same file is refused at once, with why;
    /// once the first closes, the file opens again.
    @Test func aSecondStoreOnTheSameFileIsRefused() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        let store = try ChatStore(path: path)
        do {
            _ = try ChatStore(path: path)
            Issue.record("a second store opened the same file")
        } catch {
            #expect(error.description.contains("in use by another lanchatd"), "\(error)")
        }
        store.close()
        let again = try ChatStore(path: path)
        // (On a local file system a second connection may checkpoint it: /tmp here.)
        #expect(again.checkpointPath == path && !ChatStore.onNetworkFileSystem(path))
    }

    /// On a network file system the store keeps SQLite's exclusive locking (WAL's shared memory does not
    /// work there), offers no second connection, and checkpoints by itself.
    @Test func onANetworkFileSystemTheStoreKeepsExclusiveLocking() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        let store = try ChatStore(path: path, networkFileSystem: true)
        #expect(store.checkpointPath == nil)
        for id in 1...50 { try store.transaction(durable: false) { try store.insert(message(id), now: 0) } }
        #expect(try store.databaseForTests.query("PRAGMA locking_mode").first?.first?.string == "exclusive")
        #expect(access(path + "-shm", F_OK) != 0, "a -shm file with exclusive locking")
        store.checkpoint()
        store.close()
        #expect(try ChatStore(path: path).history(room: "lab", limit: 100).count == 50)
    }

    /// A second connection copies the log into the database while the store goes on committing (what
    /// `StoreSync` runs on its checkpoint thread); nothing committed is lost or changed by it.
    @Test func aSecondConnectionCheckpointsWhileTheStoreCommits() throws {
        let path = temporaryDirectory() + "/h.sqlite3"
        let store = try ChatStore(path: path)
        let checkpointer = LogCheckpointer(path: path)
        for id in 1...200 { try store.transaction(durable: false) { try store.insert(message(id), now: 0) } }
        let first = try checkpointer.checkpoint()
        #expect(first.logFrames > 0 && first.copied == first.logFrames, "\(first)")
        for id in 201...400 {
            try store.transaction(durable: false) { try store.insert(message(id), now: 0) }
            if id % 50 == 0 { try checkpointer.checkpoint() }
        }
        let last = try checkpointer.checkpoint()
        #expect(last.copied == last.logFrames, "\(last)")
        #expect(try store.history(room: "lab", limit: 1000).map(\.sequence) == (1...400).map(Int64.init))
        checkpointer.close()
        store.close()
        #expect(try ChatStore(path: path).history(room: "lab", limit: 1000).count == 400)
    }
}
