import DNSSD

extension PeerTable {
    /// At most this many resolves at once (each holds a connection to avahi-daemon: a flood of
    /// announcements must not open thousands).
    public static let concurrentResolves = 16

    /// Runs `resolve` for each instance `requests` brings, at most `concurrentResolves` at once, until the
    /// stream ends (lanchatd's discovery and LanchatKit's browser both resolve this way).
    public static func resolveEach(_ requests: AsyncStream<ServiceInstance>, _ resolve: @escaping @Sendable (ServiceInstance) async -> Void) async {
        await withTaskGroup(of: Void.self) { group in
            var running = 0
            for await instance in requests {
                if running == concurrentResolves {
                    await group.next()
                    running -= 1
                }
                running += 1
                group.addTask { await resolve(instance) }
            }
        }
    }
}
