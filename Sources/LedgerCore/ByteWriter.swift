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
        value.withUTF8Bytes { utf8 in  // no intermediate array
            u32(UInt32(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    package mutating func raw(_ value: [UInt8]) { bytes.append(contentsOf: value) }

    package mutating func uuid(_ value: UUID) {
        withUnsafeBytes(of: value.uuid) { bytes.append(contentsOf: $0) }
    }
}

/// Writes bytes through a pointer into space sized up front (`withScratch`): what an encoder
/// that runs for every event uses instead of `Array.append`, whose uniqueness and capacity
/// checks on each call were a good part of making an import's canonical JSON and typed form.
/// The caller sizes the space; a write past it traps (a size computed wrong must stop the
/// process, never write over what lies beyond: an LMDB page's neighbours, or the heap).
@frozen package struct ByteCursor {
    @usableFromInline let start: UnsafeMutablePointer<UInt8>
    @usableFromInline var next: UnsafeMutablePointer<UInt8>
    @usableFromInline let end: UnsafeMutablePointer<UInt8>

    /// A cursor over the `capacity` bytes from `start`.
    @inlinable package init(_ start: UnsafeMutablePointer<UInt8>, capacity: Int) {
        self.start = start
        next = start
        end = start + capacity
    }

    /// Bytes written so far.
    @inlinable package var count: Int { next - start }

    @inlinable @inline(__always) mutating func claim(_ count: Int) -> UnsafeMutablePointer<UInt8> {
        precondition(count <= end - next, "ByteCursor: a write past the space sized for it")
        defer { next += count }
        return next
    }

    @inlinable @inline(__always) package mutating func u8(_ value: UInt8) {
        claim(1).initialize(to: value)
    }

    @inlinable @inline(__always) package mutating func bytes(_ value: UnsafeBufferPointer<UInt8>) {
        guard let base = value.baseAddress else { return }
        claim(value.count).initialize(from: base, count: value.count)
    }

    @inlinable package mutating func bytes(_ value: StaticString) {
        value.withUTF8Buffer { bytes($0) }
    }

    @inlinable package mutating func utf8(_ value: String) {
        value.withUTF8Bytes { bytes($0) }
    }

    @inlinable @inline(__always) package mutating func u32(_ value: UInt32) {
        UnsafeMutableRawPointer(claim(4)).storeBytes(of: value.bigEndian, as: UInt32.self)
    }

    @inlinable @inline(__always) package mutating func u64(_ value: UInt64) {
        UnsafeMutableRawPointer(claim(8)).storeBytes(of: value.bigEndian, as: UInt64.self)
    }

    @inlinable package mutating func i64(_ value: Int64) { u64(UInt64(bitPattern: value)) }

    @inlinable package mutating func f64(_ value: Double) { u64(value.bitPattern) }

    /// A u32 length and the UTF-8 bytes (`ByteWriter.string`'s layout): 4 + `utf8.count` bytes.
    @inlinable package mutating func string(_ value: String) {
        value.withUTF8Bytes { utf8 in
            u32(UInt32(utf8.count))
            bytes(utf8)
        }
    }

    /// `String(value)`'s bytes, without the string: the digits are written backwards into
    /// space claimed once (a byte at a time, each write checked, was 3 % of an import's
    /// reading thread, which writes three instants per record into its id).
    package mutating func decimal(_ value: Int64) {
        var magnitude = value.magnitude
        var digits = 1
        var bound: UInt64 = 10
        while digits < 20, magnitude >= bound {
            digits += 1
            bound = bound &* 10
        }
        let sign = value < 0 ? 1 : 0
        let out = claim(sign + digits)
        if sign == 1 { out.initialize(to: UInt8(ascii: "-")) }
        // Two digits at a time, from a table of the hundred pairs: half the divisions (an
        // import writes four numbers a record, of 16 digits for its instants).
        var index = sign + digits
        let pairs = ByteCursor.digitPairs.utf8Start
        while magnitude >= 100 {
            let (quotient, remainder) = magnitude.quotientAndRemainder(dividingBy: 100)
            index -= 2
            (out + index).initialize(to: pairs[Int(remainder) &* 2])
            (out + index + 1).initialize(to: pairs[Int(remainder) &* 2 &+ 1])
            magnitude = quotient
        }
        if magnitude >= 10 {
            (out + sign).initialize(to: pairs[Int(magnitude) &* 2])
            (out + sign + 1).initialize(to: pairs[Int(magnitude) &* 2 &+ 1])
        } else {
            (out + sign).initialize(to: UInt8(truncatingIfNeeded: 48 &+ magnitude))
        }
    }

    private static let digitPairs: StaticString =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

    @inlinable package mutating func uuid(_ value: UUID) {
        withUnsafeBytes(of: value.uuid) { bytes($0.assumingMemoryBound(to: UInt8.self)) }
    }

    /// Runs `body` with a cursor over `capacity` bytes of scratch space (on the stack when
    /// small) and returns what it wrote as an array of exactly that size.
    @inlinable package static func withScratch(capacity: Int, _ body: (inout ByteCursor) -> Void) -> [UInt8] {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { scratch in
            var cursor = ByteCursor(scratch.baseAddress!, capacity: capacity)
            body(&cursor)
            return Array(UnsafeBufferPointer(start: scratch.baseAddress, count: cursor.count))
        }
    }

    /// An array of exactly `count` bytes, all written by `body`.
    @inlinable package static func exactly(_ count: Int, _ body: (inout ByteCursor) -> Void) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var cursor = ByteCursor(buffer.baseAddress!, capacity: count)
            body(&cursor)
            precondition(cursor.count == count, "ByteCursor wrote \(cursor.count) bytes, not \(count)")
            initialized = count
        }
    }
}

extension String {
    /// The string's UTF-8 bytes, lent in place. `withUTF8` is a mutating method, so calling it
    /// on a parameter or a property takes a copy of the string first: a retain and a release
    /// of its storage each time (`callgrind` counted seven such pairs a record in an import's
    /// reading thread). A native string's bytes are read where they are, without the copy;
    /// only a string whose bytes are not contiguous UTF-8 is copied and made so.
    @inlinable @inline(__always) public func withUTF8Bytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        if let result = try utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = self
        return try copy.withUTF8(body)
    }
}
