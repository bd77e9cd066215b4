// swift-tools-version:6.0
import Foundation
import PackageDescription

// Layers, from the wire up (see README.md "Module layout"):
//   LanchatCore (shared identifiers and preferences: PeerID, RoomID, WireID; links nothing)
//   CDNSSD (C, dns_sd.h) -> DNSSD (async Swift over dns_sd)
//   LanchatIdentity (long-term key, peer id)
//   LanchatSecurity (certificate, TLS 1.3 pinned to the peer id, known peers, short code; message and seal
//     signatures, over LanchatWire's signing bytes)
//   LanchatDiscovery (pure: TXT advertisement, peer table)
//   LanchatControl (control API types + a small blocking client; no NIO)
//   LanchatWire (pure: wire protocol v1 framing and frames, the seals' Merkle tree; see docs/wire-protocol.md)
//   LanchatEngine (pure: the session protocol engine, SessionStateMachine; no sockets, files, SQL or clock)
//   LanchatSession (the I/O shell: SessionNode runs the engine over NIO connections and the SQLite store)
//   LanchatDaemon (wiring: discovery service, control server, config)
//   lanchatd / lanchat (thin executables)
// lanchatd's release link on Linux, with the toolchain's lld (issue 33, item 5: small at idle; the figures
// are in docs/benchmarks.md, "Where an idle lanchatd's memory goes"):
// - the functions an idle or chatting lanchatd runs come first and together (packaging/lanchatd.order,
//   written by `scripts/bench.sh order`), so the kernel, which maps a read fault's neighbours too (64 KiB),
//   maps less code that never runs;
// - relative relocations packed (DT_RELR, glibc 2.36): their 2 MiB table is read whole at every start;
// - no dynamic symbol table: nothing looks symbols up in lanchatd (the runtime's `-export-dynamic` is undone).
// A toolchain without ld.lld on PATH links as before.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path
let toolchainHasLLD = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").contains {
    FileManager.default.isExecutableFile(atPath: "\($0)/ld.lld")
}
let daemonLink: [LinkerSetting] =
    toolchainHasLLD
    ? [
        .unsafeFlags(
            [
                "-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic",
                "-Xlinker", "--symbol-ordering-file=\(packageRoot)/packaging/lanchatd.order", "-Xlinker", "--no-warn-symbol-ordering",
            ],
            .when(platforms: [.linux], configuration: .release)
        )
    ] : []

