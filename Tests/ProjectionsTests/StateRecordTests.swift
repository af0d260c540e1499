import Foundation
import LedgerCore
@testable import Projections
import Testing

@Suite("state records")
struct StateRecordTests {
    @Test("a bucket's entries decode to what was encoded, and its latest end, read without decoding them, is theirs")
    func latestEnd() throws {
        var random = SplitMix64(seed: 31)
        // "iPhone" and "iPad 2" are of one length: decoding reuses a name only for the same bytes.
        let names = ["", "iPhone", "iPad 2", "Apple Watch de Zoë", "🏃 tracker", String(repeating: "x", count: 300)]
        #expect(try BucketEntry.latestEnd(BucketEntry.encode([])) == nil)
        for _ in 0..<500 {
            let entries = (0..<Int(random.next() % 40)).map { _ in
                BucketEntry(id: UUID(bytes: (0..<16).map { _ in UInt8(truncatingIfNeeded: random.next()) }),
                            source: names[Int(random.next() % UInt64(names.count))],
                            zone: names[Int(random.next() % UInt64(names.count))],
                            start: Int64(bitPattern: random.next()) >> 8,
                            end: Int64(bitPattern: random.next()) >> 8,
                            value: Double(random.next() % 10_000) / 7)
            }
            let bytes = BucketEntry.encode(entries)
            let decoded = try BucketEntry.decode(bytes)
            #expect(decoded == entries)
            #expect(decoded.map { Array($0.source.utf8) + [0] + Array($0.zone.utf8) } == entries.map { Array($0.source.utf8) + [0] + Array($0.zone.utf8) })
            #expect(try BucketEntry.latestEnd(bytes) == BucketEntry.decode(bytes).map(\.end).max())
            #expect(try BucketEntry.latestEnd(bytes) == entries.map(\.end).max())
        }
    }

    /// Rows used to be dictionaries: equal whatever the order, a column set to nil removed, and
    /// (where a dictionary literal trapped) a column given twice keeps its last value.
    @Test("row values compare and look up as the dictionary they replace did")
    func rowValues() {
        var values: RowValues = ["user": .string("ann"), "value": .int(3), "value": .int(4)]
        #expect(values["value"] == .int(4) && values.pairs.count == 2)
        #expect(values == ["value": .int(4), "user": .string("ann")])
        #expect(values != ["user": .string("ann")])
        #expect(values != ["user": .string("ann"), "value": .int(5)])
        values["stale"] = .bool(true)
        #expect(values.pairs.map(\.column) == ["user", "value", "stale"])
        values["value"] = nil
        #expect(values == ["user": .string("ann"), "stale": .bool(true)] && values["value"] == nil)
        values["absent"] = nil
        #expect(values.pairs.count == 2)
    }

