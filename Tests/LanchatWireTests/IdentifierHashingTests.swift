import LanchatCore
import Testing

/// A peer's id hashes its first 16 characters and a wire id its 16 bytes as two words: equal ids hash
/// alike, and ids that share what is hashed are still told apart in a set or a dictionary.
@Suite struct IdentifierHashingTests {
    static func peer(_ prefix: String, _ rest: Character) -> PeerID {
        PeerID(prefix + String(repeating: rest, count: PeerID.length - prefix.count))!
    }

    @Test func equalPeerIDsHashAlikeAndCollidingOnesStayApart() {
        let lower = Self.peer("abcdefghijklmnop", "q")
        let upper = PeerID(lower.rawValue.uppercased())!  // (read case-insensitively: the same id)
        #expect(lower == upper)
        #expect(lower.hashValue == upper.hashValue)
        // Same first 16 characters, different ids: one hash, two entries.
        let other = Self.peer("abcdefghijklmnop", "r")
        #expect(other != lower)
        #expect(other.hashValue == lower.hashValue)
        var table: [PeerID: Int] = [lower: 1, other: 2]
        #expect(table.count == 2)
        #expect(table[upper] == 1)
        #expect(table[other] == 2)
        table[Self.peer("abcdefghijklmnop", "s")] = 3
        #expect(Set(table.keys).count == 3)
        // Ids that differ early hash apart (as a table needs: not all alike).
        let hashes = Set("abcdefgh".map { Self.peer(String($0), "a").hashValue })
        #expect(hashes.count == 8)
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
