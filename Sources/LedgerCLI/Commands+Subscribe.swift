import Foundation
import LedgerCore
import LedgerStore
import Projections
import Synchronization

/// Set by the SIGINT/SIGTERM handler of long-running commands.
let interrupted = Atomic<Bool>(false)
/// Set when the interruption was SIGTERM (a normal shutdown for `serve`).
let terminatedBySIGTERM = Atomic<Bool>(false)
/// Set by `catchInterrupts(interruptingWrites: true)` (`subscribe`): after a signal, writes go
/// on only while the reader takes them (`OutputSink`). Other commands' writes wait for their
/// reader as before (`import`'s last message to a pager).
let writesDrainAfterInterrupt = Atomic<Bool>(false)

/// Makes SIGINT and SIGTERM set `interrupted` instead of killing the process, so long-running
/// commands can stop cleanly and exit 130.
///
/// With `interruptingWrites`, a write blocked on a full pipe returns at the signal instead of
/// resuming (no `SA_RESTART`), and `OutputSink` writes the rest only while the reader takes it
/// (a reader that stopped reading does not hold `subscribe` past Ctrl-C). `serve`
/// keeps restarting system calls, so a commit's flush is never cut by its own shutdown.
func catchInterrupts(interruptingWrites: Bool = false) {
    unblockInterrupts()
    if interruptingWrites { writesDrainAfterInterrupt.store(true, ordering: .relaxed) }
    // A SIGINT the parent ignored stays ignored, as programs that catch it leave it: a
    // non-interactive shell starts `ledger serve &` with SIGINT ignored, so that Ctrl-C at the
    // terminal, meant for the script, does not stop the server it started. SIGTERM is always
    // caught: it is how a service manager, or that script, stops the command cleanly.
    if !isIgnored(SIGINT) {
        installHandler(SIGINT, restarting: !interruptingWrites) { _ in interrupted.store(true, ordering: .relaxed) }
    }
    installHandler(SIGTERM, restarting: !interruptingWrites) { _ in
        terminatedBySIGTERM.store(true, ordering: .relaxed)
        interrupted.store(true, ordering: .relaxed)
    }
}

/// The line `exitAtInterrupt`'s handler writes: made before the handler is installed, because
/// a handler may only call async-signal-safe functions.
nonisolated(unsafe) private var interruptLine: UnsafeMutablePointer<CChar>?
nonisolated(unsafe) private var interruptLineLength = 0

/// Makes SIGINT and SIGTERM end a command that only reads at once, writing "Interrupted:
/// `message`" to stderr and exiting 130: with nothing to give up or finish, it need not reach
/// a point where it looks at `interrupted` (verify's three walks would each need one). SIGINT
/// stays ignored when the parent ignored it, as in `catchInterrupts`. Returns what puts the
/// handlers before it back, for when the command is done (it may run inside a test's process).
func exitAtInterrupt(saying message: String, stderrIsTerminal: Bool) -> () -> Void {
    // On a terminal the line starts on a line of its own, after a progress count or the `^C`.
    interruptLine = strdup((stderrIsTerminal ? "\n" : "") + "Interrupted: \(message)\n")
    interruptLineLength = strlen(interruptLine!)
    unblockInterrupts()
    let handler: @convention(c) (Int32) -> Void = { _ in
        _ = write(2, interruptLine, interruptLineLength)
        _exit(130)
    }
    var previous: [(Int32, sigaction)] = []
    for signal in [SIGINT, SIGTERM] where signal == SIGTERM || !isIgnored(SIGINT) {
        var before = sigaction()
        sigaction(signal, nil, &before)
        previous.append((signal, before))
        installHandler(signal, restarting: true, handler)
    }
    return {
        for var (signal, action) in previous { sigaction(signal, &action, nil) }
    }
}

/// A parent may have started us with SIGINT and SIGTERM blocked (threads of a test runner
/// often block all signals, and the mask is inherited): unblocked, or they never arrive.
private func unblockInterrupts() {
    var signals = sigset_t()
    sigemptyset(&signals)
    sigaddset(&signals, SIGINT)
    sigaddset(&signals, SIGTERM)
    pthread_sigmask(SIG_UNBLOCK, &signals, nil)
}

