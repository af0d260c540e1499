import Foundation
import LedgerCore
import Projections

/// A `StateStore` over one LMDB transaction: the fold's state tables, one database each.
/// Valid only while the transaction is.
struct LMDBStateStore: StateStore {
    let txn: Transaction
    /// By `StateTable.ordinal` (the log's `stateDatabases`, looked up once when it opened).
    let handles: [Database]
    /// The tables' write cursors, by ordinal, each opened at the table's first put: a fold's
    /// puts into a table go through one cursor, which starts each where the last left off
    /// (`Transaction.writeCursor`).
    private let cursors = Cursors()

    private final class Cursors {
        var byTable = [WriteCursor?](repeating: nil, count: StateTable.allCases.count)
    }

    init(txn: Transaction, handles: [Database]) {
        self.txn = txn
        self.handles = handles
    }

    private func cursor(_ table: StateTable) throws -> WriteCursor {
        if let cursor = cursors.byTable[table.ordinal] { return cursor }
        let cursor = try txn.writeCursor(database(table))
        cursors.byTable[table.ordinal] = cursor
        return cursor
    }

    private func database(_ table: StateTable) -> Database { handles[table.ordinal] }

    func get(_ table: StateTable, _ key: [UInt8]) throws -> [UInt8]? {
        try txn.get(database(table), key)
    }

    func put(_ table: StateTable, _ key: [UInt8], _ value: [UInt8]) throws {
        try value.withUnsafeBytes { value in try put(table, key, count: value.count) { $0.copyMemory(from: value) } }
    }

    func put(_ table: StateTable, _ key: [UInt8], count: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Void) throws {
        try put(table, key: key, count: count, fill)
    }

    func put(_ table: StateTable, position seq: UInt64, count: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Void) throws {
        try put(table, key: SeqKey(seq), count: count, fill)
    }

    private func put(_ table: StateTable, key: some KeyBytes, count: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Void) throws {
        if table == .samples {
            // Keyed by seq: a new sample's key is the largest, and LMDB's append mode then
            // skips the search and fills pages densely. An amendment rewrites an older key.
            do {
                return try cursor(table).putReserved(key, count: count, append: true, fill)
            } catch LMDBError.keyExists {}
        }
        try cursor(table).putReserved(key, count: count, fill)
    }

    func delete(_ table: StateTable, _ key: [UInt8]) throws {
        try txn.delete(database(table), key)
    }

    func scan(_ table: StateTable, prefix: [UInt8], reverse: Bool,
              _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        if reverse {
            try txn.scanReverse(database(table), prefix: prefix) { key, value in try body(Array(key), Array(value)) }
        } else {
            try scanInPlace(table, prefix: prefix) { key, value in try body(Array(key), Array(value)) }
        }
    }

    func scanInPlace(_ table: StateTable, prefix: [UInt8],
                     _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) throws {
        let db = database(table)
        try txn.scan(db, from: prefix.isEmpty ? nil : prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            return try body(key, value)
        }
    }
}

/// Names of the projection databases in the environment: `p.daily`, `p.buckets`, ….
func stateDatabaseName(_ table: StateTable) -> String { "p." + table.rawValue }

/// Where a replay stood: the last event folded.
public struct ReplayPoint: Sendable, Equatable {
    public var seq: UInt64
    public var recorded: Timestamp?
    public var hash: [UInt8]
}

/// A record of the log as a fold takes it: its event (with a correction's target), nil when
/// the fold skips it (a replay of other users), and where it stands.
struct FoldedRecord: Sendable {
    var event: LoggedEvent?
    var seq: UInt64
    var recorded: Timestamp
    var endsBatch: Bool
    /// The record's link of the hash chain, when the reading thread left it to the folding one.
    var link: ChainLink? = nil

    /// What a record moved out of a list leaves in its place.
    static let moved = FoldedRecord(event: nil, seq: 0, recorded: Timestamp(microseconds: 0), endsBatch: false)
}

/// What `foldRecords` does with a record: hand over its event (nil: only its place), with the
/// link of the hash chain the folding thread is to check, or stop before it.
enum RecordStep {
    case fold(LoggedEvent?, link: ChainLink? = nil)
    case stop
}

