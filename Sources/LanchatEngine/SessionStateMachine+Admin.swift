import LanchatCore
import LanchatWire

/// Administration (issue 13, item 5): who may remove members and close a room, kept as reserved keys of
/// the room's signed metadata, so they travel, persist and converge as metadata does:
///
/// - `admin.creator` = the creator's id, signed by the creator when it makes the room. The first one a
///   member holds stays (a newcomer takes its inviter's); nobody can replace it later.
/// - `admin.<id>` = `admin`: `<id>` administers the room too; written (or deleted) only by an administrator.
/// - `removed.<id>` = the reason: an administrator removed `<id>`. It stays out (no member's list, proof
///   or invitation brings it back) until an administrator invites it again, which deletes the entry.
/// - `closed` = the reason: an administrator closed the room; every member's daemon leaves it.
///
/// An entry of these keys is taken only from an author who administers the room by what the receiver
/// holds (the creator, and whom administrators named, unless removed since), and the creator's record
/// only from the member that invited us (or our own, when we make the room). The creator cannot be
/// removed nor lose its rights.
/// `setMeta` refuses these keys: `remove`, `close` and `setAdmin` write them.
///
/// So that no member can block administration (issue 28, item 2):
/// - The creator's word outranks: of two entries of `admin.<id>`, `removed.<id>` or `closed`, one written
///   by the creator (as we hold its record) replaces one by anyone else whatever their versions, and an
///   administrator's write over the creator's is refused (`MetadataBook.outranks`). An administrator therefore cannot
///   undo its removal or demotion by the creator, nor have a member it named do it, however far ahead it
///   writes; only the creator lifts the creator's removals, and what the creator last wrote of a member
///   (invited back, demoted) only the creator changes. (A total order: `wins` among the creator's entries
///   and among the others'; an exception for the creator's lifts would make a cycle.)
/// - These keys never count against the ordinary keys' budgets, and have their own (`MetadataBook.reservedRefusal`):
///   the creator's entries at most `maximumReservedKeys` (512), the other administrators' together at most
///   512 and each at most `maximumReservedKeysPerAdministrator` (64); a receiver takes twice each. A
///   key the room holds is always rewritten (no budget: it grows nothing), and their deletions are never
///   pushed out (a deleted administrator or removal must not come back).
/// - Versions step at most 2^20 past what is held (`+Metadata`), so no one can push one of these keys to
///   the last version that writers refuse to pass.
/// So the creator can always remove, close and demote, whatever the other members and administrators wrote.
extension SessionStateMachine {
    public static let creatorKey = "admin.creator"
    static let adminPrefix = "admin."
    static let removedPrefix = "removed."
    public static let closedKey = "closed"
    /// The administration's entries the creator's (and, together, the other administrators') hold at most
    /// in a room at a writer; a receiver takes twice that.
    public static let maximumReservedKeys = 512
    /// The administration's entries each administrator but the creator holds at most (a receiver: twice).
    public static let maximumReservedKeysPerAdministrator = 64

    /// Keys only `remove`, `close`, `setAdmin` and room creation write.
    public static func isReservedKey(_ key: String) -> Bool {
        key == closedKey || key.hasPrefix(adminPrefix) || key.hasPrefix(removedPrefix)
    }

    /// Who made `room` (as the first record of it we hold says), if anyone we know of.
    public func creator(of room: RoomID) -> PeerID? { membership.metadata.creator(of: room) }

    /// Who administers `room`: its creator and whom administrators named (and did not remove since).
    public func administrators(of room: RoomID) -> Set<PeerID> { membership.metadata.administrators(of: room) }

    public func isAdministrator(_ id: PeerID, of room: RoomID) -> Bool { administrators(of: room).contains(id) }

    /// When an administrator removed `member` from `room` (a live `removed.<id>` entry), if it did.
    func removalTime(_ member: PeerID, in room: RoomID) -> UInt64? { membership.metadata.removalTime(member, in: room) }

