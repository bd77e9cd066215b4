import LanchatControl
import Testing

@Suite struct StreamPipeTests {
    @Test func framesRoundTripSplitAnywhere() throws {
        let frames: [StreamPipe.Frame] = [.data(Array("hello".utf8)), .data([]), .data((0..<70_000).map { UInt8($0 % 251) }), .end(nil), .end("gone: é")]
        let bytes = frames.flatMap(StreamPipe.encode)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            var decoder = StreamPipe.Decoder()
            var decoded: [StreamPipe.Frame] = []
            var index = 0
            while index < bytes.count {
                let step = Int.random(in: 1...9000, using: &generator)
                decoder.append(bytes[index..<min(bytes.count, index + step)])
                index += step
                while let frame = try decoder.next() { decoded.append(frame) }
            }
            #expect(decoded == frames)
        }
    }

    @Test func hostileInputIsRefusedBeforeBuffering() throws {
        let cases: [(String, [UInt8])] = [
            ("unknown type", [7, 0, 0, 0, 0]),
            ("data over 1 MiB", StreamPipe.headerBytes(type: 0, length: (1 << 20) + 1)),
            ("length 4 GiB", [0, 0xff, 0xff, 0xff, 0xff]),
            ("reason over 1 KiB", StreamPipe.headerBytes(type: 1, length: 1025)),
            ("reason not UTF-8", StreamPipe.headerBytes(type: 1, length: 2) + [0xc3, 0x28]),
        ]
        for (label, bytes) in cases {
            var decoder = StreamPipe.Decoder()
            decoder.append(bytes)
            #expect(throws: StreamPipe.DecodeError.self, "\(label)") { _ = try decoder.next() }
        }
        // Incomplete frames wait for more bytes.
        var decoder = StreamPipe.Decoder()
        decoder.append([0, 0, 0])
        #expect(try decoder.next() == nil)
        decoder.append([0, 3, 1])
        #expect(try decoder.next() == nil)
        decoder.append([2, 3])
        #expect(try decoder.next() == .data([1, 2, 3]))
    }

    @Test func longReasonsAreCut() throws {
        var decoder = StreamPipe.Decoder()
        decoder.append(StreamPipe.encode(.end(String(repeating: "x", count: 5000))))
        guard case .end(let reason?)? = try decoder.next() else {
            Issue.record("no end frame")
            return
        }
        #expect(reason.utf8.count <= StreamPipe.maximumReason)
    }
}