/// What to replay up to (SPEC §6).
public enum ReplayTarget: Sendable, Equatable {
    /// Events with `seq ≤ N`.
    case seq(UInt64)
    /// Events with `recorded ≤ T`.
    case recorded(Timestamp)
}

extension EventLog {
    /// The moment `replay --to WHEN` means (SPEC §6): an RFC 3339 timestamp, or a date
    /// `YYYY-MM-DD` for the end of that day in the ledger's default zone. Nil when neither.
    public func replayInstant(_ when: String) throws -> Timestamp? {
        try instant(when, startOfDay: false)
    }

    /// An RFC 3339 timestamp as given, or for a date `YYYY-MM-DD` the first (`startOfDay`) or
    /// last microsecond of that day in the ledger's default zone (`log --since` and `--until`,
    /// `replay --to`). Nil when `when` is neither.
    public func instant(_ when: String, startOfDay: Bool) throws -> Timestamp? {
        if let (instant, _) = try? Timestamp.parseRFC3339(when) {
            // Times are kept to the microsecond, and a finer fraction is cut off: right for an
            // upper bound (`--until`, `--to`), but a lower one (`--since`) must round up, or
            // `--since …08.6123519Z` kept the event recorded at …08.612351Z (a review).
            return startOfDay && EventLog.hasFinerFraction(when) ? Timestamp(microseconds: instant.microseconds + 1) : instant
        }
        guard let date = CivilDate(parsing: when) else { return nil }
        let window = calendar.window(of: date.daysSinceEpoch, in: try defaultZone())
        return Timestamp(microseconds: startOfDay ? window.start : window.end - 1)
    }

    /// Whether an RFC 3339 timestamp's fraction has a digit other than 0 past the sixth.
    static func hasFinerFraction(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard let dot = bytes.firstIndex(of: UInt8(ascii: ".")) else { return false }
        let digits = bytes[(dot + 1)...].prefix { $0 >= 48 && $0 <= 57 }
        return digits.dropFirst(6).contains { $0 != 48 }
    }

    /// What is wrong with `when` as a replay point, worded to follow the option's name (`'--to'
    /// …`); nil when it is one. A date of the right shape that does not exist says so (an
    /// audit: `--to 2026-02-30` was told to give a date YYYY-MM-DD).
    public static func replayPointProblem(_ when: String) -> String? {
        do {
            _ = try Timestamp.parseRFC3339(when)
            return nil
        } catch .impossible {
            return "is a date or time that does not exist"
        } catch {}
        if CivilDate(parsing: when) != nil { return nil }
        let dateShaped = when.utf8.count == 10 && when.utf8.enumerated().allSatisfy { index, byte in
            index == 4 || index == 7 ? byte == UInt8(ascii: "-") : (48...57).contains(byte)
        }
        return dateShaped ? "is a date that does not exist" : "needs an RFC 3339 timestamp with an offset or a date YYYY-MM-DD"
    }

    /// Hands every event of the log to `body` inside `txn`, decoded for folding, with whether it
    /// ended its batch. Records are read in chunks, so `body` may write to the transaction: no
    /// cursor over `events` is open while it runs.
    func forEachLoggedEvent(in txn: Transaction, after first: UInt64 = 0,
                            _ body: (LoggedEvent, _ endsBatch: Bool) throws -> Void) throws {
        var chunk: [(event: LoggedEvent, endsBatch: Bool)] = []
        var last = first
        repeat {
            chunk.removeAll(keepingCapacity: true)
            try txn.scan(events, from: (last + 1).bigEndianBytes) { key, value in
                let raw = RawRecord(seq: try seq(key, in: "events"), value)
                chunk.append((try raw.loggedEvent(), raw.endsBatch))  // loggedEvent throws on a malformed record
                return chunk.count < 8192
            }
            for (event, endsBatch) in chunk {
                try body(event, endsBatch)
                last = event.seq
            }
        } while chunk.count == 8192
    }

