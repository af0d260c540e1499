import Foundation
import LedgerCore
import Projections

/// What the log knows about a sample, for checking corrections and sync versions against it.
///
/// Stored in `samples` under the sample's seq as: status (1 byte: 0 active, 1 retracted, 2 superseded), type code
/// (1 byte), start and end (8 bytes each, big-endian microseconds), then the unit in UTF-8.
struct SampleState: Equatable {
    enum Status: UInt8 { case active = 0, retracted = 1, superseded = 2 }

    var status: Status
    var type: QuantityType
    var start: Timestamp
    var end: Timestamp
    var unit: String

    var encoded: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: encodedCount) { buffer, initialized in
            write(into: UnsafeMutableRawBufferPointer(buffer))
            initialized = encodedCount
        }
    }

    /// The size of `encoded`.
    var encodedCount: Int { 18 + unit.utf8.count }

    /// Writes `encoded`'s bytes into `out` (`encodedCount` of them).
    func write(into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count == encodedCount)
        out[0] = status.rawValue
        out[1] = type.code
        out.storeBytes(of: UInt64(bitPattern: start.microseconds).bigEndian, toByteOffset: 2, as: UInt64.self)
        out.storeBytes(of: UInt64(bitPattern: end.microseconds).bigEndian, toByteOffset: 10, as: UInt64.self)
        unit.withUTF8Bytes { UnsafeMutableRawBufferPointer(rebasing: out[18...]).copyMemory(from: UnsafeRawBufferPointer($0)) }
    }

    /// Stores the state of `sample`, just admitted, under `position` in `db` (at the end of
    /// it), written in place in the map.
    static func putActive(_ sample: Sample, at position: some KeyBytes, through cursor: WriteCursor) throws {
        let state = SampleState(status: .active, type: sample.type, start: sample.start, end: sample.end, unit: sample.unit)
        try cursor.putReserved(position, count: state.encodedCount, append: true) { state.write(into: $0) }
    }

    init(status: Status, type: QuantityType, start: Timestamp, end: Timestamp, unit: String) {
        self.status = status
        self.type = type
        self.start = start
        self.end = end
        self.unit = unit
    }

    /// Applies a correction to the state; the field and message of the first problem, if any.
    static func effect(of correction: Correction, on state: inout SampleState) -> (field: String, message: String)? {
        switch correction.action {
        case .retract:
            state.status = .retracted
        case .amend:
            if let unit = correction.unit {
                guard state.type.factor(from: unit) != nil else {
                    return ("unit", "unit '\(EventDecoder.clip(unit))' does not fit the target's type '\(state.type.rawValue)' (expected \(state.type.acceptedUnits.joined(separator: ", ")))")
                }
                state.unit = unit
            }
            state.start = correction.start ?? state.start
            state.end = correction.end ?? state.end
            guard state.end >= state.start else {
                return (correction.end != nil ? "end" : "start", "after this amendment the target's 'end' would precede its 'start'")
            }
            // Only what the amendment changes is checked: a new value (in the possibly amended
            // unit), and a new span. A unit alone is checked by the caller against the value
            // the fold's state holds (this index keeps no value).
            if let value = correction.value, let problem = Sample.valueProblem(value, unit: state.unit, type: state.type) {
                return problem
            }
            if correction.start != nil || correction.end != nil, Sample.lastsTooLong(start: state.start, end: state.end) {
                return (correction.end != nil ? "end" : "start", "after this amendment the target would last more than 366 days")
            }
        }
        return nil
    }

    init?(_ bytes: [UInt8]) {
        guard bytes.count >= 18, let status = Status(rawValue: bytes[0]), let type = QuantityType(code: bytes[1])
        else { return nil }
        self.status = status
        self.type = type
        self.start = Timestamp(microseconds: Int64(bitPattern: UInt64(bigEndianBytes: Array(bytes[2..<10]))))
        self.end = Timestamp(microseconds: Int64(bitPattern: UInt64(bigEndianBytes: Array(bytes[10..<18]))))
        self.unit = String(decoding: bytes[18...], as: UTF8.self)
    }
}

extension EventLog {
    /// The outcome of one batch.
    public struct AppendResult: Sendable, Equatable {
        public enum Outcome: Sendable, Equatable {
            /// Committed at this `seq`.
            case appended(UInt64)
            /// Already in the log with the same content, at this `seq`.
            case duplicate(UInt64)
            /// A sample whose `syncVersion` is not above the one already in the log.
            case superseded
        }

