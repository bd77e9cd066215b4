import LanchatCore
import LanchatWire

/// Room metadata (issue 13, item 2): a per-room key/value store, every write of a key signed by its
/// author with a version (ROOM_META, 0x09). The rule for concurrent writes: of two entries for a key, the
/// one with the higher version wins; at equal versions the later timestamp; then the greater author id.
/// Every member applies the same rule to what it holds, so members that have seen the same writes hold
/// the same value, whatever the order they saw them in. A write names the version it replaces plus one;
/// `ifVersion` (compare-and-set) refuses it if this member's current version of the key is another.
/// Members exchange every entry when a connection comes up, and hand on each entry that was new to them,
/// so a newcomer or a member that was away gets the room's metadata from the first member it meets.
/// The key `topic` is the room's topic: shown as a notice when it changes and on joining.
///
/// What a member can do to it is bounded (issue 28, item 2), so that no member can freeze the room's
/// metadata nor, through it, its administration:
/// - A received entry's version steps at most `maximumMetaStep` (2^20) past the version held for its key
///   (0 for a key not held); writers step by 1. Reaching the last version (2^62, which a writer refuses
///   to pass) from nothing takes 2^42 entries, each verified.
/// - Ordinary keys (all but the administration's) have budgets of their own: a room holds at most
///   `maximumMetaKeys` (256) of them with their deletions at a writer, twice that at a receiver; one
///   author's entries at most `maximumMetaKeysPerAuthor` (64; a receiver twice that), so a member cannot
///   take them all. Past 64 (or 256 in the room) an author's new key pushes out that author's own oldest
///   deletions (as many as it takes, if it has them), never another's: nobody's writes push out the deletion of a value they would replay, and
///   deleted values stay deleted. The creator is held to the receivers' room limit only (512), and its
///   deletions only ever go for a new key of its own past it.
/// - The administration's keys never count against those, and their deletions are never pushed out:
///   see `+Admin` for their own budgets.
/// - A store is restored the administration's keys first (`MetadataBook.init`), within what a receiver keeps.
///
/// `MetadataBook` holds the entries and makes these decisions; this extension routes frames and commands
/// to it and turns its answers into actions.
extension SessionStateMachine {
    /// Bytes of keys and values a room holds at most (what `setMeta` enforces), and what a receiver
    /// takes at most (twice that: concurrent writes, each within the limit, may meet).
    public static let maximumMetaBytes = 64 * 1024
    static let receivedMetaBytes = 2 * maximumMetaBytes
    /// Ordinary keys (all but the administration's), deletions included (kept so that an older write does
    /// not come back), a room holds at most at a writer; a receiver takes twice that.
    public static let maximumMetaKeys = 256
    /// Ordinary keys, deletions included, one author's entries hold at most in a room at a writer (past it its
    /// own oldest deletion goes); a receiver takes twice that. (Not the creator's.)
    public static let maximumMetaKeysPerAuthor = 64
    /// How far past the version we hold for a key (0: none) a received entry's version may be.
    public static let maximumMetaStep: UInt64 = 1 << 20
    public static let topicKey = "topic"
    /// Versions and timestamps past this are refused from members (so that ours, one more, never overflows).
    static let maximumMetaNumber: UInt64 = 1 << 62

    /// The live entries of `room`'s metadata, by key.
    public func metadata(of room: RoomID) -> [WireFrame.MetaEntry] {
        membership.metadata.live(in: room)
    }

    /// The entry for `key` (a deletion included), if any.
    public func metaEntry(_ key: String, in room: RoomID) -> WireFrame.MetaEntry? { membership.metadata.entry(key, in: room) }

    /// The rule for concurrent writes: whether `a` replaces `b`. A total order (the value, then the
    /// signature's bytes, break the last ties: an author that signs two writes with the same numbers, or
    /// the same write twice, ECDSA signatures being randomized), so two members never answer each other
    /// with their own entries forever.
    public static func wins(_ a: WireFrame.MetaEntry, over b: WireFrame.MetaEntry) -> Bool { MetadataBook.wins(a, over: b) }

