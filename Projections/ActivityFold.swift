import Foundation
import LedgerCore

/// What a fold may know besides the events: injected, never read from the process.
public struct FoldContext: Sendable {
    /// The ledger's default zone (SPEC §4.1), used when neither the sample nor the user's
    /// profile names one.
    public var defaultZone: Zone
    /// Days in zones; shared by the folds of one ledger so its cache outlives a batch.
    public var calendar: DayCalendar

    public init(defaultZone: Zone, calendar: DayCalendar = DayCalendar()) {
        self.defaultZone = defaultZone
        self.calendar = calendar
    }
}

/// An event as a fold sees it: its position, commit time, id and typed content.
public struct LoggedEvent: Sendable, Equatable {
    public var seq: UInt64
    public var recorded: Timestamp
    public var id: UUID
    public var payload: Event.Payload
    /// For a correction, the seq of its target sample, as the log resolved it from the id.
    public var target: UInt64?

    public init(seq: UInt64, recorded: Timestamp, id: UUID, payload: Event.Payload, target: UInt64? = nil) {
        self.seq = seq
        self.recorded = recorded
        self.id = id
        self.payload = payload
        self.target = target
    }

    public init(seq: UInt64, recorded: Timestamp, event: Event, target: UInt64? = nil) {
        self.init(seq: seq, recorded: recorded, id: event.id, payload: event.payload, target: target)
    }
}

/// The fold behind all four projections (`daily`, `per-source`, `last-known`, `grants`).
///
/// `apply` takes events in `seq` order and records what they touch; `flush` recomputes each
/// touched (user, type, day) once — however many events of the batch touched it — writes the
/// rows that changed and returns those changes. State lives in the `StateStore`; the fold only
/// reads and writes it through the protocol, does no other I/O and never reads the clock, so the
/// same log always gives the same rows. The fold's caches are valid for one batch: use one
/// fold per transaction, and call `flush` before the transaction commits.
public final class ActivityFold {
    /// Bumped whenever the fold's logic or state layout changes: stored state of another
    /// version is rebuilt from the log.
    /// 3: midnights of zones without rules (UTC, ±HH:MM) are counted straight back on the
    /// proleptic Gregorian calendar, as `day(of:)` counts, where Foundation switched to the
    /// Julian calendar before 1582: rows of samples before then may differ from version 2's.
    /// 4: source names are told apart by their bytes, as user names are: two spellings of one
    /// name (a precomposed and a decomposed "é") were one per-source row and one source.
    /// 5: a day whose samples all lose their time to better-ranked samples of neighbouring
    /// days (in other zones) has no `daily` row; it had one of 0 with 0 samples and 0 sources.
    /// 6: the same for zones with rules, before 1600 (when each kept its local mean time): an
    /// audit found samples of the year 1000 in Europe/London in no `daily` row at all.
    /// 7: a zone's offset is looked up at the instant's whole second: past about the year 2255
    /// an instant a microsecond before a change was rounded onto it, and a sample ending there
    /// at a midnight change (Havana's, in 3000) was in no row.
    /// 8: a grant or revoke that leaves a client's sets as they were changes nothing: the
    /// `grants` row kept its time, and a revoke for a client never granted anything made an
    /// empty row.
    /// 9: a day's bucket is stored in chunks of about 1 KiB (`Bucket`), not as one value that
    /// every commit touching the day rewrote whole.
    /// 10: `last-known`'s `seq` and `recorded` are the event's that last changed its day, value
    /// or latest end (SPEC §4.4), found by undoing the batch's events one by one
    /// (`lastChange`); they were the batch's last event that touched a day from the reported
    /// one on, so a batch gave another `seq` than the same events appended one at a time.
    /// 11: a day the zone skipped (no time in it, as Pacific/Apia's 2011-12-30) gets none of
    /// a sample spanning it: it had a `per-source` row of 0 with 1 sample.
    /// 12: such a sample, of a user with samples in several zones, re-merges another zone's day
    /// of the skipped date (a neighbour): appended after a sample there that it outranks, that
    /// day kept its total, where the two in one batch gave none.
    public static let version = 12

    private let store: any StateStore
    private let context: FoldContext
    /// Whether `flush` returns the changes (SPEC §8). A replay has no use for them: it folds
    /// into memory and queries the rows, and building each change's two rows is a good part
    /// of a recompute.
    private let emitsChanges: Bool
    private var calendar: DayCalendar { context.calendar }

    /// A user's number as the key of the fold's tables of users: hashed as `DayKey` is
    /// (`WordHash`), where a `UInt32` key went through SipHash, 3 % of a rebuild.
    private struct UserKey: Hashable, Comparable {
        var id: UInt32
        init(_ id: UInt32) { self.id = id }
        func hash(into hasher: inout Hasher) { hasher.combine(id) }
        func _rawHashValue(seed: Int) -> Int { WordHash.mix(UInt64(id), seed: seed) }
        static func < (a: UserKey, b: UserKey) -> Bool { a.id < b.id }
    }

    private struct DayKey: Hashable {
        var user: UInt32
        var type: QuantityType
        var day: Int
        var bytes: [UInt8] { StateKey.day(user, type, day) }

        /// The three fields in one word: every sample looks up each of its days.
        private var word: UInt64 { UInt64(user) &<< 35 ^ UInt64(type.code) &<< 32 ^ UInt64(UInt32(truncatingIfNeeded: day)) }

