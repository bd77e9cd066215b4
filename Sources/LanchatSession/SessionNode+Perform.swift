import LanchatCore
import LanchatEngine
import LanchatStore
import LanchatTransport
import LanchatWire
import NIOCore

/// How the node performs the engine's actions: `SessionDriver` (LanchatEngine, which the simulator runs
/// too) decides what they mean as I/O, in what order and after which sync of the store; the node does
/// that I/O (`carryOut`): frames on its connections, events, file and stream work, the store's syncs on
/// their own thread (`StoreSync`).
extension SessionNode {
    /// Performs the actions of our own messages (`send`, `share`) under the send-first rule
    /// (`SessionDriver.performOwn`). Returns once they are on disk: whether they committed (and synced),
    /// and whether they went first.
    func performOwn(_ plan: SessionStateMachine.SendPlan, _ actions: [SessionAction], in room: RoomID, mayGoFirst: Bool) async -> (committed: Bool, wentFirst: Bool) {
        guard !stopped else { return (false, false) }
        let own = driver.performOwn(plan, actions, in: room, mayGoFirst: mayGoFirst, engine: &engine, at: time())
        afterBatch(actions, own.output)
        // (A failed sync: the messages are in the store, maybe not on disk; their numbers stay used.)
        return (await wait(own.waiter) == .stored(synced: true), own.wentFirst)
    }

    /// Performs a batch of the engine's actions (`SessionDriver.perform`): the writes go to the store,
    /// the rest follows in order once they are on disk.
    func perform(_ actions: [SessionAction]) {
        guard !stopped else { return }
        afterBatch(actions, driver.perform(actions, engine: &engine, at: time()))
    }

    /// Performs a batch whose writes must all be stored or nothing of it happen
    /// (`SessionDriver.performAll`); returns once it is on disk, with how it ended.
    func performAll(_ actions: [SessionAction]) async -> Settled {
        guard !stopped else { return .notStored }
        let all = driver.performAll(actions, engine: &engine, at: time())
        afterBatch(actions, all.output)
        return await wait(all.waiter)
    }

    private func afterBatch(_ actions: [SessionAction], _ output: [ShellOutput]) {
        carryOut(output)
        if actions.contains(where: { if case .persist = $0 { true } else { false } }) { scheduleCheckpoint() }
        armTimer()
    }

    /// Waits until what was performed so far is done (its syncs included); returns whether they synced.
    func settled() async -> Bool {
        switch driver.settle() {
        case .now(let synced): synced
        case .later(let waiter): await wait(waiter) == .stored(synced: true)
        }
    }

    private func wait(_ waiter: UInt64) async -> Settled {
        if let settled = settledEarly.removeValue(forKey: waiter) { return settled }
        return await withCheckedContinuation { syncWaiters[waiter] = $0 }
    }

    // MARK: The I/O