        public var appended = 0
        public var duplicates = 0
        public var superseded = 0
        /// Of `duplicates`, those whose stored version differs only in its `zone`, which the
        /// log keeps (an import's rule: `DuplicateRule.ignoringZone`).
        public var keptZone = 0
        /// The log's last `seq` after the batch.
        public var head: UInt64 = 0
        /// One outcome per input event, in input order.
        public var outcomes: [Outcome] = []
    }

    /// The most events one batch end covers within an append. At each end the fold recomputes
    /// the days touched so far and writes their changes, and forgets its per-batch state, so
    /// the memory an append takes does not grow with its input (one transaction still holds
    /// the whole append: all or nothing). The log marks each end, and rebuilds and replays
    /// flush at the same places, so they reproduce the same rows and changes.
    static let maximumBatch = 65_536

    /// What counts as a duplicate of an event already in the log.
    public enum DuplicateRule: Sendable {
        /// The same id and the same content (SPEC §3.2); other content is a conflict.
        case exact
        /// Also the same content but for the `zone`, for an event whose id was committed before
        /// this batch: the stored event, and its zone, stay. `import` derives ids from a
        /// record's content without the zone, and the zone of a record without `HKTimeZone`
        /// comes from `--zone`: re-importing an overlapping export with another `--zone` (or
        /// none) would otherwise stop on the first record imported before, and an import
        /// stopped there could never be finished either way. The same holds for a record whose
        /// `HKTimeZone` the zone database did not know at its first import and knows now (its
        /// zone was `--zone`'s then). The same id twice in one batch with two zones is still a
        /// conflict: nothing says which one is meant.
        case ignoringZone
    }

    /// Appends `batch` in one transaction: every event or none (SPEC §3.2).
    ///
    /// - Duplicates (same id, same content) are no-ops; the same id with other content throws
    ///   an `InputError` naming the event's location and `id`.
    /// - A sample whose `syncId` is already in the log for its user and source with an equal or
    ///   higher `syncVersion` is a no-op counted as superseded.
    /// - Corrections must name a sample in the log (or earlier in the batch) that is neither
    ///   retracted nor superseded.
    /// - With `expectHead`, throws `LedgerError.headMismatch` unless the head is that `seq`.
    ///
    /// `recorded` is the clock's time, or the previous event's when the clock stepped back,
    /// so it never decreases along the log.
    public func append(_ batch: [(InputLocation?, Event)], expectHead: UInt64? = nil) throws -> AppendResult {
        try append(expectHead: expectHead) { add in
            for (location, event) in batch { try add(location, PreparedEvent(event)) }
        }
    }

    /// A write transaction, with LMDB's full disk reported as the ledger's.
    private func writeToLog<R>(_ body: (Transaction) throws -> R) throws -> R {
        do {
            return try environment.write(body)
        } catch LMDBError.diskFull {
            throw LedgerError.diskFull(path: path)
        }
    }

    /// Appends several independent batches in one write transaction (group commit): each is
    /// all or nothing on its own, in a nested transaction, and one commit makes them all
    /// durable. The results are in the order of `batches`. A batch with a `tokenDigest` is
    /// refused (`ClientError.tokenGone`) when that token is no longer a client's in this
    /// transaction: a removal or rotation committed before it stops it, however long the
    /// batch took to arrive and parse (an audit committed 200,000 events 3 s after a removal).
    /// A batch with `sharedBy` (a non-admin client's name) is refused (`ClientError.notShared`)
    /// unless each of its events is a sample of a type its user grants that client `share`,
    /// as the `grants` projection stands in this transaction, after the batches before it: a
    /// revoke committed first stops it (an audit had 63 of 160 partner POSTs, checked before
    /// they queued, committed after a revoke racing them).
    public func appendGroup(_ batches: [(events: [(InputLocation?, PreparedEvent)], expectHead: UInt64?, tokenDigest: [UInt8]?, sharedBy: String?)])
        throws -> [Result<AppendResult, any Error>] {
        try writeToLog { txn in
            var results: [Result<AppendResult, any Error>] = []
            for batch in batches {
                if let digest = batch.tokenDigest, try !tokenExists(digest, in: txn) {
                    results.append(.failure(ClientError.tokenGone))
                    continue
                }
                if let client = batch.sharedBy, let refusal = try notShared(batch.events, client: client, in: txn) {
                    results.append(.failure(refusal))
                    continue
                }
                do {
                    let result = try txn.nested { child in
                        try append(expectHead: batch.expectHead, in: child) { add in
                            for (location, prepared) in batch.events { try add(location, prepared) }
                        }
                    }
                    results.append(.success(result))
                } catch let error as LMDBError {
                    throw error  // storage trouble (a full map, say) concerns the whole group
                } catch {
                    results.append(.failure(error))
                }
            }
            return results
        }
    }