        func hash(into hasher: inout Hasher) { hasher.combine(word) }

        /// What `Dictionary` and `Set` ask: the word and the table's seed mixed by
        /// `WordHash.mix`, not run through SipHash (its finalization was 1 % of a rebuild).
        func _rawHashValue(seed: Int) -> Int { WordHash.mix(word, seed: seed) }
    }

    private struct UserType: Hashable {
        var user: UInt32
        var type: QuantityType
    }

    private struct Cause {
        var seq: UInt64
        var recorded: Int64
    }

    /// What one event of the batch did to one user's buckets: what `lastChange` undoes.
    private struct Step {
        var cause: Cause
        var user: UInt32?
        /// Entries put into (`added`) or taken out of days' buckets, in order: a range of the
        /// batch's `bucketChanges` (one list for the batch, not one per event).
        var changes: Range<Int> = 0..<0
        /// Types whose merges the event changed otherwise: a profile's priority list (the ranks
        /// of the sources), with the facts and the user's state just before it. (A profile's
        /// zone moves entries between days, which `changes` holds. A user's first sample in a
        /// second zone brings the neighbouring days into each day's merge, but in one zone
        /// those hold no sample that overlaps the day: the merges of the states before it are
        /// the same with and without them.)
        var barriers: [QuantityType: (facts: Facts?, user: UserState)] = [:]
    }

    /// `last-known`'s facts (SPEC §4.4): the latest day with a non-zero total, that total, and
    /// the latest end of a sample.
    private struct Facts: Equatable {
        var day: Int
        var value: Double
        var end: Int64
    }

    private var users: [UserKey: UserState] = [:]
    private var dirtyUsers: Set<UserKey> = []
    /// Keyed by the name's UTF-8 bytes, as the stored names are: Swift's String equality would
    /// merge canonically equivalent names ("é" precomposed and decomposed) into one user.
    private var userIDs: [[UInt8]: UInt32] = [:]
    private var buckets: [DayKey: Bucket] = [:]
    /// Every day the batch touched, with the latest event that touched it (also what
    /// `last-known`'s cause is chosen from).
    private var dirtyDays: [DayKey: Cause] = [:]
    private var changes: [RowChange] = []
    /// The batch's events, per user, as far as they changed buckets (`Step`).
    private var steps: [UserKey: [Step]] = [:]
    private var step: Step?
    /// Every bucket change of the batch's events, in order (`Step.changes`).
    private var bucketChanges: [BucketChange] = []
    /// A struct, not a tuple: the append of a tuple of these went through a generic copy
    /// (the optimizer merged its outlined copy with others, type metadata as a parameter).
    private struct BucketChange {
        var key: DayKey
        var entry: BucketEntry
        var added: Bool
    }
    /// How many `last-known` rows took the rule before version 10 because the walk back gave
    /// up (past `walkBudget`), or because no event of the batch touched the type though the
    /// facts differ from the stored ones (which this fold did not write; projections of
    /// another fold version are folded again before any append): 0 but for walks past
    /// `walkBudget` (tests hold it to that). The walk takes the stored facts as the batch's
    /// start (`lastChange`), so it no longer checks them.
    public private(set) var lastKnownGuesses = 0
    /// The last user and zone looked up: consecutive events nearly always share them, and
    /// each lookup otherwise hashes the name (the user's bytes: see `userIDs`).
    private var lastUser = LastLookup<UInt32>()
    private var lastZone = LastLookup<Zone>()

    public init(store: any StateStore, context: FoldContext, emitsChanges: Bool = true) {
        self.store = store
        self.context = context
        self.emitsChanges = emitsChanges
    }

    // MARK: - Applying events

    /// Folds one event. Its effects on rows are visible after `flush`.
    public func apply(_ logged: LoggedEvent) throws {
        try apply(seq: logged.seq, recorded: logged.recorded, id: logged.id, payload: logged.payload, target: logged.target)
    }

    /// `apply` of the event with these parts (`LoggedEvent`'s): an append folds each event it
    /// writes through this, so that the payload is lent rather than copied into a
    /// `LoggedEvent` (a copy retains each of its strings).
    public func apply(seq: UInt64, recorded: Timestamp, id: UUID, payload: Event.Payload, target: UInt64?) throws {
        let cause = Cause(seq: seq, recorded: recorded.microseconds)
        step = Step(cause: cause, changes: bucketChanges.count..<bucketChanges.count)
        defer {
            if var step, let user = step.user {
                step.changes = step.changes.lowerBound..<bucketChanges.count
                steps[UserKey(user), default: []].append(step)
            }
            step = nil
        }
        switch payload {
        case .sample(let sample):
            try addSample(sample, id: id, seq: seq, cause: cause)
        case .correction(let correction):
            guard let target else { return }  // the log admits none without one
            try correct(correction, target: target, cause: cause)
        case .grant(let change):
            try changeAccess(change, adding: true, cause: cause)
        case .revoke(let change):
            try changeAccess(change, adding: false, cause: cause)
        case .profile(let profile):
            try applyProfile(profile, cause: cause)
        }
    }

