import LanchatCore
import NIOCore

extension WireFrame {
    static let maximumNameBytes = 200
    static let maximumReasonBytes = 1024
    static let maximumCapabilities = 32
    static let maximumAckIDs = 1024

    static func checkSignature(_ signature: Signature, key field: String) throws(WireError) {
        guard signature.key.count == Signature.keyLength else { throw .invalidValue(field: field) }
        guard signature.bytes.count == Signature.length else { throw .invalidValue(field: "signature") }
    }

    // MARK: Decoding

    /// Parses a frame's payload. Unknown types are an error unless sent with the ignorable flag.
    public static func decode(_ frame: RawFrame) throws(WireError) -> WireFrame {
        guard let type = FrameType(rawValue: frame.type) else {
            if frame.flags & ignorableFlag != 0 { return .ignored(type: frame.type) }
            throw .unknownFrameType(frame.type)
        }
        var reader = FieldReader(buffer: frame.payload)
        let result: WireFrame
        switch type {
        case .hello:
            guard try reader.bytes("magic", count: 4) == Hello.magic else { throw .invalidValue(field: "magic") }
            let minimum = try reader.u16("min_version")
            let maximum = try reader.u16("max_version")
            guard minimum >= 1, minimum <= maximum else { throw .invalidValue(field: "min_version") }
            let payload = try reader.u32("max_payload")
            guard payload >= 4096 else { throw .invalidValue(field: "max_payload") }
            let id = try readPeerID(&reader)
            let name = try reader.text("name", lengthType: UInt8.self, limit: maximumNameBytes)
            let count = try reader.u8("capability_count")
            guard count <= maximumCapabilities else { throw .fieldTooLong(field: "capabilities", length: Int(count), limit: maximumCapabilities) }
            var capabilities: [String] = []
            for _ in 0..<count {
                let raw = try reader.lengthPrefixed("capability", lengthType: UInt8.self, limit: 32)
                guard isToken(raw) else { throw .invalidValue(field: "capability") }
                capabilities.append(String(decoding: raw, as: UTF8.self))
            }
            result = .hello(
                Hello(
                    minimumVersion: minimum, maximumVersion: maximum, maximumPayload: payload,
                    peerID: id, name: name, capabilities: capabilities))
        case .invite:
            let id = WireID(bytes: try reader.bytes("invitation_id", count: 16))!
            let timeout = try reader.u32("timeout_ms")
            let room = try readRoom(&reader)
            let context = try reader.lengthPrefixed("context", lengthType: UInt32.self, limit: Invite.maximumContext)
            result = .invite(Invite(id: id, timeoutMilliseconds: timeout, room: room, context: context))
        case .inviteReply:
            let id = WireID(bytes: try reader.bytes("invitation_id", count: 16))!
            guard let outcome = InviteReply.Outcome(rawValue: try reader.u8("outcome")) else { throw .invalidValue(field: "outcome") }
            let reason = try reader.text("reason", lengthType: UInt16.self, limit: maximumReasonBytes)
            result = .inviteReply(InviteReply(id: id, outcome: outcome, reason: reason))
        case .roomMembers:
            result = try decodeRoomMembers(&reader, flags: frame.flags)
        case .historyRequest:
            let room = try readRoom(&reader)
            let since = try reader.u64("since_ms")
            result = .historyRequest(room: room, sinceMilliseconds: since, limit: frame.flags & limitFollowsFlag != 0 ? try reader.u32("limit") : nil)
        case .syncRequest:
            let room = try readRoom(&reader)
            let since = try reader.u64("since_ms")
            let count = try reader.u16("count")
            guard Int(count) <= SyncRequest.maximumMarks else {
                throw .fieldTooLong(field: "marks", length: Int(count), limit: SyncRequest.maximumMarks)
            }
            var marks: [SyncRequest.Mark] = []
            for _ in 0..<count {
                let author = try reader.lengthPrefixed("author_id", lengthType: UInt8.self, limit: 52)
                guard Self.isPeerID(author) else { throw .invalidValue(field: "author_id") }
                let first = try reader.u64("first")
                let last = try reader.u64("last")
                guard first <= last else { throw .invalidValue(field: "last") }
                marks.append(.init(author: String(decoding: author, as: UTF8.self), first: first, last: last))
            }
            result = .syncRequest(SyncRequest(room: room, sinceMilliseconds: since, marks: marks))
        case .presence:
            guard let availability = Presence.Availability(rawValue: try reader.u8("availability")) else { throw .invalidValue(field: "availability") }
            let text = try reader.text("text", lengthType: UInt8.self, limit: Presence.maximumText)
            let count = try reader.u8("count")
            guard Int(count) <= Presence.maximumHands else { throw .fieldTooLong(field: "rooms", length: Int(count), limit: Presence.maximumHands) }
            var hands: [RoomID] = []
            for _ in 0..<count { hands.append(try readRoom(&reader)) }
            result = .presence(Presence(availability: availability, text: text, hands: hands))
        case .typing:
            result = .typing(try readRoom(&reader))
        case .topicSubscriptions, .topicMessage:
            result = try decodeTopic(type, &reader, flags: frame.flags)
        case .roomMeta:
            result = try decodeRoomMeta(&reader, flags: frame.flags)
        case .roomLeave:
            let room = try readRoom(&reader)
            let text = try reader.text("text", lengthType: UInt16.self, limit: maximumReasonBytes)
            var signed: SignedLeave?
            if frame.flags & proofsFlag != 0 {
                let member = try reader.lengthPrefixed("member_id", lengthType: UInt8.self, limit: 52)
                guard Self.isPeerID(member) else { throw .invalidValue(field: "member_id") }
                let time = try reader.u64("left_ms")
                let signature = Signature(
                    key: try reader.bytes("member_key", count: Signature.keyLength),
                    bytes: try reader.bytes("signature", count: Signature.length))
                signed = SignedLeave(member: String(decoding: member, as: UTF8.self), timestampMilliseconds: time, signature: signature)
            }
            result = .roomLeave(RoomLeave(room: room, text: text, signed: signed))
        case .message:
            let id = WireID(bytes: try reader.bytes("message_id", count: 16))!
            let room = try readRoom(&reader)
            let sequence = try reader.u64("sequence")
            let timestamp = try reader.u64("timestamp_ms")
            guard let kind = Message.Kind(rawValue: try reader.u8("kind")) else { throw .invalidValue(field: "kind") }
            let body = try reader.text("body", lengthType: UInt32.self, limit: Message.maximumBody, multiline: true)
            var signature: Signature?
            var sealed: SealedLeaf?
            switch (frame.flags & signedFlag != 0, frame.flags & sealedFlag != 0) {
            case (true, true): throw .invalidValue(field: "flags")
            case (true, false):
                signature = Signature(
                    key: try reader.bytes("author_key", count: Signature.keyLength),
                    bytes: try reader.bytes("signature", count: Signature.length))
            case (false, true): sealed = try SealedLeaf.read(&reader)
            case (false, false): break
            }
            result = .message(
                Message(
                    id: id, room: room, sequence: sequence, timestampMilliseconds: timestamp, kind: kind,
                    body: body, reliable: frame.flags & reliableFlag != 0, signature: signature,
                    direct: frame.flags & directFlag != 0, sealed: sealed))
        case .seal:
            // Its own decoder reads every field and the end: the frame stands alone.
            return .seal(try Seal.decode(frame))
        case .ack:
            let count = try reader.u16("count")
            guard Int(count) <= maximumAckIDs else { throw .fieldTooLong(field: "message_ids", length: Int(count), limit: maximumAckIDs) }
            var ids: [WireID] = []
            for _ in 0..<count { ids.append(WireID(bytes: try reader.bytes("message_id", count: 16))!) }
            result = .ack(ids)
        case .resourceOffer:
            let id = WireID(bytes: try reader.bytes("resource_id", count: 16))!
            let roomBytes = try reader.lengthPrefixed("room", lengthType: UInt8.self, limit: 32)
            var room: RoomID?
            if !roomBytes.isEmpty {
                guard let parsed = RoomID(String(decoding: roomBytes, as: UTF8.self)), parsed.rawValue.utf8.count == roomBytes.count else {
                    throw .invalidValue(field: "room")
                }
                room = parsed
            }
            guard let kind = ResourceOffer.Kind(rawValue: try reader.u8("kind")) else { throw .invalidValue(field: "kind") }
            let name = try reader.lengthPrefixed("name", lengthType: UInt16.self, limit: ResourceOffer.maximumName)
            let size = try reader.u64("size")
            let digest = try reader.bytes("sha256", count: 32)
            let modified = try reader.u64("mtime_ms")
            let follows = frame.flags & digestFollowsFlag != 0
            guard !follows || digest.allSatisfy({ $0 == 0 }) else { throw .invalidValue(field: "sha256") }
            result = .resourceOffer(
                ResourceOffer(
                    id: id, room: room, kind: kind, name: name, size: size, sha256: digest,
                    modifiedMilliseconds: modified, digestFollows: follows))
        case .resourceDigest:
            let id = WireID(bytes: try reader.bytes("resource_id", count: 16))!
            result = .resourceDigest(id: id, sha256: try reader.bytes("sha256", count: 32))
        case .fileRequest:
            let id = WireID(bytes: try reader.bytes("request_id", count: 16))!
            let room = try readRoom(&reader)
            result = .fileRequest(FileRequest(id: id, room: room, sha256: try reader.bytes("sha256", count: 32)))
        case .streamOpen:
            let id = WireID(bytes: try reader.bytes("stream_id", count: 16))!
            let raw = try reader.lengthPrefixed("name", lengthType: UInt8.self, limit: 64)
            guard let name = StreamName(String(decoding: raw, as: UTF8.self)), name.rawValue.utf8.count == raw.count else {
                throw .invalidValue(field: "name")
            }
            result = .streamOpen(StreamOpen(id: id, name: name, credit: try reader.u32("credit")))
        case .streamAccept:
            let id = WireID(bytes: try reader.bytes("stream_id", count: 16))!
            result = .streamAccept(id: id, credit: try reader.u32("credit"))
        case .streamData:
            let id = WireID(bytes: try reader.bytes("stream_id", count: 16))!
            let length = try reader.u32("data")
            guard Int(length) <= maximumStreamData else {
                throw .fieldTooLong(field: "data", length: Int(length), limit: maximumStreamData)
            }
            guard let data = reader.buffer.readSlice(length: Int(length)) else { throw .truncated(field: "data") }
            result = .streamData(id: id, data: data)
        case .streamCredit:
            let id = WireID(bytes: try reader.bytes("stream_id", count: 16))!
            result = .streamCredit(id: id, bytes: try reader.u32("bytes"))
        case .streamEnd:
            let id = WireID(bytes: try reader.bytes("stream_id", count: 16))!
            guard let status = StreamEnd.Status(rawValue: try reader.u8("status")) else { throw .invalidValue(field: "status") }
            result = .streamEnd(StreamEnd(id: id, status: status, text: try reader.text("text", lengthType: UInt16.self, limit: maximumReasonBytes)))
        case .resourceAccept:
            let id = WireID(bytes: try reader.bytes("resource_id", count: 16))!
            result = .resourceAccept(ResourceAccept(id: id, offset: try reader.u64("offset")))
        case .resourceChunk:
            let id = WireID(bytes: try reader.bytes("resource_id", count: 16))!
            let offset = try reader.u64("offset")
            let length = try reader.u32("data")
            guard Int(length) <= ResourceChunk.maximumData else {
                throw .fieldTooLong(field: "data", length: Int(length), limit: ResourceChunk.maximumData)
            }
            guard let data = reader.buffer.readSlice(length: Int(length)) else { throw .truncated(field: "data") }
            result = .resourceChunk(ResourceChunk(id: id, offset: offset, data: data))
        case .resourceEnd:
            let id = WireID(bytes: try reader.bytes("resource_id", count: 16))!
            guard let status = ResourceEnd.Status(rawValue: try reader.u8("status")) else { throw .invalidValue(field: "status") }
            result = .resourceEnd(ResourceEnd(id: id, status: status, text: try reader.text("text", lengthType: UInt16.self, limit: maximumReasonBytes)))
        case .ping:
            result = .ping(try reader.u64("nonce"))
        case .pong:
            result = .pong(try reader.u64("nonce"))
        case .goodbye:
            guard let reason = Goodbye.Reason(rawValue: try reader.u8("reason")) else { throw .invalidValue(field: "reason") }
            result = .goodbye(Goodbye(reason: reason, text: try reader.text("text", lengthType: UInt16.self, limit: maximumReasonBytes)))
        }
        try reader.end("\(type)")
        return result
    }

