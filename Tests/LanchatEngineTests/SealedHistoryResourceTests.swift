import LanchatCore
import LanchatWire
import NIOCore
import Testing

@testable import LanchatEngine

/// The sealed history resource (RESOURCE_OFFER kind 4, version 4 draft; issue 33, step 2): stored sealed
/// messages written with their seals' heads and read back with one signature check per seal; what a
/// version 2 or 3 peer is sent of them; what a relay hands on to whom.
@Suite struct SealedHistoryResourceTests {
    let ids = (1...3).map { SessionStateMachineTests.peerID(UInt8($0 * 0x10)) }
    var alice: PeerID { ids[0] }
    var bob: PeerID { ids[1] }
    var carol: PeerID { ids[2] }
    let lab = RoomID("lab")!

    func keys(_ index: Int) -> EnvelopeKeys { SimulatedSignatures.keys(for: index, ids: ids) }

    /// `author`'s messages `numbers` as stored neither sealed nor signed (signed if said).
    func storedMessages(_ numbers: ClosedRange<Int>, by author: Int, signed: Bool = false) -> [StoredMessage] {
        numbers.map { n in
            let message = StoredMessage(
                id: WireID(bytes: [UInt8(author), UInt8(n & 0xff), UInt8(n >> 8)] + [UInt8](repeating: 0x22, count: 13))!.description, room: "lab",
                senderID: ids[author].rawValue, senderName: "n\(author)", sequence: Int64(n), timestamp: 10 + Int64(n), kind: .text, body: "m\(n)")
            return signed ? SessionStateMachine.signed(message, room: lab, id: WireID(hex: message.id)!, keys: keys(author)) : message
        }
    }

    /// `author`'s messages `numbers`, stored sealed in seals of `per` (signed as well if said).
    func sealedMessages(_ numbers: ClosedRange<Int>, by author: Int, per: Int = 256, signed: Bool = false, forgedBy signer: Int? = nil) -> [StoredMessage] {
        var next = numbers.lowerBound << 10  // (ids apart for each call's numbers)
        let messages = storedMessages(numbers, by: author, signed: signed)
        var stored: [StoredMessage] = []
        var start = 0
        while start < messages.count {
            let piece = Array(messages[start..<min(start + per, messages.count)])
            for (batch, sealed) in SealedBatch.seal(
                piece, author: ids[author], room: lab, keys: keys(signer ?? author),
                newID: {
                    next += 1
                    return WireID(bytes: [0x5E, UInt8(author), UInt8(next & 0xff), UInt8(next >> 8 & 0xff), UInt8(next >> 16)] + [UInt8](repeating: 0, count: 11))!
                })
            {
                stored += batch.stored(sealed, author: ids[author])
            }
            start += per
        }
        return stored
    }

    /// `messages` written in `layout` by `relay` (index), read back by carol: each verdict.
    func roundTrip(
        _ messages: [StoredMessage], layout: HistoryLayout, relay: Int = 0, cut: Int = 0, pieces: Int = 1
    ) throws -> (verdicts: [SessionStateMachine.HistoryVerdict], complete: Bool, bytes: Int) {
        var encoder = HistoryEncoder(layout: layout, ownID: ids[relay], keys: keys(relay), ids: IDGenerator(seed: 7))
        var buffer = ByteBuffer()
        let size = (messages.count + pieces - 1) / max(1, pieces)
        var start = 0
        while start < messages.count {
            encoder.append(Array(messages[start..<min(start + max(1, size), messages.count)]), into: &buffer)
            start += max(1, size)
        }
        let bytes = buffer.readableBytes
        buffer.moveWriterIndex(to: buffer.writerIndex - cut)
        var decoder = HistoryDecoder(layout: layout)
        let entries = try decoder.decodeSome(&buffer, maximumCount: .max)
        let members = [alice: "alice", bob: "bob"]
        let verdicts = decoder.verdicts(
            entries, room: lab, relay: ids[relay], ownID: carol, keys: keys(2), members: members, strangers: false, now: 1_000_000, forgedLeft: 16)
        return (verdicts, decoder.isComplete && buffer.readableBytes == 0, bytes)
    }

