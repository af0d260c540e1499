import Foundation

/// The five kinds of fact the log holds (SPEC §3).
public enum EventKind: String, Sendable, Hashable, Codable, CaseIterable {
    case sample, correction, grant, revoke, profile

    /// Its place among the cases: hashed and compared instead of the raw value (a `String`,
    /// which `RawRepresentable` would hash for every event counted by kind).
    public var ordinal: Int {
        switch self {
        case .sample: 0
        case .correction: 1
        case .grant: 2
        case .revoke: 3
        case .profile: 4
        }
    }

    public static func == (lhs: EventKind, rhs: EventKind) -> Bool { lhs.ordinal == rhs.ordinal }

    public func hash(into hasher: inout Hasher) { hasher.combine(ordinal) }
}

/// One validated event, before or after it was committed.
///
/// `document` is the normalized JSON object that is stored: the input with defaults filled in
/// (`user`, `id`), aliases replaced by canonical names, `source` as an object, and every
/// unknown field kept. `payload` is the typed view projections fold over. Both are derived
/// from the same input by `EventDecoder`, so they never disagree.
public struct Event: Sendable, Equatable {
    public var id: UUID
    public var payload: Payload
    public var document: JSONValue

    public var kind: EventKind { payload.kind }

    public init(id: UUID, payload: Payload, document: JSONValue) {
        self.id = id
        self.payload = payload
        self.document = document
    }

    /// The user the event concerns.
    public var user: String { payload.user }

    public enum Payload: Sendable, Equatable {
        /// The user an event concerns, or for a correction the sample it targets (whose user
        /// is that sample's).
        public var subject: EventSubject {
            if case .correction(let correction) = self { return .target(correction.target) }
            return .user(user)
        }

        case sample(Sample)
        case correction(Correction)
        case grant(AccessChange)
        case revoke(AccessChange)
        case profile(Profile)

        /// The user the event concerns ("" for a correction: its user is its target's).
        public var user: String {
            switch self {
            case .sample(let sample): sample.user
            case .correction: ""  // a correction's user is its target's
            case .grant(let change), .revoke(let change): change.user
            case .profile(let profile): profile.user
            }
        }

        public var kind: EventKind {
            switch self {
            case .sample: .sample
            case .correction: .correction
            case .grant: .grant
            case .revoke: .revoke
            case .profile: .profile
            }
        }
    }
}

/// Whom an event concerns: a user, or (a correction) the sample it targets.
public enum EventSubject: Sendable, Equatable {
    case user(String)
    case target(UUID)
}

/// Where a sample came from; `name` is what priorities and per-source sums key on.
public struct SampleSource: Sendable, Hashable, Codable {
    public var name: String
    public var bundle: String?
    public var device: String?
    public var version: String?

    public init(name: String, bundle: String? = nil, device: String? = nil, version: String? = nil) {
        self.name = name
        self.bundle = bundle
        self.device = device
        self.version = version
    }
}

/// An activity sample: `value` `unit` of `type` over `[start, end)`.
public struct Sample: Sendable, Equatable {
    /// The largest value a sample may have once converted to its type's canonical unit: far
    /// beyond any measurement (10^15 steps, metres or kcal), and small enough that no
    /// conversion, sum or split of values in range can overflow to infinity, which no
    /// projection row could then print.
    public static let maximumCanonicalValue = 1e15
    /// The longest a sample may last, in microseconds (366 days): a sample is bucketed on every
    /// local day it touches, so a sample spanning millennia would write millions of days.
    public static let maximumDuration: Int64 = 366 * 86_400 * 1_000_000

    /// Why `value` in `unit` (which fits `type`) or the span from `start` to `end` is out of
    /// range, as (field, message); nil when both are in range.
    public static func rangeProblem(value: Double, unit: String, type: QuantityType,
                                    start: Timestamp, end: Timestamp) -> (field: String, message: String)? {
        if let problem = Timestamp.rangeProblem(start, field: "start") { return ("start", problem) }
        if let problem = Timestamp.rangeProblem(end, field: "end") { return ("end", problem) }
        return valueProblem(value, unit: unit, type: type) ?? (lastsTooLong(start: start, end: end) ? ("end", "'end' is more than 366 days after 'start'") : nil)
    }

