import LanchatCore
import LanchatWire

/// Files shared in a room (issue 13, item 4). A share is a signed MESSAGE of kind 1 whose body is a
/// `SharedFile` announcement (name, size, SHA-256, media type); the content stays with the members
/// that hold it. A member fetches it by asking connected members of the room one at a time
/// (FILE_REQUEST), the announcement's author first: the first that holds it answers with a RESOURCE_OFFER
/// of kind 3 under the request's id, which runs as any incoming file (window, progress, SHA-256
/// checked against the announcement's); one that does not answers RESOURCE_END refused, and one that
/// says nothing for `sharedFetchAnswerTimeout` is passed over. A transfer that fails (a wrong hash, a
/// dropped connection, the sender's cancel) goes on with the next member; none left: the fetch fails,
/// saying whom it asked. Each request (attempt) has an id of its own, so that nothing of an attempt
/// that ended (a write still under way in the shell) can touch the next; people see the fetch's id.
/// The shell keeps the content (its shared-files directory, by digest) and places copies.
extension SessionStateMachine {
    /// A fetch under way, by its own id (what people and events see).
    public struct SharedFetch: Equatable, Sendable {
        public var room: RoomID
        public var file: SharedFile
        /// Where a copy goes once it is here (a directory); nil: only kept (fetched on its own).
        public var destination: String?
        /// Members still to ask, in order; the one asked now, and since when (monotonic milliseconds).
        var candidates: [PeerID]
        var asked: PeerID?
        var askedAt: Int64 = 0
        /// The request asked now: the FILE_REQUEST's id, and the id of the transfer that answers it.
        var attempt: WireID?
        /// Who was asked and why it did not serve ("bob: not held here").
        var outcomes: [String] = []
        /// Its transfer's end ends the fetch (a person here cancelled it, or the failure is this host's:
        /// its disk, its limits), rather than passing to the next member.
        var endsHere = false
        /// Who announced it, for a fetch this node started by itself (no person asked): such fetches are
        /// bounded per announcer (`maximumAutomaticFetchesPerAuthor`).
        var automaticFor: PeerID?
    }

    /// A shared file served: how much the receiver had acknowledged when we last looked, and since when.
    struct ServedProgress: Equatable, Sendable {
        var acknowledged: UInt64
        var since: Int64
    }

    /// Fetches at once (each may hold an incoming transfer), and files served at once to one member and in all.
    public static let maximumSharedFetches = 16
    /// Fetches this node starts by itself (announcements, no person asking): at most this many for one
    /// announcer's files and in all, so that a member announcing large files nobody holds cannot take every
    /// slot (and the quota they reserve) from the others' files and from the person's own fetches.
    public static let maximumAutomaticFetchesPerAuthor = 4
    public static let maximumAutomaticFetches = 12
    public static let maximumSharedServedPerPeer = 4
    public static let maximumSharedServed = 16
    /// How long a member asked may take to answer (it looks the file up and opens it) before the next is asked.
    public static let sharedFetchAnswerTimeout: Int64 = 10_000
    /// A file served that is not accepted within this long, or whose receiver acknowledges nothing more
    /// for `sharedServeStall`, ends (its slot and descriptor go back).
    public static let sharedServeAcceptTimeout: Int64 = 30_000
    public static let sharedServeStall: Int64 = 120_000

    // MARK: Sharing

    /// Announces a file in a room (the shell has put its content in its shared-files directory).
    public mutating func share(_ file: SharedFile, in room: RoomID, at now: EngineTime) throws(SessionError) -> (SendPlan, [SessionAction]) {
        guard file.isValid else { throw SessionError(.badRequest, "not a file that can be shared (its name or type)") }
        return try send([file.body], room: room, kind: .file, at: now)
    }

    // MARK: Fetching

