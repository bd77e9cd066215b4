import Glibc
import LanchatControl
import Logging
import NIOPosix

extension Daemon {
    /// Binds the browser UI (`--web`), warning when it listens beyond loopback.
    static func startWeb(
        _ web: WebConfiguration, configuration: DaemonConfiguration, handler: any ControlHandler, passedFiles: PassedFiles,
        eventLoopGroup: MultiThreadedEventLoopGroup, logger: Logger
    ) async throws -> WebServer {
        let group = try configuration.socketGroup.map { name throws(ControlSocket.SetupError) in try ControlSocket.groupID(named: name) }
        let files = WebServer.Files(
            downloads: configuration.downloadDirectory, shared: joinPath(configuration.stateDirectory, "shared"),
            uploads: joinPath(configuration.stateDirectory, "web-uploads"), passed: passedFiles)
        let server: WebServer
        do {
            server = try await WebServer(
                configuration: web, controlSocket: configuration.socketPath, socketGroup: group, handler: handler, files: files,
                eventLoopGroup: eventLoopGroup, logger: logger)
        } catch let error as StartupError {
            throw error
        } catch {
            throw StartupError("cannot serve the browser UI on \(web.address):\(web.port): \(error) (is the port taken?)")
        }
        if !web.isLoopback {
            logger.warning(
                "the browser UI listens on \(web.address), beyond this host: anyone who can reach it and has the token can use this daemon; the connection is not encrypted",
                metadata: ["web.address": "\(web.address)", "web.port": "\(server.port)"])
        }
        logger.info("browser UI on http://\(web.address):\(server.port)/ (lanchat web prints the URL with its token)", metadata: ["web.port": "\(server.port)"])
        return server
    }
}
