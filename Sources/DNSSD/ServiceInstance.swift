/// A service instance as reported by a browse: unique on the LAN by (name, type, domain).
public struct ServiceInstance: Hashable, Sendable, CustomStringConvertible {
    public var name: String
    public var type: String
    public var domain: String
    /// The interface it was seen on (0 = any).
    public var interfaceIndex: UInt32

    public init(name: String, type: String, domain: String, interfaceIndex: UInt32) {
        self.name = name
        self.type = type
        self.domain = domain
        self.interfaceIndex = interfaceIndex
    }

    /// The instance without the interface, for de-duplicating reports from several interfaces.
    public var key: Key { Key(name: name, type: type, domain: domain) }

    public struct Key: Hashable, Sendable {
        public var name: String
        public var type: String
        public var domain: String
        public init(name: String, type: String, domain: String) {
            self.name = name
            self.type = type
            self.domain = domain
        }
    }

    public var description: String { "\(name).\(type)\(domain)@\(interfaceIndex)" }
}

/// The result of resolving a service instance.
public struct ResolvedService: Equatable, Sendable {
    /// Target host name, without the trailing dot ("h2.local").
    public var hostName: String
    /// Port in host byte order.
    public var port: UInt16
    /// Raw TXT record bytes (decode with `TXTRecord.decode`).
    public var txt: [UInt8]
    public var interfaceIndex: UInt32

    public init(hostName: String, port: UInt16, txt: [UInt8], interfaceIndex: UInt32) {
        self.hostName = hostName
        self.port = port
        self.txt = txt
        self.interfaceIndex = interfaceIndex
    }
}
