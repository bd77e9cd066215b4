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
/// send, history, forget), answered from the session node.
struct SessionControl: Sendable {
    let node: SessionNode
    let discovery: DiscoveryService
    var passedFiles = PassedFiles()
    static let defaultRoom = "lobby"

    func respond(to request: ControlRequest, method: ControlMethod) async -> ControlResponse {
        do throws(ControlError) {
            return try await answer(request, method)
        } catch {
            return .failure(id: request.id, error)
        }
    }

    private func param(_ request: ControlRequest, _ key: String) -> String? {
        guard let value = request.params?[key], !value.isEmpty else { return nil }
        return value
    }

    private func room(_ text: String) throws(ControlError) -> RoomID {
        guard let room = RoomID(text) else {
            throw ControlError.badRequest("room '\(text.prefix(64))' is not valid: use 1-32 letters, digits or '-'")
        }
        return room
    }

    /// The room named in the request, or the only room this daemon is in.
    private func roomOrOnly(_ request: ControlRequest) async throws(ControlError) -> RoomID {
        if let text = param(request, "room") { return try room(text) }
        let names = await node.roomNames
        switch names.count {
        case 1: return RoomID(names[0])!
        case 0: throw ControlError(code: "no_room", message: "you are in no room yet; `lanchat invite PEER` creates one")
        default: throw ControlError(code: "ambiguous_room", message: "you are in several rooms (\(names.joined(separator: ", "))); say which with --room")
        }
    }

