import Foundation
import LanchatCore
@testable import LanchatWire
import NIOCore
import NIOTestUtils
import Testing

func hex(_ bytes: [UInt8]) -> String { bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }

func bytes(fromHex text: String) -> [UInt8] {
    var out: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        out.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return out
}

/// Feeds `input` to a fresh decoder in chunks of the given sizes; returns the frames, or the error.
func decodeStream(_ input: [UInt8], chunks: [Int]? = nil, limits: FrameLimits = .standard) -> Result<[WireFrame], WireError> {
    var decoder = FrameDecoder(limits: limits)
    var buffer = ByteBuffer()
    var frames: [WireFrame] = []
    var offset = 0
    let sizes = chunks ?? [input.count]
    do {
        for size in sizes where offset < input.count {
            let end = min(input.count, offset + size)
            buffer.writeBytes(input[offset..<end])
            offset = end
            while let raw = try decoder.decode(buffer: &buffer) { frames.append(try WireFrame.decode(raw)) }
        }
        if offset < input.count { buffer.writeBytes(input[offset...]) }
        while let raw = try decoder.decodeLast(buffer: &buffer, seenEOF: true) { frames.append(try WireFrame.decode(raw)) }
        return .success(frames)
    } catch let error as WireError {
        return .failure(error)
    } catch {
        Issue.record("unexpected error type \(error)")
        return .success([])
    }
}

@Suite struct WireVectorTests {
    @Test(arguments: vectors.map(\.name))
    func encodesAndDecodesTheVector(name: String) throws {
        let vector = vectors.first { $0.name == name }!
        #expect(hex(try vector.frame.wireBytes()) == vector.hex)
        #expect(decodeStream(bytes(fromHex: vector.hex)) == .success([vector.frame]))
    }

    @Test func theSpecificationListsEveryVector() throws {
        let spec = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../docs/wire-protocol.md")
        let text = try String(contentsOf: spec, encoding: .utf8)
        for vector in vectors { #expect(text.contains(vector.hex), "docs/wire-protocol.md lacks the \(vector.name) vector") }
    }

    /// Bytes after a frame's last field are refused, and the error names the frame (a name made only for
    /// the error, not at every frame decoded).
    @Test func bytesAfterAFramesFieldsAreRefusedByItsName() {
        #expect(throws: WireError.trailingBytes(frame: "ping", count: 1)) {
            try WireFrame.decode(RawFrame(type: 0x20, payload: ByteBuffer(bytes: [0, 0, 0, 0, 0, 0, 0, 42, 7])))
        }
        #expect(throws: WireError.trailingBytes(frame: "goodbye", count: 2)) {
            try WireFrame.decode(RawFrame(type: 0x2F, payload: ByteBuffer(bytes: [0, 0, 0, 9, 9])))
        }
        #expect((try? WireFrame.decode(RawFrame(type: 0x20, payload: ByteBuffer(bytes: [0, 0, 0, 0, 0, 0, 0, 42])))) == .ping(42))
    }
}