    /// Starts fetching a shared file from the connected members of `room` (`author` first, if connected).
    /// Returns the fetch's id, which its transfer events carry. A fetch of the same content in the same
    /// room already under way is joined (it gets `destination` and the name if it had none).
    public mutating func fetchShared(
        _ file: SharedFile, room: RoomID, author: PeerID?, destination: String?, at now: EngineTime
    ) throws(SessionError) -> (WireID, [SessionAction]) {
        guard let state = rooms[room] else { throw SessionError(.unknownRoom, "you are not in room '\(room)' (see `lanchat rooms`)") }
        guard file.size <= transfers.limits.maximumSize else {
            throw SessionError(.tooLarge, "\(file.name) is \(file.size) bytes; this daemon takes files up to \(transfers.limits.maximumSize) (max-file-size)")
        }
        let fetches = transfers.shared.fetches
        if let id = fetches.orderedKeys.first(where: { fetches[$0]?.room == room && fetches[$0]?.file.sha256 == file.sha256 }) {
            if let destination {
                let placing = fetches[id]?.attempt.flatMap { transfers.incoming[$0] }.map { $0.stage == .placing } ?? false
                guard fetches[id]?.destination == nil, !placing else {
                    throw SessionError(.busy, "\(file.name) is being fetched already (transfer \(id.description.prefix(8))); ask again when it has ended")
                }
                transfers.shared.update(id) {
                    $0.destination = destination
                    $0.automaticFor = nil
                    $0.file = file
                }
            }
            return (id, [])
        }
        guard fetches.count < Self.maximumSharedFetches else {
            throw SessionError(.busy, "\(Self.maximumSharedFetches) files are being fetched already; try again when one has ended")
        }
        if destination == nil {
            let automatic = fetches.orderedKeys.compactMap { fetches[$0]?.automaticFor }
            guard automatic.count < Self.maximumAutomaticFetches,
                author.map({ author in automatic.count { $0 == author } < Self.maximumAutomaticFetchesPerAuthor }) ?? true
            else {
                throw SessionError(
                    .busy,
                    "\(automatic.count) files announced in rooms are being fetched already"
                        + " (at most \(Self.maximumAutomaticFetchesPerAuthor) of one member's, \(Self.maximumAutomaticFetches) in all)")
            }
        }
        let others = state.members.keys.filter { $0 != author && links.isLinked($0) }.sorted()
        let candidates = (author.map { state.members[$0] != nil && links.isLinked($0) ? [$0] : [] } ?? []) + others
        guard !candidates.isEmpty else {
            throw SessionError(.unreachable, "no member of \(room) is connected to ask for \(file.name)")
        }
        let id = environment.ids.wireID()
        transfers.shared.start(
            id,
            SharedFetch(
                room: room, file: file, destination: destination, candidates: candidates,
                automaticFor: destination == nil ? author ?? configuration.ownID : nil))
        var out: [SessionAction] = []
        askNext(id, at: now, &out)
        return (id, out)
    }

    /// The fetches under way.
    public var sharedFetchList: [(id: WireID, fetch: SharedFetch)] {
        transfers.shared.fetches.orderedKeys.map { ($0, transfers.shared.fetches[$0]!) }
    }

    /// The fetch an attempt (a request, and the transfer that answers it) belongs to.
    func sharedFetch(ofAttempt attempt: WireID) -> WireID? {
        transfers.shared.fetch(ofAttempt: attempt)
    }

    /// Asks the next connected candidate, under a new request id; none left: the fetch fails, saying
    /// whom it asked and why.
    mutating func askNext(_ id: WireID, at now: EngineTime, _ out: inout [SessionAction]) {
        guard var fetch = transfers.shared.fetches[id] else { return }
        while let next = fetch.candidates.first {
            fetch.candidates.removeFirst()
            guard rooms[fetch.room]?.members[next] != nil, let entry = links.entry(next) else { continue }
            let attempt = environment.ids.wireID()
            fetch = transfers.shared.ask(id, next, attempt: attempt, candidates: fetch.candidates, at: now.monotonic)!
            out.append(.send(entry.handle, [.fileRequest(.init(id: attempt, room: fetch.room, sha256: fetch.file.sha256))]))
            timers.scheduleNoLaterThan(.sharedFetches, at: now.monotonic + Self.sharedFetchAnswerTimeout)
            out.append(
                .emit(
                    .transfer(
                        fetchInfo(
                            id, fetch, peer: entry.peer, state: .offered,
                            error: fetch.outcomes.isEmpty ? nil : fetch.outcomes.joined(separator: "; ")))))
            return
        }
        transfers.shared.end(id)
        let asked = fetch.outcomes.isEmpty ? "no member that holds it is connected" : "asked: " + fetch.outcomes.joined(separator: "; ")
        let info = fetchInfo(id, fetch, peer: nil, state: .failed, error: "no member of \(fetch.room) could send it (\(asked))")
        transfers.keep(info)
        out.append(.emit(.transfer(info)))
    }

