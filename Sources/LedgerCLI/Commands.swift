import Foundation
import LedgerCore
import LedgerStore

/// The table of subcommands. Each command's `run` lives in `Commands+Name.swift`.
enum Commands {
    static let all: [Command] = [
        initCommand, appendCommand, logCommand, projectCommand, replayCommand, rebuildCommand,
        verifyCommand, statsCommand, backupCommand, importCommand, subscribeCommand, serveCommand, clientCommand,
    ]

    static func named(_ name: String) -> Command? {
        all.first { $0.name == name }
    }
}
