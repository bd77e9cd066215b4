import LanchatEngine

/// What went wrong, typed: every throwing call of LanchatKit throws this.
public struct LanchatError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        /// An argument the library cannot use: a service type, group name, discovery key, message or peer id.
        case invalidArgument = "invalid_argument"
        /// The identity could not be read or created (its file, its directory).
        case identity
        /// The storage directory or its database could not be opened, or a write failed.
        case storage
        /// The peer port could not be opened, or TLS could not be set up.
        case network
        /// The invited peer declined; `message` is its reason (may be empty).
        case declined
        /// The invitation timed out.
        case expired
        /// The peer could not be reached: no address known (not found by a browser), connection failed,
        /// or the encryption the two sides require differs.
        case unreachable
        /// The peer refused us (for example: our key changed since it last saw us).
        case refused
        /// The invitation was answered, expired or withdrawn already.
        case unknownInvitation = "unknown_invitation"
        /// This session is not (or no longer) in the group.
        case notInGroup = "not_in_group"
        /// The session is closed.
        case closed
        /// Another refusal of the session layer: `message` says what.
        case other
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }

    init(_ error: SessionError) {
        let code: Code =
            switch error.code {
            case .badRequest, .badText, .tooLong, .tooLarge, .ambiguous: .invalidArgument
            case .storage: .storage
            case .unknownInvitation: .unknownInvitation
            case .unknownRoom, .notAMember, .removed: .notInGroup
            case .refused: .refused
            default: .other
            }
        self.init(code, error.message)
    }
}
