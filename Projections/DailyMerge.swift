import Foundation
import LedgerCore

/// One sample's part in one day, ready for merging.
struct DayShare {
    var index: Int
    /// False for a sample of a neighbouring day (in another zone) that only competes for time.
    var isTarget: Bool = true
    var source: String
    var rank: Int
    /// The whole sample.
    var start: Int64
    var end: Int64
    var value: Double
    /// The sample clipped to the day (in its zone).
    var clippedStart: Int64
    var clippedEnd: Int64
    /// The sample's id, for the fold to ask whether it is idle (`ActivityFold.lastChange`).
    var id: UUID? = nil

    var isInstant: Bool { end == start }
}

/// The merge rules of SPEC §4.2 and §4.3 for the samples of one user, type and day.
enum DailyMerge {
    /// `daily`: over every stretch of the day, only the highest-priority source with a sample
    /// covering it counts (its overlapping samples are summed); a sample contributes
    /// `value × won time / its duration`. Intervals are half-open. A zero-length sample counts
    /// unless a higher-priority source covers its instant. Nil when no sample contributes.
    static func daily(_ shares: [DayShare]) -> DailyValue? {
        var idle: [Int]?
        return daily(shares, idle: &idle)
    }

    /// `daily`, and with `idle` non-nil the positions of the samples, targets or not, that
    /// take part in nothing: a zero-length one covered or of value 0, or one that, wherever a
    /// target could win time while it is open, has a better-ranked sample open too. Taking such
    /// a sample out changes no one's won time and no instant's cover, and leaves every other
    /// idle sample idle (what made each idle was better ranked than it).
    static func daily(_ shares: [DayShare], idle: inout [Int]?) -> DailyValue? {
        guard shares.contains(where: \.isTarget) else {
            // No sample of the day: its neighbours' samples take part in nothing.
            if idle != nil { idle = Array(shares.indices) }
            return nil
        }
        var won = [Int64](repeating: 0, count: shares.count)

        // Sweep over real time. Every sample covers its whole interval (so samples bucketed on
        // other local days, in other zones, compete too); a target wins time only inside its
        // own day. Window edges are boundaries, so each stretch is wholly in or out of a window.
        var boundaries: [(time: Int64, kind: Int8, share: Int)] = []  // kind: -1 close, 0 edge, 1 open
        boundaries.reserveCapacity(4 * shares.count)
        // By index, each field read in place: a copy of each share retained its source.
        for position in shares.indices where !shares[position].isInstant {
            boundaries.append((shares[position].start, 1, position))
            boundaries.append((shares[position].end, -1, position))
            if shares[position].isTarget {
                boundaries.append((shares[position].clippedStart, 0, position))
                boundaries.append((shares[position].clippedEnd, 0, position))
            }
        }
        // Closings before openings at the same instant: intervals are half-open.
        boundaries.sort { $0.time != $1.time ? $0.time < $1.time : $0.kind < $1.kind }
        var active: [Int] = []
        // A zero-length target is covered when a better-ranked sample is open at its instant:
        // each is settled in the same sweep, against the samples open when it comes, rather
        // than against every sample of the day (which made a day of many instants quadratic).
        let instants = shares.indices.filter { shares[$0].isInstant && shares[$0].isTarget }
            .sorted { shares[$0].start < shares[$1].start }
        var covered = [Bool](repeating: false, count: shares.count)
        // Whether a sample was the best-ranked open one where a target could win, or at a
        // covered instant (`idle`).
        let trackIdle = idle != nil
        var decides = [Bool](repeating: false, count: shares.count)
        var nextInstant = 0
        func settleInstants(before limit: Int64?) {
            while nextInstant < instants.count {
                let position = instants[nextInstant]
                if let limit, shares[position].start >= limit { return }
                covered[position] = active.contains { shares[$0].rank < shares[position].rank }
                if covered[position], trackIdle {
                    // The best-ranked samples open at a covered instant decide its cover.
                    let best = active.map { shares[$0].rank }.min()!
                    for open in active where shares[open].rank == best { decides[open] = true }
                }
                nextInstant += 1
            }
        }
        var cursor = 0
        while cursor < boundaries.count {
            let time = boundaries[cursor].time
            // Instants before `time` see the samples open since the previous boundary.
            settleInstants(before: time)
            while cursor < boundaries.count, boundaries[cursor].time == time {
                let boundary = boundaries[cursor]
                if boundary.kind == 1 {
                    active.append(boundary.share)
                } else if boundary.kind == -1, let at = active.firstIndex(of: boundary.share) {
                    active.remove(at: at)
                }
                cursor += 1
            }
            guard cursor < boundaries.count, !active.isEmpty else { continue }
            let next = boundaries[cursor].time
            var best = Int.max
            for position in active where shares[position].rank < best { best = shares[position].rank }
            for position in active where shares[position].rank == best && shares[position].isTarget {
                if time >= shares[position].clippedStart, next <= shares[position].clippedEnd {
                    won[position] += next - time
                }
            }
            // A stretch where some open target could win: the best-ranked open here matter.
            if trackIdle, active.contains(where: { shares[$0].isTarget && time >= shares[$0].clippedStart && next <= shares[$0].clippedEnd }) {
                for position in active where shares[position].rank == best { decides[position] = true }
            }
        }

        settleInstants(before: nil)

        var total = 0.0
        var samples = 0
        var sources = NameIndex()  // distinct by bytes (`sameName`)
        if trackIdle {
            idle = shares.indices.filter { position in
                let share = shares[position]
                return share.isInstant ? !share.isTarget || covered[position] || share.value == 0 : !decides[position]
            }
        }
        for position in shares.indices where shares[position].isTarget {
            let value = shares[position].value
            if shares[position].isInstant {
                // A zero-length sample counts unless a better-ranked sample covers its instant.
                guard !covered[position] else { continue }
                total += value
            } else {
                guard won[position] > 0 else { continue }
                let duration = shares[position].end - shares[position].start
                total += won[position] == duration ? value : value * Double(won[position]) / Double(duration)
            }
            samples += 1
            sources.insert(shares[position].source)
        }
        // Nothing contributed: every sample of the day lost its time to better-ranked samples
        // bucketed on neighbouring days (in other zones). A day without samples has no row.
        return samples == 0 ? nil : DailyValue(value: total, samples: samples, sources: sources.count)
    }

    /// `per-source`: each source's samples summed over their share of the day, not merged.
    static func perSource(_ shares: [DayShare]) -> [PerSourceValue] {
        var bySource: [PerSourceValue] = []
        var names = NameIndex()  // by bytes (`sameName`): a position in `bySource` each
        for share in shares where share.isTarget {
            let part: Double
            if share.isInstant {
                part = share.value
            } else {
                let duration = share.end - share.start
                let inside = share.clippedEnd - share.clippedStart
                part = inside == duration ? share.value : share.value * Double(inside) / Double(duration)
            }
            let (index, added) = names.insert(share.source)
            if !added {
                bySource[index].value += part
                bySource[index].samples += 1
            } else {
                // A sum that starts at zero (so a -0 part is stored as 0, as it always was).
                bySource.append(PerSourceValue(source: share.source, value: 0 + part, samples: 1))
            }
        }
        return bySource.sorted { $0.source.utf8.lexicographicallyPrecedes($1.source.utf8) }
    }
}
