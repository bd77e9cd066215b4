import Crypto
import FoundationEssentials
import LanchatCore
import LanchatIdentity
import NIOSSL
import SwiftASN1
import X509

/// A self-signed certificate for the identity key, made fresh at each start.
///
/// Peers do not trust it through a chain: they pin the SHA-256 of its SubjectPublicKeyInfo, which is
/// the peer id advertised in DNS-SD. So its dates and serial carry no meaning; the key does.
public struct IdentityCertificate: Sendable {
    public let certificate: NIOSSLCertificate
    public let privateKey: NIOSSLPrivateKey

    public struct Error: Swift.Error, CustomStringConvertible {
        public let description: String
    }

    public init(identity: Identity, now: Date = .now) throws(Error) {
        let key = identity.privateKey
        do {
            let name = try DistinguishedName { CommonName(identity.peerID.rawValue) }
            let certificate = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: Certificate.PublicKey(key.publicKey),
                notValidBefore: now.addingTimeInterval(-3600),
                notValidAfter: now.addingTimeInterval(10 * 365 * 86400),
                issuer: name,
                subject: name,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.notCertificateAuthority)
                    Critical(KeyUsage(digitalSignature: true))
                    try ExtendedKeyUsage([.serverAuth, .clientAuth])
                },
                issuerPrivateKey: Certificate.PrivateKey(key))
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            self.certificate = try NIOSSLCertificate(bytes: serializer.serializedBytes, format: .der)
            self.privateKey = try NIOSSLPrivateKey(bytes: Array(key.derRepresentation), format: .der)
        } catch {
            throw Error(description: "cannot make the TLS certificate for the identity key: \(error)")
        }
    }
}

/// Checks a peer's certificate against the id it should have.
public enum PeerPinning {
    public enum Failure: Swift.Error, Equatable, Sendable, CustomStringConvertible {
        case noCertificate
        case unreadableCertificate
        /// The peer presented another key than the one behind the id we expected.
        case idMismatch(expected: PeerID, presented: PeerID)

        public var description: String {
            switch self {
            case .noCertificate: return "the peer presented no certificate"
            case .unreadableCertificate: return "the peer's certificate could not be read"
            case .idMismatch(let expected, let presented):
                return "the peer presented key \(presented.short)…, not the advertised \(expected.short)…: refusing (someone else under its name?)"
            }
        }
    }

    /// The peer id of a certificate: SHA-256 of its SubjectPublicKeyInfo.
    public static func peerID(of certificate: NIOSSLCertificate) throws(Failure) -> PeerID {
        do {
            let spki = try certificate.extractPublicKey().toSPKIBytes()
            return PeerID(digest: SHA256.hash(data: spki))
        } catch {
            throw .unreadableCertificate
        }
    }

    /// The id of the leaf certificate, checked against `expected` when given.
    public static func verify(_ chain: [NIOSSLCertificate], expected: PeerID?) -> Result<PeerID, Failure> {
        guard let leaf = chain.first else { return .failure(.noCertificate) }
        let presented: PeerID
        do { presented = try peerID(of: leaf) } catch { return .failure(error) }
        if let expected, expected != presented { return .failure(.idMismatch(expected: expected, presented: presented)) }
        return .success(presented)
    }
}
