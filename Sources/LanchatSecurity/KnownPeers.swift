import FoundationEssentials
import Glibc
import LanchatCore

/// Trust on first use: the keys (peer ids) met in rooms, each with the name it came with, a label.
///
/// The key is the peer: a known key under a new name is the same peer (its label follows), and a known
/// name with a new key is another key, shown to the person with both codes (two hosts may share a name,
/// `pi@raspberrypi` among them). Kept as JSON in the state directory, mode 0600, replaced atomically
/// and synced. A record written by an older lanchatd (one key per name) reads the same.
public struct KnownPeers: Sendable {
    public struct Entry: Codable, Equatable, Sendable {
        public var label: String
        public var id: PeerID
        public var firstSeen: Date
    }

    public struct Error: Swift.Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    public static let fileName = "known_peers.json"
    public static let maximumFileSize = 4 * 1024 * 1024
    public let path: String
    public private(set) var entries: [PeerID: Entry] = [:]

    /// Loads the record (an absent file is an empty record). A corrupt file is an error and is left
    /// as it is: losing it would silently make every known key new again.
    public init(directory: String) throws(Error) {
        path = directory.hasSuffix("/") ? directory + Self.fileName : directory + "/" + Self.fileName
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { return }
            throw Error(description: "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_size <= Self.maximumFileSize, let data = FileManager.default.contents(atPath: path) else {
            throw Error(description: "\(path) is unreadable or larger than 4 MiB")
        }
        do {
            let list = try JSONDecoder().decode([Entry].self, from: data)
            for entry in list { entries[entry.id] = entry }
        } catch {
            throw Error(description: "\(path) is not a known-peers record (\(error)); move it away to start a new one (every peer will be new again)")
        }
    }

    /// A record kept in memory only (an embedding program's session without a directory): it is never saved.
    public static func inMemory() -> KnownPeers { KnownPeers(path: "") }

    private init(path: String) { self.path = path }

    /// The name each known key came with.
    public var labels: [PeerID: String] { entries.mapValues(\.label) }

    /// Records a key with its name (first use, or the name it now comes with) and saves.
    public mutating func remember(label: String, id: PeerID, now: Date = .now) throws(Error) {
        entries[id] = Entry(label: label, id: id, firstSeen: entries[id]?.firstSeen ?? now)
        try save()
    }

    /// Forgets the keys known under `label` (or the key whose id is `label`) and saves; returns them.
    @discardableResult
    public mutating func forget(label: String) throws(Error) -> [PeerID] {
        let ids = entries.values.filter { $0.label == label || $0.id.rawValue == label }.map(\.id).sorted { $0.rawValue < $1.rawValue }
        guard !ids.isEmpty else { return [] }
        for id in ids { entries[id] = nil }
        try save()
        return ids
    }

    private func save() throws(Error) {
        guard !path.isEmpty else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do { data = try encoder.encode(entries.values.sorted { ($0.label, $0.id.rawValue) < ($1.label, $1.id.rawValue) }) } catch {
            throw Error(description: "cannot encode the known-peers record: \(error)")
        }
        do { try DurableFile.replace(path, with: Array(data)) } catch {
            throw Error(description: "cannot save \(path): \(error.reason)")
        }
    }
}
