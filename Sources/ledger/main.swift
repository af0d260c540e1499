import Foundation
import LedgerCLI

// Writing to a closed pipe (`ledger log | head`) must end quietly, not kill the process.
signal(SIGPIPE, SIG_IGN)
// A read of a data.mdb cut short ends with one line and exit 1, not a crash.
LedgerCommandLine.reportCutLedgerOnSIGBUS()

exit(LedgerCommandLine.run(arguments: Array(CommandLine.arguments.dropFirst())))
