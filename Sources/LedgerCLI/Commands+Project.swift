import Foundation
import LedgerCore
import LedgerStore
import Projections

/// Options shared by `project` and `replay`.
let rowFilterOptions: [OptionSpec] = [
    OptionSpec(name: "user", value: "U", help: "Only rows of user U."),
    OptionSpec(name: "type", value: "T", help: "Only type T: steps, distance, flights, active-energy (or a HealthKit identifier)."),
    OptionSpec(name: "from", value: "DATE", help: "Only days on or after DATE (YYYY-MM-DD)."),
    OptionSpec(name: "to", value: "DATE", help: "Only days on or before DATE (YYYY-MM-DD)."),
    OptionSpec(name: "date", value: "DATE|today", help: "Only one day; 'today' is in the user's profile zone (with --user), else the ledger's zone."),
    OptionSpec(name: "fallback", value: nil, help: "With --date on daily: when the day has no row, print the last-known row marked \"stale\": true."),
]

let rowFormatOption = OptionSpec(name: "format", value: "FORMAT",
                                 help: "table, json, ndjson, csv or chart (default: table on a terminal, else ndjson).")

/// A parsed `project`/`replay` request.
struct RowRequest {
    var projection: ProjectionName
    var filter: RowFilter
    var fallback: Bool
    var format: RowFormat
    /// `--date today`: resolved against the clock once the ledger is open.
    var today: Bool
}

/// `--format` for projection rows: the four of SPEC §5 plus `chart`.
enum RowFormat {
    case rows(OutputFormat)
    case chart
}

extension Commands {
    static let projectCommand = Command(
        name: "project",
        abstract: "Print a projection's rows: daily, daily-steps, per-source, last-known, grants.",
        usage: "ledger project NAME [--db PATH] [--user U] [--type T] [--from DATE] [--to DATE] [--date DATE|today] [--fallback] [--format FORMAT]",
        discussion: """
        daily: per user, type and day, sources merged the way the Health app merges them. \
        per-source: each source's own sum per day. last-known: per user and type, the latest day \
        with a non-zero total. grants: per user and client, the types it may read and share. \
        Rows are sorted by user, type, date and source; --format chart draws the values as bars.
        """,
        arguments: [("NAME", "daily, daily-steps (= daily --type steps), per-source, last-known or grants.")],
        options: [helpOption, dbOption, rowFormatOption] + rowFilterOptions,
        maxPositionals: 1
    ) { arguments, context in
        var request = try rowRequest(arguments, context: context, name: arguments.positionals.first)
        let log = try context.openLog(arguments, create: false)
        try resolveToday(&request, log: log, now: context.now())
        let rows = try Row.rows(request.projection, filter: request.filter, fallback: request.fallback) {
            try log.rows($0, filter: $1)
        }
        write(rows, request: request, to: context.stdout)
        return 0
    }

    static let replayCommand = Command(
        name: "replay",
        abstract: "Print a projection as it stood at a past moment, for audits.",
        usage: "ledger replay --to WHEN|--to-seq N [--db PATH] [--projection NAME] [--user U] [--type T] [--from DATE] [--to-date DATE] [--date DATE|today] [--fallback] [--format FORMAT]",
        discussion: """
        Folds the events recorded at or before WHEN (an RFC 3339 timestamp, or YYYY-MM-DD for the \
        end of that day in the ledger's zone), or with seq ≤ N, in memory and prints the \
        projection exactly as 'ledger project' printed it then. Prints 'as of seq N, recorded T, \
        hash H' on stderr. Live projections are not touched, nothing is written and subscribers \
        are not notified. With --user, only that user's events are folded (their rows depend on \
        nothing else), which is much faster on a ledger of many users.
        """,
        options: [helpOption, dbOption, rowFormatOption,
                  OptionSpec(name: "to", value: "WHEN", help: "Replay events recorded at or before WHEN."),
                  OptionSpec(name: "to-seq", value: "N", help: "Replay events with seq ≤ N."),
                  OptionSpec(name: "projection", value: "NAME", help: "daily (default), daily-steps, per-source, last-known or grants."),
                  OptionSpec(name: "to-date", value: "DATE", help: "Only days on or before DATE (project's --to).")]
            + rowFilterOptions.filter { $0.name != "to" }
    ) { arguments, context in
        let usage = arguments.usage
        var toSeq: UInt64?
        switch (arguments.value("to"), arguments.value("to-seq")) {
        case (nil, nil):
            throw CLIError.usage("replay needs --to WHEN or --to-seq N", usage: usage)
        case (.some, .some):
            throw CLIError.usage("give either --to or --to-seq, not both", usage: usage)
        case (nil, let seq?):
            toSeq = try parseCount(seq, option: "to-seq", usage: usage)
        case (let when?, nil):
            // Refuse a malformed WHEN before touching the ledger; its day is resolved below.
            if let problem = EventLog.replayPointProblem(when) {
                throw CLIError.usage("'--to' \(problem), got '\(when)'", usage: usage)
            }
        }
        // `--to` is the replay point here; the day filter's upper bound is `--to-date`.
        var request = try rowRequest(arguments, context: context, name: arguments.value("projection") ?? "daily",
                                     toOption: "to-date")
        let log = try context.openLog(arguments, create: false)
        let target: ReplayTarget
        if let toSeq {
            target = .seq(toSeq)
        } else {
            guard let instant = try log.replayInstant(arguments.value("to")!) else {
                preconditionFailure("WHEN was checked above")
            }
            target = .recorded(instant)
        }
        // Rows of one user depend only on that user's events: fold just those.
        let (point, rows) = try log.withReplay(to: target, users: request.filter.user.map { [$0] }) { point, query in
            // `today` in the user's profile zone as of the replay point: a replay reads no
            // live state (which may be stale, and unwritable on read-only media).
            var request = request
            try resolveToday(&request, log: log, now: context.now(), in: query)
            return (point, try Row.rows(request.projection, filter: request.filter, fallback: request.fallback) {
                try query.rows($0, filter: $1)
            })
        }
        write(rows, request: request, to: context.stdout)
        let recorded = point.recorded?.rfc3339 ?? "-"
        context.stderr.write("as of seq \(point.seq), recorded \(recorded), hash \(point.hash.hex)\n")
        return 0
    }

