import Foundation
import Testing
@testable import LedgerCore

/// 2026-11-29T00:00:00Z in seconds since the epoch.
private let nov29UTC: Int64 = 1_795_910_400

private func parse(_ text: String) throws(Timestamp.ParseError) -> (Timestamp, offset: Int) {
    try Timestamp.parseRFC3339(text)
}

private func parseError(_ text: String) -> Timestamp.ParseError? {
    do {
        _ = try Timestamp.parseRFC3339(text)
        return nil
    } catch {
        return error
    }
}

@Suite("Timestamp: RFC 3339 parsing")
struct TimestampParsingTests {
    /// Dates of 20 and 25 bytes (whole seconds, `Z` or an offset) are read at fixed places
    /// (`parseWholeSeconds`); the same date with a fraction of `.0` goes the general way. Both
    /// must give the same instant and offset, or the same error, for dates valid and not:
    /// random digits in every field (month 13, 30 February, hour 24, offset +24:00), and a
    /// byte of each changed at random.
    @Test("whole-second dates read at fixed places agree with the general parser (seeded)")
    func wholeSecondsAgree() throws {
        var random = SplitMix64(seed: 3339)
        func digits(_ range: ClosedRange<Int>, width: Int) -> String {
            let text = String(Int.random(in: range, using: &random))
            return String(repeating: "0", count: width - text.count) + text
        }
        for round in 0..<20_000 {
            var date = digits(1...9999, width: 4) + "-" + digits(0...13, width: 2) + "-" + digits(0...32, width: 2)
                + (Bool.random(using: &random) ? "T" : "t")
                + digits(0...24, width: 2) + ":" + digits(0...60, width: 2) + ":" + digits(0...60, width: 2)
            switch Int.random(in: 0..<3, using: &random) {
            case 0: date += Bool.random(using: &random) ? "Z" : "z"
            default: date += (Bool.random(using: &random) ? "+" : "-") + digits(0...24, width: 2) + ":" + digits(0...60, width: 2)
            }
            var bytes = Array(date.utf8)
            if round % 3 == 0 {
                bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...127, using: &random)
            }
            let text = String(decoding: bytes, as: UTF8.self)
            let general = String(decoding: bytes[..<19] + Array(".0".utf8) + bytes[19...], as: UTF8.self)
            switch (Result { () throws(Timestamp.ParseError) in try parse(text) }, Result { () throws(Timestamp.ParseError) in try parse(general) }) {
            case (.success(let a), .success(let b)):
                #expect(a.0 == b.0 && a.offset == b.offset, "\(text) vs \(general)")
            case (.failure(let a), .failure(let b)):
                #expect(a == b, "\(text): \(a) vs \(general): \(b)")
            case (let a, let b):
                Issue.record("\(text): \(a) vs \(general): \(b)")
            }
        }
    }

    @Test("an offset fixes the instant and is returned in seconds east of UTC")
    func offsets() throws {
        let (plus8, offset8) = try parse("2026-11-29T08:00:00+08:00")
        #expect(plus8 == Timestamp(seconds: nov29UTC))
        #expect(offset8 == 28_800)

        let (zulu, offsetZ) = try parse("2026-11-29T00:00:00Z")
        #expect(zulu == plus8)
        #expect(offsetZ == 0)

        let (minus, offsetMinus) = try parse("2026-11-28T18:30:00-05:30")
        #expect(minus == plus8)
        #expect(offsetMinus == -19_800)

        let (zeroOffset, offsetZero) = try parse("2026-11-29T00:00:00+00:00")
        #expect(zeroOffset == plus8)
        #expect(offsetZero == 0)
    }

    @Test("lower-case 't' and 'z' are accepted")
    func lowerCase() throws {
        #expect(try parse("2026-11-29t00:00:00z").0 == Timestamp(seconds: nov29UTC))
        #expect(try parse("2026-11-29t08:00:00+08:00").0 == Timestamp(seconds: nov29UTC))
    }

    @Test("fractional seconds are kept to the microsecond and truncated beyond", arguments: [
        ("2026-11-29T00:00:00.5Z", 500_000),
        ("2026-11-29T00:00:00.25Z", 250_000),
        ("2026-11-29T00:00:00.123456Z", 123_456),
        ("2026-11-29T00:00:00.1234567Z", 123_456),
        ("2026-11-29T00:00:00.1234569999999Z", 123_456),
        ("2026-11-29T00:00:00.000001Z", 1),
        ("2026-11-29T00:00:00.0000009Z", 0),
        ("2026-11-29T08:00:00.999999999+08:00", 999_999),
    ])
    func fraction(text: String, micros: Int64) throws {
        let (instant, _) = try parse(text)
        #expect(instant.microseconds == nov29UTC * 1_000_000 + micros)
    }

    @Test("instants before 1970 are negative and exact")
    func beforeEpoch() throws {
        #expect(try parse("1970-01-01T00:00:00Z").0.microseconds == 0)
        #expect(try parse("1969-12-31T23:59:59Z").0.microseconds == -1_000_000)
        #expect(try parse("1969-12-31T23:59:59.5Z").0.microseconds == -500_000)
        #expect(try parse("0001-01-01T00:00:00Z").0.microseconds == -62_135_596_800 * 1_000_000)
    }

    @Test("leap days exist only in leap years")
    func leapDays() throws {
        #expect(try parse("2024-02-29T12:00:00Z").0 == Timestamp(seconds: Int64(19_782) * 86_400 + 43_200))
        #expect(try parse("2000-02-29T00:00:00Z").1 == 0)
        #expect(parseError("2025-02-29T12:00:00Z") == .impossible)
        #expect(parseError("1900-02-29T12:00:00Z") == .impossible)
    }

    @Test("dates and times that do not exist are 'impossible'", arguments: [
        "2026-02-30T00:00:00Z",
        "2025-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-00-10T00:00:00Z",
        "2026-01-00T00:00:00Z",
        "2026-11-29T25:00:00Z",
        "2026-11-29T24:00:00Z",
        "2026-11-29T23:60:00Z",
        "2026-11-29T23:59:60Z",
        "2026-11-29T08:00:00+24:00",
        "2026-11-29T08:00:00+08:60",
    ])
    func impossible(text: String) {
        #expect(parseError(text) == .impossible, "\(text)")
    }

    @Test("text not of the RFC 3339 shape is 'malformed'", arguments: [
        "",
        "2026-11-29",
        "2026-11-29T08:00:00",
        "2026-11-29T08:00:00.250",
        "2026-11-29 08:00:00Z",
        "2026-11-29T08:00Z",
        "2026-11-29T8:00:00Z",
        "26-11-29T08:00:00Z",
        "2026/11/29T08:00:00Z",
        "2026-11-29T08:00:00.Z",
        "2026-11-29T08:00:00+0800",
        "2026-11-29T08:00:00+08",
        "2026-11-29T08:00:00+8:00",
        "2026-11-29T08:00:00 Z",
        "2026-11-29T08:00:00Z ",
        " 2026-11-29T08:00:00Z",
        "2026-11-29T08:00:00ZZ",
        "2026-11-29T08:00:00+08:00Z",
        "2026-11-29T08:00:00UTC",
        "2026-1a-29T08:00:00Z",
        "２０２６-11-29T08:00:00Z",
        "1795910400",
    ])
    func malformed(text: String) {
        #expect(parseError(text) == .malformed, "\(text)")
    }
}