    static func readRoom(_ reader: inout FieldReader) throws(WireError) -> RoomID {
        let raw = try reader.lengthPrefixed("room", lengthType: UInt8.self, limit: 32)
        guard let room = RoomID(String(decoding: raw, as: UTF8.self)), room.rawValue.utf8.count == raw.count else {
            throw .invalidValue(field: "room")
        }
        return room
    }

    static func readPeerID(_ reader: inout FieldReader) throws(WireError) -> String {
        try reader.peerID("peer_id")
    }

    static func isPeerID(_ bytes: some Collection<UInt8>) -> Bool {
        // Read in place where the bytes are contiguous (an id's text: every record of a history has one).
        if let valid = bytes.withContiguousStorageIfAvailable({ isPeerID(contiguous: $0) }) { return valid }
        return bytes.count == 52 && bytes.allSatisfy(isPeerIDByte)
    }

    private static func isPeerID(contiguous bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count == 52 else { return false }
        for byte in bytes where !isPeerIDByte(byte) { return false }
        return true
    }

    @inline(__always) private static func isPeerIDByte(_ byte: UInt8) -> Bool { (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x32 && byte <= 0x37) }

    /// An IPv4 or IPv6 address in text, with an optional `%scope`: hex digits, letters, digits, `.:%-_`.
    static func isAddress(_ bytes: [UInt8]) -> Bool {
        !bytes.isEmpty
            && bytes.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x41 && $0 <= 0x5a)
                    || $0 == 0x2e || $0 == 0x3a || $0 == 0x25 || $0 == 0x2d || $0 == 0x5f
            }
    }

    static func isToken(_ bytes: [UInt8]) -> Bool {
        !bytes.isEmpty && bytes.allSatisfy { ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2e || $0 == 0x2d }
    }

    // MARK: Encoding

    /// Builds the frame. Refuses values the decoder would reject, so a peer never receives them.
    public func encode(allocator: ByteBufferAllocator = ByteBufferAllocator()) throws(WireError) -> RawFrame {
        var payload = allocator.buffer(capacity: 64)
        switch self {
        case .hello(let hello):
            guard hello.peerID.utf8.count == 52 else { throw .invalidValue(field: "peer_id") }
            try Self.checkFieldText(hello.name, "name", limit: Self.maximumNameBytes)
            guard hello.capabilities.count <= Self.maximumCapabilities,
                hello.capabilities.allSatisfy({ $0.utf8.count <= 32 && Self.isToken(Array($0.utf8)) })
            else {
                throw .invalidValue(field: "capability")
            }
            payload.writeBytes(Hello.magic)
            payload.writeInteger(hello.minimumVersion)
            payload.writeInteger(hello.maximumVersion)
            payload.writeInteger(hello.maximumPayload)
            payload.writeLengthPrefixed(Array(hello.peerID.utf8), as: UInt8.self)
            payload.writeLengthPrefixed(Array(hello.name.utf8), as: UInt8.self)
            payload.writeInteger(UInt8(hello.capabilities.count))
            for capability in hello.capabilities { payload.writeLengthPrefixed(Array(capability.utf8), as: UInt8.self) }
            return RawFrame(type: FrameType.hello.rawValue, payload: payload)
        case .invite(let invite):
            guard invite.context.count <= Invite.maximumContext else {
                throw .fieldTooLong(field: "context", length: invite.context.count, limit: Invite.maximumContext)
            }
            payload.writeBytes(invite.id.bytes)
            payload.writeInteger(invite.timeoutMilliseconds)
            payload.writeLengthPrefixed(Array(invite.room.rawValue.utf8), as: UInt8.self)
            payload.writeLengthPrefixed(invite.context, as: UInt32.self)
            return RawFrame(type: FrameType.invite.rawValue, payload: payload)
        case .inviteReply(let reply):
            try Self.checkFieldText(reply.reason, "reason", limit: Self.maximumReasonBytes)
            payload.writeBytes(reply.id.bytes)
            payload.writeInteger(reply.outcome.rawValue)
            payload.writeLengthPrefixed(Array(reply.reason.utf8), as: UInt16.self)
            return RawFrame(type: FrameType.inviteReply.rawValue, payload: payload)
        case .roomMembers(let update):
            return try Self.encodeRoomMembers(update, into: &payload)
        case .historyRequest(let room, let since, let limit):
            payload.writeLengthPrefixed(Array(room.rawValue.utf8), as: UInt8.self)
            payload.writeInteger(since)
            if let limit { payload.writeInteger(limit) }
            return RawFrame(type: FrameType.historyRequest.rawValue, flags: limit != nil ? Self.limitFollowsFlag : 0, payload: payload)
        case .syncRequest(let request):
            guard request.marks.count <= SyncRequest.maximumMarks else {
                throw .fieldTooLong(field: "marks", length: request.marks.count, limit: SyncRequest.maximumMarks)
            }
            payload.writeLengthPrefixed(Array(request.room.rawValue.utf8), as: UInt8.self)
            payload.writeInteger(request.sinceMilliseconds)
            payload.writeInteger(UInt16(request.marks.count))
            for mark in request.marks {
                guard Self.isPeerID(Array(mark.author.utf8)) else { throw .invalidValue(field: "author_id") }
                guard mark.first <= mark.last else { throw .invalidValue(field: "last") }
                payload.writeLengthPrefixed(Array(mark.author.utf8), as: UInt8.self)
                payload.writeInteger(mark.first)
                payload.writeInteger(mark.last)
            }
            return RawFrame(type: FrameType.syncRequest.rawValue, payload: payload)
        case .presence(let presence):
            try Self.checkFieldText(presence.text, "text", limit: Presence.maximumText)
            guard presence.hands.count <= Presence.maximumHands else {
                throw .fieldTooLong(field: "rooms", length: presence.hands.count, limit: Presence.maximumHands)
            }
            payload.writeInteger(presence.availability.rawValue)
            payload.writeLengthPrefixed(Array(presence.text.utf8), as: UInt8.self)
            payload.writeInteger(UInt8(presence.hands.count))
            for room in presence.hands { payload.writeLengthPrefixed(Array(room.rawValue.utf8), as: UInt8.self) }
            return RawFrame(type: FrameType.presence.rawValue, flags: Self.ignorableFlag, payload: payload)
        case .typing(let room):
            payload.writeLengthPrefixed(Array(room.rawValue.utf8), as: UInt8.self)
            return RawFrame(type: FrameType.typing.rawValue, flags: Self.ignorableFlag, payload: payload)
        case .roomMeta(let meta):
            return try Self.encodeRoomMeta(meta, into: &payload)
        case .topicSubscriptions, .topicMessage:
            return try Self.encodeTopic(self, into: &payload)
        case .roomLeave(let leave):
            try Self.checkFieldText(leave.text, "text", limit: Self.maximumReasonBytes)
            payload.writeLengthPrefixed(Array(leave.room.rawValue.utf8), as: UInt8.self)
            payload.writeLengthPrefixed(Array(leave.text.utf8), as: UInt16.self)
            guard let signed = leave.signed else { return RawFrame(type: FrameType.roomLeave.rawValue, payload: payload) }
            guard Self.isPeerID(Array(signed.member.utf8)) else { throw .invalidValue(field: "member_id") }
            try Self.checkSignature(signed.signature, key: "member_key")
            payload.writeLengthPrefixed(Array(signed.member.utf8), as: UInt8.self)
            payload.writeInteger(signed.timestampMilliseconds)
            payload.writeBytes(signed.signature.key)
            payload.writeBytes(signed.signature.bytes)
            return RawFrame(type: FrameType.roomLeave.rawValue, flags: Self.proofsFlag, payload: payload)
        case .message(let message):
            try Self.checkFieldText(message.body, "body", limit: Message.maximumBody)
            payload.writeBytes(message.id.bytes)
            payload.writeLengthPrefixed(Array(message.room.rawValue.utf8), as: UInt8.self)
            payload.writeInteger(message.sequence)
            payload.writeInteger(message.timestampMilliseconds)
            payload.writeInteger(message.kind.rawValue)
            payload.writeLengthPrefixed(Array(message.body.utf8), as: UInt32.self)
            var flags: UInt8 = (message.reliable ? Self.reliableFlag : 0) | (message.direct ? Self.directFlag : 0)
            switch (message.signature, message.sealed) {
            case (.some, .some): throw .invalidValue(field: "flags")
            case (.some(let signature), nil):
                try Self.checkSignature(signature, key: "author_key")
                payload.writeBytes(signature.key)
                payload.writeBytes(signature.bytes)
                flags |= Self.signedFlag
            case (nil, .some(let sealed)):
                try sealed.write(into: &payload)
                flags |= Self.sealedFlag
            case (nil, nil): break
            }
            return RawFrame(type: FrameType.message.rawValue, flags: flags, payload: payload)
        case .seal(let seal):
            return try seal.encode(allocator: allocator)
        case .ack(let ids):
            guard ids.count <= Self.maximumAckIDs else { throw .fieldTooLong(field: "message_ids", length: ids.count, limit: Self.maximumAckIDs) }
            payload.writeInteger(UInt16(ids.count))
            for id in ids { payload.writeBytes(id.bytes) }
            return RawFrame(type: FrameType.ack.rawValue, payload: payload)
        case .resourceOffer(let offer):
            guard offer.name.count <= ResourceOffer.maximumName else {
                throw .fieldTooLong(field: "name", length: offer.name.count, limit: ResourceOffer.maximumName)
            }
            guard offer.sha256.count == 32 else { throw .invalidValue(field: "sha256") }
            payload.writeBytes(offer.id.bytes)
            payload.writeLengthPrefixed(Array((offer.room?.rawValue ?? "").utf8), as: UInt8.self)
            payload.writeInteger(offer.kind.rawValue)
            payload.writeLengthPrefixed(offer.name, as: UInt16.self)
            payload.writeInteger(offer.size)
            payload.writeBytes(offer.sha256)
            payload.writeInteger(offer.modifiedMilliseconds)
            return RawFrame(type: FrameType.resourceOffer.rawValue, flags: offer.digestFollows ? Self.digestFollowsFlag : 0, payload: payload)
        case .resourceDigest(let id, let digest):
            guard digest.count == 32 else { throw .invalidValue(field: "sha256") }
            payload.writeBytes(id.bytes)
            payload.writeBytes(digest)
            return RawFrame(type: FrameType.resourceDigest.rawValue, payload: payload)
        case .fileRequest(let request):
            guard request.sha256.count == 32 else { throw .invalidValue(field: "sha256") }
            payload.writeBytes(request.id.bytes)
            payload.writeLengthPrefixed(Array(request.room.rawValue.utf8), as: UInt8.self)
            payload.writeBytes(request.sha256)
            return RawFrame(type: FrameType.fileRequest.rawValue, flags: Self.ignorableFlag, payload: payload)
        case .streamOpen(let open):
            payload.writeBytes(open.id.bytes)
            payload.writeLengthPrefixed(Array(open.name.rawValue.utf8), as: UInt8.self)
            payload.writeInteger(open.credit)
            return RawFrame(type: FrameType.streamOpen.rawValue, payload: payload)
        case .streamAccept(let id, let credit):
            payload.writeBytes(id.bytes)
            payload.writeInteger(credit)
            return RawFrame(type: FrameType.streamAccept.rawValue, payload: payload)
        case .streamData(let id, let data):
            guard data.readableBytes <= Self.maximumStreamData else {
                throw .fieldTooLong(field: "data", length: data.readableBytes, limit: Self.maximumStreamData)
            }
            payload.writeBytes(id.bytes)
            payload.writeInteger(UInt32(data.readableBytes))
            payload.writeImmutableBuffer(data)
            return RawFrame(type: FrameType.streamData.rawValue, payload: payload)
        case .streamCredit(let id, let bytes):
            payload.writeBytes(id.bytes)
            payload.writeInteger(bytes)
            return RawFrame(type: FrameType.streamCredit.rawValue, payload: payload)
        case .streamEnd(let end):
            try Self.checkFieldText(end.text, "text", limit: Self.maximumReasonBytes)
            payload.writeBytes(end.id.bytes)
            payload.writeInteger(end.status.rawValue)
            payload.writeLengthPrefixed(Array(end.text.utf8), as: UInt16.self)
            return RawFrame(type: FrameType.streamEnd.rawValue, payload: payload)
        case .resourceAccept(let accept):
            payload.writeBytes(accept.id.bytes)
            payload.writeInteger(accept.offset)
            return RawFrame(type: FrameType.resourceAccept.rawValue, payload: payload)
        case .resourceChunk(let chunk):
            guard chunk.data.readableBytes <= ResourceChunk.maximumData else {
                throw .fieldTooLong(field: "data", length: chunk.data.readableBytes, limit: ResourceChunk.maximumData)
            }
            payload.writeBytes(chunk.id.bytes)
            payload.writeInteger(chunk.offset)
            payload.writeInteger(UInt32(chunk.data.readableBytes))
            payload.writeImmutableBuffer(chunk.data)
            return RawFrame(type: FrameType.resourceChunk.rawValue, payload: payload)
        case .resourceEnd(let end):
            try Self.checkFieldText(end.text, "text", limit: Self.maximumReasonBytes)
            payload.writeBytes(end.id.bytes)
            payload.writeInteger(end.status.rawValue)
            payload.writeLengthPrefixed(Array(end.text.utf8), as: UInt16.self)
            return RawFrame(type: FrameType.resourceEnd.rawValue, payload: payload)
        case .ping(let nonce):
            payload.writeInteger(nonce)
            return RawFrame(type: FrameType.ping.rawValue, payload: payload)
        case .pong(let nonce):
            payload.writeInteger(nonce)
            return RawFrame(type: FrameType.pong.rawValue, payload: payload)
        case .goodbye(let goodbye):
            try Self.checkFieldText(goodbye.text, "text", limit: Self.maximumReasonBytes)
            payload.writeInteger(goodbye.reason.rawValue)
            payload.writeLengthPrefixed(Array(goodbye.text.utf8), as: UInt16.self)
            return RawFrame(type: FrameType.goodbye.rawValue, payload: payload)
        case .ignored:
            throw .invalidValue(field: "type")
        }
    }

    /// The frame as bytes on the wire (header included): for tests, vectors and simple writers.
    public func wireBytes() throws(WireError) -> [UInt8] {
        var out = ByteBuffer()
        FrameEncoder().encode(data: try encode(), out: &out)
        return Array(out.readableBytesView)
    }
}
