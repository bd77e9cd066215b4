import LanchatCore
import LanchatEngine
import LanchatWire
import NIOCore
import Testing

/// Files that stay in a room (issue 13, item 4): the announcement's format, FILE_REQUEST on the wire, and
/// the engine's fetch: the author asked first, then the other connected members; a refusal, silence or a
/// copy whose SHA-256 differs passes to the next; an offer not asked for (or not of what was asked) is
/// refused; a request from a non-member is refused; the fetch fails, saying whom it asked, when none is left.
@Suite struct SharedFileTests: LabFixture {
    let file = SharedFile(sha256: [UInt8](repeating: 0xab, count: 32), size: 1000, type: "image/png", name: "photo.png")

    func requests(_ actions: [SessionAction]) -> [(LinkHandle, WireFrame.FileRequest)] {
        actions.flatMap { action -> [(LinkHandle, WireFrame.FileRequest)] in
            guard case .send(let handle, let frames) = action else { return [] }
            return frames.compactMap { if case .fileRequest(let request) = $0 { (handle, request) } else { nil } }
        }
    }

    func ends(_ actions: [SessionAction]) -> [(LinkHandle, WireFrame.ResourceEnd)] {
        actions.flatMap { action -> [(LinkHandle, WireFrame.ResourceEnd)] in
            guard case .send(let handle, let frames) = action else { return [] }
            return frames.compactMap { if case .resourceEnd(let end) = $0 { (handle, end) } else { nil } }
        }
    }

    func transfers(_ actions: [SessionAction]) -> [TransferInfo] {
        actions.compactMap { if case .emit(.transfer(let info)) = $0 { info } else { nil } }
    }

    func offer(_ id: WireID, sha256: [UInt8]? = nil, kind: WireFrame.ResourceOffer.Kind = .shared) -> WireFrame {
        .resourceOffer(
            .init(
                id: id, room: kind == .shared ? lab : nil, kind: kind, name: Array("x".utf8), size: 1000, sha256: sha256 ?? file.sha256,
                modifiedMilliseconds: 0))
    }

    /// The id of the request sent to `handle` (each member asked gets a request of its own).
    func asked(_ actions: [SessionAction], _ handle: Int) -> WireID? {
        requests(actions).first { $0.0 == LinkHandle(handle) }?.1.id
    }

    /// Receives the bytes of `attempt` up to the hash check.
    func receive(_ node: inout SessionStateMachine, _ attempt: WireID, on handle: Int, at start: Int64) -> [SessionAction] {
        var out = node.received([offer(attempt)], on: LinkHandle(handle), at: at(start))
        out += node.partOpened(attempt, .opened(path: "/tmp/part", held: 0, freeBytes: 1 << 30), at: at(start + 1))
        out += node.received(
            [.resourceChunk(.init(id: attempt, offset: 0, data: ByteBuffer(bytes: [UInt8](repeating: 7, count: 1000))))],
            on: LinkHandle(handle), at: at(start + 2))
        out += node.written(attempt, upTo: 1000, at: at(start + 3))
        return out
    }

    // MARK: The announcement and the frame

