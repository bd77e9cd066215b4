import CDNSSD
import Dispatch
import Glibc

/// Owns one `DNSServiceRef` and drives it from a serial queue.
///
/// Avahi's compat library gives every ref its own blocking socket; `DNSServiceProcessResult` must be
/// called only when that socket is readable, and every call on the ref (process, update, deallocate)
/// must be serialised. This class does all of that on `queue`: a read source calls
/// `DNSServiceProcessResult` (which runs the C callbacks), and `cancel()` deallocates the ref only after
/// the source is cancelled, then releases the callback context.
///
/// `@unchecked Sendable`: `ref`, `source` and `state` are touched only on `queue`.
final class ServiceRefDriver: @unchecked Sendable {
    let queue: DispatchQueue
    private var ref: DNSServiceRef?
    private var source: DispatchSourceRead?
    private var context: Unmanaged<AnyObject>?
    private var cancelled = false

    private init(label: String) {
        self.queue = DispatchQueue(label: "lanchat.dnssd.\(label)")
    }

    /// Creates the ref on its own queue (the create calls make synchronous D-Bus round trips, so they
    /// must stay off caller threads such as NIO event loops and the cooperative pool).
    ///
    /// - Parameters:
    ///   - context: retained until the driver is cancelled; passed to the C callback as its context.
    ///   - create: calls the dns_sd create function with the out-pointer and the context pointer.
    static func start(
        label: String,
        context: AnyObject,
        _ create: @escaping @Sendable (UnsafeMutablePointer<DNSServiceRef?>, UnsafeMutableRawPointer) -> DNSServiceErrorType
    ) async throws(DNSSDError) -> ServiceRefDriver {
        let driver = ServiceRefDriver(label: label)
        // Unmanaged is not Sendable; it is handed to the driver's queue once and used only there.
        let unmanaged = UncheckedSendable(Unmanaged<AnyObject>.passRetained(context))
        let status: DNSServiceErrorType = await withCheckedContinuation { continuation in
            driver.queue.async {
                var newRef: DNSServiceRef?
                let status = create(&newRef, unmanaged.value.toOpaque())
                if status == kDNSServiceErr_NoError, let newRef {
                    driver.ref = newRef
                    driver.context = unmanaged.value
                    driver.installReadSource()
                } else {
                    if let newRef { DNSServiceRefDeallocate(newRef) }
                    unmanaged.value.release()
                }
                continuation.resume(returning: status)
            }
        }
        guard status == kDNSServiceErr_NoError else {
            throw DNSSDError(status: status, operation: label)
        }
        return driver
    }

    private func installReadSource() {
        guard let ref else { return }
        let fd = DNSServiceRefSockFD(ref)
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler { [weak self] in
            guard let self, !self.cancelled, let ref = self.ref else { return }
            let status = DNSServiceProcessResult(ref)
            if status != kDNSServiceErr_NoError {
                // The connection to the daemon is broken; stop reading so we do not spin on a dead fd.
                // The owner learns of it through the callback (Avahi reports -65537 there) or its timeout.
                self.source?.suspend()
                self.sourceSuspended = true
            }
        }
        // Strong on purpose: cancel() is asynchronous, so the driver's owners may all be gone by the
        // time this runs, and the ref (a thread and a D-Bus connection in Avahi) must still be freed.
        // Dispatch drops the handler after running it, which ends the cycle.
        source.setCancelHandler { self.releaseRef() }
        self.source = source
        source.resume()
    }

    private var sourceSuspended = false
    private var closeWaiters: [CheckedContinuation<Void, Never>] = []
    private var released = false

    /// On `queue`: frees the ref (Avahi withdraws what it registered) and the callback context.
    private func releaseRef() {
        if let ref { DNSServiceRefDeallocate(ref) }
        ref = nil
        context?.release()
        context = nil
        released = true
        let waiters = closeWaiters
        closeWaiters = []
        waiters.forEach { $0.resume() }
    }

    /// Runs `body` with the live ref on the driver's queue. Throws `daemonUnavailable` if cancelled.
    func withRef<T: Sendable>(
        operation: String,
        _ body: @escaping @Sendable (DNSServiceRef) -> T
    ) async throws(DNSSDError) -> T {
        let result: T? = await withCheckedContinuation { continuation in
            queue.async {
                guard !self.cancelled, let ref = self.ref else {
                    continuation.resume(returning: nil)
                    return
                }
                continuation.resume(returning: body(ref))
            }
        }
        guard let result else { throw DNSSDError(code: .daemonUnavailable, operation: operation) }
        return result
    }

    /// Stops the operation and frees the ref. Safe to call more than once, from any thread,
    /// including from inside a callback (the work is queued after it).
    func cancel() {
        queue.async { self.cancelOnQueue() }
    }

    /// Cancels and returns once the ref is deallocated (for a registration: once Avahi has been told
    /// to withdraw it), so a daemon that exits right after still sends its goodbye.
    func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                if self.released {
                    continuation.resume()
                } else {
                    self.closeWaiters.append(continuation)
                    self.cancelOnQueue()
                }
            }
        }
    }

    private func cancelOnQueue() {
        guard !cancelled else { return }
        cancelled = true
        if let source {
            // A suspended source must be resumed before it can be cancelled; its cancel handler frees the ref.
            if sourceSuspended { source.resume(); sourceSuspended = false }
            source.cancel()
            self.source = nil
        } else {
            releaseRef()
        }
    }
}

/// Carries a non-Sendable value across one queue hop that the caller knows is exclusive.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// The context a C callback receives: where it sends what it reports.
/// `@unchecked Sendable`: it only yields to a continuation, which is thread-safe.
final class StreamContext<Element: Sendable>: @unchecked Sendable {
    let continuation: AsyncStream<Element>.Continuation
    init(_ continuation: AsyncStream<Element>.Continuation) { self.continuation = continuation }
}
