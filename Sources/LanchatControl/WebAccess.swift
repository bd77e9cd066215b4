import FoundationEssentials

/// How to open the browser UI of a daemon started with `--web`: lanchatd writes this as JSON to
/// `<control socket>.web` (mode 0600, or 0640 for the socket's group: whoever may use the control
/// socket may open the UI, nobody else), and `lanchat web` reads it. Removed when the daemon stops.
public struct WebAccess: Codable, Equatable, Sendable {
    /// The page's address with the token in its fragment (which the browser never sends to a server).
    public var url: String
    /// 64 lowercase hex characters (32 random bytes), new at every start of the daemon.
    public var token: String
    public var address: String
    public var port: Int

    public init(address: String, port: Int, token: String) {
        self.address = address
        self.port = port
        self.token = token
        let host = address.contains(":") ? "[\(address)]" : (address == "0.0.0.0" ? "127.0.0.1" : address)
        self.url = "http://\(host):\(port)/#token=\(token)"
    }

    public static func filePath(forControlSocket socket: String) -> String { socket + ".web" }

    /// 32 random bytes from the system's generator (getrandom), as hex.
    public static func newToken() -> String { RandomToken.hex(bytes: 32) }
}
