import LanchatCore
import LanchatEngine
import LanchatWire
import NIOCore
import Testing

/// The transfer part of the engine, one input at a time: what it sends, persists and asks the shell
/// to do with files.
@Suite struct TransferTableTests {
    let me = SessionPeer(id: SessionStateMachineTests.peerID(0xf0), name: "alice")
    let bob = SessionPeer(id: SessionStateMachineTests.peerID(0x10), name: "bob")
    let stranger = SessionPeer(id: SessionStateMachineTests.peerID(0x30), name: "mallory")
    let lab = RoomID("lab")!
    let handle = LinkHandle(1)

    func at(_ ms: Int64) -> EngineTime { EngineTime(monotonic: ms, wall: 1_000_000 + ms) }

    /// In `lab` with bob (handle 1); chunks of 10 bytes, a window of 30.
    func engine() -> SessionStateMachine {
        var configuration = SessionStateMachine.Configuration(ownID: me.id, ownName: me.name, port: 7473, autoAccept: .never)
        configuration.transferLimits.chunkSize = 10
        configuration.transferLimits.window = 30
        configuration.transferLimits.progressEvery = 10
        configuration.transferLimits.sentMarkAhead = 20
        configuration.transferLimits.maximumSize = 1000
        configuration.transferLimits.maximumIncomingPerPeer = 2
        let members = [StoredMember(peerID: bob.id.rawValue, name: bob.name, port: 7473, addresses: [])]
        var node = SessionStateMachine(
            configuration: configuration, restored: .init(rooms: [(lab, members)]), addressBook: NoAddresses(), ids: IDGenerator(seed: 1),
            shortCode: { _ in "1234-5678" })
        _ = node.start(at: at(0))
        _ = node.linkUp(handle, peer: bob, dialedByUs: true, remoteAddress: nil, at: at(0))
        return node
    }

    func files(_ actions: [SessionAction]) -> [FileAction] {
        actions.compactMap { if case .file(let action) = $0 { action } else { nil } }
    }

    func frames(_ actions: [SessionAction]) -> [WireFrame] {
        actions.flatMap { action -> [WireFrame] in
            if case .send(_, let frames) = action { return frames }
            return []
        }
    }

    func ended(_ actions: [SessionAction]) -> TransferInfo? {
        actions.compactMap { if case .emit(.transfer(let info)) = $0, info.state.ended { info } else { nil } }.last
    }

    let file = OfferedFile(path: "/home/alice/a.bin", name: "a.bin", size: 45, modifiedMilliseconds: 7, identity: "1:2")

    @Test func aSenderReadsWithinItsWindowSendsTheDigestAndEndsWhenTheReceiverSaysComplete() throws {
        var node = engine()
        let (id, offered) = try node.offerResource(file, to: bob.id, at: at(0))
        #expect(offered.contains { if case .persist(.saveTransfer(let saved)) = $0 { saved.path == file.path && saved.outgoing } else { false } })
        guard case .resourceOffer(let offer) = frames(offered).first else { Issue.record("no offer"); return }
        #expect(offer.digestFollows && offer.size == 45)
        // Accepted at 0: one read at a time, 10 bytes each.
        let accepted = node.received([.resourceAccept(.init(id: id, offset: 0))], on: handle, at: at(1))
        #expect(files(accepted) == [.read(id, offset: 0, count: 10)])
        var reads: [FileAction] = []
        var offset: UInt64 = 0
        var out = node.fileRead(id, offset: 0, data: ByteBuffer(bytes: [UInt8](repeating: 1, count: 10)), digest: nil, at: at(2))
        #expect(frames(out).count == 1)
        reads += files(out)
        offset = 10
        // The window (30) stops the reads at 30 until progress comes.
        while case .read(_, let at0, let count)? = reads.last, at0 == offset {
            out = node.fileRead(id, offset: at0, data: ByteBuffer(bytes: [UInt8](repeating: 1, count: count)), digest: nil, at: at(3))
            reads += files(out)
            offset += UInt64(count)
        }
        #expect(offset == 30)
        // Progress at 20: the next read (30..40), then the last 5 bytes with the digest.
        out = node.received([.resourceAccept(.init(id: id, offset: 20))], on: handle, at: at(4))
        #expect(files(out) == [.read(id, offset: 30, count: 10)])
        out = node.fileRead(id, offset: 30, data: ByteBuffer(bytes: [UInt8](repeating: 1, count: 10)), digest: nil, at: at(5))
        #expect(files(out) == [.read(id, offset: 40, count: 5)])
        let digest = [UInt8](repeating: 9, count: 32)
        out = node.fileRead(id, offset: 40, data: ByteBuffer(bytes: [UInt8](repeating: 1, count: 5)), digest: digest, at: at(6))
        #expect(frames(out).contains(.resourceDigest(id: id, sha256: digest)))
        #expect(files(out).isEmpty)
        out = node.received([.resourceEnd(.init(id: id, status: .complete))], on: handle, at: at(7))
        #expect(ended(out)?.state == .complete)
        #expect(ended(out)?.done == 45)
        #expect(files(out) == [.close(id, removePart: false)])
        #expect(out.contains(.persist(.deleteTransfer(id))))
        #expect(node.diagnostics.outgoingTransfers == 0)
    }