    static let rebuildCommand = Command(
        name: "rebuild",
        abstract: "Rebuild projections from the log from scratch.",
        usage: "ledger rebuild [NAME] [--indexes] [--accept-head] [--db PATH]",
        discussion: """
        All four projections are one fold over the log, so rebuilding any of them rebuilds all. \
        With --indexes, the log's own indexes (ids, samples, sync) are rebuilt from the log \
        first. Runs in one write transaction: readers keep seeing the old rows until it \
        commits. On a terminal, stderr counts the events folded every 65,536. Projections folded \
        past the log's last event mean events were removed from its end, and every command \
        refuses such a ledger; --accept-head folds the log as it is, saying which seqs are gone. \
        SIGINT or SIGTERM stops it before its commit, with nothing changed (exit 130).
        """,
        arguments: [("NAME", "daily, daily-steps, per-source, last-known or grants (default: all).")],
        options: [helpOption, dbOption,
                  OptionSpec(name: "indexes", value: nil, help: "Also rebuild the log's indexes (what 'verify' names when they disagree with the log)."),
                  OptionSpec(name: "accept-head", value: nil, help: "Fold the log as it is, and make its indexes and counts again, even when its projections were folded past its last event (events removed from its end; restoring a backup is the other way).")],
        maxPositionals: 1
    ) { arguments, context in
        if let name = arguments.positionals.first, ProjectionName.parse(name) == nil {
            throw CLIError.usage("unknown projection '\(name)'\(suggestion(for: name, among: projectionNames))", usage: arguments.usage)
        }
        // SIGINT or SIGTERM stops the fold and gives up its one transaction (it used to end
        // the process with nothing said); a signal during the commit lets it finish. Caught
        // from the start, so that one sent early is not the default action either.
        catchInterrupts()
        let log = try context.openLog(arguments, create: false)
        let started = Date()
        let head = try log.head().seq
        let progress = ProgressLine(sink: context.stderr) { "rebuilding: folded \($0) of \(head) events…" }
        defer { progress?.finish() }
        let indexes = arguments.flags.contains("indexes")
        let accepting = arguments.flags.contains("accept-head")
        let position = accepting ? try log.statistics().projectionPosition : nil
        let folded: UInt64
        do {
            folded = try log.rebuildProjections(indexes: indexes, acceptingHead: accepting, progress: progress?.show,
                                                isInterrupted: { interrupted.load(ordering: .relaxed) })
        } catch is EventLog.Interrupted {
            progress?.finish()
            throw CLIError.interrupted("the rebuild was stopped before its commit; nothing was changed: the projections\(indexes || accepting ? " and the log's indexes" : "") are as they were")
        }
        progress?.finish()
        if let position, position > head {
            context.stderr.write("note: the projections had been folded up to seq \(position); the log ends at seq \(head), so seq\(position > head + 1 ? "s \(head + 1)–\(position) are" : " \(position) is") not in it, and the rows no longer count \(position > head + 1 ? "them" : "it")\n")
        }
        let seconds = Date().timeIntervalSince(started)
        context.stdout.write("rebuilt \(indexes ? "ids, samples, sync, " : "")daily, per-source, last-known, grants from \(folded) events in \(String(format: "%.2f", seconds)) s\n")
        return 0
    }

    static let projectionNames = ["daily", "daily-steps", "per-source", "last-known", "grants"]

    /// The request `arguments` make; `toOption` names the option holding the last day.
    static func rowRequest(_ arguments: ParsedArguments, context: CommandContext, name: String?,
                           toOption: String = "to") throws -> RowRequest {
        let usage = arguments.usage
        guard let name else { throw CLIError.usage("missing projection NAME (\(projectionNames.joined(separator: ", ")))", usage: usage) }
        guard let (projection, impliedType) = ProjectionName.parse(name) else {
            throw CLIError.usage("unknown projection '\(name)'\(suggestion(for: name, among: projectionNames))", usage: usage)
        }
        var filter = RowFilter(user: try arguments.name("user"), type: impliedType)
        if let type = try parseTypeOption(arguments) {
            if let conflict = ProjectionName.typeConflict(implied: impliedType, given: type, spelled: arguments.value("type")!, option: "--type") {
                throw CLIError.usage(conflict, usage: usage)
            }
            filter.type = type
        }
        func date(_ option: String) throws -> CivilDate? {
            guard let text = arguments.value(option) else { return nil }
            guard let date = CivilDate(parsing: text) else {
                throw CLIError.usage("'--\(option)' needs a date that exists, as YYYY-MM-DD, got '\(text)'", usage: usage)
            }
            return date
        }
        var today = false
        if let text = arguments.value("date") {
            guard arguments.value("from") == nil, arguments.value(toOption) == nil else {
                throw CLIError.usage("--date cannot be combined with --from or --\(toOption)", usage: usage)
            }
            if text == "today" {
                today = true
            } else {
                filter.from = try date("date")
                filter.to = filter.from
            }
        } else {
            filter.from = try date("from")
            filter.to = try date(toOption)
            // Days that cannot hold a row: said, as `log --since/--until` says it, not an
            // empty answer (an audit).
            if let from = filter.from, let to = filter.to, to < from {
                throw CLIError.usage("'--\(toOption)' \(to) precedes '--from' \(from)", usage: usage)
            }
        }
        // A grant has no day: a date given with grants would be ignored, and the rows not the
        // ones asked for.
        if projection == .grants, let option = ["date", "from", toOption].first(where: { arguments.value($0) != nil }) {
            throw CLIError.usage("grants rows have no date; --\(option) does not apply to them", usage: usage)
        }
        let fallback = arguments.has("fallback")
        if fallback {
            guard projection == .daily, arguments.value("date") != nil else {
                throw CLIError.usage("--fallback works with daily (or daily-steps) and --date", usage: usage)
            }
        }
        let format: RowFormat
        if arguments.value("format") == "chart" {
            format = .chart
        } else {
            do {
                format = .rows(try OutputFormat.resolve(arguments.value("format"), sink: context.stdout, usage: usage))
            } catch CLIError.usage(let message, let usage) {
                throw CLIError.usage(message.replacingOccurrences(of: "ndjson or csv)", with: "ndjson, csv or chart)"), usage: usage)
            }
        }
        return RowRequest(projection: projection, filter: filter, fallback: fallback, format: format, today: today)
    }

    /// Resolves `--date today` in the user's profile zone (with `--user`; as `query` has it,
    /// when given), else the ledger's.
    static func resolveToday(_ request: inout RowRequest, log: EventLog, now: Timestamp,
                             in query: ProjectionQuery? = nil) throws {
        guard request.today else { return }
        let day = try log.today(for: request.filter.user, now: now, in: query)
        request.filter.from = day
        request.filter.to = day
    }

    static func write(_ rows: [Row], request: RowRequest, to sink: OutputSink) {
        var columns = request.projection.columns
        if request.fallback {
            // Stale rows are last-known rows: show their extra columns too.
            columns = Row.fallbackColumns
        } else if request.projection == .lastKnown {
            columns.removeAll { $0 == "stale" }
        }
        switch request.format {
        case .chart:
            sink.write(Chart.render(rows, projection: request.projection))
        case .rows(let format):
            var set = RowSet(columns: columns)
            for row in rows { set.append(columns.map { row.values[$0] }) }
            set.roundedValues = true
            set.write(format, to: sink)
        }
    }
}
