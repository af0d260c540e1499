import Foundation
import LedgerCore
import Projections

/// The stored form of one event: the value under its `seq` in the `events` database.
///
/// Format 2, written by this release (documented in docs/STORAGE.md; format 1 is still read):
///
/// | bytes      | field                                                    |
/// |------------|----------------------------------------------------------|
/// | 0          | format version, `2`                                      |
/// | 1          | flags: bit 0 set on the last event of a committed batch  |
/// | 2..<34     | SHA-256 chain hash                                       |
/// | 34..<42    | `recorded`, microseconds since 1970 UTC, big-endian i64  |
/// | 42..<46    | length of the JSON, big-endian u32                       |
/// | 46..<46+n  | the event's canonical JSON (sorted keys, no spaces)      |
/// | 46+n...    | the typed event in `EventCodec`'s binary layout          |
///
/// Format 1 is the same without the length and the typed part: byte 42 on is the JSON.
///
/// `hash = SHA-256(previous hash ‖ seq as 8 big-endian bytes ‖ bytes 1 and 34… of the record)`,
/// with 32 zero bytes before `seq` 1: every byte but the format and the hash itself is covered.
/// The typed part is what folds read (no JSON parse, no second validation); `verify` checks
/// that it says exactly what the JSON says. Batch ends are part of the log because projections
/// are flushed once per batch: a rebuild or replay flushes at the same places and so
/// reproduces the live rows exactly.
public struct EventRecord: Sendable, Equatable {
    public static let formatVersion: UInt8 = 2
    static let headerSize = 42
    public static let genesisHash = [UInt8](repeating: 0, count: 32)

    public var seq: UInt64
    public var recorded: Timestamp
    /// Whether this is the last event of the batch it was committed in.
    public var endsBatch: Bool
    public var hash: [UInt8]
    /// Canonical JSON of the event's normalized document.
    public var body: [UInt8]
    /// The typed event (`EventCodec`); empty in a format 1 record.
    public var typed: [UInt8]
    public var format: UInt8

    public init(seq: UInt64, recorded: Timestamp, endsBatch: Bool, hash: [UInt8], body: [UInt8],
                typed: [UInt8], format: UInt8 = EventRecord.formatVersion) {
        self.seq = seq
        self.recorded = recorded
        self.endsBatch = endsBatch
        self.hash = hash
        self.body = body
        self.typed = typed
        self.format = format
    }

    /// Builds the record for `event` (canonical JSON `body`) at `seq`, chaining it to `previousHash`.
    public init(seq: UInt64, recorded: Timestamp, endsBatch: Bool, body: [UInt8], typed: [UInt8], previousHash: [UInt8]) {
        self.init(seq: seq, recorded: recorded, endsBatch: endsBatch, hash: [], body: body, typed: typed)
        self.hash = EventRecord.chainHash(previous: previousHash, seq: seq, hashedBytes: hashedBytes)
    }

    /// The bytes covered by the hash after the previous hash and `seq`.
    var hashedBytes: [UInt8] {
        var out: [UInt8] = [flags]
        out.reserveCapacity(1 + 8 + 4 + body.count + typed.count)
        out += UInt64(bitPattern: recorded.microseconds).bigEndianBytes
        if format >= 2 {
            out += UInt32(body.count).bigEndianBytes
            out += body
            out += typed
        } else {
            out += body
        }
        return out
    }

    var flags: UInt8 { endsBatch ? 1 : 0 }

    public static func chainHash(previous: [UInt8], seq: UInt64, hashedBytes: [UInt8]) -> [UInt8] {
        Digest.sha256(previous, seq.bigEndianBytes, hashedBytes)
    }

    public var encoded: [UInt8] {
        var out: [UInt8] = [format, flags]
        out.reserveCapacity(EventRecord.headerSize + 4 + body.count + typed.count)
        out += hash
        out += UInt64(bitPattern: recorded.microseconds).bigEndianBytes
        if format >= 2 { out += UInt32(body.count).bigEndianBytes }
        out += body
        if format >= 2 { out += typed }
        return out
    }

    /// The canonical JSON inside a stored record, or nil when the bytes are not a record.
    static func jsonBody(of bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard bytes.count > headerSize else { return nil }
        switch bytes[0] {
        case 1:
            return UnsafeRawBufferPointer(rebasing: bytes[headerSize...])
        case 2:
            guard bytes.count >= headerSize + 4 else { return nil }
            let length = Int(UInt32(bigEndianBytes: UnsafeRawBufferPointer(rebasing: bytes[headerSize..<(headerSize + 4)])))
            guard bytes.count >= headerSize + 4 + length else { return nil }
            return UnsafeRawBufferPointer(rebasing: bytes[(headerSize + 4)..<(headerSize + 4 + length)])
        default:
            return nil
        }
    }

