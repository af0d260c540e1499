import LedgerCore

/// The tables a projection keeps its state in.
public enum StateTable: String, CaseIterable, Sendable {
    /// user id (u32) → `UserState`
    case users
    /// SHA-256(user name) → user id (u32)
    case userNames
    /// sample id (16 bytes) → `SampleRecord`, for samples that currently count
    case samples
    /// user id ‖ sample id → empty: samples without a zone of their own, re-bucketed when the
    /// user's profile zone changes
    case userSamples
    /// SHA-256(user ␀ source ␀ syncId) → sample id of the current version
    case sync
    /// day key → `[BucketEntry]`: every sample touching that user, type and day
    case buckets
    /// day key → `DailyValue` (the `daily` projection)
    case daily
    /// day key → `[PerSourceValue]` (the `per-source` projection)
    case perSource
    /// user id ‖ type → `LastKnownValue` (the `last-known` projection)
    case lastKnown
    /// user id ‖ SHA-256(client) → `GrantValue` (the `grants` projection)
    case grants
}

/// Where a fold keeps its state: a key-value store with ordered keys, read and written only
/// through this protocol so the fold itself does no I/O.
///
/// The LMDB implementation wraps a write transaction (live projections, rebuilds, replays into
/// a scratch environment); `MemoryStateStore` serves tests. Keys sort as unsigned bytes.
public protocol StateStore {
    func get(_ table: StateTable, _ key: [UInt8]) throws -> [UInt8]?
    func put(_ table: StateTable, _ key: [UInt8], _ value: [UInt8]) throws
    func delete(_ table: StateTable, _ key: [UInt8]) throws
    /// Visits entries whose key starts with `prefix`, in key order (descending with `reverse`),
    /// until `body` returns false.
    func scan(_ table: StateTable, prefix: [UInt8], reverse: Bool,
              _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Bool) throws
    /// `scan` forwards, handing over the stored bytes in place (valid only during the call).
    func scanInPlace(_ table: StateTable, prefix: [UInt8],
                     _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws
}

extension StateStore {
    public func scanInPlace(_ table: StateTable, prefix: [UInt8],
                            _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) throws {
        try scan(table, prefix: prefix, reverse: false) { key, value in
            try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try body(k, v) } }
        }
    }
}

/// A `StateStore` in memory, for tests of the folds.
public final class MemoryStateStore: StateStore {
    private var tables: [StateTable: [[UInt8]: [UInt8]]] = [:]

    public init() {}

    public func get(_ table: StateTable, _ key: [UInt8]) -> [UInt8]? { tables[table]?[key] }

    public func put(_ table: StateTable, _ key: [UInt8], _ value: [UInt8]) {
        tables[table, default: [:]][key] = value
    }

    public func delete(_ table: StateTable, _ key: [UInt8]) { tables[table]?[key] = nil }

    public func scan(_ table: StateTable, prefix: [UInt8], reverse: Bool,
                     _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        let entries = (tables[table] ?? [:]).filter { $0.key.starts(with: prefix) }
        var keys = entries.keys.sorted { $0.lexicographicallyPrecedes($1) }
        if reverse { keys.reverse() }
        for key in keys where try !body(key, entries[key]!) { return }
    }

    /// Every entry of `table`, for comparing two stores.
    public func entries(_ table: StateTable) -> [[UInt8]: [UInt8]] { tables[table] ?? [:] }
}
