import LanchatCore
import LanchatEngine
import LanchatSecurity
import LanchatWire
import NIOCore

/// What the daemon and the benchmark call: the browser's and advertiser's side of invitations, and
/// the session (rooms, messages, history). Each call asks the engine and performs what it answers.
extension SessionNode {
    // MARK: API: browser

    /// Invites a peer into `room` (created here if we are not in it). `sent` is called once the
    /// INVITE is on its way; the result is the outcome (which may take up to `timeout`).
    public func invite(
        _ peer: SessionPeer, room: RoomID, context: [UInt8], timeout: Duration, sent: @escaping @Sendable (String) -> Void = { _ in }
    ) async -> InviteOutcome {
        let (start, actions) = engine.beginInvite(peer, room: room, at: time())
        perform(actions)
        if case .finished(let outcome) = start { return outcome }
        switch await dial(peer.id) {
        case .success: break
        case .failure(let error): return .unreachable(error.message)
        }
        guard !stopped else { return .unreachable("the node stopped") }
        return await withCheckedContinuation { continuation in
            let (result, actions) = engine.sendInvite(peer, room: room, context: context, timeout: Self.milliseconds(timeout), at: time())
            switch result {
            case .finished(let outcome):
                continuation.resume(returning: outcome)
            case .sent(let id):
                inviteWaiters[id] = continuation
                perform(actions)
                sent(id.description)
            }
        }
    }

    // MARK: API: advertiser

    public var invitations: [IncomingInvitation] { engine.invitations }

    /// Accepts a pending invitation (by id or unique prefix) and joins its room. Returns once the join is
    /// on disk (or its sync failed, which the log says).
    public func accept(_ prefix: String, history: HistoryScope = .all) async throws(SessionError) -> IncomingInvitation {
        let (invitation, actions) = try engine.accept(prefix, history: history, at: time())
        perform(actions)
        _ = await settled()
        return invitation
    }

    public func decline(_ prefix: String, reason: String = "") throws(SessionError) -> IncomingInvitation {
        let (invitation, actions) = try engine.decline(prefix, reason: reason, at: time())
        perform(actions)
        return invitation
    }

    // MARK: API: session

    public var roomList: [RoomSummary] { engine.roomList }

    public func room(_ name: RoomID) -> RoomSummary? { engine.room(name) }

    /// Peers with a live connection, and the rooms each shares with us.
    public var connections: [PeerID: [String]] { engine.connections }

    public func isConnected(_ id: PeerID) -> Bool { engine.isConnected(id) }

    /// Whether `id` was proved with its key by a room member's TLS connection (it is then always dialed
    /// with TLS, whatever its advertisement says).
    public func isKeyed(_ id: PeerID) -> Bool { engine.keyed.contains(id) }

    public struct SendReceipt: Sendable {
        public var message: StoredMessage
        public var recipients: Int
        /// Recipients it was written to now; the others get it when they are back (reliable).
        public var sentNow: Int
        /// Unreliable only: recipients it was dropped for (not connected, or the connection is full).
        public var dropped: Int
    }

    /// Sends text to the room's members (or `to`, a subset of them). Reliable messages are stored
    /// (on disk) and queued per recipient before this returns.
    public func send(_ text: String, room: RoomID, to: [PeerID]? = nil, reliable: Bool = true) async throws(SessionError) -> SendReceipt {
        try await send([text], room: room, to: to, reliable: reliable)[0]
    }

    /// Sends several messages at once: each is its own message (id, sequence, acknowledgement), but
    /// they share one database commit and one write per recipient.
    public func send(_ texts: [String], room: RoomID, to: [PeerID]? = nil, reliable: Bool = true) async throws(SessionError) -> [SendReceipt] {
        let (plan, actions) = try engine.send(texts, room: room, to: to, reliable: reliable, at: time())
        unreliableDrops = 0
        // Out before the commit when SessionStateMachine.sendAheadLimit allows it (it says why that is safe).
        let (committed, ahead) = await performOwn(plan, actions, in: room, mayGoFirst: texts.count <= SessionStateMachine.sendAheadLimit)
        guard committed else {
            throw SessionError(
                .storage,
                ahead
                    ? "cannot store the message (see the daemon's log); members may have it"
                    : "cannot store the message (see the daemon's log)")
        }
        let drops = reliable ? 0 : unreliableDrops
        return plan.messages.map {
            SendReceipt(
                message: $0, recipients: plan.recipients.count, sentNow: plan.connected - drops,
                dropped: reliable ? 0 : plan.recipients.count - plan.connected + drops)
        }
    }

    /// Leaves a room: tells the connected members, forgets the room (its history stays). Returns once
    /// that is on disk (or its sync failed, which the log says).
    public func leave(_ room: RoomID) async throws(SessionError) {
        perform(try engine.leave(room, at: time()))
        endTopicsOutsideRooms()
        _ = await settled()
    }

    /// Forgets the keys recorded under `name` (or the key whose id is `name`): the next one met under
    /// that name is new (no warning). Returns the keys forgotten.
    public func forget(_ name: String) throws(SessionError) -> [PeerID] {
        let ids: [PeerID]
        do { ids = try knownPeers.forget(label: name) } catch { throw SessionError(.storage, error.description) }
        _ = engine.forget(name)
        return ids
    }

    /// Our presence: availability, text, raised hands.
    public var presence: SessionStateMachine.PresenceState { engine.presence }

    /// A room's metadata (live keys), one key's entry, and a write (nil: delete).
    public func metadata(of room: RoomID) -> [WireFrame.MetaEntry] { engine.metadata(of: room) }

