import Glibc
import LanchatControl
import Testing

@Suite struct TimeSpecTests {
    let now: Int64 = 1_795_000_000_000

    @Test func durationsGoBackFromNow() {
        #expect(TimeSpec.milliseconds("90s", now: now) == now - 90_000)
        #expect(TimeSpec.milliseconds("30m", now: now) == now - 1_800_000)
        #expect(TimeSpec.milliseconds("2h", now: now) == now - 7_200_000)
        #expect(TimeSpec.milliseconds("7d", now: now) == now - 604_800_000)
        #expect(TimeSpec.milliseconds("1w", now: now) == now - 604_800_000)
        #expect(TimeSpec.milliseconds("40000s", now: now) == now - 40_000_000)  // each unit up to 100 years
        #expect(TimeSpec.milliseconds("30000d", now: now) == 0)  // before 1970: from the start
    }

    @Test func localDatesAndTimes() {
        setenv("TZ", "UTC", 1)
        tzset()
        let midnight: Int64 = 1_795_392_000_000
        let at1405: Int64 = midnight + 50_700_000
        let at140530: Int64 = at1405 + 30_000
        #expect(TimeSpec.milliseconds("2026-11-23", now: now) == midnight)
        #expect(TimeSpec.milliseconds("2026-11-23T14:05", now: now) == at1405)
        #expect(TimeSpec.milliseconds("2026-11-23 14:05:30", now: now) == at140530)
    }

    @Test(arguments: ["", "yesterday", "5", "5x", "-3h", "2026-02-31", "2026-13-01", "2026-11-23T25:00", "2026-11-23T14", "2026-11-23T14:05:30:1", "1e3s"])
    func nonsenseIsRefused(_ text: String) {
        #expect(TimeSpec.milliseconds(text, now: now) == nil)
    }
}
