import NIOCore
import NIOHTTP1

/// Sits between the HTTP decoder and the upgrade handler and answers every request that fails
/// `WebRequestCheck` itself (status and reason, then the connection closes), so that nothing refused
/// reaches the upgrader or the routes. An upgrade asked for anywhere but `/ws` is refused here too:
/// NIO's typed upgrader does not hand a declined upgrade request on to the plain HTTP side.
/// Removed once the connection becomes a WebSocket. It also closes a connection whose request head
/// does not arrive whole within `headDeadline` of the connection (or of the request before): the read
/// timeout alone restarts at every byte, so one byte every few seconds would hold a slot for ever.
final class WebGate: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let name = "lanchat-web-gate"

    private let checks: CheckHolder
    private let headDeadline: TimeAmount
    private var refusing = false
    private var deadline: Scheduled<Void>?

    init(checks: CheckHolder, headDeadline: TimeAmount = .seconds(10)) {
        self.checks = checks
        self.headDeadline = headDeadline
    }

    func handlerAdded(context: ChannelHandlerContext) { armDeadline(context) }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    private func armDeadline(_ context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: headDeadline) { context.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        guard case .head(let head) = part else {
            if case .end = part { armDeadline(context) }  // (the next request's head, on a kept-alive connection)
            if !refusing { context.fireChannelRead(data) }
            return
        }
        deadline?.cancel()
        deadline = nil
        let outcome =
            checks.get()?.check(method: head.method.rawValue, target: head.uri, headers: head.headers.map { ($0.name, $0.value) })
            ?? .refused(status: 503, reason: "starting")
        let upgrade = head.headers.contains(name: "upgrade")
        switch outcome {
        case .allowed(.socket):
            context.fireChannelRead(data)
        case .allowed where upgrade:
            refuse(context, head, status: 400, reason: "only /ws takes an upgrade")
        case .allowed:
            context.fireChannelRead(data)
        case .refused(let status, let reason):
            refuse(context, head, status: status, reason: reason)
        }
    }

    private func refuse(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, status: Int, reason: String) {
        refusing = true
        let body = ByteBuffer(string: reason + "\n")
        var headers = HTTPHeaders(WebRequestCheck.securityHeaders)
        headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        headers.add(name: "Connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: HTTPResponseStatus(statusCode: status), headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }
}
