import Glibc

/// Passing an open file to lanchatd: a daemon running as its own user (the system service, with
/// ProtectHome) cannot open people's files, so `lanchat send-file` opens the file and hands the
/// descriptor over. The daemon listens on `<control socket>.files` (SOCK_SEQPACKET, same permissions
/// as the control socket). One message per file: a token (32 hex characters) with the descriptor as
/// SCM_RIGHTS; the answer is `ok` or `error: ...`. `send-file` then names the file by `file_token`.
public enum FilePassing {
    public static func socketPath(forControlSocket path: String) -> String { path + ".files" }

    public static let tokenLength = 32

    public static func isToken(_ text: some Collection<UInt8>) -> Bool {
        text.count == tokenLength && text.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// Bytes of a control message carrying one descriptor (CMSG_SPACE(sizeof(int)) on Linux).
    static let controlLength = MemoryLayout<cmsghdr>.size + 8

    /// Hands `descriptor` to the daemon; returns the token to name it by. Throws a message fit for people.
    public static func pass(_ descriptor: Int32, controlSocket: String) throws(ControlError) -> String {
        let token = RandomToken.hex(bytes: 16)
        let path = socketPath(forControlSocket: controlSocket)
        let fd: Int32
        switch connectUnixSocket(path: path, type: Int32(SOCK_SEQPACKET.rawValue)) {
        case .success(let connected): fd = connected
        case .failure(let error):
            throw ControlError(code: .connectFailed, message: "cannot hand the file to lanchatd at \(path): \(errnoDescription(error.code))")
        }
        defer { close(fd) }
        var payload = Array(token.utf8)
        var control = [UInt8](repeating: 0, count: controlLength)
        control.withUnsafeMutableBytes { controlBytes in
            let header = controlBytes.baseAddress!.assumingMemoryBound(to: cmsghdr.self)
            header.pointee.cmsg_len = MemoryLayout<cmsghdr>.size + MemoryLayout<Int32>.size
            header.pointee.cmsg_level = SOL_SOCKET
            header.pointee.cmsg_type = Int32(SCM_RIGHTS)
            controlBytes.storeBytes(of: descriptor, toByteOffset: MemoryLayout<cmsghdr>.size, as: Int32.self)
        }
        let sent = withMessage(payload: &payload, control: &control) { sendmsg(fd, &$0, Int32(MSG_NOSIGNAL)) }
        guard sent == payload.count else {
            throw ControlError(code: .connectFailed, message: "cannot hand the file to lanchatd: \(String(cString: strerror(errno)))")
        }
        var answer = [UInt8](repeating: 0, count: 512)
        let n = answer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        let text = n > 0 ? String(decoding: answer[0..<n], as: UTF8.self) : "no answer"
        guard text == "ok" else { throw ControlError(code: .badFile, message: "lanchatd did not take the file: \(text)") }
        return token
    }

    /// Runs `body` with a `msghdr` over `payload` (one buffer) and `control` (ancillary data).
    public static func withMessage(payload: inout [UInt8], control: inout [UInt8], _ body: (inout msghdr) -> Int) -> Int {
        payload.withUnsafeMutableBytes { payloadBytes in
            control.withUnsafeMutableBytes { controlBytes in
                var vector = iovec(iov_base: payloadBytes.baseAddress, iov_len: payloadBytes.count)
                return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                    var message = msghdr()
                    message.msg_iov = vectorPointer
                    message.msg_iovlen = 1
                    message.msg_control = controlBytes.baseAddress
                    message.msg_controllen = controlBytes.count
                    return body(&message)
                }
            }
        }
    }
}

/// Random bytes from the system's generator (getrandom), as lowercase hex: the tokens that name a handed
/// file, the browser UI's token, an upload's directory.
public enum RandomToken {
    public static func hex(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(2 * count)
        for _ in 0..<count {
            let byte = UInt8.random(in: 0...255, using: &generator)
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
