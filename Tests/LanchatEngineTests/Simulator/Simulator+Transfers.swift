import LanchatCore
import LanchatEngine
import LanchatWire
import NIOCore

/// File transfers in the simulator: programs send files of known bytes to members; the shell's file
/// work (`FileAction`) is simulated (reads from the original, part files that survive crashes, writes
/// that must come in order, a content digest, placing), answered a few milliseconds later as the file
/// thread would (now and then half a second later), and now and then a byte written is not what was asked (a bad disk). Checked: a placed file is byte for byte the file sent; what a sender sends again is at
/// most one window per connection it offered on (when the receiver kept its part file); once the network
/// is quiet, no transfer is left under way anywhere.
extension Simulator {
    /// Small chunks and windows, so that files of a few KiB take many frames and windows.
    static let transferLimits: TransferLimits = {
        var limits = TransferLimits()
        limits.chunkSize = 1024
        limits.window = 4096
        limits.progressEvery = 1024
        limits.sentMarkAhead = 2048
        limits.reportEvery = 4096
        limits.maximumIncomingPerPeer = 3
        limits.maximumIncoming = 6
        return limits
    }()

    struct TransferStats {
        var sender: Int
        var receiver: Int
        var size: Int
        /// RESOURCE_OFFER frames sent for it, and chunk bytes sent in all.
        var offers = 0
        var chunkBytes = 0
        /// The furthest byte sent, and the bytes sent again below it.
        var highest = 0
        var resent = 0
        /// The receiver crashed while it was under way (a part file whose record was not yet saved is
        /// started over: the bound on what is sent again does not hold then).
        var receiverCrashed = false
        var placed = 0
    }

    enum FileDone {
        case read(WireID, offset: UInt64, ByteBuffer, digest: [UInt8]?)
        case written(WireID, upTo: UInt64)
        case partOpened(WireID, PartOpening)
        case hashed(WireID, [UInt8])
        case placed(WireID, path: String)
    }

