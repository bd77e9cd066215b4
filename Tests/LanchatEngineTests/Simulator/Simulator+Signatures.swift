import LanchatCore
import LanchatEngine
import LanchatWire

/// Signed envelopes, simulated: an unforgeable signature scheme without the cost of P-256. Node i's
/// key is `[0x02, i, 0, ...]` (33 bytes); its signature over some bytes is a 64-byte digest of a secret
/// only its own signer holds and the bytes. A check asks the scheme (as the mathematics would answer):
/// the key must be the author's and the digest the one its secret gives. So a node can sign only as
/// itself, and a relay that changes a record cannot make its signature verify.
enum SimulatedSignatures {
    static func key(_ index: Int) -> [UInt8] {
        [0x02, UInt8(index)] + [UInt8](repeating: 0, count: Signature.keyLength - 2)
    }

    private static func secret(_ index: Int) -> UInt64 { 0x9E37_79B9_7F4A_7C15 &* UInt64(index + 1) }

    /// FNV-1a over the bytes, seeded by the secret, stretched to 64 bytes.
    static func digest(_ secret: UInt64, _ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        for round in 0..<8 {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325 ^ secret ^ UInt64(round)
            for byte in bytes {
                hash ^= UInt64(byte)
                hash = hash &* 0x100_0000_01b3
            }
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: hash >> UInt64(shift))) }
        }
        return out
    }

    /// Whether `signature` is `author`'s over `bytes`; `ids[i]` is node i's id.
    static func verifies(_ signature: Signature, _ bytes: [UInt8], _ author: PeerID, ids: [PeerID]) -> Bool {
        let owner = Int(signature.key.count > 1 ? signature.key[1] : 0xFF)
        guard owner < ids.count, ids[owner] == author, signature.key == key(owner) else { return false }
        return signature.bytes == digest(secret(owner), bytes)
    }

    /// Node `index`'s keys, as the shell would give its engine.
    static func keys(for index: Int, ids: [PeerID]) -> EnvelopeKeys {
        let secret = secret(index)
        return EnvelopeKeys(
            publicKey: key(index), sign: { digest(secret, $0) },
            verify: { signature, bytes, author in verifies(signature, bytes, author, ids: ids) })
    }
}

extension Simulator {
    /// No node ever stores another member's message without its author's valid signature or seal (every
    /// simulated connection speaks version 3 or 4), however it arrived: live, resent, or relayed in a
    /// history, including the histories a hostile relay tampered with (`forgeries`). A sealed one is kept
    /// with its seal, whose signature is its author's, and a proof that its leaf is the seal's.
    func checkSignatures() throws {
        let ids = nodes.map(\.peer.id)
        for (index, node) in nodes.enumerated() {
            for message in node.store.messages.values.sorted(by: { $0.id < $1.id })
            where message.kind != .system && message.senderID != node.peer.id.rawValue {
                guard message.isAuthenticated, let author = PeerID(message.senderID), let id = WireID(hex: message.id), let room = RoomID(message.room)
                else {
                    throw fail("n\(index) stored \(message.id.prefix(8)) from \(message.senderID.prefix(8)) without a signature or a seal")
                }
                let bytes = Envelope.signingBytes(
                    author: message.senderID, room: room, id: id, sequence: UInt64(message.sequence), timestamp: UInt64(message.timestamp),
                    kind: message.kind == .file ? .file : .text, direct: message.direct, body: message.body)
                if message.isSigned {
                    guard SimulatedSignatures.verifies(Signature(key: message.authorKey, bytes: message.signature), bytes, author, ids: ids) else {
                        throw fail("n\(index) stored \(message.id.prefix(8)) (\"\(message.body.prefix(20))\") with a signature that does not verify")
                    }
                }
                if message.isSealed {
                    // (With its seal: a place kept as a leaf index is made again from the seal's leaves.)
                    let sealed = node.store.withSeal(message)
                    guard let head = sealed.seal?.head(author: message.senderID), let proof = sealed.proof,
                        SimulatedSignatures.verifies(head.signature, head.signingBytes(room: room), author, ids: ids),
                        head.proves(proof, leafHash: Seal.leafHash(signingBytes: bytes))
                    else {
                        throw fail("n\(index) stored \(message.id.prefix(8)) (\"\(message.body.prefix(20))\") with a seal that does not verify it")
                    }
                    seals.records += 1
                    if message.leafIndex != nil { seals.byIndex += 1 }
                }
            }
        }
    }
}

