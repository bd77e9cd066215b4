import CDNSSD
import Glibc

private func resolveReply(
    _ ref: DNSServiceRef?, _ flags: DNSServiceFlags, _ interfaceIndex: UInt32, _ error: DNSServiceErrorType,
    _ fullName: UnsafePointer<CChar>?, _ hostTarget: UnsafePointer<CChar>?, _ port: UInt16,
    _ txtLength: UInt16, _ txt: UnsafePointer<UInt8>?, _ context: UnsafeMutableRawPointer?
) {
    guard let context else { return }
    let box = Unmanaged<AnyObject>.fromOpaque(context).takeUnretainedValue() as! StreamContext<Result<ResolvedService, DNSSDError>>
    guard error == kDNSServiceErr_NoError, let hostTarget else {
        let status = error == 0 ? DNSServiceErrorType(kDNSServiceErr_Unknown) : error
        box.continuation.yield(.failure(DNSSDError(status: status, operation: "resolve")))
        box.continuation.finish()
        return
    }
    var host = String(cString: hostTarget)
    if host.hasSuffix(".") { host.removeLast() }
    let bytes = txt.map { Array(UnsafeBufferPointer(start: $0, count: Int(txtLength))) } ?? []
    box.continuation.yield(
        .success(
            ResolvedService(
                hostName: host, port: UInt16(bigEndian: port), txt: bytes, interfaceIndex: interfaceIndex)))
}

private func queryReply(
    _ ref: DNSServiceRef?, _ flags: DNSServiceFlags, _ interfaceIndex: UInt32, _ error: DNSServiceErrorType,
    _ fullName: UnsafePointer<CChar>?, _ rrtype: UInt16, _ rrclass: UInt16, _ rdlen: UInt16,
    _ rdata: UnsafeRawPointer?, _ ttl: UInt32, _ context: UnsafeMutableRawPointer?
) {
    guard let context else { return }
    let box = Unmanaged<AnyObject>.fromOpaque(context).takeUnretainedValue() as! StreamContext<String>
    guard error == kDNSServiceErr_NoError else {
        box.continuation.finish()
        return
    }
    guard flags & DNSServiceFlags(kDNSServiceFlagsAdd) != 0, let rdata else { return }
    if let text = formatAddress(rrtype: rrtype, rdata: UnsafeRawBufferPointer(start: rdata, count: Int(rdlen)), interfaceIndex: interfaceIndex) {
        box.continuation.yield(text)
    }
}

/// Formats an A or AAAA rdata as text; link-local IPv6 gets a `%interface` scope.
func formatAddress(rrtype: UInt16, rdata: UnsafeRawBufferPointer, interfaceIndex: UInt32) -> String? {
    let family: Int32
    switch (Int(rrtype), rdata.count) {
    case (kDNSServiceType_A, 4): family = AF_INET
    case (kDNSServiceType_AAAA, 16): family = AF_INET6
    default: return nil
    }
    var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    guard inet_ntop(family, rdata.baseAddress, &buffer, socklen_t(buffer.count)) != nil else { return nil }
    var text = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    if family == AF_INET6, rdata[0] == 0xfe, rdata[1] & 0xc0 == 0x80, interfaceIndex != 0 {
        var name = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        if if_indextoname(interfaceIndex, &name) != nil { text += "%" + name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } }
    }
    return text
}