@Suite("Timestamp: formatting")
struct TimestampFormattingTests {
    @Test("rfc3339 is UTC with six fraction digits")
    func utc() {
        #expect(Timestamp(seconds: nov29UTC).rfc3339 == "2026-11-29T00:00:00.000000Z")
        #expect(Timestamp(microseconds: nov29UTC * 1_000_000 + 123_456).rfc3339 == "2026-11-29T00:00:00.123456Z")
        #expect(Timestamp(microseconds: -1).rfc3339 == "1969-12-31T23:59:59.999999Z")
        #expect(Timestamp(microseconds: 0).rfc3339 == "1970-01-01T00:00:00.000000Z")
    }

    @Test("format at an offset shows local time and the offset")
    func atOffset() {
        let instant = Timestamp(seconds: nov29UTC)
        #expect(instant.format(offsetSeconds: 28_800, alwaysFraction: false) == "2026-11-29T08:00:00+08:00")
        #expect(instant.format(offsetSeconds: -19_800, alwaysFraction: false) == "2026-11-28T18:30:00-05:30")
        #expect(instant.format(offsetSeconds: 0, alwaysFraction: false) == "2026-11-29T00:00:00Z")
        #expect(instant.format(offsetSeconds: 3_600) == "2026-11-29T01:00:00.000000+01:00")
        let fractional = Timestamp(microseconds: nov29UTC * 1_000_000 + 250_000)
        #expect(fractional.format(offsetSeconds: 0, alwaysFraction: false) == "2026-11-29T00:00:00.250000Z")
    }

