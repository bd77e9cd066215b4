import Glibc

/// Files that must survive a power loss once written. On Linux a file's bytes are durable after
/// `fsync` of the file, but a new name for it (a rename or a link) only after `fsync` of its directory.
public enum DurableFile {
    /// Replaces `path` with `bytes`: a fresh temporary file (mode 0600), synced, renamed over `path`,
    /// then the directory synced. Throws the reason (strerror) if any step fails; `path` is then
    /// unchanged and the temporary file removed.
    public static func replace(_ path: String, with bytes: [UInt8]) throws(Failure) {
        let temp = path + ".tmp.\(getpid())"
        unlink(temp)
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure(reason: String(cString: strerror(errno))) }
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        let error = errno
        close(fd)
        guard written == bytes.count, synced else {
            unlink(temp)
            throw Failure(reason: written == bytes.count ? String(cString: strerror(error)) : "short write")
        }
        guard rename(temp, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temp)
            throw Failure(reason: reason)
        }
        guard syncDirectory(containing: path) else { throw Failure(reason: "cannot sync the directory: " + String(cString: strerror(errno))) }
    }

    /// Syncs the directory that holds `path`, so that a name just created in it (rename, link) is on
    /// disk. Returns whether it worked.
    @discardableResult
    public static func syncDirectory(containing path: String) -> Bool {
        let directory: String
        if let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) {
            directory = slash == path.utf8.startIndex ? "/" : String(path[..<slash])
        } else {
            directory = "."
        }
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return fsync(fd) == 0
    }

    public struct Failure: Error, Equatable {
        public let reason: String
    }
}
