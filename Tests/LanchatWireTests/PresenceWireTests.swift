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
        #expect(throws: WireError.self) { try decode([3, 0, 0]) }  // no such availability
        #expect(throws: WireError.self) { try decode([0, 129] + [UInt8](repeating: 0x61, count: 129) + [0]) }  // text too long
        #expect(throws: WireError.self) { try decode([0, 1, 0x0a, 0]) }  // a control character
        #expect(throws: WireError.self) { try decode([0, 0, 65] + [UInt8](repeating: 0, count: 65)) }  // too many rooms
        #expect(throws: WireError.self) { try decode([0, 0, 1, 3, 0x6c, 0x61]) }  // cut short
        #expect(throws: WireError.self) { try WireFrame.presence(.init(text: String(repeating: "a", count: 129))).encode() }
    }
}

/// ROOM_META (0x09): the layout, the ignorable flag, what is refused.
@Suite struct RoomMetaWireTests {
    let author = String(repeating: "a", count: 52)
    let signature = Signature(key: [0x02] + [UInt8](repeating: 7, count: 32), bytes: [UInt8](repeating: 9, count: 64))

    @Test func anEntryRoundTripsAndIsIgnorable() throws {
        let entry = WireFrame.MetaEntry(
            key: "topic", value: "release\nplanning", deleted: false, version: 3, timestampMilliseconds: 1_795_000_000_000,
            author: author, signature: signature)
        let gone = WireFrame.MetaEntry(key: "old.key_1", value: "", deleted: true, version: 9, timestampMilliseconds: 5, author: author, signature: signature)
        let frame = WireFrame.roomMeta(.init(room: RoomID("lab")!, entries: [entry, gone]))
        let raw = try frame.encode()
        #expect(raw.type == 0x09 && raw.flags == WireFrame.ignorableFlag)
        let bytes = Array(raw.payload.readableBytesView)
        let expected: [UInt8] = [3, 0x6c, 0x61, 0x62, 2, 5, 0x74, 0x6f, 0x70, 0x69, 0x63, 0]  // lab, 2 entries, "topic", not deleted
        #expect(Array(bytes.prefix(12)) == expected)
        #expect(try WireFrame.decode(raw) == frame)
    }

    @Test func badKeysValuesAndCountsAreRefused() throws {
        func entry(key: String = "k", value: String = "v") -> WireFrame.MetaEntry {
            .init(key: key, value: value, deleted: false, version: 1, timestampMilliseconds: 1, author: author, signature: signature)
        }
        for bad in [
            entry(key: ""), entry(key: "a b"), entry(key: String(repeating: "k", count: 65)), entry(value: String(repeating: "v", count: 4097)),
            entry(value: "\u{1b}[2J"),
        ] {
            #expect(throws: WireError.self) { try WireFrame.roomMeta(.init(room: RoomID("lab")!, entries: [bad])).encode() }
        }
        #expect(throws: WireError.self) { try WireFrame.roomMeta(.init(room: RoomID("lab")!, entries: Array(repeating: entry(), count: 65))).encode() }
        var raw = try WireFrame.roomMeta(.init(room: RoomID("lab")!, entries: [entry()])).encode()
        var bytes = Array(raw.payload.readableBytesView)
        bytes[7] = 2  // deleted must be 0 or 1
        raw.payload = ByteBuffer(bytes: bytes)
        #expect(throws: WireError.self) { try WireFrame.decode(raw) }
        raw.payload = ByteBuffer(bytes: Array(bytes.dropLast()))
        #expect(throws: WireError.self) { try WireFrame.decode(raw) }
    }
}

@Suite struct TypingWireTests {
    @Test func typingIsARoomAndIgnorable() throws {
        let raw = try WireFrame.typing(RoomID("lab")!).encode()
        #expect(raw.type == 0x0A && raw.flags == WireFrame.ignorableFlag && Array(raw.payload.readableBytesView) == [3, 0x6c, 0x61, 0x62])
        #expect(try WireFrame.decode(raw) == .typing(RoomID("lab")!))
        #expect(throws: WireError.self) { try WireFrame.decode(RawFrame(type: 0x0A, flags: 0x80, payload: ByteBuffer(bytes: [3, 0x6c]))) }
    }
}