    /// Hands the log's records, in order, to `fold` on this thread while a second thread reads
    /// them from one read snapshot and decodes them (`Pipeline`): decoding was a tenth of a
    /// rebuild. `makeStep` is called once, on the reading thread, and the step it makes decides
    /// for each record whether its event is decoded, skipped or ends the walk. Returns after
    /// the last record folded; errors of either side are rethrown (the reader's after what it
    /// handed over is folded).
    ///
    /// `in txn`: read from that (read-only) transaction instead, on this thread, with no
    /// second thread or transaction; `fold` runs with a cursor on `events` open in it, so it
    /// must not write to it. A caller that holds a read transaction open must pass it: a
    /// transaction begun while another of this process is open cannot adopt a map another
    /// process grew, and waited for it for ever (`verify`, found by a stress test).
    ///
    /// Without it, the reading thread begins its own read transaction. `rebuild` calls this
    /// while its thread holds the write transaction, which is safe only because no other
    /// process can commit (grow the map) while that is held, so the read cannot meet
    /// `MDB_MAP_RESIZED`; a reader holding a read transaction must never wait on this.
    func foldRecords(_ makeStep: @escaping @Sendable () -> (RawRecord, Transaction) throws -> RecordStep,
                     in txn: Transaction? = nil, _ fold: (FoldedRecord) throws -> Void) throws {
        if let txn {
            let step = makeStep()
            try txn.scan(events) { key, value in
                guard let record = try folded(key, value, step, in: txn) else { return false }
                try fold(record)
                return true
            }
            return
        }
        try Pipeline.run(depth: 4, produce: { (emit: (consuming [FoldedRecord]) throws -> Void) in
            let step = makeStep()
            var chunk: [FoldedRecord] = []
            chunk.reserveCapacity(4096)
            /// Moves the records read so far over, so that the folding thread, which takes
            /// them out, finds the list its own and never copies it. Swapped out into a local
            /// first: `consume chunk`, of a variable the scan's closure captures, left `chunk`
            /// holding the list the channel then freed when the folding thread had stopped
            /// (`Cancelled`), and the handing over of the rest below freed it again (a rebuild
            /// interrupted mid-scan crashed in the allocator, its SIGSEGV reported as damage).
            func handOver() throws {
                var full: [FoldedRecord] = []
                swap(&full, &chunk)
                chunk.reserveCapacity(4096)
                try emit(consume full)
            }
            try self.environment.read { snapshot in
                do {
                    try snapshot.scan(self.events) { key, value in
                        guard let record = try self.folded(key, value, step, in: snapshot) else { return false }
                        chunk.append(record)
                        if chunk.count == 4096 { try handOver() }
                        return true
                    }
                } catch let cancelled as Pipeline.Cancelled {
                    throw cancelled  // the folding thread stopped: nothing more goes over
                } catch {
                    // The records read before the one that failed go over first, as they are
                    // folded first when one thread does both: the folding thread may find a
                    // problem of an earlier seq in them (a chain link left to it), which is then
                    // the one named.
                    if !chunk.isEmpty { try? handOver() }
                    throw error
                }
            }
            if !chunk.isEmpty { try handOver() }
        }, consume: { (chunk: consuming [FoldedRecord]) in
            // Each record is moved out of the chunk and lent to `fold`: copying it out, or
            // lending it in place (which the compiler made a copy too), retained its strings.
            for index in chunk.indices {
                var record = FoldedRecord.moved
                swap(&record, &chunk[index])
                try fold(record)
            }
        })
    }

    /// The record at `key`, as `step` has it folded (nil: stop before it), its correction's
    /// target looked up (a link left to the folding thread is checked first if that fails).
    private func folded(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer,
                        _ step: (RawRecord, Transaction) throws -> RecordStep, in txn: Transaction) throws -> FoldedRecord? {
        let raw = RawRecord(seq: try seq(key, in: "events"), value)
        guard case .fold(let event, let link) = try step(raw, txn) else { return nil }
        let targeted = try ChainLink.first(link) { try event.map { try withTarget($0, in: txn) } }
        return FoldedRecord(event: targeted, seq: raw.seq, recorded: raw.recorded, endsBatch: raw.endsBatch, link: link)
    }

    /// `event`, with a correction's target seq looked up in `ids` (folds key samples by seq).
    func withTarget(_ event: LoggedEvent, in txn: Transaction) throws -> LoggedEvent {
        guard case .correction(let correction) = event.payload else { return event }
        var event = event
        event.target = try txn.get(ids, correction.target.bytes).map { try seq($0, in: "ids") }
        return event
    }

