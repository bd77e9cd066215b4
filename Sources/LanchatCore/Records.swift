// The records that the store keeps and the engine decides about (plain values, no storage code).

/// A chat message as history keeps it.
public struct StoredMessage: Equatable, Sendable {
    public enum Kind: Int64, Sendable { case text = 0, file = 1, system = 2 }
    /// 32 hex characters (the wire's 16-byte id).
    public var id: String
    public var room: String
    public var senderID: String
    public var senderName: String
    public var sequence: Int64
    /// Milliseconds since the Unix epoch, at the sender.
    public var timestamp: Int64
    public var kind: Kind
    public var body: String

    public init(id: String, room: String, senderID: String, senderName: String, sequence: Int64, timestamp: Int64, kind: Kind, body: String) {
        self.id = id
        self.room = room
        self.senderID = senderID
        self.senderName = senderName
        self.sequence = sequence
        self.timestamp = timestamp
        self.kind = kind
        self.body = body
    }
}

/// A room member as this daemon remembers it (to reconnect after a restart).
public struct StoredMember: Equatable, Sendable {
    public var peerID: String
    public var name: String
    public var port: Int
    public var addresses: [String]

    public init(peerID: String, name: String, port: Int, addresses: [String]) {
        self.peerID = peerID
        self.name = name
        self.port = port
        self.addresses = addresses
    }
}
