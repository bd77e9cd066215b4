import FoundationEssentials
import Glibc
import LanchatControl

/// Prepares the control socket's directory and path so that only the owner (or a configured group)
/// can connect: the directory is 0700 (0750 with a group) and the socket 0600 (0660).
enum ControlSocket {
    struct SetupError: Error, CustomStringConvertible {
        let description: String
    }

    /// Creates the directory if needed and removes a stale socket. Refuses to start if another daemon
    /// answers on the path.
    static func prepare(path: String, group: gid_t?) throws(SetupError) {
        let directory = parentDirectory(of: path)
        var info = stat()
        if stat(directory, &info) != 0 {
            do {
                try FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: group == nil ? 0o700 : 0o750])
            } catch {
                throw SetupError(description: "cannot create the socket directory \(directory): \(error)")
            }
            if let group { chown(directory, getuid(), group) }
        }
        if lstat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFSOCK else {
                throw SetupError(description: "\(path) exists and is not a socket; refusing to replace it")
            }
            if isAnswering(path: path) {
                throw SetupError(description: "another lanchatd is already running on \(path)")
            }
            unlink(path)
        }
    }

    /// Sets the socket's mode (and group) after bind.
    static func restrict(path: String, group: gid_t?) throws(SetupError) {
        if let group {
            guard chown(path, getuid(), group) == 0 else {
                throw SetupError(description: "cannot give \(path) to group \(group): \(String(cString: strerror(errno)))")
            }
        }
        guard chmod(path, group == nil ? 0o600 : 0o660) == 0 else {
            throw SetupError(description: "cannot set the mode of \(path): \(String(cString: strerror(errno)))")
        }
    }

    static func groupID(named name: String) throws(SetupError) -> gid_t {
        guard let entry = getgrnam(name) else { throw SetupError(description: "socket-group: no group named '\(name)'") }
        return entry.pointee.gr_gid
    }

    private static func isAnswering(path: String) -> Bool {
        guard case .success(let fd) = connectUnixSocket(path: path) else { return false }
        close(fd)
        return true
    }
}
