// What every benchmark here shares: the clock, percentiles, JSON output, failing.
import Glibc

func now() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

/// User + system CPU seconds of this process so far.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
}

func emit(_ object: [String: Double]) {
    let text = object.keys.sorted().map { "\"\($0)\": \(($0.hasSuffix("_count") ? String(Int(object[$0]!)) : String(format3(object[$0]!))))" }
    print("{" + text.joined(separator: ", ") + "}")
    fflush(nil)
}

func format3(_ value: Double) -> String {
    let scaled = (value * 1000).rounded() / 1000
    return "\(scaled)"
}

func die(_ message: String) -> Never {
    _ = "lanchat-bench: \(message)\n".withCString { write(2, $0, strlen($0)) }
    exit(1)
}
