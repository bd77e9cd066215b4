import Foundation
@testable import lanchat
import Testing

/// The client's own number and time formatting (`Format`, which keeps ICU out of the binary) prints what
/// Foundation's formatters printed.
@Suite struct FormatTests {
    @Test func decimalsAsPrintfPrintsThem() {
        let values: [Double] = [0, 0.04, 0.05, 0.94, 0.96, 1, 9.99, 12.345, 99.95, 123.456, 1_000_000.75, 403.2, 1e9 / 1e9, 5e12 / 1e9, -1.26, -0.04]
        for value in values {
            for places in [0, 1, 2] {
                let expected = String(format: "%.\(places)f", value)
                let ours = Format.decimal(value, places: places)
                // (Ties may round the other way: printf rounds the binary value, which is rarely a tie.)
                let tie = abs(value * pow(10, Double(places)) - (value * pow(10, Double(places))).rounded(.towardZero)) == 0.5
                #expect(ours == expected || tie, "\(value) with \(places) places: \(ours), printf says \(expected)")
            }
        }
        #expect(Format.decimal(.infinity, places: 1) == "inf")
    }

    @Test func clockTimesAsDateFormatterPrintedThem() {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        for milliseconds: Int64 in [0, 999, 1_000, 59_999, 3_600_000, 1_795_000_000_123, 1_800_000_000_000, 4_102_444_799_999] {
            let expected = formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
            #expect(Format.clock(milliseconds: milliseconds) == expected, "\(milliseconds)")
        }
    }
}