extension DNSSD {
    /// Resolves an instance to host, port and TXT. The ref is closed after the first answer. (Avahi 0.8
    /// calls a never-set callback slot of every open Resolve or QueryRecord ref when avahi-daemon goes
    /// away, however short-lived the ref: `CAvahiZeroFill` makes that slot nil.)
    public static func resolve(_ instance: ServiceInstance, timeout: Duration = .seconds(5)) async throws(DNSSDError) -> ResolvedService {
        prepareEnvironment()
        let (stream, continuation) = AsyncStream<Result<ResolvedService, DNSSDError>>.makeStream()
        let driver = try await ServiceRefDriver.start(label: "resolve", context: StreamContext(continuation)) { refOut, ctx in
            DNSServiceResolve(refOut, 0, instance.interfaceIndex, instance.name, instance.type, instance.domain, resolveReply, ctx)
        }
        defer { driver.cancel() }
        // Unstructured: a timer that ends the stream this function iterates (a child task could not end
        // the loop below without a group around it); cancelled by the defer, so it lives no longer than the call.
        let timer = Task {
            try? await Task.sleep(for: timeout)
            continuation.finish()
        }
        defer { timer.cancel() }
        for await result in stream {
            continuation.finish()
            return try result.get()
        }
        throw DNSSDError(code: .timeout, operation: "resolve")
    }

    /// Looks up the IPv4 and IPv6 addresses of `hostName` (A and AAAA through `DNSServiceQueryRecord`).
    ///
    /// Avahi never says "no such record", so this waits at most `timeout` for a first address, then at
    /// most `settle` more for others, and returns what it has (possibly nothing).
    public static func queryAddresses(
        hostName: String, interfaceIndex: UInt32 = 0, timeout: Duration = .seconds(2), settle: Duration = .milliseconds(150)
    ) async throws(DNSSDError) -> [String] {
        prepareEnvironment()
        let (stream, continuation) = AsyncStream<String>.makeStream()
        // Both queries feed one stream; an error on either ends the lookup (Avahi only fails them when
        // the daemon is gone, and then the other query is dead too). They are created in parallel:
        // each create is a synchronous D-Bus round trip.
        let context = StreamContext(continuation)
        async let a = ServiceRefDriver.start(label: "query", context: context) { refOut, ctx in
            DNSServiceQueryRecord(refOut, 0, interfaceIndex, hostName, UInt16(kDNSServiceType_A), UInt16(kDNSServiceClass_IN), queryReply, ctx)
        }
        async let aaaa = ServiceRefDriver.start(label: "query", context: context) { refOut, ctx in
            DNSServiceQueryRecord(refOut, 0, interfaceIndex, hostName, UInt16(kDNSServiceType_AAAA), UInt16(kDNSServiceClass_IN), queryReply, ctx)
        }
        var drivers: [ServiceRefDriver] = []
        var failure: DNSSDError?
        do { drivers.append(try await a) } catch { failure = error as? DNSSDError ?? DNSSDError(code: .other, operation: "query") }
        do { drivers.append(try await aaaa) } catch { failure = failure ?? error as? DNSSDError ?? DNSSDError(code: .other, operation: "query") }
        defer { drivers.forEach { $0.cancel() } }
        if let failure { throw failure }
        // Unstructured: a timer that ends the stream this function iterates; cancelled by the defer, so it
        // lives no longer than the call.
        let timer = Task {
            try? await Task.sleep(for: timeout)
            continuation.finish()
        }
        defer { timer.cancel() }
        var settleTimer: Task<Void, Never>?
        defer { settleTimer?.cancel() }
        var addresses: [String] = []
        for await address in stream {
            if !addresses.contains(address) { addresses.append(address) }
            // Both families in: nothing more to wait for.
            if addresses.contains(where: { !$0.contains(":") }) && addresses.contains(where: { $0.contains(":") }) { break }
            if settleTimer == nil {
                // Unstructured: the settle timer, started inside the loop it ends; cancelled by the defer above.
                settleTimer = Task {
                    try? await Task.sleep(for: settle)
                    continuation.finish()
                }
            }
        }
        // IPv4 first, then global IPv6, then link-local: the order a connecting client should try.
        return addresses.sorted { rank($0) < rank($1) }
    }

    private static func rank(_ address: String) -> Int {
        if !address.contains(":") { return 0 }
        return address.lowercased().hasPrefix("fe80") ? 2 : 1
    }
}
