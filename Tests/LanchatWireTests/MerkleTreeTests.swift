import Crypto
import LanchatWire
import Testing

/// RFC 9162's definitions, written out recursively as the RFC gives them (section 2.1.1 and 2.1.3.1), with
/// SHA-256 from Crypto directly: what `MerkleTree`'s level-by-level code must agree with.
private enum Naive {
    static func sha256(_ bytes: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: bytes)) }
    static func leaf(_ data: [UInt8]) -> [UInt8] { sha256([0x00] + data) }
    static func node(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] { sha256([0x01] + left + right) }

    /// The largest power of two below `n` (n >= 2).
    static func split(_ n: Int) -> Int {
        var k = 1
        while k * 2 < n { k *= 2 }
        return k
    }

    /// MTH over leaves given by their leaf hashes.
    static func root(_ hashes: ArraySlice<[UInt8]>) -> [UInt8] {
        if hashes.count == 1 { return hashes.first! }
        let k = split(hashes.count)
        let middle = hashes.startIndex + k
        return node(root(hashes[..<middle]), root(hashes[middle...]))
    }

    static func path(_ m: Int, _ hashes: ArraySlice<[UInt8]>) -> [[UInt8]] {
        if hashes.count == 1 { return [] }
        let k = split(hashes.count)
        let middle = hashes.startIndex + k
        if m < k { return path(m, hashes[..<middle]) + [root(hashes[middle...])] }
        return path(m - k, hashes[middle...]) + [root(hashes[..<middle])]
    }
}

/// `count` distinct leaf hashes.
private func leaves(_ count: Int, salt: UInt8 = 0) -> [[UInt8]] {
    (0..<count).map { MerkleTree.leafHash([salt, UInt8(truncatingIfNeeded: count), UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)]) }
}

@Suite struct MerkleTreeTests {
    @Test func hashesCarryRFC9162sDomainBytes() {
        let data = Array("LCHT-MSG-2 and so on".utf8)
        #expect(MerkleTree.leafHash(data) == Naive.leaf(data))
        #expect(MerkleTree.leafHash(data) != Naive.sha256(data))
        let (a, b) = (Naive.leaf([1]), Naive.leaf([2]))
        #expect(MerkleTree.nodeHash(a, b) == Naive.node(a, b))
        #expect(MerkleTree.nodeHash(a, b) != MerkleTree.nodeHash(b, a))
        // RFC 9162's MTH of nothing: SHA-256 of the empty string (a seal never has none).
        #expect(MerkleTree.root([]) == Naive.sha256([]))
    }

    @Test(arguments: 1...17)
    func theRootIsTheRecursiveDefinitions(count: Int) {
        let hashes = leaves(count)
        #expect(MerkleTree.root(hashes) == Naive.root(hashes[...]))
    }

