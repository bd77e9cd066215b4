import CDNSSD
import Glibc

/// What happens to a registered service.
public enum RegistrationEvent: Equatable, Sendable {
    /// The service is published under `name` (which may differ from the requested name after a
    /// conflict with another host: Avahi renames to "name #2" and reports it here, a second or two later).
    case registered(name: String)
    /// The registration is dead (typically `daemonUnavailable` when avahi-daemon stops). Register again.
    case failed(DNSSDError)
}

private func registerReply(
    _ ref: DNSServiceRef?, _ flags: DNSServiceFlags, _ error: DNSServiceErrorType,
    _ name: UnsafePointer<CChar>?, _ type: UnsafePointer<CChar>?, _ domain: UnsafePointer<CChar>?,
    _ context: UnsafeMutableRawPointer?
) {
    guard let context else { return }
    let box = Unmanaged<AnyObject>.fromOpaque(context).takeUnretainedValue() as! StreamContext<RegistrationEvent>
    if error == kDNSServiceErr_NoError, let name {
        box.continuation.yield(.registered(name: String(cString: name)))
    } else {
        box.continuation.yield(.failed(DNSSDError(status: error == 0 ? DNSServiceErrorType(kDNSServiceErr_Unknown) : error, operation: "register")))
        box.continuation.finish()
    }
}

/// A published service. Keep it alive as long as the service should be visible; `cancel()` withdraws
/// it (Avahi sends goodbye packets).
public final class ServiceRegistration: Sendable {
    private let driver: ServiceRefDriver
    /// Events for this registration; finishes after `.failed` or `cancel()`.
    public let events: AsyncStream<RegistrationEvent>
    private let continuation: AsyncStream<RegistrationEvent>.Continuation

    init(driver: ServiceRefDriver, events: AsyncStream<RegistrationEvent>, continuation: AsyncStream<RegistrationEvent>.Continuation) {
        self.driver = driver
        self.events = events
        self.continuation = continuation
    }

    /// Replaces the primary TXT record (the only record Avahi's compat layer can update).
    public func updateTXT(_ txt: [UInt8]) async throws(DNSSDError) {
        guard txt.count <= TXTRecord.maximumRecordLength else {
            throw DNSSDError(code: .badParameter, operation: "update TXT")
        }
        let bytes = txt.isEmpty ? [0] : txt
        let status = try await driver.withRef(operation: "update TXT") { ref in
            bytes.withUnsafeBytes { raw in
                DNSServiceUpdateRecord(ref, nil, 0, UInt16(raw.count), raw.baseAddress, 0)
            }
        }
        if status != kDNSServiceErr_NoError { throw DNSSDError(status: status, operation: "update TXT") }
    }

    /// Withdraws the service.
    public func cancel() {
        driver.cancel()
        continuation.finish()
    }

    /// Withdraws the service and waits until Avahi has been told.
    public func close() async {
        continuation.finish()
        await driver.close()
    }
}

extension DNSSD {
    /// Publishes a service.
    ///
    /// - Parameters:
    ///   - name: instance name (a DNS label of at most 63 bytes of UTF-8).
    ///   - type: e.g. `_chat-service._tcp`.
    ///   - port: host byte order.
    ///   - txt: an encoded TXT record (`TXTRecord.encode`).
    ///   - interfaceIndex: 0 for all interfaces.
    /// - Throws: `nameConflict` at once if this host's avahi-daemon already has the name,
    ///   `daemonUnavailable` if avahi-daemon is not reachable.
    public static func register(
        name: String, type: String, domain: String? = nil, port: UInt16, txt: [UInt8], interfaceIndex: UInt32 = 0
    ) async throws(DNSSDError) -> ServiceRegistration {
        guard !name.isEmpty, name.utf8.count <= 63 else { throw DNSSDError(code: .badParameter, operation: "register") }
        guard txt.count <= TXTRecord.maximumRecordLength else { throw DNSSDError(code: .badParameter, operation: "register") }
        prepareEnvironment()
        let (events, continuation) = AsyncStream<RegistrationEvent>.makeStream()
        let context = StreamContext(continuation)
        let txtBytes = txt
        let driver = try await ServiceRefDriver.start(label: "register", context: context) { refOut, ctx in
            txtBytes.withUnsafeBytes { raw in
                DNSServiceRegister(
                    refOut, 0, interfaceIndex, name, type, domain, nil, port.bigEndian,
                    UInt16(raw.count), raw.count == 0 ? nil : raw.baseAddress, registerReply, ctx)
            }
        }
        return ServiceRegistration(driver: driver, events: events, continuation: continuation)
    }
}