    @Test("format then parse gives back the instant and offset (seeded)")
    func roundTrip() throws {
        let seed: UInt64 = 0x5EED_7135
        var generator = SeededGenerator(seed: seed)
        // 0001-01-01 ... 9999-12-31, the years RFC 3339 can write.
        let range: ClosedRange<Int64> = -62_135_596_800_000_000...253_402_300_799_999_999
        let offsets = [0, 3_600, -3_600, 19_800, -34_200, 50_400, -43_200, 45_900]
        for _ in 0..<2_000 {
            let instant = Timestamp(microseconds: Int64.random(in: range, using: &generator))
            let offset = offsets[Int.random(in: 0..<offsets.count, using: &generator)]
            // Keep the local date within 0001...9999 too.
            let local = instant.microseconds + Int64(offset) * 1_000_000
            guard range.contains(local) else { continue }
            let text = instant.format(offsetSeconds: offset, alwaysFraction: Bool.random(using: &generator))
            let parsed = try #require(try? Timestamp.parseRFC3339(text), "seed \(seed): \(text)")
            #expect(parsed.0 == instant, "seed \(seed): \(text)")
            #expect(parsed.offset == offset, "seed \(seed): \(text)")
            #expect((try? Timestamp.parseRFC3339(instant.rfc3339))?.0 == instant, "seed \(seed): \(instant.rfc3339)")
        }
    }

    /// `format` and `CivilDate.description` write their bytes themselves; they were made by
    /// string interpolation, which this test keeps as the reference: the same text for any
    /// instant an `Int64` of microseconds holds, any offset, either fraction rule, and dates
    /// with fields of any sign and size (zeros go before a minus sign, as they always have).
    @Test("formatting writes what the interpolated formatting wrote (seeded)")
    func sameAsInterpolation() {
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
        }
        func reference(_ date: CivilDate) -> String { "\(pad(date.year, 4))-\(pad(date.month, 2))-\(pad(date.day, 2))" }
        func reference(_ instant: Timestamp, offsetSeconds: Int, alwaysFraction: Bool) -> String {
            let local = instant.microseconds + Int64(offsetSeconds) * 1_000_000
            let (secondsTotal, micros) = local.floorDivided(by: 1_000_000)
            let (days, secondOfDay) = secondsTotal.floorDivided(by: 86_400)
            let date = CivilDate(daysSinceEpoch: Int(days))
            let hour = Int(secondOfDay / 3600), minute = Int(secondOfDay / 60 % 60), second = Int(secondOfDay % 60)
            var text = "\(reference(date))T\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2))"
            if alwaysFraction || micros != 0 { text += "." + pad(Int(micros), 6) }
            if offsetSeconds == 0 {
                text += "Z"
            } else {
                let magnitude = abs(offsetSeconds)
                text += "\(offsetSeconds < 0 ? "-" : "+")\(pad(magnitude / 3600, 2)):\(pad(magnitude / 60 % 60, 2))"
            }
            return text
        }
        var generator = SeededGenerator(seed: 0xF0_4A7)
        // Offsets of every size a zone has and more; the instant is kept where adding the
        // offset's microseconds cannot overflow.
        let offsets = [0, 1, -1, 59, 3_600, -3_600, 19_800, -34_200, 50_400, -43_200, 45_900, 86_399, -86_401, 1_000_000, -99_999_999]
        let edge: [Int64] = [0, -1, 1, 999_999, -1_000_000, 86_399_999_999, -86_400_000_001]
        for round in 0..<30_000 {
            let micros = round < edge.count ? edge[round]
                : Int64.random(in: (Int64.min / 2)...(Int64.max / 2), using: &generator) >> UInt64.random(in: 0...40, using: &generator)
            let instant = Timestamp(microseconds: micros)
            let offset = offsets[Int.random(in: 0..<offsets.count, using: &generator)]
            let always = Bool.random(using: &generator)
            #expect(instant.format(offsetSeconds: offset, alwaysFraction: always)
                    == reference(instant, offsetSeconds: offset, alwaysFraction: always), "\(micros) \(offset) \(always)")
            let date = CivilDate(year: Int.random(in: -99_999...99_999, using: &generator),
                                 month: Int.random(in: -20...20, using: &generator), day: Int.random(in: -40...40, using: &generator))
            #expect(date.description == reference(date), "\(date.year) \(date.month) \(date.day)")
        }
        for date in [CivilDate(year: .min, month: .min, day: .min), CivilDate(year: .max, month: .max, day: .max),
                     CivilDate(year: -5, month: 0, day: -1), CivilDate(year: 0, month: 1, day: 1)] {
            #expect(date.description == reference(date), "\(date.year) \(date.month) \(date.day)")
        }
    }

    @Test("timestamps order by instant and survive Codable")
    func comparableAndCodable() throws {
        let early = Timestamp(microseconds: -5)
        let late = Timestamp(seconds: 1)
        #expect(early < late)
        #expect(!(late < early))
        #expect(late.microseconds == 1_000_000)
        let data = try JSONEncoder().encode([early, late])
        #expect(try JSONDecoder().decode([Timestamp].self, from: data) == [early, late])
    }
}

