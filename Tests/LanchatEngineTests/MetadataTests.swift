import LanchatCore
import LanchatEngine
import LanchatWire
import Testing

/// Room metadata (issue 13, item 2), the engine's part: signed, versioned writes; one rule for concurrent
/// writes; compare-and-set; the size limits; entries from members verified, handed on, and answered with
/// ours when ours wins; the topic shown as a notice; a restart keeps it all.
@Suite struct MetadataTests {
    let me = SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice")
    let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    let carol = SessionPeer(id: SessionStateMachineTests.peerID(0x20), name: "carol")
    let lab = RoomID("lab")!
    var ids: [PeerID] { [me.id, bob.id, carol.id] }

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    func engine(metadata: [StoredMeta] = []) -> SessionStateMachine {
        var configuration = SessionStateMachine.Configuration(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .never)
        configuration.envelopes = SimulatedSignatures.keys(for: 0, ids: ids)
        let member = { (peer: SessionPeer) in StoredMember(peerID: peer.id.rawValue, name: peer.name, port: 7473, addresses: []) }
        var restored = SessionStateMachine.Restored(rooms: [(lab, [member(bob), member(carol)])], knownPeers: KnownPeerBook())
        restored.metadata = metadata
        var node = SessionStateMachine(
            configuration: configuration, restored: restored, addressBook: PeerDirectory(), ids: IDGenerator(seed: 1),
            shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        _ = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: true, remoteAddress: nil, version: 2, at: at(1))
        return node
    }

    /// An entry `author` (index in `ids`) wrote, signed by `signer` (default: the author).
    func entry(_ key: String, _ value: String, version: UInt64, time: UInt64 = 500, by author: Int, signer: Int? = nil, deleted: Bool = false) -> WireFrame.MetaEntry {
        let bytes = Envelope.metaBytes(room: lab, key: key, deleted: deleted, value: value, version: version, timestamp: time, author: ids[author].rawValue)
        return .init(
            key: key, value: value, deleted: deleted, version: version, timestampMilliseconds: time, author: ids[author].rawValue,
            signature: SimulatedSignatures.keys(for: signer ?? author, ids: ids).signature(over: bytes))
    }

    func metaSent(_ actions: [SessionAction], on handle: LinkHandle) -> [WireFrame.MetaEntry] {
        actions.flatMap { action -> [WireFrame.MetaEntry] in
            guard case .send(let to, let frames) = action, to == handle else { return [] }
            return frames.flatMap { frame -> [WireFrame.MetaEntry] in if case .roomMeta(let meta) = frame { meta.entries } else { [] } }
        }
    }

    func notices(_ actions: [SessionAction]) -> [String] {
        actions.compactMap { if case .persist(.insertMessage(let message, _, _)) = $0, message.kind == .system { message.body } else { nil } }
    }

