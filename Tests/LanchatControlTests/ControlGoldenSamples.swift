import LanchatControl

/// One value of every response payload and every event type, as the daemon builds them; their JSON is
/// pinned in `ControlGoldenTests`.
enum ControlGoldenSamples {
    static let time = "2026-11-27T04:40:00.123Z"
    static let later = "2026-11-27T04:45:00.000Z"
    static let aliceID = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    static let bobID = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
    static let sha = String(repeating: "0f", count: 32)

    static var peer: PeerInfo {
        var peer = PeerInfo(
            name: "bob@lab", id: bobID, shortId: String(bobID.prefix(12)), instance: "bob@lab", host: "lab.local.", port: 7470,
            addresses: ["192.168.1.20", "fe80::1%eth0"], interfaces: ["eth0"], state: "connected", rooms: ["lab"],
            compatible: true, problem: nil, protocolVersion: 2, encryption: "required", origin: "connected")
        peer.dialedUs = true
        peer.availability = "away"
        peer.statusText = "lunch / back at 2"
        return peer
    }

    static let incompatiblePeer = PeerInfo(
        name: "printer", id: nil, shortId: nil, instance: "printer", host: "printer.local.", port: 9,
        addresses: [], interfaces: ["eth0"], state: "discovered", rooms: [], compatible: false,
        problem: "no \"id\" in the TXT record", protocolVersion: nil, encryption: nil)

    static var status: DaemonStatus {
        var status = DaemonStatus(
            name: "alice@lab", id: aliceID, shortId: String(aliceID.prefix(12)), instance: "alice@lab #2",
            advertising: "registered", port: 7470, protocolVersion: 2, encryption: "required", peers: 3, pid: 4242,
            version: "0.9.0", startedAt: time)
        status.downloadDirectory = "/home/alice/Downloads"
        status.downloadProblem = "not writable"
        status.downloadFreeBytes = 1_000_000
        status.advertisementVisible = true
        return status
    }

    static let ping = PingResult(
        name: "bob@lab", id: bobID, address: "192.168.1.20", port: 7470, encrypted: true, protocolVersion: 2,
        shortCode: "4821-0937", handshakeMs: 3.25, rttMs: [0.5, 1.0, 12.125])

    static let invite = InviteResult(
        id: "1c0ffee0000000000000000000000001", peer: "bob@lab", peerId: bobID, room: "lab", outcome: "declined", reason: "busy", elapsedMs: 1500.5)

    static var invitation: InvitationInfo {
        InvitationInfo(
            id: "0123456789abcdef0123456789abcdef", from: "alice@lab", fromId: aliceID, room: "lab", message: "join us", shortCode: "4821-0937",
            receivedAt: time, expiresAt: later)
    }

    static var closedInvitation: InvitationInfo {
        var invitation = invitation
        invitation.outcome = "accepted (history 12 messages)"
        return invitation
    }

    static var member: MemberInfo {
        var member = MemberInfo(name: "bob@lab", id: bobID, shortId: String(bobID.prefix(12)), state: "connected")
        member.availability = "busy"
        member.statusText = "in a call"
        member.hand = true
        member.admin = false
        return member
    }

    static var room: RoomInfo {
        var room = RoomInfo(room: "lab", members: [member, MemberInfo(name: "alice@lab", id: aliceID, shortId: String(aliceID.prefix(12)), state: "known")])
        room.administered = true
        return room
    }

    static var sharedFile: SharedFileInfo {
        SharedFileInfo(
            id: String(sha.prefix(32)), room: "lab", name: "notes.pdf", size: 123_456, sha256: sha, type: "application/pdf", image: false,
            held: true, from: "alice@lab", fromId: aliceID, timestampMs: 1_795_000_000_000, time: time)
    }

    static var message: MessageInfo {
        MessageInfo(
            id: "m1", room: "lab", sender: "bob@lab", senderId: bobID, sequence: 7, timestampMs: 1_795_000_000_123, time: time, kind: "text",
            text: "hello \"world\" \u{e9} / \\ \u{1F600}\nsecond line", signed: true)
    }

    static var fileMessage: MessageInfo {
        var message = MessageInfo(
            id: "m2", room: "lab", sender: "alice@lab", senderId: aliceID, sequence: 8, timestampMs: 1_795_000_000_200,
            time: time, kind: "file", text: "shared notes.pdf", outgoing: true, reliable: true, signed: true)
        message.file = sharedFile
        return message
    }

    static let sent = SendResult(id: "m3", room: "lab", recipients: 3, sentNow: 2, dropped: 1, reliable: true)

    static let transfer = TransferEntry(
        id: "71000000000000000000000000000001", direction: "incoming", peer: "bob@lab", peerId: bobID, name: "big.iso", size: 1 << 30,
        done: 1 << 20, rate: 1048576.5, state: "failed", path: "/home/alice/Downloads/big.iso",
        error: "disk full", resent: 4096)

    static let activeTransfer = TransferEntry(
        id: "72000000000000000000000000000002", direction: "outgoing", peer: "bob@lab", peerId: bobID, name: "a.txt", size: 10,
        done: 0, rate: 0, state: "offered", path: nil, error: nil)

    static let stream = StreamEntry(id: "s1", peer: "bob@lab", peerId: bobID, name: "backup")

    static let connect = ConnectResult(
        name: "bob@lab", id: bobID, shortId: String(bobID.prefix(12)), shortCode: "4821-0937",
        address: "lab.example.org:7470", ip: "203.0.113.5", port: 7470, encrypted: true, saved: false)

    static let presence = PresenceInfo(
        name: "bob@lab", id: bobID, shortId: String(bobID.prefix(12)), availability: "away", text: "lunch",
        hands: ["lab"])

    static let meta = MetaInfo(
        room: "lab", key: "topic", value: "Q4 planning", deleted: false, version: 3, author: "alice@lab",
        authorId: aliceID, timeMs: 1_795_000_000_000, time: time)
    static let deletedMeta = MetaInfo(
        room: "lab", key: "old", value: nil, deleted: true, version: 9, author: "bob@lab", authorId: bobID,
        timeMs: 1_795_000_000_001, time: time)

    static var publishedTopic: TopicInfo {
        var topic = TopicInfo(room: "lab", topic: "sensors.temp", sequence: 41)
        topic.sent = 3
        topic.dropped = 0
        return topic
    }

    static var receivedTopic: TopicInfo {
        var topic = TopicInfo(room: "lab", topic: "sensors.temp", sequence: 42)
        topic.from = "bob@lab"
        topic.fromId = bobID
        topic.text = "21.5"
        topic.reliable = false
        return topic
    }

    static var memberEvent: MemberEvent { MemberEvent(room: "lab", name: "bob@lab", id: bobID, state: "not_connected") }

    static var leftEvent: MemberEvent {
        var member = MemberEvent(room: "lab", name: "bob@lab", id: bobID, state: "left")
        member.code = "removed"
        member.reason = "bob@lab was removed by alice@lab: spam"
        member.fatal = true
        return member
    }
}