    func kept(_ verdicts: [SessionStateMachine.HistoryVerdict]) -> [StoredMessage] {
        verdicts.compactMap { if case .keep(let message) = $0 { message } else { nil } }
    }

    @Test func aSealedHistoryKeepsEveryRecordWithItsSealAndProof() throws {
        // Bob's in seals of 100 (relayed by alice), alice's own in seals of 16 (smaller ones she seals again).
        let messages = sealedMessages(1...300, by: 1, per: 100) + sealedMessages(1...32, by: 0, per: HistoryEncoder.resealBelow)
        let (verdicts, complete, _) = try roundTrip(messages, layout: .sealed, pieces: 7)
        #expect(complete)
        let records = kept(verdicts)
        #expect(records.count == 332)
        #expect(records.allSatisfy { $0.isSealed && !$0.isSigned && $0.seal != nil })
        #expect(records.map(\.id) == messages.map(\.id))
        // Stored as they came: the same seal (head) and proof.
        #expect(records.map(\.proof) == messages.map(\.proof))
        #expect(records.map { $0.seal?.head(author: $0.senderID) } == messages.map { $0.seal?.head(author: $0.senderID) })
    }

    /// An import sorts a piece's records (`HistoryDecoder.sort`): those of a seal whose every leaf the
    /// piece's records showed keep their leaf index alone, with the seal's leaves; a seal cut by a piece's
    /// end keeps its first records' whole proofs, and its leaves from the piece that completes it. Handed
    /// on (`HistoryEncoder`), each record's path is made again from the leaves: the same proof as its
    /// author's, which the next reader checks.
    @Test func wholeSealsAreKeptByLeafIndexAndHandedOnWithTheirPaths() throws {
        // Bob's 300 in seals of 256 and 44, relayed by alice, read by carol in pieces of 200.
        let messages = sealedMessages(1...300, by: 1)
        var encoder = HistoryEncoder(layout: .sealed, ownID: alice, keys: keys(0), ids: IDGenerator(seed: 7))
        var buffer = ByteBuffer()
        encoder.append(messages, into: &buffer)
        var decoder = HistoryDecoder(layout: .sealed)
        var sorted: [StoredMessage] = []
        while true {
            let entries = try decoder.decodeSome(&buffer, maximumCount: 200)
            if entries.isEmpty { break }
            let piece = decoder.sort(
                entries, room: lab, relay: alice, ownID: carol, keys: keys(2), members: [alice: "alice", bob: "bob"], strangers: false,
                now: 1_000_000, forgedLeft: 16)
            #expect(piece.judged == entries.count && piece.refused == 0 && piece.forged == 0)
            sorted += piece.keep
        }
        #expect(sorted.map(\.id) == messages.map(\.id))
        // The first seal's first 200 came before its end: whole proofs; its last 56 and the second seal's 44 by index.
        #expect(sorted.prefix(200).allSatisfy { $0.leafIndex == nil && $0.proof == messages[Int($0.sequence) - 1].proof && $0.seal?.leaves == [] })
        #expect(sorted.suffix(100).allSatisfy { $0.sealProof.count == 2 && $0.seal?.leaves.count == 32 * ($0.seal?.leafCount ?? 0) })
        #expect(sorted.suffix(100).map(\.leafIndex) == Array(200..<256) + Array(0..<44))
        // Its proof, made again from the leaves, is its author's.
        #expect(sorted.suffix(100).allSatisfy { $0.proof == messages[Int($0.sequence) - 1].proof })
        // Carol hands them on (as her store reads them: the first seal's leaves now kept for all of its messages).
        let firstSeal = sorted[299 - 44].seal!
        let stored = sorted.map { message -> StoredMessage in
            var message = message
            if message.seal?.id == firstSeal.id { message.seal = firstSeal }
            return message
        }
        var relay = HistoryEncoder(layout: .sealed, ownID: carol, keys: keys(2), ids: IDGenerator(seed: 9))
        var handedOn = ByteBuffer()
        #expect(relay.append(stored, into: &handedOn) == 300)
        var reader = HistoryDecoder(layout: .sealed)
        let entries = try reader.decodeSome(&handedOn, maximumCount: .max)
        #expect(entries.map { $0.record.proof } == messages.map(\.proof))
        let again = reader.sort(
            entries, room: lab, relay: carol, ownID: alice, keys: keys(0), members: [bob: "bob", carol: "carol"], strangers: false, now: 1_000_000,
            forgedLeft: 16)
        #expect(again.keep.count == 300 && again.keep.allSatisfy { $0.leafIndex != nil })
        // Leaves that do not lead to the seal's root: the record is not handed on as sealed.
        var damaged = stored[299]
        damaged.seal?.leaves[0] ^= 1
        var none = ByteBuffer()
        #expect(relay.append([damaged], into: &none) == 0)
    }

