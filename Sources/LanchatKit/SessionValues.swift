public import FoundationEssentials
internal import LanchatCore
internal import LanchatEngine

// What a session's streams carry: peers' states, security notices, messages.

/// Multipeer Connectivity's `MCSessionState`.
public enum PeerState: String, Sendable {
    case notConnected = "not_connected"
    case connecting
    case connected

    init(_ state: SessionPeerState) {
        switch state {
        case .notConnected: self = .notConnected
        case .connecting: self = .connecting
        case .connected: self = .connected
        }
    }
}

/// A peer's state in a group changed.
public struct PeerChange: Sendable, Equatable {
    public let peer: Peer
    public let group: String
    public let state: PeerState
    /// The peer is out of the group (it left, was removed, or the group closed), not only disconnected.
    public let left: Bool
}

/// A peer's identity needs a person's attention (`Session.notices`).
public struct SecurityNotice: Sendable, Equatable {
    public let peer: Peer
    public let text: String
}

/// A message another peer sent.
public struct ReceivedMessage: Sendable, Equatable {
    /// The message's id (32 hex characters), the same on every peer.
    public let id: String
    public let from: Peer
    public let group: String
    public let text: String
    /// When its author sent it (the author's clock).
    public let sentAt: Date
    /// Its author signed or sealed it, and that was checked (a version 1 peer's messages are not signed).
    public let signed: Bool
    public let reliable: Bool

    init?(_ message: StoredMessage, reliable: Bool) {
        guard let id = PeerID(message.senderID) else { return nil }
        self.id = message.id
        from = Peer(id: id, displayName: message.senderName)
        group = message.room
        text = message.body
        sentAt = Date(timeIntervalSince1970: Double(message.timestamp) / 1000)
        signed = message.isAuthenticated
        self.reliable = reliable
    }
}
