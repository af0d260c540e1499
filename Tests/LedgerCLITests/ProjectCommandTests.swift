import Foundation
@testable import LedgerCLI
import LedgerCore
import LedgerStore
import Projections
import LedgerTestSupport
import Testing

/// An in-process run with the clock fixed at `now`.
func ledger(_ arguments: [String], stdin: String = "", db: String, now: String) -> Run {
    let out = OutputSink(), err = OutputSink()
    let instant = try! Timestamp.parseRFC3339(now).0
    let status = LedgerCommandLine.run(arguments: arguments, environment: ["LEDGER_DB": db],
                                       stdin: .bytes(Array(stdin.utf8)), stdout: out, stderr: err,
                                       clock: { instant })
    return Run(status: status, stdout: out.text, stderr: err.text)
}

/// An iPhone and a Watch on the same walk, and a late-evening walk across midnight.
let walkTogether = """
{"kind":"sample","type":"steps","value":600,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone"}
{"kind":"sample","type":"steps","value":500,"start":"2026-11-29T08:05:00Z","end":"2026-11-29T08:10:00Z","source":"Watch"}
{"kind":"sample","type":"steps","value":100,"start":"2026-11-29T23:50:00Z","end":"2026-11-30T00:10:00Z","source":"iPhone"}
{"kind":"grant","client":"coach","read":["steps"]}

"""

@Suite("project, replay, rebuild")
struct ProjectCommandTests {
    /// The CLI writes rows through its own table of keys (RowSet), the server and the stored
    /// changes through `Row.jsonBytes`: README promises the same bytes.
    @Test("project's json and ndjson are the rows' own JSON, byte for byte, for every projection")
    func rowsAsTheServerWritesThem() throws {
        try withTemporaryLedger { db in
            #expect(ledger(["append"], stdin: walkTogether + #"{"kind":"sample","type":"distance","value":1.25,"unit":"km","start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"Watch \"2\""}"#, db: db).status == 0)
            let log = try EventLog(path: db, create: false)
            for projection in ProjectionName.allCases {
                let rows = try log.rows(projection, filter: RowFilter())
                #expect(!rows.isEmpty)
                let lines = rows.map { String(decoding: $0.jsonBytes, as: UTF8.self) }
                #expect(ledger(["project", projection.rawValue, "--format", "ndjson"], db: db).stdout == lines.map { $0 + "\n" }.joined())
                #expect(ledger(["project", projection.rawValue, "--format", "json"], db: db).stdout == "[" + lines.joined(separator: ",") + "]\n")
            }
        }
    }

    /// Pacific/Apia skipped 2011-12-30 (23:59 at -10:00 on the 29th, then 00:00 at +14:00 on
    /// the 31st): a day with no time in it gets no share of a sample spanning it (an
    /// oracle audit found a `per-source` row of 0 with 1 sample there; `daily` had none).
    @Test("a day the zone skipped gets no row of a sample that spans it")
    func skippedDay() throws {
        try withTemporaryLedger { db in
            #expect(ledger(["init", "--timezone", "Pacific/Apia"], db: db).status == 0)
            let sample = #"{"kind":"sample","type":"steps","value":100,"start":"2011-12-29T12:00:00-10:00","end":"2011-12-31T12:00:00+14:00","source":"iPhone"}"#
            #expect(ledger(["append"], stdin: sample, db: db).status == 0)
            for projection in ["per-source", "daily"] {
                let rows = ledger(["project", projection, "--format", "ndjson"], db: db).stdout.split(separator: "\n")
                #expect(rows.count == 2 && rows.allSatisfy { !$0.contains("2011-12-30") && $0.contains("\"value\":50,") }, "\(projection): \(rows)")
            }
            #expect(ledger(["verify"], db: db).status == 0)
        }
    }

