import LedgerCore

/// Failures of the ledger as a whole (as opposed to one bad input field, `InputError`).
public enum LedgerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No ledger at the path and the command does not create one.
    case noLedger(path: String)
    /// `init` on a ledger that exists with another default zone.
    case alreadyInitialized(path: String, zone: String)
    /// The ledger was written by a newer release.
    case unsupportedFormat(found: String)
    /// `--expect-head` / `If-Match` did not match the log's head.
    case headMismatch(expected: UInt64, actual: UInt64)
    /// A stored record is damaged or the hash chain is broken at `seq`.
    case corrupt(seq: UInt64, reason: String)
    /// A stored projection differs from a fresh fold of the log.
    case projectionMismatch(projection: String, row: String)
    /// The stored projections, of this build's fold version, stop before the log's head.
    case projectionsBehind(position: UInt64, head: UInt64)
    /// An entry of the fold's stored state differs from a fresh fold of the log.
    case stateMismatch(table: String, key: String)
    /// One of the log's own indexes (`ids`, `samples`, `sync`) disagrees with the log.
    case indexMismatch(index: String, key: String, reason: String)
    /// The disk (or the file system's quota) is full; nothing of the batch was written.
    case diskFull(path: String)
    /// The ledger's directory could not be made.
    case cannotCreate(path: String, reason: String)
    /// The ledger is on a read-only file system, and what was asked cannot be done there.
    case readOnlyMedia(path: String, reason: String)
    /// This process may read the ledger's files but not write them, and what was asked writes.
    case notWritable(path: String, reason: String)
    /// This process may not open the ledger's files even to read them.
    case permissionDenied(path: String, reason: String)
    /// The path is a file, where a ledger is a directory.
    case notADirectory(path: String, what: String)
    /// The path holds an LMDB environment that is not a ledger.
    case notALedger(path: String, reason: String)
    /// One of the ledger's two files is not a regular file (a symbolic link, a FIFO, …).
    case notRegularFile(path: String, file: String, what: String)
    /// The ledger's file is damaged in a way no command can read past.
    case damaged(path: String, reason: String)
    /// `backup` could not write its copy at `path`; nothing of it was left there.
    case backupFailed(path: String, reason: String)
    /// The map is full and this process cannot map a larger one (its address space is limited,
    /// as by `ulimit -v`, or used up).
    case mapCannotGrow(path: String, bytes: Int?, reason: String)

    public var description: String {
        switch self {
        case .noLedger(let path):
            "no ledger at '\(path)'; create one with 'ledger init --db \(path)' or by appending to it"
        case .alreadyInitialized(let path, let zone):
            "a ledger already exists at '\(path)' with default zone \(zone), and it holds events: its zone cannot be changed, since every day of every user without a profile zone would move (a 'profile' event sets a user's zone)"
        case .unsupportedFormat(let found):
            "the ledger's format is \(found), newer than this release reads (1 to 4); upgrade ledger"
        case .headMismatch(let expected, let actual):
            "the log's head is \(actual), not the expected \(expected); nothing was written"
        case .corrupt(let seq, let reason):
            "seq \(seq) is corrupt: \(reason)"
        case .projectionMismatch(let projection, let row):
            "the stored '\(projection)' projection differs from a fresh fold of the log at row \(row); run 'ledger rebuild'"
        case .projectionsBehind(let position, let head):
            "the stored projections were folded up to seq \(position), but the log's head is seq \(head), and appends fold in the transaction that writes their events: events were added to the log by hand, or the projections altered. 'ledger verify' checks the log; 'ledger rebuild' then folds them again"
        case .stateMismatch(let table, let key):
            "the projections' stored state ('\(table)') differs from a fresh fold of the log at key \(key); run 'ledger rebuild'"
        case .indexMismatch(let index, let key, let reason):
            "the log's index '\(index)' disagrees with the log at key \(key): \(reason); run 'ledger rebuild --indexes'"
        case .cannotCreate(let path, let reason):
            "cannot create a ledger at '\(path)': \(reason)"
        case .readOnlyMedia(let path, let reason):
            "the ledger at '\(path)' is on a read-only file system: \(reason)"
        case .notWritable(let path, let reason):
            "the ledger at '\(path)' may be read but not written by this user: \(reason)"
        case .permissionDenied(let path, let reason):
            "cannot open the ledger at '\(path)': permission denied on its directory or its files: \(reason)"
        case .notADirectory(let path, let what):
            "'\(path)' is \(what), not a ledger directory; point --db at a ledger directory"
        case .notALedger(let path, let reason):
            "'\(path)' holds an LMDB environment that is not a ledger (\(reason)); nothing was read or written. Point --db at a ledger directory"
        case .notRegularFile(let path, let file, let what):
            "the ledger at '\(path)' has a \(file) that is \(what), not a regular file: LMDB would write through it, so the ledger was not opened and nothing was written. Replace it with a regular file (a copy of the ledger made by 'ledger backup' or mdb_copy has both)"
        case .damaged(let path, let reason):
            "the ledger at '\(path)' is damaged: \(reason). Restore it from a backup ('ledger backup' makes one)"
        case .backupFailed(let path, let reason):
            "cannot back up to '\(path)': \(reason); nothing was written there"
        case .mapCannotGrow(let path, let bytes, let reason):
            "the ledger at '\(path)' needs \(bytes.map { "a map of \($0) bytes" } ?? "a larger map (another process grew it)") and this process cannot map that much (\(reason); is its address space limited, as by 'ulimit -v'?); nothing of this write was committed, and the ledger is intact"
        case .diskFull(let path):
            "the disk holding '\(path)' is full; nothing of this batch was written and every committed event is intact. Free space and retry"
        }
    }
}