    public func metaEntry(_ key: String, in room: RoomID) -> WireFrame.MetaEntry? { engine.metaEntry(key, in: room) }

    /// A write of metadata returns once it is on disk, as a send does.
    public func setMeta(_ key: String, to value: String?, in room: RoomID, ifVersion: UInt64?) async throws(SessionError) -> WireFrame.MetaEntry {
        let (entry, actions) = try engine.setMeta(key, to: value, in: room, ifVersion: ifVersion, at: time())
        switch await performAll(actions) {
        case .notStored: throw SessionError(.storage, "cannot store the metadata (see the daemon's log)")
        case .stored(synced: false): throw SessionError(.storage, "cannot sync the metadata to disk (see the daemon's log); members may have it")
        case .stored(synced: true): break
        }
        return entry
    }

    /// Administration (we must administer the room): removes a member (its daemon leaves the room and
    /// tells its person why), closes the room for everyone, names or un-names an administrator. Each
    /// returns once the change is on disk, as a send does.
    public func remove(_ peer: PeerID, from room: RoomID, reason: String) async throws(SessionError) {
        try await performAdministration(try engine.remove(peer, from: room, reason: reason, at: time()))
    }

    public func closeRoom(_ room: RoomID, reason: String) async throws(SessionError) {
        try await performAdministration(try engine.close(room, reason: reason, at: time()))
    }

    public func setAdministrator(_ peer: PeerID, of room: RoomID, _ on: Bool) async throws(SessionError) {
        try await performAdministration(try engine.setAdministrator(peer, of: room, on, at: time()))
    }

    private func performAdministration(_ actions: [SessionAction]) async throws(SessionError) {
        switch await performAll(actions) {
        case .notStored: throw SessionError(.storage, "cannot store the change (see the daemon's log)")
        case .stored(synced: false): throw SessionError(.storage, "cannot sync the change to disk (see the daemon's log); members may have it")
        case .stored(synced: true): break
        }
    }

    /// Names of the members of `room` by id (ours included), for showing who wrote what.
    public func memberNames(in room: RoomID) -> [String: String] {
        var names = [configuration.ownID.rawValue: configuration.ownName]
        for member in engine.room(room)?.members ?? [] { names[member.peer.id.rawValue] = member.peer.name }
        return names
    }

    /// What a peer told us of its presence (a member of a room we share).
    public func presence(of peer: PeerID) -> SessionStateMachine.PresenceState? { engine.presence(of: peer) }

    public func setStatus(_ availability: WireFrame.Presence.Availability, text: String) {
        perform(engine.setStatus(availability, text: text, at: time()))
    }

    public func setHand(_ up: Bool, in room: RoomID) throws(SessionError) {
        perform(try engine.setHand(up, in: room, at: time()))
    }

    /// The person is typing in `room` (the members are told, at most every 3 s).
    public func typing(in room: RoomID) throws(SessionError) {
        perform(try engine.typing(in: room, at: time()))
    }

    /// A person used the daemon (auto-away's idle clock starts again).
    public func personActive() {
        perform(engine.personActive(at: time()))
    }

    /// Records `peer`'s key as known under its name (the person compared its code).
    public func trust(_ peer: SessionPeer) throws(SessionError) {
        do { try knownPeers.remember(label: peer.name, id: peer.id) } catch { throw SessionError(.storage, error.description) }
        engine.trust(peer)
    }

    public var knownPeerEntries: [KnownPeers.Entry] { knownPeers.entries.values.sorted { ($0.label, $0.id.rawValue) < ($1.label, $1.id.rawValue) } }

    /// With words, the word index first takes what waits for it, in pieces (`indexBeforeSearch`).
    public func search(room: String?, limit: Int, filter: HistoryFilter) async throws(SessionError) -> [StoredMessage] {
        if filter.words != nil { await indexBeforeSearch() }
        return try await onReader { try $0.search(room: room, limit: limit, filter: filter) }
    }

    public func history(room: String?, limit: Int) async throws(SessionError) -> [StoredMessage] {
        try await onReader { try $0.history(room: room, limit: limit) }
    }

    /// Runs `body` with a connection that reads what was committed (`StoreReader`), so that a large read
    /// holds up no commit; on the store's thread where there is none. A failure is a storage error.
    func onReader<Value: Sendable>(_ body: @escaping @Sendable (any SessionStore) throws -> Value) async throws(SessionError) -> Value {
        do { return try await readCommitted(body).get() } catch { throw SessionError(.storage, "\(error)") }
    }

    /// `onReader`'s read as a future (for work that goes on in steps on the event loop: a newcomer's
    /// history, exported in pieces).
    func readCommitted<Value: Sendable>(_ body: @escaping @Sendable (any SessionStore) throws -> Value) -> EventLoopFuture<Value> {
        storeReader?.run(on: eventLoop, body) ?? storeThread.run(on: eventLoop, body)
    }

    /// Runs `body` with the store on its thread (`StoreThread`), after everything asked before; a
    /// failure is a storage error.
    func onStore<Value: Sendable>(_ body: @escaping @Sendable (any SessionStore) throws -> Value) async throws(SessionError) -> Value {
        do { return try await storeThread.run(on: eventLoop, body).get() } catch { throw SessionError(.storage, "\(error)") }
    }

    /// The rooms this node is in, by name.
    public var roomIDs: [RoomID] { engine.roomIDs }

    /// Reliable messages not yet acknowledged, per recipient.
    public func unacknowledged() -> [PeerID: Int] { engine.unacknowledged }
}
