import Foundation
import LedgerCore
import Projections
import LedgerImport
import LedgerStore

extension Commands {
    static let importCommand = Command(
        name: "import",
        abstract: "Import an Apple Health export (export.xml or export.zip) into the log.",
        usage: "ledger import apple-health FILE [--db PATH] [--user U] [--zone ZONE] [--batch N]",
        discussion: """
        Streams the file (memory stays flat however large it is) and appends steps, walking and \
        running distance, flights climbed and active energy as samples, in batches. Exports carry \
        no sample ids, so ids are derived from each sample's content: importing the same file \
        again, or a newer export that overlaps it, adds only what is new. Records inside a \
        Correlation are counted once; other record types are skipped and counted. A broken or \
        truncated file stops with an error naming the line: the batches before it are committed \
        whole, and re-running after fixing the file completes the import.
        """,
        arguments: [("apple-health", "The format (the only one so far)."),
                    ("FILE", "export.xml, or the export.zip the Health app writes; - reads either from standard input (a zip is saved to $TMPDIR first).")],
        options: [helpOption, dbOption,
                  OptionSpec(name: "user", value: "U", help: "The user the samples belong to (default: default)."),
                  OptionSpec(name: "zone", value: "ZONE", help: "Zone for records without HKTimeZone metadata (default: none, so the user's or ledger's zone). Records imported before keep the zone they came in with."),
                  OptionSpec(name: "batch", value: "N", help: "Records per committed batch (default: 10000).")],
        maxPositionals: 2
    ) { arguments, context in
        let usage = arguments.usage
        guard let format = arguments.positionals.first else {
            throw CLIError.usage("missing format: 'ledger import apple-health FILE'", usage: usage)
        }
        guard format == "apple-health" else {
            throw CLIError.usage("unknown import format '\(format)' (expected apple-health)", usage: usage)
        }
        guard arguments.positionals.count == 2 else { throw CLIError.usage("missing FILE", usage: usage) }
        // `-` is standard input, as for `append` (a zip that comes that way is saved to a temporary file first).
        let path = arguments.positionals[1] == "-" ? "/dev/stdin" : arguments.positionals[1]
        let user = try arguments.name("user") ?? "default"
        var zone: String?
        if let text = arguments.value("zone") {
            guard Zone(text) != nil else {
                throw CLIError.usage("unknown time zone '\(text)' (expected an IANA name like Europe/Paris, or ±HH:MM)", usage: usage)
            }
            zone = text
        }
        let batchSize = try arguments.value("batch").map { try parseSize($0, option: "batch", usage: usage, minimum: 1) } ?? 10_000
        // A usage error (an empty --db) is said before the file is opened or read.
        _ = try context.databasePath(arguments)

        let reader: HealthExportReader
        do {
            // An archive is read through once before importing (its checksum): seconds for a
            // large export, so a terminal is told.
            // One from a pipe is saved to a temporary file before that.
            let saving = ProgressLine(sink: context.stderr) { "saving the archive from the pipe: \($0 >> 20) MB…" }
            let checking = ProgressLine(sink: context.stderr) { "checking export.xml in the archive: \($0 >> 20) MB…" }
            defer { saving?.finish(); checking?.finish() }
            reader = try HealthExportReader(path: path, checking: checking.map { line in { read, total in
                if total == 0 { saving?.show(UInt64(read)) } else { saving?.finish(); line.show(UInt64(read)) }
            } })
        } catch let error as ImportError {
            switch error {
            case .unusableArchive, .wrongEncoding: throw CLIError.data(error.description)
            default: break
            }
            throw CLIError.runtime(error.description)
        }
        // SIGINT or SIGTERM stops the import between batches, saying what is in the ledger (it
        // used to end the process at once, whole batches kept, with nothing said).
        catchInterrupts()
        // A ledger this import created and nobody committed to is removed if it fails, as
        // `append` removes one: a refused file leaves nothing behind.
        return try context.withCreatedLog(arguments) { log in
            // An export's records take about twice their XML in the ledger. (`reserve` caps what
            // it takes; a zip's stated size is the archive's word, so multiply without trapping.)
            let (estimate, overflow) = Int(clamping: reader.progress.total).multipliedReportingOverflow(by: 3)
            try log.environment.reserve(overflow ? Int.max : estimate)
            let converter = AppleHealthConverter(user: user, zone: zone, idScheme: try log.importIDScheme())
            var summary = ImportSummary()
            let progress = ProgressBar(sink: context.stderr)
            // The XML is read and turned into events on a second thread while this one appends the
            // batches it hands over; the reader is that thread's alone until the pipeline ends.
            let owned = Owned(reader)
            var mappedBaseline = Environment.residentSharedBytes ?? 0
            do {
                // A batch goes over in pieces of at most 1,000 events, each taken into the
                // batch's transaction as it comes: the writer works on one while the reader makes
                // the next. Handed over whole, the writer waited for the first 10,000 records and
                // finished a batch behind the reader (5 % of an import). At most
                // `ImportChunk.piecesWaiting` pieces wait between the threads.
                let piece = min(batchSize, ImportChunk.pieceSize)
                try Pipeline.run(depth: ImportChunk.piecesWaiting, produce: { (emit: (consuming ImportChunk) throws -> Void, waiting: () -> Int) in
                    let reader = owned.value
                    // The writer checks for a signal between the pieces it is handed, and this
                    // thread between records and between waits on a pipe: an export of only
                    // skipped types, or a stalled pipe, hands over nothing for a long time (an
                    // audit: such an import ignored SIGTERM to its end, or for ever).
                    let stop = { interrupted.load(ordering: .relaxed) }
                    reader.isInterrupted = stop
                    func nextRecord() throws -> HealthRecord? {
                        do {
                            if stop() { throw ImportInterrupted() }
                            return try reader.next()
                        } catch where stop() {
                            throw ImportInterrupted()
                        }
                    }
                    var chunk = ImportChunk(reserving: piece)
                    var inBatch = 0  // events of the open batch in the pieces sent before
                    // Each event's content digest (`ContentDigest`, a SHA-256 of its few hundred
                    // bytes) is work either thread may do. This one does a piece's while the
                    // writer has pieces in hand, and leaves them to the writer when it would
                    // otherwise wait: whichever thread is ahead takes them, as the two threads'
                    // speeds shift with the machine and the export.
                    func send(_ piece: consuming ImportChunk) throws {
                        if PreparedEvent.producerDigests(waiting: waiting()) { piece.computeContentDigests() }
                        try emit(consume piece)
                    }
                    while let record = try nextRecord() {
                        chunk.read += 1
                        if let (prepared, type) = try converter.preparedSample(for: record, digesting: false) {
                            // By code: the summary names a type as HealthKit spells it (as it
                            // did a look-alike spelling before, its counts merged by Swift's
                            // string equality).
                            chunk.kept[Int(type.code)] += 1
                            chunk.lines.append(record.line)
                            chunk.events.append(prepared)
                            if chunk.events.count >= piece || inBatch + chunk.events.count >= batchSize {
                                inBatch += chunk.events.count
                                chunk.endsBatch = inBatch >= batchSize
                                if chunk.endsBatch { inBatch = 0 }
                                chunk.progress = reader.progress
                                try send(consume chunk)
                                chunk = ImportChunk(reserving: piece)
                            }
                        } else {
                            chunk.skipped.add(record.type)
                        }
                    }
                    chunk.endsBatch = true
                    chunk.progress = reader.progress
                    try send(consume chunk)
                }, drain: { next in
                    var pending = try next()
                    while pending != nil {
                        if interrupted.load(ordering: .relaxed) { throw ImportInterrupted() }
                        // What the batch's pieces read, counted once it is committed.
                        var read = ImportChunk(reserving: 0)
                        func count(_ chunk: borrowing ImportChunk) {
                            read.read += chunk.read
                            for code in chunk.kept.indices { read.kept[code] += chunk.kept[code] }
                            read.skipped.add(chunk.skipped)
                            read.progress = chunk.progress
                        }
                        // Read in place: a copy of the piece would share its list, and taking
                        // the events out would then copy all of them.
                        if pending!.events.isEmpty, pending!.endsBatch {
                            count(pending!)  // only records of other types, or the end: nothing to append
                        } else {
                            // The batch's pieces, kept until it commits: the transaction runs
                            // again when the map fills (`Environment.write` grows it and starts
                            // over), and the run again appends what the first took from the
                            // reader (a review: an import piped in, with no size to reserve
                            // for, lost the pieces of the batch that filled the map, said
                            // nothing and exited 0).
                            var batch: [ImportChunk] = []
                            let result = try log.append(duplicates: .ignoringZone) { add in
                                read = ImportChunk(reserving: 0)
                                var taken = 0
                                while true {
                                    if taken == batch.count {
                                        guard let chunk = pending.take() else { break }
                                        batch.append(chunk)
                                    }
                                    // Each event is moved out of the list, lent to `add` and
                                    // moved back, not copied (a copy retains every buffer and
                                    // string it holds: `perf` put 4 % of the import there, and
                                    // callgrind found one in an element lent in place).
                                    let chunk = taken
                                    for index in batch[chunk].events.indices {
                                        let event = batch[chunk].events[index].take()!
                                        defer { batch[chunk].events[index] = event }
                                        try add(.line(batch[chunk].lines[index]), event)
                                    }
                                    count(batch[chunk])
                                    taken += 1
                                    if batch[chunk].endsBatch { break }
                                    // The reader's error, if it stopped inside this batch, is
                                    // thrown here: the batch is not committed.
                                    if taken == batch.count { pending = try next() }
                                }
                            }
                            summary.appended += result.appended
                            summary.duplicates += result.duplicates
                            summary.superseded += result.superseded
                            summary.keptZone += result.keptZone
                            // The map's pages this import has read stay resident: they are let go
                            // once they add up to `mappedSlack`, not after every batch, since each
                            // release unmaps them on both cores and the next batch faults them in
                            // again (6 % of an import's time, released after every batch).
                            if let resident = Environment.residentSharedBytes, resident - mappedBaseline > ImportChunk.mappedSlack {
                                log.environment.releaseMappedPages()
                                mappedBaseline = Environment.residentSharedBytes ?? resident
                            }
                        }
                        summary.read += read.read
                        for type in QuantityType.allCases where read.kept[Int(type.code)] > 0 {
                            summary.kept.add(AppleHealthConverter.healthKitName(of: type), count: read.kept[Int(type.code)])
                        }
                        summary.skipped.add(read.skipped)
                        summary.committedRecords = summary.read
                        progress.update(records: summary.read, bytes: read.progress)
                        pending = try next()
                    }
                })
            } catch {
                progress.finish()
                switch error {
                case let error as ImportError:
                    if case .readFailed = error {
                        // The machine's fault, not the file's: exit 1, as `append` says it.
                        throw CLIError.runtime("\(error.description); \(summary.committedNote(fixing: false))")
                    }
                    throw CLIError.data("\(error.description(in: path)); \(summary.committedNote())")
                case let error as InputError:
                    throw CLIError.data("\(path) \(error.description); \(summary.committedNote())")
                case is ImportInterrupted:
                    throw CLIError.interrupted(summary.committedRecords == 0 ? "nothing was imported"
                        : "the \(summary.committedRecords) records read before are in the ledger (\(summary.committedEvents)); run the same command again to finish (what is already imported counts as duplicates)")
                default:
                    throw error
                }
            }
            progress.finish()
            summary.unknownZones = converter.unknownZones.count
            let defaultZone = try log.defaultZone().name
            summary.zoneUsed = zone.map { "--zone \($0)" } ?? "the user's profile zone, else the ledger's (\(defaultZone))"
            context.stdout.write(summary.text(head: try log.head().seq))
            return 0
        }
    }
}

