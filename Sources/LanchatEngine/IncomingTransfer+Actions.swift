import LanchatTransfer
import LanchatWire

/// What an `IncomingTransfer` is, decides and checks (its states and inputs: IncomingTransfer.swift).
extension IncomingTransfer {
    /// Where a transfer is (derived from its state, for the table's rules and reports).
    enum Stage: String, Equatable, Sendable {
        case lookingUp, opening, receiving, verifying, placing, ended
    }

    enum Action: Equatable, Sendable {
        /// Tell the sender to start (or go on) at this offset, or report progress (bytes written).
        case sendAccept(UInt64)
        /// A transfer event: under way (done, rate).
        case progress
        /// Watch it for stalls (`TransferLimits.stallTimeout` from now at the latest).
        case watchStalls
        /// Ask the shell for the part file (`resume`: keep what an earlier attempt left in it).
        case openPart(resume: Bool)
        /// Keep the transfer's record (a person's file), so that a restart goes on with its part file.
        case save(partPath: String, name: String)
        /// Hand `count` bytes of the chunk that came, from `skip` bytes into it, to be written at `offset`.
        case write(offset: UInt64, skip: Int, count: Int)
        /// Every byte is written and the digest is known: hash the part file (answer `hashed`).
        case verify
        /// The digest matches: place the file under `name` (or import the history; answer `placed`).
        case place(name: String)
        /// In place (or imported): complete (the caller reports it, with where it went).
        case complete
        /// Ended here: refused, failed or cancelled; `tell`: the sender is told (RESOURCE_END). The part
        /// file goes.
        case end(TransferState, text: String, tell: Bool)
        /// Answer the offer (RESOURCE_END) and forget it: nothing was started for it.
        case answer(WireFrame.ResourceEnd.Status, text: String)
        /// The connection went before it started: forget it (`partOpening`: a part file was asked for);
        /// the next offer starts over.
        case forget(reason: String, partOpening: Bool)
        /// The connection went: it waits for the sender to offer it again.
        case interrupted(reason: String)
    }

    struct Refusal: Error, Equatable { var text: String }

    /// Whether the offer can be taken: its name, its size, the directory, the free space (past what is
    /// kept free, `keptFree`). `held`: what a part file from an earlier attempt holds (its bytes are trusted only
    /// because the final SHA-256 check covers them; one longer than the offer is not trusted). Returns
    /// the safe name and where to start.
    static func check(
        _ offer: WireFrame.ResourceOffer, maximumSize: UInt64, storageProblem: String?, freeBytes: UInt64, keptFree: UInt64, held: UInt64
    ) -> Result<(name: String, resume: UInt64), Refusal> {
        let size = offer.size
        let name: String
        switch SafeFileName.make(from: offer.name) {
        case .success(let safe): name = safe
        case .failure(let refusal): return .failure(Refusal(text: refusal.description))
        }
        guard size <= maximumSize else {
            return .failure(Refusal(text: "\(size) bytes is over this peer's limit of \(maximumSize) bytes"))
        }
        if let storageProblem { return .failure(Refusal(text: storageProblem)) }
        let resume = held <= size ? held : 0
        guard size - resume <= freeBytes, freeBytes - (size - resume) >= keptFree else {
            let kept = keptFree > 0 ? ", \(keptFree) kept free" : ""
            return .failure(Refusal(text: "not enough free space (\(size - resume) bytes needed, \(freeBytes) free\(kept))"))
        }
        return .success((name, resume))
    }
}
