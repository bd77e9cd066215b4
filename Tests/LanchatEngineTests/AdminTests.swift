import LanchatCore
import LanchatEngine
import LanchatWire
import Testing

/// Administration (issue 13, item 5), the engine's part: the creator's record; only administrators
/// remove, close and name administrators, and only their entries count; a removal drops the member
/// everywhere (its own daemon leaves), a closing makes every member leave (not one older than our membership); a removal
/// stands, whatever its time, until an administrator invites the member back; every departure has a code.
@Suite struct AdminTests {
    let me = SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice")
    let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    let carol = SessionPeer(id: SessionStateMachineTests.peerID(0x20), name: "carol")
    let lab = RoomID("lab")!
    var ids: [PeerID] { [me.id, bob.id, carol.id] }

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    /// Alice in lab with bob and carol (both connected), joined at `joined` (wall clock), holding `metadata`.
    func engine(metadata: [StoredMeta] = [], joined: Int64 = 1_000_000) -> SessionStateMachine {
        var configuration = SessionStateMachine.Configuration(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .never)
        configuration.envelopes = SimulatedSignatures.keys(for: 0, ids: ids)
        let member = { (peer: SessionPeer) in StoredMember(peerID: peer.id.rawValue, name: peer.name, port: 7473, addresses: []) }
        var restored = SessionStateMachine.Restored(rooms: [(lab, [member(bob), member(carol)])], knownPeers: KnownPeerBook())
        restored.metadata = metadata
        restored.joinedAt = [lab: joined]
        var node = SessionStateMachine(
            configuration: configuration, restored: restored, addressBook: PeerDirectory(), ids: IDGenerator(seed: 1),
            shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        _ = node.linkUp(LinkHandle(1), peer: bob, dialedByUs: true, remoteAddress: nil, version: 3, at: at(1))
        _ = node.linkUp(LinkHandle(2), peer: carol, dialedByUs: true, remoteAddress: nil, version: 3, at: at(1))
        return node
    }

    func entry(_ key: String, _ value: String, time: UInt64 = 1_000_500, by author: Int, signer: Int? = nil) -> WireFrame.MetaEntry {
        let bytes = Envelope.metaBytes(room: lab, key: key, deleted: false, value: value, version: 1, timestamp: time, author: ids[author].rawValue)
        return .init(
            key: key, value: value, deleted: false, version: 1, timestampMilliseconds: time, author: ids[author].rawValue,
            signature: SimulatedSignatures.keys(for: signer ?? author, ids: ids).signature(over: bytes))
    }

    func stored(_ entry: WireFrame.MetaEntry) -> StoredMeta {
        StoredMeta(
            room: lab.rawValue, key: entry.key, value: entry.value, deleted: entry.deleted, version: entry.version,
            timestamp: Int64(entry.timestampMilliseconds), authorID: entry.author, authorKey: entry.signature.key, signature: entry.signature.bytes)
    }

    func departures(_ actions: [SessionAction]) -> [String] {
        actions.compactMap { if case .emit(.memberLeft(_, let peer, let code, let text, let fatal)) = $0 { "\(peer.name) \(code) \(fatal): \(text)" } else { nil } }
    }

    func meta(_ entries: [WireFrame.MetaEntry]) -> WireFrame { .roomMeta(.init(room: lab, entries: entries)) }

    @Test func theCreatorAdministersAndAnAdministratorRemovesAMemberEverywhere() throws {
        // Alice made the room (her record), so she administers it.
        var node = engine(metadata: [stored(entry("admin.creator", ids[0].rawValue, by: 0))])
        #expect(node.creator(of: lab) == me.id && node.administrators(of: lab) == [me.id])
        let actions = try node.remove(carol.id, from: lab, reason: "off\ttopic", at: at(10))
        // The entry goes to both members (carol hears it herself), then carol is out here.
        let told = actions.compactMap { action -> LinkHandle? in
            if case .send(let handle, let frames) = action, frames.contains(where: { if case .roomMeta = $0 { true } else { false } }) { handle } else { nil }
        }
        #expect(Set(told) == [LinkHandle(1), LinkHandle(2)])
        #expect(departures(actions) == ["carol removed true: carol left: removed by alice: off topic"])
        #expect(node.room(lab)?.members.map(\.peer.name) == ["bob"])
        #expect { _ = try node.remove(carol.id, from: lab, reason: "", at: at(11)) } throws: { ($0 as? SessionError)?.code == .unknownMember }
        #expect(throws: SessionError.self) { _ = try node.setMeta("removed.x", to: "y", in: lab, at: at(12)) }
    }

    @Test func aMemberWhoDoesNotAdministerIsRefusedAndItsEntriesDoNotCount() throws {
        var node = engine(metadata: [stored(entry("admin.creator", ids[1].rawValue, by: 1))])  // bob made it
        #expect { _ = try node.close(lab, reason: "mine", at: at(10)) } throws: { ($0 as? SessionError)?.code == .notAdmin }
        // Carol (no administrator) removes bob, closes the room, claims to have created it: nothing of it counts.
        let forged = node.received(
            [
                meta([
                    entry("removed." + ids[1].rawValue, "x", by: 2), entry("closed", "x", by: 2),
                    entry("admin.creator", ids[2].rawValue, by: 2),
                ])
            ], on: LinkHandle(2), at: at(11))
        #expect(departures(forged).isEmpty && node.creator(of: lab) == bob.id && node.room(lab)?.members.count == 2)
        // Bob names carol and, in the same frames, carol closes the room: taken in that order, and we leave.
        let closed = node.received([meta([entry("closed", "done", by: 2), entry("admin." + ids[2].rawValue, "admin", by: 1)])], on: LinkHandle(1), at: at(12))
        #expect(departures(closed) == ["alice closed true: lab was closed by carol: done"])
        #expect(node.room(lab) == nil)
        // A member that comes back talking of lab hears of the closing.
        let late = node.received([.roomMembers(.init(room: lab, members: []))], on: LinkHandle(1), at: at(13))
        #expect(late.contains { if case .send(LinkHandle(1), let frames) = $0 { frames.contains(meta([entry("closed", "done", by: 2)])) } else { false } })
    }

    @Test func aRemovalStandsUntilAnAdministratorInvitesTheMemberBack() throws {
        let creator = stored(entry("admin.creator", ids[1].rawValue, by: 1))
        // Removed (whenever we joined): we leave, told why.
        var node = engine(metadata: [creator], joined: 1_000_900)
        let actions = node.received([meta([entry("removed." + ids[0].rawValue, "spam", time: 1_000_500, by: 1)])], on: LinkHandle(1), at: at(5))
        #expect(departures(actions) == ["alice removed true: you were removed from lab by bob: spam"])
        #expect(node.room(lab) == nil)
        // Carol removed: no proof of hers, however new, and no member's list brings her back.
        var other = engine(metadata: [creator])
        _ = other.received([meta([entry("removed." + ids[2].rawValue, "spam", by: 1)])], on: LinkHandle(1), at: at(5))
        #expect(other.room(lab)?.members.map(\.peer.name) == ["bob"])
        let proof = WireFrame.MembershipProof(
            inviter: "", timestampMilliseconds: 9_000_000,
            signature: SimulatedSignatures.keys(for: 2, ids: ids)
                .signature(over: Envelope.membershipBytes(room: lab, member: ids[2].rawValue, inviter: "", timestamp: 9_000_000)))
        var listed = WireFrame.Member(peerID: ids[2].rawValue, name: "carol", port: 7473, addresses: [])
        listed.proof = proof
        _ = other.linkDown(LinkHandle(2), reason: .lost, at: at(6))
        _ = other.received([.roomMembers(.init(room: lab, members: [listed]))], on: LinkHandle(1), at: at(7))
        #expect(other.room(lab)?.members.map(\.peer.name) == ["bob"])
        // A member that does not administer the room cannot invite her back; an administrator can, which lifts it.
        #expect(
            other.beginInvite(carol, room: lab, at: at(8)).0
                == .finished(.refused("an administrator removed \(carol.id.short) from lab: only an administrator can invite it back")))
        var admin = engine(metadata: [stored(entry("admin.creator", ids[0].rawValue, by: 0))])
        _ = try admin.remove(carol.id, from: lab, reason: "spam", at: at(9))
        #expect(admin.metaEntry("removed." + ids[2].rawValue, in: lab)?.deleted == false)
        _ = admin.linkDown(LinkHandle(2), reason: .lost, at: at(9))
        #expect(admin.beginInvite(carol, room: lab, at: at(9)).0 == .dial)
        #expect(admin.metaEntry("removed." + ids[2].rawValue, in: lab)?.deleted == true)
    }

