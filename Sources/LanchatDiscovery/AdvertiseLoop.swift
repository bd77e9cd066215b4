import DNSSD
import LanchatCore

/// Keeps a service advertised with DNS-SD for as long as its task runs: what lanchatd and LanchatKit's
/// `Advertiser` both run, each turning the events into its own logs and state.
///
/// - A name taken on this host ("name (2)", ...: `PeerAdvertisement.instanceName`) is tried again under
///   the next one at once.
/// - A registration Avahi does not confirm within the contested-name watchdog's wait (`ContestedName`)
///   is given up and made again under a name tagged with the peer's id.
/// - When avahi-daemon is absent, or the registration dies (avahi-daemon restarted), it registers again
///   with backoff (`Backoff`: 250 ms doubling to 5 s).
/// - Cancelling the task withdraws the advertisement (Avahi sends goodbye packets).
public enum AdvertiseLoop {
    public enum Event: Sendable, Equatable {
        /// Registered with avahi-daemon, waiting for the network's confirmation.
        case registering
        /// Confirmed under `name` (another than `requested` if Avahi renamed it: taken on the network).
        case registered(name: String, requested: String)
        /// The registration died (avahi-daemon stopped or restarted); registering again.
        case lost(String)
        /// `name` is taken on this host; trying the next.
        case takenOnHost(String)
        /// `name` was not confirmed within `waited`: registering again as `next` (`step`), which may wait
        /// `nextWait`; `attempt` registrations in a row were not confirmed.
        case contested(name: String, next: String, step: ContestedName.Step, waited: Duration, attempt: Int, nextWait: Duration)
        /// avahi-daemon cannot be reached (`first`: the first time since the last registration).
        case unavailable(String, first: Bool)
        /// The task was cancelled: the advertisement is withdrawn.
        case withdrawn
    }

    /// Advertises `txt` under `base` ("name (2)" or a tagged name when needed) for `type` on `port`, on
    /// `interfaceIndex` (0: all), until the task is cancelled; `report` hears every event, in order.
    public static func run(
        base: String, peerID: PeerID, type: String, port: UInt16, txt: [UInt8], interfaceIndex: UInt32 = 0,
        report: @Sendable (Event) async -> Void
    ) async {
        var backoff = Backoff()
        var conflicts = 0
        var contest = ContestedName()
        var reportedOutage = false
        while !Task.isCancelled {
            let name = PeerAdvertisement.instanceName(base: base, attempt: conflicts, tag: contest.tag(for: peerID))
            do {
                let registration = try await DNSSD.register(name: name, type: type, port: port, txt: txt, interfaceIndex: interfaceIndex)
                await report(.registering)
                // Gives the registration up (ending its events) if Avahi has not confirmed it in time,
                // whatever the name (a tagged one too: a host on the LAN can contest that as well).
                let wait = contest.wait
                // Unstructured: it must be cancelled when the name is confirmed, mid-loop, and its result read
                // after (an `async let` cannot be cancelled alone); it ends after `wait` at the latest, and is
                // cancelled and awaited below before the next registration.
                let watchdog = Task {
                    do { try await Task.sleep(for: wait) } catch { return false }
                    await registration.close()
                    return true
                }
                var confirmed = false
                for await event in registration.events {
                    switch event {
                    case .registered(let finalName):
                        confirmed = true
                        watchdog.cancel()
                        backoff.reset()
                        contest.confirmed()
                        reportedOutage = false
                        await report(.registered(name: finalName, requested: name))
                    case .failed(let error):
                        await report(.lost("\(error)"))
                    }
                }
                // The stream ended: the registration failed, was not confirmed in time, or we are shutting
                // down. Either way, free it; on shutdown this withdraws the service.
                watchdog.cancel()
                let contested = await watchdog.value && !confirmed
                await registration.close()
                if Task.isCancelled { await report(.withdrawn) }
                if contested && !Task.isCancelled {
                    let step = contest.notConfirmed()
                    let next = PeerAdvertisement.instanceName(base: base, attempt: conflicts, tag: contest.tag(for: peerID))
                    await report(.contested(name: name, next: next, step: step, waited: wait, attempt: contest.unconfirmed, nextWait: contest.wait))
                    continue
                }
            } catch let error where error.code == .nameConflict {
                conflicts += 1
                await report(.takenOnHost(name))
                continue
            } catch {
                await report(.unavailable("\(error)", first: !reportedOutage))
                reportedOutage = true
            }
            try? await Task.sleep(for: backoff.next())
        }
    }
}