    /// A seal lends its leaves only to its own records: a member who names a seal of hers with another
    /// author's seal id (ids are public) and puts it right before that author's records gets her leaves
    /// kept for her record alone. Seals whose records take turns are each found whole (a reader keeps
    /// several trees).
    @Test func aSealsLeavesGoOnlyToItsOwnRecordsAndSealsMayTakeTurns() throws {
        let four = (1...4).map { SessionStateMachineTests.peerID(UInt8($0 * 0x10)) }
        func keys4(_ index: Int) -> EnvelopeKeys { SimulatedSignatures.keys(for: index, ids: four) }
        func stored(_ n: Int, by author: Int) -> StoredMessage {
            StoredMessage(
                id: WireID(bytes: [0x44, UInt8(author), UInt8(n)] + [UInt8](repeating: 0x33, count: 13))!.description, room: "lab",
                senderID: four[author].rawValue, senderName: "n\(author)", sequence: Int64(n), timestamp: 100 + Int64(n), kind: .text, body: "m\(n)")
        }
        func seal(_ messages: [StoredMessage], by author: Int, id: WireID) -> [StoredMessage] {
            SealedBatch.seal(messages, author: four[author], room: lab, keys: keys4(author), newID: { id }).flatMap { batch, sealed in
                batch.stored(sealed, author: four[author])
            }
        }
        func sortedByDave(_ messages: [StoredMessage]) throws -> [StoredMessage] {
            var encoder = HistoryEncoder(layout: .sealed, ownID: four[0], keys: keys4(0), ids: IDGenerator(seed: 5))
            var buffer = ByteBuffer()
            encoder.append(messages, into: &buffer)
            var decoder = HistoryDecoder(layout: .sealed)
            let entries = try decoder.decodeSome(&buffer, maximumCount: .max)
            let sorted = decoder.sort(
                entries, room: lab, relay: four[0], ownID: four[3], keys: keys4(3), members: [four[0]: "alice", four[1]: "bob", four[2]: "carol"],
                strangers: false, now: 1_000_000, forgedLeft: 16)
            #expect(sorted.keep.count == messages.count && sorted.forged == 0)
            return sorted.keep
        }
        let shared = WireID(bytes: [UInt8](repeating: 0x5E, count: 16))!
        let bobs = seal((1...3).map { stored($0, by: 1) }, by: 1, id: shared)
        let carols = seal([stored(9, by: 2)], by: 2, id: shared)  // her seal of one, under bob's seal's id
        let kept = try sortedByDave(carols + bobs)
        for (record, original) in zip(kept, carols + bobs) {
            #expect(record.leafIndex != nil, "\(record.body)")
            let seal = try #require(record.seal)
            #expect(SealPaths(seal) != nil && record.proof == original.proof, "\(record.body): its own seal's leaves")
        }
        // Bob's and carol's seals of three, their records taking turns: both found whole.
        let bobsAgain = seal((11...13).map { stored($0, by: 1) }, by: 1, id: WireID(bytes: [UInt8](repeating: 0x61, count: 16))!)
        let carolsAgain = seal((21...23).map { stored($0, by: 2) }, by: 2, id: WireID(bytes: [UInt8](repeating: 0x62, count: 16))!)
        let turns = try sortedByDave(Array(zip(bobsAgain, carolsAgain).flatMap { [$0, $1] }))
        #expect(turns.allSatisfy { $0.leafIndex != nil && $0.seal.flatMap(SealPaths.init) != nil })
    }

