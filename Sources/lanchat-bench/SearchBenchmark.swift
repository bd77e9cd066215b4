import FoundationEssentials
import Glibc
import LanchatCore
import LanchatStore

// MARK: Searching the history

/// Fills a history of `count` messages (words drawn from a fixed vocabulary, with a rare word in one
/// message of 10,000), then times the store's search for a rare and a common word (the last 50 that
/// match, as `lanchat history --grep`) against `LIKE '%word%'` on the same file, 5 runs each.
func searchBenchmark(directory: String, count: Int) throws {
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let path = directory + "/" + ChatStore.fileName
    unlink(path)
    let vocabulary = [
        "the", "deploy", "build", "server", "lunch", "meeting", "review", "coffee", "release", "ticket", "merge",
        "branch", "logs", "cache", "disk", "network", "printer", "badge", "train", "weather", "kernel", "patch",
    ]
    var generator = SystemRandomNumberGenerator()
    let store = try ChatStore(path: path)
    let started = now()
    var inserted = 0
    while inserted < count {
        try store.transaction {
            for _ in 0..<min(10_000, count - inserted) {
                inserted += 1
                var words = (0..<8).map { _ in vocabulary.randomElement(using: &generator)! }
                if inserted % 10_000 == 0 { words.append("zeppelin") }
                let hex = String(inserted, radix: 16)
                try store.insert(
                    StoredMessage(
                        id: String(repeating: "0", count: 32 - hex.count) + hex, room: "lab", senderID: String(repeating: "b", count: 52),
                        senderName: "bob", sequence: Int64(inserted), timestamp: 1_795_000_000_000 + Int64(inserted), kind: .text,
                        body: words.joined(separator: " ")), now: 0)
            }
        }
    }
    // The word index takes the stored messages after their commits (as the daemon does, between messages).
    while try store.indexWaiting(limit: 100_000) {}
    let filled = now() - started
    func median(_ run: () throws -> Int) rethrows -> (ms: Double, found: Int) {
        var times: [Double] = []
        var found = 0
        for _ in 0..<5 {
            let start = now()
            found = try run()
            times.append((now() - start) * 1000)
        }
        return (percentile(times, 0.5), found)
    }
    let rare = try median { try store.search(room: "lab", limit: 50, filter: HistoryFilter(words: "zeppelin")).count }
    let common = try median { try store.search(room: "lab", limit: 50, filter: HistoryFilter(words: "deploy")).count }
    store.close()
    let raw = try SQLiteDatabase(path: path)
    // The room's messages newest first, through the index of its shared messages (all of them here).
    func like(_ word: String) throws -> Int {
        try raw.query(
            "SELECT id, body FROM messages WHERE room = 'lab' AND kind != 2 AND direct = 0 AND body LIKE ? ORDER BY timestamp DESC LIMIT 50",
            [.text("%\(word)%")]
        ).count
    }
    let rareLike = try median { try like("zeppelin") }
    let commonLike = try median { try like("deploy") }
    raw.close()
    var info = stat()
    stat(path, &info)
    emit([
        "messages_count": Double(count), "fill_s": filled, "file_mib": Double(info.st_size) / 1_048_576,
        "rare_index_ms": rare.ms, "rare_like_ms": rareLike.ms, "rare_found_count": Double(rare.found), "rare_like_found_count": Double(rareLike.found),
        "common_index_ms": common.ms, "common_like_ms": commonLike.ms, "common_found_count": Double(common.found),
    ])
}