    @Test func aRemovedAdministratorLosesItsRightsAndTheCreatorsRecordComesOnlyFromTheInviter() throws {
        // Alice created lab and named bob; she removes bob: he no longer administers it.
        var node = engine(metadata: [stored(entry("admin.creator", ids[0].rawValue, by: 0)), stored(entry("admin." + ids[1].rawValue, "admin", by: 0))])
        #expect(node.administrators(of: lab) == [me.id, bob.id])
        _ = try node.remove(bob.id, from: lab, reason: "", at: at(10))
        #expect(node.administrators(of: lab) == [me.id])
        #expect(node.metaEntry("admin." + ids[1].rawValue, in: lab)?.deleted == true)
        // A room with no creator's record (an older lanchat made it): nobody can claim it later.
        var old = engine()
        _ = old.received([meta([entry("admin.creator", ids[2].rawValue, by: 2)])], on: LinkHandle(2), at: at(11))
        #expect(old.creator(of: lab) == nil)
    }

    @Test func anAdministratorNamedInTheSameFramesCountsForTheEntriesBeforeIt() throws {
        // Bob made lab; in one frame carol (not named yet) names alice, then bob names carol: both count.
        var node = engine(metadata: [stored(entry("admin.creator", ids[1].rawValue, by: 1))])
        let grantByCarol = entry("admin." + ids[0].rawValue, "admin", by: 2)
        let grantByBob = entry("admin." + ids[2].rawValue, "admin", by: 1)
        _ = node.received([meta([grantByCarol, grantByBob])], on: LinkHandle(1), at: at(5))
        #expect(node.administrators(of: lab) == [bob.id, carol.id, me.id])
    }

