package import LanchatCore
package import LanchatEngine
package import LanchatIdentity
package import LanchatSecurity
package import LanchatSession
package import LanchatTransport
package import Logging
package import NIOPosix
internal import LanchatWire
internal import Synchronization

/// lanchatd's way into the library (issue 31: the library is what the daemon runs, not a second path).
/// `package` access: lanchatd is in this package and sees it, a program that depends on LanchatKit does
/// not. The daemon starts a `Session` with what it decides itself (its HELLO name and wire versions, the
/// ports it tries, its event loops, its store, the node's configuration, its log) and reads every event of
/// the node; the TLS set-up, the peer port, the node and its run are the library's, the same as
/// `Session.start`'s.
extension Session {
    /// What the host of a session decides.
    package struct Host {
        /// The name in HELLO (already made safe to show).
        package var name: String
        /// The highest wire version offered in HELLO.
        package var maximumWireVersion: UInt16
        package var encryption: EncryptionPreference
        /// The peer ports tried, in order (0: any free one); the first that opens is the session's.
        package var ports: [Int]
        /// The event loops the session runs on (nil: a thread of its own, shut down when nothing holds the
        /// session any more). A host's loops are its own to shut down.
        package var loops: MultiThreadedEventLoopGroup?
        package var store: any SessionStore
        package var knownPeers: KnownPeers
        /// Applied to the node's configuration after the library's own settings.
        package var configure: @Sendable (inout SessionNode.Configuration) -> Void
        package var logger: Logger
        /// Every event of the node, in order (nil: the library's streams get them). With it, the session's
        /// streams stay empty.
        package var events: (@Sendable (SessionEvent) -> Void)?
        /// The node runs from `start` on (false: from `startRunning`, once the host's other parts are up).
        package var startsRunning = true

        package init(name: String, encryption: EncryptionPreference, store: any SessionStore, knownPeers: KnownPeers) {
            self.name = name
            maximumWireVersion = WireFrame.versions.upperBound
            self.encryption = encryption
            ports = [0]
            self.store = store
            self.knownPeers = knownPeers
            configure = { _ in }
            logger = Logger(label: "lanchatkit", factory: { _ in SwiftLogNoOpLogHandler() })
        }
    }

    /// Starts a session for a host (lanchatd) with `identity`: its peer port open, its node running.
    package static func start(identity: PeerIdentity, host: sending Host) async throws(LanchatError) -> Session {
        try await launch(identity: identity, group: RoomID("session")!, serviceType: defaultServiceType, host: host, scratch: nil)
    }

    /// How `start` begins the message of a peer port that did not open, and of a history that did not load
    /// (a host says them in its own words).
    package static let listenFailure = "cannot listen on peer port "
    package static let historyFailure = "cannot load the session's history: "

    /// Runs the node of a session started with `Host.startsRunning` false (nothing if it runs, or closed).
    package func startRunning() {
        if !isOpen, !closingStarted { begin() }
    }

    /// The node the session runs.
    package var sessionNode: SessionNode { node }
    /// How the session dials and answers peers.
    package var peerConnector: PeerConnector { connector }
    /// Where the node dials peers (what discovery resolves goes here).
    package var peerDirectory: PeerDirectory { directory }
}

extension PeerIdentity {
    /// A host's identity (lanchatd's, kept in its state directory) and the name it shows.
    package init(host identity: Identity, displayName: String) {
        self.init(identity: identity, displayName: displayName)
    }
}

/// Whether to log a refused connection now, and how many were not logged since the last line: at most one
/// line a second (a flood of connections must not become a flood of log lines).
final class LogThrottle: Sendable {
    private let logged = Mutex<(last: ContinuousClock.Instant?, suppressed: Int)>((nil, 0))

    func mayLog() -> Int? {
        logged.withLock { state in
            let now = ContinuousClock.now
            if let last = state.last, now - last < .seconds(1) {
                state.suppressed += 1
                return nil
            }
            defer { state = (now, 0) }
            return state.suppressed
        }
    }
}
