import LanchatCore
@testable import LanchatWire
import NIOCore
import Testing

/// PRESENCE (0x08): the layout, the ignorable flag (an older peer skips it), and what is refused.
@Suite struct PresenceWireTests {
    @Test func aPresenceRoundTripsAndIsIgnorable() throws {
        let presence = WireFrame.Presence(availability: .busy, text: "in a call", hands: [RoomID("lab")!, RoomID("ops")!])
        let raw = try WireFrame.presence(presence).encode()
        #expect(raw.type == 0x08 && raw.flags == WireFrame.ignorableFlag)
        #expect(Array(raw.payload.readableBytesView) == [2, 9] + Array("in a call".utf8) + [2, 3] + Array("lab".utf8) + [3] + Array("ops".utf8))
        #expect(try WireFrame.decode(raw) == .presence(presence))
    }

    @Test func whatIsOutOfRangeIsRefused() throws {
        func decode(_ bytes: [UInt8]) throws(WireError) -> WireFrame {
            try WireFrame.decode(RawFrame(type: 0x08, flags: 0x80, payload: ByteBuffer(bytes: bytes)))
        }
        #expect(throws: WireError.self) { try decode([3, 0, 0]) }                       // no such availability
        #expect(throws: WireError.self) { try decode([0, 129] + [UInt8](repeating: 0x61, count: 129) + [0]) }  // text too long
        #expect(throws: WireError.self) { try decode([0, 1, 0x0a, 0]) }                 // a control character
        #expect(throws: WireError.self) { try decode([0, 0, 65] + [UInt8](repeating: 0, count: 65)) }  // too many rooms
        #expect(throws: WireError.self) { try decode([0, 0, 1, 3, 0x6c, 0x61]) }        // cut short
        #expect(throws: WireError.self) { try WireFrame.presence(.init(text: String(repeating: "a", count: 129))).encode() }
    }
}
