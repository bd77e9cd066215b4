internal import FoundationEssentials
internal import Glibc
internal import LanchatCore
internal import LanchatDiscovery
internal import LanchatEngine
internal import LanchatIdentity
internal import LanchatSecurity
internal import LanchatSession
internal import LanchatStore
internal import LanchatTransport
internal import LanchatWire
internal import Logging
internal import NIOCore
internal import NIOPosix
internal import Synchronization

/// A group of peers that exchange messages: Multipeer Connectivity's `MCSession`, over lanchat's
/// protocol (TLS 1.3 pinned to each peer's id, every message signed by its author, delivery acknowledged
/// and retransmitted, history for peers that join late). It is the same session layer lanchatd runs:
/// a lanchatd and a program built on LanchatKit talk to each other.
///
/// A session listens on its own peer port from `start` until `close`. Peers join it by invitation: invite
/// one found by a `Browser`, or accept one that came to an `Advertiser`. Read `messages` and `peerChanges`
/// (each by one task: they are single-consumer streams).
public final class Session: Sendable {
    /// Where a session keeps its history, the keys of peers it met, and the files it receives.
    public enum Storage: Sendable, Equatable {
        /// Nothing outlives the session: a private temporary directory (in `TMPDIR`, or `/tmp`) holds the
        /// history (SQLite, so a long session's history is on disk, not in memory) and what arrives as
        /// files; `close` removes it.
        case temporary
        /// A directory (created 0700): the history database, the record of known peers, received files.
        case directory(String)
    }

    /// What the session asks of connections: `required` (TLS only, lanchatd's default), `optional`
    /// (TLS when the peer offers it), `none` (plaintext only: a trusted network, or debugging).
    public enum Encryption: String, Sendable, CaseIterable {
        case required, optional, none
    }

    /// Multipeer Connectivity's `MCSessionSendDataMode`.
    public enum SendMode: Sendable {
        /// Stored, acknowledged by each recipient, resent after a reconnection until it is.
        case reliable
        /// Written to the peers connected now, dropped for the others (and when a connection is full).
        case unreliable
    }

    /// What `send` did.
    public struct SendReport: Sendable, Equatable {
        /// The peers the message is for.
        public let recipients: Int
        /// The recipients it was written to now (reliable: the others get it when they are back).
        public let sentNow: Int
    }

    /// The DNS-SD service type lanchatd advertises.
    public static let defaultServiceType = "_chat-service._tcp"

    public let identity: PeerIdentity
    /// The group this session invites peers into (lanchat's room). Accepting an invitation may join
    /// another group too: messages say which group they are in.
    public let group: String
    public let serviceType: String
    public let encryption: Encryption
    /// The TCP port peers connect to.
    public let port: Int
    /// Messages from other peers, in every group this session is in, in the order they arrived.
    public let messages: AsyncStream<ReceivedMessage>
    /// Peers connecting, connected, and gone, in every group this session is in.
    public let peerChanges: AsyncStream<PeerChange>

    let invitations: AsyncStream<Invitation>
    let node: SessionNode
    let connector: PeerConnector
    let room: RoomID
    /// Where the node dials peers: a `Browser` writes what it resolves here.
    let directory: PeerDirectory
    private let sinks: Sinks
    /// The session's thread: it lives as long as the session or anything it handed out (an invitation, a
    /// resource, a stream) does, so that a call after `close` answers instead of waiting forever.
    let lifetime: Lifetime
    private let listener: Channel
    /// The private directory of a temporary session.
    private let scratch: String?
    /// A host's handler of every event (nil: the library's streams get them).
    private let hostEvents: (@Sendable (SessionEvent) -> Void)?
    private let tasks = Mutex<(run: Task<Void, Never>, pump: Task<Void, Never>)?>(nil)
    /// The one close: a second `close` waits for the first.
    private let closing = Mutex<Task<Void, Never>?>(nil)
    /// What `close` ends too: advertisers, browsers, topic subscriptions (by the number `whenClosing` gave).
    private let closers = Mutex<(next: UInt64, byID: [UInt64: @Sendable () async -> Void])>((0, [:]))
    /// Transfers' progress and ends, incoming and outgoing, for one task to read.
    public let transfers: AsyncStream<Transfer>
    /// What needs a person's attention about a peer's identity: a name met before with another key, or a
    /// plaintext claim of an id seen with a key (lanchatd shows these as security events).
    public let notices: AsyncStream<SecurityNotice>
    let transferWaiters: TransferWaiters

