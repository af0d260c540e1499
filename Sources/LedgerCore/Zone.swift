import Foundation
import Synchronization

/// A time zone as the ledger accepts it: an IANA name (`Europe/Paris`, `UTC`) or a fixed
/// offset `±HH:MM`. Only the validated spelling is stored; the `TimeZone` is derived.
public struct Zone: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public let timeZone: TimeZone
    /// Seconds east of UTC when the zone has no rules (`UTC`, `GMT`, `±HH:MM`): `offset(at:)`
    /// then needs no call into Foundation, which costs about a microsecond each.
    public let fixedOffset: Int?

    public static let utc = Zone(name: "UTC", timeZone: TimeZone(identifier: "UTC")!)

    private init(name: String, timeZone: TimeZone) {
        self.name = name
        self.timeZone = timeZone
        if let offset = Zone.parseOffset(name) {
            fixedOffset = offset
        } else if ["UTC", "GMT", "Etc/UTC", "Etc/GMT", "Etc/Universal", "Etc/Zulu", "Universal", "Zulu"].contains(name) {
            fixedOffset = 0
        } else {
            fixedOffset = nil
        }
    }

    /// Validates `text`; nil when it is neither a known IANA name nor a `±HH:MM` offset.
    public init?(_ text: String) {
        // IANA names and offsets are ASCII. Checking that first also keeps Swift's String
        // equality (canonical equivalence: the Kelvin sign U+212A equals "K") from matching
        // a look-alike spelling to a real name, here or in any cache keyed by zone names.
        guard !text.isEmpty, text.utf8.count <= 64, text.utf8.allSatisfy({ $0 < 0x80 }) else { return nil }
        if let offset = Zone.parseOffset(text) {
            guard let zone = TimeZone(secondsFromGMT: offset) else { return nil }
            self.init(name: text, timeZone: zone)
            return
        }
        // Foundation also accepts abbreviations such as "EST" and forms such as "GMT+5";
        // require an IANA name (Area/Location, or UTC/GMT) so that stored zones stay portable.
        // knownTimeZoneIdentifiers alone is not enough: on Linux it omits Asia/Kolkata and Etc/*.
        guard Zone.looksLikeIANAName(text) || TimeZone.knownTimeZoneIdentifiers.contains(text),
              let zone = TimeZone(identifier: text)
        else { return nil }
        self.init(name: text, timeZone: zone)
    }

    /// `Zone(text)`, remembered per name for the whole process: building a `TimeZone` costs
    /// more than the rest of checking a sample, and inputs name a handful of zones. At most
    /// 4,096 names are remembered (hostile input may name many). Non-ASCII names are refused
    /// before the lookup, as `init` refuses them, because String keys compare by canonical
    /// equivalence. The last name asked for is compared first, without hashing: an import
    /// asks for one sample's zone after another, nearly always the same.
    public static func named(_ text: String) -> Zone? {
        guard text.utf8.allSatisfy({ $0 < 0x80 }) else { return nil }
        let remembered = known.withLock { memory -> Zone?? in
            if memory.lastName == text { return .some(memory.lastZone) }
            guard let zone = memory.names[text] else { return .none }
            memory.remember(text, zone)
            return .some(zone)
        }
        if let remembered { return remembered }
        let zone = Zone(text)
        known.withLock { memory in
            if memory.names.count < 4096 { memory.names[text] = zone }
            memory.remember(text, zone)
        }
        return zone
    }

    /// Whether `Zone(text)` succeeds (through `named`'s memory). The last name asked for is
    /// answered without copying its zone (an import asks this of every sample).
    public static func isValid(_ text: String) -> Bool {
        guard text.utf8.allSatisfy({ $0 < 0x80 }) else { return false }
        if let valid = known.withLock({ $0.lastName == text ? $0.lastZone != nil : nil }) { return valid }
        return named(text) != nil
    }

    /// The names looked up so far, and the last one. Its fields are read in place: a tuple
    /// of the last name and zone, copied out on every lookup, cost more than the lookup.
    /// Only ASCII names get here, so `==` is a comparison of bytes.
    private struct Memory: Sendable {
        var names: [String: Zone?] = [:]
        /// Empty until a name is looked up (no zone is named "").
        var lastName = ""
        var lastZone: Zone?

        mutating func remember(_ name: String, _ zone: Zone?) {
            lastName = name
            lastZone = zone
        }
    }

    private static let known = Mutex(Memory())

    static func looksLikeIANAName(_ text: String) -> Bool {
        if text == "UTC" || text == "GMT" { return true }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].first?.isUppercase == true else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "_+-".contains($0)) }
        }
    }

    /// `+08:00` → 28800; nil when not of that shape.
    public static func parseOffset(_ text: String) -> Int? {
        let bytes = Array(text.utf8)
        guard bytes.count == 6, bytes[0] == UInt8(ascii: "+") || bytes[0] == UInt8(ascii: "-"),
              bytes[3] == UInt8(ascii: ":"),
              let hours = Int(String(decoding: bytes[1...2], as: UTF8.self)),
              let minutes = Int(String(decoding: bytes[4...5], as: UTF8.self)),
              bytes[1...2].allSatisfy({ $0 >= 48 && $0 <= 57 }),
              bytes[4...5].allSatisfy({ $0 >= 48 && $0 <= 57 }),
              hours <= 23, minutes <= 59
        else { return nil }
        let magnitude = hours * 3600 + minutes * 60
        return bytes[0] == UInt8(ascii: "-") ? -magnitude : magnitude
    }

    /// Seconds east of UTC at `instant`.
    public func offset(at instant: Timestamp) -> Int {
        if let fixedOffset { return fixedOffset }
        // Whole seconds, which a Double holds exactly at any date: offsets change on whole
        // seconds, and microseconds past 2^53 (about the year 2255) rounded the instant one
        // microsecond before a change onto it.
        let seconds = instant.microseconds.floorDivided(by: 1_000_000).quotient
        return timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(seconds)))
    }

    public var description: String { name }
}
