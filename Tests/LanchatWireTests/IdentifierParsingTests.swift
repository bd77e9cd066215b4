import LanchatCore
import Testing

/// Ids read from text (a peer's id from every record and message, a message's id from the store's hex) are
/// checked in place, a byte at a time by comparisons: each byte value gives the verdict of the plain
/// definition (`Hex.value`, the id's alphabet), whatever its place. A byte past ASCII alone is not UTF-8 (a
/// string holds a replacement character for it), so those come in characters of 2, 3 and 4 bytes that
/// together hold every byte a string can (0x80-0xF4).
@Suite struct IdentifierParsingTests {
    /// Characters whose UTF-8 holds every byte from 0x80 to 0xF4: each first byte of 2, 3 and 4, and each
    /// following byte.
    static let wide: [Character] = {
        var scalars = (0x80...0x7FF).map { Unicode.Scalar($0)! }  // first bytes C2-DF, following bytes 80-BF
        scalars += (0xE0...0xEF).map { Unicode.Scalar(($0 - 0xE0) << 12 | ($0 == 0xED ? 0x100 : 0x900))! }  // (ED: below the surrogates)
        scalars += [0x10000, 0x40000, 0x80000, 0xC0000, 0x100000].map { Unicode.Scalar($0)! }
        return scalars.map(Character.init)
    }()

    @Test func theWideCharactersHoldEveryByteAStringCan() {
        let bytes = Set(Self.wide.flatMap { Array(String($0).utf8) })
        #expect(bytes == Set(UInt8(0x80)...UInt8(0xF4)).subtracting([0xC0, 0xC1]))  // (C0 and C1 never begin a character)
    }

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
        // Text past ASCII, of an even count of bytes or not, is not hex.
        for character in Self.wide {
            for text in [String(character), String(character) + "0", "0" + String(character), String(character) + "00"] {
                #expect(Hex.bytes(text) == nil, "\(text.utf8.map { $0 })")
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
        // A character past ASCII in any place, whatever its length, the id's length in bytes kept where it can be.
        for character in Self.wide {
            let width = String(character).utf8.count
            for place in [0, 20, PeerID.length - width] {
                var characters = Array(id)
                characters.replaceSubrange(place..<place + width, with: [character])
                let text = String(characters)
                #expect(text.utf8.count == PeerID.length)
                #expect(PeerID(text) == nil, "\(text.utf8.map { $0 })")
            }
        }
        #expect(PeerID(String(id.dropLast())) == nil)
        #expect(PeerID(id + "a") == nil)
        #expect(PeerID(String(id.dropLast()) + "é") == nil)  // (53 bytes)
        #expect(PeerID(String(id.dropLast(2)) + "é") == nil)  // (52 bytes, not the alphabet)
        #expect(PeerID(id.uppercased())?.rawValue == id)
    }
}
