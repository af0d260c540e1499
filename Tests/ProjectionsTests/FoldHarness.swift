import Foundation
import LedgerCore
import Projections
import Testing

/// Folds NDJSON events into a fresh in-memory store, one batch per call to `append`, and
/// reads rows back: the projections without LMDB.
final class FoldHarness {
    let store = MemoryStateStore()
    let context: FoldContext
    private(set) var seq: UInt64 = 0
    private(set) var changes: [RowChange] = []
    /// The folds' `lastKnownGuesses`, summed.
    private(set) var lastKnownGuesses = 0
    /// Each event's seq by id, as the log's `ids` gives it: corrections name their target's.
    private var seqs: [UUID: UInt64] = [:]

    /// Whether the folds build changes (a replay's do not).
    let emitsChanges: Bool

    init(defaultZone: String = "UTC", emitsChanges: Bool = true) {
        context = FoldContext(defaultZone: Zone(defaultZone)!)
        self.emitsChanges = emitsChanges
    }

    /// Folds `lines` (NDJSON) as one batch, with `recorded` = seq seconds after 2026-01-01.
    func append(_ lines: String...) throws {
        try append(lines)
    }

    func append(_ lines: [String]) throws {
        let fold = ActivityFold(store: store, context: context, emitsChanges: emitsChanges)
        for (_, event) in try EventInput.decode(Array(lines.joined(separator: "\n").utf8)) {
            seq += 1
            seqs[event.id] = seq
            var target: UInt64?
            if case .correction(let correction) = event.payload { target = seqs[correction.target] }
            try fold.apply(LoggedEvent(seq: seq, recorded: Timestamp(seconds: 1_767_225_600 + Int64(seq)), event: event, target: target))
        }
        changes += try fold.flush()
        lastKnownGuesses += fold.lastKnownGuesses
    }

    func rows(_ projection: ProjectionName, _ filter: RowFilter = RowFilter()) throws -> [Row] {
        try ProjectionQuery(store: store).rows(projection, filter: filter)
    }

    /// `daily` values by "user type date".
    func daily(_ type: QuantityType = .steps) throws -> [String: Double] {
        var result: [String: Double] = [:]
        for row in try rows(.daily, RowFilter(type: type)) {
            result["\(row.values["user"]!.stringValue!) \(row.values["date"]!.stringValue!)"] = row.values["value"]!.numberValue!
        }
        return result
    }
}
