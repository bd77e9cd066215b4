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
/// - A store is restored the administration's keys first (`init`), within what a receiver keeps.
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
        (meta[room] ?? [:]).values.filter { !$0.deleted }.sorted { $0.key < $1.key }
    }

    /// The entry for `key` (a deletion included), if any.
    public func metaEntry(_ key: String, in room: RoomID) -> WireFrame.MetaEntry? { meta[room]?[key] }

    /// The rule for concurrent writes: whether `a` replaces `b`. A total order (the value, then the
    /// signature's bytes, break the last ties: an author that signs two writes with the same numbers, or
    /// the same write twice, ECDSA signatures being randomized), so two members never answer each other
    /// with their own entries forever.
    public static func wins(_ a: WireFrame.MetaEntry, over b: WireFrame.MetaEntry) -> Bool {
        if (a.version, a.timestampMilliseconds, a.author) != (b.version, b.timestampMilliseconds, b.author) {
            return (a.version, a.timestampMilliseconds, a.author) > (b.version, b.timestampMilliseconds, b.author)
        }
        if (a.deleted, a.value) != (b.deleted, b.value) { return (a.deleted ? 1 : 0, a.value) > (b.deleted ? 1 : 0, b.value) }
        return (b.signature.key + b.signature.bytes).lexicographicallyPrecedes(a.signature.key + a.signature.bytes)
    }

    /// Sets (`value`) or deletes (nil) `key` in `room`; with `ifVersion`, only if our current version
    /// of the key is that (0: the key does not exist).
    public mutating func setMeta(
        _ key: String, to value: String?, in room: RoomID, ifVersion: UInt64? = nil, at now: EngineTime
    ) throws(SessionError) -> (WireFrame.MetaEntry, [SessionAction]) {
        guard !Self.isReservedKey(key) else {
            throw SessionError("reserved_key", "'\(key)' is the room's administration: use `lanchat remove`, `lanchat close` or `lanchat admin`")
        }
        return try writeMeta(key, to: value, in: room, ifVersion: ifVersion, at: now)
    }

    /// `setMeta` for any key (administration's included).
    mutating func writeMeta(
        _ key: String, to value: String?, in room: RoomID, ifVersion: UInt64?, at now: EngineTime
    ) throws(SessionError) -> (WireFrame.MetaEntry, [SessionAction]) {
        guard rooms[room] != nil else { throw SessionError("unknown_room", "you are not in room '\(room)'") }
        guard let keys = configuration.envelopes else {
            throw SessionError("unsupported", "room metadata is signed: this daemon speaks wire protocol version 1 only")
        }
        guard WireFrame.MetaEntry.isKey(key) else {
            throw SessionError("bad_key", "a key is 1-64 of A-Z a-z 0-9 . _ - (not '\(key.prefix(70))')")
        }
        if let value {
            guard value.utf8.count <= WireFrame.MetaEntry.maximumValue else {
                throw SessionError("too_large", "a value is at most \(WireFrame.MetaEntry.maximumValue) bytes (this one is \(value.utf8.count))")
            }
            guard !value.unicodeScalars.contains(where: { ($0.value < 0x20 || $0.value == 0x7f) && $0 != "\n" && $0 != "\t" }) else {
                throw SessionError("bad_value", "a value is text: no control characters but newline and tab")
            }
        }
        let current = meta[room]?[key]
        let currentVersion = current?.version ?? 0
        guard currentVersion < Self.maximumMetaNumber else {
            throw SessionError("too_many_versions", "\(key) has reached the last version (\(currentVersion)); delete it under another key")
        }
        if let ifVersion, ifVersion != currentVersion {
            throw SessionError("version_mismatch", "\(key) is at version \(currentVersion) here, not \(ifVersion)\(current.map { $0.deleted ? " (deleted)" : "" } ?? "")")
        }
        if value == nil, current == nil || current?.deleted == true {
            throw SessionError("unknown_key", "room \(room) has no key '\(key)'")
        }
        let live = metaBytes(room, without: key) + (value.map { key.utf8.count + $0.utf8.count } ?? 0)
        guard live <= Self.maximumMetaBytes else {
            throw SessionError("too_large", "room \(room)'s metadata would hold \(live) bytes of keys and values; the limit is \(Self.maximumMetaBytes)")
        }
        let own = configuration.ownID.rawValue
        if let current, Self.isReservedKey(key), !outranks(own: own, over: current, in: room) {
            throw SessionError("refused", "\(key) was written by \(room)'s creator: only it can change that")
        }
        if current == nil, let refusal = budgetRefusal(key, by: own, in: room, factor: 1) { throw SessionError("too_many_keys", refusal) }
        // The version orders writes; the time only breaks ties between writes of the same version.
        let time = min(UInt64(max(0, now.wall)), Self.maximumMetaNumber)
        let bytes = Envelope.metaBytes(room: room, key: key, deleted: value == nil, value: value ?? "", version: currentVersion + 1, timestamp: time, author: own)
        let entry = WireFrame.MetaEntry(key: key, value: value ?? "", deleted: value == nil, version: currentVersion + 1, timestampMilliseconds: time,
                                        author: own, signature: keys.signature(over: bytes))
        var out: [SessionAction] = []
        apply(entry, in: room, by: configuration.ownName, at: now, &out)
        handOn([entry], in: room, except: nil, &out)
        return (entry, out)
    }

    private func metaBytes(_ room: RoomID, without key: String? = nil) -> Int {
        (meta[room] ?? [:]).values.reduce(0) { $0 + ($1.deleted || $1.key == key ? 0 : $1.key.utf8.count + $1.value.utf8.count) }
    }

    /// Why a new key `key` (one `room` holds no entry for) written by `author` does not fit, if it does not:
    /// `factor` 1 at the writer, 2 at a receiver. An ordinary key counts what `pushedOut` would make room
    /// with; the administration's keys count apart (`reservedRefusal`).
    func budgetRefusal(_ key: String, by author: String, in room: RoomID, factor: Int) -> String? {
        if Self.isReservedKey(key) { return reservedRefusal(key, by: author, in: room, factor: factor) }
        let (total, own) = ordinaryCounts(withNewKeyBy: author, in: room)
        let isCreator = author == creator(of: room)?.rawValue
        let freed = pushedOut(forNewKeyBy: author, in: room).count
        // The creator is held to the receivers' room limit only.
        let roomLimit = (isCreator ? 2 : factor) * Self.maximumMetaKeys
        if total - freed > roomLimit {
            return "room \(room) holds \(total - 1) keys (deletions included); the limit is \(roomLimit): delete one of yours first"
        }
        if !isCreator, own - freed > factor * Self.maximumMetaKeysPerAuthor {
            return "\(author == configuration.ownID.rawValue ? "you hold" : "\(author.prefix(8)) holds") \(own - 1) keys of room \(room) (deletions included); "
                + "the limit is \(factor * Self.maximumMetaKeysPerAuthor) a member: delete one of yours first"
        }
        return nil
    }

    /// The room's ordinary entries (deletions included), and `author`'s among them, with a new key of
    /// `author`'s counted.
    private func ordinaryCounts(withNewKeyBy author: String, in room: RoomID) -> (total: Int, own: Int) {
        let ordinary = (meta[room] ?? [:]).values.filter { !Self.isReservedKey($0.key) }
        return (ordinary.count + 1, ordinary.count { $0.author == author } + 1)
    }

    /// The deletions that go when `author` writes a new ordinary key (`ordinaryCounts`): its own, oldest
    /// first (by time, then key), as many as bring both counts within the writer's limits (or all it has).
    /// Never another author's (so nobody can push out a deletion to replay what it deleted), nor the
    /// administration's.
    private func pushedOut(forNewKeyBy author: String, in room: RoomID) -> [String] {
        let (total, own) = ordinaryCounts(withNewKeyBy: author, in: room)
        let isCreator = author == creator(of: room)?.rawValue
        let excess = max(isCreator ? 0 : own - Self.maximumMetaKeysPerAuthor, total - (isCreator ? 2 : 1) * Self.maximumMetaKeys)
        guard excess > 0 else { return [] }
        return (meta[room] ?? [:]).values
            .filter { $0.deleted && $0.author == author && !Self.isReservedKey($0.key) }
            .sorted { ($0.timestampMilliseconds, $0.key) < ($1.timestampMilliseconds, $1.key) }
            .prefix(excess).map(\.key)
    }

    /// Whether `a` replaces `b` in `room`: `wins`, but that an entry of the administration's keys (the
    /// creator's record aside) written by the room's creator outranks another author's, whatever their
    /// versions, so no administrator can undo what the creator wrote by stepping ahead (nor make itself
    /// irremovable). A total order for a given creator; members that hold different creators' records may
    /// disagree, and then neither answers the other's entry with its own (`received`), so they never loop.
    func outranks(_ a: WireFrame.MetaEntry, over b: WireFrame.MetaEntry, in room: RoomID) -> Bool {
        if Self.isReservedKey(a.key), a.key != Self.creatorKey, let creator = creator(of: room)?.rawValue, (a.author == creator) != (b.author == creator) {
            return a.author == creator
        }
        return Self.wins(a, over: b)
    }

    /// Whether our write (by `own`) of a reserved key may replace `current`.
    private func outranks(own: String, over current: WireFrame.MetaEntry, in room: RoomID) -> Bool {
        guard current.key != Self.creatorKey, let creator = creator(of: room)?.rawValue else { return true }
        return current.author != creator || own == creator
    }

    /// Keeps an entry that won, saves it, reports it (a topic also as a notice).
    private mutating func apply(_ entry: WireFrame.MetaEntry, in room: RoomID, by name: String, at now: EngineTime, _ out: inout [SessionAction]) {
        // Deletions are kept (so an older write does not come back): a new ordinary key past the limits
        // pushes out its own author's oldest deletion only (`pushedOut`); the administration's never go.
        if meta[room]?[entry.key] == nil, !Self.isReservedKey(entry.key) {
            for gone in pushedOut(forNewKeyBy: entry.author, in: room) {
                meta[room]![gone] = nil
                out.append(.persist(.deleteMeta(room, key: gone)))
            }
        }
        meta[room, default: [:]][entry.key] = entry
        out.append(.persist(.saveMeta(StoredMeta(
            room: room.rawValue, key: entry.key, value: entry.value, deleted: entry.deleted, version: entry.version,
            timestamp: Int64(clamping: entry.timestampMilliseconds), authorID: entry.author, authorKey: entry.signature.key, signature: entry.signature.bytes))))
        out.append(.emit(.metadata(room: room.rawValue, entry: entry, authorName: name)))
        if entry.key == Self.topicKey {
            // Its first line, at most 200 characters: a notice is one line.
            let line = entry.value.split(separator: "\n", omittingEmptySubsequences: false).first.map { String($0.prefix(200)) } ?? ""
            notice(room, entry.deleted ? "\(name) cleared the topic" : "topic: \(line) (set by \(name))", at: now, &out)
        }
    }

    /// We left `room`: its metadata goes (a later room of that name starts from what its members hold).
    mutating func forgetMeta(_ room: RoomID, _ out: inout [SessionAction]) {
        guard meta.removeValue(forKey: room) != nil else { return }
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
        guard let entries = meta[room], !entries.isEmpty else { return }
        out.append(.send(handle, metaFrames(entries.values.sorted { $0.key < $1.key }, in: room)))
    }

    /// A digest of everything we hold for `room` (FNV-1a over the entries in key order: the same entries
    /// give the same digest on every member).
    func metaDigest(_ room: RoomID) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ bytes: some Sequence<UInt8>) {
            for byte in bytes {
                hash ^= UInt64(byte)
                hash = hash &* 0x100_0000_01b3
            }
            hash ^= 0xff
            hash = hash &* 0x100_0000_01b3
        }
        for entry in (meta[room] ?? [:]).values.sorted(by: { $0.key < $1.key }) {
            mix(entry.key.utf8)
            mix(entry.value.utf8)
            mix(entry.author.utf8)
            mix(entry.signature.bytes)
            withUnsafeBytes(of: entry.version.bigEndian) { mix($0) }
            withUnsafeBytes(of: entry.timestampMilliseconds.bigEndian) { mix($0) }
            mix([entry.deleted ? 1 : 0])
        }
        return hash
    }

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
        // Administration first (the creator, then administrators), so that what they wrote in the same
        // frames counts; an entry refused for its author's authority is tried once more at the end.
        var passes = [update.entries.sorted { Self.administrationOrder($0.key) < Self.administrationOrder($1.key) }]
        var deferred: [WireFrame.MetaEntry] = []
        while !passes.isEmpty {
            let acceptedBefore = fresh.count
            for entry in passes.removeFirst() {
                guard let author = PeerID(entry.author), entry.version >= 1, entry.version <= Self.maximumMetaNumber,
                      entry.timestampMilliseconds <= Self.maximumMetaNumber, entry.deleted ? entry.value.isEmpty : true else { continue }
                // At most `maximumMetaStep` past the version we hold (before the signature is checked: it costs nothing).
                guard entry.version <= (meta[room]?[entry.key]?.version ?? 0) + Self.maximumMetaStep else { continue }
                if let current = meta[room]?[entry.key] {
                    if current == entry { continue }
                    // The first record of the creator we hold stays (and is not sent back: two members that hold
                    // different ones would answer each other forever).
                    if entry.key == Self.creatorKey { continue }
                    if !outranks(entry, over: current, in: room) {
                        // Lost by the creator's rank alone: not answered (a member holding another creator's
                        // record would answer back forever).
                        if !Self.wins(entry, over: current) { ours.append(current) }
                        continue
                    }
                }
                guard authorized(entry, in: room, from: link.peer.id) else {
                    deferred.append(entry)
                    continue
                }
                let bytes = Envelope.metaBytes(room: room, key: entry.key, deleted: entry.deleted, value: entry.value, version: entry.version,
                                               timestamp: entry.timestampMilliseconds, author: entry.author)
                guard keys.verifies(entry.signature, over: bytes, by: author) else { continue }
                let live = metaBytes(room, without: entry.key) + (entry.deleted ? 0 : entry.key.utf8.count + entry.value.utf8.count)
                guard live <= Self.receivedMetaBytes,
                      meta[room]?[entry.key] != nil || budgetRefusal(entry.key, by: entry.author, in: room, factor: 2) == nil else { continue }
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
