/// The activity quantities the ledger keeps, with HealthKit's identifiers as aliases.
public enum QuantityType: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    case steps
    case distance
    case flights
    case activeEnergy = "active-energy"

    /// Accepts the ledger's names and HealthKit's `HKQuantityTypeIdentifier…` names.
    public init?(name: String) {
        switch name {
        case "steps", "HKQuantityTypeIdentifierStepCount": self = .steps
        case "distance", "HKQuantityTypeIdentifierDistanceWalkingRunning": self = .distance
        case "flights", "HKQuantityTypeIdentifierFlightsClimbed": self = .flights
        case "active-energy", "HKQuantityTypeIdentifierActiveEnergyBurned": self = .activeEnergy
        default: return nil
        }
    }

    /// The unit projections report this type in.
    public var canonicalUnit: String {
        switch self {
        case .steps, .flights: "count"
        case .distance: "m"
        case .activeEnergy: "kcal"
        }
    }

    /// The units a sample of this type may be given in.
    public var acceptedUnits: [String] {
        switch self {
        case .steps, .flights: ["count"]
        case .distance: ["m", "km", "mi", "ft", "yd"]
        case .activeEnergy: ["kcal", "Cal", "kJ"]
        }
    }

    /// Multiplier from `unit` to the canonical unit, or nil when the unit does not fit this type.
    public func factor(from unit: String) -> Double? {
        switch (self, unit) {
        case (.steps, "count"), (.flights, "count"): 1
        case (.distance, "m"): 1
        case (.distance, "km"): 1000
        case (.distance, "mi"): 1609.344
        case (.distance, "ft"): 0.3048
        case (.distance, "yd"): 0.9144
        case (.activeEnergy, "kcal"), (.activeEnergy, "Cal"): 1
        case (.activeEnergy, "kJ"): 1 / 4.184
        default: nil
        }
    }

    /// A stable small number for compact binary records.
    public var code: UInt8 {
        switch self {
        case .steps: 1
        case .distance: 2
        case .flights: 3
        case .activeEnergy: 4
        }
    }

    /// One more than the largest `code`: the size of a table indexed by code.
    public static let codeLimit = Int(allCases.map(\.code).max()!) + 1

    public init?(code: UInt8) {
        switch code {
        case 1: self = .steps
        case 2: self = .distance
        case 3: self = .flights
        case 4: self = .activeEnergy
        default: return nil
        }
    }

    // An enum with a `String` raw value hashes and compares that string by default (through
    // `RawRepresentable`); the fold looks types up per sample, so they go by `code` instead.
    public static func == (lhs: QuantityType, rhs: QuantityType) -> Bool { lhs.code == rhs.code }

    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// What `Dictionary` and `Set` ask (`WordHash`): each user's sources are looked up by type
    /// per sample.
    public func _rawHashValue(seed: Int) -> Int { WordHash.mix(UInt64(code), seed: seed) }

    public static func < (lhs: QuantityType, rhs: QuantityType) -> Bool {
        lhs.rawValue < rhs.rawValue
    }

    /// Every accepted spelling, for error messages.
    public static let acceptedNames = "steps, distance, flights, active-energy (or HealthKit's identifiers)"
}

