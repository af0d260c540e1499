import CLMDB
import Foundation

/// An open LMDB transaction, valid only inside the `read { }` or `write { }` closure that
/// received it. Byte buffers passed to callbacks point into the map and are valid only
/// during the callback; everything returned as `[UInt8]` is a copy.
public struct Transaction {
    let handle: OpaquePointer
    let environment: OpaquePointer?

    init(handle: OpaquePointer, environment: OpaquePointer? = nil) {
        self.handle = handle
        self.environment = environment
    }

    /// Runs `body` in a child of this write transaction: committed into the parent when it
    /// returns, aborted (leaving the parent as it was) when it throws. Calls
    /// `mdb_txn_begin(env, parent, 0, …)`, `mdb_txn_commit`, `mdb_txn_abort`.
    public func nested<R>(_ body: (Transaction) throws -> R) throws -> R {
        guard let environment else { preconditionFailure("nested transactions need a write transaction") }
        var child: OpaquePointer?
        try check(mdb_txn_begin(environment, handle, 0, &child), "mdb_txn_begin(nested)")
        let transaction = Transaction(handle: child!, environment: environment)
        do {
            let result = try body(transaction)
            try check(mdb_txn_commit(child), "mdb_txn_commit(nested)")
            return result
        } catch {
            if let lmdb = error as? LMDBError, lmdb.call == "mdb_txn_commit(nested)" { throw error }
            mdb_txn_abort(child)
            throw error
        }
    }

    /// The value stored under `key`, copied out, or nil. Calls `mdb_get`.
    public func get(_ db: Database, _ key: some KeyBytes) throws -> [UInt8]? {
        try withValue(db, key) { Array($0) }
    }

    /// Calls `body` with the value stored under `key` while it is still in the map, or returns
    /// nil when there is none. Calls `mdb_get`.
    public func withValue<R>(_ db: Database, _ key: some KeyBytes, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        try key.withUnsafeBytes { keyBytes in
            var k = MDB_val(reading: keyBytes)
            var v = MDB_val()
            let code = mdb_get(handle, db.dbi, &k, &v)
            if code == MDB_NOTFOUND { return nil }
            try check(code, "mdb_get")
            return try body(UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
        }
    }

    /// Stores `value` under `key`. With `append`, the key must sort after every existing key
    /// (`MDB_APPEND`, which is faster for the log's increasing `seq`). Calls `mdb_put`.
    public func put(_ db: Database, _ key: some KeyBytes, _ value: some KeyBytes, append: Bool = false) throws {
        try key.withUnsafeBytes { keyBytes in
            try value.withUnsafeBytes { valueBytes in
                var k = MDB_val(reading: keyBytes)
                var v = MDB_val(reading: valueBytes)
                try check(mdb_put(handle, db.dbi, &k, &v, append ? UInt32(MDB_APPEND) : 0), "mdb_put")
            }
        }
    }

    /// Stores `value` under `key` unless the key is there already, in one search of the tree
    /// (`MDB_NOOVERWRITE`); returns the value already stored (copied), or nil when `value` was
    /// stored. Calls `mdb_put`.
    public func insert(_ db: Database, _ key: some KeyBytes, _ value: some KeyBytes) throws -> [UInt8]? {
        try insertValue(key, value, call: "mdb_put") { mdb_put(handle, db.dbi, $0, $1, $2) }
    }

    /// Stores a value of `count` bytes under `key`, written in place by `fill` into the space
    /// LMDB reserves for it in the map (`MDB_RESERVE`): a value built from parts needs no
    /// array of its own first. `fill` must write every byte; the space is valid only during
    /// it. With `append`, as `put`. Calls `mdb_put`.
    public func putReserved(_ db: Database, _ key: some KeyBytes, count: Int, append: Bool = false,
                            _ fill: (UnsafeMutableRawBufferPointer) -> Void) throws {
        try putReservedValue(key, count: count, append: append, fill, call: "mdb_put") { mdb_put(handle, db.dbi, $0, $1, $2) }
    }

    /// A cursor for writing into `db` in this write transaction, for a run of puts: each put
    /// through it starts from where the last one left the cursor, and LMDB looks at that leaf
    /// page first, so keys that come in nearly increasing order (an append's ids, seqs) are
    /// put without a search from the root each time, as `mdb_put`'s cursor of its own makes.
    /// Calls `mdb_cursor_open`. LMDB closes a write transaction's cursors when it ends: the
    /// cursor must not be used after that, and is not closed by hand.
    func writeCursor(_ db: Database) throws -> WriteCursor {
        // A read-only transaction's cursors outlive it (LMDB frees only a write transaction's),
        // and could not write anyway: refused as `mdb_put` refuses a write there.
        guard environment != nil else { throw LMDBError(code: EACCES, call: "mdb_cursor_open(read-only transaction)") }
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(handle, db.dbi, &cursor), "mdb_cursor_open")
        return WriteCursor(handle: cursor!)
    }

