import ArgumentParser
import FoundationEssentials
import Glibc
import LanchatControl

struct Web: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the address of the browser UI, with its token (lanchatd must run with --web).",
        discussion: "Open the URL in a browser on this host. Whoever may use the control socket may read it; nobody else should see it.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print JSON (url, token, address, port).") var json = false
    @Flag(help: "Also open the page in a browser (xdg-open, through a file only you can read: never the token on a command line).")
    var open = false

    func run() throws {
        let socket = global.socketPath
        // The daemon must be there: a file left by one that crashed would give a dead address.
        _ = try global.connect()
        let path = WebAccess.filePath(forControlSocket: socket)
        guard let bytes = Self.read(path) else {
            if errno == EACCES { fail("cannot read \(path): permission denied (it is readable by those who may use the control socket)") }
            fail("lanchatd runs without the browser UI: start it with --web 8080 (or `web = 8080` in its config file)")
        }
        let access: WebAccess
        do { access = try ControlJSON.decoder().decode(WebAccess.self, from: Data(bytes)) } catch { fail("\(path) is not what lanchatd writes: \(error)") }
        if json {
            printJSON(access)
        } else {
            print(access.url)
        }
        if open { Self.openInBrowser(Self.redirectFile(to: access.url)) }
    }

    /// A page that sends the browser on to `url`, in a file only we may read (`$XDG_RUNTIME_DIR/lanchat`,
    /// else a new directory in /tmp, mode 0700), so that the token is never on a command line (another user
    /// could read `xdg-open`'s or the browser's from /proc). Returns its file:// address.
    static func redirectFile(to url: String) -> String {
        var directory: String
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), runtime.hasPrefix("/") {
            directory = runtime + "/lanchat"
            if mkdir(directory, 0o700) != 0, errno != EEXIST { fail("cannot make \(directory): \(String(cString: strerror(errno)))") }
            var info = stat()
            guard lstat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == getuid(), info.st_mode & 0o077 == 0 else {
                fail("\(directory) is not a private directory of yours: not writing the token there")
            }
        } else {
            var template = Array("/tmp/lanchat-web-XXXXXX".utf8CString)
            guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
                fail("cannot make a private directory in /tmp: \(String(cString: strerror(errno)))")
            }
            directory = String(cString: made)
        }
        let path = directory + "/open-web.html"
        // (The URL is an IP literal, a port and a hex token: nothing in it needs escaping.)
        let page =
            "<!doctype html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url=\(url)\"><title>lanchat</title>"
            + "<a href=\"\(url)\">Open lanchat</a>\n"
        unlink(path)
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { fail("cannot write \(path): \(String(cString: strerror(errno)))") }
        let bytes = Array(page.utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count else { fail("cannot write \(path)") }
        return "file://" + path
    }

    /// Runs `xdg-open ADDRESS` (the desktop's browser) and waits for it; a failure is said, with the URL above.
    static func openInBrowser(_ url: String) {
        guard let pid = spawn(["xdg-open", url], quiet: false) else {
            fail("cannot run xdg-open to open a browser (package xdg-utils); open the URL above yourself")
        }
        guard waitFor(pid) == 0 else { fail("xdg-open could not open a browser; open the URL above yourself") }
    }

    /// The file's bytes (it is small), or nil with errno set.
    static func read(_ path: String) -> [UInt8]? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 65536 {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += chunk.prefix(count)
        }
        return bytes
    }
}
