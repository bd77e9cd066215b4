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
private func handshake(
    server: Identity, makeClientHandler: @escaping @Sendable (_ record: @escaping @Sendable (Result<PeerID, PeerPinning.Failure>) -> Void) throws -> ChannelHandler
) async throws -> HandshakeOutcome {
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
        try record.remember(label: "pi@raspberrypi", id: second)  // two hosts, one name: both kept
        var reloaded = try KnownPeers(directory: dir)
        #expect(reloaded.labels == [first: "pi@raspberrypi", second: "pi@raspberrypi"])
        try reloaded.remember(label: "pi@kitchen", id: first)  // renamed: the same key, a new label
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

private func fromHex(_ text: String) -> [UInt8] {
    var out: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        out.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return out
}

private func lengthPrefixed(_ text: String) -> [UInt8] { [UInt8(text.utf8.count)] + Array(text.utf8) }

private func bigEndian(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) } }

/// `"LCHT-JOIN-2" | room (u8 len) | member_id (u8 len) | inviter_id (u8 len) | joined_ms u64` (docs/wire-protocol.md).
private func membershipBytes(room: String, member: String, inviter: String, timestamp: UInt64) -> [UInt8] {
    var out = Array("LCHT-JOIN-2".utf8)
    out += lengthPrefixed(room)
    out += lengthPrefixed(member)
    out += lengthPrefixed(inviter)
    out += bigEndian(timestamp)
    return out
}

/// `"LCHT-LEAVE-2" | room (u8 len) | member_id (u8 len) | left_ms u64` (docs/wire-protocol.md).
private func leaveBytes(room: String, member: String, timestamp: UInt64) -> [UInt8] {
    var out = Array("LCHT-LEAVE-2".utf8)
    out += lengthPrefixed(room)
    out += lengthPrefixed(member)
    out += bigEndian(timestamp)
    return out
}

/// Membership with provenance (wire version 2): the membership proof and the signed leave that
/// scripts/wire-vectors.py made with its fixed key (and verified with openssl) verify with `EnvelopeSigner`,
/// and no longer do once the time or the room changes. This target does not link LanchatWire, so the signing
/// bytes are built here from the documented layout and checked against the script's;
/// `MembershipWireTests.theSigningBytesAreTheScripts` (LanchatWireTests) checks that `Envelope.membershipBytes`
/// and `Envelope.leaveBytes` give those same bytes.
@Suite struct MembershipSignatureTests {
    let key = fromHex("031ee0bf1a3c0062bde8d92cf7422906ed41586bb7d802ff2a2a16b123fa894ffa")
    let member = PeerID("onyecdxw77442ullggcaxjj2cjczrvealz7ce7bu32qp45t5rhja")!
    let inviter = "liv7cafetkqmp7ikrkyn5tpg3ew5x7vemexztpkyp6oliklhtr2a"
    let joined: UInt64 = 1_795_000_000_000
    let left: UInt64 = 1_795_000_060_000
    let membershipSigningBytes = fromHex(
        "4c4348542d4a4f494e2d32036c6162346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a61346c69763763616665746b716d7037696b726b796e3574706733657735783776656d65787a74706b7970366f6c696b6c6874723261000001a1ee565e00"
    )
    let membershipSignature = fromHex("6ac79599543d1be0c6981ab3f6546fc633456c8cc93111d29e70e79e8c08424e7a21345914af5ad0387732d67568f62072148758900ac1531f0675cca6c09432")
    let leaveSigningBytes = fromHex(
        "4c4348542d4c454156452d32036c6162346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a61000001a1ee574860")
    let leaveSignature = fromHex("b2f9f09efd424af39e0872df54b2b81d1233347ce46fbb41fa4f441661f6eea7de0738bc51655e7c8d6699b02bef79aed9fbca9b07b1a12f2a0da35974767ed2")

    @Test func theDocumentedLayoutGivesTheScriptsSigningBytes() {
        #expect(EnvelopeSigner.author(ofKey: key) == member)
        #expect(membershipBytes(room: "lab", member: member.rawValue, inviter: inviter, timestamp: joined) == membershipSigningBytes)
        #expect(leaveBytes(room: "lab", member: member.rawValue, timestamp: left) == leaveSigningBytes)
    }

    @Test func theScriptsMembershipSignatureVerifiesAndNothingElseDoes() {
        let checker = EnvelopeSigner(identity: newIdentity())  // any verifier will do
        #expect(checker.verify(signature: membershipSignature, over: membershipSigningBytes, key: key, author: member))
        // Another time, another room, another (or no) inviter.
        let later = membershipBytes(room: "lab", member: member.rawValue, inviter: inviter, timestamp: joined + 1)
        #expect(!checker.verify(signature: membershipSignature, over: later, key: key, author: member))
        let otherRoom = membershipBytes(room: "lab2", member: member.rawValue, inviter: inviter, timestamp: joined)
        #expect(!checker.verify(signature: membershipSignature, over: otherRoom, key: key, author: member))
        let uninvited = membershipBytes(room: "lab", member: member.rawValue, inviter: "", timestamp: joined)
        #expect(!checker.verify(signature: membershipSignature, over: uninvited, key: key, author: member))
        // Claimed for another member (the inviter): its id is not this key's.
        let claimed = membershipBytes(room: "lab", member: inviter, inviter: "", timestamp: joined)
        #expect(!checker.verify(signature: membershipSignature, over: claimed, key: key, author: PeerID(inviter)!))
        #expect(!checker.verify(signature: membershipSignature, over: membershipSigningBytes, key: key, author: PeerID(inviter)!))
        // Not as a leave either.
        #expect(!checker.verify(signature: membershipSignature, over: leaveSigningBytes, key: key, author: member))
    }

    @Test func theScriptsLeaveSignatureVerifiesAndNothingElseDoes() {
        let checker = EnvelopeSigner(identity: newIdentity())
        #expect(checker.verify(signature: leaveSignature, over: leaveSigningBytes, key: key, author: member))
        let earlier = leaveBytes(room: "lab", member: member.rawValue, timestamp: left - 1)
        #expect(!checker.verify(signature: leaveSignature, over: earlier, key: key, author: member))
        let otherRoom = leaveBytes(room: "lab2", member: member.rawValue, timestamp: left)
        #expect(!checker.verify(signature: leaveSignature, over: otherRoom, key: key, author: member))
        #expect(!checker.verify(signature: leaveSignature, over: leaveSigningBytes, key: key, author: PeerID(inviter)!))
        #expect(!checker.verify(signature: leaveSignature, over: membershipSigningBytes, key: key, author: member))
    }
}
