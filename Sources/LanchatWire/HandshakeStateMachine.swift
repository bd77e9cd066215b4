/// The start of every peer connection: both sides send HELLO at once, then each checks the other's.
///
/// Events in, actions out; no sockets, no clock (the caller runs the timer and reports it).
/// The caller turns actions into IO: send a frame, change the decoder's limits, close.
public struct HandshakeStateMachine: Sendable {
    /// What the handshake settled.
    public struct Session: Equatable, Sendable {
        public var version: UInt16
        public var peerID: String
        public var name: String
        public var capabilities: [String]
        /// The smaller of both sides' `max_payload`.
        public var limits: FrameLimits
    }

    public enum Failure: Equatable, Sendable, CustomStringConvertible {
        case noCommonVersion(ours: ClosedRange<UInt16>, theirs: ClosedRange<UInt16>)
        /// HELLO's peer id differs from the one the TLS certificate proves.
        case idDiffersFromCertificate(hello: String, certificate: String)
        /// HELLO's peer id differs from the one advertised for the peer we dialed.
        case idDiffersFromAdvertised(hello: String, advertised: String)
        case unexpectedFrame(String)
        case timedOut
        case peerSaidGoodbye(WireFrame.Goodbye)

        public var description: String {
            switch self {
            case .noCommonVersion(let ours, let theirs):
                return "no common protocol version (we speak \(ours.lowerBound)-\(ours.upperBound), the peer \(theirs.lowerBound)-\(theirs.upperBound))"
            case .idDiffersFromCertificate(let hello, let certificate):
                return "the peer claims id \(hello.prefix(12))… but its certificate is \(certificate.prefix(12))…"
            case .idDiffersFromAdvertised(let hello, let advertised):
                return "the peer is \(hello.prefix(12))…, not the advertised \(advertised.prefix(12))…"
            case .unexpectedFrame(let what): return "unexpected \(what) before the handshake finished"
            case .timedOut: return "the peer did not say HELLO in time"
            case .peerSaidGoodbye(let goodbye): return "the peer closed: \(goodbye.reason)\(goodbye.text.isEmpty ? "" : " (\(goodbye.text))")"
            }
        }
    }

    public enum Action: Equatable, Sendable {
        case send(WireFrame)
        /// Start the HELLO timer; report `timerFired()` when it expires.
        case startTimer
        case cancelTimer
        case setLimits(FrameLimits)
        case established(Session)
        /// Close the connection (after sending what came before).
        case close(Failure)
    }

    /// The protocol states of the handshake.
    private enum State: Equatable, Sendable {
        /// Nothing sent yet.
        case idle
        /// Our HELLO is sent; waiting for theirs.
        case awaitingHello
        /// Both HELLOs checked; the connection belongs to the session layer now.
        case established(Session)
        /// Failed or closed; every further input is ignored.
        case closed
    }

    private var state: State = .idle
    private let ours: WireFrame.Hello
    private let certificateID: String?
    private let advertisedID: String?

    /// - Parameters:
    ///   - ours: the HELLO we send.
    ///   - certificateID: the id the peer's TLS certificate proves (nil on an unencrypted connection).
    ///   - advertisedID: the id DNS-SD advertised for the peer we dialed (nil when we accepted).
    public init(ours: WireFrame.Hello, certificateID: String?, advertisedID: String?) {
        self.ours = ours
        self.certificateID = certificateID
        self.advertisedID = advertisedID
    }

    public var isEstablished: Bool {
        if case .established = state { return true }
        return false
    }

    /// Refuses a frame above the version the handshake settled (`WireFrame.minimumVersion`: a SEAL or a
    /// sealed MESSAGE on a connection below version 4); the caller closes the connection as for any
    /// invalid frame. Before the handshake ends, `received` refuses what is not HELLO.
    public func admit(_ frame: WireFrame) throws(WireError) {
        guard case .established(let session) = state, frame.minimumVersion > session.version else { return }
        let name = if case .message = frame { "sealed MESSAGE" } else { Self.name(of: frame) }
        throw .aboveVersion(frame: name, needs: frame.minimumVersion, connection: session.version)
    }

