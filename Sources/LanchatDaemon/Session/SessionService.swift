import FoundationEssentials
import LanchatControl
import LanchatCore
import LanchatEngine
import LanchatKit
import LanchatSession
import LanchatWire
import Logging
import ServiceLifecycle

/// The daemon's session (LanchatKit's, which runs the node: redials, retransmits), until graceful shutdown:
/// then it says GOODBYE to every connected peer and closes the peer port. The node's events become watch
/// events and logs (`publisher`).
struct SessionService: Service {
    let session: Session

    func run() async throws {
        // The node runs from here on: once the daemon's other parts are up (a start that fails later
        // has dialed no one).
        session.startRunning()
        // (Cancelled instead when another service failed: closed all the same.)
        try? await gracefulShutdown()
        await session.close()
    }

    /// Hands each of the node's events to watch clients and the log.
    static func publisher(hub: EventHub, logger: Logger) -> @Sendable (SessionEvent) -> Void {
        { event in
            log(event, logger: logger)
            if let kind = Self.controlEvent(event) { hub.publish(ControlEvent(time: DiscoveryService.now(), kind)) }
        }
    }

    /// What watch clients see of a session event (nil: nothing): the one place where the event's typed
    /// ids, states and codes become the control API's strings (`docs/control-api.md`).
    static func controlEvent(_ event: SessionEvent) -> ControlEvent.Kind? {
        switch event {
        case .invitation(let invitation):
            return .invitation(Self.info(invitation))
        case .invitationClosed(let invitation, let outcome):
            var info = Self.info(invitation)
            info.outcome = outcome.rawValue
            return .invitationClosed(info)
        case .inviteOutcome(let id, let peer, let room, let outcome):
            return .inviteOutcome(
                InviteResult(
                    id: id.description, peer: peer.name, peerId: peer.id.rawValue, room: room.rawValue, outcome: outcome.code, reason: outcome.reason))
        case .memberState(let room, let peer, let state):
            return .member(MemberEvent(room: room.rawValue, name: peer.name, id: peer.id.rawValue, state: state.rawValue))
        case .message(let message):
            var info = Self.info(message.stored)
            info.outgoing = message.outgoing
            info.reliable = message.reliable
            return .message(info)
        case .transfer(let info):
            return .transfer(Self.entry(info))
        case .presence(let peer, let state, _):
            return .presence(Self.info(peer, state))
        case .typing(let room, let peer):
            return .typing(room: room.rawValue, name: peer.name, id: peer.id.rawValue)
        case .metadata(let room, let entry, let name):
            return .meta(Self.info(entry, room: room, author: name))
        case .memberLeft(let room, let peer, let code, let text, let fatal):
            var member = MemberEvent(room: room.rawValue, name: peer.name, id: peer.id.rawValue, state: "left")
            member.code = code.rawValue
            member.reason = text
            member.fatal = fatal
            return .left(member)
        case .topicMessage:
            return nil  // handed to the topic's subscribers by the node, never to watch
        case .security(let peer, let text):
            return .security(text: text, name: peer.name)
        }
    }

    private static func log(_ event: SessionEvent, logger: Logger) {
        switch event {
        case .invitation(let invitation):
            logger.info("invitation received", metadata: ["peer.name": "\(invitation.from.name)", "room": "\(invitation.room)"])
        case .inviteOutcome(_, let peer, let room, let outcome):
            logger.info("invitation answered", metadata: ["peer.name": "\(peer.name)", "room": "\(room)", "outcome": "\(outcome.code)"])
        case .memberState(let room, let peer, let state):
            logger.info("member state", metadata: ["room": "\(room)", "peer.name": "\(peer.name)", "state": "\(state.rawValue)"])
        case .transfer(let info) where info.state != .active:
            logger.info(
                "transfer",
                metadata: [
                    "transfer.id": "\(info.id.description.prefix(8))", "peer.name": "\(info.peer.name)", "state": "\(info.state.rawValue)",
                    "size": "\(info.size)", "error": "\(info.error ?? "")",
                ])
        case .presence(let peer, let state, _):
            logger.debug("presence", metadata: ["peer.name": "\(peer.name)", "availability": "\(state.availability.name)", "hands": "\(state.hands.count)"])
        case .metadata(let room, let entry, let name):
            logger.info("metadata", metadata: ["room": "\(room)", "key": "\(entry.key)", "version": "\(entry.version)", "author": "\(name)"])
        case .memberLeft(let room, let peer, let code, _, let fatal):
            logger.info("member left", metadata: ["room": "\(room)", "peer.name": "\(peer.name)", "code": "\(code.rawValue)", "fatal": "\(fatal)"])
        case .security(let peer, let text):
            logger.warning("security", metadata: ["peer.name": "\(peer.name)", "peer.id": "\(peer.id.short)", "text": "\(text)"])
        case .invitationClosed, .message, .transfer, .typing, .topicMessage:
            break
        }
    }

