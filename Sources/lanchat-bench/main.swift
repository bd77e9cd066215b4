// lanchat-bench: session-layer figures between simulated hosts, using the library directly (the way a
// Swift program would), next to a raw TCP baseline. Run by scripts/bench.sh; see README "Benchmarks".
//
//   lanchat-bench tcp-echo PORT                      raw TCP echo server (baseline)
//   lanchat-bench tcp-ping HOST PORT COUNT           raw TCP ping-pong of 64-byte messages; JSON result
//   lanchat-bench tls-echo DIR PORT                  TLS 1.3 echo server that syncs a small write before answering
//   lanchat-bench tls-ping DIR HOST PORT COUNT       TLS 1.3 ping-pong against it, syncing before each ping: the
//                                                    floor of an acknowledged durable message; JSON result
//   lanchat-bench tls-fanout DIR PORT COUNT MS HOSTS  a room's fan-out floor: COUNT 64-byte messages, one
//                                                    every MS, over TLS 1.3 to tls-echo on each of HOSTS (a,b,...),
//                                                    each timed to its last echo; JSON result
//   lanchat-bench node DIR NAME ADDR RDV N [leader]  a session node; N nodes meet in directory RDV
//   lanchat-bench search DIR N                       `history --grep` over N stored messages (the store's word
//                                                    index) next to a plain LIKE scan of the same file; JSON
//   lanchat-bench history DIR N [PER [relay|author]] a sealed history of N messages, phase by phase in one process:
//                                                    the inviter's encoding, the newcomer's decoding, checking, storing; JSON
//                                                    (PER: the author sealed them PER to a seal, a member hands them on,
//                                                    or the author, sealing again those in seals of fewer than 16)
//   lanchat-bench envelopes COUNT ROUNDS             sign and verify a message (P-256) next to SHA-256 of it; JSON
//   lanchat-bench workload DIR messages N [CALL]|file PATH  a fixed workload between two nodes in this process (for
//                                                    instruction counts under callgrind): N messages in calls of CALL
//                                                    (100), or a file
//   lanchat-bench floor DIR tls-ping N|tls-copy PATH its floor with the same TLS library: N synced round trips,
//                                                    or the file's bytes over TLS into a synced file
//
// One file per benchmark: TCPBaseline, TLSBaseline, TLSFanout, SearchBenchmark, HistoryBenchmark, SessionNodes, Workload (shared: Support).

let arguments = CommandLine.arguments
switch arguments.count > 1 ? arguments[1] : "" {
case "tcp-echo" where arguments.count == 3:
    tcpEcho(port: UInt16(arguments[2])!)
case "tcp-ping" where arguments.count == 5:
    tcpPing(host: arguments[2], port: UInt16(arguments[3])!, count: Int(arguments[4])!)
case "tls-echo" where arguments.count == 4:
    do { try await tlsEcho(directory: arguments[2], port: Int(arguments[3])!) } catch { die("\(error)") }
case "tls-ping" where arguments.count == 6:
    do { try await tlsPing(directory: arguments[2], host: arguments[3], port: Int(arguments[4])!, count: Int(arguments[5])!) } catch { die("\(error)") }
case "tls-fanout" where arguments.count == 7:
    do {
        try await tlsFanout(
            directory: arguments[2], port: Int(arguments[3])!, count: Int(arguments[4])!, intervalMS: Int(arguments[5])!,
            hosts: arguments[6].split(separator: ",").map(String.init))
    } catch {
        die("\(error)")
    }
case "search" where arguments.count == 4:
    do { try searchBenchmark(directory: arguments[2], count: Int(arguments[3])!) } catch { die("\(error)") }
case "history" where (4...6).contains(arguments.count) && (arguments.count < 6 || ["author", "relay"].contains(arguments[5])):
    do {
        try historyBenchmark(
            directory: arguments[2], count: Int(arguments[3])!, per: arguments.count >= 5 ? Int(arguments[4])! : 0,
            byAuthor: arguments.count == 6 && arguments[5] == "author")
    } catch { die("\(error)") }
case "envelopes" where arguments.count == 4:
    envelopeBenchmark(count: Int(arguments[2])!, rounds: Int(arguments[3])!)
case "workload" where arguments.count == 5 || (arguments.count == 6 && arguments[3] == "messages"):
    var call = 100
    if arguments.count == 6 {
        guard let given = Int(arguments[5]), given > 0 else { die("workload: calls of a count above 0") }
        call = given
    }
    do { try await workload(directory: arguments[2], kind: arguments[3], argument: arguments[4], call: call) } catch { die("\(error)") }
case "floor" where arguments.count == 5:
    do { try await floorWorkload(directory: arguments[2], kind: arguments[3], argument: arguments[4]) } catch { die("\(error)") }
case "node" where arguments.count >= 7:
    do {
        try await runNode(
            directory: arguments[2], name: arguments[3], address: arguments[4], rendezvous: arguments[5],
            total: Int(arguments[6])!, leader: arguments.count > 7 && arguments[7] == "leader")
    } catch {
        die("\(error)")
    }
default:
    die(
        "usage: lanchat-bench tcp-echo PORT | tcp-ping HOST PORT COUNT | tls-echo DIR PORT | tls-ping DIR HOST PORT COUNT | tls-fanout DIR PORT COUNT MS HOST,... | search DIR N | history DIR N [PER [relay|author]] | envelopes COUNT ROUNDS | workload DIR messages N [CALL]|file PATH | floor DIR tls-ping N|tls-copy PATH | node DIR NAME ADDR RDV N [leader]"
    )
}