    /// Does what the driver asks, in order.
    func carryOut(_ output: [ShellOutput]) {
        for item in output {
            switch item {
            case .write(let handle, let frames, let flushNow):
                openLinks[handle]?.connection.send(frames, flushNow: flushNow)
            case .writeIfRoom(let handle, let frames):
                guard let link = openLinks[handle], link.connection.isWritable else { unreliableDrops += 1; continue }
                link.connection.send(frames)
            case .close(let handle, let reason, let text):
                openLinks[handle]?.connection.leave(reason, text: text)
            case .dial(let peer):
                dialRequestSink.yield(peer)
            case .serves(let peer, let handle):
                guard let link = openLinks[handle] else { break }
                links[peer.id] = link
            case .reportStored(let report):
                eventSink.yield(.message(report))
                if report.stored.kind == .file { announced(report) }
            case .tell(.topicMessage(let message)):
                deliver(message)
            case .tell(let event) where event.isOwnDeparture(configuration.ownID):
                eventSink.yield(event)
                endTopicsOutsideRooms()
            case .tell(let event):
                eventSink.yield(event)
            case .rememberPeer(let label, let id):
                // Its own file, not the database: a failure is logged, and the peer is asked about again.
                do { try knownPeers.remember(label: label, id: id) } catch {
                    logger.error("cannot save the known-peers record", metadata: ["error": "\(error)"])
                }
            case .file(let file):
                performFile(file)
            case .stream(let id, let signal):
                streamSignal(id, signal)
            case .streamHandedOver(let acceptor, let accepted):
                streamHandedOver(acceptor, accepted)
            case .inviteFinished(let id, let outcome):
                inviteWaiters.removeValue(forKey: id)?.resume(returning: outcome)
            case .offerHistory(let offer):
                switch offer.content {
                case .export(let since, let limit):
                    exportHistory(room: offer.room, since: since, limit: limit, to: offer.peer, layout: offer.layout)
                case .messages(let messages):
                    sendHistory(messages, room: offer.room, to: offer.peer, layout: offer.layout)
                }
            case .startSync:
                startSync()
            case .settled(let waiter, let settled):
                if let continuation = syncWaiters.removeValue(forKey: waiter) {
                    continuation.resume(returning: settled)
                } else {
                    settledEarly[waiter] = settled
                }
            case .store(let request):
                storeThread.answer(request, on: eventLoop).whenSuccess { [weak self] answer in
                    self?.assumeIsolated { node in
                        guard !node.stopped else { return }
                        node.carryOut(node.driver.storeAnswered(answer, engine: &node.engine, at: node.time()))
                        node.resumeReadingIfCaughtUp()
                        node.armTimer()
                    }
                }
                pauseReadingIfBehind()
            case .storeFailed(let error):
                logger.error("cannot write to the store", metadata: ["error": "\(error)"])
            case .checkSeal(let check):
                checkSeal(check)
            }
        }
    }

    /// Checks a seal's signature on its own thread (`sealChecks`); the engine hears the outcome.
    private func checkSeal(_ check: SealCheck) {
        guard let keys = configuration.envelopes else { return }
        sealChecks.runIfActive(eventLoop: eventLoop) { check.verifies(with: keys) }.whenSuccess { [weak self] valid in
            self?.assumeIsolated { node in
                guard !node.stopped else { return }
                node.perform(node.engine.sealChecked(check, valid: valid, at: node.time()))
            }
        }
    }

    // MARK: Back-pressure

    /// The event loop no longer waits for the store, so nothing else would slow a peer that sends faster
    /// than the store keeps up (a flood of messages would queue without bound, and every other member's
    /// commits behind it): with `storeMarks.high` requests outstanding, the node stops reading from every
    /// peer connection (TCP's own window then holds the senders back), and reads again at `low`.
    func pauseReadingIfBehind() {
        guard !readingPaused, driver.unanswered >= storeMarks.high else { return }
        readingPaused = true
        readingPauses += 1
        for link in openLinks.values { setReading(link.connection) }
    }

    func resumeReadingIfCaughtUp() {
        guard readingPaused, driver.unanswered <= storeMarks.low else { return }
        readingPaused = false
        for link in openLinks.values { setReading(link.connection) }
    }

    /// Reads from a peer connection unless reading is paused (a connection that closed meanwhile: nothing).
    func setReading(_ connection: PeerConnector.Connection) {
        connection.channel.setOption(ChannelOptions.autoRead, value: !readingPaused).whenFailure { _ in }
    }

    /// Syncs the store's log on its own thread; the driver hears when it is done.
    private func startSync() {
        guard !stopped, let storeSync else { return }
        storeSync.sync(on: eventLoop).whenComplete { [weak self] result in
            self?.assumeIsolated { node in
                guard !node.stopped else { return }
                if case .failure(let error) = result {
                    // The writes are in the store, perhaps not on disk: nothing is acknowledged for them,
                    // nor for anything after them until the daemon starts again (`SessionDriver.syncFailed`).
                    node.logger.critical(
                        "cannot sync the store: nothing is acknowledged until the session restarts",
                        metadata: ["error": "\(error)"])
                }
                node.carryOut(node.driver.synced(result.isSuccess, engine: &node.engine, at: node.time()))
                node.armTimer()
            }
        }
    }
}

extension Result {
    var isSuccess: Bool { if case .success = self { true } else { false } }
}