    private func addSample(_ sample: Sample, id: UUID, seq: UInt64, cause: Cause) throws {
        let userID = try self.userID(for: sample.user)
        try loadUser(userID)  // in `users` from here on
        if let syncId = sample.syncId {
            // The log only admits a higher syncVersion, so this one replaces the current one.
            let key = StateKey.sync(user: sample.user, source: sample.source.name, syncId: syncId)
            if let current = try store.get(.sync, key) {
                try removeSample(at: current, cause: cause)
            }
            try store.put(.sync, key, StateKey.position(seq))
        }
        // Added in place, through the dictionary's index: through a copy of the state, every
        // new source of a user with many would copy all of them, and written back through
        // `users[userID]!` the state was copied and destroyed again (every string and list it
        // holds retained and released, per sample).
        let userIndex = users.index(forKey: UserKey(userID))!
        if users.values[userIndex].sources[sample.type, default: NameIndex()].insert(sample.source.name).added {
            dirtyUsers.insert(UserKey(userID))
        }
        try place(SampleRecord(id: id, user: userID, type: sample.type, source: sample.source.name,
                               value: sample.value, unit: sample.unit, start: sample.start,
                               end: sample.end, zone: sample.zone, days: 0..<0), at: seq, cause: cause)
        if sample.zone == nil {
            try store.put(.userSamples, StateKey.userPosition(userID, StateKey.position(seq)), [])
        }
    }

    /// Puts a sample into the buckets of the days it touches (in its effective zone) and stores
    /// it under its seq (`position`). Its user's state is in `users` (read there in place: a
    /// copy of it retains every name and list it holds). The record is moved in, not copied.
    private func place(_ record: consuming SampleRecord, at seq: UInt64, cause: Cause) throws {
        let zoneName = record.zone ?? users[UserKey(record.user)]!.zone ?? context.defaultZone.name
        if !users[UserKey(record.user)]!.zones.contains(zoneName) {
            users[UserKey(record.user)]!.zones.append(zoneName)
            dirtyUsers.insert(UserKey(record.user))
        }
        let zone = lastZone.value(for: zoneName, calendar.zone(named:))
        record.days = calendar.days(from: record.start.microseconds, to: record.end.microseconds, in: zone)
        let entry = BucketEntry(id: record.id, source: record.source, zone: zoneName, start: record.start.microseconds,
                                end: record.end.microseconds, value: record.canonicalValue)
        // A day the zone skipped (Pacific/Apia's 2011-12-30) holds none of the sample's time:
        // it had a `per-source` row of 0 with 1 sample (an audit). Most samples lie in one day.
        let spansDays = record.days.count > 1
        for day in record.days where !spansDays || !calendar.isSkipped(day, in: zone) {
            let key = DayKey(user: record.user, type: record.type, day: day)
            // One lookup when the bucket is already loaded, as it nearly always is.
            if let index = buckets.index(forKey: key) {
                buckets.values[index].append(entry)
            } else {
                try loadBucket(key)
                buckets[key]!.append(entry)
            }
            noteChange(key, entry, added: true)
            markDirty(key, cause)
        }
        try markNeighbours(of: record, mixedZones: users[UserKey(record.user)]!.hasMixedZones, cause: cause)
        // Moved into the closure: one that captured it, or read it through a pointer, copied it
        // (its strings retained).
        let count = record.encodedCount
        try store.put(.samples, position: seq, count: count, cursor: { [record = consume record] in record.encode(into: &$0) })
    }

    /// Takes the sample stored under `position` out of its days' buckets and forgets it.
    private func removeSample(at position: [UInt8], cause: Cause) throws {
        guard let bytes = try store.get(.samples, position) else { return }
        let record = try SampleRecord(decoding: bytes)
        try unplace(record, cause: cause)
        try store.delete(.samples, position)
        try store.delete(.userSamples, StateKey.userPosition(record.user, position))
    }

    private func unplace(_ record: SampleRecord, cause: Cause) throws {
        for day in record.days {
            let key = DayKey(user: record.user, type: record.type, day: day)
            try loadBucket(key)
            if let entry = buckets[key]?.remove(id: record.id) { noteChange(key, entry, added: false) }
            markDirty(key, cause)
        }
        try loadUser(record.user)
        try markNeighbours(of: record, mixedZones: users[UserKey(record.user)]!.hasMixedZones, cause: cause)
    }

    /// Local days in different zones overlap in time by up to 26 hours, so once a user has
    /// samples in more than one zone, a sample also competes with samples bucketed up to two
    /// days either side: those days are recomputed too.
    ///
    /// The record's own days are marked again, by the same event (no change): a day its zone
    /// skipped (Pacific/Apia's 2011-12-30) is among its `days` but holds none of it (`place`),
    /// and another zone's day of that date is a neighbour like any other (left out with the
    /// record's days, it kept a sample the record outranks: an audit).
    private func markNeighbours(of record: SampleRecord, mixedZones: Bool, cause: Cause) throws {
        guard mixedZones, let first = record.days.first, let last = record.days.last else { return }
        for day in (first - 2)...(last + 2) {
            let key = DayKey(user: record.user, type: record.type, day: day)
            try loadBucket(key)
            if !(buckets[key]?.isEmpty ?? true) { markDirty(key, cause) }
        }
    }

    private func correct(_ correction: Correction, target: UInt64, cause: Cause) throws {
        let position = StateKey.position(target)
        switch correction.action {
        case .retract:
            try removeSample(at: position, cause: cause)
        case .amend:
            guard let bytes = try store.get(.samples, position) else { return }
            var record = try SampleRecord(decoding: bytes)
            try unplace(record, cause: cause)
            if let unit = correction.unit { record.unit = unit }
            if let value = correction.value { record.value = value }
            if let start = correction.start { record.start = start }
            if let end = correction.end { record.end = end }
            try loadUser(record.user)
            try place(record, at: target, cause: cause)
        }
    }

