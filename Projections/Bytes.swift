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
        precondition(offset + 4 <= bytes.count, "state record ends early")
        defer { offset += 4 }
        return bytes.withUnsafeBytes { UInt32(bigEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }
    }

    mutating func u64() -> UInt64 {
        precondition(offset + 8 <= bytes.count, "state record ends early")
        defer { offset += 8 }
        return bytes.withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
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
        precondition(offset + 16 <= bytes.count, "state record ends early")
        return bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(fromByteOffset: offset, as: uuid_t.self)) }
    }
}