    /// Past `hashedFrom` names the index hashes them: it must find, and tell apart, exactly
    /// what the linear search did, by bytes (a precomposed and a decomposed "é" are two).
    @Test("a name index finds names by their bytes, in first-insertion order, before and after it hashes them")
    func nameIndex() {
        var index = NameIndex()
        var expected: [String] = []
        for number in 0..<(NameIndex.hashedFrom * 3) {
            for name in ["source \(number)", number % 5 == 0 ? "Caf\u{E9} \(number)" : "Cafe\u{301} \(number)"] {
                let (position, added) = index.insert(name)
                #expect(added && position == expected.count)
                expected.append(name)
            }
            #expect(index.insert("source \(number / 2)") == (expected.firstIndex(of: "source \(number / 2)")!, false))
        }
        #expect(index.names == expected)
        for (position, name) in expected.enumerated() { #expect(index.position(of: name) == position) }
        #expect(index.position(of: "Caf\u{E9} 1") == nil)  // only "Cafe\u{301} 1" is in
        #expect(index.position(of: "Cafe\u{301} 1") == expected.firstIndex { sameName($0, "Cafe\u{301} 1") })
        #expect(NameIndex(expected + expected.reversed()).names == expected)
    }

    @Test("per-source rows and ranks of a day with more sources than the index searches linearly")
    func manySources() throws {
        let h = FoldHarness(defaultZone: "UTC")
        let count = NameIndex.hashedFrom * 2 + 3
        // Source k: k + 1 samples of 10 steps, over the same ten minutes as every other source.
        var lines: [String] = []
        for source in 0..<count {
            for copy in 0...source {
                lines.append(#"{"kind":"sample","user":"ann","type":"steps","value":10,"start":"2026-03-01T10:00:00Z","end":"2026-03-01T10:10:00Z","source":"s\#(source)","id":"00000000-0000-4000-8000-\#(String(format: "%06d%06d", source, copy))"}"#)
            }
        }
        try h.append(lines)
        let rows = try h.rows(.perSource)
        #expect(rows.count == count)
        for row in rows {
            let source = Int(row.values["source"]!.stringValue!.dropFirst())!
            #expect(row.values["value"] == .double(Double(10 * (source + 1))) || row.values["value"] == .int(Int64(10 * (source + 1))))
        }
        // The first source seen outranks the others over the same minutes: its one sample.
        #expect(try h.daily()["ann 2026-03-01"] == 10)
    }

    /// State records come from the file: one cut short, overwritten or made up must be an
    /// error that names the damage (`DamagedState`), never a trap or a read past its end.
    @Test("every damaged state record is an error, not a trap (every cut, seeded random bytes)")
    func damagedRecords() throws {
        var user = UserState(name: "ann")
        user.zone = "Europe/Paris"
        user.priority[.steps] = ["Watch", "iPhone"]
        user.sources[.steps] = ["iPhone"]
        user.zones = ["UTC", "Europe/Paris"]
        let sample = SampleRecord(id: UUID(), user: 7, type: .distance, source: "iPhone", value: 1.5, unit: "km",
                                  start: Timestamp(microseconds: 1), end: Timestamp(microseconds: 2), zone: "UTC", days: 20_000..<20_002)
        let entry = BucketEntry(id: UUID(), source: "Watch", zone: "UTC", start: 1, end: 2, value: 3)
        let decoders: [(name: String, bytes: [UInt8], decode: ([UInt8]) throws -> Void)] = [
            ("user", user.encoded, { _ = try UserState(decoding: $0) }),
            ("sample", sample.encoded, { _ = try SampleRecord(decoding: $0) }),
            ("bucket", BucketEntry.encode([entry, entry]), { _ = try BucketEntry.decode($0) }),
            ("bucket end", BucketEntry.encode([entry, entry]), { _ = try BucketEntry.latestEnd($0) }),
            ("daily", DailyValue(value: 1, samples: 2, sources: 1).encoded, { _ = try DailyValue(decoding: $0) }),
            ("per-source", PerSourceValue.encode([PerSourceValue(source: "iPhone", value: 1, samples: 1)]), { _ = try PerSourceValue.decode($0) }),
            ("last-known", LastKnownValue(day: 1, value: 2, latestSampleEnd: 3, seq: 4, recorded: 5).encoded, { _ = try LastKnownValue(decoding: $0) }),
            ("grant", GrantValue(client: "coach", read: [.steps], share: [], seq: 1, recorded: 2).encoded, { _ = try GrantValue(decoding: $0) }),
            ("day key", StateKey.day(1, .steps, 20_000), { _ = try StateKey.parseDay($0) }),
            ("bucket key", StateKey.bucketChunk(StateKey.day(1, .steps, 20_000), 3), { _ = try StateKey.parseBucketChunk($0) }),
        ]
        var random = SplitMix64(seed: 7)
        for decoder in decoders {
            try decoder.decode(decoder.bytes)  // the record as written decodes
            for cut in 0..<decoder.bytes.count {
                #expect(throws: DamagedState.self, "\(decoder.name) cut to \(cut) bytes") { try decoder.decode(Array(decoder.bytes.prefix(cut))) }
            }
            for _ in 0..<300 {
                var damaged = decoder.bytes
                damaged[Int(random.next() % UInt64(damaged.count))] = UInt8(truncatingIfNeeded: random.next())
                if random.next() % 2 == 0 { damaged = (0..<Int(random.next() % 64)).map { _ in UInt8(truncatingIfNeeded: random.next()) } }
                do { try decoder.decode(damaged) } catch is DamagedState {}
            }
        }
        // A count no record could hold is refused before room is made for it.
        var huge = ByteWriter()
        huge.u32(.max)
        #expect(throws: DamagedState.self) { try BucketEntry.decode(huge.bytes) }
        #expect(throws: DamagedState.self) { try StateKey.parseDay([0, 0, 0, 1, 9, 0, 0, 0, 0]) }  // type code 9
        // The last chunk number: the next chunk's would overflow (it trapped on the next append).
        #expect(throws: DamagedState.self) { try StateKey.parseBucketChunk(StateKey.bucketChunk(StateKey.day(1, .steps, 20_000), .max)) }
        // A sample's days are held as a range: stored days that are not consecutive are damage.
        var gap = sample.encoded
        gap.replaceSubrange((gap.count - 8)..<gap.count, with: withUnsafeBytes(of: Int64(20_005).bigEndian) { Array($0) })
        #expect(throws: DamagedState.self) { try SampleRecord(decoding: gap) }
        var written = sample
        written.days = 20_000..<20_003
        #expect(try SampleRecord(decoding: written.encoded).days == 20_000..<20_003)
        written.days = 0..<0
        #expect(try SampleRecord(decoding: written.encoded).days.isEmpty)
    }
}
