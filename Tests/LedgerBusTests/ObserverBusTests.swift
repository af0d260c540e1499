import Foundation
import LedgerBus
import LedgerCore
import LedgerStore
import LedgerTestSupport
import Synchronization
import Testing

func batch(_ lines: [String]) throws -> [(InputLocation?, Event)] {
    try EventInput.decode(Array(lines.joined(separator: "\n").utf8)).map { (Optional($0.0), $0.1) }
}

func sample(_ user: String, minute: Int, value: Int) -> String {
    let start = Fixtures.iso(1_796_025_600 + minute * 60)
    let end = Fixtures.iso(1_796_025_600 + minute * 60 + 30)
    return #"{"kind":"sample","user":"\#(user)","type":"steps","value":\#(value),"start":"\#(start)","end":"\#(end)","source":"iPhone"}"#
}

/// Collects `count` changes from a subscription, failing after `seconds`.
func collect(_ subscription: ChangeSubscription, count: Int, seconds: Double = 10) async throws -> [StoredChange] {
    try await withThrowingTaskGroup(of: [StoredChange]?.self) { group in
        group.addTask {
            var result: [StoredChange] = []
            for try await change in subscription {
                result.append(change)
                if result.count == count { break }
            }
            return result
        }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        let first = try await group.next()!
        group.cancelAll()
        return first ?? []
    }
}

@Suite("Observer bus")
struct ObserverBusTests {
    @Test("resuming from any k gives exactly the changes after k, then live ones (seeded)")
    func resumeFromAnyPosition() async throws {
        var random = SeededGenerator.fromEnvironment()
        try await withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            for index in 0..<30 {
                let size = Int.random(in: 1...3, using: &random)
                let lines = (0..<size).map { _ in
                    sample(["ann", "bob"].randomElement(using: &random)!, minute: Int.random(in: 0..<2000, using: &random),
                           value: Int.random(in: 1...500, using: &random))
                }
                _ = try log.append(try batch(lines + [sample("cy", minute: index, value: 1)]))
            }
            let all = try log.changes(after: 0, limit: 100_000).changes
            let bus = ObserverBus(log: log)
            defer { bus.stop() }
            for _ in 0..<5 {
                let k = UInt64.random(in: 0...(try log.head().seq), using: &random)
                let expected = all.filter { $0.seq > k }
                let got = try await collect(bus.changes(after: k), count: expected.count)
                #expect(got == expected, "seed \(random.seed), k \(k)")
            }
            // Live: a subscription at the head receives a change committed afterwards, by another thread.
            let head = try log.head().seq
            let subscription = bus.changes(after: head, filter: ChangeFilter(projection: .daily, user: "zed"))
            let writer = Task.detached {
                try await Task.sleep(for: .milliseconds(100))
                _ = try log.append(try batch([sample("zed", minute: 5, value: 42)]))
            }
            let live = try await collect(subscription, count: 1)
            try await writer.value
            #expect(live.count == 1)
            #expect(live.first?.seq == head + 1)
            #expect(live.first.map { String(decoding: $0.json, as: UTF8.self).contains(#""value":42"#) } == true)
        }
    }

    @Test("a filtered subscription reads past pages with no match without waiting for a commit")
    func filteredCatchUp() async throws {
        try await withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            // One batch of 1,500 days for ann: thousands of change rows, none of them zed's.
            let days = (0..<1_500).map { day in sample("ann", minute: day * 1_440, value: 1) }
            _ = try log.append(try batch(days))
            _ = try log.append(try batch([sample("zed", minute: 5, value: 42)]))
            #expect(try log.changes(after: 0, limit: 100_000).changes.count > 3_000)
            let bus = ObserverBus(log: log)
            defer { bus.stop() }
            // Nothing is committed after this point: the change must come from the catch-up.
            let got = try await collect(bus.changes(after: 0, filter: ChangeFilter(projection: .daily, user: "zed")),
                                        count: 1, seconds: 5)
            #expect(got.count == 1)
            #expect(got.first.map { String(decoding: $0.json, as: UTF8.self).contains(#""value":42"#) } == true)
        }
    }

    @Test("observers hear about commits made through another environment handle's process")
    func seesOtherWriters() async throws {
        let binary = try ledgerBinary()
        try await withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let bus = ObserverBus(log: log)
            bus.start()
            defer { bus.stop() }
            let heard = Mutex(0)
            _ = bus.observe { heard.withLock { $0 += 1 } }
            let appended = try runProcess(binary, ["append", "--db", path], stdin: Array(sample("ann", minute: 1, value: 3).utf8))
            #expect(appended.status == 0)
            let deadline = Date().addingTimeInterval(5)
            while heard.withLock({ $0 }) == 0, Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(heard.withLock { $0 } > 0)
        }
    }

    /// LMDB writes a commit's meta page (what `mdb_env_info` reports) a disk flush before it
    /// publishes the commit to new readers. A poller that took the first for "committed" read
    /// the old snapshot, went back to waiting, and left the change unread until the next commit
    /// or heartbeat (up to 15 s for an SSE subscriber). Spinning beside durable commits hits
    /// that window in most of them.
    @Test("once the last transaction id moves, a read begun after it sees the commit")
    func transactionIDMovesOnlyWhenReadable() async throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let commits = 200
            let done = Atomic(false)
            let writer = Thread {
                for minute in 0..<commits {
                    _ = try? log.append(try! batch([sample("ann", minute: minute, value: 1)]))
                }
                done.store(true, ordering: .releasing)
            }
            writer.start()
            var moves = 0, stale = 0
            // Each commit is one append of one event: the transaction id and the head move
            // together, so a read begun once the id reads `current` must find at least the
            // head that id stands for. (Comparing with the head read after the last move
            // counted a commit landing between that move's two reads as stale: a starved
            // poller, in a full run of the suite, saw one in 200.)
            let firstID = log.lastTransactionID
            let firstHead = try log.head().seq
            var last = firstID
            while !done.load(ordering: .acquiring) || log.lastTransactionID != last {
                let current = log.lastTransactionID
                guard current != last else { continue }
                let head = try log.head().seq
                moves += 1
                if head < firstHead + UInt64(current - firstID) { stale += 1 }
                last = current
            }
            #expect(try log.head().seq == UInt64(commits))
            #expect(moves > 0)
            #expect(stale == 0, "\(stale) of \(moves) moves of the transaction id came before the commit could be read")
        }
    }
}
