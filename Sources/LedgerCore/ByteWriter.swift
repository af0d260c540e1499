import Foundation

/// Appends fixed-width big-endian fields and length-prefixed strings to a byte array: the
/// compact encoding of projection state and of the typed events in records (`EventCodec`).
/// Big-endian keeps keys in numeric order.
package struct ByteWriter {
    package var bytes: [UInt8] = []

    package init() {}

    /// A writer whose first `capacity` bytes need no reallocation (an encoder that knows its
    /// size up front saves the array's doublings).
    package init(capacity: Int) { bytes.reserveCapacity(capacity) }

    package mutating func u8(_ value: UInt8) { bytes.append(value) }

    package mutating func u32(_ value: UInt32) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func u64(_ value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func i64(_ value: Int64) { u64(UInt64(bitPattern: value)) }

    package mutating func f64(_ value: Double) { u64(value.bitPattern) }

    package mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in  // no intermediate array
            u32(UInt32(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    package mutating func raw(_ value: [UInt8]) { bytes.append(contentsOf: value) }

    package mutating func uuid(_ value: UUID) {
        withUnsafeBytes(of: value.uuid) { bytes.append(contentsOf: $0) }
    }
}
