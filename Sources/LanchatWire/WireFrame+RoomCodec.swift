import LanchatCore
import NIOCore

/// The codec of the frames that say who is in a room and what it holds: ROOM_MEMBERS (with membership
/// proofs, version 3) and ROOM_META (entries, or a digest). `WireFrame+Codec.swift` calls these from its one
/// switch per direction.
extension WireFrame {
    static func checkFieldText(_ text: String, _ field: String, limit: Int) throws(WireError) {
        guard text.utf8.count <= limit else { throw .fieldTooLong(field: field, length: text.utf8.count, limit: limit) }
    }

    static func decodeRoomMembers(_ reader: inout FieldReader, flags: UInt8) throws(WireError) -> WireFrame {
        let room = try readRoom(&reader)
        let count = try reader.u16("count")
        guard Int(count) <= RoomMembers.maximumMembers else {
            throw .fieldTooLong(field: "members", length: Int(count), limit: RoomMembers.maximumMembers)
        }
        var members: [Member] = []
        for _ in 0..<count {
            let id = try readPeerID(&reader)
            let name = try reader.text("name", lengthType: UInt8.self, limit: maximumNameBytes)
            let port = try reader.u16("port")
            let addressCount = try reader.u8("address_count")
            guard Int(addressCount) <= RoomMembers.maximumAddresses else {
                throw .fieldTooLong(field: "addresses", length: Int(addressCount), limit: RoomMembers.maximumAddresses)
            }
            var addresses: [String] = []
            for _ in 0..<addressCount {
                let raw = try reader.lengthPrefixed("address", lengthType: UInt8.self, limit: 64)
                guard isAddress(raw) else { throw .invalidValue(field: "address") }
                addresses.append(String(decoding: raw, as: UTF8.self))
            }
            var proof: MembershipProof?
            if flags & proofsFlag != 0 {
                switch try reader.u8("has_proof") {
                case 0: break
                case 1:
                    let inviter = try reader.lengthPrefixed("inviter_id", lengthType: UInt8.self, limit: 52)
                    guard inviter.isEmpty || Self.isPeerID(inviter) else { throw .invalidValue(field: "inviter_id") }
                    let time = try reader.u64("joined_ms")
                    let signature = Signature(
                        key: try reader.bytes("member_key", count: Signature.keyLength),
                        bytes: try reader.bytes("signature", count: Signature.length))
                    proof = MembershipProof(inviter: String(decoding: inviter, as: UTF8.self), timestampMilliseconds: time, signature: signature)
                default: throw .invalidValue(field: "has_proof")
                }
            }
            members.append(Member(peerID: id, name: name, port: port, addresses: addresses, proof: proof))
        }
        return .roomMembers(RoomMembers(room: room, members: members))
    }

    static func decodeRoomMeta(_ reader: inout FieldReader, flags: UInt8) throws(WireError) -> WireFrame {
        let room = try readRoom(&reader)
        let count = try reader.u8("count")
        guard Int(count) <= RoomMeta.maximumEntries else { throw .fieldTooLong(field: "entries", length: Int(count), limit: RoomMeta.maximumEntries) }
        var entries: [MetaEntry] = []
        for _ in 0..<count {
            let key = try reader.text("key", lengthType: UInt8.self, limit: MetaEntry.maximumKey)
            guard MetaEntry.isKey(key) else { throw .invalidValue(field: "key") }
            let deleted = try reader.u8("deleted")
            guard deleted <= 1 else { throw .invalidValue(field: "deleted") }
            let value = try reader.text("value", lengthType: UInt16.self, limit: MetaEntry.maximumValue, multiline: true)
            let version = try reader.u64("version")
            let time = try reader.u64("timestamp_ms")
            let author = try reader.lengthPrefixed("author_id", lengthType: UInt8.self, limit: 52)
            guard Self.isPeerID(author) else { throw .invalidValue(field: "author_id") }
            let signature = Signature(
                key: try reader.bytes("author_key", count: Signature.keyLength),
                bytes: try reader.bytes("signature", count: Signature.length))
            entries.append(
                MetaEntry(
                    key: key, value: value, deleted: deleted == 1, version: version, timestampMilliseconds: time,
                    author: String(decoding: author, as: UTF8.self), signature: signature))
        }
        var digest: UInt64?
        if flags & digestFlag != 0 {
            guard entries.isEmpty else { throw .invalidValue(field: "count") }
            digest = try reader.u64("digest")
        }
        return .roomMeta(RoomMeta(room: room, entries: entries, digest: digest))
    }

