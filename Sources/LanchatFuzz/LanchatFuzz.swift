import DNSSD
import Foundation
import Glibc
import LanchatControl
import LanchatDiscovery
import LanchatWire
import NIOCore

/// The decoders that outside input reaches, as libFuzzer targets (`scripts/fuzz.sh TARGET`): any error
/// they report is fine; a crash, a hang, a trap or a broken round trip is a bug. `LANCHAT_FUZZ` names the
/// target (`wire`, `history`, `txt`, `control`, `seal`); the fuzzer and the replayer share these entry points.
enum FuzzTarget: String, CaseIterable {
    /// Peer frames: a fresh frame decoder fed the bytes in one piece and split in two; both must agree,
    /// and what decodes must encode back to the same frame.
    case wire
    /// A room's history resource, as a newcomer receives it from its inviter.
    case history
    /// A DNS-SD TXT record, as any host on the LAN can publish it.
    case txt
    /// Control API request lines, as a local client sends them.
    case control
    /// A SEAL frame's payload and sealed records' proofs (wire version 4).
    case seal

    static var selected: FuzzTarget {
        let name = ProcessInfo.processInfo.environment["LANCHAT_FUZZ"] ?? "wire"
        guard let target = FuzzTarget(rawValue: name) else {
            FileHandle.standardError.write(Data("LANCHAT_FUZZ=\(name): no such target (\(allCases.map(\.rawValue).joined(separator: ", ")))\n".utf8))
            exit(2)
        }
        return target
    }

    func run(_ bytes: [UInt8]) {
        switch self {
        case .wire: fuzzWire(bytes)
        case .history: fuzzHistory(bytes)
        case .txt: fuzzTXT(bytes)
        case .control: fuzzControl(bytes)
        case .seal: fuzzSeal(bytes)
        }
    }
}

nonisolated(unsafe) let target = FuzzTarget.selected

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    target.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

func fuzzWire(_ bytes: [UInt8]) {
    let whole = decodeAll(bytes, splitAt: nil)
    let split = decodeAll(bytes, splitAt: bytes.count / 2)
    precondition(whole == split, "decoding depends on how the input was split")
}

/// Frames decoded, then the error that stopped decoding (if any).
func decodeAll(_ bytes: [UInt8], splitAt: Int?) -> [String] {
    var decoder = FrameDecoder(limits: .standard)
    var buffer = ByteBuffer()
    var out: [String] = []
    let parts = splitAt.map { [Array(bytes[..<$0]), Array(bytes[$0...])] } ?? [bytes]
    do {
        for part in parts {
            buffer.writeBytes(part)
            while let raw = try decoder.decode(buffer: &buffer) {
                let frame = try WireFrame.decode(raw)
                // What decodes must encode back to the same frame (ignored frames aside).
                if case .ignored = frame {
                } else {
                    let again = try WireFrame.decode(frame.encode())
                    precondition(again == frame, "re-encoding changed the frame")
                }
                out.append("\(frame)")
            }
        }
        if let raw = try decoder.decodeLast(buffer: &buffer, seenEOF: true) { out.append("\(raw)") }
    } catch {
        out.append("error: \(error)")
    }
    return out
}

/// Every record decoded (or an error for the whole resource); what decodes encodes back to the same records.
func fuzzHistory(_ bytes: [UInt8]) {
    guard let records = try? HistoryRecord.decodeAll(ByteBuffer(bytes: bytes), limit: 10_000) else { return }
    var again = ByteBuffer()
    for record in records {
        do { try record.encode(into: &again) } catch { preconditionFailure("a decoded record does not encode: \(error)") }
    }
    precondition((try? HistoryRecord.decodeAll(again, limit: 10_000)) == records, "re-encoding changed the records")
}

