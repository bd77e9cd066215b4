import Crypto
import Glibc
import LanchatCore
import LanchatEngine
import LanchatTransfer
import LanchatWire
import NIOCore
import NIOPosix

/// A file shared in a room, as `lanchat files` lists it: the announcement (a signed message of kind 1:
/// its id, room, author and time) and whether its content is kept here.
public struct SharedFileEntry: Sendable, Equatable {
    public var message: StoredMessage
    public var file: SharedFile
    /// Its content is in the shared-files directory here (this node serves it to members who ask).
    public var held: Bool
    /// Announced as an image, and, when held, its content is one (the content decides, not the name).
    public var image: Bool
}

/// What `fetchShared` did: the file was kept here and is copied already, or a fetch from the room's
/// members started (follow it by its transfer id).
public enum SharedFetchStart: Sendable, Equatable {
    /// `id`: the announcement's (the whole id, where the person may have given its end).
    case placed(id: String, path: String, file: SharedFile)
    case started(id: WireID)
}

/// The shell's side of files shared in rooms (`SessionStateMachine+SharedFiles` decides who is asked):
/// the shared-files directory keeps each content under its SHA-256 (hex), written only once verified,
/// for `sharedFilesDays` after it came (or was shared again); copies go where a person asks.
extension SessionNode {
    var sharedStorage: StorageDirectory {
        StorageDirectory(
            role: "the shared-files directory", path: configuration.sharedDirectory ?? configuration.downloadDirectory + "/.lanchat-shared",
            mode: configuration.downloadsForGroup ? 0o750 : 0o700)
    }

    func sharedPath(_ file: SharedFile) -> String { sharedStorage.path + "/" + file.hex }

    // MARK: Sharing

    /// Shares a file in a room: its content is copied into the shared-files directory (hashed as it is
    /// copied, its type told from its first bytes), then announced to the room. The node takes over
    /// `descriptor` (closes it).
    public func share(_ path: String, descriptor: Int32?, in room: RoomID) async throws(SessionError) -> SharedFileEntry {
        let source = try ResourceFile.open(path, descriptor: descriptor)
        guard engine.room(room) != nil else {
            close(source.fd)
            throw SessionError(.unknownRoom, "you are not in room '\(room)' (see `lanchat rooms`)")
        }
        guard source.size <= configuration.maximumFileSize else {
            close(source.fd)
            throw SessionError(.tooLarge, "\(path) is \(source.size) bytes; the limit is \(configuration.maximumFileSize)")
        }
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard case .success(let safe) = SafeFileName.make(from: Array(name.utf8)), SharedFile.isName(safe) else {
            close(source.fd)
            throw SessionError(.badFile, "\(path) has no name that can be shared")
        }
        let directory = sharedStorage
        if let problem = directory.prepare().problem {
            close(source.fd)
            throw SessionError(.writeFailed, problem)
        }
        let mode: mode_t = configuration.downloadsForGroup ? 0o640 : 0o600
        let copying = fileIO.runIfActive(eventLoop: eventLoop) { () throws -> SharedFile in
            defer { close(source.fd) }
            return try Self.keep(source.fd, size: source.size, name: safe, in: directory.path, mode: mode)
        }
        let file: SharedFile
        do { file = try await copying.get() } catch let error as SessionError { throw error } catch {
            throw SessionError(.writeFailed, "\(error)")
        }
        let (plan, actions) = try engine.share(file, in: room, at: time())
        guard await performOwn(plan, actions, in: room, mayGoFirst: false).committed, let message = plan.messages.first else {
            throw SessionError(.storage, "cannot store the announcement (see the daemon's log)")
        }
        return SharedFileEntry(message: message, file: file, held: true, image: file.isImage)
    }