    /// Why `value` in `unit` is over `maximumCanonicalValue` once converted; nil when it is not.
    public static func valueProblem(_ value: Double, unit: String, type: QuantityType) -> (field: String, message: String)? {
        guard let factor = type.factor(from: unit), !(value * factor <= maximumCanonicalValue) else { return nil }
        return ("value", "'value' is too large: at most 1e15 \(type.canonicalUnit) once converted, got \(EventDecoder.describe(.double(value))) \(unit)")
    }

    /// Why amending only the unit of a sample whose value is now `value` (in `from`) to `unit`
    /// would put it over `maximumCanonicalValue`; nil when it would not.
    public static func rescaleProblem(_ value: Double, from: String, to unit: String, type: QuantityType) -> String? {
        guard valueProblem(value, unit: unit, type: type) != nil else { return nil }
        let shown = EventDecoder.describe(.double(value))
        return "after this amendment the target's value, \(shown) \(from), would be \(shown) \(unit): over 1e15 \(type.canonicalUnit) once converted"
    }

    /// Whether a sample from `start` to `end` would last over `maximumDuration`.
    public static func lastsTooLong(start: Timestamp, end: Timestamp) -> Bool {
        // Subtracted with overflow reported: the times may come from a damaged state record.
        let (span, overflow) = end.microseconds.subtractingReportingOverflow(start.microseconds)
        return overflow || span > maximumDuration
    }

    public var user: String
    public var type: QuantityType
    /// The value as given, in `unit`.
    public var value: Double
    public var unit: String
    public var start: Timestamp
    public var end: Timestamp
    /// The device's zone when it took the sample (IANA name or `±HH:MM`), if known.
    public var zone: String?
    public var source: SampleSource
    public var syncId: String?
    public var syncVersion: Int64?

    public init(user: String, type: QuantityType, value: Double, unit: String, start: Timestamp,
                end: Timestamp, zone: String? = nil, source: SampleSource,
                syncId: String? = nil, syncVersion: Int64? = nil) {
        self.user = user
        self.type = type
        self.value = value
        self.unit = unit
        self.start = start
        self.end = end
        self.zone = zone
        self.source = source
        self.syncId = syncId
        self.syncVersion = syncVersion
    }

    /// The value in the type's canonical unit (`count`, `m`, `kcal`).
    public var canonicalValue: Double {
        value * (type.factor(from: unit) ?? 1)
    }
}

/// A retraction or amendment of an earlier sample. Corrections are new events; the log
/// is never rewritten.
public struct Correction: Sendable, Equatable {
    public enum Action: String, Sendable, Equatable { case retract, amend }

    public var target: UUID
    public var action: Action
    public var reason: String
    public var value: Double?
    public var unit: String?
    public var start: Timestamp?
    public var end: Timestamp?

    public init(target: UUID, action: Action, reason: String, value: Double? = nil,
                unit: String? = nil, start: Timestamp? = nil, end: Timestamp? = nil) {
        self.target = target
        self.action = action
        self.reason = reason
        self.value = value
        self.unit = unit
        self.start = start
        self.end = end
    }
}

/// A `grant` adds to, a `revoke` removes from, a client's permissions for a user.
public struct AccessChange: Sendable, Equatable {
    public var user: String
    public var client: String
    public var read: [QuantityType]
    public var share: [QuantityType]

    public init(user: String, client: String, read: [QuantityType], share: [QuantityType]) {
        self.user = user
        self.client = client
        self.read = read
        self.share = share
    }
}

/// A user's home zone and source priorities.
public struct Profile: Sendable, Equatable {
    public var user: String
    public var zone: String?
    /// Per type, source names, highest priority first.
    public var priority: [QuantityType: [String]]?

    public init(user: String, zone: String? = nil, priority: [QuantityType: [String]]? = nil) {
        self.user = user
        self.zone = zone
        self.priority = priority
    }
}
