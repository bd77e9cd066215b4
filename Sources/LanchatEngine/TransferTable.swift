import LanchatCore
import LanchatTransfer
import LanchatWire
import NIOCore

/// Where a transfer is, typed (people and programs see `rawValue`).
public enum TransferState: String, Sendable, Equatable {
    /// Sender: offered, waiting for the receiver's first RESOURCE_ACCEPT.
    case offered
    case active
    /// Sender: the connection dropped; resumes when the peer is back.
    case waiting
    /// Receiver: the connection dropped; the part file is kept until the sender offers it again.
    case interrupted
    case complete, refused, failed, cancelled

    public var ended: Bool {
        switch self {
        case .complete, .refused, .failed, .cancelled: true
        default: false
        }
    }

    init(_ status: WireFrame.ResourceEnd.Status) {
        switch status {
        case .complete: self = .complete
        case .refused: self = .refused
        case .cancelled: self = .cancelled
        case .failed: self = .failed
        }
    }
}

/// File work the engine asks its shell for: the shell owns the descriptors, the hashing and the disk,
/// and answers each with the input named here.
public enum FileAction: Equatable, Sendable {
    /// Sender: read `count` bytes at `offset` (hashing the file in order as it goes; after a restart
    /// first what comes before). Answer `fileRead`, or `fileFailed`.
    case read(WireID, offset: UInt64, count: Int)
    /// Receiver: what the store says of this id from this peer (received before, cancelled here, a part
    /// file to go on from). Answer `incomingLookedUp` (the shell may do so at once).
    case lookUp(WireFrame.ResourceOffer, from: SessionPeer)
    /// Receiver: make the part file ready (`resume`: keep and hash what it holds, unless it is longer than
    /// the offer; otherwise a new, empty file), and say how much room there is. Answer `partOpened`.
    case openPart(WireFrame.ResourceOffer, resume: Bool)
    /// Receiver: write these bytes at `offset` (in the order asked, hashing them). Answer `written`.
    case write(WireID, offset: UInt64, ByteBuffer)
    /// Receiver: every byte is written: finish the hash. Answer `hashed`.
    case verify(WireID)
    /// Receiver: make the part file durable and give it a free name in the download directory, with the
    /// sender's mtime. Answer `placed`, or `fileFailed`.
    case place(WireID, name: String, modifiedMilliseconds: UInt64)
    /// Receiver: read the history resource and keep what `SessionStateMachine.storable` allows. Answer
    /// `historyImported`.
    /// `layout`: how its records are laid out (by its RESOURCE_OFFER kind).
    case importHistory(WireID, RoomID, from: SessionPeer, layout: HistoryLayout)
    /// Sender of a shared file: open the file kept under the request's digest, if it is kept here. Answer
    /// `serveShared` (having registered the open file under the request's id), or `notServed`.
    case serveShared(WireFrame.FileRequest, to: SessionPeer)
    /// Receiver of a shared file: make the part file durable, keep it under its digest (unless the person
    /// declined to keep shared files) and put a copy in `destination` under a free name. Answer `placed`
    /// (with the copy's path, or the kept file's), or `fileFailed`.
    case placeShared(WireID, SharedFile, destination: String?)
    /// The transfer ended: close its file (and remove the part file).
    case close(WireID, removePart: Bool)
    /// The sender says it cancelled a transfer this engine does not hold (it restarted meanwhile): if the
    /// store has its part file, remove it and mark it cancelled.
    case cancelledWhileApart(WireID, SessionPeer)
}

/// What the store knows of an incoming transfer id (from `FileAction.lookUp`).
public enum IncomingRecord: Equatable, Sendable {
    /// Nothing usable: start from the first byte.
    case none
    /// Received and placed before: the sender missed our answer.
    case received
    /// Cancelled here: the sender missed our answer.
    case cancelled
    /// An earlier attempt left a part file for the same offer: go on from what it holds.
    case partial
}

/// How a part file came out (`FileAction.openPart`).
public enum PartOpening: Equatable, Sendable {
    /// Ready: `held` bytes are in it already (hashed), `freeBytes` are free where it is.
    case opened(path: String, held: UInt64, freeBytes: UInt64)
    /// The directory cannot be used (said as such, never as a lack of space).
    case unusable(String)
    /// The part file could not be created.
    case failed(String)
}

/// A file being sent: what the sender knows of it.
public struct OfferedFile: Equatable, Sendable {
    public var path: String
    public var name: String
    public var size: UInt64
    public var modifiedMilliseconds: UInt64
    /// "device:inode" (kept so that a restart reopens only the very same file).
    public var identity: String