    /// Why `client` (not an admin) may not append `events` now, in `txn`, or nil when it may.
    private func notShared(_ events: [(InputLocation?, PreparedEvent)], client: String, in txn: Transaction) throws -> ClientError? {
        let query = ProjectionQuery(store: stateStore(txn))
        var shared: [[UInt8]: Set<QuantityType>] = [:]  // users told apart by their bytes
        for (location, event) in events {
            let place = location.map { "\($0): " } ?? ""
            guard case .sample(let sample) = event.payload else {
                return .notShared(location: location, message: "\(place)client '\(client)' may append only samples; \(event.payload.kind.rawValue) events need an admin client")
            }
            let key = Array(sample.user.utf8)
            if shared[key] == nil { shared[key] = try query.grant(user: sample.user, client: client).share }
            if !shared[key]!.contains(sample.type) {
                return .notShared(location: location, message: "\(place)user '\(sample.user)' has not granted client '\(client)' share on \(sample.type.rawValue) (as of this batch's commit)")
            }
            // A sync id is the user's and source's, whatever the type (SPEC §3.1): a sample
            // of a shared type replaced, or reported superseded by, one of a type not shared
            // (a review: `share` on steps retracted a distance sample, and told its version).
            if let synced = try syncedVersion(of: sample, in: txn),
               let state = try txn.get(samples, synced.position).flatMap(SampleState.init),
               !shared[key]!.contains(state.type) {
                return .notShared(location: location, message: "\(place)'syncId' '\(visibleCharacters(synced.syncId, limit: 64))' of source '\(visibleCharacters(sample.source.name, limit: 64))' names a sample of a type user '\(sample.user)' has not granted client '\(client)' share on (as of this batch's commit)")
            }
        }
        return nil
    }

    /// Appends, in one transaction, every event `produce` hands to the closure it is given:
    /// events are checked, written and folded one by one, so memory does not grow with the
    /// batch. Whatever `produce` throws aborts the whole batch.
    public func append(expectHead: UInt64? = nil, duplicates rule: DuplicateRule = .exact,
                       _ produce: (_ add: (InputLocation?, PreparedEvent) throws -> Void) throws -> Void) throws -> AppendResult {
        try writeToLog { txn in try append(expectHead: expectHead, duplicates: rule, in: txn, produce) }
    }

    /// The longest stored JSON of an event: `log` adds `{"seq":N,"recorded":"…","hash":"…",`
    /// (at most 142 bytes, N of 20 digits) and its line must stay within `maxLineBytes`.
    public static let maximumStoredBody = EventInput.maxLineBytes - 142