    /// A peer by display name, instance or id prefix: among discovered peers, then among room members.
    private func peer(_ query: String) async throws(ControlError) -> SessionPeer {
        switch PeerQuery.match(query, in: await discovery.peers) {
        case .success(let found):
            return SessionPeer(id: found.advertisement!.peerID, name: found.advertisement!.displayName)
        case .failure(.ambiguous(_, let candidates)):
            throw ControlError(code: "ambiguous_peer", message: "'\(query)' matches several peers: \(candidates.joined(separator: ", ")); give more of the id")
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
                throw ControlError(code: "ambiguous_peer", message: "'\(query)' matches several peers: \((byName + byID).map { "\($0.name) (\($0.id.short))" }.joined(separator: ", "))")
            }
            throw ControlError(code: "unknown_peer", message: "no peer matches '\(query)' (see `lanchat peers`)")
        }
    }

    private func answer(_ request: ControlRequest, _ method: ControlMethod) async throws(ControlError) -> ControlResponse {
        var response = ControlResponse(id: request.id)
        switch method {
        case .invite:
            guard let query = param(request, "peer") else { throw .badRequest("invite needs params.peer") }
            let target = try await peer(query)
            let roomID: RoomID
            if let text = param(request, "room") {
                roomID = try room(text)
            } else {
                let names = await node.roomNames
                if names.count > 1 {
                    throw ControlError(code: "ambiguous_room", message: "you are in several rooms (\(names.joined(separator: ", "))); say which with --room")
                }
                roomID = RoomID(names.first ?? Self.defaultRoom)!
            }
            let message = param(request, "message") ?? ""
            guard message.utf8.count <= 4096 else { throw .badRequest("the invitation message is longer than 4096 bytes") }
            var seconds = 60.0
            if let text = param(request, "timeout") {
                guard let value = Double(text), value >= 1, value <= 3600 else { throw .badRequest("timeout must be 1-3600 seconds") }
                seconds = value
            }
            let wait = param(request, "wait") == "true"
            let clock = ContinuousClock()
            let started = clock.now
            let outcome = await invite(target, room: roomID, context: Array(message.utf8), timeout: .milliseconds(Int64(seconds * 1000)), wait: wait)
            let elapsed = DaemonControlHandler.milliseconds(clock.now - started)
            response.invite = InviteResult(
                id: outcome.id, peer: target.name, peerId: target.id.rawValue, room: roomID.rawValue,
                outcome: outcome.outcome?.code ?? "sent", reason: outcome.outcome?.reason, elapsedMs: elapsed)
        case .invitations:
            response.invitations = await node.invitations.map(SessionService.info)
        case .accept, .decline:
            guard let id = param(request, "id") else { throw .badRequest("\(method.rawValue) needs params.id") }
            do throws(SessionError) {
                let invitation = method == .accept ? try await node.accept(id) : try await node.decline(id, reason: param(request, "reason") ?? "")
                var info = SessionService.info(invitation)
                info.outcome = method == .accept ? "accepted" : "declined"
                response.invitation = info
            } catch {
                throw ControlError(code: error.code, message: error.message)
            }
        case .rooms:
            response.rooms = await node.roomList.map(SessionService.info)
        case .members:
            let roomID = try await roomOrOnly(request)
            guard let summary = await node.room(roomID) else {
                throw ControlError(code: "unknown_room", message: "you are not in room '\(roomID)' (see `lanchat rooms`)")
            }
            response.room = SessionService.info(summary)
        case .leave:
            guard let text = param(request, "room") else { throw .badRequest("leave needs params.room") }
            let roomID = try room(text)
            do throws(SessionError) { try await node.leave(roomID) } catch {
                throw ControlError(code: error.code, message: error.message)
            }
        case .send:
            guard let text = request.params?["text"] else { throw .badRequest("send needs params.text") }
            let roomID = try await roomOrOnly(request)
            var recipients: [PeerID]?
            if let list = param(request, "to") {
                var ids: [PeerID] = []
                for query in list.split(separator: ",").map({ String($0.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed()) }) where !query.isEmpty {
                    ids.append(try await peer(query).id)
                }
                recipients = ids
            }
            let reliable = param(request, "reliable") != "false"
            do throws(SessionError) {
                let receipt = try await node.send(text, room: roomID, to: recipients, reliable: reliable)
                response.sent = SendResult(
                    id: receipt.message.id, room: roomID.rawValue, recipients: receipt.recipients, sentNow: receipt.sentNow,
                    dropped: receipt.dropped, reliable: reliable)
            } catch {
                throw ControlError(code: error.code, message: error.message)
            }
        case .history:
            var limit = 50
            if let text = param(request, "limit") {
                guard let value = Int(text), value >= 1, value <= 1_000_000 else { throw .badRequest("limit must be 1-1000000") }
                limit = value
            }
            let roomName = try param(request, "room").map { text throws(ControlError) in try room(text).rawValue }
            do throws(SessionError) {
                response.history = try await node.history(room: roomName, limit: limit).map(SessionService.info)
            } catch {
                throw ControlError(code: error.code, message: error.message)
            }
        case .forget:
            guard let name = param(request, "peer") else { throw .badRequest("forget needs params.peer (a display name)") }
            let forgotten: PeerID?
            do throws(SessionError) { forgotten = try await node.forget(name) } catch {
                throw ControlError(code: error.code, message: error.message)
            }
            guard let id = forgotten else {
                let known = await node.knownPeerEntries.map(\.label).joined(separator: ", ")
                throw ControlError(code: "unknown_peer", message: "no key is recorded for '\(name)' (known: \(known))")
            }
            response.forgotten = id.rawValue
        case .sendFile:
            guard let query = param(request, "peer") else { throw .badRequest("send-file needs params.peer") }
            guard let path = param(request, "path"), path.hasPrefix("/") else { throw .badRequest("send-file needs params.path, an absolute path") }
            // A descriptor the client handed over (`FilePassing`), or else the daemon opens the path.
            var descriptor: Int32?
            if let token = param(request, "file_token") {
                guard let fd = passedFiles.take(token) else {
                    throw ControlError(code: "bad_file", message: "no file was handed over under that token (or it waited more than 60 s)")
                }
                descriptor = fd
            }
            let target: SessionPeer
            do { target = try await peer(query) } catch {
                if let descriptor { close(descriptor) }
                throw error
            }
            do throws(SessionError) {
                let id = if let descriptor { try await node.sendFile(descriptor: descriptor, path: path, to: target) } else { try await node.sendFile(path, to: target) }
                response.transfer = await node.transfers.first { $0.id == id }.map(SessionService.entry)
            } catch {
                throw ControlError(code: error.code, message: error.message)
            }
        case .transfers:
            response.transfers = await node.transfers.map(SessionService.entry)
        case .cancel:
            guard let id = param(request, "id") else { throw .badRequest("cancel needs params.id") }
            do throws(SessionError) {
                response.transfer = SessionService.entry(try await node.cancelTransfer(id))
            } catch {
                throw ControlError(code: error.code, message: error.message)
            }
        case .status, .peers, .watch, .ping, .stream, .streamAccept, .connect, .disconnect:
            throw .badRequest("not a session method")
        }
        return response
    }

    func stream(_ request: ControlRequest, accept: Bool, isAlive: @escaping @Sendable () -> Bool) async throws(ControlError) -> any ControlStream {
        guard let name = param(request, "name") else { throw .badRequest("\(request.method) needs params.name") }
        var target: SessionPeer?
        if !accept {
            guard let query = param(request, "peer") else { throw .badRequest("stream needs params.peer") }
            target = try await peer(query)
        }
        do throws(SessionError) {
            if let target { return SessionStream(stream: try await node.openStream(name, to: target)) }
            return SessionStream(stream: try await node.acceptStream(name, isAlive: isAlive))
        } catch {
            throw ControlError(code: error.code, message: error.message)
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
        do throws(SessionError) { try await stream.write(data) } catch { throw ControlError(code: error.code, message: error.message) }
    }

    func finish() async { await stream.finish() }

    func read() async throws(ControlError) -> ByteBuffer? {
        do throws(SessionError) { return try await stream.read() } catch { throw ControlError(code: error.code, message: error.message) }
    }

    func abort(_ reason: String) async { await stream.abort(reason) }

    func closed() async -> String? { await stream.closed() }
}