    /// An entry of any version, deletions included (`entry` writes version 1).
    func signed(_ key: String, _ value: String, version: UInt64, time: UInt64 = 1_000_500, by author: Int, deleted: Bool = false) -> WireFrame.MetaEntry {
        let bytes = Envelope.metaBytes(room: lab, key: key, deleted: deleted, value: value, version: version, timestamp: time, author: ids[author].rawValue)
        return .init(
            key: key, value: value, deleted: deleted, version: version, timestampMilliseconds: time, author: ids[author].rawValue,
            signature: SimulatedSignatures.keys(for: author, ids: ids).signature(over: bytes))
    }

    /// Issue 28, item 2, as tried: a member writes 255 keys (and the topic) at version 2^62. Before: the
    /// creator's `room set topic` failed ("topic has reached the last version"), and `remove` and `close`
    /// failed ("room lab has 256 keys already"). Now a version steps at most 2^20 past the one held, a
    /// member holds at most 128 keys at a receiver, and the administration's keys have a budget of their own.
    @Test func aMemberCannotFreezeTheMetadataNorBlockTheCreator() throws {
        var node = engine(metadata: [stored(entry("admin.creator", ids[0].rawValue, by: 0))])
        let last: UInt64 = 1 << 62
        let flood = [signed("topic", "mine", version: last, by: 1)] + (0..<255).map { signed("k\($0)", "x", version: last, by: 1) }
        for frame in flood.chunked(64) { _ = node.received([meta(frame)], on: LinkHandle(1), at: at(5)) }
        #expect(node.metaEntry("topic", in: lab) == nil, "an entry 2^62 versions past none was taken")
        // Within the step (2^20 past what we hold), and 300 keys: the member holds at most 128 of them.
        let step: UInt64 = 1 << 20
        _ = node.received([meta([signed("topic", "mine", version: step, by: 1)])], on: LinkHandle(1), at: at(6))
        #expect(node.metaEntry("topic", in: lab)?.version == step)
        _ = node.received([meta([signed("topic", "mine", version: 2 * step + 1, by: 1)])], on: LinkHandle(1), at: at(6))
        #expect(node.metaEntry("topic", in: lab)?.version == step, "a step of 2^20 + 1 was taken")
        for frame in (0..<300).map({ signed("k\($0)", "x", version: 1, by: 1) }).chunked(64) {
            _ = node.received([meta(frame)], on: LinkHandle(1), at: at(7))
        }
        let bobs = node.metadata(of: lab).filter { $0.author == ids[1].rawValue }.count
        #expect(bobs <= 128, "one member holds \(bobs) keys")
        // The creator sets and deletes the topic, writes a key of her own, names and demotes carol,
        // removes bob and closes the room (each tried, whatever the one before did).
        func attempt(_ what: String, _ body: () throws -> Void) {
            do { try body() } catch { Issue.record("\(what): \(error)") }
        }
        attempt("room set topic") {
            let version = try node.setMeta("topic", to: "ours", in: lab, at: at(8)).0.version; #expect(version == step + 1)
        }
        attempt("room set agenda") {
            let version = try node.setMeta("agenda", to: "1. demo", in: lab, at: at(8)).0.version; #expect(version == 1)
        }
        attempt("room delete topic") {
            let deleted = try node.setMeta("topic", to: nil, in: lab, at: at(9)).0.deleted; #expect(deleted)
        }
        attempt("admin carol") {
            _ = try node.setAdministrator(carol.id, of: lab, true, at: at(9))
            _ = try node.setAdministrator(carol.id, of: lab, false, at: at(9))
        }
        #expect(node.administrators(of: lab) == [me.id])
        attempt("remove bob") {
            let actions = try node.remove(bob.id, from: lab, reason: "flood", at: at(10))
            #expect(departures(actions) == ["bob removed true: bob left: removed by alice: flood"])
        }
        attempt("close") {
            let actions = try node.close(lab, reason: "done", at: at(11))
            #expect(departures(actions) == ["alice closed true: lab was closed by alice: done"])
        }
    }

