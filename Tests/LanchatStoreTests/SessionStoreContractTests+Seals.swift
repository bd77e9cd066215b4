import LanchatCore
import LanchatEngine
import LanchatStore
import Testing

/// The store's rules for sealed messages (their seal kept once, what an unchecked seal keeps from an
/// export), on both stores (`SessionStoreContractTests`).
extension SessionStoreContractTests {
    /// A sealed message (wire version 4) keeps its proof, and its seal once under its author and id: what
    /// hands records on (`export`, `exportPage`) reads each with its seal, other reads without. A seal
    /// that another takes the author and id of first leaves the message stored as not sealed; so does a
    /// proof without its seal. A rolled-back transaction keeps no seal.
    @Test(arguments: Kind.allCases) func sealedMessagesKeepTheirSealOnce(kind: Kind) throws {
        let store = try kind.make()
        func seal(_ n: UInt8, count: Int = 3) -> StoredSeal {
            StoredSeal(
                id: String(repeating: "5", count: 31) + String(n), authorKey: [0x02] + [UInt8](repeating: n, count: 32),
                signature: [UInt8](repeating: n &+ 1, count: 64), leafCount: count, root: [UInt8](repeating: n &+ 2, count: 32))
        }
        func sealed(_ id: Int, by seal: StoredSeal?, sender: String = "s", leaf: UInt8 = 0, room: String = "lab") -> StoredMessage {
            var stored = message(id, room: room, sender: sender)
            stored.sealProof = [UInt8](repeating: 0x55, count: 16) + [0, leaf, 1] + [UInt8](repeating: leaf, count: 32)
            stored.seal = seal
            return stored
        }
        let first = seal(1)
        for (index, id) in [1, 2, 3].enumerated() { try store.insert(sealed(id, by: first, leaf: UInt8(index)), now: 0) }
        try store.insert(message(4), now: 0)
        // Another seal under the same author and id: its message is kept, not sealed.
        var taken = seal(2)
        taken.id = first.id
        try store.insert(sealed(5, by: taken), now: 0)
        // The same id under another author is that author's own seal.
        try store.insert(sealed(6, by: taken, sender: "t"), now: 0)
        // A proof without its seal: not sealed.
        try store.insert(sealed(7, by: nil), now: 0)
        // Rolled back: neither the message nor its seal is kept.
        struct Undone: Error {}
        #expect(throws: Undone.self) {
            try store.transaction {
                try store.insert(sealed(8, by: seal(3), sender: "u"), now: 0)
                throw Undone()
            }
        }
        var renamed = seal(4)
        renamed.id = seal(3).id  // (kept only if the rolled-back seal was not)
        try store.insert(sealed(9, by: renamed, sender: "u"), now: 0)
        // A message stored again under a new seal keeps nothing of it: a later message under that id
        // with another seal is sealed.
        var again = seal(5)
        again.id = seal(6).id
        #expect(try !store.insert(sealed(1, by: again), now: 0))
        try store.insert(sealed(10, by: seal(6)), now: 0)
        // The same seal but for its signature's bytes is the same seal; the same id in another room is not.
        var resigned = seal(6)
        resigned.signature = [UInt8](repeating: 0xEE, count: 64)
        try store.insert(sealed(11, by: resigned, leaf: 1), now: 0)
        try store.insert(sealed(12, by: seal(6), room: "ops"), now: 0)
        // A seal kept in a transaction rolled back is kept again by the next of its messages.
        #expect(throws: Undone.self) {
            try store.transaction {
                try store.insert(sealed(13, by: seal(7), sender: "v"), now: 0)
                throw Undone()
            }
        }
        try store.insert(sealed(14, by: seal(7), sender: "v", leaf: 1), now: 0)

        let exported = try store.export(room: "lab", since: 0, limit: 100)
        let bySequence = Dictionary(uniqueKeysWithValues: exported.map { ($0.sequence, $0) })
        #expect(exported.map(\.sequence) == [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 14])
        #expect(bySequence[14]?.seal == seal(7) && bySequence[14]?.isSealed == true)
        for id in [1, 2, 3] as [Int64] {
            #expect(bySequence[id]?.seal == first)
            #expect(bySequence[id]?.sealProof == sealed(Int(id), by: first, leaf: UInt8(id - 1)).sealProof)
        }
        #expect(bySequence[4]?.seal == nil && bySequence[4]?.isSealed == false)
        #expect(bySequence[5]?.seal == nil && bySequence[5]?.isSealed == false)
        #expect(bySequence[6]?.seal == taken && bySequence[6]?.isSealed == true)
        #expect(bySequence[7]?.seal == nil && bySequence[7]?.isSealed == false)
        #expect(bySequence[9]?.seal == renamed)
        #expect(bySequence[10]?.seal == seal(6))
        #expect(bySequence[11]?.seal == seal(6) && bySequence[11]?.isSealed == true)
        let ops = try store.export(room: "ops", since: 0, limit: 10)
        #expect(ops.count == 1 && ops.first?.seal == nil && ops.first?.isSealed == false)
        // In pieces, the same.
        #expect(try Self.inPieces(store, room: "lab") == exported)
        // Other reads: the proof, not the seal.
        let history = try store.history(room: "lab", limit: 100)
        #expect(history.allSatisfy { $0.seal == nil })
        #expect(history.filter(\.isSealed).map(\.sequence) == [1, 2, 3, 6, 9, 10, 11, 14])
    }

    /// A seal kept before its signature was checked (`StoredSeal.checked` false): its messages are in the
    /// history, never in an export (whole or in pieces) until `markSealChecked`; `dropSealed` takes the
    /// seal and its messages away (the others stay, the word index stays whole); a message under another
    /// seal of the same author and id, unchecked, is not stored at all; a restart finds what is unchecked.
    @Test(arguments: Kind.allCases) func anUncheckedSealsMessagesAreNotExported(kind: Kind) throws {
        let store = try kind.make()
        func seal(_ n: UInt8, checked: Bool) -> StoredSeal {
            StoredSeal(
                id: String(repeating: "6", count: 31) + String(n), authorKey: [0x02] + [UInt8](repeating: n, count: 32),
                signature: [UInt8](repeating: n &+ 1, count: 64), leafCount: 2, root: [UInt8](repeating: n &+ 2, count: 32), checked: checked)
        }
        func sealed(_ id: Int, by seal: StoredSeal, leaf: UInt8, body: String = "hi") -> StoredMessage {
            var stored = message(id, body: body)
            stored.sealProof = [UInt8](repeating: 0x55, count: 16) + [0, leaf, 1] + [UInt8](repeating: leaf, count: 32)
            stored.seal = seal
            return stored
        }
        try store.insert(message(1), now: 0)
        try store.insert(sealed(2, by: seal(1, checked: false), leaf: 0), now: 0)
        try store.insert(sealed(3, by: seal(1, checked: false), leaf: 1), now: 0)
        try store.insert(sealed(4, by: seal(2, checked: false), leaf: 0, body: "forged words"), now: 0)
        // (One of them direct: read through the room's other index, and dropped through it too.)
        var direct = sealed(5, by: seal(2, checked: false), leaf: 1, body: "forged too")
        direct.direct = true
        try store.insert(direct, now: 0)
        try store.insert(sealed(6, by: seal(3, checked: true), leaf: 0), now: 0)
        // Another seal under seal 1's id, unchecked: not stored. Checked (a history's): stored, not sealed.
        var other = seal(4, checked: false)
        other.id = seal(1, checked: false).id
        #expect(try !store.insert(sealed(7, by: other, leaf: 0), now: 0))
        other.checked = true
        #expect(try store.insert(sealed(8, by: other, leaf: 0), now: 0))
        // A place kept as its leaf index alone, without the seal's leaves (nothing to make its path from):
        // under an unchecked seal, not stored (stored as not sealed, it could be exported before anyone
        // checked it); under a checked one, stored as not sealed.
        var indexOnly = sealed(9, by: seal(5, checked: false), leaf: 0, body: "index only")
        indexOnly.room = "ops"
        indexOnly.sealProof = [0, 0]
        #expect(try !store.insert(indexOnly, now: 0))
        #expect(try store.history(room: "ops", limit: 10).isEmpty)
        indexOnly.seal?.checked = true
        #expect(try store.insert(indexOnly, now: 0))
        #expect(try store.history(room: "ops", limit: 10).map(\.isSealed) == [false])
        func exported() throws -> [Int64] {
            let whole = try store.export(room: "lab", since: 0, limit: 100)
            #expect(try Self.inPieces(store, room: "lab") == whole)
            return whole.map(\.sequence)
        }
        #expect(try store.history(room: "lab", limit: 100).map(\.sequence) == [1, 2, 3, 4, 5, 6, 8])
        #expect(try exported() == [1, 6, 8])
        // The newest `limit` of an export counts only what it may send.
        #expect(try store.exportPage(room: "lab", since: 0, limit: 2, after: nil, count: 10).messages.map(\.sequence) == [6, 8])
        #expect(try store.uncheckedSeals().map(\.seal.id) == [seal(1, checked: false).id, seal(2, checked: false).id])
        #expect(try store.uncheckedSeals().first == UncheckedSeal(author: "s", room: "lab", seal: seal(1, checked: false)))
        // Another seal under the same id (another signature, root or count) is neither marked nor dropped.
        var resigned = seal(1, checked: false)
        resigned.signature[0] ^= 1
        var rerooted = seal(1, checked: false)
        rerooted.root[0] ^= 1
        for other in [resigned, rerooted] {
            try store.markSealChecked(author: "s", seal: other)
            #expect(try store.dropSealed(author: "s", seal: other) == 0)
        }
        #expect(try exported() == [1, 6, 8])
        try store.markSealChecked(author: "s", seal: seal(1, checked: false))
        #expect(try exported() == [1, 2, 3, 6, 8])
        #expect(try exported().count == 5)
        // The failed one goes with its messages; searching still works (the word index forgot them).
        let changed = store.messagesChanged
        #expect(try store.dropSealed(author: "s", seal: seal(2, checked: false)) == 2)
        #expect(store.messagesChanged != changed)
        #expect(try store.dropSealed(author: "s", seal: seal(2, checked: false)) == 0)
        #expect(try store.uncheckedSeals().isEmpty)
        #expect(try store.history(room: "lab", limit: 100).map(\.sequence) == [1, 2, 3, 6, 8])
        _ = try store.indexWaiting(limit: 100)
        #expect(try store.search(room: nil, limit: 10, filter: HistoryFilter(words: "forged")).isEmpty)
        #expect(try store.search(room: nil, limit: 10, filter: HistoryFilter(words: "hi")).count == 5)
        // Stored again (its author sent it again under a good seal), a dropped message is new.
        #expect(try store.insert(sealed(4, by: seal(5, checked: true), leaf: 0, body: "forged words"), now: 0))
    }
}
