import LanchatCore
import LanchatEngine
import LanchatWire

/// The shell's part: what a node's driver asks for, done on the simulated network, disk and clock.
extension Simulator {
    /// Does the plain I/O a node's driver asks for, on the simulated network, disk and clock.
    func carryOut(_ output: [ShellOutput], node: Int) {
        for item in output {
            switch item {
            case .write(let handle, let frames, _):
                countTransfers(frames)
                checkAcknowledged(frames, by: node)
                transmit(frames, from: node, on: handle)
            case .writeIfRoom(let handle, let frames):
                if !chance(10) { transmit(frames, from: node, on: handle) }
            case .close(let handle, let reason, let text):
                guard let link = link(of: node, handle), link.up else {
                    schedule(.linkDown(node: node, incarnation: nodes[node].incarnation, handle, .local), at: now)
                    continue
                }
                drop(link, reason: .goodbye(reason, text), closer: node)
            case .dial(let peer):
                schedule(.dial(node: node, incarnation: nodes[node].incarnation, peer), at: now + 1)
            case .serves:
                break
            case .reportStored(let report) where report.stored.kind == .file && !report.outgoing:
                announced(node, report)
            case .reportStored(let report):
                // (A message under a broken seal may be gone by the time its report is told: its check failed.)
                if stateFault == nil, nodes[node].store.message(id: report.stored.id) == nil, !mayBeLost.contains(["\(node)", report.stored.id]) {
                    stateFault = "n\(node) reported message \(report.stored.id.prefix(8)), which its store does not hold"
                }
                if !report.outgoing, report.stored.kind != .system {
                    let id = report.stored.id
                    nodes[node].reported[id, default: 0] += 1
                    // Checked here too, so that the trace ends where it happened.
                    if nodes[node].reported[id] == 2, stateFault == nil, !mayBeLost.contains(["\(node)", id]) {
                        stateFault = "n\(node) reported message \(id.prefix(8)) twice"
                    }
                }
            case .rememberPeer(let label, let id):
                var labels = nodes[node].known.labels
                labels[id] = label
                nodes[node].known = KnownPeerBook(labels)
            case .offerHistory(let offer):
                offerHistory(offer, from: node)
            case .tell(.transfer(let info)):
                if info.state != .active {
                    log("n\(node): transfer \(info.id.description.prefix(6)) \(info.direction) \(info.state.rawValue)\(info.error.map { ": \($0)" } ?? "")")
                }
            case .tell(.topicMessage(let message)):
                topicDelivered(message, at: node)
            case .tell(.memberLeft(let room, let peer, let code, let text, true)) where peer.id == nodes[node].peer.id:
                // Out of a room by our own leave, or by an administrator's removal or closing: owed nothing
                // sent there any more (a rejoin starts over), as with `leaveRandomRoom`.
                if code != .left { log("n\(node) is out of \(room): \(code) (\(text))") }
                if code == .removed { removals += 1 } else if code == .closed { closings += 1 }
                leaves.append((node, room, now))
            case .tell(.memberLeft(let room, let peer, .removed, _, true)):
                // A member an administrator removed is owed nothing it was sent, as one that left, whether or
                // not it heard (its queued messages are dropped here; invited back, it starts over with history).
                if let index = nodes.firstIndex(where: { $0.peer.id == peer.id }) { leaves.append((index, room, now)) }
            case .tell(let event):
                if case .invitationClosed(let invitation, let outcome) = event { log("n\(node): invitation \(invitation.id.description.prefix(6)) \(outcome)") }
            case .inviteFinished(let id, let outcome):
                log("n\(node): invite \(id.description.prefix(6)) -> \(outcome)")
            case .file(let action):
                performFile(action, node: node)
            case .stream(let id, let signal):
                streamSignal(node, id, signal)
            case .streamHandedOver(let acceptor, let accepted):
                handedOver(node, acceptor, accepted)
            case .startSync:
                // The store's thread syncs its log: 1 to 40 ms later (a disk that is slow to sync), meanwhile the node goes on.
                syncs += 1
                syncRunning[node] = nodes[node].store.syncBegins()
                schedule(.synced(node: node, incarnation: nodes[node].incarnation), at: now + Int64(1 + roll(40)))
            case .settled(let waiter, let settled):
                if let messages = syncing[node]?.removeValue(forKey: waiter), settled == .stored(synced: true) { sent += messages }
                if let ids = wentFirst[node]?.removeValue(forKey: waiter), settled == .notStored { lostByAuthor.formUnion(ids) }
            case .store(let request):
                askStore(node, request)
            case .checkSeal(let check):
                // Checked on another thread: its answer comes 0 to 80 ms later, the node going on meanwhile.
                seals.checks += 1
                let valid = nodes[node].engine?.configuration.envelopes.map { check.verifies(with: $0) } ?? false
                schedule(.sealChecked(node: node, incarnation: nodes[node].incarnation, check, valid: valid), at: now + Int64(roll(81)))
            case .storeFailed(let error):
                // Only the simulated disk's refusals (a fault) may fail a commit.
                if error.contains("(simulated)") { failedCommits += 1 } else if stateFault == nil { stateFault = "n\(node) cannot write to its store: \(error)" }
            }
        }
    }
}
