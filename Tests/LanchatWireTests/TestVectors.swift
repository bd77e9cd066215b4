import Foundation
import LanchatCore
@testable import LanchatWire
import NIOCore
import NIOTestUtils
import Testing

let ascending = WireID(bytes: Array(0...15))!
let descending = WireID(bytes: Array((0...15).reversed()))!
let lab = RoomID("lab")!

/// Test vectors, computed independently (by a Python script from the byte layout in
/// docs/wire-protocol.md). The same hex appears in the document; a test checks that it does.
let vectors: [(name: String, frame: WireFrame, hex: String)] = [
    ("ping", .ping(0x0102_0304_0506_0708), "0000000a20000102030405060708"),
    ("pong", .pong(0x0102_0304_0506_0708), "0000000a21000102030405060708"),
    (
        "hello", .hello(.init(peerID: "liv7cafetkqmp7ikrkyn5tpg3ew5x7vemexztpkyp6oliklhtr2a", name: "alice@h1", capabilities: ["chat"])),
        "0000005201004c4348540001000100100000346c69763763616665746b716d7037696b726b796e3574706733657735783776656d65787a74706b7970366f6c696b6c687472326108616c696365406831010463686174"
    ),
    (
        "message", .message(.init(id: ascending, room: lab, sequence: 1, timestampMilliseconds: 1_795_000_000_000, kind: .text, body: "héllo\nworld", reliable: true)),
        "000000371001000102030405060708090a0b0c0d0e0f036c61620000000000000001000001a1ee565e00000000000c68c3a96c6c6f0a776f726c64"
    ),
    (
        "invite", .invite(.init(id: descending, timeoutMilliseconds: 30000, room: lab, context: Array("join us".utf8))),
        "0000002502000f0e0d0c0b0a0908070605040302010000007530036c6162000000076a6f696e207573"
    ),
    ("inviteReply", .inviteReply(.init(id: descending, outcome: .declined, reason: "busy")), "0000001903000f0e0d0c0b0a0908070605040302010001000462757379"),
    ("ack", .ack([ascending, descending]), "0000002411000002000102030405060708090a0b0c0d0e0f0f0e0d0c0b0a09080706050403020100"),
    (
        "roomMembers",
        .roomMembers(
            .init(
                room: lab,
                members: [.init(peerID: "liv7cafetkqmp7ikrkyn5tpg3ew5x7vemexztpkyp6oliklhtr2a", name: "bob@h2", port: 7000, addresses: ["198.18.0.12", "fe80::1%lan0"])])),
        "000000600400036c61620001346c69763763616665746b716d7037696b726b796e3574706733657735783776656d65787a74706b7970366f6c696b6c687472326106626f624068321b58020b3139382e31382e302e31320c666538303a3a31256c616e30"
    ),
    ("historyRequest", .historyRequest(room: lab, sinceMilliseconds: 1_795_000_000_000), "0000000e0600036c6162000001a1ee565e00"),
    ("roomLeave", .roomLeave(.init(room: lab, text: "bye")), "0000000b0500036c61620003627965"),
    (
        "resourceOffer",
        .resourceOffer(
            .init(
                id: ascending, room: lab, kind: .file, name: Array("notes.txt".utf8), size: 6,
                sha256: bytes(fromHex: "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"),
                modifiedMilliseconds: 1_795_000_000_000)),
        "000000524000000102030405060708090a0b0c0d0e0f036c61620000096e6f7465732e74787400000000000000065891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03000001a1ee565e00"
    ),
    (
        "resourceOfferDigestFollows",
        .resourceOffer(
            .init(
                id: ascending, room: lab, kind: .file, name: Array("notes.txt".utf8), size: 6, sha256: [],
                modifiedMilliseconds: 1_795_000_000_000, digestFollows: true)),
        "000000524001000102030405060708090a0b0c0d0e0f036c61620000096e6f7465732e74787400000000000000060000000000000000000000000000000000000000000000000000000000000000000001a1ee565e00"
    ),
    (
        "resourceDigest", .resourceDigest(id: ascending, sha256: bytes(fromHex: "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03")),
        "000000324400000102030405060708090a0b0c0d0e0f5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
    ),
    ("resourceAccept", .resourceAccept(.init(id: ascending, offset: 4096)), "0000001a4100000102030405060708090a0b0c0d0e0f0000000000001000"),
    (
        "resourceChunk", .resourceChunk(.init(id: ascending, offset: 0, data: ByteBuffer(string: "hello\n"))),
        "000000244200000102030405060708090a0b0c0d0e0f00000000000000000000000668656c6c6f0a"
    ),
    (
        "resourceEnd", .resourceEnd(.init(id: descending, status: .refused, text: "disk full")),
        "0000001e43000f0e0d0c0b0a090807060504030201000100096469736b2066756c6c"
    ),
    (
        "streamOpen", .streamOpen(.init(id: ascending, name: StreamName("backup")!, credit: 4_194_304)),
        "0000001d3000000102030405060708090a0b0c0d0e0f066261636b757000400000"
    ),
    ("streamAccept", .streamAccept(id: descending, credit: 4_194_304), "0000001631000f0e0d0c0b0a0908070605040302010000400000"),
    (
        "streamData", .streamData(id: ascending, data: ByteBuffer(string: "hello\n")),
        "0000001c3200000102030405060708090a0b0c0d0e0f0000000668656c6c6f0a"
    ),
    ("streamCredit", .streamCredit(id: descending, bytes: 1_048_576), "0000001633000f0e0d0c0b0a0908070605040302010000100000"),
    ("streamEnd", .streamEnd(.init(id: ascending, status: .aborted, text: "gone")), "000000193400000102030405060708090a0b0c0d0e0f020004676f6e65"),
    ("goodbye", .goodbye(.init(reason: .shutdown, text: "bye")), "000000082f00000003627965"),
    // Version 2 (scripts/wire-vectors.py: its fixed key, and one signature it made and verified).
    (
        "helloVersion2", .hello(.init(maximumVersion: 2, peerID: "liv7cafetkqmp7ikrkyn5tpg3ew5x7vemexztpkyp6oliklhtr2a", name: "alice@h1", capabilities: ["chat"])),
        "0000005201004c4348540001000200100000346c69763763616665746b716d7037696b726b796e3574706733657735783776656d65787a74706b7970366f6c696b6c687472326108616c696365406831010463686174"
    ),
    (
        "messageSigned",
        .message(
            .init(
                id: ascending, room: lab, sequence: 1, timestampMilliseconds: 1_795_000_000_000, kind: .text, body: "héllo\nworld",
                reliable: true, signature: vectorSignature)),
        "000000981003000102030405060708090a0b0c0d0e0f036c61620000000000000001000001a1ee565e00000000000c68c3a96c6c6f0a776f726c64031ee0bf1a3c0062bde8d92cf7422906ed41586bb7d802ff2a2a16b123fa894ffaaf858f9dece6ca86e30719dd0c229dcf7283cf93299f35d73101b872597323fde62f3b3bcecaf0ed7b83b331cf49189d586acf23b68de3268a160da3e1397054"
    ),
    (
        "syncRequest",
        .syncRequest(
            .init(
                room: lab, sinceMilliseconds: 1_795_000_000_000,
                marks: [
                    .init(author: vectorAuthor, first: 1, last: 4), .init(author: vectorAuthor, first: 7, last: 7),
                    .init(author: "liv7cafetkqmp7ikrkyn5tpg3ew5x7vemexztpkyp6oliklhtr2a", first: 1, last: 1),
                ])),
        "000000df0700036c6162000001a1ee565e000003346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a6100000000000000010000000000000004346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a6100000000000000070000000000000007346c69763763616665746b716d7037696b726b796e3574706733657735783776656d65787a74706b7970366f6c696b6c687472326100000000000000010000000000000001"
    ),
    ("historyRequestLimit", .historyRequest(room: lab, sinceMilliseconds: 1_795_000_000_000, limit: 100), "000000120601036c6162000001a1ee565e0000000064"),
    (
        "messageDirect",
        .message(
            .init(
                id: ascending, room: lab, sequence: 1, timestampMilliseconds: 1_795_000_000_000, kind: .text, body: "héllo\nworld",
                reliable: true, direct: true)),
        "000000371005000102030405060708090a0b0c0d0e0f036c61620000000000000001000001a1ee565e00000000000c68c3a96c6c6f0a776f726c64"
    ),
    // Membership with provenance (scripts/wire-vectors.py): the fixed key's member with its proof, then the v1 vector's member without one.
    (
        "roomMembersProofs",
        .roomMembers(
            .init(
                room: lab,
                members: [
                    .init(peerID: vectorAuthor, name: "alice@h1", port: 7000, addresses: ["198.18.0.11"], proof: vectorMembershipProof),
                    .init(peerID: "liv7cafetkqmp7ikrkyn5tpg3ew5x7vemexztpkyp6oliklhtr2a", name: "bob@h2", port: 7000, addresses: ["198.18.0.12", "fe80::1%lan0"]),
                ])),
        "0000014d0402036c61620002346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a6108616c6963654068311b58010b3139382e31382e302e313101346c69763763616665746b716d7037696b726b796e3574706733657735783776656d65787a74706b7970366f6c696b6c6874723261000001a1ee565e00031ee0bf1a3c0062bde8d92cf7422906ed41586bb7d802ff2a2a16b123fa894ffa6ac79599543d1be0c6981ab3f6546fc633456c8cc93111d29e70e79e8c08424e7a21345914af5ad0387732d67568f62072148758900ac1531f0675cca6c09432346c69763763616665746b716d7037696b726b796e3574706733657735783776656d65787a74706b7970366f6c696b6c687472326106626f624068321b58020b3139382e31382e302e31320c666538303a3a31256c616e3000"
    ),
    (
        "roomLeaveSigned", .roomLeave(.init(room: lab, text: "bye", signed: vectorSignedLeave)),
        "000000a90502036c61620003627965346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a61000001a1ee574860031ee0bf1a3c0062bde8d92cf7422906ed41586bb7d802ff2a2a16b123fa894ffab2f9f09efd424af39e0872df54b2b81d1233347ce46fbb41fa4f441661f6eea7de0738bc51655e7c8d6699b02bef79aed9fbca9b07b1a12f2a0da35974767ed2"
    ),
]