    @Test func ourRecordsWithNeitherSignatureNorSealAreSealedHereBy256() throws {
        // Alice relays her own records kept unsigned (300, then 300 more), with bob's sealed ones between,
        // two of hers signed (they stay signed: a newcomer may hand them on to a version 3 member), and one
        // of hers too long to be written.
        let first = storedMessages(1...300, by: 0)
        let second = storedMessages(301...600, by: 0)
        let bobs = sealedMessages(1...5, by: 1)
        let signedOnes = storedMessages(601...602, by: 0, signed: true)
        var tooLong = storedMessages(603...603, by: 0)[0]
        tooLong.body = String(repeating: "x", count: WireFrame.Message.maximumBody + 1)
        let messages = first + bobs + [tooLong] + second + signedOnes
        for pieces in [1, 3] {
            let (verdicts, complete, _) = try roundTrip(messages, layout: .sealed, pieces: pieces)
            #expect(complete)
            let records = kept(verdicts)
            #expect(records.map(\.id) == messages.filter { $0.id != tooLong.id }.map(\.id))  // (in the order given)
            let ours = records.filter { $0.senderID == alice.rawValue && !$0.isSigned }
            #expect(ours.count == 600 && ours.allSatisfy { $0.isSealed && $0.seal != nil })
            // One signature for at most 256 of them, across bob's records; never across a piece's end.
            var seals: [String] = []
            for record in ours where !seals.contains(record.seal?.id ?? "") { seals.append(record.seal?.id ?? "") }
            let counts = seals.map { id in ours.filter { $0.seal?.id == id }.count }
            // (In 3 pieces of 203: alice's 203; 97 and 100 around bob's; 200.)
            #expect(counts == (pieces == 1 ? [256, 256, 88] : [203, 197, 200]))
            // Each seal covers exactly the records written under it: the one too long is in none.
            #expect(seals.allSatisfy { id in ours.first { $0.seal?.id == id }?.seal?.leafCount == ours.filter { $0.seal?.id == id }.count })
            // Bob's stay under his seals; alice's signed ones stay signed, and go so in a signed history.
            #expect(records.filter { $0.senderID == bob.rawValue }.map { $0.seal?.head(author: bob.rawValue) } == bobs.map { $0.seal?.head(author: bob.rawValue) })
            #expect(records.suffix(2).allSatisfy { $0.isSigned && !$0.isSealed })
        }
        // A signed history still signs each of ours.
        let signed = try roundTrip(first, layout: .signed)
        #expect(kept(signed.verdicts).count == 300 && kept(signed.verdicts).allSatisfy { $0.isSigned && !$0.isSealed })
        // A record changed after it was sealed here is forged (the seal covers what alice wrote).
        var buffer = ByteBuffer()
        var encoder = HistoryEncoder(layout: .sealed, ownID: alice, keys: keys(0), ids: IDGenerator(seed: 3))
        encoder.append(Array(first.prefix(3)), into: &buffer)
        var bytes = Array(buffer.readableBytesView)
        let body = Array("m2".utf8)
        let at = try #require((0..<(bytes.count - 1)).first { Array(bytes[$0..<($0 + 2)]) == body })
        bytes[at + 1] = UInt8(ascii: "9")
        var tampered = ByteBuffer(bytes: bytes)
        var decoder = HistoryDecoder(layout: .sealed)
        let entries = try decoder.decodeSome(&tampered, maximumCount: .max)
        let verdicts = decoder.verdicts(
            entries, room: lab, relay: alice, ownID: carol, keys: keys(2), members: [alice: "alice"], strangers: false, now: 1_000_000, forgedLeft: 16)
        #expect(verdicts.filter { $0 == .forged }.count == 1 && kept(verdicts).count == 2)
    }

