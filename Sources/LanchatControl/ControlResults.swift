import FoundationEssentials

/// A peer as the control API shows it.
public struct PeerInfo: Codable, Equatable, Sendable {
    /// Display name from the peer's TXT record (or the instance name for incompatible services).
    public var name: String
    /// Full peer id (52 base32 characters); `nil` for incompatible services.
    public var id: String?
    /// The first 12 characters of the id, as people see it.
    public var shortId: String?
    /// DNS-SD instance name (unique on the LAN).
    public var instance: String
    public var host: String
    public var port: Int
    public var addresses: [String]
    public var interfaces: [String]
    /// `discovered` (found through DNS-SD, no connection yet).
    public var state: String
    public var rooms: [String]
    public var compatible: Bool
    /// Why the service is not usable, when `compatible` is false.
    public var problem: String?
    public var protocolVersion: Int?
    public var encryption: String?
    /// How the daemon knows the peer: `dnssd` (discovered on the link), `static` (added by address
    /// with `lanchat connect`, or `static-peer` in the config), or `connected` (only by a live connection
    /// that discovery does not list, e.g. the peer dialed us with `lanchat connect`). Absent from older daemons.
    public var origin: String?
    /// With origin `connected`: whether the peer dialed the connection (true) or we did.
    public var dialedUs: Bool?
    /// What the peer told us of its presence (a member of a room we share): `available`, `away`, `busy`.
    public var availability: String?
    public var statusText: String?

    public init(
        name: String, id: String?, shortId: String?, instance: String, host: String, port: Int, addresses: [String], interfaces: [String], state: String, rooms: [String],
        compatible: Bool, problem: String?, protocolVersion: Int?, encryption: String?, origin: String? = nil
    ) {
        self.name = name
        self.id = id
        self.shortId = shortId
        self.instance = instance
        self.host = host
        self.port = port
        self.addresses = addresses
        self.interfaces = interfaces
        self.state = state
        self.rooms = rooms
        self.compatible = compatible
        self.problem = problem
        self.protocolVersion = protocolVersion
        self.encryption = encryption
        self.origin = origin
    }
}

/// The daemon's own state.
public struct DaemonStatus: Codable, Equatable, Sendable {
    public var name: String
    public var id: String
    public var shortId: String
    /// The instance name we are advertised under (may carry a " #2" suffix after a clash), or `nil`.
    public var instance: String?
    /// `registered`, `registering`, or `avahi_unavailable`.
    public var advertising: String
    public var port: Int
    public var protocolVersion: Int
    public var encryption: String
    public var peers: Int
    public var pid: Int
    public var version: String
    public var startedAt: String
    /// Where received files go, and why they cannot go there (`nil` when the directory is usable; the
    /// daemon refuses files with this text until it is fixed). Checked when asked.
    public var downloadDirectory: String?
    public var downloadProblem: String?
    public var downloadFreeBytes: UInt64?
    /// Whether the daemon's own DNS-SD browse sees its advertisement (`nil`: an older daemon).
    public var advertisementVisible: Bool?

    public init(
        name: String, id: String, shortId: String, instance: String?, advertising: String, port: Int, protocolVersion: Int, encryption: String, peers: Int, pid: Int,
        version: String, startedAt: String
    ) {
        self.name = name
        self.id = id
        self.shortId = shortId
        self.instance = instance
        self.advertising = advertising
        self.port = port
        self.protocolVersion = protocolVersion
        self.encryption = encryption
        self.peers = peers
        self.pid = pid
        self.version = version
        self.startedAt = startedAt
    }
}

/// What `ping` found: the connection, the code to compare, the round trips.
public struct PingResult: Codable, Equatable, Sendable {
    public var name: String
    public var id: String
    public var address: String
    public var port: Int
    /// TLS 1.3 with the peer's key pinned to its advertised id.
    public var encrypted: Bool
    public var protocolVersion: Int
    /// The code both people see for this pair of daemons ("4821-0937").
    public var shortCode: String
    /// TCP connect, TLS and HELLO.
    public var handshakeMs: Double
    public var rttMs: [Double]

    public init(name: String, id: String, address: String, port: Int, encrypted: Bool, protocolVersion: Int, shortCode: String, handshakeMs: Double, rttMs: [Double]) {
        self.name = name
        self.id = id
        self.address = address
        self.port = port
        self.encrypted = encrypted
        self.protocolVersion = protocolVersion
        self.shortCode = shortCode
        self.handshakeMs = handshakeMs
        self.rttMs = rttMs
    }
}

/// Who answered at an address (`connect`), and whether it is now kept as a static peer.
public struct ConnectResult: Codable, Equatable, Sendable {
    public var name: String
    public var id: String
    public var shortId: String
    /// The short code both people compare (`lanchat ping` shows the same on the other side).
    public var shortCode: String
    /// The address as given, the IP address dialed, and the port.
    public var address: String
    public var ip: String
    public var port: Int
    public var encrypted: Bool
    /// True once the peer is kept (after `confirm`); false for a first look.
    public var saved: Bool

    public init(name: String, id: String, shortId: String, shortCode: String, address: String, ip: String, port: Int, encrypted: Bool, saved: Bool) {
        self.name = name
        self.id = id
        self.shortId = shortId
        self.shortCode = shortCode
        self.address = address
        self.ip = ip
        self.port = port
        self.encrypted = encrypted
        self.saved = saved
    }
}