    @Test func aDroppedConnectionWaitsAndTheNewOneResumesWhereTheReceiverSays() throws {
        var node = engine()
        let (id, _) = try node.offerResource(file, to: bob.id, at: at(0))
        _ = node.received([.resourceAccept(.init(id: id, offset: 0))], on: handle, at: at(1))
        _ = node.fileRead(id, offset: 0, data: ByteBuffer(bytes: [UInt8](repeating: 1, count: 10)), digest: nil, at: at(2))
        let down = node.linkDown(handle, reason: .lost, at: at(3))
        #expect(down.contains { if case .emit(.transfer(let info)) = $0 { info.state == .waiting } else { false } })
        // The read under way when the connection dropped is not sent anywhere.
        #expect(frames(node.fileRead(id, offset: 10, data: ByteBuffer(bytes: [1, 2]), digest: nil, at: at(4))).isEmpty)
        // Back: the offer goes again; the receiver held 10; reads go on from there.
        let up = node.linkUp(LinkHandle(2), peer: bob, dialedByUs: true, remoteAddress: nil, at: at(5)).actions
        #expect(frames(up).contains { if case .resourceOffer(let offer) = $0 { offer.id == id } else { false } })
        let resumed = node.received([.resourceAccept(.init(id: id, offset: 10))], on: LinkHandle(2), at: at(6))
        #expect(files(resumed) == [.read(id, offset: 10, count: 10)])
    }

    @Test func aPartFileThatCannotBeCreatedEndsTheTransferLikeAnyOther() throws {
        var node = engine()
        let id = WireID(bytes: [UInt8](repeating: 4, count: 16))!
        let offer = WireFrame.ResourceOffer(
            id: id, room: nil, kind: .file, name: Array("c.txt".utf8), size: 15, sha256: [UInt8](repeating: 5, count: 32),
            modifiedMilliseconds: 9)
        _ = node.received([.resourceOffer(offer)], on: handle, at: at(0))
        _ = node.incomingLookedUp(id, .none, at: at(1))
        let out = node.partOpened(id, .failed("cannot write in downloads /d: Permission denied"), at: at(2))
        #expect(frames(out) == [.resourceEnd(.init(id: id, status: .failed, text: "cannot write in downloads /d: Permission denied"))])
        #expect(ended(out)?.state == .failed)
        // Listed with the others (`lanchat transfers`), and its slot is free.
        #expect(node.endedTransfers.map(\.id) == [id])
        #expect(node.diagnostics.incomingTransfers == 0)
    }

