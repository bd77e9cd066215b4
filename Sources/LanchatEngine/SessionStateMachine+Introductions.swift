import Glibc
import LanchatCore

/// What one member's introductions can make us do (issue 28, items 6 to 8): whom we have been connected
/// with (`seen`), who introduced each member we have not seen (`introducers`), how many such members one
/// member may bring in (`maximumUnseenIntroductions`), which of them we pass on (`vouchable`), how many
/// membership proofs a peer may make us check (`proofChecksLeft`), and which addresses a member may make
/// us dial (`dialable`). `+Membership` applies them as members are merged; `+Delivery` as it redials.
extension SessionStateMachine {
    /// Whether we have been connected with `peer`: now, before in this run, or it proved its key to us
    /// before. (A peer linked before it became a member here, a stranger then, counts from the moment
    /// it is linked: the simulator found a member introduced while connected that was never "seen", so
    /// never passed on, and two members that never learnt of each other.)
    func seen(_ peer: PeerID) -> Bool { links.seen(peer) }

    /// Remembers that `peer`, a member linked to us now, has been seen (`seen`), and forgets who
    /// introduced it.
    mutating func noteSeen(_ peer: PeerID) {
        guard links.markSeen(peer) else { return }
        membership.forgetIntroducer(of: peer)
    }

    /// Whether a proof `peer` sent is still checked: each costs a signature check (about 55 µs on the
    /// event loop); past `MembershipBook.maximumProofChecks` from one peer between two resyncs (a room's worth of new
    /// members twice over), its proofs are taken as failing without a check. Only a proof new to us, or
    /// newer than the one held, is checked: an honest resync resends what we hold and costs none.
    func proofChecksLeft(for peer: PeerID) -> Bool { membership.proofChecksLeft(for: peer) }

    /// The members of `room` that `introducer` introduced to us and that we have not been connected with.
    public func unseenIntroduced(by introducer: PeerID, in room: RoomID) -> [PeerID] {
        membership.introduced(by: introducer, in: room) { !seen($0) && rooms[room]?.members[$0] != nil }
    }

    /// Whether we pass `member` on to others (introductions, member lists): not while it is only a
    /// member's word to us (introduced, never connected here): so what one member made up reaches only
    /// those it tells itself, each within its `maximumUnseenIntroductions`.
    func vouchable(_ member: PeerID, in room: RoomID) -> Bool {
        !membership.isIntroduced(RoomMember(room: room, peer: member)) || seen(member)
    }

    /// Tells once per connection that a member introduced more members we never saw than it may.
    mutating func reportDeferred(_ count: Int, in room: RoomID, from link: LinkTable.Entry, _ out: inout [SessionAction]) {
        guard count > 0, membership.firstRefusal(of: link.peer.id) else { return }
        out.append(
            .emit(
                .security(
                    peer: link.peer,
                    text: "\(link.peer.name) (\(link.peer.id.short)) introduced more members to room \(room) "
                        + "than the \(configuration.maximumUnseenIntroductions) not yet connected here it may (\(count) in this list): not added until those "
                        + "connect (any more from it on this connection are not reported)")))
    }

    /// Whether an address a member gave for itself or another member may be dialed: an IP address (as the
    /// dialer parses it: `inet_pton`, so every spelling of one address is that address), not unspecified
    /// (0.0.0.0/8, ::), multicast (224/4, ff00::/8), reserved (240/4) or broadcast, v4-mapped or
    /// v4-compatible forms of those included; loopback (127/8, ::1) only when `link` (the address it told
    /// us over) is loopback too: every node is then on this host.
    public static func dialable(_ address: String, via link: String?) -> Bool {
        guard let kind = addressKind(address) else { return false }
        switch kind {
        case .loopback: return link.flatMap(addressKind) == .loopback
        case .ordinary: return true
        case .unusable: return false
        }
    }

    enum AddressKind: Equatable { case loopback, ordinary, unusable }

    /// What `text` (an IPv4 or IPv6 address, IPv6 with an optional `%zone`) is, or nil if it is neither.
    static func addressKind(_ text: String) -> AddressKind? {
        func ipv4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> AddressKind {
            if a == 127 { return .loopback }
            if a == 0 || a >= 224 || (a, b, c, d) == (255, 255, 255, 255) { return .unusable }
            return .ordinary
        }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            let bytes = withUnsafeBytes(of: v4) { Array($0) }
            return ipv4(bytes[0], bytes[1], bytes[2], bytes[3])
        }
        let bare = String(text.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, bare, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0] == 0xff { return .unusable }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) { return bytes[15] == 1 ? .loopback : .unusable }
        let mapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
        let compatible = bytes[0..<12].allSatisfy { $0 == 0 }
        if mapped || compatible { return ipv4(bytes[12], bytes[13], bytes[14], bytes[15]) }
        return .ordinary
    }
}
