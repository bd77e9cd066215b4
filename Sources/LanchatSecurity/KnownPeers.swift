import FoundationEssentials
import Glibc
import LanchatCore

/// Trust on first use: which key (peer id) each known peer had when first met.
///
/// A peer is known by a label the caller chooses (the session layer uses display name and host,
/// `alice@h1 on h1.local`). Meeting a label again with another id is a key change: the caller refuses
/// loudly and the person decides (`forget` to accept the new key). Kept as JSON in the state
/// directory, mode 0600, replaced atomically.
public struct KnownPeers: Sendable {
    public struct Entry: Codable, Equatable, Sendable {
        public var label: String
        public var id: PeerID
        public var firstSeen: Date
    }

    public enum Verdict: Equatable, Sendable {
        case new
        case known
        /// The label was first seen with `previous`; now it presents another key.
        case changed(previous: PeerID)
    }

    public struct Error: Swift.Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    public static let fileName = "known_peers.json"
    public static let maximumFileSize = 4 * 1024 * 1024
    public let path: String
    public private(set) var entries: [String: Entry] = [:]

    /// Loads the record (an absent file is an empty record). A corrupt file is an error and is left
    /// as it is: losing it would silently trust every changed key.
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
            for entry in list { entries[entry.label] = entry }
        } catch {
            throw Error(description: "\(path) is not a known-peers record (\(error)); move it away to start a new one (every peer will be new again)")
        }
    }

    public func check(label: String, id: PeerID) -> Verdict {
        guard let entry = entries[label] else { return .new }
        return entry.id == id ? .known : .changed(previous: entry.id)
    }

    /// Records the label's key (first use, or after the person accepted a change) and saves.
    public mutating func remember(label: String, id: PeerID, now: Date = .now) throws(Error) {
        entries[label] = Entry(label: label, id: id, firstSeen: now)
        try save()
    }

    public mutating func forget(label: String) throws(Error) {
        entries[label] = nil
        try save()
    }

    private func save() throws(Error) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do { data = try encoder.encode(entries.values.sorted { $0.label < $1.label }) } catch {
            throw Error(description: "cannot encode the known-peers record: \(error)")
        }
        do { try DurableFile.replace(path, with: Array(data)) } catch {
            throw Error(description: "cannot save \(path): \(error.reason)")
        }
    }
}
