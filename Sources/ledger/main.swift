import Foundation
import LedgerCLI

// Started with standard input, output or error closed (`ledger … >&-`), the first file the
// ledger opened took its number: LMDB's lock.mdb became descriptor 1, and the command's output
// was written into it. Each closed one is opened on /dev/null first (open takes the lowest
// free number); standard output then fails each write with EBADF, as it would have.
for descriptor in Int32(0)...2 where fcntl(descriptor, F_GETFD) == -1 {
    _ = open("/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY)
    if descriptor == STDOUT_FILENO { OutputSink.standardOutput.startedClosed() }
}
// Writing to a closed pipe (`ledger log | head`) must end quietly, not kill the process.
signal(SIGPIPE, SIG_IGN)
// A read of a data.mdb cut short or damaged ends with one line and exit 1, not a crash.
LedgerCommandLine.reportDamagedMapOnFaults()

// Arguments are read as UTF-8. One that is not (a file name in another encoding) reached the
// command with U+FFFD in place of its bytes, and named a file that does not exist.
for index in 1..<Int(CommandLine.argc) {
    guard let raw = CommandLine.unsafeArgv[index], String(validatingCString: raw) == nil else { continue }
    exit(LedgerCommandLine.refuseNotUTF8(argument: index, of: Array(CommandLine.arguments.dropFirst())))
}

exit(LedgerCommandLine.run(arguments: Array(CommandLine.arguments.dropFirst())))
