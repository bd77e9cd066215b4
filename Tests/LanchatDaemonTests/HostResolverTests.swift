import Dispatch
@testable import LanchatDaemon
import LanchatControl
import Synchronization
import Testing

@Suite struct HostResolverTests {
    /// A blocking look-up that answers only when `release` is signalled (a resolver that never answers).
    final class Stuck: Sendable {
        let release = DispatchSemaphore(value: 0)
        let started = Mutex(0)
        func lookup(_ host: String) -> String? {
            started.withLock { $0 += 1 }
            release.wait()
            return "192.0.2.7"
        }
    }

    @Test func aLookUpThatNeverAnswersEndsAtTheDeadlineWithAClearMessage() async throws {
        let stuck = Stuck()
        let resolver = HostResolver(deadline: .milliseconds(200), lookup: { stuck.lookup($0) })
        let clock = ContinuousClock()
        let started = clock.now
        var caught: ControlError?
        do { _ = try await resolver.resolve("nowhere.example") } catch { caught = error }
        let took = clock.now - started
        #expect(caught?.code == .unknownHost)
        #expect(caught?.message.contains("could not resolve 'nowhere.example' within 200 ms") == true)
        // (No upper bound on the time: a busy machine's cooperative threads may be late. That it returned
        // at all proves it: the look-up has not answered, and does not until released below.)
        #expect(took >= .milliseconds(200), "took \(took)")
        // The thread is still inside the look-up (it cannot be interrupted) and holds its slot...
        #expect(resolver.lookupsUnderWay == 1)
        // ...until the system resolver gives up; then the slot is free again.
        stuck.release.signal()
        for _ in 0..<200 where resolver.lookupsUnderWay > 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(resolver.lookupsUnderWay == 0)
    }

    @Test func theDefaultDeadlineIs10Seconds() {
        #expect(HostResolver.deadline == .seconds(10))
        #expect(HostResolver().deadline == .seconds(10))
        #expect(HostResolver.text(.seconds(10)) == "10 s")
    }

    @Test func lookUpsThatNeverAnswerCannotPileUpThreads() async throws {
        let stuck = Stuck()
        let resolver = HostResolver(deadline: .milliseconds(50), maximumLookups: 2, lookup: { stuck.lookup($0) })
        var codes: [ControlError.Code] = []
        for _ in 0..<5 {
            do { _ = try await resolver.resolve("nowhere.example") } catch { codes.append(error.code) }
        }
        #expect(codes == [.unknownHost, .unknownHost, .busy, .busy, .busy])
        #expect(stuck.started.withLock { $0 } == 2)
        stuck.release.signal()
        stuck.release.signal()
        for _ in 0..<200 where resolver.lookupsUnderWay > 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(resolver.lookupsUnderWay == 0)
    }

    @Test func anAnswerInTimeIsTheAddressAndAnIPAddressIsNotLookedUp() async throws {
        let resolver = HostResolver(deadline: .seconds(5), lookup: { $0 == "bob.lan" ? "192.0.2.8" : nil })
        #expect(try await resolver.resolve("bob.lan") == "192.0.2.8")
        #expect(try await resolver.resolve("fe80::1%eth0") == "fe80::1%eth0")
        #expect(try await resolver.resolve("198.51.100.1") == "198.51.100.1")
        var caught: ControlError?
        do { _ = try await resolver.resolve("nobody.lan") } catch { caught = error }
        #expect(caught?.code == .unknownHost && caught?.message == "cannot resolve host name 'nobody.lan'")
    }

    @Test func aCancelledCallerDoesNotWaitForTheLookUp() async throws {
        let stuck = Stuck()
        let resolver = HostResolver(deadline: .seconds(60), lookup: { stuck.lookup($0) })
        let task = Task { () throws(ControlError) -> String in try await resolver.resolve("nowhere.example") }
        try await Task.sleep(for: .milliseconds(100))
        task.cancel()
        // The caller is answered although the look-up (released only below) and its 60 s deadline have not:
        // no wall-clock bound, which a busy machine would break.
        let result = await task.result
        guard case .failure(let error) = result else { Issue.record("answered"); return }
        #expect((error as? ControlError)?.code == .cancelled)
        stuck.release.signal()
    }
}