@Suite struct RoomMetaDigestTests {
    @Test func aDigestHasNoEntriesAndRoundTrips() throws {
        let frame = WireFrame.roomMeta(.init(room: RoomID("lab")!, entries: [], digest: 0x0102_0304_0506_0708))
        let raw = try frame.encode()
        #expect(raw.flags == WireFrame.ignorableFlag | WireFrame.digestFlag)
        #expect(Array(raw.payload.readableBytesView) == [3, 0x6c, 0x61, 0x62, 0, 1, 2, 3, 4, 5, 6, 7, 8])
        #expect(try WireFrame.decode(raw) == frame)
        // Entries with the digest flag are refused.
        let bad = RawFrame(type: 0x09, flags: 0x81, payload: ByteBuffer(bytes: [3, 0x6c, 0x61, 0x62, 1] + [UInt8](repeating: 0, count: 40)))
        #expect(throws: WireError.self) { try WireFrame.decode(bad) }
    }
}

/// Topics (issue 13, item 3): both frames ignorable, their bytes as docs/wire-protocol.md gives them.
@Suite struct TopicWireTests {
    let lab = RoomID("lab")!

    @Test func subscriptionsAreTheRoomAndEveryTopic() throws {
        let raw = try WireFrame.topicSubscriptions(.init(room: lab, topics: ["a", "b.c"])).encode()
        #expect(raw.type == 0x0B && raw.flags == WireFrame.ignorableFlag)
        #expect(Array(raw.payload.readableBytesView) == [3, 0x6c, 0x61, 0x62, 2, 1, 0x61, 3, 0x62, 0x2e, 0x63])
        #expect(try WireFrame.decode(raw) == .topicSubscriptions(.init(room: lab, topics: ["a", "b.c"])))
        #expect(try WireFrame.decode(WireFrame.topicSubscriptions(.init(room: lab, topics: [])).encode()) == .topicSubscriptions(.init(room: lab, topics: [])))
    }

    @Test func aMessageIsItsTopicSequenceAndOneLine() throws {
        let message = WireFrame.TopicMessage(room: lab, topic: "t", sequence: 258, text: "hi", reliable: true)
        let raw = try WireFrame.topicMessage(message).encode()
        #expect(raw.type == 0x0C && raw.flags == WireFrame.ignorableFlag | WireFrame.reliableFlag)
        #expect(Array(raw.payload.readableBytesView) == [3, 0x6c, 0x61, 0x62, 1, 0x74, 0, 0, 0, 0, 0, 0, 1, 2, 0, 2, 0x68, 0x69])
        #expect(try WireFrame.decode(raw) == .topicMessage(message))
        var unreliable = message
        unreliable.reliable = false
        #expect(try WireFrame.topicMessage(unreliable).encode().flags == WireFrame.ignorableFlag)
    }

    @Test func hostileTopicFramesAreRefusedAndOldPeersSkipThem() throws {
        func decode(_ type: UInt8, _ bytes: [UInt8]) throws -> WireFrame { try WireFrame.decode(RawFrame(type: type, flags: 0x80, payload: ByteBuffer(bytes: bytes))) }
        let room: [UInt8] = [3, 0x6c, 0x61, 0x62]
        // 65 topics; a topic with a slash; text with a newline; text over 1024 bytes; trailing bytes.
        #expect(throws: WireError.self) { try decode(0x0B, room + [65] + Array(repeating: [1, 0x61], count: 65).flatMap { $0 }) }
        #expect(throws: WireError.self) { try decode(0x0B, room + [1, 3, 0x61, 0x2f, 0x62]) }
        let head = room + [1, 0x74] + [UInt8](repeating: 0, count: 8)
        #expect(throws: WireError.self) { try decode(0x0C, head + [0, 2, 0x68, 0x0a]) }
        #expect(throws: WireError.self) { try decode(0x0C, head + [4, 1] + [UInt8](repeating: 0x61, count: 1025)) }
        #expect(throws: WireError.self) { try decode(0x0C, head + [0, 1, 0x68, 0]) }
        #expect(throws: WireError.self) {
            try WireFrame.topicMessage(.init(room: lab, topic: "t", sequence: 1, text: String(repeating: "a", count: 1025), reliable: false)).encode()
        }
        // An unknown ignorable type (what 0x0B and 0x0C are to yesterday's build) is skipped.
        #expect(try decode(0x0D, [1, 2, 3]) == .ignored(type: 0x0D))
    }
}
