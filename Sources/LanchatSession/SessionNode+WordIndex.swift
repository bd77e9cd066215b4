import LanchatCore
import NIOCore

/// The word index catching up with what was stored (a stored message waits for it: `SessionStore.indexWaiting`).
extension SessionNode {
    /// Messages the word index takes per turn of the store's thread (a few milliseconds: a commit waits
    /// behind at most one piece).
    static let indexPiece = 500

    /// The word index takes what was stored since (a piece per turn of the store's thread, so that
    /// commits are done between pieces), then the log is checkpointed. Not while an import's bulk
    /// write is open: after its commit.
    func indexAndCheckpoint() {
        guard !stopped, !indexing else { return }  // (a catch-up under way checkpoints when it ends)
        indexing = true
        storeThread.run(on: eventLoop) { store -> Bool? in
            if store.bulkIsOpen { return nil }
            return try store.indexWaiting(limit: Self.indexPiece)
        }.whenComplete { [weak self] result in
            self?.assumeIsolated { node in
                node.indexing = false
                guard !node.stopped else { return }
                switch result {
                case .success(nil): node.scheduleCheckpoint()
                case .success(true): node.indexAndCheckpoint()
                case .success(false): node.checkpointLog()
                case .failure(let error):
                    node.logger.error("cannot bring the word index up to date", metadata: ["error": "\(error)"])
                    node.checkpointLog()
                }
            }
        }
    }

    /// Checkpoints the store's log: on the checkpoint thread (`StoreSync`), one at a time (one asked for
    /// meanwhile runs after it), or on the store's thread for a store no second connection may checkpoint.
    func checkpointLog() {
        guard let storeSync, checkpointsApart else {
            _ = storeThread.run(on: eventLoop) { $0.checkpoint() }
            return
        }
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

    /// Brings the word index up to date before a search, a piece per turn of the store's thread (after a
    /// large import, a million messages take about a second and a half): commits are done meanwhile.
    func indexBeforeSearch() async {
        while !stopped {
            let more = try? await storeThread.run(on: eventLoop) { store -> Bool in
                if store.bulkIsOpen { try store.commitBulk() }
                return try store.indexWaiting(limit: Self.indexPiece)
            }.get()
            guard more == true else { return }
        }
    }
}
