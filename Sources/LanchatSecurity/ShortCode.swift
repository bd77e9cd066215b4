import Crypto
import LanchatCore

/// A code two people read to each other to check they talk to each other's daemons: the same on both
/// sides (it depends on the pair of ids, not their order), eight digits in two groups ("4821-0937").
/// An attacker in the middle would need keys whose pair hashes to the same code: one chance in 10^8 per
/// attempt, and each attempt needs a person to compare.
public enum ShortCode {
    public static func between(_ a: PeerID, _ b: PeerID) -> String {
        let (first, second) = a < b ? (a, b) : (b, a)
        let digest = Array(SHA256.hash(data: Array("lanchat short code v1\n\(first.rawValue)\n\(second.rawValue)".utf8)))
        let number = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 100_000_000
        let digits = String(number)
        let padded = String(repeating: "0", count: 8 - digits.count) + digits
        return padded.prefix(4) + "-" + padded.suffix(4)
    }
}