    public init(path: String, name: String, size: UInt64, modifiedMilliseconds: UInt64, identity: String) {
        self.path = path
        self.name = name
        self.size = size
        self.modifiedMilliseconds = modifiedMilliseconds
        self.identity = identity
    }
}

/// Transfer caps, windows and chunk sizes (the simulator makes them small).
public struct TransferLimits: Sendable, Equatable {
    /// Largest file accepted (`--max-file-size`).
    public var maximumSize: UInt64 = 1 << 40
    /// What a received file (or history) leaves free on its disk at least: 64 MiB (a pushed file took
    /// up to all of it).
    public var keptFree: UInt64 = 64 << 20
    /// Largest history resource accepted from an inviter: 512 MiB holds the 1,000,000 messages a
    /// sender may export at most (`--history-for-newcomers`) at about 500 bytes each.
    public var maximumHistorySize: UInt64 = 512 << 20
    /// Largest answer to a SYNC_REQUEST (relay): 80 MiB holds 1,000 messages of the largest size (the
    /// default `history-for-newcomers`); a member that lacks more gets the rest from its next requests.
    public var maximumRelaySize: UInt64 = 80 << 20
    /// A history import ends once this many records in it were forged (checking a flood of bad
    /// signatures costs CPU; what was kept before stays).
    public var maximumForgedRecords = 16
    /// Incoming transfers at once, from one peer and in all.
    public var maximumIncomingPerPeer = 16
    public var maximumIncoming = 64
    /// Outgoing transfers at once (each holds a descriptor, an export an unlinked file as well), to one
    /// peer and in all: a new offer past either is refused, and a SYNC_REQUEST past either is not
    /// answered. (Those waiting for their peer count; the ones restored after a restart are never refused.)
    public var maximumOutgoingPerPeer = 16
    public var maximumOutgoing = 64
    /// Sender: an offer not accepted within this long (milliseconds) on a live connection ends (RESOURCE_END
    /// failed, "not accepted within 60 s"): its descriptor, and an export's file, go back. An accepted
    /// transfer whose receiver acknowledges nothing more for `stallTimeout` (ten times that once every byte
    /// is sent: the receiver checks and places it) ends as well. (Shared files served have their own,
    /// shorter times: `SessionStateMachine.sharedServeAcceptTimeout`.)
    public var offerTimeout: Int64 = 60_000
    /// A relay answer being written counts as outstanding (no other is made for that member and room)
    /// until the shell offers it or says it made none, or for at most this long (milliseconds).
    public var relayAnswerPreparation: Int64 = 10_000
    public var chunkSize = 128 * 1024
    public var window: UInt64 = 4 << 20
    /// Receiver: progress every this many bytes written.
    public var progressEvery: UInt64 = 1 << 20
    /// Receiver: how far past the last progress reported a sender may send (its window is 4 MiB; more
    /// would pile up in the receiver's memory): a chunk past it fails the transfer.
    public var maximumAhead: UInt64 = 16 << 20
    /// Sender: the store's upper bound of what was sent is written this far ahead.
    public var sentMarkAhead: UInt64 = 8 << 20
    /// Progress events (not frames) at most every this many bytes.
    public var reportEvery: UInt64 = 8 << 20
    /// Outgoing transfers cancelled here whose receiver is told again at each connection until it answers, at most.
    public var keptCancelled = 1024
    /// ... and for at most this long (milliseconds; a receiver gives up an interrupted transfer after as long).
    public var cancelTold: Int64 = 7 * 24 * 3600 * 1000
    /// Ended transfers kept for `lanchat transfers`.
    public var keptEnded = 100
    /// Receiver: a transfer under way on a live connection that gets no byte and writes none for this
    /// long (milliseconds) fails, and gives back its free-space reservation and its slot.
    public var stallTimeout: Int64 = 120_000

    public init() {}
}

/// Every transfer one engine runs: outgoing (the read pump, the window, the digest, resume) and
/// incoming (offer decided, chunks handed to be written, progress, verification, placing); and the two
/// conversations whose content goes as transfers: histories (`histories`: which offers are taken, who
/// is owed one, relay's requests) and shared files (`shared`: fetches, their requests, files served).
struct TransferTable: Sendable {
    var limits = TransferLimits()
    /// Histories both ways (`HistoryExchange`): the door each room we join keeps for its inviter's
    /// history (one history per join), the newcomers owed one (HISTORY_REQUEST is answered once per join,
    /// not on demand), and relay's SYNC_REQUESTs asked and answered.
    var histories = HistoryExchange()
    /// Shared files (`+SharedFiles`, `SharedFileTable`).
    var shared = SharedFileTable()

