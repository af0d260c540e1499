import Foundation
import LedgerCore
@testable import Projections
import Testing

/// A day's bucket is kept in chunks (`Bucket`): a sample rewrites one chunk of its day, not
/// the whole day, and the chunks are the same however the events were batched.
@Suite("buckets in chunks")
struct BucketTests {
    @Test("chunks stay under chunkBytes, a larger entry sits alone, and an emptied chunk is deleted")
    func chunks() throws {
        let store = MemoryStateStore()
        let day = StateKey.day(1, .steps, 20_000)
        var bucket = Bucket()
        var ids: [UUID] = []
        for index in 0..<200 {
            // One source name longer than a chunk may be: its entry gets a chunk of its own.
            let source = index == 50 ? String(repeating: "s", count: 1_200) : (index % 2 == 0 ? "iPhone" : "Watch")
            let entry = BucketEntry(id: UUID(bytes: (0..<16).map { UInt8(truncatingIfNeeded: index * 7 + $0) }),
                                    source: source, zone: "UTC", start: Int64(index) * 60_000_000,
                                    end: Int64(index + 1) * 60_000_000, value: Double(index))
            bucket.append(entry)
            ids.append(entry.id)
        }
        try bucket.write(day, to: store)
        let stored = store.entries(.buckets)
        #expect(stored.count > 10)  // 200 entries of about 60 bytes in chunks of at most 1 KiB
        for (key, value) in stored {
            let entries = try BucketEntry.decode(value)
            #expect(value.count <= Bucket.chunkBytes || entries.count == 1, "chunk of \(value.count) bytes")
            #expect(try StateKey.parseBucketChunk(key).day == 20_000)
        }
        #expect(stored.values.contains { $0.count > Bucket.chunkBytes })  // the long name's

        let read = try Bucket(reading: day, from: store)
        #expect(read.entries.map(\.id) == ids)
        #expect(read.entries == bucket.entries)

        // Emptying the first chunk deletes its key and leaves every other chunk as it was.
        var shrunk = read
        let first = read.chunks[0]
        for entry in first.entries { shrunk.remove(id: entry.id) }
        try shrunk.write(day, to: store)
        let after = store.entries(.buckets)
        #expect(after[StateKey.bucketChunk(day, first.number)] == nil)
        #expect(after.count == stored.count - 1)
        for (key, value) in after { #expect(stored[key] == value) }
        #expect(try Bucket(reading: day, from: store).entries.map(\.id) == Array(ids.dropFirst(first.entries.count)))
        // Days next to it are other keys: reading one bucket reads no other day's chunks.
        #expect(try Bucket(reading: StateKey.day(1, .steps, 20_001), from: store).isEmpty)
    }

    /// Stored whole, a day's bucket was rewritten by every commit: here 600 entries, about
    /// 35 KB, by the last sample (a watch's day of per-minute samples reaches 1,440).
    @Test("a sample added to a long day writes one chunk of its bucket, and the rows match one batch")
    func oneChunkPerSample() throws {
        let store = RecordingStore()
        let context = FoldContext(defaultZone: Zone("UTC")!)
        let lines = (0..<600).map(minuteSample)
        var written: [Int] = []
        for (index, line) in lines.enumerated() {
            store.bucketBytes = 0
            let fold = ActivityFold(store: store, context: context)
            for (_, event) in try EventInput.decode(Array(line.utf8)) {
                let seq = UInt64(index + 1)
                try fold.apply(LoggedEvent(seq: seq, recorded: Timestamp(seconds: 1_767_225_600 + Int64(seq)), event: event))
            }
            _ = try fold.flush()
            written.append(store.bucketBytes)
        }
        #expect(written.max()! <= Bucket.chunkBytes, "bytes of buckets written by one sample: up to \(written.max()!)")

        // The same samples in one batch: the same rows, and the same chunks.
        let batch = FoldHarness(defaultZone: "UTC")
        try batch.append(lines)
        #expect(try ProjectionQuery(store: store.inner).rows(.daily, filter: RowFilter()) == batch.rows(.daily))
        #expect(try ProjectionQuery(store: store.inner).rows(.perSource, filter: RowFilter()) == batch.rows(.perSource))
        #expect(differentKeys(store.inner.entries(.buckets), batch.store.entries(.buckets)).isEmpty)
        // The iPhone and the Watch count the same minutes: the day is the iPhone's 300 minutes.
        var iPhone = 0
        for minute in stride(from: 0, to: 600, by: 2) { iPhone += 40 + minute % 70 }
        #expect(try batch.daily()["ann 2026-03-01"] == Double(iPhone))
    }

    @Test("retracting samples of a chunked day's first, a middle and its last chunk gives the rows of a fresh fold of the rest")
    func correctionsAcrossChunks() throws {
        let corrected = FoldHarness(defaultZone: "UTC")
        let all = (0..<300).map(minuteSample)
        for line in all { try corrected.append(line) }
        // Retract a sample of the first chunk, one of a middle chunk and the last one.
        let retracted = [0, 150, 299]
        for minute in retracted {
            try corrected.append(#"{"kind":"correction","target":"\#(sampleID(minute))","action":"retract","reason":"entered twice"}"#)
        }
        let fresh = FoldHarness(defaultZone: "UTC")
        try fresh.append(all.enumerated().filter { !retracted.contains($0.offset) }.map(\.element))
        #expect(try corrected.rows(.daily) == fresh.rows(.daily))
        #expect(try corrected.rows(.perSource) == fresh.rows(.perSource))
        let entries = try corrected.store.entries(.buckets).values.flatMap { try BucketEntry.decode($0) }
        #expect(entries.count == 300 - retracted.count)
    }
}

extension BucketTests {
    /// Rebuilds and `verify` fold the log with the batch ends it was appended with; this holds
    /// the fold's state to more: the same whatever the batches, so no chunk layout can depend
    /// on where a batch ended, under every kind of event that moves samples between chunks.
    @Test("a seeded history of samples, retractions, amendments, sync versions and zone changes: the same state however batched",
          arguments: [3, 17, 29])
    func batchingDoesNotShapeChunks(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        func pick(_ count: Int) -> Int { Int(random.next() % UInt64(count)) }
        var lines: [String] = []
        var live: [Int] = []  // samples (by number) that count: a correction may name them
        var syncs: [Int: (version: Int, holder: Int)] = [:]  // sync id number → latest version
        var samples = 0
        for _ in 0..<400 {
            let roll = pick(100)
            if roll < 10, !live.isEmpty {
                let target = live.remove(at: pick(live.count))
                lines.append(#"{"kind":"correction","target":"\#(sampleID(target))","action":"retract","reason":"r"}"#)
            } else if roll < 20, !live.isEmpty {
                let target = live[pick(live.count)]
                let fields = pick(2) == 0 ? #""value":\#(pick(500))"# : #""start":"\#(instant(pick(2_800)))","end":"\#(instant(2_800 + pick(80)))""#
                lines.append(#"{"kind":"correction","target":"\#(sampleID(target))","action":"amend","reason":"a",\#(fields)}"#)
            } else if roll < 23 {
                let zone = ["UTC", "Europe/Paris", "America/New_York"][pick(3)]
                lines.append(#"{"kind":"profile","user":"ann","zone":"\#(zone)"}"#)
            } else if roll < 25 {
                let order = pick(2) == 0 ? #"["iPhone","Watch"]"# : #"["Watch","iPhone"]"#
                lines.append(#"{"kind":"profile","user":"ann","priority":{"steps":\#(order)}}"#)
            } else {
                let minute = pick(2_880)
                var sync = ""
                if roll < 40 {
                    // A new version (always from the Watch: a sync id is per source) replaces
                    // the one before, which then no longer counts.
                    let number = pick(20)
                    let version = (syncs[number]?.version ?? 0) + 1
                    if let replaced = syncs[number]?.holder { live.removeAll { $0 == replaced } }
                    syncs[number] = (version, samples)
                    sync = #","syncId":"s\#(number)","syncVersion":\#(version)"#
                }
                let zone = pick(10) == 0 ? #","zone":"Asia/Tokyo""# : ""
                lines.append(#"{"kind":"sample","id":"\#(sampleID(samples))","user":"ann","type":"steps","value":\#(1 + pick(300)),"start":"\#(instant(minute))","end":"\#(instant(minute + 1 + pick(9)))","source":"\#(sync.isEmpty ? ["iPhone", "Watch"][pick(2)] : "Watch")"\#(zone)\#(sync)}"#)
                live.append(samples)
                samples += 1
            }
        }

        let single = FoldHarness(defaultZone: "UTC")
        let perEvent = FoldHarness(defaultZone: "UTC")
        let batched = FoldHarness(defaultZone: "UTC")
        try single.append(lines)
        for line in lines { try perEvent.append(line) }
        var rest = lines[...]
        while !rest.isEmpty {
            let size = 1 + pick(30)
            try batched.append(Array(rest.prefix(size)))
            rest = rest.dropFirst(size)
        }
        #expect(single.store.entries(.buckets).count > 3 * 2)  // days of several chunks
        // `last-known` included: it names the event that last changed it, whatever the batch,
        // found by walking back, never by the rule before it.
        for harness in [single, perEvent, batched] { #expect(harness.lastKnownGuesses == 0) }
        for table in StateTable.allCases {
            for other in [perEvent, batched] {
                let differing = differentKeys(other.store.entries(table), single.store.entries(table))
                #expect(differing.isEmpty, "\(table), seed \(seed): \(differing.count) keys differ, first \(differing.prefix(3))")
            }
        }
    }
}

/// The keys (in hex) whose values differ between two tables, or that only one holds.
private func differentKeys(_ a: [[UInt8]: [UInt8]], _ b: [[UInt8]: [UInt8]]) -> [String] {
    Set(a.keys).union(b.keys).filter { a[$0] != b[$0] }
        .map { $0.map { String(format: "%02x", $0) }.joined() }.sorted()
}

/// The minute-th minute from 2026-03-01T00:00Z.
private func instant(_ minute: Int) -> String {
    let day = 1 + minute / 1_440
    return String(format: "2026-03-%02dT%02d:%02d:00Z", day, minute % 1_440 / 60, minute % 60)
}

private func sampleID(_ minute: Int) -> String {
    String(format: "00000000-0000-4000-8000-%012d", minute)
}

/// The minute-th minute of 2026-03-01, from the iPhone on even minutes' pairs and the Watch on
/// odd ones: each pair of samples covers the same minute (0 and 1 the first, …).
private func minuteSample(_ minute: Int) -> String {
    let covered = minute / 2
    let start = String(format: "2026-03-01T%02d:%02d:00Z", covered / 60, covered % 60)
    let end = String(format: "2026-03-01T%02d:%02d:59.999Z", covered / 60, covered % 60)
    let source = minute % 2 == 0 ? "iPhone" : "Watch"
    return #"{"kind":"sample","id":"\#(sampleID(minute))","user":"ann","type":"steps","value":\#(40 + (minute - minute % 2) % 70),"start":"\#(start)","end":"\#(end)","source":"\#(source)"}"#
}

/// A `MemoryStateStore` that counts the bytes put into `buckets`.
private final class RecordingStore: StateStore {
    let inner = MemoryStateStore()
    var bucketBytes = 0

    func get(_ table: StateTable, _ key: [UInt8]) throws -> [UInt8]? { inner.get(table, key) }

    func put(_ table: StateTable, _ key: [UInt8], _ value: [UInt8]) throws {
        if table == .buckets { bucketBytes += value.count }
        inner.put(table, key, value)
    }

    func delete(_ table: StateTable, _ key: [UInt8]) throws { inner.delete(table, key) }

    func scan(_ table: StateTable, prefix: [UInt8], reverse: Bool,
              _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        try inner.scan(table, prefix: prefix, reverse: reverse, body)
    }
}
