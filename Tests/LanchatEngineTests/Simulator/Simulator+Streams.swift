import LanchatCore
import LanchatEngine
import LanchatWire
import NIOCore

/// Simulated programs that use named streams: one opens a stream to a connected peer and writes a
/// known pattern of bytes, then finishes; the other waits for it (from that peer, or from anyone; before
/// the open arrives or up to 15 s after), reads everything, and finishes its side once the writer's end
/// came. Programs read and write in their own events (after the engine's batch), as the daemon's
/// programs do. Checked as it goes: every byte a reader gets is the next one of the pattern (in order,
/// none twice, none missing); a reader that sees a clean end got all of it. Checked at the end: no
/// stream, held open or waiting program is left in any engine.
extension Simulator {
    /// Small windows, so that a few kilobytes exercise credit.
    static let streamLimits: StreamTable.Limits = {
        var limits = StreamTable.Limits()
        limits.window = 4096
        limits.grantEvery = 1024
        limits.chunk = 700
        return limits
    }()

    struct StreamPlan {
        var opener: Int
        var acceptor: Int
        var name: StreamName
        var size: Int
        var salt: Int
    }

    struct ProgramKey: Hashable {
        var node: Int
        var incarnation: Int
        var stream: WireID
    }

    struct StreamProgram {
        var plan: Int
        var opens: Bool
        var opened: Bool
        var written = 0
        var received = 0
        var unconsumed = 0
        var finished = false
        var remoteFinished = false
        var quits = false
    }

    static func patternByte(_ plan: StreamPlan, _ offset: Int) -> UInt8 { UInt8((plan.salt + offset &* 7) % 251) }

    func openStream(from node: Int) {
        guard let engine = nodes[node].engine else { return }
        let connected = nodes.indices.filter { $0 != node && nodes[$0].engine != nil && engine.isConnected(nodes[$0].peer.id) }
        guard !connected.isEmpty else { return }
        let target = connected[roll(connected.count)]
        let index = streamPlans.count
        let plan = StreamPlan(opener: node, acceptor: target, name: StreamName("s\(index)")!, size: roll(3) == 0 ? roll(50) : roll(20_000), salt: roll(251))
        streamPlans.append(plan)
        var opened: WireID?
        command(node) { engine throws(SessionError) in
            let (id, actions) = try engine.openStream(plan.name, to: self.nodes[target].peer.id, timeout: 30_000, at: self.time(node))
            opened = id
            return actions
        }
        guard let id = opened else { return }
        log("n\(node) opens stream \(plan.name) (\(plan.size) bytes) to n\(target)")
        programs[ProgramKey(node: node, incarnation: nodes[node].incarnation, stream: id)] = StreamProgram(plan: index, opens: true, opened: false, quits: chance(5))
        let delay = chance(50) ? 0 : Int64(roll(15_000))
        schedule(.acceptStream(node: target, incarnation: nodes[target].incarnation, plan: index), at: now + delay)
    }

    func startAccepting(_ node: Int, plan index: Int) {
        let plan = streamPlans[index]
        nextAcceptor += 1
        let acceptor = nextAcceptor
        waitingAcceptors[acceptor] = (node, index)
        let from = chance(50) ? nodes[plan.opener].peer.id : nil
        command(node) { engine throws(SessionError) in try engine.acceptStream(plan.name, from: from, acceptor: acceptor) }
        if waitingAcceptors[acceptor] != nil {
            schedule(.acceptorGivesUp(node: node, incarnation: nodes[node].incarnation, acceptor: acceptor), at: now + 30_000)
        }
    }

    func handedOver(_ node: Int, _ acceptor: UInt64, _ accepted: AcceptedStream?) {
        guard let (_, index) = waitingAcceptors.removeValue(forKey: acceptor), let accepted else { return }
        let plan = streamPlans[index]
        if accepted.name != plan.name || accepted.peer.id != nodes[plan.opener].peer.id {
            streamViolations.append("n\(node) waited for \(plan.name) from n\(plan.opener) and got \(accepted.name) from \(accepted.peer.name)")
        }
        log("n\(node) accepts stream \(accepted.name) from \(accepted.peer.name)")
        programs[ProgramKey(node: node, incarnation: nodes[node].incarnation, stream: accepted.id)] = StreamProgram(plan: index, opens: false, opened: true)
    }

    func streamSignal(_ node: Int, _ id: WireID, _ signal: StreamSignal) {
        let key = ProgramKey(node: node, incarnation: nodes[node].incarnation, stream: id)
        guard var program = programs[key] else {
            streamViolations.append("n\(node) got \(signal) for stream \(id.description.prefix(8)), which no program holds")
            return
        }
        let plan = streamPlans[program.plan]
        switch signal {
        case .opened:
            program.opened = true
        case .data(let data):
            let bytes = Array(data.readableBytesView)
            for (offset, byte) in bytes.enumerated() where byte != Self.patternByte(plan, program.received + offset) {
                streamViolations.append("n\(node) read a wrong byte at \(program.received + offset) of \(plan.name)")
                break
            }
            if program.opens || program.received + bytes.count > plan.size {
                streamViolations.append("n\(node) got \(bytes.count) bytes too many on \(plan.name) (opener: \(program.opens))")
            }
            program.received += bytes.count
            streamBytes += bytes.count
            program.unconsumed += bytes.count
        case .credit:
            break
        case .remoteFinished:
            program.remoteFinished = true
        case .ended(let failure):
            programs[key] = nil
            log("n\(node): stream \(plan.name) ended: \(failure ?? "cleanly")")
            if failure == nil, !program.opens {
                cleanStreams += 1
                if program.received != plan.size {
                    streamViolations.append("n\(node) saw \(plan.name) end cleanly with \(program.received) of \(plan.size) bytes")
                }
            }
            return
        }
        programs[key] = program
        schedule(.program(node: node, incarnation: nodes[node].incarnation, id), at: now)
    }

    /// The program reads what came (giving credit back), writes what the credit allows, and finishes.
    func runProgram(_ node: Int, _ id: WireID) {
        let key = ProgramKey(node: node, incarnation: nodes[node].incarnation, stream: id)
        guard var program = programs[key] else { return }
        let plan = streamPlans[program.plan]
        if program.unconsumed > 0 {
            let count = program.unconsumed
            program.unconsumed = 0
            programs[key] = program
            perform(node) { $0.streamConsumed(id, count) }
        }
        if program.opens, program.quits, program.written > plan.size / 2 {
            programs[key]?.quits = false
            perform(node) { $0.streamAbort(id, reason: "the program quit") }
            return
        }
        if program.opens, program.opened, program.written < plan.size {
            var buffer = ByteBuffer(bytes: (program.written..<plan.size).map { Self.patternByte(plan, $0) })
            var taken = 0
            command(node) { engine throws(SessionError) in
                let (count, actions) = try engine.streamSend(id, &buffer)
                taken = count
                return actions
            }
            guard programs[key] != nil else { return }
            program.written += taken
            programs[key]?.written = program.written
        }
        let done = program.opens ? program.opened && program.written == plan.size : program.remoteFinished
        if done, !program.finished {
            programs[key]?.finished = true
            perform(node) { $0.streamFinish(id) }
        }
    }

    func checkStreams() throws {
        if let first = streamViolations.first { throw fail(first) }
        for (index, node) in nodes.enumerated() {
            guard let diagnostics = node.engine?.diagnostics else { continue }
            if diagnostics.streams > 0 || diagnostics.pendingStreamOpens > 0 || diagnostics.streamAcceptors > 0 {
                throw fail("n\(index) still holds streams long after the network healed: \(diagnostics)")
            }
        }
    }
}