    /// Our own records in small seals (a message sent alone is a seal of one) are sealed again for a
    /// history, up to 256 to a seal: the newcomer checks one signature for them, not one each. Seals of
    /// `resealBelow` or more stay as their author made them, and so do another author's small ones (only
    /// an author seals), and our own that we also signed (for a member of version 2 or 3).
    @Test func ourRecordsInSmallSealsAreSealedAgainOthersStayAsTheyCame() throws {
        let ones = sealedMessages(1...40, by: 0, per: 1)
        let sixteen = sealedMessages(41...56, by: 0, per: HistoryEncoder.resealBelow)
        let fifteen = sealedMessages(57...71, by: 0, per: HistoryEncoder.resealBelow - 1)
        let bobs = sealedMessages(1...5, by: 1, per: 1)
        let signedToo = sealedMessages(90...91, by: 0, per: 1, signed: true)
        let messages = ones + bobs + sixteen + signedToo + fifteen
        for pieces in [1, 2] {
            let (verdicts, complete, _) = try roundTrip(messages, layout: .sealed, pieces: pieces)
            #expect(complete)
            let records = kept(verdicts)
            #expect(records.map(\.id) == messages.map(\.id))
            #expect(records.allSatisfy { $0.isSealed && !$0.isSigned && $0.seal != nil })
            let isAgain = { (record: StoredMessage) in
                record.senderID == alice.rawValue && !(41...56).contains(record.sequence) && !(90...91).contains(record.sequence)
            }
            let again = records.filter(isAgain)
            #expect(again.count == 55)
            // Sealed here: none under the seal it had; one seal for all (two: a seal never crosses a piece's end).
            let originals = Dictionary(uniqueKeysWithValues: messages.map { ($0.id, $0) })
            #expect(again.allSatisfy { $0.seal?.id != originals[$0.id]?.seal?.id })
            let seals = Set(again.compactMap { $0.seal?.id })
            #expect(seals.count == pieces)
            #expect(again.allSatisfy { record in record.seal?.leafCount == again.filter { $0.seal?.id == record.seal?.id }.count })
            // The others as they came: the seal of 16, the signed ones' and bob's seals of one.
            for record in records where !isAgain(record) {
                let original = originals[record.id]
                #expect(record.seal?.head(author: record.senderID) == original?.seal?.head(author: record.senderID) && record.proof == original?.proof, "\(record.body)")
            }
            // The signatures the newcomer checks: a seal for alice's 55 (or 2), one for her 16, one for each of
            // her two signed and of bob's five.
            #expect(Set(records.compactMap { $0.seal.map { "\($0.id) \($0.leafCount)" } }).count == pieces + 1 + 2 + 5)
        }
    }