/// SIGINT or SIGTERM arrived: the import stops before its next batch.
private struct ImportInterrupted: Error {}

/// Counts for the closing summary of an import.
struct ImportSummary {
    var read = 0
    var appended = 0
    var duplicates = 0
    var superseded = 0
    /// Duplicates imported before with another zone (`--zone`, or none), which they keep.
    var keptZone = 0
    var skipped = TypeCounts(maximumNames: TypeCounts.summaryNames)
    /// Records of the kept types, by HealthKit type.
    var kept = TypeCounts()
    /// Records read up to the end of the last committed batch.
    var committedRecords = 0

    /// What the committed records added, said beside their count: records of skipped types
    /// and duplicates add no event (an audit read "the 5252 records … are in the ledger" of a
    /// ledger whose head was 3000).
    var committedEvents: String {
        let rest = committedRecords - appended
        return rest == 0 ? "\(appended) events appended" : "\(appended) events appended; \(rest) duplicates or records of types not imported"
    }

    /// What is in the ledger after a failed import, and what to do: fix the file and re-run,
    /// or, `fixing` false (the reading failed, not the file), re-run.
    func committedNote(fixing: Bool = true) -> String {
        let action = fixing ? "fix the file and re-run" : "re-run"
        if committedRecords == 0 { return "nothing was imported; \(action)" }
        return "the \(committedRecords) records read before the last committed batch are in the ledger (\(committedEvents)); \(action) to finish (what is already imported counts as duplicates)"
    }