    /// Values are capped at 1e15 each, but a day's sum is not: 9,224 instants of 1e15 flights
    /// from one source add up past Int64, where `table` and `chart` trapped converting it.
    @Test("a count beyond Int64 prints in table and chart (it crashed the command)")
    func hugeCount() throws {
        try withTemporaryLedger { db in
            let lines = (0..<9_224).map { index in
                #"{"kind":"sample","type":"flights","value":1e15,"start":"2026-01-01T10:00:00Z","end":"2026-01-01T10:00:00Z","source":"a","id":"\#(UUID(uuidString: String(format: "00000000-0000-4000-8000-%012x", index))!)"}"#
            }
            #expect(ledger(["append"], stdin: lines.joined(separator: "\n"), db: db).status == 0)
            #expect(ledger(["project", "daily", "--format", "json"], db: db).stdout.contains(#""value":9.224e+18"#))
            let table = ledger(["project", "daily", "--format", "table"], db: db)
            #expect(table.status == 0 && table.stdout.contains("  9224000000000000000  count"), "\(table.stdout)\(table.stderr)")
            for projection in ["per-source", "last-known"] {
                let chart = ledger(["project", projection, "--format", "chart"], db: db)
                #expect(chart.status == 0 && chart.stdout.hasSuffix(" 9224000000000000000 count\n"), "\(chart.stdout)\(chart.stderr)")
            }
        }
    }

