import LanchatCore
import LanchatEngine
import LanchatWire
import NIOCore

/// Histories as lanchatd sends them: a newcomer's history and a relay's answer are written as records to
/// a (simulated) file and offered as a resource; the receiver's engine takes it or not, the transfer runs
/// with every fault of a file's, and the receiver reads the records back and keeps what the engine's
/// verdict allows.
extension Simulator {
    func offerHistory(_ offer: HistoryOffer, from node: Int) {
        let messages: [StoredMessage]
        let relayAnswer: Bool
        switch offer.content {
        case .export(let since, let limit):
            messages = nodes[node].store.export(room: offer.room.rawValue, since: since, limit: limit)
            relayAnswer = false
        case .messages(let answer):
            messages = answer
            relayAnswer = true
        }
        // Nothing under a seal kept unchecked is handed on (its check runs off the event loop, and may fail).
        let unchecked = Set(nodes[node].store.uncheckedSeals().map { [$0.author, $0.seal.id] })
        if stateFault == nil, let early = messages.first(where: { message in message.seal.map { unchecked.contains([message.senderID, $0.id]) } ?? false }) {
            stateFault = "n\(node) hands on \(early.id.prefix(8)) under a seal not checked yet"
        }
        // A hostile relay (a fault, like the others only before the network heals) changes one record's
        // words and keeps its signature, or its seal and proof: the newcomer must refuse it. (Our own
        // record is signed first if the layout would sign it, or seal it again (`sealsHere`): the change
        // comes after, so that a seal made here does not cover it.)
        let tamper = options.faults && now < options.chaos && !messages.isEmpty && chance(10) ? roll(messages.count) : nil
        let keys = nodes[node].engine?.configuration.envelopes
        var encoder = HistoryEncoder(layout: offer.layout, ownID: nodes[node].peer.id, keys: keys, ids: IDGenerator(seed: random.next()))
        var buffer = ByteBuffer()
        var changed = 0
        var written = messages
        if let tamper, offer.layout.isAuthenticated {
            var message = written[tamper]
            let ownID = nodes[node].peer.id
            if !(offer.layout == .sealed && message.isSealed && !(message.senderID == ownID.rawValue && HistoryEncoder.sealsHere(message))) {
                message = SessionStateMachine.signedIfOurs(message, ownID: ownID, keys: keys)
            }
            if message.isSigned || message.isSealed {
                message.body += " (forged by n\(node))"
                forgeries.injected += 1
                changed += 1
            }
            written[tamper] = message
        }
        // In pieces, as lanchatd writes an export (its pieces of 5,000): our own records with neither a
        // signature nor a seal share seals within a piece, and a seal's head is named again in a later piece.
        var start = 0
        while start < written.count {
            let end = min(written.count, start + 1 + roll(written.count))
            encoder.append(Array(written[start..<end]), into: &buffer)
            start = end
        }
        if verbose { log("n\(node) offers \(offer.peer.name) a history of \(offer.room): \(messages.map { $0.id.prefix(8) })") }
        guard buffer.readableBytes > 0 else { return }  // (an empty answer: the driver told the engine)
        let bytes = Array(buffer.readableBytesView)
        let file = OfferedFile(
            path: "/sim/n\(node)/history-\(now)", name: "history of \(offer.room)", size: UInt64(bytes.count),
            modifiedMilliseconds: 1, identity: "history:\(now)")
        perform(node) {
            guard
                let (id, actions) = try? $0.offerResource(
                    file, to: offer.peer.id, kind: offer.layout.kind, room: offer.room,
                    ephemeral: true, relayAnswer: relayAnswer, at: self.time(node))
            else { return [] }
            self.originals[id] = bytes
            self.tampered[id] = changed
            self.historiesOffered += 1
            if offer.layout == .sealed { self.seals.histories += 1 }
            return actions
        }
    }

    /// The file thread read a received history: each record through the engine's verdict, what it keeps
    /// stored in one durable commit (as lanchatd's bulk write), then the engine hears how it went.
    func importHistory(_ node: Int, _ id: WireID, room: RoomID, from peer: SessionPeer, layout: HistoryLayout) {
        guard let engine = nodes[node].engine else { return }
        var buffer = ByteBuffer(bytes: nodes[node].disk.removeValue(forKey: id) ?? [])
        var added = 0, refused = 0, forged = 0
        var error: String?
        do {
            var decoder = HistoryDecoder(layout: layout)
            let entries = try decoder.decodeSome(&buffer, maximumCount: .max)
            if buffer.readableBytes > 0 { error = "the history ends inside a record" }
            if !decoder.isComplete { error = "the history ends after a seal, without its record" }
            let sorted = decoder.sort(
                entries, room: room, relay: peer.id, ownID: nodes[node].peer.id, keys: engine.configuration.envelopes,
                members: (engine.members(of: room) ?? [:]).mapValues(\.name), strangers: !engine.isRelayTransfer(id), now: time(node).wall,
                forgedLeft: engine.configuration.transferLimits.maximumForgedRecords)
            (refused, forged) = (sorted.refused, sorted.forged)
            try nodes[node].store.transaction(durable: true) {
                for kept in sorted.keep {
                    if nodes[node].store.insert(kept, now: time(node).wall) { added += 1 }
                }
            }
        } catch let failure {
            error = "invalid history: \(failure)"
        }
        forgeries.refused += forged
        if forged > (tampered[id] ?? 0), stateFault == nil {
            stateFault = "n\(node) found \(forged) forged records in \(peer.name)'s history of \(room), which had \(tampered[id] ?? 0) changed"
        }
        historiesImported += 1
        if verbose { log("n\(node) imports a history of \(room) from \(peer.name): \(added) added, \(refused) refused, \(forged) forged") }
        perform(node) { $0.historyImported(id, added: added, refused: refused, forged: forged, error: error, at: self.time(node)) }
    }
}