    func append(expectHead: UInt64?, duplicates rule: DuplicateRule = .exact, in txn: Transaction,
                _ produce: (_ add: (InputLocation?, PreparedEvent) throws -> Void) throws -> Void) throws -> AppendResult {
        let head = try head(in: txn)
        if let expectHead, expectHead != head.seq {
            throw LedgerError.headMismatch(expected: expectHead, actual: head.seq)
        }
        var result = AppendResult()
        var seq = head.seq
        var previousHash = head.hash
        var recorded = clock()
        if let last = head.recorded, last > recorded { recorded = last }
        // Events appended by kind (`ordinal`): counted in a list, not a dictionary hashed
        // for every event.
        var counts = [Int](repeating: 0, count: EventKind.allCases.count)
        // Made current before this batch's records are written: a rebuild must not fold them.
        let fold = try projectionFold(in: txn, head: head.seq)
        // The newest record is held back until the next one arrives, so that the last of the
        // batch can carry the batch-end flag.
        // One cursor for each index a batch puts into on every event: each put starts where
        // the last left off (seqs and time-ordered ids come in nearly increasing order),
        // not with a search from the root as `mdb_put`'s own cursor does.
        let eventCursor = try txn.writeCursor(events), idCursor = try txn.writeCursor(ids)
        let sampleCursor = try txn.writeCursor(samples)
        typealias Record = (seq: UInt64, body: [UInt8], typed: [UInt8], content: ContentDigest)
        var held: Record?
        func write(_ item: Record, endsBatch: Bool) throws {
            try eventCursor.putReserved(SeqKey(item.seq), count: EventRecord.storedSize(body: item.body.count, typed: item.typed.count),
                                        append: true) { out in
                EventRecord.writeChained(into: out, seq: item.seq, recorded: recorded, endsBatch: endsBatch,
                                         body: item.body, typed: item.typed, content: item.content, previousHash: &previousHash)
            }
        }

        try produce { location, event in
            let body = event.body
            let idKey = IDKey(event.id)
            // The id goes in as the next seq's, unless it is there already: one search of the
            // index where a look-up and an insert took two (anything thrown after it aborts the
            // transaction). Not a sample with a sync version, which may turn out superseded and
            // must then write nothing: its id is looked up, and put in once it is appended.
            var versioned = false
            if case .sample(let sample) = event.payload, sample.syncId != nil, sample.syncVersion != nil { versioned = true }
            if let existing = versioned ? try txn.get(ids, idKey) : try idCursor.insert(idKey, SeqKey(seq + 1)) {
                let existingSeq = try self.seq(existing, in: "ids")
                let compare = { (stored: UnsafeRawBufferPointer) -> (same: Bool, keptZone: Bool) in
                    if EventLog.sameContent(stored, body) { return (true, false) }
                    let zoneOnly = rule == .ignoringZone && existingSeq <= head.seq
                        && EventLog.sameContent(stored, body, ignoringZone: true)
                    return (zoneOnly, zoneOnly)
                }
                let found: (same: Bool, keptZone: Bool)
                if let held, held.seq == existingSeq {
                    found = held.body.withUnsafeBytes(compare)
                } else {
                    found = try txn.withValue(events, SeqKey(existingSeq)) { stored in
                        guard let json = EventRecord.sections(of: stored)?.json else { return (false, false) }
                        return compare(json)
                    } ?? (false, false)
                }
                guard found.same else {
                    // The server answers 409 to the first (a conflict with the log), 400 to the
                    // second (the batch contradicts itself).
                    if existingSeq > head.seq {
                        throw InputError(location: location, field: "id", message:
                            "id \(event.id.lowercased) is given twice in this batch with different content; nothing was written")
                    }
                    throw InputError(location: location, field: "id", message:
                        "id \(event.id.lowercased) is already in the log at seq \(existingSeq) with different content; nothing was written",
                        messageForReader: "id \(event.id.lowercased) is already in the log with different content; nothing was written")
                }
                result.duplicates += 1
                if found.keptZone { result.keptZone += 1 }
                result.outcomes.append(.duplicate(existingSeq))
                return
            }

            // What `log` prints of an event must be appendable again (`ledger log | ledger
            // append --db COPY`): its stored JSON with the seq, recorded and hash put in front,
            // within an NDJSON line's 1 MiB. (An audit: a line of exactly 1 MiB was taken,
            // and its copy refused.)
            if body.count > EventLog.maximumStoredBody {
                throw InputError(location: location, message: "the event is \(body.count) bytes stored (its JSON without spaces, with its id and unit); at most \(EventLog.maximumStoredBody) are taken, so that the line 'ledger log' prints of it, with seq, recorded and hash added, stays within the 1 MiB 'ledger append' takes")
            }
            // Per-sample state is keyed by the sample's seq, so a batch writes it on adjacent
            // pages at the end of the table rather than one random page per sample.
            let position = SeqKey(seq + 1)
            var target: UInt64?
            switch event.payload {
            case .sample(let sample):
                guard try index(sample, at: position, in: txn, through: sampleCursor) else {
                    result.superseded += 1
                    result.outcomes.append(.superseded)
                    return
                }
            case .correction(let correction):
                target = try apply(correction, at: location, in: txn)
            case .grant, .revoke, .profile:
                break
            }

            seq += 1
            if versioned { try txn.put(ids, idKey, SeqKey(seq)) }
            if let previous = held { try write(previous, endsBatch: false) }
            held = (seq, body, event.typed, event.contentDigest ?? ContentDigest(body: body, typed: event.typed))
            try fold.apply(seq: seq, recorded: recorded, id: event.id, payload: event.payload, target: target)
            counts[event.payload.kind.ordinal] += 1
            result.appended += 1
            result.outcomes.append(.appended(seq))
            if result.appended % EventLog.maximumBatch == 0, let last = held {
                try write(last, endsBatch: true)
                held = nil
                try storeChanges(try fold.flush(), in: txn)
            }
        }
        if let last = held { try write(last, endsBatch: true) }
        if result.appended > 0 { try markContentDigests(in: txn) }
        try storeChanges(try fold.flush(), in: txn)
        try setProjectionPosition(seq, in: txn)
        for kind in EventKind.allCases where counts[kind.ordinal] > 0 {
            let added = counts[kind.ordinal]
            let key = EventLog.countKey(kind)
            let current = try metaNumber(key, in: txn) ?? 0
            try txn.put(meta, key, (current + UInt64(added)).bigEndianBytes)
        }
        result.head = seq
        return result
    }

