import LedgerCore
import Projections

extension EventLog {
    /// What `verify` found.
    public struct VerifyReport: Sendable, Equatable {
        /// Events whose chain hash was recomputed and matched.
        public var verified: UInt64
        public var head: Head
    }

    /// Recomputes the hash chain from `seq` 1 to the head, and checks that positions are
    /// gapless and times do not go back: the chain alone, without `verifyChain`'s decoding of
    /// every event and its other checks (about a tenth of its time). What `backup` checks its
    /// copy with. Throws `LedgerError.corrupt` naming the first bad `seq`.
    /// `isInterrupted` is asked every 4,096 records; when it says so, `Interrupted` is thrown.
    public func walkChain(progress: ((UInt64) -> Void)? = nil, isInterrupted: () -> Bool = { false }) throws -> VerifyReport {
        var chain = ChainWalk()
        try environment.read { txn in
            try txn.scan(events) { key, value in
                if chain.expected % 4096 == 0, isInterrupted() { throw Interrupted() }
                let raw = RawRecord(seq: try seq(key, in: "events"), value)
                guard raw.isWellFormed else { _ = try EventRecord(seq: raw.seq, decoding: raw.bytes); return false }
                try chain.check(raw)
                if raw.seq % EventLog.progressStep == 0 { progress?(raw.seq) }
                return true
            }
        }
        return VerifyReport(verified: chain.expected - 1, head: Head(seq: chain.expected - 1, hash: chain.previousHash, recorded: chain.lastRecorded))
    }

