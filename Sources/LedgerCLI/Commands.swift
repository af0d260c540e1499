import Foundation
import LedgerCore
import LedgerStore

/// The table of subcommands. Each command's `run` lives in `Commands+Name.swift`.
enum Commands {
    static let all: [Command] = [
        initCommand, appendCommand, logCommand, projectCommand, replayCommand, rebuildCommand,
        verifyCommand, statsCommand, importCommand, subscribeCommand, serveCommand, clientCommand,
    ]

    static func named(_ name: String) -> Command? {
        all.first { $0.name == name }
    }

    /// A command the contract names that this build does not have yet: it says so and exits 1.
    static func planned(_ name: String, _ abstract: String, _ usage: String) -> Command {
        Command(name: name, abstract: abstract + " (not implemented yet)", usage: usage,
                options: [helpOption], acceptsAnyArguments: true) { _, _ in
            throw LedgerError.notImplemented("'ledger \(name)'")
        }
    }
}