    /// Removes `key`; returns false when it was absent. Calls `mdb_del`.
    @discardableResult
    public func delete(_ db: Database, _ key: [UInt8]) throws -> Bool {
        try key.withUnsafeBytes { keyBytes in
            var k = MDB_val(reading: keyBytes)
            let code = mdb_del(handle, db.dbi, &k, nil)
            if code == MDB_NOTFOUND { return false }
            try check(code, "mdb_del")
            return true
        }
    }

    /// The last key and value of `db` (copied), or nil when it is empty. Calls `mdb_cursor_get(MDB_LAST)`.
    public func last(_ db: Database) throws -> (key: [UInt8], value: [UInt8])? {
        try withCursor(db) { cursor in
            var k = MDB_val(), v = MDB_val()
            let code = mdb_cursor_get(cursor, &k, &v, MDB_LAST)
            if code == MDB_NOTFOUND { return nil }
            try check(code, "mdb_cursor_get(MDB_LAST)")
            return (Array(UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size)),
                    Array(UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)))
        }
    }

    /// Visits entries in key order from the first key ≥ `start` (or the beginning) until
    /// `body` returns false. The buffers are valid only during each call.
    /// Calls `mdb_cursor_get(MDB_SET_RANGE / MDB_FIRST, MDB_NEXT)`.
    public func scan(_ db: Database, from start: [UInt8]? = nil,
                     _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws {
        try withCursor(db) { cursor in
            var k = MDB_val(), v = MDB_val()
            var startCopy = start ?? []
            var code: Int32 = try startCopy.withUnsafeMutableBytes { startBytes in
                if start == nil { return mdb_cursor_get(cursor, &k, &v, MDB_FIRST) }
                k = MDB_val(mv_size: startBytes.count, mv_data: startBytes.baseAddress)
                return mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE)
            }
            while code == 0 {
                let keep = try body(UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size),
                                    UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
                if !keep { return }
                code = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)
            }
            if code != MDB_NOTFOUND { try check(code, "mdb_cursor_get(MDB_NEXT)") }
        }
    }

    /// Visits entries whose key starts with `prefix` in descending key order until `body`
    /// returns false. Calls `mdb_cursor_get(MDB_SET_RANGE / MDB_LAST, MDB_PREV)`.
    public func scanReverse(_ db: Database, prefix: [UInt8],
                            _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws {
        // The first key after every key with this prefix: the prefix "plus one".
        var upper = prefix
        while let last = upper.last, last == 0xFF { upper.removeLast() }
        if !upper.isEmpty { upper[upper.count - 1] += 1 }
        try withCursor(db) { cursor in
            var k = MDB_val(), v = MDB_val()
            var code: Int32 = upper.withUnsafeMutableBytes { upperBytes in
                if upperBytes.isEmpty { return mdb_cursor_get(cursor, &k, &v, MDB_LAST) }
                k = MDB_val(mv_size: upperBytes.count, mv_data: upperBytes.baseAddress)
                let found = mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE)
                if found == MDB_NOTFOUND { return mdb_cursor_get(cursor, &k, &v, MDB_LAST) }
                if found != 0 { return found }
                return mdb_cursor_get(cursor, &k, &v, MDB_PREV)
            }
            while code == 0 {
                let key = UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size)
                guard key.starts(with: prefix) else { return }
                if try !body(key, UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)) { return }
                code = mdb_cursor_get(cursor, &k, &v, MDB_PREV)
            }
            if code != MDB_NOTFOUND { try check(code, "mdb_cursor_get(MDB_PREV)") }
        }
    }

    /// The number of entries in `db` (`mdb_stat`).
    public func count(_ db: Database) throws -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(handle, db.dbi, &stat), "mdb_stat")
        return stat.ms_entries
    }

    /// Statistics of `db` (`mdb_stat`): entries, depth, and page counts.
    public func statistics(_ db: Database) throws -> (entries: Int, depth: Int, pages: Int) {
        var stat = MDB_stat()
        try check(mdb_stat(handle, db.dbi, &stat), "mdb_stat")
        return (stat.ms_entries, Int(stat.ms_depth), stat.ms_branch_pages + stat.ms_leaf_pages + stat.ms_overflow_pages)
    }

    /// Removes every entry of `db`, keeping the database (`mdb_drop(…, 0)`).
    public func clear(_ db: Database) throws {
        try check(mdb_drop(handle, db.dbi, 0), "mdb_drop")
    }

    private func withCursor<R>(_ db: Database, _ body: (OpaquePointer) throws -> R) throws -> R {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(handle, db.dbi, &cursor), "mdb_cursor_open")
        defer { mdb_cursor_close(cursor) }
        return try body(cursor!)
    }
}

