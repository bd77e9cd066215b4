import Glibc

/// Joins two path components with exactly one `/` between them.
public func joinPath(_ directory: String, _ name: String) -> String {
    var base = Substring(directory)
    while base.count > 1, base.hasSuffix("/") { base = base.dropLast() }
    var tail = Substring(name)
    while tail.hasPrefix("/") { tail = tail.dropFirst() }
    if base.isEmpty { return String(tail) }
    return base == "/" ? "/" + tail : base + "/" + tail
}

/// The directory part of a path (`"."` for a bare name, `"/"` for a file at the root).
public func parentDirectory(of path: String) -> String {
    var trimmed = Substring(path)
    while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
    guard let slash = trimmed.lastIndex(of: "/") else { return "." }
    return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
}

/// The message for an `errno` value.
public func errnoDescription(_ code: Int32) -> String {
    String(cString: strerror(code))
}

/// Connects a new stream socket to the Unix socket at `path`.
/// - Returns: the connected descriptor (close-on-exec), or the `errno` of the failure
///   (`ENAMETOOLONG` when the path does not fit in `sun_path`).
public func connectUnixSocket(path: String, type: Int32 = Int32(SOCK_STREAM.rawValue)) -> Result<Int32, UnixSocketError> {
    guard var address = unixSocketAddress(path) else { return .failure(UnixSocketError(code: ENAMETOOLONG)) }
    let fd = socket(AF_UNIX, type | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return .failure(UnixSocketError(code: errno)) }
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard result == 0 else {
        let code = errno
        close(fd)
        return .failure(UnixSocketError(code: code))
    }
    return .success(fd)
}

public struct UnixSocketError: Error, Equatable {
    public let code: Int32
}

/// The address of the Unix socket at `path`, or `nil` when the path does not fit in `sun_path`.
public func unixSocketAddress(_ path: String) -> sockaddr_un? {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    return address
}