@Suite("CivilDate")
struct CivilDateTests {
    @Test("known days since 1970-01-01", arguments: [
        (CivilDate(year: 1970, month: 1, day: 1), 0),
        (CivilDate(year: 1969, month: 12, day: 31), -1),
        (CivilDate(year: 2000, month: 1, day: 1), 10_957),
        (CivilDate(year: 2000, month: 3, day: 1), 11_017),
        (CivilDate(year: 2024, month: 2, day: 29), 19_782),
        (CivilDate(year: 2026, month: 11, day: 29), 20_786),
        (CivilDate(year: 1900, month: 1, day: 1), -25_567),
        (CivilDate(year: 1600, month: 3, day: 1), -135_080),
        (CivilDate(year: 1, month: 1, day: 1), -719_162),
        (CivilDate(year: 9999, month: 12, day: 31), 2_932_896),
    ])
    func knownDays(date: CivilDate, days: Int) {
        #expect(date.daysSinceEpoch == days)
        #expect(CivilDate(daysSinceEpoch: days) == date)
    }

    @Test("days-from-civil and civil-from-days agree with a day-by-day calendar walk")
    func dayByDayWalk() {
        // Walk 1599-01-01 ... 2401-12-31 one day at a time with the month lengths, which checks
        // every month end, every leap rule (1600, 1700, 1900, 2000, 2100, 2400) and both directions.
        var date = CivilDate(year: 1599, month: 1, day: 1)
        var days = date.daysSinceEpoch
        var failures = 0
        while date.year <= 2401 {
            let back = CivilDate(daysSinceEpoch: days)
            if back != date || date.daysSinceEpoch != days {
                failures += 1
                if failures <= 5 { Issue.record("\(date) ↔ \(days) gave \(back) / \(date.daysSinceEpoch)") }
            }
            // Next calendar day, computed without the functions under test.
            if date.day < CivilDate.daysIn(year: date.year, month: date.month) {
                date.day += 1
            } else if date.month < 12 {
                date = CivilDate(year: date.year, month: date.month + 1, day: 1)
            } else {
                date = CivilDate(year: date.year + 1, month: 1, day: 1)
            }
            days += 1
        }
        #expect(failures == 0)
        #expect(days == CivilDate(year: 2402, month: 1, day: 1).daysSinceEpoch)
    }

