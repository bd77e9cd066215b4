internal import DNSSD
internal import LanchatCore
internal import LanchatDiscovery
internal import LanchatEngine
internal import LanchatSession
internal import Synchronization

/// Makes a session visible on the local network and hands over the invitations that come to it:
/// Multipeer Connectivity's `MCNearbyServiceAdvertiser`. It registers the session's service type with
/// DNS-SD (avahi-daemon), under the identity's display name ("name (2)" if that is taken on this host),
/// with the TXT record lanchatd uses plus `discoveryInfo`; it registers again when avahi-daemon restarts.
/// It stops when the session closes, or when it is released. Use one advertiser a session: they share the
/// session's invitations. It runs lanchatd's own advertising loop: a name that stays contested on the
/// network for long (a host answering for it) is given up for one tagged with the peer's id, "name
/// [abcdef]" (`instanceName` is nil until a name is confirmed).
public final class Advertiser: Sendable {
    public let session: Session
    public let discoveryInfo: [String: String]
    private let txt: [UInt8]
    private let task = TaskSlot()
    private let registered = Registered()
    private let closing: UInt64

    /// Keys lanchat's own advertisement uses: not available to `discoveryInfo`.
    public static let reservedKeys: Set<String> = ["v", "id", "name", "enc"]

    /// `discoveryInfo`: what browsers see with the peer. Keys are 1-32 of `a-z`, `0-9`, `-`, `_` (not a
    /// reserved key); a key and its value take at most 250 bytes; the whole record at most 1,300.
    public init(session: Session, discoveryInfo: [String: String] = [:]) throws(LanchatError) {
        self.session = session
        self.discoveryInfo = discoveryInfo
        let advertisement = PeerAdvertisement(
            peerID: session.identity.identity.peerID, displayName: session.identity.displayName,
            encryption: PeerAdvertisement.Encryption(rawValue: session.encryption.rawValue)!)
        var record = advertisement.txtRecord
        for (key, value) in discoveryInfo.sorted(by: { $0.key < $1.key }) {
            guard Self.isKey(key) else {
                throw LanchatError(.invalidArgument, "discovery key '\(key)' is not 1-32 of a-z, 0-9, '-', '_'")
            }
            guard !Self.reservedKeys.contains(key) else { throw LanchatError(.invalidArgument, "discovery key '\(key)' is lanchat's own") }
            guard key.utf8.count + 1 + value.utf8.count <= 250 else {
                throw LanchatError(.invalidArgument, "discovery key '\(key)' with its value is longer than 250 bytes")
            }
            record[key] = Array(value.utf8)
        }
        do { txt = try record.encode() } catch { throw LanchatError(.invalidArgument, "the discovery info is too large: \(error)") }
        let task = self.task
        closing = session.whenClosing {
            await task.stop()
        }
    }

    deinit {
        task.cancel()
        session.forgetClosing(closing)
    }

    private static let keyBytes = Set(Array("abcdefghijklmnopqrstuvwxyz0123456789-_".utf8))

    static func isKey(_ key: String) -> Bool { (1...32).contains(key.utf8.count) && key.utf8.allSatisfy { keyBytes.contains($0) } }

    /// Starts advertising (again after `stop`); does nothing if it is advertising.
    public func start() {
        guard session.isOpen else { return }
        let name = session.identity.displayName.isEmpty ? session.identity.shortID : session.identity.displayName
        let (type, port, txt, registered) = (session.serviceType, UInt16(session.port), txt, registered)
        let peerID = session.identity.identity.peerID
        task.start {
            // (Unstructured: it runs until `stop`, which cancels and awaits it.)
            Task { await Self.advertise(name: name, peerID: peerID, type: type, port: port, txt: txt, registered: registered) }
        }
    }

    /// Withdraws the advertisement (avahi-daemon sends goodbye packets). Invitations still arrive from
    /// peers that know the session's address.
    public func stop() async {
        await task.stop()
    }

    /// The DNS-SD instance name it is registered under now (nil: not registered, or not confirmed yet).
    public var instanceName: String? { registered.name.withLock { $0 } }

    /// Invitations to this session (or to any group of its peer: an invitation names its group), for one
    /// task to read: answer each with `accept()` or `decline(reason:)`, or let it expire.
    public var invitations: AsyncStream<Invitation> { session.invitations }

    /// lanchatd's advertising loop (`AdvertiseLoop`), keeping `instanceName` up to date.
    private static func advertise(name: String, peerID: PeerID, type: String, port: UInt16, txt: [UInt8], registered: Registered) async {
        await AdvertiseLoop.run(base: name, peerID: peerID, type: type, port: port, txt: txt) { event in
            switch event {
            case .registered(let final, _): registered.name.withLock { $0 = final }
            case .registering, .takenOnHost: break
            case .lost, .contested, .unavailable, .withdrawn: registered.name.withLock { $0 = nil }
            }
        }
        registered.name.withLock { $0 = nil }
    }
}

/// The task of an advertiser or a browser: one at a time.
final class TaskSlot: Sendable {
    private let task = Mutex<Task<Void, Never>?>(nil)

    /// Runs `make`'s task unless one runs.
    func start(_ make: () -> Task<Void, Never>) {
        task.withLock { task in
            if task == nil { task = make() }
        }
    }

    /// Cancels the task and waits for its end.
    func stop() async {
        let running = task.withLock { task in
            defer { task = nil }; return task
        }
        running?.cancel()
        await running?.value
    }

    func cancel() { task.withLock { $0?.cancel() } }
}

/// The instance name an advertisement is registered under, as its task last saw it.
final class Registered: Sendable {
    let name = Mutex<String?>(nil)
}

/// An invitation another peer sent: Multipeer Connectivity's `invitationHandler`, as a value.
public struct Invitation: Sendable {
    /// 32 hex characters.
    public let id: String
    public let from: Peer
    /// The group it invites to.
    public let group: String
    /// The inviter's context (lanchatd's `invite --message` puts UTF-8 text there).
    public let context: [UInt8]
    /// The context as text, if it is printable UTF-8.
    public let text: String?
    /// The code both people can compare ("4821-0937") to know that no one is in between.
    public let shortCode: String
    private let node: SessionNode
    private let lifetime: Lifetime

    init(_ invitation: IncomingInvitation, node: SessionNode, lifetime: Lifetime) {
        id = invitation.id.description
        from = Peer(id: invitation.from.id, displayName: invitation.from.name)
        group = invitation.room.rawValue
        context = invitation.context
        text = invitation.message
        shortCode = invitation.shortCode
        self.node = node
        self.lifetime = lifetime
    }

    /// Joins the group (with its history, from the inviter); returns when that is stored.
    public func accept() async throws(LanchatError) {
        do { _ = try await node.accept(id) } catch { throw LanchatError(error) }
    }

    /// Tells the inviter no, with `reason` (it may be empty).
    public func decline(reason: String = "") async throws(LanchatError) {
        do { _ = try await node.decline(id, reason: reason) } catch { throw LanchatError(error) }
    }
}
