import Crypto
import FoundationEssentials
import Glibc
import LanchatCore

/// The daemon's long-term identity: a P-256 key (which TLS 1.3 through swift-nio-ssl can present in a
/// certificate) kept in the state directory, and the peer id derived from its public key.
public struct Identity: Sendable {
    /// The key's raw scalar (swift-crypto 3's key types are not `Sendable`; the bytes are).
    private let rawKey: Data
    public let peerID: PeerID

    public static let fileName = "identity.pem"

    public init(privateKey: P256.Signing.PrivateKey) {
        self.rawKey = privateKey.rawRepresentation
        self.peerID = Self.peerID(of: privateKey.publicKey)
    }

    public var privateKey: P256.Signing.PrivateKey {
        // The bytes came from a valid key, so this cannot fail.
        try! P256.Signing.PrivateKey(rawRepresentation: rawKey)
    }

    /// The peer id of a public key: SHA-256 of its SubjectPublicKeyInfo DER, base32.
    public static func peerID(of publicKey: P256.Signing.PublicKey) -> PeerID {
        PeerID(digest: SHA256.hash(data: publicKey.derRepresentation))
    }

    public struct LoadError: Error, Equatable, CustomStringConvertible {
        public enum Code: Equatable, Sendable { case unreadable, insecurePermissions, corrupt, cannotCreate }
        public let code: Code
        public let path: String
        public let detail: String
        public var description: String {
            switch code {
            case .unreadable: return "cannot read identity key \(path): \(detail)"
            case .insecurePermissions: return "identity key \(path) is readable by others (\(detail)); run: chmod 600 \(path)"
            case .corrupt:
                return
                    "identity key \(path) is not a P-256 private key in PEM (\(detail)); it was left as it is: move it away to create a new identity (peers will see a new id)"
            case .cannotCreate: return "cannot create identity key \(path): \(detail)"
            }
        }
    }

    /// Loads the key from `directory`, creating it (mode 0600) on first start.
    ///
    /// A key that exists but cannot be used is never replaced: the id is what peers trust, so the
    /// person must decide.
    public static func loadOrCreate(in directory: String) throws(LoadError) -> Identity {
        let path = directory.hasSuffix("/") ? directory + fileName : directory + "/" + fileName
        var info = stat()
        if lstat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFREG else {
                throw LoadError(code: .unreadable, path: path, detail: "not a regular file")
            }
            guard info.st_mode & 0o077 == 0 else {
                throw LoadError(code: .insecurePermissions, path: path, detail: "mode " + String(info.st_mode & 0o777, radix: 8))
            }
            guard info.st_size < 64 * 1024 else { throw LoadError(code: .corrupt, path: path, detail: "file too large") }
            guard let data = FileManager.default.contents(atPath: path) else {
                throw LoadError(code: .unreadable, path: path, detail: String(cString: strerror(errno)))
            }
            guard let text = String(validating: data, as: UTF8.self) else {
                throw LoadError(code: .corrupt, path: path, detail: "not UTF-8 text")
            }
            do { return Identity(privateKey: try P256.Signing.PrivateKey(pemRepresentation: text)) } catch {
                throw LoadError(code: .corrupt, path: path, detail: "\(error)")
            }
        }
        guard errno == ENOENT else { throw LoadError(code: .unreadable, path: path, detail: String(cString: strerror(errno))) }
        let identity = Identity(privateKey: P256.Signing.PrivateKey())
        try write(identity.privateKey.pemRepresentation, to: path)
        return identity
    }

    /// Writes the key to a temporary file created with mode 0600, syncs it, renames it into place and
    /// syncs the directory (the key is the peer's identity: it must outlive a power loss).
    private static func write(_ pem: String, to path: String) throws(LoadError) {
        do { try DurableFile.replace(path, with: Array(pem.utf8)) } catch {
            throw LoadError(code: .cannotCreate, path: path, detail: error.reason)
        }
    }
}