extension Simulator {
    /// A hostile member's introduction (a fault): ROOM_MEMBERS gains members that are no node, with no
    /// proof or one the sender signed itself for their ids. A member is added only with its own proof, so
    /// nobody takes them.
    func withFakeMembers(_ frame: WireFrame, from node: Int) -> WireFrame {
        guard case .roomMembers(var update) = frame, let keys = nodes[node].engine?.configuration.envelopes else { return frame }
        for _ in 0..<(1 + roll(3)) {
            let fake = PeerID(digest: (0..<32).map { _ in UInt8(roll(256)) })
            let time = UInt64(max(0, now))
            let proof = WireFrame.MembershipProof(
                inviter: nodes[node].peer.id.rawValue, timestampMilliseconds: time,
                signature: keys.signature(
                    over: Envelope.membershipBytes(room: update.room, member: fake.rawValue, inviter: nodes[node].peer.id.rawValue, timestamp: time)))
            update.members.append(.init(peerID: fake.rawValue, name: "fake", port: 9, addresses: ["192.0.2.1"], proof: chance(2) ? proof : nil))
            fakeMembers += 1
        }
        return .roomMembers(update)
    }

    /// A hostile author's SEAL (a fault): its signature no longer covers what it carries. A byte of the
    /// signature changed, the leaf hashes cut short (a truncated seal: the last leaf gone, when it has
    /// more than one), or a leaf hash changed. Checked where it comes (a plaintext link, an author whose
    /// seal failed, past the bound of waiting checks), it is refused and its messages are neither stored
    /// nor acknowledged; held unchecked, its messages are stored and acknowledged, and go when its check
    /// fails, and one whose leaf it does not match is acknowledged and refused. No receiver keeps anything
    /// under it (`checkSignatures` would find a record stored under it); its messages may come again, sealed
    /// anew, on the author's next flush (`mayBeLost`).
    func withBrokenSeal(_ frame: WireFrame) -> WireFrame {
        guard case .seal(var seal) = frame, !seal.leafHashes.isEmpty else { return frame }
        switch roll(3) {
        case 0: seal.signature.bytes[roll(seal.signature.bytes.count)] ^= 0x01
        case 1 where seal.leafHashes.count > 1: seal.leafHashes.removeLast()  // (a SEAL of no leaves cannot be encoded)
        default: seal.leafHashes[roll(seal.leafHashes.count)][roll(MerkleTree.hashLength)] ^= 0x01
        }
        return .seal(seal)
    }

    /// Notes the broken SEALs `frames` bring `to` from `from` (those whose signature does not cover what
    /// they carry: `withBrokenSeal`), and the messages under them (`mayBeLost`); returns how many SEALs.
    @discardableResult
    func noteBrokenSeals(in frames: [WireFrame], from: Int, to: Int) -> Int {
        var broken = 0
        let ids = nodes.map(\.peer.id)
        let author = nodes[from].peer.id
        for frame in frames {
            switch frame {
            case .seal(let seal) where !SimulatedSignatures.verifies(seal.signature, seal.signingBytes(author: author.rawValue), author, ids: ids):
                brokenSealsSent.insert(["\(to)", "\(from)", seal.id.description])
                broken += 1
            case .message(let message):
                if let sealed = message.sealed, brokenSealsSent.contains(["\(to)", "\(from)", sealed.seal.description]) {
                    mayBeLost.insert(["\(to)", message.id.description])
                }
            default:
                break
            }
        }
        return broken
    }

    /// Every seal check asked was answered: no store holds a seal unchecked (a restart asks its checks
    /// again), and every seal kept is its author's (those that failed went with their messages).
    func checkSealsSettled() throws {
        let ids = nodes.map(\.peer.id)
        for (index, node) in nodes.enumerated() where node.engine != nil {
            if let unchecked = node.store.uncheckedSeals().first {
                throw fail(
                    "n\(index) still holds seal \(unchecked.seal.id) by \(unchecked.author.prefix(8)) unchecked (signature \(unchecked.seal.signature.prefix(3)), \(unchecked.seal.leafCount) leaves, root \(unchecked.seal.root.prefix(3)))"
                )
            }
            for (author, room, seal) in node.store.keptSeals() {
                guard let id = PeerID(author), let room = RoomID(room), let head = seal.head(author: author),
                    SimulatedSignatures.verifies(head.signature, head.signingBytes(room: room), id, ids: ids)
                else { throw fail("n\(index) keeps seal \(seal.id.prefix(8)) by \(author.prefix(8)), whose signature does not verify") }
            }
        }
    }

    /// Every member any node lists is a node: none of the fakes was ever added.
    func checkProvenance() throws {
        let ids = Set(nodes.map(\.peer.id))
        for (index, node) in nodes.enumerated() {
            for room in node.engine?.roomNames ?? [] {
                if let fake = node.engine?.members(of: RoomID(room)!)?.keys.first(where: { !ids.contains($0) }) {
                    throw fail("n\(index) lists \(fake.short) in \(room), a member of no node's making")
                }
            }
        }
    }
}
