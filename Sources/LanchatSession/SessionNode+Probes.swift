import LanchatCore
import LanchatEngine
import LanchatTransport
import NIOCore

/// Probe connections (`lanchat ping`): answered, never a peer's link.
extension SessionNode {
    /// Probe connections at once: in all, and from one peer id (`lanchat ping` opens one at a time).
    static let maximumProbes = 16
    static let maximumProbesPerPeer = 2
    static let maximumProbesPerAddress = 4
    /// How long a probe connection may stay open (`lanchat ping` sends its PINGs back to back).
    static let probeLifetime: TimeAmount = .seconds(60)

    /// A connection that only measures: its handler answers PING by itself; it is not the peer's link
    /// (the member's link stays as it is), and any frame that reaches the session on it closes it as a
    /// protocol error. Like a link, a plaintext one may not claim an id proved with a key. There are at
    /// most `maximumProbes` (`maximumProbesPerPeer` from one id, `maximumProbesPerAddress` from one
    /// address), each open for `probeLifetime` at most, and they close with the node.
    func serveProbe(_ connection: PeerConnector.Connection) {
        guard !stopped, let id = PeerID(connection.session.peerID) else { return connection.leave(.protocolError, text: "bad peer id") }
        if !connection.encrypted, let refusal = engine.plaintextClaimRefusal(SessionPeer(id: id, name: connection.session.name)) {
            connection.leave(.refused, text: refusal.reason)
            perform([.emit(refusal.event)])
            return
        }
        let address = connection.channel.remoteAddress?.ipAddress ?? "?"
        guard probes.count < Self.maximumProbes, probes.values.count(where: { $0.peer == id }) < Self.maximumProbesPerPeer,
            probes.values.count(where: { $0.address == address }) < Self.maximumProbesPerAddress
        else {
            return connection.leave(.refused, text: "too many probe connections")
        }
        logger.debug("probe connection", metadata: ["peer.id": "\(id.short)"])
        let key = ObjectIdentifier(connection.channel)
        probes[key] = (id, address, connection)
        let lifetime = eventLoop.scheduleTask(in: Self.probeLifetime) { connection.leave(.leaving, text: "a probe lasts at most a minute") }
        connection.attach { [weak self] event in
            switch event {
            case .frames: connection.leave(.protocolError, text: "a probe connection carries only PING")
            case .closed:
                lifetime.cancel()
                guard let self else { return }
                if self.eventLoop.inEventLoop {
                    self.assumeIsolated { $0.probes[key] = nil }
                } else {
                    self.eventLoop.execute { self.assumeIsolated { $0.probes[key] = nil } }
                }
            }
        }
    }
}
