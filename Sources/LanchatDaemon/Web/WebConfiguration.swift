import Glibc

/// Where `lanchatd --web [ADDRESS:]PORT` serves the browser UI, and the limits on what a browser (or
/// anything else that reaches the port) may send.
public struct WebConfiguration: Equatable, Sendable {
    /// The address bound: `127.0.0.1` unless the person named another.
    public var address: String
    /// The port (1-65535; 0 = any free port, said in the log and in the token file).
    public var port: Int
    /// Longest request target (path and query), in bytes; longer: 414.
    public var maximumTargetLength = 4096
    /// Longest header field (name and value), in bytes; the HTTP decoder closes the connection past it.
    public var maximumHeaderFieldSize = 8 * 1024
    /// All header fields of a request together, in bytes.
    public var maximumHeaderListSize = 16 * 1024
    /// Header fields in a request.
    public var maximumHeaderFieldCount = 64
    /// Largest WebSocket message (one control request), in bytes, fragments included.
    public var maximumMessageSize = 1024 * 1024
    /// Connections served at once (HTTP and WebSocket); more are closed at once.
    public var maximumConnections = 32
    /// Control calls in flight on one WebSocket; more are answered `busy`.
    public var maximumCallsPerSocket = 16
    /// Seconds an HTTP connection may wait for a complete request before it is closed.
    public var requestTimeout = 30
    /// Seconds a request's head may take to arrive whole, from the connection or the request before
    /// (`WebGate`): the read timeout restarts at every byte.
    public var requestHeadTimeout = 10
    /// Largest file uploaded from the page (then sent with `send-file`), in bytes.
    public var maximumUploadSize: UInt64 = 4 << 30
    /// Bytes that must stay free on the state directory's file system after an upload.
    public var minimumFreeAfterUpload: UInt64 = 64 << 20
    /// Largest received file the page may show inline (an image), in bytes.
    public var maximumInlineImageSize: UInt64 = 16 << 20

    public init(address: String = "127.0.0.1", port: Int) {
        self.address = address
        self.port = port
    }

    /// Whether the address is a loopback one (the default); another means the UI is reachable from
    /// the network (the token still guards it), and the daemon warns.
    public var isLoopback: Bool {
        address == "::1" || address.hasPrefix("127.")  // (an IP literal: `parse` takes no names)
    }

    /// Parses `[ADDRESS:]PORT` (`8080`, `127.0.0.1:8080`, `[::1]:8080`, `0.0.0.0:8080`). The address is
    /// an IP literal (`localhost` is taken as 127.0.0.1): a name could resolve to another family than the
    /// browser tries first, where another user could listen and be handed the token.
    public static func parse(_ text: String) -> WebConfiguration? {
        var address = "127.0.0.1"
        var portText = Substring(text)
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            address = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portText = rest.dropFirst()
        } else if let colon = text.lastIndex(of: ":") {
            address = String(text[..<colon])
            portText = text[text.index(after: colon)...]
            guard !address.contains(":") else { return nil }
        }
        if address == "localhost" { address = "127.0.0.1" }
        var bytes = in6_addr()
        guard inet_pton(AF_INET, address, &bytes) == 1 || inet_pton(AF_INET6, address, &bytes) == 1 else { return nil }
        guard !portText.isEmpty, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), portText.count <= 5,
            let port = Int(portText), (0...65535).contains(port)
        else { return nil }
        return WebConfiguration(address: address, port: port)
    }
}