    /// A content digest (not SHA-256: the engine only compares them; any change of a byte changes it).
    static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        for seed: UInt64 in [0xcbf2_9ce4_8422_2325, 0x1234_5678_9abc_def1, 0x0f0f_0f0f_0f0f_0f0f, 0x5555_aaaa_5555_aaaa] {
            var hash = seed
            for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            hash ^= UInt64(bytes.count)
            for shift in stride(from: 0, to: 64, by: 8) { out.append(UInt8(truncatingIfNeeded: hash >> UInt64(shift))) }
        }
        return out
    }

    // MARK: Commands

    /// A program sends a file (0 bytes to 24 KiB) to a connected member of one of its rooms; now and then
    /// a program cancels one under way.
    func sendFile(from node: Int) {
        guard let engine = nodes[node].engine else { return }
        if chance(25) { return shareFile(from: node) }
        if chance(15) {
            let under = engine.transfersUnderWay(at: time(node))
            guard !under.isEmpty else { return }
            let pick = under[roll(under.count)]
            log("n\(node) cancels transfer \(pick.id.description.prefix(6)) (\(pick.direction))")
            if pick.direction == .outgoing { cancelledBySender.insert(pick.id) }
            perform(node) { ((try? $0.cancelTransfer(pick.id.description, at: self.time(node))) ?? nil)?.1 ?? [] }
            return
        }
        let peers = nodes.indices.filter { $0 != node && engine.isConnected(nodes[$0].peer.id) && engine.sharesRoom(with: nodes[$0].peer.id) }
        guard !peers.isEmpty else { return }
        let target = peers[roll(peers.count)]
        let size = chance(10) ? 0 : roll(24 * 1024)
        let bytes = randomBytes(size)
        let file = OfferedFile(path: "/sim/n\(node)/f\(now)", name: "f\(now).bin", size: UInt64(size), modifiedMilliseconds: 1, identity: "1:\(now)")
        perform(node) {
            guard let (id, actions) = try? $0.offerResource(file, to: self.nodes[target].peer.id, at: self.time(node)) else { return [] }
            self.originals[id] = bytes
            self.transferStats[id] = TransferStats(sender: node, receiver: target, size: size)
            self.log("n\(node) sends \(id.description.prefix(6)) (\(size) bytes) to n\(target)")
            return actions
        }
    }

    /// `size` bytes of a known pattern, from the schedule's random numbers.
    func randomBytes(_ size: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: size)
        var state = random.next()
        for index in bytes.indices {
            if index % 8 == 0 { state = state &* 6364136223846793005 &+ 1442695040888963407 }
            bytes[index] = UInt8(truncatingIfNeeded: state >> UInt64((index % 8) * 8))
        }
        return bytes
    }

    /// After a (re)start: what the store says was being sent goes on (the files are still there).
    func restoreTransfers(_ index: Int) {
        guard var engine = nodes[index].engine else { return }
        for saved in nodes[index].store.transfers() where saved.outgoing {
            guard let id = WireID(hex: saved.id), let peer = PeerID(saved.peerID), let bytes = originals[id] else { continue }
            if saved.state == "cancelled" {
                engine.restoreCancelled(id, to: peer, at: time(index))
            } else if saved.state == "active" {
                engine.restoreOutgoing(
                    id, to: SessionPeer(id: peer, name: saved.peerName),
                    file: OfferedFile(path: saved.path, name: saved.name, size: UInt64(bytes.count), modifiedMilliseconds: 1, identity: saved.fileIdentity),
                    digest: Hex.bytes(saved.sha256) ?? [], sentMark: UInt64(max(0, saved.sentMark)), resent: UInt64(max(0, saved.resent)))
            }
        }
        nodes[index].engine = engine
    }

    func noteCrash(_ index: Int) {
        guard let engine = nodes[index].engine else { return }
        for info in engine.transfersUnderWay(at: time(index)) where info.direction == .incoming {
            transferStats[info.id]?.receiverCrashed = true
        }
        // Offers still being looked up or opened are not listed: any transfer to this node counts.
        for (id, stats) in transferStats where stats.receiver == index { transferStats[id]?.receiverCrashed = true }
    }

    /// Counts what senders put on the wire, per transfer.
    func countTransfers(_ frames: [WireFrame]) {
        for frame in frames {
            switch frame {
            case .resourceOffer(let offer):
                transferStats[offer.id]?.offers += 1
            case .resourceChunk(let chunk):
                guard var stats = transferStats[chunk.id] else { continue }
                let start = Int(chunk.offset)
                let end = start + chunk.data.readableBytes
                stats.chunkBytes += end - start
                stats.resent += max(0, min(end, stats.highest) - start)
                stats.highest = max(stats.highest, end)
                transferStats[chunk.id] = stats
            default:
                break
            }
        }
    }

    // MARK: The shell's file work

    func later(_ node: Int, _ done: FileDone) {
        // Now and then the file thread is slow (a disk that stalls, a long hash after a restart): answers
        // then come after the connection changed.
        let delay = chance(3) ? Int64(100 + roll(500)) : Int64(1 + roll(3))
        schedule(.fileDone(node: node, incarnation: nodes[node].incarnation, done), at: now + delay)
    }

    func performFile(_ action: FileAction, node: Int) {
        switch action {
        case .read(let id, let offset, let count):
            guard let bytes = originals[id], Int(offset) + count <= bytes.count else {
                transferViolations.append("n\(node) asked to read past the end of \(id.description.prefix(6))")
                return
            }
            let data = ByteBuffer(bytes: bytes[Int(offset)..<(Int(offset) + count)])
            let digest = Int(offset) + count == bytes.count ? Self.digest(bytes) : nil
            later(node, .read(id, offset: offset, data, digest: digest))
        case .lookUp(let offer, let peer):
            let record = IncomingRecord.of(nodes[node].store.transfer(id: offer.id.description), offer: offer, from: peer) { _ in
                nodes[node].disk[offer.id] != nil
            }
            perform(node) { $0.incomingLookedUp(offer.id, record, at: self.time(node)) }
        case .openPart(let offer, let resume):
            var held: UInt64 = 0
            if resume, let part = nodes[node].disk[offer.id], UInt64(part.count) <= offer.size {
                held = UInt64(part.count)
            } else {
                nodes[node].disk[offer.id] = []
            }
            // Now and then the disk is nearly full: the offer is refused for lack of space.
            let free: UInt64 = chance(3) ? 100 : 1 << 40
            later(node, .partOpened(offer.id, .opened(path: "/sim/part/\(offer.id)", held: held, freeBytes: free)))
        case .write(let id, let offset, let data):
            guard let part = nodes[node].disk[id] else { return }
            guard UInt64(part.count) == offset else {
                transferViolations.append("n\(node) asked to write \(id.description.prefix(6)) at \(offset) but its part file holds \(part.count) bytes")
                return
            }
            nodes[node].disk[id]! += data.readableBytesView
            if options.faults, data.readableBytes > 0, chance(1) {
                // A bad disk (or memory): one byte is not what was written. Verification must catch it.
                let at = nodes[node].disk[id]!.count - 1 - roll(data.readableBytes)
                nodes[node].disk[id]![at] ^= 0x40
                corrupted.insert(id)
                log("n\(node) corrupts a byte of \(id.description.prefix(6)) at \(at)")
            }
            later(node, .written(id, upTo: offset + UInt64(data.readableBytes)))
        case .verify(let id):
            later(node, .hashed(id, Self.digest(nodes[node].disk[id] ?? [])))
        case .place(let id, let name, _):
            let content = nodes[node].disk.removeValue(forKey: id) ?? []
            if content != originals[id] {
                transferViolations.append(
                    "n\(node) placed \(id.description.prefix(6)) with \(content.count) bytes that differ from the "
                        + "\(originals[id]?.count ?? -1) sent")
            }
            filesPlaced += 1
            placedBytes += content.count
            transferStats[id]?.placed += 1
            later(node, .placed(id, path: "/sim/downloads/\(name)"))
        case .serveShared(let request, let peer):
            serveShared(node, request, to: peer)
        case .placeShared(let id, let file, _):
            placeShared(node, id, file)
        case .importHistory(let id, let room, let peer, let layout):
            importHistory(node, id, room: room, from: peer, layout: layout)
        case .close(let id, let removePart):
            if removePart { nodes[node].disk[id] = nil }
        case .cancelledWhileApart(let id, let peer):
            guard let saved = nodes[node].store.transfer(id: id.description), !saved.outgoing, saved.peerID == peer.id.rawValue else { return }
            guard saved.state == "active" else {
                if saved.state == "cancelled" { perform(node) { $0.cancelHeard(id, from: peer.id) } }
                return
            }
            nodes[node].disk[id] = nil
            try! nodes[node].store.transaction {
                nodes[node].store.updateTransfer(id: saved.id, state: "cancelled", sentMark: nil, resent: nil, now: time(node).wall)
            }
            perform(node) { $0.cancelHeard(id, from: peer.id) }
        }
    }

    func fileDone(_ node: Int, _ done: FileDone) {
        switch done {
        case .read(let id, let offset, let data, let digest):
            perform(node) { $0.fileRead(id, offset: offset, data: data, digest: digest, at: self.time(node)) }
        case .written(let id, let upTo):
            perform(node) { $0.written(id, upTo: upTo, at: self.time(node)) }
        case .partOpened(let id, let opening):
            // As the shell: a part file that comes after its offer was dropped is closed, not handed over.
            guard nodes[node].engine?.isOpeningPart(id) == true else { return }
            perform(node) { $0.partOpened(id, opening, at: self.time(node)) }
        case .hashed(let id, let digest):
            perform(node) { $0.hashed(id, digest: digest, at: self.time(node)) }
        case .placed(let id, let path):
            perform(node) { $0.placed(id, path: path, at: self.time(node)) }
        }
    }

    // MARK: Invariants

    /// Every placed file is the file sent (checked as it is placed); a transfer sends again at most one
    /// window per connection it was offered on (unless its receiver crashed meanwhile); once the network
    /// has been quiet, nothing is under way anywhere.
    func checkTransfers() throws {
        if let first = transferViolations.first { throw fail(first) }
        let window = Int(Self.transferLimits.window)
        for (id, stats) in transferStats.sorted(by: { $0.key.description < $1.key.description }) where !stats.receiverCrashed && !corrupted.contains(id) {
            // (A damaged file fails at the receiver; if the sender missed that answer, its next offer starts over.)
            if stats.resent > max(1, stats.offers) * window {
                throw fail(
                    "transfer \(id.description.prefix(6)) n\(stats.sender)->n\(stats.receiver) of \(stats.size) bytes sent \(stats.resent) "
                        + "bytes again over \(stats.offers) offers (window \(window))")
            }
        }
        for (index, node) in nodes.enumerated() {
            guard let diagnostics = node.engine?.diagnostics else { continue }
            if diagnostics.outgoingTransfers > 0 || diagnostics.incomingTransfers > 0 {
                let transfers = node.engine?.transfersUnderWay(at: time(index)) ?? []
                // A receiver apart from its sender when the sender cancelled, and not connected to it since
                // (they share no room any more: one was closed, say), keeps the transfer and its part file
                // until it hears, or for `TransferLimits.cancelTold` (7 days): counted, not a fault.
                if diagnostics.outgoingTransfers == 0,
                    transfers.allSatisfy({ $0.direction == .incoming && $0.state == .interrupted && cancelledBySender.contains($0.id) })
                {
                    cancelsNotHeard += transfers.count
                    continue
                }
                let under = transfers.map { "\($0.id.description.prefix(6)) \($0.direction) \($0.state.rawValue) \($0.done)/\($0.size)" }
                throw fail("n\(index) still has transfers under way after the quiet: \(diagnostics) \(under)")
            }
        }
    }
}
