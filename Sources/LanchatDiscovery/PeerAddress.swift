/// An address a person typed for a peer discovery cannot see (`lanchat connect HOST[:PORT]`,
/// `static-peer = HOST:PORT`): a host name, an IPv4 address or an IPv6 address (in brackets when a
/// port follows), and a port. Pure parsing; resolving the host is the caller's.
public struct PeerAddress: Equatable, Sendable, CustomStringConvertible {
    /// lanchatd listens here when no `--port` is given (and it is free): what `connect HOST` dials.
    public static let defaultPort = 7473
    public static let maximumLength = 255

    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// `host`, `host:port`, `192.0.2.7:7473`, `fe80::1%eth0`, `[fe80::1%eth0]:7473`.
    public static func parse(_ text: String) -> Result<PeerAddress, ParseError> {
        func failure(_ why: String) -> Result<PeerAddress, ParseError> {
            .failure(
                ParseError(
                    description: "'\(String(text.unicodeScalars.prefix(64).map { $0.isASCII && $0.value >= 0x20 ? Character($0) : "?" }))' is not HOST[:PORT]: \(why)"))
        }
        guard !text.isEmpty else { return failure("it is empty") }
        guard text.utf8.count <= maximumLength else { return failure("longer than \(maximumLength) bytes") }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return failure("spaces or characters outside ASCII") }
        var host = Substring(text)
        var portText: Substring?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return failure("no ']' after the IPv6 address") }
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return failure("expected ':PORT' after ']'") }
                portText = rest.dropFirst()
            }
        } else if host.filter({ $0 == ":" }).count == 1, let colon = host.firstIndex(of: ":") {
            portText = host[host.index(after: colon)...]
            host = host[..<colon]
        }
        // More than one colon without brackets: a bare IPv6 address, no port.
        guard !host.isEmpty else { return failure("no host") }
        guard host.allSatisfy({ $0.isLetter || $0.isNumber || ".-:_%".contains($0) }) else {
            return failure("the host has characters a host name or IP address cannot have")
        }
        var port = defaultPort
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value), portText.allSatisfy(\.isNumber) else {
                return failure("the port must be 1-65535")
            }
            port = value
        }
        return .success(PeerAddress(host: String(host), port: port))
    }

    /// `host:port`, with brackets around an IPv6 address.
    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
