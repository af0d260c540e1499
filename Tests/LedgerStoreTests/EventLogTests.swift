import Foundation
import LedgerCore
import LedgerTestSupport
import Projections
import Synchronization
import Testing
@testable import LedgerStore

/// Decodes NDJSON into a located batch, failing the test on invalid input.
func batch(_ text: String) throws -> [(InputLocation?, Event)] {
    try EventInput.decode(Array(text.utf8)).map { (Optional($0.0), $0.1) }
}

func sampleLine(id: String? = nil, value: Double = 100, start: String = "2026-11-29T08:00:00Z",
                end: String = "2026-11-29T08:10:00Z", source: String = "iPhone",
                syncId: String? = nil, syncVersion: Int? = nil) -> String {
    var line = Fixtures.stepLine(id: id, value: value, start: start, end: end, source: source)
    if let syncId, let syncVersion {
        line.removeLast()
        line += ",\"syncId\":\"\(syncId)\",\"syncVersion\":\(syncVersion)}"
    }
    return line
}

/// Appends `count` step samples to a new ledger at `path`, and closes it.
func makeLedger(_ path: String, steps count: Int) throws {
    let log = try EventLog(path: path, create: true)
    _ = try log.append(try batch(Fixtures.stepsFile(count: count)))
}

/// A new ledger at `path` with two step samples appended one at a time (seq 1: 100, seq 2:
/// 50), closed on return: what the integrity tests alter.
func makeTwoBatchLedger(_ path: String) throws {
    let log = try EventLog(path: path, create: true)
    _ = try log.append(try batch(sampleLine(value: 100)))
    _ = try log.append(try batch(sampleLine(value: 50, start: "2026-11-29T09:00:00Z", end: "2026-11-29T09:10:00Z")))
}

