import Foundation
import LedgerCore
import LedgerStore
import Projections

extension Commands {
    static let initCommand = Command(
        name: "init",
        abstract: "Create a ledger and set its default time zone.",
        usage: "ledger init [--db PATH] [--timezone ZONE] [--map-size SIZE]",
        discussion: """
        The default zone decides which calendar day a sample belongs to when neither the sample \
        nor its user's profile names a zone. It cannot be changed once events exist. The map \
        size is where LMDB starts; it doubles by itself when full.
        """,
        options: [helpOption, dbOption,
                  OptionSpec(name: "timezone", value: "ZONE", help: "IANA zone name or ±HH:MM (default: UTC for a new ledger; an existing one keeps its zone)."),
                  OptionSpec(name: "map-size", value: "SIZE", help: "Initial LMDB map size, e.g. 64MiB, 4GiB (default: 64MiB).")]
    ) { arguments, context in
        let given = arguments.value("timezone")
        let zoneName = given ?? "UTC"
        guard let zone = Zone(zoneName) else {
            throw CLIError.usage("unknown time zone '\(zoneName)' (expected an IANA name like Europe/Paris, or ±HH:MM)", usage: arguments.usage)
        }
        var mapSize: Int?
        if let text = arguments.value("map-size") {
            // At most 1 TiB to start (the map still doubles past it when full): a size beyond
            // the address space would be recorded in the new file, and no process could open it.
            guard let size = parseSize(text), size >= 1 << 16, size <= 1 << 40 else {
                throw CLIError.usage("'--map-size' needs a size from 64KiB to 1TiB in B, KiB, MiB, GiB or TiB (KB, MB, GB and TB are powers of 1000), like 64MiB or 4GiB, got '\(text)'", usage: arguments.usage)
            }
            mapSize = size
        }
        let path = try context.databasePath(arguments)
        let existed = FileManager.default.fileExists(atPath: (path as NSString).appendingPathComponent("data.mdb"))
        // A new ledger gets its zone in the transaction that creates it (a kill between two
        // transactions left one in UTC that looked initialized); an existing one is set here.
        // An `init` that fails (a full disk) leaves no folder it made behind, as other commands
        // that create the ledger do (an audit: a new ledger.db folder stayed, empty).
        return try context.withCreatedLog(arguments, mapSize: existed ? nil : mapSize, zone: zone) { log in
            // Without --timezone an existing ledger keeps its zone: a bare `init` (a set-up script
            // run twice) set it back to UTC while the ledger held no event, and failed once it did.
            // A new one has its zone already, written as it was created (and if another `init`
            // created it first, a bare one keeps that one's zone).
            if given != nil { try log.initialize(zone: zone) }
            let head = try log.head()
            context.stdout.write("ledger at \(path): default zone \(try log.defaultZone().name), head \(head.seq)\n")
            if existed, mapSize != nil {
                // Said, not silently ignored: the size given is not the ledger's.
                let current = try log.statistics().mapSize
                context.stderr.write("note: --map-size applies to a new ledger only; this one exists, with a map of \(formatSize(current)) that doubles by itself when full\n")
            }
            return 0
        }
    }