    /// Records whose `HKTimeZone` is unknown here, and the zone their days were counted in.
    var unknownZones = 0
    var zoneUsed = ""

    func text(head: UInt64) -> String {
        let skipped = self.skipped.counts, kept = self.kept.counts
        let skippedTotal = skipped.values.reduce(0, +)
        var text = "read \(read) records: appended \(appended), duplicates \(duplicates), superseded \(superseded), skipped \(skippedTotal) of other types, head \(head)\n"
        if keptZone > 0 {
            text += "  \(keptZone) of the duplicates were imported before with another zone and keep it: this import's zone applies only to the records it appended\n"
        }
        if unknownZones > 0 {
            text += "  \(unknownZones) records name a time zone (HKTimeZone) this machine's zone database does not know: their days are counted in \(zoneUsed)\n"
        }
        for (type, count) in kept.sorted(by: { $0.key < $1.key }) {
            text += "  read \(type): \(count)\n"
        }
        for (type, count) in skipped.sorted(by: { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }) {
            text += "  skipped \(type): \(count)\n"
        }
        return text
    }
}

/// A progress bar on stderr when it is a terminal: bytes read of total, records per second,
/// time left. Silent otherwise.
final class ProgressBar {
    private let sink: OutputSink
    private let started = Date()
    private var lastDrawn = Date.distantPast
    private var drew = false