/// `makeTwoBatchLedger`'s ledger at `path`, opened raw, with its `events` database and the two
/// records (what the tests of records added by hand copy).
func twoBatchRecords(_ path: String) throws -> (Environment, Database, EventRecord, EventRecord) {
    try makeTwoBatchLedger(path)
    let environment = try Environment(path: path)
    let events = try #require(try environment.openDatabases(["events"])["events"])
    let (one, two) = try environment.read { txn in
        (try #require(try txn.withValue(events, UInt64(1).bigEndianBytes) { try EventRecord(seq: 1, decoding: $0) }),
         try #require(try txn.withValue(events, UInt64(2).bigEndianBytes) { try EventRecord(seq: 2, decoding: $0) }))
    }
    return (environment, events, one, two)
}

/// The last entry of the database `name` in the environment at `path`, read raw (the
/// environment is closed on return).
func lastRaw(_ path: String, _ name: String) throws -> (key: [UInt8], value: [UInt8]) {
    let environment = try Environment(path: path)
    let database = try #require(try environment.openDatabases([name])[name])
    return try #require(try environment.read { try $0.last(database) })
}

/// Writes one key straight into the database `name` of the environment at `path`, as another
/// program, or damage, would. Nothing else may have the environment open in this process.
func putRaw(_ path: String, _ name: String, _ key: [UInt8], _ value: [UInt8]) throws {
    let environment = try Environment(path: path)
    let database = try #require(try environment.openDatabases([name])[name])
    try environment.write { try $0.put(database, key, value) }
}

/// Deletes one key straight from the database `name` of the environment at `path` (as
/// `putRaw` writes one). Nothing else may have the environment open in this process.
func deleteRaw(_ path: String, _ name: String, _ key: [UInt8]) throws {
    let environment = try Environment(path: path)
    let database = try #require(try environment.openDatabases([name])[name])
    _ = try environment.write { try $0.delete(database, key) }
}

@Suite("Event log")
struct EventLogTests {
    @Test("seq is gapless from 1 and the chain verifies")
    func gaplessAndChained() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let first = try log.append(try batch(Fixtures.stepsFile(count: 3)))
            #expect(first.appended == 3)
            #expect(first.head == 3)
            #expect(first.outcomes == [.appended(1), .appended(2), .appended(3)])
            let second = try log.append(try batch(Fixtures.stepsFile(count: 5)))
            #expect(second.appended == 2)
            #expect(second.duplicates == 3)
            #expect(second.head == 5)
            let records = try log.records()
            #expect(records.map(\.seq) == [1, 2, 3, 4, 5])
            let report = try log.verifyChain()
            #expect(report.verified == 5)
            #expect(report.head.hash == records.last!.hash)
        }
    }

    @Test("a record written in place in LMDB (MDB_RESERVE) is the one EventRecord.chained builds, hash and all")
    func recordInPlace() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            var random = SplitMix64(seed: 3)
            var previous = EventRecord.genesisHash
            var chain = previous
            try log.environment.write { txn in
                for seq in UInt64(1)...40 {
                    let body = (0..<Int(random.next() % 300)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                    let typed = (0..<Int(random.next() % 3 == 0 ? 0 : random.next() % 200)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                    let recorded = Timestamp(microseconds: Int64(bitPattern: random.next() >> 2))
                    let ends = seq % 7 == 0
                    let expected = EventRecord.chained(seq: seq, recorded: recorded, endsBatch: ends, body: body, typed: typed, previousHash: previous)
                    let key = (seq + 1_000).bigEndianBytes
                    try txn.putReserved(log.samples, key, count: EventRecord.storedSize(body: body.count, typed: typed.count)) { out in
                        EventRecord.writeChained(into: out, seq: seq, recorded: recorded, endsBatch: ends, body: body, typed: typed,
                                                 content: ContentDigest(body: body, typed: typed), previousHash: &chain)
                    }
                    #expect(try txn.get(log.samples, key) == expected.bytes, "seq \(seq)")
                    #expect(chain == expected.hash)
                    previous = expected.hash
                }
            }
        }
    }

    /// A review of the write cursors: puts through one long-lived cursor stay right while
    /// other operations in the same transaction split, grow and shrink the pages under it.
    @Test("a write cursor's appends and inserts agree with a model while mdb_put and mdb_del change its pages")
    func writeCursorAmongOtherWrites() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            var random = SplitMix64(seed: 11)
            var model: [UInt64: [UInt8]] = [:]
            var keys: [UInt64] = []  // model's keys, in order
            var ids: [[UInt8]: [UInt8]] = [:]
            var idList: [[UInt8]] = []
            try log.environment.write { txn in
                let appending = try txn.writeCursor(log.samples)
                let inserting = try txn.writeCursor(log.ids)
                var newest: UInt64 = 0
                for step in UInt64(1)...20_000 {
                    let value = (0..<Int(10 + random.next() % 90)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                    try appending.putReserved(SeqKey(step), count: value.count, append: true) { $0.copyBytes(from: value) }
                    model[step] = value
                    keys.append(step)
                    newest = step
                    if step % 7 == 0 {
                        let older = keys[Int(random.next() % UInt64(keys.count))]
                        // An older key rewritten larger, through mdb_put: its page may split.
                        let larger = [UInt8](repeating: UInt8(step % 251), count: 200 + Int(random.next() % 300))
                        try txn.put(log.samples, SeqKey(older), larger)
                        model[older] = larger
                    }
                    if step % 11 == 0 {
                        // The newest key removed through mdb_del, under the appending cursor.
                        #expect(try txn.delete(log.samples, newest.bigEndianBytes))
                        model[newest] = nil
                        keys.removeLast()
                    }
                    let id = (0..<16).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                    let seq = step.bigEndianBytes
                    let existing = try inserting.insert(id, seq)
                    #expect(existing == nil)
                    ids[id] = seq
                    idList.append(id)
                    if step % 5 == 0 {
                        // A key already there: refused, with the value stored returned.
                        let at = Int(random.next() % UInt64(idList.count))
                        let known = idList[at]
                        #expect(try inserting.insert(known, [0, 0]) == ids[known])
                        if step % 10 == 0 {
                            #expect(try txn.delete(log.ids, known))
                            ids[known] = nil
                            idList.swapAt(at, idList.count - 1)
                            idList.removeLast()
                        }
                    }
                }
                var stored: [UInt64: [UInt8]] = [:]
                var previous: UInt64 = 0
                try txn.scan(log.samples) { key, value in
                    let seq = UInt64(bigEndianBytes: key)
                    #expect(seq > previous)
                    previous = seq
                    stored[seq] = Array(value)
                    return true
                }
                #expect(stored == model)
                var storedIDs: [[UInt8]: [UInt8]] = [:]
                try txn.scan(log.ids) { key, value in
                    storedIDs[Array(key)] = Array(value)
                    return true
                }
                #expect(storedIDs == ids)
            }
            #expect(performing: { try log.environment.read { txn in _ = try txn.writeCursor(log.samples) } }, throws: { error in
                (error as? LMDBError)?.code == EACCES
            })
        }
    }

    // The map's own resident bytes are measured (smaps), not the process's shared total alone:
    // tests in other suites open, read and release their own ledgers at the same time, which
    // moved the process-wide figure by more than this test's megabyte (a CI run failed so).
    @Test("a read brings the map's pages in, releaseMappedPages lets them go, and residentSharedBytes counts them")
    func residentMap() throws {
        try withTemporaryLedger { path in
            try makeLedger(path, steps: 20_000)
            let log = try EventLog(path: path, create: false)
            log.environment.releaseMappedPages()
            let before = try #require(log.environment.residentMapBytes)
            #expect(try log.records().count == 20_000)  // reads every record through the map
            let after = try #require(log.environment.residentMapBytes)
            #expect(after > before + 1 << 20)
            // The process's file-backed resident total includes this map's pages (the kernel's
            // counters are batched per CPU, hence the slack).
            #expect(try #require(Environment.residentSharedBytes) > after - 1 << 20)
            log.environment.releaseMappedPages()
            #expect(try #require(log.environment.residentMapBytes) < after - 1 << 20)
        }
    }

    @Test("an admitted sample's index entry written in place is SampleState.encoded")
    func sampleStateInPlace() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let sample = Sample(user: "ann", type: .distance, value: 1.5, unit: "mi", start: Timestamp(microseconds: -5),
                                end: Timestamp(microseconds: 1_767_261_900_000_000), source: SampleSource(name: "Watch"))
            try log.environment.write { txn in
                try SampleState.putActive(sample, at: UInt64(77).bigEndianBytes, through: try txn.writeCursor(log.samples))
                let state = SampleState(status: .active, type: .distance, start: sample.start, end: sample.end, unit: "mi")
                #expect(try txn.get(log.samples, UInt64(77).bigEndianBytes) == state.encoded)
                #expect(try txn.get(log.samples, UInt64(77).bigEndianBytes).flatMap(SampleState.init) == state)
            }
        }
    }

    @Test("recorded never decreases, even when the clock steps back")
    func recordedMonotonic() throws {
        let clock = Mutex<Int64>(2_000_000_000_000_000)
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true, clock: {
                clock.withLock { Timestamp(microseconds: $0) }
            })
            _ = try log.append(try batch(sampleLine(value: 1)))
            clock.withLock { $0 -= 3_600_000_000 }  // the clock steps back an hour
            _ = try log.append(try batch(sampleLine(value: 2)))
            clock.withLock { $0 += 7_200_000_000 }
            _ = try log.append(try batch(sampleLine(value: 3)))
            let recorded = try log.records().map(\.recorded.microseconds)
            #expect(recorded == [2_000_000_000_000_000, 2_000_000_000_000_000, 2_000_003_600_000_000])
            _ = try log.verifyChain()
        }
    }

    @Test("firstSeq(recordedAtOrAfter:) finds the first event of a time by binary search, with equal times and a clock stepping back")
    func firstSeqByRecordedTime() throws {
        let clock = Mutex<Int64>(2_000_000_000_000_000)
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true, clock: {
                clock.withLock { Timestamp(microseconds: $0) }
            })
            #expect(try log.firstSeq(recordedAtOrAfter: Timestamp(microseconds: 0)) == 1)  // empty: head + 1
            // 40 batches of 1-3 events; every fifth the clock steps back (recorded stays).
            var random = SplitMix64(seed: 5)
            for index in 0..<40 {
                let count = Int(random.next() % 3) + 1
                let lines = (0..<count).map { sampleLine(value: Double(index * 10 + $0)) }.joined(separator: "\n")
                _ = try log.append(try batch(lines))
                clock.withLock { $0 += index % 5 == 4 ? -1_000_000 : 1_000 + Int64(random.next() % 5_000) }
            }
            let records = try log.records()
            let head = records.last!.seq
            for record in records {
                let first = records.first { $0.recorded == record.recorded }!.seq
                #expect(try log.firstSeq(recordedAtOrAfter: record.recorded) == first)
                let next = records.first { $0.recorded > record.recorded }?.seq ?? head + 1
                #expect(try log.firstSeq(recordedAtOrAfter: Timestamp(microseconds: record.recorded.microseconds + 1)) == next)
            }
            #expect(try log.firstSeq(recordedAtOrAfter: Timestamp(microseconds: 0)) == 1)
            #expect(Set(records.map(\.recorded)).count < records.count)  // equal times were met
        }
    }

    @Test("the same 10,000 events twice: head stays at 10,000 and all are duplicates")
    func idempotentTenThousand() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let events = try batch(Fixtures.stepsFile(count: 10_000))
            let first = try log.append(events)
            #expect(first.appended == 10_000)
            let again = try log.append(events)
            #expect(again.appended == 0)
            #expect(again.duplicates == 10_000)
            #expect(again.head == 10_000)
        }
    }

    @Test("the same event twice in one batch is one event and one duplicate; other content conflicts")
    func duplicateWithinBatch() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let line = sampleLine(value: 5)
            let result = try log.append(try batch(line + "\n" + sampleLine(value: 6) + "\n" + line))
            #expect(result.appended == 2)
            #expect(result.duplicates == 1)
            #expect(result.outcomes == [.appended(1), .appended(2), .duplicate(1)])
            let id = "7a1c2a8e-3b7d-4c55-9a10-2e4f8b9c0d11"
            #expect(throws: InputError.self) {
                try log.append(try batch(sampleLine(id: id, value: 1) + "\n" + sampleLine(id: id, value: 2)))
            }
            #expect(try log.head().seq == 2)
        }
    }

    @Test("the same sample with its instants written at another offset is a duplicate, not a conflict")
    func sameInstantsOtherOffset() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            // A winter export prints +01:00, a summer export of the same samples +02:00.
            let winter = sampleLine(value: 5, start: "2026-01-10T09:00:00+01:00", end: "2026-01-10T09:10:00+01:00")
            let summer = sampleLine(value: 5, start: "2026-01-10T10:00:00+02:00", end: "2026-01-10T08:10:00.000Z")
            _ = try log.append(try batch(winter))
            let again = try log.append(try batch(summer + "\n" + sampleLine(value: 6)))
            #expect(again.outcomes == [.duplicate(1), .appended(2)])
            // Within one batch too, and the stored spelling is the first one.
            let fresh = sampleLine(value: 7, start: "2026-01-11T09:00:00Z", end: "2026-01-11T09:10:00Z")
            let freshLater = sampleLine(value: 7, start: "2026-01-11T04:00:00-05:00", end: "2026-01-11T09:10:00+00:00")
            #expect(try log.append(try batch(fresh + "\n" + freshLater)).outcomes == [.appended(3), .duplicate(3)])
            // A different instant under the same explicit id is still a conflict.
            let id = "5f1c2a8e-3b7d-4c55-9a10-2e4f8b9c0d11"
            _ = try log.append(try batch(sampleLine(id: id, start: "2026-01-12T09:00:00+01:00", end: "2026-01-12T09:10:00+01:00")))
            #expect(throws: InputError.self) {
                try log.append(try batch(sampleLine(id: id, start: "2026-01-12T09:00:00+02:00", end: "2026-01-12T09:10:00+01:00")))
            }
            // So is a source spelled with other bytes that compare equal as Strings.
            let café = "6e1c2a8e-3b7d-4c55-9a10-2e4f8b9c0d11"
            _ = try log.append(try batch(sampleLine(id: café, source: "Caf\u{E9}")))
            #expect(throws: InputError.self) {
                try log.append(try batch(sampleLine(id: café, source: "Cafe\u{301}")))
            }
            // And so is a metadata key spelled with other bytes.
            let keyed = "5d1c2a8e-3b7d-4c55-9a10-2e4f8b9c0d11"
            let precomposed = sampleLine(id: keyed).replacingOccurrences(of: "}", with: ",\"metadata\":{\"caf\u{E9}\":\"x\"}}")
            _ = try log.append(try batch(precomposed))
            #expect(throws: InputError.self) {
                try log.append(try batch(precomposed.replacingOccurrences(of: "caf\u{E9}", with: "cafe\u{301}")))
            }
            #expect(try log.head().seq == 6)
        }
    }

    @Test("a full disk is said to be full, writes nothing of the batch, and loses nothing committed")
    func fullDisk() throws {
        let ran = try withTinyDisk { path in
            let log = try EventLog(path: path, create: true)
            _ = try log.append(try batch(Fixtures.stepsFile(count: 5)))
            let before = try log.head()
            var lines = ""
            for minute in 0..<3_000 {
                lines += sampleLine(value: Double(minute), start: "2026-11-2\(minute % 9)T08:00:00Z",
                                    end: "2026-11-2\(minute % 9)T08:\(String(format: "%02d", minute % 60)):00Z",
                                    source: "s\(minute)") + "\n"
            }
            #expect(throws: LedgerError.diskFull(path: path)) { try log.append(try batch(lines)) }
            #expect(try log.head() == before)
            #expect(try log.verifyChain().verified == 5)
        }
        if !ran { print("fullDisk: skipped, this process cannot mount a tmpfs") }
    }

    /// An oracle audit found the README saying every row changes once per batch, where a
    /// `grants` row changes once per grant or revoke: each is an access decision, and a grant
    /// revoked in the same batch is still sent (coalesced, it would send nothing at all).
    @Test("grants changes are one per grant or revoke, even within one batch; daily ones one per batch")
    func grantChangesPerEvent() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            _ = try log.append(try batch("""
                {"kind":"grant","user":"ann","client":"coach","read":["steps"]}
                {"kind":"grant","user":"ann","client":"coach","read":["distance"]}
                {"kind":"revoke","user":"ann","client":"coach","read":["steps","distance"]}
                {"kind":"sample","user":"ann","type":"steps","value":5,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"iPhone"}
                {"kind":"sample","user":"ann","type":"steps","value":7,"start":"2026-11-29T09:00:00Z","end":"2026-11-29T09:10:00Z","source":"iPhone"}
                """))
            let changes = try log.changes(after: 0).changes
            let grants = changes.filter { $0.projection == .grants }.map { String(decoding: $0.json, as: UTF8.self) }
            #expect(changes.filter { $0.projection == .grants }.map(\.seq) == [1, 2, 3])
            #expect(grants[0].contains(#""previous":null"#))
            #expect(grants[1].contains(#""read":["distance","steps"]"#) && grants[1].contains(#""previous":{"#))
            #expect(grants[2].contains(#""read":[]"#))
            #expect(changes.filter { $0.projection == .daily }.map(\.seq) == [5])
        }
    }

    @Test("a reused id with other content is a conflict and writes nothing")
    func conflictWritesNothing() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let id = "6f1c2a8e-3b7d-4c55-9a10-2e4f8b9c0d11"
            _ = try log.append(try batch(sampleLine(id: id, value: 100)))
            let before = try log.head()
            let changed = sampleLine(value: 7, start: "2026-11-29T09:00:00Z", end: "2026-11-29T09:01:00Z")
                + "\n" + sampleLine(id: id, value: 101)
            #expect {
                try log.append(try batch(changed))
            } throws: { error in
                let input = error as? InputError
                return input?.location == .line(2) && input?.field == "id"
            }
            #expect(try log.head() == before)
            #expect(try log.records().count == 1)
        }
    }

    @Test("a higher syncVersion replaces, an equal or lower one is superseded")
    func syncVersions() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let v1 = sampleLine(value: 10, syncId: "walk-1", syncVersion: 1)
            let v2 = sampleLine(value: 12, syncId: "walk-1", syncVersion: 2)
            let v1b = sampleLine(value: 11, syncId: "walk-1", syncVersion: 1)
            #expect(try log.append(try batch(v1)).appended == 1)
            #expect(try log.append(try batch(v2)).appended == 1)
            let stale = try log.append(try batch(v1b))
            #expect(stale.superseded == 1)
            #expect(stale.appended == 0)
            #expect(stale.outcomes == [.superseded])
            // Its id, put into the index as the next seq's before the sample was found stale,
            // is taken out again: nothing points at a seq the log has not written.
            let v1bID = try #require(try batch(v1b).first?.1.id)
            #expect(try log.environment.read { try $0.get(log.ids, v1bID.bytes) } == nil)
            // Within a batch too, before and after events that are appended.
            let v3 = sampleLine(value: 13, syncId: "walk-1", syncVersion: 3)
            let v2b = sampleLine(value: 14, syncId: "walk-1", syncVersion: 2)
            let mixed = try log.append(try batch(v3 + "\n" + v2b + "\n" + sampleLine(value: 9, source: "Scale")))
            #expect(mixed.outcomes == [.appended(3), .superseded, .appended(4)])
            let v2bID = try #require(try batch(v2b).first?.1.id)
            #expect(try log.environment.read { try $0.get(log.ids, v2bID.bytes) } == nil)
            #expect(try log.verifyIndexes() > 0)
            // Another source's syncId is independent.
            let other = sampleLine(value: 11, source: "Watch", syncId: "walk-1", syncVersion: 1)
            #expect(try log.append(try batch(other)).appended == 1)
            // The replaced version can no longer be corrected.
            let v1ID = try #require(try batch(v1).first?.1.id.lowercased)
            let retract = "{\"kind\":\"correction\",\"target\":\"\(v1ID)\",\"action\":\"retract\",\"reason\":\"x\"}"
            #expect(throws: InputError.self) { try log.append(try batch(retract)) }
        }
    }

    @Test("a sync version may restore an earlier version's content, and records may share content")
    func syncVersionsWithEqualContent() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            // No ids: each gets one derived from its content, its syncId and its syncVersion.
            for (value, version) in [(100.0, 1), (200, 2), (100, 3)] {
                let result = try log.append(try batch(sampleLine(value: value, syncId: "walk-1", syncVersion: version)))
                #expect(result.appended == 1, "version \(version)")
            }
            let daily = try log.rows(.daily, filter: RowFilter(user: "default"))
            #expect(daily.map { $0.values["value"]?.numberValue } == [100])
            // Re-sending a version is still a duplicate: its id is the same.
            let again = try log.append(try batch(sampleLine(value: 100, syncId: "walk-1", syncVersion: 3)))
            #expect(again.duplicates == 1)
            #expect(again.appended == 0)
            // Two records of one source with the same content are two samples.
            let twins = sampleLine(value: 5, start: "2026-11-29T10:00:00Z", end: "2026-11-29T10:01:00Z", syncId: "a", syncVersion: 1)
                + "\n" + sampleLine(value: 5, start: "2026-11-29T10:00:00Z", end: "2026-11-29T10:01:00Z", syncId: "b", syncVersion: 1)
            #expect(try log.append(try batch(twins)).appended == 2)
            // Without a syncId, the derived id is what it always was: ImportTests pins one.
        }
    }

    @Test("an id given twice in one batch with different content names the batch, not the log")
    func conflictInsideBatch() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let id = "0b3c1f7e-6a2d-4e8f-9b1c-5d7e9f0a1b2c"
            let twice = sampleLine(id: id, value: 1) + "\n" + sampleLine(id: id, value: 2)
            #expect {
                try log.append(try batch(twice))
            } throws: { error in
                let input = error as? InputError
                return input?.location == .line(2) && input?.field == "id"
                    && input?.message == "id \(id) is given twice in this batch with different content; nothing was written"
            }
            #expect(try log.head().seq == 0)
        }
    }

    @Test("corrections must name a live sample, and may follow it in the same batch")
    func corrections() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let id = "0b3c1f7e-6a2d-4e8f-9b1c-5d7e9f0a1b2c"
            let unknown = "{\"kind\":\"correction\",\"target\":\"11111111-2222-4333-8444-555555555555\",\"action\":\"retract\",\"reason\":\"typo\"}"
            #expect { try log.append(try batch(unknown)) } throws: { ($0 as? InputError)?.field == "target" }

            let retract = "{\"kind\":\"correction\",\"target\":\"\(id)\",\"action\":\"retract\",\"reason\":\"double entry\"}"
            let sameBatch = try log.append(try batch(sampleLine(id: id) + "\n" + retract))
            #expect(sameBatch.appended == 2)
            let again = retract.replacingOccurrences(of: "double entry", with: "again")
            #expect { try log.append(try batch(again)) } throws: { error in
                (error as? InputError)?.message.contains("already retracted") == true
            }
            let id2 = "0b3c1f7e-6a2d-4e8f-9b1c-5d7e9f0a1b2d"
            _ = try log.append(try batch(sampleLine(id: id2)))
            let badUnit = "{\"kind\":\"correction\",\"target\":\"\(id2)\",\"action\":\"amend\",\"unit\":\"km\",\"reason\":\"r\"}"
            #expect { try log.append(try batch(badUnit)) } throws: { ($0 as? InputError)?.field == "unit" }
            let backwards = "{\"kind\":\"correction\",\"target\":\"\(id2)\",\"action\":\"amend\",\"end\":\"2026-11-29T07:00:00Z\",\"reason\":\"r\"}"
            #expect { try log.append(try batch(backwards)) } throws: { ($0 as? InputError)?.field == "end" }
            // Out of range after the amendment: a value over 1e15, a sample over 366 days.
            let huge = "{\"kind\":\"correction\",\"target\":\"\(id2)\",\"action\":\"amend\",\"value\":1e308,\"reason\":\"r\"}"
            #expect { try log.append(try batch(huge)) } throws: { ($0 as? InputError)?.field == "value" }
            let long = "{\"kind\":\"correction\",\"target\":\"\(id2)\",\"action\":\"amend\",\"end\":\"2030-01-01T00:00:00Z\",\"reason\":\"r\"}"
            #expect { try log.append(try batch(long)) } throws: { error in
                (error as? InputError).map { $0.field == "end" && $0.message.contains("366 days") } == true
            }
            let good = "{\"kind\":\"correction\",\"target\":\"\(id2)\",\"action\":\"amend\",\"value\":90,\"reason\":\"recount\"}"
            #expect(try log.append(try batch(good)).appended == 1)
            #expect(try log.head().seq == 4)
            // Nothing comes after the largest seq (a subscriber may ask for it).
            #expect(try log.changes(after: .max).changes.isEmpty)
            #expect(try log.records(after: .max).isEmpty)
        }
    }

    @Test("expect-head: a stale head writes nothing")
    func expectHead() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            _ = try log.append(try batch(sampleLine(value: 1)), expectHead: 0)
            #expect(throws: LedgerError.headMismatch(expected: 0, actual: 1)) {
                try log.append(try batch(sampleLine(value: 2)), expectHead: 0)
            }
            #expect(try log.append(try batch(sampleLine(value: 2)), expectHead: 1).head == 2)
        }
    }

    @Test("a full map grows by itself and the batch is whole")
    func mapGrows() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true, mapSize: 256 << 10)
            let before = log.environment.info.mapSize
            let result = try log.append(try batch(Fixtures.stepsFile(count: 5_000)))
            #expect(result.appended == 5_000)
            #expect(log.environment.info.mapSize > before)
            #expect(log.environment.rerunsAfterFullMap > 0)
            #expect(try log.verifyChain().verified == 5_000)
        }
    }

    @Test("reserving room first means a long batch is written once, not again after each doubling")
    func reserveAvoidsReruns() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true, mapSize: 256 << 10)
            let input = try batch(Fixtures.stepsFile(count: 5_000))
            try log.environment.reserve(8 << 20)
            let info = log.environment.info
            #expect(info.mapSize >= (info.lastPage + 1) * log.environment.pageSize + (8 << 20))
            #expect(info.mapSize == (256 << 10) << 6)  // doubled until it fits, no further
            #expect(try log.append(input).appended == 5_000)
            #expect(log.environment.rerunsAfterFullMap == 0)
            // Reserving what is already free changes nothing.
            let size = log.environment.info.mapSize
            try log.environment.reserve(1 << 10)
            #expect(log.environment.info.mapSize == size)
            #expect(try log.verifyChain().verified == 5_000)
        }
    }

    /// SIGINT during `ledger backup`: what was written is removed at once, while LMDB's copy,
    /// which nothing can cut short, ends on its own thread and then closes its descriptor.
    @Test("an interrupted backup removes what it wrote, and its copier closes its descriptor when it ends")
    func interruptedBackup() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            _ = try log.append(try batch(Fixtures.stepsFile(count: 20_000)))
            let destination = path + "-copy"
            defer { try? FileManager.default.removeItem(atPath: destination) }
            /// This process's descriptors open on the copy (other tests run beside this one).
            func onCopy() -> [String] {
                ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap {
                    try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)
                }.filter { $0.hasPrefix(destination + "/") }
            }
            #expect(throws: EventLog.Interrupted.self) { _ = try log.backup(to: destination, isInterrupted: { true }) }
            #expect(!FileManager.default.fileExists(atPath: destination))
            // The copier finishes into the removed file, then closes it.
            var open = onCopy()
            for _ in 0..<200 where !open.isEmpty {
                usleep(10_000)
                open = onCopy()
            }
            #expect(open.isEmpty, "\(open)")
            // The ledger is as it was, and a backup after it is whole.
            #expect(try log.backup(to: destination) > 0)
            #expect(try EventLog(path: destination, create: false).walkChain().verified == 20_000)
        }
    }

    /// A rebuild stopped by `isInterrupted` gives up its transaction. An audit of `ledger
    /// rebuild` under SIGTERM found it crashing in the allocator: the folding thread stopped
    /// while the reading thread waited to hand over a chunk, the channel freed that chunk, and
    /// the reading thread's error path handed the same chunk over again (a double free). The
    /// log here is long enough that the reading thread is waiting when the fold stops.
    @Test("a rebuild interrupted while the reading thread waits throws Interrupted and changes nothing")
    func interruptedRebuild() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            _ = try log.append(try batch(Fixtures.stepsFile(count: 30_000)))
            let transaction = log.lastTransactionID
            let rows = try log.rows(.daily, filter: RowFilter())
            for indexes in [false, true] {
                var asked = 0
                #expect(throws: EventLog.Interrupted.self) {
                    _ = try log.rebuildProjections(indexes: indexes, isInterrupted: { asked += 1; return asked > 1 })
                }
                #expect(log.lastTransactionID == transaction)
            }
            #expect(try log.rows(.daily, filter: RowFilter()) == rows)
            #expect(try log.rebuildProjections() == 30_000)
            #expect(try log.rows(.daily, filter: RowFilter()) == rows)
        }
    }

    /// The server checks a POST's token when its headers come and when its body is in; a
    /// large body then parses for seconds, and an audit's removal in between still let its
    /// 200,000 events be committed. The commit's own transaction checks it last.
    @Test("appendGroup refuses a batch whose client's token is gone in its transaction, and commits the others")
    func groupRefusesGoneToken() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let token = try log.addClient(name: "partner", admin: false)
            let client = try #require(try log.client(forToken: token))
            let prepared = { (line: String) in try batch(line).map { ($0.0, PreparedEvent($0.1)) } }
            let group = { try log.appendGroup([(try prepared(sampleLine(value: 1)), nil, client.tokenDigest, nil),
                                               (try prepared(sampleLine(value: 2, start: "2026-11-29T09:00:00Z", end: "2026-11-29T09:10:00Z")), nil, nil, nil)]) }
            _ = try log.rotateClient(name: "partner")
            let results = try group()
            guard case .failure(EventLog.ClientError.tokenGone) = results[0] else {
                Issue.record("the batch of a rotated-out token was not refused: \(results[0])")
                return
            }
            #expect((try? results[1].get())?.appended == 1)
            #expect(try log.head().seq == 1)
        }
    }

    /// The server checks a partner's `share` when its POST arrives; an audit's revoke,
    /// racing the POSTs, was committed before 63 of 160 of them, which were committed too.
    @Test("appendGroup refuses a partner's batch whose share was revoked by a batch committed before it, and commits one before the revoke")
    func groupRechecksShare() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let prepared = { (line: String) in try batch(line).map { ($0.0, PreparedEvent($0.1)) } }
            _ = try log.append(try batch(#"{"kind":"grant","user":"default","client":"partner","share":["steps"]}"#))
            let results = try log.appendGroup([
                (try prepared(sampleLine(value: 1)), nil, nil, "partner"),
                (try prepared(#"{"kind":"revoke","user":"default","client":"partner","share":["steps"]}"#), nil, nil, nil),
                (try prepared(sampleLine(value: 2, start: "2026-11-29T09:00:00Z", end: "2026-11-29T09:10:00Z")), nil, nil, "partner"),
                (try prepared(sampleLine(value: 3, start: "2026-11-29T10:00:00Z", end: "2026-11-29T10:10:00Z")), nil, nil, "other"),
            ])
            #expect((try? results[0].get())?.appended == 1)
            #expect((try? results[1].get())?.appended == 1)
            for (index, client) in [(2, "partner"), (3, "other")] {
                guard case .failure(EventLog.ClientError.notShared(let location, let message)) = results[index] else {
                    Issue.record("batch \(index) was not refused: \(results[index])")
                    continue
                }
                #expect(location == .line(1))
                #expect(message == "line 1: user 'default' has not granted client '\(client)' share on steps (as of this batch's commit)")
            }
            #expect(try log.head().seq == 3)
            _ = try log.verifyChain()
        }
    }

    @Test("flipping one stored byte makes verify name that seq")
    func tamperDetected() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            _ = try log.append(try batch(Fixtures.stepsFile(count: 20)))
            let target: UInt64 = 13
            try log.environment.write { txn in
                var bytes = try #require(try txn.get(log.events, target.bigEndianBytes))
                let index = bytes.count - 5  // inside the JSON body, e.g. a digit of a timestamp
                bytes[index] ^= 0x01
                try txn.put(log.events, target.bigEndianBytes, bytes)
            }
            #expect(throws: LedgerError.self) { try log.verifyChain() }
            do {
                _ = try log.verifyChain()
            } catch LedgerError.corrupt(let seq, _) {
                #expect(seq == target)
            }
        }
    }

    /// An audit: a value of -0.0 (or a negative number too small to represent) was kept as
    /// -0.0 in the typed part while the JSON said 0, and `verify` then called the record
    /// corrupt for ever (a rebuild cannot change the log).
    @Test("a value of -0.0 is stored as 0, and a record kept with -0.0 before verifies")
    func negativeZero() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let id = "9e797660-1cf9-4857-8722-526d474a60c7"
            let lines = [
                #"{"kind":"sample","id":"\#(id)","type":"distance","unit":"m","value":-0.0,"start":"2026-11-30T10:00:00Z","end":"2026-11-30T10:01:00Z","source":"a"}"#,
                #"{"kind":"sample","type":"steps","value":-0e0,"start":"2026-11-30T10:00:00Z","end":"2026-11-30T10:01:00Z","source":"b"}"#,
                #"{"kind":"sample","type":"steps","value":-1e-400,"start":"2026-11-30T11:00:00Z","end":"2026-11-30T11:01:00Z","source":"c"}"#,
                #"{"kind":"correction","target":"\#(id)","action":"amend","value":-0.0,"reason":"x"}"#,
            ]
            _ = try log.append(try batch(lines.joined(separator: "\n")))
            #expect(try log.verifyChain().verified == 4)
            for seq in UInt64(1)...3 {
                guard case .sample(let sample) = try #require(try log.record(at: seq)).typedEvent().payload else {
                    Issue.record("seq \(seq) is not a sample")
                    continue
                }
                #expect(sample.value == 0 && sample.value.sign == .plus, "seq \(seq): \(sample.value)")
            }
            // What appends kept before: the typed part with -0.0, the JSON with 0. The same
            // number, so `verify` passes it.
            let sample = Sample(user: "default", type: .steps, value: -0.0, unit: "count",
                                start: try Timestamp.parseRFC3339("2026-11-30T12:00:00Z").0,
                                end: try Timestamp.parseRFC3339("2026-11-30T12:01:00Z").0,
                                source: SampleSource(name: "d"))
            _ = try log.append { add in
                try add(nil, .checkedSample(id: UUID(), sample, start: "2026-11-30T12:00:00Z", end: "2026-11-30T12:01:00Z"))
            }
            let kept = try #require(try log.record(at: 5))
            guard case .sample(let stored) = try kept.typedEvent().payload else { return }
            #expect(stored.value.sign == .minus && String(decoding: kept.json, as: UTF8.self).contains(#""value":0"#))
            #expect(try log.verifyChain().verified == 5)
            // Any other difference is still corruption.
            try forgeTypedPart(of: log, at: 5)
            #expect(throws: LedgerError.self) { try log.verifyChain() }
        }
    }

    /// An import's reading thread leaves some events' content digests to the appending thread
    /// (`PreparedEvent.computeContentDigest`, `digesting: false`): those records and their
    /// chain are exactly what digested events give.
    @Test("an event made without its content digest is digested by the append, to the same record and chain")
    func deferredContentDigest() throws {
        func text(_ value: String) -> ShortText {
            ShortText { out in
                let bytes = Array(value.utf8)
                _ = out.initialize(from: bytes)
                return bytes.count
            }
        }
        func events(digesting: Bool) throws -> [PreparedEvent] {
            try (0..<300).map { index in
                let start = "2026-11-30T\(String(format: "%02d:%02d", index / 60 % 24, index % 60)):00Z"
                let end = "2026-11-30T\(String(format: "%02d:%02d", index / 60 % 24, index % 60)):30Z"
                let sample = Sample(user: "ann", type: .steps, value: Double(index), unit: "count",
                                    start: try Timestamp.parseRFC3339(start).0, end: try Timestamp.parseRFC3339(end).0,
                                    source: SampleSource(name: index % 3 == 0 ? "Watch" : "iPhone"))
                let id = UUID(uuid: (0, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, UInt8(index >> 8), UInt8(index & 0xFF)))
                return .checkedSample(id: id, sample, start: text(start), end: text(end), digesting: digesting)
            }
        }
        let digested = try events(digesting: true), left = try events(digesting: false)
        #expect(left.allSatisfy { $0.contentDigest == nil } && digested.allSatisfy { $0.contentDigest != nil })
        for (index, var event) in left.enumerated() where index % 50 == 0 {
            event.computeContentDigest()
            #expect(event.contentDigest == digested[index].contentDigest)
        }
        var stored: [[EventRecord]] = []
        for prepared in [digested, left] {
            try withTemporaryLedger { path in
                // One instant for every commit: the two ledgers' records, hashes included, are
                // then the same byte for byte if the digests are.
                let log = try EventLog(path: path, create: true, clock: { Timestamp(microseconds: 1_764_400_000_000_000) })
                // Half left and half digested in one batch, as an import's pieces come.
                _ = try log.append { add in
                    for (index, event) in prepared.enumerated() {
                        var event = event
                        if index >= 150 { event.computeContentDigest() }
                        try add(nil, event)
                    }
                }
                // The hashes recomputed from the stored bytes match the stored ones.
                #expect(try log.walkChain().verified == 300)
                #expect(try log.verifyChain().verified == 300)
                stored.append(try (1...300).map { try #require(try log.record(at: UInt64($0))) })
            }
        }
        #expect(stored[0] == stored[1])
        #expect(stored[0].map(\.hash) == stored[1].map(\.hash))
    }

    /// An audit: an early event altered (its value, in both its JSON and its typed part) was
    /// folded by `replay`, which showed the changed totals beside the stored hash of the seq
    /// it stopped at, the one an auditor kept.
    @Test("replay checks the hash chain up to its point")
    func replayChecksTheChain() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            _ = try log.append(try batch(Fixtures.stepsFile(count: 20)))
            let before = try log.withReplay(to: .seq(20)) { point, _ in point }
            try forgeTypedPart(of: log, at: 3)  // re-hashes seq 3 from seq 2, not the ones after
            #expect(performing: { _ = try log.withReplay(to: .seq(20)) { point, _ in point } }, throws: { error in
                guard case .corrupt(let seq, let reason)? = error as? LedgerError else { return false }
                return seq == 4 && reason.hasPrefix("its hash does not match")
            })
            // Up to a point before the change, the replay stands.
            #expect(try log.withReplay(to: .seq(2)) { point, _ in point.seq } == 2)
            #expect(before.seq == 20)
            // Nor does `rebuild` fold it (an audit: it did, and exited 0), and it changes nothing.
            let rows = try log.rows(.daily, filter: RowFilter())
            #expect(performing: { _ = try log.rebuildProjections() }, throws: { error in
                guard case .corrupt(let seq, let reason)? = error as? LedgerError else { return false }
                return seq == 4 && reason.hasPrefix("its hash does not match")
            })
            #expect(try log.rows(.daily, filter: RowFilter()) == rows)
        }
    }

    /// An audit: a copy of a record stored under seq 0 was never named (the chain starts at
    /// seq 1) while the fold in `verify` counted it; and a copy appended as a new seq, with a
    /// valid chain hash, was counted twice, while `verify` pointed at a repair of the index
    /// that could not mend it.
    @Test("a record before seq 1 and an id stored twice are named as the log's damage")
    func strayAndRepeatedRecords() throws {
        try withTemporaryLedger { path in
            let (environment, events, one, two) = try twoBatchRecords(path)
            // Seq 1's record again as seq 3, chained from seq 2 as an append would chain it.
            let copy = EventRecord.chained(seq: 3, recorded: two.recorded, endsBatch: true, body: one.body,
                                           typed: one.typed, previousHash: two.hash)
            try environment.write { txn in try txn.put(events, UInt64(3).bigEndianBytes, copy.bytes) }
            let log = try EventLog(path: path, create: false)
            func reused(_ error: any Error) -> Bool {
                guard case .corrupt(let seq, let reason)? = error as? LedgerError else { return false }
                return seq == 3 && reason.contains("is seq 1's too, and an id is in the log once")
            }
            #expect(performing: { _ = try log.verifyChain() }, throws: reused)
            #expect(performing: { _ = try log.rebuildProjections(indexes: true) }, throws: reused)
            // Nor does a plain rebuild count it (a review: it did, twice, after verify had named it).
            #expect(performing: { _ = try log.rebuildProjections() }, throws: reused)
            try environment.write { txn in
                _ = try txn.delete(events, UInt64(3).bigEndianBytes)
                try txn.put(events, UInt64(0).bigEndianBytes, one.encoded)
            }
            #expect(performing: { _ = try log.verifyChain() }, throws: { error in
                guard case .corrupt(let seq, let reason)? = error as? LedgerError else { return false }
                return seq == 0 && reason.contains("before seq 1, where the log begins: outside the hash chain")
            })
            let atZero: (any Error) -> Bool = { error in
                guard case .corrupt(let seq, _)? = error as? LedgerError else { return false }
                return seq == 0
            }
            #expect(performing: { _ = try log.withReplay(to: .seq(2)) { point, _ in point } }, throws: atZero)
            #expect(performing: { _ = try log.rebuildProjections() }, throws: atZero)
        }
    }

    /// A log from before the typed part holds format 1 records (JSON only): a repeated id is
    /// named among them too.
    @Test("an id stored twice is named in format 1 records")
    func repeatedIDInFormatOne() throws {
        try withTemporaryLedger { path in
            let (environment, events, one, two) = try twoBatchRecords(path)
            var copy = EventRecord(seq: 3, recorded: two.recorded, endsBatch: true, hash: EventRecord.genesisHash,
                                   body: one.body, typed: [], format: 1)
            copy.hash = copy.chainHash(previous: two.hash)
            try environment.write { txn in try txn.put(events, UInt64(3).bigEndianBytes, copy.encoded) }
            let log = try EventLog(path: path, create: false)
            #expect(performing: { _ = try log.verifyChain() }, throws: { error in
                guard case .corrupt(let seq, let reason)? = error as? LedgerError else { return false }
                return seq == 3 && reason.contains("is seq 1's too")
            })
        }
    }

    /// docs/STORAGE.md's definitions of the chain hash, computed here from the stored bytes
    /// with nothing of `EventRecord`'s: format 3 hashes the previous hash, the seq, the format
    /// and flags, `recorded` and the SHA-256 of the content (byte 42 on); format 2 the previous
    /// hash, the seq, the flags, `recorded` and the content itself.
    static func documentedHash(previous: [UInt8], seq: UInt64, stored: [UInt8]) -> [UInt8] {
        if stored[0] == 3 {
            return Digest.sha256(previous + seq.bigEndianBytes + [stored[0], stored[1]], Array(stored[34..<42]),
                                 Digest.sha256(Array(stored[42...])))
        }
        return Digest.sha256(previous + seq.bigEndianBytes + [stored[1]], Array(stored[34...]))
    }

    @Test("appends write format 3 records whose hash is the one docs/STORAGE.md defines, and mark the ledger format 4")
    func formatThreeChain() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            _ = try log.append(try batch(Fixtures.stepsFile(count: 30)))
            _ = try log.append(try batch(sampleLine(value: 7, start: "2026-11-29T09:00:00Z", end: "2026-11-29T09:10:00Z")))
            var previous = EventRecord.genesisHash
            try log.environment.read { txn in
                for seq in UInt64(1)...31 {
                    let stored = try #require(try txn.get(log.events, seq.bigEndianBytes))
                    #expect(stored[0] == 3, "seq \(seq)")
                    let hash = EventLogTests.documentedHash(previous: previous, seq: seq, stored: stored)
                    #expect(Array(stored[2..<34]) == hash, "seq \(seq)")
                    previous = hash
                }
                #expect(try txn.get(log.meta, Array("format".utf8)) == Array("4".utf8))
            }
            #expect(try log.verifyChain().verified == 31)
        }
    }

    /// A ledger an older release wrote holds format 2 records in a format 2 or 3 ledger: it
    /// verifies, and reading it changes nothing; the first append chains format 3 records
    /// onto it and marks it format 4, which older releases refuse to open.
    @Test("a log of format 2 records verifies, and appends continue its chain in format 3")
    func formatTwoContinued() throws {
        try withTemporaryLedger { path in
            let (environment, events, one, two) = try twoBatchRecords(path)
            let meta = try #require(try environment.openDatabases(["meta"])["meta"])
            var previous = EventRecord.genesisHash
            try environment.write { txn in
                for record in [one, two] {
                    var old = EventRecord(seq: record.seq, recorded: record.recorded, endsBatch: record.endsBatch,
                                          hash: EventRecord.genesisHash, body: record.body, typed: record.typed, format: 2)
                    old.hash = old.chainHash(previous: previous)
                    #expect(old.hash == EventLogTests.documentedHash(previous: previous, seq: old.seq, stored: old.encoded))
                    try txn.put(events, record.seq.bigEndianBytes, old.encoded)
                    previous = old.hash
                }
                try txn.put(meta, Array("format".utf8), Array("3".utf8))
            }
            let log = try EventLog(path: path, create: false)
            #expect(try log.verifyChain().verified == 2)
            #expect(try log.record(at: 2)?.format == 2)
            #expect(try log.environment.read { try $0.get(log.meta, Array("format".utf8)) } == Array("3".utf8),
                    "opening and verifying leave the format as it was")
            _ = try log.append(try batch(sampleLine(value: 9, start: "2026-11-30T09:00:00Z", end: "2026-11-30T09:10:00Z")))
            let three = try #require(try log.record(at: 3))
            #expect(three.format == 3)
            let stored = try #require(try log.environment.read { try $0.get(log.events, UInt64(3).bigEndianBytes) })
            #expect(three.hash == EventLogTests.documentedHash(previous: previous, seq: 3, stored: stored))
            #expect(try log.verifyChain().verified == 3)
            #expect(try log.walkChain().verified == 3)
            for k in UInt64(2)...3 {
                let point = try log.withReplay(to: .seq(k)) { point, _ in point }
                #expect(point.seq == k && point.hash == (k == 2 ? previous : three.hash))
            }
            #expect(try log.environment.read { try $0.get(log.meta, Array("format".utf8)) } == Array("4".utf8))
            #expect(try log.rebuildProjections() == 3)
            // A byte of either format's JSON changed, its hash kept, is named by the walk of
            // the chain, which checks hashes only (verify would also find the JSON and the
            // typed part at odds).
            func hashMismatch(at seq: UInt64) -> (any Error) -> Bool {
                { error in
                    guard case .corrupt(let bad, let reason)? = error as? LedgerError else { return false }
                    return bad == seq && reason.contains("its hash does not match")
                }
            }
            for (seq, original) in [(UInt64(1), try log.record(at: 1)!), (3, three)] {
                var forged = original
                let at = try #require(forged.body.firstIndex(of: UInt8(ascii: "9")) ?? forged.body.firstIndex(of: UInt8(ascii: "0")))
                forged.body[at] = forged.body[at] == UInt8(ascii: "9") ? UInt8(ascii: "8") : UInt8(ascii: "1")
                try log.environment.write { txn in try txn.put(log.events, seq.bigEndianBytes, forged.encoded) }
                #expect(performing: { _ = try log.walkChain() }, throws: hashMismatch(at: seq))
                #expect(performing: { _ = try log.verifyChain() }, throws: hashMismatch(at: seq))
                try log.environment.write { txn in try txn.put(log.events, seq.bigEndianBytes, original.encoded) }
                #expect(try log.walkChain().verified == 3)
            }
            // A format 2 record whose content is the format 3 record's digest would hash as
            // that record did if the format byte were left out (a review): it is named.
            let digest = Digest.sha256(Array(stored[42...]))
            let standIn = [2, stored[1]] + Array(stored[2..<42]) + digest
            #expect(EventLogTests.documentedHash(previous: previous, seq: 3, stored: standIn) != three.hash)
            try log.environment.write { txn in try txn.put(log.events, UInt64(3).bigEndianBytes, standIn) }
            #expect(performing: { _ = try log.walkChain() }, throws: hashMismatch(at: 3))
            try log.environment.write { txn in try txn.put(log.events, UInt64(3).bigEndianBytes, stored) }
            #expect(try log.verifyChain().verified == 3)
        }
    }

    @Test("ledger formats 2 to 4 open; a format this release does not know is refused on open, naming it")
    func newerFormatRefused() throws {
        try withTemporaryLedger { path in
            try makeTwoBatchLedger(path)
            for known in ["2", "3", "4"] {
                try putRaw(path, "meta", Array("format".utf8), Array(known.utf8))
                #expect(try EventLog(path: path, create: false).verifyChain().verified == 2, "format \(known)")
            }
            try putRaw(path, "meta", Array("format".utf8), Array("5".utf8))
            #expect(performing: { _ = try EventLog(path: path, create: false) }, throws: { error in
                (error as? LedgerError) == .unsupportedFormat(found: "5")
            })
            #expect(LedgerError.unsupportedFormat(found: "5").description.contains("newer than this release reads (1 to 4)"))
        }
    }

    /// An audit: a count of events by kind (what `stats` prints) that was damaged or wrong
    /// passed `verify`, though `stats` named it.
    @Test("verify compares the counts of events by kind with the log; rebuild --indexes counts again")
    func countsChecked() throws {
        try withTemporaryLedger { path in
            try makeTwoBatchLedger(path)
            for (value, reason) in [(UInt64(3).bigEndianBytes, "it counts 3 sample events; the log holds 2 (events removed from the log leave this)"),
                                    ([0, 1], "it holds 2 bytes, not 8")] {
                try putRaw(path, "meta", Array("count.sample".utf8), value)
                let log = try EventLog(path: path, create: false)
                #expect(performing: { _ = try log.verifyChain() }, throws: { error in
                    (error as? LedgerError) == .indexMismatch(index: "meta", key: "count.sample", reason: reason)
                })
                _ = try log.rebuildProjections(indexes: true)
                #expect(try log.verifyChain().verified == 2)
                #expect(try log.statistics().countsByKind[.sample] == 2)
            }
        }
    }

    /// Rewrites the typed part of the sample at `target` (its value plus one) and re-hashes the
    /// record from its predecessor, as someone covering their tracks would.
    func forgeTypedPart(of log: EventLog, at target: UInt64) throws {
        let stored = try #require(try log.record(at: target))
        guard case .sample(var sample) = try stored.typedEvent().payload else {
            Issue.record("seq \(target) is not a sample")
            return
        }
        sample.value += 1
        let previous = try #require(try log.record(at: target - 1)).hash
        let forged = EventRecord(seq: target, recorded: stored.recorded, endsBatch: stored.endsBatch, body: stored.body,
                                 typed: EventCodec.encode(id: try stored.typedEvent().id, payload: .sample(sample)),
                                 previousHash: previous)
        try log.environment.write { txn in try txn.put(log.events, target.bigEndianBytes, forged.encoded) }
    }

    @Test("a typed part that disagrees with its JSON fails verify even when re-hashed")
    func typedPartChecked() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            _ = try log.append(try batch(Fixtures.stepsFile(count: 20)))
            let target: UInt64 = 20
            let stored = try #require(try log.record(at: target))
            #expect(stored.format == 3)
            #expect(try stored.typedEvent().payload == stored.event().payload)
            // Someone rewrites the typed part (what folds read) and fixes up the hash.
            try forgeTypedPart(of: log, at: target)
            do {
                _ = try log.verifyChain()
                Issue.record("verify passed a record whose typed part was forged")
            } catch LedgerError.corrupt(let seq, let reason) {
                #expect(seq == target)
                #expect(reason.contains("typed part"))
            }
        }
    }

    @Test("verify names the first bad event wherever it lies among the chunks the two threads check")
    func firstBadEventAcrossChunks() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            _ = try log.append(try batch(Fixtures.stepsFile(count: 3 * 4096 + 100)))
            // A forged typed part, re-hashed: the record's own content check fails, and the
            // chain breaks at the next record. Chunks of 4,096 alternate between the threads;
            // 8,191 is the last of a chunk, so the chain breaks in the next one.
            for target: UInt64 in [100, 4096 + 100, 2 * 4096 - 1, 2 * 4096 + 7, 3 * 4096 + 50] {
                let stored = try #require(try log.record(at: target))
                try forgeTypedPart(of: log, at: target)
                do {
                    _ = try log.verifyChain()
                    Issue.record("verify passed a forged record at seq \(target)")
                } catch LedgerError.corrupt(let seq, let reason) {
                    #expect(seq == target, "\(reason)")
                    #expect(reason.contains("typed part"), "seq \(target): \(reason)")
                }
                try log.environment.write { txn in try txn.put(log.events, target.bigEndianBytes, stored.encoded) }
                #expect(try log.verifyChain().verified == 3 * 4096 + 100)
            }
            // A record that cannot even be decoded, after a forged one in the same read chunk:
            // the forged one comes first.
            for (forgedAt, brokenAt): (UInt64, UInt64) in [(3000, 4000), (4000, 4097), (5000, 8000)] {
                let forgedOriginal = try #require(try log.record(at: forgedAt))
                let brokenOriginal = try #require(try log.record(at: brokenAt))
                try forgeTypedPart(of: log, at: forgedAt)
                try log.environment.write { txn in
                    var bytes = brokenOriginal.encoded
                    bytes[0] = 9  // a record format no release writes
                    try txn.put(log.events, brokenAt.bigEndianBytes, bytes)
                }
                do {
                    _ = try log.verifyChain()
                    Issue.record("verify passed a forged record at seq \(forgedAt)")
                } catch LedgerError.corrupt(let seq, let reason) {
                    #expect(seq == forgedAt, "\(reason)")
                }
                try log.environment.write { txn in
                    try txn.put(log.events, forgedAt.bigEndianBytes, forgedOriginal.encoded)
                    try txn.put(log.events, brokenAt.bigEndianBytes, brokenOriginal.encoded)
                }
            }
            #expect(try log.verifyChain().verified == 3 * 4096 + 100)
        }
    }

    @Test("a rebuild in a transaction that has appended events folds those too")
    func rebuildFoldsItsOwnTransaction() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            _ = try log.append(try batch(Fixtures.stepsFile(count: 50, user: "ann")))
            let more = try EventInput.prepare(Array(Fixtures.stepsFile(count: 30, user: "bob").utf8))
            let folded = try log.environment.write { txn -> UInt64 in
                _ = try log.append(expectHead: nil, in: txn) { add in
                    for (location, event) in more { try add(location, event) }
                }
                // The rebuild's reading thread sees the committed log (seqs 1–50); 51–80 exist
                // only in this transaction.
                return try log.rebuildProjections(in: txn)
            }
            #expect(folded == 80)
            let position = try log.environment.read { txn in
                try txn.get(log.meta, EventLog.projectionPositionKey).map { UInt64(bigEndianBytes: $0) }
            }
            #expect(position == 80)
            #expect(try log.dailyTotals(user: "bob", type: .steps).map(\.value).reduce(0, +) == 300)
            #expect(try log.verifyProjections().rows > 0)
        }
    }

    @Test("a cut-off data.mdb or another program's environment is refused at open, not read")
    func damagedOrForeign() throws {
        try withTemporaryLedger { path in
            try makeLedger(path, steps: 2_000)
            let dataFile = (path as NSString).appendingPathComponent("data.mdb")
            #expect(truncate(dataFile, 8_192) == 0)
            #expect {
                _ = try EventLog(path: path, create: false)
            } throws: { error in
                guard case .damaged(_, let reason)? = error as? LedgerError else { return false }
                return reason.hasPrefix("data.mdb holds 8192 bytes, but its root pages lie within the first ")
            }
        }
        try withTemporaryLedger { path in
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            // Another program's environment, with a database that happens to be named `events`.
            try putRaw(path, "events", Array("k1".utf8), Array("x".utf8))
            #expect {
                _ = try EventLog(path: path, create: true)
            } throws: { error in
                guard case .notALedger(_, let reason)? = error as? LedgerError else { return false }
                return reason == "it has databases but no 'meta'"
            }
        }
    }

    @Test("a seq of the wrong length in 'events' is named as damage, not trapped on")
    func damagedSeqKey() throws {
        try withTemporaryLedger { path in
            try makeLedger(path, steps: 10)
            // A key cut to 7 bytes (it sorts after every 8-byte seq that starts with 7 zeros).
            try putRaw(path, "events", [0, 0, 0, 0, 0, 0, 6], [1])
            let log = try EventLog(path: path, create: false)
            func isDamage(_ error: any Error) -> Bool {
                guard case .damaged(_, let reason)? = error as? LedgerError else { return false }
                return reason.hasPrefix("'events' holds a seq of 7 bytes, not 8")
            }
            #expect(performing: { _ = try log.head() }, throws: isDamage)
            #expect(performing: { try log.rebuildProjections() }, throws: isDamage)
            // `verify` reads records one by one: every good one is visited, then the damage is
            // named as the event after them.
            var visited = 0
            #expect(performing: { try log.forEachRecord { _ in visited += 1; return true } }, throws: { error in
                guard case .corrupt(let seq, let reason)? = error as? LedgerError else { return false }
                return seq == 11 && reason == "its key in 'events' is 7 bytes, not 8"
            })
            #expect(visited == 10)
            #expect(throws: LedgerError.self) { _ = try log.verifyChain() }
        }
    }

    @Test("a number of the wrong length in 'meta' is named as damage, not trapped on")
    func damagedMetaNumber() throws {
        try withTemporaryLedger { path in
            try makeLedger(path, steps: 10)
            try putRaw(path, "meta", Array("count.sample".utf8), [0, 1])
            let log = try EventLog(path: path, create: false)
            #expect(performing: { _ = try log.statistics() }, throws: { error in
                guard case .damaged(_, let reason)? = error as? LedgerError else { return false }
                return reason == "'meta' holds 2 bytes under 'count.sample', not 8"
            })
            // Appending adds to the counter, so it is refused too, and writes nothing.
            #expect(throws: LedgerError.self) { _ = try log.append(try batch(sampleLine(value: 5))) }
            #expect(try log.head().seq == 10)
        }
    }

    /// An audit: `log` printed seqs 1, 3, 4 of a log whose seq 2 was removed, and exited 0.
    @Test("a walk of the log names a seq missing in its middle, after the events before it")
    func gapInTheMiddle() throws {
        try withTemporaryLedger { path in
            try makeLedger(path, steps: 4)
            try deleteRaw(path, "events", UInt64(2).bigEndianBytes)
            let log = try EventLog(path: path, create: false)
            var visited: [UInt64] = []
            #expect {
                try log.forEachRecord(after: 0) { visited.append($0.seq); return true }
            } throws: { error in
                guard case .corrupt(let seq, let reason)? = error as? LedgerError else { return false }
                return seq == 2 && reason.hasPrefix("missing from the log (the next event stored is seq 3)")
            }
            #expect(visited == [1])
            // From after the gap, the rest reads as it is.
            #expect(try log.records(after: 2).map(\.seq) == [3, 4])
            #expect(performing: { _ = try log.records(after: 1) }, throws: { ($0 as? LedgerError).map { "\($0)".hasPrefix("seq 2 is corrupt") } ?? false })
        }
    }

    /// An audit: deleting the newest event (and its index entries) passed `verify`, which,
    /// like every read and append, folded the shorter log over the projections that still
    /// showed it. Projections past the head are that evidence, and nothing folds over them.
    @Test("events removed from the log's end are named, and nothing folds the shorter log")
    func removedFromTheEnd() throws {
        try withTemporaryLedger { path in
            try makeTwoBatchLedger(path)
            let (_, second) = try lastRaw(path, "events")
            let id = try second.withUnsafeBytes { try RawRecord(seq: 2, $0).loggedEvent().id.bytes }
            try deleteRaw(path, "events", UInt64(2).bigEndianBytes)
            try deleteRaw(path, "ids", id)
            try deleteRaw(path, "samples", UInt64(2).bigEndianBytes)
            let log = try EventLog(path: path, create: false)
            func missing(_ error: any Error) -> Bool {
                guard case .corrupt(let seq, let reason)? = error as? LedgerError else { return false }
                return seq == 2 && reason.hasPrefix("missing from the log: its projections were folded up to seq 2, past its last event (seq 1)")
            }
            // The chain alone cannot tell; the counts of events by kind can, and with the
            // projections past the head it is named as what it is.
            #expect(performing: { _ = try log.verifyChain() }, throws: missing)
            #expect(performing: { _ = try log.verifyProjections() }, throws: missing)
            #expect(performing: { _ = try log.rows(.daily, filter: RowFilter()) }, throws: missing)
            #expect(performing: { _ = try log.append(try batch(sampleLine(value: 7, source: "Watch"))) }, throws: missing)
            #expect(performing: { _ = try log.rebuildProjections() }, throws: missing)
            // Nor are the changes of the removed event served (`subscribe`, SSE).
            #expect(performing: { _ = try log.changes(after: 0) }, throws: missing)
            // Nothing was written: the evidence is still there.
            #expect(try lastRaw(path, "events").key == UInt64(1).bigEndianBytes)
            #expect(try log.statistics().projectionPosition == 2)
            // Accepting the log as it is folds it, and everything works on it again.
            #expect(try log.rebuildProjections(acceptingHead: true) == 1)
            #expect(try log.verifyChain().verified == 1)  // the counts made again from the log
            #expect(try log.verifyProjections().rows > 0)
            #expect(try log.verifyIndexes() > 0)
            #expect(try log.dailyTotals(user: "default", type: .steps).map(\.value) == [100])
        }
    }

    /// An audit: `verify` brought stale projections up to date before comparing them, so rows
    /// someone altered, with the position or the fold version altered too, were folded again
    /// and then said to match.
    @Test("verify compares the stored projections as they are, and says when it could not")
    func verifyComparesStoredProjections() throws {
        try withTemporaryLedger { path in
            try makeTwoBatchLedger(path)
            try putRaw(path, "meta", Array("projections.position".utf8), UInt64(1).bigEndianBytes)
            do {
                let log = try EventLog(path: path, create: false)
                let behind: (any Error) -> Bool = { ($0 as? LedgerError) == .projectionsBehind(position: 1, head: 2) }
                #expect(performing: { _ = try log.verifyProjections() }, throws: behind)
                // Nor does a read fold the log over them without a word; `rebuild` does, asked.
                #expect(performing: { _ = try log.rows(.daily, filter: RowFilter()) }, throws: behind)
                #expect(performing: { _ = try log.append(try batch(sampleLine(value: 7, source: "Watch"))) }, throws: behind)
                #expect(try log.rebuildProjections() == 2)
                #expect(try log.verifyProjections().upgradedFrom == nil)
            }
            // Another fold version's projections are made again, and the report says they were
            // not compared.
            try putRaw(path, "meta", Array("projections.version".utf8), UInt64(1).bigEndianBytes)
            let log = try EventLog(path: path, create: false)
            let report = try log.verifyProjections()
            #expect(report.upgradedFrom == 1 && report.rows > 0)
            #expect(try log.verifyProjections().upgradedFrom == nil)
        }
    }

    /// The projections are derived, so damage to them is named, nothing is written on top of
    /// it, and `rebuild` repairs it; before, a damaged record trapped every reader.
    @Test("a damaged projection record or position is an error naming rebuild, and rebuild repairs it")
    func damagedProjectionState() throws {
        try withTemporaryLedger { path in
            try makeLedger(path, steps: 10)
            // user 1's steps: a last-known record whose day no calendar holds.
            try putRaw(path, "p.lastKnown", StateKey.userType(1, .steps), [0x7F] + [UInt8](repeating: 0xFF, count: 39))
            let log = try EventLog(path: path, create: false)
            #expect(throws: DamagedState.self) { _ = try log.rows(.lastKnown, filter: RowFilter()) }
            #expect(throws: DamagedState.self) { _ = try log.verifyProjections().rows }
            #expect(throws: DamagedState.self) { _ = try log.append(try batch(sampleLine(value: 5))) }
            #expect(try log.head().seq == 10)
            _ = try log.rebuildProjections()
            #expect(try log.verifyProjections().rows > 0)
            #expect(try log.rows(.lastKnown, filter: RowFilter()).count == 1)
        }
        try withTemporaryLedger { path in
            try makeLedger(path, steps: 10)
            try putRaw(path, "meta", Array("projections.position".utf8), [1])
            let log = try EventLog(path: path, create: false)
            #expect(performing: { _ = try log.rows(.daily, filter: RowFilter()) }, throws: { error in
                (error as? DamagedState)?.description.contains("'meta' holds 1 bytes under 'projections.position', not 8") == true
                    && "\(error)".contains("'ledger rebuild'")
            })
            _ = try log.rebuildProjections()
            #expect(try log.verifyProjections().rows > 0)
        }
    }

    /// The state's date checks once refused samples an offset moved out of the years
    /// 0000–9999 (and a zone one day further). Input now stops a day inside those years
    /// (`Timestamp.eventRange`), so every day is a date; the edges still fold and verify.
    @Test("samples at the edges of the instants events may name fold, verify and rebuild; past them, refused")
    func extremeDays() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            for (line, field) in [(#"{"kind":"sample","user":"ann","type":"steps","value":100,"start":"9999-12-31T20:00:00-23:00","end":"9999-12-31T20:00:30-23:00","source":"iPhone"}"#, "start"),
                                  (#"{"kind":"sample","user":"bob","type":"steps","value":100,"start":"0000-01-01T23:59:00Z","end":"0000-01-02T00:01:00Z","source":"iPhone"}"#, "start"),
                                  (#"{"kind":"sample","user":"bob","type":"steps","value":100,"start":"9999-12-30T23:59:00Z","end":"9999-12-31T00:00:01Z","source":"iPhone"}"#, "end")] {
                #expect(performing: { _ = try log.append(try batch(line)) }, throws: { error in
                    "\(error)".contains("'\(field)' is outside the instants an event may name")
                })
            }
            _ = try log.append(try batch("""
                {"kind":"sample","user":"ann","type":"steps","value":100,"start":"9999-12-30T23:59:30Z","end":"9999-12-31T00:00:00Z","zone":"+14:00","source":"iPhone"}
                {"kind":"sample","user":"bob","type":"steps","value":100,"start":"0000-01-02T00:00:00Z","end":"0000-01-02T00:01:00Z","source":"iPhone"}
                """))
            _ = try log.append(try batch(#"{"kind":"profile","user":"bob","zone":"-12:00"}"#))
            let days = try log.rows(.daily, filter: RowFilter()).compactMap { $0.values["date"]?.stringValue }
            #expect(days == ["9999-12-31", "0000-01-01"])
            #expect(try log.verifyProjections().rows == 6)
            _ = try log.rebuildProjections()
            #expect(try log.verifyIndexes() > 0)
        }
    }

    @Test("a stored change whose user length runs past its end is named as damage, not trapped on")
    func damagedChange() throws {
        try withTemporaryLedger { path in
            try makeLedger(path, steps: 3)
            let (key, value) = try lastRaw(path, "changes")
            try putRaw(path, "changes", key, Array(value.prefix(2)) + [0x7F, 0xFF, 0xFF, 0xFF] + Array(value.dropFirst(6)))
            let log = try EventLog(path: path, create: false)
            #expect(throws: DamagedState.self) { _ = try log.changes(after: 0) }
            _ = try log.rebuildProjections()
            #expect(try log.changes(after: 0).changes.count > 0)
        }
    }

    @Test("a client record cut short is named as damage by list, remove and token lookup, not trapped on")
    func damagedClient() throws {
        try withTemporaryLedger { path in
            let token = try {
                let log = try EventLog(path: path, create: true)
                return try log.addClient(name: "app", admin: false)
            }()
            try putRaw(path, "clients", [UInt8(ascii: "n")] + Digest.sha256(Array("app".utf8)), [1, 2])
            let log = try EventLog(path: path, create: false)
            for call in [{ _ = try log.clients() }, { _ = try log.client(forToken: token) }, { try log.removeClient(name: "app") }] {
                #expect(performing: call, throws: { error in
                    guard case .damaged(_, let reason)? = error as? LedgerError else { return false }
                    return reason == "a client record in 'clients' is 2 bytes, shorter than 41"
                })
            }
        }
    }

    /// A bucket holds what the next fold of its day starts from, not a row: damage to it that
    /// still decodes showed in no row until an append touched that day.
    @Test("verify compares the fold's stored state too, and names the first differing entry")
    func verifyComparesState() throws {
        try withTemporaryLedger { path in
            try makeLedger(path, steps: 10)
            let (key, value) = try lastRaw(path, "p.buckets")
            var damaged = value
            damaged[damaged.count - 1] ^= 0x01  // the last entry's value, still a number
            try putRaw(path, "p.buckets", key, damaged)
            let log = try EventLog(path: path, create: false)
            #expect(performing: { _ = try log.verifyProjections().rows }, throws: { error in
                (error as? LedgerError) == .stateMismatch(table: "buckets", key: key.hex)
            })
            _ = try log.rebuildProjections()
            #expect(try log.verifyProjections().rows > 0)
        }
    }

    /// The changes are what subscribers are sent: a stored change that differs from what the
    /// fold makes, one too many, or one missing, is named; rebuild writes them again.
    @Test("verify compares the stored changes with the fresh fold's, batch by batch")
    func verifyComparesChanges() throws {
        try withTemporaryLedger { path in
            try makeLedger(path, steps: 10)
            do {
                let log = try EventLog(path: path, create: false)
                _ = try log.append(try batch(sampleLine(value: 5)))
                #expect(try log.verifyProjections().rows > 0)
            }
            let (key, value) = try lastRaw(path, "changes")
            var altered = value
            altered[altered.count - 2] ^= 0x01  // inside the change's JSON, which still decodes
            var extra = key
            extra[extra.count - 1] &+= 1  // the next index of the same seq
            let damages: [(String, () throws -> Void, [UInt8])] = [
                ("altered", { try putRaw(path, "changes", key, altered) }, key),
                ("one too many", { try putRaw(path, "changes", extra, value) }, extra),
                ("missing", { try deleteRaw(path, "changes", key) }, key),
            ]
            for (name, damage, named) in damages {
                try damage()
                let log = try EventLog(path: path, create: false)
                #expect("\(name)", performing: { _ = try log.verifyProjections().rows }, throws: { error in
                    (error as? LedgerError) == .stateMismatch(table: "changes", key: named.hex)
                })
                _ = try log.rebuildProjections()
                #expect(try log.verifyProjections().rows > 0, "\(name)")
            }
        }
    }

    @Test("verifyProjections passes while another thread appends")
    func verifyDuringAppends() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            _ = try log.append(try batch(Fixtures.stepsFile(count: 500)))
            let stop = Atomic<Bool>(false)
            let appended = Atomic<Int>(0)
            let finished = DispatchSemaphore(value: 0)
            let firstAppend = DispatchSemaphore(value: 0)
            let writer = Thread {
                defer { finished.signal() }
                var day = 0
                while !stop.load(ordering: .relaxed) {
                    day += 1  // one sample a day, so each replay stays short however many are appended
                    let start = Timestamp(microseconds: 1_800_000_000_000_000 + Int64(day) * 86_400_000_000)
                    let end = Timestamp(microseconds: start.microseconds + 600_000_000)
                    let line = sampleLine(value: 3, start: start.rfc3339, end: end.rfc3339)
                    if (try? log.append(try batch(line))) != nil, appended.add(1, ordering: .relaxed).newValue == 1 {
                        firstAppend.signal()
                    }
                }
            }
            writer.start()
            defer {
                stop.store(true, ordering: .relaxed)
                finished.wait()
            }
            // Each check replays to the head it read with the stored rows, whatever commits after.
            // Twenty checks while the writer runs (it stops only after them).
            #expect(firstAppend.wait(timeout: .now() + 30) == .success)
            for _ in 0..<20 {
                #expect(throws: Never.self) { _ = try log.verifyProjections().rows }
            }
            let during = appended.load(ordering: .relaxed)
            #expect(during > 1, "the writer appended while verify ran")
        }
    }

    @Test("one append of more than 65,536 events ends a batch every 65,536: changes at each end, rebuild reproduces them")
    func longAppendEndsBatches() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            let count = EventLog.maximumBatch + 1_000
            // One step sample a minute: the day holding seq 65,536 is touched by both batches.
            let result = try log.append(try batch(Fixtures.stepsFile(count: count)))
            #expect(result.appended == count)
            #expect(try log.record(at: UInt64(EventLog.maximumBatch))?.endsBatch == true)
            #expect(try log.record(at: UInt64(EventLog.maximumBatch) - 1)?.endsBatch == false)
            #expect(try log.record(at: UInt64(count))?.endsBatch == true)
            let before = try log.changes(after: 0, limit: 1_000_000).changes
            #expect(before.contains { $0.seq == UInt64(EventLog.maximumBatch) }, "the first end flushed its changes")
            #expect(before.contains { $0.seq == UInt64(count) })
            // A rebuild flushes at the same ends and so writes the same changes and rows.
            try log.rebuildProjections()
            let after = try log.changes(after: 0, limit: 1_000_000).changes
            #expect(after == before)
            #expect(try log.verifyProjections().rows > 0)
            let total = try log.dailyTotals(user: "default", type: .steps).map(\.value).reduce(0, +)
            #expect(total == Double(count) * 10)
        }
    }

    @Test("concurrent appends from many threads in one process lose nothing")
    func concurrentInProcess() async throws {
        try await withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        let text = Fixtures.stepsFile(count: 250, user: "user-\(worker)")
                        let events = try EventInput.decode(Array(text.utf8)).map { (Optional($0.0), $0.1) }
                        for chunk in stride(from: 0, to: events.count, by: 25) {
                            _ = try log.append(Array(events[chunk..<min(chunk + 25, events.count)]))
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try log.head().seq == 2_000)
            #expect(try log.verifyChain().verified == 2_000)
        }
    }

    @Test("a missing ledger is an error for readers and is created by writers")
    func missingLedger() throws {
        try withTemporaryLedger { path in
            #expect(throws: LedgerError.noLedger(path: path)) { try EventLog(path: path, create: false) }
            #expect(!FileManager.default.fileExists(atPath: path))
            _ = try EventLog(path: path, create: true)
            #expect(FileManager.default.fileExists(atPath: path + "/data.mdb"))
        }
    }

    @Test("the default zone can be set before events exist, and not changed after")
    func defaultZone() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            try log.initialize(zone: try #require(Zone("Europe/Paris")))
            #expect(try log.defaultZone().name == "Europe/Paris")
            try log.initialize(zone: try #require(Zone("Europe/Paris")))
            _ = try log.append(try batch(sampleLine()))
            #expect(throws: LedgerError.self) { try log.initialize(zone: try #require(Zone("UTC"))) }
        }
    }

    /// `init --timezone` wrote the zone in a second transaction: killed between the two, it
    /// left a ledger in UTC that looked initialized, and an append then fixed UTC for good.
    @Test("a ledger created with a zone has it from its first transaction; reopening keeps it")
    func zoneAtCreation() throws {
        try withTemporaryLedger { path in
            let paris = try #require(Zone("Europe/Paris"))
            let created = try EventLog(path: path, create: true, zone: paris)
            #expect(try created.defaultZone().name == "Europe/Paris")
            #expect(try created.head().seq == 0)
            // The zone asked for when opening an existing ledger changes nothing: only
            // `initialize` sets it, and only before events exist.
            let reopened = try EventLog(path: path, create: true, zone: Zone("UTC"))
            #expect(try reopened.defaultZone().name == "Europe/Paris")
        }
    }
}

