import Glibc

/// Numbers and times as the client prints them, without Foundation's formatters: one `String(format:)`
/// or `DateFormatter` links ICU's data into the binary (34 MB of the 60 MB client; docs/packaging.md).
enum Format {
    /// `value` with `places` decimals (0 to 6), as "%.<places>f" prints it but for ties, which round away
    /// from zero.
    static func decimal(_ value: Double, places: Int) -> String {
        let places = min(max(places, 0), 6)
        var scale: Int64 = 1
        for _ in 0..<places { scale *= 10 }
        let scaled = (abs(value) * Double(scale)).rounded()
        guard value.isFinite, scaled < 9e18 else { return "\(value)" }
        let units = Int64(scaled)
        let sign = value < 0 ? "-" : ""  // (as printf: -0.04 is "-0.0")
        guard places > 0 else { return sign + String(units) }
        let fraction = String(units % scale)
        return sign + String(units / scale) + "." + String(repeating: "0", count: places - fraction.count) + fraction
    }

    /// "HH:mm:ss" in the local time zone, for a time in milliseconds since 1970.
    static func clock(milliseconds: Int64) -> String {
        var seconds = time_t(milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000)
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return "??:??:??" }
        return [parts.tm_hour, parts.tm_min, parts.tm_sec].map { $0 < 10 ? "0\($0)" : "\($0)" }.joined(separator: ":")
    }
}