    @Test("civil-from-days round trips over a wide range, including negative years (seeded)")
    func wideRoundTrip() {
        let seed: UInt64 = 0xC1F1_1DA7
        var generator = SeededGenerator(seed: seed)
        for _ in 0..<20_000 {
            let days = Int.random(in: -3_000_000...3_000_000, using: &generator)
            let date = CivilDate(daysSinceEpoch: days)
            #expect(date.daysSinceEpoch == days, "seed \(seed): \(days)")
            #expect(CivilDate.isValid(year: date.year, month: date.month, day: date.day), "seed \(seed): \(days)")
        }
    }

    @Test("adding days and ordering")
    func addingAndOrdering() {
        let leap = CivilDate(year: 2024, month: 2, day: 28)
        #expect(leap.adding(days: 1) == CivilDate(year: 2024, month: 2, day: 29))
        #expect(leap.adding(days: 2) == CivilDate(year: 2024, month: 3, day: 1))
        #expect(CivilDate(year: 2025, month: 2, day: 28).adding(days: 1) == CivilDate(year: 2025, month: 3, day: 1))
        #expect(CivilDate(year: 2026, month: 12, day: 31).adding(days: 1) == CivilDate(year: 2027, month: 1, day: 1))
        #expect(CivilDate(year: 2026, month: 1, day: 1).adding(days: -1) == CivilDate(year: 2025, month: 12, day: 31))
        #expect(CivilDate(year: 2025, month: 12, day: 31) < CivilDate(year: 2026, month: 1, day: 1))
        #expect(!(CivilDate(year: 2026, month: 1, day: 1) < CivilDate(year: 2026, month: 1, day: 1)))
    }

    @Test("month lengths and validity")
    func validity() {
        #expect(CivilDate.daysIn(year: 2024, month: 2) == 29)
        #expect(CivilDate.daysIn(year: 2025, month: 2) == 28)
        #expect(CivilDate.daysIn(year: 1900, month: 2) == 28)
        #expect(CivilDate.daysIn(year: 2000, month: 2) == 29)
        #expect(CivilDate.daysIn(year: 2026, month: 4) == 30)
        #expect(CivilDate.daysIn(year: 2026, month: 12) == 31)
        #expect(CivilDate.isValid(year: 2026, month: 2, day: 28))
        #expect(!CivilDate.isValid(year: 2026, month: 2, day: 30))
        #expect(!CivilDate.isValid(year: 2026, month: 13, day: 1))
        #expect(!CivilDate.isValid(year: 2026, month: 0, day: 1))
        #expect(!CivilDate.isValid(year: 2026, month: 1, day: 0))
        #expect(!CivilDate.isValid(year: 2026, month: 1, day: -1))
    }

    @Test("description is zero-padded YYYY-MM-DD")
    func description() {
        #expect(CivilDate(year: 2026, month: 3, day: 7).description == "2026-03-07")
        #expect(CivilDate(year: 33, month: 12, day: 31).description == "0033-12-31")
    }

    @Test("parses YYYY-MM-DD", arguments: [
        ("2026-11-29", CivilDate(year: 2026, month: 11, day: 29)),
        ("2024-02-29", CivilDate(year: 2024, month: 2, day: 29)),
        ("2000-02-29", CivilDate(year: 2000, month: 2, day: 29)),
        ("0001-01-01", CivilDate(year: 1, month: 1, day: 1)),
        ("9999-12-31", CivilDate(year: 9999, month: 12, day: 31)),
    ])
    func parses(text: String, date: CivilDate) {
        #expect(CivilDate(parsing: text) == date)
        #expect(CivilDate(parsing: text)?.description == text)
    }

    @Test("refuses dates that are malformed or do not exist", arguments: [
        "", "2026", "2026-11", "2026-11-29T00:00:00Z", "2026-11-29 ", " 2026-11-29",
        "2026-1-29", "2026-11-9", "26-11-29", "02026-11-29", "2026/11/29", "2026-11-29-01",
        "2026--11-29", "+026-11-29", "2026-+1-29", "2026-1a-29", "２０２６-11-29", "2026-١١-29",
        "2026-02-30", "2025-02-29", "1900-02-29", "2026-04-31", "2026-13-01", "2026-00-10", "2026-01-00",
    ])
    func refuses(text: String) {
        #expect(CivilDate(parsing: text) == nil, "\(text)")
    }
}
