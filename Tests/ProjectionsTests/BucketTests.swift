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
        #expect(store.inner.entries(.buckets) == batch.store.entries(.buckets))
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