    static let projectionVersionKey = Array("projections.version".utf8)
    static let projectionPositionKey = Array("projections.position".utf8)

    func stateStore(_ txn: Transaction) -> LMDBStateStore {
        LMDBStateStore(txn: txn, handles: stateDatabases)
    }

    /// A fold over the live projection state, made current first: if the stored state is of
    /// another fold version, it is rebuilt in this transaction; one of this version not at
    /// `head` (the log's, which the caller has read) is refused (`checkedProjectionVersion`).
    func projectionFold(in txn: Transaction, head: UInt64) throws -> ActivityFold {
        if try checkedProjectionVersion(in: txn, head: head) != UInt64(ActivityFold.version) {
            try rebuildProjections(in: txn)
        }
        return ActivityFold(store: stateStore(txn), context: try foldContext(in: txn))
    }

    /// Appends fold in the transaction that writes their events, so stored projections can
    /// never be past the log's head: when they are, events were removed from its end (an
    /// audit: deleting the newest events passed `verify`, and any command folded the shorter
    /// log over the evidence). Nothing then folds it again; the log is read as it is.
    static func checkNotPastHead(position: UInt64, head: UInt64) throws {
        guard position > head else { return }
        throw LedgerError.corrupt(seq: head + 1, reason: "missing from the log: its projections were folded up to seq \(position), past its last event (seq \(head)), so events were removed from its end. Restore the ledger from a backup ('ledger log' still reads what is left), or go on with the log as it is: 'ledger rebuild --accept-head'")
    }

    /// Checks the stored projections' position in `txn` against the log's `head`:
    /// `checkNotPastHead`, and at this build's fold version, not behind the head either: only
    /// events added to the log by hand, or the position altered, leave them so, and folding
    /// the log over them without a word hid that (an audit: a record copied in as a new seq
    /// was counted twice by the next `project`). `rebuild` is then the explicit repair.
    ///
    /// Returns the stored projections' fold version: at this build's, they are at `head`.
    func checkedProjectionVersion(in txn: Transaction, head: UInt64) throws -> UInt64? {
        let version = try metaNumber(EventLog.projectionVersionKey, in: txn)
        let position = try metaNumber(EventLog.projectionPositionKey, in: txn) ?? 0
        try EventLog.checkNotPastHead(position: position, head: head)
        if version == UInt64(ActivityFold.version), position != head {
            throw LedgerError.projectionsBehind(position: position, head: head)
        }
        return version
    }

    func foldContext(in txn: Transaction) throws -> FoldContext {
        let name = try txn.get(meta, Array("zone".utf8)).map { String(decoding: $0, as: UTF8.self) } ?? "UTC"
        return FoldContext(defaultZone: calendar.zone(named: name), calendar: calendar)
    }

    func setProjectionPosition(_ seq: UInt64, in txn: Transaction) throws {
        // Written only when they change: a put of the same bytes still dirties the page, and a
        // batch of nothing but duplicates then committed a transaction (SPEC §3.2: a no-op).
        for (key, value) in [(EventLog.projectionPositionKey, seq.bigEndianBytes),
                             (EventLog.projectionVersionKey, UInt64(ActivityFold.version).bigEndianBytes)]
            where try txn.get(meta, key) != value {
            try txn.put(meta, key, value)
        }
    }