/// The version 2 vectors' author: scripts/wire-vectors.py's fixed P-256 key.
let vectorAuthor = "onyecdxw77442ullggcaxjj2cjczrvealz7ce7bu32qp45t5rhja"
let vectorPrivateScalar = "682dc3001b76d8ed3d95d33bee2f9383d37b4ad4923a766f62bbce379830050c"
let vectorSignature = Signature(
    key: bytes(fromHex: "031ee0bf1a3c0062bde8d92cf7422906ed41586bb7d802ff2a2a16b123fa894ffa"),
    bytes: bytes(fromHex: "af858f9dece6ca86e30719dd0c229dcf7283cf93299f35d73101b872597323fde62f3b3bcecaf0ed7b83b331cf49189d586acf23b68de3268a160da3e1397054"))
/// `Envelope.signingBytes` of the vector message (id 00..0f, room lab, sequence 1, text `héllo\nworld`) by `vectorAuthor`.
let vectorSigningBytes =
    "4c4348542d4d53472d32346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a61036c6162000102030405060708090a0b0c0d0e0f0000000000000001000001a1ee565e0000000000000c68c3a96c6c6f0a776f726c64"
/// The same message as a record of a signed history (sender name `alice@h1`), and unsigned in the same layout.
let vectorSignedRecord =
    "000102030405060708090a0b0c0d0e0f346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a6108616c6963654068310000000000000001000001a1ee565e00000000000c68c3a96c6c6f0a776f726c6421031ee0bf1a3c0062bde8d92cf7422906ed41586bb7d802ff2a2a16b123fa894ffa40af858f9dece6ca86e30719dd0c229dcf7283cf93299f35d73101b872597323fde62f3b3bcecaf0ed7b83b331cf49189d586acf23b68de3268a160da3e1397054"
