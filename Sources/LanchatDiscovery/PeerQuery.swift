/// Finds the peer a person means by `PEER`: a display name, an instance name, or a prefix of an id
/// (at least 4 characters). Exact names win over prefixes; more than one match is an error that
/// lists the candidates.
public enum PeerQuery {
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        case empty
        case noMatch(String)
        case ambiguous(String, candidates: [String])

        public var description: String {
            switch self {
            case .empty: return "no peer given"
            case .noMatch(let query): return "no peer matches '\(query)' (see `lanchat peers`)"
            case .ambiguous(let query, let candidates):
                return "'\(query)' matches several peers: \(candidates.joined(separator: ", ")); give more of the id"
            }
        }
    }

    public static func match(_ query: String, in peers: [DiscoveredPeer]) -> Result<DiscoveredPeer, Failure> {
        guard !query.isEmpty else { return .failure(.empty) }
        let usable = peers.filter(\.isCompatible)
        func unique(_ found: [DiscoveredPeer]) -> Result<DiscoveredPeer, Failure>? {
            switch found.count {
            case 0: return nil
            case 1: return .success(found[0])
            default:
                return .failure(
                    .ambiguous(
                        query,
                        candidates: found.map {
                            "\($0.advertisement!.displayName) (\($0.advertisement!.peerID.short))"
                        }.sorted()))
            }
        }
        if let byName = unique(usable.filter { $0.advertisement?.displayName == query }) { return byName }
        if let byInstance = unique(usable.filter { $0.instanceName == query }) { return byInstance }
        let lower = query.lowercased()
        if lower.count >= 4, let byID = unique(usable.filter { $0.advertisement!.peerID.rawValue.hasPrefix(lower) }) { return byID }
        return .failure(.noMatch(query))
    }
}
