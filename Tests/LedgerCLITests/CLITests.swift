import Foundation
import LedgerCLI
import LedgerCore
import LedgerStore
import Projections
import LedgerTestSupport
import Testing

/// One in-process `ledger` run.
struct Run {
    var status: Int32
    var stdout: String
    var stderr: String
}

func ledger(_ arguments: [String], stdin: String = "", db: String? = nil, terminal: Bool = false,
            stderrTerminal: Bool = false) -> Run {
    let out = OutputSink(isTerminal: terminal), err = OutputSink(isTerminal: stderrTerminal)
    var environment: [String: String] = [:]
    if let db { environment["LEDGER_DB"] = db }
    let status = LedgerCommandLine.run(arguments: arguments, environment: environment,
                                       stdin: .bytes(Array(stdin.utf8)), stdout: out, stderr: err)
    return Run(status: status, stdout: out.text, stderr: err.text)
}

/// The bytes of every file in the ledger directory, to prove a failed command wrote nothing.
func snapshot(_ path: String) throws -> [String: Data] {
    var files: [String: Data] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: path) where name == "data.mdb" {
        files[name] = try Data(contentsOf: URL(fileURLWithPath: path).appendingPathComponent(name))
    }
    return files
}

/// `sample` with a `pad` field that makes it `length` bytes long.
func padded(_ sample: String, to length: Int) -> String {
    let filler = length - (sample.utf8.count - 1) - #","pad":""#.utf8.count - #""}"#.utf8.count
    return String(sample.dropLast()) + #","pad":""# + String(repeating: "y", count: filler) + #""}"#
}

let goodSample = #"{"kind":"sample","type":"steps","value":100,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone"}"#

