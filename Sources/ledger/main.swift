import Foundation
import LedgerCLI

// Writing to a closed pipe (`ledger log | head`) must end quietly, not kill the process.
signal(SIGPIPE, SIG_IGN)

// LMDB reads the ledger through a memory map, and a page past the end of a cut-off
// `data.mdb` raises SIGBUS. Opening checks the root pages (`LedgerError.damaged`); a file cut
// after them but before other pages in use is only found when a read reaches one. That read
// ends the command with one line and exit 1 instead of a crash. (The handler may only call
// async-signal-safe functions: the message is made before it is installed.)
nonisolated(unsafe) let busMessage = strdup("Error: reading the ledger's map failed (SIGBUS): its data.mdb ends before a page it uses (the file was cut short). "
    + "Restore it from a backup (mdb_copy makes one)\n")!
let busMessageLength = strlen(busMessage)
var busAction = sigaction()
busAction.__sigaction_handler.sa_handler = { _ in
    _ = write(2, busMessage, busMessageLength)
    _exit(1)
}
sigemptyset(&busAction.sa_mask)
sigaction(SIGBUS, &busAction, nil)

exit(LedgerCommandLine.run(arguments: Array(CommandLine.arguments.dropFirst())))