    @Test func aReceiverChecksTheOfferWritesInOrderVerifiesAndPlaces() throws {
        var node = engine()
        let id = WireID(bytes: [UInt8](repeating: 3, count: 16))!
        let digest = [UInt8](repeating: 5, count: 32)
        let offer = WireFrame.ResourceOffer(id: id, room: nil, kind: .file, name: Array("b.txt".utf8), size: 15, sha256: digest, modifiedMilliseconds: 9)
        var out = node.received([.resourceOffer(offer)], on: handle, at: at(0))
        #expect(files(out) == [.lookUp(offer, from: bob)])
        out = node.incomingLookedUp(id, .none, at: at(1))
        #expect(files(out) == [.openPart(offer, resume: false)])
        out = node.partOpened(id, .opened(path: "/d/.part", held: 0, freeBytes: 1 << 30), at: at(2))
        #expect(frames(out) == [.resourceAccept(.init(id: id, offset: 0))])
        #expect(out.contains { if case .persist(.saveTransfer(let saved)) = $0 { saved.path == "/d/.part" && !saved.outgoing } else { false } })
        out = node.received([.resourceChunk(.init(id: id, offset: 0, data: ByteBuffer(bytes: [UInt8](repeating: 1, count: 10))))], on: handle, at: at(3))
        #expect(files(out) == [.write(id, offset: 0, ByteBuffer(bytes: [UInt8](repeating: 1, count: 10)))])
        // Progress once written (not when it arrived).
        out = node.written(id, upTo: 10, at: at(4))
        #expect(frames(out) == [.resourceAccept(.init(id: id, offset: 10))])
        // A chunk that overlaps what is held: only the new bytes are written; the hash only when every byte is.
        out = node.received([.resourceChunk(.init(id: id, offset: 5, data: ByteBuffer(bytes: [UInt8](repeating: 2, count: 10))))], on: handle, at: at(5))
        #expect(files(out) == [.write(id, offset: 10, ByteBuffer(bytes: [UInt8](repeating: 2, count: 5)))])
        out = node.written(id, upTo: 15, at: at(6))
        #expect(files(out) == [.verify(id)])
        // A digest that does not match: failed, the part file removed, the sender told.
        var bad = node
        out = bad.hashed(id, digest: [UInt8](repeating: 0, count: 32), at: at(7))
        #expect(files(out) == [.close(id, removePart: true)])
        #expect(ended(out)?.state == .failed)
        #expect(frames(out).contains { if case .resourceEnd(let end) = $0 { end.status == .failed } else { false } })
        // The right one: placed, and only then "complete".
        out = node.hashed(id, digest: digest, at: at(7))
        #expect(files(out) == [.place(id, name: "b.txt", modifiedMilliseconds: 9)])
        #expect(frames(out).isEmpty)
        out = node.placed(id, path: "/d/b.txt", at: at(8))
        #expect(frames(out) == [.resourceEnd(.init(id: id, status: .complete))])
        #expect(ended(out)?.path == "/d/b.txt")
        #expect(out.contains(.persist(.updateTransfer(id, state: .complete, sentMark: nil, resent: nil))))
    }

    @Test func offersAreRefusedFromStrangersOverTheLimitOrPastTheCapsBeforeAPartFileIsOpened() {
        var node = engine()
        _ = node.linkUp(LinkHandle(9), peer: stranger, dialedByUs: false, remoteAddress: nil, at: at(0))
        func offer(_ byte: UInt8, size: UInt64 = 10, name: String = "x") -> WireFrame.ResourceOffer {
            WireFrame.ResourceOffer(
                id: WireID(bytes: [UInt8](repeating: byte, count: 16))!, room: nil, kind: .file, name: Array(name.utf8), size: size,
                sha256: [], modifiedMilliseconds: 0, digestFollows: true)
        }
        let fromStranger = node.received([.resourceOffer(offer(1))], on: LinkHandle(9), at: at(1))
        #expect(files(fromStranger).isEmpty)
        #expect(frames(fromStranger).contains { if case .resourceEnd(let end) = $0 { end.status == .refused } else { false } })
        // Over the size limit: refused with the limit after the look-up, no part file asked for.
        let big = offer(2, size: 5000)
        _ = node.received([.resourceOffer(big)], on: handle, at: at(2))
        var out = node.incomingLookedUp(big.id, .none, at: at(3))
        #expect(files(out) == [.close(big.id, removePart: true)])  // (a part file an earlier attempt left goes)
        #expect(frames(out).contains { if case .resourceEnd(let end) = $0 { end.text.contains("over this peer's limit of 1000") } else { false } })
        // A bad name: the same.
        let dots = offer(3, name: "..")
        _ = node.received([.resourceOffer(dots)], on: handle, at: at(4))
        #expect(files(node.incomingLookedUp(dots.id, .none, at: at(5))) == [.close(dots.id, removePart: true)])
        // Two at once from bob; the third is refused with the cap, but a re-offer of one received before is
        // still answered "complete" (no file needed for that).
        for byte: UInt8 in [4, 5] {
            _ = node.received([.resourceOffer(offer(byte))], on: handle, at: at(6))
            #expect(files(node.incomingLookedUp(offer(byte).id, .none, at: at(6))) == [.openPart(offer(byte), resume: false)])
        }
        _ = node.received([.resourceOffer(offer(6))], on: handle, at: at(7))
        out = node.incomingLookedUp(offer(6).id, .none, at: at(7))
        #expect(frames(out).contains { if case .resourceEnd(let end) = $0 { end.text.contains("2 from one peer") } else { false } })
        _ = node.received([.resourceOffer(offer(7))], on: handle, at: at(8))
        out = node.incomingLookedUp(offer(7).id, .received, at: at(8))
        #expect(frames(out) == [.resourceEnd(.init(id: offer(7).id, status: .complete))])
    }

