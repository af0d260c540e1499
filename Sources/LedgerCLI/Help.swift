/// Help texts in swift-argument-parser's shape: OVERVIEW, USAGE, ARGUMENTS, OPTIONS, SUBCOMMANDS.
enum Help {
    static let synopsis = "ledger <command> [options]"

    static var overview: String {
        var text = """
        OVERVIEW: An event-sourced activity ledger: every step sample, grant and correction is \
        appended once to an append-only log in LMDB; daily totals and other projections are folds \
        over it.

        USAGE: \(synopsis)

        OPTIONS:
          -h, --help              Show help.
          --version               Show the version.

        SUBCOMMANDS:

        """
        let width = Commands.all.map(\.name.count).max()! + 2
        for command in Commands.all {
            text += "  " + command.name.padding(toLength: width, withPad: " ", startingAt: 0) + command.abstract + "\n"
        }
        text += "\n  See 'ledger help <command>' for details. The ledger is --db PATH, else $LEDGER_DB, else ./ledger.db.\n"
        return text
    }

    static func text(for command: Command) -> String {
        var text = "OVERVIEW: \(command.abstract)\n"
        if !command.discussion.isEmpty { text += "\n\(command.discussion)\n" }
        text += "\nUSAGE: \(command.usage)\n"
        if !command.arguments.isEmpty {
            text += "\nARGUMENTS:\n"
            for (name, help) in command.arguments {
                text += "  " + name.padding(toLength: 22, withPad: " ", startingAt: 0) + help + "\n"
            }
        }
        text += "\nOPTIONS:\n"
        for option in command.options {
            let label = option.name == "help" ? "-h, --help" : "--\(option.name)" + (option.value.map { " \($0)" } ?? "")
            let padded = label.count >= 22 ? label + "\n" + String(repeating: " ", count: 24) : label.padding(toLength: 22, withPad: " ", startingAt: 0)
            text += "  " + padded + option.help + "\n"
        }
        return text
    }
}
