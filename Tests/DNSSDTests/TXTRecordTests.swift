@testable import DNSSD
import Testing

@Suite struct TXTRecordTests {
    @Test func roundTripsPairsAndBooleans() throws {
        var record = TXTRecord(["v": "1", "name": "Ünïcødé host"])
        record["flag"] = .some(nil)
        record["empty"] = []
        let decoded = TXTRecord(decoding: try record.encode())
        #expect(decoded.entries == record.entries)
        #expect(decoded.string("name") == "Ünïcødé host")
        #expect(decoded["flag"] == .some(nil))
        #expect(decoded.string("empty") == "")
        #expect(decoded["missing"] == nil)
        #expect(decoded.problems.isEmpty)
    }

    @Test func keysAreCaseInsensitive() {
        let decoded = TXTRecord(decoding: [5] + Array("ID=ab".utf8))
        #expect(decoded.string("id") == "ab")
        #expect(decoded.string("Id") == "ab")
    }

    @Test func firstOfRepeatedKeysWins() {
        let bytes: [UInt8] = [3] + Array("a=1".utf8) + [3] + Array("A=2".utf8)
        let decoded = TXTRecord(decoding: bytes)
        #expect(decoded.string("a") == "1")
        #expect(decoded.problems == ["repeated key a ignored"])
    }

    @Test func emptyRecordAndPlaceholderDecodeEmpty() {
        #expect(TXTRecord(decoding: []).entries.isEmpty)
        #expect(TXTRecord(decoding: [0]).entries.isEmpty)
        #expect(TXTRecord(decoding: [0]).problems.isEmpty)
    }

    @Test func truncatedItemIsDroppedAndNamed() {
        let bytes: [UInt8] = [3] + Array("a=1".utf8) + [200] + Array("b=2".utf8)
        let decoded = TXTRecord(decoding: bytes)
        #expect(decoded.string("a") == "1")
        #expect(!decoded.contains("b"))
        #expect(decoded.problems.count == 1)
    }

    @Test(arguments: [
        [2, 0x3d, 0x31] as [UInt8],  // "=1": empty key
        [3, 0x01, 0x3d, 0x31] as [UInt8],  // control character in key
        [3, 0xff, 0x3d, 0x31] as [UInt8],  // non-ASCII key
    ])
    func invalidKeysAreDropped(bytes: [UInt8]) {
        let decoded = TXTRecord(decoding: bytes)
        #expect(decoded.entries.isEmpty)
        #expect(!decoded.problems.isEmpty)
    }

    @Test func invalidUTF8ValueIsNotAString() {
        let decoded = TXTRecord(decoding: [4] + Array("n=".utf8) + [0xff, 0xfe])
        #expect(decoded.contains("n"))
        #expect(decoded.string("n") == nil)
        #expect(decoded["n"] == .some([0xff, 0xfe]))
    }

    @Test func maximumItemEncodesAndOneMoreByteIsRefused() throws {
        var record = TXTRecord()
        record["k"] = Array(repeating: UInt8(ascii: "x"), count: 253)  // "k=" + 253 = 255
        let bytes = try record.encode()
        #expect(bytes.count == 256)
        #expect(TXTRecord(decoding: bytes).entries == record.entries)
        record["k"] = Array(repeating: UInt8(ascii: "x"), count: 254)
        #expect(throws: TXTRecord.EncodingError.itemTooLong(key: "k", length: 256)) { try record.encode() }
    }

    @Test func recordBudgetIsEnforced() {
        var record = TXTRecord()
        for index in 0..<6 { record["k\(index)"] = Array(repeating: UInt8(ascii: "x"), count: 250) }
        #expect(throws: TXTRecord.EncodingError.self) { try record.encode() }
    }

    @Test func invalidKeysAreRefusedWhenEncoding() {
        var record = TXTRecord()
        record["a=b"] = []
        #expect(throws: TXTRecord.EncodingError.invalidKey("a=b")) { try record.encode() }
    }

    /// Random bytes never crash the decoder, and whatever it keeps re-encodes.
    @Test func randomBytesDecodeSafely() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let count = Int.random(in: 0...600, using: &generator)
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let decoded = TXTRecord(decoding: bytes)
            if let again = try? decoded.encode() {
                #expect(TXTRecord(decoding: again).entries == decoded.entries)
            }
        }
    }
}