    /// Foundation's `padding(toLength:)` counts UTF-16 units: a decomposed "émile" printed as
    /// "émil", a family emoji was split in half, and wide names misaligned the columns (an audit).
    @Test("table and chart show names whole, aligned by the columns they take; invisible characters written as \\u{…}")
    func wideNames() throws {
        try withTemporaryLedger { db in
            let users = ["e\u{301}mile", "👨‍👩‍👧", "日本語", "r\u{202E}x", "ann"]
            let lines = users.enumerated().map { index, user in
                #"{"kind":"sample","user":"\#(user)","type":"steps","value":\#(index + 1),"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone"}"#
            }
            #expect(ledger(["append"], stdin: lines.joined(separator: "\n"), db: db).status == 0)
            let table = ledger(["project", "daily", "--format", "table"], db: db).stdout
            let rows = table.split(separator: "\n").map(String.init)
            #expect(rows.count == 6, "\(table)")
            // Every row's TYPE column starts at the same terminal column.
            let typeColumns = rows.map { row in OutputFormat.displayWidth(String(row[..<row.range(of: row == rows[0] ? "TYPE" : "steps")!.lowerBound])) }
            #expect(Set(typeColumns).count == 1, "\(typeColumns)\n\(table)")
            for shown in ["e\u{301}mile ", "👨‍👩‍👧 ", "日本語 ", "r\\u{202E}x "] { #expect(table.contains(shown), "\(shown): \(table)") }
            #expect(!table.contains("\u{202E}"))
            // The joiners and spaces names hold are letters of them, not hidden characters.
            #expect(OutputFormat.shown("\u{639}\u{644}\u{6CC}\u{200C}\u{631}\u{636}\u{627}") == "\u{639}\u{644}\u{6CC}\u{200C}\u{631}\u{636}\u{627}")
            #expect(OutputFormat.shown("山田\u{3000}太郎") == "山田\u{3000}太郎")
            #expect(OutputFormat.shown("a\u{200B}b\u{202E}") == "a\\u{200B}b\\u{202E}")
            #expect(OutputFormat.displayWidth("日本語") == 6 && OutputFormat.displayWidth("e\u{301}mile") == 5 && OutputFormat.displayWidth("👨‍👩‍👧") == 2)
            let chart = ledger(["project", "daily", "--format", "chart"], db: db).stdout
            for shown in ["👨‍👩‍👧", "e\u{301}mile", "r\\u{202E}x"] { #expect(chart.contains(shown), "\(shown): \(chart)") }
            let bars = chart.split(separator: "\n").map { row in OutputFormat.displayWidth(String(row[..<row.firstIndex(where: { "█▏▎▍▌▋▊▉".contains($0) })!])) }
            #expect(Set(bars).count == 1, "\(bars)\n\(chart)")
        }
    }

    @Test("daily-steps merges sources; per-source does not (golden ndjson)")
    func dailyAndPerSource() throws {
        withTemporaryLedger { db in
            #expect(ledger(["append"], stdin: walkTogether, db: db).status == 0)
            // 29th: the iPhone (first seen, so higher priority) covers 08:00–08:10 alone: 600,
            // plus half of the 23:50–00:10 walk: 50. The Watch's 500 loses. 30th: the other 50.
            #expect(ledger(["project", "daily-steps"], db: db).stdout == """
            {"user":"default","type":"steps","date":"2026-11-29","value":650,"unit":"count","samples":2,"sources":1}
            {"user":"default","type":"steps","date":"2026-11-30","value":50,"unit":"count","samples":1,"sources":1}

            """)
            #expect(ledger(["project", "per-source", "--date", "2026-11-29"], db: db).stdout == """
            {"user":"default","type":"steps","date":"2026-11-29","source":"Watch","value":500,"unit":"count","samples":1}
            {"user":"default","type":"steps","date":"2026-11-29","source":"iPhone","value":650,"unit":"count","samples":2}

            """)
            // Preferring the Watch flips who wins 08:05–08:10: 300 + 500 + 50.
            let profile = #"{"kind":"profile","priority":{"steps":["Watch","iPhone"]}}"#
            #expect(ledger(["append"], stdin: profile, db: db).status == 0)
            let flipped = ledger(["project", "daily", "--from", "2026-11-29", "--to", "2026-11-29", "--format", "csv"], db: db)
            #expect(flipped.stdout == "user,type,date,value,unit,samples,sources\ndefault,steps,2026-11-29,850,count,3,2\n")
        }
    }

    @Test("csv writes a source or user a spreadsheet would run as a formula after a quote; numbers and offsets as they are")
    func csvFormulas() throws {
        withTemporaryLedger { db in
            let samples = """
            {"kind":"sample","type":"steps","value":10,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"=HYPERLINK(\\"http://x\\",\\"go\\")"}
            {"kind":"sample","type":"steps","value":20,"start":"2026-11-29T09:00:00Z","end":"2026-11-29T09:10:00Z","source":"@SUM(A1)"}
            {"kind":"sample","type":"steps","value":30,"start":"2026-11-29T10:00:00Z","end":"2026-11-29T10:10:00Z","source":"+cmd|' /C calc'!A0"}
            {"kind":"sample","type":"steps","value":40,"start":"2026-11-29T11:00:00Z","end":"2026-11-29T11:10:00Z","source":"-05:30"}
            {"kind":"sample","type":"steps","value":50,"start":"2026-11-29T12:00:00Z","end":"2026-11-29T12:10:00Z","source":"Watch","user":"-2+3"}

            """
            let appended = ledger(["append"], stdin: samples, db: db)
            #expect(appended.status == 0, "\(appended.stderr)")
            let csv = ledger(["project", "per-source", "--format", "csv"], db: db).stdout
            #expect(csv == """
            user,type,date,source,value,unit,samples
            '-2+3,steps,2026-11-29,Watch,50,count,1
            default,steps,2026-11-29,'+cmd|' /C calc'!A0,30,count,1
            default,steps,2026-11-29,-05:30,40,count,1
            default,steps,2026-11-29,"'=HYPERLINK(""http://x"",""go"")",10,count,1
            default,steps,2026-11-29,'@SUM(A1),20,count,1

            """)
            // The stored names are as given: only the csv cell is quoted.
            let ndjson = ledger(["project", "per-source", "--user", "default"], db: db).stdout
            #expect(ndjson.contains(#""source":"@SUM(A1)""#))
            #expect(ndjson.contains(#""source":"=HYPERLINK(\"http://x\",\"go\")""#))
        }
    }

    @Test("table, json, chart and grants formats")
    func formats() throws {
        try withTemporaryLedger { db in
            #expect(ledger(["append"], stdin: walkTogether, db: db).status == 0)
            let table = ledger(["project", "daily", "--format", "table"], db: db).stdout
            #expect(table == """
            USER     TYPE   DATE        VALUE  UNIT   SAMPLES  SOURCES
            default  steps  2026-11-29  650    count  2        1
            default  steps  2026-11-30  50     count  1        1

            """)
            let json = ledger(["project", "daily", "--format", "json"], db: db).stdout
            guard case .array(let rows) = try JSONValue.parse(Array(json.utf8)) else {
                Issue.record("not an array: \(json)")
                return
            }
            #expect(rows.count == 2)
            let chart = ledger(["project", "daily", "--format", "chart"], db: db).stdout.split(separator: "\n")
            #expect(chart.count == 2)
            #expect(chart[0].hasPrefix("2026-11-29  " + String(repeating: "█", count: 40)))
            #expect(chart[0].hasSuffix(" 650 count"))
            // 50 / 650 of 40 cells = 3.08 cells = 24.6 eighths, rounded to 25: three blocks and one eighth.
            #expect(chart[1].hasPrefix("2026-11-30  ███▏ "))
            // Each type is scaled to its own largest value: 2 km (2000 m) is a full bar beside 650 steps,
            // not one 325 times as long (an audit: one scale for all units).
            let distance = #"{"kind":"sample","type":"distance","value":2,"unit":"km","start":"2026-11-29T09:00:00Z","end":"2026-11-29T09:20:00Z","source":{"name":"iPhone"}}"#
            #expect(ledger(["append"], stdin: distance, db: db).status == 0)
            let mixed = ledger(["project", "daily", "--format", "chart"], db: db).stdout.split(separator: "\n")
            #expect(mixed.count == 3)
            #expect(mixed.contains { $0.hasPrefix("2026-11-29 distance  " + String(repeating: "█", count: 40) + " ") && $0.hasSuffix(" 2000.00 m") })
            #expect(mixed.contains { $0.hasPrefix("2026-11-29 steps     " + String(repeating: "█", count: 40) + " ") })
            #expect(mixed.contains { $0.hasPrefix("2026-11-30 steps     ███▏ ") })
            let grants = ledger(["project", "grants"], db: db).stdout
            #expect(grants.hasPrefix(#"{"user":"default","client":"coach","read":["steps"],"share":[],"updated":""#))
            #expect(grants.hasSuffix(#","seq":4}"# + "\n"))
        }
    }

    @Test("--date today --fallback: today's row, else last-known marked stale")
    func fallback() throws {
        withTemporaryLedger { db in
            #expect(ledger(["append"], stdin: walkTogether, db: db).status == 0)
            let fresh = ledger(["project", "daily-steps", "--date", "today", "--fallback"], db: db, now: "2026-11-29T12:00:00Z")
            #expect(fresh.stdout.contains(#""date":"2026-11-29","value":650"#))
            #expect(fresh.stdout.contains(#""stale":false"#))
            let stale = ledger(["project", "daily-steps", "--date", "today", "--fallback"], db: db, now: "2026-12-03T12:00:00Z")
            #expect(stale.stdout.hasPrefix(#"{"user":"default","type":"steps","date":"2026-11-30","value":50,"unit":"count","latestSampleEnd":"2026-11-30T00:10:00.000000Z","seq":3,"#))
            #expect(stale.stdout.contains(#""stale":true}"#))
            let none = ledger(["project", "daily-steps", "--date", "today"], db: db, now: "2026-12-03T12:00:00Z")
            #expect(none.stdout.isEmpty)
            let lastKnown = ledger(["project", "last-known"], db: db).stdout
            #expect(lastKnown.contains(#""date":"2026-11-30","value":50"#))
        }
    }

    @Test("replay --date today is today in the profile zone as of the replay point, not the live one")
    func replayToday() throws {
        withTemporaryLedger { db in
            // 12:00Z on the 29th is 02:00 on the 30th in Kiritimati (+14). The profile then
            // moves to UTC, where it is the 29th.
            let events = """
            {"kind":"profile","zone":"Pacific/Kiritimati"}
            {"kind":"sample","type":"steps","value":100,"start":"2026-11-29T12:00:00Z","end":"2026-11-29T12:10:00Z","source":"iPhone"}
            {"kind":"profile","zone":"UTC"}

            """
            #expect(ledger(["append"], stdin: events, db: db).status == 0)
            let now = "2026-11-29T12:30:00Z"
            let live = ledger(["project", "daily-steps", "--user", "default", "--date", "today"], db: db, now: now)
            #expect(live.stdout.contains(#""date":"2026-11-29","value":100"#), "\(live.stdout)")
            let then = ledger(["replay", "--to-seq", "2", "--user", "default", "--date", "today"], db: db, now: now)
            #expect(then.status == 0, "\(then.stderr)")
            #expect(then.stdout.contains(#""date":"2026-11-30","value":100"#), "\(then.stdout)")
            #expect(ledger(["replay", "--to-seq", "3", "--user", "default", "--date", "today"], db: db, now: now).stdout == live.stdout)
        }
    }

    /// The unit-only rescale check reads the fold's state, which stands at the head when the
    /// log's indexes are rebuilt: replaying the corrections there refused a valid history.
    @Test("rebuild --indexes replays a unit amendment that a later one brought back in range")
    func rebuildIndexesAfterUnitAmendments() throws {
        withTemporaryLedger { db in
            let id = "0b3c1f7e-6a2d-4e8f-9b1c-5d7e9f0a1b2e"
            let events = """
            {"id":"\(id)","kind":"sample","type":"distance","value":1,"unit":"m","start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone"}
            {"kind":"correction","target":"\(id)","action":"amend","unit":"km","reason":"r"}
            {"kind":"correction","target":"\(id)","action":"amend","value":5e14,"unit":"m","reason":"r"}

            """
            #expect(ledger(["append"], stdin: events, db: db).status == 0)
            let rebuilt = ledger(["rebuild", "--indexes"], db: db)
            #expect(rebuilt.status == 0, "\(rebuilt.stderr)")
            #expect(ledger(["verify"], db: db).status == 0)
            #expect(ledger(["project", "daily"], db: db).stdout.contains(#""value":500000000000000"#))
        }
    }

    @Test("replay --to-seq prints what project printed then, and the as-of line on stderr")
    func replay() throws {
        try withTemporaryLedger { db in
            #expect(ledger(["append"], stdin: walkTogether, db: db).status == 0)
            let before = ledger(["project", "daily"], db: db).stdout
            let retract = #"{"kind":"correction","target":"\#(try firstSampleID(db))","action":"retract","reason":"duplicate"}"#
            #expect(ledger(["append"], stdin: retract, db: db).status == 0)
            #expect(ledger(["project", "daily"], db: db).stdout != before)
            let replay = ledger(["replay", "--to-seq", "4", "--projection", "daily"], db: db)
            #expect(replay.status == 0)
            #expect(replay.stdout == before)
            let head4 = try EventLog(path: db, create: false).record(at: 4)!
            #expect(replay.stderr == "as of seq 4, recorded \(head4.recorded.rfc3339), hash \(head4.hash.hex)\n")
            let byTime = ledger(["replay", "--to", head4.recorded.rfc3339], db: db)
            #expect(byTime.stdout == before)
            let beforeAll = ledger(["replay", "--to", "2000-01-01"], db: db)
            #expect(beforeAll.stdout.isEmpty)
            #expect(beforeAll.stderr.hasPrefix("as of seq 0, "))
        }
    }

    @Test("rebuild and verify")
    func rebuildAndVerify() throws {
        try withTemporaryLedger { db in
            #expect(ledger(["append"], stdin: walkTogether, db: db).status == 0)
            let rebuild = ledger(["rebuild"], db: db)
            #expect(rebuild.status == 0)
            #expect(rebuild.stdout.hasPrefix("rebuilt daily, per-source, last-known, grants from 4 events in "))
            let verify = ledger(["verify"], db: db)
            #expect(verify.stdout.hasSuffix("projections match a fresh fold (7 rows); indexes agree\n"))
            // The log's own indexes: an id that names another event is found, and rebuilt.
            let id = try #require(try EventLog(path: db, create: false).record(at: 1)?.event().id)
            do {
                let environment = try Environment(path: db)
                let ids = try #require(try environment.openDatabases(["ids"])["ids"])
                try environment.write { try $0.put(ids, id.bytes, UInt64(2).bigEndianBytes) }
            }
            let damaged = ledger(["verify"], db: db)
            #expect(damaged.status == 1)
            #expect(damaged.stderr == "Error: the log's index 'ids' disagrees with the log at key \(id.bytes.hex): it names seq 2, whose event has another id; run 'ledger rebuild --indexes'\n")
            let repaired = ledger(["rebuild", "--indexes"], db: db)
            #expect(repaired.stdout.hasPrefix("rebuilt ids, samples, sync, daily, per-source, last-known, grants from 4 events in "))
            #expect(ledger(["verify"], db: db).status == 0)
        }
    }

    /// A review: what `verify`, `rebuild --accept-head` and the refusals say to a user.
    @Test("verify says when it could not compare; rebuild --accept-head says which seqs are gone")
    func integrityMessages() throws {
        try withTemporaryLedger { db in
            let one = Fixtures.stepLine(value: 100, start: "2026-11-29T08:00:00Z", end: "2026-11-29T08:10:00Z")
            let two = Fixtures.stepLine(value: 50, start: "2026-11-29T09:00:00Z", end: "2026-11-29T09:10:00Z")
            // -0.0 through the CLI's own decoder (the direct path), then two more samples.
            let zero = Fixtures.stepLine(value: 0, start: "2026-11-29T07:00:00Z", end: "2026-11-29T07:01:00Z").replacingOccurrences(of: #""value":0.0"#, with: #""value":-0.0"#)
            #expect(zero.contains("-0.0"))
            for line in [zero, one, two] { #expect(ledger(["append"], stdin: line, db: db).status == 0) }
            #expect(ledger(["verify"], db: db).status == 0)
            func putMeta(_ key: String, _ value: UInt64) throws {
                let environment = try Environment(path: db)
                let meta = try #require(try environment.openDatabases(["meta"])["meta"])
                try environment.write { try $0.put(meta, Array(key.utf8), value.bigEndianBytes) }
            }
            try putMeta("projections.version", 1)
            let upgraded = ledger(["verify"], db: db)
            #expect(upgraded.status == 0 && upgraded.stdout.contains("; projections of fold version 1 made again for this build's version \(ActivityFold.version), so the stored ones were not compared ("), "\(upgraded.stdout)")
            try putMeta("projections.position", 2)
            let behind = ledger(["project", "daily"], db: db)
            #expect(behind.status == 1 && behind.stderr == "Error: the stored projections were folded up to seq 2, but the log's head is seq 3, and appends fold in the transaction that writes their events: events were added to the log by hand, or the projections altered. 'ledger verify' checks the log; 'ledger rebuild' then folds them again\n", "\(behind.stderr)")
            try putMeta("projections.position", 5)
            let past = ledger(["project", "daily"], db: db)
            #expect(past.status == 1 && past.stderr.hasPrefix("Error: seq 4 is corrupt: missing from the log: its projections were folded up to seq 5, past its last event (seq 3)") && past.stderr.hasSuffix("or go on with the log as it is: 'ledger rebuild --accept-head'\n"), "\(past.stderr)")
            #expect(ledger(["rebuild"], db: db).status == 1)
            let accepted = ledger(["rebuild", "--accept-head"], db: db)
            #expect(accepted.status == 0 && accepted.stderr == "note: the projections had been folded up to seq 5; the log ends at seq 3, so seqs 4–5 are not in it, and the rows no longer count them\n", "\(accepted.stderr)")
            let verified = ledger(["verify"], db: db)
            #expect(verified.status == 0 && verified.stdout.contains("projections match a fresh fold"), "\(verified.stdout) \(verified.stderr)")
        }
    }

    @Test("stats reports a damaged projections position instead of failing, and rebuild mends it")
    func statsOnDamagedPosition() throws {
        try withTemporaryLedger { db in
            #expect(ledger(["append"], stdin: walkTogether, db: db).status == 0)
            do {
                let environment = try Environment(path: db)
                let meta = try #require(try environment.openDatabases(["meta"])["meta"])
                try environment.write { try $0.put(meta, Array("projections.position".utf8), [1]) }
            }
            func stats() throws -> [String: JSONValue] {
                let run = ledger(["stats", "--format", "json"], db: db)
                #expect(run.status == 0, "\(run.stderr)")
                guard case .array(let rows) = try JSONValue.parse(Array(run.stdout.utf8)), let row = rows.first?.objectValue
                else {
                    Issue.record("stats json: \(run.stdout)")
                    return [:]
                }
                return row
            }
            let damaged = try stats()
            #expect(damaged["head"] == .int(4))
            #expect(damaged["projections_position"] == .null)
            #expect(damaged["projections_fold_version"] == .int(Int64(ActivityFold.version)))  // still read
            #expect(damaged["projections_current"] == .bool(false))
            #expect(damaged["projections_damaged"] == .string("'meta' holds 1 bytes under 'projections.position', not 8; 'ledger rebuild' writes it again"))
            #expect(ledger(["project", "daily"], db: db).status == 1)
            #expect(ledger(["rebuild"], db: db).status == 0)
            let mended = try stats()
            #expect(mended["projections_position"] == .int(4))
            #expect(mended["projections_current"] == .bool(true))
            #expect(mended["projections_damaged"] == .null)
            // A damaged version does not hide the position, which still reads.
            do {
                let environment = try Environment(path: db)
                let meta = try #require(try environment.openDatabases(["meta"])["meta"])
                try environment.write { try $0.put(meta, Array("projections.version".utf8), [1, 2]) }
            }
            let version = try stats()
            #expect(version["projections_position"] == .int(4))
            #expect(version["projections_fold_version"] == .null)
            #expect(version["projections_current"] == .bool(false))
            #expect(version["projections_damaged"] == .string("'meta' holds 2 bytes under 'projections.version', not 8; 'ledger rebuild' writes it again"))
        }
    }

    @Test("usage errors for project and replay")
    func usageErrors() {
        let cases: [([String], String)] = [
            (["project"], "Error: missing projection NAME"),
            (["project", "daly"], "Error: unknown projection 'daly'. Did you mean 'daily'?"),
            (["project", "daily", "--type", "sleep"], "Error: unknown type 'sleep'"),
            (["project", "daily-steps", "--type", "distance"], "Error: daily-steps is daily of type steps; it cannot take --type distance"),
            (["project", "daily", "--date", "2026-02-30"], "Error: '--date' needs a date that exists"),
            (["project", "per-source", "--date", "today", "--fallback"], "Error: --fallback works with daily"),
            // Days that cannot hold a row answered an empty list (an audit).
            (["project", "daily", "--from", "2026-10-25", "--to", "2026-10-20"], "Error: '--to' 2026-10-20 precedes '--from' 2026-10-25"),
            (["project", "daily", "--format", "xml"], "Error: unknown format 'xml' (expected table, json, ndjson, csv or chart)"),
            (["replay", "--projection", "daily"], "Error: replay needs --to WHEN or --to-seq N"),
            (["replay", "--to", "yesterday-ish"], "Error: '--to' needs an RFC 3339 timestamp"),
            // An audit: these were told to give a date YYYY-MM-DD.
            (["replay", "--to", "2026-02-30"], "Error: '--to' is a date that does not exist, got '2026-02-30'"),
            (["replay", "--to", "2026-11-31T10:00:00Z"], "Error: '--to' is a date or time that does not exist, got '2026-11-31T10:00:00Z'"),
            (["rebuild", "dialy"], "Error: unknown projection 'dialy'. Did you mean 'daily'?"),
        ]
        for (arguments, message) in cases {
            let run = ledger(arguments)
            #expect(run.status == 64, "\(arguments): \(run.stderr)")
            #expect(run.stderr.hasPrefix(message), "\(arguments): \(run.stderr)")
        }
    }

    func firstSampleID(_ db: String) throws -> String {
        let line = ledger(["log", "--limit", "1"], db: db).stdout
        let object = try #require(try JSONValue.parse(Array(line.utf8)).objectValue)
        return try #require(object["id"]?.stringValue)
    }
}
