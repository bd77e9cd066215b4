import LanchatCore
import LanchatWire
import NIOCore

/// Named byte streams (STREAM_* frames, docs/wire-protocol.md): opens, accepts, credit in both
/// directions, ends and aborts are decided here. The bytes themselves pass through: the engine checks
/// each STREAM_DATA against what it allowed and hands it to the shell (`.stream(id, .data)`), and
/// slices what the program writes into STREAM_DATA frames within the credit the peer granted. The shell
/// keeps the program's side: its waiting reads and writes, and the bytes not read yet.
///
/// A stream lives on one connection: the one its STREAM_OPEN came or went on. Its frames go on that
/// connection only, frames for it on another are ignored, and it ends when that connection closes,
/// whichever connection serves the peer by then. (Bound to "the peer's connection" instead, it outlived
/// a connection one side had already given up when the two sides briefly disagreed about which of two
/// simultaneous connections serves them: the simulator found the stream left open on one side.)
public struct StreamTable: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Credit granted per direction when a stream opens, and the most a side may have outstanding.
        public var window = 4 << 20
        /// More credit is granted once the program has read this much.
        public var grantEvery = 1 << 20
        /// Largest STREAM_DATA we send.
        public var chunk = 128 * 1024
        /// Opens nobody accepted yet, held for a program that starts accepting late: at most this many
        /// (in all, and from one peer), for this long (milliseconds).
        public var maximumPendingOpens = 64
        public var maximumPendingOpensPerPeer = 16
        public var pendingOpenLifetime: Int64 = 10_000
        /// Streams open at once (both directions), and programs waiting to accept.
        public var maximumStreams = 256
        public var maximumAcceptors = 64

        public init() {}
    }

    /// A stream's protocol state, in one place: the shell keeps only the program's side (the bytes not
    /// read yet, its waiting calls) and learns the rest from `.stream` signals.
    struct Stream: Sendable, Equatable {
        /// Which side sent all it will send (STREAM_END finished). Both: the stream is forgotten, so no
        /// stream in the table has both.
        enum Finished: Sendable, Equatable {
            case neither
            /// We did (`streamFinish`): the peer's bytes may still come.
            case local
            /// The peer did: ours may still go.
            case remote
        }

        var peer: SessionPeer
        var handle: LinkHandle
        var name: StreamName
        /// We opened it and wait for STREAM_ACCEPT.
        var opening: Bool
        var finished = Finished.neither
        /// Bytes we may still send.
        var sendCredit = 0
        /// Bytes the peer may still send us (what we granted, minus what came).
        var receiveAllowance: Int
        /// Bytes the program read since the last grant.
        var consumed = 0

        var localFinished: Bool { finished == .local }
        var remoteFinished: Bool { finished == .remote }
    }

    struct PendingOpen: Sendable, Equatable {
        var open: WireFrame.StreamOpen
        var peer: SessionPeer
        var handle: LinkHandle
    }

    struct Acceptor: Sendable, Equatable {
        var name: StreamName
        /// Only this peer's opens (nil: any member's).
        var from: PeerID?
    }

    /// The most credit a side may have outstanding (the wire field is 32 bits; a grant past it is a lie).
    static let maximumCredit = 1 << 31

    var limits = Limits()
    var streams: [WireID: Stream] = [:]
    /// Oldest first.
    var pendingOpens: [PendingOpen] = []
    /// Programs waiting for an open, by the shell's acceptor number, in the order they came.
    var acceptors: [(id: UInt64, acceptor: Acceptor)] = []
}

/// What happened to a stream, for the program on our side.
public enum StreamSignal: Equatable, Sendable {
    /// The peer accepted the stream we opened: the program may write.
    case opened
    /// Bytes for the program, in order.
    case data(ByteBuffer)
    /// The peer granted more credit: a waiting write may go on.
    case credit
    /// The peer sent all it will send.
    case remoteFinished
    /// The engine forgot the stream: both directions ended (nil), or it was aborted (why).
    case ended(failure: String?)
}

/// A stream handed to a program that waited for it.
public struct AcceptedStream: Equatable, Sendable {
    public var id: WireID
    public var peer: SessionPeer
    public var name: StreamName

    public init(id: WireID, peer: SessionPeer, name: StreamName) {
        self.id = id
        self.peer = peer
        self.name = name
    }
}

extension SessionStateMachine {
    // MARK: Streams: the program's side

