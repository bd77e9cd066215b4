import Glibc

/// A directory received bytes are written to (the download directory, or the state directory's
/// `incoming` for history): created with its parents, and checked before every transfer so that a
/// problem is reported as what it is ("cannot use the download directory /x: Permission denied"), never
/// as a lack of free space.
public struct StorageDirectory: Sendable, Equatable {
    /// What the directory is for, as people read it ("the download directory").
    public let role: String
    public let path: String
    /// Mode of the directory itself when this creates it (parents get 0700 under lanchatd's umask).
    public let mode: mode_t

    public init(role: String, path: String, mode: mode_t = 0o700) {
        self.role = role
        self.path = path
        self.mode = mode
    }

    /// The outcome of a check: the bytes free for an unprivileged writer, or why it cannot be used.
    public enum Status: Sendable, Equatable {
        case usable(freeBytes: UInt64)
        case unusable(String)

        public var problem: String? {
            if case .unusable(let text) = self { return text }
            return nil
        }
    }

    /// Creates the directory (and its parents) if missing, then checks that it is a directory this
    /// process may write in, and how much room it has.
    public func prepare() -> Status {
        var info = stat()
        if stat(path, &info) != 0 {
            guard errno == ENOENT else { return unusable(errno) }
            if let failure = makeDirectories() { return unusable(failure) }
            guard stat(path, &info) == 0 else { return unusable(errno) }
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else { return unusable(ENOTDIR) }
        guard access(path, W_OK | X_OK) == 0 else { return unusable(errno) }
        var space = statvfs()
        guard statvfs(path, &space) == 0 else { return unusable(errno) }
        return .usable(freeBytes: UInt64(space.f_bavail) &* UInt64(space.f_frsize))
    }

    private func unusable(_ code: Int32) -> Status {
        .unusable("cannot use \(role) \(path): \(String(cString: strerror(code)))")
    }

    /// `mkdir -p`: returns the errno of the first step that failed, or `nil`.
    private func makeDirectories() -> Int32? {
        var prefix = path.hasPrefix("/") ? "" : "."
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        for (index, part) in parts.enumerated() {
            prefix += "/" + part
            let isLast = index == parts.count - 1
            if mkdir(prefix, isLast ? mode : 0o700) == 0 {
                // umask may have taken bits the caller asked for (the group's r-x for the system service).
                if isLast { chmod(prefix, mode) }
                continue
            }
            let code = errno
            guard code == EEXIST else { return code }
            var info = stat()
            guard stat(prefix, &info) == 0 else { return errno }
            guard (info.st_mode & S_IFMT) == S_IFDIR else { return ENOTDIR }
        }
        return nil
    }
}
