import Glibc
import LanchatControl
import LanchatCore
import LanchatDiscovery
import LanchatEngine
import LanchatSession
import LanchatWire
import NIOCore
import Synchronization

/// The control API's session methods (invite, invitations, accept, decline, rooms, members, leave,
/// send, history, forget, send-file, transfers, cancel, streams), answered from the session node.
/// Parameters arrive typed and range-checked (`ControlCall`); what is checked here needs the node.
struct SessionControl: Sendable {
    let node: SessionNode
    let discovery: DiscoveryService
    var passedFiles = PassedFiles()
    /// With a socket group, other local users reach the daemon: it then sends only files a client
    /// opened and handed over, never a path it would open with its own rights (its key included).
    var sendsOnlyHandedOverFiles = false
    static let defaultRoom = "lobby"

    private func room(_ text: String) throws(ControlError) -> RoomID {
        guard let room = RoomID(text) else {
            throw ControlError.badRequest("room '\(text.prefix(64))' is not valid: use 1-32 letters, digits or '-'")
        }
        return room
    }

    /// The room named in the request, or the only room this daemon is in.
    private func roomOrOnly(_ text: String?) async throws(ControlError) -> RoomID {
        if let text { return try room(text) }
        let rooms = await node.roomIDs
        switch rooms.count {
        case 1: return rooms[0]
        case 0: throw ControlError(code: .noRoom, message: "you are in no room yet; `lanchat invite PEER` creates one")
        default:
            throw ControlError(code: .ambiguousRoom, message: "you are in several rooms (\(rooms.map(\.rawValue).joined(separator: ", "))); say which with --room")
        }
    }

    /// A peer by display name, instance or id prefix: among discovered peers, then among room members.
    private func peer(_ query: String) async throws(ControlError) -> SessionPeer {
        switch PeerQuery.match(query, in: await discovery.peers) {
        case .success(let found):
            return SessionPeer(id: found.advertisement!.peerID, name: found.advertisement!.displayName)
        case .failure(.ambiguous(_, let candidates)):
            throw ControlError(code: .ambiguousPeer, message: "'\(query)' matches several peers: \(candidates.joined(separator: ", ")); give more of the id")
        case .failure:
            var members: [SessionPeer] = []
            for summary in await node.roomList { members += summary.members.map(\.peer) }
            let unique = Array(Set(members))
            let byName = unique.filter { $0.name == query }
            if byName.count == 1 { return byName[0] }
            let lower = query.lowercased()
            let byID = lower.count >= 4 ? unique.filter { $0.id.rawValue.hasPrefix(lower) } : []
            if byID.count == 1 { return byID[0] }
            if byName.count + byID.count > 1 {
                throw ControlError(
                    code: .ambiguousPeer, message: "'\(query)' matches several peers: \((byName + byID).map { "\($0.name) (\($0.id.short))" }.joined(separator: ", "))")
            }
            throw ControlError(code: .unknownPeer, message: "no peer matches '\(query)' (see `lanchat peers`)")
        }
    }

    func invite(_ request: ControlCall.Invite) async throws(ControlError) -> InviteResult {
        await node.personActive()
        let target = try await peer(request.peer)
        let roomID: RoomID
        if let text = request.room {
            roomID = try room(text)
        } else {
            let rooms = await node.roomIDs
            if rooms.count > 1 {
                throw ControlError(code: .ambiguousRoom, message: "you are in several rooms (\(rooms.map(\.rawValue).joined(separator: ", "))); say which with --room")
            }
            roomID = rooms.first ?? RoomID(Self.defaultRoom)!
        }
        let clock = ContinuousClock()
        let started = clock.now
        let outcome = await invite(
            target, room: roomID, context: Array((request.message ?? "").utf8), timeout: .milliseconds(Int64(request.timeoutSeconds * 1000)),
            wait: request.wait)
        let elapsed = DaemonControlHandler.milliseconds(clock.now - started)
        return InviteResult(
            id: outcome.id, peer: target.name, peerId: target.id.rawValue, room: roomID.rawValue,
            outcome: outcome.outcome?.code ?? "sent", reason: outcome.outcome?.reason, elapsedMs: elapsed)
    }

    func invitations() async -> [InvitationInfo] {
        await node.invitations.map(SessionService.info)
    }

