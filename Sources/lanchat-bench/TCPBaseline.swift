import Glibc

// MARK: Raw TCP baseline

func tcpSocket() -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var one: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    return fd
}

func readFully(_ fd: Int32, _ buffer: inout [UInt8]) -> Bool {
    var done = 0
    while done < buffer.count {
        let n = buffer[done...].withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { return false }
        done += n
    }
    return true
}

func tcpEcho(port: UInt16) -> Never {
    let server = tcpSocket()
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    listen(server, 4)
    print("ready")
    fflush(nil)
    while true {
        let client = accept(server, nil, nil)
        var buffer = [UInt8](repeating: 0, count: 64)
        while readFully(client, &buffer) { _ = send(client, buffer, 64, 0) }
        close(client)
    }
}

func tcpPing(host: String, port: UInt16, count: Int) {
    let fd = tcpSocket()
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    inet_pton(AF_INET, host, &address.sin_addr)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { die("cannot connect to \(host):\(port)") }
    var buffer = [UInt8](repeating: 7, count: 64)
    var rtts: [Double] = []
    for index in 0..<(count + 100) {
        let start = now()
        _ = send(fd, buffer, 64, 0)
        guard readFully(fd, &buffer) else { die("echo closed") }
        if index >= 100 { rtts.append((now() - start) * 1e6) }  // 100 warm-up rounds
    }
    emit(["tcp_rtt_p50_us": percentile(rtts, 0.5), "tcp_rtt_p99_us": percentile(rtts, 0.99), "tcp_rtt_count": Double(rtts.count)])
}
