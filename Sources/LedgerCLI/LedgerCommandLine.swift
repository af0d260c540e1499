import Foundation
import LedgerCore
import LedgerStore

/// The `ledger` command line, callable in process for tests.
public enum LedgerCommandLine {
    public static let version = "0.1.0"

    /// Runs one `ledger` invocation. `arguments` excludes the program name.
    /// Returns the exit code (SPEC §5): 0, 1 runtime, 64 usage, 65 data, 130 interrupted.
    public static func run(arguments: [String],
                           environment: [String: String] = ProcessInfo.processInfo.environment,
                           stdin: InputSource = .standardInput,
                           stdout: OutputSink = .standardOutput,
                           stderr: OutputSink = .standardError,
                           clock: @escaping @Sendable () -> Timestamp = EventLog.systemClock) -> Int32 {
        run(arguments, in: CommandContext(environment: environment, stdin: stdin, stdout: stdout, stderr: stderr, now: clock))
    }

    /// `run` in `context`: the process's own (`main`, whose context may carry a companion
    /// problem) or one made of `run`'s arguments.
    static func run(_ arguments: [String], in context: CommandContext) -> Int32 {
        let code = run(arguments, context)
        // A command that succeeded but whose output went nowhere (`ledger log > /dev/full`, or
        // standard output closed) fails, as `cat` does: a script must not take a lost export for
        // one written. (What the command did, an append say, is done; the message says so.)
        if code == 0, let reason = context.stdout.lostOutput {
            return fail(.runtime("cannot write to standard output (\(reason)); the command ran, but what it printed is lost"), context)
        }
        return code
    }

    /// Refuses an argument that is not UTF-8 (argument `index`, counting from 1, of the
    /// process's `arguments`, read with U+FFFD in place of its bytes): exit 64 with the usage
    /// line of the command named, as other usage errors (SPEC §5).
    public static func refuseNotUTF8(argument index: Int, of arguments: [String],
                                     stderr: OutputSink = .standardError) -> Int32 {
        let context = CommandContext(environment: [:], stdin: .standardInput, stdout: .standardOutput, stderr: stderr, now: EventLog.systemClock)
        let usage = commandFirst(arguments).first.flatMap(Commands.named)?.usage ?? Help.synopsis
        return fail(.usage("argument \(index) is not valid UTF-8; ledger reads its arguments as UTF-8 (rename such a file, or link to it under a UTF-8 name)", usage: usage), context)
    }

    /// `ledger --db PATH COMMAND …` as well as `ledger COMMAND --db PATH …` (an audit: the
    /// first was an unknown option), as `git -C` comes first: the ledger is every command's.
    /// It is handed to the command, which refuses it if it has no use for one (`help` and
    /// `--version` too, as they would after their name).
    static func commandFirst(_ given: [String]) -> [String] {
        guard let first = given.first, first == "--db" || first.hasPrefix("--db=") else { return given }
        let width = first == "--db" ? 2 : 1
        guard given.count > width else { return given }
        return [given[width]] + given[0..<width] + given[(width + 1)...]
    }

