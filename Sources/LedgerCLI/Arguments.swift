import Foundation
import LedgerCore

/// Failures the CLI maps to exit codes (SPEC §5).
enum CLIError: Error {
    /// Exit 64: unknown command or option, missing or malformed argument. `usage` is the
    /// synopsis printed after the message.
    case usage(String, usage: String)
    /// Exit 1: I/O or storage failure.
    case runtime(String)
    /// Exit 65: invalid input data.
    case data(String)
    /// Exit 130: stopped by SIGINT or SIGTERM; the message says what was kept.
    case interrupted(String)
}

/// An option a command accepts.
struct OptionSpec: Sendable {
    var name: String
    /// The placeholder for its value (`PATH`), or nil for a flag.
    var value: String?
    var help: String
    /// Whether it may be given more than once.
    var repeatable = false
}

/// A command's arguments after parsing: options by name, flags, and positionals in order.
struct ParsedArguments {
    /// The command's synopsis, for usage errors found after parsing.
    var usage = ""
    var options: [String: [String]] = [:]
    var flags: Set<String> = []
    var positionals: [String] = []

    func value(_ name: String) -> String? { options[name]?.last }

    /// A name-valued option (`--user`), checked as the names in events are (not empty, at most
    /// 1 KiB, no control character): a usage error otherwise. An empty one is most often a
    /// script's unset variable, and as a filter it matched nothing and exited 0 (an audit).
    func name(_ option: String) throws -> String? {
        guard let text = value(option) else { return nil }
        if let problem = EventDecoder.nameProblem(text, field: "--" + option) { throw CLIError.usage(problem, usage: usage) }
        return text
    }
    func has(_ name: String) -> Bool { flags.contains(name) || options[name] != nil }
}

/// Options every data command takes.
let dbOption = OptionSpec(name: "db", value: "PATH",
                          help: "The ledger directory (default: $LEDGER_DB, else ./ledger.db).")
let formatOption = OptionSpec(name: "format", value: "FORMAT",
                              help: "table, json, ndjson or csv (default: table on a terminal, else ndjson).")
let helpOption = OptionSpec(name: "help", value: nil, help: "Show help for this command.")

/// Parses `arguments` against `specs`. Accepts `--name value`, `--name=value`, `-h`, and `--`
/// to end options. Unknown options get a "Did you mean …?" when one is close.
func parse(_ arguments: [String], specs: [OptionSpec], usage: String, maxPositionals: Int) throws -> ParsedArguments {
    var parsed = ParsedArguments(usage: usage)
    var index = 0
    var optionsEnded = false
    while index < arguments.count {
        let argument = arguments[index]
        index += 1
        if optionsEnded || !argument.hasPrefix("-") || argument == "-" {
            parsed.positionals.append(argument)
            continue
        }
        if argument == "--" {
            optionsEnded = true
            continue
        }
        if argument == "-h" {
            parsed.flags.insert("help")
            continue
        }
        guard argument.hasPrefix("--") else {
            throw CLIError.usage("unknown option '\(argument)'\(suggestion(for: argument, among: specs.map { "--" + $0.name }))", usage: usage)
        }
        var name = String(argument.dropFirst(2))
        var inlineValue: String?
        if let equals = name.firstIndex(of: "=") {
            inlineValue = String(name[name.index(after: equals)...])
            name = String(name[..<equals])
        }
        guard let spec = specs.first(where: { $0.name == name }) else {
            throw CLIError.usage("unknown option '--\(name)'\(suggestion(for: "--" + name, among: specs.map { "--" + $0.name }))", usage: usage)
        }
        if let placeholder = spec.value {
            let value: String
            if let inlineValue {
                value = inlineValue
            } else {
                guard index < arguments.count else {
                    throw CLIError.usage("option '--\(name)' needs a value (\(placeholder))", usage: usage)
                }
                // `--user --fallback` forgot the user: an option is not taken for a value (a
                // value that starts with "--" can still be given as `--name=value`).
                if arguments[index].hasPrefix("--"), arguments[index].count > 2 {
                    throw CLIError.usage("option '--\(name)' needs a value (\(placeholder)), got the option '\(arguments[index])'", usage: usage)
                }
                value = arguments[index]
                index += 1
            }
            if parsed.options[name] != nil, !spec.repeatable {
                throw CLIError.usage("option '--\(name)' is given more than once", usage: usage)
            }
            parsed.options[name, default: []].append(value)
        } else {
            guard inlineValue == nil else {
                throw CLIError.usage("option '--\(name)' takes no value", usage: usage)
            }
            parsed.flags.insert(name)
        }
    }
    if parsed.positionals.count > maxPositionals, !parsed.flags.contains("help") {
        let extra = parsed.positionals[maxPositionals]
        throw CLIError.usage("unexpected argument '\(extra)'", usage: usage)
    }
    return parsed
}

/// `text` as a number written in decimal digits and points alone, or nil: `Double` would also
/// read a sign, hexadecimal (`0x10`, `0x1p3`) and exponents (`1e3`).
func decimalNumber(_ text: some StringProtocol) -> Double? {
    guard text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }) else { return nil }
    return Double(String(text))
}

/// Parses `--map-size` values: `1048576`, `64MiB`, `4GiB`, `1GB`, `512M`.
func parseSize(_ text: String) -> Int? {
    let units: [(String, Int)] = [("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40),
                                  ("KB", 1000), ("MB", 1_000_000), ("GB", 1_000_000_000), ("TB", 1_000_000_000_000),
                                  ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40), ("B", 1)]
    for (suffix, factor) in units where text.hasSuffix(suffix) {
        guard let number = decimalNumber(text.dropLast(suffix.count)), number > 0, number.isFinite,
              number * Double(factor) < Double(Int.max / 2)
        else { return nil }
        return Int(number * Double(factor))
    }
    guard let plain = Int(digits: text), plain > 0 else { return nil }
    return plain
}

/// `bytes` in the largest binary unit that divides it: `64 MiB`, `1 GiB`, `4096 bytes`.
func formatSize(_ bytes: Int) -> String {
    for (suffix, factor) in [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
    where bytes >= factor && bytes % factor == 0 {
        return "\(bytes / factor) \(suffix)"
    }
    return "\(bytes) bytes"
}

/// Parses a non-negative whole number option.
func parseCount(_ text: String, option: String, usage: String) throws -> UInt64 {
    guard let value = UInt64(digits: text) else {
        throw CLIError.usage("option '--\(option)' needs a whole number from 0 to \(UInt64.max), got '\(text)'", usage: usage)
    }
    return value
}

/// Parses a non-negative whole number option that counts things in memory (a limit, a batch
/// size): at most `Int.max`.
func parseSize(_ text: String, option: String, usage: String, minimum: Int = 0) throws -> Int {
    guard let value = Int(digits: text), value >= minimum else {
        throw CLIError.usage("option '--\(option)' needs a whole number from \(minimum) to \(Int.max), got '\(text)'", usage: usage)
    }
    return value
}

/// `--type T` (a ledger name or a HealthKit identifier), or nil when not given.
func parseTypeOption(_ arguments: ParsedArguments) throws -> QuantityType? {
    guard let text = arguments.value("type") else { return nil }
    guard let type = QuantityType(name: text) else {
        throw CLIError.usage("unknown type '\(text)' (expected \(QuantityType.acceptedNames))", usage: arguments.usage)
    }
    return type
}
