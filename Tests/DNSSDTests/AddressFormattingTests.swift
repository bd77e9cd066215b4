@testable import DNSSD
import CDNSSD
import Testing

@Suite struct AddressFormattingTests {
    @Test func formatsIPv4() {
        let bytes: [UInt8] = [198, 18, 0, 12]
        let text = bytes.withUnsafeBytes { formatAddress(rrtype: UInt16(kDNSServiceType_A), rdata: $0, interfaceIndex: 0) }
        #expect(text == "198.18.0.12")
    }

    @Test func formatsIPv6AndRejectsWrongLengths() {
        var bytes = [UInt8](repeating: 0, count: 16)
        bytes[0] = 0xfd; bytes[15] = 1
        #expect(bytes.withUnsafeBytes { formatAddress(rrtype: UInt16(kDNSServiceType_AAAA), rdata: $0, interfaceIndex: 0) } == "fd00::1")
        #expect([1, 2, 3].map(UInt8.init).withUnsafeBytes { formatAddress(rrtype: UInt16(kDNSServiceType_A), rdata: $0, interfaceIndex: 0) } == nil)
        #expect(bytes.withUnsafeBytes { formatAddress(rrtype: UInt16(kDNSServiceType_A), rdata: $0, interfaceIndex: 0) } == nil)
    }

    @Test func linkLocalGetsAScope() {
        var bytes = [UInt8](repeating: 0, count: 16)
        bytes[0] = 0xfe; bytes[1] = 0x80; bytes[15] = 1
        // Interface 1 is always the loopback in a Linux network namespace.
        #expect(bytes.withUnsafeBytes { formatAddress(rrtype: UInt16(kDNSServiceType_AAAA), rdata: $0, interfaceIndex: 1) } == "fe80::1%lo")
    }
}