    private func applyProfile(_ profile: Profile, cause: Cause) throws {
        let userID = try self.userID(for: profile.user)
        var user = try userState(userID)
        if let priority = profile.priority {
            for (type, list) in priority {
                // What `lastChange` cannot undo: the facts under the ranks before this list.
                let before = try currentFacts(UserType(user: userID, type: type), user: user)
                step?.user = userID
                step?.barriers[type] = (before, user)
                user.priority[type] = NameIndex(list)
                try markAllDays(user: userID, type: type, cause: cause)
            }
        }
        let zoneChanged = profile.zone != nil && profile.zone != user.zone
        if let zone = profile.zone { user.zone = zone }
        setUserState(userID, user)
        if zoneChanged {
            // Re-bucket every sample of this user that has no zone of its own.
            var positions: [[UInt8]] = []
            try store.scan(.userSamples, prefix: StateKey.user(userID), reverse: false) { key, _ in
                positions.append(Array(key[4...]))
                return true
            }
            for position in positions {
                guard let bytes = try store.get(.samples, position) else { continue }
                let record = try SampleRecord(decoding: bytes)
                try unplace(record, cause: cause)
                var key = ByteReader(position)
                try place(consume record, at: try key.u64(), cause: cause)
            }
        }
    }

    private func changeAccess(_ change: AccessChange, adding: Bool, cause: Cause) throws {
        let userID = try self.userID(for: change.user)
        let key = StateKey.grant(userID, client: change.client)
        let previous = try store.get(.grants, key).map { (bytes) throws(DamagedState) in try GrantValue(decoding: bytes) }
        var value = previous ?? GrantValue(client: change.client, read: [], share: [], seq: 0, recorded: 0)
        if adding {
            value.read.formUnion(change.read)
            value.share.formUnion(change.share)
        } else {
            value.read.subtract(change.read)
            value.share.subtract(change.share)
        }
        // The row says when the sets last changed (SPEC §4.5): a grant of types already held,
        // or a revoke of types not held (a client never granted any has no row), changes
        // nothing, and no change is sent.
        if value.read == (previous?.read ?? []), value.share == (previous?.share ?? []) { return }
        value.seq = cause.seq
        value.recorded = cause.recorded
        try store.put(.grants, key, value.encoded)
        guard emitsChanges else { return }
        changes.append(RowChange(seq: cause.seq, projection: .grants,
                                 row: RowBuilder.grant(user: change.user, value),
                                 previous: previous.map { RowBuilder.grant(user: change.user, $0) }))
    }

    // MARK: - Flushing

    /// Recomputes every touched day once, writes changed rows, and returns the changes in the
    /// order of the events that caused them. Empties the fold's caches.
    public func flush() throws -> [RowChange] {
        for userID in dirtyUsers.sorted() {
            try store.put(.users, StateKey.user(userID.id), users[userID]!.encoded)
        }
        let days = dirtyDays.sorted { a, b in
            // Ties in key order: (user, type code, day) is the order of the key bytes.
            a.value.seq != b.value.seq ? a.value.seq < b.value.seq
                : (a.key.user, a.key.type.code, a.key.day) < (b.key.user, b.key.type.code, b.key.day)
        }
        for (key, cause) in days {
            try recompute(key, cause: cause)
        }
        // Per user and type, each touched day with the latest event that touched it.
        var touches: [UserType: [(cause: Cause, day: Int)]] = [:]
        for (key, cause) in days {
            touches[UserType(user: key.user, type: key.type), default: []].append((cause, key.day))
        }
        let userTypes = touches.keys.sorted { a, b in
            let (x, y) = (touches[a]!.map(\.cause.seq).max()!, touches[b]!.map(\.cause.seq).max()!)
            return x != y ? x < y : (a.user, a.type.code) < (b.user, b.type.code)
        }
        for userType in userTypes {
            try recomputeLastKnown(userType, touches: touches[userType]!)
        }
        let result = changes.sorted { $0.seq < $1.seq }
        users.removeAll()
        dirtyUsers.removeAll()
        userIDs.removeAll()
        lastUser = LastLookup()
        buckets.removeAll()
        dirtyDays.removeAll()
        changes.removeAll()
        steps.removeAll()
        bucketChanges.removeAll(keepingCapacity: true)
        return result
    }