    struct Sinks: Sendable {
        let messages: AsyncStream<ReceivedMessage>.Continuation
        let changes: AsyncStream<PeerChange>.Continuation
        let invitations: AsyncStream<Invitation>.Continuation
        let transfers: AsyncStream<Transfer>.Continuation
        let notices: AsyncStream<SecurityNotice>.Continuation

        func finish() {
            notices.finish()
            messages.finish()
            changes.finish()
            invitations.finish()
            transfers.finish()
        }
    }

    init(
        identity: PeerIdentity, group: RoomID, serviceType: String, encryption: Encryption, port: Int, node: SessionNode, connector: PeerConnector,
        directory: PeerDirectory, lifetime: Lifetime, listener: Channel, scratch: String?, events: (@Sendable (SessionEvent) -> Void)?
    ) {
        self.identity = identity
        self.room = group
        self.group = group.rawValue
        self.serviceType = serviceType
        self.encryption = encryption
        self.port = port
        self.node = node
        self.connector = connector
        self.directory = directory
        self.lifetime = lifetime
        self.listener = listener
        self.scratch = scratch
        hostEvents = events
        let (messages, messageSink) = AsyncStream<ReceivedMessage>.makeStream(bufferingPolicy: .bufferingNewest(Self.bufferedMessages))
        let (changes, changeSink) = AsyncStream<PeerChange>.makeStream(bufferingPolicy: .bufferingNewest(10_000))
        let (invitations, invitationSink) = AsyncStream<Invitation>.makeStream(bufferingPolicy: .bufferingNewest(1_000))
        let (transfers, transferSink) = AsyncStream<Transfer>.makeStream(bufferingPolicy: .bufferingNewest(10_000))
        self.messages = messages
        self.peerChanges = changes
        self.invitations = invitations
        let (notices, noticeSink) = AsyncStream<SecurityNotice>.makeStream(bufferingPolicy: .bufferingNewest(1_000))
        self.transfers = transfers
        self.notices = notices
        transferWaiters = TransferWaiters()
        sinks = Sinks(messages: messageSink, changes: changeSink, invitations: invitationSink, transfers: transferSink, notices: noticeSink)
    }

    /// How many unread messages `messages` keeps (the oldest go first): a program that does not read them
    /// holds at most this many.
    public static let bufferedMessages = 1_000

    /// Opens the peer port (`port` 0: any free one) and starts the session. Resources other peers send are
    /// placed in `downloadDirectory` (created 0700; by default `downloads` in the storage directory, or in
    /// the private directory of a temporary session, which `close` removes). It is not advertised until an
    /// `Advertiser` starts, and finds no one until a `Browser` does.
    public static func start(
        identity: PeerIdentity, group: String = "session", serviceType: String = Session.defaultServiceType, storage: Storage = .temporary,
        encryption: Encryption = .required, port: Int = 0, downloadDirectory: String? = nil
    ) async throws(LanchatError) -> Session {
        try ServiceType.check(serviceType)
        guard let room = RoomID(group) else {
            throw LanchatError(.invalidArgument, "'\(group)' is not a group name (1-64 letters, digits, '.', '_' or '-')")
        }
        guard (0...65535).contains(port) else { throw LanchatError(.invalidArgument, "port \(port) is not 0-65535") }
        let preference = EncryptionPreference(rawValue: encryption.rawValue)!
        let (store, knownPeers, base, scratch) = try openStorage(storage)
        var host = Host(name: identity.displayName, encryption: preference, store: store, knownPeers: knownPeers)
        host.ports = [port]
        host.configure = { configuration in
            configuration.downloadDirectory = downloadDirectory ?? base + "/downloads"
            configuration.historyDirectory = base + "/incoming"
            configuration.sharedDirectory = base + "/shared"
            // (Files shared in groups are lanchatd's; the library has no way to them: none is fetched.)
            configuration.keepSharedFiles = false
            configuration.sharedAutoFetchLimit = 0
        }
        do {
            return try await launch(identity: identity, group: room, serviceType: serviceType, host: host, scratch: scratch)
        } catch {
            if let scratch { try? FileManager.default.removeItem(atPath: scratch) }
            throw error
        }
    }

