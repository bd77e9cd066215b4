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
