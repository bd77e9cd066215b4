import Glibc
import LanchatCore
import LanchatEngine
import LanchatTransport
import LanchatWire
import Logging
import NIOCore

/// The node's connections: dialing a peer, taking over a connection (dialed or accepted) as the peer's
/// link, and handing its frames and its end to the engine.
extension SessionNode {
    /// Dials a peer unless connected; returns the link or why not.
    func dial(_ peer: PeerID) async -> Result<Link, SessionError> {
        // However this ends, the engine hears that the dial did (a redial marked the peer as being dialed).
        defer { if !stopped { perform(engine.dialFinished(peer, at: time())) } }
        if let link = links[peer] { return .success(link) }
        guard !stopped else { return .failure(SessionError(.unreachable, "the node is stopping")) }
        let (plan, problem, actions) = engine.prepareDial(peer)
        perform(actions)
        guard let plan else { return .failure(problem ?? SessionError(.unreachable, "cannot dial")) }
        var seen = Set<String>()
        var lastError = "no address known (not discovered on the network)"
        for candidate in plan.candidates where seen.insert("\(candidate.address) \(candidate.port)").inserted {
            guard !Task.isCancelled, !stopped else { break }
            guard let socketAddress = Self.socketAddress(candidate.address, port: candidate.port) else { continue }
            do {
                let connection = try await connector.dial(socketAddress, expected: peer, theirs: plan.encryption ?? configuration.encryption)
                if let link = adopt(connection) { return .success(link) }
                return .failure(SessionError(.refused, "the connection to \(plan.name ?? peer.short) was refused"))
            } catch {
                lastError = error.description
                if error.description.contains("preferences cannot meet") { break }
            }
        }
        return .failure(SessionError(.unreachable, lastError))
    }

    static func socketAddress(_ text: String, port: Int) -> SocketAddress? {
        let parts = text.split(separator: "%", maxSplits: 1)
        if parts.count == 1 { return try? SocketAddress(ipAddress: text, port: port) }
        var v6 = sockaddr_in6()
        v6.sin6_family = sa_family_t(AF_INET6)
        v6.sin6_port = UInt16(port).bigEndian
        guard inet_pton(AF_INET6, String(parts[0]), &v6.sin6_addr) == 1 else { return nil }
        v6.sin6_scope_id = if_nametoindex(String(parts[1]))
        return SocketAddress(v6, host: String(parts[0]))
    }

    /// Takes over an established connection (dialed or accepted). Returns whether the peer is served
    /// now (by this connection, or by one it duplicates); false if the connection was refused.
    @discardableResult
    public func accepted(_ connection: PeerConnector.Connection) -> Bool {
        if connection.isProbe, !connection.dialed {
            serveProbe(connection)
            return true
        }
        return adopt(connection) != nil
    }

    /// Returns the link that serves the connection's peer now, or nil if the connection was refused.
    func adopt(_ connection: PeerConnector.Connection) -> Link? {
        guard let id = PeerID(connection.session.peerID) else {
            connection.leave(.protocolError, text: "bad peer id")
            return nil
        }
        let peer = SessionPeer(id: id, name: connection.session.name)
        let handle = LinkHandle(nextHandle)
        nextHandle += 1
        let link = Link(handle: handle, connection: connection, peer: peer)
        openLinks[handle] = link
        let (serving, actions) = engine.linkUp(
            handle, peer: peer, dialedByUs: connection.dialed, remoteAddress: link.remoteAddress, authenticated: connection.encrypted,
            version: connection.session.version, at: time())
        if serving != handle {
            // Refused, or a duplicate the existing connection wins over: never attached, so close it here.
            perform(actions)
            openLinks[handle] = nil
            if serving == nil { logger.warning("refused a connection", metadata: ["peer.name": "\(peer.name)", "peer.id": "\(id.short)"]) }
            return serving.flatMap { openLinks[$0] }
        }
        perform(actions)
        // (Not read while the store is behind: `pauseReadingIfBehind`.)
        if readingPaused { setReading(connection) }
        connection.attach { [weak self] event in
            guard let self else { return }
            if self.eventLoop.inEventLoop {
                self.assumeIsolated { $0.handle(event, from: link) }
            } else {
                self.eventLoop.execute { self.assumeIsolated { $0.handle(event, from: link) } }
            }
        }
        return link
    }

    func handle(_ event: PeerLinkEvent, from link: Link) {
        guard !stopped else { return }
        switch event {
        case .frames(let frames):
            if frames.contains(where: { if case .streamOpen = $0 { true } else { false } }) { forgetGoneStreamAcceptors() }
            perform(engine.received(frames, on: link.handle, at: time()))  // (a refused commit is logged: `.storeFailed`)
        case .closed(let reason):
            openLinks[link.handle] = nil
            if links[link.peer.id] === link { links[link.peer.id] = nil }
            perform(engine.linkDown(link.handle, reason: reason, at: time()))
        }
    }
}
