import CDNSSD
import Glibc

/// What a browse reports. The same instance may be reported more than once (once per interface and
/// address family); `ServiceBrowser` passes every report on, and callers de-duplicate by `key`.
public enum BrowseEvent: Equatable, Sendable {
    case added(ServiceInstance)
    case removed(ServiceInstance)
    /// The browse is dead (typically `daemonUnavailable` when avahi-daemon stops). Browse again.
    case failed(DNSSDError)
}

private func browseReply(
    _ ref: DNSServiceRef?, _ flags: DNSServiceFlags, _ interfaceIndex: UInt32, _ error: DNSServiceErrorType,
    _ name: UnsafePointer<CChar>?, _ type: UnsafePointer<CChar>?, _ domain: UnsafePointer<CChar>?,
    _ context: UnsafeMutableRawPointer?
) {
    guard let context else { return }
    let box = Unmanaged<AnyObject>.fromOpaque(context).takeUnretainedValue() as! StreamContext<BrowseEvent>
    // Avahi reports a dying daemon with an error and NULL name pointers.
    guard error == kDNSServiceErr_NoError, let name, let type, let domain else {
        let status = error == 0 ? DNSServiceErrorType(kDNSServiceErr_Unknown) : error
        box.continuation.yield(.failed(DNSSDError(status: status, operation: "browse")))
        box.continuation.finish()
        return
    }
    let instance = ServiceInstance(
        name: String(decoding: UnsafeRawBufferPointer(start: name, count: strlen(name)), as: UTF8.self),
        type: String(cString: type), domain: String(cString: domain), interfaceIndex: interfaceIndex)
    if flags & DNSServiceFlags(kDNSServiceFlagsAdd) != 0 {
        box.continuation.yield(.added(instance))
    } else {
        box.continuation.yield(.removed(instance))
    }
}

/// A running browse. `cancel()` stops it.
public final class ServiceBrowser: Sendable {
    private let driver: ServiceRefDriver
    public let events: AsyncStream<BrowseEvent>
    private let continuation: AsyncStream<BrowseEvent>.Continuation

    init(driver: ServiceRefDriver, events: AsyncStream<BrowseEvent>, continuation: AsyncStream<BrowseEvent>.Continuation) {
        self.driver = driver
        self.events = events
        self.continuation = continuation
    }

    public func cancel() {
        driver.cancel()
        continuation.finish()
    }
}

extension DNSSD {
    /// Browses for instances of `type` (e.g. `_chat-service._tcp`). Your own service shows up too.
    public static func browse(type: String, domain: String? = nil, interfaceIndex: UInt32 = 0) async throws(DNSSDError) -> ServiceBrowser {
        prepareEnvironment()
        let (events, continuation) = AsyncStream<BrowseEvent>.makeStream()
        let driver = try await ServiceRefDriver.start(label: "browse", context: StreamContext(continuation)) { refOut, ctx in
            DNSServiceBrowse(refOut, 0, interfaceIndex, type, domain, browseReply, ctx)
        }
        return ServiceBrowser(driver: driver, events: events, continuation: continuation)
    }
}