@Suite struct FrameDecoderTests {
    @Test func dripFedThroughNIOsVerifier() throws {
        let pairs: [(ByteBuffer, [RawFrame])] = try vectors.map { vector in
            let raw = try vector.frame.encode()
            return (ByteBuffer(bytes: bytes(fromHex: vector.hex)), [raw])
        }
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs) {
            FrameDecoder(limits: .standard)
        }
    }

    @Test func refusesAnOversizedFrameFromItsLengthAlone() {
        var decoder = FrameDecoder(limits: .beforeHello)
        var buffer = ByteBuffer(bytes: [0x00, 0x10, 0x00, 0x00])  // 1 MiB announced, nothing sent yet
        #expect(throws: WireError.frameTooLarge(length: 0x0010_0000, limit: 4098)) { try decoder.decode(buffer: &buffer) }
    }

    @Test func acceptsExactlyTheLimit() throws {
        var decoder = FrameDecoder(limits: FrameLimits(maximumPayload: 4096))
        var buffer = ByteBuffer(bytes: [0x00, 0x00, 0x10, 0x02, 0x7e, 0x80] + Array(repeating: 0, count: 4096))
        #expect(try decoder.decode(buffer: &buffer)?.payload.readableBytes == 4096)
        buffer = ByteBuffer(bytes: [0x00, 0x00, 0x10, 0x03, 0x7e, 0x80])
        #expect(throws: WireError.self) { try decoder.decode(buffer: &buffer) }
    }

    @Test func neverConsumesAPartialFrame() throws {
        let full = try WireFrame.ping(42).wireBytes()
        for cut in 0..<full.count {
            var decoder = FrameDecoder(limits: .standard)
            var buffer = ByteBuffer(bytes: full[..<cut])
            #expect(try decoder.decode(buffer: &buffer) == nil)
            #expect(buffer.readableBytes == cut)
            if cut > 0 {
                #expect(throws: WireError.truncatedFrame(bufferedBytes: cut)) { try decoder.decodeLast(buffer: &buffer, seenEOF: true) }
            }
        }
    }

    @Test func limitsAreCappedAtTheAbsoluteMaximum() {
        #expect(FrameLimits(maximumPayload: .max).maximumPayload == FrameLimits.absoluteMaximumPayload)
    }
}

