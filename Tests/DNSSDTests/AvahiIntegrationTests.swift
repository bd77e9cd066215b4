import DNSSD
import Foundation
import Testing

/// The DNS-SD layer against a real avahi-daemon. Skipped unless LANCHAT_AVAHI_TESTS=1: the end-to-end
/// suite runs these inside a simulated host (Tests/e2e/test_dnssd_library.py), never against an
/// avahi-daemon on the machine's real interfaces.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["LANCHAT_AVAHI_TESTS"] == "1"), .serialized)
struct AvahiIntegrationTests {
    static let type = "_lanchat-it._tcp"

    /// Waits for the first event matching `predicate`, or fails after `seconds`.
    func first<T: Sendable>(_ stream: AsyncStream<T>, within seconds: Double, where predicate: @escaping @Sendable (T) -> Bool) async -> T? {
        await withTaskGroup(of: T?.self) { group in
            group.addTask {
                for await event in stream where predicate(event) { return event }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(seconds))
                return nil
            }
            let result = await group.next() ?? nil
            group.cancelAll()
            return result
        }
    }

    @Test func registerBrowseResolveUpdateAndWithdraw() async throws {
        let name = "it-\(UInt32.random(in: 0...UInt32.max))"
        let txt = try TXTRecord(["v": "1", "note": "first"]).encode()
        let registration = try await DNSSD.register(name: name, type: Self.type, port: 4242, txt: txt)
        let registered = await first(registration.events, within: 10) { if case .registered = $0 { true } else { false } }
        #expect(registered == .registered(name: name))

        let browser = try await DNSSD.browse(type: Self.type)
        defer { browser.cancel() }
        let added = await first(browser.events, within: 10) { if case .added(let i) = $0 { i.name == name } else { false } }
        guard case .added(let instance) = added else {
            Issue.record("browse did not report \(name)")
            return
        }

        let resolved = try await DNSSD.resolve(instance, timeout: .seconds(5))
        #expect(resolved.port == 4242)
        #expect(TXTRecord(decoding: resolved.txt).string("note") == "first")
        let addresses = try await DNSSD.queryAddresses(hostName: resolved.hostName, interfaceIndex: resolved.interfaceIndex)
        #expect(!addresses.isEmpty)

        try await registration.updateTXT(try TXTRecord(["v": "1", "note": "second"]).encode())
        var note: String?
        for _ in 0..<50 {
            note = TXTRecord(decoding: try await DNSSD.resolve(instance, timeout: .seconds(5)).txt).string("note")
            if note == "second" { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(note == "second")

        await registration.close()
        let removed = await first(browser.events, within: 10) { if case .removed(let i) = $0 { i.name == name } else { false } }
        #expect(removed != nil)
    }

    @Test func sameNameTwiceOnOneDaemonIsANameConflict() async throws {
        let name = "dup-\(UInt32.random(in: 0...UInt32.max))"
        let first = try await DNSSD.register(name: name, type: Self.type, port: 1, txt: [])
        defer { first.cancel() }
        _ = await self.first(first.events, within: 10) { if case .registered = $0 { true } else { false } }
        await #expect(throws: DNSSDError(code: .nameConflict, status: -65548, operation: "register")) {
            _ = try await DNSSD.register(name: name, type: Self.type, port: 2, txt: [])
        }
    }

    @Test func resolvingAnAbsentServiceTimesOutOrFails() async {
        let ghost = ServiceInstance(name: "no-such-service", type: Self.type + ".", domain: "local.", interfaceIndex: 0)
        let clock = ContinuousClock()
        let started = clock.now
        do {
            _ = try await DNSSD.resolve(ghost, timeout: .seconds(1))
            Issue.record("resolved a service that does not exist")
        } catch {
            #expect(error.code == .timeout || error.code == .daemonUnavailable)
        }
        #expect(clock.now - started < .seconds(6))
    }

    @Test func addressLookupOfAnUnknownHostReturnsNothingInTime() async throws {
        let clock = ContinuousClock()
        let started = clock.now
        let addresses = try await DNSSD.queryAddresses(hostName: "no-such-host.local", timeout: .milliseconds(500))
        #expect(addresses.isEmpty)
        #expect(clock.now - started < .seconds(2))
    }

    @Test func invalidArgumentsAreRefusedBeforeAvahiSeesThem() async {
        await #expect(throws: DNSSDError.self) { _ = try await DNSSD.register(name: "", type: Self.type, port: 1, txt: []) }
        await #expect(throws: DNSSDError.self) {
            _ = try await DNSSD.register(name: String(repeating: "x", count: 64), type: Self.type, port: 1, txt: [])
        }
        await #expect(throws: DNSSDError.self) {
            _ = try await DNSSD.register(name: "big", type: Self.type, port: 1, txt: Array(repeating: 1, count: 2000))
        }
    }
}