    /// lanchatd makes a big piece of a history ready in two halves at once (`prepare`, the second with
    /// `forPreparing`), then writes both in order: the reader keeps the same records as from `append`.
    /// A record the writer refuses (a second head of alice's under one id) is written signed, as `append`
    /// does.
    @Test func aHistoryMadeReadyInTwoHalvesReadsAsOneMadeInOrder() throws {
        let shared = WireID(bytes: [UInt8](repeating: 0x5A, count: 16))!
        let twoUnderOneID = [storedMessages(51...66, by: 0), storedMessages(67...82, by: 0)].flatMap { piece in
            SealedBatch.seal(piece, author: alice, room: lab, keys: keys(0), newID: { shared }).flatMap { $0.batch.stored($0.messages, author: alice) }
        }
        let messages =
            sealedMessages(1...150, by: 1, per: 100) + storedMessages(1...30, by: 0) + sealedMessages(31...40, by: 0, per: 1)
            + storedMessages(41...42, by: 0, signed: true) + twoUnderOneID
        func read(_ buffer: ByteBuffer) throws -> [StoredMessage] {
            var buffer = buffer
            var decoder = HistoryDecoder(layout: .sealed)
            let entries = try decoder.decodeSome(&buffer, maximumCount: .max)
            #expect(decoder.isComplete && buffer.readableBytes == 0)
            let sorted = decoder.sort(
                entries, room: lab, relay: alice, ownID: carol, keys: keys(2), members: [alice: "alice", bob: "bob"], strangers: false,
                now: 1_000_000, forgedLeft: 16)
            #expect(sorted.judged == entries.count && sorted.forged == 0 && sorted.refused == 0)
            return sorted.keep
        }
        var whole = HistoryEncoder(layout: .sealed, ownID: alice, keys: keys(0), ids: IDGenerator(seed: 7))
        var inOrder = ByteBuffer()
        #expect(whole.append(messages, into: &inOrder) == messages.count)
        for cut in [1, 100, messages.count / 2, 165, messages.count - 20] {
            var encoder = HistoryEncoder(layout: .sealed, ownID: alice, keys: keys(0), ids: IDGenerator(seed: 7))
            var other = encoder.forPreparing(ids: IDGenerator(seed: 8))
            let second = other.prepare(Array(messages[cut...]))  // (made first: the order of making does not matter)
            let first = encoder.prepare(Array(messages[..<cut]))
            var halves = ByteBuffer()
            #expect(encoder.write(first, into: &halves) + encoder.write(second, into: &halves) == messages.count)
            let (a, b) = (try read(inOrder), try read(halves))
            #expect(a.map(\.id) == messages.map(\.id) && b.map(\.id) == messages.map(\.id), "cut \(cut)")
            // Alice's second seal under the id of her first: refused by the writer, written signed.
            #expect(b.suffix(16).allSatisfy { $0.isSigned && !$0.isSealed } && a.suffix(16).allSatisfy { $0.isSigned && !$0.isSealed })
            // Her two signed ones stay signed; the rest sealed.
            #expect(b[190..<192].allSatisfy { $0.isSigned && !$0.isSealed } && a[190..<192].allSatisfy { $0.isSigned && !$0.isSealed })
            #expect((b[..<190] + b[192..<208]).allSatisfy { $0.isSealed && !$0.isSigned })
            // Bob's as they came; alice's others sealed here (the seals of the two halves named apart).
            #expect(b.prefix(150).map { [$0.seal?.id, $0.seal?.root.description] } == messages.prefix(150).map { [$0.seal?.id, $0.seal?.root.description] })
            let ours = b[150..<190].compactMap(\.seal?.id)
            #expect(ours.count == 40 && Set(ours).count == ((151..<190).contains(cut) ? 2 : 1), "cut \(cut)")
        }
    }

    /// A seal made here that the writer refuses (a head of alice's under the same id named before, with
    /// other values: here her stored seal of 16 under the id her encoder gives first) leaves its records
    /// written signed, not left out.
    @Test func ourRecordsWhoseSealMadeHereIsRefusedAreWrittenSigned() throws {
        var generator = IDGenerator(seed: 7)
        let taken = generator.wireID()
        let stored = SealedBatch.seal(storedMessages(1...16, by: 0), author: alice, room: lab, keys: keys(0), newID: { taken }).flatMap {
            $0.batch.stored($0.messages, author: alice)
        }
        let unsealed = storedMessages(17...21, by: 0)
        let (verdicts, complete, _) = try roundTrip(stored + unsealed, layout: .sealed)  // (alice's encoder: seed 7)
        #expect(complete)
        let records = kept(verdicts)
        #expect(records.map(\.id) == (stored + unsealed).map(\.id))
        #expect(records.prefix(16).allSatisfy { $0.isSealed && $0.seal?.id == taken.description })
        #expect(records.suffix(5).allSatisfy { $0.isSigned && !$0.isSealed })
    }

