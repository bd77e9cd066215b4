import LanchatCore

/// The contested-name watchdog's decisions (pure): how long a registration may wait for Avahi's
/// confirmation, and under which tag of our id to register when it did not come.
///
/// Avahi renames a name taken on the network ("name #2") in a second or two; but two hosts probing one
/// name at the same instant can keep renaming each other for a long while (a CI run saw 30 s), and a host
/// on the LAN can answer every probe for our name and each "name #N" as its own. A registration not
/// confirmed within `wait` is given up and the next one tagged with our id's first characters:
/// "name [abcdef]", then longer tags (`tagLengths`: 6, 10, 16 characters) in case the tag is contested
/// too, each given `firstWait` (10 s). Past the longest tag the same name is tried again with the wait
/// doubling up to `maximumWait` (160 s): never given up (a host that answers for every name can keep us
/// unlisted, but it cannot make us stop trying, and each attempt is logged). A confirmation brings the
/// wait back to `firstWait`; the tag stays for the rest of the process (a name no other host carries).
public struct ContestedName: Sendable, Equatable {
    /// How long a registration may wait for Avahi's confirmation before it counts as contested.
    public static let firstWait = Duration.seconds(10)
    /// The longest wait, once every tag length was tried.
    public static let maximumWait = Duration.seconds(160)
    /// Characters of our id in the tag, tried in turn ("name [abcdef]", ...).
    public static let tagLengths = [6, 10, 16]

    /// Tag lengths used so far: 0 = no tag yet; `tagLengths[level - 1]` otherwise.
    public private(set) var level = 0
    /// Unconfirmed registrations in a row under the longest tag (each doubles the wait).
    public private(set) var repeats = 0
    /// Unconfirmed registrations since the last confirmation (for the log).
    public private(set) var unconfirmed = 0

    /// The tag for our id, nil before the first contest.
    public func tag(for id: PeerID) -> String? {
        level == 0 ? nil : String(id.rawValue.prefix(Self.tagLengths[level - 1]))
    }

    /// How long the next registration may wait for its confirmation.
    public var wait: Duration {
        var wait = Self.firstWait
        for _ in 0..<min(repeats, 8) where wait < Self.maximumWait { wait = wait * 2 }
        return min(wait, Self.maximumWait)
    }

    /// Avahi confirmed the registration: the next one (after an outage) waits `firstWait` again.
    public mutating func confirmed() {
        repeats = 0
        unconfirmed = 0
    }

    /// What the watchdog does when a registration was not confirmed in time.
    public enum Step: Equatable, Sendable {
        /// Register under a longer tag (or the first one) of this many characters.
        case tag(length: Int)
        /// Every tag was tried: register the same name again, given the longer `wait`.
        case again
    }

    /// The registration was not confirmed within `wait`: the next step (never "stop").
    public mutating func notConfirmed() -> Step {
        unconfirmed += 1
        if level < Self.tagLengths.count {
            level += 1
            return .tag(length: Self.tagLengths[level - 1])
        }
        repeats += 1
        return .again
    }
}