    @Test func aWriteIsSignedVersionedToldToTheMembersAndTheTopicIsANotice() throws {
        var node = engine()
        let (first, actions) = try node.setMeta("topic", to: "release planning", in: lab, at: at(2))
        #expect(first.version == 1 && first.author == me.id.rawValue)
        #expect(
            SimulatedSignatures.verifies(
                first.signature,
                Envelope.metaBytes(
                    room: lab, key: "topic", deleted: false, value: "release planning", version: 1, timestamp: first.timestampMilliseconds, author: me.id.rawValue),
                me.id, ids: ids))
        #expect(metaSent(actions, on: LinkHandle(1)) == [first] && metaSent(actions, on: LinkHandle(2)) == [first])
        #expect(notices(actions) == ["topic: release planning (set by alice)"])
        #expect(actions.contains { if case .persist(.saveMeta(let stored)) = $0 { stored.key == "topic" && stored.version == 1 } else { false } })
        let (second, _) = try node.setMeta("topic", to: "retro", in: lab, ifVersion: 1, at: at(3))
        #expect(second.version == 2 && node.metadata(of: lab).map(\.value) == ["retro"])
        #expect(throws: SessionError.self) { try node.setMeta("topic", to: "late", in: lab, ifVersion: 1, at: at(4)) }
        let (gone, _) = try node.setMeta("topic", to: nil, in: lab, at: at(5))
        #expect(gone.deleted && gone.version == 3 && node.metadata(of: lab).isEmpty)
        #expect(throws: SessionError.self) { try node.setMeta("topic", to: nil, in: lab, at: at(6)) }
        #expect(try node.setMeta("topic", to: "again", in: lab, ifVersion: 3, at: at(7)).0.version == 4)
    }

    @Test func theLimitsAreStatedAndEnforced() throws {
        var node = engine()
        for bad in ["", "has space", String(repeating: "k", count: 65), "é"] {
            #expect(throws: SessionError.self) { try node.setMeta(bad, to: "v", in: lab, at: at(2)) }
        }
        #expect(throws: SessionError.self) { try node.setMeta("big", to: String(repeating: "v", count: 4097), in: lab, at: at(2)) }
        #expect(throws: SessionError.self) { try node.setMeta("bell", to: "\u{7}", in: lab, at: at(2)) }
        for index in 0..<16 { _ = try node.setMeta("k\(index)", to: String(repeating: "v", count: 4000), in: lab, at: at(3)) }
        do {
            _ = try node.setMeta("k16", to: String(repeating: "v", count: 4000), in: lab, at: at(4))
            Issue.record("past 64 KiB was taken")
        } catch {
            #expect(error.code == .tooLarge && error.message.contains("65536"))
        }
    }

    @Test func concurrentWritesConvergeByOneRuleWhateverTheOrder() {
        let a = entry("color", "red", version: 2, time: 900, by: 1)
        let b = entry("color", "blue", version: 2, time: 900, by: 2)
        let c = entry("color", "green", version: 1, time: 5000, by: 1)
        for order in [[a, b, c], [c, b, a], [b, c, a]] {
            var node = engine()
            for item in order { _ = node.received([.roomMeta(.init(room: lab, entries: [item]))], on: LinkHandle(1), at: at(2)) }
            // Same version and time: the greater author id wins (carol's 0x20... over bob's 0x10...).
            #expect(node.metaEntry("color", in: lab) == (bob.id.rawValue > carol.id.rawValue ? a : b))
        }
    }

    @Test func entriesFromMembersAreVerifiedHandedOnAndAnsweredWithOursWhenOursWins() throws {
        var node = engine()
        let genuine = entry("agenda", "1. demo", version: 1, by: 2)
        var actions = node.received(
            [.roomMeta(.init(room: lab, entries: [genuine, entry("owner", "bob", version: 1, by: 2, signer: 1)]))],
            on: LinkHandle(1), at: at(2))
        #expect(node.metadata(of: lab).map(\.key) == ["agenda"])  // carol's write bob signed: refused
        #expect(metaSent(actions, on: LinkHandle(2)) == [genuine] && metaSent(actions, on: LinkHandle(1)).isEmpty)
        let (mine, _) = try node.setMeta("agenda", to: "2. retro", in: lab, at: at(3))
        actions = node.received([.roomMeta(.init(room: lab, entries: [genuine]))], on: LinkHandle(1), at: at(4))
        #expect(metaSent(actions, on: LinkHandle(1)) == [mine])  // bob is behind: he gets ours
        // A stranger's ROOM_META changes nothing.
        _ = node.linkUp(
            LinkHandle(3), peer: SessionPeer(id: SessionStateMachineTests.peerID(0x40), name: "eve"), dialedByUs: false, remoteAddress: nil,
            version: 2, at: at(5))
        _ = node.received([.roomMeta(.init(room: lab, entries: [entry("agenda", "x", version: 9, by: 0)]))], on: LinkHandle(3), at: at(6))
        #expect(node.metaEntry("agenda", in: lab) == mine)
    }

    @Test func aRestartKeepsTheMetadataAndAConnectionGetsAllOfIt() throws {
        var node = engine()
        let (entry, actions) = try node.setMeta("topic", to: "kept", in: lab, at: at(2))
        let stored = actions.compactMap { if case .persist(.saveMeta(let stored)) = $0 { stored } else { nil } }
        var again = engine(metadata: stored)
        #expect(again.metaEntry("topic", in: lab) == entry)
        let up = again.linkUp(LinkHandle(9), peer: bob, dialedByUs: false, remoteAddress: nil, version: 2, at: at(3))
        _ = up
        _ = again.linkDown(LinkHandle(1), reason: .lost, at: at(4))
        let reconnect = again.linkUp(LinkHandle(5), peer: bob, dialedByUs: true, remoteAddress: nil, version: 2, at: at(5))
        #expect(metaSent(reconnect.actions, on: LinkHandle(5)) == [entry])
    }

    @Test func tiesAreBrokenTheSameWayEverywhereAndHugeNumbersAreRefused() {
        // The same write signed twice (ECDSA is randomized: here, two signers' bytes stand in for two signatures).
        let one = entry("color", "red", version: 3, time: 900, by: 1)
        var two = one
        two.signature = entry("color", "red", version: 3, time: 900, by: 1, signer: 2).signature
        let winner = SessionStateMachine.wins(one, over: two) ? one : two
        #expect(SessionStateMachine.wins(one, over: two) != SessionStateMachine.wins(two, over: one))
        #expect(!SessionStateMachine.wins(one, over: one))
        var node = engine()
        _ = node.received([.roomMeta(.init(room: lab, entries: [one]))], on: LinkHandle(1), at: at(2))
        // (two's signature is not bob's: it is refused whatever the order; the rule alone is what matters here.)
        #expect(node.metaEntry("color", in: lab) == one)
        _ = winner
        var huge = engine()
        _ = huge.received(
            [
                .roomMeta(
                    .init(
                        room: lab,
                        entries: [
                            entry("size", "x", version: UInt64.max, by: 1),
                            entry("topic", "x", version: 1, time: UInt64.max, by: 1),
                        ]))
            ],
            on: LinkHandle(1), at: at(2))
        #expect(huge.metadata(of: lab).isEmpty)
    }

    /// Issue 28, item 2: deletions were evicted past 256 entries (the oldest first), so a member could push
    /// out a deletion with keys of its own and replay the deleted value. Before: the value came back. Now
    /// an author's new key pushes out only that author's own deletions, one member holds at most 128 keys
    /// at a receiver, and a deletion of the creator's is never pushed out: deleted values stay deleted.
    @Test func aDeletedValueCannotBeReplayed() throws {
        var node = engine()
        let ad = entry("ad", "buy now", version: 1, by: 1)
        _ = node.received([.roomMeta(.init(room: lab, entries: [ad]))], on: LinkHandle(1), at: at(2))
        #expect(try node.setMeta("ad", to: nil, in: lab, at: at(3)).0.deleted)
        // Carol (or bob) writes 300 keys, deletes some of them, writes more.
        for chunk in stride(from: 0, to: 300, by: 60) {
            let frame = (chunk..<chunk + 60).map { entry("c\($0)", "x", version: 1, time: 2_000_000, by: 2) }
            _ = node.received([.roomMeta(.init(room: lab, entries: frame))], on: LinkHandle(2), at: at(4))
            let deletions = (chunk..<chunk + 30).map { entry("c\($0)", "", version: 2, time: 2_000_000, by: 2, deleted: true) }
            _ = node.received([.roomMeta(.init(room: lab, entries: deletions))], on: LinkHandle(2), at: at(4))
        }
        #expect(node.metaEntry("ad", in: lab)?.deleted == true, "the deletion was pushed out")
        let carols = (0..<300).compactMap { node.metaEntry("c\($0)", in: lab) }.filter { $0.author == ids[2].rawValue }.count
        #expect(carols <= 128, "carol holds \(carols) entries")
        // Bob replays his value: it stays deleted (and he hears the deletion back).
        let replay = node.received([.roomMeta(.init(room: lab, entries: [ad]))], on: LinkHandle(1), at: at(5))
        #expect(node.metaEntry("ad", in: lab)?.deleted == true)
        #expect(metaSent(replay, on: LinkHandle(1)).map(\.deleted) == [true])
        // A new key from a member with room left is still taken.
        _ = node.received([.roomMeta(.init(room: lab, entries: [entry("agenda", "1. demo", version: 1, by: 1)]))], on: LinkHandle(1), at: at(6))
        #expect(node.metaEntry("agenda", in: lab)?.value == "1. demo")
    }

    /// Per-writer budgets: a member writes at most 64 ordinary keys (deletions included); past that only its
    /// own oldest deletion makes room, never another's. Before, a writer's limit was 256 live keys for the
    /// room, the administration's included.
    @Test func aWriterHoldsAtMost64KeysAndOnlyItsOwnDeletionsMakeRoom() throws {
        var node = engine()
        _ = node.received(
            [.roomMeta(.init(room: lab, entries: [entry("theirs", "x", version: 1, by: 1), entry("gone", "x", version: 1, by: 1)]))],
            on: LinkHandle(1), at: at(2))
        _ = node.received([.roomMeta(.init(room: lab, entries: [entry("gone", "", version: 2, by: 1, deleted: true)]))], on: LinkHandle(1), at: at(2))
        for index in 0..<64 { _ = try node.setMeta("k\(index)", to: "v", in: lab, at: at(3)) }
        do {
            _ = try node.setMeta("k64", to: "v", in: lab, at: at(4))
            Issue.record("a 65th key was written")
        } catch {
            #expect(error.code == .tooManyKeys && error.message.contains("delete one of yours first"))
        }
        // Overwriting and deleting keys the room holds grows nothing: always allowed.
        _ = try node.setMeta("theirs", to: "mine now", in: lab, at: at(5))
        _ = try node.setMeta("k0", to: nil, in: lab, at: at(6))
        // We hold 65 (bob's key is ours now): one deletion of ours is not enough room; two are (both go),
        // and bob's deletion stays.
        #expect(throws: SessionError.self) { try node.setMeta("k64", to: "v", in: lab, at: at(7)) }
        _ = try node.setMeta("k1", to: nil, in: lab, at: at(8))
        let (fresh, actions) = try node.setMeta("k64", to: "v", in: lab, at: at(9))
        #expect(fresh.version == 1 && node.metaEntry("k0", in: lab) == nil && node.metaEntry("k1", in: lab) == nil)
        #expect(node.metaEntry("gone", in: lab)?.deleted == true)
        #expect(actions.filter { if case .persist(.deleteMeta(_, let key?)) = $0 { ["k0", "k1"].contains(key) } else { false } }.count == 2)
    }

    /// A received version steps at most 2^20 past the one held (none: 0), so no member can push a key to
    /// the last version (2^62) that writers refuse to pass. Before: 2^62 was taken and the key was frozen.
    @Test func aVersionStepsAtMostABoundPastWhatIsHeld() throws {
        var node = engine()
        let step: UInt64 = 1 << 20
        _ = node.received([.roomMeta(.init(room: lab, entries: [entry("topic", "frozen", version: 1 << 62, by: 1)]))], on: LinkHandle(1), at: at(2))
        #expect(node.metaEntry("topic", in: lab) == nil)
        _ = node.received([.roomMeta(.init(room: lab, entries: [entry("topic", "far", version: step + 1, by: 1)]))], on: LinkHandle(1), at: at(2))
        #expect(node.metaEntry("topic", in: lab) == nil)
        _ = node.received([.roomMeta(.init(room: lab, entries: [entry("topic", "ahead", version: step, by: 1)]))], on: LinkHandle(1), at: at(3))
        #expect(node.metaEntry("topic", in: lab)?.value == "ahead")
        _ = node.received([.roomMeta(.init(room: lab, entries: [entry("topic", "again", version: 2 * step, by: 1)]))], on: LinkHandle(1), at: at(4))
        #expect(node.metaEntry("topic", in: lab)?.value == "again")
        #expect(try node.setMeta("topic", to: "ours", in: lab, at: at(5)).0.version == 2 * step + 1)
    }

    @Test func leavingARoomForgetsItsMetadata() throws {
        var node = engine()
        _ = try node.setMeta("topic", to: "gone soon", in: lab, at: at(2))
        let actions = try node.leave(lab, at: at(3))
        #expect(node.metaEntry("topic", in: lab) == nil)
        #expect(actions.contains { if case .persist(.deleteMeta(let room, nil)) = $0 { room == lab } else { false } })
    }
}