    /// Recomputes the hash chain from `seq` 1 and checks that positions are gapless and that
    /// every stored event decodes. Throws `LedgerError.corrupt` naming the first bad `seq`.
    /// `progress` is called every `progressStep` (65,536) events with the count so far.
    ///
    /// Decoding each event's JSON (to compare it with its typed part) is most of the work, and
    /// it does not depend on the chain: a second thread walks the chain in order and checks
    /// the content of every other chunk of 4,096 records, while this thread checks the chunks
    /// in between. The first bad event is still the one reported: a chunk is handed over (or
    /// checked) before any later record's problem is raised (`Pipeline` consumes what was sent
    /// before rethrowing the producer's error).
    public func verifyChain(progress: ((UInt64) -> Void)? = nil) throws -> VerifyReport {
        enum Item: Sendable {
            /// Records for this thread to check.
            case records([EventRecord])
            /// The reading thread checked records up to this seq itself.
            case checked(UInt64)
            case end(VerifyReport)
        }
        var report = VerifyReport(verified: 0, head: Head(seq: 0, hash: EventRecord.genesisHash, recorded: nil))
        var reported: UInt64 = 0
        try Pipeline.run(depth: 4, produce: { (emit: (consuming Item) throws -> Void) in
            // A record keyed before seq 1 is outside the chain, which the walk below starts at
            // (an audit: a copy stored at seq 0 was never named, and the fold counted it).
            try self.environment.read { txn in
                try txn.scan(self.events) { key, _ in
                    if Array(key).lexicographicallyPrecedes(UInt64(1).bigEndianBytes) {
                        throw LedgerError.corrupt(seq: 0, reason: "a record is stored at key \(Array(key).hex) in 'events', before seq 1, where the log begins: outside the hash chain")
                    }
                    return false
                }
            }
            // Appends admit an id once; a second is a record someone added with a valid chain
            // hash (an audit: the fold counted it twice, and verify sent the user round a
            // repair of the index that could not mend it).
            var chain = ChainWalk(checkingIDs: true, capacity: try self.head().seq)
            // Events of each kind, against the counts appends keep (`stats`; an audit found a
            // damaged count that `stats` named passed by `verify`).
            var kinds: [EventKind: UInt64] = [:]
            var last: EventRecord?
            var chunk: [EventRecord] = []
            var handOver = true
            do {
                try self.forEachRecord { record in
                    try chain.check(seq: record.seq, recorded: record.recorded, storedHash: record.hash,
                                    hash: record.chainHash(previous:))
                    // The id and the kind lead the typed part; a format 1 record (of a log from
                    // before the typed part) has only its JSON, decoded here for them.
                    let header = try record.typed.withUnsafeBytes(EventCodec.header(of:))
                        ?? { let event = try record.event(); return (event.id, event.payload.kind) }()
                    try chain.checkID(header.id, at: record.seq)
                    kinds[header.kind, default: 0] += 1
                    last = record
                    chunk.append(record)
                    if chunk.count == 4096 {
                        if handOver {
                            try emit(.records(chunk))
                        } else {
                            try EventLog.checkContent(chunk)
                            try emit(.checked(record.seq))
                        }
                        handOver.toggle()
                        chunk.removeAll(keepingCapacity: true)
                    }
                    return true
                }
            } catch let cancelled as Pipeline.Cancelled {
                throw cancelled  // this thread found a bad event first
            } catch {
                // Events before the one that broke the chain may themselves be bad, and they
                // come first.
                try EventLog.checkContent(chunk)
                throw error
            }
            if !chunk.isEmpty { try emit(.records(chunk)) }
            // The counts are written with the events they count: compared in a snapshot whose
            // head is the last record walked (an append that landed during the walk is not in
            // it, and the counts are then not compared).
            try self.environment.read { txn in
                guard try self.head(in: txn).seq == chain.expected - 1 else { return }
                for kind in EventKind.allCases {
                    let stored = try txn.get(self.meta, EventLog.countKey(kind))
                    let counted = kinds[kind] ?? 0
                    guard stored?.count ?? 8 == 8 else {
                        throw LedgerError.indexMismatch(index: "meta", key: "count.\(kind.rawValue)", reason: "it holds \(stored!.count) bytes, not 8")
                    }
                    let says = stored.map { UInt64(bigEndianBytes: $0) } ?? 0
                    if says > counted, let position = try? self.metaNumber(EventLog.projectionPositionKey, in: txn) {
                        // Events removed from the log's end: named as such, with its remedy,
                        // when the projections show it too.
                        try EventLog.checkNotPastHead(position: position, head: chain.expected - 1)
                    }
                    guard says == counted else {
                        throw LedgerError.indexMismatch(index: "meta", key: "count.\(kind.rawValue)", reason: "it counts \(says) \(kind.rawValue) events; the log holds \(counted)"
                            + (says > counted ? " (events removed from the log leave this)" : ""))
                    }
                }
            }
            try emit(.end(VerifyReport(verified: chain.expected - 1,
                                       head: Head(seq: last?.seq ?? 0, hash: chain.previousHash, recorded: last?.recorded))))
        }, consume: { item in
            var seq: UInt64?
            switch item {
            case .records(let records):
                try EventLog.checkContent(records)
                seq = records.last?.seq
            case .checked(let last):
                seq = last
            case .end(let final):
                report = final
            }
            // Chunks come in order, so each multiple of 65,536 is passed exactly once.
            if let seq, seq / EventLog.progressStep > reported / EventLog.progressStep {
                reported = seq
                progress?(seq - seq % EventLog.progressStep)
            }
        })
        return report
    }

    /// Checks that each record's JSON decodes and that its typed part says what the JSON says.
    private static func checkContent(_ records: [EventRecord]) throws {
        for record in records {
            let event = try record.event()
            if record.format >= 2, EventCodec.encode(id: event.id, payload: event.payload) != record.typed {
                // Appends before 2026-12-01 kept a value of -0.0 as such in the typed part while
                // the JSON says 0: the same number, and no damage.
                guard let typed = try? record.typedEvent(), typed.id == event.id, typed.payload == event.payload else {
                    throw LedgerError.corrupt(seq: record.seq, reason: "its typed part does not say what its JSON says")
                }
            }
        }
    }
}

