import LanchatEngine

extension SessionNode {
    /// A live connection as its link knows the peer: what the daemon lists for a peer no discovery
    /// lists (it dialed us, e.g. with `lanchat connect`, from beyond the link or from a host without Avahi).
    public struct LiveLink: Sendable, Equatable {
        public var peer: SessionPeer
        /// The address the connection comes from (or goes to); its port is not the peer's listening port
        /// when the peer dialed us, so none is given.
        public var address: String?
        /// The peer dialed this connection (we did not).
        public var dialedUs: Bool
        public var encrypted: Bool
        public var protocolVersion: Int

        public init(peer: SessionPeer, address: String?, dialedUs: Bool, encrypted: Bool, protocolVersion: Int) {
            self.peer = peer
            self.address = address
            self.dialedUs = dialedUs
            self.encrypted = encrypted
            self.protocolVersion = protocolVersion
        }
    }

    /// The connection that serves each peer now, by peer id.
    public var liveLinks: [LiveLink] {
        links.values.map { link in
            LiveLink(
                peer: link.peer, address: link.remoteAddress, dialedUs: !link.connection.dialed, encrypted: link.connection.encrypted,
                protocolVersion: Int(link.connection.session.version))
        }.sorted { ($0.peer.name, $0.peer.id) < ($1.peer.name, $1.peer.id) }
    }
}
