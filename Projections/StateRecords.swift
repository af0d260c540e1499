import Foundation
import LedgerCore

/// Keys of the state tables. A user is a u32 assigned in order of first appearance in the log,
/// so the same log gives the same keys on every machine (and names of up to 1 KiB never meet
/// LMDB's 511-byte key limit).
public enum StateKey {
    public static func user(_ id: UInt32) -> [UInt8] {
        var writer = ByteWriter(capacity: 4)
        writer.u32(id)
        return writer.bytes
    }

    public static func userName(_ name: String) -> [UInt8] { Digest.sha256(Array(name.utf8)) }

    /// user ‖ type: the prefix of every day key of that user and type.
    public static func userType(_ user: UInt32, _ type: QuantityType) -> [UInt8] {
        StateKey.user(user) + [type.code]
    }

    /// user ‖ type ‖ day, with the day as days since 1970 offset by 2^31 so it sorts unsigned.
    public static func day(_ user: UInt32, _ type: QuantityType, _ day: Int) -> [UInt8] {
        var writer = ByteWriter(capacity: 9)
        writer.u32(user)
        writer.u8(type.code)
        writer.u32(UInt32(bitPattern: Int32(day)) ^ 0x8000_0000)
        return writer.bytes
    }

    /// Splits a day key back into its parts.
    public static func parseDay(_ key: [UInt8]) throws(DamagedState) -> (user: UInt32, type: QuantityType, day: Int) {
        try key.withUnsafeBytes { bytes in Result { () throws(DamagedState) in try parseDay(bytes) } }.get()
    }

    /// `parseDay` of a key read in place.
    public static func parseDay(_ key: UnsafeRawBufferPointer) throws(DamagedState) -> (user: UInt32, type: QuantityType, day: Int) {
        guard key.count == 9 else { throw DamagedState(reason: "a stored day key is \(key.count) bytes, not 9") }
        guard let type = QuantityType(code: key[4]) else { throw DamagedState(reason: "a stored day key names type code \(key[4])") }
        let day = Int(Int32(bitPattern: UInt32(bigEndian: key.loadUnaligned(fromByteOffset: 5, as: UInt32.self)) ^ 0x8000_0000))
        guard ByteReader.days.contains(day) else { throw DamagedState(reason: "a stored day key holds day \(day)") }
        return (UInt32(bigEndian: key.loadUnaligned(as: UInt32.self)), type, day)
    }

    /// day key ‖ chunk number (u32): the key of one chunk of a day's bucket (`Bucket`).
    public static func bucketChunk(_ day: [UInt8], _ chunk: UInt32) -> [UInt8] {
        var writer = ByteWriter(capacity: day.count + 4)
        writer.raw(day)
        writer.u32(chunk)
        return writer.bytes
    }

    /// Splits a bucket chunk's key back into its day's parts and the chunk number.
    public static func parseBucketChunk(_ key: [UInt8]) throws(DamagedState) -> (user: UInt32, type: QuantityType, day: Int, chunk: UInt32) {
        guard key.count == 13 else { throw DamagedState(reason: "a stored bucket key is \(key.count) bytes, not 13") }
        let (user, type, day) = try parseDay(Array(key[..<9]))
        let chunk = key[9...].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        // Each chunk takes a number one above the last, and a new one needs a new sample:
        // the last number is never reached, and a key holding it is damage (the next chunk's
        // number would overflow).
        guard chunk < .max else { throw DamagedState(reason: "a stored bucket key holds chunk number \(chunk)") }
        return (user, type, day, chunk)
    }

    /// A sample's seq (8 bytes, big-endian): the key of its state.
    public static func position(_ seq: UInt64) -> [UInt8] {
        var writer = ByteWriter(capacity: 8)
        writer.u64(seq)
        return writer.bytes
    }

    /// user ‖ a sample's position: its key in `userSamples`.
    public static func userPosition(_ user: UInt32, _ position: [UInt8]) -> [UInt8] {
        var writer = ByteWriter(capacity: 4 + position.count)
        writer.u32(user)
        writer.raw(position)
        return writer.bytes
    }

    public static func grant(_ user: UInt32, client: String) -> [UInt8] {
        StateKey.user(user) + Digest.sha256(Array(client.utf8))
    }

