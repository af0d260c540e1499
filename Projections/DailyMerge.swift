import LedgerCore

/// One sample's part in one day, ready for merging.
struct DayShare {
    var index: Int
    var source: String
    var rank: Int
    /// The whole sample.
    var start: Int64
    var end: Int64
    var value: Double
    /// The sample clipped to the day (in its zone).
    var clippedStart: Int64
    var clippedEnd: Int64

    var isInstant: Bool { end == start }
}

/// The merge rules of SPEC §4.2 and §4.3 for the samples of one user, type and day.
enum DailyMerge {
    /// `daily`: over every stretch of the day, only the highest-priority source with a sample
    /// covering it counts (its overlapping samples are summed); a sample contributes
    /// `value × won time / its duration`. Intervals are half-open. A zero-length sample counts
    /// unless a higher-priority source covers its instant. Nil when there are no samples.
    static func daily(_ shares: [DayShare]) -> DailyValue? {
        guard !shares.isEmpty else { return nil }
        var won = [Int64](repeating: 0, count: shares.count)
        var counted = [Bool](repeating: false, count: shares.count)

        // Sweep the boundaries of the non-zero-length shares.
        var boundaries: [(time: Int64, opens: Bool, share: Int)] = []
        for (position, share) in shares.enumerated() where !share.isInstant && share.clippedEnd > share.clippedStart {
            boundaries.append((share.clippedStart, true, position))
            boundaries.append((share.clippedEnd, false, position))
        }
        // Closings before openings at the same instant: intervals are half-open.
        boundaries.sort { $0.time != $1.time ? $0.time < $1.time : (!$0.opens && $1.opens) }
        var active: [Int] = []
        var cursor = 0
        while cursor < boundaries.count {
            let time = boundaries[cursor].time
            while cursor < boundaries.count, boundaries[cursor].time == time {
                let boundary = boundaries[cursor]
                if boundary.opens {
                    active.append(boundary.share)
                } else if let at = active.firstIndex(of: boundary.share) {
                    active.remove(at: at)
                }
                cursor += 1
            }
            guard cursor < boundaries.count, !active.isEmpty else { continue }
            let length = boundaries[cursor].time - time
            let best = active.map { shares[$0].rank }.min()!
            for position in active where shares[position].rank == best {
                won[position] += length
            }
        }

        // Zero-length shares: counted unless a better-ranked sample covers the instant.
        for (position, share) in shares.enumerated() where share.isInstant {
            let covered = shares.contains { other in
                !other.isInstant && other.rank < share.rank
                    && other.clippedStart <= share.start && share.start < other.clippedEnd
            }
            counted[position] = !covered
        }

        var total = 0.0
        var samples = 0
        var sources = Set<String>()
        for (position, share) in shares.enumerated() {
            if share.isInstant {
                guard counted[position] else { continue }
                total += share.value
            } else {
                guard won[position] > 0 else { continue }
                let duration = share.end - share.start
                total += won[position] == duration ? share.value : share.value * Double(won[position]) / Double(duration)
            }
            samples += 1
            sources.insert(share.source)
        }
        return DailyValue(value: total, samples: samples, sources: sources.count)
    }

    /// `per-source`: each source's samples summed over their share of the day, not merged.
    static func perSource(_ shares: [DayShare]) -> [PerSourceValue] {
        var bySource: [String: PerSourceValue] = [:]
        for share in shares {
            let part: Double
            if share.isInstant {
                part = share.value
            } else {
                let duration = share.end - share.start
                let inside = share.clippedEnd - share.clippedStart
                part = inside == duration ? share.value : share.value * Double(inside) / Double(duration)
            }
            bySource[share.source, default: PerSourceValue(source: share.source, value: 0, samples: 0)].value += part
            bySource[share.source]!.samples += 1
        }
        return bySource.values.sorted { $0.source < $1.source }
    }
}
