import LedgerCore

/// The projections users can ask for (SPEC §4). `daily-steps` is `daily` with `--type steps`.
public enum ProjectionName: String, CaseIterable, Sendable {
    case daily
    case perSource = "per-source"
    case lastKnown = "last-known"
    case grants

    /// Accepts the names of SPEC §5, including `daily-steps`; the second value is the type
    /// the name implies.
    public static func parse(_ text: String) -> (ProjectionName, QuantityType?)? {
        if text == "daily-steps" { return (.daily, .steps) }
        return ProjectionName(rawValue: text).map { ($0, nil) }
    }

    /// Why a type asked for (`spelled` as given) contradicts the one a name implies
    /// (`daily-steps` and distance), or nil: the CLI, HTTP reads and streams refuse it alike,
    /// rather than serve another type under a steps name.
    public static func typeConflict(implied: QuantityType?, given: QuantityType, spelled: String, option: String) -> String? {
        guard let implied, implied != given else { return nil }
        return "daily-steps is daily of type \(implied.rawValue); it cannot take \(option) \(spelled)"
    }

    /// The columns of its rows, in output order.
    public var columns: [String] { layout.columns }

    /// `columns` as JSON object keys (`JSONValue.objectKeys`).
    public var columnKeys: [[UInt8]] { layout.keys }

    /// Each projection's columns and their keys, made once: every change a commit stores
    /// writes its rows by them.
    private var layout: ColumnLayout {
        switch self {
        case .daily: ColumnLayout.daily
        case .perSource: ColumnLayout.perSource
        case .lastKnown: ColumnLayout.lastKnown
        case .grants: ColumnLayout.grants
        }
    }

    private struct ColumnLayout {
        let columns: [String]
        let keys: [[UInt8]]

        init(_ columns: [String]) {
            self.columns = columns
            keys = JSONValue.objectKeys(columns)
        }

        static let daily = ColumnLayout(["user", "type", "date", "value", "unit", "samples", "sources"])
        static let perSource = ColumnLayout(["user", "type", "date", "source", "value", "unit", "samples"])
        static let lastKnown = ColumnLayout(["user", "type", "date", "value", "unit", "latestSampleEnd", "seq", "recorded", "stale"])
        static let grants = ColumnLayout(["user", "client", "read", "share", "updated", "seq"])
    }
}

/// A projection row: its values by column (absent columns are left out of JSON).
public struct Row: Sendable, Equatable {
    public var projection: ProjectionName
    public var values: RowValues

    public init(projection: ProjectionName, values: RowValues) {
        self.projection = projection
        self.values = values
    }

    /// The JSON object with keys in column order.
    public var jsonBytes: [UInt8] { jsonBytes(columns: projection.columns, keys: projection.columnKeys) }

    /// The row as a JSON object of `columns`, in that order; absent values are left out.
    public func jsonBytes(columns: [String]) -> [UInt8] {
        jsonBytes(columns: columns, keys: JSONValue.objectKeys(columns))
    }

    private func jsonBytes(columns: [String], keys: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(160)
        write(columns: columns, keys: keys, to: &out)
        return out
    }

    /// Appends `jsonBytes(columns:)` (the object of `columns`, under `keys`) to `out`.
    func write(columns: [String], keys: [[UInt8]], to out: inout [UInt8]) {
        JSONValue.writeObject(keys: keys, value: { values[columns[$0]] }, to: &out)
    }

    /// The columns of daily rows with a fallback (`--fallback`): stale rows are last-known
    /// rows, so their extra columns come too.
    public static let fallbackColumns = ["user", "type", "date", "value", "unit", "samples", "sources",
                                         "latestSampleEnd", "seq", "recorded", "stale"]

    /// The sort key of SPEC §5: user, type, date, source (client for grants).
    public var sortKey: [String] {
        [values["user"]?.stringValue ?? "", values["type"]?.stringValue ?? "",
         values["date"]?.stringValue ?? "", values["source"]?.stringValue ?? values["client"]?.stringValue ?? ""]
    }

    public static func sorted(_ rows: [Row]) -> [Row] {
        // Compute each key once, not in every comparison.
        rows.map { ($0.sortKey, $0) }
            .sorted { $0.0.lexicographicallyPrecedes($1.0) { $0.utf8.lexicographicallyPrecedes($1.utf8) } }
            .map(\.1)
    }
}