let package = Package(
    name: "lanchat",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "lanchatd", targets: ["lanchatd"]),
        .executable(name: "lanchat", targets: ["lanchat"]),
        .library(name: "DNSSD", targets: ["DNSSD"]),
        .library(name: "LanchatDiscovery", targets: ["LanchatDiscovery"]),
        // Multipeer Connectivity's model for other programs (issue 31): identity, advertiser, browser, session.
        .library(name: "LanchatKit", targets: ["LanchatKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        // LanchatKit's documentation (`scripts/docs.sh`: swift package generate-documentation).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CDNSSD",
            pkgConfig: "avahi-compat-libdns_sd",
            providers: [.apt(["libavahi-compat-libdnssd-dev"])]
        ),
        .target(name: "LanchatCore"),
        // Avahi 0.8's dns_sd layer calls an uninitialised callback slot of a Resolve or QueryRecord ref when
        // avahi-daemon restarts (fixed upstream after 0.8): this defines avahi_malloc zero-filled for the
        // whole process (Sources/CAvahiZeroFill/avahi_zero_fill.c).
        .target(name: "CAvahiZeroFill"),
        .target(name: "DNSSD", dependencies: ["CDNSSD", "CAvahiZeroFill"]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "LanchatStore", dependencies: ["LanchatCore", "CSQLite"]),
        // Pure transfer logic (issue 4, started): safe names for files offered by peers.
        .target(name: "LanchatTransfer"),
        .target(name: "LanchatIdentity", dependencies: ["LanchatCore", .product(name: "Crypto", package: "swift-crypto")]),
        .target(name: "LanchatDiscovery", dependencies: ["LanchatCore", "DNSSD"]),
        .target(name: "LanchatControl"),
        // Pure terminal input for the interactive mode: key decoding and the line editor.
        .target(name: "LanchatTerminal"),
        // Crypto for SHA-256 only: the Merkle tree of seals (`MerkleTree`, wire version 4, draft).
        .target(
            name: "LanchatWire",
            dependencies: ["LanchatCore", .product(name: "Crypto", package: "swift-crypto"), .product(name: "NIOCore", package: "swift-nio")]),
        .target(name: "LanchatEngine", dependencies: ["LanchatCore", "LanchatWire", "LanchatTransfer", .product(name: "NIOCore", package: "swift-nio")]),
        // Connections to peers: dialing and accepting (TLS or plain, sniffed), the HELLO handshake, framing,
        // and their liveness (heartbeats, the output budget: `LinkLiveness`, pure).
        .target(
            name: "LanchatTransport",
            dependencies: [
                "LanchatCore", "LanchatEngine", "LanchatWire", "LanchatSecurity",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .target(
            name: "LanchatSession",
            dependencies: [
                "LanchatCore", "LanchatEngine", "LanchatWire", "LanchatSecurity", "LanchatStore", "LanchatTransfer", "LanchatTransport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .target(
            name: "LanchatSecurity",
            dependencies: [
                // LanchatWire: the seals it signs and checks (`EnvelopeSigner+Seals.swift`).
                "LanchatCore", "LanchatIdentity", "LanchatWire",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // The decoders outside input reaches, as fuzz targets: `scripts/fuzz.sh TARGET` builds them with
        // libFuzzer; a plain build gives a binary that replays files through the same entry points.
        .executableTarget(
            name: "LanchatFuzz",
            dependencies: ["DNSSD", "LanchatControl", "LanchatDiscovery", "LanchatWire", .product(name: "NIOCore", package: "swift-nio")]
        ),
        // The library other programs embed (products: LanchatKit): the session layer lanchatd runs, in Multipeer
        // Connectivity's shape; no engine, wire or NIO type in its public API.
        .target(
            name: "LanchatKit",
            dependencies: [
                "DNSSD", "LanchatCore", "LanchatDiscovery", "LanchatEngine", "LanchatIdentity", "LanchatSecurity", "LanchatSession", "LanchatStore",
                "LanchatTransport", "LanchatWire",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // Examples of LanchatKit (Examples/), built with everything else and run by Tests/e2e/test_library_examples.py.
        .executableTarget(name: "lanchatkit-chat", dependencies: ["LanchatKit"], path: "Examples/TerminalChat"),
        .executableTarget(name: "lanchatkit-drop", dependencies: ["LanchatKit"], path: "Examples/FileDrop"),
        .executableTarget(name: "lanchatkit-sensor", dependencies: ["LanchatKit"], path: "Examples/Sensor"),
        .target(
            name: "LanchatDaemon",
            dependencies: [
                // LanchatKit: the daemon's session is the library's (issue 31).
                "DNSSD", "LanchatCore", "LanchatEngine", "LanchatIdentity", "LanchatDiscovery", "LanchatControl", "LanchatKit", "LanchatSecurity",
                "LanchatSession", "LanchatTransport", "LanchatWire", "LanchatStore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // The browser UI (`--web`): NIO's own HTTP/1 and WebSocket handlers, no server framework.
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "lanchatd",
            dependencies: [
                "LanchatDaemon",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            linkerSettings: daemonLink
        ),
        .executableTarget(
            name: "lanchat",
            dependencies: [
                "LanchatControl", "LanchatTerminal",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Session-layer benchmark (scripts/bench.sh): the library between simulated hosts, and a raw TCP baseline.
        .executableTarget(
            name: "lanchat-bench",
            dependencies: [
                "LanchatCore", "LanchatEngine", "LanchatSession", "LanchatStore", "LanchatSecurity", "LanchatIdentity", "LanchatTransport", "LanchatWire",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "DNSSDTests", dependencies: ["DNSSD"]),
        .testTarget(name: "LanchatIdentityTests", dependencies: ["LanchatCore", "LanchatIdentity"]),
        .testTarget(name: "LanchatDiscoveryTests", dependencies: ["LanchatCore", "LanchatDiscovery"]),
        .testTarget(name: "LanchatControlTests", dependencies: ["LanchatControl"]),
        // The command line as parsed (`parseAsRoot`), without a daemon.
        .testTarget(name: "LanchatCLITests", dependencies: ["lanchat", "LanchatControl"]),
        .testTarget(name: "LanchatTerminalTests", dependencies: ["LanchatTerminal"]),
        .testTarget(name: "LanchatDaemonTests", dependencies: ["LanchatCore", "LanchatDaemon"]),
        .testTarget(name: "LanchatStoreTests", dependencies: ["LanchatCore", "LanchatStore", "LanchatEngine"]),
        .testTarget(
            name: "LanchatEngineTests",
            dependencies: ["LanchatCore", "LanchatEngine", "LanchatWire", .product(name: "NIOCore", package: "swift-nio")]),
        .testTarget(name: "LanchatTransferTests", dependencies: ["LanchatTransfer"]),
        .testTarget(
            name: "LanchatKitTests",
            dependencies: ["DNSSD", "LanchatCore", "LanchatEngine", "LanchatKit", .product(name: "NIOPosix", package: "swift-nio")]),
        .testTarget(
            name: "LanchatTransportTests",
            dependencies: [
                "LanchatCore", "LanchatEngine", "LanchatTransport", "LanchatWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "LanchatSessionTests",
            dependencies: [
                "LanchatCore", "LanchatEngine", "LanchatSession", "LanchatStore", "LanchatSecurity", "LanchatIdentity", "LanchatTransport", "LanchatWire",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "LanchatSecurityTests",
            dependencies: [
                "LanchatCore", "LanchatSecurity", "LanchatIdentity", "LanchatWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .testTarget(
            name: "LanchatWireTests",
            dependencies: [
                "LanchatCore", "LanchatWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOTestUtils", package: "swift-nio"),
            ],
            resources: [.copy("Corpus")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