    private static func run(_ given: [String], _ context: CommandContext) -> Int32 {
        let stdout = context.stdout
        let arguments = commandFirst(given)
        guard let first = arguments.first else {
            // A missing command is a usage error (SPEC §5: 64), as a missing argument is; a
            // script that runs `ledger $CMD` with CMD unset must not see success.
            return fail(.usage("no command given; 'ledger help' lists the commands", usage: Help.synopsis), context)
        }
        if first == "--help" || first == "-h" || first == "help" {
            // `help COMMAND`, and `--help COMMAND` as people also type it; `help --help` asks
            // for this overview. Anything more is a mistake, not something to ignore.
            let rest = arguments.dropFirst().filter { !["--help", "-h"].contains($0) }
            guard rest.count <= 1 else {
                return fail(.usage("'\(first)' takes at most one command name, got \(rest.count) arguments", usage: Help.synopsis), context)
            }
            if let name = rest.first, name != "help" {
                guard let command = Commands.named(name) else {
                    return fail(.usage("unknown command '\(name)'\(suggestion(for: name, among: Commands.all.map(\.name)))", usage: Help.synopsis), context)
                }
                stdout.write(Help.text(for: command))
                return 0
            }
            stdout.write(Help.overview)
            return 0
        }
        if first == "--version" || first == "version" {
            guard arguments.count == 1 else {
                return fail(.usage("'\(first)' takes no arguments, got '\(arguments[1])'", usage: Help.synopsis), context)
            }
            stdout.write("ledger \(version)\n")
            return 0
        }
        guard let command = Commands.named(first) else {
            let message = first.hasPrefix("-")
                ? "unknown option '\(first)'\(suggestion(for: first, among: ["--help", "--version"]))"
                : "unknown command '\(first)'\(suggestion(for: first, among: Commands.all.map(\.name)))"
            return fail(.usage(message, usage: Help.synopsis), context)
        }
        var parsedArguments: ParsedArguments?
        do {
            let parsed = try parse(Array(arguments.dropFirst()), specs: command.options, usage: command.usage,
                                   maxPositionals: command.maxPositionals)
            parsedArguments = parsed
            if parsed.flags.contains("help") {
                stdout.write(Help.text(for: command))
                return 0
            }
            if let problem = context.companionProblem, sharedLibraryCommands.contains(command.name) {
                return fail(.runtime(problem), context)
            }
            return try command.run(parsed, context)
        } catch let error as CLIError {
            return fail(error, context)
        } catch let error as InputError {
            return fail(.data(error.description), context)
        } catch let error as LedgerError {
            return fail(.runtime(error.description), context)
        } catch let error as LMDBError {
            // A full disk met outside an append's own check (`rebuild`'s commit, the lock file
            // LMDB makes on opening): said as one, not as a storage failure (an audit).
            if error.code == ENOSPC {
                let ledger = parsedArguments.flatMap { try? context.databasePath($0) }.map { "the ledger at '\($0)'" } ?? "the ledger"
                return fail(.runtime("the disk holding \(ledger) is full (\(error.description)); nothing of this command was committed and every committed event is intact. Free space and retry"), context)
            }
            return fail(.runtime("storage failure: \(error.description)"), context)
        } catch {
            return fail(.runtime("\(error)"), context)
        }
    }

    /// Writes the error's one line. Whatever a message quotes (an argument, a path, a value
    /// from a file) may hold a newline or run to megabytes: it is made visible and cut here,
    /// so every error stays one line.
    static func fail(_ error: CLIError, _ context: CommandContext) -> Int32 {
        switch error {
        case .usage(let message, let usage):
            context.stderr.write("Error: \(visibleCharacters(message))\nUsage: \(usage)\n")
            return 64
        case .runtime(let message):
            context.stderr.write("Error: \(visibleCharacters(message))\n")
            return 1
        case .data(let message):
            context.stderr.write("Error: \(visibleCharacters(message))\n")
            return 65
        case .interrupted(let message):
            // On a terminal the line is cleared first: it holds the `^C` the terminal echoed
            // when no progress line ended it (an audit saw `^CInterrupted: …`).
            let clear = context.stderr.isTerminal ? "\r\u{1B}[K" : ""
            context.stderr.write("\(clear)Interrupted: \(visibleCharacters(message))\n")
            return 130
        }
    }
}

/// What a command may use: its streams and the process environment, injected for tests.
struct CommandContext {
    var environment: [String: String]
    var stdin: InputSource
    var stdout: OutputSink
    var stderr: OutputSink
    /// The clock for "today"; injected so tests can fix it.
    var now: @Sendable () -> Timestamp
    /// Why the static `ledger` could not run its companion, `ledger-dynamic`, for a command
    /// that opens shared libraries (`LedgerCommandLine.main`); nil when it did not need to.
    var companionProblem: String?

