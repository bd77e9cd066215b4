import Glibc

/// When a person means by `--since`: a duration back from now (`90s`, `30m`, `2h`, `7d`), or a local
/// date and time (`2026-11-23`, `2026-11-23T14:05`, `2026-11-23 14:05:30`).
public enum TimeSpec {
    /// Milliseconds since the epoch, or nil if `text` is neither form.
    public static func milliseconds(_ text: String, now: Int64) -> Int64? {
        if let unit = text.last, let seconds = ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800][unit],
            let count = Int64(text.dropLast()), count >= 0, count <= 100 * 365 * 86_400 / Int64(seconds)
        {
            return max(0, now - count * Int64(seconds) * 1000)
        }
        let parts = text.split(whereSeparator: { $0 == "T" || $0 == " " })
        guard (1...2).contains(parts.count) else { return nil }
        let date = parts[0].split(separator: "-", omittingEmptySubsequences: false).map { Int32($0) }
        let time = parts.count == 2 ? parts[1].split(separator: ":", omittingEmptySubsequences: false).map { Int32($0) } : []
        guard date.count == 3, date.allSatisfy({ $0 != nil }), time.count != 1, time.count <= 3, time.allSatisfy({ $0 != nil }) else { return nil }
        let (year, month, day) = (date[0]!, date[1]!, date[2]!)
        let (hour, minute, second) = (time.first.flatMap { $0 } ?? 0, time.count > 1 ? time[1]! : 0, time.count > 2 ? time[2]! : 0)
        guard (1970...9999).contains(year), (1...12).contains(month), (1...31).contains(day),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        var fields = tm()
        fields.tm_year = year - 1900
        fields.tm_mon = month - 1
        fields.tm_mday = day
        fields.tm_hour = hour
        fields.tm_min = minute
        fields.tm_sec = second
        fields.tm_isdst = -1
        let seconds = mktime(&fields)
        // mktime normalises 31 February into March: such a date is refused, not moved.
        guard seconds != -1, fields.tm_mday == day, fields.tm_mon == month - 1 else { return nil }
        return max(0, Int64(seconds) * 1000)
    }
}