    public static func sync(user: String, source: String, syncId: String) -> [UInt8] {
        Digest.sha256(Array(user.utf8) + [0] + Array(source.utf8) + [0] + Array(syncId.utf8))
    }
}

/// What the fold knows of a user: profile and the order in which sources first appeared.
struct UserState: Equatable {
    var name: String
    var zone: String?
    /// Per type, the latest priority list (highest first).
    var priority: [QuantityType: NameIndex] = [:]
    /// Per type, source names in order of their first sample in the log.
    var sources: [QuantityType: NameIndex] = [:]
    /// Every zone this user's samples were bucketed in. While there is one, samples on
    /// different local days cannot overlap in time, and each day is merged on its own.
    var zones: [String] = []

    var hasMixedZones: Bool { zones.count > 1 }

    var encoded: [UInt8] {
        var writer = ByteWriter()
        writer.string(name)
        writer.string(zone ?? "")
        for type in QuantityType.allCases {
            let list = priority[type]
            writer.u32(list.map { UInt32($0.count) + 1 } ?? 0)  // 0: no list given
            list?.names.forEach { writer.string($0) }
            let seen = sources[type]?.names ?? []
            writer.u32(UInt32(seen.count))
            seen.forEach { writer.string($0) }
        }
        writer.u32(UInt32(zones.count))
        zones.forEach { writer.string($0) }
        return writer.bytes
    }

    init(name: String) { self.name = name }

    init(decoding bytes: [UInt8]) throws(DamagedState) {
        var reader = ByteReader(bytes)
        name = try reader.string()
        let zoneText = try reader.string()
        zone = zoneText.isEmpty ? nil : zoneText
        for type in QuantityType.allCases {
            // A list's count is stored plus one (0: no list given).
            let listCount = try reader.count(ofItemsOfAtLeast: 4)
            if listCount > 0 { priority[type] = NameIndex(try reader.items(listCount - 1) { (r) throws(DamagedState) in try r.string() }) }
            let seenCount = try reader.count(ofItemsOfAtLeast: 4)
            if seenCount > 0 { sources[type] = NameIndex(try reader.items(seenCount) { (r) throws(DamagedState) in try r.string() }) }
        }
        zones = try reader.items(try reader.count(ofItemsOfAtLeast: 4)) { (r) throws(DamagedState) in try r.string() }
    }

    /// Lower is higher priority: listed sources by their place in the list, then the others
    /// by first appearance.
    func rank(of source: String, type: QuantityType) -> Int {
        let list = priority[type] ?? NameIndex()
        if let index = list.position(of: source) { return index }
        let seen = sources[type] ?? NameIndex()
        return list.count + (seen.position(of: source) ?? seen.count)
    }
}

/// A sample that currently counts, as the fold needs it.
struct SampleRecord: Equatable {
    var id: UUID
    var user: UInt32
    var type: QuantityType
    var source: String
    /// As given (after any amendment), in `unit`.
    var value: Double
    var unit: String
    var start: Timestamp
    var end: Timestamp
    /// The sample's own zone, if it has one.
    var zone: String?
    /// Days (since 1970, local to the zone used) whose buckets hold this sample: consecutive,
    /// as a sample's interval is (a range, not a list: a list was an allocation per sample).
    var days: Range<Int>

    var canonicalValue: Double { value * (type.factor(from: unit) ?? 1) }

    var encoded: [UInt8] { ByteCursor.exactly(encodedCount) { encode(into: &$0) } }

    /// The size of `encoded`.
    var encodedCount: Int {
        16 + 4 + 1 + 4 + source.utf8.count + 8 + 4 + unit.utf8.count + 16 + 4 + (zone?.utf8.count ?? 0) + 4 + 8 * days.count
    }

    /// Writes `encoded`'s bytes (`encodedCount` of them): every sample folded is stored so.
    func encode(into out: inout ByteCursor) {
        out.uuid(id)
        out.u32(user)
        out.u8(type.code)
        out.string(source)
        out.f64(value)
        out.string(unit)
        out.i64(start.microseconds)
        out.i64(end.microseconds)
        out.string(zone ?? "")
        out.u32(UInt32(days.count))
        for day in days { out.i64(Int64(day)) }
    }

    init(id: UUID, user: UInt32, type: QuantityType, source: String, value: Double, unit: String,
         start: Timestamp, end: Timestamp, zone: String?, days: Range<Int>) {
        self.id = id
        self.user = user
        self.type = type
        self.source = source
        self.value = value
        self.unit = unit
        self.start = start
        self.end = end
        self.zone = zone
        self.days = days
    }