let vectorUnsignedRecord =
    "000102030405060708090a0b0c0d0e0f346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a6108616c6963654068310000000000000001000001a1ee565e00000000000c68c3a96c6c6f0a776f726c640000"

/// scripts/wire-vectors.py's membership proof: `vectorAuthor` in `lab`, invited by `vectorInviter`, since 1795000000000,
/// and its signed leave of `lab` at 1795000060000; each with one signature the script made and verified.
let vectorInviter = "liv7cafetkqmp7ikrkyn5tpg3ew5x7vemexztpkyp6oliklhtr2a"
let vectorJoined: UInt64 = 1_795_000_000_000
let vectorLeft: UInt64 = 1_795_000_060_000
let vectorMembershipProof = WireFrame.MembershipProof(
    inviter: vectorInviter, timestampMilliseconds: vectorJoined,
    signature: Signature(
        key: vectorSignature.key,
        bytes: bytes(fromHex: "6ac79599543d1be0c6981ab3f6546fc633456c8cc93111d29e70e79e8c08424e7a21345914af5ad0387732d67568f62072148758900ac1531f0675cca6c09432")))
let vectorSignedLeave = WireFrame.SignedLeave(
    member: vectorAuthor, timestampMilliseconds: vectorLeft,
    signature: Signature(
        key: vectorSignature.key,
        bytes: bytes(fromHex: "b2f9f09efd424af39e0872df54b2b81d1233347ce46fbb41fa4f441661f6eea7de0738bc51655e7c8d6699b02bef79aed9fbca9b07b1a12f2a0da35974767ed2")))
