import Foundation

/// Holds a transaction's puts and deletes in memory and hands them to LMDB in key order.
///
/// Sample ids are random UUIDs, so writing them as events arrive touches a different leaf page
/// for nearly every put; a large batch then dirties more pages than LMDB keeps in its dirty
/// list and it starts spilling them. Written in key order, neighbouring puts share pages.
/// Reads see the buffered writes; `flush` (before a scan, at most every `limit` entries, and
/// before the transaction commits) writes them out. The buffer belongs to one transaction.
final class WriteBuffer {
    let txn: Transaction
    private var pending: [Database: [BytesKey: [UInt8]?]] = [:]
    private var count = 0
    /// Past this many buffered entries the buffer is written out, to bound its memory.
    let limit: Int

    init(_ txn: Transaction, limit: Int = 1 << 19) {
        self.txn = txn
        self.limit = limit
    }

    func get(_ db: Database, _ key: [UInt8]) throws -> [UInt8]? {
        if let entry = pending[db]?[BytesKey(key)] { return entry }
        return try txn.get(db, key)
    }

    func put(_ db: Database, _ key: [UInt8], _ value: [UInt8]) throws {
        try set(db, key, value)
    }

    func delete(_ db: Database, _ key: [UInt8]) throws {
        try set(db, key, nil)
    }

    private func set(_ db: Database, _ key: [UInt8], _ value: [UInt8]?) throws {
        if pending[db, default: [:]].updateValue(value, forKey: BytesKey(key)) == nil { count += 1 }
        if count >= limit { try flush() }
    }

    /// Writes what is buffered for `db` (every database when nil), in key order.
    func flush(_ only: Database? = nil) throws {
        for db in only.map({ [$0] }) ?? Array(pending.keys) {
            guard let entries = pending.removeValue(forKey: db) else { continue }
            count -= entries.count
            for (key, value) in entries.sorted(by: { $0.key < $1.key }) {
                if let value { try txn.put(db, key.bytes, value) } else { _ = try txn.delete(db, key.bytes) }
            }
        }
    }
}

/// A byte-string key hashed and compared as a whole (memcmp order, LMDB's default), not one
/// element at a time as `[UInt8]` is.
struct BytesKey: Hashable, Comparable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    static func == (a: BytesKey, b: BytesKey) -> Bool {
        a.bytes.count == b.bytes.count && (a.bytes.isEmpty || a.bytes.withUnsafeBytes { x in
            b.bytes.withUnsafeBytes { y in memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 }
        })
    }

    static func < (a: BytesKey, b: BytesKey) -> Bool {
        a.bytes.withUnsafeBytes { x in
            b.bytes.withUnsafeBytes { y in
                let common = min(x.count, y.count)
                let order = common == 0 ? 0 : memcmp(x.baseAddress!, y.baseAddress!, common)
                return order != 0 ? order < 0 : x.count < y.count
            }
        }
    }
}
