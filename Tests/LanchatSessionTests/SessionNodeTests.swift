import Glibc
import LanchatCore
import LanchatEngine
import LanchatIdentity
import LanchatSecurity
@testable import LanchatSession
@testable import LanchatStore
import LanchatTransport
import LanchatWire
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing

@Suite(.serialized) struct SessionNodeTests {
    @Test func inviteAcceptSendAcknowledge() async throws {
        let alice = try await TestNode("alice")
        let bob = try await TestNode("bob")
        alice.knows(bob)
        #expect(await alice.node.invite(bob.peer, room: lab, context: Array("hi".utf8), timeout: .seconds(5)) == .accepted)
        #expect(await alice.node.room(lab)?.members.map(\.peer.name) == ["bob"])
        #expect(await bob.node.room(lab)?.members.map(\.peer.name) == ["alice"])
        let receipt = try await alice.node.send("hello bob", room: lab)
        #expect(receipt.recipients == 1 && receipt.sentNow == 1)
        try await eventually("bob has it") { try await bob.texts() == ["hello bob"] }
        try await eventually("acknowledged") { await alice.node.unacknowledged().isEmpty }
        // Inviting a member again.
        #expect(await alice.node.invite(bob.peer, room: lab, context: [], timeout: .seconds(5)) == .alreadyMember)
        await alice.stop()
        await bob.stop()
    }

    /// `lanchat ping` dials a connection of its own to a member. Said to be a probe, it is answered and
    /// left alone: the member's link stays up. Without the capability the member's side would take it as
    /// the member's new connection and close the old one (the control case below), which is how a ping
    /// right after an invitation once lost either its connection or the member's.
    @Test func aProbeConnectionLeavesTheMembersLinkAlone() async throws {
        let (alice, bob) = try await TestNode.aliceAndBobInLab()
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: bob.listener.localAddress!.port!)
        let left: () -> Int = { alice.events.filter { if case .memberLeft = $0 { true } else { false } }.count }

        let probe = try await alice.connector.dial(address, expected: bob.identity.peerID, theirs: .required, probe: true)
        for _ in 0..<5 { _ = try await probe.ping() }
        await probe.close()
        let receipt = try await alice.node.send("after the probe", room: lab)
        #expect(receipt.sentNow == 1)
        try await eventually("bob has it") { try await bob.texts() == ["after the probe"] }
        #expect(left() == 0)

        // A probe that sends anything but PING is closed, and the link still stands.
        let rude = try await alice.connector.dial(address, expected: bob.identity.peerID, theirs: .required, probe: true)
        rude.send([.ack([WireID.random()])])
        try await eventually("the rude probe closed") { !rude.channel.isActive }
        #expect(left() == 0)

        // At most two probes from one peer at once: a third is refused; those open close with the node.
        let first = try await alice.connector.dial(address, expected: bob.identity.peerID, theirs: .required, probe: true)
        let second = try await alice.connector.dial(address, expected: bob.identity.peerID, theirs: .required, probe: true)
        // (Refused once bob has its HELLO: the dial itself may still complete, or fail if the GOODBYE wins.)
        if let third = try? await alice.connector.dial(address, expected: bob.identity.peerID, theirs: .required, probe: true) {
            try await eventually("the third probe refused") { !third.channel.isActive }
        }
        _ = try await first.ping()
        _ = try await second.ping()
        #expect(left() == 0)
        // A probe that closed frees its place.
        await second.close()
        try await eventually("a place for another probe") {
            guard let again = try? await alice.connector.dial(address, expected: bob.identity.peerID, theirs: .required, probe: true) else { return false }
            defer { Task { await again.close() } }
            return (try? await again.ping()) != nil
        }

