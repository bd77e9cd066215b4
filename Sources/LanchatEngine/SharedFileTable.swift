import LanchatCore

/// Shared files' own state (issue 29: a machine that owns its state; the rules are in `+SharedFiles`):
/// the fetches under way by their own id, the request each asks now (and, the other way, the fetch each
/// request is for), the requests the shell is looking up to serve, and the files served with their
/// progress. Others read it; only its methods change it, so a fetch and its request cannot disagree.
/// `TransferTable` keeps it: each request is answered by a transfer under the same id.
struct SharedFileTable: Sendable {
    typealias SharedFetch = SessionStateMachine.SharedFetch
    typealias ServedProgress = SessionStateMachine.ServedProgress

    /// Fetches under way, by their own id.
    private(set) var fetches: [WireID: SharedFetch] = [:]
    /// The fetch each request asked now is for (the other way of each fetch's `attempt`).
    private var attempts: [WireID: WireID] = [:]
    /// Requests the shell is looking up to serve, and who asked.
    private var serving: [WireID: PeerID] = [:]
    /// Files served: how much their receiver had acknowledged when we last looked, and since when.
    private(set) var served: [WireID: ServedProgress] = [:]

    // MARK: Fetching

    /// The fetch a request (and the transfer that answers it, under the same id) is for.
    func fetch(ofAttempt attempt: WireID) -> WireID? { attempts[attempt] }

    mutating func start(_ id: WireID, _ fetch: SharedFetch) { fetches[id] = fetch }

    /// Changes what a fetch is for (its destination, name, who it is fetched for, whether it ends here).
    mutating func update(_ id: WireID, _ change: (inout SharedFetch) -> Void) {
        guard var fetch = fetches[id] else { return }
        change(&fetch)
        fetch.attempt = fetches[id]?.attempt  // (requests change only through `ask` and `passOver`)
        fetches[id] = fetch
    }

    /// The fetch asks `peer` now, under a new request id; `candidates`: who is left to ask after it.
    mutating func ask(_ id: WireID, _ peer: PeerID, attempt: WireID, candidates: [PeerID], at now: Int64) -> SharedFetch? {
        guard var fetch = fetches[id] else { return nil }
        if let old = fetch.attempt { attempts[old] = nil }
        attempts[attempt] = id
        fetch.candidates = candidates
        fetch.attempt = attempt
        fetch.asked = peer
        fetch.askedAt = now
        fetches[id] = fetch
        return fetch
    }

    /// The member asked did not serve (`outcome`: who, and why): its request is over.
    mutating func passOver(_ id: WireID, outcome: String) -> SharedFetch? {
        guard var fetch = fetches[id] else { return nil }
        fetch.outcomes.append(outcome)
        if let attempt = fetch.attempt { attempts[attempt] = nil }
        fetch.attempt = nil
        fetch.asked = nil
        fetches[id] = fetch
        return fetch
    }

    /// The fetch is over (placed, failed, cancelled): it and its request go.
    @discardableResult mutating func end(_ id: WireID) -> SharedFetch? {
        guard let fetch = fetches.removeValue(forKey: id) else { return nil }
        if let attempt = fetch.attempt { attempts[attempt] = nil }
        return fetch
    }

    /// The fetch a request is for, over.
    @discardableResult mutating func end(attempt: WireID) -> SharedFetch? {
        guard let id = attempts[attempt] else { return nil }
        return end(id)
    }

    // MARK: Serving

    /// Requests being looked up, for `peer` (nil: for anyone).
    func lookingUp(for peer: PeerID?) -> Int { serving.values.filter { peer == nil || $0 == peer }.count }

    mutating func lookUp(_ request: WireID, for peer: PeerID) { serving[request] = peer }

    /// The look-up of `request` is over: who it was for.
    mutating func lookedUp(_ request: WireID) -> PeerID? { serving.removeValue(forKey: request) }

    /// Whether `id` is taken by anything here (a request looked up, a fetch, one of its requests).
    func uses(_ id: WireID) -> Bool { serving[id] != nil || attempts[id] != nil || fetches[id] != nil }

    mutating func served(_ id: WireID, at now: Int64) { served[id] = ServedProgress(acknowledged: 0, since: now) }

    mutating func progress(_ id: WireID, _ progress: ServedProgress?) { served[id] = progress }

    // MARK: Checks

    /// What does not agree between the fetches and their requests (for the consistency check).
    var faults: [String] {
        var faults: [String] = []
        for (attempt, id) in attempts where fetches[id]?.attempt != attempt {
            faults.append("request \(attempt.description.prefix(8)) is for fetch \(id.description.prefix(8)), which does not ask it")
        }
        for (id, fetch) in fetches {
            if let attempt = fetch.attempt, attempts[attempt] != id {
                faults.append("fetch \(id.description.prefix(8)) asks under \(attempt.description.prefix(8)), which is not filed as its request")
            }
        }
        return faults
    }
}
