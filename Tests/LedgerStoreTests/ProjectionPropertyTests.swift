import Foundation
import LedgerCore
import LedgerTestSupport
import Projections
import Testing
@testable import LedgerStore

/// Generates valid, messy logs: overlapping sources, zero-length entries, days split across
/// zones, corrections, sync versions, priority and zone changes, grants and revokes.
struct LogGenerator {
    var random: SeededGenerator
    var live: [String] = []  // ids of samples that may still be corrected
    var syncVersions: [String: Int] = [:]
    var counter = 0

    let users = ["ann", "bob"]
    let sources = ["iPhone", "Apple Watch", "Health"]
    let zones: [String?] = [nil, nil, "Europe/Paris", "America/New_York", "+05:30"]

    init(seed: UInt64) { random = SeededGenerator(seed: seed) }

    mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &random)] }

    mutating func instant() -> Int {
        // Around the 2026 fall-back in New York and Paris, so days of 25 hours are exercised.
        1_792_800_000 + Int.random(in: 0...(4 * 86_400), using: &random) / 60 * 60
    }

    mutating func uuid() -> String {
        counter += 1
        return UUID.derived(from: Array("gen-\(random.seed)-\(counter)".utf8)).lowercased
    }

    mutating func event() -> String {
        let roll = Int.random(in: 0..<100, using: &random)
        let user = pick(users)
        switch roll {
        case 0..<6:
            let zone = pick(["Europe/Paris", "America/New_York", "UTC", "Asia/Tokyo"])
            return #"{"kind":"profile","user":"\#(user)","zone":"\#(zone)"}"#
        case 6..<12:
            var order = sources
            order.shuffle(using: &random)
            let names = order.prefix(Int.random(in: 1...3, using: &random)).map { "\"\($0)\"" }.joined(separator: ",")
            return #"{"kind":"profile","user":"\#(user)","priority":{"steps":[\#(names)]}}"#
        case 12..<16:
            let kind = Bool.random(using: &random) ? "grant" : "revoke"
            return #"{"kind":"\#(kind)","user":"\#(user)","client":"\#(pick(["coach", "insurer"]))","read":["steps"],"share":["\#(pick(["steps", "distance"]))"]}"#
        case 16..<26 where !live.isEmpty:
            let index = Int.random(in: 0..<live.count, using: &random)
            let target = live[index]
            if Bool.random(using: &random) {
                live.remove(at: index)
                return #"{"kind":"correction","target":"\#(target)","action":"retract","reason":"generated"}"#
            }
            return #"{"kind":"correction","target":"\#(target)","action":"amend","value":\#(Int.random(in: 0...500, using: &random)),"reason":"generated"}"#
        case 26..<34:
            let syncId = "walk-\(Int.random(in: 1...3, using: &random))"
            let key = user + syncId
            let version = (syncVersions[key] ?? 0) + 1
            syncVersions[key] = version
            let start = instant()
            return sample(user: user, start: start, end: start + 600, source: "Apple Watch",
                          extra: #","syncId":"\#(syncId)","syncVersion":\#(version)"#, trackable: false)
        default:
            let start = instant()
            let length = pick([0, 60, 300, 600, 1800, 5400])
            return sample(user: user, start: start, end: start + length, source: pick(sources), extra: "", trackable: true)
        }
    }

    mutating func sample(user: String, start: Int, end: Int, source: String, extra: String, trackable: Bool) -> String {
        let id = uuid()
        if trackable { live.append(id) }
        let zone = pick(zones).map { #","zone":"\#($0)""# } ?? ""
        let type = Int.random(in: 0..<5, using: &random) == 0 ? "flights" : "steps"
        return #"{"kind":"sample","id":"\#(id)","user":"\#(user)","type":"\#(type)","value":\#(Int.random(in: 0...900, using: &random)),"start":"\#(Fixtures.iso(start))","end":"\#(Fixtures.iso(end))","source":"\#(source)"\#(zone)\#(extra)}"#
    }
}

/// Every projection's rows as JSON lines, for comparing two states.
func snapshot(_ rows: (ProjectionName) throws -> [Row]) rethrows -> [String: [String]] {
    var result: [String: [String]] = [:]
    for projection in ProjectionName.allCases {
        result[projection.rawValue] = try rows(projection).map { String(decoding: $0.jsonBytes, as: UTF8.self) }
    }
    return result
}

@Suite("Projection properties (seeded; LEDGER_TEST_SEED reproduces)")
struct ProjectionPropertyTests {
    @Test("incremental == rebuild, replay to seq k == project after k, verify passes", arguments: 0..<3)
    func properties(run: Int) throws {
        let base = SeededGenerator.fromEnvironment().seed
        let seed = base &+ UInt64(run)
        var generator = LogGenerator(seed: seed)
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            try log.initialize(zone: Zone("Europe/Paris")!)
            var captured: [UInt64: [String: [String]]] = [:]
            while try log.head().seq < 120 {
                let size = Int.random(in: 1...5, using: &generator.random)
                let lines = (0..<size).map { _ in generator.event() }.joined(separator: "\n")
                let result = try log.append(try EventInput.decode(Array(lines.utf8)).map { (Optional($0.0), $0.1) })
                captured[result.head] = try snapshot { try log.rows($0, filter: RowFilter()) }
            }
            let final = try snapshot { try log.rows($0, filter: RowFilter()) }
            let nonEmpty = final["daily"]?.count ?? 0
            #expect(nonEmpty > 0, "seed \(seed): the generated log produced no daily rows")

            // The typed in-process read gives the same days and totals as the rows.
            for user in generator.users {
                for type in QuantityType.allCases {
                    let rows = try log.rows(.daily, filter: RowFilter(user: user, type: type))
                    let totals = try log.dailyTotals(user: user, type: type)
                    #expect(totals.map { "\($0.date.daysSinceEpoch) \($0.value) \($0.samples) \($0.sources)" }
                            == rows.map { row in
                                let date = CivilDate(parsing: row.values["date"]?.stringValue ?? "")?.daysSinceEpoch
                                let number = { (name: String) in row.values[name]?.numberValue ?? -1 }
                                return "\(date ?? -1) \(number("value")) \(Int(number("samples"))) \(Int(number("sources")))"
                            },
                            "seed \(seed): dailyTotals of \(user) \(type) differ from the daily rows")
                }
            }

            // The state the appends left (buckets, samples, users, not only rows) is the state a
            // fresh fold of the log makes.
            #expect(throws: Never.self, "seed \(seed): incremental state") { _ = try log.verifyProjections().rows }
            try log.rebuildProjections()
            let rebuilt = try snapshot { try log.rows($0, filter: RowFilter()) }
            #expect(rebuilt == final, "seed \(seed): rebuild differs from the incremental projection")

            let points = captured.keys.sorted()
            for _ in 0..<6 {
                let k = points[Int.random(in: 0..<points.count, using: &generator.random)]
                let replayed = try log.withReplay(to: .seq(k)) { point, query in
                    #expect(point.seq == k)
                    return try snapshot { try query.rows($0, filter: RowFilter()) }
                }
                #expect(replayed == captured[k], "seed \(seed): replay to seq \(k) differs from project after \(k)")
                // A replay that folds one user's events gives that user's rows of the full replay.
                for user in generator.users {
                    let scoped = try log.withReplay(to: .seq(k), users: [user]) { point, query in
                        #expect(point.seq == k)
                        return try snapshot { try query.rows($0, filter: RowFilter(user: user)) }
                    }
                    let full = try log.withReplay(to: .seq(k)) { _, query in
                        try snapshot { try query.rows($0, filter: RowFilter(user: user)) }
                    }
                    #expect(scoped == full, "seed \(seed): replay of \(user) alone to seq \(k) differs from the full replay")
                }
            }
            #expect(try log.verifyChain().verified == log.head().seq)
            #expect(try log.verifyProjections().rows > 0)
        }
    }

    /// A review of the write cursors: one batch long enough that its cursors' pages split and
    /// are rewritten under them by corrections, in one transaction.
    @Test("one batch of 3,000 generated events leaves the state, indexes and rows a fresh fold makes")
    func largeBatch() throws {
        let seed = SeededGenerator.fromEnvironment().seed &+ 50
        var generator = LogGenerator(seed: seed)
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            try log.initialize(zone: Zone("Europe/Paris")!)
            let lines = (0..<3_000).map { _ in generator.event() }.joined(separator: "\n")
            let result = try log.append(try EventInput.decode(Array(lines.utf8)).map { (Optional($0.0), $0.1) })
            #expect(result.appended > 2_000, "seed \(seed)")
            let live = try snapshot { try log.rows($0, filter: RowFilter()) }
            #expect((live["daily"]?.count ?? 0) > 0, "seed \(seed)")
            #expect(throws: Never.self, "seed \(seed): incremental state") { _ = try log.verifyProjections().rows }
            #expect(throws: Never.self, "seed \(seed): indexes") { _ = try log.verifyIndexes() }
            #expect(try log.verifyChain().verified == log.head().seq)
            try log.rebuildProjections(indexes: true)
            #expect(try snapshot { try log.rows($0, filter: RowFilter()) } == live, "seed \(seed): rebuild differs")
        }
    }

    @Test("opening a layout-1 ledger rebuilds the sample and sync indexes exactly as appends left them", arguments: 0..<2)
    func layoutMigration(run: Int) throws {
        let seed = SeededGenerator.fromEnvironment().seed &+ 100 &+ UInt64(run)
        var generator = LogGenerator(seed: seed)
        try withTemporaryLedger { path in
            var before: [[[UInt8]]] = []
            do {
                let log = try EventLog(path: path, create: true)
                while try log.head().seq < 150 {
                    let lines = (0..<Int.random(in: 1...5, using: &generator.random)).map { _ in generator.event() }
                    _ = try log.append(try EventInput.decode(Array(lines.joined(separator: "\n").utf8)).map { (Optional($0.0), $0.1) })
                }
                before = try dump(log)
                #expect(!before[0].isEmpty, "seed \(seed): no sample states")
                // Make it look like the first release's ledger: layout 1, indexes to be redone.
                try log.environment.write { txn in
                    try txn.clear(log.samples)
                    try txn.clear(log.sync)
                    try txn.put(log.meta, Array("format".utf8), Array("1".utf8))
                }
            }
            let reopened = try EventLog(path: path, create: false)
            #expect(try dump(reopened) == before, "seed \(seed): reindexed samples/sync differ from what appends wrote")
            #expect(try reopened.environment.read { try $0.get(reopened.meta, Array("format".utf8)) } == Array("2".utf8))
            #expect(try reopened.verifyProjections().rows > 0)
        }
    }

    /// Every entry of the `samples` and `sync` indexes, flattened key ‖ value, in key order.
    func dump(_ log: EventLog) throws -> [[[UInt8]]] {
        try log.environment.read { txn in
            try [log.samples, log.sync].map { db in
                var entries: [[UInt8]] = []
                try txn.scan(db) { key, value in
                    entries.append(Array(key) + [0xFF] + Array(value))
                    return true
                }
                return entries
            }
        }
    }

    @Test("a tampered projection row fails verify")
    func tamperedProjection() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let lines = Fixtures.stepsFile(count: 5)
            _ = try log.append(try EventInput.decode(Array(lines.utf8)).map { (Optional($0.0), $0.1) })
            #expect(try log.verifyProjections().rows > 0)
            try log.environment.write { txn in
                let daily = log.stateDatabases[StateTable.daily.ordinal]
                var key: [UInt8] = []
                try txn.scan(daily) { k, _ in
                    key = Array(k)
                    return false
                }
                var value = try #require(try txn.get(daily, key))
                value[0] ^= 0x40  // the sign/exponent of the stored total
                try txn.put(daily, key, value)
            }
            #expect(throws: LedgerError.self) { try log.verifyProjections().rows }
            try log.rebuildProjections()
            #expect(try log.verifyProjections().rows > 0)
        }
    }
}