@Suite("Bad input is refused with exit 65, a message naming line and field, and nothing written")
struct BadInputTests {
    /// (name, input, expected text in the message).
    static let corpus: [(String, String, String)] = [
        ("malformed JSON", goodSample + "\n{\"kind\":\"sample\",", "line 2: malformed JSON"),
        ("wrong type for value", #"{"kind":"sample","type":"steps","value":"100","start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone"}"#, "line 1: 'value' must be a number"),
        ("NaN", #"{"kind":"sample","type":"steps","value":NaN,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone"}"#, "line 1: malformed JSON in 'value': invalid token near 'NaN'"),
        ("huge number overflows to infinity", #"{"kind":"sample","type":"steps","value":1e999,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone"}"#, "line 1: malformed JSON in 'value': a number too large to read"),
        ("negative value", #"{"kind":"sample","type":"steps","value":-5,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone"}"#, "line 1: 'value' must not be negative"),
        ("unknown kind", goodSample + "\n" + #"{"kind":"sneeze"}"#, "line 2: unknown kind 'sneeze'"),
        ("unknown type", #"{"kind":"sample","type":"heartbeats","value":1,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone"}"#, "line 1: unknown type 'heartbeats'"),
        ("unknown unit", #"{"kind":"sample","type":"distance","value":1,"unit":"furlong","start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone"}"#, "line 1: unit 'furlong' does not fit"),
        ("end before start", goodSample + "\n" + #"{"kind":"sample","type":"steps","value":1,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T07:10:00Z","source":"iPhone"}"#, "line 2: 'end' precedes 'start'"),
        ("impossible date", #"{"kind":"sample","type":"steps","value":1,"start":"2026-02-30T08:00:00Z","end":"2026-03-01T07:10:00Z","source":"iPhone"}"#, "line 1: 'start' is a date or time that does not exist"),
        ("an instant in the year 10000 in UTC", #"{"kind":"sample","type":"steps","value":1,"start":"9999-12-31T23:00:00-05:00","end":"9999-12-31T23:10:00-05:00","source":"iPhone"}"#, "line 1: 'start' is outside the instants an event may name"),
        ("no offset", #"{"kind":"sample","type":"steps","value":1,"start":"2026-02-03T08:00:00","end":"2026-03-01T07:10:00Z","source":"iPhone"}"#, "line 1: 'start' is not an RFC 3339 timestamp"),
        ("5 KiB source name", #"{"kind":"sample","type":"steps","value":1,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":""# + String(repeating: "x", count: 5 * 1024) + "\"}", "line 1: 'source' is longer than 1 KiB"),
        ("2 MiB line", goodSample + "\n{\"kind\":\"sample\",\"pad\":\"" + String(repeating: "y", count: 2 << 20) + "\"}", "line 2: line is longer than 1 MiB"),
        // What `log` prints of it would not fit a line (an audit: taken, but its copy refused).
        ("a line of exactly 1 MiB", padded(goodSample, to: 1 << 20), "line 1: the event is 1048"),
        ("empty input", "", "no events in input"),
        ("blank lines only", "\n  \n\n", "no events in input"),
        ("truncated last line", goodSample + "\n" + String(goodSample.dropLast(30)), "line 2: malformed JSON"),
        ("truncated only line, then a newline", String(goodSample.dropLast(30)) + "\n", "line 1: malformed JSON"),
        ("unknown zone", #"{"kind":"sample","type":"steps","value":1,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone","zone":"Mars/Olympus"}"#, "line 1: 'zone' is an unknown time zone: 'Mars/Olympus'"),
        ("NUL byte after a line", goodSample + "\n\u{0}", "line 2: malformed JSON: a raw NUL byte (NUL is not allowed in an event, escaped or not) (column 1)"),
        ("a unit alone rescaling the value past 1e15", #"{"id":"0b3c1f7e-6a2d-4e8f-9b1c-5d7e9f0a1b2d","kind":"sample","type":"distance","value":999999999999,"unit":"m","start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone"}"# + "\n" + #"{"kind":"correction","target":"0b3c1f7e-6a2d-4e8f-9b1c-5d7e9f0a1b2d","action":"amend","unit":"mi","reason":"r"}"#, "line 2: after this amendment the target's value, 999999999999 m, would be 999999999999 mi: over 1e15 m once converted"),
        ("an escaped NUL", #"{"kind":"sample","type":"steps","value":1,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"i\u0000"}"#, "line 1: malformed JSON: a \\u0000 escape (NUL is not allowed in an event, escaped or not)"),
        ("a 30-digit value", #"{"kind":"sample","type":"steps","value":123456789012345678901234567890,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"i"}"#, "line 1: malformed JSON in 'value': a number too large to read (too big integer: whole numbers up to 2^63, others up to about 1.8e308)"),
        ("NUL byte after a value", goodSample + "\n{\"a\":1}\u{0}", "line 2: malformed JSON: a raw NUL byte (NUL is not allowed in an event, escaped or not) (column 8)"),
        ("byte order mark inside", goodSample + "\n\u{FEFF}" + goodSample, "line 2: malformed JSON: invalid token near '\\u{FEFF}' (column 1)"),
        // A space JSON does not take, shown as such: it printed as "near ' '" (an audit).
        ("no-break space before an event", goodSample + "\n\u{A0}" + goodSample, "line 2: malformed JSON: invalid token near '\\u{A0}"),
        ("amended unit with a newline", #"{"id":"0b3c1f7e-6a2d-4e8f-9b1c-5d7e9f0a1b2c","kind":"sample","type":"steps","value":1,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone"}"# + "\n" + #"{"kind":"correction","target":"0b3c1f7e-6a2d-4e8f-9b1c-5d7e9f0a1b2c","action":"amend","unit":"a\nb","reason":"r"}"#, "line 2: unit 'a?b' does not fit the target's type 'steps'"),
        ("array element", "[" + goodSample + ",{\"kind\":\"grant\",\"client\":\"c\"}]", "index 1: a grant must name at least one type"),
        ("not an object", "[1]", "index 0: expected a JSON object, got a number"),
        ("duplicate key", #"{"kind":"sample","kind":"grant"}"#, "line 1: malformed JSON"),
        ("correction of unknown sample", #"{"kind":"correction","target":"11111111-2222-4333-8444-555555555555","action":"retract","reason":"typo"}"#, "line 1: 'target' 11111111-2222-4333-8444-555555555555 names no sample"),
    ]

    @Test("each case of SPEC §3.2", arguments: 0..<BadInputTests.corpus.count)
    func refused(_ index: Int) throws {
        let (name, input, expected) = BadInputTests.corpus[index]
        try withTemporaryLedger { db in
            #expect(ledger(["append"], stdin: goodSample.replacingOccurrences(of: "100", with: "7"), db: db).status == 0)
            let before = try snapshot(db)
            let headBefore = try EventLog(path: db, create: false).head()
            let run = ledger(["append"], stdin: input, db: db)
            #expect(run.status == 65, "\(name): status \(run.status), stderr \(run.stderr)")
            #expect(run.stderr.hasPrefix("Error: \(expected)"), "\(name): \(run.stderr)")
            #expect(run.stderr.split(separator: "\n").count == 1, "\(name): the error is one line")
            #expect(run.stdout.isEmpty)
            #expect(try snapshot(db) == before, "\(name): the ledger's bytes changed")
            #expect(try EventLog(path: db, create: false).head() == headBefore)
        }
    }

    @Test("an event just under the stored limit is taken, and its log line appends again (log | append)")
    func longestEventCopies() throws {
        try withTemporaryLedger { db in
            let line = padded(goodSample, to: (1 << 20) - 400)
            #expect(ledger(["append"], stdin: line, db: db).status == 0)
            let printed = ledger(["log", "--format", "ndjson"], db: db)
            #expect(printed.stdout.utf8.count > (1 << 20) - 400 && printed.stdout.utf8.count <= (1 << 20) + 1)
            let copy = db + "-copy"
            defer { try? FileManager.default.removeItem(atPath: copy) }
            let again = ledger(["append"], stdin: printed.stdout, db: copy)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(again.stdout.hasPrefix("appended 1,"))
        }
    }

    @Test("bad input never creates a ledger, even when refused inside the transaction")
    func noLedgerCreated() throws {
        try withTemporaryLedger { db in
            #expect(ledger(["append"], stdin: "{oops", db: db).status == 65)
            #expect(!FileManager.default.fileExists(atPath: db))
            let unknownTarget = #"{"kind":"correction","target":"11111111-2222-4333-8444-555555555555","action":"retract","reason":"typo"}"#
            #expect(ledger(["append"], stdin: unknownTarget, db: db).status == 65)
            #expect(!FileManager.default.fileExists(atPath: db))
            // Said so: "the log's head is 0" alone hid that there was no ledger (a new-user audit).
            let expecting = ledger(["append", "--expect-head", "3"], stdin: goodSample, db: db)
            #expect(expecting.status == 1)
            #expect(expecting.stderr == "Error: the log's head is 0, not the expected 3; nothing was written; there was no ledger at \(db), and none was made\n", "\(expecting.stderr)")
            #expect(!FileManager.default.fileExists(atPath: db))
            // Nor the folders made above it (an audit: `new/deep/` stayed behind).
            #expect(ledger(["append"], stdin: unknownTarget, db: db + "/new/deep/x.db").status == 65)
            #expect(!FileManager.default.fileExists(atPath: db))
            // `..` names a folder made already, which rmdir cannot take: the rest still go (a review).
            #expect(ledger(["append"], stdin: unknownTarget, db: db + "/new/deep/../x.db").status == 65)
            #expect(!FileManager.default.fileExists(atPath: db))
            // A folder named through `..` that was there stays (a review: `a/../b`, missing while
            // `a` was, named the user's empty `b` once `a` was made, and it was removed).
            try FileManager.default.createDirectory(atPath: db + "/b", withIntermediateDirectories: true)
            #expect(ledger(["append"], stdin: unknownTarget, db: db + "/a/../b/../c").status == 65)
            #expect(FileManager.default.fileExists(atPath: db + "/b"))
            #expect(!FileManager.default.fileExists(atPath: db + "/c"))
            try FileManager.default.removeItem(atPath: db)
            // A folder made meanwhile by someone else, or holding anything, stays.
            try? FileManager.default.createDirectory(atPath: db + "/new", withIntermediateDirectories: true)
            try? Data().write(to: URL(fileURLWithPath: db + "/new/keep"))
            #expect(ledger(["append"], stdin: unknownTarget, db: db + "/new/deep/x.db").status == 65)
            #expect(FileManager.default.fileExists(atPath: db + "/new/keep"))
            #expect(!FileManager.default.fileExists(atPath: db + "/new/deep"))
            try? FileManager.default.removeItem(atPath: db)
        }
    }

    /// A review: `--db A append` died of SIGILL (Foundation's `deletingLastPathComponent`
    /// traps on a name of one character), and so did `.`, `A/` and a new `q/x`.
    @Test("a --db of one character (A, B/, é, ., a new q/x) appends, and a refused append makes no folder")
    func oneCharacterPaths() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            let folder = parentPath(db)
            func run(_ arguments: [String], in directory: String, stdin: String) throws -> ProcessOutput {
                try runProcess("/bin/sh", ["-c", #"cd "$0" && exec "$@""#, directory, binary] + arguments, stdin: Array(stdin.utf8))
            }
            for name in ["A", "B/", "é", "q/x"] {
                let refused = try run(["append", "--db", name], in: folder, stdin: "{oops")
                #expect(refused.status == 65 && refused.stderr.hasPrefix("Error: line 1: "), "\(name): \(refused.stderr)")
                #expect(!FileManager.default.fileExists(atPath: folder + "/" + String(name.prefix(1))), "\(name)")
                let appended = try run(["append", "--db", name], in: folder, stdin: goodSample)
                #expect(appended.status == 0 && appended.stdout.hasPrefix("appended 1,"), "\(name): \(appended.stderr)")
            }
            try FileManager.default.createDirectory(atPath: folder + "/here", withIntermediateDirectories: false)
            // `.` cannot be renamed away: a refused first append leaves an empty ledger there.
            #expect(try run(["append", "--db", "."], in: folder + "/here", stdin: "{oops").status == 65)
            let here = try run(["append", "--db", "."], in: folder + "/here", stdin: goodSample)
            #expect(here.status == 0 && here.stdout.hasPrefix("appended 1,"), "\(here.stderr)")
        }
    }

    @Test("parentPath is deletingLastPathComponent, without its trap")
    func parentPaths() {
        let cases = ["/": "/", "ab": "", "ab/": "", "/a": "/", "a/b/": "a", "a//b": "a", "../x": "..", "..": "",
                     "q/deep": "q", "x/A": "x", "/A": "/", "./A": ".", "a/b/c": "a/b", "A": "", ".": "", "A/": "", "é": "", "/a/b//": "/a"]
        for (path, parent) in cases {
            #expect(parentPath(path) == parent, "\(path)")
            // Where Foundation does not trap, the two agree.
            if !["A", ".", "A/", "é"].contains(path) {
                #expect((path as NSString).deletingLastPathComponent == parent, "\(path)")
            }
        }
    }

    /// An audit: a refused append or import left a new ledger in an empty directory given as
    /// `--db`. The directory stays, empty; one holding other files keeps every one of them.
    @Test("bad input leaves an empty --db directory empty, and never removes a directory's other files")
    func existingDirectory() throws {
        try withTemporaryLedger { db in
            try FileManager.default.createDirectory(atPath: db, withIntermediateDirectories: false)
            #expect(ledger(["append"], stdin: "{oops", db: db).status == 65)
            #expect(try FileManager.default.contentsOfDirectory(atPath: db) == [])
            #expect(ledger(["import", "apple-health", "/dev/null"], db: db).status == 65)
            #expect(try FileManager.default.contentsOfDirectory(atPath: db) == [])
            try Data("precious".utf8).write(to: URL(fileURLWithPath: db + "/notes.txt"))
            #expect(ledger(["append"], stdin: "{oops", db: db).status == 65)
            #expect(try String(contentsOfFile: db + "/notes.txt", encoding: .utf8) == "precious")
        }
    }

    @Test("a conflicting id writes nothing and exits 65")
    func conflict() throws {
        try withTemporaryLedger { db in
            let id = "9d7c0b1a-2e3f-4a5b-8c6d-7e8f9a0b1c2d"
            let first = goodSample.replacingOccurrences(of: "{\"kind\"", with: "{\"id\":\"\(id)\",\"kind\"")
            #expect(ledger(["append"], stdin: first, db: db).status == 0)
            let before = try snapshot(db)
            let run = ledger(["append"], stdin: first.replacingOccurrences(of: "100", with: "101"), db: db)
            #expect(run.status == 65)
            #expect(run.stderr.contains("line 1: id \(id) is already in the log at seq 1 with different content"))
            #expect(try snapshot(db) == before)
        }
    }
}

@Suite("Commands")
struct CommandTests {
    @Test("append reports counts and head; a re-run is all duplicates")
    func appendReport() throws {
        withTemporaryLedger { db in
            let input = Fixtures.stepsFile(count: 3)
            #expect(ledger(["append"], stdin: input, db: db).stdout == "appended 3, duplicates 0, superseded 0, head 3\n")
            #expect(ledger(["append", "-"], stdin: input, db: db).stdout == "appended 0, duplicates 3, superseded 0, head 3\n")
        }
    }

    /// SPEC §3.2: appending what the log holds is a no-op. It committed a transaction all the
    /// same (the projections' position put again, unchanged), and the first read of a new
    /// ledger wrote its fold version (an audit, comparing LMDB's last transaction id).
    @Test("reads of a new ledger, and an append or import of nothing new, commit no transaction")
    func nothingNewWritesNothing() throws {
        try withTemporaryLedger { db in
            #expect(ledger(["init"], db: db).status == 0)
            func lastTransaction() throws -> Int { try Environment(path: db).info.lastTransaction }
            let created = try lastTransaction()
            for command in [["project", "daily"], ["verify"], ["stats"], ["log"], ["replay", "--to-seq", "0"]] {
                let run = ledger(command, db: db)
                #expect(run.status == 0, "\(command): \(run.stderr)")
            }
            #expect(try lastTransaction() == created)
            let input = Fixtures.stepsFile(count: 3)
            #expect(ledger(["append"], stdin: input, db: db).status == 0)
            let appended = try lastTransaction()
            #expect(appended == created + 1)
            let before = try snapshot(db)
            #expect(ledger(["append"], stdin: input, db: db).stdout == "appended 0, duplicates 3, superseded 0, head 3\n")
            #expect(try lastTransaction() == appended)
            #expect(try snapshot(db) == before)
            let export = db + "-export.xml"
            defer { try? FileManager.default.removeItem(atPath: export) }
            try """
            <?xml version="1.0" encoding="UTF-8"?>
            <HealthData locale="en_US">
             <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2026-11-29 08:00:00 +0000" endDate="2026-11-29 08:10:00 +0000" value="120"/>
            </HealthData>

            """.write(toFile: export, atomically: true, encoding: .utf8)
            #expect(ledger(["import", "apple-health", export], db: db).status == 0)
            let imported = try lastTransaction()
            let reimport = ledger(["import", "apple-health", export], db: db)
            #expect(reimport.status == 0 && reimport.stdout.contains("appended 0"), "\(reimport.stdout)")
            #expect(try lastTransaction() == imported)
        }
    }

    @Test("append reads a file, and --expect-head guards it")
    func appendFileExpectHead() throws {
        try withTemporaryLedger { db in
            let file = db + ".ndjson"
            try Fixtures.stepsFile(count: 2).write(toFile: file, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: file) }
            #expect(ledger(["append", file, "--expect-head", "0"], db: db).status == 0)
            let stale = ledger(["append", file, "--expect-head", "0"], db: db)
            #expect(stale.status == 1)
            #expect(stale.stderr == "Error: the log's head is 2, not the expected 0; nothing was written\n")
            let missing = ledger(["append", "/nonexistent/events.ndjson"], db: db)
            #expect(missing.status == 1)
            #expect(missing.stderr.hasPrefix("Error: cannot open '/nonexistent/events.ndjson'"))
        }
    }

    @Test("log prints events as stored in every format")
    func logFormats() throws {
        try withTemporaryLedger { db in
            #expect(ledger(["append"], stdin: Fixtures.stepsFile(count: 2), db: db).status == 0)
            let ndjson = ledger(["log"], db: db)
            let lines = ndjson.stdout.split(separator: "\n")
            #expect(lines.count == 2)
            let first = try #require(try JSONValue.parse(Array(lines[0].utf8)).objectValue)
            #expect(first["seq"] == .int(1))
            #expect(first["kind"] == .string("sample"))
            #expect(first["hash"]?.stringValue?.count == 64)
            #expect(first["start"] == .string("2026-01-01T00:00:00Z"))

            let json = ledger(["log", "--format", "json", "--from", "2"], db: db)
            guard case .array(let items) = try JSONValue.parse(Array(json.stdout.utf8)) else {
                Issue.record("json is not an array: \(json.stdout)")
                return
            }
            #expect(items.count == 1)
            #expect(items[0].objectValue?["seq"] == .int(2))

            let table = ledger(["log", "--format", "table", "--limit", "1"], db: db)
            let tableLines = table.stdout.split(separator: "\n")
            #expect(tableLines.count == 2)
            #expect(tableLines[0].hasPrefix("SEQ  RECORDED"))
            #expect(tableLines[1].contains("steps 10 count 2026-01-01T00:00:00.000000Z..2026-01-01T00:01:00.000000Z from iPhone"))
            // The table ends with the event's full hash, what an auditor keeps (SPEC §7).
            #expect(tableLines[0].hasSuffix("HASH"))
            #expect(tableLines[1].hasSuffix(try EventLog(path: db, create: false).record(at: 1)!.hash.hex))

            let csv = ledger(["log", "--format", "csv"], db: db)
            #expect(csv.stdout.hasPrefix("seq,recorded,kind,user,id,event\n1,"))
            #expect(csv.stdout.split(separator: "\n").count == 3)

            #expect(ledger(["log", "--kind", "grant"], db: db).stdout.isEmpty)
            #expect(ledger(["log", "--user", "nobody"], db: db).stdout.isEmpty)
            #expect(ledger(["log", "--user", "default"], db: db).stdout.split(separator: "\n").count == 2)
            #expect(ledger(["log", "--format", "json", "--kind", "grant"], db: db).stdout == "[]\n")
        }
    }

    /// Names are told apart by their bytes; two spellings of one name read the same, and
    /// "no client named 'café'" beside a listed 'café' explained nothing (an audit).
    @Test("a client name that reads as another's but is spelled otherwise is refused by add, rotate and remove, with both spellings")
    func clientNameSpelling() {
        withTemporaryLedger { db in
            #expect(ledger(["client", "add", "caf\u{E9}"], db: db).status == 0)
            for action in ["rotate", "remove"] {
                let run = ledger(["client", action, "cafe\u{301}"], db: db)
                #expect(run.status == 65 && run.stderr.hasSuffix(#"(names are told apart by their characters: 'café' reads the same but is spelled caf\u{E9}, and the name given cafe\u{301})"# + "\n"), "\(run.stderr)")
            }
            // Nor can a second client take a name that reads as the first's.
            let twin = ledger(["client", "add", "cafe\u{301}"], db: db)
            #expect(twin.status == 65 && twin.stderr.hasSuffix(#"spelled caf\u{E9}, and 'café' reads the same spelled cafe\u{301}: two such clients could not be told apart in 'client list'; choose another name"# + "\n"), "\(twin.stderr)")
            #expect(ledger(["client", "list", "--format", "csv"], db: db).stdout.split(separator: "\n").count == 2)
            #expect(ledger(["client", "rotate", "nobody"], db: db).stderr == "Error: no client named 'nobody'\n")
            #expect(ledger(["client", "rotate", "caf\u{E9}"], db: db).status == 0)
            // Characters that print as nothing are refused: such rows read the same too.
            for (name, code) in [("o\u{200B}ps", "200B"), ("ops\u{2060}", "2060"), ("\u{202E}spo", "202E"), ("o\u{7F}ps", "7F"), ("o\u{AD}ps", "AD")] {
                let run = ledger(["client", "add", name], db: db)
                #expect(run.status == 65 && run.stderr.hasPrefix("Error: a client name must not hold characters that print as nothing or reorder the text: '") && run.stderr.hasSuffix("holds U+\(code)\n"), "\(run.stderr)")
            }
            #expect(ledger(["client", "list", "--format", "csv"], db: db).stdout.split(separator: "\n").count == 2)
            // A refused name leaves no ledger where there was none (an empty one was left: an audit).
            let fresh = URL(fileURLWithPath: db).deletingLastPathComponent().path + "/fresh/deep.db"
            let refused = ledger(["client", "add", "", "--db", fresh])
            #expect(refused.status == 65 && !FileManager.default.fileExists(atPath: fresh), "\(refused.stderr)")
            #expect(!FileManager.default.fileExists(atPath: URL(fileURLWithPath: fresh).deletingLastPathComponent().path))
            // Joiners that shape a name, and a flag's tag characters, are part of it.
            for name in ["\u{1F469}\u{200D}\u{1F4BB}", "\u{645}\u{6CC}\u{200C}\u{62E}\u{648}\u{627}\u{647}\u{645}", "\u{1F3F4}\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}"] {
                #expect(ledger(["client", "add", name], db: db).status == 0, "\(name)")
            }
        }
    }

    /// A chain rewritten whole, every hash recomputed, passes `verify`: only a hash kept from
    /// before shows it. The check was by hand (`log`, then compare).
    @Test("verify --expect-hash SEQ:HASH passes the kept hash and fails another ledger's, a rewritten one's, or one past the head")
    func verifyExpectHash() throws {
        try withTemporaryLedger { db in
            #expect(ledger(["append"], stdin: Fixtures.stepsFile(count: 5), db: db).status == 0)
            let kept = try EventLog(path: db, create: false).record(at: 3)!.hash.hex
            let ok = ledger(["verify", "--expect-hash", "3:\(kept)"], db: db)
            #expect(ok.status == 0 && ok.stdout.contains("; seq 3 has the kept hash; projections match"), "\(ok.stdout)\(ok.stderr)")
            #expect(ledger(["verify", "--expect-hash", "3:\(kept.uppercased())"], db: db).status == 0)
            let past = ledger(["verify", "--expect-hash", "9:\(kept)"], db: db)
            #expect(past.status == 1 && past.stderr == "Error: the log ends at seq 5, before seq 9 whose hash was kept: events were removed from its end since, or this is another ledger\n", "\(past.stderr)")
            for bad in ["3", "x:\(kept)", "0:\(kept)", "3:\(kept.dropLast())", "3:\(kept.dropLast())g"] {
                let run = ledger(["verify", "--expect-hash", bad], db: db)
                #expect(run.status == 64 && run.stderr.hasPrefix("Error: '--expect-hash' needs SEQ:HASH"), "\(bad): \(run.stderr)")
            }
            // Another history with an intact chain of its own: a second event of other content.
            withTemporaryLedger { other in
                let lines = Fixtures.stepsFile(count: 5).split(separator: "\n").enumerated().map { $0.offset == 1 ? $0.element.replacingOccurrences(of: "\"value\":10", with: "\"value\":11") : String($0.element) }
                #expect(ledger(["append"], stdin: lines.joined(separator: "\n"), db: other).status == 0)
                #expect(ledger(["verify"], db: other).status == 0)
                let rewritten = ledger(["verify", "--expect-hash", "3:\(kept)"], db: other)
                #expect(rewritten.status == 1 && rewritten.stderr.hasPrefix("Error: seq 3's hash is ") && rewritten.stderr.hasSuffix(", not the kept \(kept): the log up to seq 3 is not the one whose hash was kept (rewritten since, or another ledger)\n"), "\(rewritten.stderr)")
            }
        }
    }

    @Test("log --id prints the event with that id and its history (later sync versions, corrections), from --from, with --kind")
    func logByID() throws {
        withTemporaryLedger { db in
            let sample = "11111111-2222-4333-8444-555555555555", other = "66666666-7777-4888-8999-aaaaaaaaaaaa"
            let lines = [
                #"{"kind":"sample","id":"\#(other)","type":"steps","value":5,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:01:00Z","source":"a"}"#,
                #"{"kind":"sample","id":"\#(sample)","type":"steps","value":7,"start":"2026-11-29T09:00:00Z","end":"2026-11-29T09:01:00Z","source":"a"}"#,
                #"{"kind":"correction","target":"\#(other)","action":"amend","value":6,"reason":"other"}"#,
                #"{"kind":"correction","target":"\#(sample)","action":"amend","value":8,"reason":"first"}"#,
                #"{"kind":"grant","user":"default","client":"x","read":["steps"]}"#,
                #"{"kind":"correction","target":"\#(sample)","action":"retract","reason":"second"}"#,
            ]
            #expect(ledger(["append"], stdin: lines.joined(separator: "\n"), db: db).status == 0)
            func seqs(_ arguments: [String]) -> [Int] {
                ledger(["log", "--format", "ndjson"] + arguments, db: db).stdout.split(separator: "\n").compactMap { line in
                    (try? JSONValue.parse(Array(line.utf8)))?.objectValue?["seq"].flatMap { if case .int(let n) = $0 { Int(n) } else { nil } }
                }
            }
            #expect(seqs(["--id", sample]) == [2, 4, 6])
            #expect(seqs(["--id", sample.uppercased()]) == [2, 4, 6])
            #expect(seqs(["--id", other]) == [1, 3])
            #expect(seqs(["--id", sample, "--kind", "correction"]) == [4, 6])
            #expect(seqs(["--id", sample, "--from", "5"]) == [6])
            #expect(seqs(["--id", sample, "--limit", "2"]) == [2, 4])
            let missing = ledger(["log", "--format", "json", "--id", "00000000-0000-4000-8000-000000000000"], db: db)
            #expect(missing.status == 0 && missing.stdout == "[]\n")
            #expect(missing.stderr == "note: no event in this ledger has id 00000000-0000-4000-8000-000000000000\n")
            let bad = ledger(["log", "--id", "12345"], db: db)
            #expect(bad.status == 64 && bad.stderr.hasPrefix("Error: '--id' needs a UUID like "), "\(bad.stderr)")
            // The table says what an amendment set.
            let table = ledger(["log", "--format", "table", "--id", sample, "--kind", "correction"], db: db).stdout
            #expect(table.contains("amend \(sample) value=8: first") && table.contains("retract \(sample): second"), "\(table)")
            // A sample replaced through its sync version: the later versions (same user, source
            // and syncId, not another source's) and their corrections are its history, and
            // --from shows only the part from there on.
            let (v1, v2, v3) = ("aaaaaaaa-0000-4000-8000-000000000001", "aaaaaaaa-0000-4000-8000-000000000002", "aaaaaaaa-0000-4000-8000-000000000003")
            func synced(_ id: String, _ version: Int, source: String = "watch") -> String {
                #"{"kind":"sample","id":"\#(id)","type":"steps","value":\#(version),"start":"2026-11-29T10:00:00Z","end":"2026-11-29T10:01:00Z","source":"\#(source)","syncId":"s1","syncVersion":\#(version)}"#
            }
            let versions = [synced(v1, 1), synced(v3, 1, source: "phone"), synced(v2, 2),
                            #"{"kind":"correction","target":"\#(v2)","action":"amend","value":5,"reason":"v2 fix"}"#]
            #expect(ledger(["append"], stdin: versions.joined(separator: "\n"), db: db).status == 0)  // seqs 7-10
            #expect(seqs(["--id", v1]) == [7, 9, 10])
            #expect(seqs(["--id", v1, "--from", "10"]) == [10])
            #expect(seqs(["--id", v1, "--kind", "correction"]) == [10])
            #expect(seqs(["--id", v3]) == [8])
        }
    }

    @Test("log --since and --until select by recorded time, both ends included, dates in the ledger's zone")
    func logByRecordedTime() throws {
        try withTemporaryLedger { db in
            #expect(ledger(["init", "--timezone", "Europe/Paris"], db: db).status == 0)
            func step(_ minute: Int, user: String = "ann") -> String {
                #"{"kind":"sample","user":"\#(user)","type":"steps","value":\#(minute),"start":"2026-11-01T08:\#(String(format: "%02d", minute)):00Z","end":"2026-11-01T08:\#(String(format: "%02d", minute)):30Z","source":"a"}"#
            }
            // Appended with the log's clock set (the CLI's injected clock is only its "today").
            func append(at time: String, _ lines: [String]) throws {
                let instant = try Timestamp.parseRFC3339(time).0
                let log = try EventLog(path: db, create: false, clock: { instant })
                _ = try log.append(try EventInput.decode(Array(lines.joined(separator: "\n").utf8)).map { (Optional($0.0), $0.1) })
            }
            // Recorded: seqs 1-2 on 1 November, 3 at 00:30 on 16 November in Paris (23:30Z
            // the day before), 4-5 on 30 November.
            try append(at: "2026-11-01T10:00:00Z", [step(1), step(2, user: "bob")])
            try append(at: "2026-11-15T23:30:00Z", [step(3)])
            try append(at: "2026-11-30T12:00:00Z", [step(4, user: "bob"), #"{"kind":"grant","user":"ann","client":"c","read":["steps"]}"#])
            func seqs(_ arguments: [String]) -> [Int] {
                ledger(["log", "--format", "ndjson"] + arguments, db: db).stdout.split(separator: "\n").compactMap { line in
                    (try? JSONValue.parse(Array(line.utf8)))?.objectValue?["seq"].flatMap { if case .int(let n) = $0 { Int(n) } else { nil } }
                }
            }
            #expect(seqs(["--since", "2026-11-16"]) == [3, 4, 5])
            #expect(seqs(["--until", "2026-11-15"]) == [1, 2])
            #expect(seqs(["--until", "2026-11-16"]) == [1, 2, 3])
            #expect(seqs(["--since", "2026-11-15T23:30:00Z", "--until", "2026-11-15T23:30:00Z"]) == [3])
            #expect(seqs(["--since", "2026-11-01T10:00:00.000001Z"]) == [3, 4, 5])
            // Times are kept to the microsecond: a finer --since rounds up, a finer --until down
            // (a review: `--since …10:00:00.0000001Z` kept seqs 1 and 2, recorded at 10:00:00Z).
            #expect(seqs(["--since", "2026-11-01T10:00:00.0000001Z"]) == [3, 4, 5])
            #expect(seqs(["--since", "2026-11-01T10:00:00.0000000Z"]) == [1, 2, 3, 4, 5])
            #expect(seqs(["--until", "2026-11-01T10:00:00.0000009Z"]) == [1, 2])
            #expect(ledger(["log", "--since", "2026-11-01T10:00:00.0000009Z", "--until", "2026-11-01T10:00:00.0000001Z"], db: db).status == 64)
            #expect(seqs(["--since", "2026-12-01"]) == [])
            #expect(seqs(["--until", "2026-10-31"]) == [])
            // With the other filters: --from, --user, --kind, --limit, and --id (whose history
            // is followed from its event, the window narrowing only what is shown).
            #expect(seqs(["--since", "2026-11-01", "--from", "2"]) == [2, 3, 4, 5])
            #expect(seqs(["--since", "2026-11-16", "--from", "2"]) == [3, 4, 5])
            #expect(seqs(["--since", "2026-11-16", "--user", "bob"]) == [4])
            #expect(seqs(["--until", "2026-11-30", "--kind", "grant"]) == [5])
            #expect(seqs(["--since", "2026-11-16", "--limit", "1"]) == [3])
            let first = ledger(["log", "--format", "ndjson", "--limit", "1"], db: db).stdout
            let id = try #require(try JSONValue.parse(Array(first.utf8)).objectValue?["id"]?.stringValue)
            try append(at: "2026-11-30T13:00:00Z", [#"{"kind":"correction","target":"\#(id)","action":"retract","reason":"r"}"#])  // seq 6
            #expect(seqs(["--id", id]) == [1, 6])
            #expect(seqs(["--id", id, "--since", "2026-11-02"]) == [6])
            #expect(seqs(["--id", id, "--until", "2026-11-29"]) == [1])
            // Refused, with nothing read: a day that does not exist, a malformed time, and a
            // window that ends before it begins.
            let impossible = ledger(["log", "--since", "2026-02-30"], db: db)
            #expect(impossible.status == 64 && impossible.stderr.hasPrefix("Error: '--since' is a date that does not exist, got '2026-02-30'"), "\(impossible.stderr)")
            let malformed = ledger(["log", "--until", "yesterday"], db: db)
            #expect(malformed.status == 64 && malformed.stderr.hasPrefix("Error: '--until' needs an RFC 3339 timestamp with an offset or a date YYYY-MM-DD, got 'yesterday'"), "\(malformed.stderr)")
            let backwards = ledger(["log", "--since", "2026-11-30", "--until", "2026-11-29"], db: db)
            #expect(backwards.status == 64 && backwards.stderr.hasPrefix("Error: '--since' (2026-11-29T23:00:00.000000Z) is after '--until' (2026-11-29T22:59:59.999999Z)"), "\(backwards.stderr)")
        }
        // A day the ledger's zone skipped is an empty window, not one "after" itself (an audit).
        withTemporaryLedger { db in
            #expect(ledger(["init", "--timezone", "Pacific/Apia"], db: db).status == 0)
            #expect(ledger(["append"], stdin: Fixtures.stepsFile(count: 1), db: db).status == 0)
            let skipped = ledger(["log", "--since", "2011-12-30", "--until", "2011-12-30", "--format", "ndjson"], db: db)
            #expect(skipped.status == 0 && skipped.stdout.isEmpty, "\(skipped.stderr)")
            #expect(ledger(["log", "--since", "2011-12-31", "--until", "2011-12-30"], db: db).status == 64)
        }
    }

    /// A set-up script that runs `ledger init` twice must not move the zone: a bare `init`
    /// set an empty ledger's zone back to UTC, and failed on one holding events.
    @Test("init without --timezone leaves an existing ledger's zone as it is")
    func bareInitKeepsZone() throws {
        withTemporaryLedger { db in
            #expect(ledger(["init", "--timezone", "Europe/Paris"], db: db).status == 0)
            let again = ledger(["init"], db: db)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(again.stdout.hasSuffix(": default zone Europe/Paris, head 0\n"), "\(again.stdout)")
            #expect(ledger(["append"], stdin: Fixtures.stepsFile(count: 2), db: db).status == 0)
            let held = ledger(["init"], db: db)
            #expect(held.status == 0, "\(held.stderr)")
            #expect(held.stdout.hasSuffix(": default zone Europe/Paris, head 2\n"), "\(held.stdout)")
            // Naming another zone is still refused once events exist, and the same one is a no-op.
            #expect(ledger(["init", "--timezone", "Asia/Tokyo"], db: db).status == 1)
            #expect(ledger(["init", "--timezone", "Europe/Paris"], db: db).status == 0)
        }
    }

    @Test("verify reports the head; stats counts kinds")
    func verifyAndStats() throws {
        try withTemporaryLedger { db in
            #expect(ledger(["init", "--timezone", "America/New_York"], db: db).status == 0)
            // A new ledger has folded nothing, and that is current (it read as damage: an audit).
            let fresh = try JSONValue.parse(Array(ledger(["stats", "--format", "ndjson"], db: db).stdout.utf8)).objectValue
            #expect(fresh?["projections_current"] == .bool(true) && fresh?["projections_fold_version"] == .int(Int64(ActivityFold.version)), "\(String(describing: fresh))")
            let grant = #"{"kind":"grant","client":"coach","read":["steps"]}"#
            #expect(ledger(["append"], stdin: Fixtures.stepsFile(count: 4) + grant, db: db).status == 0)
            let verify = ledger(["verify"], db: db)
            #expect(verify.status == 0)
            #expect(verify.stdout.hasPrefix("ok: 5 events, hash chain intact, head seq 5, hash "))
            let stats = ledger(["stats", "--format", "json"], db: db)
            guard case .array(let rows) = try JSONValue.parse(Array(stats.stdout.utf8)), let row = rows.first?.objectValue else {
                Issue.record("stats json: \(stats.stdout)")
                return
            }
            #expect(row["head"] == .int(5))
            #expect(row["events_sample"] == .int(4))
            #expect(row["events_grant"] == .int(1))
            #expect(row["zone"] == .string("America/New_York"))
            // The release of the zone rules inside the binary (a review: the README said the
            // machine's database was used), as the IANA names them: 2025b.
            let zoneData = row["zone_data_version"]?.stringValue ?? ""
            #expect(zoneData == TimeZone.timeZoneDataVersion && zoneData.wholeMatch(of: /20[0-9]{2}[a-z]/) != nil, "\(zoneData)")
            // The projections were folded in the append's transaction, through the head.
            #expect(row["projections_position"] == .int(5))
            #expect(row["projections_fold_version"] == .int(Int64(ActivityFold.version)))
            #expect(row["projections_current"] == .bool(true))
            #expect(row["projections_damaged"] == .null)
            // Used bytes leave out LMDB's free pages (a review: after a rebuild, used_bytes was
            // the file's size, the freed pages counted as used).
            #expect(ledger(["rebuild"], db: db).status == 0)
            let after = try JSONValue.parse(Array(ledger(["stats", "--format", "ndjson"], db: db).stdout.utf8)).objectValue
            func number(_ key: String) -> Int64 { if case .int(let n)? = after?[key] { n } else { -1 } }
            #expect(number("free_bytes") > 0, "\(String(describing: after))")
            #expect(number("used_bytes") > 0 && number("used_bytes") + number("free_bytes") <= number("file_bytes"), "\(String(describing: after))")
        }
    }

    @Test("an option is not taken for another option's value; messages name the option given")
    func optionValues() throws {
        withTemporaryLedger { db in
            #expect(ledger(["append"], stdin: Fixtures.stepsFile(count: 1), db: db).status == 0)
            let forgot = ledger(["project", "daily", "--user", "--fallback"], db: db)
            #expect(forgot.status == 64)
            #expect(forgot.stderr.hasPrefix("Error: option '--user' needs a value (U), got the option '--fallback'\n"))
            #expect(ledger(["project", "daily", "--user=--odd"], db: db).status == 0)  // the = form still takes it
            let toDate = ledger(["replay", "--to-seq", "1", "--to-date", "2026-02-30"], db: db)
            #expect(toDate.status == 64)
            #expect(toDate.stderr.hasPrefix("Error: '--to-date' needs a date that exists"), "\(toDate.stderr)")
            let long = #"{"kind":"sample","type":"steps","value":1,"start":"2026-01-01T00:00:00Z","end":"2026-01-01T00:01:00Z","source":"a","metadata":{"k":""# + String(repeating: "x", count: 17_000) + #""}}"#
            #expect(ledger(["append"], stdin: long, db: db).stderr == "Error: line 1: 'metadata.k' is longer than 16 KiB\n")
        }
    }

    @Test("seq, recorded and hash in input are the ledger's: dropped, so a log can be appended to a copy")
    func envelopeFields() throws {
        withTemporaryLedger { db in
            let forged = #"{"kind":"sample","seq":999,"hash":"abc","recorded":"1999-01-01T00:00:00Z","type":"steps","value":1,"start":"2026-03-01T08:00:00Z","end":"2026-03-01T08:10:00Z","source":"W"}"#
            #expect(ledger(["append"], stdin: forged, db: db).status == 0)
            #expect(ledger(["append"], stdin: Fixtures.stepsFile(count: 3), db: db).status == 0)
            let log = ledger(["log", "--format", "ndjson"], db: db).stdout
            // (Exact keys: "999" alone may well occur in a hash or a timestamp's microseconds.)
            #expect(!log.contains("\"seq\":999") && !log.contains("\"hash\":\"abc\"") && !log.contains("\"recorded\":\"1999-01-01"), "\(log)")
            #expect(log.split(separator: "\n").first.map { $0.components(separatedBy: "\"seq\":").count } == 2)
            // The log's own output appends to another ledger as the same events.
            let copy = db + "-copy"
            #expect(ledger(["append"], stdin: log, db: copy).stdout.hasPrefix("appended 4, duplicates 0"))
            #expect(ledger(["append"], stdin: log, db: copy).stdout.hasPrefix("appended 0, duplicates 4"))
            func bodies(_ text: String) -> [String] {
                text.split(separator: "\n").map { $0.replacingOccurrences(of: #"^\{"seq":\d+,"recorded":"[^"]*","hash":"[0-9a-f]*","#, with: "{", options: .regularExpression) }
            }
            #expect(bodies(ledger(["log", "--format", "ndjson"], db: copy).stdout) == bodies(log))
            // A map beyond what can be addressed is refused before anything is created.
            let big = db + "-big"
            #expect(ledger(["init", "--map-size", "200TiB"], db: big).status == 64)
            #expect(!FileManager.default.fileExists(atPath: big))
        }
    }

    @Test("a ledger path that is a file, or under one, is said plainly; missing folders are made")
    func ledgerPaths() throws {
        try withTemporaryLedger { db in
            let file = db + ".txt"
            try "not a ledger".write(toFile: file, atomically: true, encoding: .utf8)
            let onFile = ledger(["append"], stdin: Fixtures.stepsFile(count: 1), db: file)
            #expect(onFile.status == 1)
            #expect(onFile.stderr == "Error: cannot create a ledger at '\(file)': it is a file, not a ledger directory\n")
            let under = ledger(["append"], stdin: Fixtures.stepsFile(count: 1), db: file + "/inner.db")
            #expect(under.stderr == "Error: cannot create a ledger at '\(file)/inner.db': Not a directory\n")
            let nested = db + "/a/b/c.db"
            #expect(ledger(["append"], stdin: Fixtures.stepsFile(count: 1), db: nested).status == 0)
        }
    }

    @Test("numbers past what a seq or a count can hold are usage errors or simply empty, never a crash")
    func hugeNumbers() throws {
        withTemporaryLedger { db in
            #expect(ledger(["append"], stdin: Fixtures.stepsFile(count: 2), db: db).status == 0)
            #expect(ledger(["log", "--limit", "9223372036854775808"], db: db).status == 64)
            #expect(ledger(["log", "--limit", "18446744073709551616"], db: db).status == 64)
            let last = ledger(["log", "--from", "18446744073709551615"], db: db)
            #expect(last.status == 0)
            #expect(last.stdout.isEmpty)
        }
    }

    @Test("--db may come before the command, as after it")
    func dbFirst() throws {
        try withTemporaryLedger { db in
            #expect(ledger(["--db", db, "append"], stdin: Fixtures.stepsFile(count: 2)).status == 0)
            let after = ledger(["log", "--db", db, "--format", "ndjson"])
            #expect(after.status == 0 && after.stdout.split(separator: "\n").count == 2)
            #expect(ledger(["--db", db, "log", "--format", "ndjson"]).stdout == after.stdout)
            #expect(ledger(["--db=\(db)", "log", "--format", "ndjson"]).stdout == after.stdout)
            // A command with no ledger refuses it, as it would after its name.
            let help = ledger(["--db", db, "help"])
            #expect(help.status == 64, "\(help.stderr)")
            let alone = ledger(["--db", db])
            #expect(alone.status == 64 && alone.stderr.hasPrefix("Error: unknown option '--db'"), "\(alone.stderr)")
        }
    }

    @Test("commands that read need an existing ledger")
    func readersNeedLedger() throws {
        try withTemporaryLedger { db in
            for command in ["log", "verify", "stats"] {
                let run = ledger([command], db: db)
                #expect(run.status == 1)
                #expect(run.stderr.hasPrefix("Error: no ledger at '\(db)'"))
            }
            // An emptied data.mdb (a failed copy) is no ledger to any command (append made a new one in it): it
            // was made a new one, which `verify` called sound (an audit). Nor is an LMDB
            // environment with no database in it (its 17 were created). Neither is written.
            #expect(ledger(["append"], stdin: Fixtures.stepsFile(count: 2), db: db).status == 0)
            let dataFile = db + "/data.mdb"
            #expect(truncate(dataFile, 0) == 0)
            for command in [["verify"], ["log"], ["stats"], ["project", "daily"], ["replay", "--to-seq", "1"], ["append"], ["init"]] {
                let run = ledger(command, stdin: Fixtures.stepsFile(count: 2), db: db)
                #expect(run.status == 1 && run.stderr.hasPrefix("Error: the ledger at '\(db)' is damaged: its data.mdb is empty (0 bytes)"), "\(command): \(run.stderr)")
            }
            #expect((try FileManager.default.attributesOfItem(atPath: dataFile)[.size] as? Int) == 0)
            try FileManager.default.removeItem(atPath: db)
            try FileManager.default.createDirectory(atPath: db, withIntermediateDirectories: false)
            let made = try runProcess("/usr/bin/env", ["python3", "-c", "import sys; sys.stdout.write('VERSION=3\\nformat=bytevalue\\ntype=btree\\nHEADER=END\\nDATA=END\\n')"])
            let loaded = try runProcess("/usr/bin/env", ["mdb_load", "-f", "/dev/stdin", db], stdin: Array(made.stdout.utf8))
            try #require(loaded.status == 0, "mdb_load: \(loaded.stderr)")
            let before = try Data(contentsOf: URL(fileURLWithPath: dataFile))
            for command in [["verify"], ["log"]] {
                let run = ledger(command, db: db)
                #expect(run.status == 1 && run.stderr.hasPrefix("Error: '\(db)' holds an LMDB environment that is not a ledger (it holds no database at all;"), "\(command): \(run.stderr)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: dataFile)) == before)
            try FileManager.default.removeItem(atPath: db)
            // A file there is said to be one: 'ledger init' could not make a ledger of it.
            try Data("not a ledger".utf8).write(to: URL(fileURLWithPath: db))
            let file = ledger(["log"], db: db)
            #expect(file.status == 1)
            #expect(file.stderr == "Error: '\(db)' is a file, not a ledger directory; point --db at a ledger directory\n")
            // What it is otherwise is said as it is (`/dev/null` was "a file": an audit).
            let device = ledger(["log"], db: "/dev/null")
            #expect(device.status == 1 && device.stderr == "Error: '/dev/null' is a device, not a ledger directory; point --db at a ledger directory\n", "\(device.stderr)")
        }
    }

    @Test("init refuses a bad zone or size with a usage error")
    func initUsage() throws {
        try withTemporaryLedger { db in
            let zone = ledger(["init", "--timezone", "Mars/Olympus"], db: db)
            #expect(zone.status == 64)
            #expect(zone.stderr.contains("unknown time zone 'Mars/Olympus'"))
            #expect(zone.stderr.contains("\nUsage: ledger init"))
            #expect(ledger(["init", "--map-size", "lots"], db: db).status == 64)
            #expect(ledger(["init", "--map-size", "0x10MiB"], db: db).status == 64)  // decimal only
            #expect(ledger(["init", "--map-size", "1MiB"], db: db).status == 0)
            // On a ledger that exists, the size is not taken silently as if it were applied.
            let again = ledger(["init", "--map-size", "1GiB"], db: db)
            #expect(again.status == 0)
            #expect(again.stderr == "note: --map-size applies to a new ledger only; this one exists, with a map of 1 MiB that doubles by itself when full\n")
            let stored = try EventLog(path: db, create: false).statistics().mapSize
            #expect(stored == 1 << 20)
        }
    }

    @Test("options that would be ignored or would pick another ledger are usage errors")
    func ignoredOptions() throws {
        withTemporaryLedger { db in
            #expect(ledger(["append"], stdin: Fixtures.stepsFile(count: 1), db: db).status == 0)
            // An empty --db (an unset variable in a script) is not the default ./ledger.db.
            let emptyDB = ledger(["append", "--db", ""], stdin: Fixtures.stepsFile(count: 1))
            #expect(emptyDB.status == 64)
            #expect(emptyDB.stderr.hasPrefix("Error: --db must not be empty\nUsage: ledger append"))
            // Said before the input is read: with none, it was "no events in input" (exit 65, an audit).
            for arguments in [["append", "--db", ""], ["import", "apple-health", "/nonexistent.xml", "--db", ""]] {
                let usage = ledger(arguments, stdin: "")
                #expect(usage.status == 64 && usage.stderr.hasPrefix("Error: --db must not be empty\n"), "\(arguments): \(usage.stderr)")
            }
            // `client`: what an action has no use for (it listed every client for `list --admin`).
            #expect(ledger(["client", "add", "coach"], db: db).status == 0)
            let listAdmins = ledger(["client", "list", "--admin"], db: db)
            #expect(listAdmins.status == 64 && listAdmins.stderr.hasPrefix("Error: --admin does not apply to 'client list'\n"), "\(listAdmins.stderr)")
            #expect(ledger(["client", "list", "coach"], db: db).stderr.hasPrefix("Error: 'client list' takes no NAME, got 'coach'\n"))
            #expect(ledger(["client", "remove", "coach", "--format", "json"], db: db).status == 64)
            #expect(ledger(["client", "add", "other", "--format", "json"], db: db).status == 64)
            #expect(ledger(["client", "list", "--format", "csv"], db: db).stdout.hasPrefix("name,admin,created\ncoach,false,"))
            let grants = ledger(["project", "grants", "--from", "2030-01-01"], db: db)
            #expect(grants.status == 64)
            #expect(grants.stderr.hasPrefix("Error: grants rows have no date; --from does not apply to them\n"))
            #expect(ledger(["project", "grants", "--date", "today"], db: db).status == 64)
            // daily-steps is steps: another type is refused, not served under its name.
            for command in [["project", "daily-steps"], ["replay", "--projection", "daily-steps", "--to-seq", "1"],
                            ["subscribe", "daily-steps", "--from", "0"]] {
                let other = ledger(command + ["--type", "distance"], db: db)
                #expect(other.status == 64, "\(command)")
                #expect(other.stderr.hasPrefix("Error: daily-steps is daily of type steps; it cannot take --type distance\n"), "\(other.stderr)")
            }
            let batch = ledger(["import", "apple-health", "x.xml", "--batch", "-1"], db: db)
            #expect(batch.stderr.hasPrefix("Error: option '--batch' needs a whole number from 1 to "))
        }
    }

    @Test("serve whose --audit-log cannot be opened stops before listening, saying why")
    func serveAuditLogUnwritable() {
        withTemporaryLedger { db in
            let run = ledger(["serve", "--listen", "127.0.0.1:0", "--audit-log", "/nonexistent-ledger-dir/audit.ndjson"], db: db)
            #expect(run.status == 1)
            #expect(run.stderr == "Error: cannot open the audit log /nonexistent-ledger-dir/audit.ndjson: No such file or directory\n", "\(run.stderr)")
            #expect(run.stdout.isEmpty)
        }
    }

    @Test("serve refuses a bad --heartbeat, --idle-timeout, --header-timeout, --body-timeout or --per-address-limit with a usage error, before listening")
    func serveUsage() throws {
        withTemporaryLedger { db in
            for (option, value, message) in [("--idle-timeout", "0", "'--idle-timeout' needs whole seconds from 1 to 86400, got '0'"),
                                             ("--idle-timeout", "1.5", "'--idle-timeout' needs whole seconds from 1 to 86400, got '1.5'"),
                                             ("--header-timeout", "0", "'--header-timeout' needs whole seconds from 1 to 86400, got '0'"),
                                             ("--body-timeout", "x", "'--body-timeout' needs whole seconds from 1 to 86400, got 'x'"),
                                             ("--per-address-limit", "-1", "'--per-address-limit' needs a whole number from 0 to 65000, got '-1'"),
                                             ("--audit-log", "", "'--audit-log' must not be empty"),
                                             ("--tls-cert", "", "'--tls-cert' must not be empty"),
                                             ("--heartbeat", "0.0000001", "'--heartbeat' needs seconds from 0.1 to 15, got '0.0000001'"),
                                             ("--heartbeat", "16", "'--heartbeat' needs seconds from 0.1 to 15, got '16'"),
                                             // Written as decimal digits only: Swift's parsing also reads a sign and hexadecimal.
                                             ("--per-address-limit", "+5", "'--per-address-limit' needs a whole number from 0 to 65000, got '+5'"),
                                             ("--heartbeat", "0x1p3", "'--heartbeat' needs seconds from 0.1 to 15, got '0x1p3'")] {
                let run = ledger(["serve", "--listen", "127.0.0.1:0", option, value], db: db)
                #expect(run.status == 64, "\(option) \(value)")
                #expect(run.stderr.hasPrefix("Error: \(message)\n"), "\(run.stderr)")
                #expect(run.stdout.isEmpty)
            }
            #expect(ledger(["init"], db: db).status == 0)
            let hostless = "Error: '--listen' needs HOST:PORT with HOST an IPv4 or IPv6 address or localhost"
            for (arguments, message) in [
                // A host that is no address is a usage error too (it was exit 1, a runtime failure).
                (["serve", "--listen", ":39150"], hostless),
                (["serve", "--listen", "example.com:39150"], hostless),
                (["serve", "--listen", "127.0.0.300:1"], hostless),
                (["subscribe", "daily", "--from", "abc"], "Error: '--from' must be a seq, now, or SEQ.K"),
                (["serve", "--listen", "127.0.0.1:+80"], "Error: '--listen' needs HOST:PORT, like 127.0.0.1:8080, got '127.0.0.1:+80'\n"),
                (["log", "--limit", "+1"], "Error: option '--limit' needs a whole number from 0 to "),
                (["replay", "--projection", "daily", "--to-seq", "+1"], "Error: option '--to-seq' needs a whole number from 0 to 18446744073709551615, got '+1'\n"),
                (["replay", "--projection", "daily", "--to-seq", "18446744073709551616"],
                 "Error: option '--to-seq' needs a whole number from 0 to 18446744073709551615, got '18446744073709551616'\n"),
                // A --user no event can have (an unset variable in a script) matched nothing and exited 0.
                (["project", "daily", "--user", ""], "Error: '--user' must not be empty\nUsage: ledger project"),
                (["replay", "--to-seq", "1", "--user", ""], "Error: '--user' must not be empty\nUsage: ledger replay"),
                (["log", "--user", ""], "Error: '--user' must not be empty\nUsage: ledger log"),
                (["subscribe", "daily", "--from", "0", "--user", ""], "Error: '--user' must not be empty\nUsage: ledger subscribe"),
                (["import", "apple-health", "/dev/null", "--user", ""], "Error: '--user' must not be empty\nUsage: ledger import"),
                (["project", "daily", "--user", "a\u{1}b"], "Error: '--user' contains a control character\n"),
                (["log", "--user", String(repeating: "u", count: 1_025)], "Error: '--user' is longer than 1 KiB\n"),
            ] {
                let run = ledger(arguments, db: db)
                #expect(run.status == 64 && run.stderr.hasPrefix(message), "\(arguments): \(run.stderr)")
            }
        }
    }
}

@Suite("Help and usage errors")
struct HelpTests {
    @Test("--user picks a user by the bytes of the name, as projections do")
    func userFilterByBytes() throws {
        withTemporaryLedger { db in
            // "Kelvin" with an ASCII K and with the Kelvin sign: equal as Swift strings.
            let input = ["Kelvin", "\u{212A}elvin"].map { user in
                #"{"kind":"sample","user":"\#(user)","type":"steps","value":5,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone"}"#
            }.joined(separator: "\n")
            #expect(ledger(["append"], stdin: input, db: db).status == 0)
            let log = ledger(["log", "--user", "Kelvin", "--format", "ndjson"], db: db)
            #expect(log.status == 0)
            #expect(log.stdout.split(separator: "\n").count == 1, "\(log.stdout)")
            let rows = ledger(["project", "daily-steps", "--user", "Kelvin", "--format", "ndjson"], db: db)
            #expect(rows.stdout.split(separator: "\n").count == 1, "\(rows.stdout)")
        }
    }

    /// `client --help` listed `--format` under OPTIONS but not in its USAGE line (an audit).
    @Test("every option a command's help lists is in its USAGE line")
    func usageNamesEveryOption() {
        let overview = ledger(["help"]).stdout.split(separator: "\n")
        let commands = overview.drop { !$0.hasPrefix("SUBCOMMANDS:") }.dropFirst().compactMap { line -> String? in
            let word = line.split(separator: " ").first.map(String.init) ?? ""
            return line.hasPrefix("  ") && word != "See" && word.allSatisfy(\.isLowercase) ? word : nil
        }
        #expect(commands.count == 13, "\(commands)")
        for command in commands {
            let help = ledger([command, "--help"]).stdout.split(separator: "\n")
            let usage = help.first { $0.hasPrefix("USAGE:") } ?? ""
            let options = help.drop { !$0.hasPrefix("OPTIONS:") }.compactMap { line -> Substring? in
                line.hasPrefix("  --") ? line.dropFirst(2).split(separator: " ").first : nil
            }
            #expect(!options.isEmpty, "\(command)")
            for option in options where option != "--help" {
                #expect(usage.contains(option), "\(command): \(option) is not in '\(usage)'")
            }
        }
    }

    @Test("help, --help and --version print to stdout and exit 0")
    func help() {
        for arguments in [["help"], ["--help"], ["-h"], ["help", "--help"], ["help", "-h"], ["help", "help"]] {
            let run = ledger(arguments)
            #expect(run.status == 0)
            #expect(run.stdout.hasPrefix("OVERVIEW: An event-sourced activity ledger"))
            #expect(run.stdout.contains("\nSUBCOMMANDS:\n"))
            #expect(run.stderr.isEmpty)
        }
        #expect(ledger(["--version"]).stdout == "ledger \(LedgerCommandLine.version)\n")
        // Anything after them is a mistake, not something to ignore.
        let extra = ledger(["--version", "extra"])
        #expect(extra.status == 64)
        #expect(extra.stderr.hasPrefix("Error: '--version' takes no arguments, got 'extra'\n"))
        #expect(ledger(["help", "append", "log"]).status == 64)
    }

    @Test("append --help (golden)")
    func appendHelpGolden() {
        let run = ledger(["append", "--help"])
        #expect(run.status == 0)
        #expect(run.stdout == """
        OVERVIEW: Append events to the log.

        Reads NDJSON (one event per line), one JSON object, or an array of objects, from FILE or \
        standard input. The whole input is one batch: if any event is invalid nothing is written, \
        and the error names the line (or array index) and the field. Re-sending an event already \
        in the log is a duplicate, not a second event. One batch is one transaction, so memory grows \
        with the input: split a file near the machine's memory into several appends. On a terminal, \
        stderr counts the events checked every 65,536. SIGINT or SIGTERM once the input is \
        read stops the append before its commit, with nothing written (exit 130).

        USAGE: ledger append [FILE|-] [--db PATH] [--expect-head N]

        ARGUMENTS:
          FILE                  A file of events, or - for standard input (the default).

        OPTIONS:
          -h, --help            Show help for this command.
          --db PATH             The ledger directory (default: $LEDGER_DB, else ./ledger.db).
          --expect-head N       Fail unless the log's last seq is N (optimistic concurrency).

        """)
        #expect(ledger(["help", "append"]).stdout == run.stdout)
        #expect(ledger(["--help", "append"]).stdout == run.stdout)
        #expect(ledger(["help", "-h", "append"]).stdout == run.stdout)
        #expect(ledger(["--help", "extra"]).status == 64)
    }

    @Test("append stops reading at the first line past 1 MiB: /dev/zero is refused, not read forever")
    func endlessInput() throws {
        try withTemporaryLedger { db in
            let zero = ledger(["append", "/dev/zero"], db: db)
            #expect(zero.status == 65)
            #expect(zero.stderr == "Error: line 1: line is longer than 1 MiB (more than 1048576 bytes)\n")
            #expect(!FileManager.default.fileExists(atPath: db))
            // A long line after short ones is named by its number; an array may have long lines.
            let folder = URL(fileURLWithPath: db).deletingLastPathComponent()
            let path = folder.appendingPathComponent("events.ndjson").path
            try (goodSample + "\n" + goodSample + "\n" + String(repeating: " ", count: 3 << 20)).write(toFile: path, atomically: true, encoding: .utf8)
            #expect(ledger(["append", path], db: db).stderr.hasPrefix("Error: line 3: line is longer than 1 MiB"))
            // Blanks before the first event count too (endless spaces are read no further).
            try ("\n" + String(repeating: " ", count: 3 << 20)).write(toFile: path, atomically: true, encoding: .utf8)
            #expect(ledger(["append", path], db: db).stderr.hasPrefix("Error: line 2: line is longer than 1 MiB"))
            let array = "[" + String(repeating: goodSample + ",", count: 12_000) + goodSample + "]"
            try array.write(toFile: path, atomically: true, encoding: .utf8)
            let long = ledger(["append", path], db: db)
            #expect(long.status == 0, "\(long.stderr)")
            #expect(long.stdout.hasPrefix("appended 1, duplicates 12000"), "\(long.stdout)")
        }
    }

    /// An audit: input that is never one event was read for ever from a pipe, in memory, when
    /// its lines were short (`(echo '['; yes ' ')` took 6 GB in 16 s). Each of these stops
    /// with its error once what was read decides it (bounded by `timeout`: were it read to
    /// its end, the test would fail at 60 s or at 1 GB rather than hang).
    @Test("endless input on a pipe that cannot be events stops with its error", arguments: [
        (#"(echo '['; yes ' ')"#, "Error: line 524290: more than 1 MiB of white space in a row, which no file of events holds"),
        (#"(printf '{"kind":"sample",'; yes ' ')"#, "Error: line 1: malformed JSON: string or '}' expected near end of file (column 18)"),
        (#"(echo '{'; yes '"a":1,')"#, "Error: line 1: the object is longer than 1 MiB ("),
        (#"(printf '[{"a":"'; yes x)"#, "Error: line 1: malformed JSON in 'a': unexpected newline near '\"x' (column 8)"),
        (#"(printf '[{"a":"'; yes x | tr -d '\n')"#, "Error: index 0: the event is longer than 1 MiB (more than 8 MiB of it read, white space aside)"),
        (#"(echo '\#(goodSample)'; yes '{"kind":"sample"')"#, "Error: line 2: malformed JSON: '}' expected near end of file"),
        // Blank lines: more than 1 MiB of them in a row is refused, as white space is in an
        // array (an audit: `yes ''` grew to 679 MB in 8 s, and 4.2 GB after a byte order mark).
        (#"yes ''"#, "Error: line 1048577: more than 1 MiB of blank lines in a row, which no file of events holds"),
        (#"(echo '\#(goodSample)'; yes '   ')"#, "Error: line 262146: more than 1 MiB of blank lines in a row, which no file of events holds"),
        (#"(printf '\357\273\277'; yes '')"#, "Error: line 1048574: more than 1 MiB of blank lines in a row, which no file of events holds"),
        // Not endless, but an array's tree took a hundred times its text: 10 MB of `{}` needed
        // more than a gigabyte before its first element was refused (an audit, at 60 MB: 7 GB).
        (#"python3 -c 'import sys; sys.stdout.write("[" + ",".join(["{}"] * 3_500_000) + "]")'"#, "Error: index 0: 'kind' is required"),
    ])
    func endlessPipes(_ feed: String, _ expected: String) throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            // Memory bounded too: read whole, such input would take gigabytes in seconds.
            let run = try runProcess("/bin/sh", ["-c", "ulimit -v 1000000; " + feed + #" | timeout 60 "$0" append --db "$1""#, binary, db])
            #expect(run.status == 65, "\(run.stderr)")
            #expect(run.stderr.hasPrefix(expected), "\(run.stderr)")
            #expect(run.stderr.split(separator: "\n").count == 1)
            #expect(!FileManager.default.fileExists(atPath: db))
        }
    }

    /// An audit: a byte order mark made the first line look like no event to the reader, which
    /// then stopped reading after 1 MiB of NDJSON that parsed: the rest was never appended,
    /// and the command exited 0. The mark split across two reads of a pipe is read as one.
    @Test("NDJSON over 1 MiB after a byte order mark is appended whole, from a file and from a pipe read in pieces")
    func byteOrderMarkBeforeLongInput() throws {
        try withTemporaryLedger { db in
            let lines = (0..<12_000).map { goodSample.replacingOccurrences(of: "\"value\":100", with: "\"value\":\($0)") }
            let text = "\u{FEFF}" + lines.joined(separator: "\n") + "\n"
            #expect(text.utf8.count > 1 << 20)
            let folder = URL(fileURLWithPath: db).deletingLastPathComponent()
            let path = folder.appendingPathComponent("bom.ndjson").path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            let file = ledger(["append", path], db: db)
            #expect(file.status == 0, "\(file.stderr)")
            #expect(file.stdout == "appended 12000, duplicates 0, superseded 0, head 12000\n")
            let binary = try ledgerBinary()
            let piped = try runProcess("/bin/sh", ["-c", #"(printf '\357'; sleep 0.3; tail -c +2 "$2") | "$0" append --db "$1""#, binary, db, path])
            #expect(piped.status == 0, "\(piped.stderr)")
            #expect(piped.stdout == "appended 0, duplicates 12000, superseded 0, head 12000\n")
        }
    }

    @Test("arrays and objects read as they come are parsed as before: strings with brackets, escapes, pretty-printing")
    func scannedInputStillParses() throws {
        try withTemporaryLedger { db in
            let tricky = goodSample.replacingOccurrences(of: #""iPhone""#, with: #""a\\\"b]}[{,""#)
            let array = "[" + tricky + ",\n  " + goodSample.replacingOccurrences(of: "100", with: "5") + "]\n\n"
            let run = try runProcess(try ledgerBinary(), ["append", "--db", db], stdin: Array(array.utf8))
            #expect(run.status == 0 && run.stdout.hasPrefix("appended 2,"), "\(run.stderr)")
            let pretty = "{\n \"kind\":\"sample\",\"type\":\"steps\",\"value\":3,\n \"start\":\"2026-11-29T10:00:00Z\",\"end\":\"2026-11-29T10:10:00Z\",\"source\":\"c\"\n}\n"
            let single = try runProcess(try ledgerBinary(), ["append", "--db", db], stdin: Array(pretty.utf8))
            #expect(single.status == 0 && single.stdout.hasPrefix("appended 1,"), "\(single.stderr)")
            // Elements are parsed one by one, and what follows the array is still Jansson's error.
            let trailing = try runProcess(try ledgerBinary(), ["append", "--db", db], stdin: Array("[\(goodSample)] xyz".utf8))
            #expect(trailing.stderr == "Error: line 1: malformed JSON: end of file expected near 'xyz' (column \(goodSample.utf8.count + 4))\n")
            let missingComma = try runProcess(try ledgerBinary(), ["append", "--db", db], stdin: Array("[\(goodSample)\n \(goodSample)]".utf8))
            #expect(missingComma.stderr == "Error: line 2: malformed JSON: ']' expected near '{' (column 2)\n")
            let inElement = try runProcess(try ledgerBinary(), ["append", "--db", db], stdin: Array("[\(goodSample),\n  {\"kind\":NaN}]".utf8))
            #expect(inElement.stderr == "Error: line 2: malformed JSON in 'kind': invalid token near 'NaN' (column 13)\n")
        }
    }

    @Test("an error quoting an argument stays one line, however long or odd the argument")
    func argumentsInErrors() {
        let newline = ledger(["log", "--kind", "a\nb"])
        #expect(newline.status == 64)
        #expect(newline.stderr.hasPrefix("Error: unknown kind 'a\\u{A}b'"), "\(newline.stderr)")
        #expect(newline.stderr.split(separator: "\n").count == 2, "the error line and the usage line: \(newline.stderr)")
        let long = ledger(["log", "--kind", String(repeating: "k", count: 100_000)])
        #expect(long.status == 64)
        let first = long.stderr.split(separator: "\n").first ?? ""
        #expect(first.count < 4_200 && first.hasSuffix("more characters)"), "\(first.count) characters")
    }

    @Test("typos get a suggestion and exit 64")
    func typos() {
        let command = ledger(["apend"])
        #expect(command.status == 64)
        #expect(command.stderr == "Error: unknown command 'apend'. Did you mean 'append'?\nUsage: ledger <command> [options]\n")
        // No command at all is a missing argument too (SPEC §5), not success.
        let none = ledger([])
        #expect(none.status == 64 && none.stdout.isEmpty)
        #expect(none.stderr == "Error: no command given; 'ledger help' lists the commands\nUsage: ledger <command> [options]\n")
        let option = ledger(["log", "--frm", "3"])
        #expect(option.status == 64)
        #expect(option.stderr.hasPrefix("Error: unknown option '--frm'. Did you mean '--from'?\nUsage: ledger log"))
        #expect(ledger(["log", "--FORMAT", "json"]).stderr.hasPrefix("Error: unknown option '--FORMAT'. Did you mean '--format'?\n"))
        let missing = ledger(["log", "--limit"])
        #expect(missing.status == 64)
        #expect(missing.stderr.hasPrefix("Error: option '--limit' needs a value (N)"))
        let format = ledger(["log", "--format", "xml"])
        #expect(format.status == 64)
        let extra = ledger(["verify", "extra"])
        #expect(extra.status == 64)
        #expect(extra.stderr.hasPrefix("Error: unexpected argument 'extra'"))
    }
}

@Suite("Progress on long commands")
struct ProgressTests {
    @Test("append, rebuild and verify count on a terminal's stderr every 65,536 events, and say nothing elsewhere")
    func progressLines() throws {
        let count = Int(EventLog.progressStep) + 500
        let input = Fixtures.stepsFile(count: count)
        withTemporaryLedger { db in
            let append = ledger(["append"], stdin: input, db: db, stderrTerminal: true)
            #expect(append.status == 0)
            #expect(append.stdout == "appended \(count), duplicates 0, superseded 0, head \(count)\n")
            #expect(append.stderr == "\rappending: 65536 events checked…\n", "\(append.stderr)")
            let rebuild = ledger(["rebuild"], db: db, stderrTerminal: true)
            #expect(rebuild.status == 0)
            #expect(rebuild.stdout.hasPrefix("rebuilt daily, per-source, last-known, grants from \(count) events"))
            #expect(rebuild.stderr == "\rrebuilding: folded 65536 of \(count) events…\n", "\(rebuild.stderr)")
            let verify = ledger(["verify"], db: db, stderrTerminal: true)
            #expect(verify.status == 0)
            #expect(verify.stderr == "\rverified 65536 events…\n", "\(verify.stderr)")
            // Not a terminal: no progress text at all.
            for arguments in [["rebuild"], ["verify"]] {
                let quiet = ledger(arguments, db: db)
                #expect(quiet.status == 0)
                #expect(quiet.stderr.isEmpty, "\(arguments): \(quiet.stderr)")
            }
            // A batch refused near its end (the same events again, then a bad line): whether or
            // not the progress line was drawn first (the parsing thread may find the bad line
            // before 65,536 events are checked), the error starts on a line of its own.
            let bad = ledger(["append"], stdin: input + "{\"kind\":1}\n", db: db, stderrTerminal: true)
            #expect(bad.status == 65)
            let error = "Error: line \(count + 1): 'kind' must be a string"
            #expect(bad.stderr.hasPrefix(error) || bad.stderr.hasPrefix("\rappending: 65536 events checked…\n" + error), "\(bad.stderr)")
            #expect(ledger(["stats", "--format", "json"], db: db).stdout.contains("\"head\":\(count),"), "nothing written")
        }
    }
}
