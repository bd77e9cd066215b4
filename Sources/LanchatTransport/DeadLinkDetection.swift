import Glibc
import NIOCore
import NIOPosix

/// How a peer connection notices that the other host stopped answering (a pulled cable, a host that lost
/// power, a link that drops everything): the kernel's TCP keepalive, not our PINGs. With nothing received
/// for `idle`, the kernel sends a probe every `interval`; once `userTimeout` passed with nothing from the
/// peer and a probe unanswered, or with data sent and not acknowledged (a shut window too: a peer that
/// stopped reading), it ends the connection (its read fails with `ETIMEDOUT`, or `EHOSTUNREACH` when the
/// host no longer answers ARP, and its members show as timed out). With the user timeout set, Linux ends it by that time, not after `count` probes. The
/// probes and their answers stay in the kernel: an idle link wakes no process and makes no TLS record
/// (with a PING every 4 s, an idle member of a room of 64 spent a median of 0.53 % of a core, most of it
/// heartbeats and resyncs). A peer whose kernel answers but whose process does not is the heartbeat's
/// (`PeerConnectionHandler.Configuration.heartbeatTimeout`).
public struct DeadLinkDetection: Sendable, Equatable {
    /// Seconds with nothing received before the first probe.
    public var idle: Int
    /// Seconds between probes.
    public var interval: Int
    /// Unanswered probes that end the connection.
    public var count: Int
    /// Milliseconds that sent data may stay unacknowledged (TCP_USER_TIMEOUT).
    public var userTimeout: Int

    /// A silent link ends 8 s after the last packet from the peer (a probe after 4 s, then one a second,
    /// and the user timeout at 8 s), as the PINGs' timeout did before; data that nothing acknowledges
    /// ends it after 8 s too.
    public init(idle: Int = 4, interval: Int = 1, count: Int = 4, userTimeout: Int = 8_000) {
        self.idle = idle
        self.interval = interval
        self.count = count
        self.userTimeout = userTimeout
    }

    /// The socket options that set it, for a bootstrap's `channelOption`s.
    var options: [(ChannelOptions.Types.SocketOption, SocketOptionValue)] {
        [
            (.socketOption(.so_keepalive), 1),
            (.tcpOption(.init(rawValue: TCP_KEEPIDLE)), idle),
            (.tcpOption(.init(rawValue: TCP_KEEPINTVL)), interval),
            (.tcpOption(.init(rawValue: TCP_KEEPCNT)), count),
            (.tcpOption(.init(rawValue: TCP_USER_TIMEOUT)), userTimeout),
        ]
    }
}

extension ClientBootstrap {
    /// This bootstrap with `detection`'s socket options on its connection.
    func detectingDeadLinks(_ detection: DeadLinkDetection) -> ClientBootstrap {
        detection.options.reduce(self) { $0.channelOption($1.0, value: $1.1) }
    }
}

extension ServerBootstrap {
    /// This bootstrap with `detection`'s socket options on each accepted connection.
    func detectingDeadLinks(_ detection: DeadLinkDetection) -> ServerBootstrap {
        detection.options.reduce(self) { $0.childChannelOption($1.0, value: $1.1) }
    }
}