    /// Accepts (`accept`) or declines the invitation `id` (or a unique prefix).
    func answer(_ id: String, accept: Bool, reason: String?, history: ControlCall.JoinHistory = .all) async throws(ControlError) -> InvitationInfo {
        await node.personActive()
        do throws(SessionError) {
            let scope = HistoryScope(limit: history.limit, sinceMilliseconds: history.sinceMilliseconds)
            let invitation = accept ? try await node.accept(id, history: scope) : try await node.decline(id, reason: reason ?? "")
            var info = SessionService.info(invitation)
            info.outcome = (accept ? IncomingInvitation.Outcome.accepted : .declined).rawValue
            return info
        } catch {
            throw ControlError(error)
        }
    }

    func rooms() async -> [RoomInfo] {
        await node.roomList.map(SessionService.info)
    }

    func members(_ text: String?) async throws(ControlError) -> RoomInfo {
        let roomID = try await roomOrOnly(text)
        guard let summary = await node.room(roomID) else {
            throw ControlError(code: .unknownRoom, message: "you are not in room '\(roomID)' (see `lanchat rooms`)")
        }
        return SessionService.info(summary)
    }

    func leave(_ text: String) async throws(ControlError) {
        let roomID = try room(text)
        do throws(SessionError) { try await node.leave(roomID) } catch {
            throw ControlError(error)
        }
    }

    func send(_ request: ControlCall.Send) async throws(ControlError) -> SendResult {
        await node.personActive()
        let roomID = try await roomOrOnly(request.room)
        var recipients: [PeerID]?
        if let list = request.to {
            var ids: [PeerID] = []
            for query in list { ids.append(try await peer(query).id) }
            recipients = ids
        }
        do throws(SessionError) {
            let receipt = try await node.send(request.text, room: roomID, to: recipients, reliable: request.reliable)
            return SendResult(
                id: receipt.message.id, room: roomID.rawValue, recipients: receipt.recipients, sentNow: receipt.sentNow,
                dropped: receipt.dropped, reliable: request.reliable)
        } catch {
            throw ControlError(error)
        }
    }

    func history(room text: String?, limit: Int) async throws(ControlError) -> [MessageInfo] {
        let roomName = try text.map { text throws(ControlError) in try room(text).rawValue }
        do throws(SessionError) {
            return try await node.history(room: roomName, limit: limit).map(SessionService.info)
        } catch {
            throw ControlError(error)
        }
    }

    /// Forgets the keys recorded under a display name (or the key with that id); the answer is the
    /// forgotten ids, comma-separated.
    func forget(_ name: String) async throws(ControlError) -> String {
        let forgotten: [PeerID]
        do throws(SessionError) { forgotten = try await node.forget(name) } catch {
            throw ControlError(error)
        }
        guard !forgotten.isEmpty else {
            let known = Set(await node.knownPeerEntries.map(\.label)).sorted().joined(separator: ", ")
            throw ControlError(code: .unknownPeer, message: "no key is recorded for '\(name)' (known: \(known))")
        }
        return forgotten.map(\.rawValue).joined(separator: ",")
    }

    /// `history --grep/--from/--since`: through the store's word index.
    func search(_ search: ControlCall.Search) async throws(ControlError) -> [MessageInfo] {
        let roomName = try search.room.map { text throws(ControlError) in try room(text).rawValue }
        let filter = HistoryFilter(words: search.grep, sender: search.from, since: search.sinceMilliseconds)
        do throws(SessionError) {
            return try await node.search(room: roomName, limit: search.limit, filter: filter).map(SessionService.info)
        } catch {
            throw ControlError(error)
        }
    }

    /// Sets (or with neither, reads) this host's availability and text.
    func presence(availability: String?, text: String?) async -> PresenceInfo {
        if availability != nil || text != nil {
            let current = await node.presence
            let chosen = availability.flatMap(WireFrame.Presence.Availability.init(name:)) ?? current.availability
            await node.setStatus(chosen, text: text ?? (availability == nil ? "" : current.text))
        }
        return await ownPresence()
    }

    private func ownPresence() async -> PresenceInfo {
        let configuration = await node.configuration
        return SessionService.info(SessionPeer(id: configuration.ownID, name: configuration.ownName), await node.presence)
    }

    /// The person is typing in a room.
    func typing(_ text: String?) async throws(ControlError) {
        let roomID = try await roomOrOnly(text)
        do throws(SessionError) { try await node.typing(in: roomID) } catch { throw ControlError(error) }
    }

