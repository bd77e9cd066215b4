import LanchatCore
import LanchatWire

/// Room metadata and its administration's own state (issue 29: a machine that owns its state; the rules
/// are told in `+Metadata` and `+Admin`, which route frames and commands here and turn its answers into
/// actions): the winning entry of each key per room, deletions included; when we joined each room (our
/// clock); and the closings of rooms we left because an administrator closed them, for members that come
/// back unaware. It decides which entry wins, what fits the budgets, how far a version may step, and that
/// the creator outranks the others on the administration's keys. What it needs of the rest of the engine
/// (whose proof invited us, which rooms we are in) is passed in. `MembershipBook` keeps it, with the
/// rooms it describes.
struct MetadataBook: Sendable {
    private typealias Engine = SessionStateMachine

    /// The winning entry of each key, deletions included, by room.
    private var entries: [RoomID: [String: WireFrame.MetaEntry]] = [:]
    /// When we joined each room (or made it), by our clock.
    private var joinedAt: [RoomID: Int64] = [:]
    /// The closing of each room we left because an administrator closed it, at most `maximumClosedRooms`.
    private var closings: [RoomID: WireFrame.MetaEntry] = [:]

    /// Closings of rooms we left kept, at most (the oldest goes).
    static let maximumClosedRooms = 64

    init() {}

    /// What the store held, for the rooms we are in (`rooms`): the administration's keys first, then the
    /// rest, each within what a receiver keeps (the creator's and the other administrators' entries,
    /// `2 * maximumReservedKeys` each, the creator's record apart; `2 * maximumMetaKeys` ordinary ones):
    /// whatever the key order, no ordinary key pushes out a removal. What a store holds beyond those (an
    /// older file, or one edited) is not loaded.
    init(restoring metadata: [StoredMeta], joinedAt: [RoomID: Int64], in rooms: Set<RoomID>) {
        self.joinedAt = joinedAt
        var restoredCounts: [RoomID: (reserved: Int, ordinary: Int)] = [:]
        for stored in metadata.filter({ Engine.isReservedKey($0.key) }) + metadata.filter({ !Engine.isReservedKey($0.key) }) {
            let reserved = Engine.isReservedKey(stored.key)
            guard let room = RoomID(stored.room), WireFrame.MetaEntry.isKey(stored.key), rooms.contains(room), entries[room]?[stored.key] == nil,
                stored.key == Engine.creatorKey
                    || (reserved
                        ? restoredCounts[room]?.reserved ?? 0 < 4 * Engine.maximumReservedKeys
                        : restoredCounts[room]?.ordinary ?? 0 < 2 * Engine.maximumMetaKeys),
                stored.version <= Engine.maximumMetaNumber
            else { continue }
            restoredCounts[room, default: (0, 0)].reserved += reserved && stored.key != Engine.creatorKey ? 1 : 0
            restoredCounts[room, default: (0, 0)].ordinary += reserved ? 0 : 1
            entries[room, default: [:]][stored.key] = WireFrame.MetaEntry(
                key: stored.key, value: stored.value, deleted: stored.deleted, version: stored.version,
                timestampMilliseconds: UInt64(max(0, stored.timestamp)), author: stored.authorID,
                signature: Signature(key: stored.authorKey, bytes: stored.signature))
        }
    }

    // MARK: What is held

    /// The live entries of `room`, in key order.
    func live(in room: RoomID) -> [WireFrame.MetaEntry] {
        (entries[room] ?? [:]).values.filter { !$0.deleted }.sorted { $0.key < $1.key }
    }

    /// Everything held for `room` (deletions included), in key order.
    func all(in room: RoomID) -> [WireFrame.MetaEntry] { (entries[room] ?? [:]).values.sorted { $0.key < $1.key } }

    /// The entry for `key` (a deletion included), if any.
    func entry(_ key: String, in room: RoomID) -> WireFrame.MetaEntry? { entries[room]?[key] }

    /// Rooms whose entries are kept here (for the consistency check).
    var rooms: Set<RoomID> { Set(entries.keys) }

    var closedRoomsKept: Int { closings.count }