/// `Envelope.membershipBytes` and `Envelope.leaveBytes` of those, as the script computed them.
let vectorMembershipBytes =
    "4c4348542d4a4f494e2d32036c6162346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a61346c69763763616665746b716d7037696b726b796e3574706733657735783776656d65787a74706b7970366f6c696b6c6874723261000001a1ee565e00"
let vectorLeaveBytes =
    "4c4348542d4c454156452d32036c6162346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a61000001a1ee574860"

// Seals (wire version 4, draft; scripts/wire-vectors.py): `vectorAuthor` seals three messages in `lab`, the vector
// message and two more; the seal's id is 20..2f. Everything is deterministic but the signature, one the script made
// and verified with openssl (it is in the frame).
let vectorSealID = WireID(bytes: Array(0x20...0x2f))!
let vectorSealedMessages: [WireFrame.Message] = [
    .init(id: ascending, room: lab, sequence: 1, timestampMilliseconds: 1_795_000_000_000, kind: .text, body: "héllo\nworld", reliable: true),
    .init(id: descending, room: lab, sequence: 2, timestampMilliseconds: 1_795_000_001_000, kind: .text, body: "two", reliable: true),
    .init(
        id: WireID(bytes: Array(0x10...0x1f))!, room: lab, sequence: 3, timestampMilliseconds: 1_795_000_002_000, kind: .text, body: "three\tand a tab",
        reliable: true),
]
/// `SHA-256(0x00 | signing bytes)` of each sealed message.
let vectorSealLeafHashes = [
    "c5e5c9047f3b18c2cc6c4cda3aab9527050d45bf002e75bb790c7c045969e97d",
    "8a39180ce763d7dc0ad761010fe3fe48f8be8e821ff5128511268d63df6c5d3a",
    "b0a0fa64e798cb987a69602a88af888212368f0f07e9854b8bc347dcc5c28a55",
]
let vectorSealRoot = "01c539bacb5b9682631fba2e2e84ec08f365558bdcdc7547fa822a5861e60be3"
/// The audit path of leaf 1 of the three (leaf 0's hash, then leaf 2's), and that leaf's proof form.
let vectorSealAuditPath1 =
    "c5e5c9047f3b18c2cc6c4cda3aab9527050d45bf002e75bb790c7c045969e97db0a0fa64e798cb987a69602a88af888212368f0f07e9854b8bc347dcc5c28a55"
let vectorSealProof1 =
    "202122232425262728292a2b2c2d2e2f000102c5e5c9047f3b18c2cc6c4cda3aab9527050d45bf002e75bb790c7c045969e97db0a0fa64e798cb987a69602a88af888212368f0f07e9854b8bc347dcc5c28a55"
