import Foundation
import LedgerCore

/// `--format` (SPEC §5): `table` on a terminal by default, `ndjson` otherwise.
enum OutputFormat: String, CaseIterable {
    case table, json, ndjson, csv

    static func resolve(_ given: String?, sink: OutputSink, usage: String) throws -> OutputFormat {
        guard let given else { return sink.isTerminal ? .table : .ndjson }
        guard let format = OutputFormat(rawValue: given) else {
            throw CLIError.usage("unknown format '\(given)' (expected table, json, ndjson or csv)\(suggestion(for: given, among: OutputFormat.allCases.map(\.rawValue)))", usage: usage)
        }
        return format
    }

    /// A value as `table` and `chart` show it: a count as a whole number, else to two places.
    /// A count beyond Int64 (9,224 samples of 1e15 flights in one day sum to 9.2e18) is written
    /// from the Double, where converting it trapped and killed the command.
    static func rounded(_ number: Double, isCount: Bool) -> String {
        guard isCount else { return String(format: "%.2f", number) }
        let whole = number.rounded()
        return whole.magnitude < 0x1p63 ? String(Int64(whole)) : String(format: "%.0f", whole)
    }
}

/// Rows with named columns, printed in any format. Values keep full precision in the
/// machine formats; `table` rounds numbers in columns listed in `roundedColumns`.
struct RowSet {
    var columns: [String]
    var rows: [[JSONValue?]] = []
    /// In `table`, round the `value` column: counts to whole numbers, other units to 2 places.
    var roundedValues = false

    init(columns: [String]) { self.columns = columns }

    mutating func append(_ row: [JSONValue?]) {
        precondition(row.count == columns.count)
        rows.append(row)
    }

    func write(_ format: OutputFormat, to sink: OutputSink) {
        switch format {
        case .ndjson:
            let keys = JSONValue.objectKeys(columns)
            var out: [UInt8] = []
            for row in rows {
                JSONValue.writeObject(row, keys: keys, to: &out)
                out.append(0x0A)
                if out.count > 1 << 16 {
                    sink.write(bytes: out)
                    out.removeAll(keepingCapacity: true)
                }
            }
            sink.write(bytes: out)
        case .json:
            let keys = JSONValue.objectKeys(columns)
            var out: [UInt8] = [UInt8(ascii: "[")]
            for (index, row) in rows.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeObject(row, keys: keys, to: &out)
            }
            out += Array("]\n".utf8)
            sink.write(bytes: out)
        case .csv:
            var text = columns.map(csvField).joined(separator: ",") + "\n"
            for row in rows {
                text += row.map { csvField(csvText($0)) }.joined(separator: ",") + "\n"
            }
            sink.write(text)
        case .table:
            let unitIndex = columns.firstIndex(of: "unit")
            let cells = rows.map { row in
                zip(columns, row).map { column, value in
                    // Shown, not stored: a name's invisible characters (a U+202E that turns the
                    // line around) are written as `\u{…}`, as errors write them.
                    guard roundedValues, column == "value", let number = value?.numberValue else { return OutputFormat.shown(plain(value)) }
                    let isCount = unitIndex.map { row[$0]?.stringValue == "count" } ?? false
                    return OutputFormat.rounded(number, isCount: isCount)
                }
            }
            let headers = columns.map { $0.uppercased() }
            var widths = headers.map(OutputFormat.displayWidth)
            for row in cells {
                for (index, cell) in row.enumerated() { widths[index] = max(widths[index], OutputFormat.displayWidth(cell)) }
            }
            func line(_ cells: [String]) -> String {
                zip(cells, widths).enumerated().map { index, pair in
                    index == cells.count - 1 ? pair.0 : OutputFormat.padded(pair.0, to: pair.1)
                }.joined(separator: "  ")
            }
            var text = line(headers) + "\n"
            for row in cells { text += line(row) + "\n" }
            sink.write(text)
        }
    }

    /// A value as plain text: strings without quotes, numbers in full, structures as JSON.
    func plain(_ value: JSONValue?) -> String {
        switch value {
        case nil, .null?: ""
        case .string(let text)?: text
        case .bool(let flag)?: flag ? "true" : "false"
        case let other?: other.canonicalString
        }
    }

    /// A value as a CSV cell's text. A string a spreadsheet would run as a formula (one that
    /// begins with `=`, `+`, `-`, `@`, a tab or a carriage return: OWASP's list) is written
    /// after a `'`, which spreadsheets show as text: a source named `=HYPERLINK(…)` or
    /// `@SUM(…)` reaches the ledger from any app that writes samples, and a user who opens the
    /// export would otherwise run it. Signed numbers and offsets (`-3`, `+05:30`), which call
    /// nothing, are left as they are; numbers are never strings here, so `-12.5` is unchanged.
    func csvText(_ value: JSONValue?) -> String {
        guard case .string(let text)? = value, let first = text.utf8.first,
              RowSet.formulaStarts.contains(first) else { return plain(value) }
        let rest = text.utf8.dropFirst()
        let isDigit = { (byte: UInt8) in byte >= 0x30 && byte <= 0x39 }
        let plainNumber = (first == UInt8(ascii: "-") || first == UInt8(ascii: "+"))
            && rest.first.map(isDigit) == true
            && rest.allSatisfy { isDigit($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: ":") }
        return plainNumber ? text : "'" + text
    }

    static let formulaStarts: Set<UInt8> = Set("=+-@\t\r".utf8)

    func csvField(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

extension OutputFormat {
    /// `text` as `table` and `chart` show it: `visibleCharacters`, but an emoji sequence (a
    /// family joined by U+200D) kept whole, as the picture it is, and the joiners (U+200C,
    /// U+200D, letters of Persian and Indic names) and spaces (U+3000 in `山田　太郎`) that
    /// names may hold left as they are (a review).
    static func shown(_ text: String) -> String {
        var out = ""
        for character in text {
            let scalars = character.unicodeScalars
            if scalars.count > 1, let first = scalars.first, first.properties.isEmoji, first.value > 0xFF {
                out.append(character)
                continue
            }
            for scalar in scalars {
                if scalar.value == 0x200C || scalar.value == 0x200D || scalar.properties.generalCategory == .spaceSeparator {
                    out.unicodeScalars.append(scalar)
                } else {
                    out += visibleCharacters(String(scalar))
                }
            }
        }
        return out
    }

    /// The columns `text` takes on a terminal: one per character as a person sees it (a
    /// letter with its combining accents, a family emoji of several scalars), two for a wide
    /// one (East Asian wide and full-width characters, emoji shown as pictures). Widths counted
    /// in characters left `日本語` three columns short, and Foundation's `padding(toLength:)`,
    /// which counts UTF-16 units, cut `émile` (decomposed) to `émil` and split an emoji (an
    /// audit).
    static func displayWidth(_ text: String) -> Int {
        text.reduce(0) { width, character in width + columnsOf(character) }
    }

    private static func columnsOf(_ character: Character) -> Int {
        guard let first = character.unicodeScalars.first else { return 0 }
        if character.unicodeScalars.contains(where: { $0.value == 0xFE0F }) || first.properties.isEmojiPresentation { return 2 }
        switch first.value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
             0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x20000...0x3FFFD:
            return 2
        default:
            return 1
        }
    }

    /// `text` followed by spaces up to `width` columns (`displayWidth`); never cut.
    static func padded(_ text: String, to width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - displayWidth(text)))
    }
}
