import LanchatCore

/// The checks every request to the browser UI passes before anything else is done (pure: no sockets).
///
/// - Host must name this server: `localhost` or an IP literal, with the bound port. A DNS name is
///   refused, so a page whose name was rebound to 127.0.0.1 (DNS rebinding) cannot read the UI.
/// - Origin, when the browser sends one, must be this server's own (`http://` + Host): no other site
///   may call the UI; nothing answers with Access-Control-* headers (no CORS).
/// - The token (`WebToken`), in the `X-Lanchat-Token` header, `Authorization: Bearer`, or the `token`
///   query parameter (a WebSocket or an `<img>` cannot set headers), for every route but the page's
///   own static assets (which a browser loads before its script can read the token; they carry no data).
public struct WebRequestCheck: Sendable {
    public enum Route: Equatable, Sendable {
        /// One of the embedded assets, by name.
        case asset(String)
        /// The WebSocket carrying control calls.
        case socket
        /// A file upload (POST), with the name the person gave and how many sends it is for.
        case upload(name: String, count: Int)
        /// A received file shown inline (an image), by its path.
        case file(path: String)
    }

    public enum Outcome: Equatable, Sendable {
        case allowed(Route)
        /// Refused: the status and a body that says why.
        case refused(status: Int, reason: String)
    }

    public let port: Int
    public let token: String
    public let maximumTargetLength: Int

    public init(port: Int, token: String, maximumTargetLength: Int = 4096) {
        self.port = port
        self.token = token
        self.maximumTargetLength = maximumTargetLength
    }

    /// Checks a request: its method, target (`/path?query`) and headers (names in any case).
    public func check(method: String, target: String, headers: [(String, String)]) -> Outcome {
        guard target.utf8.count <= maximumTargetLength else { return .refused(status: 414, reason: "request target too long") }
        func header(_ name: String) -> [String] {
            headers.filter { $0.0.lowercased() == name }.map(\.1)
        }
        let hosts = header("host")
        guard hosts.count == 1, let host = hosts.first else { return .refused(status: 403, reason: "refused: exactly one Host header is needed") }
        guard Self.isAcceptableHost(host, port: port) else {
            return .refused(status: 403, reason: "refused: Host '\(host.prefix(100))' is not this server (use the address `lanchat web` prints)")
        }
        let origins = header("origin")
        guard origins.count <= 1 else { return .refused(status: 403, reason: "refused: more than one Origin header") }
        if let origin = origins.first, origin != "http://" + host {
            return .refused(status: 403, reason: "refused: cross-origin request from '\(origin.prefix(100))'")
        }
        let (path, query) = Self.split(target)
        if method == "GET" || method == "HEAD", let asset = Self.assets[path] {
            return .allowed(.asset(asset))
        }
        var given = query["token"]
        for value in header("x-lanchat-token") { given = value }
        for value in header("authorization") where value.hasPrefix("Bearer ") { given = String(value.dropFirst(7)) }
        guard let given, Self.constantTimeEqual(given, token) else {
            return .refused(status: 403, reason: "refused: no valid token (open the URL that `lanchat web` prints)")
        }
        switch (method, path) {
        case ("GET", "/ws"): return .allowed(.socket)
        case ("POST", "/upload"):
            let name = query["name"] ?? ""
            guard !name.isEmpty, name.utf8.count <= 255 else { return .refused(status: 400, reason: "upload: a file name (name=) is needed") }
            let count = Int(query["count"] ?? "1") ?? 0
            guard (1...64).contains(count) else { return .refused(status: 400, reason: "upload: count must be 1-64") }
            return .allowed(.upload(name: name, count: count))
        case ("GET", "/file"), ("HEAD", "/file"):
            guard let path = query["path"], path.hasPrefix("/") else { return .refused(status: 400, reason: "file: an absolute path= is needed") }
            return .allowed(.file(path: path))
        default:
            return .refused(status: 404, reason: "not found")
        }
    }

    /// Asset paths to asset names.
    static let assets = ["/": "index.html", "/index.html": "index.html", "/app.js": "app.js", "/style.css": "style.css"]

    /// `localhost`, an IPv4 literal or a bracketed IPv6 literal, with `port`.
    public static func isAcceptableHost(_ host: String, port: Int) -> Bool {
        guard let colon = host.lastIndex(of: ":"), host[host.index(after: colon)...] == Substring(String(port)) else { return false }
        let name = host[..<colon]
        if name.lowercased() == "localhost" { return true }
        if name.hasPrefix("[") && name.hasSuffix("]") {
            let inner = name.dropFirst().dropLast()
            return !inner.isEmpty && inner.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
        }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { part in part.count <= 3 && !part.isEmpty && part.allSatisfy(\.isASCIIDigitCharacter) && Int(part)! <= 255 }
    }

    /// The path and the decoded query parameters of a request target.
    public static func split(_ target: String) -> (path: String, query: [String: String]) {
        guard let mark = target.firstIndex(of: "?") else { return (target, [:]) }
        var query: [String: String] = [:]
        for pair in target[target.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let key = percentDecode(parts[0]) else { continue }
            query[key] = parts.count > 1 ? percentDecode(parts[1]) : ""
        }
        return (String(target[..<mark]), query)
    }

    /// Decodes `%XX` escapes and `+`; nil for a malformed escape or invalid UTF-8.
    public static func percentDecode(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"): bytes.append(0x20)
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(Hex.value), let low = iterator.next().flatMap(Hex.value) else { return nil }
                bytes.append(high << 4 | low)
            default: bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Compares without stopping at the first difference, so timing does not tell how much matched.
    public static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }

    /// Headers on every answer: nothing loaded from elsewhere, no inline script, no sniffing, no referrer.
    public static let securityHeaders: [(String, String)] = [
        (
            "Content-Security-Policy",
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        ),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Frame-Options", "DENY"),
        ("Cross-Origin-Resource-Policy", "same-origin"),
        ("Cache-Control", "no-store"),
    ]
}

extension Character {
    fileprivate var isASCIIDigitCharacter: Bool { isASCII && isNumber }
}