let vectorSealSigningBytes =
    "4c4348542d5345414c346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a61202122232425262728292a2b2c2d2e2f036c6162000301c539bacb5b9682631fba2e2e84ec08f365558bdcdc7547fa822a5861e60be3"
let vectorSealSignature =
    "4c85d8df75fb8c89bce8983d7ff04550c91628dd8617e3ac1c239576cd55b319a7a2d7906ce494ecdb0a5865aacbcae7a3ca93e0d0da202ba563d78dfaa90798"
let vectorSealFrame =
    "000000d91200202122232425262728292a2b2c2d2e2f036c6162031ee0bf1a3c0062bde8d92cf7422906ed41586bb7d802ff2a2a16b123fa894ffa4c85d8df75fb8c89bce8983d7ff04550c91628dd8617e3ac1c239576cd55b319a7a2d7906ce494ecdb0a5865aacbcae7a3ca93e0d0da202ba563d78dfaa907980003c5e5c9047f3b18c2cc6c4cda3aab9527050d45bf002e75bb790c7c045969e97d8a39180ce763d7dc0ad761010fe3fe48f8be8e821ff5128511268d63df6c5d3ab0a0fa64e798cb987a69602a88af888212368f0f07e9854b8bc347dcc5c28a55"
/// The sample message sealed as leaf 0 of that seal (flags 0x09); the seal's head; message 2 as a sealed history
/// record with the proof of leaf 1; and a sealed history: the head, that record, then the signed history record.
let vectorSealedMessageFrame =
    "000000491009000102030405060708090a0b0c0d0e0f036c61620000000000000001000001a1ee565e00000000000c68c3a96c6c6f0a776f726c64202122232425262728292a2b2c2d2e2f0000"
let vectorSealHead =
    "202122232425262728292a2b2c2d2e2f346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a61031ee0bf1a3c0062bde8d92cf7422906ed41586bb7d802ff2a2a16b123fa894ffa4c85d8df75fb8c89bce8983d7ff04550c91628dd8617e3ac1c239576cd55b319a7a2d7906ce494ecdb0a5865aacbcae7a3ca93e0d0da202ba563d78dfaa90798000301c539bacb5b9682631fba2e2e84ec08f365558bdcdc7547fa822a5861e60be3"
let vectorSealedRecord1 =
    "020f0e0d0c0b0a09080706050403020100346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a6108616c6963654068310000000000000002000001a1ee5661e8000000000374776f202122232425262728292a2b2c2d2e2f000102c5e5c9047f3b18c2cc6c4cda3aab9527050d45bf002e75bb790c7c045969e97db0a0fa64e798cb987a69602a88af888212368f0f07e9854b8bc347dcc5c28a55"
let vectorSealedHistory =
    "01202122232425262728292a2b2c2d2e2f346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a61031ee0bf1a3c0062bde8d92cf7422906ed41586bb7d802ff2a2a16b123fa894ffa4c85d8df75fb8c89bce8983d7ff04550c91628dd8617e3ac1c239576cd55b319a7a2d7906ce494ecdb0a5865aacbcae7a3ca93e0d0da202ba563d78dfaa90798000301c539bacb5b9682631fba2e2e84ec08f365558bdcdc7547fa822a5861e60be3020f0e0d0c0b0a09080706050403020100346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a6108616c6963654068310000000000000002000001a1ee5661e8000000000374776f202122232425262728292a2b2c2d2e2f000102c5e5c9047f3b18c2cc6c4cda3aab9527050d45bf002e75bb790c7c045969e97db0a0fa64e798cb987a69602a88af888212368f0f07e9854b8bc347dcc5c28a5500000102030405060708090a0b0c0d0e0f346f6e7965636478773737343432756c6c67676361786a6a32636a637a727665616c7a376365376275333271703435743572686a6108616c6963654068310000000000000001000001a1ee565e00000000000c68c3a96c6c6f0a776f726c6421031ee0bf1a3c0062bde8d92cf7422906ed41586bb7d802ff2a2a16b123fa894ffa40af858f9dece6ca86e30719dd0c229dcf7283cf93299f35d73101b872597323fde62f3b3bcecaf0ed7b83b331cf49189d586acf23b68de3268a160da3e1397054"
