import Foundation
import LedgerCore
import Projections

/// A `StateStore` over one LMDB transaction: the fold's state tables, one database each.
/// Valid only while the transaction is.
struct LMDBStateStore: StateStore {
    let txn: Transaction
    let databases: [StateTable: Database]

    func get(_ table: StateTable, _ key: [UInt8]) throws -> [UInt8]? {
        try txn.get(databases[table]!, key)
    }

    func put(_ table: StateTable, _ key: [UInt8], _ value: [UInt8]) throws {
        try txn.put(databases[table]!, key, value)
    }

    func delete(_ table: StateTable, _ key: [UInt8]) throws {
        try txn.delete(databases[table]!, key)
    }

    func scan(_ table: StateTable, prefix: [UInt8], reverse: Bool,
              _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        let db = databases[table]!
        if reverse {
            try txn.scanReverse(db, prefix: prefix) { key, value in try body(Array(key), Array(value)) }
        } else {
            try txn.scan(db, from: prefix.isEmpty ? nil : prefix) { key, value in
                guard key.starts(with: prefix) else { return false }
                return try body(Array(key), Array(value))
            }
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
        if let (instant, _) = try? Timestamp.parseRFC3339(when) { return instant }
        guard let date = CivilDate(parsing: when) else { return nil }
        let window = DayCalendar().window(of: date.daysSinceEpoch, in: try defaultZone())
        return Timestamp(microseconds: window.end - 1)
    }

    static let projectionVersionKey = Array("projections.version".utf8)
    static let projectionPositionKey = Array("projections.position".utf8)

    func stateStore(_ txn: Transaction) -> LMDBStateStore {
        LMDBStateStore(txn: txn, databases: stateDatabases)
    }

    /// A fold over the live projection state, made current first: if the stored state is of
    /// another fold version or not at `expectedPosition`, it is rebuilt in this transaction.
    func projectionFold(in txn: Transaction, expectedPosition: UInt64) throws -> ActivityFold {
        let version = try txn.get(meta, EventLog.projectionVersionKey).map { UInt64(bigEndianBytes: $0) }
        let position = try txn.get(meta, EventLog.projectionPositionKey).map { UInt64(bigEndianBytes: $0) } ?? 0
        if version != UInt64(ActivityFold.version) || position != expectedPosition {
            try rebuildProjections(in: txn)
        }
        return ActivityFold(store: stateStore(txn), context: try foldContext(in: txn))
    }

    func foldContext(in txn: Transaction) throws -> FoldContext {
        let name = try txn.get(meta, Array("zone".utf8)).map { String(decoding: $0, as: UTF8.self) } ?? "UTC"
        return FoldContext(defaultZone: Zone(name) ?? .utc)
    }

    func setProjectionPosition(_ seq: UInt64, in txn: Transaction) throws {
        try txn.put(meta, EventLog.projectionPositionKey, seq.bigEndianBytes)
        try txn.put(meta, EventLog.projectionVersionKey, UInt64(ActivityFold.version).bigEndianBytes)
    }

    /// Clears every projection and folds the whole log again, flushing at the log's batch ends.
    /// Returns the number of events folded.
    @discardableResult
    func rebuildProjections(in txn: Transaction) throws -> UInt64 {
        for table in StateTable.allCases {
            try txn.clear(stateDatabases[table]!)
        }
        try txn.clear(changesDatabase)
        let fold = ActivityFold(store: stateStore(txn), context: try foldContext(in: txn))
        var last: UInt64 = 0
        var records: [EventRecord] = []
        // Decode in chunks: the fold writes while the cursor over `events` stays valid.
        var position: UInt64 = 0
        repeat {
            records.removeAll(keepingCapacity: true)
            try txn.scan(events, from: (position + 1).bigEndianBytes) { key, value in
                records.append(try EventRecord(seq: UInt64(bigEndianBytes: key), decoding: value))
                return records.count < 8192
            }
            for record in records {
                try fold.apply(LoggedEvent(seq: record.seq, recorded: record.recorded, event: try record.event()))
                // The same flushes as when the batches were appended give the same changes.
                if record.endsBatch { try storeChanges(try fold.flush(), in: txn) }
                last = record.seq
            }
            position = last
        } while records.count == 8192
        try storeChanges(try fold.flush(), in: txn)
        try setProjectionPosition(last, in: txn)
        return last
    }

    /// Rebuilds every projection from the log, in one write transaction (other writers wait;
    /// readers go on seeing the old state until it commits). Returns the events folded.
    @discardableResult
    public func rebuildProjections() throws -> UInt64 {
        try environment.write { txn in try rebuildProjections(in: txn) }
    }

    /// Makes sure the stored projections are of this build's fold version and at the head
    /// (rebuilding them otherwise), so that reads see every committed event.
    public func ensureProjectionsCurrent() throws {
        // Appends keep projections at the head inside their own transactions, so once the
        // stored state has been found to be of this fold version it stays current.
        if projectionsChecked.withLock({ $0 }) { return }
        let current = try environment.read { txn -> Bool in
            let version = try txn.get(meta, EventLog.projectionVersionKey).map { UInt64(bigEndianBytes: $0) }
            let position = try txn.get(meta, EventLog.projectionPositionKey).map { UInt64(bigEndianBytes: $0) } ?? 0
            let head = try head(in: txn).seq
            return version == UInt64(ActivityFold.version) && position == head
        }
        if !current {
            try environment.write { txn in
                _ = try projectionFold(in: txn, expectedPosition: try head(in: txn).seq)
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

    /// What `user` has granted `client` (the `grants` projection as it stands).
    public func grant(user: String, client: String) throws -> (read: Set<QuantityType>, share: Set<QuantityType>) {
        try environment.read { txn in try ProjectionQuery(store: stateStore(txn)).grant(user: user, client: client) }
    }

    /// A user's profile zone, if they set one.
    public func profileZone(of user: String) throws -> String? {
        try ensureProjectionsCurrent()
        return try environment.read { txn in try ProjectionQuery(store: stateStore(txn)).profileZone(of: user) }
    }

    /// Runs `body` with the projections folded from the log up to `target` into a scratch
    /// environment that is deleted afterwards. Live projections are untouched and no change
    /// is emitted.
    public func withReplay<R>(to target: ReplayTarget,
                              _ body: (ReplayPoint, ProjectionQuery) throws -> R) throws -> R {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-replay-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let scratch = try Environment(path: folder.path, mapSize: scratchMapSize(), scratch: true)
        let handles = try scratch.openDatabases(StateTable.allCases.map(stateDatabaseName))
        let databases = Dictionary(uniqueKeysWithValues: StateTable.allCases.map { ($0, handles[stateDatabaseName($0)]!) })
        let context = try environment.read { txn in try foldContext(in: txn) }
        return try scratch.write { txn in
            let store = LMDBStateStore(txn: txn, databases: databases)
            let fold = ActivityFold(store: store, context: context)
            var point = ReplayPoint(seq: 0, recorded: nil, hash: EventRecord.genesisHash)
            try forEachRecord { record in
                switch target {
                case .seq(let limit) where record.seq > limit: return false
                case .recorded(let limit) where record.recorded > limit: return false
                default: break
                }
                try fold.apply(LoggedEvent(seq: record.seq, recorded: record.recorded, event: try record.event()))
                if record.endsBatch { _ = try fold.flush() }
                point = ReplayPoint(seq: record.seq, recorded: record.recorded, hash: record.hash)
                return true
            }
            _ = try fold.flush()
            return try body(point, ProjectionQuery(store: store))
        }
    }

    /// A map for scratch folds: generous, since it is only address space until written.
    private func scratchMapSize() -> Int {
        let dataFile = (path as NSString).appendingPathComponent("data.mdb")
        let size = (try? FileManager.default.attributesOfItem(atPath: dataFile)[.size] as? Int) ?? 0
        return max(8 << 30, size * 8)
    }

    /// Checks that every stored projection row equals a fresh fold of the whole log.
    /// Throws `LedgerError.projectionMismatch` naming the first differing row.
    public func verifyProjections() throws -> Int {
        try ensureProjectionsCurrent()
        let head = try self.head().seq
        let compared: [ProjectionName] = ProjectionName.allCases
        return try withReplay(to: .seq(head)) { _, fresh in
            var rowsCompared = 0
            for projection in compared {
                let live = try rows(projection, filter: RowFilter())
                let expected = try fresh.rows(projection, filter: RowFilter())
                for (index, row) in expected.enumerated() {
                    guard index < live.count, live[index] == row else {
                        throw LedgerError.projectionMismatch(projection: projection.rawValue,
                                                             row: String(decoding: row.jsonBytes, as: UTF8.self))
                    }
                }
                if live.count > expected.count {
                    throw LedgerError.projectionMismatch(projection: projection.rawValue,
                                                         row: String(decoding: live[expected.count].jsonBytes, as: UTF8.self))
                }
                rowsCompared += live.count
            }
            return rowsCompared
        }
    }
}