    /// Copies `fd` into `directory` under its SHA-256 (a content kept already is only touched: its time
    /// starts again). On the file thread.
    nonisolated static func keep(_ fd: Int32, size: UInt64, name: String, in directory: String, mode: mode_t) throws -> SharedFile {
        let temporary = directory + "/.lanchat-share-" + WireID.random().description + ".part"
        let out = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard out >= 0 else { throw SessionError(.writeFailed, "cannot write in \(directory): \(String(cString: strerror(errno)))") }
        var hasher = SHA256()
        var head: [UInt8] = []
        var block = [UInt8](repeating: 0, count: 1 << 20)
        var done: UInt64 = 0
        do {
            defer { close(out) }
            while true {
                let n = block.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(done)) }
                if n < 0, errno == EINTR { continue }
                guard n >= 0 else { throw SessionError(.badFile, "cannot read the file: \(String(cString: strerror(errno)))") }
                if n == 0 { break }
                if head.count < 16 { head += block[0..<min(n, 16 - head.count)] }
                hasher.update(data: block[0..<n])
                try writeAll(out, block[0..<n])
                done += UInt64(n)
            }
            guard done == size else { throw SessionError(.badFile, "the file changed while it was copied (\(size) bytes, then \(done))") }
            guard fsync(out) == 0 else { throw SessionError(.writeFailed, String(cString: strerror(errno))) }
        } catch {
            unlink(temporary)
            throw error
        }
        let file = SharedFile(sha256: Array(hasher.finalize()), size: size, type: SharedFile.sniff(head), name: name)
        let target = directory + "/" + file.hex
        // Over whatever was kept under that digest (the same bytes, or a copy that went bad): this one was
        // just hashed. Its time starts again.
        guard rename(temporary, target) == 0 else {
            let code = errno
            unlink(temporary)
            throw SessionError(.writeFailed, "cannot keep \(name): \(String(cString: strerror(code)))")
        }
        DurableFile.syncDirectory(containing: target)
        return file
    }

    nonisolated static func writeAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) throws {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw SessionError(.writeFailed, String(cString: strerror(errno))) }
            offset += n
        }
    }

    // MARK: Listing

    /// The files shared in `room` (or every room), newest last, at most `limit`.
    public func sharedFiles(room: String?, limit: Int) async throws(SessionError) -> [SharedFileEntry] {
        try await onReader { try $0.search(room: room, limit: limit, filter: HistoryFilter(kind: .file)) }.compactMap(entry)
    }

    /// The entry of an announcement (nil: a kind 1 message that is not one).
    func entry(_ message: StoredMessage) -> SharedFileEntry? {
        guard let file = SharedFile(body: message.body) else { return nil }
        let path = sharedPath(file)
        var info = stat()
        let held = stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG && UInt64(info.st_size) == file.size
        var image = file.isImage
        if held, image {
            // The content decides: an announcement that says "image" over something else is not marked.
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            if fd >= 0 {
                var head = [UInt8](repeating: 0, count: 16)
                let n = head.withUnsafeMutableBytes { read(fd, $0.baseAddress, 16) }
                close(fd)
                image = n > 0 && SharedFile.sniff(Array(head[0..<n])).hasPrefix("image/")
            }
        }
        return SharedFileEntry(message: message, file: file, held: held, image: image)
    }

    // MARK: Fetching

    /// Gets a copy of a shared file (by its announcement's id, or a unique end of it: the short id
    /// `lanchat files` shows, from the id's random end, since a message id begins with its time) into
    /// `destination` (a directory; nil: the download directory): at once if it is kept here, else
    /// fetched from the room's connected members, checked against the announced SHA-256.
    public func fetchShared(_ given: String, to destination: String?) async throws(SessionError) -> SharedFetchStart {
        let lower = given.lowercased()
        guard lower.count >= 4, lower.allSatisfy({ $0.isHexDigit }) else {
            throw SessionError(.badRequest, "give the file's id (at least 4 of its hex digits; see `lanchat files`)")
        }
        let matches = try await onReader { try $0.search(room: nil, limit: 100, filter: HistoryFilter(kind: .file, idSuffix: lower)) }.compactMap(entry)
        guard let first = matches.first else { throw SessionError(.notFound, "no shared file has the id \(given) (see `lanchat files`)") }
        // A whole id is never ambiguous (another member may choose ids that end the same way).
        let shared = matches.first(where: { $0.message.id == lower }) ?? first
        guard matches.count == 1 || shared.message.id == lower else {
            throw SessionError(.ambiguous, "\(matches.count) shared files have ids that end with \(given): give more of it")
        }
        let directory = StorageDirectory(
            role: destination == nil ? "the download directory" : "the directory", path: destination ?? configuration.downloadDirectory,
            mode: configuration.downloadsForGroup ? 0o750 : 0o700)
        if let problem = directory.prepare().problem { throw SessionError(.writeFailed, problem) }
        if shared.held {
            let source = sharedPath(shared.file)
            let mode: mode_t = configuration.downloadsForGroup ? 0o640 : 0o600
            let file = shared.file
            let copy = fileIO.runIfActive(eventLoop: eventLoop) { () throws -> String in
                try Self.copy(source, named: file.name, into: directory.path, mode: mode, expected: file)
            }
            do { return .placed(id: shared.message.id, path: try await copy.get(), file: file) } catch let error as SessionError { throw error } catch {
                throw SessionError(.writeFailed, "\(error)")
            }
        }
        guard let room = RoomID(shared.message.room) else { throw SessionError(.unknownRoom, "bad room \(shared.message.room)") }
        let (id, actions) = try engine.fetchShared(shared.file, room: room, author: PeerID(shared.message.senderID), destination: directory.path, at: time())
        perform(actions)
        return .started(id: id)
    }

    /// A file announced live in a room: fetched and kept at once, if this node keeps shared files and it
    /// is not too large (`sharedAutoFetchLimit`). Older announcements (history, relay) wait to be asked for.
    func announced(_ message: ChatMessage) {
        guard configuration.keepSharedFiles, !message.outgoing, message.stored.kind == .file,
            let shared = entry(message.stored), !shared.held, shared.file.size <= configuration.sharedAutoFetchLimit,
            let room = RoomID(message.stored.room)
        else { return }
        let skip = { (why: String) in
            self.logger.notice("shared file not fetched", metadata: ["name": "\(shared.file.name)", "room": "\(room)", "why": "\(why)"])
        }
        // Members choose what they share: what this host keeps by itself is bounded (`sharedFilesQuota`),
        // and never takes the last `sharedFreeMargin` of the disk (the history database lives there too).
        guard case .usable(let free) = sharedStorage.prepare() else { return skip("the shared-files directory cannot be used") }
        // What is kept, counted at most every few seconds (a member announcing many small files must not
        // make each announcement scan the directory).
        let now = Self.nowMilliseconds()
        if sharedUsage == nil || now - sharedUsage!.at > 5_000 {
            let (bytes, files) = Self.keptBytes(in: sharedStorage.path)
            sharedUsage = (now, bytes, files)
        }
        let kept = sharedUsage!.bytes
        guard kept + shared.file.size <= configuration.sharedFilesQuota, sharedUsage!.files < Self.maximumKeptFiles else {
            return skip(
                "this host keeps \(kept) bytes in \(sharedUsage!.files) shared files; the quota is \(configuration.sharedFilesQuota) "
                    + "bytes and \(Self.maximumKeptFiles) files")
        }
        sharedUsage!.bytes += shared.file.size
        sharedUsage!.files += 1
        guard free >= shared.file.size + Self.sharedFreeMargin else { return skip("too little free space") }
        do {
            let (_, actions) = try engine.fetchShared(shared.file, room: room, author: PeerID(message.stored.senderID), destination: nil, at: time())
            perform(actions)
        } catch {
            skip(error.message)
        }
    }

    /// What fetching by itself leaves free on the disk of the shared-files directory, at least; and the
    /// most files it keeps.
    static let sharedFreeMargin: UInt64 = 1 << 30
    static let maximumKeptFiles = 10_000

    /// The bytes and the number of the files in `directory` (kept ones, named by their digest, and parts).
    static func keptBytes(in directory: String) -> (bytes: UInt64, files: Int) {
        let kept = regularFiles(in: directory).filter { SharedFile.bytes(hex: $0.name) != nil || $0.name.hasSuffix(".part") }
        return (kept.reduce(0) { $0 + UInt64(max(0, $1.info.st_size)) }, kept.count)
    }

    /// The regular files of `directory` (not following links), with what `lstat` says of them.
    nonisolated static func regularFiles(in directory: String) -> [(name: String, info: stat)] {
        guard let handle = opendir(directory) else { return [] }
        defer { closedir(handle) }
        var found: [(name: String, info: stat)] = []
        while let item = readdir(handle) {
            let name = withUnsafeBytes(of: item.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            var info = stat()
            guard lstat(directory + "/" + name, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            found.append((name, info))
        }
        return found
    }

    // MARK: Serving and placing

    /// A member asks for a file kept here: it is opened and offered, or refused. Only what was announced
    /// in that room, not directly, by someone else than the requester (`SessionStateMachine.mayServe`: the
    /// store is asked for the room's announcements of that digest, the rule picks among them); the refusal
    /// is the same whether the file is not held here or was not announced so (`notServedText`).
    func serveShared(_ request: WireFrame.FileRequest, to peer: SessionPeer) {
        // An exact look-up of how its announcements begin, whatever else members announce (at most
        // `servableAnnouncements`, the latest: a requester that announced the digest itself many times
        // over only hides the others from its own request).
        let prefix = SharedFile.bodyPrefix(sha256: request.sha256)
        let room = request.room.rawValue
        storeThread.run(on: eventLoop) { store in
            (try? store.search(room: room, limit: Self.servableAnnouncements, filter: HistoryFilter(kind: .file, bodyPrefix: prefix))) ?? []
        }.whenSuccess { [weak self] found in
            self?.assumeIsolated { node in
                guard !node.stopped else { return }
                node.serveShared(request, to: peer, announced: found)
            }
        }
    }

    private func serveShared(_ request: WireFrame.FileRequest, to peer: SessionPeer, announced found: [StoredMessage]) {
        let hex = Hex.string(request.sha256)
        let refusal = SessionStateMachine.notServedText(request, ownName: configuration.ownName)
        let authors = Set(((engine.members(of: request.room) ?? [:]).keys.map(\.rawValue)) + [configuration.ownID.rawValue])
        guard SessionStateMachine.mayServe(request, to: peer.id, announcedIn: found, authors: authors) else {
            perform(engine.notServed(request, to: peer.id, because: refusal))
            return
        }
        let path = sharedStorage.path + "/" + hex
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0, let file = try? ResourceFile.opened(fd, path: path) else {
            perform(engine.notServed(request, to: peer.id, because: refusal))
            return
        }
        guard files[request.id] == nil else {
            close(file.fd)
            perform(engine.notServed(request, to: peer.id, because: "that id is in use"))
            return
        }
        files[request.id] = TransferFile(fd: file.fd, path: path, incoming: false, size: file.size)
        let offered = OfferedFile(path: path, name: hex, size: file.size, modifiedMilliseconds: file.modified, identity: file.identity)
        perform(engine.serveShared(request, file: offered, to: peer.id, at: time()))
    }

    /// Announcements of one digest in a room looked at when a member asks for it.
    static let servableAnnouncements = 64

    /// A fetched file, verified: kept under its digest (unless this node keeps no shared files), and a
    /// copy put in `destination`.
    func placeShared(_ id: WireID, _ file: SharedFile, destination: String?) {
        guard let part = files.removeValue(forKey: id) else {
            perform(engine.fileFailed(id, "its part file is gone", at: time()))
            return
        }
        let kept = sharedPath(file)
        let keep = configuration.keepSharedFiles || destination == nil
        let mode: mode_t = configuration.downloadsForGroup ? 0o640 : 0o600
        let future = fileIO.runIfActive(eventLoop: eventLoop) { () throws -> String in
            defer {
                close(part.fd)
                unlink(part.path)
            }
            guard fsync(part.fd) == 0 else { throw SessionError(.writeFailed, String(cString: strerror(errno))) }
            fchmod(part.fd, mode)
            var source = part.path
            if keep {
                // Verified: it replaces whatever was kept under that digest (a copy that went bad).
                guard rename(part.path, kept) == 0 else {
                    throw SessionError(.writeFailed, "cannot keep \(file.name): \(String(cString: strerror(errno)))")
                }
                DurableFile.syncDirectory(containing: kept)
                source = kept
            }
            guard let destination else { return kept }
            return try Self.copy(source, named: file.name, into: destination, mode: mode, expected: nil)
        }
        future.whenComplete { [weak self] result in
            guard let self else { return }
            self.assumeIsolated { node in
                guard !node.stopped else { return }
                switch result {
                case .success(let path): node.perform(node.engine.placed(id, path: path, at: node.time()))
                case .failure(let error): node.perform(node.engine.fileFailed(id, "\(error)", at: node.time()))
                }
            }
        }
    }

    /// Copies `source` into `directory` under a free name made from `name` (never overwriting), synced.
    /// `expected`: the content must have this size and SHA-256 (a kept file checked as it is copied).
    nonisolated static func copy(_ source: String, named name: String, into directory: String, mode: mode_t, expected: SharedFile?) throws -> String {
        let input = open(source, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard input >= 0 else { throw SessionError(.writeFailed, "cannot read \(source): \(String(cString: strerror(errno)))") }
        defer { close(input) }
        // The announced name is a member's word: made safe as a received file's is (no leading dot, no
        // format characters, at most 255 bytes).
        let safe: String
        if case .success(let made) = SafeFileName.make(from: Array(name.utf8)) { safe = made } else { safe = "shared-file" }
        var output: Int32 = -1
        let target = try underFreeName(safe, in: directory) { path in
            output = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
            return output >= 0
        }
        var hasher = SHA256()
        var done: UInt64 = 0
        var block = [UInt8](repeating: 0, count: 1 << 20)
        do {
            defer { close(output) }
            while true {
                let n = block.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
                if n < 0, errno == EINTR { continue }
                guard n >= 0 else { throw SessionError(.writeFailed, "cannot read \(source): \(String(cString: strerror(errno)))") }
                if n == 0 { break }
                if expected != nil { hasher.update(data: block[0..<n]) }
                try writeAll(output, block[0..<n])
                done += UInt64(n)
            }
            if let expected, done != expected.size || Array(hasher.finalize()) != expected.sha256 {
                throw SessionError(.corrupt, "the copy of \(name) kept here does not match its SHA-256 any more: fetch it again after removing \(source)")
            }
            guard fsync(output) == 0 else { throw SessionError(.writeFailed, String(cString: strerror(errno))) }
        } catch {
            unlink(target)
            throw error
        }
        DurableFile.syncDirectory(containing: target)
        return target
    }

    /// Removes kept files older than `sharedFilesDays` and part files left by a stop (fetches are not
    /// resumed). At start, then every 6 hours.
    func sweepSharedFiles() {
        let path = sharedStorage.path
        let days = configuration.sharedFilesDays
        let now = Self.nowMilliseconds()
        _ = fileIO.runIfActive(eventLoop: eventLoop) { () -> Void in
            for (name, info) in Self.regularFiles(in: path) {
                let age = now - Int64(info.st_mtim.tv_sec) * 1000
                let stale =
                    name.hasPrefix(".lanchat-") && name.hasSuffix(".part")
                    ? age > 3_600_000
                    : SharedFile.bytes(hex: name) != nil && age > Int64(days) * 86_400_000
                if stale { unlink(path + "/" + name) }
            }
        }
    }
}