    /// Clears every projection and folds the whole log again, flushing at the log's batch ends.
    /// Returns the number of events folded. (Folding into a `MemoryStateStore` and writing each
    /// table out in key order was measured: no faster, and it holds all state in memory.)
    ///
    /// Records are read and decoded on a second thread (`Pipeline`), from a read snapshot of
    /// the committed log, while this one folds and writes: decoding was a tenth of a rebuild.
    /// The snapshot is the log this transaction started from (LMDB lets one writer in at a
    /// time); events this transaction appended itself are folded after it, from `txn`.
    @discardableResult
    func rebuildProjections(in txn: Transaction, progress: ((UInt64) -> Void)? = nil,
                            isInterrupted: () -> Bool = { false }) throws -> UInt64 {
        for table in StateTable.allCases {
            try txn.clear(stateDatabases[table.ordinal])
        }
        try txn.clear(changesDatabase)
        let fold = ActivityFold(store: stateStore(txn), context: try foldContext(in: txn))
        var last: UInt64 = 0
        func apply(_ event: LoggedEvent, endsBatch: Bool) throws {
            try fold.apply(event)
            // The same flushes as when the batches were appended give the same changes.
            if endsBatch { try storeChanges(try fold.flush(), in: txn) }
            last = event.seq
            if last % EventLog.progressStep == 0 { progress?(last) }
            if last % 4096 == 0, isInterrupted() { throw Interrupted() }
        }
        let head = try head(in: txn).seq
        try foldRecords({
            // Only what appends admit is folded: seqs from 1 in order, each id once, each
            // record's chain hash holding. A record added by hand is named, not counted (a
            // review: after `verify` had named a copied record, `rebuild` counted it twice
            // without a word), and so is one altered (an audit: `rebuild` folded changed bytes
            // into the rows users see, where `replay` and `verify` refused them). Checked on
            // the reading thread, beside the fold, which bounds a rebuild: the hashing cost a
            // fifth more CPU but no wall time (3.47-4.44 s against 3.78-3.94 s, alternating).
            var chain = ChainWalk(hashing: true, checkingIDs: true, capacity: head)
            return { raw, _ in
                try chain.check(raw)
                return .fold(try raw.loggedEvent())
            }
        }) { record in
            try apply(record.event!, endsBatch: record.endsBatch)
        }
        try forEachLoggedEvent(in: txn, after: last) { event, endsBatch in
            try apply(try withTarget(event, in: txn), endsBatch: endsBatch)
        }
        try storeChanges(try fold.flush(), in: txn)
        try setProjectionPosition(last, in: txn)
        if isInterrupted() { throw Interrupted() }
        return last
    }

    /// Rebuilds every projection from the log, in one write transaction (other writers wait;
    /// readers go on seeing the old state until it commits). Returns the events folded.
    /// `progress` is called every `progressStep` events with the seq folded so far.
    /// With `indexes`, the log's own indexes (`ids`, `samples`, `sync`) are rebuilt from the log
    /// first, in the same transaction: what repairs damage `verify` names in them.
    /// With `acceptingHead`, the log is folded as it is even when the projections were folded
    /// past its end (what `checkNotPastHead` refuses), its missing end accepted; its indexes
    /// and counts, which still hold the missing events, are made again from it too.
    /// `isInterrupted` is asked every 4,096 events and once more before the commit; when it
    /// says so, `Interrupted` is thrown and the transaction is given up: nothing changes.
    @discardableResult
    public func rebuildProjections(indexes: Bool = false, acceptingHead: Bool = false,
                                   progress: ((UInt64) -> Void)? = nil,
                                   isInterrupted: () -> Bool = { false }) throws -> UInt64 {
        try environment.write { txn in
            // (A position that does not decode is damage `rebuild` mends.)
            if !acceptingHead, let position = try? metaNumber(EventLog.projectionPositionKey, in: txn) {
                try EventLog.checkNotPastHead(position: position, head: try head(in: txn).seq)
            }
            if indexes || acceptingHead { try reindexLog(in: txn, isInterrupted: isInterrupted) }
            return try rebuildProjections(in: txn, progress: progress, isInterrupted: isInterrupted)
        }
    }

    /// How often long walks over the log report progress, in events.
    public static let progressStep: UInt64 = 65_536

    /// Makes sure the stored projections are of this build's fold version and at the head
    /// (rebuilding them otherwise), so that reads see every committed event.
    public func ensureProjectionsCurrent() throws {
        // Appends keep projections at the head inside their own transactions, so once the
        // stored state has been found to be of this fold version it stays current.
        if projectionsChecked.withLock({ $0 }) { return }
        let current = try environment.read { txn in
            let head = try head(in: txn).seq
            let version = try checkedProjectionVersion(in: txn, head: head)
            // An empty log with no fold version (a ledger an older build made, before `init`
            // wrote one) has nothing to fold: a read wrote to it, or was refused on read-only media.
            return version == UInt64(ActivityFold.version) || (version == nil && head == 0)
        }
        if !current {
            // Bringing them up to date writes; a replay folds in memory and needs no write.
            if let refusal = environment.notWritable("its stored projections are of another build's fold version, and making them again writes. 'ledger replay --to-seq N', with N the head 'ledger stats' prints, folds the log in memory and needs no write") {
                throw refusal
            }
            try environment.write { txn in
                _ = try projectionFold(in: txn, head: try head(in: txn).seq)
                try setProjectionPosition(try head(in: txn).seq, in: txn)
            }
        }
        projectionsChecked.withLock { $0 = true }
    }