    /// Opens a stream named `name` to a connected peer; `.stream(id, .opened)` follows when the peer
    /// accepts, `.ended` with the reason if it refuses or does not answer within `timeout` milliseconds.
    public mutating func openStream(_ name: StreamName, to peer: PeerID, timeout: Int64, at now: EngineTime) throws(SessionError) -> (WireID, [SessionAction]) {
        guard let entry = links.entry(peer) else { throw SessionError(.unreachable, "not connected to \(peer.short)") }
        guard streamTable.streams.count < streamTable.limits.maximumStreams else {
            throw SessionError(.busy, "\(streamTable.limits.maximumStreams) streams are open already")
        }
        let id = environment.ids.wireID()
        let window = streamTable.limits.window
        streamTable.streams[id] = StreamTable.Stream(peer: entry.peer, handle: entry.handle, name: name, opening: true, receiveAllowance: window)
        timers.schedule(.streamOpen(id), at: now.monotonic + max(1, timeout))
        return (id, [.send(entry.handle, [.streamOpen(.init(id: id, name: name, credit: UInt32(window)))])])
    }

    /// A program waits for a stream named `name` (from `from` only, if given). An open that arrived
    /// before (up to `pendingOpenLifetime` ago) is taken at once. The stream, or nil if the engine
    /// stops first, comes as `.streamHandedOver(acceptor:, _)`.
    public mutating func acceptStream(_ name: StreamName, from: PeerID?, acceptor: UInt64) throws(SessionError) -> [SessionAction] {
        var out: [SessionAction] = []
        if let index = streamTable.pendingOpens.firstIndex(where: { $0.open.name == name && (from == nil || $0.peer.id == from) }) {
            let pending = streamTable.pendingOpens.remove(at: index)
            timers.cancel(.pendingStreamOpen(pending.open.id))
            if take(pending.open, from: pending.peer, on: pending.handle, acceptor: acceptor, &out) { return out }
        }
        guard streamTable.acceptors.count < streamTable.limits.maximumAcceptors else {
            throw SessionError(.busy, "\(streamTable.limits.maximumAcceptors) programs are waiting for streams already")
        }
        streamTable.acceptors.append((acceptor, StreamTable.Acceptor(name: name, from: from)))
        return out
    }

    /// A program stopped waiting (it went away).
    public mutating func cancelStreamAcceptor(_ acceptor: UInt64) {
        streamTable.acceptors.removeAll { $0.id == acceptor }
    }

    /// Sends what the credit allows of `data` (the rest stays in it). Returns the bytes taken: 0 means
    /// wait for `.credit` (or `.ended`).
    public mutating func streamSend(_ id: WireID, _ data: inout ByteBuffer) throws(SessionError) -> (taken: Int, actions: [SessionAction]) {
        guard var stream = streamTable.streams[id] else { throw SessionError(.streamAborted, "the stream is closed") }
        guard !stream.localFinished else { throw SessionError(.streamFinished, "the stream was finished") }
        guard !stream.opening else { return (0, []) }
        var out: [SessionAction] = []
        let handle = stream.handle
        var frames: [WireFrame] = []
        var taken = 0
        while data.readableBytes > 0, stream.sendCredit > 0 {
            let count = min(data.readableBytes, stream.sendCredit, streamTable.limits.chunk)
            stream.sendCredit -= count
            taken += count
            frames.append(.streamData(id: id, data: data.readSlice(length: count)!))
        }
        streamTable.streams[id] = stream
        if !frames.isEmpty { out.append(.send(handle, frames)) }
        return (taken, out)
    }

    /// The program read `count` bytes of what `.data` handed over: grants the peer more credit once
    /// enough was read.
    public mutating func streamConsumed(_ id: WireID, _ count: Int) -> [SessionAction] {
        guard var stream = streamTable.streams[id], count > 0 else { return [] }
        stream.consumed += count
        var out: [SessionAction] = []
        if stream.consumed >= streamTable.limits.grantEvery, !stream.remoteFinished {
            out.append(.send(stream.handle, [.streamCredit(id: id, bytes: UInt32(stream.consumed))]))
            stream.receiveAllowance += stream.consumed
            stream.consumed = 0
        }
        streamTable.streams[id] = stream
        return out
    }

    /// The program sends no more bytes.
    public mutating func streamFinish(_ id: WireID) -> [SessionAction] {
        guard var stream = streamTable.streams[id], !stream.localFinished else { return [] }
        var out: [SessionAction] = [.send(stream.handle, [.streamEnd(.init(id: id, status: .finished))])]
        if stream.remoteFinished {
            forget(id)
            out.append(.stream(id, .ended(failure: nil)))
        } else {
            stream.finished = .local
            streamTable.streams[id] = stream
        }
        return out
    }

