import Glibc
import LanchatCore
import LanchatEngine
import LanchatIdentity
import LanchatSecurity
@testable import LanchatSession
@testable import LanchatStore
import LanchatTransport
import LanchatWire
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// A node on loopback with real TLS, a real SQLite file and its own event loop.
final class TestNode: @unchecked Sendable {
    let directory: String
    let name: String
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let node: SessionNode
    let listener: Channel
    let identity: Identity
    let connector: PeerConnector
    let peers = PeerDirectory()
    var maintenance: Task<Void, Never>?
    private let collected = EventLog()

    init(
        _ name: String, directory: String? = nil, autoAccept: AutoAcceptPolicy = .all, downloads: String? = nil, historyForNewcomers: Int? = nil,
        signing: Bool = false
    ) async throws {
        var template = Array("/tmp/lanchat-node-XXXXXX".utf8CString)
        self.directory = directory ?? template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        self.name = name
        identity = try Identity.loadOrCreate(in: self.directory)
        connector = PeerConnector(
            hello: .init(peerID: identity.peerID.rawValue, name: name, capabilities: ["chat"]), encryption: .required,
            tls: try PeerTLS(certificate: IdentityCertificate(identity: identity)), group: group)
        let box = NodeReference()
        listener = try await connector.listen(port: 0) { connection in Task { await box.node?.accepted(connection) } }
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        var configuration = SessionNode.Configuration(
            ownID: identity.peerID, ownName: name, port: listener.localAddress!.port!, autoAccept: autoAccept, encryption: .required)
        configuration.downloadDirectory = downloads ?? self.directory + "/downloads"
        if let historyForNewcomers { configuration.historyForNewcomers = historyForNewcomers }
        if signing { configuration.envelopes = EnvelopeKeys(signer: EnvelopeSigner(identity: identity)) }
        node = try SessionNode(
            configuration: configuration,
            eventLoop: group.next(), connector: connector, store: try ChatStore(path: self.directory + "/" + ChatStore.fileName),
            knownPeers: try KnownPeers(directory: self.directory), directory: peers, logger: logger)
        box.node = node
        let node = self.node
        let collected = self.collected
        maintenance = Task { await node.run() }
        Task { for await event in node.events { collected.append(event) } }
    }

    var peer: SessionPeer { SessionPeer(id: identity.peerID, name: name) }

    func knows(_ other: TestNode) {
        peers.update(other.identity.peerID, PeerAddressHint(name: other.name, port: other.listener.localAddress!.port!, addresses: ["127.0.0.1"], encryption: .required))
    }

    var events: [SessionEvent] { collected.all }

    /// Alice and bob, both started; alice knows bob's address and has invited him into `lab`, and he accepted.
    static func aliceAndBobInLab() async throws -> (alice: TestNode, bob: TestNode) {
        let alice = try await TestNode("alice")
        let bob = try await TestNode("bob")
        alice.knows(bob)
        #expect(await alice.node.invite(bob.peer, room: lab, context: [], timeout: .seconds(5)) == .accepted)
        return (alice, bob)
    }

    func texts(_ room: String = "lab", limit: Int = 1000) async throws -> [String] {
        try await node.history(room: room, limit: limit).filter { $0.kind == .text }.map(\.body)
    }

    func stop() async {
        maintenance?.cancel()
        await maintenance?.value
        try? await listener.close()
        try? await group.shutdownGracefully()
    }
}

final class NodeReference: @unchecked Sendable {
    var node: SessionNode?
}

final class EventLog: Sendable {
    private let events = Mutex<[SessionEvent]>([])
    func append(_ event: SessionEvent) { events.withLock { $0.append(event) } }
    var all: [SessionEvent] { events.withLock { $0 } }
}

/// Waits for `condition`, failing the test after `timeout` (generous: these tests run beside CPU-heavy
/// ones on a 2-core machine, and a wait that only ever passes is free).
func eventually(_ what: String, timeout: Duration = .seconds(30), _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    Issue.record("timed out waiting for \(what)")
    throw CancellationError()
}

let lab = RoomID("lab")!

/// Makes a store's sync thread wait before each sync (or its store thread before each answer) while
/// `held` is true; `holding` turns true once one waits.
final class SyncGate: Sendable {
    let held = Mutex(true)
    let holding = Mutex(false)

    convenience init(_ sync: StoreSync) { self.init(hook: sync.beforeSync) }

    convenience init(_ store: StoreThread) { self.init(hook: store.beforeAnswer) }

    init(hook before: borrowing Mutex<(@Sendable () -> Void)?>) {
        before.withLock { hook in
            hook = { [self] in
                holding.withLock { $0 = true }
                while held.withLock({ $0 }) { usleep(1000) }
            }
        }
    }
}

extension SessionNode {
    /// Pauses reading from peers at `high` store requests outstanding, resumes at `low` (tests only).
    func setStoreMarks(high: Int, low: Int) { storeMarks = (high, low) }

    /// Store requests asked and not answered (tests only).
    var storeRequestsWaiting: Int { driver.unanswered }

    /// Runs SQL on the node's own store connection, on its executor (tests only).
    func executeOnStore(_ sql: String) async throws {
        try await storeThread.run(on: eventLoop) { try ($0 as! ChatStore).db.execute(sql) }.get()
    }
}
