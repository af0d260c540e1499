import Foundation
import LedgerCore
import Projections
import Testing

// Scenario tests for the projections (SPEC §4). Every expected value is worked out by hand from
// the rules, with the arithmetic in a comment next to it, never copied from the fold's output.
// Where the fold disagrees with SPEC §4, the correct expectation stays and is wrapped in
// `withKnownIssue`, naming the problem.
//
// Times: UTC instants are written in the events (with "Z"); comments give the local times.
// The harness records event `seq` N at 2026-01-01T00:00:00Z + N seconds.

@Suite("Projection scenarios")
struct ScenarioTests {

    // MARK: 1. Overlapping sources

    /// Foundation's Gregorian calendar is Julian before 1582: a day's window asked of it lay
    /// days away from the day `day(of:)` put the sample on, and the sample was in no row.
    @Test("a sample of the year 1000 in a zone with rules counts on its day")
    func distantPastInRuledZone() throws {
        let h = FoldHarness(defaultZone: "Europe/London")
        try h.append(sample(1, value: 100, from: "1000-06-01T12:00:00Z", to: "1000-06-01T12:10:00Z"))
        // Tokyo's local mean time, +09:18:59: 20:00Z is 05:18:59 the next day.
        try h.append(sample(2, user: "kenji", value: 7, from: "1000-06-01T20:00:00Z", to: "1000-06-01T20:10:00Z", zone: "Asia/Tokyo"))
        let rows = try h.rows(.daily).map { ($0.values["user"]!.stringValue!, $0.values["date"]!.stringValue!, $0.values["value"]!.numberValue!) }
        #expect(rows.count == 2)
        #expect(rows.contains { $0 == ("ann", "1000-06-01", 100) })
        #expect(rows.contains { $0 == ("kenji", "1000-06-02", 7) })
    }

    /// Microseconds past 2^53 do not fit a Double: the instant a microsecond before Havana's
    /// midnight change in 3000 was taken for the change itself.
    @Test("a sample ending a microsecond before a far-future midnight change counts")
    func farFutureMidnightChange() throws {
        let h = FoldHarness(defaultZone: "America/Havana")
        try h.append(sample(1, value: 100, from: "3000-03-09T04:59:59.999999Z", to: "3000-03-09T05:00:00Z"))
        let rows = try h.rows(.daily)
        #expect(rows.count == 1)
        #expect(rows.first?.values["value"]?.numberValue == 100)
    }

    @Test("user names that are canonically equivalent but spelled differently stay two users")
    func lookAlikeUsers() throws {
        // "Kelvin" with an ASCII K and with the Kelvin sign U+212A: Swift's String equality
        // calls them equal, the log and the state store (bytes) do not, and neither may the fold.
        let h = FoldHarness(defaultZone: "UTC")
        try h.append(
            sample(1, user: "Kelvin", value: 100, from: "2026-11-29T08:00:00Z", to: "2026-11-29T08:10:00Z"),
            sample(2, user: "\u{212A}elvin", value: 7, from: "2026-11-29T09:00:00Z", to: "2026-11-29T09:10:00Z"))
        let rows = try h.rows(.daily).map { (Array($0.values["user"]!.stringValue!.utf8), $0.values["value"]!.numberValue!) }
        #expect(rows.count == 2)
        #expect(rows.contains { $0.0 == Array("Kelvin".utf8) && $0.1 == 100 })
        #expect(rows.contains { $0.0 == Array("\u{212A}elvin".utf8) && $0.1 == 7 })
    }

    @Test("source names that are canonically equivalent but spelled differently stay two sources")
    func lookAlikeSources() throws {
        // "Café" with a precomposed é and with e + combining acute: Swift's String equality
        // calls them equal; the log keeps both spellings, and so must the projections.
        let h = FoldHarness(defaultZone: "UTC")
        try h.append(
            sample(1, value: 100, from: "2026-11-29T08:00:00Z", to: "2026-11-29T08:10:00Z", source: "Caf\u{E9}"),
            sample(2, value: 40, from: "2026-11-29T09:00:00Z", to: "2026-11-29T09:10:00Z", source: "Cafe\u{301}"))
        let rows = try h.rows(.perSource).map { (Array($0.values["source"]!.stringValue!.utf8), $0.values["value"]!.numberValue!) }
        #expect(rows.count == 2)
        #expect(rows.contains { $0.0 == Array("Caf\u{E9}".utf8) && $0.1 == 100 })
        #expect(rows.contains { $0.0 == Array("Cafe\u{301}".utf8) && $0.1 == 40 })
        // Two sources, no overlap: daily sums both.
        let day = try #require(try dailyRow(h, "ann", "2026-11-29"))
        #expect(day.number("value") == 140)
        #expect(day.number("sources") == 2)

        // Across batches: one spelling's sample retracted, the other's added with the same
        // value. The per-source row must change its name (and say so), as one batch would.
        let k = FoldHarness(defaultZone: "UTC")
        try k.append(sample(1, value: 5, from: "2026-11-29T08:00:00Z", to: "2026-11-29T08:10:00Z", source: "Caf\u{E9}"))
        try k.append(retract(1), sample(2, value: 5, from: "2026-11-29T08:00:00Z", to: "2026-11-29T08:10:00Z", source: "Cafe\u{301}"))
        let names = try k.rows(.perSource).map { Array($0.values["source"]!.stringValue!.utf8) }
        #expect(names == [Array("Cafe\u{301}".utf8)])
        #expect(k.changes.contains { $0.projection == .perSource && $0.seq == 3 })
    }

    @Test("a priority list may name both spellings of a source; each is ranked by its own bytes")
    func priorityBySpelling() throws {
        let h = FoldHarness(defaultZone: "UTC")
        try h.append(
            #"{"kind":"profile","user":"ann","priority":{"steps":["Cafe\u0301","Caf\u00e9"]}}"#,
            sample(1, value: 100, from: "2026-11-29T08:00:00Z", to: "2026-11-29T08:10:00Z", source: "Caf\u{E9}"),
            sample(2, value: 40, from: "2026-11-29T08:00:00Z", to: "2026-11-29T08:10:00Z", source: "Cafe\u{301}"))
        // The decomposed spelling is listed first, so it wins the shared ten minutes.
        let day = try #require(try dailyRow(h, "ann", "2026-11-29"))
        #expect(day.number("value") == 40)
    }