    /// The member asked did not serve: note why, ask the next.
    mutating func passOver(_ id: WireID, _ why: String, at now: EngineTime, _ out: inout [SessionAction]) {
        guard let fetch = transfers.shared.fetches[id] else { return }
        let name = fetch.asked.flatMap { links.entry($0)?.peer.name ?? rooms[fetch.room]?.members[$0]?.name } ?? "?"
        _ = transfers.shared.passOver(id, outcome: "\(name): \(why)")
        askNext(id, at: now, &out)
    }

    /// Whether a fetch waits for the answer to its request (no transfer has come for it yet).
    func isAsking(_ fetch: SharedFetch) -> Bool {
        guard let attempt = fetch.attempt else { return false }
        return transfers.incoming[attempt] == nil
    }

    /// Members asked that have not answered in time are passed over.
    mutating func sharedFetchesDue(at now: EngineTime, _ out: inout [SessionAction]) {
        for id in transfers.shared.fetches.orderedKeys {
            guard let fetch = transfers.shared.fetches[id], isAsking(fetch), fetch.askedAt + Self.sharedFetchAnswerTimeout <= now.monotonic else { continue }
            passOver(id, "no answer in \(Self.sharedFetchAnswerTimeout / 1000) s", at: now, &out)
        }
        rearmSharedFetches()
    }

    /// The answer timer runs while any fetch waits for an answer.
    mutating func rearmSharedFetches() {
        let waiting = transfers.shared.fetches.values.filter(isAsking).map(\.askedAt)
        if let oldest = waiting.min() { timers.schedule(.sharedFetches, at: oldest + Self.sharedFetchAnswerTimeout) } else { timers.cancel(.sharedFetches) }
    }

    /// A connection ended: a fetch waiting for that member's answer asks the next (one receiving from it
    /// moves on when its transfer ends).
    mutating func sharedFetchesLost(_ peer: PeerID, reason: String, at now: EngineTime, _ out: inout [SessionAction]) {
        for id in transfers.shared.fetches.orderedKeys {
            guard let fetch = transfers.shared.fetches[id], fetch.asked == peer, isAsking(fetch) else { continue }
            passOver(id, reason, at: now, &out)
        }
    }

    /// Whether an offer may be received, as far as fetches go: one under an attempt's id only as a file of
    /// kind 3, from the member asked, of the content asked (room, size, digest); one of kind 3 only so.
    /// Nil if it may; else why not.
    func sharedOfferProblem(_ offer: WireFrame.ResourceOffer, from peer: PeerID) -> String? {
        let fetch = transfers.shared.fetch(ofAttempt: offer.id).flatMap { transfers.shared.fetches[$0] }
        guard offer.kind == .shared || fetch == nil else { return "this id asks for a shared file" }
        guard offer.kind == .shared else { return nil }
        guard let fetch, fetch.asked == peer else { return "this file was not asked for" }
        guard offer.room == fetch.room, offer.size == fetch.file.size, !offer.digestFollows, offer.sha256 == fetch.file.sha256 else {
            return "not the file asked for (its room, size or SHA-256 differs)"
        }
        return nil
    }

    /// A shared file's transfer ended before it was in place: the next member is asked (the transfer's
    /// own end is not reported: the fetch goes on). False if it was not a fetch's, or a person here
    /// cancelled it (then it ends as transfers do).
    mutating func sharedTransferEnded(_ attempt: WireID, _ state: TransferState, text: String, at now: EngineTime, _ out: inout [SessionAction]) -> Bool {
        guard let id = transfers.shared.fetch(ofAttempt: attempt), let fetch = transfers.shared.fetches[id] else { return false }
        guard !fetch.endsHere else {
            transfers.shared.end(id)
            return false
        }
        passOver(id, text, at: now, &out)
        return true
    }

