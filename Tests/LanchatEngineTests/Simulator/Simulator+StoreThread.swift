import LanchatCore
import LanchatEngine
import LanchatWire

/// The store's thread, as lanchatd runs it (`StoreThread`): what a node's driver asks of the store
/// (`.store`) waits in a queue; 1 to 4 ms later a turn takes everything queued by then and answers it
/// with the real `StoreWorker` on the node's memory store, in order, consecutive requests in one commit
/// (a savepoint each, as lanchatd groups them); the answers reach the node 0 or 1
/// ms after that. A crash loses what was queued, and answers not yet delivered (their writes, committed
/// and not synced, go as `crash()` says).
extension Simulator {
    func askStore(_ node: Int, _ request: StoreRequest) {
        let idle = storeQueue[node, default: []].isEmpty
        storeQueue[node, default: []].append(request)
        if idle { schedule(.storeTurn(node: node, incarnation: nodes[node].incarnation), at: now + Int64(1 + roll(4))) }
    }

    func storeTurn(_ node: Int) {
        guard var worker = nodes[node].worker, let requests = storeQueue.removeValue(forKey: node), !requests.isEmpty else { return }
        let answers = worker.answer(requests)  // (one commit for them all, a savepoint each)
        nodes[node].worker = worker
        storeTurns += 1
        schedule(.storeAnswers(node: node, incarnation: nodes[node].incarnation, answers), at: now + Int64(roll(2)))
    }

    func storeAnswered(_ node: Int, _ answers: [StoreAnswer]) {
        for answer in answers {
            drive(node) { driver, engine in driver.storeAnswered(answer, engine: &engine, at: self.time(node)) }
        }
    }

    /// A crash: what waited for the store's thread is lost. Our own messages that went before their
    /// commit may be held by members, never by their author.
    func storeCrashes(_ node: Int) {
        let own = nodes[node].peer.id.rawValue
        for request in storeQueue.removeValue(forKey: node) ?? [] {
            storeRequestsLost += 1
            for case .insertMessage(let message, _, _) in request.operations where message.senderID == own { lostByAuthor.insert(message.id) }
        }
        for ids in (wentFirst.removeValue(forKey: node) ?? [:]).values { lostByAuthor.formUnion(ids) }
    }

    /// No ACK leaves for a message its node stored before the commit that stored it is on disk. Except a
    /// message its author sent under a SEAL it broke (`mayBeLost`): one whose leaf the seal does not match
    /// is acknowledged and refused, and its author may send it again under a new seal before that ACK
    /// arrives; the copy stored then is not on disk yet when the refusal's ACK leaves (seed 7755, found
    /// once the random draws of histories changed: the batch that refused it was answered before that
    /// copy's commit). What that ACK says is true: the message was refused.
    func checkAcknowledged(_ frames: [WireFrame], by node: Int) {
        guard stateFault == nil else { return }
        let store = nodes[node].store
        for case .ack(let ids) in frames {
            for id in ids
            where store.message(id: id.description) != nil && !store.isOnDisk(messageID: id.description)
                && !mayBeLost.contains(["\(node)", id.description])
            {
                stateFault = "n\(node) acknowledged message \(id.description.prefix(8)) before its commit was on disk"
                return
            }
        }
    }
}
