import Glibc
import LanchatCore
import LanchatEngine
import LanchatSecurity
import LanchatStore
import LanchatTransport
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// One peer's side of lanchat sessions: Multipeer Connectivity's advertiser, browser and session in
/// one actor, over TLS connections (`PeerConnector`) and a store (`SessionStore`: the daemon's SQLite
/// `ChatStore`, or `MemorySessionStore`).
///
/// - Browser: `invite(_:room:context:timeout:)` invites a discovered peer into a room
///   (`MCNearbyServiceBrowser.invitePeer(_:to:withContext:timeout:)`).
/// - Advertiser: incoming invitations are accepted by `autoAccept`, or reported as
///   `SessionEvent.invitation` and answered with `accept(_:)` / `decline(_:)`
///   (`MCNearbyServiceAdvertiserDelegate`'s invitation handler).
/// - Session: a room (`MCSession`) whose members are all connected to each other (a mesh). `send(_:room:to:reliable:)`
///   sends to the room or chosen members; `events` reports member state changes and received messages.
///
/// The node is the I/O shell of `SessionStateMachine` (LanchatEngine), which decides everything about
/// links, invitations, rooms, delivery and redialing: the node feeds it what happens (connections,
/// frames, time, API calls) and performs the actions it returns (writes to the store, frames to send,
/// dials, events, file work for transfers).
public actor SessionNode {
    public struct Configuration: Sendable {
        public var ownID: PeerID
        public var ownName: String
        /// Our peer port, told to other members so they can dial us.
        public var port: Int
        public var autoAccept: AutoAcceptPolicy
        public var encryption: EncryptionPreference
        public var defaultInviteTimeout: Duration = .seconds(60)
        public var maximumPendingInvitations = 64
        public var retransmitInterval: Duration = .seconds(5)
        public var maximumReconnectDelay: Duration = .seconds(10)
        /// Where received files go (created if missing).
        public var downloadDirectory: String = "/tmp"
        /// Where a room's history from its inviter is received before it is merged (a part file);
        /// `nil`: the download directory. lanchatd uses `incoming` in its state directory.
        public var historyDirectory: String?
        /// The largest file accepted from a peer.
        public var maximumFileSize: UInt64 = 1 << 40
        /// Received files readable by the daemon's group (0640, directory 0750): for the system service,
        /// whose users share its group. Otherwise 0600 / 0700.
        public var downloadsForGroup = false
        /// How many of a room's latest messages a member sends a newcomer it invited.
        public var historyForNewcomers = 1000
        /// How long after joining a newcomer takes its inviter's history offer (the engine's `historyOfferTimeout`).
        public var historyWait: Duration = .seconds(120)
        /// Our signing key and the check of others' signatures (`EnvelopeKeys(signer:)`); nil: the node
        /// speaks wire version 1 only (its HELLO must say so).
        public var envelopes: EnvelopeKeys?
        /// Turn away after this long without a person's command (nil: never).
        public var autoAway: Duration?
        /// Files shared in rooms (`SharedFiles.swift`): where their content is kept, by digest (nil: a
        /// hidden `.lanchat-shared` in the download directory; lanchatd uses `shared` in its state
        /// directory); whether others' files are kept (and fetched when announced, up to
        /// `sharedAutoFetchLimit` bytes) or only fetched when asked; how long a kept file stays (days).
        public var sharedDirectory: String?
        public var keepSharedFiles = true
        public var sharedAutoFetchLimit: UInt64 = 256 << 20
        public var sharedFilesDays = 30
        /// At most this many bytes of others' shared files are fetched by themselves (kept files count).
        public var sharedFilesQuota: UInt64 = 4 << 30

        public init(ownID: PeerID, ownName: String, port: Int, autoAccept: AutoAcceptPolicy, encryption: EncryptionPreference) {
            self.ownID = ownID
            self.ownName = ownName
            self.port = port
            self.autoAccept = autoAccept
            self.encryption = encryption
        }
    }

    /// A live connection to a peer.
    final class Link: Sendable {
        let handle: LinkHandle
        let connection: PeerConnector.Connection
        let peer: SessionPeer

        init(handle: LinkHandle, connection: PeerConnector.Connection, peer: SessionPeer) {
            self.handle = handle
            self.connection = connection
            self.peer = peer
        }

        var remoteAddress: String? { connection.channel.remoteAddress?.ipAddress }
    }

    public typealias RoomSummary = SessionStateMachine.RoomSummary

    public let configuration: Configuration
    /// The node runs on this event loop (its connections' loop): frames arrive without a thread hop.
    public nonisolated let eventLoop: EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { eventLoop.executor.asUnownedSerialExecutor() }
    public nonisolated let events: AsyncStream<SessionEvent>
    let eventSink: AsyncStream<SessionEvent>.Continuation
    let connector: PeerConnector
    /// The store, on its own thread: every use of it goes there (`StoreThread`).
    let storeThread: StoreThread
    /// A second connection checkpoints the store's log (`SessionStore.checkpointPath`).
    let checkpointsApart: Bool
    /// Reads of what was committed, on a connection and thread of their own (nil: on `storeThread`).
    let storeReader: StoreReader?
    var knownPeers: KnownPeers
    let logger: Logger

    /// Every decision about links, invitations, rooms and delivery (pure; see LanchatEngine).
    var engine: SessionStateMachine
    /// Every connection adopted and not yet closed, by the handle the engine knows it by.
    var openLinks: [LinkHandle: Link] = [:]
    /// The connection that serves each peer now (the engine decides; `.peerConnected` updates this).
    var links: [PeerID: Link] = [:]
    var nextHandle = 1
    /// API calls waiting for the outcome of an invitation they sent.
    var inviteWaiters: [WireID: CheckedContinuation<InviteOutcome, Never>] = [:]
    /// Redials the engine asked for, run by `run()`'s task group.
    private let dialRequests: AsyncStream<PeerID>
    let dialRequestSink: AsyncStream<PeerID>.Continuation
    /// The wake-up for the engine's next timer, and for the next store checkpoint.
    private var timerWakeup: Scheduled<Void>?
    private var timerDeadline: Int64?
    private var checkpointWakeup: Scheduled<Void>?
    /// The word index is catching up (`indexAndCheckpoint`): one catch-up at a time.
    var indexing = false
    /// A checkpoint of the store's log runs on its thread (`checkpointLog`): one at a time.
    var checkpointing = false
    /// A checkpoint was asked for while one ran: it runs again when that one ends.
    var checkpointAgain = false
    /// Probe connections open now (`serveProbe`), by their channel.
    var probes: [ObjectIdentifier: (peer: PeerID, address: String, connection: PeerConnector.Connection)] = [:]
    /// Unreliable frames dropped because a connection was full (counted while performing a send).
    var unreliableDrops = 0
    /// Reading from peers is paused: the store is behind (`pauseReadingIfBehind`).
    var readingPaused = false
    /// Store requests outstanding at which reading from peers pauses, and at which it resumes.
    var storeMarks = (high: 256, low: 64)
    /// Times reading paused so (tests, and the log's counters).
    var readingPauses = 0
    /// The shell's rules (LanchatEngine's `SessionDriver`, which the simulator runs too): the commit and
    /// its failure, the store's syncs and what waits for them, the send-first rule, the reads the engine
    /// asks for. The node does the plain I/O it returns (`carryOut`).
    var driver: SessionDriver
    /// The store's syncs off the event loop (`StoreSync`); nil for a store with nothing to sync.
    let storeSync: StoreSync?
    /// API calls waiting for a sync (`settled`, our own sends), by the driver's waiter number.
    var syncWaiters: [UInt64: CheckedContinuation<Settled, Never>] = [:]
    /// Waiters the driver settled before anyone waited for them (the store answered at once).
    var settledEarly: [UInt64: Settled] = [:]
    /// Transfers' records as the store held them at the start (`restoreTransfers`): those pruned, and the rest.
    var restoredTransfers: (pruned: [StoredTransfer], saved: [StoredTransfer]) = ([], [])
    private let clockOrigin = ContinuousClock.now
    /// `run()` has ended: connections closing now, late timers and dials change nothing.
    var stopped = false

    /// The files of transfers (the engine decides the transfers; Transfers+Files.swift does their file work).
    var files: [WireID: TransferFile] = [:]
    /// Histories being read and stored (`importHistory`), by transfer.
    var historyImports: [WireID: HistoryImport] = [:]
    /// What the shared-files directory holds (`SharedFiles.swift`): counted at most every few seconds.
    var sharedUsage: (at: Int64, bytes: UInt64, files: Int)?
    /// Named byte streams as programs on this side see them (Streams.swift; the engine decides the protocol).
    var streams: [WireID: StreamState] = [:]
    /// The node stopped its streams: a `ByteStream` let go from now on tells it nothing (`streamReleased`).
    nonisolated let streamsClosed = Atomic<Bool>(false)
    var streamAcceptors: [UInt64: StreamAcceptor] = [:]
    /// Programs subscribed to topics (Topics.swift), by room and topic.
    var topicSubscribers: [TopicKey: [UInt64: AsyncStream<TopicDelivery>.Continuation]] = [:]
    var nextTopicSubscriber: UInt64 = 0
    var nextStreamAcceptor: UInt64 = 0
    let fileIO: NIOThreadPool
    /// Where seals' signatures are checked (`SealCheck`), off the event loop: a thread of its own, so that
    /// a check never waits behind a file's reads.
    let sealChecks: NIOThreadPool
    /// Where a big history's second half of each piece is made ready (`HistoryEncoder.prepare`) while the
    /// file thread makes the first: an export of a million records on one thread took 5.5 s.
    let exportIO: NIOThreadPool

    public init(
        configuration: Configuration, eventLoop: EventLoop, connector: PeerConnector, store: sending any SessionStore, knownPeers: KnownPeers,
        directory: PeerDirectory, logger: Logger
    ) throws {
        self.configuration = configuration
        self.eventLoop = eventLoop
        fileIO = NIOThreadPool(numberOfThreads: 1)
        fileIO.start()
        sealChecks = NIOThreadPool(numberOfThreads: 1)
        sealChecks.start()
        exportIO = NIOThreadPool(numberOfThreads: 1)
        exportIO.start()
        self.connector = connector
        storeSync = store.logPath.map { StoreSync(path: $0, checkpointPath: store.checkpointPath) }
        checkpointsApart = store.checkpointPath != nil
        // (A store in memory has no file another connection could read: its reads stay on its thread.)
        storeReader = store is ChatStore ? store.checkpointPath.map(StoreReader.init(path:)) : nil
        driver = SessionDriver(historyForNewcomers: configuration.historyForNewcomers, syncs: storeSync != nil)
        self.knownPeers = knownPeers
        self.logger = logger
        (events, eventSink) = AsyncStream<SessionEvent>.makeStream(bufferingPolicy: .bufferingNewest(100_000))
        (dialRequests, dialRequestSink) = AsyncStream<PeerID>.makeStream()
        // (Read here, before the store's thread owns it.)
        let restored = try store.restored(ownID: configuration.ownID, knownPeers: KnownPeerBook(knownPeers.labels))
        let pruned = (try? store.pruneTransfers(before: Self.nowMilliseconds() - transferRetention)) ?? []
        restoredTransfers = (pruned, (try? store.transfers()) ?? [])
        storeThread = StoreThread(worker: StoreWorker(store: store, syncs: storeSync != nil), sync: storeSync)
        var engineConfiguration = SessionStateMachine.Configuration(
            ownID: configuration.ownID, ownName: configuration.ownName, port: configuration.port, autoAccept: configuration.autoAccept)
        engineConfiguration.defaultInviteTimeout = Self.milliseconds(configuration.defaultInviteTimeout)
        engineConfiguration.maximumPendingInvitations = configuration.maximumPendingInvitations
        engineConfiguration.retransmitInterval = Self.milliseconds(configuration.retransmitInterval)
        engineConfiguration.historyOfferTimeout = Self.milliseconds(configuration.historyWait)
        engineConfiguration.maximumReconnectDelay = Self.milliseconds(configuration.maximumReconnectDelay)
        engineConfiguration.encryption = configuration.encryption
        engineConfiguration.envelopes = configuration.envelopes
        engineConfiguration.autoAway = configuration.autoAway.map(Self.milliseconds)
        engineConfiguration.transferLimits.maximumSize = configuration.maximumFileSize
        // A cancel is told for as long as a receiver keeps an interrupted transfer (one retention, not two).
        engineConfiguration.transferLimits.cancelTold = transferRetention
        let ownID = configuration.ownID
        engine = SessionStateMachine(
            configuration: engineConfiguration, restored: restored, addressBook: directory, ids: .system(),
            shortCode: { ShortCode.between(ownID, $0) })
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    /// The engine's idea of now: monotonic milliseconds since the node started, and the wall clock.
    func time() -> EngineTime {
        EngineTime(monotonic: Self.milliseconds(ContinuousClock.now - clockOrigin), wall: Self.nowMilliseconds())
    }

    // MARK: Running

    /// Runs the node's schedule (redials, retransmits, invitation timeouts) until cancelled; then says
    /// GOODBYE to every peer.
    public func run() async {
        restoreTransfers()
        sweepSharedFiles()
        scheduleCheckpoint()  // (messages stored before a restart may still wait for the word index)
        let sweeping = eventLoop.scheduleRepeatedTask(initialDelay: .hours(6), delay: .hours(6)) { [weak self] _ in
            self?.assumeIsolated { $0.sweepSharedFiles() }
        }
        defer { sweeping.cancel() }
        perform(engine.start(at: time()))
        // Redials run here, as children of this task, so none outlives the node.
        await withDiscardingTaskGroup { group in
            for await peer in dialRequests {
                group.addTask { _ = await self.dial(peer) }
            }
        }
        closeStreams()
        stopped = true
        timerWakeup?.cancel()
        checkpointWakeup?.cancel()
        for link in openLinks.values { link.connection.leave(.shutdown) }
        for probe in probes.values { probe.connection.leave(.shutdown) }
        openLinks = [:]
        probes = [:]
        links = [:]
        for waiter in inviteWaiters.values { waiter.resume(returning: .unreachable("the node stopped")) }
        inviteWaiters = [:]
        // What waited for a sync is not done; `settled` waiters hear false.
        carryOut(driver.stop())
        // The store's thread does what was asked (the engine counts on it, and each write is idempotent),
        // then closes the store.
        await storeReader?.shutdown()
        await storeThread.shutdown()
        await storeSync?.shutdown()
        closeTransfers()
        eventSink.finish()
        try? await fileIO.shutdownGracefully()
        try? await sealChecks.shutdownGracefully()
        try? await exportIO.shutdownGracefully()
    }

    /// Sleeps until the engine's next deadline (or the driver's: acknowledgements heard that wait), then
    /// ticks it.
    func armTimer() {
        guard !stopped, let deadline = driver.nextWakeUp(engineDeadline: engine.nextDeadline) else {
            timerWakeup?.cancel()
            timerWakeup = nil
            timerDeadline = nil
            return
        }
        if let current = timerDeadline, current <= deadline, timerWakeup != nil { return }
        timerWakeup?.cancel()
        timerDeadline = deadline
        let delay = max(0, deadline - time().monotonic)
        timerWakeup = eventLoop.scheduleTask(in: .milliseconds(delay)) { [weak self] in
            self?.assumeIsolated { node in
                node.timerWakeup = nil
                node.timerDeadline = nil
                guard !node.stopped else { return }
                node.perform(node.engine.tick(at: node.time()))
            }
        }
    }

    /// Checkpoints the store's write-ahead log two seconds after a write (not on every write).
    func scheduleCheckpoint() {
        guard !stopped, checkpointWakeup == nil else { return }
        checkpointWakeup = eventLoop.scheduleTask(in: .seconds(2)) { [weak self] in
            self?.assumeIsolated { node in
                node.checkpointWakeup = nil
                node.indexAndCheckpoint()
            }
        }
    }

    func emitTransfer(_ info: TransferInfo) {
        eventSink.yield(.transfer(info))
    }

    /// A system message, kept in history and reported.
    func notice(_ room: RoomID, _ text: String) {
        perform(engine.notice(room, text, at: time()))
    }

    static func nowMilliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}