@Suite struct WireFrameTests {
    static func randomFrame(_ generator: inout some RandomNumberGenerator) -> WireFrame {
        let text = String((0..<Int.random(in: 0...40, using: &generator)).map { _ in "aé\n😀z".randomElement(using: &generator)! })
        let rooms = ["lab", "a", "room-1", String(repeating: "Z", count: 32)]
        switch Int.random(in: 0..<19, using: &generator) {
        case 0: return .ping(UInt64.random(in: 0...UInt64.max, using: &generator))
        case 1: return .pong(UInt64.random(in: 0...UInt64.max, using: &generator))
        case 2:
            return .hello(
                .init(
                    maximumPayload: UInt32.random(in: 4096...(1 << 24), using: &generator), peerID: String(repeating: "q", count: 52),
                    name: text.replacingOccurrences(of: "\n", with: ""), capabilities: ["chat", "v1.x"]))
        case 3:
            return .message(
                .init(
                    id: .random(), room: RoomID(rooms.randomElement(using: &generator)!)!, sequence: .random(in: 0...UInt64.max, using: &generator),
                    timestampMilliseconds: .random(in: 0...UInt64.max, using: &generator), kind: .system, body: text, reliable: Bool.random(using: &generator)))
        case 4: return .invite(.init(id: .random(), timeoutMilliseconds: .random(in: 0...UInt32.max, using: &generator), room: lab, context: Array(text.utf8)))
        case 5: return .inviteReply(.init(id: .random(), outcome: .expired, reason: text.replacingOccurrences(of: "\n", with: "")))
        case 6: return .ack((0..<Int.random(in: 0...5, using: &generator)).map { _ in .random() })
        case 7:
            return .roomMembers(
                .init(
                    room: lab,
                    members: (0..<Int.random(in: 0...4, using: &generator)).map { index in
                        .init(
                            peerID: String(repeating: "b", count: 52), name: text.replacingOccurrences(of: "\n", with: "") + "\(index)",
                            port: .random(in: 0...UInt16.max, using: &generator), addresses: Array(["198.18.0.1", "fe80::1%lan0", "::1"].prefix(index)),
                            proof: Bool.random(using: &generator) ? vectorMembershipProof : nil)
                    }))
        case 9:
            return .resourceOffer(
                .init(
                    id: .random(), room: Bool.random(using: &generator) ? nil : lab, kind: .file,
                    name: Array(text.utf8) + [0xff, 0x2f, 0x00], size: .random(in: 0...UInt64.max, using: &generator),
                    sha256: (0..<32).map { _ in .random(in: 0...255, using: &generator) }, modifiedMilliseconds: 7))
        case 10: return .resourceAccept(.init(id: .random(), offset: .random(in: 0...UInt64.max, using: &generator)))
        case 11:
            return .resourceChunk(
                .init(
                    id: .random(), offset: .random(in: 0...UInt64.max, using: &generator),
                    data: ByteBuffer(bytes: (0..<Int.random(in: 0...3000, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) })))
        case 12: return .resourceEnd(.init(id: .random(), status: .cancelled, text: text.replacingOccurrences(of: "\n", with: "")))
        case 13:
            return .streamOpen(
                .init(
                    id: .random(), name: StreamName(["a", "backup.tar", "x_y-z", String(repeating: "n", count: 64)].randomElement(using: &generator)!)!,
                    credit: .random(in: 0...UInt32.max, using: &generator)))
        case 14: return .streamAccept(id: .random(), credit: .random(in: 0...UInt32.max, using: &generator))
        case 15:
            return .streamData(
                id: .random(), data: ByteBuffer(bytes: (0..<Int.random(in: 0...3000, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }))
        case 16: return .streamCredit(id: .random(), bytes: .random(in: 0...UInt32.max, using: &generator))
        case 17:
            return .streamEnd(
                .init(id: .random(), status: [.finished, .refused, .aborted].randomElement(using: &generator)!, text: text.replacingOccurrences(of: "\n", with: "")))
        case 8:
            return .roomLeave(
                .init(
                    room: RoomID(rooms.randomElement(using: &generator)!)!, text: text.replacingOccurrences(of: "\n", with: ""),
                    signed: Bool.random(using: &generator) ? vectorSignedLeave : nil))
        default: return .goodbye(.init(reason: .timeout, text: text.replacingOccurrences(of: "\n", with: "")))
        }
    }

    /// Random frames, concatenated and split at random points, decode to the same frames.
    @Test func randomFramesSplitAtRandomPointsRoundTrip() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let frames = (0..<Int.random(in: 1...8, using: &generator)).map { _ in Self.randomFrame(&generator) }
            let stream = try frames.flatMap { try $0.wireBytes() }
            var chunks: [Int] = []
            var left = stream.count
            while left > 0 {
                let size = Int.random(in: 1...max(1, min(left, 64)), using: &generator)
                chunks.append(size)
                left -= size
            }
            #expect(decodeStream(stream, chunks: chunks) == .success(frames))
        }
    }

    /// A chunk's data goes apart from its frame's head: head then data are exactly the frame's bytes, the
    /// data is the chunk's own buffer, and data over the limit is refused as `encode` refuses it.
    @Test func aSplitFrameIsTheSameBytes() throws {
        var generator = SystemRandomNumberGenerator()
        let id = WireID.random()
        for size in [0, 1, WireFrame.splitDataThreshold - 1, WireFrame.splitDataThreshold, 100_000, WireFrame.ResourceChunk.maximumData] {
            let data = ByteBuffer(bytes: (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) })
            for frame in [WireFrame.resourceChunk(.init(id: id, offset: 12_345, data: data)), .streamData(id: id, data: data)] {
                var head = ByteBuffer(bytes: [9, 9, 9])  // what was written before stays
                let apart = try frame.encodeSplit(into: &head)
                #expect((apart != nil) == (size >= WireFrame.splitDataThreshold))
                if let apart { #expect(apart == data) }
                var whole = head.getSlice(at: 3, length: head.readableBytes - 3)!
                if var apart { whole.writeBuffer(&apart) }
                #expect(Array(whole.readableBytesView) == (try frame.wireBytes()), "size \(size)")
                #expect(head.getBytes(at: 0, length: 3) == [9, 9, 9])
            }
        }
        let over = ByteBuffer(repeating: 0, count: WireFrame.ResourceChunk.maximumData + 1)
        var out = ByteBuffer()
        #expect(throws: WireError.self) { try WireFrame.resourceChunk(.init(id: id, offset: 0, data: over)).encodeSplit(into: &out) }
        #expect(throws: WireError.self) { try WireFrame.streamData(id: id, data: over).encodeSplit(into: &out) }
    }

    @Test func unknownTypesAreFatalUnlessIgnorable() throws {
        #expect(throws: WireError.unknownFrameType(0x7e)) { try WireFrame.decode(RawFrame(type: 0x7e, payload: ByteBuffer())) }
        #expect(try WireFrame.decode(RawFrame(type: 0x7e, flags: 0x80, payload: ByteBuffer(bytes: [1, 2]))) == .ignored(type: 0x7e))
    }

    @Test(arguments: ["", "../x", "a b", "a/b", String(repeating: "r", count: 33), "ünï"])
    func invalidRoomIDs(text: String) {
        #expect(RoomID(text) == nil)
    }

    @Test func encodingRefusesWhatDecodingWouldReject() {
        #expect(throws: WireError.self) { try WireFrame.hello(.init(peerID: "short", name: "x", capabilities: [])).encode() }
        #expect(throws: WireError.self) { try WireFrame.hello(.init(peerID: String(repeating: "a", count: 52), name: "x", capabilities: ["Bad Token"])).encode() }
        #expect(throws: WireError.self) {
            try WireFrame.message(
                .init(id: ascending, room: lab, sequence: 0, timestampMilliseconds: 0, kind: .text, body: String(repeating: "x", count: 70_000), reliable: true)
            ).encode()
        }
        #expect(throws: WireError.self) { try WireFrame.ack((0..<1025).map { _ in ascending }).encode() }
    }

    /// Every prefix of every vector's payload is a truncation error naming a field, never a crash.
    @Test func everyTruncationIsNamed() throws {
        for vector in vectors {
            let raw = try vector.frame.encode()
            for cut in 0..<raw.payload.readableBytes {
                let truncated = RawFrame(type: raw.type, flags: raw.flags, payload: raw.payload.getSlice(at: raw.payload.readerIndex, length: cut)!)
                #expect(throws: WireError.self) { try WireFrame.decode(truncated) }
            }
        }
    }
}