    static func encodeRoomMembers(_ update: RoomMembers, into payload: inout ByteBuffer) throws(WireError) -> RawFrame {
        guard update.members.count <= RoomMembers.maximumMembers else {
            throw .fieldTooLong(field: "members", length: update.members.count, limit: RoomMembers.maximumMembers)
        }
        payload.writeLengthPrefixed(Array(update.room.rawValue.utf8), as: UInt8.self)
        payload.writeInteger(UInt16(update.members.count))
        let withProofs = update.members.contains { $0.proof != nil }
        for member in update.members {
            guard Self.isPeerID(Array(member.peerID.utf8)) else { throw .invalidValue(field: "peer_id") }
            try Self.checkFieldText(member.name, "name", limit: Self.maximumNameBytes)
            guard member.addresses.count <= RoomMembers.maximumAddresses,
                member.addresses.allSatisfy({ $0.utf8.count <= 64 && Self.isAddress(Array($0.utf8)) })
            else {
                throw .invalidValue(field: "address")
            }
            payload.writeLengthPrefixed(Array(member.peerID.utf8), as: UInt8.self)
            payload.writeLengthPrefixed(Array(member.name.utf8), as: UInt8.self)
            payload.writeInteger(member.port)
            payload.writeInteger(UInt8(member.addresses.count))
            for address in member.addresses { payload.writeLengthPrefixed(Array(address.utf8), as: UInt8.self) }
            guard withProofs else { continue }
            guard let proof = member.proof else {
                payload.writeInteger(UInt8(0))
                continue
            }
            guard proof.inviter.isEmpty || Self.isPeerID(Array(proof.inviter.utf8)) else { throw .invalidValue(field: "inviter_id") }
            try Self.checkSignature(proof.signature, key: "member_key")
            payload.writeInteger(UInt8(1))
            payload.writeLengthPrefixed(Array(proof.inviter.utf8), as: UInt8.self)
            payload.writeInteger(proof.timestampMilliseconds)
            payload.writeBytes(proof.signature.key)
            payload.writeBytes(proof.signature.bytes)
        }
        return RawFrame(type: FrameType.roomMembers.rawValue, flags: withProofs ? Self.proofsFlag : 0, payload: payload)
    }

    static func encodeRoomMeta(_ meta: RoomMeta, into payload: inout ByteBuffer) throws(WireError) -> RawFrame {
        guard meta.entries.count <= RoomMeta.maximumEntries else {
            throw .fieldTooLong(field: "entries", length: meta.entries.count, limit: RoomMeta.maximumEntries)
        }
        payload.writeLengthPrefixed(Array(meta.room.rawValue.utf8), as: UInt8.self)
        payload.writeInteger(UInt8(meta.entries.count))
        for entry in meta.entries {
            guard MetaEntry.isKey(entry.key) else { throw .invalidValue(field: "key") }
            try Self.checkFieldText(entry.value, "value", limit: MetaEntry.maximumValue)
            guard !entry.value.unicodeScalars.contains(where: { ($0.value < 0x20 || $0.value == 0x7f) && $0 != "\n" && $0 != "\t" }) else {
                throw .invalidText(field: "value")
            }
            guard Self.isPeerID(Array(entry.author.utf8)) else { throw .invalidValue(field: "author_id") }
            try Self.checkSignature(entry.signature, key: "author_key")
            payload.writeLengthPrefixed(Array(entry.key.utf8), as: UInt8.self)
            payload.writeInteger(UInt8(entry.deleted ? 1 : 0))
            payload.writeLengthPrefixed(Array(entry.value.utf8), as: UInt16.self)
            payload.writeInteger(entry.version)
            payload.writeInteger(entry.timestampMilliseconds)
            payload.writeLengthPrefixed(Array(entry.author.utf8), as: UInt8.self)
            payload.writeBytes(entry.signature.key)
            payload.writeBytes(entry.signature.bytes)
        }
        guard let digest = meta.digest else { return RawFrame(type: FrameType.roomMeta.rawValue, flags: Self.ignorableFlag, payload: payload) }
        guard meta.entries.isEmpty else { throw .invalidValue(field: "count") }
        payload.writeInteger(digest)
        return RawFrame(type: FrameType.roomMeta.rawValue, flags: Self.ignorableFlag | Self.digestFlag, payload: payload)
    }
}