    /// A digest of everything held for `room` (FNV-1a over the entries in key order: the same entries
    /// give the same digest on every member).
    func digest(_ room: RoomID) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ bytes: some Sequence<UInt8>) {
            for byte in bytes {
                hash ^= UInt64(byte)
                hash = hash &* 0x100_0000_01b3
            }
            hash ^= 0xff
            hash = hash &* 0x100_0000_01b3
        }
        for entry in (entries[room] ?? [:]).values.sorted(by: { $0.key < $1.key }) {
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

    // MARK: The administration as held

    /// Who made `room` (as the first record of it we hold says), if anyone we know of.
    func creator(of room: RoomID) -> PeerID? {
        entries[room]?[Engine.creatorKey].flatMap { $0.deleted ? nil : PeerID($0.value) }
    }

    /// Who administers `room`: its creator, and whom administrators named (and did not remove since),
    /// counted from the creator: a naming counts while its author administers, so the namings of an
    /// administrator demoted since lapse with it. Whether a member took such a naming depended on when it
    /// arrived (before or after the demotion); counted this way, members that hold the same entries agree.
    /// (Without a record of the creator, every live naming counts, as each was taken on its author's
    /// authority when it arrived.)
    func administrators(of room: RoomID) -> Set<PeerID> {
        var named: [(id: PeerID, author: String)] = []
        for (key, entry) in entries[room] ?? [:] where key != Engine.creatorKey && key.hasPrefix(Engine.adminPrefix) && !entry.deleted {
            if let id = PeerID(String(key.dropFirst(Engine.adminPrefix.count))), removalTime(id, in: room) == nil { named.append((id, entry.author)) }
        }
        guard let creator = creator(of: room) else { return Set(named.map(\.id)) }
        var result: Set<PeerID> = [creator]
        var authors: Set<String> = [creator.rawValue]
        var grew = true
        while grew {
            grew = false
            for naming in named where !result.contains(naming.id) && authors.contains(naming.author) {
                result.insert(naming.id)
                authors.insert(naming.id.rawValue)
                grew = true
            }
        }
        return result
    }

    /// When an administrator removed `member` from `room` (a live `removed.<id>` entry), if it did.
    func removalTime(_ member: PeerID, in room: RoomID) -> UInt64? {
        guard let entry = entries[room]?[Engine.removedPrefix + member.rawValue], !entry.deleted else { return nil }
        return entry.timestampMilliseconds
    }

    /// Whether `peer` is named an administrator of `room` (a live `admin.<id>` entry).
    func isNamed(_ peer: PeerID, in room: RoomID) -> Bool {
        entries[room]?[Engine.adminPrefix + peer.rawValue].map { !$0.deleted } == true
    }

    /// Whether `writer` removing `peer` from `room` also deletes its naming as an administrator: it is
    /// named, and not by the creator unless `writer` is the creator (the removal alone ends its rights).
    func unnamesOnRemoval(_ peer: PeerID, in room: RoomID, by writer: PeerID) -> Bool {
        guard let named = entries[room]?[Engine.adminPrefix + peer.rawValue], !named.deleted else { return false }
        return named.author != creator(of: room)?.rawValue || writer == creator(of: room)
    }

    /// Whether `peer`'s removal from `room` was the creator's, and `writer` is not the creator: only the
    /// creator may lift it.
    func onlyCreatorLifts(_ peer: PeerID, in room: RoomID, for writer: PeerID) -> Bool {
        guard let creator = creator(of: room), creator != writer else { return false }
        return entries[room]?[Engine.removedPrefix + peer.rawValue]?.author == creator.rawValue
    }

    /// Whether a received entry may be taken: true for ordinary keys; for the administration's, by its
    /// author's authority as we hold it. The creator's record only from `sender` if it is `inviter` (who
    /// invited us, by our own proof).
    func authorized(_ entry: WireFrame.MetaEntry, in room: RoomID, from sender: PeerID, inviter: PeerID?) -> Bool {
        guard Engine.isReservedKey(entry.key), let author = PeerID(entry.author) else { return true }
        if entry.key == Engine.creatorKey {
            // Only as we join, from the member that invited us: nobody can claim a room that has no record
            // later (one made by an older lanchat), and a member can fool only those it invites itself.
            guard let inviter, inviter == sender else { return false }
            return entries[room]?[Engine.creatorKey] == nil && !entry.deleted && entry.value == entry.author
        }
        guard administrators(of: room).contains(author) else { return false }
        if entry.key == Engine.closedKey { return true }
        let prefix = entry.key.hasPrefix(Engine.adminPrefix) ? Engine.adminPrefix : Engine.removedPrefix
        guard let subject = PeerID(String(entry.key.dropFirst(prefix.count))) else { return false }
        return subject != creator(of: room)
    }

    // MARK: Joining, leaving, closing

    /// We joined (or made) `room`, at `wall` by our clock: a closing kept of an earlier room of that name goes.
    mutating func joined(_ room: RoomID, at wall: Int64) {
        joinedAt[room] = wall
        closings[room] = nil
    }

    /// We left `room`: its entries go (a later room of that name starts from what its members hold), and
    /// when we joined it. Whether entries were held.
    mutating func left(_ room: RoomID) -> Bool {
        joinedAt[room] = nil
        return entries.removeValue(forKey: room) != nil
    }

    /// When we joined `room` (or made it), by our clock; without a record, our proof's time (`proofTime`).
    /// An administrator's closing older than that is about an earlier room of that name.
    func joinTime(_ room: RoomID, proofTime: UInt64?) -> UInt64 {
        UInt64(max(0, joinedAt[room] ?? Int64(clamping: proofTime ?? 0)))
    }

    /// An administrator's closing of `room` we took: whether it closes the room we are in (not older than
    /// our joining, `joinTime`), and then it is kept (the oldest kept goes past `maximumClosedRooms`).
    mutating func closes(_ entry: WireFrame.MetaEntry, _ room: RoomID, proofTime: UInt64?) -> Bool {
        guard entry.timestampMilliseconds >= joinTime(room, proofTime: proofTime) else { return false }
        closings[room] = entry
        // (Ties broken by room: a dictionary's order differs between runs, and a seed must replay.)
        if closings.count > Self.maximumClosedRooms,
            let oldest = closings.min(by: { ($0.value.timestampMilliseconds, $0.key.rawValue) < ($1.value.timestampMilliseconds, $1.key.rawValue) })
        {
            closings[oldest.key] = nil
        }
        return true
    }

    /// The closing of `room`, if we left it because it was closed.
    func closing(of room: RoomID) -> WireFrame.MetaEntry? { closings[room] }

    // MARK: Writes

    /// The rule for concurrent writes (`SessionStateMachine.wins`).
    static func wins(_ a: WireFrame.MetaEntry, over b: WireFrame.MetaEntry) -> Bool {
        if (a.version, a.timestampMilliseconds, a.author) != (b.version, b.timestampMilliseconds, b.author) {
            return (a.version, a.timestampMilliseconds, a.author) > (b.version, b.timestampMilliseconds, b.author)
        }
        if (a.deleted, a.value) != (b.deleted, b.value) { return (a.deleted ? 1 : 0, a.value) > (b.deleted ? 1 : 0, b.value) }
        return (b.signature.key + b.signature.bytes).lexicographicallyPrecedes(a.signature.key + a.signature.bytes)
    }

    /// Whether `a` replaces `b` in `room`: `wins`, but that an entry of the administration's keys (the
    /// creator's record aside) written by the room's creator outranks another author's, whatever their
    /// versions, so no administrator can undo what the creator wrote by stepping ahead (nor make itself
    /// irremovable). A total order for a given creator; members that hold different creators' records may
    /// disagree, and then neither answers the other's entry with its own (`admission`), so they never loop.
    func outranks(_ a: WireFrame.MetaEntry, over b: WireFrame.MetaEntry, in room: RoomID) -> Bool {
        if Engine.isReservedKey(a.key), a.key != Engine.creatorKey, let creator = creator(of: room)?.rawValue, (a.author == creator) != (b.author == creator) {
            return a.author == creator
        }
        return Self.wins(a, over: b)
    }

    /// Whether a write of a reserved key by `writer` may replace `current`.
    private func outranks(writer: String, over current: WireFrame.MetaEntry, in room: RoomID) -> Bool {
        guard current.key != Engine.creatorKey, let creator = creator(of: room)?.rawValue else { return true }
        return current.author != creator || writer == creator
    }

    /// Whether `writer` (us) may set (`value`) or delete (nil) `key` in `room`, with `ifVersion` only if the
    /// current version of the key is that (0: it does not exist); the version the write takes if so.
    func checkWrite(_ key: String, to value: String?, in room: RoomID, ifVersion: UInt64?, by writer: String) throws(SessionError) -> UInt64 {
        guard WireFrame.MetaEntry.isKey(key) else {
            throw SessionError(.badKey, "a key is 1-64 of A-Z a-z 0-9 . _ - (not '\(key.prefix(70))')")
        }
        if let value {
            guard value.utf8.count <= WireFrame.MetaEntry.maximumValue else {
                throw SessionError(.tooLarge, "a value is at most \(WireFrame.MetaEntry.maximumValue) bytes (this one is \(value.utf8.count))")
            }
            guard !value.unicodeScalars.contains(where: { ($0.value < 0x20 || $0.value == 0x7f) && $0 != "\n" && $0 != "\t" }) else {
                throw SessionError(.badValue, "a value is text: no control characters but newline and tab")
            }
        }
        let current = entries[room]?[key]
        let currentVersion = current?.version ?? 0
        guard currentVersion < Engine.maximumMetaNumber else {
            throw SessionError(.tooManyVersions, "\(key) has reached the last version (\(currentVersion)); delete it under another key")
        }
        if let ifVersion, ifVersion != currentVersion {
            throw SessionError(.versionMismatch, "\(key) is at version \(currentVersion) here, not \(ifVersion)\(current.map { $0.deleted ? " (deleted)" : "" } ?? "")")
        }
        if value == nil, current == nil || current?.deleted == true {
            throw SessionError(.unknownKey, "room \(room) has no key '\(key)'")
        }
        let live = bytes(room, without: key) + (value.map { key.utf8.count + $0.utf8.count } ?? 0)
        guard live <= Engine.maximumMetaBytes else {
            throw SessionError(.tooLarge, "room \(room)'s metadata would hold \(live) bytes of keys and values; the limit is \(Engine.maximumMetaBytes)")
        }
        if let current, Engine.isReservedKey(key), !outranks(writer: writer, over: current, in: room) {
            throw SessionError(.refused, "\(key) was written by \(room)'s creator: only it can change that")
        }
        if current == nil, let refusal = budgetRefusal(key, by: writer, in: room, factor: 1, ownID: writer) { throw SessionError(.tooManyKeys, refusal) }
        return currentVersion + 1
    }

    /// What a member's entry is before its signature is checked.
    enum Admission: Equatable {
        /// Malformed, stepping too far, the one held, or losing to ours by the creator's rank alone (not
        /// answered: a member holding another creator's record would answer back forever).
        case ignored
        /// Ours wins: it goes back to the sender.
        case answered(WireFrame.MetaEntry)
        /// Refused for its author's authority as we hold it (`authorized`): tried once more if the same
        /// frames bring others (an administrator named in them, for example).
        case deferred
        /// Taken if `author`'s signature verifies and it fits (`fits`).
        case verify(author: PeerID)
    }

    /// What to do with `entry` from `sender` for `room` (`inviter`: who invited us, by our own proof).
    func admission(of entry: WireFrame.MetaEntry, in room: RoomID, from sender: PeerID, inviter: PeerID?) -> Admission {
        guard let author = PeerID(entry.author), entry.version >= 1, entry.version <= Engine.maximumMetaNumber,
            entry.timestampMilliseconds <= Engine.maximumMetaNumber, entry.deleted ? entry.value.isEmpty : true
        else { return .ignored }
        // At most `maximumMetaStep` past the version we hold (before the signature is checked: it costs nothing).
        guard entry.version <= (entries[room]?[entry.key]?.version ?? 0) + Engine.maximumMetaStep else { return .ignored }
        if let current = entries[room]?[entry.key] {
            if current == entry { return .ignored }
            // The first record of the creator we hold stays (and is not sent back: two members that hold
            // different ones would answer each other forever).
            if entry.key == Engine.creatorKey { return .ignored }
            if !outranks(entry, over: current, in: room) {
                return Self.wins(entry, over: current) ? .ignored : .answered(current)
            }
        }
        guard authorized(entry, in: room, from: sender, inviter: inviter) else { return .deferred }
        return .verify(author: author)
    }

    /// Whether a member's entry (verified) fits what a receiver holds: twice the writer's bytes, and for a
    /// new key, twice its budgets.
    func fits(_ entry: WireFrame.MetaEntry, in room: RoomID) -> Bool {
        let live = bytes(room, without: entry.key) + (entry.deleted ? 0 : entry.key.utf8.count + entry.value.utf8.count)
        return live <= Engine.receivedMetaBytes
            && (entries[room]?[entry.key] != nil || budgetRefusal(entry.key, by: entry.author, in: room, factor: 2, ownID: nil) == nil)
    }

    /// Keeps an entry that won. Deletions are kept (so an older write does not come back): a new ordinary
    /// key past the limits pushes out its own author's oldest deletions only (`pushedOut`), which are
    /// returned; the administration's never go.
    mutating func apply(_ entry: WireFrame.MetaEntry, in room: RoomID) -> [String] {
        var gone: [String] = []
        if entries[room]?[entry.key] == nil, !Engine.isReservedKey(entry.key) {
            for key in pushedOut(forNewKeyBy: entry.author, in: room) {
                entries[room]![key] = nil
                gone.append(key)
            }
        }
        entries[room, default: [:]][entry.key] = entry
        return gone
    }

    // MARK: Budgets

    private func bytes(_ room: RoomID, without key: String? = nil) -> Int {
        (entries[room] ?? [:]).values.reduce(0) { $0 + ($1.deleted || $1.key == key ? 0 : $1.key.utf8.count + $1.value.utf8.count) }
    }

    /// Why a new key `key` (one `room` holds no entry for) written by `author` does not fit, if it does not:
    /// `factor` 1 at the writer, 2 at a receiver (`ownID`: ours, to say "you"). An ordinary key counts what
    /// `pushedOut` would make room with; the administration's keys count apart (`reservedRefusal`).
    private func budgetRefusal(_ key: String, by author: String, in room: RoomID, factor: Int, ownID: String?) -> String? {
        if Engine.isReservedKey(key) { return reservedRefusal(key, by: author, in: room, factor: factor) }
        let (total, own) = ordinaryCounts(withNewKeyBy: author, in: room)
        let isCreator = author == creator(of: room)?.rawValue
        let freed = pushedOut(forNewKeyBy: author, in: room).count
        // The creator is held to the receivers' room limit only.
        let roomLimit = (isCreator ? 2 : factor) * Engine.maximumMetaKeys
        if total - freed > roomLimit {
            return "room \(room) holds \(total - 1) keys (deletions included); the limit is \(roomLimit): delete one of yours first"
        }
        if !isCreator, own - freed > factor * Engine.maximumMetaKeysPerAuthor {
            return "\(author == ownID ? "you hold" : "\(author.prefix(8)) holds") \(own - 1) keys of room \(room) (deletions included); "
                + "the limit is \(factor * Engine.maximumMetaKeysPerAuthor) a member: delete one of yours first"
        }
        return nil
    }

    /// Why a new key of the administration's (one `room` holds no entry for) written by `author` does not
    /// fit, if it does not (`factor` 1 at the writer, 2 at a receiver). The creator's record always fits.
    private func reservedRefusal(_ key: String, by author: String, in room: RoomID, factor: Int) -> String? {
        guard key != Engine.creatorKey else { return nil }
        let reserved = (entries[room] ?? [:]).values.filter { Engine.isReservedKey($0.key) && $0.key != Engine.creatorKey }
        let creator = creator(of: room)?.rawValue
        let own = reserved.filter { $0.author == author }.count
        if author == creator {
            return own < factor * Engine.maximumReservedKeys
                ? nil : "room \(room)'s creator holds \(own) entries of its administration; the limit is \(factor * Engine.maximumReservedKeys)"
        }
        guard own < factor * Engine.maximumReservedKeysPerAdministrator else {
            return
                "\(author.prefix(8)) holds \(own) entries of room \(room)'s administration; the limit is \(factor * Engine.maximumReservedKeysPerAdministrator) an administrator"
        }
        let others = reserved.filter { $0.author != creator }.count
        guard others < factor * Engine.maximumReservedKeys else {
            return "room \(room)'s administrators hold \(others) entries of its administration; the limit is \(factor * Engine.maximumReservedKeys) (the creator's apart)"
        }
        return nil
    }

    /// The room's ordinary entries (deletions included), and `author`'s among them, with a new key of
    /// `author`'s counted.
    private func ordinaryCounts(withNewKeyBy author: String, in room: RoomID) -> (total: Int, own: Int) {
        let ordinary = (entries[room] ?? [:]).values.filter { !Engine.isReservedKey($0.key) }
        return (ordinary.count + 1, ordinary.count { $0.author == author } + 1)
    }

    /// The deletions that go when `author` writes a new ordinary key (`ordinaryCounts`): its own, oldest
    /// first (by time, then key), as many as bring both counts within the writer's limits (or all it has).
    /// Never another author's (so nobody can push out a deletion to replay what it deleted), nor the
    /// administration's.
    private func pushedOut(forNewKeyBy author: String, in room: RoomID) -> [String] {
        let (total, own) = ordinaryCounts(withNewKeyBy: author, in: room)
        let isCreator = author == creator(of: room)?.rawValue
        let excess = max(isCreator ? 0 : own - Engine.maximumMetaKeysPerAuthor, total - (isCreator ? 2 : 1) * Engine.maximumMetaKeys)
        guard excess > 0 else { return [] }
        return (entries[room] ?? [:]).values
            .filter { $0.deleted && $0.author == author && !Engine.isReservedKey($0.key) }
            .sorted { ($0.timestampMilliseconds, $0.key) < ($1.timestampMilliseconds, $1.key) }
            .prefix(excess).map(\.key)
    }
}