    static let appendCommand = Command(
        name: "append",
        abstract: "Append events to the log.",
        usage: "ledger append [FILE|-] [--db PATH] [--expect-head N]",
        discussion: """
        Reads NDJSON (one event per line), one JSON object, or an array of objects, from FILE or \
        standard input. The whole input is one batch: if any event is invalid nothing is written, \
        and the error names the line (or array index) and the field. Re-sending an event already \
        in the log is a duplicate, not a second event. One batch is one transaction, so memory grows \
        with the input: split a file near the machine's memory into several appends. On a terminal, \
        stderr counts the events checked every 65,536. SIGINT or SIGTERM once the input is \
        read stops the append before its commit, with nothing written (exit 130).
        """,
        arguments: [("FILE", "A file of events, or - for standard input (the default).")],
        options: [helpOption, dbOption,
                  OptionSpec(name: "expect-head", value: "N", help: "Fail unless the log's last seq is N (optimistic concurrency).")],
        maxPositionals: 1
    ) { arguments, context in
        var expectHead: UInt64?
        if let text = arguments.value("expect-head") {
            expectHead = try parseCount(text, option: "expect-head", usage: arguments.usage)
        }
        // A usage error (an empty --db) is said before any input is read: with empty input it
        // was reported as "no events in input" (exit 65, an audit).
        _ = try context.databasePath(arguments)
        let source = arguments.positionals.first ?? "-"
        let bytes = source == "-" ? try context.stdin.readAll(limitingLines: true) : try readFile(source, limitingLines: true)
        // Events are parsed, checked, written and folded as a stream inside one write
        // transaction (no list of decoded events; the transaction's pages and the batch's
        // days still grow with the input, README "Decisions"). A batch refused anywhere
        // (malformed line 900,000, a conflict, a correction of an unknown sample) aborts that
        // transaction: nothing is committed, and a ledger this command created is removed.
        // Input that holds no event at all is refused before the ledger is opened.
        if !bytes.contains(where: { !EventInput.isSpace($0) }) {
            throw InputError(location: nil, message: "no events in input")
        }
        // SIGINT or SIGTERM from here on stops the append before its commit, with nothing
        // written (it used to end the process with nothing said). Caught only once the input
        // is read: a read from a terminal or a pipe that SIGINT cannot end would hold the
        // command, and a signal that ends it there has nothing to undo.
        catchInterrupts()
        let result = try context.withCreatedLog(arguments) { log in
            // Stored, indexed and folded, an event takes about 4.5 times its NDJSON line.
            try log.environment.reserve(bytes.count * 6)
            // Nothing is committed before the end: the count is of events checked, written and
            // folded inside the one transaction.
            let progress = ProgressLine(sink: context.stderr) { "appending: \($0) events checked…" }
            defer { progress?.finish() }
            return try log.append(expectHead: expectHead) { add in
                // Parsing and validating (JSON, canonical form) run on a second core while
                // this thread checks, hashes, writes and folds. The samples' content digests
                // are done by whichever thread is ahead, as an import's are: here while this
                // one has chunks in hand (a large file, whose one transaction slows it), else
                // by it.
                try Pipeline.run(produce: { (emit: (consuming [(InputLocation, PreparedEvent)]) throws -> Void, waiting: () -> Int) in
                    var chunk: [(InputLocation, PreparedEvent)] = []
                    func send() throws {
                        if PreparedEvent.producerDigests(waiting: waiting()) {
                            for index in chunk.indices { chunk[index].1.computeContentDigest() }
                        }
                        try emit(chunk)
                        chunk.removeAll(keepingCapacity: true)
                    }
                    try EventInput.forEachPrepared(bytes, digesting: false) { location, prepared in
                        chunk.append((location, prepared))
                        if chunk.count == 256 { try send() }
                    }
                    if !chunk.isEmpty { try send() }
                }, drain: { next in
                    while let chunk = try next() {
                        if interrupted.load(ordering: .relaxed) { throw appendStopped }
                        for (location, prepared) in chunk { try add(location, prepared) }
                        progress?.count(chunk.count, step: EventLog.progressStep)
                    }
                    // The last look before the commit: a signal after it finds the append
                    // committing, and the command ends as it would have, saying what it wrote.
                    if interrupted.load(ordering: .relaxed) { throw appendStopped }
                })
            }
        }
        context.stdout.write("appended \(result.appended), duplicates \(result.duplicates), superseded \(result.superseded), head \(result.head)\n")
        return 0
    }

    /// What an append stopped by SIGINT or SIGTERM says: its one transaction was never
    /// committed (and a ledger it created is removed, as a refused append's is).
    static let appendStopped = CLIError.interrupted("the append was stopped before its commit; nothing of it was written")

