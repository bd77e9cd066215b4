import LanchatDiscovery
import Testing

@Suite struct PeerAddressTests {
    @Test(arguments: [
        ("192.0.2.7", "192.0.2.7", PeerAddress.defaultPort),
        ("192.0.2.7:9000", "192.0.2.7", 9000),
        ("bob.example", "bob.example", PeerAddress.defaultPort),
        ("bob.example:1", "bob.example", 1),
        ("fe80::1%eth0", "fe80::1%eth0", PeerAddress.defaultPort),
        ("[fe80::1%eth0]:7000", "fe80::1%eth0", 7000),
        ("[2001:db8::5]", "2001:db8::5", PeerAddress.defaultPort),
    ])
    func parses(text: String, host: String, port: Int) throws {
        let address = try PeerAddress.parse(text).get()
        #expect(address == PeerAddress(host: host, port: port))
    }

    @Test(arguments: [
        "", "bad host", "h:0", "h:65536", "h:-1", "h:12a", "[fe80::1", "[fe80::1]7000", ":7000", "a/b", "a\u{1b}[2J",
        "é.example", String(repeating: "a", count: 256),
    ])
    func refusesWithAReason(text: String) {
        guard case .failure(let error) = PeerAddress.parse(text) else {
            Issue.record("'\(text)' was accepted")
            return
        }
        #expect(error.description.contains("is not HOST[:PORT]"))
        // What the person typed is echoed without control characters.
        #expect(!error.description.unicodeScalars.contains { $0.value < 0x20 })
    }

    @Test func printsBackWithBracketsForIPv6() {
        #expect(PeerAddress(host: "fe80::1", port: 7).description == "[fe80::1]:7")
        #expect(PeerAddress(host: "h", port: 7).description == "h:7")
    }
}
