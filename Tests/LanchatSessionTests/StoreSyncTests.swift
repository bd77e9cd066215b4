import Glibc
@testable import LanchatSession
import NIOCore
import NIOPosix
import Testing

/// The store's syncs (`StoreSync`): one starts at a commit that must be durable, before the event loop
/// asks; a request waits for the first sync that began after every commit made before it (the running
/// one, or the next); one at a time.
@Suite struct StoreSyncTests {
    func logFile() -> String {
        var template = Array("/tmp/lanchat-sync-XXXXXX".utf8CString)
        let directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        let path = directory + "/log"
        let fd = open(path, O_CREAT | O_WRONLY, 0o600)
        close(fd)
        return path
    }

    @Test func aSyncStartsAtADurableCommitAndARequestAfterItSharesIt() async throws {
        let sync = StoreSync(path: logFile(), checkpointPath: nil)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let gate = SyncGate(sync)
        // A commit that need not be durable (acknowledgements heard) starts nothing.
        sync.committed(durable: false)
        try await Task.sleep(for: .milliseconds(100))
        #expect(!gate.holding.withLock { $0 } && sync.syncs.load(ordering: .relaxed) == 0)
        // One that must be durable starts a sync at once, with no request.
        sync.committed(durable: true)
        try await eventually("a sync began at the commit") { gate.holding.withLock { $0 } }
        // A request now is covered by it; one after a later commit needs the next sync.
        let first = sync.sync(on: loop)
        sync.committed(durable: false)
        let second = sync.sync(on: loop)
        try await Task.sleep(for: .milliseconds(100))
        #expect(sync.syncs.load(ordering: .relaxed) == 0)
        gate.held.withLock { $0 = false }
        try await first.get()
        try await second.get()
        #expect(sync.syncs.load(ordering: .relaxed) == 2)
        // Nothing committed since the last sync began: a request is answered with no sync.
        try await sync.sync(on: loop).get()
        #expect(sync.syncs.load(ordering: .relaxed) == 2)
        // Stopped: a request fails.
        sync.beforeSync.withLock { $0 = nil }
        await sync.shutdown()
        await #expect(throws: StoreSync.SyncError.self) { try await sync.sync(on: loop).get() }
        try await group.shutdownGracefully()
    }

    /// A sync that fails fails the requests it was to cover; a later request gets a sync of its own.
    @Test func aFailedSyncFailsWhatItCoveredAndTheNextRequestSyncsAgain() async throws {
        let sync = StoreSync(path: "/nonexistent-lanchat-dir/log", checkpointPath: nil)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        sync.committed(durable: true)
        await #expect(throws: StoreSync.SyncError.self) { try await sync.sync(on: loop).get() }
        sync.committed(durable: false)
        await #expect(throws: StoreSync.SyncError.self) { try await sync.sync(on: loop).get() }
        await sync.shutdown()
        try await group.shutdownGracefully()
    }
}