    /// A failure of this host's (its disk, its limits) ends the fetch with the transfer: asking another
    /// member would not help.
    mutating func sharedFailsHere(_ attempt: WireID) {
        guard let id = transfers.shared.fetch(ofAttempt: attempt) else { return }
        transfers.shared.update(id) { $0.endsHere = true }
    }

    /// A fetch whose answer this host refused by its own limits ends (failed), under its id.
    mutating func endFetch(ofAttempt attempt: WireID, _ error: String, _ out: inout [SessionAction]) {
        guard let id = transfers.shared.fetch(ofAttempt: attempt), let fetch = transfers.shared.end(id) else { return }
        rearmSharedFetches()
        let info = fetchInfo(id, fetch, peer: nil, state: .failed, error: error)
        transfers.keep(info)
        out.append(.emit(.transfer(info)))
    }

    /// The fetched file is in place: the fetch is over.
    mutating func sharedPlaced(_ attempt: WireID) {
        transfers.shared.end(attempt: attempt)
    }

    /// Cancels a fetch (by its id or a unique prefix): one still asking ends here; one receiving is
    /// cancelled as its transfer is. Nil if none matches.
    mutating func cancelFetch(_ prefix: String, at now: EngineTime) throws(SessionError) -> (TransferInfo, [SessionAction])? {
        guard let id = transfers.shared.fetches.orderedKeys.first(where: { $0.description.hasPrefix(prefix) }), let fetch = transfers.shared.fetches[id] else {
            return nil
        }
        if let attempt = fetch.attempt, let transfer = transfers.incoming[attempt] {
            guard transfer.stage != .placing else { throw SessionError(.tooLate, "\(fetch.file.name) is complete and being put in place") }
            transfers.shared.update(id) { $0.endsHere = true }
            return try cancelIncoming(attempt, at: now)
        }
        transfers.shared.end(id)
        rearmSharedFetches()
        let info = fetchInfo(id, fetch, peer: nil, state: .cancelled, error: "cancelled here")
        transfers.keep(info)
        return (info, [.emit(.transfer(info))])
    }

    func fetchInfo(_ id: WireID, _ fetch: SharedFetch, peer: SessionPeer?, state: TransferState, error: String?) -> TransferInfo {
        TransferInfo(
            state: state, id: id, direction: .incoming, peer: peer ?? SessionPeer(id: configuration.ownID, name: "-"),
            name: fetch.file.name, size: fetch.file.size, done: 0, rate: 0, error: error)
    }

    // MARK: Serving

    /// Files served (and requests the shell is looking up) to one member, and in all.
    func sharedServedCount(to peer: PeerID?) -> Int {
        let served = transfers.outgoing.values.filter { $0.offer.kind == .shared && (peer == nil || $0.peer.id == peer) }.count
        return served + transfers.shared.lookingUp(for: peer)
    }

    /// A member asks for a shared file: the shell looks in what it keeps (`FileAction.serveShared`).
    mutating func received(_ request: WireFrame.FileRequest, from entry: LinkTable.Entry, _ out: inout [SessionAction]) {
        func refuse(_ text: String) {
            out.append(.send(entry.handle, [.resourceEnd(.init(id: request.id, status: .refused, text: text))]))
        }
        guard rooms[request.room]?.members[entry.peer.id] != nil else { return refuse("you are not a member of \(request.room) here") }
        guard transfers.outgoing[request.id] == nil, transfers.incoming[request.id] == nil, !transfers.shared.uses(request.id) else {
            return refuse("that id is in use")
        }
        let total = sharedServedCount(to: nil)
        guard total < Self.maximumSharedServed, sharedServedCount(to: entry.peer.id) < Self.maximumSharedServedPerPeer,
            transfers.outgoingRefusal(to: entry.peer.id, name: entry.peer.name) == nil
        else {
            return refuse("busy: serving \(total) shared files; ask again later or another member")
        }
        transfers.shared.lookUp(request.id, for: entry.peer.id)
        out.append(.file(.serveShared(request, to: entry.peer)))
    }