    /// Sets (`value`) or deletes (nil) `key` in `room`; with `ifVersion`, only if our current version
    /// of the key is that (0: the key does not exist).
    public mutating func setMeta(
        _ key: String, to value: String?, in room: RoomID, ifVersion: UInt64? = nil, at now: EngineTime
    ) throws(SessionError) -> (WireFrame.MetaEntry, [SessionAction]) {
        guard !Self.isReservedKey(key) else {
            throw SessionError(.reservedKey, "'\(key)' is the room's administration: use `lanchat remove`, `lanchat close` or `lanchat admin`")
        }
        return try writeMeta(key, to: value, in: room, ifVersion: ifVersion, at: now)
    }

    /// `setMeta` for any key (administration's included).
    mutating func writeMeta(
        _ key: String, to value: String?, in room: RoomID, ifVersion: UInt64?, at now: EngineTime
    ) throws(SessionError) -> (WireFrame.MetaEntry, [SessionAction]) {
        guard rooms[room] != nil else { throw SessionError(.unknownRoom, "you are not in room '\(room)'") }
        guard let keys = configuration.envelopes else {
            throw SessionError(.unsupported, "room metadata is signed: this daemon speaks wire protocol version 1 only")
        }
        let own = configuration.ownID.rawValue
        let version = try membership.metadata.checkWrite(key, to: value, in: room, ifVersion: ifVersion, by: own)
        // The version orders writes; the time only breaks ties between writes of the same version.
        let time = min(UInt64(max(0, now.wall)), Self.maximumMetaNumber)
        let bytes = Envelope.metaBytes(room: room, key: key, deleted: value == nil, value: value ?? "", version: version, timestamp: time, author: own)
        let entry = WireFrame.MetaEntry(
            key: key, value: value ?? "", deleted: value == nil, version: version, timestampMilliseconds: time,
            author: own, signature: keys.signature(over: bytes))
        var out: [SessionAction] = []
        apply(entry, in: room, by: configuration.ownName, at: now, &out)
        handOn([entry], in: room, except: nil, &out)
        return (entry, out)
    }

    /// Keeps an entry that won, saves it, reports it (a topic also as a notice).
    private mutating func apply(_ entry: WireFrame.MetaEntry, in room: RoomID, by name: String, at now: EngineTime, _ out: inout [SessionAction]) {
        // (A new ordinary key past the limits pushes out its own author's oldest deletions: `MetadataBook.apply`.)
        for gone in membership.metadata.apply(entry, in: room) { out.append(.persist(.deleteMeta(room, key: gone))) }
        out.append(
            .persist(
                .saveMeta(
                    StoredMeta(
                        room: room.rawValue, key: entry.key, value: entry.value, deleted: entry.deleted, version: entry.version,
                        timestamp: Int64(clamping: entry.timestampMilliseconds), authorID: entry.author, authorKey: entry.signature.key, signature: entry.signature.bytes)
                )))
        out.append(.emit(.metadata(room: room.rawValue, entry: entry, authorName: name)))
        if entry.key == Self.topicKey {
            // Its first line, at most 200 characters: a notice is one line.
            let line = entry.value.split(separator: "\n", omittingEmptySubsequences: false).first.map { String($0.prefix(200)) } ?? ""
            notice(room, entry.deleted ? "\(name) cleared the topic" : "topic: \(line) (set by \(name))", at: now, &out)
        }
    }

    /// We left `room`: its metadata goes (a later room of that name starts from what its members hold),
    /// and when we joined it.
    mutating func forgetMeta(_ room: RoomID, _ out: inout [SessionAction]) {
        guard membership.metadata.left(room) else { return }
        out.append(.persist(.deleteMeta(room, key: nil)))
    }

    /// Sends entries to the connected members of `room` (but `except`).
    private func handOn(_ entries: [WireFrame.MetaEntry], in room: RoomID, except: PeerID?, _ out: inout [SessionAction]) {
        guard !entries.isEmpty else { return }
        let frames = metaFrames(entries, in: room)
        for member in (rooms[room]?.members.keys.sorted() ?? []) where member != except {
            if let handle = links.handle(member) { out.append(.send(handle, frames)) }
        }
    }