    init(decoding bytes: [UInt8]) throws(DamagedState) {
        var reader = ByteReader(bytes)
        id = try reader.uuid()
        user = try reader.u32()
        type = try reader.type()
        source = try reader.string()
        value = try reader.f64()
        unit = try reader.string()
        start = Timestamp(microseconds: try reader.instant())
        end = Timestamp(microseconds: try reader.instant())
        let zoneText = try reader.string()
        zone = zoneText.isEmpty ? nil : zoneText
        let count = try reader.count(ofItemsOfAtLeast: 8)
        let first = count == 0 ? 0 : try reader.day()
        for offset in 1..<max(1, count) {
            guard try reader.day() == first + offset else { throw DamagedState(reason: "a stored sample's days are not consecutive") }
        }
        days = first..<(first + count)
    }
}

/// The samples touching one user, type and day, as the fold keeps them: in chunks, each stored
/// under the day key ‖ its number (`StateKey.bucketChunk`) and of at most `chunkBytes` encoded
/// bytes (a chunk holds at least one entry). A sample is added to the last chunk, so a commit
/// rewrites one chunk, not the day: stored whole, a day of a watch's per-minute samples grew to
/// 1,440 entries and 82 KB (21 LMDB overflow pages), written again by every commit that day.
/// Chunks depend only on the order of the events, so a rebuild makes the same ones. A chunk
/// emptied by corrections, superseded versions or a zone change is deleted, but one left part
/// full is not merged with its neighbours: a day's chunks can outnumber what its samples need.
struct Bucket {
    struct Chunk {
        var number: UInt32
        var entries: [BucketEntry]
        /// Its encoded size.
        var bytes: Int
    }

    /// Small enough that a chunk sits in an LMDB leaf page (4 KiB) beside its neighbours,
    /// never in overflow pages of its own: about 18 entries.
    static let chunkBytes = 1_024

    private(set) var chunks: [Chunk] = []
    /// The numbers of the chunks changed since the bucket was read: what `write` puts (or
    /// deletes, when they emptied).
    private var changed: Set<UInt32> = []
    /// The chunk `append` last marked changed: appends fill the last chunk, so it is nearly
    /// always this one, and `changed` is not hashed into again.
    private var lastChanged: UInt32?

    init() {}

    /// The stored chunks of the day `dayKey`.
    init(reading dayKey: [UInt8], from store: any StateStore) throws {
        try store.scan(.buckets, prefix: dayKey, reverse: false) { key, value in
            chunks.append(Chunk(number: try StateKey.parseBucketChunk(key).chunk,
                                entries: try BucketEntry.decode(value), bytes: value.count))
            return true
        }
    }

    var isEmpty: Bool { chunks.isEmpty }

    /// Every entry, chunk by chunk.
    var entries: [BucketEntry] {
        chunks.count == 1 ? chunks[0].entries : chunks.flatMap(\.entries)
    }

    mutating func append(_ entry: BucketEntry) {
        let size = entry.encodedSize
        if let last = chunks.indices.last, chunks[last].bytes + size <= Bucket.chunkBytes {
            chunks[last].entries.append(entry)
            chunks[last].bytes += size
            let number = chunks[last].number
            if lastChanged != number {
                changed.insert(number)
                lastChanged = number
            }
        } else {
            let number = chunks.last.map { $0.number + 1 } ?? 0
            // Room for as many entries as a chunk takes of this size: grown from one, its list
            // was copied five times on the way (1 % of an import's appending thread).
            var entries: [BucketEntry] = []
            entries.reserveCapacity(max(1, (Bucket.chunkBytes - 4) / size))
            entries.append(entry)
            chunks.append(Chunk(number: number, entries: entries, bytes: 4 + size))
            changed.insert(number)
        }
    }

    /// Takes out the entries of sample `id`; returns one of them (nil when there was none).
    @discardableResult
    mutating func remove(id: UUID) -> BucketEntry? {
        var removed: BucketEntry?
        for index in chunks.indices.reversed() {
            let before = chunks[index].entries.count
            if removed == nil { removed = chunks[index].entries.last { $0.id == id } }
            chunks[index].entries.removeAll { $0.id == id }
            guard chunks[index].entries.count != before else { continue }
            changed.insert(chunks[index].number)
            chunks[index].bytes = 4 + chunks[index].entries.reduce(0) { $0 + $1.encodedSize }
            if chunks[index].entries.isEmpty { chunks.remove(at: index) }
        }
        return removed
    }