/// Any TXT bytes parse to entries and problems; an advertisement that parses publishes a record that
/// parses to the same advertisement.
func fuzzTXT(_ bytes: [UInt8]) {
    let txt = TXTRecord(decoding: bytes)
    guard case .success(let advertisement) = PeerAdvertisement.parse(txt) else { return }
    guard let encoded = try? advertisement.txtRecord.encode() else { return }
    let reparsed = PeerAdvertisement.parse(TXTRecord(decoding: encoded))
    precondition(reparsed == .success(advertisement), "an advertisement does not survive its own TXT record")
}

/// Request lines as the control server frames them (1 KiB lines here), each decoded and checked; a call
/// that is accepted encodes to a request that decodes to the same call.
func fuzzControl(_ bytes: [UInt8]) {
    var framer = LineFramer(maximumLineLength: 1024)
    framer.append(bytes)
    while true {
        let line: [UInt8]
        do {
            guard let next = try framer.nextLine() else { return }
            line = next
        } catch {
            return
        }
        guard case .success(let request) = ControlJSON.decodeRequest(line), let call = try? ControlCall(request) else { continue }
        let encoded = ControlJSON.line(call.request(id: request.id))
        guard case .success(let decoded) = ControlJSON.decodeRequest(Array(encoded.dropLast())) else {
            preconditionFailure("an accepted call's request does not decode")
        }
        precondition((try? ControlCall(decoded)) == call, "an accepted call changed on its way through a request")
    }
}

/// The bytes as a SEAL payload (what decodes encodes back to the same bytes, and a leaf's own proof
/// verifies), then as proofs back to back (what decodes encodes back; checking one never traps), then as a
/// sealed history (what a reader takes, a writer writes again and a reader takes the same).
func fuzzSeal(_ bytes: [UInt8]) {
    if let seal = try? Seal.decode(RawFrame(type: Seal.frameType, payload: ByteBuffer(bytes: bytes))) {
        precondition((try? seal.wireBytes().dropFirst(RawFrame.headerLength)).map(Array.init) == bytes, "re-encoding changed the seal")
        let index = Int(bytes.last ?? 0) % seal.leafHashes.count
        precondition(seal.proof(forLeaf: index).verifies(leafHash: seal.leafHashes[index], in: seal), "a leaf's own proof does not verify")
    }
    var buffer = ByteBuffer(bytes: bytes)
    while let proof = try? SealProof.decode(from: &buffer) {
        precondition((try? SealProof.decode(proof.bytes())) == proof, "re-encoding changed the proof")
        _ = proof.verifies(leafHash: proof.path.first ?? [], leafCount: Int(proof.leafIndex) + proof.path.count, root: proof.path.last ?? [])
    }
    var history = ByteBuffer(bytes: bytes)
    var reader = SealedHistory.Reader()
    guard let entries = try? reader.decodeSome(&history, maximumCount: 10_000), history.readableBytes == 0, reader.isComplete else { return }
    var writer = SealedHistory.Writer()
    var again = ByteBuffer()
    for entry in entries {
        guard (try? writer.write(entry, into: &again)) != nil else { preconditionFailure("a sealed history's entry does not write again") }
    }
    var second = SealedHistory.Reader()
    precondition((try? second.decodeSome(&again, maximumCount: 10_000)) == entries && again.readableBytes == 0, "re-writing changed the entries")
}

#if FUZZING
    // SwiftPM links an executable's entry point as `<Target>_main`, so libFuzzer's own `main` is not used:
    // hand control to its driver from ours.
    @_silgen_name("LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
    ) -> CInt

    @main
    struct FuzzMain {
        static func main() {
            _ = target
            var argc = CommandLine.argc
            var argv = CommandLine.unsafeArgv
            exit(LLVMFuzzerRunDriver(&argc, &argv, fuzzOne))
        }
    }
#else
    /// Without libFuzzer: replays the files given as arguments (e.g. a crasher) through the same entry point.
    @main
    struct ReplayMain {
        static func main() {
            for path in CommandLine.arguments.dropFirst() {
                guard let data = FileManager.default.contents(atPath: path) else {
                    print("cannot open \(path)")
                    continue
                }
                target.run(Array(data))
                print("ok \(path) (\(data.count) bytes, \(target.rawValue))")
            }
        }
    }
#endif