    /// The connection is up (and TLS done, where used).
    public mutating func start() -> [Action] {
        guard state == .idle else { return [] }
        state = .awaitingHello
        return [.send(.hello(ours)), .startTimer]
    }

    /// A frame arrived. After `.established`, frames belong to the session layer: do not pass them here.
    public mutating func received(_ frame: WireFrame) -> [Action] {
        guard state == .awaitingHello else {
            if case .established = state, case .hello = frame { return fail(.unexpectedFrame("second HELLO")) }
            return []
        }
        switch frame {
        case .hello(let theirs):
            let low = max(ours.minimumVersion, theirs.minimumVersion)
            let high = min(ours.maximumVersion, theirs.maximumVersion)
            guard low <= high else {
                return fail(.noCommonVersion(ours: ours.minimumVersion...ours.maximumVersion, theirs: theirs.minimumVersion...theirs.maximumVersion))
            }
            if let certificateID, certificateID != theirs.peerID {
                return fail(.idDiffersFromCertificate(hello: theirs.peerID, certificate: certificateID))
            }
            if let advertisedID, advertisedID != theirs.peerID {
                return fail(.idDiffersFromAdvertised(hello: theirs.peerID, advertised: advertisedID))
            }
            let limits = FrameLimits(maximumPayload: min(ours.maximumPayload, theirs.maximumPayload))
            let session = Session(version: high, peerID: theirs.peerID, name: theirs.name, capabilities: theirs.capabilities, limits: limits)
            state = .established(session)
            return [.cancelTimer, .setLimits(limits), .established(session)]
        case .goodbye(let goodbye):
            state = .closed
            return [.cancelTimer, .close(.peerSaidGoodbye(goodbye))]
        case .ignored:
            return []
        default:
            return fail(.unexpectedFrame(Self.name(of: frame)))
        }
    }

    public mutating func timerFired() -> [Action] {
        guard state == .awaitingHello else { return [] }
        return fail(.timedOut)
    }

    private mutating func fail(_ failure: Failure) -> [Action] {
        state = .closed
        let reason: WireFrame.Goodbye.Reason
        switch failure {
        case .timedOut: reason = .timeout
        case .noCommonVersion, .idDiffersFromCertificate, .idDiffersFromAdvertised: reason = .refused
        case .unexpectedFrame, .peerSaidGoodbye: reason = .protocolError
        }
        let text = String(failure.description.utf8.prefix(WireFrame.maximumReasonBytes)) ?? ""
        return [.cancelTimer, .send(.goodbye(.init(reason: reason, text: text))), .close(failure)]
    }

    public static func name(of frame: WireFrame) -> String {
        switch frame {
        case .hello: return "HELLO"
        case .invite: return "INVITE"
        case .inviteReply: return "INVITE_REPLY"
        case .roomMembers: return "ROOM_MEMBERS"
        case .roomLeave: return "ROOM_LEAVE"
        case .historyRequest: return "HISTORY_REQUEST"
        case .syncRequest: return "SYNC_REQUEST"
        case .presence: return "PRESENCE"
        case .roomMeta: return "ROOM_META"
        case .typing: return "TYPING"
        case .topicSubscriptions: return "TOPIC_SUBSCRIPTIONS"
        case .topicMessage: return "TOPIC_MESSAGE"
        case .streamOpen: return "STREAM_OPEN"
        case .streamAccept: return "STREAM_ACCEPT"
        case .streamData: return "STREAM_DATA"
        case .streamCredit: return "STREAM_CREDIT"
        case .streamEnd: return "STREAM_END"
        case .resourceOffer: return "RESOURCE_OFFER"
        case .fileRequest: return "FILE_REQUEST"
        case .resourceAccept: return "RESOURCE_ACCEPT"
        case .resourceChunk: return "RESOURCE_CHUNK"
        case .resourceEnd: return "RESOURCE_END"
        case .resourceDigest: return "RESOURCE_DIGEST"
        case .message: return "MESSAGE"
        case .ack: return "ACK"
        case .seal: return "SEAL"
        case .ping: return "PING"
        case .pong: return "PONG"
        case .goodbye: return "GOODBYE"
        case .ignored(let type): return "frame 0x\(String(type, radix: 16))"
        }
    }
}