    /// The version of `sample`'s `syncId` (its user's and source's) the log holds, and the
    /// position of the sample that carries it; nil for a sample without one, or a first one.
    private func syncedVersion(of sample: Sample, in txn: Transaction) throws -> (syncId: String, version: Int64, position: [UInt8])? {
        guard let syncId = sample.syncId,
              let stored = try txn.get(sync, StateKey.sync(user: sample.user, source: sample.source.name, syncId: syncId)),
              stored.count == 16 else { return nil }
        return (syncId, Int64(bitPattern: UInt64(bigEndianBytes: Array(stored[0..<8]))), Array(stored[8..<16]))
    }

    /// Records an admitted sample at `position` (its seq) in the `samples` and `sync` indexes,
    /// marking the version it replaces as superseded. False, with nothing written, when the log
    /// already holds an equal or higher `syncVersion` of it.
    private func index(_ sample: Sample, at position: SeqKey, in txn: Transaction, through cursor: WriteCursor) throws -> Bool {
        if let syncId = sample.syncId, let version = sample.syncVersion {
            if let stored = try syncedVersion(of: sample, in: txn) {
                guard version > stored.version else { return false }
                if var state = try txn.get(samples, stored.position).flatMap(SampleState.init) {
                    state.status = .superseded
                    try txn.put(samples, stored.position, state.encoded)
                }
            }
            try txn.put(sync, StateKey.sync(user: sample.user, source: sample.source.name, syncId: syncId),
                        UInt64(bitPattern: version).bigEndianBytes + position.value.bigEndianBytes)
        }
        try SampleState.putActive(sample, at: position, through: cursor)
        return true
    }

    /// Checks a correction against its target and records its effect on the target's state.
    /// Returns the target's seq. `checkingRescale`: whether a unit-only amendment is checked
    /// against the value the fold's state holds (true when appending, where that state stands
    /// at the event before this one).
    private func apply(_ correction: Correction, at location: InputLocation?, in txn: Transaction,
                       checkingRescale: Bool = true) throws -> UInt64 {
        guard let position = try txn.get(ids, correction.target.bytes),
              var state = try txn.get(samples, position).flatMap(SampleState.init) else {
            throw InputError(location: location, field: "target",
                             message: "'target' \(correction.target.lowercased) names no sample in the log")
        }
        switch state.status {
        case .retracted:
            throw InputError(location: location, field: "target",
                             message: "'target' \(correction.target.lowercased) is already retracted")
        case .superseded:
            throw InputError(location: location, field: "target",
                             message: "'target' \(correction.target.lowercased) was superseded by a newer syncVersion; correct the current version")
        case .active:
            break
        }
        if let error = SampleState.effect(of: correction, on: &state) {
            throw InputError(location: location, field: error.field, message: error.message)
        }
        // A unit alone rescales the value the sample has now, which the fold's state holds
        // (folded up to the event before this one): over the limit is refused, as a value is.
        if checkingRescale, case .amend = correction.action, correction.value == nil, let unit = correction.unit,
           let current = ActivityFold.currentAmount(ofSampleAt: UInt64(bigEndianBytes: position), in: stateStore(txn)),
           let problem = Sample.rescaleProblem(current.value, from: current.unit, to: unit, type: state.type) {
            throw InputError(location: location, field: "unit", message: problem)
        }
        try txn.put(samples, position, state.encoded)
        return UInt64(bigEndianBytes: position)
    }