    /// A member of `room` by name (exact, then case-insensitive) or id prefix (4 characters or more).
    private func member(_ query: String, of room: RoomID) async throws(ControlError) -> SessionPeer {
        let members = (await node.room(room)?.members ?? []).map(\.peer)
        let lower = query.lowercased()
        for match in [
            members.filter { $0.name == query }, members.filter { $0.name.lowercased() == lower },
            lower.count >= 4 ? members.filter { $0.id.rawValue.hasPrefix(lower) } : [],
        ] where !match.isEmpty {
            guard match.count == 1 else {
                throw ControlError(
                    code: .ambiguousPeer, message: "'\(query)' matches several members of \(room): \(match.map { "\($0.name) (\($0.id.short))" }.joined(separator: ", "))"
                )
            }
            return match[0]
        }
        throw ControlError(code: .unknownMember, message: "no member of \(room) is '\(query)' (see `lanchat members \(room)`)")
    }

    private func administration(_ body: () async throws(SessionError) -> Void) async throws(ControlError) {
        await node.personActive()
        do throws(SessionError) { try await body() } catch { throw ControlError(error) }
    }

    /// Removes a member of a room (we must administer it); answers the room's members after.
    func remove(_ query: String, from text: String?, reason: String) async throws(ControlError) -> RoomInfo {
        let roomID = try await roomOrOnly(text)
        let peer = try await member(query, of: roomID)
        try await administration { () async throws(SessionError) in try await node.remove(peer.id, from: roomID, reason: reason) }
        return try await members(roomID.rawValue)
    }

    /// Closes a room for every member (we must administer it).
    func closeRoom(_ text: String, reason: String) async throws(ControlError) {
        let roomID = try room(text)
        try await administration { () async throws(SessionError) in try await node.closeRoom(roomID, reason: reason) }
    }

    /// Names (or un-names) an administrator of a room.
    func admin(_ query: String, of text: String?, _ on: Bool) async throws(ControlError) -> RoomInfo {
        let roomID = try await roomOrOnly(text)
        let peer = try await member(query, of: roomID)
        try await administration { () async throws(SessionError) in try await node.setAdministrator(peer.id, of: roomID, on) }
        return try await members(roomID.rawValue)
    }

    /// Publishes one line on a topic of a room.
    func publish(_ request: ControlCall.TopicPublish) async throws(ControlError) -> TopicInfo {
        let roomID = try await roomOrOnly(request.room)
        let receipt: SessionNode.TopicReceipt
        do throws(SessionError) {
            receipt = try await node.publish(request.text, topic: request.topic, in: roomID, reliable: request.reliable)
        } catch { throw ControlError(error) }
        var info = TopicInfo(room: roomID.rawValue, topic: request.topic, sequence: receipt.sequence)
        info.sent = receipt.sentNow
        info.dropped = receipt.dropped
        return info
    }