    func metaFrames(_ entries: [WireFrame.MetaEntry], in room: RoomID) -> [WireFrame] {
        Self.chunks(entries, of: WireFrame.RoomMeta.maximumEntries).map { .roomMeta(.init(room: room, entries: $0)) }
    }

    /// Everything we hold of `room`'s metadata (deletions included), for a member that just connected.
    func sendMeta(_ room: RoomID, to handle: LinkHandle, _ out: inout [SessionAction]) {
        let entries = membership.metadata.all(in: room)
        guard !entries.isEmpty else { return }
        out.append(.send(handle, metaFrames(entries, in: room)))
    }

    /// A digest of everything we hold for `room` (FNV-1a over the entries in key order: the same entries
    /// give the same digest on every member).
    func metaDigest(_ room: RoomID) -> UInt64 { membership.metadata.digest(room) }

    /// At each resync: our digest of `room` to a connected member (whichever of us holds otherwise then
    /// sends all it holds, so members converge even when an exchange was missed).
    func sendMetaDigest(_ room: RoomID, to handle: LinkHandle, _ out: inout [SessionAction]) {
        out.append(.send(handle, [.roomMeta(.init(room: room, entries: [], digest: metaDigest(room)))]))
    }

    /// A member's ROOM_META: each entry that verifies (its author's signature) and wins over ours is kept and
    /// handed on; where ours wins, ours goes back to the sender.
    mutating func received(_ update: WireFrame.RoomMeta, from link: LinkTable.Entry, at now: EngineTime, _ out: inout [SessionAction]) {
        let room = update.room
        guard rooms[room]?.members[link.peer.id] != nil, let keys = configuration.envelopes else { return }
        if let digest = update.digest {
            if digest != metaDigest(room) { sendMeta(room, to: link.handle, &out) }
            return
        }
        var fresh: [WireFrame.MetaEntry] = []
        var ours: [WireFrame.MetaEntry] = []
        var enacted: [(WireFrame.MetaEntry, String)] = []
        // Who invited us (our proof says): the only member the creator's record is taken from.
        let inviter = membership.ownProof(room).flatMap { PeerID($0.inviter) }
        // Administration first (the creator, then administrators), so that what they wrote in the same
        // frames counts; an entry refused for its author's authority is tried once more at the end.
        var passes = [update.entries.sorted { Self.administrationOrder($0.key) < Self.administrationOrder($1.key) }]
        var deferred: [WireFrame.MetaEntry] = []
        while !passes.isEmpty {
            let acceptedBefore = fresh.count
            for entry in passes.removeFirst() {
                let author: PeerID
                switch membership.metadata.admission(of: entry, in: room, from: link.peer.id, inviter: inviter) {
                case .ignored: continue
                case .answered(let current):
                    ours.append(current)
                    continue
                case .deferred:
                    deferred.append(entry)
                    continue
                case .verify(let by): author = by
                }
                let bytes = Envelope.metaBytes(
                    room: room, key: entry.key, deleted: entry.deleted, value: entry.value, version: entry.version,
                    timestamp: entry.timestampMilliseconds, author: entry.author)
                guard keys.verifies(entry.signature, over: bytes, by: author), membership.metadata.fits(entry, in: room) else { continue }
                let name = author == link.peer.id ? link.peer.name : rooms[room]?.members[author]?.name ?? author.short
                apply(entry, in: room, by: name, at: now, &out)
                fresh.append(entry)
                if Self.isReservedKey(entry.key) { enacted.append((entry, name)) }
            }
            // An entry refused for its author's authority is tried once more if this pass took others (an
            // administrator named in the same frames, for example).
            if fresh.count > acceptedBefore, !deferred.isEmpty { passes.append(deferred) }
            deferred = []
        }
        handOn(fresh, in: room, except: link.peer.id, &out)
        if !ours.isEmpty { out.append(.send(link.handle, metaFrames(ours, in: room))) }
        for (entry, name) in enacted { enact(entry, in: room, by: name, at: now, &out) }
    }

    /// The creator's record, then administrators, then the rest.
    static func administrationOrder(_ key: String) -> Int {
        key == creatorKey ? 0 : key.hasPrefix(adminPrefix) ? 1 : 2
    }
}
