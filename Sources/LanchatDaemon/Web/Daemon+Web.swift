import Glibc
import LanchatControl
import Logging
import NIOPosix

extension Daemon {
    /// Binds the browser UI (`--web`), warning when it listens beyond loopback. If its port cannot be
    /// served (another program, maybe another user's, holds it), the daemon runs without the UI, with an
    /// error in the log: a port taken must not stop the chat.
    static func startWeb(
        _ web: WebConfiguration, configuration: DaemonConfiguration, handler: any ControlHandler, passedFiles: PassedFiles,
        eventLoopGroup: MultiThreadedEventLoopGroup, logger: Logger
    ) async throws -> WebServer? {
        let group = try configuration.socketGroup.map { name throws(ControlSocket.SetupError) in try ControlSocket.groupID(named: name) }
        let files = WebServer.Files(
            downloads: configuration.downloadDirectory, shared: joinPath(configuration.stateDirectory, "shared"),
            uploads: joinPath(configuration.stateDirectory, "web-uploads"), passed: passedFiles)
        var web = web
        web.maximumUploadSize = min(web.maximumUploadSize, configuration.maximumFileSize)  // (`--max-file-size`)
        let server: WebServer
        do {
            server = try await WebServer(
                configuration: web, controlSocket: configuration.socketPath, socketGroup: group, handler: handler, files: files,
                eventLoopGroup: eventLoopGroup, logger: logger)
        } catch let error as StartupError {
            throw error
        } catch {
            logger.error(
                "the browser UI is off: cannot serve it on \(web.address):\(web.port) (is the port taken?)",
                metadata: ["error": "\(error)", "web.port": "\(web.port)"])
            unlink(WebAccess.filePath(forControlSocket: configuration.socketPath))
            return nil
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
