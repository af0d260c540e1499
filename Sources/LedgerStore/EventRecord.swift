import LedgerCore

/// The stored form of one event: the value under its `seq` in the `events` database.
///
/// Format 1 (documented in docs/STORAGE.md; later releases keep reading it):
///
/// | bytes    | field                                                    |
/// |----------|----------------------------------------------------------|
/// | 0        | format version, `1`                                      |
/// | 1        | flags: bit 0 set on the last event of a committed batch  |
/// | 2..<34   | SHA-256 chain hash                                       |
/// | 34..<42  | `recorded`, microseconds since 1970 UTC, big-endian i64  |
/// | 42...    | the event's canonical JSON (sorted keys, no spaces)      |
///
/// `hash = SHA-256(previous hash ‖ seq as 8 big-endian bytes ‖ flags ‖ recorded ‖ JSON)`,
/// with 32 zero bytes before `seq` 1. The hash itself is not hashed; everything else is.
/// Batch ends are part of the log because projections are flushed once per batch: a
/// rebuild or replay flushes at the same places and so reproduces the live rows exactly.
public struct EventRecord: Sendable, Equatable {
    public static let formatVersion: UInt8 = 1
    static let headerSize = 42
    public static let genesisHash = [UInt8](repeating: 0, count: 32)

    public var seq: UInt64
    public var recorded: Timestamp
    /// Whether this is the last event of the batch it was committed in.
    public var endsBatch: Bool
    public var hash: [UInt8]
    /// Canonical JSON of the event's normalized document.
    public var body: [UInt8]

    public init(seq: UInt64, recorded: Timestamp, endsBatch: Bool, hash: [UInt8], body: [UInt8]) {
        self.seq = seq
        self.recorded = recorded
        self.endsBatch = endsBatch
        self.hash = hash
        self.body = body
    }

    /// Builds the record for `body` at `seq`, chaining it to `previousHash`.
    public init(seq: UInt64, recorded: Timestamp, endsBatch: Bool, body: [UInt8], previousHash: [UInt8]) {
        self.init(seq: seq, recorded: recorded, endsBatch: endsBatch, hash: [], body: body)
        self.hash = EventRecord.chainHash(previous: previousHash, seq: seq, hashedBytes: hashedBytes)
    }

    /// The bytes covered by the hash after the previous hash and `seq`: `flags ‖ recorded ‖ body`.
    var hashedBytes: [UInt8] {
        [flags] + UInt64(bitPattern: recorded.microseconds).bigEndianBytes + body
    }

    var flags: UInt8 { endsBatch ? 1 : 0 }

    public static func chainHash(previous: [UInt8], seq: UInt64, hashedBytes: [UInt8]) -> [UInt8] {
        Digest.sha256(previous, seq.bigEndianBytes, hashedBytes)
    }

    public var encoded: [UInt8] {
        var out: [UInt8] = [EventRecord.formatVersion, flags]
        out.reserveCapacity(EventRecord.headerSize + body.count)
        out += hash
        out += UInt64(bitPattern: recorded.microseconds).bigEndianBytes
        out += body
        return out
    }

    /// Decodes a stored value; throws `LedgerError.corrupt` naming `seq` when it is not a record.
    public init(seq: UInt64, decoding bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count > EventRecord.headerSize else {
            throw LedgerError.corrupt(seq: seq, reason: "record is \(bytes.count) bytes, shorter than its header")
        }
        guard bytes[0] == EventRecord.formatVersion else {
            throw LedgerError.corrupt(seq: seq, reason: "record format \(bytes[0]) is not one this ledger reads (1)")
        }
        guard bytes[1] & ~1 == 0 else {
            throw LedgerError.corrupt(seq: seq, reason: "record flags \(bytes[1]) are not ones this ledger knows")
        }
        let recorded = Int64(bitPattern: UInt64(bigEndianBytes: UnsafeRawBufferPointer(rebasing: bytes[34..<42])))
        self.init(seq: seq, recorded: Timestamp(microseconds: recorded), endsBatch: bytes[1] & 1 == 1,
                  hash: Array(bytes[2..<34]), body: Array(bytes[42...]))
    }

    /// The event as `ledger log` prints it: `seq`, `recorded`, `hash`, then the stored fields.
    public var json: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(body.count + 140)
        out += Array("{\"seq\":\(seq),\"recorded\":\"\(recorded.rfc3339)\",\"hash\":\"\(hash.hex)\",".utf8)
        out += body.dropFirst()
        return out
    }

    /// The stored document, parsed.
    public func document() throws -> JSONValue {
        do {
            return try JSONValue.parse(body)
        } catch {
            throw LedgerError.corrupt(seq: seq, reason: "stored JSON does not parse: \(error.message)")
        }
    }

    /// The typed event, decoded from the stored document.
    public func event() throws -> Event {
        do {
            return try EventDecoder.decode(try document())
        } catch let error as FieldError {
            throw LedgerError.corrupt(seq: seq, reason: "stored event is not valid: \(error.message)")
        }
    }
}