    /// Ends both directions now (the program went away, or asked to).
    public mutating func streamAbort(_ id: WireID, reason: String) -> [SessionAction] {
        var out: [SessionAction] = []
        abortStream(id, reason: reason, tellPeer: true, &out)
        return out
    }

    /// The node stops: every stream is aborted (the peer told), every waiting program answered nil.
    public mutating func stopStreams() -> [SessionAction] {
        var out: [SessionAction] = []
        for id in streamTable.streams.keys.sorted(by: { $0.description < $1.description }) {
            abortStream(id, reason: "the session is stopping", tellPeer: true, &out)
        }
        for (acceptor, _) in streamTable.acceptors { out.append(.streamHandedOver(acceptor: acceptor, nil)) }
        streamTable.acceptors = []
        for pending in streamTable.pendingOpens { timers.cancel(.pendingStreamOpen(pending.open.id)) }
        streamTable.pendingOpens = []
        return out
    }

    public var streamCount: Int { streamTable.streams.count }

    // MARK: Streams: frames and time

    mutating func streamFrame(_ frame: WireFrame, from entry: LinkTable.Entry, on handle: LinkHandle, at now: EngineTime, _ out: inout [SessionAction]) {
        let peer = entry.peer
        switch frame {
        case .streamOpen(let open):
            guard streamTable.streams[open.id] == nil, !streamTable.pendingOpens.contains(where: { $0.open.id == open.id }) else { return }
            guard sharesRoom(with: peer.id) else {
                out.append(.send(handle, [.streamEnd(.init(id: open.id, status: .refused, text: "refused: you share no room with \(configuration.ownName)"))]))
                return
            }
            guard open.credit <= StreamTable.maximumCredit else {
                out.append(.send(handle, [.streamEnd(.init(id: open.id, status: .refused, text: "refused: impossible credit"))]))
                return
            }
            if let index = streamTable.acceptors.firstIndex(where: { $0.acceptor.name == open.name && ($0.acceptor.from == nil || $0.acceptor.from == peer.id) }) {
                let waiting = streamTable.acceptors.remove(at: index)
                if !take(open, from: peer, on: handle, acceptor: waiting.id, &out) { streamTable.acceptors.insert(waiting, at: index) }
                return
            }
            let fromPeer = streamTable.pendingOpens.filter { $0.peer.id == peer.id }.count
            guard streamTable.pendingOpens.count < streamTable.limits.maximumPendingOpens, fromPeer < streamTable.limits.maximumPendingOpensPerPeer else {
                out.append(.send(handle, [.streamEnd(.init(id: open.id, status: .refused, text: "refused: too many streams waiting"))]))
                return
            }
            streamTable.pendingOpens.append(StreamTable.PendingOpen(open: open, peer: peer, handle: handle))
            timers.schedule(.pendingStreamOpen(open.id), at: now.monotonic + streamTable.limits.pendingOpenLifetime)
        case .streamAccept(let id, let credit):
            guard var stream = streamTable.streams[id], stream.peer.id == peer.id, stream.handle == handle, stream.opening else { return }
            guard credit <= StreamTable.maximumCredit else {
                abortStream(id, reason: "\(peer.name) granted an impossible credit", tellPeer: true, &out)
                return
            }
            stream.opening = false
            stream.sendCredit = Int(credit)
            streamTable.streams[id] = stream
            timers.cancel(.streamOpen(id))
            out.append(.stream(id, .opened))
        case .streamData(let id, let data):
            guard var stream = streamTable.streams[id], stream.peer.id == peer.id, stream.handle == handle, !stream.opening else { return }
            guard !stream.remoteFinished, data.readableBytes <= stream.receiveAllowance else {
                abortStream(id, reason: "\(peer.name) sent more than it was allowed", tellPeer: true, &out)
                return
            }
            stream.receiveAllowance -= data.readableBytes
            streamTable.streams[id] = stream
            if data.readableBytes > 0 { out.append(.stream(id, .data(data))) }
        case .streamCredit(let id, let bytes):
            guard var stream = streamTable.streams[id], stream.peer.id == peer.id, stream.handle == handle else { return }
            guard stream.sendCredit + Int(bytes) <= StreamTable.maximumCredit else {
                abortStream(id, reason: "\(peer.name) granted an impossible credit", tellPeer: true, &out)
                return
            }
            stream.sendCredit += Int(bytes)
            streamTable.streams[id] = stream
            out.append(.stream(id, .credit))
        case .streamEnd(let end):
            if let index = streamTable.pendingOpens.firstIndex(where: { $0.open.id == end.id && $0.peer.id == peer.id && $0.handle == handle }) {
                timers.cancel(.pendingStreamOpen(end.id))
                streamTable.pendingOpens.remove(at: index)
                return
            }
            guard var stream = streamTable.streams[end.id], stream.peer.id == peer.id, stream.handle == handle else { return }
            switch end.status {
            case .finished:
                guard !stream.remoteFinished else { return }
                out.append(.stream(end.id, .remoteFinished))
                if stream.localFinished {
                    forget(end.id)
                    out.append(.stream(end.id, .ended(failure: nil)))
                } else {
                    stream.finished = .remote
                    streamTable.streams[end.id] = stream
                }
            case .refused:
                abortStream(end.id, reason: end.text.isEmpty ? "\(peer.name) refused the stream" : end.text, tellPeer: false, &out)
            case .aborted:
                abortStream(end.id, reason: end.text.isEmpty ? "\(peer.name) aborted the stream" : "\(peer.name): \(end.text)", tellPeer: false, &out)
            }
        default:
            break
        }
    }