    @Test func smallTreesHaveTheShapeOfTheRFC() {
        let h = leaves(7)
        #expect(MerkleTree.root(Array(h[0..<1])) == h[0])
        #expect(MerkleTree.root(Array(h[0..<3])) == Naive.node(Naive.node(h[0], h[1]), h[2]))
        #expect(MerkleTree.root(Array(h[0..<5])) == Naive.node(Naive.node(Naive.node(h[0], h[1]), Naive.node(h[2], h[3])), h[4]))
        #expect(
            MerkleTree.root(h)
                == Naive.node(Naive.node(Naive.node(h[0], h[1]), Naive.node(h[2], h[3])), Naive.node(Naive.node(h[4], h[5]), h[6])))
    }

    @Test func theLargestSealsTreeMatchesToo() {
        let hashes = leaves(256)
        #expect(MerkleTree.root(hashes) == Naive.root(hashes[...]))
        for index in [0, 1, 127, 128, 254, 255] {
            let path = MerkleTree.auditPath(index: index, leafHashes: hashes)
            #expect(path.count == 8)
            #expect(MerkleTree.verifyAuditPath(path, leafHash: hashes[index], index: index, count: 256, root: MerkleTree.root(hashes)))
        }
        // The first leaf's path is the longest of a tree (its left subtrees are complete), the last's the shortest.
        for n in 1...256 {
            let hashes = leaves(n)
            #expect(MerkleTree.auditPath(index: 0, leafHashes: hashes).count == (n == 1 ? 0 : Int.bitWidth - (n - 1).leadingZeroBitCount))
            #expect(MerkleTree.auditPath(index: n - 1, leafHashes: hashes).count <= 8)
        }
    }

    @Test(arguments: 1...40)
    func everyAuditPathVerifiesAndIsTheRFCs(count: Int) {
        let hashes = leaves(count)
        let root = MerkleTree.root(hashes)
        for index in 0..<count {
            let path = MerkleTree.auditPath(index: index, leafHashes: hashes)
            #expect(path == Naive.path(index, hashes[...]), "leaf \(index) of \(count)")
            #expect(MerkleTree.rootFromAuditPath(path, leafHash: hashes[index], index: index, count: count) == root)
            #expect(MerkleTree.verifyAuditPath(path, leafHash: hashes[index], index: index, count: count, root: root))
        }
    }

    /// All paths in one pass are the RFC's paths, leaf by leaf, and the root is the tree's.
    @Test(arguments: Array(1...70) + [127, 128, 129, 200, 255, 256])
    func allPathsAtOnceAreEachLeafsPath(count: Int) {
        let hashes = leaves(count)
        let (paths, root) = MerkleTree.auditPaths(hashes)
        #expect(root == MerkleTree.root(hashes) && paths.count == count)
        for index in 0..<count {
            #expect(paths[index] == Naive.path(index, hashes[...]), "leaf \(index) of \(count)")
        }
        #expect(MerkleTree.auditPaths([]).paths.isEmpty)
    }

    @Test(arguments: 1...40)
    func aChangedLeafIndexCountOrRootFails(count: Int) {
        let hashes = leaves(count)
        let root = MerkleTree.root(hashes)
        let outsider = MerkleTree.leafHash(Array("not sealed".utf8))
        // The root of one more leaf, and of one fewer: another seal's.
        let longer = MerkleTree.root(hashes + [outsider])
        let shorter = count > 1 ? MerkleTree.root(Array(hashes.dropLast())) : nil
        for index in 0..<count {
            let path = MerkleTree.auditPath(index: index, leafHashes: hashes)
            let leaf = hashes[index]
            func verifies(_ path: [[UInt8]], _ leaf: [UInt8], _ index: Int, _ count: Int, _ root: [UInt8]) -> Bool {
                MerkleTree.verifyAuditPath(path, leafHash: leaf, index: index, count: count, root: root)
            }
            #expect(!verifies(path, outsider, index, count, root), "another leaf, \(index) of \(count)")
            var flipped = leaf
            flipped[31] ^= 1
            #expect(!verifies(path, flipped, index, count, root))
            if count > 1 {
                #expect(!verifies(path, hashes[(index + 1) % count], index, count, root), "a neighbour's leaf, \(index) of \(count)")
                #expect(!verifies(path, leaf, (index + 1) % count, count, root), "another index, \(index) of \(count)")
                #expect(!verifies(path, leaf, index, count - 1, shorter!), "one fewer leaf, \(index) of \(count)")
            }
            #expect(!verifies(path, leaf, index, count + 1, longer), "one more leaf, \(index) of \(count)")
            #expect(!verifies(path, leaf, index, count, longer))
            var otherRoot = root
            otherRoot[0] ^= 0x80
            #expect(!verifies(path, leaf, index, count, otherRoot))
            // A changed path: a hash flipped, one dropped, one added.
            if !path.isEmpty {
                var changed = path
                changed[changed.count - 1][0] ^= 1
                #expect(!verifies(changed, leaf, index, count, root))
                #expect(!verifies(Array(path.dropLast()), leaf, index, count, root))
            }
            #expect(!verifies(path + [outsider], leaf, index, count, root))
            // Out of range, never a crash.
            #expect(MerkleTree.rootFromAuditPath(path, leafHash: leaf, index: count, count: count) == nil)
            #expect(MerkleTree.rootFromAuditPath(path, leafHash: leaf, index: -1, count: count) == nil)
            #expect(MerkleTree.rootFromAuditPath(path, leafHash: leaf, index: index, count: 0) == nil)
        }
    }

    /// A reader of a seal's records keeps the nodes their paths showed (`KnownNodes`): whatever it met
    /// before, each path gets the verdict `verifyAuditPath` gives it, a changed one too (each of its
    /// hashes flipped, a neighbour's leaf, another index, a hash dropped or added), before its leaf's right
    /// path was seen and after; in order, in reverse, and in a shuffled order.
    @Test(arguments: Array(1...40) + [127, 128, 129, 255, 256])
    func knownNodesGiveEachPathTheVerdictOfTheWholePath(count: Int) {
        let hashes = leaves(count)
        let root = MerkleTree.root(hashes)
        let outsider = MerkleTree.leafHash(Array("not sealed".utf8))
        var generator = SeededGenerator(seed: UInt64(count))
        let orders = [Array(0..<count), Array((0..<count).reversed()), Array(0..<count).shuffled(using: &generator)]
        for order in orders {
            var known = MerkleTree.KnownNodes(count: count, root: root)
            for index in order {
                let path = MerkleTree.auditPath(index: index, leafHashes: hashes)
                var changed: [([[UInt8]], [UInt8], Int)] = [(path, outsider, index), (path + [outsider], hashes[index], index)]
                for position in path.indices {
                    var flipped = path
                    flipped[position][position % 32] ^= 1
                    changed.append((flipped, hashes[index], index))
                }
                if !path.isEmpty { changed.append((Array(path.dropLast()), hashes[index], index)) }
                if count > 1 {
                    changed.append((path, hashes[(index + 1) % count], index))
                    changed.append((path, hashes[index], (index + 1) % count))
                }
                for round in 0..<2 {
                    for (path, leaf, index) in changed {
                        let whole = MerkleTree.verifyAuditPath(path, leafHash: leaf, index: index, count: count, root: root)
                        let verdict = known.verifies(path, leafHash: leaf, index: index)
                        #expect(verdict == whole, "leaf \(index) of \(count), round \(round)")
                    }
                    if round == 0 {
                        let verdict = known.verifies(path, leafHash: hashes[index], index: index)
                        #expect(verdict, "leaf \(index) of \(count)")
                    }
                }
            }
            let outOfRange = known.verifies([], leafHash: hashes[0], index: count) || known.verifies([], leafHash: hashes[0], index: -1)
            #expect(!outOfRange)
        }
    }

    /// The count is bound by the seal's signature, not by the path: a path of leaf 0 of 3 leads to the same
    /// root as leaf 0 of 4 (the shapes agree on its way up). This is why `Envelope.sealBytes` signs the count.
    @Test func theCountIsBoundByTheSignatureNotByThePath() {
        let hashes = leaves(3)
        let path = MerkleTree.auditPath(index: 0, leafHashes: hashes)
        #expect(MerkleTree.rootFromAuditPath(path, leafHash: hashes[0], index: 0, count: 4) == MerkleTree.root(hashes))
    }

    @Test func hashesOfTheWrongLengthAreRefused() {
        let hashes = leaves(4)
        let root = MerkleTree.root(hashes)
        let path = MerkleTree.auditPath(index: 2, leafHashes: hashes)
        #expect(MerkleTree.rootFromAuditPath(path, leafHash: Array(hashes[2].dropLast()), index: 2, count: 4) == nil)
        #expect(MerkleTree.rootFromAuditPath([path[0], path[1] + [0]], leafHash: hashes[2], index: 2, count: 4) == nil)
        #expect(!MerkleTree.verifyAuditPath(path, leafHash: hashes[2], index: 2, count: 4, root: Array(root.dropLast())))
    }
}

/// SplitMix64: the same shuffled order on every run.
private struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
