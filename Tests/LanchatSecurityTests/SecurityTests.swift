import Crypto
import Foundation
import LanchatCore
import LanchatIdentity
@testable import LanchatSecurity
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization
import Testing

private func newIdentity() -> Identity { Identity(privateKey: P256.Signing.PrivateKey()) }

/// Completes a promise when the TLS handshake completes, or fails it with the first error.
private final class HandshakeWatcher: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let promise: EventLoopPromise<Void>
    init(_ promise: EventLoopPromise<Void>) { self.promise = promise }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event { promise.succeed() }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        promise.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(ChannelError.alreadyClosed)
    }
}

private struct HandshakeOutcome {
    var server: Result<Void, Error>
    var client: Result<Void, Error>
    var serverSaw: Result<PeerID, PeerPinning.Failure>?
    var clientSaw: Result<PeerID, PeerPinning.Failure>?
}

/// A real TLS handshake over loopback between `server` and a client built by `makeClientHandler`.
private func handshake(server: Identity, makeClientHandler: @escaping @Sendable (_ record: @escaping @Sendable (Result<PeerID, PeerPinning.Failure>) -> Void) throws -> ChannelHandler) async throws -> HandshakeOutcome {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let serverTLS = try PeerTLS(certificate: IdentityCertificate(identity: server))
    let serverDone = group.next().makePromise(of: Void.self)
    let clientDone = group.next().makePromise(of: Void.self)
    let serverSaw = Mutex<Result<PeerID, PeerPinning.Failure>?>(nil)
    let clientSaw = Mutex<Result<PeerID, PeerPinning.Failure>?>(nil)
    let listener = try await ServerBootstrap(group: group)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(serverTLS.serverHandler { result in serverSaw.withLock { $0 = result } })
                try channel.pipeline.syncOperations.addHandler(HandshakeWatcher(serverDone))
            }
        }
        .bind(host: "127.0.0.1", port: 0).get()
    let client = try await ClientBootstrap(group: group)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(makeClientHandler { result in clientSaw.withLock { $0 = result } })
                try channel.pipeline.syncOperations.addHandler(HandshakeWatcher(clientDone))
            }
        }
        .connect(to: listener.localAddress!).get()
    func settle(_ future: EventLoopFuture<Void>) async -> Result<Void, Error> {
        do { try await future.get(); return .success(()) } catch { return .failure(error) }
    }
    let clientResult = await settle(clientDone.futureResult)
    if case .failure = clientResult { try? await client.close() }
    let serverResult = await settle(serverDone.futureResult)
    try? await client.close()
    try? await listener.close()
    try await group.shutdownGracefully()
    return HandshakeOutcome(server: serverResult, client: clientResult, serverSaw: serverSaw.withLock { $0 }, clientSaw: clientSaw.withLock { $0 })
}

@Suite struct PeerTLSTests {
    @Test func theCertificateCarriesTheIdentityKey() throws {
        let identity = newIdentity()
        let certificate = try IdentityCertificate(identity: identity)
        #expect(try PeerPinning.peerID(of: certificate.certificate) == identity.peerID)
        #expect(PeerPinning.verify([certificate.certificate], expected: identity.peerID) == .success(identity.peerID))
        #expect(PeerPinning.verify([], expected: nil) == .failure(.noCertificate))
    }

    @Test func handshakeWithTheRightPinLetsBothSidesKnowEachOther() async throws {
        let alice = newIdentity(), bob = newIdentity()
        let bobTLS = try PeerTLS(certificate: IdentityCertificate(identity: bob))
        let outcome = try await handshake(server: alice) { record in try bobTLS.clientHandler(expecting: alice.peerID, verified: record) }
        #expect(throws: Never.self) { try outcome.client.get() }
        #expect(throws: Never.self) { try outcome.server.get() }
        #expect(outcome.clientSaw == .success(alice.peerID))
        #expect(outcome.serverSaw == .success(bob.peerID))
    }

