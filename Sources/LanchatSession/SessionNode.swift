import Glibc
import LanchatCore
import LanchatEngine
import LanchatSecurity
import LanchatStore
import LanchatTransport
import LanchatWire
import Logging
import NIOCore
import NIOPosix

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
    let store: any SessionStore
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
    private let dialRequestSink: AsyncStream<PeerID>.Continuation
    /// The wake-up for the engine's next timer, and for the next store checkpoint.
    private var timerWakeup: Scheduled<Void>?
    private var timerDeadline: Int64?
    private var checkpointWakeup: Scheduled<Void>?
    /// The word index is catching up (`indexAndCheckpoint`): one catch-up at a time.
    var indexing = false
    /// Probe connections open now (`serveProbe`), by their channel.
    var probes: [ObjectIdentifier: (peer: PeerID, address: String, connection: PeerConnector.Connection)] = [:]
    /// Unreliable frames dropped because a connection was full (counted while performing a send).
    var unreliableDrops = 0
    /// Per room, the highest of our own sequences this process saw committed and synced
    /// (`SessionStateMachine.sendAheadLimit`): a send may leave before its commit only if it continues from there.
    var storedThrough: [RoomID: Int64] = [:]
    /// The store's syncs off the event loop (`StoreSync`); nil for a store with nothing to sync.
    let storeSync: StoreSync?
    /// Syncs asked for (each durable commit takes the next number), and the last one known done.
    var syncsAsked: UInt64 = 0
    var syncedThrough: UInt64 = 0
    var syncRunning = false
    /// What waits for a sync, oldest first (`perform`): the frames and other I/O of each batch after a
    /// durable commit, and of every batch after it, so that nothing overtakes; `settled` waiters.
    var afterSync = SyncQueue()

    /// Performs the actions of our own messages (`send`, `share`): before their commit if they may go
    /// first (`mayGoFirst`, and they continue from `storedThrough`), after it otherwise. Returns once
    /// they are on disk: whether they committed (and synced), and whether they went first.
    func performOwn(_ plan: SessionStateMachine.SendPlan, _ actions: [SessionAction], in room: RoomID, mayGoFirst: Bool) async -> (committed: Bool, wentFirst: Bool) {
        let first = plan.messages.first?.sequence ?? 0
        // (Not while frames of earlier batches other than acknowledgements wait for a sync: they would be
        // overtaken. An ACK overtaken changes nothing: it only ends the peer's retransmits.)
        let ahead = mayGoFirst && afterSync.onlyAcknowledgementsWait && storedThrough[room].map { $0 + 1 == first } == true
        guard perform(actions, allOrNothing: true, sendFirst: ahead) else {
            engine.sendNotStored(plan)
            return (false, ahead)
        }
        // (A failed sync: the messages are in the store, maybe not on disk; their numbers stay used.)
        guard await settled() else { return (false, ahead) }
        if let last = plan.messages.last?.sequence { storedThrough[room] = max(storedThrough[room] ?? 0, last) }
        return (true, ahead)
    }
    /// What was stored in the last moments (a relay answer leaves it to its author: `SessionStateMachine.lacking`).
    var arrivals = RecentArrivals()
    private let clockOrigin = ContinuousClock.now
    /// `run()` has ended: connections closing now, late timers and dials change nothing.
    var stopped = false

    /// The files of transfers (the engine decides the transfers; Transfers+Files.swift does their file work).
    var files: [WireID: TransferFile] = [:]
    /// What the shared-files directory holds (`SharedFiles.swift`): counted at most every few seconds.
    var sharedUsage: (at: Int64, bytes: UInt64, files: Int)?
    /// Named byte streams as programs on this side see them (Streams.swift; the engine decides the protocol).
    var streams: [WireID: StreamState] = [:]
    var streamAcceptors: [UInt64: StreamAcceptor] = [:]
    /// Programs subscribed to topics (Topics.swift), by room and topic.
    var topicSubscribers: [TopicKey: [UInt64: AsyncStream<TopicDelivery>.Continuation]] = [:]
    var nextTopicSubscriber: UInt64 = 0
    var nextStreamAcceptor: UInt64 = 0
    let fileIO: NIOThreadPool

    public init(
        configuration: Configuration, eventLoop: EventLoop, connector: PeerConnector, store: any SessionStore, knownPeers: KnownPeers,
        directory: PeerDirectory, logger: Logger
    ) throws {
        self.configuration = configuration
        self.eventLoop = eventLoop
        fileIO = NIOThreadPool(numberOfThreads: 1)
        fileIO.start()
        self.connector = connector
        self.store = store
        storeSync = store.logPath.map(StoreSync.init(path:))
        self.knownPeers = knownPeers
        self.logger = logger
        (events, eventSink) = AsyncStream<SessionEvent>.makeStream(bufferingPolicy: .bufferingNewest(100_000))
        (dialRequests, dialRequestSink) = AsyncStream<PeerID>.makeStream()
        let restored = try store.restored(ownID: configuration.ownID, knownPeers: KnownPeerBook(knownPeers.labels))
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
        // What waited for a sync is not done (stopped: `performLater` does nothing); `settled` waiters hear false.
        while let waiting = afterSync.popFirst() { waiting.work(false) }
        await storeSync?.shutdown()
        closeTransfers()
        eventSink.finish()
        store.close()
        try? await fileIO.shutdownGracefully()
    }

    /// Sleeps until the engine's next deadline, then ticks it.
    func armTimer() {
        guard !stopped, let deadline = engine.nextDeadline else {
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

    // MARK: Performing the engine's actions

    /// What we hold of the room's recent messages (twice what a member sends, so that its window lies
    /// within ours), as a SYNC_REQUEST.
    func syncRequest(_ room: RoomID) -> WireFrame.SyncRequest {
        let held = (try? store.recentSequences(room: room.rawValue, limit: 2 * max(500, configuration.historyForNewcomers))) ?? []
        let joined = (try? store.joinedAt(room: room.rawValue)) ?? nil
        let since = SessionStateMachine.relayFloor(joinedAt: joined, now: Self.nowMilliseconds())
        return .init(room: room, sinceMilliseconds: since, marks: SessionStateMachine.syncMarks(held))
    }

    /// Performs a batch of actions: the writes first, in one transaction; then the rest in order. If the
    /// writes fail, what depends on them does not happen: no acknowledgement is sent (the sender keeps
    /// the message and sends it again) and no message is reported; with `allOrNothing` (a message we
    /// send) nothing happens at all. With `sendFirst` (our own messages, when
    /// `SessionStateMachine.sendAheadLimit` allows it), the frames for the peers are written and flushed
    /// before the commit, so that its sync runs while they travel and are stored. Returns whether the
    /// writes committed.
    ///
    /// With a store that syncs (`storeSync`), the commit does not wait for the disk: the sync runs on the
    /// store's thread, and the batch's I/O (frames, closes, file and stream work, answers to API calls)
    /// waits for it in `afterSync`, as does every later batch's, so that nothing overtakes an
    /// acknowledgement and everything keeps its order. Events for local programs (messages stored,
    /// members' changes) are told at once: the commit is visible to every read already; lost in a power
    /// failure before its sync, a message is sent again (it was not acknowledged) and told again.
    @discardableResult
    func perform(_ actions: [SessionAction], allOrNothing: Bool = false, sendFirst: Bool = false) -> Bool {
        guard !stopped else { return false }
        var inserted: Set<String> = []
        var committed = true
        var ticket: UInt64?
        if sendFirst {
            for case .send(let handle, let frames) in actions { openLinks[handle]?.connection.send(frames, flushNow: true) }
        }
        if actions.contains(where: { if case .persist = $0 { true } else { false } }) {
            // Acknowledgements heard (outbox removals) need no sync of their own: lost in a power failure,
            // their messages are sent again and de-duplicated. Anything else is synced before what follows.
            let durable = actions.contains { action in
                guard case .persist(let operation) = action else { return false }
                if case .acknowledge = operation { return false }
                return true
            }
            do {
                try store.transaction(durable: durable && storeSync == nil) {
                    for case .persist(let operation) in actions { try apply(operation, inserted: &inserted) }
                }
                if durable, storeSync != nil { ticket = askSync() }
                if !inserted.isEmpty { arrivals.note(inserted, at: time().monotonic) }
                scheduleCheckpoint()
            } catch {
                logger.error("cannot write to the store", metadata: ["error": "\(error)"])
                committed = false
                if allOrNothing {
                    armTimer()
                    return false
                }
            }
        }
        var later: [SessionAction] = []
        for action in actions {
            if sendFirst, case .send = action { continue }  // (written before the commit)
            switch action {
            case .persist(.insertMessage(let message, let report?)):
                guard inserted.contains(message.id) else { break }
                eventSink.yield(.message(report))
                if report.stored.kind == .file { announced(report) }
            case .persist:
                break
            case .emit(.topicMessage(let message)):
                deliver(message)
            case .emit(let event) where event.isOwnDeparture(configuration.ownID):
                eventSink.yield(event)
                endTopicsOutsideRooms()
            case .emit(let event):
                eventSink.yield(event)
            case .peerConnected(let peer, let handle):
                guard let link = openLinks[handle] else { break }
                links[peer.id] = link
            case .dial(let peer):
                dialRequestSink.yield(peer)
            case .peerDisconnected:
                break
            default:
                later.append(action)
            }
        }
        // Nothing leaves before what was committed before it is on disk.
        if let after = ticket ?? syncPending {
            if !later.isEmpty {
                let acknowledgements = later.allSatisfy { action in
                    guard case .send(_, let frames) = action else { return false }
                    return frames.allSatisfy { if case .ack = $0 { true } else { false } }
                }
                afterSync.append(after, frames: !acknowledgements) { [committed] synced in self.performLater(later, committed: committed && synced) }
            }
        } else {
            performLater(later, committed: committed)
        }
        armTimer()
        return committed
    }

    /// The rest of a batch (`perform`): its frames and other I/O, once its writes are on disk.
    private func performLater(_ actions: [SessionAction], committed: Bool) {
        guard !stopped else { return }
        // A resync asks every member of a room at once: what we hold is read once per room.
        var syncRequests: [RoomID: WireFrame.SyncRequest] = [:]
        for action in actions {
            if !committed, case .send(_, let frames) = action, frames.allSatisfy({ if case .ack = $0 { true } else { false } }) { continue }
            switch action {
            case .send(let handle, let frames):
                openLinks[handle]?.connection.send(frames)
            case .sendUnreliable(let handle, let frames):
                guard let link = openLinks[handle], link.connection.isWritable else { unreliableDrops += 1; continue }
                link.connection.send(frames)
            case .close(let handle, let reason, let text):
                openLinks[handle]?.connection.leave(reason, text: text)
            case .flushOutbox(let peer, let handle, let rooms):
                flushOutbox(to: peer, on: handle, rooms: Set(rooms.map(\.rawValue)))
            case .sendHistory(let room, let since, let peer, let signed, let limit):
                exportHistory(room: room, since: since, limit: min(configuration.historyForNewcomers, limit ?? .max), to: peer, signed: signed)
            case .requestHistory(let room, let handle, let scope):
                // What we lack (from a minute before the newest message we hold), within what was chosen.
                let latest = (try? store.latestTimestamp(room: room.rawValue)) ?? 0
                let since = max(latest - 60_000, scope.sinceMilliseconds ?? 0, 0)
                // A version 1 peer knows no limit (it sends what its own bound allows).
                let limit = openLinks[handle].flatMap { $0.connection.session.version >= 2 ? scope.limit : nil }
                openLinks[handle]?.connection.send([.historyRequest(room: room, sinceMilliseconds: UInt64(since), limit: limit.map { UInt32(clamping: $0) })])
            case .requestSync(let room, let handle):
                let request = syncRequests[room] ?? syncRequest(room)
                syncRequests[room] = request
                openLinks[handle]?.connection.send([.syncRequest(request)])
            case .sendSync(let room, let since, let marks, let peer):
                let latest = (try? store.export(room: room.rawValue, since: since, limit: configuration.historyForNewcomers)) ?? []
                let lacking = engine.relayAnswer(latest, room: room, marks: marks, to: peer.id, arrivals: arrivals, at: time())
                sendHistory(SessionStateMachine.withinRelayLimit(lacking, limit: engine.configuration.transferLimits.maximumRelaySize),
                            room: room, to: peer, signed: true)
            case .inviteFinished(let id, let outcome):
                inviteWaiters.removeValue(forKey: id)?.resume(returning: outcome)
            case .stream(let id, let signal):
                streamSignal(id, signal)
            case .streamHandedOver(let acceptor, let accepted):
                streamHandedOver(acceptor, accepted)
            case .file(let file):
                performFile(file)
            case .persist, .emit, .peerConnected, .dial, .peerDisconnected:
                break  // (done in `perform`)
            }
        }
    }

    // MARK: The store's syncs

    /// Asks for a sync of everything committed so far; returns its number.
    private func askSync() -> UInt64 {
        syncsAsked += 1
        startSync()
        return syncsAsked
    }

    /// Starts a sync of what was committed until now, unless one runs (then the next covers these).
    private func startSync() {
        guard !syncRunning, syncedThrough < syncsAsked, let storeSync else { return }
        syncRunning = true
        let target = syncsAsked
        storeSync.sync(on: eventLoop).whenComplete { [weak self] result in
            self?.assumeIsolated { node in
                node.syncRunning = false
                var synced = true
                if case .failure(let error) = result {
                    // The writes are in the store, perhaps not on disk: nothing is acknowledged for them.
                    node.logger.error("cannot sync the store", metadata: ["error": "\(error)"])
                    synced = false
                }
                node.syncedThrough = target
                while let first = node.afterSync.first, first.ticket <= target {
                    _ = node.afterSync.popFirst()
                    first.work(synced)
                }
                node.startSync()
                node.armTimer()
            }
        }
    }

    /// The last sync asked for, if it is not done.
    private var syncPending: UInt64? { syncedThrough < syncsAsked ? syncsAsked : nil }

    /// Waits until what was performed so far is done (its syncs included); returns whether they synced.
    func settled() async -> Bool {
        guard let last = syncPending else { return true }
        return await withCheckedContinuation { waiter in afterSync.append(last, frames: false) { waiter.resume(returning: $0) } }
    }

    private func apply(_ operation: StoreOperation, inserted: inout Set<String>) throws {
        if case .rememberPeer(let label, let id) = operation {
            // Its own file, not the database: a failure is logged, and the peer is asked about again.
            do { try knownPeers.remember(label: label, id: id) } catch {
                logger.error("cannot save the known-peers record", metadata: ["error": "\(error)"])
            }
        } else if try store.apply(operation, now: Self.nowMilliseconds()), case .insertMessage(let message, _) = operation {
            inserted.insert(message.id)
        }
    }

    private func flushOutbox(to peer: PeerID, on handle: LinkHandle, rooms: Set<String>) {
        guard let link = openLinks[handle], let queued = try? store.outbox(peerID: peer.rawValue), !queued.isEmpty else { return }
        let signed = link.connection.session.version >= 2
        var frames: [WireFrame] = []
        for message in queued where rooms.contains(message.room) {
            let message = signed ? SessionStateMachine.signedIfOurs(message, ownID: configuration.ownID, keys: configuration.envelopes) : message
            guard let frame = SessionStateMachine.frame(message, reliable: true, signed: signed) else { continue }
            frames.append(frame)
            if frames.count == 512 {
                link.connection.send(frames)
                frames = []
            }
        }
        if !frames.isEmpty { link.connection.send(frames) }
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

/// Work waiting for a sync of the store, first in first out (`SessionNode.afterSync`): each item runs
/// once the sync numbered `ticket` is done, with whether it succeeded.
struct SyncQueue {
    struct Waiting {
        var ticket: UInt64
        /// It holds frames other than ACKs.
        var frames: Bool
        var work: (_ synced: Bool) -> Void
    }

    private var items: [Waiting] = []
    private var head = 0
    private var holdingFrames = 0

    var first: Waiting? { head < items.count ? items[head] : nil }
    /// Nothing waits but acknowledgements (and waiters with no frames).
    var onlyAcknowledgementsWait: Bool { holdingFrames == 0 }

    mutating func append(_ ticket: UInt64, frames: Bool, _ work: @escaping (_ synced: Bool) -> Void) {
        items.append(Waiting(ticket: ticket, frames: frames, work: work))
        if frames { holdingFrames += 1 }
    }

    mutating func popFirst() -> Waiting? {
        guard head < items.count else { return nil }
        let item = items[head]
        if item.frames { holdingFrames -= 1 }
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, 2 * head >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return item
    }
}