    @Test func theDigestLostWithTheConnectionIsAskedForAgain() throws {
        var node = engine()
        let id = WireID(bytes: [UInt8](repeating: 8, count: 16))!
        let offer = WireFrame.ResourceOffer(
            id: id, room: nil, kind: .file, name: Array("c".utf8), size: 5, sha256: [], modifiedMilliseconds: 0,
            digestFollows: true)
        _ = node.received([.resourceOffer(offer)], on: handle, at: at(0))
        _ = node.incomingLookedUp(id, .none, at: at(0))
        _ = node.partOpened(id, .opened(path: "/d/p", held: 0, freeBytes: 1 << 30), at: at(0))
        _ = node.received([.resourceChunk(.init(id: id, offset: 0, data: ByteBuffer(bytes: [1, 2, 3, 4, 5])))], on: handle, at: at(1))
        #expect(files(node.written(id, upTo: 5, at: at(2))).isEmpty)  // every byte, but no digest yet
        _ = node.linkDown(handle, reason: .lost, at: at(3))
        _ = node.linkUp(LinkHandle(2), peer: bob, dialedByUs: true, remoteAddress: nil, at: at(4))
        let again = node.received([.resourceOffer(offer)], on: LinkHandle(2), at: at(5))
        #expect(frames(again) == [.resourceAccept(.init(id: id, offset: 5))])
        let digest = [UInt8](repeating: 1, count: 32)
        #expect(files(node.received([.resourceDigest(id: id, sha256: digest)], on: LinkHandle(2), at: at(6))) == [.verify(id)])
    }

    @Test func aDigestLearnedByAReadOfAnEarlierConnectionIsStillSentAndOurOwnIdsAreNotReceived() throws {
        var node = engine()
        let small = OfferedFile(path: "/home/alice/s", name: "s", size: 5, modifiedMilliseconds: 1, identity: "1:3")
        let (id, offered) = try node.offerResource(small, to: bob.id, at: at(0))
        #expect(files(node.received([.resourceAccept(.init(id: id, offset: 0))], on: handle, at: at(1))) == [.read(id, offset: 0, count: 5)])
        _ = node.linkDown(handle, reason: .lost, at: at(2))
        _ = node.linkUp(LinkHandle(2), peer: bob, dialedByUs: true, remoteAddress: nil, at: at(3))
        #expect(files(node.received([.resourceAccept(.init(id: id, offset: 0))], on: LinkHandle(2), at: at(4))).isEmpty)  // a read is under way
        let digest = [UInt8](repeating: 4, count: 32)
        let out = node.fileRead(id, offset: 0, data: ByteBuffer(bytes: [1, 2, 3, 4, 5]), digest: digest, at: at(5))
        #expect(frames(out) == [.resourceDigest(id: id, sha256: digest)])  // not the stale chunk; the digest, yes
        #expect(files(out) == [.read(id, offset: 0, count: 5)])
        // bob offers our own id back: ignored (no file work, no answer).
        guard case .resourceOffer(let offer) = frames(offered).first else { Issue.record("no offer"); return }
        #expect(files(node.received([.resourceOffer(offer)], on: LinkHandle(2), at: at(6))).isEmpty)
        #expect(node.diagnostics.incomingTransfers == 0)
    }