/// Membership with provenance (version 2): ROOM_MEMBERS and ROOM_LEAVE with flag 0x02, and the bytes members sign.
@Suite struct MembershipWireTests {
    static let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567")

    /// Page member `index` (0-31): its own peer id, and a proof when `proof` is set (even ones with an inviter).
    static func member(_ index: Int, proof: Bool) -> WireFrame.Member {
        .init(
            peerID: String(repeating: alphabet[index], count: 52), name: "member\(index)", port: UInt16(7000 + index),
            addresses: Array(["198.18.0.1", "fe80::1%lan0"].prefix(index % 3)),
            proof: proof
                ? WireFrame.MembershipProof(
                    inviter: index % 4 == 0 ? vectorInviter : "", timestampMilliseconds: index == 2 ? .max : UInt64(index),
                    signature: vectorMembershipProof.signature) : nil)
    }

    /// The payload of a vector frame (its bytes after the 6-byte header).
    static func payload(of name: String) -> [UInt8] {
        Array(bytes(fromHex: vectors.first { $0.name == name }!.hex).dropFirst(RawFrame.headerLength))
    }

    @Test func theSigningBytesAreTheScripts() {
        #expect(hex(Envelope.membershipBytes(room: lab, member: vectorAuthor, inviter: vectorInviter, timestamp: vectorJoined)) == vectorMembershipBytes)
        #expect(hex(Envelope.leaveBytes(room: lab, member: vectorAuthor, timestamp: vectorLeft)) == vectorLeaveBytes)
        // No inviter: an empty length prefix.
        var expected: [UInt8] = Array("LCHT-JOIN-2".utf8)
        expected += [3] + Array("lab".utf8)
        expected += [52] + Array(vectorAuthor.utf8)
        expected += [0] + bytes(fromHex: "000001a1ee565e00")
        #expect(Envelope.membershipBytes(room: lab, member: vectorAuthor, inviter: "", timestamp: vectorJoined) == expected)
    }

