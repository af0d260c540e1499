import Foundation
import LedgerCore
import LedgerStore

extension LedgerCommandLine {
    /// The commands that open shared libraries with `dlopen`: `import` (libxml2, libzip) and
    /// `serve` (libmicrohttpd, GnuTLS). The static `ledger` cannot: a library it opened would
    /// bring a second C library into the process, whose threads and allocations the first one
    /// knows nothing of. It runs them in `ledger-dynamic` (Package.swift, `staticExecutable`).
    static let sharedLibraryCommands: Set<String> = ["import", "serve"]

    /// The name of the executable, next to `ledger`, that runs `sharedLibraryCommands`.
    public static let companionName = "ledger-dynamic"

    /// A `ledger` process, from its first instruction: `main.swift` of both executables.
    /// `companion` is the executable, in `ledger`'s own folder, that runs the commands that open
    /// shared libraries (`ledger-dynamic` for the static `ledger`; nil for `ledger-dynamic`
    /// itself, which runs every command).
    public static func main(companion: String?) -> Never {
        let arguments = Array(CommandLine.arguments.dropFirst())
        // Before anything else, standard descriptors included: the companion must start with
        // the process's state as it was given (a closed standard output stays closed, below).
        if let companion, let name = commandFirst(arguments).first, sharedLibraryCommands.contains(name) {
            exit(runInstead(companion, command: name))
        }
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
        reportDamagedMapOnFaults()

        // Arguments are read as UTF-8. One that is not (a file name in another encoding) reached the
        // command with U+FFFD in place of its bytes, and named a file that does not exist.
        for index in 1..<Int(CommandLine.argc) {
            guard let raw = CommandLine.unsafeArgv[index], String(validatingCString: raw) == nil else { continue }
            exit(refuseNotUTF8(argument: index, of: arguments))
        }
        exit(run(arguments: arguments))
    }

    /// Replaces this process with `companion`, found in the folder of this executable (symbolic
    /// links followed: the kernel's `/proc/self/exe`), given the same arguments, the program name
    /// included, so that its messages say `ledger`. Returns only when that fails, with the exit
    /// code of the error it wrote.
    static func runInstead(_ companion: String, command: String, stderr: OutputSink = .standardError) -> Int32 {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let context = CommandContext(environment: [:], stdin: .standardInput, stdout: .standardOutput, stderr: stderr, now: EventLog.systemClock)
        guard length > 0 else {
            return fail(.runtime("'ledger \(command)' runs in \(companion), next to ledger, but ledger cannot find its own folder (/proc/self/exe: \(String(cString: strerror(errno)))); run \(companion) \(command) directly"), context)
        }
        let own = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let folder = own.lastIndex(of: "/").map { String(own[..<$0]) } ?? "."
        let path = folder + "/" + companion
        execv(path, CommandLine.unsafeArgv)
        let reason = String(cString: strerror(errno))
        return fail(.runtime("'ledger \(command)' runs in \(companion) (the same program, linked with the shared libraries that \(command) opens), which cannot be run from \(path): \(reason). Install \(companion) in the same folder as ledger"), context)
    }
}
