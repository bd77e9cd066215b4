@testable import LanchatTransfer
import Testing

@Suite struct SafeFileNameTests {
    static let cases: [(String, [UInt8], String?)] = [
        ("plain", Array("notes.txt".utf8), "notes.txt"),
        ("unicode kept", Array("résumé 2026.pdf".utf8), "résumé 2026.pdf"),
        ("parent traversal", Array("../../etc/passwd".utf8), "passwd"),
        ("absolute path", Array("/abs/path".utf8), "path"),
        ("windows path", Array("C:\\Windows\\evil.exe".utf8), "evil.exe"),
        ("trailing slash", Array("dir/".utf8), "dir"),
        ("newline", Array("a\nb.txt".utf8), "a_b.txt"),
        ("escape sequence", Array("\u{1b}[2Jx.txt".utf8), "_[2Jx.txt"),
        ("NUL inside", [0x61, 0x00, 0x62], "a_b"),
        ("invalid UTF-8", [0xff, 0x41], "_A"),
        ("bidi override", Array("\u{202E}gpj.exe".utf8), "_gpj.exe"),
        ("slash with a combining mark", Array("../\u{301}etc/\u{301}passwd".utf8), "passwd"),
        ("dot with a combining mark", Array(".\u{301}bashrc".utf8), "bashrc"),
        ("hidden file", Array(".bashrc".utf8), "bashrc"),
        ("dots only", Array("...".utf8), nil),
        ("dot dot", Array("..".utf8), nil),
        ("slash only", Array("/".utf8), nil),
        ("empty", [], nil),
        ("spaces and dots", Array(" . .".utf8), nil),
    ]

    @Test(arguments: cases.indices) func hostileNames(_ index: Int) {
        let (label, raw, expected) = Self.cases[index]
        switch SafeFileName.make(from: raw) {
        case .success(let name):
            #expect(name == expected, "\(label)")
            #expect(!name.contains("/") && !name.contains("\\") && !name.hasPrefix(".") && name.utf8.count <= 255)
        case .failure(let refusal):
            #expect(expected == nil, "\(label): refused: \(refusal)")
            #expect(!refusal.description.isEmpty && !refusal.description.contains("\n"))
        }
    }

    @Test func aTenThousandByteNameIsCutKeepingTheExtension() throws {
        let name = try SafeFileName.make(from: Array((String(repeating: "a", count: 10_000) + ".txt").utf8)).get()
        #expect(name.utf8.count == 255 && name.hasSuffix(".txt"))
        let multibyte = try SafeFileName.make(from: Array((String(repeating: "é", count: 300) + ".jpeg").utf8)).get()
        #expect(multibyte.utf8.count <= 255 && multibyte.hasSuffix(".jpeg") && String(validating: Array(multibyte.utf8), as: UTF8.self) != nil)
    }

    @Test func collisionsGetACounter() {
        var taken: Set<String> = ["photo.jpg", "photo (1).jpg", "README"]
        #expect(SafeFileName.unique("photo.jpg", exists: taken.contains) == "photo (2).jpg")
        #expect(SafeFileName.unique("README", exists: taken.contains) == "README (1)")
        #expect(SafeFileName.unique("new.txt", exists: taken.contains) == "new.txt")
        taken.insert("archive.tar.gz")
        #expect(SafeFileName.unique("archive.tar.gz", exists: taken.contains) == "archive.tar (1).gz")
    }

    /// Issue 11, item 8: a 255-byte name received twice hung the file thread (the counter was cut off
    /// again, so every candidate was the taken name).
    @Test(arguments: [String(repeating: "a", count: 251) + ".txt", String(repeating: "漢", count: 85), String(repeating: "b", count: 255)])
    func namesOfTheMaximumLengthStillGetDistinctCandidates(name: String) throws {
        let safe = try SafeFileName.make(from: Array(name.utf8)).get()
        var taken: Set<String> = [safe]
        for expected in 1...30 {
            let next = try #require(SafeFileName.unique(safe, exists: taken.contains))
            #expect(next.utf8.count <= SafeFileName.maximumBytes)
            #expect(next.contains("(\(expected))"))
            #expect(!taken.contains(next) && !next.hasPrefix("."))
            taken.insert(next)
        }
    }

    @Test func uniqueAlwaysEndsEvenIfEveryNameIsTaken() {
        #expect(SafeFileName.unique("photo.jpg", attempts: 50) { _ in true } == nil)
    }

    @Test func aCutNeverLeavesABareExtension() throws {
        // One character of 300 combining marks: no whole character fits beside the extension.
        let name = "x" + String(repeating: "\u{301}", count: 300) + ".bashrc"
        let safe = try SafeFileName.make(from: Array(name.utf8)).get()
        #expect(safe.utf8.count <= 255 && safe.unicodeScalars.first == "x" && safe.hasSuffix(".bashrc"))
        let again = try #require(SafeFileName.unique(safe) { $0 == safe })
        #expect(!again.hasPrefix(".") && again.utf8.count <= 255)
    }

    @Test func randomBytesNeverEscape() {
        var generator = SystemRandomNumberGenerator()
        let pieces: [[UInt8]] = ["/", ".", "\\", "a", "\n", "\u{0}", " ", "\u{301}", "\u{202E}", "é", "\u{FEFF}"].map { Array($0.utf8) }
        for _ in 0..<5000 {
            var raw: [UInt8] = []
            for _ in 0..<Int.random(in: 0...40, using: &generator) {
                raw += Bool.random(using: &generator) ? pieces.randomElement(using: &generator)! : [UInt8.random(in: 0...255, using: &generator)]
            }
            if case .success(let name) = SafeFileName.make(from: raw) {
                let bytes = Array(name.utf8)
                #expect(!bytes.isEmpty && !bytes.contains(0x2F) && !bytes.contains(0x5C) && bytes.first != 0x2E, "\(raw) -> \(bytes)")
                #expect(!bytes.contains { $0 < 0x20 || $0 == 0x7f } && bytes.count <= 255)
            }
        }
    }
}