    static let logCommand = Command(
        name: "log",
        abstract: "Print events as stored, with seq, recorded and hash.",
        usage: "ledger log [--db PATH] [--from SEQ] [--since WHEN] [--until WHEN] [--limit N] [--user U] [--kind K] [--id ID] [--format FORMAT]",
        discussion: """
        --from is inclusive: '--from 5' starts at the event with seq 5. --since and --until \
        select by the time each event was recorded (committed), both ends included: an RFC \
        3339 timestamp, or a date for the start (--since) or the end (--until) of that day in \
        the ledger's default zone; the walk starts at the first event of --since, found by a \
        binary search, since 'recorded' never goes back along the log. --id prints the event \
        with that id and what became of it after it: for a sample, the later versions that \
        superseded it (same user, source and syncId) and every correction of these, with the \
        seq and hash of each step.
        """,
        options: [helpOption, dbOption, formatOption,
                  OptionSpec(name: "from", value: "SEQ", help: "First seq to print (default: 1)."),
                  OptionSpec(name: "since", value: "WHEN", help: "Only events recorded at or after WHEN (RFC 3339, or a date: from its start)."),
                  OptionSpec(name: "until", value: "WHEN", help: "Only events recorded at or before WHEN (RFC 3339, or a date: to its end)."),
                  OptionSpec(name: "limit", value: "N", help: "Print at most N events."),
                  OptionSpec(name: "user", value: "U", help: "Only events about user U (a correction is about its target's user)."),
                  OptionSpec(name: "kind", value: "K", help: "Only events of kind K: sample, correction, grant, revoke, profile."),
                  OptionSpec(name: "id", value: "ID", help: "Only the event with id ID (a UUID) and its history: later sync versions of it, and corrections.")]
    ) { arguments, context in
        let usage = arguments.usage
        var id: UUID?
        if let text = arguments.value("id") {
            guard let parsed = UUID(uuidString: text) else {
                throw CLIError.usage("'--id' needs a UUID like 6f1c2a1e-8d4b-4c1e-9a7e-2b5f0c3d4e5f, got '\(text)'", usage: usage)
            }
            id = parsed
        }
        let format = try OutputFormat.resolve(arguments.value("format"), sink: context.stdout, usage: usage)
        let from = try arguments.value("from").map { try parseCount($0, option: "from", usage: usage) } ?? 1
        let limit = try arguments.value("limit").map { try parseSize($0, option: "limit", usage: usage) }
        var kind: EventKind?
        if let text = arguments.value("kind") {
            guard let parsed = EventKind(rawValue: text) else {
                throw CLIError.usage("unknown kind '\(text)' (expected sample, correction, grant, revoke or profile)\(suggestion(for: text, among: EventKind.allCases.map(\.rawValue)))", usage: usage)
            }
            kind = parsed
        }
        let user = try arguments.name("user")
        // A malformed WHEN is refused before the ledger is opened; a date's day is resolved
        // in the ledger's default zone after.
        for option in ["since", "until"] {
            if let when = arguments.value(option), let problem = EventLog.replayPointProblem(when) {
                throw CLIError.usage("'--\(option)' \(problem), got '\(when)'", usage: usage)
            }
        }
        let log = try context.openLog(arguments, create: false)
        let window: RecordedWindow
        switch try log.recordedWindow(since: arguments.value("since"), until: arguments.value("until"), name: { "'--\($0)'" }) {
        case .success(let found): window = found
        case .failure(let problem): throw CLIError.usage(problem.message, usage: usage)
        }
        let start = try log.walkAfter(from: from, id: id, since: window.since)
        if let id, start == nil { context.stderr.write("note: no event in this ledger has id \(id.lowercased)\n") }

        // The table, for people, summarises each event and ends with its full hash (what an
        // auditor keeps, SPEC §7); csv, ndjson and json carry the stored event itself.
        var rows = RowSet(columns: ["seq", "recorded", "kind", "user", "id"] + (format == .table ? ["detail", "hash"] : ["event"]))
        var printed = 0
        var pending: [UInt8] = []
        var userOfSample: [UUID: String] = [:]
        // Whose event each is matters to `--user` and to the columns of table and csv only:
        // ndjson and json of a whole log build no map of its samples.
        let needsUser = user != nil || format == .table || format == .csv
        var history = id.map(EventHistory.init(of:))
        try log.forEachRecord(after: start ?? .max) { record in
            if let limit, printed >= limit { return false }
            if window.isPast(record.recorded) { return false }
            let event = try record.typedEvent()
            // Before --kind, so that a later version is known to the history (its corrections).
            if history?.includes(event) == false || record.seq < from || !window.contains(record.recorded) { return true }
            if let kind, event.payload.kind != kind { return true }
            let eventUser = needsUser ? try log.user(of: event, known: &userOfSample) : ""
            if let user, !sameName(eventUser, user) { return true }
            printed += 1
            switch format {
            case .ndjson:
                pending += record.json
                pending.append(0x0A)
                if pending.count > 1 << 16 {
                    context.stdout.write(bytes: pending)
                    pending.removeAll(keepingCapacity: true)
                    // Output that cannot be written (`| head` done, a full disk) ends the scan.
                    if context.stdout.failed != nil { return false }
                }
            case .json:
                pending += printed == 1 ? [UInt8(ascii: "[")] : [UInt8(ascii: ",")]
                pending += record.json
            case .table:
                rows.append([.int(Int64(record.seq)), .string(record.recorded.rfc3339), .string(event.payload.kind.rawValue),
                             .string(eventUser), .string(event.id.lowercased), .string(summary(of: event)), .string(record.hash.hex)])
            case .csv:
                rows.append([.int(Int64(record.seq)), .string(record.recorded.rfc3339), .string(event.payload.kind.rawValue),
                             .string(eventUser), .string(event.id.lowercased), .string(String(decoding: record.json, as: UTF8.self))])
            }
            return true
        }
        switch format {
        case .ndjson:
            context.stdout.write(bytes: pending)
        case .json:
            context.stdout.write(bytes: (printed == 0 ? Array("[".utf8) : pending) + Array("]\n".utf8))
        case .table:
            rows.write(.table, to: context.stdout)
        case .csv:
            rows.write(.csv, to: context.stdout)
        }
        return 0
    }

