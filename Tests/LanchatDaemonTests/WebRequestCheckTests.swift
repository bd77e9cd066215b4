import LanchatControl
import Testing

@testable import LanchatDaemon

@Suite struct WebRequestCheckTests {
    private let token = String(repeating: "ab", count: 32)
    private var check: WebRequestCheck { WebRequestCheck(port: 8080, token: token) }
    private let host = ("Host", "127.0.0.1:8080")

    @Test func theAssetsNeedNoTokenButTheRightHost() {
        #expect(check.check(method: "GET", target: "/", headers: [host]) == .allowed(.asset("index.html")))
        #expect(check.check(method: "GET", target: "/app.js", headers: [("host", "localhost:8080")]) == .allowed(.asset("app.js")))
        #expect(check.check(method: "HEAD", target: "/style.css", headers: [("HOST", "[::1]:8080")]) == .allowed(.asset("style.css")))
    }

    @Test func everythingElseNeedsTheTokenInAHeaderOrTheQuery() {
        #expect(
            check.check(method: "GET", target: "/ws", headers: [host])
                == .refused(status: 403, reason: "refused: no valid token (open the URL that `lanchat web` prints)"))
        #expect(check.check(method: "GET", target: "/ws?token=\(token)", headers: [host]) == .allowed(.socket))
        #expect(check.check(method: "GET", target: "/ws?token=\(token.dropLast())0", headers: [host]).isRefused(403))
        #expect(check.check(method: "GET", target: "/ws?token=\(token)x", headers: [host]).isRefused(403))
        #expect(
            check.check(method: "POST", target: "/upload?name=a%20b.png", headers: [host, ("X-Lanchat-Token", token)]) == .allowed(.upload(name: "a b.png", count: 1)))
        #expect(check.check(method: "GET", target: "/file?path=%2Ftmp%2Fx", headers: [host, ("Authorization", "Bearer \(token)")]) == .allowed(.file(path: "/tmp/x")))
        #expect(check.check(method: "GET", target: "/file?path=%2Ftmp%2Fx", headers: [host, ("Authorization", "Basic \(token)")]).isRefused(403))
        #expect(check.check(method: "GET", target: "/nothing?token=\(token)", headers: [host]).isRefused(404))
        #expect(check.check(method: "POST", target: "/upload?name=x&count=65&token=\(token)", headers: [host]).isRefused(400))
        #expect(check.check(method: "GET", target: "/file?path=relative&token=\(token)", headers: [host]).isRefused(400))
    }

    @Test func aForeignOrRebindingHostIsRefused() {
        for value in ["evil.example:8080", "127.0.0.1:8081", "127.0.0.1", "localhost", "127.0.0.1.nip.io:8080", "1.2.3:8080", "256.1.1.1:8080", "[]:8080"] {
            #expect(check.check(method: "GET", target: "/", headers: [("Host", value)]).isRefused(403), "\(value)")
        }
        #expect(check.check(method: "GET", target: "/", headers: []).isRefused(403))
        #expect(check.check(method: "GET", target: "/", headers: [host, host]).isRefused(403))
        #expect(WebRequestCheck.isAcceptableHost("192.168.1.20:8080", port: 8080))
        #expect(WebRequestCheck.isAcceptableHost("LOCALHOST:8080", port: 8080))
    }

    @Test func aForeignOriginIsRefusedAndTheSameOneAllowed() {
        let ws = "/ws?token=\(token)"
        #expect(check.check(method: "GET", target: ws, headers: [host, ("Origin", "http://127.0.0.1:8080")]) == .allowed(.socket))
        for origin in ["http://evil.example", "null", "http://localhost:8080", "https://127.0.0.1:8080", "http://127.0.0.1:8080/"] {
            #expect(check.check(method: "GET", target: ws, headers: [host, ("Origin", origin)]).isRefused(403), "\(origin)")
        }
        #expect(check.check(method: "GET", target: ws, headers: [host, ("Origin", "http://127.0.0.1:8080"), ("Origin", "http://127.0.0.1:8080")]).isRefused(403))
    }

    @Test func aLongTargetIsRefusedBeforeAnythingElse() {
        let long = "/" + String(repeating: "a", count: 5000)
        #expect(check.check(method: "GET", target: long, headers: [host]) == .refused(status: 414, reason: "request target too long"))
    }

    @Test func queriesAreDecodedStrictly() {
        #expect(WebRequestCheck.split("/a?x=1&y=%2F%20+z&flag").query == ["x": "1", "y": "/  z", "flag": ""])
        #expect(WebRequestCheck.percentDecode("%zz") == nil)
        #expect(WebRequestCheck.percentDecode("%ff") == nil)
        #expect(WebRequestCheck.percentDecode("%C3%A9") == "é")
    }

    @Test func noAnswerAllowsOtherOrigins() {
        let names = WebRequestCheck.securityHeaders.map { $0.0.lowercased() }
        #expect(!names.contains { $0.hasPrefix("access-control-") })
        let csp = WebRequestCheck.securityHeaders.first { $0.0 == "Content-Security-Policy" }?.1 ?? ""
        #expect(csp.hasPrefix("default-src 'self'") && csp.contains("connect-src 'self'") && !csp.contains("unsafe"))
        #expect(names.contains("x-content-type-options") && names.contains("referrer-policy"))
    }

    @Test func theTokenIs32RandomBytesInHex() {
        let a = WebAccess.newToken()
        let b = WebAccess.newToken()
        #expect(a.utf8.count == 64 && a.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        #expect(a != b)
        #expect(WebAccess(address: "127.0.0.1", port: 8080, token: a).url == "http://127.0.0.1:8080/#token=\(a)")
        #expect(WebAccess(address: "::1", port: 8080, token: a).url == "http://[::1]:8080/#token=\(a)")
    }
}