    /// ISO 8601 in UTC with milliseconds. The whole seconds go through `Date`, the milliseconds come from
    /// the integer: formatted from `Double(milliseconds) / 1000`, a time could read 1 ms early (the
    /// fraction, a little below its decimal value, was cut, not rounded).
    static func time(milliseconds: Int64) -> String {
        let seconds = milliseconds.quotientAndRemainder(dividingBy: 1000)
        let (whole, fraction) = seconds.remainder < 0 ? (seconds.quotient - 1, seconds.remainder + 1000) : seconds
        let text = Date(timeIntervalSince1970: Double(whole)).formatted(Date.ISO8601FormatStyle())
        guard text.hasSuffix("Z") else { return text }
        let digits = String(fraction)
        return text.dropLast() + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }

    static func info(_ invitation: IncomingInvitation) -> InvitationInfo {
        InvitationInfo(
            id: invitation.id.description, from: invitation.from.name, fromId: invitation.from.id.rawValue, room: invitation.room.rawValue,
            message: invitation.message, shortCode: invitation.shortCode, receivedAt: time(milliseconds: invitation.receivedAt),
            expiresAt: time(milliseconds: invitation.expiresAt))
    }

    static func info(_ message: StoredMessage) -> MessageInfo {
        let kind =
            switch message.kind {
            case .text: "text";
            case .file: "file";
            case .system: "system"
            }
        var info = MessageInfo(
            id: message.id, room: message.room, sender: message.senderName, senderId: message.senderID, sequence: Int(message.sequence),
            timestampMs: Int(message.timestamp), time: time(milliseconds: message.timestamp), kind: kind, text: message.body,
            signed: message.kind == .system ? nil : message.isAuthenticated)
        if message.kind == .file, let file = SharedFile(body: message.body) { info.file = Self.info(file, in: info, image: file.isImage, held: nil) }
        return info
    }

    static func info(_ file: SharedFile, in message: MessageInfo, image: Bool, held: Bool?) -> SharedFileInfo {
        SharedFileInfo(
            id: message.id, room: message.room, name: file.name, size: Int(clamping: file.size), sha256: file.hex, type: file.type, image: image,
            held: held, from: message.sender, fromId: message.senderId, timestampMs: message.timestampMs, time: message.time)
    }

    static func info(_ shared: SharedFileEntry) -> SharedFileInfo {
        info(shared.file, in: info(shared.message), image: shared.image, held: shared.held)
    }

    static func entry(_ info: TransferInfo) -> TransferEntry {
        TransferEntry(
            id: info.id.description, direction: info.direction.rawValue, peer: info.peer.name, peerId: info.peer.id.rawValue, name: info.name,
            size: Int(clamping: info.size), done: Int(clamping: info.done), rate: info.rate, state: info.state.rawValue, path: info.path, error: info.error,
            resent: info.resent > 0 ? Int(clamping: info.resent) : nil)
    }

    static func info(_ entry: WireFrame.MetaEntry, room: String, author: String) -> MetaInfo {
        MetaInfo(
            room: room, key: entry.key, value: entry.deleted ? nil : entry.value, deleted: entry.deleted, version: entry.version,
            author: author, authorId: entry.author, timeMs: Int64(clamping: entry.timestampMilliseconds),
            time: time(milliseconds: Int64(clamping: entry.timestampMilliseconds)))
    }

    static func info(_ peer: SessionPeer, _ state: SessionStateMachine.PresenceState) -> PresenceInfo {
        PresenceInfo(
            name: peer.name, id: peer.id.rawValue, shortId: peer.id.short, availability: state.availability.name, text: state.text,
            hands: state.hands.map(\.rawValue).sorted())
    }

    static func info(_ summary: SessionNode.RoomSummary) -> RoomInfo {
        var room = RoomInfo(
            room: summary.room.rawValue,
            members: summary.members.map {
                var info = MemberInfo(name: $0.peer.name, id: $0.peer.id.rawValue, shortId: $0.peer.id.short, state: $0.state.rawValue)
                info.availability = $0.presence?.availability.name
                info.statusText = $0.presence.map(\.text)
                info.hand = $0.hand
                info.admin = $0.admin
                return info
            })
        room.administered = summary.administered
        return room
    }
}
