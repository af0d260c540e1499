import CLMDB
import Foundation
import LedgerCore
import Projections
import Synchronization

/// The append-only event log of one ledger (SPEC §2, §3, §7).
///
/// Databases in the LMDB environment (docs/STORAGE.md has the byte layouts):
/// - `events`: `seq` (8 bytes, big-endian) → `EventRecord`, the log itself. Never rewritten.
/// - `ids`: event id (16 bytes) → `seq`, for idempotency.
/// - `samples`: sample seq → `SampleState`, so corrections can be checked against their target
///   (found through `ids`).
/// - `sync`: user ␀ source ␀ syncId → sync version and sample seq, for `syncVersion` supersede.
/// - `meta`: settings (`format`, `zone`, `created`, `importIds`) and per-kind counters.
///
/// Everything but `events` is derived from it and is updated in the same write transaction.
public final class EventLog: Sendable {
    public let environment: Environment
    public let path: String
    let events: Database
    let ids: Database
    let samples: Database
    let sync: Database
    let meta: Database
    /// The projections' state tables (`p.<table>`), written in the same transactions as events,
    /// by `StateTable.ordinal`.
    let stateDatabases: [Database]
    /// Committed projection changes by seq (`EventLog+Changes.swift`).
    let changesDatabase: Database
    /// API clients and their token digests (`EventLog+Clients.swift`); not part of the log.
    let clientsDatabase: Database
    /// Whether `ensureProjectionsCurrent` has checked (and if needed rebuilt) the projections.
    let projectionsChecked = Mutex(false)
    /// Days in zones for every fold of this ledger (its cache outlives one batch).
    let calendar = DayCalendar()
    /// The clock stamping `recorded`; injected so tests can step it backwards.
    let clock: @Sendable () -> Timestamp

    public static let databaseNames = ["events", "ids", "samples", "sync", "meta", "changes", "clients"]
        + StateTable.allCases.map(stateDatabaseName)

    /// The system clock, in microseconds.
    public static let systemClock: @Sendable () -> Timestamp = {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Timestamp(microseconds: Int64(spec.tv_sec) * 1_000_000 + Int64(spec.tv_nsec) / 1000)
    }

