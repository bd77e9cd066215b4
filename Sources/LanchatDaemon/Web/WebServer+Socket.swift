import LanchatControl
import NIOCore
import NIOWebSocket
import Synchronization

/// The WebSocket: control requests in, responses and events out, with the control socket's JSON.
extension WebServer {
    typealias SocketChannel = NIOAsyncChannel<WebSocketFrame, WebSocketFrame>
    typealias SocketWriter = NIOAsyncChannelOutboundWriter<WebSocketFrame>

    /// Answers each text message (one request) on its own task, up to `maximumCallsPerSocket` at once,
    /// so that a slow call (an invitation that waits) does not hold up the others; answers carry the
    /// request's `id`. After `watch`, events are written too, and requests are still answered. A ping
    /// every 20 s keeps the read deadline from closing an idle page and finds a page that went away.
    func serve(_ socket: SocketChannel) async throws {
        try await socket.executeThenClose { inbound, outbound in
            let inFlight = Arc(Atomic<Int>(0))
            // (Discarding: a finished call's task is let go at once, not kept until the socket closes.)
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask {
                    while true {
                        try await Task.sleep(for: .seconds(20))
                        try await outbound.write(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer()))
                    }
                }
                var watching = false
                frames: for try await frame in inbound {
                    switch frame.opcode {
                    case .text:
                        let line = Array(frame.unmaskedData.readableBytesView)
                        guard case .success(let request) = ControlJSON.decodeRequest(line) else {
                            if case .failure(let error) = ControlJSON.decodeRequest(line) {
                                try await Self.write(ControlResponse.failure(id: nil, error), to: outbound)
                            }
                            continue
                        }
                        let call: ControlCall
                        do throws(ControlError) { call = try ControlCall(request) } catch {
                            try await Self.write(ControlResponse.failure(id: request.id, error), to: outbound)
                            continue
                        }
                        switch call {
                        case .watch:
                            if !watching {
                                watching = true
                                // Subscribed before the answer, so no event between the two is missed.
                                let events = handler.events()
                                group.addTask {
                                    for await event in events { try await Self.write(ControlResponse.event(event), to: outbound) }
                                }
                            }
                            try await Self.write(ControlResponse(id: request.id), to: outbound)
                        default:
                            if let refusal = Self.refusal(call) {
                                try await Self.write(ControlResponse.failure(id: request.id, .badRequest(refusal)), to: outbound)
                                continue
                            }
                            guard inFlight.value.add(1, ordering: .relaxed).newValue <= configuration.maximumCallsPerSocket else {
                                inFlight.value.subtract(1, ordering: .relaxed)
                                let error = ControlError(code: .busy, message: "more than \(configuration.maximumCallsPerSocket) calls at once on this socket")
                                try await Self.write(ControlResponse.failure(id: request.id, error), to: outbound)
                                continue
                            }
                            group.addTask {
                                defer { inFlight.value.subtract(1, ordering: .relaxed) }
                                try await Self.write(await self.handler.respond(to: call, id: request.id), to: outbound)
                            }
                        }
                    case .ping:
                        try await outbound.write(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData))
                    case .connectionClose:
                        var data = ByteBuffer()
                        data.write(webSocketErrorCode: .normalClosure)
                        try? await outbound.write(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))
                        break frames
                    case .binary:
                        var data = ByteBuffer()
                        data.write(webSocketErrorCode: .unacceptableData)
                        try? await outbound.write(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))
                        break frames
                    default:
                        continue
                    }
                }
                group.cancelAll()
            }
        }
    }

    /// Why the page may not make `call` (nil: it may). The page has less power than the control socket:
    /// what it does is what a person does in it (rooms, messages, invitations, files chosen in the page),
    /// so that a leaked token reaches no file of the daemon's user and changes no trust. Refused: files by
    /// path (`send-file` and `share` take an uploaded file's token; `fetch` keeps the file where the
    /// daemon puts it), keys (`trust`, `forget`), links by address (`connect`, `disconnect`, `ping`), and
    /// what turns the connection into something else (`stream`, `stream-accept`, topics).
    static func refusal(_ call: ControlCall) -> String? {
        switch call {
        case .status, .peers, .watch, .invite, .invitations, .accept, .decline, .rooms, .members, .leave, .send, .history, .search,
            .transfers, .cancel, .presence, .hand, .meta, .typing, .remove, .close, .admin, .files:
            return nil
        case .sendFile(_, _, let token), .share(_, _, let token):
            return token == nil ? "\(call.method.rawValue) over the web socket sends a file chosen in the page (a file_token from /upload), not a path" : nil
        case .fetch(_, let to):
            return to == nil ? nil : "fetch over the web socket keeps the file where the daemon puts it (no `to`)"
        case .ping, .forget, .trust, .stream, .streamAccept, .connect, .disconnect, .topicPublish, .topicSubscribe:
            return "\(call.method.rawValue) is not available over the web socket (use the control socket)"
        }
    }

    private static func write(_ response: ControlResponse, to outbound: SocketWriter) async throws {
        var line = ControlJSON.line(response)
        line.removeLast()  // the newline: one message is one response
        try await outbound.write(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: line)))
    }
}