        // The control: the same dial without the capability replaces alice's link on bob's side.
        let plain = try await alice.connector.dial(address, expected: bob.identity.peerID, theirs: .required)
        try await eventually("alice's link was replaced") { left() > 0 }
        await plain.close()
        await bob.stop()
        try await eventually("the probe closed with bob") { !first.channel.isActive }
        await alice.stop()
    }

    /// A history of several pieces (5,000 messages each) on both sides: the inviter writes it piece by
    /// piece, the newcomer reads and checks the next piece while it stores one; it arrives whole and in order.
    @Test func aHistoryOfSeveralPiecesArrivesWhole() async throws {
        let count = 12_345
        let alice = try await TestNode("alice", historyForNewcomers: count)
        let bob = try await TestNode("bob")
        let carol = try await TestNode("carol")
        alice.knows(bob)
        alice.knows(carol)
        #expect(await alice.node.invite(bob.peer, room: lab, context: [], timeout: .seconds(10)) == .accepted)
        for start in stride(from: 0, to: count, by: 500) {
            _ = try await alice.node.send((start..<min(count, start + 500)).map { "m\($0)" }, room: lab)
        }
        #expect(await alice.node.invite(carol.peer, room: lab, context: [], timeout: .seconds(10)) == .accepted)
        try await eventually("carol has the history", timeout: .seconds(180)) { try await carol.texts(limit: 20_000).count >= count }
        #expect(try await carol.texts(limit: 20_000) == (0..<count).map { "m\($0)" })
        await alice.stop()
        await bob.stop()
        await carol.stop()
    }

    @Test func declineAndExpiry() async throws {
        let alice = try await TestNode("alice")
        let bob = try await TestNode("bob", autoAccept: .never)
        alice.knows(bob)
        async let declined = alice.node.invite(bob.peer, room: lab, context: [], timeout: .seconds(5))
        try await eventually("bob is asked") { await !bob.node.invitations.isEmpty }
        let invitation = await bob.node.invitations[0]
        #expect(invitation.from.name == "alice" && invitation.room == lab && invitation.shortCode.count == 9)
        _ = try await bob.node.decline(String(invitation.id.description.prefix(6)), reason: "busy")
        #expect(await declined == .declined("busy"))
        #expect(await alice.node.invite(bob.peer, room: lab, context: [], timeout: .seconds(1)) == .expired)
        #expect(await bob.node.invitations.isEmpty)
        #expect(await bob.node.roomIDs.isEmpty)
        await #expect(throws: SessionError.self) { try await bob.node.accept(invitation.id.description) }
        await alice.stop()
        await bob.stop()
    }

    @Test func unreachablePeer() async throws {
        let alice = try await TestNode("alice")
        let ghost = SessionPeer(id: PeerID(String(repeating: "a", count: 52))!, name: "ghost")
        guard case .unreachable = await alice.node.invite(ghost, room: lab, context: [], timeout: .seconds(1)) else {
            Issue.record("expected unreachable")
            return
        }
        await alice.stop()
    }

    @Test func outboxDeliversOnceAfterTheMemberRestarts() async throws {
        let alice = try await TestNode("alice")
        var bob = try await TestNode("bob")
        alice.knows(bob)
        #expect(await alice.node.invite(bob.peer, room: lab, context: [], timeout: .seconds(5)) == .accepted)
        let bobDirectory = bob.directory
        await bob.stop()
        try await eventually("bob disconnected") { await !alice.node.isConnected(bob.identity.peerID) }
        let receipt = try await alice.node.send("while you were away", room: lab)
        #expect(receipt.sentNow == 0 && receipt.recipients == 1)
        #expect(await alice.node.unacknowledged()[bob.identity.peerID] == 1)
        bob = try await TestNode("bob", directory: bobDirectory)
        alice.knows(bob)
        bob.knows(alice)
        try await eventually("delivered after the restart") { try await bob.texts() == ["while you were away"] }
        try await eventually("acknowledged") { await alice.node.unacknowledged().isEmpty }
        // Retransmission rounds do not duplicate it.
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await bob.texts() == ["while you were away"])
        await alice.stop()
        await bob.stop()
    }

    @Test func aKnownNameWithAnotherKeyIsAWarningNotARefusal() async throws {
        let (alice, bob) = try await TestNode.aliceAndBobInLab()
        // Another host named bob (a new key): alice's person is warned with both codes, and both are members.
        let otherBob = try await TestNode("bob")
        otherBob.knows(alice)
        #expect(await otherBob.node.invite(alice.peer, room: lab, context: [], timeout: .seconds(5)) == .accepted)
        // Events reach the log through a task of their own: wait for it.
        try await eventually("the warning") {
            alice.events.contains { event in
                guard case .security(let peer, let text) = event else { return false }
                return peer.id == otherBob.identity.peerID && text.contains("WARNING: 'bob'") && text.contains(bob.identity.peerID.short)
            }
        }
        #expect(Set(await alice.node.room(lab)?.members.map(\.peer.id) ?? []) == [bob.identity.peerID, otherBob.identity.peerID])
        await alice.stop()
        await bob.stop()
        await otherBob.stop()
    }

    @Test func sendRefusesBadInput() async throws {
        let alice = try await TestNode("alice")
        await #expect(throws: SessionError.self) { try await alice.node.send("x", room: lab) }
        let bob = try await TestNode("bob")
        alice.knows(bob)
        _ = await alice.node.invite(bob.peer, room: lab, context: [], timeout: .seconds(5))
        for bad in [String(repeating: "x", count: 65537), "", "bell \u{7}", "esc \u{1b}[2J"] {
            await #expect(throws: SessionError.self) { try await alice.node.send(bad, room: lab) }
        }
        let stranger = PeerID(String(repeating: "b", count: 52))!
        await #expect(throws: SessionError.self) { try await alice.node.send("hi", room: lab, to: [stranger]) }
        await alice.stop()
        await bob.stop()
    }

    /// Our own messages leave before their commit (its sync then overlaps the member's), but only while
    /// our sends commit: a send whose commit fails is an error that says members may have it; the next
    /// goes commit-first, so while the store fails nothing more leaves; once a send commits again, sending
    /// ahead resumes. No sequence is used twice.
    @Test func aSendLeavesBeforeItsCommitOnlyWhileSendsCommit() async throws {
        let (alice, bob) = try await TestNode.aliceAndBobInLab()
        _ = try await alice.node.send("stored", room: lab)
        try await alice.node.executeOnStore("PRAGMA query_only = 1")  // (every write fails from here)
        do {
            _ = try await alice.node.send("sent, not stored", room: lab)
            Issue.record("a send whose commit failed returned")
        } catch {
            #expect(error.code == .storage && error.message.contains("members may have it"), "\(error)")
        }
        do {
            _ = try await alice.node.send("neither", room: lab)
            Issue.record("a send whose commit failed returned")
        } catch {
            #expect(error.code == .storage && !error.message.contains("may have it"), "\(error)")
        }
        // Neither failed send is left to resend: bob acknowledged the first; the second left the outbox.
        try await eventually("nothing left to resend") { await alice.node.unacknowledged().isEmpty }
        try await alice.node.executeOnStore("PRAGMA query_only = 0")
        _ = try await alice.node.send("stored again", room: lab)
        _ = try await alice.node.send("ahead again", room: lab)
        // Frames on a link arrive in order: had "neither" left, it would be before "stored again".
        try await eventually("bob has the last") { try await bob.texts().last == "ahead again" }
        #expect(try await bob.texts() == ["stored", "sent, not stored", "stored again", "ahead again"])
        #expect(try await alice.texts() == ["stored", "stored again", "ahead again"])
        let sequences = try await bob.node.history(room: "lab", limit: 10).filter { $0.kind == .text }.map(\.sequence)
        #expect(sequences == [1, 2, 4, 5], "\(sequences)")
        await alice.stop()
        await bob.stop()
    }

    /// The store's sync runs off the event loop (`StoreSync`): while bob's sync is held, his node goes
    /// on (the message is stored, readable and reported), but no acknowledgement leaves until the sync
    /// is done; three messages committed meanwhile share the next sync (one, not three).
    @Test func anAcknowledgementWaitsForTheSyncAndCommitsShareOne() async throws {
        let (alice, bob) = try await TestNode.aliceAndBobInLab()
        _ = try await alice.node.send("before", room: lab)
        try await eventually("acknowledged") { await alice.node.unacknowledged().isEmpty }
        let sync = try #require(await bob.node.storeSync)
        let gate = SyncGate(sync)
        let base = sync.syncs.load(ordering: .relaxed)
        _ = try await alice.node.send("held", room: lab)
        try await eventually("bob's sync is held") { gate.holding.withLock { $0 } }
        try await eventually("bob stored it") { try await bob.texts().last == "held" }
        #expect(bob.events.contains { if case .message(let m) = $0 { m.stored.body == "held" } else { false } })
        for text in ["one", "two", "three"] { _ = try await alice.node.send(text, room: lab) }
        try await eventually("bob stored them") { try await bob.texts().suffix(3) == ["one", "two", "three"] }
        try await Task.sleep(for: .milliseconds(300))
        #expect(await alice.node.unacknowledged()[bob.identity.peerID] == 4, "acknowledged before bob's sync")
        gate.held.withLock { $0 = false }
        try await eventually("acknowledged after the sync") { await alice.node.unacknowledged().isEmpty }
        #expect(sync.syncs.load(ordering: .relaxed) - base == 2)
        sync.beforeSync.withLock { $0 = nil }
        await alice.stop()
        await bob.stop()
    }

    /// The store runs on a thread of its own (`StoreThread`): while bob's is held, his event loop goes on
    /// (his node answers), but the message that arrived is neither reported nor acknowledged; once the
    /// thread runs again, it is stored, reported and acknowledged.
    @Test func theStoreRunsOnItsOwnThreadAndAnAcknowledgementWaitsForIt() async throws {
        let (alice, bob) = try await TestNode.aliceAndBobInLab()
        _ = try await alice.node.send("before", room: lab)
        try await eventually("acknowledged") { await alice.node.unacknowledged().isEmpty }
        let store = await bob.node.storeThread
        let gate = SyncGate(store)
        _ = try await alice.node.send("held", room: lab)
        try await eventually("bob's store thread is held") { gate.holding.withLock { $0 } }
        try await Task.sleep(for: .milliseconds(300))
        // Bob's event loop is free: his node answers what needs no store, and his history from the
        // connection that reads (`StoreReader`): what was committed.
        #expect(await bob.node.memberNames(in: lab)[alice.identity.peerID.rawValue] == "alice")
        #expect(try await bob.texts().last == "before")
        #expect(!bob.events.contains { if case .message(let m) = $0 { m.stored.body == "held" } else { false } })
        #expect(await alice.node.unacknowledged()[bob.identity.peerID] == 1, "acknowledged before bob's store answered")
        gate.held.withLock { $0 = false }
        try await eventually("bob stored it") { try await bob.texts().last == "held" }
        try await eventually("acknowledged after the store answered") { await alice.node.unacknowledged().isEmpty }
        #expect(bob.events.contains { if case .message(let m) = $0 { m.stored.body == "held" } else { false } })
        store.beforeAnswer.withLock { $0 = nil }
        await alice.stop()
        await bob.stop()
    }

    /// Back-pressure: the event loop no longer waits for the store, so while bob's store thread is held
    /// his node stops reading from its peers once `storeMarks.high` requests wait (what alice sends
    /// waits in TCP's buffers, not in bob's memory), and reads again once the store caught up.
    @Test func aNodeStopsReadingWhileItsStoreIsBehind() async throws {
        let (alice, bob) = try await TestNode.aliceAndBobInLab()
        await bob.node.setStoreMarks(high: 4, low: 1)
        let store = await bob.node.storeThread
        let gate = SyncGate(store)
        for n in 1...300 { _ = try await alice.node.send("m\(n)", room: lab) }
        try await eventually("bob's store thread is held") { gate.holding.withLock { $0 } }
        try await eventually("bob stopped reading") { await bob.node.readingPaused }
        try await Task.sleep(for: .milliseconds(300))
        let waiting = await bob.node.storeRequestsWaiting
        #expect(waiting <= 4 + 2, "\(waiting) store requests wait")
        gate.held.withLock { $0 = false }
        try await eventually("bob has all of it", timeout: .seconds(20)) { try await bob.texts().suffix(300) == (1...300).map { "m\($0)" } }
        try await eventually("acknowledged") { await alice.node.unacknowledged().isEmpty }
        let (paused, pauses) = await (bob.node.readingPaused, bob.node.readingPauses)
        #expect(!paused && pauses >= 1)
        store.beforeAnswer.withLock { $0 = nil }
        await alice.stop()
        await bob.stop()
    }

    /// The log's checkpoints run on the store's checkpoint thread, on a second connection, not on the
    /// event loop; the history is whole after them and after a restart.
    @Test func checkpointsRunOnTheirOwnThread() async throws {
        let (alice, bob) = try await TestNode.aliceAndBobInLab()
        let sync = try #require(await bob.node.storeSync)
        for n in 1...20 { _ = try await alice.node.send("m\(n)", room: lab) }
        try await eventually("bob checkpointed on its thread") { sync.checkpoints.load(ordering: .relaxed) > 0 }
        #expect(try await bob.texts().suffix(20) == (1...20).map { "m\($0)" })
        await alice.stop()
        await bob.stop()
    }

    /// A metadata write and an administrative change return only once they are on disk, as a send does
    /// (before, they returned after the commit, before its sync).
    @Test func metadataAndAdministrationReturnOnceSynced() async throws {
        let alice = try await TestNode("alice", signing: true)
        let bob = try await TestNode("bob", signing: true)
        alice.knows(bob)
        #expect(await alice.node.invite(bob.peer, room: lab, context: [], timeout: .seconds(5)) == .accepted)
        let sync = try #require(await alice.node.storeSync)
        let gate = SyncGate(sync)
        let returned = Mutex<[String]>([])
        let node = alice.node
        let bobID = bob.identity.peerID
        let writes = Task {
            _ = try await node.setMeta("note", to: "held", in: lab, ifVersion: nil)
            returned.withLock { $0.append("meta") }
            try await node.setAdministrator(bobID, of: lab, true)
            returned.withLock { $0.append("admin") }
        }
        try await eventually("alice's sync is held") { gate.holding.withLock { $0 } }
        try await Task.sleep(for: .milliseconds(300))
        #expect(returned.withLock { $0 }.isEmpty, "setMeta returned before its sync")
        #expect(await node.metaEntry("note", in: lab)?.value == "held")
        gate.held.withLock { $0 = false }
        try await writes.value
        #expect(returned.withLock { $0 } == ["meta", "admin"])
        sync.beforeSync.withLock { $0 = nil }
        await alice.stop()
        await bob.stop()
    }

    /// After a restart the first send in a room commits first (a crash before the commit of one that went
    /// first, then another, must not reuse its numbers), and the room's sequence continues
    /// `sendAheadLimit` past the highest stored.
    @Test func theFirstSendAfterARestartCommitsFirst() async throws {
        let (alice, bob) = try await TestNode.aliceAndBobInLab()
        _ = try await alice.node.send("one", room: lab)
        _ = try await alice.node.send("two", room: lab)
        await alice.stop()
        let again = try await TestNode("alice", directory: alice.directory)
        again.knows(bob)
        try await eventually("alice connected to bob again") { await again.node.room(lab)?.members.first?.state == .connected }
        try await again.node.executeOnStore("PRAGMA query_only = 1")
        do {
            _ = try await again.node.send("lost", room: lab)
            Issue.record("a send whose commit failed returned")
        } catch {
            #expect(error.code == .storage && !error.message.contains("may have it"), "\(error)")
        }
        try await again.node.executeOnStore("PRAGMA query_only = 0")
        _ = try await again.node.send("after", room: lab)
        try await eventually("bob has the last") { try await bob.texts().last == "after" }
        #expect(try await bob.texts() == ["one", "two", "after"])
        let sequences = try await bob.node.history(room: "lab", limit: 10).filter { $0.kind == .text }.map(\.sequence)
        let skip = Int64(SessionStateMachine.sendAheadLimit)
        #expect(sequences == [1, 2, 2 + skip + 2], "\(sequences)")
        await again.stop()
        await bob.stop()
    }
}