    init(sink: OutputSink) {
        self.sink = sink
    }

    /// `bytes`: how much of the file has been read, of how much.
    func update(records: Int, bytes: (read: Int64, total: Int64)) {
        guard sink.isTerminal else { return }
        let now = Date()
        guard now.timeIntervalSince(lastDrawn) >= 0.2 else { return }
        lastDrawn = now
        drew = true
        let (done, total) = bytes
        let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 0
        let elapsed = max(0.001, now.timeIntervalSince(started))
        let rate = Double(records) / elapsed
        let left = fraction > 0 ? elapsed * (1 - fraction) / fraction : 0
        let filled = Int(fraction * 30)
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: 30 - filled)
        sink.write(String(format: "\r%@ %3.0f%%  %.1f/%.1f MB  %.0f records/s  %d:%02d left ",
                          bar, fraction * 100, Double(done) / 1e6, Double(total) / 1e6, rate,
                          Int(left) / 60, Int(left) % 60))
    }

    func finish() {
        if drew { sink.write("\n") }
    }
}

/// What the reading thread of an import hands over: one batch of events, with the counts of
/// the records read for it and how far into the file it got.
struct ImportChunk: Sendable {
    /// How much of the map an import lets stay resident before it lets it go (its memory
    /// budget is 200 MB however large the export, and about 90 MB is its own).
    static let mappedSlack = 48 << 20
    /// The most events handed from the reader to the writer at a time: a batch (`--batch`)
    /// goes over in pieces of this many.
    static let pieceSize = 1_000
    /// The most pieces waiting between the threads: 40,000 events at the default, as many as
    /// four batches of 10,000 were when batches went over whole.
    static let piecesWaiting = 40