    /// Runs the node, and hands its events to the session's streams (or all of them to a host's `events`).
    func begin() {
        let tap = hostEvents
        let node = self.node
        let own = identity.identity.peerID
        let (sinks, waiters, lifetime) = (self.sinks, transferWaiters, lifetime)
        // (Unstructured, both: they live until `close`, which cancels and awaits them.)
        let run = Task { await node.run() }
        let pump = Task {
            if let tap {
                for await event in node.events { tap(event) }
            } else {
                await Self.pump(node.events, node: node, lifetime: lifetime, own: own, sinks: sinks, waiters: waiters)
            }
        }
        tasks.withLock { $0 = (run, pump) }
    }

    /// Hands the node's events to the session's streams, as the library's types.
    private static func pump(
        _ events: AsyncStream<SessionEvent>, node: SessionNode, lifetime: Lifetime, own: PeerID, sinks: Sinks, waiters: TransferWaiters
    ) async {
        for await event in events {
            switch event {
            case .message(let message) where !message.outgoing && message.stored.kind == .text:
                if let received = ReceivedMessage(message.stored, reliable: message.reliable) { sinks.messages.yield(received) }
            case .memberState(let room, let peer, let state) where peer.id != own:
                sinks.changes.yield(PeerChange(peer: Peer(id: peer.id, displayName: peer.name), group: room.rawValue, state: PeerState(state), left: false))
            case .memberLeft(let room, let peer, _, _, let fatal) where fatal && peer.id != own:
                sinks.changes.yield(PeerChange(peer: Peer(id: peer.id, displayName: peer.name), group: room.rawValue, state: .notConnected, left: true))
            case .invitation(let invitation):
                sinks.invitations.yield(Invitation(invitation, node: node, lifetime: lifetime))
            case .transfer(let info):
                let transfer = Transfer(info)
                sinks.transfers.yield(transfer)
                if transfer.state.ended { waiters.resume(transfer.id, with: transfer) }
            case .security(let peer, let text):
                sinks.notices.yield(SecurityNotice(peer: Peer(id: peer.id, displayName: peer.name), text: text))
            default:
                continue
            }
        }
    }

    /// Says GOODBYE to every connected peer, stops the session's advertisers, browsers and topic
    /// subscriptions, closes the peer port and the storage, and ends the streams. Calls after it throw
    /// `closed` (or answer as the session was when it closed). A session that is not closed keeps its port
    /// until the program exits.
    public func close() async {
        let closing = closing.withLock { task in
            if task == nil {
                // (Unstructured: the one close, which every `close` call awaits.)
                task = Task { await self.shutDown() }
            }
            return task!
        }
        await closing.value
    }

    private func shutDown() async {
        guard
            let running = tasks.withLock({ tasks in
                defer { tasks = nil }; return tasks
            })
        else {
            // Never run (a host that had not started it): only the port to close.
            try? await listener.close()
            sinks.finish()
            return
        }
        let ending = closers.withLock { closers in
            defer { closers.byID = [:] }; return closers.byID.values
        }
        for end in ending { await end() }
        try? await listener.close()
        running.run.cancel()
        await running.run.value
        running.pump.cancel()
        await running.pump.value
        sinks.finish()
        transferWaiters.closeAll()
        if let scratch { try? FileManager.default.removeItem(atPath: scratch) }
    }

    /// Runs `end` when the session closes (unless `forgetClosing` is told its number first).
    @discardableResult
    func whenClosing(_ end: @escaping @Sendable () async -> Void) -> UInt64 {
        closers.withLock { closers in
            closers.next += 1
            closers.byID[closers.next] = end
            return closers.next
        }
    }

    func forgetClosing(_ id: UInt64) {
        _ = closers.withLock { $0.byID.removeValue(forKey: id) }
    }

    var isOpen: Bool { tasks.withLock { $0 != nil } }

    /// `close` was called.
    var closingStarted: Bool { closing.withLock { $0 != nil } }