/// A replay of some users leaves each record's link of the hash chain to the folding thread
/// (`ChainWalk.checkDeferringHash`): it must name the record the walk of the chain names.
@Suite("replay of some users and the hash chain")
struct ReplayChainTests {
    /// 9,000 samples of two users, in one batch: three of `foldRecords`' pieces of 4,096.
    static func lines() -> String {
        (0..<9_000).map { index in
            let time = String(format: "2026-11-%02dT%02d:%02d:00Z", 1 + index / 1_440, index % 1_440 / 60, index % 60)
            let end = String(format: "2026-11-%02dT%02d:%02d:30Z", 1 + index / 1_440, index % 1_440 / 60, index % 60)
            return #"{"kind":"sample","user":"u\#(index % 2)","type":"steps","value":\#(index % 90),"start":"\#(time)","end":"\#(end)","source":"iPhone"}"#
        }.joined(separator: "\n")
    }

    @Test("an altered record is named by a replay of one user as by a replay of all, before a later missing record")
    func alteredThenMissing() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            _ = try log.append(try batch(ReplayChainTests.lines()))
            func failure(users: Set<String>?) -> (seq: UInt64, reason: String)? {
                do {
                    _ = try log.withReplay(to: .seq(9_000), users: users) { point, _ in point }
                    return nil
                } catch LedgerError.corrupt(let seq, let reason) {
                    return (seq, reason)
                } catch {
                    Issue.record("unexpected \(error)")
                    return nil
                }
            }
            // Intact: the same point either way.
            let one = try log.withReplay(to: .seq(9_000), users: ["u1"]) { point, query in
                (point, try query.rows(.daily, filter: RowFilter(user: "u1")))
            }
            let all = try log.withReplay(to: .seq(9_000)) { point, query in
                (point, try query.rows(.daily, filter: RowFilter(user: "u1")))
            }
            #expect(one.0 == all.0 && one.0.seq == 9_000 && one.1 == all.1 && !one.1.isEmpty)
            // A byte of record 5,000's JSON changed, its hash kept.
            let original = try #require(try log.record(at: 5_000))
            var forged = original
            let at = try #require(forged.body.firstIndex(of: UInt8(ascii: "u")))
            forged.body[at + 1] = UInt8(ascii: "x")
            try log.environment.write { txn in try txn.put(log.events, UInt64(5_000).bigEndianBytes, forged.encoded) }
            for users in [Set(["u1"]), Set(["u0"]), nil] {
                let found = failure(users: users)
                #expect(found?.seq == 5_000 && found?.reason.hasPrefix("its hash does not match") == true, "\(String(describing: users)): \(String(describing: found))")
            }
            // And record 5,100, in the same piece, missing: the reading thread stops there, but
            // the altered record before it is still the one named.
            try log.environment.write { txn in _ = try txn.delete(log.events, UInt64(5_100).bigEndianBytes) }
            for users in [Set(["u1"]), nil] {
                let found = failure(users: users)
                #expect(found?.seq == 5_000 && found?.reason.hasPrefix("its hash does not match") == true, "\(String(describing: users)): \(String(describing: found))")
            }
            // The altered record put back: the missing one is named.
            try log.environment.write { txn in try txn.put(log.events, UInt64(5_000).bigEndianBytes, original.encoded) }
            for users in [Set(["u1"]), nil] {
                let found = failure(users: users)
                #expect(found?.seq == 5_100 && found?.reason.hasPrefix("missing from the log") == true, "\(String(describing: users)): \(String(describing: found))")
            }
        }
    }

    @Test("a record altered so that its time goes back, or so that its typed event does not read, is named for its hash")
    func alteredTimeOrEvent() throws {
        try withTemporaryLedger { path in
            let log = try EventLog(path: path, create: true)
            _ = try log.append(try batch(ReplayChainTests.lines()))
            let original = try #require(try log.record(at: 6_000))
            var earlier = original
            earlier.recorded = Timestamp(microseconds: 0)
            var unreadable = original
            unreadable.typed[16] = 9  // the kind: none such
            for forged in [earlier, unreadable] {
                try log.environment.write { txn in try txn.put(log.events, UInt64(6_000).bigEndianBytes, forged.encoded) }
                for users in [Set(["u1"]), Set(["u0"]), nil] {
                    do {
                        _ = try log.withReplay(to: .seq(9_000), users: users) { point, _ in point }
                        Issue.record("replayed an altered log for \(String(describing: users))")
                    } catch LedgerError.corrupt(let seq, let reason) {
                        #expect(seq == 6_000 && reason.hasPrefix("its hash does not match"), "\(String(describing: users)): \(seq) \(reason)")
                    }
                }
            }
            try log.environment.write { txn in try txn.put(log.events, UInt64(6_000).bigEndianBytes, original.encoded) }
            #expect(try log.withReplay(to: .seq(9_000), users: ["u0"]) { point, _ in point.seq } == 9_000)
        }
    }
}