    /// A page of 32 (what a member sends at most per frame), every other member with a proof, round-trips;
    /// each member costs one `has_proof` byte more, and each proof 106 bytes plus its inviter.
    @Test func aPageMixingMembersWithAndWithoutProofsRoundTrips() throws {
        let members = (0..<32).map { Self.member($0, proof: $0 % 2 == 0) }
        let frame = WireFrame.roomMembers(.init(room: lab, members: members))
        let raw = try frame.encode()
        #expect(raw.flags == WireFrame.proofsFlag)
        #expect(try WireFrame.decode(raw) == frame)
        #expect(decodeStream(try frame.wireBytes()) == .success([frame]))
        let plain = try WireFrame.roomMembers(.init(room: lab, members: (0..<32).map { Self.member($0, proof: false) })).encode()
        #expect(plain.flags == 0)
        let proofBytes = members.compactMap(\.proof).reduce(0) { $0 + 106 + $1.inviter.utf8.count }
        #expect(raw.payload.readableBytes == plain.payload.readableBytes + members.count + proofBytes)
        // A page whose only proof is its last member's: every member still carries `has_proof`.
        let last = WireFrame.roomMembers(.init(room: lab, members: (0..<3).map { Self.member($0, proof: $0 == 2) }))
        #expect(try last.encode().flags == WireFrame.proofsFlag)
        #expect(decodeStream(try last.wireBytes()) == .success([last]))
    }

    @Test func withoutProofsTheFlagStaysClearAndTheLayoutIsVersion1s() throws {
        let v1 = vectors.first { $0.name == "roomMembers" }!
        #expect(try v1.frame.encode().flags == 0)
        #expect(hex(try v1.frame.wireBytes()) == v1.hex)
        #expect(try WireFrame.roomMembers(.init(room: lab, members: [])).encode().flags == 0)
        #expect(try WireFrame.roomMembers(.init(room: lab, members: (0..<32).map { Self.member($0, proof: false) })).encode().flags == 0)
        #expect(try WireFrame.roomLeave(.init(room: lab, text: "bye")).encode().flags == 0)
        // With the flag, `has_proof` 0 after each member: the same members, no proofs.
        let flagged = RawFrame(type: 0x04, flags: WireFrame.proofsFlag, payload: ByteBuffer(bytes: Self.payload(of: "roomMembers") + [0]))
        #expect(try WireFrame.decode(flagged) == v1.frame)
    }

    @Test func aHasProofOtherThan0Or1IsRefused() {
        for value: UInt8 in [2, 0x80, 0xff] {
            let frame = RawFrame(type: 0x04, flags: WireFrame.proofsFlag, payload: ByteBuffer(bytes: Self.payload(of: "roomMembers") + [value]))
            #expect(throws: WireError.invalidValue(field: "has_proof")) { try WireFrame.decode(frame) }
        }
        // The flag without the byte.
        let missing = RawFrame(type: 0x04, flags: WireFrame.proofsFlag, payload: ByteBuffer(bytes: Self.payload(of: "roomMembers")))
        #expect(throws: WireError.truncated(field: "has_proof")) { try WireFrame.decode(missing) }
    }

    @Test func aTruncatedProofIsRefusedNamingItsField() throws {
        let raw = try WireFrame.roomMembers(.init(room: lab, members: [Self.member(0, proof: true)])).encode()
        let full = raw.payload.readableBytes
        // Bytes cut from the end (signature 64, member_key 33, joined_ms 8, inviter_id 1 + 52), and the field that then ends early.
        let cuts: [(Int, String)] = [
            (1, "signature"), (64, "signature"), (65, "member_key"), (97, "member_key"), (98, "joined_ms"),
            (106, "inviter_id"), (158, "inviter_id"),
        ]
        for (cut, field) in cuts {
            let truncated = RawFrame(type: raw.type, flags: raw.flags, payload: raw.payload.getSlice(at: raw.payload.readerIndex, length: full - cut)!)
            #expect(throws: WireError.truncated(field: field)) { try WireFrame.decode(truncated) }
        }
        // The signed leave likewise.
        let leave = try vectors.first { $0.name == "roomLeaveSigned" }!.frame.encode()
        let shortLeave = RawFrame(
            type: leave.type, flags: leave.flags,
            payload: leave.payload.getSlice(at: leave.payload.readerIndex, length: leave.payload.readableBytes - 1)!)
        #expect(throws: WireError.truncated(field: "signature")) { try WireFrame.decode(shortLeave) }
        // A proof with a byte too many is refused too.
        let long = RawFrame(type: raw.type, flags: raw.flags, payload: ByteBuffer(bytes: Array(raw.payload.readableBytesView) + [0]))
        #expect(throws: WireError.self) { try WireFrame.decode(long) }
    }

