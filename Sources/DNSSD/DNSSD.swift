import Glibc

/// Async Swift access to DNS-SD through Avahi's `dns_sd.h` compatibility library.
///
/// Facts this layer absorbs (see `notes/dnssd-on-avahi.md`): every ref is driven from its own serial
/// queue; flags are always 0 (Avahi rejects the others); errors map to `DNSSDError` codes; a dead
/// daemon surfaces as `daemonUnavailable` on the operation's event stream.
public enum DNSSD {
    /// The service type lanchat advertises and browses.
    public static let chatServiceType = "_chat-service._tcp"

    /// Silences Avahi's "Apple Bonjour compatibility layer" banner (it reads the variable on the
    /// first call).
    static func prepareEnvironment() {
        if getenv("AVAHI_COMPAT_NOWARN") == nil { setenv("AVAHI_COMPAT_NOWARN", "1", 0) }
    }
}