    private func recompute(_ key: DayKey, cause: Cause) throws {
        try loadBucket(key)
        let bucket = buckets[key] ?? Bucket()
        let keyBytes = key.bytes
        try bucket.write(keyBytes, to: store)
        let user = try userState(key.user)
        let shares = try self.shares(of: key, user: user, entries: bucket.entries) { try self.entries(of: $0) }
        let previousDaily = try store.get(.daily, keyBytes).map { (bytes) throws(DamagedState) in try DailyValue(decoding: bytes) }
        let daily = DailyMerge.daily(shares)
        if daily != previousDaily {
            if let daily { try store.put(.daily, keyBytes, daily.encoded) } else { try store.delete(.daily, keyBytes) }
            if emitsChanges {
                changes.append(RowChange(seq: cause.seq, projection: .daily,
                                         row: daily.map { RowBuilder.daily(user: user.name, type: key.type, day: key.day, $0) },
                                         previous: previousDaily.map { RowBuilder.daily(user: user.name, type: key.type, day: key.day, $0) }))
            }
        }

        let previousSources = try store.get(.perSource, keyBytes).map { (bytes) throws(DamagedState) in try PerSourceValue.decode(bytes) } ?? []
        let sources = DailyMerge.perSource(shares)
        if sources != previousSources {
            if sources.isEmpty { try store.delete(.perSource, keyBytes) } else { try store.put(.perSource, keyBytes, PerSourceValue.encode(sources)) }
            guard emitsChanges else { return }
            // By bytes, as per-source rows are told apart (`sameName`).
            let before = Dictionary(uniqueKeysWithValues: previousSources.map { (ByteKey(Array($0.source.utf8)), $0) })
            let after = Dictionary(uniqueKeysWithValues: sources.map { (ByteKey(Array($0.source.utf8)), $0) })
            for name in Set(before.keys).union(after.keys).sorted() where before[name] != after[name] {
                changes.append(RowChange(seq: cause.seq, projection: .perSource,
                                         row: after[name].map { RowBuilder.perSource(user: user.name, type: key.type, day: key.day, $0) },
                                         previous: before[name].map { RowBuilder.perSource(user: user.name, type: key.type, day: key.day, $0) }))
            }
        }
    }

    /// The entries of `key`'s day as the batch left them.
    private func entries(of key: DayKey) throws -> [BucketEntry] {
        try loadBucket(key)
        return buckets[key]?.entries ?? []
    }

    /// What the merge of `key`'s day takes: `entries` (the day's) in a canonical order, clipped
    /// to the day in their zones, and for a user with samples in more than one zone the entries
    /// of the days up to two either side (from `neighbours`), which compete for the same hours.
    private func shares(of key: DayKey, user: UserState, entries: [BucketEntry],
                        neighbours: (DayKey) throws -> [BucketEntry]) throws -> [DayShare] {
        // A canonical order, so sums do not depend on the order events arrived in: the
        // entries' positions are sorted, not the entries, whose every move retained and
        // released their names (2.7 % of a rebuild's folding thread).
        let order = entries.indices.sorted { x, y in
            let (a, b) = (entries[x], entries[y])
            if a.start != b.start { return a.start < b.start }
            if a.end != b.end { return a.end < b.end }
            return a.id.precedes(b.id)
        }
        // Entries of one day nearly always share one zone: look the window up only when it
        // changes. A day has a few sources, often alternating (a phone and a watch counting
        // the same walk): each one's rank is looked up once.
        var window: (zone: String, start: Int64, end: Int64)?
        var ranked = NameIndex()
        var ranks: [Int] = []
        func rank(_ source: String) -> Int {
            let (position, added) = ranked.insert(source)
            if added { ranks.append(user.rank(of: source, type: key.type)) }
            return ranks[position]
        }
        // Each entry's fields read in place: a copy of it retained and released its names.
        var shares = order.enumerated().map { position, index -> DayShare in
            if window?.zone != entries[index].zone {
                let found = calendar.window(of: key.day, in: calendar.zone(named: entries[index].zone))
                window = (entries[index].zone, found.start, found.end)
            }
            let window = window!
            let (start, end) = (entries[index].start, entries[index].end)
            return DayShare(index: position, source: entries[index].source, rank: rank(entries[index].source),
                            start: start, end: end, value: entries[index].value,
                            clippedStart: max(start, window.start), clippedEnd: min(end, window.end), id: entries[index].id)
        }
        if user.hasMixedZones {
            // Samples bucketed on nearby days in other zones compete for the same hours.
            var seen = Set(entries.map(\.id))
            for day in (key.day - 2)...(key.day + 2) where day != key.day {
                let neighbour = DayKey(user: key.user, type: key.type, day: day)
                for entry in try neighbours(neighbour) where !seen.contains(entry.id) {
                    seen.insert(entry.id)
                    shares.append(DayShare(index: shares.count, isTarget: false, source: entry.source,
                                           rank: rank(entry.source), start: entry.start,
                                           end: entry.end, value: entry.value, clippedStart: entry.start, clippedEnd: entry.end,
                                           id: entry.id))
                }
            }
        }
        return shares
    }