    /// Removes `peer` from `room` (we must administer it): every member drops it, and its daemon leaves
    /// the room and tells its person why.
    public mutating func remove(_ peer: PeerID, from room: RoomID, reason: String, at now: EngineTime) throws(SessionError) -> [SessionAction] {
        let name = try checkAdministrator(of: room, to: "remove members")
        guard let member = rooms[room]?.members[peer] else { throw SessionError(.unknownMember, "\(peer.short) is not a member of \(room)") }
        guard peer != creator(of: room) else { throw SessionError(.refused, "\(member.name) created \(room): nobody can remove its creator") }
        var out: [SessionAction] = []
        // A removed administrator is one no longer. (One the creator named: only the creator can delete that
        // entry; the removal alone ends its rights.)
        if membership.metadata.unnamesOnRemoval(peer, in: room, by: configuration.ownID) {
            out += try writeReserved(Self.adminPrefix + peer.rawValue, nil, in: room, by: name, at: now)
        }
        return out + (try writeReserved(Self.removedPrefix + peer.rawValue, Self.reasonLine(reason), in: room, by: name, at: now))
    }

    /// Before we invite `peer` to `room`: if an administrator removed it, we lift that (we administer the
    /// room) or refuse (we do not).
    mutating func liftRemoval(of peer: PeerID, in room: RoomID, at now: EngineTime) throws(SessionError) -> [SessionAction] {
        guard removalTime(peer, in: room) != nil else { return [] }
        guard isAdministrator(configuration.ownID, of: room) else {
            throw SessionError(.removed, "an administrator removed \(peer.short) from \(room): only an administrator can invite it back")
        }
        if membership.metadata.onlyCreatorLifts(peer, in: room, for: configuration.ownID) {
            throw SessionError(.removed, "\(room)'s creator removed \(peer.short): only the creator can invite it back")
        }
        return try writeReserved(Self.removedPrefix + peer.rawValue, nil, in: room, by: configuration.ownName, at: now)
    }

    /// Closes `room` for every member (we must administer it).
    public mutating func close(_ room: RoomID, reason: String, at now: EngineTime) throws(SessionError) -> [SessionAction] {
        let name = try checkAdministrator(of: room, to: "close it")
        return try writeReserved(Self.closedKey, Self.reasonLine(reason), in: room, by: name, at: now)
    }

    /// Makes `peer` an administrator of `room` too, or no longer one (we must administer it).
    public mutating func setAdministrator(_ peer: PeerID, of room: RoomID, _ on: Bool, at now: EngineTime) throws(SessionError) -> [SessionAction] {
        let name = try checkAdministrator(of: room, to: "name administrators")
        guard peer != creator(of: room) else { throw SessionError(.refused, "\(peer.short) created \(room): it always administers it") }
        guard !on || rooms[room]?.members[peer] != nil else { throw SessionError(.unknownMember, "\(peer.short) is not a member of \(room)") }
        let key = Self.adminPrefix + peer.rawValue
        guard on || membership.metadata.isNamed(peer, in: room) else { return [] }
        return try writeReserved(key, on ? "admin" : nil, in: room, by: name, at: now)
    }

    private func checkAdministrator(of room: RoomID, to what: String) throws(SessionError) -> String {
        guard rooms[room] != nil else { throw SessionError(.unknownRoom, "you are not in room '\(room)'") }
        guard isAdministrator(configuration.ownID, of: room) else {
            let names = administrators(of: room).map { $0 == configuration.ownID ? configuration.ownName : rooms[room]?.members[$0]?.name ?? $0.short }.sorted()
            throw SessionError(
                .notAdmin, "only an administrator of \(room) can \(what) (administrators: \(names.isEmpty ? "none known" : names.joined(separator: ", ")))")
        }
        return configuration.ownName
    }