    func cancels(_ actions: [SessionAction]) -> [WireID] {
        frames(actions).compactMap { if case .resourceEnd(let end) = $0, end.status == .cancelled { end.id } else { nil } }
    }

    @Test func aCancelIsToldAtEachConnectionUntilTheReceiverAnswersAndNotPastItsTime() throws {
        var node = engine()
        let (id, _) = try node.offerResource(file, to: bob.id, at: at(0))
        _ = node.received([.resourceAccept(.init(id: id, offset: 0))], on: handle, at: at(1))
        let (_, cancelled) = try #require(try node.cancelTransfer(id.description, at: at(2)))
        #expect(cancels(cancelled) == [id])
        // The END may be lost with the connection: told again at the next one, and the next, until heard.
        _ = node.linkDown(handle, reason: .lost, at: at(3))
        #expect(cancels(node.linkUp(LinkHandle(2), peer: bob, dialedByUs: true, remoteAddress: nil, at: at(4)).actions) == [id])
        _ = node.linkDown(LinkHandle(2), reason: .lost, at: at(5))
        #expect(cancels(node.linkUp(LinkHandle(3), peer: bob, dialedByUs: true, remoteAddress: nil, at: at(6)).actions) == [id])
        // The receiver's answer: persisted row gone, no answer back (two ENDs never bounce), not told again.
        let heard = node.received([.resourceEnd(.init(id: id, status: .cancelled, text: "the cancel was received"))], on: LinkHandle(3), at: at(7))
        #expect(heard.contains { if case .persist(.deleteTransfer(id)) = $0 { true } else { false } })
        #expect(frames(heard).isEmpty)
        _ = node.linkDown(LinkHandle(3), reason: .lost, at: at(8))
        #expect(cancels(node.linkUp(LinkHandle(4), peer: bob, dialedByUs: true, remoteAddress: nil, at: at(9)).actions).isEmpty)
        // A cancel never heard (the receiver never got the offer) is told for a week, then forgotten.
        let (other, _) = try node.offerResource(file, to: bob.id, at: at(10))
        _ = try node.cancelTransfer(other.description, at: at(11))
        _ = node.linkDown(LinkHandle(4), reason: .lost, at: at(12))
        let week: Int64 = 7 * 24 * 3600 * 1000
        let late = node.linkUp(LinkHandle(5), peer: bob, dialedByUs: true, remoteAddress: nil, at: at(11 + week)).actions
        #expect(cancels(late).isEmpty)
        #expect(late.contains { if case .persist(.deleteTransfer(other)) = $0 { true } else { false } })
    }

    @Test func aReceiverAnswersTheSendersCancelOnceAndAnswersNothingElse() throws {
        var node = engine()
        let id = WireID(bytes: [UInt8](repeating: 0x42, count: 16))!
        let offer = WireFrame.ResourceOffer(
            id: id, room: lab, kind: .file, name: Array("b.bin".utf8), size: 40, sha256: [UInt8](repeating: 1, count: 32),
            modifiedMilliseconds: 1, digestFollows: false)
        _ = node.received([.resourceOffer(offer)], on: handle, at: at(1))
        _ = node.incomingLookedUp(id, .none, at: at(2))
        _ = node.partOpened(id, .opened(path: "/d/.part", held: 0, freeBytes: 1 << 30), at: at(2))
        let end = node.received([.resourceEnd(.init(id: id, status: .cancelled, text: "cancelled by the sender"))], on: handle, at: at(3))
        #expect(cancels(end) == [id])
        #expect(ended(end)?.state == .cancelled)
        // Told again (our answer was lost): the engine no longer holds it, the shell looks in the store
        // (`cancelledWhileApart`), and answers through `cancelHeard` only if it held it as cancelled.
        let again = node.received([.resourceEnd(.init(id: id, status: .cancelled, text: "cancelled by the sender"))], on: handle, at: at(4))
        #expect(frames(again).isEmpty)
        #expect(files(again).contains { if case .cancelledWhileApart(id, let peer) = $0 { peer.id == bob.id } else { false } })
        #expect(cancels(node.cancelHeard(id, from: bob.id)) == [id])
        // Other ENDs for transfers it does not hold are not answered.
        #expect(frames(node.received([.resourceEnd(.init(id: id, status: .failed, text: "x"))], on: handle, at: at(5))).isEmpty)
    }