    @Test func anAnnouncementReadsBackAndAnythingElseIsNotOne() {
        #expect(SharedFile(body: file.body) == file)
        #expect(file.body.hasPrefix("lanchat-file/1\nsha256: abab"))
        let good = file.body
        let bad = [
            good + "\n", "x" + good, good.replacing("size: 1000", with: "size: 01000"), good.replacing("size: 1000", with: "size: -1"),
            good.replacing("size: 1000", with: "size: 99999999999999999999"), good.replacing("abab", with: "ABAB"),
            good.replacing("name: photo.png", with: "name: ../photo.png"), good.replacing("name: photo.png", with: "name: "),
            good.replacing("name: photo.png", with: "name: a\u{7}b"), good.replacing("name: photo.png", with: "name: " + String(repeating: "a", count: 256)),
            good.replacing("type: image/png", with: "type: image"), good.replacing("type: image/png", with: "type: Image/PNG"),
            good.replacing("name: photo.png", with: "name: ..."),
        ]
        for body in bad.dropLast() { #expect(SharedFile(body: body) == nil, "\(body.debugDescription)") }
        #expect(SharedFile(body: bad.last!)?.name == "...")  // dots are a name; "." and ".." are not
        #expect(SharedFile.sniff([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0]) == "image/png")
        #expect(SharedFile.sniff([0xff, 0xd8, 0xff, 0xe0]) == "image/jpeg")
        #expect(SharedFile.sniff(Array("GIF89a..".utf8)) == "image/gif")
        #expect(SharedFile.sniff(Array("RIFF\0\0\0\0WEBPVP8 ".utf8)) == "image/webp")
        #expect(SharedFile.sniff(Array("%PDF-1.7".utf8)) == "application/pdf")
        #expect(SharedFile.sniff(Array("hello".utf8)) == "application/octet-stream")
        #expect(SharedFile.sniff([]) == "application/octet-stream")
    }

    @Test func aFileRequestIsIgnorableAndReadsBack() throws {
        let request = WireFrame.fileRequest(.init(id: WireID.random(), room: lab, sha256: file.sha256))
        let raw = try request.encode()
        #expect(raw.flags & 0x80 != 0 && raw.type == 0x45)
        #expect(try WireFrame.decode(raw) == request)
        var short = raw
        short.payload = raw.payload.getSlice(at: raw.payload.readerIndex, length: raw.payload.readableBytes - 1)!
        #expect(throws: WireError.self) { try WireFrame.decode(short) }
        #expect(throws: WireError.self) { try WireFrame.fileRequest(.init(id: WireID.random(), room: lab, sha256: [1])).encode() }
    }

    // MARK: Fetching

    @Test func theAuthorIsAskedFirstAndARefusalOrSilencePassesToTheNext() throws {
        var node = engine()
        let (id, first) = try node.fetchShared(file, room: lab, author: carol.id, destination: "/tmp/x", at: at(10))
        #expect(requests(first).map(\.0) == [LinkHandle(2)])
        let request = try #require(requests(first).first?.1)
        #expect(request.room == lab && request.sha256 == file.sha256 && request.id != id)
        #expect(transfers(first).first?.state == .offered && transfers(first).first?.peer == carol && transfers(first).first?.id == id)
        // Carol does not hold it: bob is asked, under another request id.
        let next = node.received([.resourceEnd(.init(id: request.id, status: .refused, text: "not held by carol"))], on: LinkHandle(2), at: at(20))
        #expect(requests(next).map(\.0) == [LinkHandle(1)])
        #expect(asked(next, 1) != request.id)
        // Bob says nothing: after the answer timeout, none is left, and the fetch fails saying why.
        #expect(node.tick(at: at(20 + SessionStateMachine.sharedFetchAnswerTimeout - 1)).isEmpty)
        let failed = transfers(node.tick(at: at(20 + SessionStateMachine.sharedFetchAnswerTimeout)))
        #expect(failed.count == 1 && failed[0].state == .failed && failed[0].id == id)
        #expect(failed[0].error?.contains("carol: not held by carol; bob: no answer in 10 s") == true, "\(failed)")
        // A refusal from someone not asked changes nothing (the fetch is over anyway).
        #expect(node.sharedFetchList.isEmpty)
    }

    /// Issue 28, item 7: files announced in a room are fetched by themselves at most 4 at a time for one
    /// announcer and 12 in all, so large announcements nobody serves cannot take every slot (and the quota
    /// reserved for them) from other members' files and the person's own fetches.
    @Test func oneAnnouncersFilesTakeAtMostFourOfTheAutomaticFetches() throws {
        var node = engine()
        func file(_ n: UInt8) -> SharedFile { SharedFile(sha256: [UInt8](repeating: n, count: 32), size: 256 << 20, type: "", name: "fake\(n)") }
        for n in 0..<4 { _ = try node.fetchShared(file(UInt8(n)), room: lab, author: bob.id, destination: nil, at: at(10)) }
        #expect(throws: SessionError.self) { _ = try node.fetchShared(file(9), room: lab, author: bob.id, destination: nil, at: at(10)) }
        // Carol's announcement is still fetched, and a person's fetch of bob's file too.
        _ = try node.fetchShared(file(20), room: lab, author: carol.id, destination: nil, at: at(10))
        _ = try node.fetchShared(file(9), room: lab, author: bob.id, destination: "/tmp/x", at: at(10))
        #expect(node.sharedFetchList.count == 6)
    }

    @Test func aCopyWhoseDigestDiffersIsRefusedAndTheNextMemberAsked() throws {
        var node = engine()
        let (id, started) = try node.fetchShared(file, room: lab, author: bob.id, destination: nil, at: at(10))
        let toBob = try #require(asked(started, 1))
        // An offer under another id, or of other content, is refused (and the asked member passed over).
        let stray = node.received([offer(WireID.random())], on: LinkHandle(1), at: at(11))
        #expect(ends(stray).first?.1.status == .refused && requests(stray).isEmpty)
        let other = node.received([offer(toBob, sha256: [UInt8](repeating: 1, count: 32))], on: LinkHandle(1), at: at(12))
        #expect(ends(other).first?.1.status == .refused)
        let toCarol = try #require(asked(other, 2))  // carol now
        // Carol offers the right thing; it arrives, but its bytes hash to something else.
        let offered = receive(&node, toCarol, on: 2, at: 13)
        guard case .file(.openPart(let part, _))? = offered.first(where: { if case .file(.openPart) = $0 { true } else { false } }) else {
            Issue.record("no part file asked for: \(offered)")
            return
        }
        #expect(part.id == toCarol && part.kind == .shared)
        #expect(offered.contains(.file(.verify(toCarol))))
        #expect(transfers(offered).allSatisfy { $0.id == id && $0.name == "photo.png" }, "\(transfers(offered))")
        let mismatch = node.hashed(toCarol, digest: [UInt8](repeating: 9, count: 32), at: at(17))
        #expect(ends(mismatch).first?.1.status == .failed)
        #expect(mismatch.contains(.file(.close(toCarol, removePart: true))))
        // Nobody is left (the stranger is no member): the fetch fails, naming both and why.
        let failed = transfers(mismatch)
        #expect(failed.last?.state == .failed, "\(failed)")
        #expect(failed.last?.error?.contains("carol: the file's SHA-256 does not match") == true, "\(failed)")
    }

    @Test func theRightCopyIsPlacedAndTheFetchEnds() throws {
        var node = engine()
        let (id, started) = try node.fetchShared(file, room: lab, author: bob.id, destination: "/tmp/out", at: at(10))
        let attempt = try #require(asked(started, 1))
        _ = receive(&node, attempt, on: 1, at: 11)
        let placing = node.hashed(attempt, digest: file.sha256, at: at(15))
        #expect(placing.contains(.file(.placeShared(attempt, file, destination: "/tmp/out"))))
        // Too late to name another directory now.
        #expect(throws: SessionError.self) { _ = try node.fetchShared(file, room: lab, author: nil, destination: "/tmp/y", at: at(15)) }
        let done = node.placed(attempt, path: "/tmp/out/photo.png", at: at(16))
        #expect(ends(done).first?.1.status == .complete)
        #expect(transfers(done).last?.state == .complete && transfers(done).last?.path == "/tmp/out/photo.png" && transfers(done).last?.id == id)
        #expect(node.sharedFetchList.isEmpty)
    }

    @Test func aFetchNeedsARoomAndAConnectedMemberAndIsJoinedNotRepeated() throws {
        var node = engine()
        #expect(throws: SessionError.self) { _ = try node.fetchShared(file, room: RoomID("elsewhere")!, author: nil, destination: nil, at: at(10)) }
        let (id, _) = try node.fetchShared(file, room: lab, author: nil, destination: nil, at: at(10))
        let (again, actions) = try node.fetchShared(file, room: lab, author: nil, destination: "/tmp/x", at: at(11))
        #expect(again == id && actions.isEmpty)
        #expect(node.sharedFetchList.first?.fetch.destination == "/tmp/x")
        #expect(throws: SessionError.self) { _ = try node.fetchShared(file, room: lab, author: nil, destination: "/tmp/y", at: at(12)) }
        _ = node.linkDown(LinkHandle(1), reason: .lost, at: at(13))
        _ = node.linkDown(LinkHandle(2), reason: .lost, at: at(13))
        let other = SharedFile(sha256: [UInt8](repeating: 1, count: 32), size: 1, type: "text/plain", name: "a.txt")
        #expect(throws: SessionError.self) { _ = try node.fetchShared(other, room: lab, author: nil, destination: nil, at: at(14)) }
    }

    @Test func anOrdinaryOfferUnderARequestsIdIsRefusedAndTheSendersCancelPassesToTheNext() throws {
        var node = engine()
        let (id, started) = try node.fetchShared(file, room: lab, author: bob.id, destination: nil, at: at(10))
        let toBob = try #require(asked(started, 1))
        // Bob answers with a plain file under the request's id: refused, and carol asked (a file that
        // passed no check must never end the fetch as if it were the one asked for).
        let plain = node.received([offer(toBob, kind: .file)], on: LinkHandle(1), at: at(11))
        #expect(ends(plain).first?.1.status == .refused && !plain.contains { if case .file(.openPart) = $0 { true } else { false } })
        let toCarol = try #require(asked(plain, 2))
        // Carol starts sending, then cancels: not the end of the fetch, but there is nobody left.
        _ = node.received([offer(toCarol)], on: LinkHandle(2), at: at(12))
        _ = node.partOpened(toCarol, .opened(path: "/tmp/part", held: 0, freeBytes: 1 << 30), at: at(13))
        let cancelled = node.received([.resourceEnd(.init(id: toCarol, status: .cancelled, text: "no"))], on: LinkHandle(2), at: at(14))
        #expect(transfers(cancelled).last?.state == .failed && transfers(cancelled).last?.id == id, "\(transfers(cancelled))")
        #expect(node.sharedFetchList.isEmpty)
    }

    @Test func aPersonCancelsAFetchWhileAskingOrReceiving() throws {
        var node = engine()
        let (id, _) = try node.fetchShared(file, room: lab, author: bob.id, destination: nil, at: at(10))
        let (info, _) = try #require(try node.cancelTransfer(String(id.description.prefix(8)), at: at(11)))
        #expect(info.state == .cancelled && info.id == id && node.sharedFetchList.isEmpty)
        let (again, started) = try node.fetchShared(file, room: lab, author: bob.id, destination: nil, at: at(20))
        let attempt = try #require(asked(started, 1))
        _ = node.received([offer(attempt)], on: LinkHandle(1), at: at(21))
        _ = node.partOpened(attempt, .opened(path: "/tmp/part", held: 0, freeBytes: 1 << 30), at: at(22))
        let (stopped, actions) = try #require(try node.cancelTransfer(again.description, at: at(23)))
        #expect(stopped.state == .cancelled && stopped.id == again)
        #expect(ends(actions).first?.1.status == .cancelled && requests(actions).isEmpty && node.sharedFetchList.isEmpty)
    }

    @Test func aFailureOfThisHostsEndsTheFetchAndTheSendersWordsAfterTheLastByteChangeNothing() throws {
        var node = engine()
        let (id, started) = try node.fetchShared(file, room: lab, author: bob.id, destination: "/tmp/out", at: at(10))
        let attempt = try #require(asked(started, 1))
        _ = receive(&node, attempt, on: 1, at: 11)
        _ = node.hashed(attempt, digest: file.sha256, at: at(15))
        // Being placed: bob gives up on us (his serve timed out): ignored, the file is verified.
        #expect(node.received([.resourceEnd(.init(id: attempt, status: .failed, text: "nothing acknowledged"))], on: LinkHandle(1), at: at(16)).isEmpty)
        // Our disk fails while placing it: the fetch ends here (carol's copy would not help).
        let failed = node.fileFailed(attempt, "No space left on device", at: at(17))
        #expect(requests(failed).isEmpty)
        #expect(transfers(failed).last?.state == .failed && transfers(failed).last?.id == id, "\(transfers(failed))")
        #expect(node.sharedFetchList.isEmpty)
    }

    @Test func aFetchsOwnTransferIsCancelledOnlyByTheFetchsId() throws {
        var node = engine()
        let (id, started) = try node.fetchShared(file, room: lab, author: bob.id, destination: nil, at: at(10))
        let attempt = try #require(asked(started, 1))
        _ = node.received([offer(attempt)], on: LinkHandle(1), at: at(11))
        _ = node.partOpened(attempt, .opened(path: "/tmp/part", held: 0, freeBytes: 1 << 30), at: at(12))
        // The request's own id is nobody's to cancel (people see the fetch's).
        #expect(try node.cancelTransfer(attempt.description, at: at(13)) == nil)
        #expect(node.sharedFetchList.count == 1)
        let (info, _) = try #require(try node.cancelTransfer(id.description, at: at(14)))
        #expect(info.id == id && info.state == .cancelled)
    }

    // MARK: Serving

    @Test func requestsBeyondTheServingLimitAreRefusedEvenInOneReadAndStalledServesEnd() {
        var node = engine()
        let requests = (0..<6).map { _ in WireFrame.FileRequest(id: WireID.random(), room: lab, sha256: file.sha256) }
        let actions = node.received(requests.map { .fileRequest($0) }, on: LinkHandle(1), at: at(10))
        let handed = actions.filter { if case .file(.serveShared) = $0 { true } else { false } }
        #expect(handed.count == SessionStateMachine.maximumSharedServedPerPeer)
        #expect(ends(actions).count == 6 - SessionStateMachine.maximumSharedServedPerPeer && ends(actions).allSatisfy { $0.1.text.hasPrefix("busy") })
        let offered = OfferedFile(path: "/s/x", name: "x", size: 1000, modifiedMilliseconds: 0, identity: "1:2")
        for request in requests.prefix(4) { _ = node.serveShared(request, file: offered, to: bob.id, at: at(11)) }
        // Served twice under one request: the second is closed, not offered.
        #expect(node.serveShared(requests[0], file: offered, to: bob.id, at: at(12)) == [.file(.close(requests[0].id, removePart: false))])
        // Never accepted: each ends after the accept timeout, the receiver told.
        let due = node.tick(at: at(11 + SessionStateMachine.sharedServeAcceptTimeout))
        #expect(ends(due).count == 4 && ends(due).allSatisfy { $0.1.status == .failed })
        #expect(node.transfersUnderWay(at: at(11 + SessionStateMachine.sharedServeAcceptTimeout)).isEmpty)
    }

    @Test func aMembersRequestIsHandedToTheShellAndAStrangersRefused() {
        var node = engine()
        let request = WireFrame.FileRequest(id: WireID.random(), room: lab, sha256: file.sha256)
        #expect(node.received([.fileRequest(request)], on: LinkHandle(1), at: at(10)) == [.file(.serveShared(request, to: bob))])
        let refused = node.received([.fileRequest(request)], on: LinkHandle(3), at: at(10))
        #expect(ends(refused).first?.0 == LinkHandle(3) && ends(refused).first?.1.status == .refused)
        // Served: offered under the request's id, with the digest asked for, as a shared file of the room.
        let served = node.serveShared(
            request, file: OfferedFile(path: "/s/x", name: "x", size: 1000, modifiedMilliseconds: 0, identity: "1:2"),
            to: bob.id, at: at(11))
        let offers = served.flatMap { action -> [WireFrame.ResourceOffer] in
            guard case .send(LinkHandle(1), let frames) = action else { return [] }
            return frames.compactMap { if case .resourceOffer(let offer) = $0 { offer } else { nil } }
        }
        #expect(offers.count == 1 && offers[0].id == request.id && offers[0].kind == .shared && offers[0].sha256 == file.sha256)
        #expect(offers[0].room == lab && !offers[0].digestFollows)
        // Not served: refused with the shell's reason.
        let other = WireFrame.FileRequest(id: WireID.random(), room: lab, sha256: file.sha256)
        #expect(ends(node.notServed(other, to: carol.id, because: "not held by alice")).first?.1.text == "not held by alice")
    }

    // MARK: Issue 28, item 5: only what someone else announced in that room

    @Test func onlyAnAnnouncementInThatRoomBySomeoneElseNotDirectLetsAFileBeServed() {
        let request = WireFrame.FileRequest(id: WireID.random(), room: lab, sha256: file.sha256)
        func announcement(by sender: PeerID, room: String = "lab", direct: Bool = false, body: String? = nil) -> StoredMessage {
            StoredMessage(
                id: String(format: "%032x", Int.random(in: 0..<Int.max)), room: room, senderID: sender.rawValue, senderName: "x", sequence: 1,
                timestamp: 1, kind: .file, body: body ?? file.body, authorKey: [2], signature: [1], direct: direct)
        }
        // bob asks for a digest it announced itself (in the room, or directly to us), or that was
        // announced in another room, or directly by carol: not served. (Before: any kind-1 message of
        // the room beginning with the announcement.)
        let refused: [(String, [StoredMessage])] = [
            ("its own announcement", [announcement(by: bob.id)]),
            ("its own direct announcement", [announcement(by: bob.id, direct: true)]),
            ("carol's direct announcement", [announcement(by: carol.id, direct: true)]),
            ("an announcement in another room", [announcement(by: carol.id, room: "ops")]),
            ("another digest", [announcement(by: carol.id, body: file.body.replacing("abab", with: "cdcd"))]),
        ]
        for (what, messages) in refused {
            #expect(!SessionStateMachine.mayServe(request, to: bob.id, announcedIn: messages), "served after \(what)")
        }
        // carol's (or our own) announcement in the room: served, whatever bob announced besides.
        #expect(SessionStateMachine.mayServe(request, to: bob.id, announcedIn: [announcement(by: bob.id, direct: true), announcement(by: carol.id)]))
        #expect(SessionStateMachine.mayServe(request, to: bob.id, announcedIn: [announcement(by: me.id)]))
        // An announcement by an author who is not a member (a history record an inviter may have made up,
        // "(not a member)") does not count.
        let dave = SessionStateMachineTests.peerID(0x40)
        let members: Set<String> = [me.id.rawValue, bob.id.rawValue, carol.id.rawValue]
        #expect(!SessionStateMachine.mayServe(request, to: bob.id, announcedIn: [announcement(by: dave)], authors: members))
        #expect(SessionStateMachine.mayServe(request, to: bob.id, announcedIn: [announcement(by: dave), announcement(by: carol.id)], authors: members))
        // One refusal, whether we do not hold it or it was never announced there: it names no holder.
        #expect(SessionStateMachine.notServedText(request, ownName: "alice") == "alice has no such file to serve in lab")
    }

}
