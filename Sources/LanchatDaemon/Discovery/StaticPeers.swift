import FoundationEssentials
import Glibc
import LanchatControl
import LanchatCore
import LanchatDiscovery
import LanchatSecurity
import LanchatSession
import LanchatTransport
import Logging
import NIOCore
import ServiceLifecycle

/// Peers beyond the link: DNS-SD multicast stays on one subnet, so a peer behind a router or a VPN is
/// added by address: `lanchat connect HOST[:PORT]` (after the person compared the short code) or
/// `static-peer = HOST:PORT` in the config (trusted on first use). They are kept in
/// `static-peers.json` in the state directory with the id they proved, listed by `lanchat peers`
/// (origin `static`) and dialed by the session layer like discovered ones, pinned to that id.
actor StaticPeers: Service {
    /// One kept peer, as saved.
    struct Entry: Codable, Equatable, Sendable {
        /// As given: a host name or an IP address, and the port.
        var host: String
        var port: Int
        /// The id the peer proved (its TLS key); `nil` for a configured address not reached yet.
        var id: String?
        var name: String?
        /// The address last dialed (a resolved host name).
        var ip: String?
    }

    static let fileName = "static-peers.json"
    /// How many peers are kept at most (each is a file entry and a directory entry).
    static let maximumEntries = 256

    private let path: String
    private let ownID: PeerID
    private let connector: PeerConnector
    private let discovery: DiscoveryService
    /// Hands a confirmed connection to the session layer; false if it refused it (a known name with
    /// another key).
    private let adopt: @Sendable (PeerConnector.Connection) async -> Bool
    private let logger: Logger
    private let configured: [PeerAddress]
    /// Host names to addresses, each look-up given `HostResolver.deadline` (10 s).
    private let resolver: HostResolver
    private var entries: [Entry] = []

    init(
        stateDirectory: String, configured: [PeerAddress], ownID: PeerID, connector: PeerConnector, discovery: DiscoveryService,
        logger: Logger, resolver: HostResolver = HostResolver(), adopt: @escaping @Sendable (PeerConnector.Connection) async -> Bool
    ) {
        self.resolver = resolver
        self.path = joinPath(stateDirectory, Self.fileName)
        self.configured = configured
        self.ownID = ownID
        self.connector = connector
        self.discovery = discovery
        self.logger = logger
        self.adopt = adopt
    }

    func run() async throws {
        load()
        for address in configured where !entries.contains(where: { $0.host == address.host && $0.port == address.port }) {
            entries.append(Entry(host: address.host, port: address.port))
        }
        for entry in entries { await list(entry) }
        // Configured addresses whose peer was never reached: try until it answers (trust on first use).
        await cancelWhenGracefulShutdown {
            var delay: Duration = .seconds(1)
            while !Task.isCancelled, await self.learnUnknown() {
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(60))
            }
            // Nothing (left) to learn: a service of the group runs until the daemon stops.
            try? await gracefulShutdown()
        }
    }

    /// Tries each configured address whose peer was never reached; true while some remain.
    private func learnUnknown() async -> Bool {
        for entry in entries where entry.id == nil { await learn(entry) }
        return entries.contains { $0.id == nil }
    }

    // MARK: connect / disconnect

    /// Dials `address`; `confirm` nil: says who answers and closes. `confirm` an id: dials pinned to it,
    /// keeps the peer and hands the connection to the session layer.
    func connect(_ address: PeerAddress, confirm: PeerID?) async throws(ControlError) -> ConnectResult {
        if let confirm, confirm == ownID { throw ControlError(code: .badRequest, message: "that is this daemon's own id") }
        let ip = try await resolver.resolve(address.host)
        guard let socketAddress = try? SocketAddress(ipAddress: ip.split(separator: "%").first.map(String.init) ?? ip, port: address.port) else {
            throw ControlError(code: .badAddress, message: "cannot use the address \(ip)")
        }
        let connection: PeerConnector.Connection
        do {
            connection = try await connector.dial(socketAddress, expected: confirm, theirs: .required)
        } catch {
            let text =
                confirm != nil && error.description.contains("presented key")
                ? "\(address) presents another key than the one you confirmed: \(error.description)"
                : "cannot connect to \(address): \(error.description)"
            throw ControlError(code: .connectFailed, message: text)
        }
        guard let id = PeerID(connection.session.peerID), id != ownID else {
            await connection.close()
            throw ControlError(code: .connectFailed, message: "\(address) is this daemon itself")
        }
        let name = PeerAdvertisement.sanitize(connection.session.name)
        var result = ConnectResult(
            name: name, id: id.rawValue, shortId: id.short, shortCode: ShortCode.between(ownID, id),
            address: address.description, ip: ip, port: address.port, encrypted: connection.encrypted, saved: false)
        guard confirm != nil else {
            await connection.close()
            return result
        }
        guard await adopt(connection) else {
            throw ControlError(code: .refused, message: "the session layer refused the connection to '\(name)' (the daemon's log says why)")
        }
        let entry = Entry(host: address.host, port: address.port, id: id.rawValue, name: name, ip: ip)
        // The same address with another key (a reinstalled host the person confirmed again) replaces the old entry.
        let replaced = entries.filter { $0.id != id.rawValue && $0.host == address.host && $0.port == address.port }
        entries.removeAll { $0.id == id.rawValue || ($0.host == address.host && $0.port == address.port) }
        guard entries.count < Self.maximumEntries else {
            await connection.close()
            throw ControlError(code: .tooMany, message: "at most \(Self.maximumEntries) static peers; `lanchat disconnect` one first")
        }
        entries.append(entry)
        try save()
        for old in replaced { if let text = old.id, let oldID = PeerID(text) { await discovery.removeStatic(oldID) } }
        await list(entry)
        result.saved = true
        return result
    }

    /// Forgets a static peer by id.
    func disconnect(_ id: PeerID) async throws(ControlError) -> Entry {
        guard let entry = entries.first(where: { $0.id == id.rawValue }) else {
            throw ControlError(code: .unknownPeer, message: "\(id.short) is not a static peer (see `lanchat peers`)")
        }
        entries.removeAll { $0.id == id.rawValue }
        try save()
        await discovery.removeStatic(id)
        return entry
    }

    // MARK: Internals

    /// A configured address without a known id: dial, learn the id, keep it.
    private func learn(_ entry: Entry) async {
        let address = PeerAddress(host: entry.host, port: entry.port)
        do throws(ControlError) {
            let result = try await connect(address, confirm: nil)
            guard let id = PeerID(result.id) else { return }
            logger.notice(
                "static peer reached; its key is now trusted for this address",
                metadata: [
                    "peer.address": "\(address)", "peer.id": "\(id.short)", "peer.name": "\(result.name)",
                ])
            _ = try await connect(address, confirm: id)
        } catch {
            logger.debug("static peer not reached", metadata: ["peer.address": "\(address)", "error": "\(error.message)"])
        }
    }

    /// Lists an entry whose id is known (the session layer may dial it from now on).
    private func list(_ entry: Entry) async {
        guard let text = entry.id, let id = PeerID(text) else { return }
        let address = PeerAddress(host: entry.host, port: entry.port)
        let ip = entry.ip ?? entry.host
        await discovery.setStatic(
            DiscoveredPeer(
                instanceName: address.description,
                advertisement: PeerAdvertisement(peerID: id, displayName: entry.name ?? address.description),
                problem: nil, hostName: entry.host, port: UInt16(entry.port), addresses: [ip], interfaceIndices: [], origin: .static))
    }

    private func load() {
        var info = stat()
        guard stat(path, &info) == 0 else { return }
        guard info.st_size <= 1 << 20, let data = FileManager.default.contents(atPath: path),
            let saved = try? JSONDecoder().decode([Entry].self, from: data)
        else {
            logger.warning("cannot read the static peers file; starting without it", metadata: ["file": "\(path)"])
            return
        }
        entries = Array(saved.prefix(Self.maximumEntries)).filter { entry in
            if case .success = PeerAddress.parse(PeerAddress(host: entry.host, port: entry.port).description) { return true }
            return false
        }
    }

    private func save() throws(ControlError) {
        try Self.save(entries, to: path)
    }

    /// Writes `entries` to `path` as the identity key is written (`DurableFile.replace`: a fresh 0600
    /// file, synced, renamed over `path`, the directory synced): once `connect` says "saved" the peer
    /// survives a power loss, and a crash mid-write leaves the previous file, never a torn one.
    static func save(_ entries: [Entry], to path: String) throws(ControlError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do { data = try encoder.encode(entries) } catch {
            throw ControlError(code: .io, message: "cannot save \(path): \(error)")
        }
        do { try DurableFile.replace(path, with: Array(data)) } catch {
            throw ControlError(code: .io, message: "cannot save \(path): \(error.reason)")
        }
    }
}
