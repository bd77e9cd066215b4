import DNSSD
import LanchatCore

/// What a lanchat daemon puts in its `_chat-service._tcp` TXT record.
///
/// | key    | value                                  |
/// |--------|----------------------------------------|
/// | `v`    | lowest wire protocol version (`1`; HELLO agrees on the highest both speak, 2) |
/// | `id`   | peer id (`PeerID`, 52 chars)           |
/// | `name` | display name, UTF-8, at most 200 bytes |
/// | `enc`  | `required`, `optional` or `none`       |
///
/// Readers ignore keys they do not know, so later versions can add keys.
public struct PeerAdvertisement: Equatable, Sendable {
    public static let protocolVersion = 1
    public static let maximumNameBytes = 200

    public enum Encryption: String, Sendable, CaseIterable, Codable {
        case required, optional, none
    }

    public var version: Int
    public var peerID: PeerID
    public var displayName: String
    public var encryption: Encryption

    public init(version: Int = PeerAdvertisement.protocolVersion, peerID: PeerID, displayName: String, encryption: Encryption = .required) {
        self.version = version
        self.peerID = peerID
        self.displayName = Self.sanitize(displayName)
        self.encryption = encryption
    }

    /// Why a service of our type is not a usable lanchat peer.
    public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        case missingKey(String)
        case invalidValue(key: String)
        case unsupportedVersion(String)

        public var description: String {
            switch self {
            case .missingKey(let key): return "TXT key '\(key)' missing (not a lanchat peer?)"
            case .invalidValue(let key): return "TXT key '\(key)' has an invalid value"
            case .unsupportedVersion(let version): return "protocol version \(version) is not supported (this build speaks \(PeerAdvertisement.protocolVersion))"
            }
        }
    }

    /// Reads an advertisement from a TXT record, or says why it is not one we can use.
    public static func parse(_ txt: TXTRecord) -> Result<PeerAdvertisement, Problem> {
        guard txt.contains("v") else { return .failure(.missingKey("v")) }
        guard let versionText = txt.string("v"), let version = Int(versionText), versionText.count <= 4 else {
            return .failure(.invalidValue(key: "v"))
        }
        guard version == protocolVersion else { return .failure(.unsupportedVersion(versionText)) }
        guard txt.contains("id") else { return .failure(.missingKey("id")) }
        guard let idText = txt.string("id"), let peerID = PeerID(idText) else { return .failure(.invalidValue(key: "id")) }
        let encryption: Encryption
        if txt.contains("enc") {
            guard let text = txt.string("enc"), let value = Encryption(rawValue: text) else {
                return .failure(.invalidValue(key: "enc"))
            }
            encryption = value
        } else {
            encryption = .required
        }
        // A missing or unreadable name is not fatal: people still see the id.
        let name = txt.string("name").map(sanitize) ?? ""
        return .success(PeerAdvertisement(version: version, peerID: peerID, displayName: name.isEmpty ? peerID.short : name, encryption: encryption))
    }

    public var txtRecord: TXTRecord {
        var txt = TXTRecord()
        txt["v"] = Array(String(version).utf8)
        txt["id"] = Array(peerID.rawValue.utf8)
        txt["name"] = Array(displayName.utf8)
        txt["enc"] = Array(encryption.rawValue.utf8)
        return txt
    }

    /// The instance name to try after `attempt` same-host conflicts: "name", "name (2)", ...; with
    /// `tag` (after the name stayed contested on the network: `ContestedName`), "name [tag]", ...;
    /// cut to the 63 bytes a DNS label allows.
    public static func instanceName(base: String, attempt: Int, tag: String? = nil) -> String {
        let suffix = (tag.map { " [\($0)]" } ?? "") + (attempt == 0 ? "" : " (\(attempt + 1))")
        var name = ""
        for character in base where name.utf8.count + String(character).utf8.count + suffix.utf8.count <= 63 {
            name.append(character)
        }
        return name + suffix
    }

    /// Removes control characters and cuts the name to `maximumNameBytes` at a character boundary.
    public static func sanitize(_ name: String) -> String {
        var out = ""
        var bytes = 0
        for scalar in name.unicodeScalars {
            if scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format { continue }
            let size = String(scalar).utf8.count
            if bytes + size > maximumNameBytes { break }
            bytes += size
            out.unicodeScalars.append(scalar)
        }
        return out.trimmingSpaces()
    }
}

extension String {
    /// The string without leading and trailing white space (spaces, tabs, CR, LF, ...).
    public func trimmingSpaces() -> String {
        var scalars = Substring(self).unicodeScalars
        while let first = scalars.first, first.properties.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.properties.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}