    /// One line describing an event, for the table format.
    static func summary(of event: (id: UUID, payload: Event.Payload)) -> String {
        /// A value as the JSON has it (shortest form).
        func number(_ value: Double) -> String {
            var bytes: [UInt8] = []
            JSONValue.writeNumber(value, to: &bytes)
            return String(decoding: bytes, as: UTF8.self)
        }
        switch event.payload {
        case .sample(let sample):
            return "\(sample.type.rawValue) \(number(sample.value)) \(sample.unit) "
                + "\(sample.start.rfc3339)..\(sample.end.rfc3339) from \(sample.source.name)"
        case .correction(let correction):
            // What an amendment sets, so that the table shows what became of the sample.
            var sets: [String] = []
            if let value = correction.value { sets.append("value=\(number(value))") }
            if let unit = correction.unit { sets.append("unit=\(unit)") }
            if let start = correction.start { sets.append("start=\(start.rfc3339)") }
            if let end = correction.end { sets.append("end=\(end.rfc3339)") }
            return "\(correction.action.rawValue) \(correction.target.lowercased)\(sets.isEmpty ? "" : " " + sets.joined(separator: " ")): \(correction.reason)"
        case .grant(let change), .revoke(let change):
            return "\(change.client) read=[\(change.read.map(\.rawValue).joined(separator: ","))] share=[\(change.share.map(\.rawValue).joined(separator: ","))]"
        case .profile(let profile):
            var parts: [String] = []
            if let zone = profile.zone { parts.append("zone=\(zone)") }
            if let priority = profile.priority {
                for (type, names) in priority.sorted(by: { $0.key < $1.key }) {
                    parts.append("priority.\(type.rawValue)=[\(names.joined(separator: ","))]")
                }
            }
            return parts.joined(separator: " ")
        }
    }