    /// `mkdir -p path`; the errno of the first failure, if any.
    static func makeDirectory(_ path: String) -> Int32? {
        // Made, or already a directory (perhaps made meanwhile by another process creating the
        // same ledger); else the errno.
        func make() -> Int32? {
            if mkdir(path, 0o775) == 0 { return nil }
            let failure = errno
            var isDirectory: ObjCBool = false
            guard failure == EEXIST, FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return failure }
            return isDirectory.boolValue ? nil : ENOTDIR
        }
        guard let failure = make() else { return nil }
        let parent = parentPath(path)
        guard failure == ENOENT, !parent.isEmpty, parent != path else { return failure }
        return makeDirectory(parent) ?? make()
    }

    /// What the file at `path` (not a directory) is, said in an error: `/dev/null` was called
    /// "a file" (an audit).
    static func kindOfFile(_ path: String) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else { return "not a directory" }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return "a file"
        case S_IFCHR, S_IFBLK: return "a device"
        case S_IFIFO: return "a FIFO"
        case S_IFSOCK: return "a socket"
        default: return "not a directory"
        }
    }

    /// Refuses a `lock.mdb` or `data.mdb` that is not a regular file. LMDB opens both by name,
    /// following a symbolic link, and writes its lock table into `lock.mdb` even for a reader:
    /// a link there made `ledger stats`, run as root, overwrite the file it pointed to (an
    /// audit: /etc/passwd). Missing files are fine (a new ledger makes them).
    static func refuseIrregularFiles(in path: String) throws {
        for file in ["lock.mdb", "data.mdb"] {
            let full = (path as NSString).appendingPathComponent(file)
            var info = stat()
            guard lstat(full, &info) == 0 else { continue }
            let what: String
            switch info.st_mode & S_IFMT {
            case S_IFREG: continue
            case S_IFLNK:
                let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: full)).map { " to '\($0)'" } ?? ""
                what = "a symbolic link\(target)"
            case S_IFDIR: what = "a directory"
            default: what = kindOfFile(full)
            }
            throw LedgerError.notRegularFile(path: path, file: file, what: what)
        }
    }

    /// Opens the ledger at `path`. With `create`, a missing ledger is created, with `zone` as
    /// its default zone (UTC when nil) written in the transaction that creates it: a process
    /// killed after creating it cannot leave a ledger in another zone than the one asked for.
    /// Without `create`, a missing ledger is an error.
    public convenience init(path: String, create: Bool, mapSize: Int? = nil, zone: Zone? = nil,
                            clock: @escaping @Sendable () -> Timestamp = EventLog.systemClock) throws {
        try self.init(path: path, create: create, mapSize: mapSize, zone: zone, clock: clock, inPlace: false)
    }

    /// With `inPlace`, a new ledger is made where it is to be, by LMDB (`createData` makes one
    /// so in a folder of its own, then moves its data file in).
    private init(path: String, create: Bool, mapSize: Int?, zone: Zone?,
                 clock: @escaping @Sendable () -> Timestamp, inPlace: Bool) throws {
        let manager = FileManager.default
        let dataFile = (path as NSString).appendingPathComponent("data.mdb")
        try EventLog.refuseIrregularFiles(in: path)
        // A directory this user may not search hides whether data.mdb is there: that is
        // permission denied, not "no ledger" (an audit: `stats` of a ledger in a directory of
        // mode 000 suggested 'ledger init').
        // One stat of data.mdb answers that, whether it is there, and its size (below).
        var dataInfo = stat()
        let dataExists = stat(dataFile, &dataInfo) == 0
        if !dataExists, errno == EACCES {
            throw LedgerError.permissionDenied(path: path, reason: "'\(dataFile)' cannot be reached (\(String(cString: strerror(EACCES)))): ask for search access to the directory and the ones above it")
        }
        if !dataExists {
            var isDirectory: ObjCBool = false
            let isFile = manager.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory.boolValue
            // A file is no ledger, and `init` could not make one there either.
            guard create else {
                throw isFile ? LedgerError.notADirectory(path: path, what: EventLog.kindOfFile(path)) : LedgerError.noLedger(path: path)
            }
            // mkdir(2) itself, for its plain errno (Foundation's error prints as a dictionary).
            if isFile {
                throw LedgerError.cannotCreate(path: path, reason: "it is \(EventLog.kindOfFile(path)), not a ledger directory")
            }
            if let failure = EventLog.makeDirectory(path) {
                throw LedgerError.cannotCreate(path: path, reason: String(cString: strerror(failure)))
            }
            if !inPlace, EventLog.stagingFits(in: path) {
                try EventLog.createData(in: path, mapSize: mapSize, zone: zone, clock: clock)
            }
        } else if create {
            // A creation killed after its data file was moved in leaves its folder (with its
            // lock file); a command that writes clears it.
            EventLog.removeAbandonedStaging(in: path)
        }
        // An empty data.mdb (a failed copy, a truncation) is no ledger: LMDB would write a new
        // environment into it, and a command that only reads found an empty, sound ledger
        // there (an audit: `verify` said "0 events, hash chain intact"). A command that may
        // create a ledger refuses it too: `append` made a new ledger in it, in UTC where the
        // one lost was in the zone `init` gave it, and said nothing (an audit). LMDB writes its
        // meta pages as it creates the file, so no ledger of ours is ever 0 bytes.
        // (While another process has it open, it is being made: LMDB takes its lock before it
        // creates data.mdb and writes the meta pages, and a parallel first append saw 0 bytes
        // in between: a review. A command that may create the ledger then opens it as LMDB does.)
        if dataExists, dataInfo.st_size == 0, !create || Environment.openElsewhere(path) == nil {
            throw LedgerError.damaged(path: path, reason: "its data.mdb is empty (0 bytes), so whatever ledger was there is gone (or remove the directory to start a new one)")
        }
        // 64 MiB to start: the file only grows as data is written, and the map doubles when full.
        let initialMap = mapSize ?? (manager.fileExists(atPath: dataFile) ? nil : 64 << 20)
        let environment = try Environment(path: path, mapSize: initialMap)
        if let (needed, held) = environment.truncation {
            throw LedgerError.damaged(path: path, reason: "data.mdb holds \(held) bytes, but its root pages lie within the first \(needed)")
        }
        // Another program's environment would otherwise be taken for an empty ledger: the
        // ledger's databases created in it, and its own records read as events.
        let catalogue = try environment.catalogue(has: "meta")
        if catalogue.any, !catalogue.named { throw LedgerError.notALedger(path: path, reason: "it has databases but no 'meta'") }
        // Every ledger has its databases from its first commit (`checkFormat` writes `meta`
        // in it): an environment with none is an empty LMDB file, which only a command that
        // may create a ledger makes one of (read commands made its 17 databases: an audit).
        if !create, !catalogue.named {
            throw LedgerError.notALedger(path: path, reason: "it holds no database at all; 'ledger init' makes a ledger there")
        }
        let handles = try environment.openDatabases(EventLog.databaseNames)
        self.environment = environment
        self.path = path
        self.events = handles["events"]!
        self.ids = handles["ids"]!
        self.samples = handles["samples"]!
        self.sync = handles["sync"]!
        self.meta = handles["meta"]!
        self.changesDatabase = handles["changes"]!
        self.clientsDatabase = handles["clients"]!
        self.stateDatabases = StateTable.allCases.map { handles[stateDatabaseName($0)]! }
        self.clock = clock
        try checkFormat(newZone: zone)
    }

    /// The prefix of the folder inside a ledger's directory where `createData` makes it.
    static let stagingPrefix = ".ledger-new-"

    /// Makes a new ledger's `data.mdb` whole before it appears in `path`. LMDB creates the
    /// file and then writes its first pages into it, and a process killed in between left an
    /// empty data.mdb, which every later command, `init` included, refuses as a ledger cut to
    /// nothing (an audit: 1 `kill -9` in 60 to 92 during a first `init` or `append`). So the
    /// ledger is made, its format and zone committed, in a folder of its own inside `path`
    /// (the same file system, whatever is mounted where), and its data file renamed in under
    /// its name, never over one: the process that moves its file first made the ledger, and
    /// the others open it (as they did when LMDB made it in place). A process killed before
    /// the move leaves only its folder, which the next creation removes.
    private static func createData(in path: String, mapSize: Int?, zone: Zone?,
                                   clock: @escaping @Sendable () -> Timestamp) throws {
        removeAbandonedStaging(in: path)
        let staging = (path as NSString).appendingPathComponent("\(stagingPrefix)\(getpid())-\(UInt32.random(in: .min ... .max))")
        defer { removeStaging(staging) }
        do {
            // Closed (released) at the end of this block, its data durable from its commit.
            _ = try EventLog(path: staging, create: true, mapSize: mapSize, zone: zone, clock: clock, inPlace: true)
        } catch LMDBError.diskFull {
            throw LedgerError.cannotCreate(path: path, reason: "the disk holding it is full; nothing was made. Free space and retry")
        } catch let error as LedgerError {
            // (The folder's name is this function's; the user asked for `path`.)
            if case .cannotCreate(_, let reason) = error { throw LedgerError.cannotCreate(path: path, reason: reason) }
            throw error
        }
        // Its lock file first, whose blocks are allocated: opening the ledger then needs none
        // (an audit: a disk that filled up between the two made the open fail after the data
        // file was moved in, and the `init` that said nothing was made left a ledger). Never
        // over one: a process that has the ledger open holds its own.
        _ = ledger_rename_no_replace(staging + "/lock.mdb", (path as NSString).appendingPathComponent("lock.mdb"))
        let from = staging + "/data.mdb", to = (path as NSString).appendingPathComponent("data.mdb")
        var moved = ledger_rename_no_replace(from, to) == 0
        if !moved, errno == EINVAL || errno == ENOSYS {
            // A file system that cannot rename without replacing: a second name, which link(2)
            // never gives over an existing file, then the first removed.
            moved = link(from, to) == 0
        }
        if !moved {
            // Another process made the ledger meanwhile: it is the one to open.
            guard errno == EEXIST else {
                throw LedgerError.cannotCreate(path: path, reason: "moving its new data file in failed (\(String(cString: strerror(errno))))")
            }
            return
        }
        // The new name made durable before anything is committed under it: a commit's
        // `fdatasync` makes the file's data durable, not the directory entry naming it.
        let directory = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            fsync(directory)
            close(directory)
        }
    }

    /// Whether a staging folder's files would have paths LMDB can open: a ledger path within
    /// about 40 bytes of `PATH_MAX` is made in place, as before staging (an audit: such
    /// paths, which had worked, failed).
    private static func stagingFits(in path: String) -> Bool {
        path.utf8.count + "/\(stagingPrefix)\(Int32.max)-\(UInt32.max)/data.mdb".utf8.count < Int(PATH_MAX)
    }

    /// The two files LMDB makes in an environment's folder.
    static let environmentFiles: Set<String> = ["data.mdb", "lock.mdb"]

    /// Whether `folder` can be read and holds nothing but `environmentFiles` (some or none).
    static func holdsOnlyEnvironmentFiles(_ folder: String) -> Bool {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return false }
        return Set(names).isSubset(of: environmentFiles)
    }

    /// Removes the staging folder `createData` made, with what LMDB made in it.
    private static func removeStaging(_ staging: String) {
        for file in environmentFiles { unlink(staging + "/" + file) }
        rmdir(staging)
    }

    /// Removes the staging folders of processes that died while making the ledger at `path`
    /// (their names hold their process ids; a folder of a process still running is left. A
    /// process of another PID namespace, a container sharing the directory, is not seen by
    /// `kill`: its folder removed under it, its creation fails with an error, nothing lost.)
    private static func removeAbandonedStaging(in path: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return }
        for name in names where name.hasPrefix(stagingPrefix) {
            // Only a name `createData` gives (PID-NUMBER), a real folder (not a link to one),
            // holding nothing but what LMDB made there: anything else is not ours to remove.
            let parts = name.dropFirst(stagingPrefix.count).split(separator: "-", omittingEmptySubsequences: false)
            let folder = (path as NSString).appendingPathComponent(name)
            var info = stat()
            guard parts.count == 2, let pid = Int32(parts[0]), pid > 0, UInt32(parts[1]) != nil,
                  lstat(folder, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, holdsOnlyEnvironmentFiles(folder),
                  kill(pid, 0) != 0, errno == ESRCH else { continue }
            removeStaging(folder)
        }
    }

    /// The layout of the databases besides `events` (docs/STORAGE.md). Layout 1 (the first
    /// release) keyed `samples` and `sync` by sample id; opening such a ledger rebuilds those
    /// two indexes from the log, keyed by seq, in one write transaction. The log is untouched.
    static let layout = "2"
    /// Format 3 is layout 2 in a ledger whose imports derive time-ordered ids (`importIds` 2).
    /// Binaries from before it refuse to open it, so none can import into it with the other
    /// derivation (which would add every sample of an export a second time).
    static let layoutWithTimeOrderedImportIDs = "3"
    /// Format 4 is layout 2 in a ledger that may hold format 3 records (whose chain hash covers
    /// their content's digest, docs/STORAGE.md), which binaries from before it cannot read:
    /// they refuse to open it rather than call those records corrupt. New ledgers are created
    /// in it, and an older one is marked so by the first append that writes such records, or,
    /// empty, when `importIDScheme` gives it time-ordered ids (opening a ledger, or reading it,
    /// changes nothing). Its import ids are as `importIds` says.
    static let layoutWithContentDigests = "4"

    static let formatKey = Array("format".utf8)

    /// Checks (and for a new ledger writes) the layout; a new ledger's default zone is
    /// `newZone`, else UTC.
    private func checkFormat(newZone: Zone?) throws {
        let key = EventLog.formatKey
        let format = try environment.read { txn in try txn.get(meta, key) }
        switch format.map({ String(decoding: $0, as: UTF8.self) }) {
        case EventLog.layout?, EventLog.layoutWithTimeOrderedImportIDs?, EventLog.layoutWithContentDigests?:
            return
        case "1"?:
            try environment.write { txn in
                guard try txn.get(meta, key) == Array("1".utf8) else { return }  // another process did it
                try reindexSamples(in: txn)
                try txn.put(meta, key, Array(EventLog.layout.utf8))
            }
        case nil:
            if try environment.read({ txn in try txn.last(events) }) != nil {
                throw LedgerError.notALedger(path: path, reason: "it has events but no format in 'meta'")
            }
            try environment.write { txn in
                if try txn.get(meta, key) == nil {
                    try txn.put(meta, key, Array(EventLog.layoutWithContentDigests.utf8))
                    try txn.put(meta, Array("zone".utf8), Array((newZone?.name ?? "UTC").utf8))
                    try txn.put(meta, Array("created".utf8), Array(clock().rfc3339.utf8))
                    try txn.put(meta, EventLog.importIDsKey, Array("\(EventLog.importIDSchemeForNewLedgers)".utf8))
                    try setProjectionPosition(0, in: txn)  // empty projections, of this fold version
                }
            }
        case let other?:
            throw LedgerError.unsupportedFormat(found: other)
        }
    }

    /// Whether nothing was ever committed to the ledger: no event and no client. Read in a
    /// write transaction, so no writer of this or another process is halfway through a commit.
    /// A command that created the ledger and then failed removes it only when this holds.
    public func isUntouched() throws -> Bool {
        try environment.write { txn in try txn.last(events) == nil && txn.last(clientsDatabase) == nil }
    }

    /// Removes the ledger (its directory and files) when it holds no event and no client and
    /// no other process has it open; whether it did. For a command that created the ledger and
    /// then failed: checking only that it held nothing let a failing import delete a ledger
    /// that a second import, started at the same moment, had just committed to and reported
    /// (the audit lost 9 to 11 ledgers in 30 such races).
    ///
    /// Every process with the environment open holds LMDB's shared lock on the first byte of
    /// `lock.mdb`; this one asks for it exclusively (its own shared lock does not stand in the
    /// way: `fcntl` locks belong to the process). Held, nobody else has the ledger open, and a
    /// process opening it now waits in LMDB until this one is gone, then finds no directory.
    ///
    /// Whatever it returns, this `EventLog` is done: closing the probe drops every lock the
    /// process holds on `lock.mdb`, LMDB's own included.
    public func removeIfUntouched() -> Bool {
        EventLog.remove(path) { (try? isUntouched()) == true }
    }

    /// Removes what `mdb_env_open` made at `path` for a ledger that then could not be opened
    /// (no memory to map it, a full disk): only when no other process has it open and its data
    /// file holds no more than the two meta pages LMDB writes first, so nothing was ever
    /// committed to it. Whether it did.
    public static func removeUnopened(path: String) -> Bool {
        remove(path) {
            var info = stat()
            return stat(path + "/data.mdb", &info) != 0 || Int(info.st_size) <= 2 * sysconf(Int32(_SC_PAGESIZE))
        }
    }

    /// Removes the ledger at `path` when no other process has it open and `unused` says so
    /// (asked with the lock held), and the directory holds nothing but LMDB's `data.mdb` and
    /// `lock.mdb`. A directory without `lock.mdb` is removed only if empty.
    private static func remove(_ path: String, if unused: () -> Bool) -> Bool {
        var directory = path
        while directory.count > 1, directory.hasSuffix("/") { directory.removeLast() }
        let fd = open(directory + "/lock.mdb", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return rmdir(directory) == 0 }
        defer { close(fd) }
        var exclusive = Environment.exclusiveOpenLock
        guard fcntl(fd, F_SETLK, &exclusive) == 0, unused() else { return false }
        // Only a directory of LMDB's two files is a ledger to remove whole: one that holds
        // anything else was the user's before the ledger was made in it, and stays.
        guard holdsOnlyEnvironmentFiles(directory) else { return false }
        // Renamed away first: a process opening it by its path from here on finds no ledger,
        // rather than making a lock file nobody holds beside a data file not yet removed.
        let removing = directory + ".removing-\(getpid())"
        // (`--db .`, or a mount point, cannot be renamed: the ledger stays, empty. Removing its
        // two files instead would let a process waiting on the lock file meanwhile make a new
        // data file beside a lock file nobody else opens: a review.)
        guard rename(directory, removing) == 0 else { return false }
        return (try? FileManager.default.removeItem(atPath: removing)) != nil
    }

    /// Sets the default zone of a new ledger (`ledger init`). Setting the zone it already has
    /// is a no-op; changing it once events exist is refused, since every day would move.
    public func initialize(zone: Zone) throws {
        try environment.write { txn in
            let current = try txn.get(meta, Array("zone".utf8)).map { String(decoding: $0, as: UTF8.self) } ?? "UTC"
            if current == zone.name { return }
            if try txn.last(events) != nil {
                throw LedgerError.alreadyInitialized(path: path, zone: current)
            }
            try txn.put(meta, Array("zone".utf8), Array(zone.name.utf8))
        }
    }

    static let importIDsKey = Array("importIds".utf8)
    static let importIDSchemeForNewLedgers = 2

    /// How `ledger import` derives sample ids in this ledger (`AppleHealthConverter`): 2 (ids
    /// that sort by time) for ledgers created from 2026-11-30 or still empty, 1 for older
    /// ledgers that may hold imports made with scheme 1, so importing the same export into them
    /// again still adds nothing. An empty ledger without the setting is given scheme 2.
    public func importIDScheme() throws -> Int {
        // A write transaction that writes nothing commits without touching the disk.
        try environment.write { txn in
            if let stored = try txn.get(meta, EventLog.importIDsKey) {
                return Int(String(decoding: stored, as: UTF8.self)) ?? 1
            }
            guard try txn.last(events) == nil else { return 1 }
            try txn.put(meta, EventLog.importIDsKey, Array("\(EventLog.importIDSchemeForNewLedgers)".utf8))
            try markContentDigests(in: txn)
            return EventLog.importIDSchemeForNewLedgers
        }
    }

    /// Sets the format to `layoutWithContentDigests` (in a transaction that writes format 3
    /// records, or that gives an empty ledger time-ordered import ids), unless it is already.
    func markContentDigests(in txn: Transaction) throws {
        let current = Array(EventLog.layoutWithContentDigests.utf8)
        if try txn.get(meta, EventLog.formatKey) != current { try txn.put(meta, EventLog.formatKey, current) }
    }

    /// The ledger's default zone (SPEC §4.1).
    public func defaultZone() throws -> Zone {
        let name = try environment.read { txn in try txn.get(meta, Array("zone".utf8)) }
            .map { String(decoding: $0, as: UTF8.self) } ?? "UTC"
        return Zone.named(name) ?? .utc
    }

    // MARK: - Reading

    /// The last event's position, hash and time; `seq` 0 for an empty log.
    public struct Head: Sendable, Equatable {
        public var seq: UInt64
        public var hash: [UInt8]
        public var recorded: Timestamp?
    }

    public func head() throws -> Head {
        try environment.read { txn in try head(in: txn) }
    }

    /// The seq a key of `events` (or a value of `ids`) holds. A damaged file may hand back
    /// bytes of another length: that is named, not trapped on.
    func seq(_ bytes: UnsafeRawBufferPointer, in table: String) throws -> UInt64 {
        guard bytes.count == 8 else {
            throw LedgerError.damaged(path: path, reason: "'\(table)' holds a seq of \(bytes.count) bytes, not 8; 'ledger verify' names the first damaged event")
        }
        return UInt64(bigEndianBytes: bytes)
    }

    func seq(_ bytes: [UInt8], in table: String) throws -> UInt64 {
        try bytes.withUnsafeBytes { try seq($0, in: table) }
    }

    /// The number `meta` holds under `key` (a counter, the projections' position or version),
    /// or nil; one of another length is named as damage, not trapped on.
    func metaNumber(_ key: [UInt8], in txn: Transaction) throws -> UInt64? {
        guard let bytes = try txn.get(meta, key) else { return nil }
        guard bytes.count == 8 else {
            let reason = "'meta' holds \(bytes.count) bytes under '\(String(decoding: key, as: UTF8.self))', not 8"
            // The projections' version and position are derived, as the projections are.
            if key == EventLog.projectionVersionKey || key == EventLog.projectionPositionKey { throw DamagedState(reason: reason) }
            throw LedgerError.damaged(path: path, reason: reason)
        }
        return UInt64(bigEndianBytes: bytes)
    }

    func head(in txn: Transaction) throws -> Head {
        guard let (key, value) = try txn.last(events) else {
            return Head(seq: 0, hash: EventRecord.genesisHash, recorded: nil)
        }
        let seq = try seq(key, in: "events")
        let record = try value.withUnsafeBytes { try EventRecord(seq: seq, decoding: $0) }
        return Head(seq: seq, hash: record.hash, recorded: record.recorded)
    }

    /// The record at `seq`, or nil.
    public func record(at seq: UInt64) throws -> EventRecord? {
        try environment.read { txn in
            try txn.withValue(events, seq.bigEndianBytes) { try EventRecord(seq: seq, decoding: $0) }
        }
    }

    /// Whose event this is: its `user`, or for a correction its target sample's (looked up
    /// in `known`, samples seen so far in a walk, else in the log). A walk over the log
    /// filtering by user (`log --user`, `GET /v1/events?user=`) passes the same `known` to
    /// every call.
    public func user(of event: (id: UUID, payload: Event.Payload), known: inout [UUID: String]) throws -> String {
        switch event.payload {
        case .sample(let sample):
            known[event.id] = sample.user
            return sample.user
        case .correction(let correction):
            if let user = known[correction.target] { return user }
            return try record(id: correction.target)?.typedEvent().payload.user ?? ""
        default:
            return event.payload.user
        }
    }

    /// The record of the event with `id`, or nil.
    public func record(id: UUID) throws -> EventRecord? {
        try environment.read { txn in
            guard let seqBytes = try txn.get(ids, id.bytes) else { return nil }
            let seq = try seq(seqBytes, in: "ids")
            return try txn.withValue(events, seq.bigEndianBytes) { try EventRecord(seq: seq, decoding: $0) }
        }
    }

    /// The position a walk of the log (`forEachRecord(after:)`) for the events from seq
    /// `from` on starts after; with `id`, the one before that event, whose history
    /// (`EventHistory`) comes after it and is followed from it even when only what comes from
    /// `from` on is shown. Nil when no event has `id`.
    /// With `since` (and no `id`), the walk starts at the first event recorded then or later
    /// (`firstSeq(recordedAtOrAfter:)`) when that comes after `from`.
    public func walkAfter(from: UInt64, id: UUID?, since: Timestamp? = nil) throws -> UInt64? {
        guard let id else {
            let after = from > 0 ? from - 1 : 0
            guard let since else { return after }
            return max(after, try firstSeq(recordedAtOrAfter: since) - 1)
        }
        return try record(id: id).map { max($0.seq, 1) - 1 }  // a damaged index may say 0
    }

    /// The instants `log --since A --until B` and `GET /v1/events?since=A&until=B` mean (an
    /// RFC 3339 timestamp, or a date: its first microsecond for `since`, its last for
    /// `until`, in the ledger's default zone), or what is wrong with them, each named as
    /// `name` spells its option (`'--since'`, `'since'`).
    public func recordedWindow(since: String?, until: String?, name: (String) -> String)
        throws -> Result<RecordedWindow, RecordedWindow.Problem> {
        var window = RecordedWindow()
        for (option, text, startOfDay) in [("since", since, true), ("until", until, false)] {
            guard let text else { continue }
            guard let instant = try instant(text, startOfDay: startOfDay) else {
                let problem = EventLog.replayPointProblem(text) ?? "needs an RFC 3339 timestamp with an offset or a date YYYY-MM-DD"
                return .failure(.init(message: "\(name(option)) \(problem), got '\(text)'"))
            }
            if startOfDay { window.since = instant } else { window.until = instant }
        }
        // Dates in order whose days the zone skipped (Pacific/Apia's 2011-12-30) make a window
        // that ends a microsecond before it begins: it holds nothing, and is no mistake (it
        // was called "after").
        let skippedDays = since.flatMap(CivilDate.init(parsing:)).flatMap { first in
            until.flatMap(CivilDate.init(parsing:)).map { first <= $0 }
        } ?? false
        if let from = window.since, let to = window.until, from > to, !skippedDays {
            return .failure(.init(message: "\(name("since")) (\(from.rfc3339)) is after \(name("until")) (\(to.rfc3339))"))
        }
        return .success(window)
    }

    /// The first seq whose event was recorded at or after `instant`, or the head's seq + 1 when
    /// none was: a binary search over the log (about 20 reads for a million events), sound
    /// because `recorded` never goes back along it (an append takes the previous event's time
    /// when the clock stepped back, and `verify` names a log where it does).
    public func firstSeq(recordedAtOrAfter instant: Timestamp) throws -> UInt64 {
        try environment.read { txn in
            var low: UInt64 = 1
            var high = try head(in: txn).seq + 1  // the answer lies in low...high
            while low < high {
                let middle = low + (high - low) / 2
                let recorded = try txn.withValue(events, middle.bigEndianBytes) { bytes in
                    try EventRecord(seq: middle, decoding: bytes).recorded
                }
                guard let recorded else {
                    throw LedgerError.corrupt(seq: middle, reason: "missing from the log (found looking for the first event recorded at \(instant.rfc3339))")
                }
                if recorded >= instant { high = middle } else { low = middle + 1 }
            }
            return low
        }
    }

    /// Visits records with `seq > after` in order until `body` returns false. Each read
    /// transaction covers at most `chunk` records, so a slow consumer never pins old pages.
    /// A record that cannot be decoded throws once every record before it has been visited
    /// (so a check of each record reports the first bad one), and so does a gap in the seqs,
    /// which are gapless (SPEC §3): `log` printed the events around a removed one and exited 0
    /// (an audit), where `verify`, `replay` and `rebuild` named it.
    public func forEachRecord(after: UInt64 = 0, chunk: Int = 4096,
                              _ body: (EventRecord) throws -> Bool) throws {
        var position = after
        var expected = after &+ 1
        while position < UInt64.max {  // no seq comes after the last one
            var batch: [EventRecord] = []
            var undecodable: (any Error)?
            try environment.read { txn in
                try txn.scan(events, from: (position + 1).bigEndianBytes) { key, value in
                    do {
                        // A key of the wrong length is the damage of the event after the last good one.
                        guard key.count == 8 else {
                            throw LedgerError.corrupt(seq: (batch.last?.seq ?? position) + 1,
                                                      reason: "its key in 'events' is \(key.count) bytes, not 8")
                        }
                        let seq = UInt64(bigEndianBytes: key)
                        batch.append(try EventRecord(seq: seq, decoding: value))
                    } catch {
                        undecodable = error
                        return false
                    }
                    return batch.count < chunk
                }
            }
            for record in batch {
                guard record.seq == expected else {
                    throw LedgerError.corrupt(seq: expected, reason: "missing from the log (the next event stored is seq \(record.seq)); 'ledger verify' checks the rest")
                }
                expected = record.seq &+ 1
                guard try body(record) else { return }
            }
            if let undecodable { throw undecodable }
            guard let last = batch.last, batch.count == chunk else { return }
            position = last.seq
        }
    }

    /// Walks every stored record with one LMDB cursor, touching each value's bytes and decoding
    /// nothing: the ceiling any fold over the log can reach. Returns the count.
    public func scanRawRecords() throws -> Int {
        try environment.read { txn in
            var count = 0
            var checksum: UInt8 = 0
            try txn.scan(events) { _, value in
                checksum &+= value[value.count - 1]
                count += 1
                return true
            }
            _ = checksum
            return count
        }
    }

    /// Records with `seq > after`, at most `limit`.
    public func records(after: UInt64 = 0, limit: Int? = nil) throws -> [EventRecord] {
        var result: [EventRecord] = []
        try forEachRecord(after: after) { record in
            result.append(record)
            return limit.map { result.count < $0 } ?? true
        }
        return result
    }

    /// Counters and sizes for `ledger stats`.
    public struct Statistics: Sendable {
        public var head: Head
        public var countsByKind: [EventKind: Int]
        public var zone: String
        public var created: String?
        public var mapSize: Int
        /// Bytes of the pages in use: those up to the last page written, less the free ones.
        public var usedBytes: Int
        /// Bytes of the pages freed by earlier commits, which later ones reuse.
        public var freeBytes: Int
        public var fileBytes: Int
        public var databases: [String: (entries: Int, depth: Int, pages: Int)]
        /// The seq every stored projection has folded through (they are folded together), and
        /// the fold version they were built by: behind the head, or of another version, they
        /// are brought up to date by the next command that reads them.
        public var projectionPosition: UInt64?
        public var projectionVersion: UInt64?
        /// Why the position or version could not be read (a damaged record), if it could not;
        /// the one that could not is nil. `stats` reports it rather than failing, and
        /// `rebuild` writes both again.
        public var projectionDamage: String?
    }

    public func statistics() throws -> Statistics {
        let pageSize = environment.pageSize
        let info = environment.info
        let dataFile = (path as NSString).appendingPathComponent("data.mdb")
        // stat(2), not FileManager's attributes, which also look up the owner's and group's
        // names: for a uid or gid that /etc/passwd or /etc/group does not list, the static
        // `ledger`'s glibc then loaded another NSS module (libnss_systemd), which brought a
        // second libc into the process and crashed it (an audit: `stats` of a ledger restored
        // with its numeric owner, or run as a container's unnamed uid, ended in SIGSEGV).
        var status = stat()
        let fileBytes = stat(dataFile, &status) == 0 ? Int(status.st_size) : 0
        return try environment.read { txn in
            var counts: [EventKind: Int] = [:]
            for kind in EventKind.allCases {
                counts[kind] = Int(clamping: try metaNumber(Array("count.\(kind.rawValue)".utf8), in: txn) ?? 0)
            }
            var databases: [String: (entries: Int, depth: Int, pages: Int)] = [:]
            for (name, db) in [("events", events), ("ids", ids), ("samples", samples), ("sync", sync), ("meta", meta)] {
                databases[name] = try txn.statistics(db)
            }
            // Each read on its own: one damaged record does not hide the other.
            var damages: [String] = []
            func number(_ key: [UInt8]) throws -> UInt64? {
                do {
                    return try metaNumber(key, in: txn)
                } catch let error as DamagedState {
                    damages.append(error.reason)
                    return nil
                }
            }
            // Absent (nothing folded yet) is 0; damaged is nil.
            let storedPosition = try number(EventLog.projectionPositionKey)
            let position: UInt64? = storedPosition ?? (damages.isEmpty ? 0 : nil)
            let version = try number(EventLog.projectionVersionKey)
            let damage = damages.isEmpty ? nil : damages.joined(separator: "; ")
            // LMDB's free list (database 0): each record a list of page numbers, its length
            // first, as `mdb_stat -f` counts them. `used_bytes` counted them as used, so it
            // equalled the file's size after any rebuild (a review).
            var freePages = 0
            try txn.scan(Database(dbi: 0)) { _, value in
                if value.count >= 8 {
                    freePages += min(Int(clamping: value.loadUnaligned(as: UInt64.self)), value.count / 8 - 1)
                }
                return true
            }
            return Statistics(
                head: try head(in: txn), countsByKind: counts,
                zone: try txn.get(meta, Array("zone".utf8)).map { String(decoding: $0, as: UTF8.self) } ?? "UTC",
                created: try txn.get(meta, Array("created".utf8)).map { String(decoding: $0, as: UTF8.self) },
                mapSize: info.mapSize, usedBytes: max(0, info.lastPage + 1 - freePages) * pageSize,
                freeBytes: freePages * pageSize, fileBytes: fileBytes,
                databases: databases,
                projectionPosition: position, projectionVersion: version, projectionDamage: damage)
        }
    }
}

