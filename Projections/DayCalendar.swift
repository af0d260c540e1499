import Foundation
import LedgerCore
import Synchronization

/// Which calendar day an instant falls on in a zone, and where each day begins and ends
/// (SPEC §4.1). Days are 23, 24 or 25 hours long across daylight-saving changes; a day whose
/// local midnight does not exist begins at its first existing instant.
///
/// Zone rules come from Foundation's `TimeZone` (the system tz database); results are cached,
/// so Foundation is asked once per zone and day. A ledger keeps one calendar for all its folds
/// (a server folds every POST separately), so the cache is shared and guarded by a lock.
public final class DayCalendar: Sendable {
    private struct Cache {
        var starts: [String: [Int: Int64]] = [:]
        var startCount = 0
        var calendars: [String: Calendar] = [:]
    }

    private let cache = Mutex(Cache())
    /// Cached day starts, at most (a day start is 8 bytes; this bounds a long-running server).
    private static let maxStarts = 1 << 20

    public init() {}

    /// The validated zone for `name` (which was validated when its event was appended);
    /// UTC if it no longer resolves (a tz database that dropped a name).
    public func zone(named name: String) -> Zone {
        Zone.named(name) ?? .utc
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

    /// Whether `zone` skipped local day `day` (no time in it: Pacific/Apia's 2011-12-30).
    public func isSkipped(_ day: Int, in zone: Zone) -> Bool {
        let window = window(of: day, in: zone)
        return window.end <= window.start
    }

    /// The first day asked of Foundation's calendar for zones with rules: 1600-01-01. Before
    /// 1582 its Gregorian calendar is Julian, days apart from the proleptic days `day(of:)`
    /// counts, and no zone has rules before the 19th century (each keeps its local mean time).
    static let firstCalendarDay = CivilDate(year: 1600, month: 1, day: 1).daysSinceEpoch

    private func start(of day: Int, in zone: Zone) -> Int64 {
        if let fixed = zone.fixedOffset { return (Int64(day) * 86_400 - Int64(fixed)) * 1_000_000 }
        if day < DayCalendar.firstCalendarDay {
            // Midnight less the zone's offset then: its local mean time, one offset all along.
            let midnight = Int64(day) * 86_400
            return (midnight - Int64(zone.offset(at: Timestamp(seconds: midnight)))) * 1_000_000
        }
        let (known, cachedCalendar) = cache.withLock { ($0.starts[zone.name]?[day], $0.calendars[zone.name]) }
        if let known { return known }
        let calendar: Calendar
        if let cachedCalendar {
            calendar = cachedCalendar
        } else {
            var made = Calendar(identifier: .gregorian)
            made.timeZone = zone.timeZone
            cache.withLock { $0.calendars[zone.name] = made }
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
        cache.withLock { cache in
            if cache.startCount >= DayCalendar.maxStarts {
                cache.starts.removeAll()
                cache.startCount = 0
            }
            if cache.starts[zone.name, default: [:]].updateValue(value, forKey: day) == nil { cache.startCount += 1 }
        }
        return value
    }

    /// The local days `[start, end)` touches; a zero-length sample touches the day of its instant.
    public func days(from start: Int64, to end: Int64, in zone: Zone) -> Range<Int> {
        let first = day(of: start, in: zone)
        guard end > start else { return first..<(first + 1) }
        let last = day(of: end - 1, in: zone)
        return first..<(max(first, last) + 1)
    }
}
