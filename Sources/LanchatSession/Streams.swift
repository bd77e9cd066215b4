import LanchatCore
import LanchatEngine
import LanchatWire
import NIOCore

/// A named byte stream to or from a peer (STREAM_* frames): both directions, each with its own end of
/// data, and credit-based backpressure: a side sends only as many bytes as the other granted, and
/// grants more as the program reading them consumes them. A stream does not survive its connection.
public final class ByteStream: Sendable {
    public let id: String
    public let peer: SessionPeer
    public let name: String
    private let node: SessionNode
    let state: StreamState

    init(node: SessionNode, state: StreamState) {
        self.node = node
        self.state = state
        id = state.id.description
        peer = state.peer
        name = state.name.rawValue
    }

    /// Sends bytes; waits while the peer has granted no credit. Throws once the stream is aborted.
    public func write(_ data: ByteBuffer) async throws(SessionError) {
        try await node.streamWrite(state, data)
    }

    /// Says "no more bytes from here"; the peer's reads return `nil` after what was sent.
    public func finish() async {
        await node.streamFinish(state)
    }

    /// The next bytes from the peer, `nil` at its end of data. Throws if the stream was aborted.
    public func read() async throws(SessionError) -> ByteBuffer? {
        try await node.streamRead(state)
    }

    /// Returns once both directions ended (`nil`) or the stream was aborted (why).
    public func closed() async -> String? {
        await node.streamClosed(state)
    }

    /// Ends both directions now; the peer's reads and writes fail with `reason`.
    public func abort(_ reason: String) async {
        await node.streamAbort(state, reason: reason, tellPeer: true)
    }
}

/// One stream's state; touched only on the node's executor.
final class StreamState: @unchecked Sendable {
    let id: WireID
    let peer: SessionPeer
    let name: StreamName
    /// Bytes we may still send.
    var sendCredit = 0
    /// Bytes the peer may still send us (what we granted, minus what came).
    var receiveAllowance = 0
    /// Bytes read by the program since the last grant.
    var consumed = 0
    var inbound: [ByteBuffer] = []
    var remoteFinished = false
    var localFinished = false
    var failure: String?
    var reader: CheckedContinuation<Void, Never>?
    var writer: CheckedContinuation<Void, Never>?
    var opener: CheckedContinuation<Void, Never>?
    /// Waiting for both directions to end, or an abort.
    var closers: [CheckedContinuation<Void, Never>] = []

    init(id: WireID, peer: SessionPeer, name: StreamName) {
        self.id = id
        self.peer = peer
        self.name = name
    }

    func wakeAll() {
        reader?.resume()
        reader = nil
        writer?.resume()
        writer = nil
        opener?.resume()
        opener = nil
        for closer in closers { closer.resume() }
        closers = []
    }
}

/// An open nobody accepted yet: held a while for a program that starts accepting late.
struct PendingStreamOpen {
    var open: WireFrame.StreamOpen
    var peer: SessionPeer
    var timer: Scheduled<Void>
}

extension SessionNode {
    /// Credit granted per direction, and when to grant more (after this much was read).
    static let streamWindow = 4 << 20
    static let streamGrantEvery = 1 << 20
    static let streamChunk = 128 * 1024

