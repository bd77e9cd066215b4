internal import LanchatEngine

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
        /// A resource did not arrive whole: the connection failed for good, a write failed, or its SHA-256
        /// did not match (`message` says which).
        case transferFailed = "transfer_failed"
        /// The transfer or stream was cancelled (by either side).
        case cancelled
        /// A byte stream was aborted by either side, or written after it was finished.
        case streamClosed = "stream_closed"
        /// The peer sends, or this side asks, faster than lanchat's limits allow (topics: 500 a second).
        case rateLimited = "rate_limited"
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
            case .badRequest, .badText, .badTopic, .badFile, .tooLong, .tooLarge, .ambiguous, .tooManyTopics: .invalidArgument
            case .storage, .writeFailed: .storage
            case .unknownInvitation: .unknownInvitation
            case .unknownRoom, .notAMember, .removed, .unknownMember: .notInGroup
            case .refused, .streamRefused: .refused
            case .unreachable: .unreachable
            case .streamAborted, .streamFinished: .streamClosed
            case .rateLimited: .rateLimited
            case .stopped: .closed
            default: .other
            }
        self.init(code, error.message)
    }
}
