import LanchatCore
import LanchatWire

/// What the engine asks its shell to do. The shell performs a batch of actions like this: first every
/// `.persist` of the batch in one transaction; only if that commits, the other actions, in order. So a
/// frame the engine sends after a write (an ACK after a stored message, a frame after a saved room)
/// never leaves before the write is durable.
public enum SessionAction: Equatable, Sendable {
    /// Write frames on a connection.
    case send(LinkHandle, [WireFrame])
    /// Write unreliable frames on a connection, unless its output is full (then they are dropped).
    case sendUnreliable(LinkHandle, [WireFrame])
    /// Say GOODBYE and close a connection.
    case close(LinkHandle, WireFrame.Goodbye.Reason, String)
    /// Connect to a peer (`dialPlan(for:)` says where); report `dialFinished` when the attempt ends.
    case dial(PeerID)
    /// Change the store.
    case persist(StoreOperation)
    /// Send the peer every reliable message still waiting for its ACK in these rooms (those it is a
    /// member of here), read from the store in the order they were queued.
    case flushOutbox(PeerID, LinkHandle, rooms: Set<RoomID>)
    /// Send a newcomer the room's history since a time (the shell exports it from the store and sends
    /// it as a history resource, in the `layout` the peer's version reads).
    /// `limit`: the newcomer asked for at most that many (the shell's own bound applies too).
    case sendHistory(RoomID, sinceMilliseconds: Int64, to: SessionPeer, layout: HistoryLayout, limit: Int?)
    /// Ask the inviter for what we lack of a room's history: HISTORY_REQUEST since a minute before the
    /// latest message the store holds for the room (overlap is harmless: ids de-duplicate).
    /// `scope`: what the newcomer chose (a later `since`, a `limit`).
    case requestHistory(RoomID, LinkHandle, HistoryScope)
    /// Ask a member (version 2) for what we lack of a room: SYNC_REQUEST with the runs of sequences the
    /// store holds from each author among the room's recent messages (`syncMarks(recentSequences)`).
    case requestSync(RoomID, LinkHandle)
    /// Send a member what it lacks of a room: a signed history of those of the room's latest messages
    /// (`historyForNewcomers` at most) since `sinceMilliseconds` that `lacking` picks, by the runs it holds
    /// from each author.
    case sendSync(RoomID, sinceMilliseconds: Int64, marks: [String: [ClosedRange<UInt64>]], to: SessionPeer)
    /// Offer a member a relay answer: these messages as a signed (or, version 4, sealed) history resource.
    /// (Made only by `storeRead(_:for:arrivals:at:)` from what the store read for a `.sendSync`.)
    case offerRelayAnswer(RoomID, [StoredMessage], to: SessionPeer, layout: HistoryLayout)
    /// Report to the node's users.
    case emit(SessionEvent)
    /// An invitation we sent ended: resolve whoever waits for it.
    case inviteFinished(WireID, InviteOutcome)
    /// Something happened to a stream: the program's side (in the shell) learns it.
    case stream(WireID, StreamSignal)
    /// A program waiting to accept a stream gets one (nil: the engine stops).
    case streamHandedOver(acceptor: UInt64, AcceptedStream?)
    /// File work for a transfer (the shell answers with the input each names).
    case file(FileAction)
    /// The connection that serves a peer now, and the end of it (the shell keeps its own map).
    case peerConnected(SessionPeer, LinkHandle)
    case peerDisconnected(PeerID, reason: String)
    /// Check a seal's signature off the event loop and answer `sealChecked(_:valid:at:)` (at once: it
    /// waits for nothing).
    case checkSeal(SealCheck)
}

/// A change to the store. Each is idempotent, so replaying a batch after a crash is harmless.
public enum StoreOperation: Equatable, Sendable {
    /// Insert a message unless its id is stored already; if it was new and `report` is set, emit it.
    /// `queuedFor`: one of ours, queued for these recipients past their marks (`SessionStore.insert(_:queuedFor:now:)`).
    case insertMessage(StoredMessage, report: ChatMessage?, queuedFor: String = "")
    /// A recipient's mark in a room, set (opened where it has none) by a send that queues for it there, in
    /// that send's commit: just below the oldest message still queued for it there.
    case openMark(PeerID, RoomID, acked: UInt64)
    /// A recipient acknowledged what was queued for it in a room through `acked` (its mark moves).
    case setMark(PeerID, RoomID, acked: UInt64)
    /// What a recipient's mark in a room queues becomes rows of its own, and the mark goes.
    case pinOutbox(PeerID, RoomID)
    /// Queued messages, each a row of its own (not a mark's), acknowledged.
    case acknowledge(PeerID, [WireID])
    /// Drop what is queued in `room`, for one recipient or (nil) all.
    case dropOutbox(PeerID?, RoomID)
    /// Replace a room's member list.
    case saveRoom(RoomID, [StoredMember])
    /// One key of a room's metadata (replacing what the store held for it).
    case saveMeta(StoredMeta)
    /// One key of a room's metadata, or all of them (nil).
    case deleteMeta(RoomID, key: String?)
    case deleteRoom(RoomID)
    case rememberPeer(label: String, id: PeerID)
    /// An id a room member proved with its key (`SessionStateMachine.keyed`).
    case rememberKeyed(PeerID)
    /// A signed leave (ours, or a member's we took).
    case saveLeave(StoredLeave)
    /// A transfer that must outlive the process (to resume it, or to answer a re-offer).
    case saveTransfer(StoredTransfer)
    case updateTransfer(WireID, state: TransferState?, sentMark: UInt64?, resent: UInt64?)
    case deleteTransfer(WireID)
    /// A seal kept unchecked was checked (`StoredSeal.checked`): its messages may be exported now. Only
    /// that seal (its key, signature, count and root), not another kept under the same id.
    case sealChecked(author: PeerID, seal: StoredSeal)
    /// A seal kept unchecked failed its check: it goes, and its messages (that seal only, as above).
    case dropSealed(author: PeerID, seal: StoredSeal)
}

/// Where and how to dial a peer.
public struct DialPlan: Equatable, Sendable {
    public var peer: PeerID
    public var name: String?
    /// (address, port) pairs, discovery's first, then what rooms remember.
    public var candidates: [PeerCandidate]
    /// The peer's encryption preference, as advertised (nil: unknown, assume ours).
    public var encryption: EncryptionPreference?
}

public struct PeerCandidate: Equatable, Sendable {
    public var address: String
    public var port: Int
}