    /// Writes the changed chunks under `dayKey`, and deletes those that emptied.
    func write(_ dayKey: [UInt8], to store: any StateStore) throws {
        for number in changed.sorted() {
            let key = StateKey.bucketChunk(dayKey, number)
            if let chunk = chunks.first(where: { $0.number == number }) {
                try store.put(.buckets, key, count: BucketEntry.encodedCount(chunk.entries), cursor: { BucketEntry.encode(chunk.entries, into: &$0) })
            } else {
                try store.delete(.buckets, key)
            }
        }
    }
}

/// One sample's presence in one day's bucket: what the merge needs, nothing more.
struct BucketEntry: Equatable {
    var id: UUID
    var source: String
    /// The zone the sample's days are counted in (its own, else its user's, else the default).
    var zone: String
    /// The whole sample's interval and canonical value (the day's share is computed from them).
    var start: Int64
    var end: Int64
    var value: Double

    /// Its size in `encode`'s form.
    var encodedSize: Int { 16 + 8 + source.utf8.count + zone.utf8.count + 24 }

    static func encode(_ entries: [BucketEntry]) -> [UInt8] {
        ByteCursor.exactly(encodedCount(entries)) { encode(entries, into: &$0) }
    }

    /// The size of `encode(entries)`.
    static func encodedCount(_ entries: [BucketEntry]) -> Int { 4 + entries.reduce(0) { $0 + $1.encodedSize } }

    /// Writes `encode(entries)`'s bytes.
    static func encode(_ entries: [BucketEntry], into out: inout ByteCursor) {
        out.u32(UInt32(entries.count))
        for entry in entries {
            out.uuid(entry.id)
            out.string(entry.source)
            out.string(entry.zone)
            out.i64(entry.start)
            out.i64(entry.end)
            out.f64(entry.value)
        }
    }

    static func decode(_ bytes: [UInt8]) throws(DamagedState) -> [BucketEntry] {
        var reader = ByteReader(bytes)
        var source: ByteReader.ReadString?, zone: ByteReader.ReadString?
        return try reader.items(try reader.count(ofItemsOfAtLeast: 48)) { (r) throws(DamagedState) in
            BucketEntry(id: try r.uuid(), source: try r.string(reusing: &source), zone: try r.string(reusing: &zone),
                        start: try r.instant(), end: try r.instant(), value: try r.f64())
        }
    }

    /// `decode(bytes).map(\.end).max()` without making the entries (no strings): what
    /// `last-known` needs from each recent bucket after every batch.
    static func latestEnd(_ bytes: [UInt8]) throws(DamagedState) -> Int64? {
        try latestEndAndCount(bytes).end
    }

    /// `latestEnd`, and how many entries end then.
    static func latestEndAndCount(_ bytes: [UInt8]) throws(DamagedState) -> (end: Int64?, count: Int) {
        var reader = ByteReader(bytes)
        var latest: Int64?
        var count = 0
        for _ in 0..<(try reader.count(ofItemsOfAtLeast: 48)) {
            try reader.skip(16)
            try reader.skip(Int(try reader.u32()))
            try reader.skip(Int(try reader.u32()))
            try reader.skip(8)
            let end = try reader.instant()
            try reader.skip(8)
            if end > (latest ?? .min) {
                latest = end
                count = 1
            } else if end == latest {
                count += 1
            }
        }
        return (latest, count)
    }
}

/// A `daily` row's numbers.
struct DailyValue: Equatable {
    var value: Double
    var samples: Int
    var sources: Int

    var encoded: [UInt8] {
        var writer = ByteWriter()
        writer.f64(value)
        writer.u32(UInt32(samples))
        writer.u32(UInt32(sources))
        return writer.bytes
    }

    init(value: Double, samples: Int, sources: Int) {
        self.value = value
        self.samples = samples
        self.sources = sources
    }

    init(decoding bytes: [UInt8]) throws(DamagedState) {
        self = try bytes.withUnsafeBytes { raw in Result { () throws(DamagedState) in try DailyValue(decoding: raw) } }.get()
    }