@Suite struct WebConfigurationTests {
    @Test func addressesAndPortsParse() {
        #expect(WebConfiguration.parse("8080") == WebConfiguration(port: 8080))
        #expect(WebConfiguration.parse("127.0.0.1:8080") == WebConfiguration(address: "127.0.0.1", port: 8080))
        #expect(WebConfiguration.parse("[::1]:9000") == WebConfiguration(address: "::1", port: 9000))
        #expect(WebConfiguration.parse("0.0.0.0:80")?.isLoopback == false)
        #expect(WebConfiguration.parse("8080")?.isLoopback == true)
        #expect(WebConfiguration.parse("localhost:8080") == WebConfiguration(address: "127.0.0.1", port: 8080))
        for bad in ["", "x", "65536", "-1", "1.2.3.4:", ":80", "a:b:80", "[::1]80", "80 ", "host/x:80", "123456", "127.example.com:80", "lan.local:80"] {
            #expect(WebConfiguration.parse(bad) == nil, "\(bad)")
        }
    }

    @Test func theDaemonTakesItFromTheFileOrFlag() throws {
        var configuration = DaemonConfiguration.defaults(environment: [:], userName: "u", hostName: "h")
        #expect(configuration.web == nil)
        try configuration.apply(key: "web", value: "8080")
        #expect(configuration.web?.port == 8080 && configuration.web?.address == "127.0.0.1")
        #expect(throws: DaemonConfiguration.Error.self) { try configuration.apply(key: "web", value: "nope") }
    }
}

@Suite struct ImageSnifferTests {
    @Test func onlyPNGJPEGGIFAndWebPAreImages() {
        #expect(ImageSniffer.imageType([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0]) == "image/png")
        #expect(ImageSniffer.imageType([0xff, 0xd8, 0xff, 0xe0]) == "image/jpeg")
        #expect(ImageSniffer.imageType(Array("GIF89a....".utf8)) == "image/gif")
        #expect(ImageSniffer.imageType(Array("RIFF\u{0}\u{0}\u{0}\u{0}WEBPVP8 ".utf8)) == "image/webp")
        #expect(ImageSniffer.imageType(Array("RIFF\u{0}\u{0}\u{0}\u{0}WAVEfmt ".utf8)) == nil)
        #expect(ImageSniffer.imageType(Array("<svg xmlns=".utf8)) == nil)
        #expect(ImageSniffer.imageType(Array("<html><img src=x>".utf8)) == nil)
        #expect(ImageSniffer.imageType([0x89, 0x50, 0x4e]) == nil)
        #expect(ImageSniffer.imageType([UInt8]()) == nil)
    }

    @Test func uploadNamesKeepOnlyTheLastComponentWithoutControlCharacters() {
        #expect(WebServer.safeName("../../etc/passwd") == "passwd")
        #expect(WebServer.safeName("a\u{1}b\nc.png") == "abc.png")
        #expect(WebServer.safeName("..") == "")
        #expect(WebServer.safeName("/") == "")
        #expect(WebServer.safeName("photo.jpg") == "photo.jpg")
        #expect(WebServer.safeName(String(repeating: "é", count: 150)) == String(repeating: "é", count: 100))
    }
}

extension WebRequestCheck.Outcome {
    fileprivate func isRefused(_ status: Int) -> Bool {
        if case .refused(let got, _) = self { return got == status }
        return false
    }
}