    func checkOpen() throws(LanchatError) {
        guard isOpen else { throw LanchatError(.closed, "the session is closed") }
    }

    // MARK: Peers

    /// Invites `peer` (found by a `Browser`, or met in a group) into this session's group (or `group`), and
    /// waits for its answer, up to `timeout`. `context` reaches the peer's `Invitation` (lanchatd shows it as the invitation's
    /// message when it is text). Returns when the peer accepted (or was in the group already).
    public func invite(_ peer: Peer, to group: String? = nil, context: [UInt8] = [], timeout: Duration = .seconds(30)) async throws(LanchatError) {
        try checkOpen()
        let room = try self.room(group)
        let id = try peer.checkedID()
        guard context.count <= WireFrame.Invite.maximumContext else {
            throw LanchatError(.invalidArgument, "the context is longer than \(WireFrame.Invite.maximumContext) bytes")
        }
        let outcome = await node.invite(SessionPeer(id: id, name: peer.displayName), room: room, context: context, timeout: timeout)
        try checkOpen()
        switch outcome {
        case .accepted, .alreadyMember: return
        case .declined(let reason): throw LanchatError(.declined, reason)
        case .expired: throw LanchatError(.expired, "\(peer) did not answer in time")
        case .unreachable(let reason): throw LanchatError(.unreachable, reason)
        case .refused(let reason): throw LanchatError(.refused, reason)
        }
    }

    func room(_ group: String?) throws(LanchatError) -> RoomID {
        guard let group else { return room }
        guard let room = RoomID(group) else { throw LanchatError(.invalidArgument, "'\(group)' is not a group name") }
        return room
    }

    /// The members of this session's group with a live connection now.
    public var connectedPeers: [Peer] {
        get async {
            guard let summary = await node.room(room) else { return [] }
            return summary.members.filter { $0.state == .connected }.map { Peer(id: $0.peer.id, displayName: $0.peer.name) }
        }
    }

    /// Leaves the session's group (or `group`): the connected members are told, the history stays.
    public func leave(_ group: String? = nil) async throws(LanchatError) {
        try checkOpen()
        let room = try self.room(group)
        do { try await node.leave(room) } catch { throw LanchatError(error) }
    }

    // MARK: Messages

    /// Sends `text` to the group's members (or `peers`, some of them); `group`: another group this session
    /// joined by accepting an invitation. A reliable message is stored and queued for every
    /// recipient when this returns.
    @discardableResult
    public func send(
        _ text: String, to peers: [Peer]? = nil, in group: String? = nil, mode: SendMode = .reliable
    ) async throws(LanchatError)
        -> SendReport
    {
        try checkOpen()
        let room = try self.room(group)
        var ids: [PeerID]?
        if let peers {
            ids = []
            for peer in peers {
                let id = try peer.checkedID()
                ids?.append(id)
            }
        }
        do {
            let receipt = try await node.send(text, room: room, to: ids, reliable: mode == .reliable)
            return SendReport(recipients: receipt.recipients, sentNow: receipt.sentNow)
        } catch {
            throw LanchatError(error)
        }
    }

    /// The group's (or `group`'s) latest messages (up to `limit`, oldest first), those sent before this
    /// session joined included: a newcomer receives the history of the peer that invited it.
    public func history(limit: Int = 100, in group: String? = nil) async throws(LanchatError) -> [ReceivedMessage] {
        try checkOpen()
        let room = try self.room(group)
        guard limit > 0 else { throw LanchatError(.invalidArgument, "limit must be positive") }
        do {
            return try await node.history(room: room.rawValue, limit: limit).filter { $0.kind == .text }.compactMap { ReceivedMessage($0, reliable: true) }
        } catch {
            throw LanchatError(error)
        }
    }
}

/// Owns the session's event loop (the node's executor): shut down when nothing holds it any more (unless
/// a host's: the host shuts its own loops down).
final class Lifetime: Sendable {
    let loops: MultiThreadedEventLoopGroup
    let owned: Bool

    init(_ loops: MultiThreadedEventLoopGroup, owned: Bool) {
        self.loops = loops
        self.owned = owned
    }

    deinit {
        if owned { loops.shutdownGracefully { _ in } }
    }
}
