import FoundationEssentials
import Glibc
import LanchatControl
@testable import LanchatDaemon
import Testing

@Suite struct StaticPeersFileTests {
    private func directory() -> String {
        var template = Array("/tmp/lanchat-static-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    private func names(in directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    @Test func theFileIsWrittenDurablyWithItsContentAndNoTemporaryFileLeft() throws {
        let dir = directory()
        defer { for name in names(in: dir) { unlink(dir + "/" + name) }; rmdir(dir) }
        let path = dir + "/" + StaticPeers.fileName
        let first = [StaticPeers.Entry(host: "bob.lan", port: 7473, id: nil, name: nil, ip: nil)]
        try StaticPeers.save(first, to: path)
        let second = first + [StaticPeers.Entry(host: "10.0.0.2", port: 9000, id: String(repeating: "a", count: 52), name: "carol", ip: "10.0.0.2")]
        try StaticPeers.save(second, to: path)
        let data = try #require(FileManager.default.contents(atPath: path))
        #expect(try JSONDecoder().decode([StaticPeers.Entry].self, from: data) == second)
        #expect(names(in: dir) == [StaticPeers.fileName])
        // DurableFile.replace's fresh file (mode 0600), not one written in place with the umask's mode.
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
    }

    @Test func aFileThatCannotBeWrittenIsAnErrorAndLeavesNothingBehind() {
        let dir = directory()
        defer { rmdir(dir) }
        var caught: ControlError.Code?
        do { try StaticPeers.save([], to: dir + "/missing/" + StaticPeers.fileName) } catch { caught = error.code }
        #expect(caught == .io)
        #expect(names(in: dir).isEmpty)
    }
}
