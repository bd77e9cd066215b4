import LanchatCore
import Testing

/// A peer's id hashes all its bytes with the process's seed, and a wire id its 16 bytes as two words:
/// equal ids hash alike, and ids that differ anywhere hash apart, so that a member cannot pick ids read
/// from the wire that all fall in one slot of the engine's tables.
@Suite struct IdentifierHashingTests {
    static func peer(_ prefix: String, _ rest: Character) -> PeerID {
        PeerID(prefix + String(repeating: rest, count: PeerID.length - prefix.count))!
    }

    @Test func equalPeerIDsHashAlikeAndIDsThatShareAPrefixHashApart() {
        let lower = Self.peer("abcdefghijklmnop", "q")
        let upper = PeerID(lower.rawValue.uppercased())!  // (read case-insensitively: the same id)
        #expect(lower == upper)
        #expect(lower.hashValue == upper.hashValue)
        // 32 ids that share their first 51 characters (what a hostile member could pick): 32 hashes.
        let prefix = String(repeating: "a", count: PeerID.length - 1)
        let alike = "abcdefghijklmnopqrstuvwxyz234567".map { PeerID(prefix + String($0))! }
        #expect(Set(alike.map(\.hashValue)).count == 32)
        var table: [PeerID: Int] = [:]
        for (index, id) in alike.enumerated() { table[id] = index }
        #expect(table.count == 32)
        #expect(table[PeerID(prefix.uppercased() + "Q")!] == 16)
    }

    @Test func wireIDsHashTheirBytes() {
        let bytes: [UInt8] = Array(0..<16)
        let first = WireID(bytes: bytes)!
        let second = WireID(bytes: Array(bytes))!
        #expect(first == second)
        #expect(first.hashValue == second.hashValue)
        var changed = bytes
        changed[15] = 99
        let third = WireID(bytes: changed)!
        #expect(third != first)
        #expect(Set([first, second, third]).count == 2)
        #expect(third.hashValue != first.hashValue)
    }
}