/// A cursor of a write transaction (`Transaction.writeCursor`), valid until the transaction
/// ends. Its puts are `Transaction`'s, through `mdb_cursor_put`. Not public: only this module's
/// appends and folds, which hold one no longer than the transaction they open it in, use it.
struct WriteCursor {
    let handle: OpaquePointer

    /// As `Transaction.insert`. Calls `mdb_cursor_put(MDB_NOOVERWRITE)`.
    func insert(_ key: some KeyBytes, _ value: some KeyBytes) throws -> [UInt8]? {
        try insertValue(key, value, call: "mdb_cursor_put") { mdb_cursor_put(handle, $0, $1, $2) }
    }

    /// As `Transaction.putReserved`. Calls `mdb_cursor_put(MDB_RESERVE)`.
    func putReserved(_ key: some KeyBytes, count: Int, append: Bool = false,
                     _ fill: (UnsafeMutableRawBufferPointer) -> Void) throws {
        try putReservedValue(key, count: count, append: append, fill, call: "mdb_cursor_put") { mdb_cursor_put(handle, $0, $1, $2) }
    }
}

/// The one body of `insert`, through `mdb_put` or a cursor's `mdb_cursor_put` (`put`, handed
/// the key, the value and the flags).
private func insertValue(_ key: some KeyBytes, _ value: some KeyBytes, call: String,
                         _ put: (UnsafeMutablePointer<MDB_val>, UnsafeMutablePointer<MDB_val>, UInt32) -> Int32) throws -> [UInt8]? {
    try key.withUnsafeBytes { keyBytes in
        try value.withUnsafeBytes { valueBytes in
            var k = MDB_val(reading: keyBytes)
            var v = MDB_val(reading: valueBytes)
            let code = put(&k, &v, UInt32(MDB_NOOVERWRITE))
            if code == MDB_KEYEXIST { return Array(UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)) }
            try check(code, call)
            return nil
        }
    }
}

/// The one body of `putReserved`, as `insertValue` is of `insert`.
private func putReservedValue(_ key: some KeyBytes, count: Int, append: Bool, _ fill: (UnsafeMutableRawBufferPointer) -> Void,
                              call: String, _ put: (UnsafeMutablePointer<MDB_val>, UnsafeMutablePointer<MDB_val>, UInt32) -> Int32) throws {
    try key.withUnsafeBytes { keyBytes in
        var k = MDB_val(reading: keyBytes)
        var v = MDB_val(mv_size: count, mv_data: nil)
        try check(put(&k, &v, UInt32(MDB_RESERVE) | (append ? UInt32(MDB_APPEND) : 0)), call)
        fill(UnsafeMutableRawBufferPointer(start: v.mv_data, count: count))
    }
}

// MARK: - Key encoding

extension FixedWidthInteger where Self: UnsignedInteger {
    /// Big-endian bytes, so LMDB's byte order is numeric order (keys, lengths).
    public var bigEndianBytes: [UInt8] {
        withUnsafeBytes(of: self.bigEndian) { Array($0) }
    }

    /// Reads the first `MemoryLayout<Self>.size` bytes as a big-endian value.
    public init(bigEndianBytes bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count >= MemoryLayout<Self>.size)
        self.init(bigEndian: bytes.loadUnaligned(as: Self.self))
    }

    public init(bigEndianBytes bytes: [UInt8]) {
        self = bytes.withUnsafeBytes { Self(bigEndianBytes: $0) }
    }
}

/// Bytes handed to LMDB as a key or a value: an array, or a fixed-size key held inline
/// (`SeqKey`, `IDKey`), which an append writes several of per event: as arrays, each was
/// allocated and freed (about seven small arrays per imported record, under jemalloc's
/// statistics).
public protocol KeyBytes {
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension Array: KeyBytes where Element == UInt8 {}

/// A `seq` (or any `UInt64`) as the 8 big-endian bytes the log's keys are.
public struct SeqKey: KeyBytes {
    public let value: UInt64
    public init(_ value: UInt64) { self.value = value }
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try Swift.withUnsafeBytes(of: value.bigEndian, body)
    }
}

/// An event id as the 16 bytes of the `ids` index's keys (`UUID.bytes`).
public struct IDKey: KeyBytes {
    private let uuid: uuid_t
    public init(_ id: UUID) { uuid = id.uuid }
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try Swift.withUnsafeBytes(of: uuid, body)
    }
}

extension MDB_val {
    /// Points at `bytes` for LMDB to read: it only reads the keys and values it is given
    /// (`mv_data` is not const in C), so the arrays' own storage is passed, not a mutable copy.
    init(reading bytes: UnsafeRawBufferPointer) {
        self.init(mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
    }
}