    /// The rows of a projection as it stands now.
    public func rows(_ projection: ProjectionName, filter: RowFilter) throws -> [Row] {
        try ensureProjectionsCurrent()
        return try environment.read { txn in
            try ProjectionQuery(store: stateStore(txn)).rows(projection, filter: filter)
        }
    }

    /// One user's `daily` totals of one type, oldest first: the typed form of the `daily` rows
    /// for in-process callers, read straight from the stored values with no row built.
    public func dailyTotals(user: String, type: QuantityType, from: CivilDate? = nil,
                            to: CivilDate? = nil) throws -> [DailyTotal] {
        try ensureProjectionsCurrent()
        return try environment.read { txn in
            try ProjectionQuery(store: stateStore(txn)).dailyTotals(user: user, type: type, from: from, to: to)
        }
    }

    /// What `user` has granted `client` (the `grants` projection as it stands).
    public func grant(user: String, client: String) throws -> (read: Set<QuantityType>, share: Set<QuantityType>) {
        try environment.read { txn in try ProjectionQuery(store: stateStore(txn)).grant(user: user, client: client) }
    }

    /// Today's date at `now` in `user`'s profile zone when they set one, else in the ledger's
    /// default zone (what `--date today` means). The profile is read from `query` when given
    /// (a replay's: the zone as of the replay point, with no live state read), else from the
    /// live projections.
    public func today(for user: String?, now: Timestamp, in query: ProjectionQuery? = nil) throws -> CivilDate {
        var zone = try defaultZone()
        if let user {
            let name = if let query { try query.profileZone(of: user) } else { try profileZone(of: user) }
            if let name, let profile = Zone(name) { zone = profile }
        }
        let local = now.microseconds / 1_000_000 + Int64(zone.offset(at: now))
        return CivilDate(daysSinceEpoch: Int(local.floorDivided(by: 86_400).quotient))
    }

    /// A user's profile zone, if they set one.
    public func profileZone(of user: String) throws -> String? {
        try ensureProjectionsCurrent()
        return try environment.read { txn in try ProjectionQuery(store: stateStore(txn)).profileZone(of: user) }
    }

