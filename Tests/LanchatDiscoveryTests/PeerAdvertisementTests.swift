import DNSSD
import LanchatCore
@testable import LanchatDiscovery
import Testing

let idA = PeerID(digest: Array(repeating: 1, count: 32))
let idB = PeerID(digest: Array(repeating: 2, count: 32))
let idSelf = PeerID(digest: Array(repeating: 9, count: 32))

@Suite struct PeerIDTests {
    @Test func derivesFiftyTwoBase32Characters() {
        #expect(idA.rawValue.count == 52)
        #expect(PeerID(idA.rawValue) == idA)
        #expect(PeerID(idA.rawValue.uppercased()) == idA)
        #expect(PeerID(idA.rawValue.uppercased())?.rawValue == idA.rawValue)
        let mixed = String(idA.rawValue.prefix(26)).uppercased() + idA.rawValue.dropFirst(26)
        #expect(PeerID(mixed)?.rawValue == idA.rawValue)
        #expect(idA.short.count == 12)
    }

    @Test func knownVector() {
        // RFC 4648 test vector "foobar" -> MZXW6YTBOI (lowercased).
        #expect(PeerID.base32(Array("foobar".utf8)) == "mzxw6ytboi")
    }

    @Test(arguments: [
        "", "abc", String(repeating: "a", count: 51), String(repeating: "a", count: 53), String(repeating: "1", count: 52), String(repeating: "é", count: 52),
        // Only ASCII: the Kelvin sign lowercases to "k", but is not one of the id's letters.
        String(repeating: "\u{212A}", count: 52), String(repeating: "a", count: 51) + "\u{212A}", String(repeating: "a", count: 51) + "8",
        String(repeating: "a", count: 51) + "\0", String(repeating: "a", count: 50) + "é",  // (52 bytes)
    ])
    func rejectsMalformedIDs(text: String) {
        #expect(PeerID(text) == nil)
    }
}

@Suite struct PeerAdvertisementTests {
    @Test func roundTripsThroughTXT() throws {
        let advertisement = PeerAdvertisement(peerID: idA, displayName: "alice@h1", encryption: .optional)
        let txt = TXTRecord(decoding: try advertisement.txtRecord.encode())
        #expect(PeerAdvertisement.parse(txt) == .success(advertisement))
    }

    @Test func missingAndInvalidKeysAreNamed() {
        #expect(PeerAdvertisement.parse(TXTRecord()) == .failure(.missingKey("v")))
        #expect(PeerAdvertisement.parse(TXTRecord(["v": "1"])) == .failure(.missingKey("id")))
        #expect(PeerAdvertisement.parse(TXTRecord(["v": "1", "id": "nope"])) == .failure(.invalidValue(key: "id")))
        #expect(PeerAdvertisement.parse(TXTRecord(["v": "x"])) == .failure(.invalidValue(key: "v")))
        #expect(PeerAdvertisement.parse(TXTRecord(["v": "99999999999"])) == .failure(.invalidValue(key: "v")))
        #expect(PeerAdvertisement.parse(TXTRecord(["v": "2", "id": idA.rawValue])) == .failure(.unsupportedVersion("2")))
        #expect(PeerAdvertisement.parse(TXTRecord(["v": "1", "id": idA.rawValue, "enc": "maybe"])) == .failure(.invalidValue(key: "enc")))
    }

    @Test func missingOrBadNameFallsBackToTheID() throws {
        var txt = TXTRecord(["v": "1", "id": idA.rawValue])
        #expect(try PeerAdvertisement.parse(txt).get().displayName == idA.short)
        txt["name"] = [0xff, 0xfe]
        #expect(try PeerAdvertisement.parse(txt).get().displayName == idA.short)
        txt["name"] = Array("\u{1b}[31m\n".utf8)
        #expect(try PeerAdvertisement.parse(txt).get().displayName == "[31m")
    }

    @Test func namesAreSanitizedAndBounded() {
        #expect(PeerAdvertisement.sanitize("  a\u{0}b\u{7}c\u{202e}d  ") == "abcd")
        let long = String(repeating: "é", count: 300)
        let cut = PeerAdvertisement.sanitize(long)
        #expect(cut.utf8.count == 200)
        #expect(cut.allSatisfy { $0 == "é" })
    }

    @Test func maximalNameStillFitsOneTXTItem() throws {
        let advertisement = PeerAdvertisement(peerID: idA, displayName: String(repeating: "x", count: 1000))
        let bytes = try advertisement.txtRecord.encode()
        #expect(bytes.count < 400)
    }
}