@Suite(.serialized) struct TransferTests {
    @Test func aFileArrivesIdenticalOnlyFromRoomMembers() async throws {
        let alice = try await TestNode("alice")
        var template = Array("/tmp/lanchat-dl-XXXXXX".utf8CString)
        let downloads = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        let bob = try await TestNode("bob", downloads: downloads)
        alice.knows(bob)
        let source = alice.directory + "/data.bin"
        var bytes = [UInt8](repeating: 0, count: 3 << 20)
        for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: index &* 31 &+ index >> 9) }
        let fd = open(source, O_WRONLY | O_CREAT, 0o600)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        // Not in a room together yet: refused.
        _ = try await alice.node.sendFile(source, to: bob.peer)
        try await eventually("refused") { await alice.node.transfers.contains { $0.state == .refused } }
        #expect(await alice.node.invite(bob.peer, room: lab, context: [], timeout: .seconds(5)) == .accepted)
        _ = try await alice.node.sendFile(source, to: bob.peer)
        try await eventually("complete at both ends") {
            let sent = await alice.node.transfers.contains { $0.state == .complete }
            let received = await bob.node.transfers.contains { $0.state == .complete }
            return sent && received
        }
        let placed = await bob.node.transfers.first { $0.state == .complete }!.path!
        #expect(placed == downloads + "/data.bin")
        let readBack = open(placed, O_RDONLY)
        var copy = [UInt8](repeating: 0, count: bytes.count + 1)
        let n = copy.withUnsafeMutableBytes { read(readBack, $0.baseAddress, $0.count) }
        close(readBack)
        #expect(n == bytes.count && Array(copy[0..<n]) == bytes)
        // An empty file: nothing to wait for, verified and placed at once.
        let empty = alice.directory + "/empty.txt"
        close(open(empty, O_WRONLY | O_CREAT, 0o600))
        _ = try await alice.node.sendFile(empty, to: bob.peer)
        try await eventually("the empty file placed") { await bob.node.transfers.contains { $0.state == .complete && $0.name == "empty.txt" } }
        #expect(access(downloads + "/empty.txt", F_OK) == 0)
        await #expect(throws: SessionError.self) { try await alice.node.sendFile(alice.directory, to: bob.peer) }  // a directory
        await #expect(throws: SessionError.self) { try await alice.node.sendFile("/nonexistent/file", to: bob.peer) }
        await alice.stop()
        await bob.stop()
    }

    @Test func aResourceProgressFollowsAndCancels() async throws {
        let (alice, bob) = try await TestNode.aliceAndBobInLab()
        let source = alice.directory + "/small.bin"
        let fd = open(source, O_WRONLY | O_CREAT, 0o600)
        _ = [UInt8](repeating: 7, count: 100_000).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        let progress = try await alice.node.sendResource(at: source, to: bob.peer)
        try await eventually("complete") { await progress.snapshot()?.state == .complete }
        let done = await progress.snapshot()!
        #expect(done.done == 100_000 && done.size == 100_000 && done.direction == .outgoing)
        await #expect(throws: SessionError.self) { try await progress.cancel() }  // ended already
        await alice.stop()
        await bob.stop()
    }
}