    /// Runs `body` with the projections folded from the log up to `target` into memory
    /// (a `MemoryStateStore`, queried directly). Live projections are untouched and no change
    /// is emitted. The log is read in one read transaction, so the replay sees one snapshot.
    ///
    /// With `users`, only the events of those users are folded (their samples, grants,
    /// revokes and profiles, and corrections of their samples); every other record is only
    /// looked at for its batch end. A user's rows depend on nothing but that user's events —
    /// every state key starts with the user — so the rows of those users are exactly what a
    /// replay of the whole log gives, in a fraction of the time (tested against it).
    ///
    /// With `changes`, the fold makes the changes appends make, and hands over each batch's
    /// (what `verify` compares with the stored ones); without, it makes none.
    public func withReplay<R>(to target: ReplayTarget, users: Set<String>? = nil,
                              changes: (([RowChange]) throws -> Void)? = nil, checkingChain: Bool = true,
                              in snapshot: Transaction? = nil,
                              _ body: (ReplayPoint, ProjectionQuery) throws -> R) throws -> R {
        let context = try snapshot.map(foldContext(in:)) ?? environment.read { txn in try foldContext(in: txn) }
        // The replayed state lives only in memory: nothing is written anywhere.
        let store = MemoryStateStore()
        let fold = ActivityFold(store: store, context: context, emitsChanges: changes != nil)
        func flush() throws {
            let made = try fold.flush()
            if let changes, !made.isEmpty { try changes(made) }
        }
        var point = ReplayPoint(seq: 0, recorded: nil, hash: EventRecord.genesisHash)
        // By bytes, as the rows are keyed (`sameName`), not by the strings' canonical equivalence.
        let userBytes = users.map { Set($0.map { Array($0.utf8) }) }
        // Replaying some users, the folding thread folds a few of the records and the reading
        // thread reads them all and hashes them (two SHA-256 a record): the links are left to
        // the folding thread then, which checks each before folding it (one thread does both in
        // a snapshot given).
        let deferringLinks = userBytes != nil && snapshot == nil
        try foldRecords({
            // The decision for each record, made on the reading thread: it alone keeps
            // `ownSamples`, the ids of the replayed users' samples (their corrections count).
            var ownSamples = Set<UUID>()
            var chain = ChainWalk()
            return { raw, _ in
                guard raw.isWellFormed else { _ = try EventRecord(seq: raw.seq, decoding: raw.bytes); return .stop }
                switch target {
                case .seq(let limit) where raw.seq > limit: return .stop
                case .recorded(let limit) where raw.recorded > limit: return .stop
                default: break
                }
                // The hash shown for the point vouches for every event folded up to it: an
                // audit altered an early event, and the replay showed its changed totals
                // beside the hash the auditor had kept. (`verify`, which walks the chain
                // first, does not walk it again here.)
                var link: ChainLink?
                if checkingChain {
                    if deferringLinks { link = try chain.checkDeferringHash(raw) } else { try chain.check(raw) }
                }
                guard let userBytes else { return .fold(try ChainLink.first(link) { try raw.loggedEvent() }, link: link) }
                func concerns(_ subject: EventSubject) -> Bool {
                    switch subject {
                    case .user(let name): userBytes.contains(Array(name.utf8))
                    case .target(let id): ownSamples.contains(id)
                    }
                }
                func event() throws -> LoggedEvent? {
                    if let subject = raw.subject {
                        return concerns(subject) ? try raw.loggedEvent() : nil
                    }
                    // A format 1 record has no typed part to peek at.
                    let decoded = try raw.loggedEvent()
                    return concerns(decoded.payload.subject) ? decoded : nil
                }
                let kept = try ChainLink.first(link, event)
                if let kept, case .sample = kept.payload { ownSamples.insert(kept.id) }
                return .fold(kept, link: link)
            }
        }, in: snapshot) { record in
            try record.link?.check()
            if let event = record.event { try fold.apply(event) }
            if record.endsBatch { try flush() }
            point = ReplayPoint(seq: record.seq, recorded: record.recorded, hash: [])
        }
        if point.seq > 0 {
            // The log is append-only: the record at this seq is the one the snapshot held.
            func hash(in txn: Transaction) throws -> [UInt8]? {
                try txn.withValue(events, point.seq.bigEndianBytes) { RawRecord(seq: point.seq, $0).hash }
            }
            point.hash = try (snapshot.map(hash(in:)) ?? environment.read(hash(in:))) ?? []
        }
        try flush()
        return try body(point, ProjectionQuery(store: store))
    }

    /// The first key at which the stored entries `scan` visits (in key order, through the
    /// function it is given, which returns whether to go on) differ from `expected`: an entry
    /// that differs, one missing, or, `beyondExpected`, one more than `expected` holds. Nil when
    /// they agree.
    static func firstDifference(_ expected: [(key: [UInt8], value: [UInt8])], beyondExpected: Bool,
                                _ scan: (_ visit: ([UInt8], [UInt8]) throws -> Bool) throws -> Void) throws -> [UInt8]? {
        var index = 0
        var first: [UInt8]?
        try scan { key, value in
            guard index < expected.count else {
                if beyondExpected { first = key }
                return false
            }
            guard expected[index].key == key, expected[index].value == value else {
                first = expected[index].key.lexicographicallyPrecedes(key) ? expected[index].key : key
                return false
            }
            index += 1
            return true
        }
        if first == nil, index < expected.count { first = expected[index].key }
        return first
    }

