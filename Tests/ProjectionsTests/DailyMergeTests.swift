import LedgerCore
import Testing
@testable import Projections

@Suite("DailyMerge")
struct DailyMergeTests {
    /// A zero-length sample counts unless a better-ranked sample is open at its instant: the
    /// sweep's answer against the rule read literally, on random days (seeded; the seed is in
    /// the failure message).
    @Test("zero-length samples: covered exactly when a better-ranked interval is open at the instant", arguments: 0..<40)
    func instantsAgainstTheRule(_ seed: Int) {
        var random = SplitMix64(seed: UInt64(seed))
        func below(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }
        var shares: [DayShare] = []
        for index in 0..<(5 + below(200)) {
            let start = Int64(below(100))
            // Intervals (some ending where another starts, some empty of instants), and
            // instants, often on an interval's edge.
            let length = below(3) == 0 ? 0 : Int64(1 + below(20))
            let instant = length == 0
            shares.append(DayShare(index: index, isTarget: instant, source: "s\(below(4))", rank: below(4),
                                   start: start, end: start + length, value: Double(1 + below(9)),
                                   clippedStart: start, clippedEnd: start + length))
        }
        var expected = 0.0
        var counted = 0
        for share in shares where share.isInstant {
            let covered = shares.contains { other in
                !other.isInstant && other.rank < share.rank && other.start <= share.start && share.start < other.end
            }
            if !covered {
                expected += share.value
                counted += 1
            }
        }
        let daily = DailyMerge.daily(shares)
        #expect(daily?.value ?? 0 == expected, "seed \(seed)")
        #expect(daily?.samples ?? 0 == counted, "seed \(seed)")
    }
}