    /// The shell opened the file asked for (answer to `FileAction.serveShared`): it is offered, under the
    /// request's id, with its digest. (If the member is gone meanwhile, the shell closes the file.)
    public mutating func serveShared(_ request: WireFrame.FileRequest, file: OfferedFile, to peer: PeerID, at now: EngineTime) -> [SessionAction] {
        guard transfers.shared.lookedUp(request.id) == peer, links.isLinked(peer), rooms[request.room]?.members[peer] != nil,
            transfers.outgoing[request.id] == nil, transfers.incoming[request.id] == nil,
            let (_, actions) = try? offerResource(
                file, to: peer, kind: .shared, room: request.room, ephemeral: true, id: request.id,
                digest: request.sha256, at: now)
        else {
            return [.file(.close(request.id, removePart: false))]
        }
        transfers.shared.served(request.id, at: now.monotonic)
        timers.scheduleNoLaterThan(.sharedServes, at: now.monotonic + Self.sharedServeAcceptTimeout)
        return actions
    }

    /// Whether one of `messages` (the room's messages whose body begins as an announcement of the digest
    /// asked for: `SharedFile.bodyPrefix`) lets us serve `request` to `requester`: an announcement of
    /// exactly that digest, of kind file, in the room asked about, not direct, by a member other than the
    /// requester. So a member cannot fetch, by its digest, a file shared in a room it is not in (nor one
    /// sent to us alone), and cannot learn whether we hold some content by announcing it itself, directly
    /// to us or in the room, and asking for it.
    /// `authors`: who may have announced it (the room's members and us; nil: anyone): an announcement a
    /// history brought from an author who is not a member (one an inviter may have made up) does not count.
    public static func mayServe(
        _ request: WireFrame.FileRequest, to requester: PeerID, announcedIn messages: [StoredMessage],
        authors: Set<String>? = nil
    ) -> Bool {
        messages.contains { message in
            message.kind == .file && !message.direct && message.room == request.room.rawValue && message.senderID != requester.rawValue
                && authors.map { $0.contains(message.senderID) } ?? true
                && SharedFile(body: message.body)?.sha256 == request.sha256
        }
    }

    /// What a member that asks for a file we do not serve is told, the same whether we do not hold it or
    /// it was not announced in that room (by someone else, not directly): a member learns no more of what
    /// we hold than what the room's announcements tell it.
    public static func notServedText(_ request: WireFrame.FileRequest, ownName: String) -> String {
        "\(ownName) has no such file to serve in \(request.room)"
    }

    /// The shell does not hold what was asked for (answer to `FileAction.serveShared`).
    public mutating func notServed(_ request: WireFrame.FileRequest, to peer: PeerID, because text: String) -> [SessionAction] {
        _ = transfers.shared.lookedUp(request.id)
        guard let handle = links.handle(peer) else { return [] }
        return [.send(handle, [.resourceEnd(.init(id: request.id, status: .refused, text: text))])]
    }

    /// Files served that were not accepted in time, or whose receiver stopped acknowledging, end.
    mutating func sharedServesDue(at now: EngineTime, _ out: inout [SessionAction]) {
        for id in transfers.shared.served.keys.sorted(by: { $0.description < $1.description }) {
            guard let transfer = transfers.outgoing[id], var progress = transfers.shared.served[id] else {
                transfers.shared.progress(id, nil)
                continue
            }
            let acknowledged = transfer.acknowledged
            // Once every byte is sent the receiver checks and places it (a large copy takes a while).
            let stall = transfer.isFinishedSending ? 10 * Self.sharedServeStall : Self.sharedServeStall
            if acknowledged > progress.acknowledged {
                progress = ServedProgress(acknowledged: acknowledged, since: now.monotonic)
                transfers.shared.progress(id, progress)
            }
            let problem: String? =
                transfer.status == .offered && progress.since + Self.sharedServeAcceptTimeout <= now.monotonic
                ? "not accepted in \(Self.sharedServeAcceptTimeout / 1000) s"
                : progress.since + stall <= now.monotonic ? "nothing acknowledged for \(stall / 1000) s" : nil
            guard let problem else { continue }
            transfers.shared.progress(id, nil)
            feedOutgoing(id, at: now, &out) { $0.fail(problem) }
        }
        if !transfers.shared.served.isEmpty { timers.schedule(.sharedServes, at: now.monotonic + Self.sharedServeAcceptTimeout) }
    }
}
