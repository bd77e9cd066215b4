/// DNS-SD service types: `_name._tcp` (RFC 6335: 1-15 letters, digits and hyphens, a letter among them).
enum ServiceType {
    static func check(_ type: String) throws(LanchatError) {
        let parts = type.split(separator: ".", omittingEmptySubsequences: false)
        let problem = LanchatError(.invalidArgument, "'\(type)' is not a DNS-SD service type such as _chat-service._tcp")
        guard parts.count == 2, parts[1] == "_tcp", parts[0].hasPrefix("_") else { throw problem }
        let name = parts[0].dropFirst()
        guard (1...15).contains(name.count), name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }),
            name.contains(where: \.isLetter), name.first != "-", name.last != "-", !name.contains("--")
        else { throw problem }
    }
}