    /// `last-known`: the latest day with a non-zero total, that total, and the end of the
    /// latest sample, with the `seq` and `recorded` of the event that last changed them (SPEC
    /// §4.4): the batch's events are undone from the last one back until the facts differ
    /// (`lastChange`), so a batch gives the row the same event as its events appended one by one.
    private func recomputeLastKnown(_ userType: UserType, touches: [(cause: Cause, day: Int)]) throws {
        let key = StateKey.userType(userType.user, userType.type)
        let user = try userState(userType.user)
        let facts = try lastKnownFacts(userType)
        let previous = try store.get(.lastKnown, key).map { (bytes) throws(DamagedState) in try LastKnownValue(decoding: bytes) }
        let previousFacts = previous.map { Facts(day: $0.day, value: $0.value, end: $0.latestSampleEnd) }
        guard facts != nil || previous != nil else { return }
        let walk = try lastChange(userType, user: user, facts: facts, before: previousFacts)
        var changer: Cause?
        if case .changedBy(let cause) = walk { changer = cause }
        // Unchanged, and no event of the batch changed it and changed it back (or the walk gave
        // up): keep the event that last changed it.
        if changer == nil, facts == previousFacts { return }
        // The walk gave up, or no event of the batch touched the type though the facts differ
        // from the stored ones (which this fold did not write): the latest event that touched
        // a day from the earlier reported day on.
        if changer == nil { lastKnownGuesses += 1 }
        let cause = changer ?? {
            let from = [facts?.day, previous?.day].compactMap { $0 }.min()!
            let relevant = touches.filter { $0.day >= from }
            return (relevant.isEmpty ? touches : relevant).max { $0.cause.seq < $1.cause.seq }!.cause
        }()
        let next = facts.map { LastKnownValue(day: $0.day, value: $0.value, latestSampleEnd: $0.end,
                                              seq: cause.seq, recorded: cause.recorded) }
        if next == previous { return }
        if let next { try store.put(.lastKnown, key, next.encoded) } else { try store.delete(.lastKnown, key) }
        guard emitsChanges else { return }
        changes.append(RowChange(seq: cause.seq, projection: .lastKnown,
                                 row: next.map { RowBuilder.lastKnown(user: user.name, type: userType.type, $0) },
                                 previous: previous.map { RowBuilder.lastKnown(user: user.name, type: userType.type, $0) }))
    }

    /// What `lastChange` found.
    private enum Walk {
        case changedBy(Cause)
        /// The facts were what they are now before every event of the batch that touched them.
        case unchanged
        /// The walk would have merged or read more than `walkBudget` entries.
        case gaveUp
    }

    /// How many entries one `lastChange` may merge or read before it gives up (and the row
    /// takes the batch's latest event that touched a day from the reported one on, the rule
    /// before version 10). A batch that ends in thousands of events that each re-merge the
    /// latest day without changing the facts (retractions of samples that win no time) would
    /// otherwise cost their number times the day's size.
    static let walkBudget = 4_000_000

    /// The latest event of the batch after which `userType`'s facts were what they are now
    /// (`facts`) and before which they were not. The events are undone one by one from the
    /// last, and each state before one compared with `facts`, until one differs. A priority
    /// list (a `Step` barrier) is the change when the facts noted just before it differ;
    /// otherwise the walk goes on with the ranks from before it.
    ///
    /// The state after an event is known to have `facts` (else the walk stopped there), so the
    /// state before it has them too unless the event changed a day from the reported one on
    /// (its total, or a later day's from 0) or the latest end (an entry ending after it, the
    /// last one ending at it, or a day emptied or filled). Only those days are merged again,
    /// and a sample that takes part in nothing (`DailyMerge`'s idle) is taken out without a
    /// merge: a batch ending in samples that lose to a better source's costs one merge, not
    /// one each. With no row after the batch (`facts` nil), the state before an event has one
    /// exactly when a day the event changed has a total.
    private func lastChange(_ userType: UserType, user: UserState, facts: Facts?, before: Facts?) throws -> Walk {
        // No row before the batch or after it: none to name an event in, and no change to send.
        guard facts != nil || before != nil, let steps = steps[UserKey(userType.user)],
              // The state before the batch's first event that touched the type is the batch's
              // start, whose facts are stored (`before`): reaching it needs no merge. (A batch
              // of one event per user, what group commit gives, walks no further.)
              let first = steps.firstIndex(where: { step in
                  step.barriers[userType.type] != nil || bucketChanges[step.changes].contains { $0.key.type == userType.type }
              })
        else { return .unchanged }
        func key(_ day: Int) -> DayKey { DayKey(user: userType.user, type: userType.type, day: day) }
        var user = user
        // Days' entries as they stood before the events undone so far, by id (a day's entries
        // are merged in a canonical order, whatever theirs).
        var overlay: [Int: [UUID: BucketEntry]] = [:]
        func undone(_ key: DayKey) throws -> [BucketEntry] { try overlay[key.day].map { Array($0.values) } ?? entries(of: key) }
        var budget = ActivityFold.walkBudget
        var spread = user.hasMixedZones ? 2 : 0
        // Merges of days from the reported one on, as the undone state has them: the total,
        // and the samples that take part in nothing (`DailyMerge`'s idle).
        var merged: [Int: (total: Double, idle: Set<UUID>)] = [:]
        // The last day with samples and how many entries of the days the latest end is looked
        // for in end at `facts.end`, in the undone state, once counted: taking out or putting
        // back one of them then needs no new count while others remain.
        var endCount: (lastDay: Int, atEnd: Int)?
        for step in steps[(first + 1)...].reversed() {
            if let barrier = step.barriers[userType.type] {
                // A priority list: the facts just before it were noted when it was applied.
                if barrier.facts != facts { return .changedBy(step.cause) }
                // Earlier states are merged with the ranks before it.
                user = barrier.user
                spread = user.hasMixedZones ? 2 : 0
                merged.removeAll()
            }
            var dirty: Set<Int> = []
            var endMoved = false
            for change in bucketChanges[step.changes].reversed() where change.key.type == userType.type {
                let day = change.key.day
                // Days this far before the reported one move neither it nor the latest end
                // (a day's merge reaches `spread` days either side, and the latest end is
                // looked for in the last three days with samples, the reported one among them).
                if let facts, day < facts.day - max(spread, 2) {
                    budget -= 1
                    continue
                }
                if overlay[day] == nil {
                    let entries = try self.entries(of: change.key)
                    budget -= entries.count
                    overlay[day] = Dictionary(entries.map { ($0.id, $0) }) { _, last in last }
                }
                let wasEmpty = overlay[day]!.isEmpty
                budget -= 1
                if change.added {
                    overlay[day]!.removeValue(forKey: change.entry.id)
                    // Each merge the sample is in (its day's, and for mixed zones its
                    // neighbours'): one where it is idle stays as it was without it.
                    for near in (day - spread)...(day + spread) {
                        if merged[near]?.idle.contains(change.entry.id) == true {
                            merged[near]!.idle.remove(change.entry.id)
                        } else {
                            dirty.insert(near)
                        }
                    }
                } else {
                    overlay[day]![change.entry.id] = change.entry
                    for near in (day - spread)...(day + spread) { dirty.insert(near) }
                }
                if let facts {
                    if wasEmpty != overlay[day]!.isEmpty || change.entry.end > facts.end {
                        endCount = nil
                        endMoved = true
                    } else if change.entry.end == facts.end {
                        if let count = endCount {
                            if day >= count.lastDay - 2 {
                                endCount!.atEnd += change.added ? -1 : 1
                                if endCount!.atEnd <= 0 { endMoved = true }
                            }
                        } else {
                            endMoved = true
                        }
                    }
                }
            }
            guard !dirty.isEmpty || endMoved else { continue }
            for day in dirty { merged[day] = nil }
            // With no row now, every day's total is 0 after this event: the state before it
            // has a row exactly when a day it changed has a total (and so a sample).
            for day in dirty.sorted() where facts.map({ day >= $0.day }) ?? true {
                let shares = try self.shares(of: key(day), user: user, entries: try undone(key(day)), neighbours: undone)
                budget -= shares.count
                var idle: [Int]? = []
                let total = DailyMerge.daily(shares, idle: &idle)?.value ?? 0
                merged[day] = (total, Set((idle ?? []).compactMap { shares[$0].id }))
                guard let facts else {
                    if total != 0 { return .changedBy(step.cause) }
                    continue
                }
                if day == facts.day ? total != facts.value : total != 0 { return .changedBy(step.cause) }
            }
            if let facts, endMoved {
                let found = try latestEnd(userType, overlay: overlay)
                budget -= found.read
                if found.end != facts.end { return .changedBy(step.cause) }
                endCount = found.lastDay.map { ($0, found.atEnd) }
            }
            if budget < 0 { return .gaveUp }
        }
        // The first event: a priority list's noted facts, then the batch's start.
        let changed = steps[first].barriers[userType.type].map { $0.facts != facts } ?? false || before != facts
        return changed ? .changedBy(steps[first].cause) : .unchanged
    }

