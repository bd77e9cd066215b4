import Crypto
import Glibc

/// The Merkle tree of RFC 9162 (Certificate Transparency 2.0), section 2.1, with SHA-256: what a seal
/// signs for a batch of an author's messages (wire version 4; `Seal`).
///
/// The tree's leaves are byte strings (a seal's: its messages' signing bytes, `Envelope.signingBytes`).
/// RFC 9162 hashes each leaf with a domain byte, `leafHash(d) = SHA-256(0x00 | d)`, and each interior node
/// as `nodeHash(l, r) = SHA-256(0x01 | l | r)`, so that no leaf's hash is an interior node's. The root of
/// `n >= 1` leaves, `MTH(D[n])`, is the leaf hash of the one leaf for `n = 1`, and otherwise
/// `nodeHash(MTH(D[0..<k]), MTH(D[k..<n]))` with `k` the largest power of two below `n`. Everything here
/// takes the leaves' hashes, not the leaves: that is what a SEAL frame carries and what a receiver holds.
///
/// Hashes are 32-byte arrays; the functions that take hashes from a peer (`rootFromAuditPath`,
/// `verifyAuditPath`) refuse any other length, the others expect well-formed input.
public enum MerkleTree {
    public static let hashLength = 32
    /// RFC 9162's domain bytes: before a leaf, before two child hashes.
    public static let leafPrefix: UInt8 = 0x00
    public static let nodePrefix: UInt8 = 0x01

    /// `SHA-256(0x00 | leaf)`: the hash of one leaf.
    public static func leafHash(_ leaf: [UInt8]) -> [UInt8] {
        var hasher = SHA256()
        withUnsafeBytes(of: leafPrefix) { hasher.update(bufferPointer: $0) }
        leaf.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        return bytes(of: hasher.finalize())
    }

