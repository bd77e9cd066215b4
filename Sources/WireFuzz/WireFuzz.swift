import Glibc
import LanchatWire
import NIOCore

/// libFuzzer entry point: feeds the bytes to a fresh frame decoder (in one piece, and split in two) and
/// parses every frame. Any WireError is fine; a crash, a hang or a trap is a bug. Both feedings must
/// agree.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWireDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let whole = decodeAll(bytes, splitAt: nil)
    let split = decodeAll(bytes, splitAt: size / 2)
    precondition(whole == split, "decoding depends on how the input was split")
    return 0
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
                if case .ignored = frame {} else {
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
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, fuzzWireDecoder))
    }
}
#else
/// Without libFuzzer: replays the files given as arguments (e.g. a crasher) through the same entry point.
@main
struct ReplayMain {
    static func main() {
        for path in CommandLine.arguments.dropFirst() {
            guard let file = fopen(path, "rb") else {
                print("cannot open \(path)")
                continue
            }
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = fread(&chunk, 1, chunk.count, file)
                if n <= 0 { break }
                bytes += chunk[..<n]
            }
            fclose(file)
            _ = bytes.withUnsafeBufferPointer { fuzzWireDecoder($0.baseAddress ?? UnsafePointer(bitPattern: 1)!, $0.count) }
            print("ok \(path) (\(bytes.count) bytes)")
        }
    }
}
#endif