    @Test func anAcceptedTransferThatGetsNoByteFailsAfterTheStallTimeAndGivesBackItsSlot() throws {
        var node = engine()
        let id = WireID(bytes: [UInt8](repeating: 0x51, count: 16))!
        let offer = WireFrame.ResourceOffer(
            id: id, room: lab, kind: .file, name: Array("s.bin".utf8), size: 40, sha256: [UInt8](repeating: 1, count: 32),
            modifiedMilliseconds: 1, digestFollows: false)
        _ = node.received([.resourceOffer(offer)], on: handle, at: at(0))
        _ = node.incomingLookedUp(id, .none, at: at(0))
        _ = node.partOpened(id, .opened(path: "/d/.part", held: 0, freeBytes: 1 << 30), at: at(0))
        // Bytes that come (or are written) push the deadline out.
        _ = node.received([.resourceChunk(.init(id: id, offset: 0, data: ByteBuffer(bytes: [UInt8](repeating: 1, count: 10))))], on: handle, at: at(60_000))
        #expect(ended(node.tick(at: at(120_000))) == nil)
        let stalled = node.tick(at: at(180_000))
        #expect(ended(stalled)?.state == .failed)
        #expect(ended(stalled)?.error == "no data for 120 s")
        #expect(frames(stalled).contains(.resourceEnd(.init(id: id, status: .failed, text: "no data for 120 s"))))
        #expect(files(stalled).contains(.close(id, removePart: true)))
        #expect(node.diagnostics.incomingTransfers == 0)
        #expect(!node.diagnostics.timers.contains(.transferStalls))
    }

    @Test func anAcceptStillComingOnAReplacedConnectionIsNotTakenAsTheAnswerToTheNewOffer() throws {
        var node = engine()
        let (id, _) = try node.offerResource(file, to: bob.id, at: at(0))
        _ = node.received([.resourceAccept(.init(id: id, offset: 0))], on: handle, at: at(1))
        // A newer connection from the same dialer replaces handle 1: offered again there.
        let up = node.linkUp(LinkHandle(2), peer: bob, dialedByUs: true, remoteAddress: nil, at: at(2)).actions
        #expect(frames(up).contains { if case .resourceOffer(let offer) = $0 { offer.id == id } else { false } })
        // Progress the receiver sent on the old connection before it heard the new offer: ignored.
        let stale = node.received([.resourceAccept(.init(id: id, offset: 10))], on: handle, at: at(3))
        #expect(files(stale).isEmpty && frames(stale).isEmpty)
        // The answer on the new connection restarts it where the receiver is.
        let answer = node.received([.resourceAccept(.init(id: id, offset: 20))], on: LinkHandle(2), at: at(4))
        #expect(ended(answer) == nil)
        // (The read the first accept asked for comes back first: not sent, it belongs to the old attempt.)
        let read = node.fileRead(id, offset: 0, data: ByteBuffer(bytes: [UInt8](repeating: 7, count: 10)), digest: nil, at: at(5))
        #expect(frames(read).isEmpty)
        #expect(files(read) == [.read(id, offset: 20, count: 10)])
    }

    // MARK: Issue 28, item 3: offers end, transfers going out are capped

    @Test func anOfferNotAcceptedInTimeEndsAndClosesItsFile() throws {
        var node = engine()
        let (id, _) = try node.offerResource(file, to: bob.id, at: at(0))
        let export = OfferedFile(path: "/state/history/.x", name: "history of lab", size: 45, modifiedMilliseconds: 0, identity: "1:3")
        let (history, _) = try node.offerResource(export, to: bob.id, kind: .signedHistory, room: lab, ephemeral: true, at: at(0))
        #expect(!frames(node.tick(at: at(59_999))).contains { if case .resourceEnd = $0 { true } else { false } })
        let due = node.tick(at: at(60_000))
        let ends = frames(due).compactMap { if case .resourceEnd(let end) = $0 { end } else { nil } }
        print("offers not accepted after 60 s: \(ends.map { "\($0.status) \($0.text)" }), still going out: \(node.diagnostics.outgoingTransfers)")
        #expect(Set(ends.map(\.id)) == [id, history] && ends.allSatisfy { $0.status == .failed && $0.text == "not accepted within 60 s" })
        #expect(files(due).contains(.close(id, removePart: false)) && files(due).contains(.close(history, removePart: false)))
        #expect(due.contains(.persist(.deleteTransfer(id))))
        #expect(node.diagnostics.outgoingTransfers == 0)
    }