    /// `--db`, else `$LEDGER_DB`, else `./ledger.db` (SPEC §2). An empty `--db` is a usage
    /// error, not the default: `--db "$DIR"` with the variable unset would otherwise write to
    /// whatever ledger.db the working directory holds. (An empty `LEDGER_DB` counts as unset,
    /// as shells' empty variables usually do.)
    func databasePath(_ arguments: ParsedArguments) throws -> String {
        if let path = arguments.value("db") {
            guard !path.isEmpty else { throw CLIError.usage("--db must not be empty", usage: arguments.usage) }
            return path
        }
        if let path = environment["LEDGER_DB"], !path.isEmpty { return path }
        return "ledger.db"
    }

    func openLog(_ arguments: ParsedArguments, create: Bool, mapSize: Int? = nil, zone: Zone? = nil) throws -> EventLog {
        try EventLog(path: try databasePath(arguments), create: create, mapSize: mapSize, zone: zone)
    }

    /// Runs `body` with the ledger, created if missing. When `body` throws and this run created
    /// the ledger, it is removed, but only while it holds no event and no client and no other
    /// process has it open (`EventLog.removeIfUntouched`): another process (a second import of
    /// the same file, a server) may be committing to it.
    func withCreatedLog<R>(_ arguments: ParsedArguments, mapSize: Int? = nil, zone: Zone? = nil,
                           _ body: (EventLog) throws -> R) throws -> R {
        let path = try databasePath(arguments)
        // A ledger is its data file: an empty directory given as `--db` (made ahead by a
        // script, say) holds none, and is left as it was found, empty (an audit: a refused
        // append left a new ledger in it).
        let existed = FileManager.default.fileExists(atPath: path + "/data.mdb")
        var folder = stat()
        let folderExisted = stat(path, &folder) == 0 && (folder.st_mode & S_IFMT) == S_IFDIR
        // The folders above it that opening will make (`--db new/deep/x.db`), deepest first:
        // removed again with the ledger, when empty (an audit: a refused first append left
        // `new/deep/` behind).
        var madeAbove: [String] = []
        var above = parentPath(path)
        while !folderExisted, !above.isEmpty, above != "/", access(above, F_OK) != 0, errno == ENOENT {
            madeAbove.append(above)
            above = parentPath(above)
        }
        var opened: EventLog?
        do {
            let log = try openLog(arguments, create: true, mapSize: mapSize, zone: zone)
            opened = log
            return try body(log)
        } catch {
            if !existed {
                let removed = if let opened { opened.removeIfUntouched() } else { EventLog.removeUnopened(path: path) }
                if removed, folderExisted { mkdir(path, folder.st_mode & 0o7777) }
                // (`new/deep/..` names a folder already in the list: rmdir cannot take it. And a
                // path through `..` may name a folder that was there: `a/../b`, missing only
                // while `a` was, is `./b` once the ledger's folders are made (a review: a
                // refused `--db a/../b/../c` removed an empty `./b` of the user's).)
                if removed {
                    for made in madeAbove where !made.split(separator: "/").contains("..") && !made.hasSuffix("/.") && made != "." {
                        if rmdir(made) != 0 { break }
                    }
                }
                // "The log's head is 0, not the expected 3" hid that there was no ledger at
                // all (a mistyped --db, say: a new-user audit).
                if case LedgerError.headMismatch? = error as? LedgerError, removed {
                    throw CLIError.runtime("\(error); there was no ledger at \(path), and none was made")
                }
            }
            throw error
        }
    }
}

/// One `ledger` subcommand.
struct Command: Sendable {
    var name: String
    var abstract: String
    var usage: String
    var discussion: String = ""
    var arguments: [(name: String, help: String)] = []
    var options: [OptionSpec]
    var maxPositionals = 0
    var run: @Sendable (ParsedArguments, CommandContext) throws -> Int32
}