    /// Opens a stream named `name` to `peer`; returns once a program on the peer accepted it.
    public func openStream(_ name: String, to peer: SessionPeer, timeout: Duration = .seconds(30)) async throws(SessionError) -> ByteStream {
        guard let streamName = StreamName(name) else {
            throw SessionError("bad_request", "stream name '\(name.prefix(64))' is not valid: use 1-64 letters, digits, '.', '_' or '-'")
        }
        let link: Link
        switch await dial(peer.id) {
        case .success(let value): link = value
        case .failure(let error): throw SessionError("unreachable", "\(peer.name): \(error.message)")
        }
        let state = StreamState(id: WireID.random(), peer: link.peer, name: streamName)
        state.receiveAllowance = Self.streamWindow
        streams[state.id] = state
        link.connection.send([.streamOpen(.init(id: state.id, name: streamName, credit: UInt32(Self.streamWindow)))])
        let timer = eventLoop.scheduleTask(in: .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000)) { [weak self] () -> Void in
            self?.assumeIsolated { node in
                guard state.opener != nil else { return }
                node.streamAbort(state, reason: "\(peer.name) did not accept stream '\(name)' in time", tellPeer: true)
            }
        }
        await withCheckedContinuation { state.opener = $0 }
        timer.cancel()
        if let failure = state.failure { throw SessionError("stream_refused", failure) }
        return ByteStream(node: self, state: state)
    }

    /// Waits for the next stream named `name` from any peer that shares a room with us. An open that
    /// arrived up to 10 s before is taken too. `isAlive` is asked before handing a stream over (the
    /// program that waited may have gone).
    public func acceptStream(_ name: String, isAlive: @escaping @Sendable () -> Bool) async throws(SessionError) -> ByteStream {
        guard let streamName = StreamName(name) else {
            throw SessionError("bad_request", "stream name '\(name.prefix(64))' is not valid: use 1-64 letters, digits, '.', '_' or '-'")
        }
        if let index = pendingStreamOpens.firstIndex(where: { $0.open.name == streamName }) {
            let pending = pendingStreamOpens.remove(at: index)
            pending.timer.cancel()
            if let stream = take(pending.open, from: pending.peer) { return stream }
        }
        let stream: ByteStream? = await withCheckedContinuation { continuation in
            streamAcceptors.append(StreamAcceptor(name: streamName, isAlive: isAlive, continuation: continuation))
        }
        guard let stream else { throw SessionError("stopped", "lanchatd is stopping") }
        return stream
    }

    /// Accepts an open: tells the peer, returns the program's end.
    private func take(_ open: WireFrame.StreamOpen, from peer: SessionPeer) -> ByteStream? {
        guard let link = links[peer.id] else { return nil }
        let state = StreamState(id: open.id, peer: peer, name: open.name)
        state.sendCredit = Int(open.credit)
        state.receiveAllowance = Self.streamWindow
        streams[open.id] = state
        link.connection.send([.streamAccept(id: open.id, credit: UInt32(Self.streamWindow))])
        return ByteStream(node: self, state: state)
    }

    func streamFrame(_ frame: WireFrame, from link: Link) {
        switch frame {
        case .streamOpen(let open):
            guard streams[open.id] == nil, !pendingStreamOpens.contains(where: { $0.open.id == open.id }) else { return }
            guard sharesRoom(with: link.peer.id) else {
                link.connection.send([.streamEnd(.init(id: open.id, status: .refused, text: "refused: you share no room with \(configuration.ownName)"))])
                return
            }
            while let index = streamAcceptors.firstIndex(where: { $0.name == open.name }) {
                let acceptor = streamAcceptors.remove(at: index)
                guard acceptor.isAlive() else {
                    acceptor.continuation.resume(returning: nil)
                    continue
                }
                acceptor.continuation.resume(returning: take(open, from: link.peer))
                return
            }
            guard pendingStreamOpens.count < 64 else {
                link.connection.send([.streamEnd(.init(id: open.id, status: .refused, text: "refused: too many streams waiting"))])
                return
            }
            let timer = eventLoop.scheduleTask(in: .seconds(10)) { [weak self] () -> Void in
                self?.assumeIsolated { node in
                    guard let index = node.pendingStreamOpens.firstIndex(where: { $0.open.id == open.id }) else { return }
                    let pending = node.pendingStreamOpens.remove(at: index)
                    node.links[pending.peer.id]?.connection.send([.streamEnd(.init(
                        id: open.id, status: .refused, text: "refused: nobody on \(node.configuration.ownName) accepts streams named '\(open.name)'"))])
                }
            }
            pendingStreamOpens.append(PendingStreamOpen(open: open, peer: link.peer, timer: timer))
        case .streamAccept(let id, let credit):
            guard let state = streams[id], state.peer.id == link.peer.id, let opener = state.opener else { return }
            state.sendCredit = Int(credit)
            state.opener = nil
            opener.resume()
        case .streamData(let id, let data):
            guard let state = streams[id], state.peer.id == link.peer.id, state.opener == nil else { return }
            guard !state.remoteFinished, data.readableBytes <= state.receiveAllowance else {
                streamAbort(state, reason: "\(link.peer.name) sent more than it was allowed", tellPeer: true)
                return
            }
            state.receiveAllowance -= data.readableBytes
            if data.readableBytes > 0 { state.inbound.append(data) }
            state.reader?.resume()
            state.reader = nil
        case .streamCredit(let id, let bytes):
            guard let state = streams[id], state.peer.id == link.peer.id else { return }
            guard state.sendCredit + Int(bytes) <= 1 << 31 else {
                streamAbort(state, reason: "\(link.peer.name) granted an impossible credit", tellPeer: true)
                return
            }
            state.sendCredit += Int(bytes)
            state.writer?.resume()
            state.writer = nil
        case .streamEnd(let end):
            if let index = pendingStreamOpens.firstIndex(where: { $0.open.id == end.id && $0.peer.id == link.peer.id }) {
                pendingStreamOpens.remove(at: index).timer.cancel()
                return
            }
            guard let state = streams[end.id], state.peer.id == link.peer.id else { return }
            switch end.status {
            case .finished:
                state.remoteFinished = true
                state.reader?.resume()
                state.reader = nil
                forgetIfDone(state)
            case .refused:
                streamAbort(state, reason: end.text.isEmpty ? "\(link.peer.name) refused the stream" : end.text, tellPeer: false)
            case .aborted:
                streamAbort(state, reason: end.text.isEmpty ? "\(link.peer.name) aborted the stream" : "\(link.peer.name): \(end.text)", tellPeer: false)
            }
        default:
            break
        }
    }

    func streamWrite(_ state: StreamState, _ data: ByteBuffer) async throws(SessionError) {
        var rest = data
        while rest.readableBytes > 0 {
            if let failure = state.failure { throw SessionError("stream_aborted", failure) }
            guard !state.localFinished else { throw SessionError("stream_finished", "the stream was finished") }
            guard let link = links[state.peer.id] else {
                streamAbort(state, reason: "the connection to \(state.peer.name) was lost", tellPeer: false)
                continue
            }
            let count = min(rest.readableBytes, state.sendCredit, Self.streamChunk)
            if count == 0 {
                await withCheckedContinuation { state.writer = $0 }
                continue
            }
            state.sendCredit -= count
            link.connection.send([.streamData(id: state.id, data: rest.readSlice(length: count)!)])
        }
    }

    func streamFinish(_ state: StreamState) {
        guard !state.localFinished, state.failure == nil else { return }
        state.localFinished = true
        links[state.peer.id]?.connection.send([.streamEnd(.init(id: state.id, status: .finished))])
        forgetIfDone(state)
    }

    func streamRead(_ state: StreamState) async throws(SessionError) -> ByteBuffer? {
        while true {
            if !state.inbound.isEmpty {
                let data = state.inbound.removeFirst()
                state.consumed += data.readableBytes
                if state.consumed >= Self.streamGrantEvery, !state.remoteFinished, state.failure == nil {
                    links[state.peer.id]?.connection.send([.streamCredit(id: state.id, bytes: UInt32(state.consumed))])
                    state.receiveAllowance += state.consumed
                    state.consumed = 0
                }
                return data
            }
            if let failure = state.failure { throw SessionError("stream_aborted", failure) }
            if state.remoteFinished { return nil }
            await withCheckedContinuation { state.reader = $0 }
        }
    }

    func streamAbort(_ state: StreamState, reason: String, tellPeer: Bool) {
        guard state.failure == nil, !(state.localFinished && state.remoteFinished) else { return }
        state.failure = reason
        if tellPeer {
            let text = String(decoding: Array(reason.utf8.prefix(1000)), as: UTF8.self)
            links[state.peer.id]?.connection.send([.streamEnd(.init(id: state.id, status: .aborted, text: text))])
        }
        streams[state.id] = nil
        state.wakeAll()
    }

    private func forgetIfDone(_ state: StreamState) {
        guard state.localFinished && state.remoteFinished else { return }
        streams[state.id] = nil
        state.wakeAll()
    }

    func streamClosed(_ state: StreamState) async -> String? {
        while state.failure == nil && !(state.localFinished && state.remoteFinished) {
            await withCheckedContinuation { state.closers.append($0) }
        }
        return state.failure
    }

    /// The connection to `peer` ended: its streams are aborted, its pending opens dropped.
    func streamsLost(peer: PeerID, reason: String) {
        for state in streams.values where state.peer.id == peer {
            streamAbort(state, reason: "the connection to \(state.peer.name) was lost (\(reason))", tellPeer: false)
        }
        pendingStreamOpens.removeAll { pending in
            guard pending.peer.id == peer else { return false }
            pending.timer.cancel()
            return true
        }
    }

    func closeStreams() {
        for state in streams.values { streamAbort(state, reason: "lanchatd is stopping", tellPeer: true) }
        for acceptor in streamAcceptors { acceptor.continuation.resume(returning: nil) }
        streamAcceptors = []
    }
}

struct StreamAcceptor {
    var name: StreamName
    var isAlive: @Sendable () -> Bool
    var continuation: CheckedContinuation<ByteStream?, Never>
}