    /// `userType`'s facts as stored. Nil when no day has a non-zero total or no sample counts.
    private func lastKnownFacts(_ userType: UserType) throws -> Facts? {
        var latest: (day: Int, value: Double)?
        try store.scan(.daily, prefix: StateKey.userType(userType.user, userType.type), reverse: true) { key, value in
            let daily = try DailyValue(decoding: value)
            guard daily.value != 0 else { return true }
            latest = (try StateKey.parseDay(key).day, daily.value)
            return false
        }
        guard let latest, let latestEnd = try self.latestEnd(userType, overlay: [:]).end else { return nil }
        return Facts(day: latest.day, value: latest.value, end: latestEnd)
    }

    /// The latest end of a sample of `userType` as stored, but for the days in `overlay`; the
    /// last day with samples; how many entries of the days it is looked for in end then; and
    /// how many stored chunks and overlay entries it read. It lies in one of the last three
    /// days with samples: local days of different zones are at most 26 hours apart.
    private func latestEnd(_ userType: UserType, overlay: [Int: [UUID: BucketEntry]])
        throws -> (end: Int64?, lastDay: Int?, atEnd: Int, read: Int) {
        let prefix = StateKey.userType(userType.user, userType.type)
        var lastDay = overlay.filter { !$0.value.isEmpty }.keys.max()
        var sawStored = false
        var latestEnd: Int64?
        var atEnd = 0
        var read = overlay.count
        func take(_ end: Int64?, _ count: Int) {
            guard let end else { return }
            if end > (latestEnd ?? .min) {
                latestEnd = end
                atEnd = count
            } else if end == latestEnd {
                atEnd += count
            }
        }
        try store.scan(.buckets, prefix: prefix, reverse: true) { key, value in
            let day = try StateKey.parseBucketChunk(key).day
            if overlay[day] == nil, !sawStored {
                sawStored = true
                lastDay = max(lastDay ?? day, day)
            }
            if let lastDay, day < lastDay - 2 { return false }
            read += 1
            guard overlay[day] == nil else { return true }
            let (end, count) = try BucketEntry.latestEndAndCount(value)
            take(end, count)
            return true
        }
        if let lastDay {
            for (day, entries) in overlay where day >= lastDay - 2 {
                read += entries.count
                for entry in entries.values { take(entry.end, 1) }
            }
        }
        return (latestEnd, lastDay, atEnd, read)
    }

    /// Records, for `lastChange`, that the event being applied put `entry` into `key`'s bucket
    /// or took it out.
    private func noteChange(_ key: DayKey, _ entry: BucketEntry, added: Bool) {
        guard step != nil else { return }
        step!.user = key.user
        bucketChanges.append(BucketChange(key: key, entry: entry, added: added))
    }