    @Test func anOfferAgainAfterADroppedConnectionWaitsLongerForAReceiverThatAcceptedBefore() throws {
        var node = engine()
        let (id, _) = try node.offerResource(file, to: bob.id, at: at(0))
        _ = node.received([.resourceAccept(.init(id: id, offset: 0))], on: handle, at: at(1))
        _ = node.linkDown(handle, reason: .lost, at: at(2))
        _ = node.linkUp(LinkHandle(2), peer: bob, dialedByUs: true, remoteAddress: nil, at: at(3))
        // (It may be checking and placing what it holds: it answers when done.)
        #expect(!frames(node.tick(at: at(3 + 60_000))).contains { if case .resourceEnd = $0 { true } else { false } })
        let due = node.tick(at: at(3 + 1_200_000))
        #expect(frames(due).contains(.resourceEnd(.init(id: id, status: .failed, text: "no answer for 1200 s"))))
    }

    @Test func aTransferWhoseReceiverAcknowledgesNothingMoreEnds() throws {
        var node = engine()
        let (id, _) = try node.offerResource(file, to: bob.id, at: at(0))
        _ = node.received([.resourceAccept(.init(id: id, offset: 0))], on: handle, at: at(1))
        _ = node.fileRead(id, offset: 0, data: ByteBuffer(bytes: [UInt8](repeating: 1, count: 10)), digest: nil, at: at(2))
        // Progress at 10 keeps it going; then nothing more.
        _ = node.received([.resourceAccept(.init(id: id, offset: 10))], on: handle, at: at(1_000))
        #expect(!frames(node.tick(at: at(120_999))).contains { if case .resourceEnd = $0 { true } else { false } })
        let due = node.tick(at: at(121_000))
        let end = frames(due).compactMap { if case .resourceEnd(let end) = $0 { end } else { nil } }.first
        print("an accepted transfer acknowledging nothing for 120 s: \(end.map { "\($0.status) \($0.text)" } ?? "still under way")")
        #expect(end?.id == id && end?.status == .failed && end?.text == "nothing acknowledged for 120 s")
        #expect(files(due).contains(.close(id, removePart: false)))
    }

    @Test func outgoingTransfersAreCappedPerPeerAndInAll() throws {
        var node = engine()
        let others = (0..<4).map { SessionPeer(id: SessionStateMachineTests.peerID(UInt8(0x40 + $0)), name: "p\($0)") }
        for (index, peer) in others.enumerated() {
            _ = node.linkUp(LinkHandle(10 + index), peer: peer, dialedByUs: true, remoteAddress: nil, at: at(0))
        }
        func offer(_ index: Int, to peer: PeerID) throws(SessionError) {
            _ = try node.offerResource(
                OfferedFile(path: "/f/\(index)", name: "\(index)", size: 45, modifiedMilliseconds: 0, identity: "1:\(index)"),
                to: peer, at: at(1))
        }
        for index in 0..<16 { try offer(index, to: bob.id) }
        var refusal: SessionError?
        do { try offer(16, to: bob.id) } catch { refusal = error }
        print("the 17th offer to one peer: \(refusal.map { "\($0.code): \($0.message)" } ?? "offered")")
        #expect(refusal?.code == .busy && refusal?.message.contains("(16)") == true)
        for (number, peer) in others.prefix(3).enumerated() {
            for index in 0..<16 { try offer(100 * (number + 1) + index, to: peer.id) }
        }
        #expect(node.diagnostics.outgoingTransfers == 64)
        refusal = nil
        do { try offer(999, to: others[3].id) } catch { refusal = error }
        print("the 65th offer in all: \(refusal.map { "\($0.code): \($0.message)" } ?? "offered")")
        #expect(refusal?.code == .busy && refusal?.message.contains("64 in all") == true)
    }

}
