import Foundation
import LedgerCore

/// Reads what `ByteWriter` wrote. Reading past the end is a corrupt state, which traps: state
/// is only ever written by this code in the same transaction as its log position.
struct ByteReader {
    let bytes: [UInt8]
    var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset >= bytes.count }

    mutating func u8() -> UInt8 {
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u32() -> UInt32 {
        var value: UInt32 = 0
        for index in offset..<(offset + 4) { value = value << 8 | UInt32(bytes[index]) }
        offset += 4
        return value
    }

    mutating func u64() -> UInt64 {
        var value: UInt64 = 0
        for index in offset..<(offset + 8) { value = value << 8 | UInt64(bytes[index]) }
        offset += 8
        return value
    }

    mutating func i64() -> Int64 { Int64(bitPattern: u64()) }

    mutating func f64() -> Double { Double(bitPattern: u64()) }

    mutating func string() -> String {
        let count = Int(u32())
        defer { offset += count }
        return String(decoding: bytes[offset..<(offset + count)], as: UTF8.self)
    }

    mutating func raw(_ count: Int) -> [UInt8] {
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }

    mutating func uuid() -> UUID {
        defer { offset += 16 }
        let b = bytes, o = offset
        return UUID(uuid: (b[o], b[o + 1], b[o + 2], b[o + 3], b[o + 4], b[o + 5], b[o + 6], b[o + 7],
                           b[o + 8], b[o + 9], b[o + 10], b[o + 11], b[o + 12], b[o + 13], b[o + 14], b[o + 15]))
    }
}
