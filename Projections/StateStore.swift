import Foundation
import LedgerCore

/// The tables a projection keeps its state in.
public enum StateTable: String, CaseIterable, Sendable {
    /// user id (u32) → `UserState`
    case users
    /// SHA-256(user name) → user id (u32)
    case userNames
    /// sample seq (u64) → `SampleRecord`, for samples that currently count. Keyed by position,
    /// not id, so a batch's samples land on adjacent pages.
    case samples
    /// user id ‖ sample seq → empty: samples without a zone of their own, re-bucketed when the
    /// user's profile zone changes
    case userSamples
    /// SHA-256(user ␀ source ␀ syncId) → sample seq of the current version
    case sync
    /// day key ‖ chunk number (u32) → `[BucketEntry]`: every sample touching that user, type and
    /// day, in chunks of about 1 KiB (`Bucket`)
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

extension StateTable {
    /// The table's place in `allCases`: stores index their tables by it rather than hash the
    /// raw value (a `String`) on every read and write.
    public var ordinal: Int {
        switch self {
        case .users: 0
        case .userNames: 1
        case .samples: 2
        case .userSamples: 3
        case .sync: 4
        case .buckets: 5
        case .daily: 6
        case .perSource: 7
        case .lastKnown: 8
        case .grants: 9
        }
    }

    public static func == (lhs: StateTable, rhs: StateTable) -> Bool { lhs.ordinal == rhs.ordinal }

    public func hash(into hasher: inout Hasher) { hasher.combine(ordinal) }
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
    /// `put` of a value of `count` bytes that `fill` writes, every one of them: in the store's
    /// own space where it has one (LMDB's map), so that a value the fold encodes for every
    /// sample or bucket needs no array of its own.
    func put(_ table: StateTable, _ key: [UInt8], count: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Void) throws
    /// `put` under the key of a sample's position (`StateKey.position(seq)`): a store that can
    /// use the key without an array of it (LMDB's) does, as the fold stores every sample so.
    func put(_ table: StateTable, position seq: UInt64, count: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Void) throws
}

extension StateStore {
    public func put(_ table: StateTable, _ key: [UInt8], count: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Void) throws {
        let value = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            fill(UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
        try put(table, key, value)
    }

    public func put(_ table: StateTable, position seq: UInt64, count: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Void) throws {
        try put(table, StateKey.position(seq), count: count, fill)
    }

    /// `put(table, position:count:fill:)` through a `ByteCursor` (`write(into:count:_:)`).
    func put(_ table: StateTable, position seq: UInt64, count: Int, cursor write: (inout ByteCursor) -> Void) throws {
        try put(table, position: seq, count: count) { Self.write(into: $0, count: count, write) }
    }

    /// `put(table, key, count:fill:)` through a `ByteCursor` (`write(into:count:_:)`).
    func put(_ table: StateTable, _ key: [UInt8], count: Int, cursor write: (inout ByteCursor) -> Void) throws {
        try put(table, key, count: count) { Self.write(into: $0, count: count, write) }
    }

    /// Runs `write` with a cursor over `out`, checking that it wrote all `count` bytes.
    private static func write(into out: UnsafeMutableRawBufferPointer, count: Int, _ write: (inout ByteCursor) -> Void) {
        var cursor = ByteCursor(out.baseAddress!.assumingMemoryBound(to: UInt8.self), capacity: count)
        write(&cursor)
        precondition(cursor.count == count, "wrote \(cursor.count) bytes of \(count)")
    }

    public func scanInPlace(_ table: StateTable, prefix: [UInt8],
                            _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) throws {
        try scan(table, prefix: prefix, reverse: false) { key, value in
            try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try body(k, v) } }
        }
    }
}

/// A `StateStore` in memory: what tests and replays fold into (a replay queries it directly,
/// so it writes no file).
///
/// Keys sort as unsigned bytes, as in LMDB. Every scan the fold and the queries make names a
/// prefix of at least the user (4 bytes) or user and type (5 bytes), so each table keeps its keys
/// grouped by that prefix, each group sorted: a scan reads one group, and an insert shifts only
/// its own group. Scans with a shorter prefix sort the whole table (only queries do that).
public final class MemoryStateStore: StateStore {
    private final class Table {
        let groupLength: Int
        var values: [ByteKey: [UInt8]] = [:]
        var groups: [ByteKey: [ByteKey]] = [:]

        init(groupLength: Int) { self.groupLength = groupLength }

        func group(of key: ByteKey) -> ByteKey { ByteKey(Array(key.bytes.prefix(groupLength))) }

        func put(_ key: ByteKey, _ value: [UInt8]) {
            guard values.updateValue(value, forKey: key) == nil, groupLength > 0 else { return }
            let name = group(of: key)
            var members = groups.removeValue(forKey: name) ?? []
            if let last = members.last, last < key {
                members.append(key)
            } else {
                members.insert(key, at: members.lowerBound(of: key))
            }
            groups[name] = members
        }

        func delete(_ key: ByteKey) {
            guard values.removeValue(forKey: key) != nil, groupLength > 0 else { return }
            let name = group(of: key)
            guard var members = groups.removeValue(forKey: name) else { return }
            let index = members.lowerBound(of: key)
            if index < members.count, members[index] == key { members.remove(at: index) }
            if !members.isEmpty { groups[name] = members }
        }