    /// An administrator (bob, named by the creator) tries to make itself irremovable: its own removal
    /// deleted ahead at the last version, and a member it named (carol) lifting its removal after the
    /// creator's, far ahead. Before: `remove` failed ("removed.<bob> has reached the last version") and
    /// carol's lift was taken. Now the creator's entries of the administration's keys outrank any other
    /// administrator's, whatever the versions, and a version steps at most 2^20; and carol's naming, bob's,
    /// lapses with bob's removal.
    @Test func anAdministratorCannotMakeItselfIrremovable() throws {
        var node = engine(metadata: [stored(entry("admin.creator", ids[0].rawValue, by: 0)), stored(entry("admin." + ids[1].rawValue, "admin", by: 0))])
        let removedBob = "removed." + ids[1].rawValue
        _ = node.received(
            [
                meta([
                    signed(removedBob, "", version: 1 << 62, by: 1, deleted: true),
                    signed("admin." + ids[1].rawValue, "admin", version: 1 << 62, by: 1),
                    signed("admin." + ids[2].rawValue, "admin", version: 1, by: 1),
                ])
            ], on: LinkHandle(1), at: at(5))
        #expect(node.administrators(of: lab) == [me.id, bob.id, carol.id])
        _ = try node.remove(bob.id, from: lab, reason: "rogue", at: at(10))
        // Carol, whom bob named, lapses with him (administrators count from the creator).
        #expect(node.administrators(of: lab) == [me.id] && node.room(lab)?.members.map(\.peer.name) == ["carol"])
        #expect(node.metaEntry("admin." + ids[2].rawValue, in: lab)?.deleted == false)
        // Carol (bob's) lifts bob's removal and names bob again, 2^20 ahead: the creator's entries stand.
        let held = node.metaEntry(removedBob, in: lab)?.version ?? 0
        _ = node.received(
            [
                meta([
                    signed(removedBob, "", version: held + (1 << 20), by: 2, deleted: true),
                    signed("admin." + ids[1].rawValue, "admin", version: (1 << 20), by: 2),
                ])
            ], on: LinkHandle(2), at: at(11))
        #expect(node.metaEntry(removedBob, in: lab)?.author == ids[0].rawValue && node.metaEntry(removedBob, in: lab)?.deleted == false)
        #expect(node.administrators(of: lab) == [me.id])
        // (Lost by the creator's rank alone, and not answered: a member holding another creator's record
        // would answer back forever.) The same entries again: nothing sent back.
        let again = node.received([meta([signed(removedBob, "", version: held + (1 << 20), by: 2, deleted: true)])], on: LinkHandle(2), at: at(11))
        #expect(!again.contains { if case .send(_, let frames) = $0 { frames.contains { if case .roomMeta = $0 { true } else { false } } } else { false } })
        // The creator demotes carol, who cannot name herself back.
        _ = try node.setAdministrator(carol.id, of: lab, false, at: at(12))
        _ = node.received([meta([signed("admin." + ids[2].rawValue, "admin", version: 1 << 19, by: 2)])], on: LinkHandle(2), at: at(13))
        #expect(node.administrators(of: lab) == [me.id])
    }