/// A row's values by column name, kept as a short list in the order given rather than hashed:
/// a row has at most eleven columns, and building and reading a dictionary of them was a good
/// part of printing rows (`project` of a year of daily rows) and of storing each commit's
/// changes. Equal when they hold the same columns and values, in any order.
public struct RowValues: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    public private(set) var pairs: [(column: String, value: JSONValue)]

    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        pairs = []
        pairs.reserveCapacity(elements.count)
        for (column, value) in elements { self[column] = value }
    }

    public subscript(column: String) -> JSONValue? {
        get { pairs.first { $0.column == column }?.value }
        set {
            let index = pairs.firstIndex { $0.column == column }
            switch (index, newValue) {
            case (let index?, let value?): pairs[index].value = value
            case (let index?, nil): pairs.remove(at: index)
            case (nil, let value?): pairs.append((column, value))
            case (nil, nil): break
            }
        }
    }

    public static func == (a: RowValues, b: RowValues) -> Bool {
        a.pairs.count == b.pairs.count && a.pairs.allSatisfy { b[$0.column] == $0.value }
    }
}

/// A committed event's effect on one projection row (SPEC §8).
public struct RowChange: Sendable, Equatable {
    public var seq: UInt64
    public var projection: ProjectionName
    /// The new row; nil when the row disappeared.
    public var row: Row?
    /// The row before; nil when it is new.
    public var previous: Row?

    /// `{"seq":N,"projection":"daily","row":{…}|null,"previous":{…}|null}`
    public var jsonBytes: [UInt8] {
        // Written into one list: a string of the start and a list per row, joined, were about
        // two fifths of storing a change.
        var out: [UInt8] = []
        out.reserveCapacity(384)
        out.append(contentsOf: #"{"seq":"#.utf8)
        JSONValue.writeInteger(seq, to: &out)
        out.append(contentsOf: #","projection":""#.utf8)
        out.append(contentsOf: projection.rawValue.utf8)
        out.append(contentsOf: #"","row":"#.utf8)
        let (columns, keys) = (projection.columns, projection.columnKeys)
        func write(_ side: Row?) {
            if let side { side.write(columns: columns, keys: keys, to: &out) } else { out.append(contentsOf: "null".utf8) }
        }
        write(row)
        out.append(contentsOf: #","previous":"#.utf8)
        write(previous)
        out.append(UInt8(ascii: "}"))
        return out
    }
}

enum RowBuilder {
    static func date(_ day: Int) -> JSONValue { .string(CivilDate(daysSinceEpoch: day).description) }

    static func daily(user: String, type: QuantityType, day: Int, _ value: DailyValue) -> Row {
        Row(projection: .daily, values: [
            "user": .string(user), "type": .string(type.rawValue), "date": date(day),
            "value": .double(value.value), "unit": .string(type.canonicalUnit),
            "samples": .int(Int64(value.samples)), "sources": .int(Int64(value.sources)),
        ])
    }

    static func perSource(user: String, type: QuantityType, day: Int, _ value: PerSourceValue) -> Row {
        Row(projection: .perSource, values: [
            "user": .string(user), "type": .string(type.rawValue), "date": date(day),
            "source": .string(value.source), "value": .double(value.value),
            "unit": .string(type.canonicalUnit), "samples": .int(Int64(value.samples)),
        ])
    }

    static func lastKnown(user: String, type: QuantityType, _ value: LastKnownValue) -> Row {
        Row(projection: .lastKnown, values: [
            "user": .string(user), "type": .string(type.rawValue), "date": date(value.day),
            "value": .double(value.value), "unit": .string(type.canonicalUnit),
            "latestSampleEnd": .string(Timestamp(microseconds: value.latestSampleEnd).rfc3339),
            "seq": .int(Int64(value.seq)), "recorded": .string(Timestamp(microseconds: value.recorded).rfc3339),
        ])
    }

    static func grant(user: String, _ value: GrantValue) -> Row {
        func list(_ types: Set<QuantityType>) -> JSONValue { .array(types.sorted().map { .string($0.rawValue) }) }
        return Row(projection: .grants, values: [
            "user": .string(user), "client": .string(value.client), "read": list(value.read),
            "share": list(value.share), "updated": .string(Timestamp(microseconds: value.recorded).rfc3339),
            "seq": .int(Int64(value.seq)),
        ])
    }
}

/// A `daily` row in typed form, for in-process callers (`EventLog.dailyTotals`).
public struct DailyTotal: Sendable, Equatable {
    public var date: CivilDate
    /// In the type's canonical unit.
    public var value: Double
    public var samples: Int
    public var sources: Int
}
