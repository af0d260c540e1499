import Foundation
import LedgerCore

/// Which calendar day an instant falls on in a zone, and where each day begins and ends
/// (SPEC §4.1). Days are 23, 24 or 25 hours long across daylight-saving changes; a day whose
/// local midnight does not exist begins at its first existing instant.
///
/// Zone rules come from Foundation's `TimeZone` (the system tz database); results are cached,
/// so a fold asks Foundation once per zone and day. Not thread-safe: one per fold.
public final class DayCalendar {
    private var zones: [String: Zone] = [:]
    private var starts: [String: [Int: Int64]] = [:]
    private var calendars: [String: Calendar] = [:]

    public init() {}

    /// The validated zone for `name` (which was validated when its event was appended);
    /// UTC if it no longer resolves (a tz database that dropped a name).
    public func zone(named name: String) -> Zone {
        if let zone = zones[name] { return zone }
        let zone = Zone(name) ?? .utc
        zones[name] = zone
        return zone
    }

    /// Days since 1970-01-01 of the local date of `instant` (microseconds) in `zone`.
    public func day(of instant: Int64, in zone: Zone) -> Int {
        let seconds = instant.floorDivided(by: 1_000_000).quotient
        let offset = Int64(zone.offset(at: Timestamp(microseconds: instant)))
        return Int((seconds + offset).floorDivided(by: 86_400).quotient)
    }

    /// `[start, end)` of local day `day` in `zone`, in microseconds since 1970 UTC.
    public func window(of day: Int, in zone: Zone) -> (start: Int64, end: Int64) {
        (start(of: day, in: zone), start(of: day + 1, in: zone))
    }

    private func start(of day: Int, in zone: Zone) -> Int64 {
        if let cached = starts[zone.name]?[day] { return cached }
        let calendar: Calendar
        if let cached = calendars[zone.name] {
            calendar = cached
        } else {
            var made = Calendar(identifier: .gregorian)
            made.timeZone = zone.timeZone
            calendars[zone.name] = made
            calendar = made
        }
        let civil = CivilDate(daysSinceEpoch: day)
        let components = DateComponents(year: civil.year, month: civil.month, day: civil.day)
        let value: Int64
        if let date = calendar.date(from: components) {
            value = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        } else {
            // Not expected from Foundation; fall back to midnight at the zone's offset then.
            let midnight = Int64(day) * 86_400
            value = (midnight - Int64(zone.offset(at: Timestamp(seconds: midnight)))) * 1_000_000
        }
        starts[zone.name, default: [:]][day] = value
        return value
    }

    /// The local days `[start, end)` touches; a zero-length sample touches the day of its instant.
    public func days(from start: Int64, to end: Int64, in zone: Zone) -> [Int] {
        let first = day(of: start, in: zone)
        guard end > start else { return [first] }
        let last = day(of: end - 1, in: zone)
        return Array(first...max(first, last))
    }
}
