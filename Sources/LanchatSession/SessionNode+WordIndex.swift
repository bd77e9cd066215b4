import LanchatCore
import NIOCore

/// The word index catching up with what was stored (a stored message waits for it: `SessionStore.indexWaiting`).
extension SessionNode {
    /// Messages stored per turn of the event loop when the word index catches up (about 15 ms).
    static let indexPiece = 2000

    /// The word index takes what was stored since (a piece per turn of the event loop, so that peers
    /// are served between pieces), then the log is checkpointed. Not while an import's bulk write is
    /// open: after its commit.
    func indexAndCheckpoint() {
        guard !stopped, !indexing else { return }  // (a catch-up under way checkpoints when it ends)
        if store.bulkIsOpen { return scheduleCheckpoint() }
        let more: Bool
        do { more = try store.indexWaiting(limit: Self.indexPiece) } catch {
            logger.error("cannot bring the word index up to date", metadata: ["error": "\(error)"])
            more = false
        }
        guard more else { return checkpointLog() }
        indexing = true
        eventLoop.execute { [weak self] in
            self?.assumeIsolated { node in
                node.indexing = false
                node.indexAndCheckpoint()
            }
        }
    }

    /// Checkpoints the store's log: on the checkpoint thread (`StoreSync`), one at a time (one asked for
    /// meanwhile runs after it), or here for a store no second connection may checkpoint.
    func checkpointLog() {
        guard let storeSync, store.checkpointPath != nil else { return store.checkpoint() }
        guard !checkpointing else {
            checkpointAgain = true
            return
        }
        checkpointing = true
        storeSync.checkpoint(on: eventLoop).whenComplete { [weak self] result in
            self?.assumeIsolated { node in
                node.checkpointing = false
                if case .failure(let error) = result { node.logger.warning("cannot checkpoint the store's log", metadata: ["error": "\(error)"]) }
                if node.checkpointAgain, !node.stopped {
                    node.checkpointAgain = false
                    node.checkpointLog()
                }
            }
        }
    }

    /// Brings the word index up to date before a search, a piece per turn of the event loop (after a
    /// large import, a million messages take about a second and a half): peers are served meanwhile.
    func indexBeforeSearch() async {
        while !stopped {
            if store.bulkIsOpen { try? store.commitBulk() }
            guard (try? store.indexWaiting(limit: Self.indexPiece)) == true else { return }
            await Task.yield()
        }
    }
}