    /// `SHA-256(0x01 | left | right)`: the hash of an interior node.
    ///
    /// The three parts are put side by side on the stack and hashed at once: an update per part went
    /// through the digest's context three times, and a node is hashed for nearly every message on both
    /// ends (its seal's tree), and `log2(n)` times for each record of a sealed history.
    public static func nodeHash(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] {
        withUnsafeTemporaryAllocation(byteCount: 1 + left.count + right.count, alignment: 1) { buffer in
            buffer[0] = nodePrefix
            left.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: buffer[1...]).copyMemory(from: $0) }
            right.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: buffer[(1 + left.count)...]).copyMemory(from: $0) }
            var hasher = SHA256()
            hasher.update(bufferPointer: UnsafeRawBufferPointer(buffer))
            return bytes(of: hasher.finalize())
        }
    }

    /// A digest's 32 bytes as an array, copied at once (`Array(digest)` reads them one by one through
    /// the digest's iterator).
    static func bytes(of digest: SHA256Digest) -> [UInt8] {
        digest.withUnsafeBytes { Array($0) }
    }

    /// `MTH(D[n])` from the leaves' hashes, in order. For no leaves, RFC 9162's `SHA-256()` (a seal never
    /// has none).
    ///
    /// Computed level by level: adjacent nodes pair up, and the last node of a level with an odd count
    /// moves up unchanged. That is the recursive definition above, since its left subtrees are complete.
    public static func root(_ leafHashes: [[UInt8]]) -> [UInt8] {
        guard !leafHashes.isEmpty else { return bytes(of: SHA256().finalize()) }
        var level = leafHashes
        while level.count > 1 { level = parents(of: level) }
        return level[0]
    }

    /// RFC 9162's `PATH(m, D[n])` (section 2.1.3.1) for leaf `index` of `leafHashes`: the siblings on the
    /// way from the leaf to the root, the leaf's own sibling first. At most `ceil(log2(n))` hashes (8 for
    /// 256 leaves); empty for one leaf.
    public static func auditPath(index: Int, leafHashes: [[UInt8]]) -> [[UInt8]] {
        precondition(leafHashes.indices.contains(index), "leaf \(index) of \(leafHashes.count)")
        var path: [[UInt8]] = []
        var level = leafHashes
        var position = index
        while level.count > 1 {
            let sibling = position ^ 1
            if sibling < level.count { path.append(level[sibling]) }  // else: the odd last node moves up alone
            level = parents(of: level)
            position /= 2
        }
        return path
    }

    /// Every leaf's audit path (`auditPath(index:leafHashes:)` for each index, in order) and the root, from
    /// one pass up the tree: `n - 1` node hashes for all of them, where asking leaf by leaf hashes the tree
    /// `n` times. What an author or a receiver of a whole seal keeps for each of its records.
    public static func auditPaths(_ leafHashes: [[UInt8]]) -> (paths: [[[UInt8]]], root: [UInt8]) {
        guard !leafHashes.isEmpty else { return ([], root(leafHashes)) }
        var paths = [[[UInt8]]](repeating: [], count: leafHashes.count)
        var level = leafHashes
        // The leaves under each node of the current level: node j covers leaves j * width ..< (j + 1) * width.
        var width = 1
        while level.count > 1 {
            for node in level.indices {
                let sibling = node ^ 1
                guard sibling < level.count else { continue }  // the odd last node moves up alone
                for leaf in (node * width)..<min((node + 1) * width, leafHashes.count) { paths[leaf].append(level[sibling]) }
            }
            level = parents(of: level)
            width *= 2
        }
        return (paths, level[0])
    }

    /// The root that `path` leads to from `leafHash`, leaf `index` of a tree of `count` leaves (RFC 9162,
    /// section 2.1.3.2), or nil when the path cannot be one of such a tree (index out of range, a path too
    /// short or too long for that leaf, a hash that is not 32 bytes).
    public static func rootFromAuditPath(_ path: [[UInt8]], leafHash: [UInt8], index: Int, count: Int) -> [UInt8]? {
        guard index >= 0, index < count, leafHash.count == hashLength, path.allSatisfy({ $0.count == hashLength }) else { return nil }
        var fn = index
        var sn = count - 1
        var hash = leafHash
        for sibling in path {
            guard sn != 0 else { return nil }  // the path is longer than the leaf's way up
            if fn & 1 == 1 || fn == sn {
                hash = nodeHash(sibling, hash)
                // Levels where the node is the odd last one: it moves up without a sibling.
                while fn & 1 == 0 && fn != 0 {
                    fn >>= 1
                    sn >>= 1
                }
            } else {
                hash = nodeHash(hash, sibling)
            }
            fn >>= 1
            sn >>= 1
        }
        guard sn == 0 else { return nil }  // the path is shorter than the leaf's way up
        return hash
    }

    /// Whether `path` proves that `leafHash` is leaf `index` of the `count` leaves whose root is `root`.
    public static func verifyAuditPath(_ path: [[UInt8]], leafHash: [UInt8], index: Int, count: Int, root: [UInt8]) -> Bool {
        guard let computed = rootFromAuditPath(path, leafHash: leafHash, index: index, count: count) else { return false }
        return computed == root
    }

    /// The nodes of one tree (`count` leaves, `root`) that audit paths checked so far have shown to be
    /// its own, so that the next path checks only what is new: a reader of a seal's records, one after
    /// another, hashes about one node per record where `verifyAuditPath` hashes up to 8. Each node is
    /// known by the leaves under it (its level and place, as `rootFromAuditPath` walks: a node that moves
    /// up alone is the same node one level higher), and a tree has one hash there: a path whose node or
    /// sibling differs from one known is refused, and a node whose two children are known is not hashed
    /// again. Only what a path shows is kept, and only once the path reaches the root; the whole path is
    /// still checked (each sibling against the one known, or hashed), so a path accepted here is one that
    /// `verifyAuditPath` accepts.
    public struct KnownNodes: Sendable {
        public let count: Int
        public let root: [UInt8]
        /// Each node's 32 bytes at `32 * slot(level, place)` (levels one after another, each as wide as
        /// the tree is there), and whether it is known: 0 not, 1 known, 2 shown by the path being checked.
        private var hashes: [UInt8]
        private var states: [UInt8]
        /// Where each level's slots begin.
        private let levels: [Int]
        /// How many leaves are known (level 0: a leaf checked, or the sibling of one).
        private var leavesKnown = 0

        /// Whether every leaf's hash is known.
        public var knowsEveryLeaf: Bool { leavesKnown == count }
        /// Every leaf's hash, in order (32 bytes each), once each is known; nil before.
        public var leafHashes: [UInt8]? { knowsEveryLeaf ? Array(hashes[0..<count * hashLength]) : nil }

        public init(count: Int, root: [UInt8]) {
            self.count = count
            self.root = root
            var levels: [Int] = []
            var slots = 0
            var width = max(1, count)
            while true {
                levels.append(slots)
                slots += width
                if width == 1 { break }
                width = (width + 1) / 2
            }
            self.levels = levels
            hashes = [UInt8](repeating: 0, count: slots * hashLength)
            states = [UInt8](repeating: 0, count: slots)
        }

        /// The node's slot; nil past the tree (a path longer than its leaf's way up).
        private func slot(_ level: Int, _ place: Int) -> Int? {
            guard level < levels.count else { return nil }
            let end = level + 1 < levels.count ? levels[level + 1] : states.count
            let slot = levels[level] + place
            return slot < end ? slot : nil
        }

        /// Whether the known node in `slot` is `hash` (nil: not known).
        private func known(_ slot: Int, is hash: [UInt8]) -> Bool? {
            guard states[slot] == 1 else { return nil }
            return hashes.withUnsafeBufferPointer { stored in
                hash.withUnsafeBufferPointer { memcmp(stored.baseAddress! + slot * hashLength, $0.baseAddress!, hashLength) == 0 }
            }
        }

        /// Keeps `hash` in `slot` as shown by the path being checked (a known node stays as it is).
        private mutating func show(_ slot: Int, _ hash: [UInt8], _ shown: inout [Int]) {
            guard states[slot] == 0 else { return }
            hashes.withUnsafeMutableBufferPointer { stored in
                hash.withUnsafeBufferPointer { _ = memcpy(stored.baseAddress! + slot * hashLength, $0.baseAddress!, hashLength) }
            }
            states[slot] = 2
            shown.append(slot)
        }

        /// `verifyAuditPath(path, leafHash:, index:, count:, root:)`, with what earlier paths showed.
        public mutating func verifies(_ path: [[UInt8]], leafHash: [UInt8], index: Int) -> Bool {
            guard index >= 0, index < count, leafHash.count == hashLength, path.allSatisfy({ $0.count == hashLength }) else { return false }
            var shown = self.shown  // (one list for every path: its room is kept)
            self.shown = []
            shown.removeAll(keepingCapacity: true)
            let verified = walk(path, leafHash: leafHash, index: index, &shown)
            for slot in shown { states[slot] = verified ? 1 : 0 }
            if verified { leavesKnown += shown.count { $0 < count } }  // (a leaf's slot is its index)
            self.shown = shown
            return verified
        }

        /// The slots the path being checked showed (kept between paths for its room).
        private var shown: [Int] = []

        private mutating func walk(_ path: [[UInt8]], leafHash: [UInt8], index: Int, _ shown: inout [Int]) -> Bool {
            var place = index
            var last = count - 1
            var level = 0
            var hash = leafHash
            // Where the hash so far is kept, while the path goes through known nodes (both children known,
            // their parent known): it is read where it is kept, not copied out of it (an array a level, for
            // nearly every record of a sealed history), until a hash must be worked out from it.
            var hashAt: Int?
            for sibling in path {
                guard last != 0 else { return false }  // the path is longer than the leaf's way up
                let onTheLeft = place & 1 == 1 || place == last
                if place & 1 == 0 && place == last {
                    if let at = hashAt { hash = node(at) }
                    hashAt = nil
                    // The odd last node of its level moves up alone until it is a right child.
                    guard let slot = slot(level, place), known(slot, is: hash) != false else { return false }
                    show(slot, hash, &shown)
                    while place & 1 == 0 && place != 0 {
                        place >>= 1
                        last >>= 1
                        level += 1
                    }
                }
                guard let here = slot(level, place), let there = slot(level, place ^ 1), let up = slot(level + 1, place >> 1) else { return false }
                // (`hashAt` is `here`: the slot one level up from the last, and known.)
                let knownHere = hashAt != nil ? true : known(here, is: hash)
                let knownThere = known(there, is: sibling)
                if knownHere == false || knownThere == false { return false }
                if hashAt == nil { show(here, hash, &shown) }
                show(there, sibling, &shown)
                if knownHere == true, knownThere == true, states[up] == 1 {
                    hashAt = up
                } else {
                    if let at = hashAt { hash = node(at) }
                    hashAt = nil
                    hash = onTheLeft ? nodeHash(sibling, hash) : nodeHash(hash, sibling)
                }
                place >>= 1
                last >>= 1
                level += 1
            }
            // (A path shorter than the leaf's way up ends below the root.)
            if let at = hashAt { hash = node(at) }
            guard last == 0, hash == root, let top = slot(level, 0) else { return false }
            show(top, hash, &shown)
            return true
        }

        /// The hash kept in `slot`.
        private func node(_ slot: Int) -> [UInt8] { Array(hashes[slot * hashLength..<(slot + 1) * hashLength]) }
    }

    /// One level up: adjacent pairs hashed, an odd last node kept as it is.
    private static func parents(of level: [[UInt8]]) -> [[UInt8]] {
        var next: [[UInt8]] = []
        next.reserveCapacity((level.count + 1) / 2)
        var index = 0
        while index + 1 < level.count {
            next.append(nodeHash(level[index], level[index + 1]))
            index += 2
        }
        if index < level.count { next.append(level[index]) }
        return next
    }
}
