import CDNSSD

/// An error from the DNS-SD layer, with a code a caller can act on.
public struct DNSSDError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Code: Equatable, Sendable {
        /// avahi-daemon (or the system D-Bus) is absent, or died under an open operation.
        /// The operation is dead: start it again later (with backoff).
        case daemonUnavailable
        /// The service name is already registered on this host's avahi-daemon.
        case nameConflict
        /// The request uses something Avahi's compatibility layer does not implement.
        case unsupported
        /// An argument was rejected (bad name, type, or TXT record).
        case badParameter
        /// No answer within the time allowed.
        case timeout
        /// Any other dns_sd status.
        case other
    }

    public let code: Code
    /// The raw `DNSServiceErrorType`, or 0 for errors raised in Swift.
    public let status: Int32
    /// What was being attempted ("register", "browse", ...).
    public let operation: String

    public init(code: Code, status: Int32 = 0, operation: String) {
        self.code = code
        self.status = status
        self.operation = operation
    }

    init(status: DNSServiceErrorType, operation: String) {
        let code: Code
        switch Int(status) {
        case kDNSServiceErr_Unknown: code = .daemonUnavailable
        case kDNSServiceErr_NameConflict: code = .nameConflict
        case kDNSServiceErr_Unsupported: code = .unsupported
        case kDNSServiceErr_BadParam, kDNSServiceErr_Invalid: code = .badParameter
        default: code = .other
        }
        self.init(code: code, status: status, operation: operation)
    }

    public var description: String {
        switch code {
        case .daemonUnavailable:
            return "\(operation): avahi-daemon is not reachable (is dbus running, and avahi-daemon? try `lanchat doctor`) [\(status)]"
        case .nameConflict:
            return "\(operation): the name is already registered on this host [\(status)]"
        case .unsupported:
            return "\(operation): not supported by Avahi's dns_sd compatibility layer [\(status)]"
        case .badParameter:
            return "\(operation): invalid parameter [\(status)]"
        case .timeout:
            return "\(operation): timed out"
        case .other:
            return "\(operation): dns_sd error \(status)"
        }
    }
}
