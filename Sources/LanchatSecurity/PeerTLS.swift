import LanchatCore
import NIOCore
import NIOSSL

/// TLS 1.3 between peers. Both sides present their identity certificate; neither trusts a chain:
/// the connecting side pins the id the peer advertises in DNS-SD, the accepting side learns the
/// caller's id from its certificate (and the session layer then checks it against HELLO and the
/// known-peers record).
public struct PeerTLS: Sendable {
    private let serverContext: NIOSSLContext
    private let clientContext: NIOSSLContext

    public init(certificate: IdentityCertificate) throws {
        var server = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(certificate.certificate)], privateKey: .privateKey(certificate.privateKey))
        server.minimumTLSVersion = .tlsv13
        // Ask for, and require, the caller's certificate; our callback replaces chain verification.
        server.certificateVerification = .noHostnameVerification
        var client = TLSConfiguration.makeClientConfiguration()
        client.minimumTLSVersion = .tlsv13
        client.certificateChain = [.certificate(certificate.certificate)]
        client.privateKey = .privateKey(certificate.privateKey)
        client.certificateVerification = .noHostnameVerification
        // A peer we close answers close_notify at once if it is honest; one that does not read must not
        // hold the connection (and its descriptor) for NIOSSL's default 5 s.
        server.shutdownTimeout = .seconds(1)
        client.shutdownTimeout = .seconds(1)
        serverContext = try NIOSSLContext(configuration: server)
        clientContext = try NIOSSLContext(configuration: client)
    }

    /// For an accepted connection. `verified` is told the caller's id, or why it was refused.
    public func serverHandler(verified: @escaping @Sendable (Result<PeerID, PeerPinning.Failure>) -> Void) -> NIOSSLServerHandler {
        NIOSSLServerHandler(context: serverContext) { chain, promise in
            let result = PeerPinning.verify(chain, expected: nil)
            verified(result)
            promise.succeed(result.isSuccess ? .certificateVerified : .failed)
        }
    }

    /// For a connection we open to a peer advertised as `expected`: any other key fails the handshake.
    /// `nil` (`lanchat connect` to an address, before the person has confirmed the short code): any
    /// well-formed peer certificate; its id is reported to `verified` and HELLO must carry the same id.
    public func clientHandler(expecting expected: PeerID?, verified: @escaping @Sendable (Result<PeerID, PeerPinning.Failure>) -> Void) throws -> NIOSSLClientHandler {
        try NIOSSLClientHandler(context: clientContext, serverHostname: nil) { chain, promise in
            let result = PeerPinning.verify(chain, expected: expected)
            verified(result)
            promise.succeed(result.isSuccess ? .certificateVerified : .failed)
        }
    }
}

extension Result {
    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
