import CCrypto
import Foundation

/// SHA-256 from OpenSSL's libcrypto (Debian's `libssl-dev`), for the hash chain, derived sample
/// ids and API token digests. Never a hand-written hash. libcrypto uses the CPU's SHA
/// extensions: about 340 ns for a 400-byte record here, against 2,400 ns for libsodium's
/// portable code (measured side by side when the ledger moved off libsodium).
public enum Digest {
    public static let byteCount = Int(SHA256_DIGEST_LENGTH)

    /// SHA-256 of the concatenation of `parts` (`SHA256_Init/Update/Final`).
    public static func sha256(_ parts: [UInt8]...) -> [UInt8] {
        sha256(parts: parts)
    }

    public static func sha256(parts: [[UInt8]]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        out.withUnsafeMutableBytes { digest in
            sha256(into: digest) { update in
                for part in parts { part.withUnsafeBytes(update) }
            }
        }
        return out
    }

    /// The one place the ledger hashes: `feed` hands every range to hash to the function it is
    /// given, in order, and the 32-byte digest is written to `digest`.
    public static func sha256(into digest: UnsafeMutableRawBufferPointer,
                       _ feed: ((UnsafeRawBufferPointer) -> Void) -> Void) {
        precondition(digest.count >= byteCount)
        var context = SHA256_CTX()
        SHA256_Init(&context)
        feed { _ = SHA256_Update(&context, $0.baseAddress, $0.count) }
        SHA256_Final(digest.baseAddress!.assumingMemoryBound(to: UInt8.self), &context)
    }

    /// Fills `count` bytes from the kernel's CSPRNG (`getrandom(2)`, which blocks only until
    /// the kernel's pool is first seeded at boot).
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = out.withUnsafeMutableBytes { getrandom($0.baseAddress! + filled, count - filled, 0) }
            if got < 0 {
                precondition(errno == EINTR, "getrandom failed: errno \(errno)")
                continue
            }
            filled += got
        }
        return out
    }

    /// Compares two byte strings in time independent of where they differ (`CRYPTO_memcmp`).
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return CRYPTO_memcmp(a, b, a.count) == 0
    }
}

/// The SHA-256 of a record's content (from byte 42 on: the JSON's length, the JSON and the typed
/// event), which a format 3 record's chain hash covers in place of the content itself
/// (docs/STORAGE.md). Held inline (no array per event), and computed by whichever thread is
/// ahead (`PreparedEvent.contentDigest`): the appending thread then hashes only the 82 bytes
/// that chain each event.
public struct ContentDigest: Sendable, Equatable {
    private var storage: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    /// The digest of the content a record stores for `body` (the canonical JSON) and `typed`.
    public init(body: [UInt8], typed: [UInt8]) {
        withUnsafeMutableBytes(of: &storage) { digest in
            Swift.withUnsafeBytes(of: UInt32(body.count).bigEndian) { length in
                Digest.sha256(into: digest) { update in
                    update(length)
                    body.withUnsafeBytes(update)
                    typed.withUnsafeBytes(update)
                }
            }
        }
    }

    /// The digest of stored content, read in place.
    public init(content: UnsafeRawBufferPointer) {
        withUnsafeMutableBytes(of: &storage) { digest in Digest.sha256(into: digest) { update in update(content) } }
    }

    /// The 32 bytes.
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try Swift.withUnsafeBytes(of: storage, body)
    }

    public static func == (a: ContentDigest, b: ContentDigest) -> Bool { a.storage == b.storage }
}