    /// Checks that every stored projection row, every entry of the fold's own state (buckets,
    /// samples, users, …), and every stored change (what subscribers are sent) equals a fresh
    /// fold of the whole log. Throws `LedgerError.projectionMismatch` naming the first
    /// differing row, or `LedgerError.stateMismatch` naming the first differing state entry or
    /// change. Returns the number of rows compared.
    public func verifyProjections() throws -> (rows: Int, upgradedFrom: UInt64?) {
        // The stored projections are compared as they are: made current first (as a read
        // does), rows someone altered were folded again and then said to match (an audit).
        // At this build's fold version they are at the head, since appends fold in the
        // transaction that writes their events; only another version's are made again.
        let (version, head) = try environment.read { txn in
            let head = try self.head(in: txn).seq
            return (try checkedProjectionVersion(in: txn, head: head), head)
        }
        var upgradedFrom: UInt64?
        if version != UInt64(ActivityFold.version), head > 0 || version != nil {
            upgradedFrom = version ?? 0
            try ensureProjectionsCurrent()
        }
        return (try compareProjections(), upgradedFrom)
    }

    private func compareProjections() throws -> Int {
        // The stored state is read in one snapshot, held while the log is folded afresh up to
        // that snapshot's head: read in separate transactions, an append committed in between
        // made them differ from the replay, and `verify` failed on a sound ledger.
        return try environment.read { txn in
            let live = ProjectionQuery(store: stateStore(txn))
            // The stored changes are walked in step with the fresh fold's, batch by batch, so
            // that only one batch's changes are held at a time.
            var lastCompared: [UInt8]?
            func compareChanges(_ made: [RowChange]) throws {
                var expected: [(key: [UInt8], value: [UInt8])] = []
                EventLog.encodeChanges(made) { expected.append(($0, $1)) }
                // From the entry right after the last one compared (a key with a zero byte
                // added is the least key greater than it), as many as this batch made.
                let differing = try EventLog.firstDifference(expected, beyondExpected: false) { visit in
                    try txn.scan(changesDatabase, from: lastCompared.map { $0 + [0] }) { try visit(Array($0), Array($1)) }
                }
                if let differing { throw LedgerError.stateMismatch(table: "changes", key: differing.hex) }
                lastCompared = expected.last?.key ?? lastCompared
            }
            // Folded from this same transaction: another begun inside it waited for ever once
            // another process had grown the map (a stress test).
            return try withReplay(to: .seq(try self.head(in: txn).seq), changes: compareChanges, checkingChain: false,
                                  in: txn) { _, fresh in
                // A stored change past the last one the fold made is one too many.
                try txn.scan(changesDatabase, from: lastCompared.map { $0 + [0] }) { key, _ in
                    throw LedgerError.stateMismatch(table: "changes", key: Array(key).hex)
                }
                var rowsCompared = 0
                for projection in ProjectionName.allCases {
                    let stored = try live.rows(projection, filter: RowFilter())
                    let expected = try fresh.rows(projection, filter: RowFilter())
                    for (index, row) in expected.enumerated() {
                        // By their bytes: `Row`'s `==` compares strings by canonical equivalence.
                        guard index < stored.count, stored[index].jsonBytes == row.jsonBytes else {
                            throw LedgerError.projectionMismatch(projection: projection.rawValue,
                                                                 row: String(decoding: row.jsonBytes, as: UTF8.self))
                        }
                    }
                    if stored.count > expected.count {
                        throw LedgerError.projectionMismatch(projection: projection.rawValue,
                                                             row: String(decoding: stored[expected.count].jsonBytes, as: UTF8.self))
                    }
                    rowsCompared += stored.count
                }
                // The rows are made from this state, and the next fold starts from it: a damaged
                // bucket or sample would show in the rows only once an append touched its day.
                for table in StateTable.allCases {
                    var expected: [(key: [UInt8], value: [UInt8])] = []
                    try fresh.forEachEntry(table) { key, value in
                        expected.append((key, value))
                        return true
                    }
                    let first = try EventLog.firstDifference(expected, beyondExpected: true) { visit in
                        try live.forEachEntry(table, visit)
                    }
                    if let first { throw LedgerError.stateMismatch(table: table.rawValue, key: first.hex) }
                }
                return rowsCompared
            }
        }
    }
}