        /// Keys starting with `prefix`, in order.
        func keys(prefix: [UInt8]) -> ArraySlice<ByteKey> {
            let all: [ByteKey]
            if groupLength > 0, prefix.count >= groupLength {
                all = groups[ByteKey(Array(prefix.prefix(groupLength)))] ?? []
            } else {
                all = values.keys.sorted()
            }
            let start = all.lowerBound(of: ByteKey(prefix))
            // The keys with the prefix run on from `start`: find their end by bisection, not
            // by walking them. A fold scans a user's days backwards after every batch for
            // `last-known` and stops at the first; walking all of them first made replaying a
            // log of single-event batches (as the server writes) quadratic in its days.
            var (low, high) = (start, all.count)
            while low < high {
                let middle = (low + high) / 2
                if all[middle].bytes.starts(with: prefix) { low = middle + 1 } else { high = middle }
            }
            return all[start..<low]
        }
    }

    /// `samples`, keyed by seq and written by a fold in seq order, is kept as sorted arrays
    /// (appending is the usual case, a lookup is a binary search) rather than hashed: a replay
    /// puts one record per sample, and growing and hashing a dictionary of them was a fifth
    /// of its time.
    /// A delete (a retraction, a superseded sync version) leaves a tombstone rather than
    /// shifting the arrays, so many deletes stay cheap; a put of the same key reuses it.
    private final class AppendOrderedTable {
        var keys: [ByteKey] = []
        var values: [[UInt8]?] = []

        func index(of key: ByteKey) -> Int? {
            let index = keys.lowerBound(of: key)
            return index < keys.count && keys[index] == key ? index : nil
        }

        func get(_ key: ByteKey) -> [UInt8]? { index(of: key).flatMap { values[$0] } }

        func put(_ key: ByteKey, _ value: [UInt8]) {
            if let last = keys.last, last < key {
                keys.append(key)
                values.append(value)
                return
            }
            let index = keys.lowerBound(of: key)
            if index < keys.count, keys[index] == key {
                values[index] = value
            } else {
                keys.insert(key, at: index)
                values.insert(value, at: index)
            }
        }

        func delete(_ key: ByteKey) {
            guard let index = index(of: key) else { return }
            values[index] = nil
        }

        /// Live entries whose key starts with `prefix`, in key order.
        func entries(prefix: [UInt8]) -> [(key: [UInt8], value: [UInt8])] {
            var index = keys.lowerBound(of: ByteKey(prefix))
            var found: [(key: [UInt8], value: [UInt8])] = []
            while index < keys.count, keys[index].bytes.starts(with: prefix) {
                if let value = values[index] { found.append((keys[index].bytes, value)) }
                index += 1
            }
            return found
        }
    }

    /// By `StateTable.ordinal`; `samples` has its own kind of table (its slot is unused).
    private let tables: [Table]
    private let samples = AppendOrderedTable()

    public init() {
        tables = StateTable.allCases.map { Table(groupLength: MemoryStateStore.groupLength($0)) }
    }

    /// The prefix every scan of `table` names at least: 4 bytes (a user), 5 (user and type), or
    /// 0 for tables only read by key (and `users`, scanned whole by queries).
    static func groupLength(_ table: StateTable) -> Int {
        switch table {
        case .userSamples, .grants: 4
        case .buckets, .daily, .perSource, .lastKnown: 5
        case .users, .userNames, .samples, .sync: 0
        }
    }

    public func get(_ table: StateTable, _ key: [UInt8]) -> [UInt8]? {
        if table == .samples { return samples.get(ByteKey(key)) }
        return tables[table.ordinal].values[ByteKey(key)]
    }

    public func put(_ table: StateTable, _ key: [UInt8], _ value: [UInt8]) {
        if table == .samples { return samples.put(ByteKey(key), value) }
        tables[table.ordinal].put(ByteKey(key), value)
    }

    public func delete(_ table: StateTable, _ key: [UInt8]) {
        if table == .samples { return samples.delete(ByteKey(key)) }
        tables[table.ordinal].delete(ByteKey(key))
    }

    public func scan(_ table: StateTable, prefix: [UInt8], reverse: Bool,
                     _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        if table == .samples {
            let found = samples.entries(prefix: prefix)
            for entry in reverse ? Array(found.reversed()) : found where try !body(entry.key, entry.value) { return }
            return
        }
        let store = tables[table.ordinal]
        let keys = store.keys(prefix: prefix)
        if reverse {
            for key in keys.reversed() where try !body(key.bytes, store.values[key]!) { return }
        } else {
            for key in keys where try !body(key.bytes, store.values[key]!) { return }
        }
    }

    /// Every entry of `table`, for comparing two stores.
    public func entries(_ table: StateTable) -> [[UInt8]: [UInt8]] {
        if table == .samples {
            return Dictionary(uniqueKeysWithValues: samples.entries(prefix: []).map { ($0.key, $0.value) })
        }
        return Dictionary(uniqueKeysWithValues: tables[table.ordinal].values.map { ($0.key.bytes, $0.value) })
    }
}

/// A byte-string key hashed and compared as a whole, in unsigned byte order (LMDB's), rather
/// than one element at a time as `[UInt8]` is.
struct ByteKey: Hashable, Comparable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    static func == (a: ByteKey, b: ByteKey) -> Bool { a.bytes == b.bytes }

    static func < (a: ByteKey, b: ByteKey) -> Bool {
        a.bytes.withUnsafeBytes { x in
            b.bytes.withUnsafeBytes { y in
                let common = min(x.count, y.count)
                let order = common == 0 ? 0 : memcmp(x.baseAddress!, y.baseAddress!, common)
                return order != 0 ? order < 0 : x.count < y.count
            }
        }
    }
}

extension Array where Element == ByteKey {
    /// The first index whose key is not below `key` (binary search; the array is sorted).
    func lowerBound(of key: ByteKey) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if self[middle] < key { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