    @Test("a fold that builds no changes (a replay's) leaves exactly the same state")
    func foldWithoutChanges() throws {
        let batches: [[String]] = [
            [#"{"kind":"profile","user":"ann","priority":{"steps":["Watch","iPhone"]}}"#,
             sample(1, value: 600, from: "2026-11-29T08:00:00Z", to: "2026-11-29T08:10:00Z", source: "iPhone"),
             sample(2, value: 500, from: "2026-11-29T08:05:00Z", to: "2026-11-29T08:15:00Z", source: "Watch")],
            [sample(3, value: 90, from: "2026-11-29T23:50:00Z", to: "2026-11-30T00:10:00Z", source: "iPhone"),
             #"{"kind":"grant","user":"ann","client":"coach","read":["steps"]}"#],
            [retract(2), amend(1, #""value":700"#),
             #"{"kind":"profile","user":"ann","zone":"Europe/Paris"}"#,
             #"{"kind":"revoke","user":"ann","client":"coach","read":["steps"]}"#],
        ]
        let full = FoldHarness(defaultZone: "UTC")
        let quiet = FoldHarness(defaultZone: "UTC", emitsChanges: false)
        for batch in batches {
            try full.append(batch)
            try quiet.append(batch)
        }
        #expect(full.changes.count > 5)
        #expect(quiet.changes.isEmpty)
        for table in StateTable.allCases {
            #expect(full.store.entries(table) == quiet.store.entries(table), "\(table)")
        }
    }

    @Test("an iPhone and a Watch walking together are merged, not double-counted")
    func iPhoneAndWatchTogether() throws {
        let h = FoldHarness(defaultZone: "UTC")
        try h.append(
            #"{"kind":"profile","user":"ann","priority":{"steps":["Watch","iPhone"]}}"#,
            sample(1, value: 600, from: "2026-11-29T08:00:00Z", to: "2026-11-29T08:10:00Z", source: "iPhone"),
            sample(2, value: 600, from: "2026-11-29T08:10:00Z", to: "2026-11-29T08:20:00Z", source: "iPhone"),
            sample(3, value: 500, from: "2026-11-29T08:05:00Z", to: "2026-11-29T08:15:00Z", source: "Watch"),
            sample(4, value: 500, from: "2026-11-29T08:15:00Z", to: "2026-11-29T08:25:00Z", source: "Watch"))

        // The Watch (listed first) covers [08:05, 08:25) and wins all of it: 500 + 500 = 1000.
        // iPhone #1 wins only [08:00, 08:05): 600 × 5/10 = 300. iPhone #2 [08:10, 08:20) lies
        // wholly under the Watch: 0, so it does not contribute.
        // daily = 1000 + 300 = 1300, from 3 samples (iPhone #1, Watch #3, #4) of 2 sources.
        let day = try #require(try dailyRow(h, "ann", "2026-11-29"))
        #expect(day.number("value") == 1300)
        #expect(day.number("samples") == 3)
        #expect(day.number("sources") == 2)
        #expect(day.string("unit") == "count")

        // per-source: iPhone 600 + 600 = 1200 (2 samples); Watch 500 + 500 = 1000 (2 samples).
        // Their sum, 2200, exceeds daily by 900: the double counting daily removes.
        #expect(try perSource(h, user: "ann") == [
            "ann 2026-11-29 Watch": Part(value: 1000, samples: 2),
            "ann 2026-11-29 iPhone": Part(value: 1200, samples: 2),
        ])

        // Overlapping samples of one source are summed, and each loses its own covered part.
        try h.append(
            #"{"kind":"profile","user":"cat","priority":{"steps":["Watch","iPhone"]}}"#,
            sample(5, user: "cat", value: 400, from: "2026-11-29T08:00:00Z", to: "2026-11-29T08:20:00Z", source: "iPhone"),
            sample(6, user: "cat", value: 200, from: "2026-11-29T08:10:00Z", to: "2026-11-29T08:30:00Z", source: "iPhone"),
            sample(7, user: "cat", value: 300, from: "2026-11-29T08:15:00Z", to: "2026-11-29T08:30:00Z", source: "Watch"))
        // Watch wins [08:15, 08:30): 300. iPhone #5 keeps [08:00, 08:15): 400 × 15/20 = 300.
        // iPhone #6 keeps [08:10, 08:15), overlapping #5 (same source, so both count): 200 × 5/20 = 50.
        // 300 + 300 + 50 = 650, from 3 samples of 2 sources.
        let cat = try #require(try dailyRow(h, "cat", "2026-11-29"))
        #expect(cat.number("value") == 650)
        #expect(cat.number("samples") == 3)
        #expect(cat.number("sources") == 2)
    }

    @Test("sources merge over real time even when their samples carry different zones")
    func mergeAcrossZones() throws {
        let h = FoldHarness(defaultZone: "UTC")
        // ann lives in New York; her iPhone stamps its samples with the zone it is in (Paris, on a
        // trip), her Watch stamps none. Both record the same hour, [11-29T23:00Z, 11-30T00:00Z).
        try h.append(
            #"{"kind":"profile","user":"ann","zone":"America/New_York","priority":{"steps":["Watch","iPhone"]}}"#,
            sample(1, value: 500, from: "2026-11-29T23:00:00Z", to: "2026-11-30T00:00:00Z", source: "Watch"),  // 18:00 EST 11-29
            sample(2, value: 600, from: "2026-11-29T23:00:00Z", to: "2026-11-30T00:00:00Z", source: "iPhone",
                   zone: "Europe/Paris"))                                                                 // 00:00 CET 11-30
        // per-source keeps each on its own local day.
        #expect(try perSource(h) == [
            "ann 2026-11-29 Watch": Part(value: 500, samples: 1),
            "ann 2026-11-30 iPhone": Part(value: 600, samples: 1),
        ])
        // The Watch covers the whole hour and outranks the iPhone, so only its 500 counts, on its day
        // (11-29 in New York); the iPhone wins no time, so 11-30 has no row at all (not one of 0
        // with 0 samples, which `--fallback` would take for a fresh day).
        let daily = try h.daily()
        #expect(daily["ann 2026-11-29"] == 500)
        #expect(daily["ann 2026-11-30"] == nil)
        #expect(daily.values.reduce(0, +) == 500)
    }

    /// Pacific/Apia skipped 2011-12-30. A sample there spanning the skip is in no bucket of
    /// that day, but it competes for the hours of the other zones' 12-30: appended after an
    /// iPhone sample of UTC's 12-30 it outranks, that day kept the iPhone's 1,000 (an audit:
    /// the skipped day was not recomputed as a neighbour), where one batch of both gave no row.
    @Test("a better-ranked sample spanning a day its zone skipped re-merges another zone's day of that date, however batched",
          arguments: [true, false])
    func skippedDayNeighbour(oneBatch: Bool) throws {
        let h = FoldHarness(defaultZone: "UTC")
        let events = [
            #"{"kind":"profile","user":"ann","priority":{"steps":["Ring","iPhone"]}}"#,
            sample(1, value: 1000, from: "2011-12-30T11:00:00Z", to: "2011-12-30T12:00:00Z", source: "iPhone"),
            // 09:00-15:00Z: Apia's 29th until 10:00Z, then its 31st.
            sample(2, value: 260, from: "2011-12-30T09:00:00Z", to: "2011-12-30T15:00:00Z", source: "Ring", zone: "Pacific/Apia"),
        ]
        if oneBatch { try h.append(events) } else { try h.append(Array(events[0...1])); try h.append(events[2]) }
        let daily = try h.daily()
        #expect(daily["ann 2011-12-30"] == nil, "\(daily)")
        #expect(abs(daily["ann 2011-12-29"]! - 260.0 / 6) < 1e-9)
        #expect(abs(daily["ann 2011-12-31"]! - 260.0 * 5 / 6) < 1e-9)
        #expect(daily.count == 2)
    }

    // MARK: 2. Midnight split

    @Test("a sample from 23:50 to 00:10 gives half to each day")
    func midnightSplit() throws {
        let h = FoldHarness(defaultZone: "UTC")
        try h.append(
            sample(1, value: 100, from: "2026-11-29T23:50:00Z", to: "2026-11-30T00:10:00Z"),
            // The same instants written at +08:00: the offset only fixes the instant, and bob has
            // no zone, so his days are the ledger's default (UTC) ones.
            sample(2, user: "bob", value: 100, from: "2026-11-30T07:50:00+08:00", to: "2026-11-30T08:10:00+08:00"))

        // 20 minutes in all, 10 before midnight and 10 after: 100 × 10/20 = 50 each.
        #expect(try h.daily() == [
            "ann 2026-11-29": 50, "ann 2026-11-30": 50,
            "bob 2026-11-29": 50, "bob 2026-11-30": 50,
        ])
        let first = try #require(try dailyRow(h, "ann", "2026-11-29"))
        #expect(first.number("samples") == 1)
        #expect(first.number("sources") == 1)
        #expect(try perSource(h, user: "ann") == [
            "ann 2026-11-29 iPhone": Part(value: 50, samples: 1),
            "ann 2026-11-30 iPhone": Part(value: 50, samples: 1),
        ])
    }

    // MARK: 3. Daylight-saving days

    @Test("days of 23 and 25 hours in New York and Paris split by real elapsed time")
    func daylightSavingDays() throws {
        // Day windows, worked out by hand:
        //   America/New_York 2026-03-08 (EST→EDT at 02:00): [03-08T05:00Z, 03-09T04:00Z) = 23 h
        //   America/New_York 2026-11-01 (EDT→EST at 02:00): [11-01T04:00Z, 11-02T05:00Z) = 25 h
        //   Europe/Paris     2026-03-29 (CET→CEST at 02:00): [03-28T23:00Z, 03-29T22:00Z) = 23 h
        //   Europe/Paris     2026-10-25 (CEST→CET at 03:00): [10-24T22:00Z, 10-25T23:00Z) = 25 h
        let h = FoldHarness(defaultZone: "UTC")
        // New York users get their zone from a profile; Paris samples carry their own zone.
        try h.append(
            #"{"kind":"profile","user":"nys","zone":"America/New_York"}"#,
            #"{"kind":"profile","user":"nysm","zone":"America/New_York"}"#,
            #"{"kind":"profile","user":"nyf","zone":"America/New_York"}"#,
            #"{"kind":"profile","user":"nyfm","zone":"America/New_York"}"#,
            #"{"kind":"profile","user":"nyx","zone":"America/New_York","priority":{"steps":["Watch","iPhone"]}}"#)
        try h.append(
            // 03-07 23:00 EST → 03-09 02:00 EDT: 26 h real.
            sample(1, user: "nys", value: 2600, from: "2026-03-08T04:00:00Z", to: "2026-03-09T06:00:00Z"),
            // 03-08 23:00 EDT → 03-09 00:20 EDT: 80 min across the EDT midnight.
            sample(2, user: "nysm", value: 80, from: "2026-03-09T03:00:00Z", to: "2026-03-09T04:20:00Z"),
            // 11-01 00:00 EDT → 11-02 05:00 EST: 30 h real.
            sample(3, user: "nyf", value: 3000, from: "2026-11-01T04:00:00Z", to: "2026-11-02T10:00:00Z"),
            // 11-01 23:30 EST → 11-02 00:10 EST: 40 min across the EST midnight.
            sample(4, user: "nyfm", value: 40, from: "2026-11-02T04:30:00Z", to: "2026-11-02T05:10:00Z"),
            // iPhone 01:30 EST → 03:30 EDT (2 h on the wall, 1 h real); Watch 03:00 → 04:00 EDT.
            sample(5, user: "nyx", value: 1000, from: "2026-03-08T06:30:00Z", to: "2026-03-08T07:30:00Z", source: "iPhone"),
            sample(6, user: "nyx", value: 400, from: "2026-03-08T07:00:00Z", to: "2026-03-08T08:00:00Z", source: "Watch"),
            // 03-29 00:00 CET → 03-30 02:00 CEST: 25 h real.
            sample(7, user: "pas", value: 2500, from: "2026-03-28T23:00:00Z", to: "2026-03-30T00:00:00Z", zone: "Europe/Paris"),
            // 03-29 23:00 CEST → 03-30 00:30 CEST: 90 min across the CEST midnight.
            sample(8, user: "pasm", value: 90, from: "2026-03-29T21:00:00Z", to: "2026-03-29T22:30:00Z", zone: "Europe/Paris"),
            // 10-25 00:00 CEST → 10-26 02:00 CET: 27 h real.
            sample(9, user: "paf", value: 2700, from: "2026-10-24T22:00:00Z", to: "2026-10-26T01:00:00Z", zone: "Europe/Paris"),
            // 10-25 23:00 CET → 10-26 00:30 CET: 90 min across the CET midnight.
            sample(10, user: "pafm", value: 90, from: "2026-10-25T22:00:00Z", to: "2026-10-25T23:30:00Z", zone: "Europe/Paris"))

        #expect(try h.daily() == [
            // 2600 over 26 h: 1 h (03-07) → 100, 23 h (03-08) → 2300, 2 h (03-09) → 200.
            "nys 2026-03-07": 100, "nys 2026-03-08": 2300, "nys 2026-03-09": 200,
            // midnight 03-09 00:00 EDT = 04:00Z: 60 min before → 60, 20 min after → 20.
            "nysm 2026-03-08": 60, "nysm 2026-03-09": 20,
            // 3000 over 30 h: 25 h (11-01) → 2500, 5 h (11-02) → 500.
            "nyf 2026-11-01": 2500, "nyf 2026-11-02": 500,
            // midnight 11-02 00:00 EST = 05:00Z: 30 min before → 30, 10 min after → 10.
            "nyfm 2026-11-01": 30, "nyfm 2026-11-02": 10,
            // The Watch wins [07:00Z, 08:00Z): 400. The iPhone wins [06:30Z, 07:00Z), 30 of its 60
            // real minutes: 1000 × 30/60 = 500 (by wall clock it would be 90 of 120 → 750).
            // 400 + 500 = 900.
            "nyx 2026-03-08": 900,
            // 2500 over 25 h: 23 h (03-29) → 2300, 2 h (03-30) → 200.
            "pas 2026-03-29": 2300, "pas 2026-03-30": 200,
            // midnight 03-30 00:00 CEST = 03-29T22:00Z: 60 min → 60, 30 min → 30.
            "pasm 2026-03-29": 60, "pasm 2026-03-30": 30,
            // 2700 over 27 h: 25 h (10-25) → 2500, 2 h (10-26) → 200.
            "paf 2026-10-25": 2500, "paf 2026-10-26": 200,
            // midnight 10-26 00:00 CET = 10-25T23:00Z: 60 min → 60, 30 min → 30.
            "pafm 2026-10-25": 60, "pafm 2026-10-26": 30,
        ])
        // per-source is split the same way, and not merged: nyx's iPhone keeps all 1000.
        #expect(try perSource(h, user: "nyx") == [
            "nyx 2026-03-08 Watch": Part(value: 400, samples: 1),
            "nyx 2026-03-08 iPhone": Part(value: 1000, samples: 1),
        ])
        #expect(try perSource(h, user: "nys") == [
            "nys 2026-03-07 iPhone": Part(value: 100, samples: 1),
            "nys 2026-03-08 iPhone": Part(value: 2300, samples: 1),
            "nys 2026-03-09 iPhone": Part(value: 200, samples: 1),
        ])
    }

    // MARK: 4. One instant, several zones

    @Test("the same instant lands on different days in different zones")
    func sameInstantDifferentZones() throws {
        // Default zone Pacific/Kiritimati (UTC+14) for users with neither a sample zone nor a profile.
        let h = FoldHarness(defaultZone: "Pacific/Kiritimati")
        try h.append(
            #"{"kind":"profile","user":"sam","zone":"America/New_York"}"#,
            #"{"kind":"profile","user":"raj","zone":"Asia/Kolkata"}"#)
        // Every sample below but two is [2026-06-15T02:25Z, 02:35Z).
        let from = "2026-06-15T02:25:00Z", to = "2026-06-15T02:35:00Z"
        try h.append(
            sample(1, user: "tokyo", value: 100, from: from, to: to, zone: "Asia/Tokyo"),     // +09:00 → 06-15 11:25
            sample(2, user: "la", value: 100, from: from, to: to, zone: "America/Los_Angeles"), // −07:00 → 06-14 19:25
            sample(3, user: "fixed", value: 100, from: from, to: to, zone: "-09:30"),          // −09:30 → 06-14 16:55
            sample(4, user: "sam", value: 100, from: from, to: to),                            // profile −04:00 → 06-14 22:25
            sample(5, user: "raj", value: 100, from: from, to: to),                            // profile +05:30 → 06-15 07:55
            sample(6, user: "kiri", value: 100, from: from, to: to),                           // default +14:00 → 06-15 16:25
            // raj's own zone overrides his profile: 06:00Z is 11:30 in Kolkata but 06-14 23:00 in LA.
            sample(7, user: "raj", value: 40, from: "2026-06-15T06:00:00Z", to: "2026-06-15T06:10:00Z",
                   zone: "America/Los_Angeles"),
            // Paris (+02:00): 23:50 → 00:10 local, so 50/50, where in UTC (21:50 → 22:10) it would be one day.
            sample(8, user: "paris", value: 100, from: "2026-06-14T21:50:00Z", to: "2026-06-14T22:10:00Z",
                   zone: "Europe/Paris"))

        #expect(try h.daily() == [
            "tokyo 2026-06-15": 100,
            "la 2026-06-14": 100,
            "fixed 2026-06-14": 100,
            "sam 2026-06-14": 100,
            "raj 2026-06-15": 100, "raj 2026-06-14": 40,
            "kiri 2026-06-15": 100,
            "paris 2026-06-14": 50, "paris 2026-06-15": 50,
        ])
    }

    // MARK: 5. Zero-length samples

    @Test("a zero-length entry counts unless a higher-priority source covers its instant")
    func zeroLengthEntries() throws {
        let h = FoldHarness(defaultZone: "UTC")
        let health = #"{"name":"Health","bundle":"com.apple.Health"}"#
        try h.append(
            // Watch is listed; Health is not, so it ranks below the Watch.
            #"{"kind":"profile","user":"ann","priority":{"steps":["Watch"]}}"#,
            sample(1, value: 1000, from: "2026-11-29T09:00:00Z", to: "2026-11-29T10:00:00Z", source: "Watch"),
            instant(2, value: 200, at: "2026-11-29T09:30:00Z", sourceJSON: health),  // inside the Watch: not counted
            instant(3, value: 25, at: "2026-11-29T09:00:00Z", sourceJSON: health),   // at its start, [09:00, …): covered
            instant(4, value: 150, at: "2026-11-29T10:00:00Z", sourceJSON: health),  // at its end, half-open: counted
            instant(5, value: 300, at: "2026-11-29T11:00:00Z", sourceJSON: health),  // outside: counted
            instant(6, value: 70, at: "2026-11-30T00:00:00Z", sourceJSON: health),   // midnight: wholly in 11-30
            // bob ranks Health above the Watch: his entry inside the Watch's hour counts, and the
            // Watch still wins its whole hour (an instant takes no time).
            #"{"kind":"profile","user":"bob","priority":{"steps":["Health","Watch"]}}"#,
            sample(7, user: "bob", value: 1000, from: "2026-11-29T09:00:00Z", to: "2026-11-29T10:00:00Z", source: "Watch"),
            instant(8, user: "bob", value: 200, at: "2026-11-29T09:30:00Z", sourceJSON: health))

        // ann 11-29: Watch 1000 + 150 + 300 = 1450, from 3 samples of 2 sources.
        let annDay = try #require(try dailyRow(h, "ann", "2026-11-29"))
        #expect(annDay.number("value") == 1450)
        #expect(annDay.number("samples") == 3)
        #expect(annDay.number("sources") == 2)
        // bob 11-29: 1000 + 200 = 1200, 2 samples, 2 sources.
        let bobDay = try #require(try dailyRow(h, "bob", "2026-11-29"))
        #expect(bobDay.number("value") == 1200)
        #expect(bobDay.number("samples") == 2)
        #expect(bobDay.number("sources") == 2)
        #expect(try h.daily() == ["ann 2026-11-29": 1450, "ann 2026-11-30": 70, "bob 2026-11-29": 1200])

        // per-source counts every entry: Health 200 + 25 + 150 + 300 = 675 from 4 samples.
        #expect(try perSource(h, user: "ann") == [
            "ann 2026-11-29 Health": Part(value: 675, samples: 4),
            "ann 2026-11-29 Watch": Part(value: 1000, samples: 1),
            "ann 2026-11-30 Health": Part(value: 70, samples: 1),
        ])
    }

    // MARK: 6. Corrections

    @Test("a retraction and amendments change exactly the rows they touch")
    func retractAndAmend() throws {
        let h = FoldHarness(defaultZone: "UTC")
        // No profile: the iPhone appeared first, so it outranks the Watch.
        try h.append(
            sample(1, value: 300, from: "2026-11-28T10:00:00Z", to: "2026-11-28T10:30:00Z"),   // A, seq 1
            sample(2, value: 400, from: "2026-11-29T10:00:00Z", to: "2026-11-29T10:30:00Z"),   // B, seq 2
            sample(3, value: 500, from: "2026-11-29T12:00:00Z", to: "2026-11-29T12:30:00Z"),   // C, seq 3
            sample(4, value: 450, from: "2026-11-29T12:00:00Z", to: "2026-11-29T12:30:00Z", source: "Watch"), // W, seq 4
            sample(5, value: 100, from: "2026-11-30T09:00:00Z", to: "2026-11-30T09:10:00Z"))   // D, seq 5
        // 11-28: A 300. 11-29: B 400 + C 500 = 900 (W loses all of its half hour to C). 11-30: D 100.
        #expect(try h.daily() == ["ann 2026-11-28": 300, "ann 2026-11-29": 900, "ann 2026-11-30": 100])

        // seq 6: retract B. 11-29 drops to 500; the latest day (11-30) is untouched, so last-known
        // does not change.
        try h.append(retract(2))
        #expect(changes(h, seq: 6) == [
            "daily ann steps 2026-11-29: 900 samples=2 sources=1 -> 500 samples=1 sources=1",
            "per-source ann steps 2026-11-29 iPhone: 900 samples=2 -> 500 samples=1",
        ])

        // seq 7: amend W's value 450 → 600. It still loses to C, so only its per-source row moves.
        try h.append(amend(4, #""value":600"#))
        #expect(changes(h, seq: 7) == [
            "per-source ann steps 2026-11-29 Watch: 450 samples=1 -> 600 samples=1",
        ])

        // seq 8: amend C's value 500 → 800: 11-29 becomes 800.
        try h.append(amend(3, #""value":800"#))
        #expect(changes(h, seq: 8) == [
            "daily ann steps 2026-11-29: 500 samples=1 sources=1 -> 800 samples=1 sources=1",
            "per-source ann steps 2026-11-29 iPhone: 500 samples=1 -> 800 samples=1",
        ])

        // seq 9: move D from 11-30 09:00 to 11-28 11:00 (same length, same value).
        // 11-28: 300 + 100 = 400 from 2 samples; 11-30 loses its only sample, so its rows go.
        // last-known falls back to 11-29 (800), whose latest sample ends 12:30 (C and W).
        try h.append(amend(5, #""start":"2026-11-28T11:00:00Z","end":"2026-11-28T11:10:00Z""#))
        #expect(changes(h, seq: 9) == [
            "daily ann steps 2026-11-28: 300 samples=1 sources=1 -> 400 samples=2 sources=1",
            "daily ann steps 2026-11-30: 100 samples=1 sources=1 -> nil",
            "last-known ann steps: 2026-11-30 100 end=2026-11-30T09:10:00.000000Z seq=5"
                + " -> 2026-11-29 800 end=2026-11-29T12:30:00.000000Z seq=9",
            "per-source ann steps 2026-11-28 iPhone: 300 samples=1 -> 400 samples=2",
            "per-source ann steps 2026-11-30 iPhone: 100 samples=1 -> nil",
        ])
        #expect(try h.daily() == ["ann 2026-11-28": 400, "ann 2026-11-29": 800])
    }

    // MARK: 7. Sync versions

    @Test("a higher syncVersion replaces the earlier sample of the same user, source and syncId")
    func syncVersionSupersedes() throws {
        let h = FoldHarness(defaultZone: "UTC")
        try h.append(sample(1, value: 300, from: "2026-11-29T08:00:00Z", to: "2026-11-29T08:30:00Z",
                            sync: ("walk-1", 1)))
        try h.append(sample(2, value: 450, from: "2026-11-29T08:00:00Z", to: "2026-11-29T08:30:00Z",
                            sync: ("walk-1", 2)))
        // v2 replaces v1: 450 from 1 sample, not 300 + 450 = 750 from 2 (overlapping samples of one
        // source would be summed). 11-29 is the latest day, so last-known follows: 300 → 450.
        #expect(changes(h, seq: 2) == [
            "daily ann steps 2026-11-29: 300 samples=1 sources=1 -> 450 samples=1 sources=1",
            "last-known ann steps: 2026-11-29 300 end=2026-11-29T08:30:00.000000Z seq=1"
                + " -> 2026-11-29 450 end=2026-11-29T08:30:00.000000Z seq=2",
            "per-source ann steps 2026-11-29 iPhone: 300 samples=1 -> 450 samples=1",
        ])

        // The same syncId from another source, or for another user, replaces nothing.
        try h.append(
            sample(3, value: 200, from: "2026-11-29T09:00:00Z", to: "2026-11-29T09:30:00Z", source: "Watch",
                   sync: ("walk-1", 1)),
            sample(4, user: "bob", value: 100, from: "2026-11-29T08:00:00Z", to: "2026-11-29T08:30:00Z",
                   sync: ("walk-1", 1)))
        // ann 11-29: iPhone 450 + Watch 200 (no overlap) = 650.
        #expect(try h.daily() == ["ann 2026-11-29": 650, "bob 2026-11-29": 100])

        // v3 moves the walk to 11-30 with 500 steps: 11-29 keeps only the Watch's 200.
        try h.append(sample(5, value: 500, from: "2026-11-30T08:00:00Z", to: "2026-11-30T08:30:00Z",
                            sync: ("walk-1", 3)))
        #expect(try h.daily() == ["ann 2026-11-29": 200, "ann 2026-11-30": 500, "bob 2026-11-29": 100])
        #expect(try perSource(h, user: "ann") == [
            "ann 2026-11-29 Watch": Part(value: 200, samples: 1),
            "ann 2026-11-30 iPhone": Part(value: 500, samples: 1),
        ])
    }

    // MARK: 8. Priority changes

    @Test("a priority change flips the winning source and re-merges existing days")
    func priorityChange() throws {
        let h = FoldHarness(defaultZone: "UTC")
        try h.append(
            sample(1, value: 600, from: "2026-11-28T10:00:00Z", to: "2026-11-28T11:00:00Z", source: "iPhone"),
            sample(2, value: 500, from: "2026-11-28T10:00:00Z", to: "2026-11-28T11:00:00Z", source: "Watch"),
            sample(3, value: 1200, from: "2026-11-29T08:00:00Z", to: "2026-11-29T09:00:00Z", source: "iPhone"),
            sample(4, value: 900, from: "2026-11-29T08:30:00Z", to: "2026-11-29T09:30:00Z", source: "Watch"))
        // No profile: iPhone appeared first and outranks the Watch.
        // 11-28: iPhone wins the shared hour: 600.
        // 11-29: iPhone 1200 whole + Watch wins [09:00, 09:30): 900 × 30/60 = 450 → 1650.
        #expect(try h.daily() == ["ann 2026-11-28": 600, "ann 2026-11-29": 1650])

        // seq 5: the Watch first.
        try h.append(#"{"kind":"profile","user":"ann","priority":{"steps":["Watch","iPhone"]}}"#)
        // 11-28: 500. 11-29: Watch 900 whole + iPhone wins [08:00, 08:30): 1200 × 30/60 = 600 → 1500.
        // per-source is not merged, so it does not change.
        #expect(changes(h, seq: 5) == [
            "daily ann steps 2026-11-28: 600 samples=1 sources=1 -> 500 samples=1 sources=1",
            "daily ann steps 2026-11-29: 1650 samples=2 sources=2 -> 1500 samples=2 sources=2",
            "last-known ann steps: 2026-11-29 1650 end=2026-11-29T09:30:00.000000Z seq=4"
                + " -> 2026-11-29 1500 end=2026-11-29T09:30:00.000000Z seq=5",
        ])

        // seq 6: a priority for another type changes nothing about steps.
        try h.append(#"{"kind":"profile","user":"ann","priority":{"distance":["iPhone","Watch"]}}"#)
        #expect(changes(h, seq: 6).isEmpty)

        // seq 7: only the iPhone listed; the unlisted Watch ranks below it: back to 600 and 1650.
        try h.append(#"{"kind":"profile","user":"ann","priority":{"steps":["iPhone"]}}"#)
        #expect(try h.daily() == ["ann 2026-11-28": 600, "ann 2026-11-29": 1650])
    }

    // MARK: 9. Profile zone changes

    @Test("a profile zone change re-buckets samples without a zone of their own")
    func profileZoneChange() throws {
        let h = FoldHarness(defaultZone: "UTC")
        try h.append(
            sample(1, value: 200, from: "2026-11-29T02:00:00Z", to: "2026-11-29T02:20:00Z"),   // s1
            sample(2, value: 300, from: "2026-11-29T23:30:00Z", to: "2026-11-29T23:50:00Z",
                   zone: "Europe/Paris"),                                                    // s2: 11-30 00:30 CET
            sample(3, value: 100, from: "2026-11-29T12:00:00Z", to: "2026-11-29T12:10:00Z"),   // s3
            sample(5, value: 120, from: "2026-11-30T07:00:00Z", to: "2026-11-30T09:00:00Z"))   // s5
        // UTC: 11-29 = s1 200 + s3 100 = 300; 11-30 = s2 300 + s5 120 = 420.
        #expect(try h.daily() == ["ann 2026-11-29": 300, "ann 2026-11-30": 420])

        try h.append(#"{"kind":"profile","user":"ann","zone":"America/Los_Angeles"}"#)
        // PST (−08:00): s1 → 11-28 18:00; s3 → 11-29 04:00; s5 → 11-29 23:00 .. 11-30 01:00,
        // 60 of 120 min each side → 60 + 60; s2 stays on 11-30 (own zone).
        // 11-28 = 200; 11-29 = 100 + 60 = 160; 11-30 = 300 + 60 = 360.
        #expect(try h.daily() == ["ann 2026-11-28": 200, "ann 2026-11-29": 160, "ann 2026-11-30": 360])

        try h.append(#"{"kind":"profile","user":"ann","zone":"Asia/Tokyo"}"#)
        // JST (+09:00): s1 → 11-29 11:00; s3 → 11-29 21:00; s5 → 11-30 16:00..18:00; s2 stays.
        // 11-28 empties; 11-29 = 200 + 100 = 300; 11-30 = 300 + 120 = 420.
        #expect(try h.daily() == ["ann 2026-11-29": 300, "ann 2026-11-30": 420])

        // A new zone-less sample is bucketed in the profile zone: 11-29T16:00Z is 11-30 01:00 JST
        // (in UTC it would be 11-29). 11-30 = 420 + 50 = 470.
        try h.append(sample(4, value: 50, from: "2026-11-29T16:00:00Z", to: "2026-11-29T16:10:00Z"))
        #expect(try h.daily() == ["ann 2026-11-29": 300, "ann 2026-11-30": 470])
    }

    // MARK: 10. Last-known

    @Test("last-known is the latest non-zero day and falls back when that day is retracted")
    func lastKnown() throws {
        let h = FoldHarness(defaultZone: "UTC")
        try h.append(sample(1, value: 300, from: "2026-11-27T10:00:00Z", to: "2026-11-27T10:30:00Z"))  // seq 1
        try h.append(
            sample(2, value: 400, from: "2026-11-28T09:00:00Z", to: "2026-11-28T09:30:00Z"),            // seq 2
            sample(3, value: 150, from: "2026-11-28T18:00:00Z", to: "2026-11-28T18:15:00Z"))            // seq 3
        try h.append(sample(4, value: 250, from: "2026-11-29T07:00:00Z", to: "2026-11-29T07:20:00Z"))  // seq 4

        // Latest day 11-29 = 250; its sample ends 07:20; changed by seq 4, recorded 2026-01-01 + 4 s.
        var known = try #require(try lastKnownRow(h, "ann"))
        #expect(known.string("date") == "2026-11-29")
        #expect(known.number("value") == 250)
        #expect(known.string("unit") == "count")
        #expect(known.string("latestSampleEnd") == "2026-11-29T07:20:00.000000Z")
        #expect(known.number("seq") == 4)
        #expect(known.string("recorded") == "2026-01-01T00:00:04.000000Z")

        // seq 5: a back-filled earlier day does not change it (nor its seq).
        try h.append(sample(5, value: 80, from: "2026-11-26T10:00:00Z", to: "2026-11-26T10:10:00Z"))
        #expect(changes(h, seq: 5).allSatisfy { !$0.hasPrefix("last-known") })
        #expect(try lastKnownRow(h, "ann")?.number("seq") == 4)

        // seq 6: retract 11-29's only sample: back to 11-28 = 400 + 150 = 550, latest end 18:15.
        try h.append(retract(4))
        known = try #require(try lastKnownRow(h, "ann"))
        #expect(known.string("date") == "2026-11-28")
        #expect(known.number("value") == 550)
        #expect(known.string("latestSampleEnd") == "2026-11-28T18:15:00.000000Z")
        #expect(known.number("seq") == 6)
        #expect(known.string("recorded") == "2026-01-01T00:00:06.000000Z")

        // seq 7: a zero-valued sample on 11-30: 11-30 totals 0, so the day stays 11-28 (550), but
        // the latest sample now ends 11-30 08:10, which changes the row.
        try h.append(sample(7, value: 0, from: "2026-11-30T08:00:00Z", to: "2026-11-30T08:10:00Z"))
        #expect(try h.daily()["ann 2026-11-30"] == 0)
        known = try #require(try lastKnownRow(h, "ann"))
        #expect(known.string("date") == "2026-11-28")
        #expect(known.number("value") == 550)
        #expect(known.string("latestSampleEnd") == "2026-11-30T08:10:00.000000Z")
        #expect(known.number("seq") == 7)
    }

    @Test("last-known's latest sample end is the latest across zones")
    func lastKnownAcrossZones() throws {
        let h = FoldHarness(defaultZone: "UTC")
        // A flight from Tokyo to Los Angeles: the later walk is on an earlier local date.
        try h.append(
            // 11-30 00:30..00:50 JST → local day 11-30.
            sample(1, user: "traveler", value: 500, from: "2026-11-29T15:30:00Z", to: "2026-11-29T15:50:00Z",
                   zone: "Asia/Tokyo"),
            // 11-29 14:00..14:30 PST → local day 11-29, but 6 h 40 min later in real time.
            sample(2, user: "traveler", value: 700, from: "2026-11-29T22:00:00Z", to: "2026-11-29T22:30:00Z",
                   zone: "America/Los_Angeles"))
        #expect(try h.daily() == ["traveler 2026-11-29": 700, "traveler 2026-11-30": 500])
        let known = try #require(try lastKnownRow(h, "traveler"))
        // The latest day with a non-zero total is 11-30 (500) …
        #expect(known.string("date") == "2026-11-30")
        #expect(known.number("value") == 500)
        // … but the latest sample is the Los Angeles one, ending 22:30Z.
        #expect(known.string("latestSampleEnd") == "2026-11-29T22:30:00.000000Z")
    }

    @Test("last-known's seq is the event that changed it, however the log was batched")
    func lastKnownSeqWithinBatch() throws {
        let events = [
            sample(1, value: 250, from: "2026-11-29T07:00:00Z", to: "2026-11-29T07:20:00Z"),  // seq 1: sets 11-29
            sample(2, value: 80, from: "2026-11-26T10:00:00Z", to: "2026-11-26T10:10:00Z"),   // seq 2: earlier day
        ]
        let oneByOne = FoldHarness(defaultZone: "UTC")
        for event in events { try oneByOne.append(event) }
        let together = FoldHarness(defaultZone: "UTC")
        try together.append(events[0], events[1])

        // Only seq 1 changed last-known (11-29, 250); seq 2 touched an earlier day.
        #expect(try lastKnownRow(oneByOne, "ann")?.number("seq") == 1)
        let known = try #require(try lastKnownRow(together, "ann"))
        #expect(known.string("date") == "2026-11-29")
        #expect(known.number("value") == 250)
        #expect(known.number("seq") == 1)
        #expect(known.string("recorded") == "2026-01-01T00:00:01.000000Z")
    }

    /// An audit: a second source's sample over the same hour loses all its time, so it changes
    /// neither the total nor the latest end; appended in one batch with the first, last-known
    /// named it (seq 2), one at a time the first (seq 1).
    @Test("last-known's seq skips a batch's later events that changed none of its facts, a priority change included")
    func lastKnownSeqSkipsLosingSamples() throws {
        let events = [
            #"{"kind":"sample","id":"00000000-0000-4000-8000-000000000001","user":"ann","type":"steps","value":100,"start":"2026-05-01T10:00:00Z","end":"2026-05-01T11:00:00Z","source":"A"}"#,
            #"{"kind":"sample","id":"00000000-0000-4000-8000-000000000002","user":"ann","type":"steps","value":50,"start":"2026-05-01T10:00:00Z","end":"2026-05-01T11:00:00Z","source":"B"}"#,
            // A priority that keeps A first changes no merge.
            #"{"kind":"profile","user":"ann","priority":{"steps":["A","B"]}}"#,
            // B, ranked first now, wins the hour: 50 (seq 4 changes the facts).
            #"{"kind":"profile","user":"ann","priority":{"steps":["B","A"]}}"#,
            // An earlier day: no change to the latest day.
            #"{"kind":"sample","id":"00000000-0000-4000-8000-000000000005","user":"ann","type":"steps","value":7,"start":"2026-04-01T10:00:00Z","end":"2026-04-01T11:00:00Z","source":"A"}"#,
        ]
        for (prefix, seq) in [(2, 1), (3, 1), (4, 4), (5, 4)] {
            let oneByOne = FoldHarness(defaultZone: "UTC")
            for event in events.prefix(prefix) { try oneByOne.append(event) }
            let together = FoldHarness(defaultZone: "UTC")
            try together.append(Array(events.prefix(prefix)))
            for harness in [oneByOne, together] {
                let known = try #require(try lastKnownRow(harness, "ann"))
                #expect(known.number("seq") == Double(seq), "\(prefix) events")
                #expect(known.number("value") == (prefix >= 4 ? 50 : 100))
                #expect(harness.lastKnownGuesses == 0)
            }
        }
    }

    // MARK: 11. Grants

    @Test("grants add and revokes remove types, per user and client")
    func grantsAndRevokes() throws {
        let h = FoldHarness(defaultZone: "UTC")
        try h.append(#"{"kind":"grant","user":"ann","client":"coach","read":["steps","distance"],"share":["steps"]}"#)   // seq 1
        try h.append(#"{"kind":"grant","user":"ann","client":"insurer","read":["active-energy"],"share":[]}"#)          // seq 2
        try h.append(#"{"kind":"grant","user":"ann","client":"coach","read":["flights"],"share":[]}"#)                  // seq 3
        try h.append(#"{"kind":"revoke","user":"ann","client":"coach","read":["distance"],"share":["steps"]}"#)         // seq 4
        try h.append(#"{"kind":"grant","user":"bob","client":"coach","read":["steps"]}"#)                               // seq 5

        // coach: read {steps, distance} ∪ {flights} − {distance} = {flights, steps}; share {steps} − {steps} = {}.
        // Last changed by seq 4, recorded 2026-01-01 + 4 s. insurer: {active-energy}, seq 2.
        let ann = try h.rows(.grants, RowFilter(user: "ann"))
        #expect(ann.map { grantSummary($0) } == [
            "ann coach read=[flights,steps] share=[] seq=4 updated=2026-01-01T00:00:04.000000Z",
            "ann insurer read=[active-energy] share=[] seq=2 updated=2026-01-01T00:00:02.000000Z",
        ])
        #expect(changes(h, seq: 4) == [
            "grants ann coach: read=[distance,flights,steps] share=[steps] seq=3 -> read=[flights,steps] share=[] seq=4",
        ])
        // One change per grant or revoke.
        #expect(h.changes.filter { $0.projection == .grants }.map(\.seq) == [1, 2, 3, 4, 5])
        #expect(try h.rows(.grants, RowFilter(user: "ann", type: .distance)).isEmpty)
        #expect(try h.rows(.grants, RowFilter(user: "ann", type: .steps)).map { $0.string("client") } == ["coach"])
        #expect(try h.rows(.grants, RowFilter(user: "bob")).map { grantSummary($0) } == [
            "bob coach read=[steps] share=[] seq=5 updated=2026-01-01T00:00:05.000000Z",
        ])

        // seq 6: revoking the insurer's only type leaves it nothing to read or share.
        try h.append(#"{"kind":"revoke","user":"ann","client":"insurer","read":["active-energy"]}"#)
        let insurer = try h.rows(.grants, RowFilter(user: "ann")).filter { $0.string("client") == "insurer" }
        #expect(insurer.allSatisfy { $0.strings("read") == [] && $0.strings("share") == [] })
    }

    @Test("a grant or revoke that leaves the sets as they were changes nothing: no new time, no change")
    func grantsThatChangeNothing() throws {
        let h = FoldHarness(defaultZone: "UTC")
        try h.append(#"{"kind":"grant","user":"ann","client":"coach","read":["steps"]}"#)                  // seq 1
        try h.append(#"{"kind":"grant","user":"ann","client":"coach","read":["steps"]}"#)                  // seq 2: held
        try h.append(#"{"kind":"revoke","user":"ann","client":"coach","share":["distance"]}"#)             // seq 3: not held
        try h.append(#"{"kind":"revoke","user":"ann","client":"stranger","read":["steps"]}"#)              // seq 4: no grant
        #expect(try h.rows(.grants, RowFilter(user: "ann")).map { grantSummary($0) } == [
            "ann coach read=[steps] share=[] seq=1 updated=2026-01-01T00:00:01.000000Z",
        ])
        try h.append(#"{"kind":"grant","user":"ann","client":"coach","read":["steps"],"share":["steps"]}"#) // seq 5: share
        #expect(try h.rows(.grants, RowFilter(user: "ann")).map { grantSummary($0) } == [
            "ann coach read=[steps] share=[steps] seq=5 updated=2026-01-01T00:00:05.000000Z",
        ])
        #expect(h.changes.filter { $0.projection == .grants }.map(\.seq) == [1, 5])
    }

    // MARK: 12. Units

    @Test("distance and energy are reported in metres and kilocalories")
    func canonicalUnits() throws {
        let h = FoldHarness(defaultZone: "UTC")
        try h.append(
            sample(1, type: "distance", value: 1.5, unit: "km", from: "2026-11-29T08:00:00Z", to: "2026-11-29T08:30:00Z"),
            sample(2, type: "distance", value: 2, unit: "mi", from: "2026-11-30T08:00:00Z", to: "2026-11-30T08:30:00Z",
                   source: "Watch"),
            sample(3, type: "distance", value: 100, unit: "yd", from: "2026-11-30T10:00:00Z", to: "2026-11-30T10:10:00Z"),
            sample(4, type: "distance", value: 1, unit: "mi", from: "2026-12-01T23:50:00Z", to: "2026-12-02T00:10:00Z"),
            sample(5, type: "HKQuantityTypeIdentifierActiveEnergyBurned", value: 418.4, unit: "kJ",
                   from: "2026-11-29T08:00:00Z", to: "2026-11-29T08:30:00Z", source: "Watch"),
            sample(6, type: "active-energy", value: 50, unit: "Cal", from: "2026-11-29T09:00:00Z", to: "2026-11-29T09:30:00Z"))

        let distance = try h.daily(.distance)
        #expect(Set(distance.keys) == ["ann 2026-11-29", "ann 2026-11-30", "ann 2026-12-01", "ann 2026-12-02"])
        expectClose(distance["ann 2026-11-29"], 1500)        // 1.5 km × 1000
        expectClose(distance["ann 2026-11-30"], 3310.128)    // 2 mi × 1609.344 = 3218.688, + 100 yd × 0.9144 = 91.44
        expectClose(distance["ann 2026-12-01"], 804.672)     // 1 mi = 1609.344 m, half on each side of midnight
        expectClose(distance["ann 2026-12-02"], 804.672)
        let energy = try h.daily(.activeEnergy)
        #expect(Set(energy.keys) == ["ann 2026-11-29"])
        expectClose(energy["ann 2026-11-29"], 150)           // 418.4 kJ ÷ 4.184 = 100 kcal, + 50 Cal = 50 kcal

        // An amended value without a unit is in the unit the sample has then: after 1 mi
        // became 1 km, a value of 2 is 2 km (README, Corrections).
        try h.append(sample(7, type: "distance", value: 1, unit: "mi", from: "2026-12-05T08:00:00Z", to: "2026-12-05T08:30:00Z"))
        expectClose(try h.daily(.distance)["ann 2026-12-05"], 1609.344)
        try h.append(amend(7, #""value":1,"unit":"km""#))
        expectClose(try h.daily(.distance)["ann 2026-12-05"], 1000)
        try h.append(amend(7, #""value":2"#))
        expectClose(try h.daily(.distance)["ann 2026-12-05"], 2000)

        let rows = try h.rows(.daily, RowFilter(user: "ann"))
        #expect(Set(rows.filter { $0.string("type") == "distance" }.compactMap { $0.string("unit") }) == ["m"])
        #expect(Set(rows.filter { $0.string("type") == "active-energy" }.compactMap { $0.string("unit") }) == ["kcal"])
        let energyParts = try perSource(h, type: .activeEnergy)
        expectClose(energyParts["ann 2026-11-29 Watch"]?.value, 100)
        expectClose(energyParts["ann 2026-11-29 iPhone"]?.value, 50)
        #expect(try h.rows(.perSource, RowFilter(type: .activeEnergy)).allSatisfy { $0.string("unit") == "kcal" })

        // An amended value without a unit is in the sample's original unit (km): 2 km = 2000 m.
        try h.append(amend(1, #""value":2"#))
        expectClose(try h.daily(.distance)["ann 2026-11-29"], 2000)
    }
}

// MARK: - Event builders

/// A fixed sample or event id: 00000000-0000-0000-0000-00000000000N.
private func uuid(_ n: Int) -> String {
    let digits = String(n)
    return "00000000-0000-0000-0000-" + String(repeating: "0", count: 12 - digits.count) + digits
}

private func sample(_ id: Int, user: String = "ann", type: String = "steps", value: Double, unit: String? = nil,
                    from start: String, to end: String, source: String = "iPhone", sourceJSON: String? = nil,
                    zone: String? = nil, sync: (id: String, version: Int)? = nil) -> String {
    var fields = [#""kind":"sample""#, #""id":"\#(uuid(id))""#, #""user":"\#(user)""#, #""type":"\#(type)""#,
                  #""value":\#(value)"#]
    if let unit { fields.append(#""unit":"\#(unit)""#) }
    fields += [#""start":"\#(start)""#, #""end":"\#(end)""#, #""source":\#(sourceJSON ?? "\"\(source)\"")"#]
    if let zone { fields.append(#""zone":"\#(zone)""#) }
    if let sync { fields += [#""syncId":"\#(sync.id)""#, #""syncVersion":\#(sync.version)"#] }
    return "{" + fields.joined(separator: ",") + "}"
}

/// A zero-length sample at `instant`.
private func instant(_ id: Int, user: String = "ann", value: Double, at instant: String, sourceJSON: String) -> String {
    sample(id, user: user, value: value, from: instant, to: instant, sourceJSON: sourceJSON)
}

private func retract(_ target: Int) -> String {
    #"{"kind":"correction","target":"\#(uuid(target))","action":"retract","reason":"entered twice"}"#
}

/// An amendment; `fields` is the JSON members to change, e.g. `"value":600`.
private func amend(_ target: Int, _ fields: String) -> String {
    #"{"kind":"correction","target":"\#(uuid(target))","action":"amend","reason":"device fix",\#(fields)}"#
}

// MARK: - Reading rows

private struct Part: Equatable, CustomStringConvertible {
    var value: Double
    var samples: Int
    var description: String { "\(format(value)) (\(samples) samples)" }
}

/// `per-source` rows by "user date source".
private func perSource(_ h: FoldHarness, user: String? = nil, type: QuantityType = .steps) throws -> [String: Part] {
    var result: [String: Part] = [:]
    for row in try h.rows(.perSource, RowFilter(user: user, type: type)) {
        let key = "\(row.string("user")!) \(row.string("date")!) \(row.string("source")!)"
        result[key] = Part(value: row.number("value")!, samples: Int(row.number("samples")!))
    }
    return result
}

private func dailyRow(_ h: FoldHarness, _ user: String, _ date: String, type: QuantityType = .steps) throws -> Row? {
    try h.rows(.daily, RowFilter(user: user, type: type)).first { $0.string("date") == date }
}

private func lastKnownRow(_ h: FoldHarness, _ user: String, type: QuantityType = .steps) throws -> Row? {
    let rows = try h.rows(.lastKnown, RowFilter(user: user, type: type))
    #expect(rows.count <= 1)
    return rows.first
}

/// The changes one event caused, each as one line, sorted.
private func changes(_ h: FoldHarness, seq: UInt64) -> [String] {
    h.changes.filter { $0.seq == seq }.map(summary).sorted()
}

private extension Row {
    func string(_ column: String) -> String? { values[column]?.stringValue }
    func number(_ column: String) -> Double? { values[column]?.numberValue }
    func strings(_ column: String) -> [String]? {
        guard case .array(let items) = values[column] else { return nil }
        return items.compactMap(\.stringValue)
    }
}

private func format(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
}

private func grantSummary(_ row: Row) -> String {
    "\(row.string("user")!) \(row.string("client")!) \(grantValues(row)) updated=\(row.string("updated") ?? "?")"
}

private func grantValues(_ row: Row) -> String {
    "read=[\((row.strings("read") ?? []).joined(separator: ","))] share=[\((row.strings("share") ?? []).joined(separator: ","))]"
        + " seq=\(format(row.number("seq") ?? -1))"
}

/// "projection user type date source: previous -> row", with only the columns that identify the row.
private func summary(_ change: RowChange) -> String {
    func values(_ row: Row?) -> String {
        guard let row else { return "nil" }
        switch row.projection {
        case .daily:
            return "\(format(row.number("value")!)) samples=\(format(row.number("samples")!)) sources=\(format(row.number("sources")!))"
        case .perSource:
            return "\(format(row.number("value")!)) samples=\(format(row.number("samples")!))"
        case .lastKnown:
            return "\(row.string("date")!) \(format(row.number("value")!)) end=\(row.string("latestSampleEnd")!) seq=\(format(row.number("seq")!))"
        case .grants:
            return grantValues(row)
        }
    }
    let any = (change.row ?? change.previous)!
    var key = "\(change.projection.rawValue) \(any.string("user")!)"
    switch change.projection {
    case .daily: key += " \(any.string("type")!) \(any.string("date")!)"
    case .perSource: key += " \(any.string("type")!) \(any.string("date")!) \(any.string("source")!)"
    case .lastKnown: key += " \(any.string("type")!)"
    case .grants: key += " \(any.string("client")!)"
    }
    return "\(key): \(values(change.previous)) -> \(values(change.row))"
}

private func expectClose(_ actual: Double?, _ expected: Double,
                         sourceLocation: SourceLocation = #_sourceLocation) {
    guard let actual else {
        Issue.record("no value, expected \(expected)", sourceLocation: sourceLocation)
        return
    }
    #expect(abs(actual - expected) <= 1e-9 * max(1, abs(expected)),
            "\(actual) is not \(expected)", sourceLocation: sourceLocation)
}

@Suite("DayCalendar")
struct DayCalendarTests {
    /// Foundation's answer: local midnight of `day` in `zone`.
    func foundationStart(_ day: Int, _ zone: Zone) -> Int64 {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone.timeZone
        let civil = CivilDate(daysSinceEpoch: day)
        let date = calendar.date(from: DateComponents(year: civil.year, month: civil.month, day: civil.day))!
        return Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
    }

    @Test("zones without rules skip Foundation and give the same windows and days", arguments: ["UTC", "GMT", "Etc/UTC", "+05:30", "-09:45", "+00:00", "+14:00"])
    func fixedOffsets(name: String) throws {
        let zone = try #require(Zone(name))
        let offset = try #require(zone.fixedOffset)
        let calendar = DayCalendar()
        for day in [-25_000, -1, 0, 1, 19_000, 20_000, 40_000] {
            let window = calendar.window(of: day, in: zone)
            #expect(window.start == foundationStart(day, zone), "\(name) day \(day)")
            #expect(window.end == foundationStart(day + 1, zone), "\(name) day \(day)")
            let instant = window.start + 3_600_000_000
            #expect(zone.offset(at: Timestamp(microseconds: instant)) == zone.timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(instant) / 1e6)))
            #expect(calendar.day(of: instant, in: zone) == day)
            #expect(offset == zone.timeZone.secondsFromGMT())
        }
    }

    @Test("before 1582, days still begin where day(of:) says they do, in zones with and without rules")
    func prolepticGregorian() throws {
        let calendar = DayCalendar()
        for name in ["UTC", "+05:30", "Europe/London", "Asia/Tokyo", "America/New_York"] {
            let zone = try #require(Zone(name))
            // 1422, the days around 1582-10-15, and 1599-12-31 and 1600-01-01: the last day
            // counted back from the zone's offset, whose end is Foundation's first start.
            for day in [-200_000, -141_428, -141_427, -135_141, -135_140] {
                let window = calendar.window(of: day, in: zone)
                #expect(window.end - window.start == 86_400_000_000)
                #expect(calendar.day(of: window.start, in: zone) == day)
                #expect(calendar.day(of: window.start - 1, in: zone) == day - 1)
            }
        }
    }

    @Test("zones with rules keep Foundation's answer, cached across calls, 23- and 25-hour days included")
    func rules() throws {
        let calendar = DayCalendar()
        for name in ["Europe/Paris", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"] {
            let zone = try #require(Zone(name))
            #expect(zone.fixedOffset == nil)
            for day in 19_000..<19_400 {
                let window = calendar.window(of: day, in: zone)
                #expect(window.start == foundationStart(day, zone), "\(name) day \(day)")
                #expect(calendar.window(of: day, in: zone) == window)
            }
        }
        // The shared calendar returns the same zone for a name, and UTC for one that no longer resolves.
        #expect(calendar.zone(named: "Europe/Paris").name == "Europe/Paris")
        #expect(calendar.zone(named: "Nowhere/Atlantis").name == "UTC")
        // A look-alike spelling (the Kelvin sign for K) is no zone, and does not share the
        // cache entry of the real name it equals as a Swift String.
        #expect(calendar.zone(named: "Asia/Kolkata").name == "Asia/Kolkata")
        #expect(calendar.zone(named: "Asia/\u{212A}olkata").name == "UTC")
        #expect(calendar.zone(named: "Asia/Kolkata").name == "Asia/Kolkata")
    }
}
