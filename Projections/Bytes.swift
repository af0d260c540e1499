import Foundation
import LedgerCore

/// A stored projection record or key that is not what this code writes. Only the derived
/// state is damaged, not the log: `ledger rebuild` makes it again from the log.
public struct DamagedState: Error, Sendable, CustomStringConvertible {
    public let reason: String

    public init(reason: String) { self.reason = reason }

    public var description: String {
        "the ledger's projection state is damaged (\(reason)); 'ledger rebuild' makes it again from the log, which 'ledger verify' checks"
    }
}

/// Reads what `ByteWriter` wrote. Every read checks its bounds and throws `DamagedState`
/// past the end: the bytes come from the file, and a damaged record must be an error, not a
/// trap.
struct ByteReader {
    let bytes: [UInt8]
    var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset >= bytes.count }

    /// Moves past `count` bytes, which must be there.
    mutating func skip(_ count: Int) throws(DamagedState) {
        guard count >= 0, count <= bytes.count - offset else { throw DamagedState(reason: "a stored record ends early") }
        offset += count
    }

    mutating func u8() throws(DamagedState) -> UInt8 {
        try skip(1)
        return bytes[offset - 1]
    }

    mutating func u32() throws(DamagedState) -> UInt32 {
        try skip(4)
        return bytes.withUnsafeBytes { UInt32(bigEndian: $0.loadUnaligned(fromByteOffset: offset - 4, as: UInt32.self)) }
    }

    mutating func u64() throws(DamagedState) -> UInt64 {
        try skip(8)
        return bytes.withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: offset - 8, as: UInt64.self)) }
    }

    mutating func i64() throws(DamagedState) -> Int64 { Int64(bitPattern: try u64()) }

    mutating func f64() throws(DamagedState) -> Double { Double(bitPattern: try u64()) }

    mutating func string() throws(DamagedState) -> String {
        let count = Int(try u32())
        try skip(count)
        return String(decoding: bytes[(offset - count)..<offset], as: UTF8.self)
    }

    /// A string earlier read from these bytes, and where its bytes lie (`string(reusing:)`).
    struct ReadString {
        var range: Range<Int>
        var value: String
    }

    /// `string()`, but the string `last` holds when the bytes are the same as its: the entries
    /// of a day's bucket nearly all name one or two sources and one zone, and each name made
    /// anew was checked as UTF-8 again (and allocated, past 15 bytes).
    mutating func string(reusing last: inout ReadString?) throws(DamagedState) -> String {
        let count = Int(try u32())
        try skip(count)
        let range = (offset - count)..<offset
        if let previous = last, previous.range.count == count,
           bytes.withUnsafeBytes({ memcmp($0.baseAddress! + previous.range.lowerBound, $0.baseAddress! + range.lowerBound, count) == 0 }) {
            return previous.value
        }
        let value = String(decoding: bytes[range], as: UTF8.self)
        last = ReadString(range: range, value: value)
        return value
    }

    mutating func raw(_ count: Int) throws(DamagedState) -> [UInt8] {
        try skip(count)
        return Array(bytes[(offset - count)..<offset])
    }

    mutating func uuid() throws(DamagedState) -> UUID {
        try skip(16)
        return bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(fromByteOffset: offset - 16, as: uuid_t.self)) }
    }

    /// Days since 1970 that a stored record can hold: those of years 0000 to 9999 (what
    /// timestamps are read in), with 1,000 days of room either side (an offset of up to a day
    /// moves an instant out of those years, and a sample's zone its local day one further).
    /// What lies beyond is damage, and would overflow when made into an instant.
    static let days = (-719_528 - 1_000)...(2_932_896 + 1_000)

    mutating func day() throws(DamagedState) -> Int {
        let day = try i64()
        guard ByteReader.days.contains(Int(clamping: day)) else { throw DamagedState(reason: "a stored record holds day \(day)") }
        return Int(day)
    }

    /// Microseconds since 1970 within `days`.
    mutating func instant() throws(DamagedState) -> Int64 {
        let value = try i64()
        let day = value.floorDivided(by: 86_400_000_000).quotient
        guard ByteReader.days.contains(Int(day)) else { throw DamagedState(reason: "a stored record holds instant \(value)") }
        return value
    }

    mutating func type() throws(DamagedState) -> QuantityType {
        let code = try u8()
        guard let type = QuantityType(code: code) else { throw DamagedState(reason: "a stored record names type code \(code)") }
        return type
    }

    /// A count of items that each take at least `size` bytes: more than the rest of the record
    /// could hold is damage (and would otherwise reserve room for billions of them).
    mutating func count(ofItemsOfAtLeast size: Int) throws(DamagedState) -> Int {
        let count = Int(try u32())
        guard count <= (bytes.count - offset) / max(size, 1) else {
            throw DamagedState(reason: "a stored record counts \(count) items in \(bytes.count - offset) bytes")
        }
        return count
    }

    /// `count` items read by `item`.
    mutating func items<T>(_ count: Int, _ item: (inout ByteReader) throws(DamagedState) -> T) throws(DamagedState) -> [T] {
        var result: [T] = []
        result.reserveCapacity(count)
        for _ in 0..<count { result.append(try item(&self)) }
        return result
    }
}
