import Glibc
import Testing

/// Guards Sources/CAvahiZeroFill: Avahi 0.8's dns_sd layer calls a callback slot of a Resolve or
/// QueryRecord ref that it never set when avahi-daemon goes away; our avahi_malloc (zero-filled) must be
/// the one the process uses, or that slot holds stale heap memory again (a crash on an Avahi restart).
@Suite struct AvahiZeroFillTests {
    @Test func theProcessUsesOurZeroFilledAvahiMalloc() throws {
        let symbol = try #require(dlsym(nil, "avahi_malloc"), "avahi_malloc is not in the process")
        let file = try #require(mappedFile(containing: UInt(bitPattern: symbol)), "no mapping holds avahi_malloc")
        #expect(!file.contains("libavahi"), "avahi_malloc comes from \(file), not from CAvahiZeroFill")
        typealias Allocate = @convention(c) (Int) -> UnsafeMutableRawPointer?
        let allocate = unsafeBitCast(symbol, to: Allocate.self)
        // A block written over and freed, then one of the same size: zero-filled whatever malloc reuses.
        for _ in 0..<8 {
            let dirty = try #require(malloc(248))
            memset(dirty, 0xAA, 248)
            free(dirty)
            let block = try #require(allocate(248))
            let bytes = UnsafeRawBufferPointer(start: block, count: 248)
            #expect(bytes.allSatisfy { $0 == 0 })
            free(block)
        }
        #expect(allocate(0) == nil)
    }

    /// The file mapped at `address` in this process (/proc/self/maps).
    private func mappedFile(containing address: UInt) -> String? {
        guard let maps = fopen("/proc/self/maps", "r") else { return nil }
        defer { fclose(maps) }
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, Int32(line.count), maps) != nil {
            let fields = String(cString: line).split(separator: " ", omittingEmptySubsequences: true)
            let range = fields.first?.split(separator: "-").compactMap { UInt($0, radix: 16) } ?? []
            guard range.count == 2, range[0] <= address, address < range[1] else { continue }
            return fields.count >= 6 ? String(fields[5].filter { $0 != "\n" }) : "(anonymous)"
        }
        return nil
    }
}