    /// Only the creator changes what the creator wrote of the administration: an administrator it named
    /// cannot lift its removal of carol (it could, before: an administrator's lift at a higher version won).
    @Test func onlyTheCreatorLiftsTheCreatorsRemoval() throws {
        var node = engine(metadata: [stored(entry("admin.creator", ids[1].rawValue, by: 1)), stored(entry("admin." + ids[0].rawValue, "admin", by: 1))])
        _ = node.received([meta([entry("removed." + ids[2].rawValue, "spam", by: 1)])], on: LinkHandle(1), at: at(5))
        #expect(node.room(lab)?.members.map(\.peer.name) == ["bob"])
        _ = node.linkDown(LinkHandle(2), reason: .lost, at: at(6))
        #expect(node.beginInvite(carol, room: lab, at: at(7)).0 == .finished(.refused("lab's creator removed \(carol.id.short): only the creator can invite it back")))
        #expect(node.metaEntry("removed." + ids[2].rawValue, in: lab)?.deleted == false)
    }

    /// The restore loaded 512 entries in key order: ordinary keys sorting before `admin.creator` pushed out
    /// the administration. Before: the creator's record and the removal were gone after a restart. Now
    /// the administration's keys are loaded first, whatever the rest.
    @Test func theAdministrationSurvivesARestartWhateverTheOtherKeys() throws {
        let filler = (0..<600).map { stored(signed(String(format: "a%03d", $0), "x", version: 1, by: 1)) }
        let administration = [stored(entry("admin.creator", ids[0].rawValue, by: 0)), stored(entry("removed." + ids[2].rawValue, "spam", by: 0))]
        let node = engine(metadata: filler + administration)
        #expect(node.creator(of: lab) == me.id)
        #expect(node.metaEntry("removed." + ids[2].rawValue, in: lab)?.value == "spam")
        #expect(node.metadata(of: lab).filter { !SessionStateMachine.isReservedKey($0.key) }.count <= 512)
    }

    @Test func everyWayOfDroppingHasACode() {
        let cases: [(PeerCloseReason, String)] = [
            (.timedOut, "timed_out"), (.lost, "lost"), (.goodbye(.leaving, "duplicate connection"), "duplicate"),
            (.goodbye(.refused, "key changed"), "refused"), (.goodbye(.shutdown, ""), "shutdown"), (.protocolError("x"), "protocol_error"),
        ]
        for (reason, code) in cases { #expect(SessionStateMachine.code(of: reason).rawValue == code) }
        var node = engine()
        let down = node.linkDown(LinkHandle(2), reason: .timedOut, at: at(5))
        #expect(departures(down) == ["carol timed_out false: carol left: timed out"])
    }
}

extension Array {
    func chunked(_ size: Int) -> [[Element]] { stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) } }
}
