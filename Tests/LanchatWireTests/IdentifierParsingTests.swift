import LanchatCore
import Testing

/// Ids read from text (a peer's id from every record and message, a message's id from the store's hex) are
/// checked in place, a byte at a time by comparisons: each byte value gives the verdict of the plain
/// definition (`Hex.value`, the id's alphabet), whatever its place.
@Suite struct IdentifierParsingTests {
    /// What a hex digit is worth, as written plainly: 0-9, a-f, A-F.
    static func digit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    @Test func everyByteValueIsAHexDigitOrNotAsThePlainDefinitionSays() {
        for byte in UInt8.min...UInt8.max {
            #expect(Hex.value(byte) == Self.digit(byte))
            for (high, low) in [(byte, UInt8(ascii: "7")), (UInt8(ascii: "c"), byte)] {
                let text = String(decoding: [high, low], as: UTF8.self)
                // (A byte past ASCII alone is not UTF-8: the text then holds a replacement character.)
                let expected: [UInt8]? = Array(text.utf8) == [high, low] ? Self.digit(high).flatMap { h in Self.digit(low).map { [h << 4 | $0] } } : nil
                #expect(Hex.bytes(text) == expected, "\(high) \(low)")
            }
        }
        #expect(Hex.bytes("") == [])
        #expect(Hex.bytes("abc") == nil)
        #expect(Hex.bytes("0g") == nil)
        #expect(Hex.bytes("ABcd09") == [0xab, 0xcd, 0x09])
        let bytes = (0..<64).map { _ in UInt8.random(in: 0...255) }
        #expect(Hex.bytes(Hex.string(bytes)) == bytes)
        #expect(Hex.bytes(Hex.string(bytes).uppercased()) == bytes)
        // A message's id: 32 digits, either case.
        let id = WireID(bytes: Array(0..<16))!
        #expect(WireID(hex: id.description) == id)
        #expect(WireID(hex: id.description.uppercased()) == id)
        #expect(WireID(hex: String(id.description.dropLast())) == nil)
        #expect(WireID(hex: String(id.description.dropLast()) + "x") == nil)
    }

    @Test func everyByteValueInAnyPlaceOfAPeerIDIsTakenOrRefusedByTheAlphabet() {
        let id = String(repeating: "a", count: PeerID.length - 1) + "7"
        #expect(PeerID(id)?.rawValue == id)
        for byte in UInt8.min...UInt8.max {
            for place in [0, 25, PeerID.length - 1] {
                var bytes = Array(id.utf8)
                bytes[place] = byte
                let text = String(decoding: bytes, as: UTF8.self)
                let lower = (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "2")...UInt8(ascii: "7")).contains(byte)
                let capital = (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                if lower || capital {
                    var expected = bytes
                    if capital { expected[place] = byte + 0x20 }
                    #expect(PeerID(text)?.rawValue == String(decoding: expected, as: UTF8.self), "\(byte) at \(place)")
                } else {
                    #expect(PeerID(text) == nil, "\(byte) at \(place)")
                }
            }
        }
        #expect(PeerID(String(id.dropLast())) == nil)
        #expect(PeerID(id + "a") == nil)
        #expect(PeerID(String(id.dropLast()) + "é") == nil)  // (53 bytes)
        #expect(PeerID(String(id.dropLast(2)) + "é") == nil)  // (52 bytes, not the alphabet)
        #expect(PeerID(id.uppercased())?.rawValue == id)
    }
}
