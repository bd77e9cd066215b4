internal import Crypto
internal import FoundationEssentials
internal import LanchatCore
internal import LanchatDiscovery
internal import LanchatIdentity

/// Who this program is on the network: a long-term P-256 key, the peer id derived from it (SHA-256 of
/// the public key, base32: what other peers pin), and a display name. Multipeer Connectivity's `MCPeerID`,
/// except that the id is the key's, so a peer cannot be impersonated by reusing its name.
public struct PeerIdentity: Sendable {
    let identity: Identity
    /// What others see; control characters are removed and it is cut to 200 bytes.
    public let displayName: String

    /// The peer id (52 characters).
    public var id: String { identity.peerID.rawValue }
    /// The id's first 12 characters, as `lanchat peers` shows them.
    public var shortID: String { identity.peerID.short }
    /// This identity as other peers see it.
    public var peer: Peer { Peer(id: identity.peerID, displayName: displayName) }

    init(identity: Identity, displayName: String) {
        self.identity = identity
        self.displayName = PeerAdvertisement.sanitize(displayName)
    }

    /// The identity kept in `directory` (its key in `identity.pem`, mode 0600, as lanchatd keeps its
    /// own), created there on first use. The directory is created (0700) if missing.
    public static func stored(in directory: String, displayName: String) throws(LanchatError) -> PeerIdentity {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw LanchatError(.identity, "cannot create \(directory): \(error)")
        }
        do { return PeerIdentity(identity: try Identity.loadOrCreate(in: directory), displayName: displayName) } catch {
            throw LanchatError(.identity, error.description)
        }
    }

    /// A new identity that lives as long as the program: others will see a new peer each run.
    public static func ephemeral(displayName: String) -> PeerIdentity {
        PeerIdentity(identity: Identity(privateKey: P256.Signing.PrivateKey()), displayName: displayName)
    }
}

/// Another peer (or this one): its id, which TLS proves, and the name it gives itself, which nothing proves.
public struct Peer: Hashable, Sendable, CustomStringConvertible {
    /// The peer id (52 characters).
    public let id: String
    public let displayName: String

    /// The id's first 12 characters.
    public var shortID: String { String(id.prefix(12)) }
    public var description: String { "\(displayName) (\(shortID))" }

    init(id: PeerID, displayName: String) {
        self.id = id.rawValue
        self.displayName = displayName
    }

    /// A peer known by its id (52 characters, as `id` gives it: kept from an earlier run, or read from
    /// `lanchat peers --json`); nil if `id` is not one.
    public init?(id: String, displayName: String) {
        guard let peerID = PeerID(id) else { return nil }
        self.init(id: peerID, displayName: PeerAdvertisement.sanitize(displayName))
    }

    /// Two values are the same peer when their ids are equal (a peer may change its name).
    public static func == (a: Peer, b: Peer) -> Bool { a.id == b.id }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// The peer id, or the error every call that takes a `Peer` throws for one made up.
    func checkedID() throws(LanchatError) -> PeerID {
        guard let id = PeerID(id) else { throw LanchatError(.invalidArgument, "'\(id)' is not a peer id") }
        return id
    }
}
