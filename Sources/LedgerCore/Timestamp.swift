/// An instant, in whole microseconds since 1970-01-01T00:00:00Z.
///
/// Microseconds are the ledger's one time unit: HealthKit exports carry seconds, RFC 3339
/// input may carry more digits (they are truncated to microseconds), and an `Int64` of them
/// spans ±292,000 years without rounding error, so sums and comparisons are exact.
public struct Timestamp: Sendable, Hashable, Comparable, Codable {
    public var microseconds: Int64

    public init(microseconds: Int64) { self.microseconds = microseconds }

    public init(seconds: Int64) { self.microseconds = seconds * 1_000_000 }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.microseconds < rhs.microseconds
    }

    /// The instants an event may name: from 0000-01-02T00:00:00Z to 9999-12-31T00:00:00Z, a
    /// day inside the years RFC 3339 spells. Offsets stay within a day, so the day of such an
    /// instant in any zone is a date YYYY-MM-DD; an instant such as 9999-12-31T23:00:00-05:00
    /// (in the year 10000 once in UTC) made rows dated `10000-01-01` that no query could name.
    public static let eventRange = Timestamp(seconds: Int64(CivilDate(year: 0, month: 1, day: 2).daysSinceEpoch) * 86_400)
        ... Timestamp(seconds: Int64(CivilDate(year: 9999, month: 12, day: 31).daysSinceEpoch) * 86_400)

    /// Why `instant` may not be an event's `field` (quoted as `spelled` when given); nil when
    /// it lies in `eventRange`.
    public static func rangeProblem(_ instant: Timestamp, field: String, spelled: String? = nil) -> String? {
        guard !eventRange.contains(instant) else { return nil }
        return "'\(field)' is outside the instants an event may name\(spelled.map { ": '\($0)'" } ?? "") (from 0000-01-02T00:00:00Z to 9999-12-31T00:00:00Z, so that its day is a date in every zone)"
    }

    /// Why a timestamp string was refused.
    public enum ParseError: Error, Equatable, Sendable {
        /// Not of the RFC 3339 shape, e.g. no offset.
        case malformed
        /// The shape is right but the date or time does not exist (2026-02-30, 24:00).
        case impossible
    }

    /// Parses an RFC 3339 timestamp with an offset: `2026-11-29T08:00:00+08:00`,
    /// `2026-11-29T00:00:00.250Z`. Lower-case `t`/`z` are accepted as RFC 3339 allows.
    /// Returns the instant and the offset in seconds east of UTC.
    public static func parseRFC3339(_ text: String) throws(ParseError) -> (Timestamp, offset: Int) {
        return try text.withUTF8Bytes { bytes in
            Result { () throws(ParseError) in try parseRFC3339(utf8: bytes) }
        }.get()
    }

    /// `parseRFC3339` over the text's UTF-8 bytes (no copy of them is made).
    public static func parseRFC3339(utf8: UnsafeBufferPointer<UInt8>) throws(ParseError) -> (Timestamp, offset: Int) {
        if let parsed = parseWholeSeconds(utf8) { return parsed }
        if utf8.count < 20 { throw .malformed }
        func digits(_ from: Int, _ count: Int) throws(ParseError) -> Int {
            var value = 0
            for i in from..<(from + count) {
                guard i < utf8.count, utf8[i] >= 48, utf8[i] <= 57 else { throw .malformed }
                value = value * 10 + Int(utf8[i] - 48)
            }
            return value
        }
        func expect(_ index: Int, _ char: Unicode.Scalar, or other: Unicode.Scalar? = nil) throws(ParseError) {
            guard index < utf8.count,
                  utf8[index] == UInt8(ascii: char) || other.map({ utf8[index] == UInt8(ascii: $0) }) == true
            else { throw .malformed }
        }
        let year = try digits(0, 4)
        try expect(4, "-")
        let month = try digits(5, 2)
        try expect(7, "-")
        let day = try digits(8, 2)
        try expect(10, "T", or: "t")
        let hour = try digits(11, 2)
        try expect(13, ":")
        let minute = try digits(14, 2)
        try expect(16, ":")
        let second = try digits(17, 2)
        var index = 19
        var micros = 0
        if index < utf8.count, utf8[index] == UInt8(ascii: ".") {
            index += 1
            var count = 0
            while index < utf8.count, utf8[index] >= 48, utf8[index] <= 57 {
                if count < 6 { micros = micros * 10 + Int(utf8[index] - 48) }
                count += 1
                index += 1
            }
            if count == 0 { throw .malformed }
            for _ in min(count, 6)..<6 { micros *= 10 }
        }
        guard index < utf8.count else { throw .malformed }
        var offset = 0
        if utf8[index] == UInt8(ascii: "Z") || utf8[index] == UInt8(ascii: "z") {
            index += 1
        } else if utf8[index] == UInt8(ascii: "+") || utf8[index] == UInt8(ascii: "-") {
            let sign = utf8[index] == UInt8(ascii: "-") ? -1 : 1
            let offsetHours = try digits(index + 1, 2)
            try expect(index + 3, ":")
            let offsetMinutes = try digits(index + 4, 2)
            guard offsetHours <= 23, offsetMinutes <= 59 else { throw .impossible }
            offset = sign * (offsetHours * 3600 + offsetMinutes * 60)
            index += 6
        } else {
            throw .malformed
        }
        guard index == utf8.count else { throw .malformed }
        guard CivilDate.isValid(year: year, month: month, day: day),
              hour <= 23, minute <= 59, second <= 59
        else { throw .impossible }
        let days = CivilDate(year: year, month: month, day: day).daysSinceEpoch
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offset)
        return (Timestamp(microseconds: seconds * 1_000_000 + Int64(micros)), offset)
    }

    /// The instant of a date in whole seconds with `Z` or an offset (`2017-08-22T07:14:00Z`,
    /// `2017-08-22T07:14:00+02:00`): the form every imported and nearly every appended date
    /// has, read at fixed places without a loop per field (about a sixth of the general
    /// path's instructions; it was 4 % of an import's reading thread). Nil for anything else,
    /// valid or not, which the general path then reads and names the problem of.
    private static func parseWholeSeconds(_ utf8: UnsafeBufferPointer<UInt8>) -> (Timestamp, offset: Int)? {
        guard utf8.count == 20 || utf8.count == 25, let bytes = utf8.baseAddress else { return nil }
        @inline(__always) func digit(_ index: Int) -> Int? {
            let value = bytes[index] &- 48
            return value <= 9 ? Int(value) : nil
        }
        @inline(__always) func two(_ index: Int) -> Int? {
            guard let tens = digit(index), let ones = digit(index + 1) else { return nil }
            return tens * 10 + ones
        }
        guard bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] | 0x20 == UInt8(ascii: "t"),
              bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
              let century = two(0), let yearOfCentury = two(2), let month = two(5), let day = two(8),
              let hour = two(11), let minute = two(14), let second = two(17) else { return nil }
        var offset = 0
        if utf8.count == 20 {
            guard bytes[19] | 0x20 == UInt8(ascii: "z") else { return nil }
        } else {
            guard bytes[19] == UInt8(ascii: "+") || bytes[19] == UInt8(ascii: "-"), bytes[22] == UInt8(ascii: ":"),
                  let offsetHours = two(20), let offsetMinutes = two(23), offsetHours <= 23, offsetMinutes <= 59 else { return nil }
            offset = (bytes[19] == UInt8(ascii: "-") ? -1 : 1) * (offsetHours * 3600 + offsetMinutes * 60)
        }
        let year = century * 100 + yearOfCentury
        guard CivilDate.isValid(year: year, month: month, day: day), hour <= 23, minute <= 59, second <= 59 else { return nil }
        let days = CivilDate(year: year, month: month, day: day).daysSinceEpoch
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offset)
        return (Timestamp(microseconds: seconds * 1_000_000), offset)
    }

    /// RFC 3339 in UTC with microseconds: `2026-11-29T20:30:00.123456Z`.
    public var rfc3339: String {
        format(offsetSeconds: 0)
    }

    /// RFC 3339 at a fixed offset (seconds east of UTC), with microseconds only when non-zero.
    /// Written byte by byte into the string's own storage: made by interpolation, each took
    /// about 8,000 instructions, a tenth of a one-event append's (`last-known` rows carry two).
    public func format(offsetSeconds: Int, alwaysFraction: Bool = true) -> String {
        let local = microseconds + Int64(offsetSeconds) * 1_000_000
        let (secondsTotal, micros) = local.floorDivided(by: 1_000_000)
        let (days, secondOfDay) = secondsTotal.floorDivided(by: 86_400)
        let date = CivilDate(daysSinceEpoch: Int(days))
        let hour = Int(secondOfDay / 3600), minute = Int(secondOfDay / 60 % 60), second = Int(secondOfDay % 60)
        return String(unsafeUninitializedCapacity: PaddedText.timestampCapacity) { out in
            var text = PaddedText(out)
            date.write(to: &text)
            text.byte(UInt8(ascii: "T"))
            text.padded(hour, 2)
            text.byte(UInt8(ascii: ":"))
            text.padded(minute, 2)
            text.byte(UInt8(ascii: ":"))
            text.padded(second, 2)
            if alwaysFraction || micros != 0 {
                text.byte(UInt8(ascii: "."))
                text.padded(Int(micros), 6)
            }
            if offsetSeconds == 0 {
                text.byte(UInt8(ascii: "Z"))
            } else {
                text.byte(offsetSeconds < 0 ? UInt8(ascii: "-") : UInt8(ascii: "+"))
                let magnitude = offsetSeconds.magnitude
                text.padded(magnitude / 3600, 2)
                text.byte(UInt8(ascii: ":"))
                text.padded(magnitude / 60 % 60, 2)
            }
            return text.count
        }
    }
}

