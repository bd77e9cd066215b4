import DNSSD
import LanchatCore

/// Browses a service type with DNS-SD for as long as its task runs, and resolves what it finds: what
/// lanchatd and LanchatKit's `Browser` both run, each with its own `PeerTable` and its own logs.
///
/// When avahi-daemon is absent, or the browse dies (avahi-daemon restarted), it browses again with
/// backoff (`Backoff`: 250 ms doubling to 5 s). A browse after the first is a restart (the first too, with
/// `firstIsRestart`: a caller whose table outlived an earlier run): `sweepDelay` after it, the caller
/// sweeps what the new browse did not report again.
public enum BrowseLoop {
    public enum Event: Sendable, Equatable {
        /// A browse started (`restarted`: not the first: the caller's table marks what it lists as unseen).
        case browsing(restarted: Bool)
        case added(ServiceInstance)
        case removed(ServiceInstance)
        /// `sweepDelay` passed since a restart: what was not seen again goes.
        case sweepDue
        /// The browse died (avahi-daemon stopped or restarted); browsing again.
        case lost(String)
        /// avahi-daemon cannot be reached (`first`: the first time since the last browse).
        case unavailable(String, first: Bool)
    }

    /// Browses `type` on `interfaceIndex` (0: all) until the task is cancelled; `report` hears every
    /// event, in order (but `sweepDue`, which comes from a timer beside the browse).
    public static func run(
        type: String, interfaceIndex: UInt32 = 0, sweepDelay: Duration, firstIsRestart: Bool = false,
        report: @escaping @Sendable (Event) async -> Void
    ) async {
        var backoff = Backoff()
        var generation = firstIsRestart ? 1 : 0
        var reportedOutage = false
        while !Task.isCancelled {
            do {
                let browser = try await DNSSD.browse(type: type, interfaceIndex: interfaceIndex)
                backoff.reset()
                reportedOutage = false
                let restarted = generation > 0
                generation += 1
                await report(.browsing(restarted: restarted))
                await withDiscardingTaskGroup { group in
                    if restarted {
                        group.addTask {
                            try? await Task.sleep(for: sweepDelay)
                            if !Task.isCancelled { await report(.sweepDue) }
                        }
                    }
                    for await event in browser.events {
                        switch event {
                        case .added(let instance): await report(.added(instance))
                        case .removed(let instance): await report(.removed(instance))
                        case .failed(let error): await report(.lost("\(error)"))
                        }
                    }
                    group.cancelAll()
                }
                browser.cancel()
            } catch {
                await report(.unavailable("\(error)", first: !reportedOutage))
                reportedOutage = true
            }
            try? await Task.sleep(for: backoff.next())
        }
    }

    /// What one resolve attempt saw (for the caller's log).
    public enum ResolveEvent: Sendable, Equatable {
        /// Resolved in `resolveMilliseconds`, its addresses looked up in `addressMilliseconds`.
        case resolved(ServiceInstance, resolveMilliseconds: Int64, addressMilliseconds: Int64)
        /// Resolved, but the host has no address yet: trying again.
        case noAddressYet(host: String)
        case failed(ServiceInstance, String)
        /// Three attempts failed: it stays unlisted.
        case gaveUp(ServiceInstance)
    }

    /// Resolves `instance` and looks up its addresses, up to three attempts (1 s, then 2 s apart), while
    /// `stillWanted` says so; the result, or nil.
    public static func resolve(
        _ instance: ServiceInstance, stillWanted: () async -> Bool, report: (ResolveEvent) -> Void = { _ in }
    ) async -> (service: ResolvedService, addresses: [String])? {
        for attempt in 0..<3 {
            if attempt > 0 { try? await Task.sleep(for: .seconds(1 << (attempt - 1))) }
            guard !Task.isCancelled, await stillWanted() else { return nil }
            do {
                let clock = ContinuousClock()
                let started = clock.now
                let service = try await DNSSD.resolve(instance, timeout: .seconds(5))
                let resolvedAt = clock.now
                let lookupInterface = service.interfaceIndex != 0 ? service.interfaceIndex : instance.interfaceIndex
                let addresses = try await DNSSD.queryAddresses(
                    hostName: service.hostName, interfaceIndex: lookupInterface, timeout: .seconds(2), settle: .milliseconds(30))
                report(.resolved(instance, resolveMilliseconds: milliseconds(resolvedAt - started), addressMilliseconds: milliseconds(clock.now - resolvedAt)))
                if addresses.isEmpty && attempt < 2 {
                    report(.noAddressYet(host: service.hostName))
                    continue
                }
                return (service, addresses)
            } catch {
                report(.failed(instance, "\(error)"))
            }
        }
        if !Task.isCancelled { report(.gaveUp(instance)) }
        return nil
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