    /// Rebuilds the log's three indexes (`ids`, then `samples` and `sync`, which find
    /// corrections' targets through it) from the log: `rebuild --indexes`.
    func reindexLog(in txn: Transaction, isInterrupted: () -> Bool = { false }) throws {
        try txn.clear(ids)
        var kinds: [EventKind: UInt64] = [:]
        try forEachLoggedEvent(in: txn) { event, _ in
            if event.seq % 4096 == 0, isInterrupted() { throw Interrupted() }
            kinds[event.payload.kind, default: 0] += 1
            // Appends admit an id once; a second is a record someone added (an audit forged
            // one with a valid chain hash: the index kept the later and the repair looped).
            if let earlier = try txn.get(ids, event.id.bytes) {
                throw EventLog.reusedID(event.id, at: event.seq, earlier: try seq(earlier, in: "ids"))
            }
            try txn.put(ids, event.id.bytes, event.seq.bigEndianBytes)
        }
        // The counts of events by kind (`stats`) are the log's too.
        for kind in EventKind.allCases {
            try txn.put(meta, EventLog.countKey(kind), (kinds[kind] ?? 0).bigEndianBytes)
        }
        try reindexSamples(in: txn, isInterrupted: isInterrupted)
    }

    static func countKey(_ kind: EventKind) -> [UInt8] { Array("count.\(kind.rawValue)".utf8) }

    /// Rebuilds the `samples` and `sync` indexes from the log: what appending every event again
    /// leaves in them.
    func reindexSamples(in txn: Transaction, isInterrupted: () -> Bool = { false }) throws {
        try txn.clear(samples)
        try txn.clear(sync)
        // Every event was admitted by these same checks when it was appended, in this order, so
        // replaying them cannot refuse one. (Not the unit-only rescale check: it reads the
        // fold's state, which here stands at the head, not at the event; and a log an older
        // build admitted must stay repairable.)
        let cursor = try txn.writeCursor(samples)
        try forEachLoggedEvent(in: txn) { event, _ in
            if event.seq % 4096 == 0, isInterrupted() { throw Interrupted() }
            switch event.payload {
            case .sample(let sample): _ = try index(sample, at: SeqKey(event.seq), in: txn, through: cursor)
            case .correction(let correction): _ = try apply(correction, at: nil, in: txn, checkingRescale: false)
            case .grant, .revoke, .profile: break
            }
        }
    }
}

extension EventLog {
    /// The damage of a record whose id an earlier one has.
    static func reusedID(_ id: UUID, at seq: UInt64, earlier: UInt64) -> LedgerError {
        .corrupt(seq: seq, reason: "its id \(id.lowercased) is seq \(earlier)'s too, and an id is in the log once (the record was added by hand)")
    }

    /// Whether `body`, an event about to be appended, is the event stored as `stored` (both
    /// canonical JSON): the same bytes, or the same but for how `start` and `end` spell their
    /// instants. The offset in a timestamp only fixes the instant (SPEC §3.1), and Apple prints
    /// every date of an export in the offset in force when the export was made, so a newer
    /// export spells the same samples differently. Strings are compared by bytes (`sameName`).
    /// With `ignoringZone`, a `zone` member in either is left out of the comparison.
    static func sameContent(_ stored: UnsafeRawBufferPointer, _ body: [UInt8], ignoringZone: Bool = false) -> Bool {
        if !ignoringZone, body.withUnsafeBytes({ $0.elementsEqual(stored) }) { return true }
        guard case .object(var old)? = try? JSONValue.parse(stored),
              case .object(var new)? = try? JSONValue.parse(body) else { return false }
        if ignoringZone {
            old["zone"] = nil
            new["zone"] = nil
        }
        return sameMembers(old, new) { key, value, other in
            if key == "start" || key == "end", case .string(let a) = value, case .string(let b) = other,
               let x = try? Timestamp.parseRFC3339(a), let y = try? Timestamp.parseRFC3339(b) {
                return x.0 == y.0
            }
            return sameValue(value, other)
        }
    }

    /// Whether two objects have the same keys, by bytes (a dictionary of `String` keys would
    /// match "é" with "e" and a combining accent), and `same` holds for each pair of values.
    private static func sameMembers(_ a: [String: JSONValue], _ b: [String: JSONValue],
                                    _ same: (String, JSONValue, JSONValue) -> Bool) -> Bool {
        guard a.count == b.count else { return false }
        let byBytes = { (object: [String: JSONValue]) in
            object.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        }
        return zip(byBytes(a), byBytes(b)).allSatisfy { x, y in sameName(x.key, y.key) && same(x.key, x.value, y.value) }
    }

    private static func sameValue(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.string(let x), .string(let y)):
            return sameName(x, y)
        case (.array(let x), .array(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { sameValue($0, $1) }
        case (.object(let x), .object(let y)):
            return sameMembers(x, y) { _, a, b in sameValue(a, b) }
        default:
            return a == b
        }
    }
}