    /// Outgoing transfers, each its own machine.
    var outgoing: [WireID: OutgoingTransfer] = [:]
    /// Incoming transfers, each its own machine.
    var incoming: [WireID: IncomingTransfer] = [:]
    /// Outgoing transfers cancelled here (`since`: wall milliseconds): the receiver is told at each
    /// connection to it until it answers that it heard.
    struct TellCancel: Equatable { var peer: PeerID; var since: Int64 }
    var tellCancelled: [WireID: TellCancel] = [:]
    /// The last ended transfers, newest last.
    var ended: [TransferInfo] = []
    /// Relay answers the shell is writing (asked for with `SessionAction.sendSync`, not offered yet), by
    /// room and member, and since when (monotonic milliseconds).
    struct RelayAsker: Hashable, Sendable { var room: RoomID; var peer: PeerID }
    var relayPreparing: [RelayAsker: Int64] = [:]

    /// Forgets the relay answers the shell has been writing for `relayAnswerPreparation` or longer.
    mutating func expireRelayPreparing(at now: Int64) {
        relayPreparing = relayPreparing.filter { now - $0.value < limits.relayAnswerPreparation }
    }

    func incomingCount(from peer: PeerID?) -> Int {
        guard let peer else { return incoming.count }
        return incoming.values.filter { $0.peer.id == peer }.count
    }

    /// Outgoing transfers to `peer` (nil: in all), with the relay answers being written.
    func outgoingCount(to peer: PeerID?) -> Int {
        outgoing.values.filter { peer == nil || $0.peer.id == peer }.count + relayPreparing.keys.filter { peer == nil || $0.peer == peer }.count
    }

    /// Why one more outgoing transfer to `peer` is not made now (nil: it may be).
    func outgoingRefusal(to peer: PeerID, name: String) -> String? {
        if outgoingCount(to: peer) >= limits.maximumOutgoingPerPeer {
            return "too many transfers to \(name) at once (\(limits.maximumOutgoingPerPeer)); send it when one has ended"
        }
        if outgoingCount(to: nil) >= limits.maximumOutgoing {
            return "too many transfers going out at once (\(limits.maximumOutgoing) in all); send it when one has ended"
        }
        return nil
    }

    /// Whether our answer to `peer`'s SYNC_REQUEST for `room` is still being written, offered or sent
    /// (call `expireRelayPreparing` first).
    func relayAnswerOutstanding(_ room: RoomID, to peer: PeerID) -> Bool {
        if relayPreparing[RelayAsker(room: room, peer: peer)] != nil { return true }
        return outgoing.values.contains { $0.relayAnswer && $0.peer.id == peer && $0.offer.room == room }
    }

    /// Bytes still to come for the transfers receiving now (their free space is spoken for).
    var reserved: UInt64 {
        incoming.values.reduce(UInt64(0)) { $0 + $1.remaining }
    }

    mutating func keep(_ info: TransferInfo) {
        ended.append(info)
        if ended.count > limits.keptEnded { ended.removeFirst(ended.count - limits.keptEnded) }
    }
}

extension SafeFileName {
    /// For names that were refused: something printable to show.
    public static func printable(_ raw: [UInt8]) -> String {
        let decoded = String(decoding: raw.prefix(200), as: UTF8.self)
        return String(String.UnicodeScalarView(decoded.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? "?" : $0 }))
    }
}

extension IncomingRecord {
    /// The answer to `FileAction.lookUp`, from what the store holds of the transfer (`saved`): received or
    /// cancelled before (the sender missed our answer), an earlier attempt's part file to go on from
    /// (`partHolds`: the host's check that the part file is this offer's), or nothing (start over).
    public static func of(
        _ saved: StoredTransfer?, offer: WireFrame.ResourceOffer, from peer: SessionPeer, partHolds: (StoredTransfer) -> Bool
    ) -> IncomingRecord {
        guard let saved, !saved.outgoing, saved.peerID == peer.id.rawValue else { return .none }
        switch TransferState(rawValue: saved.state) {
        case .complete: return .received
        case .cancelled: return .cancelled
        case .active: return saved.size == Int64(offer.size) && partHolds(saved) ? .partial : .none
        default: return .none  // failed before: a new attempt from the start
        }
    }
}
