import Dispatch
import Glibc
import LanchatControl
import Synchronization

/// Host-name look-ups for `lanchat connect HOST[:PORT]` and `static-peer = HOST:PORT`, each given a
/// deadline.
///
/// The system resolver (`getaddrinfo`) blocks and cannot be interrupted: it runs on a thread of its own,
/// and at the deadline the caller gets "could not resolve HOST within 10 s" and its task goes on at
/// once, waiting for nothing. The thread ends when the resolver itself gives up (resolv.conf's
/// `timeout` x `attempts` per server; nss-mdns's own); until then it holds one of `maximumLookups`
/// slots, and a look-up that finds them all taken is refused at once rather than starting another
/// thread, so a name that never answers cannot pile threads up however often it is tried.
struct HostResolver: Sendable {
    /// How long a look-up is given.
    static let deadline = Duration.seconds(10)
    /// Look-up threads under way at most (answered or not).
    static let maximumLookups = 4

    /// The blocking look-up: an address for a host name, or nil. `getaddrinfo` unless a test gives another.
    let lookup: @Sendable (String) -> String?
    let deadline: Duration
    private let slots: Slots

    init(deadline: Duration = Self.deadline, maximumLookups: Int = Self.maximumLookups, lookup: @escaping @Sendable (String) -> String? = Self.systemLookup) {
        self.lookup = lookup
        self.deadline = deadline
        self.slots = Slots(maximum: maximumLookups)
    }

    /// Look-up threads still running (some may belong to callers that gave up on them).
    var lookupsUnderWay: Int { slots.taken }

    /// An IP address for `host` (itself when it is one).
    func resolve(_ host: String) async throws(ControlError) -> String {
        var v4 = in_addr()
        var v6 = in6_addr()
        let bare = String(host.split(separator: "%").first ?? Substring(host))
        if inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, bare, &v6) == 1 { return host }
        guard slots.take() else {
            throw ControlError(
                code: .busy,
                message: "cannot resolve '\(host)' now: \(slots.maximum) host name look-ups are still under way (the system resolver is not answering); try again later")
        }
        let pending = Pending()
        let lookup = self.lookup
        let slots = self.slots
        DispatchQueue.global().async {
            let answer = lookup(host)
            slots.give()
            pending.finish(.answer(answer))
        }
        let deadline = self.deadline
        let outcome = await withTaskGroup(of: Outcome.self) { group in
            group.addTask { await pending.wait() }
            group.addTask {
                do { try await Task.sleep(for: deadline) } catch { return .cancelled }
                return .timedOut
            }
            let first = await group.next() ?? .cancelled
            // Ends the other child at once: the sleep throws, and the wait is resumed by its
            // cancellation handler, so the group never waits for the look-up's thread.
            group.cancelAll()
            return first
        }
        switch outcome {
        case .answer(let address?): return address
        case .answer(nil): throw ControlError(code: .unknownHost, message: "cannot resolve host name '\(host)'")
        case .timedOut:
            throw ControlError(code: .unknownHost, message: "could not resolve '\(host)' within \(Self.text(deadline)) (the system resolver did not answer)")
        case .cancelled: throw ControlError(code: .cancelled, message: "the look-up of '\(host)' was cancelled")
        }
    }

    static func text(_ duration: Duration) -> String {
        duration.components.attoseconds == 0 ? "\(duration.components.seconds) s" : "\(duration.milliseconds) ms"
    }

    enum Outcome: Sendable, Equatable {
        case answer(String?)
        case timedOut
        case cancelled
    }

    /// How many look-up threads run.
    final class Slots: Sendable {
        let maximum: Int
        private let count = Mutex(0)

        init(maximum: Int) { self.maximum = maximum }

        var taken: Int { count.withLock { $0 } }

        func take() -> Bool {
            count.withLock { count in
                guard count < maximum else { return false }
                count += 1
                return true
            }
        }

        func give() { count.withLock { $0 -= 1 } }
    }

    /// One look-up's answer, handed over once: to the waiting task, or dropped if it left.
    final class Pending: Sendable {
        private struct State {
            var continuation: CheckedContinuation<Outcome, Never>?
            var outcome: Outcome?
        }
        private let state = Mutex(State())

        func wait() async -> Outcome {
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let ready: Outcome? = state.withLock { state in
                        if let outcome = state.outcome { return outcome }
                        state.continuation = continuation
                        return nil
                    }
                    if let ready { continuation.resume(returning: ready) }
                }
            } onCancel: {
                finish(.cancelled)
            }
        }

        /// The first outcome wins; later ones are dropped.
        func finish(_ outcome: Outcome) {
            let continuation: CheckedContinuation<Outcome, Never>? = state.withLock { state in
                guard state.outcome == nil else { return nil }
                state.outcome = outcome
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume(returning: outcome)
        }
    }

    /// `getaddrinfo`: the first IPv4 address, else the first IPv6 one.
    @Sendable static func systemLookup(_ host: String) -> String? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(list) }
        var found: [String] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            if entry.pointee.ai_family == AF_INET {
                entry.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                    var address = pointer.pointee.sin_addr
                    _ = inet_ntop(AF_INET, &address, &text, socklen_t(text.count))
                }
                found.insert(String(cString: text), at: 0)  // IPv4 first
            } else if entry.pointee.ai_family == AF_INET6 {
                entry.pointee.ai_addr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                    var address = pointer.pointee.sin6_addr
                    _ = inet_ntop(AF_INET6, &address, &text, socklen_t(text.count))
                }
                found.append(String(cString: text))
            }
            cursor = entry.pointee.ai_next
        }
        return found.first
    }
}
