import NIOCore
import NIOSSL

/// For a daemon whose encryption preference is `optional`: decides from the caller's first byte
/// whether the connection is TLS (a TLS record starts with 0x16, handshake) or plain lanchat/1 (a
/// frame starts with its length, whose first byte is 0x00 or 0x01), sets the pipeline up for it, and
/// removes itself.
final class EncryptionSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    static let tlsHandshakeRecord: UInt8 = 0x16

    /// Told which it is, on the event loop: returns the handler to put after this one for TLS.
    private let makeTLSHandler: () -> NIOSSLServerHandler
    private let plain: () -> Void

    init(makeTLSHandler: @escaping () -> NIOSSLServerHandler, plain: @escaping () -> Void) {
        self.makeTLSHandler = makeTLSHandler
        self.plain = plain
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        guard let first = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return }
        if first == Self.tlsHandshakeRecord {
            do {
                try context.pipeline.syncOperations.addHandler(makeTLSHandler(), position: .after(self))
            } catch {
                context.close(promise: nil)
                return
            }
        } else {
            plain()
        }
        // The bytes go on to what was just set up; this handler is done.
        context.fireChannelRead(data)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}

@available(*, unavailable)
extension EncryptionSniffer: Sendable {}