    /// Each is moved out (`take`) to be appended and back after, kept until the batch commits.
    var events: [PreparedEvent?] = []
    /// Each event's line in the export.
    var lines: [Int] = []
    var read = 0
    /// Records of each kept type, at its code: counted so rather than by name (a name's
    /// count compares it with the last, and types alternate in an export).
    var kept = Array(repeating: 0, count: QuantityType.codeLimit)
    var skipped = TypeCounts()
    var progress: (read: Int64, total: Int64) = (0, 0)
    /// Whether this piece is its batch's last (the batch is committed after it).
    var endsBatch = false

    /// Computes every event's content digest (`PreparedEvent.computeContentDigest`).
    mutating func computeContentDigests() {
        for index in events.indices { events[index]?.computeContentDigest() }
    }

    init(reserving capacity: Int = 0) {
        events.reserveCapacity(capacity)
        lines.reserveCapacity(capacity)
    }
}

/// Records counted by their HealthKit type name. The reader hands over a type's name as the
/// same string record after record, and Apple writes an export's records grouped by type, so
/// the last type counted is compared first; other names are looked up in a `NameIndex`
/// (a short list, hashed once there are many). What is kept is bounded: a file of other
/// types is hostile input as much as an export (80,000 distinct names took 45 s, and a
/// thousand names of 400 KB each 1.2 GB and as long a summary).
struct TypeCounts: Sendable {
    private var names = NameIndex()
    /// Each name's count, at its position in `names`.
    private var tallies: [Int] = []
    private var last = 0
    /// How many names are kept: the summary's; a chunk's are bounded by its records, and
    /// capped there a type named in the summary lost the records of later chunks to "more".
    private let maximumNames: Int

    init(maximumNames: Int = .max) {
        self.maximumNames = maximumNames
    }

    /// HealthKit's longest type names are under 70 bytes.
    static let maximumNameBytes = 200
    static let summaryNames = 1_000
    static let longNames = "(type names over 200 bytes)"
    static let otherNames = "(more types than the 1,000 named above)"
    static let noName = "(records without a type)"

    mutating func add(_ type: String, count: Int = 1) {
        if last < tallies.count, sameName(names.names[last], type) {
            tallies[last] += count
            return
        }
        var name = type.isEmpty ? TypeCounts.noName : type.utf8.count > TypeCounts.maximumNameBytes ? TypeCounts.longNames : type
        if name != TypeCounts.longNames, name != TypeCounts.noName, names.position(of: name) == nil, names.count >= maximumNames {
            name = TypeCounts.otherNames
        }
        let (position, added) = names.insert(name)
        if added { tallies.append(0) }
        tallies[position] += count
        last = position
    }

    /// Adds another set of counts to these.
    mutating func add(_ other: TypeCounts) {
        for (name, tally) in zip(other.names.names, other.tallies) { add(name, count: tally) }
    }

    var counts: [String: Int] {
        Dictionary(zip(names.names, tallies), uniquingKeysWith: +)
    }
}

/// Hands a non-Sendable value to exactly one other thread, which then owns it alone.
final class Owned<Value>: @unchecked Sendable {
    // @unchecked: the creator gives the value up; only the receiving thread touches it.
    let value: Value
    init(_ value: Value) { self.value = value }
}