    /// The open we sent got no answer in time.
    mutating func streamOpenTimedOut(_ id: WireID, _ out: inout [SessionAction]) {
        guard let stream = streamTable.streams[id], stream.opening else { return }
        abortStream(id, reason: "\(stream.peer.name) did not accept stream '\(stream.name)' in time", tellPeer: true, &out)
    }

    /// Nobody here accepted an open in time: the peer hears so.
    mutating func pendingStreamOpenExpired(_ id: WireID, _ out: inout [SessionAction]) {
        guard let index = streamTable.pendingOpens.firstIndex(where: { $0.open.id == id }) else { return }
        let pending = streamTable.pendingOpens.remove(at: index)
        out.append(
            .send(
                pending.handle,
                [
                    .streamEnd(
                        .init(
                            id: id, status: .refused, text: "refused: nobody on \(configuration.ownName) accepts streams named '\(pending.open.name)'"))
                ]))
    }

    /// A connection ended (serving its peer or not): the streams on it are aborted, the opens that came
    /// on it dropped.
    mutating func streamsLost(on handle: LinkHandle, reason: String, _ out: inout [SessionAction]) {
        for (id, stream) in streamTable.streams.sorted(by: { $0.key.description < $1.key.description }) where stream.handle == handle {
            abortStream(id, reason: "the connection to \(stream.peer.name) was lost (\(reason))", tellPeer: false, &out)
        }
        for pending in streamTable.pendingOpens where pending.handle == handle { timers.cancel(.pendingStreamOpen(pending.open.id)) }
        streamTable.pendingOpens.removeAll { $0.handle == handle }
    }

    // MARK: Streams: helpers

    /// Accepts an open for a waiting program: tells the peer, hands the stream over. False if too many
    /// streams are open (the open is then refused; the program keeps waiting).
    private mutating func take(_ open: WireFrame.StreamOpen, from peer: SessionPeer, on handle: LinkHandle, acceptor: UInt64, _ out: inout [SessionAction]) -> Bool {
        guard streamTable.streams.count < streamTable.limits.maximumStreams else {
            out.append(.send(handle, [.streamEnd(.init(id: open.id, status: .refused, text: "refused: too many open streams"))]))
            return false
        }
        let window = streamTable.limits.window
        streamTable.streams[open.id] = StreamTable.Stream(
            peer: peer, handle: handle, name: open.name, opening: false, sendCredit: Int(open.credit), receiveAllowance: window)
        out.append(.send(handle, [.streamAccept(id: open.id, credit: UInt32(window))]))
        out.append(.streamHandedOver(acceptor: acceptor, AcceptedStream(id: open.id, peer: peer, name: open.name)))
        return true
    }

    private mutating func abortStream(_ id: WireID, reason: String, tellPeer: Bool, _ out: inout [SessionAction]) {
        guard let stream = forget(id) else { return }
        if tellPeer {
            let text = String(decoding: Array(reason.utf8.prefix(1000)), as: UTF8.self)
            out.append(.send(stream.handle, [.streamEnd(.init(id: id, status: .aborted, text: text))]))
        }
        out.append(.stream(id, .ended(failure: reason)))
    }

    /// Removes a stream and its timer.
    @discardableResult
    private mutating func forget(_ id: WireID) -> StreamTable.Stream? {
        timers.cancel(.streamOpen(id))
        return streamTable.streams.removeValue(forKey: id)
    }
}
