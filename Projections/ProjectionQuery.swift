import LedgerCore

/// Which rows to read (SPEC §5 `project` filters). Dates are inclusive local dates.
public struct RowFilter: Sendable, Equatable {
    public var user: String?
    public var type: QuantityType?
    public var from: CivilDate?
    public var to: CivilDate?

    public init(user: String? = nil, type: QuantityType? = nil, from: CivilDate? = nil, to: CivilDate? = nil) {
        self.user = user
        self.type = type
        self.from = from
        self.to = to
    }
}

/// Reads projection rows out of a `StateStore`, sorted by user, type, date and source.
public struct ProjectionQuery {
    let store: any StateStore

    public init(store: any StateStore) { self.store = store }

    /// Types in the order rows are sorted by (their names).
    static let typesByName = QuantityType.allCases.sorted { $0.rawValue < $1.rawValue }

    /// The rows of `projection` that pass `filter`, sorted by user, type, date and source.
    ///
    /// They are read in that order — users by name, types by name, days ascending in the key,
    /// sources sorted within each stored day — so no sort of the rows is needed except for
    /// grants, whose keys hold a digest of the client name.
    public func rows(_ projection: ProjectionName, filter: RowFilter) throws -> [Row] {
        var rows: [Row] = []
        for (userID, name) in try users(filter.user) {
            switch projection {
            case .daily, .perSource:
                for type in ProjectionQuery.typesByName where filter.type == nil || filter.type == type {
                    let table: StateTable = projection == .daily ? .daily : .perSource
                    let prefix = StateKey.userType(userID, type)
                    try store.scan(table, prefix: prefix, reverse: false) { key, value in
                        let day = try StateKey.parseDay(key).day
                        if let from = filter.from, day < from.daysSinceEpoch { return true }
                        if let to = filter.to, day > to.daysSinceEpoch { return false }
                        if projection == .daily {
                            rows.append(RowBuilder.daily(user: name, type: type, day: day, try DailyValue(decoding: value)))
                        } else {
                            for source in try PerSourceValue.decode(value) {
                                rows.append(RowBuilder.perSource(user: name, type: type, day: day, source))
                            }
                        }
                        return true
                    }
                }
            case .lastKnown:
                for type in ProjectionQuery.typesByName where filter.type == nil || filter.type == type {
                    guard let value = try store.get(.lastKnown, StateKey.userType(userID, type)) else { continue }
                    let known = try LastKnownValue(decoding: value)
                    if let from = filter.from, known.day < from.daysSinceEpoch { continue }
                    if let to = filter.to, known.day > to.daysSinceEpoch { continue }
                    rows.append(RowBuilder.lastKnown(user: name, type: type, known))
                }
            case .grants:
                var grants: [GrantValue] = []
                try store.scan(.grants, prefix: StateKey.user(userID), reverse: false) { _, value in
                    let grant = try GrantValue(decoding: value)
                    if let type = filter.type, !grant.read.contains(type), !grant.share.contains(type) { return true }
                    grants.append(grant)
                    return true
                }
                grants.sort { $0.client.utf8.lexicographicallyPrecedes($1.client.utf8) }
                rows += grants.map { RowBuilder.grant(user: name, $0) }
            }
        }
        return rows
    }

    /// Visits every entry of `table` in key order until `body` returns false: what `verify`
    /// compares, beyond the rows, between the stored state and a fresh fold.
    public func forEachEntry(_ table: StateTable, _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Bool) throws {
        try store.scan(table, prefix: [], reverse: false, body)
    }

    /// One user's `daily` totals of one type between two dates (inclusive), oldest first.
    public func dailyTotals(user: String, type: QuantityType, from: CivilDate?, to: CivilDate?) throws -> [DailyTotal] {
        guard let (userID, _) = try users(user).first else { return [] }
        var totals: [DailyTotal] = []
        let first = from?.daysSinceEpoch
        let last = to?.daysSinceEpoch
        let prefix = StateKey.userType(userID, type)
        try store.scanInPlace(.daily, prefix: prefix) { key, value in
            let day = try StateKey.parseDay(key).day
            if let first, day < first { return true }
            if let last, day > last { return false }
            let daily = try DailyValue(decoding: value)
            totals.append(DailyTotal(date: CivilDate(daysSinceEpoch: day), value: daily.value,
                                     samples: daily.samples, sources: daily.sources))
            return true
        }
        return totals
    }

    /// The user's profile zone, if any (for "today" in the user's own zone).
    public func profileZone(of user: String) throws -> String? {
        guard let idBytes = try store.get(.userNames, StateKey.userName(user)),
              let state = try store.get(.users, idBytes) else { return nil }
        return try UserState(decoding: state).zone
    }

    /// The grants of `user` to `client`: read and share types, for access checks.
    public func grant(user: String, client: String) throws -> (read: Set<QuantityType>, share: Set<QuantityType>) {
        guard let idBytes = try store.get(.userNames, StateKey.userName(user)) else { return ([], []) }
        var reader = ByteReader(idBytes)
        guard let value = try store.get(.grants, StateKey.grant(try reader.u32(), client: client)) else { return ([], []) }
        let grant = try GrantValue(decoding: value)
        return (grant.read, grant.share)
    }

    private func users(_ only: String?) throws -> [(UInt32, String)] {
        if let only {
            guard let idBytes = try store.get(.userNames, StateKey.userName(only)) else { return [] }
            var reader = ByteReader(idBytes)
            return [(try reader.u32(), only)]
        }
        var result: [(UInt32, String)] = []
        try store.scan(.users, prefix: [], reverse: false) { key, value in
            var reader = ByteReader(key)
            result.append((try reader.u32(), try UserState(decoding: value).name))
            return true
        }
        return result.sorted { $0.1.utf8.lexicographicallyPrecedes($1.1.utf8) }
    }
}

extension Row {
    /// The rows of `projection` that `filter` selects, read with `read`; with `fallback` (daily
    /// rows of one day, SPEC §4.4), each user and type without a row that day gets its
    /// last-known row marked `"stale": true`, and the day's own rows `"stale": false`. The one
    /// rule behind `project --fallback`, `replay --fallback` and `GET …?fallback=true`.
    public static func rows(_ projection: ProjectionName, filter: RowFilter, fallback: Bool,
                            _ read: (ProjectionName, RowFilter) throws -> [Row]) throws -> [Row] {
        var rows = try read(projection, filter)
        guard fallback else { return rows }
        rows = rows.map { row in
            var fresh = row
            fresh.values["stale"] = .bool(false)
            return fresh
        }
        var known = RowFilter(user: filter.user, type: filter.type)
        known.to = filter.to
        let have = Set(rows.map { [$0.values["user"]?.stringValue ?? "", $0.values["type"]?.stringValue ?? ""] })
        for row in try read(.lastKnown, known) {
            let key = [row.values["user"]?.stringValue ?? "", row.values["type"]?.stringValue ?? ""]
            guard !have.contains(key) else { continue }
            var stale = row
            stale.values["stale"] = .bool(true)
            rows.append(stale)
        }
        return Row.sorted(rows)
    }
}

