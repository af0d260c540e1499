import Foundation
import LedgerCore
import Projections

/// The stored form of one event: the value under its `seq` in the `events` database.
///
/// Format 3, written by this release (documented in docs/STORAGE.md; formats 1 and 2 are still
/// read):
///
/// | bytes      | field                                                    |
/// |------------|----------------------------------------------------------|
/// | 0          | format version, `3`                                      |
/// | 1          | flags: bit 0 set on the last event of a committed batch  |
/// | 2..<34     | SHA-256 chain hash                                       |
/// | 34..<42    | `recorded`, microseconds since 1970 UTC, big-endian i64  |
/// | 42..<46    | length of the JSON, big-endian u32                       |
/// | 46..<46+n  | the event's canonical JSON (sorted keys, no spaces)      |
/// | 46+n...    | the typed event in `EventCodec`'s binary layout          |
///
/// Format 2 has the same layout; format 1 has no length and no typed part: byte 42 on is the JSON.
///
/// Format 3: `hash = SHA-256(previous hash ‖ seq as 8 big-endian bytes ‖ bytes 0 and 1 ‖ bytes
/// 34..<42 ‖ SHA-256(bytes 42…))`: every byte but the hash itself is covered, the format too, so
/// that no record of another format can stand in for one; its inner digest (`ContentDigest`) may
/// be made before the event is appended (`PreparedEvent.contentDigest`). Formats 1 and 2: `SHA-256(previous hash ‖ seq ‖ bytes 1 and
/// 34…)`. The hash before `seq` 1 is 32 zero bytes.
/// The typed part is what folds read (no JSON parse, no second validation); `verify` checks
/// that it says exactly what the JSON says. Batch ends are part of the log because projections
/// are flushed once per batch: a rebuild or replay flushes at the same places and so
/// reproduces the live rows exactly.
public struct EventRecord: Sendable, Equatable {
    public static let formatVersion: UInt8 = 3
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
        let hash = EventRecord.chained(seq: seq, recorded: recorded, endsBatch: endsBatch, body: body, typed: typed,
                                       previousHash: previousHash).hash
        self.init(seq: seq, recorded: recorded, endsBatch: endsBatch, hash: hash, body: body, typed: typed)
    }

    /// The stored bytes of a new record chained to `previousHash`, and its hash: the bytes are
    /// built once, for the hash and for storing (the append path).
    static func chained(seq: UInt64, recorded: Timestamp, endsBatch: Bool, body: [UInt8], typed: [UInt8],
                        previousHash: [UInt8]) -> (bytes: [UInt8], hash: [UInt8]) {
        var bytes = EventRecord(seq: seq, recorded: recorded, endsBatch: endsBatch, hash: genesisHash,
                                body: body, typed: typed).encoded
        let hash = chainHash(previous: previousHash, seq: seq, stored: bytes)
        bytes.replaceSubrange(2..<34, with: hash)
        return (bytes, hash)
    }

    var flags: UInt8 { endsBatch ? 1 : 0 }

    /// The size of the format 3 record of a `body` and a `typed` event of these sizes.
    static func storedSize(body: Int, typed: Int) -> Int { headerSize + 4 + body + typed }

    /// Writes the format 3 record that `chained` makes into `out` (`storedSize` bytes, the
    /// space LMDB reserved for it), and its chain hash into `previousHash`, which holds the
    /// previous record's: the bytes `chained` returns, without the arrays it builds them in
    /// (an append writes every record this way, and `perf` put a tenth of an import's
    /// appending thread in those arrays). `content` is `ContentDigest(body:typed:)`, made
    /// with the event or by the append (`PreparedEvent.contentDigest`).
    static func writeChained(into out: UnsafeMutableRawBufferPointer, seq: UInt64, recorded: Timestamp, endsBatch: Bool,
                             body: [UInt8], typed: [UInt8], content: ContentDigest, previousHash: inout [UInt8]) {
        precondition(out.count == storedSize(body: body.count, typed: typed.count) && previousHash.count == 32)
        out[0] = formatVersion
        out[1] = endsBatch ? 1 : 0
        out.storeBytes(of: UInt64(bitPattern: recorded.microseconds).bigEndian, toByteOffset: 34, as: UInt64.self)
        out.storeBytes(of: UInt32(body.count).bigEndian, toByteOffset: headerSize, as: UInt32.self)
        body.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: out[(headerSize + 4)...]).copyMemory(from: $0) }
        typed.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: out[(headerSize + 4 + body.count)...]).copyMemory(from: $0) }
        let stored = UnsafeRawBufferPointer(out)
        assert(content == ContentDigest(content: UnsafeRawBufferPointer(rebasing: stored[headerSize...])),
               "the prepared event's content digest is not its record's")
        previousHash.withUnsafeMutableBytes { chain in
            chainHash(previous: UnsafeRawBufferPointer(chain), seq: seq, stored: stored, content: content,
                      into: UnsafeMutableRawBufferPointer(rebasing: out[2..<34]))
            chain.copyMemory(from: UnsafeRawBufferPointer(rebasing: stored[2..<34]))
        }
    }

    /// The chain hash of this record after `previous` (by its format, which `verify` recomputes).
    public func chainHash(previous: [UInt8]) -> [UInt8] {
        EventRecord.chainHash(previous: previous, seq: seq, stored: encoded)
    }

    /// The chain hash over a record's stored bytes: its flags (byte 1) and everything after
    /// the hash (byte 34 on).
    private static func chainHash(previous: [UInt8], seq: UInt64, stored: [UInt8]) -> [UInt8] {
        stored.withUnsafeBytes { chainHash(previous: previous, seq: seq, stored: $0) }
    }

    static func chainHash(previous: [UInt8], seq: UInt64, stored record: UnsafeRawBufferPointer) -> [UInt8] {
        var hash = [UInt8](repeating: 0, count: 32)
        previous.withUnsafeBytes { previous in
            hash.withUnsafeMutableBytes { chainHash(previous: previous, seq: seq, stored: record, into: $0) }
        }
        return hash
    }

    /// The one definition of what the chain hash covers, written to `digest`, by the record's
    /// format (byte 0). Format 3: SHA-256 of `previous` ‖ `seq` ‖ the record's format and flags
    /// (bytes 0 and 1) ‖ `recorded` (bytes 34..<42) ‖ the SHA-256 of its content (bytes 42 on).
    /// Formats 1 and 2: SHA-256 of `previous` ‖ `seq` ‖ the flags ‖ the bytes from 34 on. `digest`
    /// may lie in the record's own hash field (bytes 2..<34), which is not hashed. Callers have
    /// checked the format: any other is hashed as format 3 is, and so matches no stored hash.
    static func chainHash(previous: UnsafeRawBufferPointer, seq: UInt64, stored record: UnsafeRawBufferPointer,
                          into digest: UnsafeMutableRawBufferPointer) {
        switch record[0] {
        case 1, 2:
            break
        default:
            let content = ContentDigest(content: UnsafeRawBufferPointer(rebasing: record[headerSize...]))
            return chainHash(previous: previous, seq: seq, stored: record, content: content, into: digest)
        }
        withUnsafeBytes(of: seq.bigEndian) { seq in
            Digest.sha256(into: digest) { update in
                update(previous)
                update(seq)
                update(UnsafeRawBufferPointer(rebasing: record[1..<2]))
                update(UnsafeRawBufferPointer(rebasing: record[34...]))
            }
        }
    }

    /// A format 3 record's chain hash, its content's digest given.
    private static func chainHash(previous: UnsafeRawBufferPointer, seq: UInt64, stored record: UnsafeRawBufferPointer,
                                  content: ContentDigest, into digest: UnsafeMutableRawBufferPointer) {
        withUnsafeBytes(of: seq.bigEndian) { seq in
            content.withUnsafeBytes { content in
                Digest.sha256(into: digest) { update in
                    update(previous)
                    update(seq)
                    update(UnsafeRawBufferPointer(rebasing: record[0..<2]))
                    update(UnsafeRawBufferPointer(rebasing: record[34..<headerSize]))
                    update(content)
                }
            }
        }
    }

    /// `recorded`, then (formats 2 and 3) the JSON's length, the JSON and the typed event, or (format
    /// 1) the JSON, after the format, the flags and the hash.
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

    /// The JSON and (formats 2 and 3) the typed event inside a stored record; nil when the bytes are
    /// not a record of a format this ledger reads.
    static func sections(of bytes: UnsafeRawBufferPointer) -> (json: UnsafeRawBufferPointer, typed: UnsafeRawBufferPointer?)? {
        guard bytes.count > headerSize else { return nil }
        switch bytes[0] {
        case 1:
            return (UnsafeRawBufferPointer(rebasing: bytes[headerSize...]), nil)
        case 2, 3:
            guard bytes.count >= headerSize + 4 else { return nil }
            let length = Int(UInt32(bigEndianBytes: UnsafeRawBufferPointer(rebasing: bytes[headerSize...])))
            let typedStart = headerSize + 4 + length
            guard bytes.count >= typedStart else { return nil }
            return (UnsafeRawBufferPointer(rebasing: bytes[(headerSize + 4)..<typedStart]),
                    UnsafeRawBufferPointer(rebasing: bytes[typedStart...]))
        default:
            return nil
        }
    }

    /// Decodes a typed event, naming `seq` when it is not one.
    static func decodeTyped(_ typed: UnsafeRawBufferPointer, seq: UInt64) throws -> (id: UUID, payload: Event.Payload) {
        switch Result(catching: { () throws(EventCodec.Malformed) in try EventCodec.decode(typed) }) {
        case .success(let event): return event
        case .failure(let error):
            throw LedgerError.corrupt(seq: seq, reason: "stored typed event is not valid: \(error.description)")
        }
    }

    /// Decodes a stored value; throws `LedgerError.corrupt` naming `seq` when it is not a record.
    public init(seq: UInt64, decoding bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count > EventRecord.headerSize else {
            throw LedgerError.corrupt(seq: seq, reason: "record is \(bytes.count) bytes, shorter than its header")
        }
        let format = bytes[0]
        guard (1...3).contains(format) else {
            throw LedgerError.corrupt(seq: seq, reason: "record format \(format) is not one this ledger reads (1 to 3)")
        }
        guard bytes[1] & ~1 == 0 else {
            throw LedgerError.corrupt(seq: seq, reason: "record flags \(bytes[1]) are not ones this ledger knows")
        }
        guard let (json, typed) = EventRecord.sections(of: bytes) else {
            throw LedgerError.corrupt(seq: seq, reason: "record's JSON length runs past its end")
        }
        let recorded = Int64(bitPattern: UInt64(bigEndianBytes: UnsafeRawBufferPointer(rebasing: bytes[34..<42])))
        self.init(seq: seq, recorded: Timestamp(microseconds: recorded), endsBatch: bytes[1] & 1 == 1,
                  hash: Array(bytes[2..<34]), body: Array(json), typed: typed.map(Array.init) ?? [], format: format)
    }

    /// The id and typed content, for folds: from the typed part without parsing JSON, or (format
    /// 1) from the JSON.
    public func typedEvent() throws -> (id: UUID, payload: Event.Payload) {
        guard format >= 2 else {
            let event = try event()
            return (event.id, event.payload)
        }
        return try typed.withUnsafeBytes { try EventRecord.decodeTyped($0, seq: seq) }
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

/// The hash chain walked from `seq` 1, one record after another (`verify`, and `replay`, which
/// shows the hash of the seq it stops at: an auditor compares it with one kept, and it must
/// vouch for every event folded, not only for its own record). Each record must be the next
/// seq, hash to its stored hash from the one before, and not go back in time.
struct ChainWalk {
    private(set) var expected: UInt64 = 1
    private(set) var previousHash = EventRecord.genesisHash
    private(set) var lastRecorded: Timestamp?
    /// Whether hashes are recomputed; without, only the order of seqs and times is checked.
    let hashing: Bool
    /// With `checkingIDs`, each id must come once (appends admit it once; a copy of a record
    /// with a valid chain hash is otherwise counted twice). In memory: about 50 MB a million.
    private var seqOfID: [UUID: UInt64]?

    /// `capacity`: about how many records the walk will see (the head), so that the ids' table
    /// is made once at its size rather than grown and rehashed a score of times.
    init(hashing: Bool = true, checkingIDs: Bool = false, capacity: UInt64 = 0) {
        self.hashing = hashing
        seqOfID = checkingIDs ? Dictionary(minimumCapacity: Int(min(capacity, 1 << 28))) : nil
    }

    /// Checks that `id`, of the record at `seq`, came in no earlier record.
    mutating func checkID(_ id: UUID, at seq: UInt64) throws {
        if let earlier = seqOfID?.updateValue(seq, forKey: id) {
            throw EventLog.reusedID(id, at: seq, earlier: earlier)
        }
    }

    /// Checks the next record; `hash` computes its chain hash from the previous one.
    mutating func check(seq: UInt64, recorded: Timestamp, storedHash: [UInt8],
                        hash: ([UInt8]) -> [UInt8]) throws {
        guard seq >= expected else {
            throw LedgerError.corrupt(seq: seq, reason: "stored before seq \(expected), where the log \(expected == 1 ? "begins" : "goes on"): outside the hash chain")
        }
        guard seq == expected else {
            throw LedgerError.corrupt(seq: expected, reason: "missing from the log (the next stored seq is \(seq))")
        }
        let computed = hashing ? hash(previousHash) : storedHash
        guard computed == storedHash else { throw ChainWalk.altered(seq) }
        if let lastRecorded, recorded < lastRecorded {
            throw LedgerError.corrupt(seq: seq, reason: "'recorded' goes back in time")
        }
        previousHash = computed
        lastRecorded = recorded
        expected += 1
    }

    mutating func check(_ raw: RawRecord) throws {
        try check(seq: raw.seq, recorded: raw.recorded, storedHash: raw.hash) {
            EventRecord.chainHash(previous: $0, seq: raw.seq, stored: raw.bytes)
        }
        if seqOfID != nil, let header = raw.typed.flatMap(EventCodec.header(of:)) {
            try checkID(header.id, at: raw.seq)
        }
    }

    /// `check(_:)` but for the hash, which is left to the returned link (`ChainLink.check`):
    /// the walk goes on from the stored hash. Each link holds when every record's hash is what
    /// its bytes and the stored hash before it give, which is what the walk computes (the
    /// stored hashes of a chain that holds are the computed ones), so the first record whose
    /// link fails is the one `check` would name.
    mutating func checkDeferringHash(_ raw: RawRecord) throws -> ChainLink {
        let link = ChainLink(seq: raw.seq, previous: previousHash, stored: raw.hash, record: Array(raw.bytes))
        // The walk checks the hash once the seq is the one expected, and the time after it: a
        // record whose altered time goes back is named for its hash, as the walk names it.
        var hashReached = false
        do {
            try check(seq: raw.seq, recorded: raw.recorded, storedHash: link.stored) { _ in
                hashReached = true
                return link.stored
            }
        } catch let error where hashReached {
            try link.check()
            throw error
        }
        return link
    }

    static func altered(_ seq: UInt64) -> LedgerError {
        .corrupt(seq: seq, reason: "its hash does not match its content and the previous hash (the log was altered at or before this event's bytes); nothing is folded over it: 'ledger log --from \(seq) --limit 1' shows it as stored, and a backup made before the change ('ledger backup', or a copy kept) is the ledger to restore, since the log is never rewritten")
    }
}

/// One link of the hash chain, checked apart from the walk (`ChainWalk.checkDeferringHash`):
/// a record's bytes, copied out of the map, with its stored hash and the one before it.
struct ChainLink: Sendable {
    let seq: UInt64
    let previous: [UInt8]
    let stored: [UInt8]
    let record: [UInt8]

    /// Throws what `ChainWalk.check` throws for a record whose hash does not hold.
    func check() throws {
        let computed = record.withUnsafeBytes { EventRecord.chainHash(previous: previous, seq: seq, stored: $0) }
        guard computed == stored else { throw ChainWalk.altered(seq) }
    }

    /// `body`'s result; when it throws, `link`'s problem first if it has one: the walk checks a
    /// record's hash before its event is read, so a record altered into one that does not
    /// decode (or names an id the index lacks) is named for its hash, as the walk names it.
    static func first<T>(_ link: ChainLink?, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            try link?.check()
            throw error
        }
    }
}