    /// `userType`'s facts as the batch has left them so far, with `user`'s ranks: the days
    /// with samples from the latest down, merged until one has a non-zero total (the stored
    /// `daily` rows are the batch's start).
    private func currentFacts(_ userType: UserType, user: UserState) throws -> Facts? {
        var days = Set(buckets.keys.lazy.filter { $0.user == userType.user && $0.type == userType.type }.map(\.day))
        try store.scan(.buckets, prefix: StateKey.userType(userType.user, userType.type), reverse: false) { key, _ in
            days.insert(try StateKey.parseBucketChunk(key).day)
            return true
        }
        var latest: (day: Int, value: Double)?
        var lastDay: Int?
        var latestEnd: Int64?
        for day in days.sorted(by: >) {
            let key = DayKey(user: userType.user, type: userType.type, day: day)
            let entries = try self.entries(of: key)
            guard !entries.isEmpty else { continue }
            if lastDay == nil { lastDay = day }
            if day >= lastDay! - 2 {
                for entry in entries where entry.end > (latestEnd ?? .min) { latestEnd = entry.end }
            }
            // A day whose samples are all of value 0 totals 0 whatever the ranks.
            if latest == nil, entries.contains(where: { $0.value != 0 }) {
                let shares = try self.shares(of: key, user: user, entries: entries) { try self.entries(of: $0) }
                if let total = DailyMerge.daily(shares)?.value, total != 0 { latest = (day, total) }
            }
            if latest != nil, day < lastDay! - 2 { break }
        }
        guard let latest, let latestEnd else { return nil }
        return Facts(day: latest.day, value: latest.value, end: latestEnd)
    }

    // MARK: - State access

    private func markDirty(_ key: DayKey, _ cause: Cause) {
        // Events come in seq order: a later one replaces the cause.
        dirtyDays[key] = cause
    }

    private func markAllDays(user: UInt32, type: QuantityType, cause: Cause) throws {
        try store.scan(.buckets, prefix: StateKey.userType(user, type), reverse: false) { key, _ in
            markDirty(DayKey(user: user, type: type, day: try StateKey.parseBucketChunk(key).day), cause)
            return true
        }
        for key in buckets.keys where key.user == user && key.type == type {
            markDirty(key, cause)
        }
    }

    private func loadBucket(_ key: DayKey) throws {
        guard buckets[key] == nil else { return }
        buckets[key] = try Bucket(reading: key.bytes, from: store)
    }

    private static let nextUserKey = Array("next-user".utf8)

    /// The user's id, assigned in order of first appearance.
    private func userID(for name: String) throws -> UInt32 {
        try lastUser.value(for: name, lookUpUserID)
    }

    private func lookUpUserID(for name: String) throws -> UInt32 {
        let bytes = Array(name.utf8)
        if let id = userIDs[bytes] { return id }
        let nameKey = StateKey.userName(name)
        if let stored = try store.get(.userNames, nameKey) {
            var reader = ByteReader(stored)
            let id = try reader.u32()
            userIDs[bytes] = id
            return id
        }
        var next: UInt32 = 1
        if let stored = try store.get(.userNames, ActivityFold.nextUserKey) {
            var reader = ByteReader(stored)
            next = try reader.u32()
        }
        try store.put(.userNames, nameKey, StateKey.user(next))
        try store.put(.userNames, ActivityFold.nextUserKey, StateKey.user(next + 1))
        userIDs[bytes] = next
        setUserState(next, UserState(name: name))
        return next
    }

    /// Makes sure the user's state is in `users`.
    private func loadUser(_ id: UInt32) throws {
        if users.index(forKey: UserKey(id)) == nil { _ = try userState(id) }
    }

    private func userState(_ id: UInt32) throws -> UserState {
        if let state = users[UserKey(id)] { return state }
        guard let bytes = try store.get(.users, StateKey.user(id)) else {
            throw DamagedState(reason: "user \(id) has a key but no state")
        }
        let state = try UserState(decoding: bytes)
        users[UserKey(id)] = state
        return state
    }

    private func setUserState(_ id: UInt32, _ state: UserState) {
        users[UserKey(id)] = state
        dirtyUsers.insert(UserKey(id))
    }
}

extension ActivityFold {
    /// The value and unit the sample at `seq` counts with now (after any amendment), as the
    /// fold's state in `store` has it; nil when it does not count (retracted, superseded) or
    /// the state holds no readable record of it. What the log checks a unit-only amendment
    /// against: the log's own index keeps no value.
    public static func currentAmount(ofSampleAt seq: UInt64, in store: any StateStore) -> (value: Double, unit: String)? {
        guard let bytes = try? store.get(.samples, StateKey.position(seq)),
              let record = try? SampleRecord(decoding: bytes) else { return nil }
        return (record.value, record.unit)
    }
}

/// The last name looked up and what it gave: consecutive events nearly always name the same
/// user, zone and source, and the full lookup hashes the name or searches a list. Names
/// compare by their bytes (`sameName`).
private struct LastLookup<Value> {
    private var last: (name: String, value: Value)?

    mutating func value(for name: String, _ lookUp: (String) throws -> Value) rethrows -> Value {
        if let last, sameName(last.name, name) { return last.value }
        let value = try lookUp(name)
        last = (name, value)
        return value
    }
}