    static let verifyCommand = Command(
        name: "verify",
        abstract: "Check the hash chain, and that every stored projection equals a fresh fold.",
        usage: "ledger verify [--db PATH] [--expect-hash SEQ:HASH]",
        discussion: """
        Exits 1 and names the first bad seq when the log was damaged or altered, the first \
        projection row (or entry of the fold's stored state) that differs from a fresh fold of \
        the log, the first stored change (what subscribers are sent) that a fresh fold would \
        not have made, or the first entry of the log's indexes (ids, samples, sync) that \
        disagrees with it. 'ledger rebuild --indexes' mends all but the log itself. On a \
        terminal, stderr counts the events verified every 65,536. With --expect-hash, the \
        hash of seq SEQ must also be HASH, one kept earlier (as verify, replay, log, stats or \
        backup printed it): that proves the log up to SEQ is the one it was then, which a \
        chain rewritten whole, every hash recomputed, would pass without it. SIGINT or \
        SIGTERM stops it at once (exit 130: not checked to its end).
        """,
        options: [helpOption, dbOption,
                  OptionSpec(name: "expect-hash", value: "SEQ:HASH", help: "Also fail unless seq SEQ's chain hash is HASH (64 hex digits), a hash kept earlier.")]
    ) { arguments, context in
        var kept: (seq: UInt64, hash: String)?
        if let text = arguments.value("expect-hash") {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, let seq = UInt64(digits: parts[0]), seq > 0, parts[1].count == 64,
                  parts[1].utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0 | 0x20) }) else {
                throw CLIError.usage("'--expect-hash' needs SEQ:HASH, a seq from 1 and its 64 hex digit hash, got '\(text)'", usage: arguments.usage)
            }
            kept = (seq, parts[1].lowercased())
        }
        // Verify only reads (what it may write, projections of another fold version made
        // again, is one transaction that a signal cannot leave half done): SIGINT or SIGTERM
        // ends it at once, saying so, where it used to end it with nothing said.
        let restoreHandlers = exitAtInterrupt(saying: "verify was stopped before it finished; the ledger was not checked to its end",
                                              stderrIsTerminal: context.stderr.isTerminal)
        defer { restoreHandlers() }
        let log = try context.openLog(arguments, create: false)
        let progress = ProgressLine(sink: context.stderr) { "verified \($0) events…" }
        defer { progress?.finish() }
        let report = try log.verifyChain(progress: progress?.show)
        progress?.finish()
        var keptNote = ""
        if let kept {
            // The chain was just walked: the stored hash of each seq is the one recomputed.
            guard kept.seq <= report.head.seq, let record = try log.record(at: kept.seq) else {
                throw CLIError.runtime("the log ends at seq \(report.head.seq), before seq \(kept.seq) whose hash was kept: events were removed from its end since, or this is another ledger")
            }
            guard record.hash.hex == kept.hash else {
                throw CLIError.runtime("seq \(kept.seq)'s hash is \(record.hash.hex), not the kept \(kept.hash): the log up to seq \(kept.seq) is not the one whose hash was kept (rewritten since, or another ledger)")
            }
            keptNote = "; seq \(kept.seq) has the kept hash"
        }
        let (rows, upgradedFrom) = try log.verifyProjections()
        _ = try log.verifyIndexes()
        // Projections of another fold version cannot be compared with this build's fold: they
        // are made again first, and the line says so rather than that they matched.
        let projections = upgradedFrom.map { version in
            (version == 0 ? "projections (none were stored) made for this build's fold version \(ActivityFold.version)"
                : "projections of fold version \(version) made again for this build's version \(ActivityFold.version)")
                + ", so the stored ones were not compared (\(rows) rows)"
        } ?? "projections match a fresh fold (\(rows) rows)"
        // Every check is done: a signal from here on ends the command as it would any other,
        // not with a line that contradicts the `ok` (an audit saw both, and exit 130).
        restoreHandlers()
        context.stdout.write("ok: \(report.verified) events, hash chain intact, head seq \(report.head.seq), hash \(report.head.hash.hex)\(keptNote); \(projections); indexes agree\n")
        return 0
    }

    static let backupCommand = Command(
        name: "backup",
        abstract: "Copy the ledger, as it stands, into a new directory, and check the copy's hash chain.",
        usage: "ledger backup DEST [--db PATH]",
        discussion: """
        DEST must not exist (its parent must), or be an empty directory. The copy is one consistent snapshot \
        (LMDB's mdb_env_copyfd2, as mdb_copy makes), taken while appends and 'ledger serve' go on; \
        it holds the log, its indexes, the projections and the API clients, and is a ledger \
        of its own: use it with --db DEST, or copy it back in place of a damaged one. The copy \
        is written under another name and renamed when whole, so one cut short is never taken \
        for a backup. Its hash chain is then walked from seq 1, and stdout says the head seq \
        and hash it holds: keep them to prove later that the log up to there was not rewritten.
        """,
        arguments: [("DEST", "A directory to make (or an empty one) for the copy.")],
        options: [helpOption, dbOption],
        maxPositionals: 1
    ) { arguments, context in
        guard let destination = arguments.positionals.first else {
            throw CLIError.usage("missing DEST, the directory to copy the ledger into", usage: arguments.usage)
        }
        guard !destination.isEmpty else { throw CLIError.usage("DEST must not be empty", usage: arguments.usage) }
        let log = try context.openLog(arguments, create: false)
        // Compared as absolute paths with symbolic links resolved: `./p.db` was called "not
        // empty", and `p.db/sub` made a copy inside the ledger's own directory (an audit).
        let source = canonicalPath(log.path), target = canonicalPath(destination)
        if target == source {
            throw CLIError.usage("DEST is the ledger itself; a backup goes into another directory", usage: arguments.usage)
        }
        if target.hasPrefix(source + "/") {
            throw CLIError.usage("DEST is inside the ledger's directory; a backup goes into another directory", usage: arguments.usage)
        }
        // SIGINT or SIGTERM stops the copy and removes what it wrote (exit 130); what a signal
        // that killed the process left would be a partial copy in DEST.
        catchInterrupts()
        let stop = { interrupted.load(ordering: .relaxed) }
        let bytes: Int64
        do {
            bytes = try log.backup(to: destination, isInterrupted: stop)
        } catch is EventLog.Interrupted {
            throw CLIError.interrupted("the backup was stopped; nothing of it was left at '\(destination)'")
        }
        let copy = try EventLog(path: destination, create: false)
        let progress = ProgressLine(sink: context.stderr) { "checking the copy: \($0) events…" }
        defer { progress?.finish() }
        let report: EventLog.VerifyReport
        do {
            report = try copy.walkChain(progress: progress?.show, isInterrupted: stop)
        } catch is EventLog.Interrupted {
            throw CLIError.interrupted("the copy at '\(destination)' is whole, but its check was stopped; 'ledger verify --db \(destination)' checks it")
        } catch let error as LedgerError {
            throw CLIError.runtime("the copy at '\(destination)' was written but does not check (\(error.description)); the ledger it was copied from is likely damaged the same way: run 'ledger verify' on it")
        }
        progress?.finish()
        context.stdout.write("backed up to \(visibleCharacters(destination)): \(report.verified) events, head seq \(report.head.seq), hash \(report.head.hash.hex), \(bytes) bytes; the copy's hash chain checks from seq 1\n")
        return 0
    }

    static let statsCommand = Command(
        name: "stats",
        abstract: "Print counts, head, sizes, settings and the projections' position.",
        usage: "ledger stats [--db PATH] [--format FORMAT]",
        options: [helpOption, dbOption, formatOption]
    ) { arguments, context in
        let format = try OutputFormat.resolve(arguments.value("format"), sink: context.stdout, usage: arguments.usage)
        let log = try context.openLog(arguments, create: false)
        let stats = try log.statistics()
        var fields: [(String, JSONValue)] = [
            ("path", .string(log.path)),
            ("head", .int(Int64(stats.head.seq))),
            ("head_hash", .string(stats.head.hash.hex)),
            ("head_recorded", stats.head.recorded.map { .string($0.rfc3339) } ?? .null),
            ("zone", .string(stats.zone)),
            // The IANA release of the zone rules days are counted in: the database inside
            // this binary (ICU's, in Foundation), not the machine's, so that an auditor can
            // keep it beside the hash and the zone.
            ("zone_data_version", .string(TimeZone.timeZoneDataVersion)),
            ("created", stats.created.map { .string($0) } ?? .null),
        ]
        for kind in EventKind.allCases {
            fields.append(("events_\(kind.rawValue)", .int(Int64(stats.countsByKind[kind] ?? 0))))
        }
        fields += [
            ("map_size_bytes", .int(Int64(stats.mapSize))),
            ("used_bytes", .int(Int64(stats.usedBytes))),
            ("free_bytes", .int(Int64(stats.freeBytes))),
            ("file_bytes", .int(Int64(stats.fileBytes))),
        ]
        for (name, db) in stats.databases.sorted(by: { $0.key < $1.key }) {
            fields.append(("db_\(name)_entries", .int(Int64(db.entries))))
        }
        // One position for all four projections: they are folded together, in the append's
        // own transaction, so after any command that reads them it equals the head.
        // A damaged position or version is reported, not a failure: `rebuild` writes both again.
        // The damaged one reads as nil, so the projections are then not current.
        fields += [
            ("projections_position", stats.projectionPosition.map { .int(Int64($0)) } ?? .null),
            ("projections_fold_version", stats.projectionVersion.map { .int(Int64($0)) } ?? .null),
            // An empty ledger has folded nothing, with no version yet: that is current, not
            // the damage `false` reports (an audit read a new ledger's `false` as that).
            ("projections_current", .bool(stats.projectionPosition == stats.head.seq
                                          && (stats.projectionVersion == UInt64(ActivityFold.version)
                                              || (stats.head.seq == 0 && stats.projectionVersion == nil && stats.projectionDamage == nil)))),
            ("projections_damaged", stats.projectionDamage.map { .string($0 + "; 'ledger rebuild' writes it again") } ?? .null),
        ]
        if format == .table {
            let width = fields.map(\.0.count).max() ?? 0
            var text = ""
            for (name, value) in fields {
                let shown = value.stringValue ?? (value == .null ? "-" : value.canonicalString)
                text += name.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + shown + "\n"
            }
            context.stdout.write(text)
        } else {
            var rows = RowSet(columns: fields.map(\.0))
            rows.append(fields.map(\.1))
            rows.write(format, to: context.stdout)
        }
        return 0
    }
}

/// `path` made absolute, `.` and `..` removed and symbolic links resolved as far as the path
/// exists (what does not exist yet, a backup's DEST, is kept as written after that).
func canonicalPath(_ path: String) -> String {
    func resolved(_ path: String) -> String? {
        guard let real = realpath(path, nil) else { return nil }
        defer { free(real) }
        return String(cString: real)
    }
    let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    var existing = (absolute as NSString).standardizingPath, rest: [String] = []
    while true {
        if let real = resolved(existing) {
            return rest.isEmpty ? real : (real == "/" ? "" : real) + "/" + rest.joined(separator: "/")
        }
        if existing == "/" || existing.isEmpty { return absolute }
        rest.insert((existing as NSString).lastPathComponent, at: 0)
        existing = parentPath(existing)
    }
}