    /// `topic` events for each message on a topic of a room, until the consumer stops.
    func subscribe(topic: String, room text: String?) async throws(ControlError) -> AsyncStream<ControlEvent> {
        let roomID = try await roomOrOnly(text)
        let deliveries: AsyncStream<SessionNode.TopicDelivery>
        do throws(SessionError) { deliveries = try await node.subscribe(to: topic, in: roomID) } catch {
            throw ControlError(error)
        }
        return AsyncStream(bufferingPolicy: .bufferingNewest(10_000)) { continuation in
            // Unstructured: the stream's (synchronous) build closure starts the forwarding, which outlives
            // this call; it ends when the deliveries end, or is cancelled when the consumer stops (onTermination).
            let task = Task {
                for await delivery in deliveries {
                    var info = TopicInfo(room: delivery.room.rawValue, topic: delivery.topic, sequence: delivery.sequence)
                    info.from = delivery.from.name
                    info.fromId = delivery.from.id.rawValue
                    info.text = delivery.text
                    info.reliable = delivery.reliable
                    continuation.yield(ControlEvent(time: DiscoveryService.now(), .topic(info)))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// A room's metadata: list, get, set, delete.
    func meta(_ request: ControlCall.Meta) async throws(ControlError) -> [MetaInfo] {
        let roomID = try await roomOrOnly(request.room)
        guard await node.roomIDs.contains(roomID) else {
            throw ControlError(code: .unknownRoom, message: "you are not in room '\(roomID)' (see `lanchat rooms`)")
        }
        let names = await node.memberNames(in: roomID)
        let info = { (entry: WireFrame.MetaEntry) in SessionService.info(entry, room: roomID.rawValue, author: names[entry.author] ?? String(entry.author.prefix(12))) }
        switch request.action {
        case .list:
            return await node.metadata(of: roomID).map(info)
        case .get:
            let key = request.key ?? ""
            guard let entry = await node.metaEntry(key, in: roomID), !entry.deleted else {
                throw ControlError(code: .unknownKey, message: "room \(roomID) has no key '\(key.prefix(70))'")
            }
            return [info(entry)]
        case .set, .delete:
            await node.personActive()
            do throws(SessionError) {
                return [info(try await node.setMeta(request.key ?? "", to: request.value, in: roomID, ifVersion: request.ifVersion))]
            } catch {
                throw ControlError(error)
            }
        }
    }

    /// Raises or lowers this host's hand in a room.
    func hand(up: Bool, room text: String?) async throws(ControlError) -> PresenceInfo {
        let roomID = try await roomOrOnly(text)
        do throws(SessionError) { try await node.setHand(up, in: roomID) } catch { throw ControlError(error) }
        return await ownPresence()
    }

    /// Records a peer's key as known (the person compared its code). Only by id: a name is an
    /// unauthenticated label (anyone on the LAN may announce one), and trust is given to a key.
    func trust(_ query: String) async throws(ControlError) -> MemberInfo {
        let lower = query.lowercased()
        guard PeerID.isPrefix(lower, minimumLength: 8) else {
            throw ControlError(code: .badRequest, message: "trust takes the peer's id (8 characters or more, from `lanchat peers`), not a name: a name is only a label")
        }
        let target = try await peer(lower)
        do throws(SessionError) { try await node.trust(target) } catch { throw ControlError(error) }
        return MemberInfo(name: target.name, id: target.id.rawValue, shortId: target.id.short, state: "known")
    }

    /// Sends the file at `path`: a descriptor the client handed over under `fileToken` (`FilePassing`),
    /// or else the daemon opens the path.
    func sendFile(to query: String, path: String, fileToken: String?) async throws(ControlError) -> TransferEntry? {
        await node.personActive()
        let descriptor = try handedOver(fileToken, to: "sends", by: "lanchat send-file")
        let target: SessionPeer
        do { target = try await peer(query) } catch {
            if let descriptor { close(descriptor) }
            throw error
        }
        do throws(SessionError) {
            let id = if let descriptor { try await node.sendFile(descriptor: descriptor, path: path, to: target) } else { try await node.sendFile(path, to: target) }
            return await node.transfers.first { $0.id == id }.map(SessionService.entry)
        } catch {
            throw ControlError(error)
        }
    }

    /// The descriptor a client handed over under `fileToken` (`FilePassing`); nil: the daemon opens the
    /// path itself, which a daemon that serves a group refuses (it would open it with its own rights).
    private func handedOver(_ fileToken: String?, to verb: String, by client: String) throws(ControlError) -> Int32? {
        guard let fileToken else {
            guard !sendsOnlyHandedOverFiles else {
                throw ControlError(
                    code: .badFile,
                    message: "this daemon serves a group: it \(verb) only files the client opens and hands over (\(client) does), not paths it would open itself")
            }
            return nil
        }
        guard let fd = passedFiles.take(fileToken) else {
            throw ControlError(code: .badFile, message: "no file was handed over under that token (or it waited more than 60 s)")
        }
        return fd
    }

    /// Shares a file in a room (handed over under `fileToken`, or opened by the daemon, as `sendFile`).
    func share(room text: String, path: String, fileToken: String?) async throws(ControlError) -> SharedFileInfo {
        await node.personActive()
        guard let room = RoomID(text) else { throw ControlError(code: .badRequest, message: "'\(text.prefix(64))' is not a room name") }
        let descriptor = try handedOver(fileToken, to: "shares", by: "lanchat share")
        do throws(SessionError) {
            return SessionService.info(try await node.share(path, descriptor: descriptor, in: room))
        } catch {
            throw ControlError(error)
        }
    }

    func files(room text: String?, limit: Int) async throws(ControlError) -> [SharedFileInfo] {
        if let text, RoomID(text) == nil { throw ControlError(code: .badRequest, message: "'\(text.prefix(64))' is not a room name") }
        do throws(SessionError) {
            return try await node.sharedFiles(room: text, limit: limit).map(SessionService.info)
        } catch {
            throw ControlError(error)
        }
    }

    /// A copy of a shared file: placed at once when kept here (`complete`), else fetched (`offered`:
    /// its `transfer` events follow under the same id).
    func fetch(_ id: String, to directory: String?) async throws(ControlError) -> TransferEntry {
        await node.personActive()
        if directory != nil, sendsOnlyHandedOverFiles {
            throw ControlError(code: .badRequest, message: "this daemon serves a group: fetched files go to its download directory (no --to)")
        }
        do throws(SessionError) {
            switch try await node.fetchShared(id, to: directory) {
            case .placed(let whole, let path, let file):
                // Kept here: copied from this host's own copy (under a free name, which `path` ends with).
                let name = path.split(separator: "/").last.map(String.init) ?? file.name
                let own = await node.configuration
                let size = Int(clamping: file.size)
                return TransferEntry(
                    id: whole, direction: TransferInfo.Direction.incoming.rawValue, peer: own.ownName, peerId: own.ownID.rawValue, name: name,
                    size: size, done: size, rate: 0, state: TransferState.complete.rawValue, path: path, error: nil)
            case .started(let transfer):
                let entry = await node.transfers.first { $0.id == transfer }.map(SessionService.entry)
                return entry
                    ?? TransferEntry(
                        id: transfer.description, direction: TransferInfo.Direction.incoming.rawValue, peer: "", peerId: "", name: "", size: 0,
                        done: 0, rate: 0, state: TransferState.offered.rawValue, path: nil, error: nil)
            }
        } catch {
            throw ControlError(error)
        }
    }

    func transfers() async -> [TransferEntry] {
        await node.transfers.map(SessionService.entry)
    }

    func cancel(_ id: String) async throws(ControlError) -> TransferEntry {
        do throws(SessionError) {
            return SessionService.entry(try await node.cancelTransfer(id))
        } catch {
            throw ControlError(error)
        }
    }

    func openStream(named name: String, to query: String) async throws(ControlError) -> any ControlStream {
        let target = try await peer(query)
        do throws(SessionError) {
            return SessionStream(stream: try await node.openStream(name, to: target))
        } catch {
            throw ControlError(error)
        }
    }

    /// Waits for a stream named `name` (from `query` only, if given).
    func acceptStream(named name: String, from query: String?, isAlive: @escaping @Sendable () -> Bool) async throws(ControlError) -> any ControlStream {
        var from: PeerID?
        if let query { from = try await peer(query).id }
        do throws(SessionError) {
            return SessionStream(stream: try await node.acceptStream(name, from: from, isAlive: isAlive))
        } catch {
            throw ControlError(error)
        }
    }

    /// Without `wait`, answers as soon as the INVITE is sent (or the invitation failed before that).
    private func invite(_ peer: SessionPeer, room: RoomID, context: [UInt8], timeout: Duration, wait: Bool) async -> (id: String?, outcome: InviteOutcome?) {
        let node = self.node
        if wait {
            let box = IDBox()
            let outcome = await node.invite(peer, room: room, context: context, timeout: timeout) { box.set($0) }
            return (box.value, outcome)
        }
        let (stream, continuation) = AsyncStream<(String?, InviteOutcome?)>.makeStream()
        // Unstructured: the invitation goes on after this call answers (at its first news, the INVITE sent);
        // the task ends when `invite` returns, at the latest after `timeout`.
        Task {
            let outcome = await node.invite(peer, room: room, context: context, timeout: timeout) { continuation.yield(($0, nil)) }
            continuation.yield((nil, outcome))
            continuation.finish()
        }
        for await first in stream { return first }
        return (nil, .unreachable("the daemon is shutting down"))
    }
}

/// The invitation id, set by the node's `sent` callback.
private final class IDBox: Sendable {
    private let stored = Mutex<String?>(nil)
    func set(_ value: String) { stored.withLock { $0 = value } }
    var value: String? { stored.withLock { $0 } }
}

/// A session stream as the control server pipes it.
struct SessionStream: ControlStream {
    let stream: ByteStream

    var entry: StreamEntry {
        StreamEntry(id: stream.id, peer: stream.peer.name, peerId: stream.peer.id.rawValue, name: stream.name)
    }

    func write(_ data: ByteBuffer) async throws(ControlError) {
        do throws(SessionError) { try await stream.write(data) } catch { throw ControlError(error) }
    }

    func finish() async { await stream.finish() }

    func read() async throws(ControlError) -> ByteBuffer? {
        do throws(SessionError) { return try await stream.read() } catch { throw ControlError(error) }
    }

    func abort(_ reason: String) async { await stream.abort(reason) }

    func closed() async -> String? { await stream.closed() }
}
