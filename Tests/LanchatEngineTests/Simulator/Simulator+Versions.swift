import LanchatEngine
import LanchatWire

/// Wire versions in a schedule: which each node speaks, and what its links speak.
extension Simulator {
    /// Each node's newest version, from a generator of its own (the rest of a schedule draws as before):
    /// in half the schedules every node speaks version 4 (seals), in a quarter each node 3 or 4, in a
    /// quarter all 3.
    static func versions(seed: UInt64, nodes: Int) -> [UInt16] {
        var versions = IDGenerator(seed: seed &* 31 &+ 17)
        let mode = versions.next() % 4
        return (0..<nodes).map { _ in mode < 2 ? WireFrame.sealsVersion : mode == 2 && versions.next() % 2 == 0 ? WireFrame.sealsVersion : 3 }
    }

    /// The version a link between two nodes speaks (the handshake's choice: the higher both speak).
    func linkVersion(_ a: Int, _ b: Int) -> UInt16 { min(nodes[a].maximumVersion, nodes[b].maximumVersion) }
}