    private mutating func writeReserved(_ key: String, _ value: String?, in room: RoomID, by name: String, at now: EngineTime) throws(SessionError) -> [SessionAction] {
        let (entry, actions) = try writeMeta(key, to: value, in: room, ifVersion: nil, at: now)
        var out = actions
        enact(entry, in: room, by: name, at: now, &out)
        return out
    }

    /// Our record that we made `room` (at its creation).
    mutating func recordCreation(_ room: RoomID, at now: EngineTime, _ out: inout [SessionAction]) {
        guard configuration.envelopes != nil, membership.metadata.entry(Self.creatorKey, in: room) == nil,
            let (_, actions) = try? writeMeta(Self.creatorKey, to: configuration.ownID.rawValue, in: room, ifVersion: nil, at: now)
        else { return }
        out += actions
    }

    /// What a reserved entry we just took (and handed on) does here: a removal drops its member (us: we
    /// leave the room), a closing makes us leave the room.
    mutating func enact(_ entry: WireFrame.MetaEntry, in room: RoomID, by name: String, at now: EngineTime, _ out: inout [SessionAction]) {
        guard !entry.deleted, rooms[room] != nil else { return }
        let because = entry.value.isEmpty ? "" : ": \(entry.value)"
        if entry.key == Self.closedKey {
            // (Not a closing older than our joining: it is about an earlier room of that name.)
            guard membership.metadata.closes(entry, room, proofTime: membership.ownProof(room)?.timestampMilliseconds) else { return }
            leaveRoom(room, code: .closed, reason: "\(room) was closed by \(name)\(because)", tell: false, at: now, &out)
            return
        }
        guard entry.key.hasPrefix(Self.removedPrefix), let subject = PeerID(String(entry.key.dropFirst(Self.removedPrefix.count))) else { return }
        if subject == configuration.ownID {
            leaveRoom(room, code: .removed, reason: "you were removed from \(room) by \(name)\(because)", tell: false, at: now, &out)
            return
        }
        guard let member = rooms[room]?.members[subject] else { return }
        // The members it introduced to us that never connected here go with it: members of its own making
        // (issue 28, item 8) would otherwise stay, each a slot of the room and a peer we dial. One of them
        // that is genuine and connects later is a member again by another member's introduction.
        let introduced = unseenIntroduced(by: subject, in: room)
        removeMember(room, SessionPeer(id: subject, name: member.name), reason: "removed by \(name)\(because)", code: .removed, at: now, &out)
        bury(RoomMember(room: room, peer: subject), at: now)
        for id in introduced {
            guard let gone = rooms[room]?.members[id] else { continue }
            removeMember(
                room, SessionPeer(id: id, name: gone.name), reason: "introduced by \(member.name), who was removed, and never connected here",
                code: .removed, at: now, &out)
        }
    }

    /// A peer spoke to us of a room we left because it was closed: it hears of the closing.
    func tellClosed(_ room: RoomID, to handle: LinkHandle, _ out: inout [SessionAction]) {
        guard let entry = membership.metadata.closing(of: room) else { return }
        out.append(.send(handle, metaFrames([entry], in: room)))
    }

    /// Why a connection ended, for programs: `timed_out`, `lost`, `duplicate` (the same identity connected
    /// again, from here or another host), `refused` (a key changed, for example), `shutdown`,
    /// `protocol_error`, `leaving`, `closed_here` (we closed it), `not_reading` (it stopped reading).
    public static func code(of reason: PeerCloseReason) -> MemberLeftCode {
        switch reason {
        case .timedOut, .goodbye(.timeout, _): .timedOut
        case .lost: .lost
        case .protocolError, .goodbye(.protocolError, _): .protocolError
        case .goodbye(.shutdown, _): .shutdown
        case .goodbye(.refused, _): .refused
        case .goodbye(.leaving, "duplicate connection"): .duplicate
        case .goodbye(.leaving, _): .leaving
        case .local: .closedHere
        case .notReading: .notReading
        }
    }

    /// A reason: one line of at most 128 bytes (control characters become spaces).
    static func reasonLine(_ text: String) -> String { statusLine(text) }
}