    @Test func aChangedRecordOrABadSealIsForgedAndAnEndAfterAHeadIsIncomplete() throws {
        var messages = sealedMessages(1...10, by: 1)
        messages[3].body = "changed"
        let changed = try roundTrip(messages, layout: .sealed)
        #expect(changed.verdicts.filter { $0 == .forged }.count == 1 && kept(changed.verdicts).count == 9)
        // A seal signed with another key: every record of it forged (checking stops at 16).
        let forged = try roundTrip(sealedMessages(1...40, by: 1, forgedBy: 2), layout: .sealed)
        #expect(forged.verdicts.count == 16 && forged.verdicts.allSatisfy { $0 == .forged })
        // Cut right after the head of the second seal (its first record: 1 tag + the record + the proof).
        let two = sealedMessages(1...2, by: 1, per: 1)
        let whole = try roundTrip(two, layout: .sealed)
        let second = try roundTrip(Array(two.suffix(1)), layout: .sealed)
        let recordAndProof = second.bytes - 1 - SealHead.length
        let cut = try roundTrip(two, layout: .sealed, cut: recordAndProof)
        #expect(whole.complete && !cut.complete && kept(cut.verdicts).count == 1)
    }

    @Test func moreSealsThanAReaderKeepsNameTheirHeadsAgain() throws {
        // 300 seals of one, then the first seal's second record... (each seal of 2: records 1 and 2)
        let messages = sealedMessages(1...600, by: 1, per: 2)
        let reordered = stride(from: 0, to: 600, by: 2).map { messages[$0] } + stride(from: 1, to: 600, by: 2).map { messages[$0] }
        let (verdicts, complete, _) = try roundTrip(reordered, layout: .sealed)
        #expect(complete && kept(verdicts).count == 600)
    }

    @Test func aSignedHistoryLeavesOutOthersRecordsThatAreOnlySealedAndSignsOurs() throws {
        let messages = sealedMessages(1...3, by: 1) + sealedMessages(4...5, by: 1, signed: true) + sealedMessages(1...2, by: 0)
        let (verdicts, complete, _) = try roundTrip(messages, layout: .signed)
        #expect(complete)
        // Bob's sealed-only three are not written; his signed two and alice's own (signed now) are kept.
        #expect(kept(verdicts).map(\.body) == ["m4", "m5", "m1", "m2"])
        #expect(kept(verdicts).allSatisfy { $0.isSigned && !$0.isSealed })
        // In a sealed history, a record both signed and sealed goes sealed.
        #expect(try kept(roundTrip(messages, layout: .sealed).verdicts).allSatisfy { $0.isSealed })
    }

    @Test func aRelayHandsOnSealedRecordsOnlyToThoseWhoReadSeals() {
        let messages = sealedMessages(1...3, by: 1) + sealedMessages(4...4, by: 1, signed: true)
        let lacking = { (sealed: Bool) in
            SessionStateMachine.lacking(messages, marks: [:], requester: carol, ownID: alice, members: [bob, carol], sealed: sealed).map(\.body)
        }
        #expect(lacking(true) == ["m1", "m2", "m3", "m4"])
        #expect(lacking(false) == ["m4"])
        // A sealed record counts its head and proof in the relay's limit.
        let one = SessionStateMachine.withinRelayLimit(Array(messages.prefix(1)), limit: UInt64(HistoryRecord.fixedLength + 10), sealed: true)
        #expect(one.isEmpty)
        #expect(SessionStateMachine.withinRelayLimit(Array(messages.prefix(1)), limit: UInt64(HistoryRecord.fixedLength + 10)).count == 1)
        // So does one of the relay's own that is neither signed nor sealed: the history seals it.
        let ours = storedMessages(1...1, by: 0)
        let fits = UInt64(HistoryRecord.fixedLength + 10)
        #expect(SessionStateMachine.withinRelayLimit(ours, limit: fits, sealed: true, ownID: alice).isEmpty)
        #expect(SessionStateMachine.withinRelayLimit(ours, limit: fits, sealed: true, ownID: bob).count == 1)
        #expect(HistoryLayout(version: 4) == .sealed && HistoryLayout(version: 3) == .signed && HistoryLayout(version: 1) == .plain)
        #expect(HistoryLayout(kind: .sealedHistory)?.kind == .sealedHistory && HistoryLayout(kind: .file) == nil)
    }
}
