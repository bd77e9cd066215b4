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

    @Test func randomBytesNeverEscape() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let raw = (0..<Int.random(in: 0...64, using: &generator)).map { _ in
                ["/", ".", "\\", "a", "\n", "\u{0}"].randomElement(using: &generator)!.utf8.first! &+ (Bool.random(using: &generator) ? 0 : UInt8.random(in: 0...255, using: &generator))
            }
            if case .success(let name) = SafeFileName.make(from: raw) {
                #expect(!name.isEmpty && !name.contains("/") && !name.contains("\\") && !name.hasPrefix(".") && name != "..")
                #expect(!name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7f })
            }
        }
    }
}
