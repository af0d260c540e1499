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

    /// Set by the static `ledger` when it executes its companion, to its process id (which
    /// `execv` keeps), its process name (what the kernel keeps in `/proc/self/comm`: the file
    /// name it was started by, which has no `/`) and its own path: `PID/NAME/PATH`. Either side
    /// heeds it only with its own process id in it: one inherited or copied from elsewhere (a
    /// running server's `/proc/PID/environ` still shows it) means nothing. A static `ledger`
    /// that finds its own was itself started as the companion (a copy of `ledger`, or a link to
    /// it, installed as `ledger-dynamic`), and would otherwise execute itself for ever;
    /// `ledger-dynamic` takes it out of its environment and takes that process name.
    static let companionMarker = "LEDGER_STARTED_BY_STATIC_LEDGER"

    /// A `ledger` process, from its first instruction: `main.swift` of both executables.
    /// `companion` is the executable, in `ledger`'s own folder, that runs the commands that open
    /// shared libraries (`ledger-dynamic` for the static `ledger`; nil for `ledger-dynamic`
    /// itself, which runs every command).
    public static func main(companion: String?) -> Never {
        let arguments = Array(CommandLine.arguments.dropFirst())
        var companionProblem: String?
        if let companion {
            // Before anything else, standard descriptors included: the companion must start with
            // the process's state as it was given (a closed standard output stays closed, below).
            if let name = commandFirst(arguments).first, sharedLibraryCommands.contains(name) {
                companionProblem = runInstead(companion, command: name)
            }
        } else {
            startedAsCompanion()
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
        // A companion that could not be run: help and usage errors are still this binary's, and
        // the command, where it would have run, fails with the problem (`run`).
        exit(run(arguments, in: CommandContext(environment: ProcessInfo.processInfo.environment, stdin: .standardInput,
                                               stdout: .standardOutput, stderr: .standardError, now: EventLog.systemClock,
                                               companionProblem: companionProblem)))
    }

    /// Replaces this process with `companion`, found in the folder of this executable (symbolic
    /// links followed: the kernel's `/proc/self/exe`), given the same arguments, the program name
    /// included, so that its messages say `ledger`. Returns only when that fails, with what to
    /// say where the command would have run.
    static func runInstead(_ companion: String, command: String) -> String {
        let what = "'ledger \(command)' runs in \(companion), the same program linked with the shared libraries that \(command) opens"
        if let (_, path) = ownMarker() {
            let folder = String(decoding: directoryBytes(of: path), as: UTF8.self)
            return "\(what), but the \(companion) in \(folder) is a static ledger itself (a copy of ledger or a link to it). Install the \(companion) built with ledger in its place"
        }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count)
        // A result that fills the buffer may have been cut short. (Without /proc this is never
        // reached: Swift's runtime reads /proc/self/exe before `main`, and stops.)
        guard length > 0, length < buffer.count else {
            return "\(what), and ledger cannot find its own folder (/proc/self/exe: \(String(cString: strerror(errno)))). Run \(companion) \(command) instead"
        }
        // The path as bytes: a folder whose name is not UTF-8 is still the folder.
        let own = buffer[0..<length].map { UInt8(bitPattern: $0) }
        let path = directoryBytes(of: own) + Array("/\(companion)".utf8)
        var name = [UInt8](repeating: 0, count: 64)
        let commDescriptor = open("/proc/self/comm", O_RDONLY | O_CLOEXEC)
        let nameLength = commDescriptor < 0 ? 0 : max(0, read(commDescriptor, &name, name.count))
        if commDescriptor >= 0 { close(commDescriptor) }
        let marker = Array("\(getpid())/".utf8) + name[0..<nameLength].prefix { $0 != UInt8(ascii: "\n") && $0 != UInt8(ascii: "/") }
            + [UInt8(ascii: "/")] + own
        setenv(companionMarker, marker.map { CChar(bitPattern: $0) } + [0], 1)
        _ = execv(path.map { CChar(bitPattern: $0) } + [0], CommandLine.unsafeArgv)
        let reason = String(cString: strerror(errno))
        unsetenv(companionMarker)
        return "\(what), and it could not be run (\(reason)) from \(String(decoding: path, as: UTF8.self)). It is built with ledger and must be installed beside it, executable"
    }

    /// The bytes of `path` up to its last `/`, or `.` when it has none.
    private static func directoryBytes(of path: [UInt8]) -> [UInt8] {
        guard let slash = path.lastIndex(of: UInt8(ascii: "/")) else { return Array(".".utf8) }
        return Array(path[..<slash])
    }

    /// The process name and path of `companionMarker`, when it is set and holds this process's
    /// id; nil otherwise.
    private static func ownMarker() -> (name: [UInt8], path: [UInt8])? {
        guard let value = getenv(companionMarker) else { return nil }
        let bytes = UnsafeBufferPointer(start: value, count: strlen(value)).map { UInt8(bitPattern: $0) }
        let fields = bytes.split(separator: UInt8(ascii: "/"), maxSplits: 2, omittingEmptySubsequences: false)
        guard fields.count == 3, String(decoding: fields[0], as: UTF8.self) == String(getpid()) else { return nil }
        return (Array(fields[1]), Array(bytes[(fields[0].count + fields[1].count + 2)...]))
    }

    /// `ledger-dynamic` started by the static `ledger` (`companionMarker` set): takes the marker
    /// out of its environment (what it starts does not inherit it), and takes the static
    /// process's name (`/proc/self/comm`: the file name it was started by, at most 15 bytes), so
    /// that `pgrep -x ledger`, `ps -C ledger` and `killall ledger` find a running `serve` or
    /// `import` as before.
    private static func startedAsCompanion() {
        guard getenv(companionMarker) != nil else { return }
        defer { unsetenv(companionMarker) }
        guard let (name, _) = ownMarker(), !name.isEmpty else { return }
        let descriptor = open("/proc/self/comm", O_WRONLY | O_CLOEXEC)
        if descriptor >= 0 {
            _ = name.prefix(15).withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            close(descriptor)
        }
    }
}