    @Test func aKeyOtherThanTheAdvertisedOneFailsTheHandshake() async throws {
        let impostor = newIdentity(), advertised = newIdentity(), bob = newIdentity()
        let bobTLS = try PeerTLS(certificate: IdentityCertificate(identity: bob))
        let outcome = try await handshake(server: impostor) { record in try bobTLS.clientHandler(expecting: advertised.peerID, verified: record) }
        #expect(throws: (any Error).self) { try outcome.client.get() }
        #expect(outcome.clientSaw == .failure(.idMismatch(expected: advertised.peerID, presented: impostor.peerID)))
    }

    @Test func aCallerWithoutACertificateIsRefused() async throws {
        let alice = newIdentity()
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .none
        let context = try NIOSSLContext(configuration: configuration)
        let outcome = try await handshake(server: alice) { _ in try NIOSSLClientHandler(context: context, serverHostname: nil) }
        #expect(throws: (any Error).self) { try outcome.server.get() }
    }

    @Test func aTLS12OnlyCallerIsRefused() async throws {
        let alice = newIdentity()
        let bob = try IdentityCertificate(identity: newIdentity())
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.maximumTLSVersion = .tlsv12
        configuration.certificateVerification = .none
        configuration.certificateChain = [.certificate(bob.certificate)]
        configuration.privateKey = .privateKey(bob.privateKey)
        let context = try NIOSSLContext(configuration: configuration)
        let outcome = try await handshake(server: alice) { _ in try NIOSSLClientHandler(context: context, serverHostname: nil) }
        #expect(throws: (any Error).self) { try outcome.server.get() }
        #expect(throws: (any Error).self) { try outcome.client.get() }
    }
}

@Suite struct ShortCodeTests {
    @Test func isTheSameOnBothSidesAndDiffersBetweenPairs() {
        let a = PeerID(digest: Array(repeating: 1, count: 32)), b = PeerID(digest: Array(repeating: 2, count: 32))
        let c = PeerID(digest: Array(repeating: 3, count: 32))
        #expect(ShortCode.between(a, b) == ShortCode.between(b, a))
        #expect(ShortCode.between(a, b) != ShortCode.between(a, c))
        #expect(ShortCode.between(a, b).wholeMatch(of: /[0-9]{4}-[0-9]{4}/) != nil)
    }
}

@Suite struct KnownPeersTests {
    func directory() -> String {
        let path = NSTemporaryDirectory() + "lanchat-known-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func keysAreKnownByIdWithTheirNameAsALabelAcrossRestarts() throws {
        let dir = directory()
        let first = PeerID(digest: Array(repeating: 1, count: 32)), second = PeerID(digest: Array(repeating: 2, count: 32))
        var record = try KnownPeers(directory: dir)
        #expect(record.entries.isEmpty)
        try record.remember(label: "pi@raspberrypi", id: first)
        try record.remember(label: "pi@raspberrypi", id: second)   // two hosts, one name: both kept
        var reloaded = try KnownPeers(directory: dir)
        #expect(reloaded.labels == [first: "pi@raspberrypi", second: "pi@raspberrypi"])
        try reloaded.remember(label: "pi@kitchen", id: first)      // renamed: the same key, a new label
        #expect(try KnownPeers(directory: dir).labels == [first: "pi@kitchen", second: "pi@raspberrypi"])
        #expect(try reloaded.forget(label: "pi@raspberrypi") == [second])
        #expect(try KnownPeers(directory: dir).labels == [first: "pi@kitchen"])
        var info = stat()
        #expect(stat(dir + "/known_peers.json", &info) == 0 && info.st_mode & 0o777 == 0o600)
    }

    @Test(arguments: ["", "{", "[{\"label\":1}]", "[{\"label\":\"x\",\"id\":\"../../etc\",\"firstSeen\":0}]", "\u{0}\u{1}"])
    func aCorruptRecordIsAnErrorAndIsKept(text: String) throws {
        let dir = directory()
        let path = dir + "/known_peers.json"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: KnownPeers.Error.self) { try KnownPeers(directory: dir) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(text.utf8))
    }
}