    @Test func idsAndSignaturesOfTheWrongShapeAreRefusedBothWays() {
        let short = WireFrame.MembershipProof(inviter: "bob", timestampMilliseconds: 1, signature: vectorMembershipProof.signature)
        #expect(throws: WireError.invalidValue(field: "inviter_id")) {
            try WireFrame.roomMembers(.init(room: lab, members: [.init(peerID: vectorAuthor, name: "a", proof: short)])).encode()
        }
        let badSignature = WireFrame.MembershipProof(
            inviter: "", timestampMilliseconds: 1,
            signature: Signature(key: vectorSignature.key, bytes: Array(vectorSignature.bytes.dropLast())))
        #expect(throws: WireError.invalidValue(field: "signature")) {
            try WireFrame.roomMembers(.init(room: lab, members: [.init(peerID: vectorAuthor, name: "a", proof: badSignature)])).encode()
        }
        let notAnID = WireFrame.SignedLeave(member: "bob", timestampMilliseconds: 1, signature: vectorSignedLeave.signature)
        #expect(throws: WireError.invalidValue(field: "member_id")) { try WireFrame.roomLeave(.init(room: lab, text: "", signed: notAnID)).encode() }
        // On the wire: an inviter of 3 bytes, a member id of 3 bytes.
        let zeros = [UInt8](repeating: 0, count: 8 + 33 + 64)
        var membersPayload = Self.payload(of: "roomMembers")
        membersPayload += [1, 3] + Array("bob".utf8)
        membersPayload += zeros
        let badInviter = RawFrame(type: 0x04, flags: WireFrame.proofsFlag, payload: ByteBuffer(bytes: membersPayload))
        #expect(throws: WireError.invalidValue(field: "inviter_id")) { try WireFrame.decode(badInviter) }
        var leavePayload = Self.payload(of: "roomLeave")
        leavePayload += [3] + Array("bob".utf8)
        leavePayload += zeros
        let badMember = RawFrame(type: 0x05, flags: WireFrame.proofsFlag, payload: ByteBuffer(bytes: leavePayload))
        #expect(throws: WireError.invalidValue(field: "member_id")) { try WireFrame.decode(badMember) }
    }
}

@Suite struct HostileCorpusTests {
    static let directory = Bundle.module.resourceURL!.appendingPathComponent("Corpus")
    static let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path))?.sorted() ?? []

    @Test func corpusIsPresent() {
        #expect(Self.files.count >= 30)
    }

    /// `err-*` must be refused with a WireError, `ok-*` must decode, `any-*` must not crash.
    @Test(arguments: files)
    func replay(file: String) throws {
        let input = Array(try Data(contentsOf: Self.directory.appendingPathComponent(file)))
        let result = decodeStream(input, limits: file.contains("over-hello-limit") ? .beforeHello : .standard)
        if file.hasPrefix("err-") {
            guard case .failure = result else {
                Issue.record("\(file) was accepted: \(result)")
                return
            }
        } else if file.hasPrefix("ok-") {
            guard case .success(let frames) = result, !frames.isEmpty else {
                Issue.record("\(file) was refused: \(result)")
                return
            }
        }
        // Same bytes fed one at a time: the same outcome.
        #expect(decodeStream(input, chunks: Array(repeating: 1, count: input.count), limits: file.contains("over-hello-limit") ? .beforeHello : .standard) == result)
    }
}
