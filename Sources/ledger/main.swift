import Foundation
import LedgerCLI

// Writing to a closed pipe (`ledger log | head`) must end quietly, not kill the process.
signal(SIGPIPE, SIG_IGN)
exit(LedgerCommandLine.run(arguments: Array(CommandLine.arguments.dropFirst())))