extension Array where Element == UInt8 {
    /// Lower-case hex.
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension UUID {
    /// A name-based UUID (version 8, RFC 9562) from the SHA-256 of `name`: the same name always
    /// gives the same id. Used for samples sent without an `id`.
    public static func derived(from name: [UInt8]) -> UUID {
        name.withUnsafeBytes { derived(from: $0) }
    }

    /// `derived(from:)` of bytes read in place.
    public static func derived(from name: UnsafeRawBufferPointer) -> UUID {
        var bytes = digestPrefix(name)
        return version8(&bytes)
    }

    /// The first 16 bytes of the SHA-256 of `name`, in place (no array per id).
    private static func digestPrefix(_ name: UnsafeRawBufferPointer) -> uuid_t {
        let zero: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var digest: (uuid_t, uuid_t) = (zero, zero)  // 32 bytes: the whole digest
        withUnsafeMutableBytes(of: &digest) { out in
            Digest.sha256(into: out) { update in update(name) }
        }
        return digest.0
    }

    /// `bytes` with the version (8) and variant bits of RFC 9562 set.
    private static func version8(_ bytes: inout uuid_t) -> UUID {
        bytes.6 = (bytes.6 & 0x0F) | 0x80
        bytes.8 = (bytes.8 & 0x3F) | 0x80
        return UUID(uuid: bytes)
    }

    /// A name-based UUID (version 8) whose first 48 bits are `milliseconds` since 1970 plus
    /// 2^47 (big-endian, so instants from about 2500 BC to AD 6400 sort in time order) and
    /// whose other bits come from the SHA-256 of `name`. Ids derived this way sort by time, so
    /// a chronological import inserts into a few neighbouring pages of the `ids` index instead
    /// of touching pages all over it (which is what kept an import's memory growing).
    public static func derived(milliseconds: Int64, from name: [UInt8]) -> UUID {
        name.withUnsafeBytes { derived(milliseconds: milliseconds, from: $0) }
    }

    /// `derived(milliseconds:from:)` of bytes read in place.
    public static func derived(milliseconds: Int64, from name: UnsafeRawBufferPointer) -> UUID {
        var bytes = digestPrefix(name)
        let bias: Int64 = 1 << 47
        let ms = UInt64(clamping: min(max(milliseconds, -bias), bias - 1) + bias)
        withUnsafeMutableBytes(of: &bytes) { raw in
            for i in 0..<6 { raw[i] = UInt8(truncatingIfNeeded: ms >> (8 * (5 - i))) }
        }
        return version8(&bytes)
    }

    public init(bytes: [UInt8]) {
        precondition(bytes.count == 16)
        self.init(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                         bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    public var bytes: [UInt8] {
        withUnsafeBytes(of: uuid) { Array($0) }
    }

    /// Byte order of the 16 bytes (as `bytes.lexicographicallyPrecedes`), without copying them.
    public func precedes(_ other: UUID) -> Bool {
        withUnsafeBytes(of: uuid) { a in
            withUnsafeBytes(of: other.uuid) { b in
                let x = (UInt64(bigEndian: a.loadUnaligned(as: UInt64.self)), UInt64(bigEndian: a.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
                let y = (UInt64(bigEndian: b.loadUnaligned(as: UInt64.self)), UInt64(bigEndian: b.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
                return x < y
            }
        }
    }

    /// Parses the canonical 8-4-4-4-12 hex form (either case) without going through
    /// Foundation's `sscanf`-based parser, which dominated decoding stored events.
    public init?(canonical text: String) {
        var bytes = [UInt8]()
        bytes.reserveCapacity(16)
        var high: UInt8?
        var count = 0
        for char in text.utf8 {
            count += 1
            if count == 9 || count == 14 || count == 19 || count == 24 {
                guard char == UInt8(ascii: "-") else { return nil }
                continue
            }
            let nibble: UInt8
            switch char {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = char - 48
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = char - 87
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = char - 55
            default: return nil
            }
            if let value = high {
                bytes.append(value << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        guard count == 36, bytes.count == 16 else { return nil }
        self.init(bytes: bytes)
    }

    /// Lower-case canonical text, as stored in the log.
    public var lowercased: String {
        String(decoding: ByteCursor.exactly(36) { $0.lowercased(self) }, as: UTF8.self)
    }

    /// Appends the lower-case canonical text to `out` (no string made on the way).
    public func writeLowercased(to out: inout [UInt8]) {
        out.append(contentsOf: ByteCursor.exactly(36) { $0.lowercased(self) })
    }
}

extension ByteCursor {
    /// A UUID's lower-case canonical text, 36 bytes (what `UUID.lowercased` and
    /// `writeLowercased` give).
    /// The space is claimed once (a write and its check per byte was a tenth of writing an
    /// imported sample's JSON).
    package mutating func lowercased(_ id: UUID) {
        let out = claim(36)
        withUnsafeBytes(of: id.uuid) { bytes in
            var at = 0
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    out[at] = UInt8(ascii: "-")
                    at += 1
                }
                let byte = bytes[index]
                out[at] = hexDigit(byte >> 4)
                out[at + 1] = hexDigit(byte & 15)
                at += 2
            }
        }
    }
}

/// The lower-case hex digit of a nibble: UUIDs' text and JSON's `\u00XX` escapes.
func hexDigit(_ nibble: UInt8) -> UInt8 {
    nibble < 10 ? 48 + nibble : 87 + nibble
}