/// ASCII written into a buffer of known size: what `Timestamp.format` and
/// `CivilDate.description` make their strings in.
struct PaddedText {
    /// Room for any date: a year, month and day of at most 20 characters each (an `Int`'s
    /// digits and sign) and two dashes.
    static let dateCapacity = 64
    /// Room for any timestamp: its date, the time of day, six digits of fraction and an
    /// offset whose hours may be any `Int`'s.
    static let timestampCapacity = dateCapacity + 64

    private let out: UnsafeMutableBufferPointer<UInt8>
    private(set) var count = 0

    init(_ out: UnsafeMutableBufferPointer<UInt8>) { self.out = out }

    mutating func byte(_ value: UInt8) {
        out[count] = value
        count += 1
    }

    /// The characters `String(value)` has, after zeros up to `width` characters in all: the
    /// zeros come before a minus sign (`-5` to width 4 is `00-5`), as they always have.
    mutating func padded(_ value: some BinaryInteger, _ width: Int) {
        var magnitude = UInt64(value.magnitude)
        var digits = 1
        var rest = magnitude / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        let length = digits + (value < 0 ? 1 : 0)
        for _ in length..<max(length, width) { byte(UInt8(ascii: "0")) }
        if value < 0 { byte(UInt8(ascii: "-")) }
        var position = count + digits
        count = position
        repeat {
            position -= 1
            out[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
    }
}

extension Int64 {
    /// Division rounding toward negative infinity, with a remainder in `0..<divisor`.
    public func floorDivided(by divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        var quotient = self / divisor
        var remainder = self % divisor
        if remainder < 0 {
            quotient -= 1
            remainder += divisor
        }
        return (quotient, remainder)
    }
}

/// A proleptic Gregorian calendar date, independent of any zone.
public struct CivilDate: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int

    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    public static func isValid(year: Int, month: Int, day: Int) -> Bool {
        guard (1...12).contains(month), day >= 1 else { return false }
        return day <= daysIn(year: year, month: month)
    }

    public static func daysIn(year: Int, month: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Parses `YYYY-MM-DD`, refusing dates that do not exist.
    public init?(parsing text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]),
              parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
              CivilDate.isValid(year: year, month: month, day: day)
        else { return nil }
        self.init(year: year, month: month, day: day)
    }

    /// Days since 1970-01-01 (Howard Hinnant's `days_from_civil`).
    public var daysSinceEpoch: Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The date `days` after 1970-01-01 (Hinnant's `civil_from_days`).
    public init(daysSinceEpoch days: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        self.init(year: yoe + era * 400 + (month <= 2 ? 1 : 0), month: month, day: day)
    }

    public func adding(days: Int) -> CivilDate {
        CivilDate(daysSinceEpoch: daysSinceEpoch + days)
    }

    public static func < (lhs: CivilDate, rhs: CivilDate) -> Bool {
        lhs.daysSinceEpoch < rhs.daysSinceEpoch
    }

    /// `YYYY-MM-DD`, each field's digits padded with zeros in front (written into the string's
    /// storage: by interpolation, each took about 2,700 instructions).
    public var description: String {
        String(unsafeUninitializedCapacity: PaddedText.dateCapacity) { out in
            var text = PaddedText(out)
            write(to: &text)
            return text.count
        }
    }

    func write(to text: inout PaddedText) {
        text.padded(year, 4)
        text.byte(UInt8(ascii: "-"))
        text.padded(month, 2)
        text.byte(UInt8(ascii: "-"))
        text.padded(day, 2)
    }
}