/// Whether `signal`'s disposition is `SIG_IGN` (`sigaction`).
func isIgnored(_ signal: Int32) -> Bool {
    var current = sigaction()
    guard sigaction(signal, nil, &current) == 0, let handler = current.__sigaction_handler.sa_handler else { return false }
    return unsafeBitCast(handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
}

/// `sigaction` for `signal`; with `restarting`, a system call it interrupts resumes (`SA_RESTART`).
func installHandler(_ signal: Int32, restarting: Bool, _ handler: @convention(c) (Int32) -> Void) {
    var action = sigaction()
    action.__sigaction_handler.sa_handler = handler
    sigemptyset(&action.sa_mask)
    action.sa_flags = restarting ? Int32(SA_RESTART) : 0
    sigaction(signal, &action, nil)
}

/// The one line a SIGBUS writes: made before the handler is installed, because a handler may
/// only call async-signal-safe functions.
nonisolated(unsafe) private let cutLedgerMessage = strdup(
    "Error: reading the ledger's map failed (SIGBUS): its data.mdb ends before a page it uses (the file was cut short). "
        + "Restore it from a backup ('ledger backup' makes one)\n")!
private let cutLedgerMessageLength = strlen(cutLedgerMessage)

/// What SIGSEGV did before `reportDamagedMapOnFaults`: put back for a fault outside a transaction.
nonisolated(unsafe) private var segvBefore = sigaction()

/// The one line a SIGSEGV inside a transaction writes (see `reportDamagedMapOnFaults`).
nonisolated(unsafe) private let damagedMapMessage = strdup(
    "Error: reading the ledger's map failed (SIGSEGV, inside a transaction): its data.mdb is damaged (a page LMDB followed holds bytes it never wrote there). "
        + "Restore it from a backup ('ledger backup' makes one)\n")!
private let damagedMapMessageLength = strlen(damagedMapMessage)

extension LedgerCommandLine {
    /// LMDB reads the ledger through a memory map, and a page past the end of a cut-off
    /// `data.mdb` raises SIGBUS. Opening checks the root pages (`LedgerError.damaged`); a file
    /// cut after them but before other pages in use is only found when a read reaches one.
    /// That read then ends the process with one line and exit 1 instead of a crash.
    public static func reportDamagedMapOnFaults() {
        _ = cutLedgerMessageLength  // initializes both globals now, not lazily inside the handler
        installHandler(SIGBUS, restarting: true) { _ in
            _ = write(2, cutLedgerMessage, cutLedgerMessageLength)
            _exit(1)
        }
        // LMDB trusts its pages: one overwritten with other bytes can send it through a null
        // or wild pointer. A SIGSEGV on a thread with a transaction open ends the process the
        // same way, nothing of an uncommitted write kept; any other is left to crash as one
        // (a bug, not the ledger's file).
        _ = damagedMapMessageLength
        Environment.prepareFaultCheck()
        sigaction(SIGSEGV, nil, &segvBefore)
        var action = sigaction()
        action.__sigaction_handler.sa_sigaction = { signal, info, _ in
            // A fault the kernel raised (`si_code` > 0; `kill` and `raise` give 0 or less)
            // on a thread inside a transaction: the map's pages.
            let faulted = (info?.pointee.si_code ?? 0) > 0
            if faulted, Environment.threadHasTransaction {
                _ = write(2, damagedMapMessage, damagedMapMessageLength)
                _exit(1)
            }
            // Otherwise the action there was before (the Swift runtime's backtracer, or the
            // default) takes it: a fault by returning, which runs the faulting instruction
            // again with its own address; a signal sent, by sending it again.
            sigaction(signal, &segvBefore, nil)
            if !faulted { raise(signal) }
        }
        sigemptyset(&action.sa_mask)
        // On the thread's alternate stack when it has one (the runtime's backtracer gives
        // threads one), so that a stack overflow still reaches the backtracer.
        action.sa_flags = Int32(SA_SIGINFO | SA_RESTART | SA_ONSTACK)
        sigaction(SIGSEGV, &action, nil)
    }
}

extension Commands {
    static let subscribeCommand = Command(
        name: "subscribe",
        abstract: "Stream projection changes (or events) as NDJSON until interrupted.",
        usage: "ledger subscribe NAME|events [--db PATH] [--user U] [--type T] [--from SEQ|SEQ.K|now]",
        discussion: """
        Prints every change caused by events after SEQ, in seq order, then live changes as \
        other processes append, one JSON object per line, each written out at once: \
        {"seq":N,"projection":"daily","row":{…},"previous":{…}|null}. Resume after a \
        disconnect with --from the last seq you saw: nothing is lost or repeated. A process \
        killed outright may stop inside a seq that changed many rows: resume with --from \
        SEQ.K, where K+1 is the number of lines of SEQ you have (as SSE event ids). Changes \
        are read from the log, so a slow reader never slows writers. Ctrl-C ends it with exit \
        130, after the last change of a seq (a reader that takes nothing for 2 s may find a \
        line cut short). A reader that goes away ends it with exit 1.
        """,
        arguments: [("NAME", "daily, daily-steps, per-source, last-known, grants, or events for the events themselves.")],
        options: [helpOption, dbOption,
                  OptionSpec(name: "user", value: "U", help: "Only changes of user U."),
                  OptionSpec(name: "type", value: "T", help: "Only changes of type T."),
                  OptionSpec(name: "from", value: "SEQ|SEQ.K|now", help: "Start after this seq, or after change K of SEQ (default: now, only new changes).")],
        maxPositionals: 1
    ) { arguments, context in
        let usage = arguments.usage
        guard let name = arguments.positionals.first else {
            throw CLIError.usage("missing NAME (\(projectionNames.joined(separator: ", ")), or events)", usage: usage)
        }
        var filter = ChangeFilter(user: try arguments.name("user"))
        let eventsOnly = name == "events"
        if !eventsOnly {
            guard let (projection, impliedType) = ProjectionName.parse(name) else {
                throw CLIError.usage("unknown projection '\(name)'\(suggestion(for: name, among: projectionNames + ["events"]))", usage: usage)
            }
            filter.projection = projection
            filter.type = impliedType
        }
        if let type = try parseTypeOption(arguments) {
            if let conflict = ProjectionName.typeConflict(implied: filter.type, given: type, spelled: arguments.value("type")!, option: "--type") {
                throw CLIError.usage(conflict, usage: usage)
            }
            filter.type = type
        }
        let log = try context.openLog(arguments, create: false)
        var cursor: UInt64
        // Changes of seq `cursor + 1` the reader already has (`--from SEQ.K`).
        var skipOfNext = 0
        switch arguments.value("from") ?? "now" {
        case "now": cursor = try log.head().seq
        case let text where text.contains(".") && !eventsOnly:
            guard let position = ChangePosition(text) else {
                throw CLIError.usage("'--from' must be a seq, now, or SEQ.K (the changes 0…K of seq SEQ already had), got '\(text)'", usage: usage)
            }
            (cursor, skipOfNext) = (position.after, position.sentOfNext)
        case let text:
            guard let seq = UInt64(digits: text) else {
                throw CLIError.usage(eventsOnly ? "'--from' must be a seq or now, got '\(text)'"
                                                : "'--from' must be a seq, now, or SEQ.K (the changes 0…K of seq SEQ already had), got '\(text)'", usage: usage)
            }
            cursor = seq
        }
        if let given = arguments.value("from"), given != "now",
           let refusal = ChangePosition(after: cursor, sentOfNext: skipOfNext).pastHead(try log.head().seq, given: given) {
            throw CLIError.runtime(refusal)
        }
        catchInterrupts(interruptingWrites: true)
        /// A reader that went away ends the stream, as it ends any Unix filter's output
        /// (SIGPIPE is ignored, so writes fail instead): `subscribe | head -n 1` ran for ever.
        func checkOutput() throws {
            if let failure = context.stdout.unwritable {
                throw CLIError.runtime("cannot write to standard output (\(failure))")
            }
        }
        while !interrupted.load(ordering: .relaxed) {
            let transaction = log.lastTransactionID
            var wrote = false
            if eventsOnly {
                let page = try log.records(after: cursor, limit: 1024)
                for record in page {
                    if filter.user != nil || filter.type != nil,
                       try !log.eventPasses(try record.typedEvent(), user: filter.user, type: filter.type) {
                        cursor = record.seq
                        continue
                    }
                    context.stdout.write(bytes: record.json + [0x0A])
                    cursor = record.seq
                }
                // A page with no match still moved the cursor: read on without waiting (a
                // review: each such page waited a second, so catching up with a selective
                // filter took a second per 1,024 events).
                wrote = !page.isEmpty
            } else {
                let (changes, through) = try log.changes(after: cursor, filter: filter)
                var lines: [UInt8] = []
                var skipped = 0
                for change in changes {
                    if change.seq == cursor &+ 1, skipped < skipOfNext {
                        skipped += 1
                        continue
                    }
                    lines += change.json
                    lines.append(0x0A)
                }
                // One write for the page, which ends between two seqs: a process killed
                // outright then stops between seqs, unless that one write is cut short.
                if !lines.isEmpty { context.stdout.write(bytes: lines) }
                if through > cursor { skipOfNext = 0 }
                // A page with no match still moved the cursor: read on without waiting.
                wrote = !changes.isEmpty || through != cursor
                cursor = through
            }
            // Nothing new: wait for LMDB's last transaction to move (another process committing),
            // and look again at least every second whatever it says.
            if !wrote {
                var waited = 0
                while log.lastTransactionID == transaction, !interrupted.load(ordering: .relaxed), waited < 100 {
                    usleep(10_000)
                    waited += 1
                }
            }
            try checkOutput()
        }
        return 130
    }

    static let clientCommand = Command(
        name: "client",
        abstract: "Manage API clients of 'ledger serve' and their tokens.",
        usage: "ledger client add NAME [--admin] | ledger client list [--format FORMAT] | ledger client rotate NAME | ledger client remove NAME [--db PATH]",
        discussion: """
        'add' prints the new client's bearer token once; only its SHA-256 digest is stored. \
        'rotate' replaces a client's token (a leaked one, or on a schedule): the new one is \
        printed once, the old one stops working at once and streams opened with it end; the \
        client keeps its name, admin flag and grants. An \
        admin client may do anything; any other client may read and subscribe to a user's data \
        only for the types that user granted it 'read', and append samples only for types \
        granted 'share'.
        """,
        arguments: [("add NAME", "Create a client and print its token."), ("list", "List clients."),
                    ("rotate NAME", "Give a client a new token and print it; the old one stops working at once."),
                    ("remove NAME", "Remove a client; its token stops working at once.")],
        options: [helpOption, dbOption, formatOption,
                  OptionSpec(name: "admin", value: nil, help: "With add: the client may do anything.")],
        maxPositionals: 2
    ) { arguments, context in
        let usage = arguments.usage
        let action = arguments.positionals.first
        /// An option or a NAME the action has no use for is a usage error, not ignored
        /// (`client list --admin` listed every client, admin or not).
        func refuse(_ options: [String], names: Int) throws {
            for name in options where arguments.flags.contains(name) || arguments.options[name] != nil {
                throw CLIError.usage("--\(name) does not apply to 'client \(action ?? "")'", usage: usage)
            }
            if arguments.positionals.count > names + 1 {
                throw CLIError.usage("'client \(action ?? "")' takes \(names == 0 ? "no NAME" : "one NAME"), got '\(arguments.positionals[names + 1])'", usage: usage)
            }
        }
        switch action {
        case "add":
            try refuse(["format"], names: 1)
            guard arguments.positionals.count == 2 else { throw CLIError.usage("missing NAME", usage: usage) }
            // A ledger this command creates is removed again when it fails (a refused name left
            // an empty ledger behind: an audit), as `append` removes one.
            try context.withCreatedLog(arguments) { log in
                do {
                    let token = try log.addClient(name: arguments.positionals[1], admin: arguments.has("admin"))
                    context.stdout.write(token + "\n")
                    // The token is shown only once: if it reached nobody (standard output closed,
                    // full, or its reader gone), the client is removed again rather than left
                    // with a token no one has.
                    if let failure = context.stdout.failed {
                        try log.removeClient(name: arguments.positionals[1])
                        throw CLIError.runtime("cannot write the token to standard output (\(failure)); the client was not added")
                    }
                    context.stderr.write("client '\(visibleCharacters(arguments.positionals[1]))' added\(arguments.has("admin") ? " (admin)" : ""); the token above is shown only once\n")
                } catch let error as EventLog.ClientError {
                    throw CLIError.data(error.description)
                }
            }
        case "list":
            try refuse(["admin"], names: 0)
            let format = try OutputFormat.resolve(arguments.value("format"), sink: context.stdout, usage: usage)
            let log = try context.openLog(arguments, create: false)
            var rows = RowSet(columns: ["name", "admin", "created"])
            for client in try log.clients() {
                rows.append([.string(client.name), .bool(client.admin), .string(client.created.rfc3339)])
            }
            rows.write(format, to: context.stdout)
        case "rotate":
            try refuse(["admin", "format"], names: 1)
            guard arguments.positionals.count == 2 else { throw CLIError.usage("missing NAME", usage: usage) }
            let name = arguments.positionals[1]
            let log = try context.openLog(arguments, create: false)
            do {
                let (token, previous) = try log.rotateClient(name: name)
                context.stdout.write(token + "\n")
                // As for `add`: a token that reached nobody would leave the client locked out,
                // so the old one is put back.
                if let failure = context.stdout.failed {
                    try log.restoreClientToken(name: name, previousDigest: previous, replacing: token)
                    throw CLIError.runtime("cannot write the token to standard output (\(failure)); the client keeps its old token")
                }
                context.stderr.write("client '\(visibleCharacters(name))' has a new token (above, shown only once); the old one no longer works\n")
            } catch let error as EventLog.ClientError {
                throw CLIError.data(error.description)
            }
        case "remove":
            try refuse(["admin", "format"], names: 1)
            guard arguments.positionals.count == 2 else { throw CLIError.usage("missing NAME", usage: usage) }
            let log = try context.openLog(arguments, create: false)
            do {
                try log.removeClient(name: arguments.positionals[1])
                context.stderr.write("client '\(visibleCharacters(arguments.positionals[1]))' removed\n")
            } catch let error as EventLog.ClientError {
                throw CLIError.data(error.description)
            }
        case let other:
            throw CLIError.usage(other.map { "unknown action '\($0)' (expected add, list, rotate or remove)" } ?? "missing action (add, list, rotate or remove)", usage: usage)
        }
        return 0
    }
}