    /// Decodes a stored value; throws `LedgerError.corrupt` naming `seq` when it is not a record.
    public init(seq: UInt64, decoding bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count > EventRecord.headerSize else {
            throw LedgerError.corrupt(seq: seq, reason: "record is \(bytes.count) bytes, shorter than its header")
        }
        let format = bytes[0]
        guard format == 1 || format == 2 else {
            throw LedgerError.corrupt(seq: seq, reason: "record format \(format) is not one this ledger reads (1, 2)")
        }
        guard bytes[1] & ~1 == 0 else {
            throw LedgerError.corrupt(seq: seq, reason: "record flags \(bytes[1]) are not ones this ledger knows")
        }
        guard let json = EventRecord.jsonBody(of: bytes) else {
            throw LedgerError.corrupt(seq: seq, reason: "record's JSON length runs past its end")
        }
        let recorded = Int64(bitPattern: UInt64(bigEndianBytes: UnsafeRawBufferPointer(rebasing: bytes[34..<42])))
        let typedStart = format >= 2 ? EventRecord.headerSize + 4 + json.count : bytes.count
        self.init(seq: seq, recorded: Timestamp(microseconds: recorded), endsBatch: bytes[1] & 1 == 1,
                  hash: Array(bytes[2..<34]), body: Array(json), typed: Array(bytes[typedStart...]), format: format)
    }

    /// The id and typed content, for folds: from the typed part without parsing JSON, or (format
    /// 1) from the JSON.
    public func typedEvent() throws -> (id: UUID, payload: Event.Payload) {
        guard format >= 2 else {
            let event = try event()
            return (event.id, event.payload)
        }
        let decoded = typed.withUnsafeBytes { bytes in Result { () throws(EventCodec.Malformed) in try EventCodec.decode(bytes) } }
        switch decoded {
        case .success(let event): return event
        case .failure(let error):
            throw LedgerError.corrupt(seq: seq, reason: "stored typed event is not valid: \(error.description)")
        }
    }

    /// The event as a fold takes it.
    public func loggedEvent() throws -> LoggedEvent {
        let (id, payload) = try typedEvent()
        return LoggedEvent(seq: seq, recorded: recorded, id: id, payload: payload)
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

/// A stored record read in place, for folds that walk the log: header fields and the typed
/// part without copying the record.
struct RawRecord {
    let seq: UInt64
    let bytes: UnsafeRawBufferPointer

    /// Nil when `bytes` is too short to be a record; `loggedEvent` names the problem.
    init(seq: UInt64, _ bytes: UnsafeRawBufferPointer) {
        self.seq = seq
        self.bytes = bytes
    }

    var isWellFormed: Bool { bytes.count > EventRecord.headerSize && (bytes[0] == 1 || bytes[0] == 2) }
    var endsBatch: Bool { bytes[1] & 1 == 1 }
    var recorded: Timestamp {
        Timestamp(microseconds: Int64(bitPattern: UInt64(bigEndianBytes: UnsafeRawBufferPointer(rebasing: bytes[34..<42]))))
    }

    /// The typed part of a format 2 record.
    var typed: UnsafeRawBufferPointer? {
        guard bytes[0] == 2, let json = EventRecord.jsonBody(of: bytes) else { return nil }
        let start = EventRecord.headerSize + 4 + json.count
        return UnsafeRawBufferPointer(rebasing: bytes[start...])
    }

    func loggedEvent() throws -> LoggedEvent {
        guard isWellFormed, let typed else {
            return try EventRecord(seq: seq, decoding: bytes).loggedEvent()
        }
        switch Result(catching: { () throws(EventCodec.Malformed) in try EventCodec.decode(typed) }) {
        case .success(let (id, payload)):
            return LoggedEvent(seq: seq, recorded: recorded, id: id, payload: payload)
        case .failure(let error):
            throw LedgerError.corrupt(seq: seq, reason: "stored typed event is not valid: \(error.description)")
        }
    }

    /// What a fold scoped to some users needs to know before decoding: the user a sample,
    /// grant, revoke or profile concerns (as UTF-8), or the target of a correction. Nil for
    /// a format 1 record, which must be decoded.
    enum Subject {
        case user(UnsafeRawBufferPointer)
        case target(UUID)
    }

    var subject: Subject? {
        guard isWellFormed, let typed, typed.count >= 17 else { return nil }
        func string(at offset: Int) -> UnsafeRawBufferPointer? {
            guard typed.count >= offset + 4 else { return nil }
            let length = Int(UInt32(bigEndianBytes: UnsafeRawBufferPointer(rebasing: typed[offset..<(offset + 4)])))
            guard typed.count >= offset + 4 + length else { return nil }
            return UnsafeRawBufferPointer(rebasing: typed[(offset + 4)..<(offset + 4 + length)])
        }
        switch typed[16] {
        case 1:  // id, kind, type, value, start, end, presence mask, then the user
            return string(at: 16 + 1 + 1 + 8 + 8 + 8 + 1).map(Subject.user)
        case 2:
            guard typed.count >= 33 else { return nil }
            let t = typed
            return .target(UUID(uuid: (t[17], t[18], t[19], t[20], t[21], t[22], t[23], t[24],
                                       t[25], t[26], t[27], t[28], t[29], t[30], t[31], t[32])))
        case 3, 4, 5:
            return string(at: 17).map(Subject.user)
        default:
            return nil
        }
    }
}