extension EventLog {
    /// Checks the log's own indexes, which appends keep beside the log: `ids` maps each
    /// event's id to its seq and holds nothing else; `samples` holds a state for every sample,
    /// active exactly for the samples the fold counts, with the fold's type, times and unit;
    /// `sync` names the version the fold counts. The fold's state and the stored changes are
    /// compared with a fresh fold of the log by `verifyProjections`.
    /// Throws `LedgerError.indexMismatch` naming the index and key. Returns the entries checked.
    public func verifyIndexes() throws -> Int {
        try ensureProjectionsCurrent()
        return try environment.read { txn in
            func mismatch(_ index: String, _ key: UnsafeRawBufferPointer, _ reason: String) -> LedgerError {
                .indexMismatch(index: index, key: Array(key).hex, reason: reason)
            }
            let head = try self.head(in: txn).seq
            var checked = 0
            // ids: one entry per event, each naming the event that has that id.
            var idCount: UInt64 = 0
            try txn.scan(ids) { key, value in
                idCount += 1
                guard value.count == 8 else { throw mismatch("ids", key, "it holds a seq of \(value.count) bytes") }
                let seq = UInt64(bigEndianBytes: Array(value))
                let id = try txn.withValue(events, Array(value)) { bytes -> [UInt8]? in
                    let raw = RawRecord(seq: seq, bytes)
                    if let typed = raw.typed, typed.count >= 16 { return Array(typed.prefix(16)) }
                    return try raw.loggedEvent().id.bytes
                } ?? nil
                guard id.map({ $0.elementsEqual(key) }) == true else {
                    throw mismatch("ids", key, id == nil ? "it names seq \(seq), which the log does not hold" : "it names seq \(seq), whose event has another id")
                }
                return true
            }
            guard idCount == head else {
                throw LedgerError.indexMismatch(index: "ids", key: "-", reason: "it holds \(idCount) ids for \(head) events")
            }
            checked += Int(idCount)
            // samples: a state for each sample; the active ones are the samples the fold counts.
            let fold = stateStore(txn)
            var active = 0
            try txn.scan(samples) { key, value in
                checked += 1
                guard key.count == 8, let state = SampleState(Array(value)) else {
                    throw mismatch("samples", key, "its state is \(value.count) bytes that do not decode")
                }
                let counted = try fold.get(.samples, Array(key))
                guard state.status == .active else {
                    if counted != nil { throw mismatch("samples", key, "the sample is \(state.status) but the fold counts it") }
                    return true
                }
                active += 1
                guard let counted else { throw mismatch("samples", key, "the sample is active but the fold does not count it") }
                let record = try StoredSample.summary(counted)
                guard record.type == state.type, record.start == state.start, record.end == state.end,
                      record.unit == state.unit else {
                    throw mismatch("samples", key, "its type, times or unit differ from the fold's")
                }
                return true
            }
            // The fold's tables are counted by LMDB (`mdb_stat`), not walked.
            func entries(_ table: StateTable) throws -> Int { try txn.count(stateDatabases[table.ordinal]) }
            let counted = try entries(.samples)
            guard counted == active else {
                throw LedgerError.indexMismatch(index: "samples", key: "-", reason: "it holds \(active) active samples; the fold counts \(counted)")
            }
            // sync: for each synced sample, the version the fold counts.
            var synced = 0
            try txn.scan(sync) { key, value in
                checked += 1
                synced += 1
                guard value.count == 16, try fold.get(.sync, Array(key)) == Array(value[8..<16]) else {
                    throw mismatch("sync", key, "it names another version than the fold counts")
                }
                return true
            }
            let foldSynced = try entries(.sync)
            guard foldSynced == synced else {
                throw LedgerError.indexMismatch(index: "sync", key: "-", reason: "it holds \(synced) synced samples; the fold \(foldSynced)")
            }
            return checked
        }
    }
}