    /// Decodes a value read in place.
    init(decoding bytes: UnsafeRawBufferPointer) throws(DamagedState) {
        guard bytes.count == 16 else { throw DamagedState(reason: "a stored daily value is \(bytes.count) bytes, not 16") }
        value = Double(bitPattern: UInt64(bigEndian: bytes.loadUnaligned(as: UInt64.self)))
        samples = Int(UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
        sources = Int(UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: 12, as: UInt32.self)))
    }
}

/// One source's numbers in a `per-source` row.
struct PerSourceValue: Equatable {
    var source: String
    var value: Double
    var samples: Int

    /// Sources compare by their bytes (`sameName`): the synthesized `==` would call two
    /// spellings of one name equal, and a row would keep the old spelling.
    static func == (a: PerSourceValue, b: PerSourceValue) -> Bool {
        sameName(a.source, b.source) && a.value == b.value && a.samples == b.samples
    }

    static func encode(_ values: [PerSourceValue]) -> [UInt8] {
        var writer = ByteWriter()
        writer.u32(UInt32(values.count))
        for value in values {
            writer.string(value.source)
            writer.f64(value.value)
            writer.u32(UInt32(value.samples))
        }
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws(DamagedState) -> [PerSourceValue] {
        var reader = ByteReader(bytes)
        return try reader.items(try reader.count(ofItemsOfAtLeast: 16)) { (r) throws(DamagedState) in
            PerSourceValue(source: try r.string(), value: try r.f64(), samples: Int(try r.u32()))
        }
    }
}

/// A `last-known` row's numbers.
struct LastKnownValue: Equatable {
    var day: Int
    var value: Double
    var latestSampleEnd: Int64
    var seq: UInt64
    var recorded: Int64

    var encoded: [UInt8] {
        var writer = ByteWriter()
        writer.i64(Int64(day))
        writer.f64(value)
        writer.i64(latestSampleEnd)
        writer.u64(seq)
        writer.i64(recorded)
        return writer.bytes
    }

    init(day: Int, value: Double, latestSampleEnd: Int64, seq: UInt64, recorded: Int64) {
        self.day = day
        self.value = value
        self.latestSampleEnd = latestSampleEnd
        self.seq = seq
        self.recorded = recorded
    }

    init(decoding bytes: [UInt8]) throws(DamagedState) {
        var reader = ByteReader(bytes)
        day = try reader.day()
        value = try reader.f64()
        latestSampleEnd = try reader.instant()
        seq = try reader.u64()
        recorded = try reader.instant()
    }
}

/// A `grants` row's content.
struct GrantValue: Equatable {
    var client: String
    var read: Set<QuantityType>
    var share: Set<QuantityType>
    var seq: UInt64
    var recorded: Int64

    static func bits(_ types: Set<QuantityType>) -> UInt8 {
        types.reduce(0) { $0 | (1 << ($1.code - 1)) }
    }

    static func types(_ bits: UInt8) -> Set<QuantityType> {
        Set(QuantityType.allCases.filter { bits & (1 << ($0.code - 1)) != 0 })
    }

    var encoded: [UInt8] {
        var writer = ByteWriter()
        writer.string(client)
        writer.u8(GrantValue.bits(read))
        writer.u8(GrantValue.bits(share))
        writer.u64(seq)
        writer.i64(recorded)
        return writer.bytes
    }

    init(client: String, read: Set<QuantityType>, share: Set<QuantityType>, seq: UInt64, recorded: Int64) {
        self.client = client
        self.read = read
        self.share = share
        self.seq = seq
        self.recorded = recorded
    }

    init(decoding bytes: [UInt8]) throws(DamagedState) {
        var reader = ByteReader(bytes)
        client = try reader.string()
        read = GrantValue.types(try reader.u8())
        share = GrantValue.types(try reader.u8())
        seq = try reader.u64()
        recorded = try reader.instant()
    }
}

/// What other modules may read of a stored `SampleRecord`: the log's own `samples` index keeps
/// the same type, times and unit, and `verify` checks the two against each other.
public enum StoredSample {
    public static func summary(_ bytes: [UInt8]) throws(DamagedState)
        -> (type: QuantityType, start: Timestamp, end: Timestamp, unit: String) {
        let record = try SampleRecord(decoding: bytes)
        return (record.type, record.start, record.end, record.unit)
    }
}