/// What became of one event, walked in seq order from it (`log --id`, `GET /v1/events?id=`):
/// the event itself; for a sample with a `syncId`, the later versions of it (the same user,
/// source name and `syncId`), each of which superseded the one before; and the corrections of
/// any of these. (An audit: a sample replaced through its sync version showed only itself.)
public struct EventHistory: Sendable {
    private var ids: Set<UUID>
    private var sync: (user: String, source: String, syncId: String)?

    public init(of id: UUID) { ids = [id] }

    /// Whether `event`, the next in seq order, belongs to the history (and remembers it).
    public mutating func includes(_ event: (id: UUID, payload: Event.Payload)) -> Bool {
        switch event.payload {
        case .sample(let sample):
            if ids.contains(event.id) {
                if sync == nil, let syncId = sample.syncId { sync = (sample.user, sample.source.name, syncId) }
                return true
            }
            guard let sync, sample.syncId == sync.syncId, sameName(sample.user, sync.user),
                  sameName(sample.source.name, sync.source) else { return false }
            ids.insert(event.id)
            return true
        case .correction(let correction):
            return ids.contains(event.id) || ids.contains(correction.target)
        default:
            return ids.contains(event.id)
        }
    }
}

/// Which events, by the time they were recorded, a walk of the log shows (`log --since` and
/// `--until`, `GET /v1/events?since=&until=`): both ends included.
public struct RecordedWindow: Sendable, Equatable {
    public var since: Timestamp?
    public var until: Timestamp?

    public init(since: Timestamp? = nil, until: Timestamp? = nil) {
        self.since = since
        self.until = until
    }

    /// What is wrong with a bound, as one line.
    public struct Problem: Error, Sendable, Equatable {
        public var message: String
    }

    /// Whether the walk, in seq order, is past the window: `recorded` never goes back.
    public func isPast(_ recorded: Timestamp) -> Bool { until.map { recorded > $0 } ?? false }

    /// Whether an event recorded at `recorded` is inside the window.
    public func contains(_ recorded: Timestamp) -> Bool {
        (since.map { recorded >= $0 } ?? true) && !isPast(recorded)
    }
}
