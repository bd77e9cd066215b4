import FoundationEssentials
import Glibc

// What the client needs from the system, written on Glibc so that it links FoundationEssentials only:
// Foundation itself brings ICU's data (about 35 MB of the package) for locales the client never uses.

/// Standard output or standard error: whole writes, retried after a signal or a short write.
struct StandardStream: Sendable {
    static let output = StandardStream(fd: 1)
    static let error = StandardStream(fd: 2)
    let fd: Int32

    func write(_ data: Data) {
        data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { return }
                offset += n
            }
        }
    }

    /// Standard input to its end (a message body given on stdin).
    static func readInput() -> Data {
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return data }
            data.append(contentsOf: chunk[..<n])
        }
    }
}

/// Runs `body` on a thread of its own (a blocking read of a socket or stdin), detached; the client
/// cannot go on without it (`fail` if it cannot start).
func startThread(_ body: @escaping @Sendable () -> Void) {
    guard let error = tryStartThread(body) else { return }
    fail("cannot start a thread: \(String(cString: strerror(error)))")
}

/// `startThread` that says why it could not start (an errno), or nil.
func tryStartThread(_ body: @escaping @Sendable () -> Void) -> Int32? {
    final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(
        &thread, nil,
        { context in
            let box = Unmanaged<AnyObject>.fromOpaque(context!).takeRetainedValue() as! Box
            box.body()
            return nil
        }, context)
    guard result == 0 else {
        Unmanaged<AnyObject>.fromOpaque(context).release()
        return result
    }
    pthread_detach(thread)
    return nil
}

/// A lock that can give up after a while (`lock(within:)`), which a Mutex cannot.
// @unchecked: the mutex is only used through pthread's calls, which are thread-safe.
final class TimedLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init() { pthread_mutex_init(mutex, nil) }
    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }

    /// Takes the lock unless `seconds` pass first (false then).
    func lock(within seconds: Int) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        deadline.tv_sec += seconds
        while true {
            let result = pthread_mutex_timedlock(mutex, &deadline)
            if result == 0 { return true }
            if result != EINTR { return false }
        }
    }
}

/// Starts `argv` (found on PATH), with `/dev/null` as its output and errors if `quiet`; its pid, or nil.
func spawn(_ argv: [String], quiet: Bool) -> pid_t? {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if quiet {
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    }
    let pointers = argv.map { strdup($0) } + [nil]
    defer { for pointer in pointers { free(pointer) } }
    var pid = pid_t()
    guard posix_spawnp(&pid, argv[0], &actions, nil, pointers, environ) == 0 else { return nil }
    return pid
}

/// Waits for `pid` to end; its exit status (as `waitpid` gives it).
@discardableResult
func waitFor(_ pid: pid_t) -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0, errno == EINTR {}
    return status
}

/// Starts `path` with `arguments`, its output and errors thrown away, and does not wait for it: a shell
/// starts it in the background and exits at once (the tool is then init's child, never our zombie), and
/// that shell is collected on a short-lived thread. Failures are ignored: nothing depends on it.
func spawnDetached(_ path: String, _ arguments: [String]) {
    // (The arguments reach the tool as the shell's positional parameters, never as shell text.)
    guard let pid = spawn(["/bin/sh", "-c", "\"$0\" \"$@\" &", path] + arguments, quiet: true) else { return }
    _ = tryStartThread { [pid] in waitFor(pid) }
}

/// `text` with each `target` scalar replaced by `replacement` (by Unicode scalars: a "\r\n" is one
/// Character, which a Character-wise replace of "\n" would not find).
func replacingScalar(_ target: Unicode.Scalar, with replacement: String, in text: String) -> String {
    var result = String.UnicodeScalarView()
    for scalar in text.unicodeScalars {
        if scalar == target { result.append(contentsOf: replacement.unicodeScalars) } else { result.append(scalar) }
    }
    return String(result)
}

extension StringProtocol {
    /// Without the spaces and tabs at either end.
    func trimmingBlanks() -> String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0.unicodeScalars.allSatisfy { $0.properties.generalCategory == .spaceSeparator } }
        guard let first = firstIndex(where: { !blank($0) }), let last = lastIndex(where: { !blank($0) }) else { return "" }
        return String(self[first...last])
    }

    /// Filled with spaces on the right up to `width` characters (never cut).
    func padded(to width: Int) -> String {
        count >= width ? String(self) : String(self) + String(repeating: " ", count: width - count)
    }
}
