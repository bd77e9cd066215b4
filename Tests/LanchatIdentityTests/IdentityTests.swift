import Foundation
@testable import LanchatIdentity
import Testing

private func temporaryDirectory() -> String {
    let path = NSTemporaryDirectory() + "lanchat-identity-\(UUID().uuidString)"
    try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

@Suite struct IdentityTests {
    @Test func createsAKeyWithMode0600AndLoadsTheSameID() throws {
        let directory = temporaryDirectory()
        let first = try Identity.loadOrCreate(in: directory)
        let path = directory + "/" + Identity.fileName
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        let second = try Identity.loadOrCreate(in: directory)
        #expect(first.peerID == second.peerID)
        #expect(Identity.peerID(of: second.privateKey.publicKey) == first.peerID)
    }

    @Test func refusesAKeyOthersCanRead() throws {
        let directory = temporaryDirectory()
        _ = try Identity.loadOrCreate(in: directory)
        chmod(directory + "/" + Identity.fileName, 0o644)
        #expect(throws: Identity.LoadError.self) { try Identity.loadOrCreate(in: directory) }
        do { _ = try Identity.loadOrCreate(in: directory) } catch { #expect(error.code == .insecurePermissions) }
    }

    @Test(arguments: [Data(), Data("not a key".utf8), Data([0xff, 0xfe, 0x00]), Data("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".utf8)])
    func refusesAndKeepsACorruptKey(contents: Data) throws {
        let directory = temporaryDirectory()
        let path = directory + "/" + Identity.fileName
        _ = FileManager.default.createFile(atPath: path, contents: contents, attributes: [.posixPermissions: 0o600])
        do {
            _ = try Identity.loadOrCreate(in: directory)
            Issue.record("accepted a corrupt key")
        } catch {
            #expect(error.code == .corrupt)
        }
        // Never replaced behind the person's back.
        #expect(FileManager.default.contents(atPath: path) == contents)
    }

    @Test func refusesADirectoryInPlaceOfTheKey() throws {
        let directory = temporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory + "/" + Identity.fileName, withIntermediateDirectories: false)
        #expect(throws: Identity.LoadError.self) { try Identity.loadOrCreate(in: directory) }
    }
}
