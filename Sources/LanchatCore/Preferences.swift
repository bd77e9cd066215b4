// The daemon-wide preferences that several layers decide by.

/// Encryption preferences, as in Multipeer Connectivity: `required` needs TLS, `none` refuses it,
/// `optional` goes along with the other side (and prefers TLS).
public enum EncryptionPreference: String, Sendable, CaseIterable {
    case required, optional, none

    public struct Mismatch: Error, Equatable, CustomStringConvertible {
        public let ours: EncryptionPreference
        public let theirs: EncryptionPreference
        public var description: String {
            "encryption preferences cannot meet: this daemon's is \(ours.rawValue), the peer's is \(theirs.rawValue) (change --encryption on one side)"
        }
    }

    /// Whether the connection uses TLS, or why the two cannot talk.
    public static func negotiate(ours: EncryptionPreference, theirs: EncryptionPreference) -> Result<Bool, Mismatch> {
        switch (ours, theirs) {
        case (.required, .none), (.none, .required): return .failure(Mismatch(ours: ours, theirs: theirs))
        case (.none, _), (_, .none): return .success(false)
        default: return .success(true)
        }
    }
}

/// Who may join a room without asking the person.
public enum AutoAcceptPolicy: String, Sendable, CaseIterable {
    /// Every invitation waits for `accept` or `decline` (or expires).
    case never
    /// Peers already in the known-peers record (met in a room before, same key) are accepted.
    case known
    /// Everything is accepted.
    case all
}
