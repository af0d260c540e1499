import Foundation
import LedgerCore
import Projections

/// `--format chart`: one horizontal bar per row, scaled to the largest value of its type and
/// unit (steps and metres are not drawn on one scale), for people who would rather look than
/// read.
enum Chart {
    static let width = 40

    static func render(_ rows: [Row], projection: ProjectionName) -> String {
        guard projection != .grants else {
            return rows.map { row in
                OutputFormat.shown("\(row.values["user"]?.stringValue ?? "") \(row.values["client"]?.stringValue ?? ""): read \(list(row.values["read"])), share \(list(row.values["share"]))")
            }.joined(separator: "\n") + (rows.isEmpty ? "" : "\n")
        }
        // Name the user or type in a label only when the rows hold more than one.
        let users = Set(rows.compactMap { $0.values["user"]?.stringValue })
        let types = Set(rows.compactMap { $0.values["type"]?.stringValue })
        let labels = rows.map { row -> String in
            var parts = [row.values["date"]?.stringValue ?? ""]
            if users.count > 1 { parts.append(row.values["user"]?.stringValue ?? "") }
            if types.count > 1 { parts.append(row.values["type"]?.stringValue ?? "") }
            if let source = row.values["source"]?.stringValue { parts.append(source) }
            if row.values["stale"] == .bool(true) { parts.append("(stale)") }
            return OutputFormat.shown(parts.joined(separator: " "))
        }
        let values = rows.map { $0.values["value"]?.numberValue ?? 0 }
        func scale(_ row: Row) -> String {
            (row.values["type"]?.stringValue ?? "") + " " + (row.values["unit"]?.stringValue ?? "")
        }
        var largestOf: [String: Double] = [:]
        for (index, row) in rows.enumerated() { largestOf[scale(row)] = max(largestOf[scale(row)] ?? 0, values[index]) }
        let labelWidth = labels.map(OutputFormat.displayWidth).max() ?? 0
        var text = ""
        for (index, row) in rows.enumerated() {
            let value = values[index], largest = largestOf[scale(row)] ?? 0
            let eighths = largest > 0 ? Int((value / largest * Double(width * 8)).rounded()) : 0
            var bar = String(repeating: "█", count: eighths / 8)
            let partial = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"][eighths % 8]
            bar += partial
            let unit = row.values["unit"]?.stringValue ?? ""
            let shown = OutputFormat.rounded(value, isCount: unit == "count")
            text += OutputFormat.padded(labels[index], to: labelWidth)
                + "  " + bar + String(repeating: " ", count: width + 1 - bar.count) + " \(shown) \(unit)\n"
        }
        return text
    }

    private static func list(_ value: JSONValue?) -> String {
        guard case .array(let items)? = value else { return "[]" }
        return "[" + items.compactMap(\.stringValue).joined(separator: ",") + "]"
    }
}