/// A stored record read in place, for folds that walk the log: header fields and the typed
/// part without copying the record.
struct RawRecord {
    let seq: UInt64
    let bytes: UnsafeRawBufferPointer

    /// `bytes` need not be a record: `loggedEvent` names the problem.
    init(seq: UInt64, _ bytes: UnsafeRawBufferPointer) {
        self.seq = seq
        self.bytes = bytes
    }

    var isWellFormed: Bool { bytes.count > EventRecord.headerSize && (1...3).contains(bytes[0]) }
    var endsBatch: Bool { bytes[1] & 1 == 1 }
    var hash: [UInt8] { Array(bytes[2..<34]) }
    var recorded: Timestamp {
        Timestamp(microseconds: Int64(bitPattern: UInt64(bigEndianBytes: UnsafeRawBufferPointer(rebasing: bytes[34..<42]))))
    }

    /// The typed part of a format 2 or 3 record.
    var typed: UnsafeRawBufferPointer? { EventRecord.sections(of: bytes)?.typed }

    func loggedEvent() throws -> LoggedEvent {
        guard isWellFormed, let typed else {
            return try EventRecord(seq: seq, decoding: bytes).loggedEvent()
        }
        let (id, payload) = try EventRecord.decodeTyped(typed, seq: seq)
        return LoggedEvent(seq: seq, recorded: recorded, id: id, payload: payload)
    }

    /// Whom the event concerns, read without decoding it; nil for a format 1 record (decode it
    /// and ask its payload).
    var subject: EventSubject? { typed.flatMap(EventCodec.subject(of:)) }
}
