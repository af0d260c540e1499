import CLMDB
import Foundation
import Synchronization

/// A named database inside the environment (an `MDB_dbi`). Valid for the environment's lifetime.
public struct Database: Sendable, Hashable {
    let dbi: MDB_dbi
}

/// One LMDB environment: a directory holding `data.mdb` and `lock.mdb`.
///
/// Open it once per process (LMDB forbids opening one environment twice in a process).
/// Transactions exist only inside `read { }` and `write { }` closures; a `Transaction` and
/// every buffer it hands out are valid only during the closure.
///
/// Writes are serialized by a lock in this process and by LMDB's own lock across processes.
/// Read transactions are opened with `MDB_NOTLS`, are short, and never block the writer.
/// When the map is full, the write is aborted, the map is doubled and the closure runs again
/// from the start, so a batch is never half-written.
private func newThreadKey() -> pthread_key_t {
    var key = pthread_key_t()
    pthread_key_create(&key, nil)
    return key
}

#if DEBUG
private let readDepthKey = newThreadKey()
#endif

/// Transactions open on each thread, in every build: a fault on a thread that has one open is
/// taken for damage to the map it reads (`Environment.threadHasTransaction`).
private let transactionDepthKey = newThreadKey()

public final class Environment: @unchecked Sendable {
    // @unchecked: `handle` is an MDB_env*, which LMDB documents as safe to share between
    // threads; the mutable state (the map size) is guarded by `resizeLock`/`writeLock`.
    let handle: OpaquePointer
    public let path: String
    /// Serializes writers in this process. An `NSLock` rather than `Mutex`, because the
    /// closure's result is generic and need not be `Sendable`.
    private let writeLock = NSLock()
    private let resizeLock = ReadWriteLock()
    private let reruns = Atomic<Int>(0)
    /// Set when `mdb_env_set_mapsize` failed, which leaves no map: no transaction may begin,
    /// and nothing may read LMDB's meta pages (`info`). Read with `resizeLock` held, which the
    /// failing call held exclusively.
    private let unmapped = Atomic<Bool>(false)

    /// Read transactions open on this thread (kept in debug builds only, for the assertion in
    /// `transaction`).
    private static var readDepth: Int {
        get {
            #if DEBUG
            Int(bitPattern: pthread_getspecific(readDepthKey))
            #else
            0
            #endif
        }
        set {
            #if DEBUG
            pthread_setspecific(readDepthKey, UnsafeRawPointer(bitPattern: newValue))
            #endif
        }
    }

    /// Write transactions run again because the map was full (see `reserve`).
    public var rerunsAfterFullMap: Int { reruns.load(ordering: .relaxed) }
    private let databases: Mutex<[String: Database]> = Mutex([:])

    /// Opens (and with `create`, creates) the environment at `path`.
    ///
    /// Calls `mdb_env_create`, `mdb_env_set_maxdbs`, `mdb_env_set_mapsize`, `mdb_env_open` and
    /// `mdb_reader_check` (to clear slots left by crashed readers).
    public init(path: String, mapSize: Int? = nil, maxDatabases: Int = 32) throws {
        let flags = UInt32(MDB_NOTLS | MDB_NORDAHEAD)
        do {
            handle = try Environment.openEnvironment(path, mapSize: mapSize, maxDatabases: maxDatabases, flags: flags)
            isOnReadOnlyMedia = false
            isWritable = true
        } catch let error as LMDBError where error.code == EACCES {
            // Permission to read the ledger but not to write it (an auditor's copy, say): LMDB
            // opens `data.mdb` read-only, still taking its lock in `lock.mdb`, which must be
            // writable for that (readers register there). Writes then fail with
            // `LedgerError.notWritable` (`write`).
            do {
                handle = try Environment.openEnvironment(path, mapSize: mapSize, maxDatabases: maxDatabases, flags: flags | UInt32(MDB_RDONLY))
            } catch let again as LMDBError where again.code == EACCES {
                throw LedgerError.permissionDenied(path: path, reason: "even a reader must be able to write lock.mdb, where LMDB registers readers; ask for read access to the directory and data.mdb and write access to lock.mdb, or read a copy (mdb_copy)")
            }
            isOnReadOnlyMedia = false
            isWritable = false
        } catch let error as LMDBError where error.code == EROFS {
            // On a read-only file system (a snapshot, a read-only mount) LMDB cannot open its
            // lock file for writing. Without the lock, a reader's snapshot is invisible to
            // writers, which may then reuse its pages: so the environment is opened read-only
            // without a lock file only when no process has it open. (The same directory may be
            // writable through another mount: a read-only bind mount, a container's `:ro`
            // volume.) Writes then fail with `LedgerError.readOnlyMedia` (`write`).
            if let holder = Environment.openElsewhere(path) {
                throw LedgerError.readOnlyMedia(path: path, reason: "LMDB cannot take its lock there, and \(holder): a reader without the lock could see pages that process rewrites. Read it where it is writable, or from a copy (mdb_copy)")
            }
            handle = try Environment.openEnvironment(path, mapSize: mapSize, maxDatabases: maxDatabases,
                                                     flags: flags | UInt32(MDB_RDONLY | MDB_NOLOCK))
            isOnReadOnlyMedia = true
            isWritable = false
        }
        self.path = path
    }

    /// Whether the environment lies on a read-only file system, and was opened read-only
    /// without a lock file.
    public let isOnReadOnlyMedia: Bool
    /// Whether writes can be made: not on read-only media, nor with `data.mdb` this process
    /// may only read (opened `MDB_RDONLY`).
    public let isWritable: Bool

    /// Why a write cannot be made here, or nil when it can: `what` is the write asked for.
    public func notWritable(_ what: String) -> LedgerError? {
        if isWritable { return nil }
        return isOnReadOnlyMedia ? .readOnlyMedia(path: path, reason: "\(what); copy it somewhere writable (mdb_copy) to run it there")
            : .notWritable(path: path, reason: "\(what); run it as a user who may write data.mdb, or on a copy (mdb_copy)")
    }

    /// Whether a process has the environment at `path` open, said as a reason (nil when none
    /// has): each one holds a shared lock on the first byte of `lock.mdb` for as long as it
    /// does (LMDB's `mdb_env_excl_lock`), which `F_GETLK` sees from any mount of the same file
    /// on this machine. No lock file: no process has opened it with locking there. When it
    /// cannot be told, that is the answer too. (Locks held on another host over NFS may not
    /// show.)
    static func openElsewhere(_ path: String) -> String? {
        let lockFile = (path as NSString).appendingPathComponent("lock.mdb")
        let cannotTell = { "whether another process has the ledger open cannot be told (\(lockFile): \(String(cString: strerror(errno))))" }
        let fd = open(lockFile, O_RDONLY)
        guard fd >= 0 else { return errno == ENOENT ? nil : cannotTell() }
        defer { close(fd) }
        var lock = exclusiveOpenLock
        guard fcntl(fd, F_GETLK, &lock) == 0 else { return cannotTell() }
        return lock.l_type == Int16(F_UNLCK) ? nil : "another process has the ledger open"
    }

    /// A write lock on the first byte of `lock.mdb`, where every process with the environment
    /// open holds a shared lock (LMDB's `mdb_env_excl_lock`): asking for it tells whether
    /// another process has the ledger open.
    static var exclusiveOpenLock: flock {
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 0
        lock.l_len = 1
        return lock
    }

    private static func openEnvironment(_ path: String, mapSize: Int?, maxDatabases: Int, flags: UInt32) throws -> OpaquePointer {
        var env: OpaquePointer?
        try check(mdb_env_create(&env), "mdb_env_create")
        guard let env else { throw LMDBError(code: ENOMEM, call: "mdb_env_create") }
        do {
            try check(mdb_env_set_maxdbs(env, MDB_dbi(maxDatabases)), "mdb_env_set_maxdbs")
            try check(mdb_env_set_maxreaders(env, 1022), "mdb_env_set_maxreaders")
            try check(mdb_env_set_assert(env, Environment.damagedPageFound), "mdb_env_set_assert")
            if let mapSize {
                try check(mdb_env_set_mapsize(env, mapSize), "mdb_env_set_mapsize")
            }
            if flags & UInt32(MDB_NOLOCK) == 0 { try reserveLockFile(path) }
            try check(mdb_env_open(env, path, flags, 0o664), "mdb_env_open(\(path))")
            var dead: Int32 = 0
            try check(mdb_reader_check(env, &dead), "mdb_reader_check")
        } catch {
            mdb_env_close(env)
            throw error
        }
        return env
    }

    /// The size LMDB gives `lock.mdb` for 1022 readers (a 64-byte slot each, after a header).
    static let lockFileBytes = 64 << 10

    /// Allocates the blocks of a new (or empty) `lock.mdb`, making the file, before LMDB maps
    /// it. LMDB writes its lock table through a shared map of the file, and on a full disk a
    /// page the file system had not allocated is a SIGBUS at the first write to it, which read
    /// as a data.mdb cut short, "restore it from a backup" (an audit: a new ledger on a full
    /// disk, and a sound one copied without its lock file, as `mdb_copy` leaves it; restoring
    /// would have lost the events since the backup). A full disk is then ENOSPC here, with
    /// nothing touched. The file's size stays LMDB's to set (`FALLOC_FL_KEEP_SIZE`): it reads
    /// the length of its reader table from it, and blocks allocated past the end stay
    /// allocated when it extends the file over them.
    ///
    /// A lock file that is there already has had its header written, and the reader slots
    /// LMDB hands out first: its holes are filled where the disk has room, and a full disk
    /// is no reason to refuse it (an audit: asking for its blocks whole made `stats` and
    /// `backup` refuse a sound ledger on a full disk, where reading it is what one wants).
    /// Any other failure (no permission, read-only media, a file system without `fallocate`)
    /// is left for LMDB to meet and report.
    static func reserveLockFile(_ path: String) throws {
        let lockFile = (path as NSString).appendingPathComponent("lock.mdb")
        let fd = open(lockFile, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o664)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return }
        let size = Int64(info.st_size)
        let reserved = ledger_reserve_keeping_size(fd, size > 0 ? size : Int64(lockFileBytes)) == 0
        if !reserved, errno == ENOSPC, size == 0 {
            throw LMDBError(code: ENOSPC, call: "fallocate(\(lockFile))")
        }
    }

    deinit {
        mdb_env_close(handle)
    }

    /// Opens named databases, creating those that are missing. Only creation needs a write
    /// transaction; an existing ledger is opened with a read transaction so that opening never
    /// waits for another process's long write.
    public func openDatabases(_ names: [String]) throws -> [String: Database] {
        do {
            return try openDatabases(names, create: false)
        } catch LMDBError.notFound {
            return try openDatabases(names, create: true)
        }
    }

    private func openDatabases(_ names: [String], create: Bool) throws -> [String: Database] {
        var opened: [String: Database] = [:]
        let body = { (txn: Transaction) throws in
            for name in names {
                var dbi: MDB_dbi = 0
                try check(mdb_dbi_open(txn.handle, name, create ? UInt32(MDB_CREATE) : 0, &dbi),
                          "mdb_dbi_open(\(name))")
                opened[name] = Database(dbi: dbi)
            }
        }
        if create {
            try write(body)
        } else {
            // The handles become usable by other transactions only once this one commits.
            try transaction(readOnly: true, commit: true, body)
        }
        databases.withLock { $0.merge(opened) { $1 } }
        return opened
    }

    /// Whether the main database (the catalogue of named databases) holds any key, and
    /// whether it holds `name`. Calls `mdb_dbi_open` with no name first: LMDB sets the main
    /// database's key order only then, and reading it before any open calls a null comparator.
    public func catalogue(has name: String) throws -> (any: Bool, named: Bool) {
        try transaction(readOnly: true, commit: false) { txn in
            var dbi: MDB_dbi = 0
            try check(mdb_dbi_open(txn.handle, nil, 0, &dbi), "mdb_dbi_open(main)")
            let main = Database(dbi: dbi)
            return (try txn.last(main) != nil, try txn.get(main, Array(name.utf8)) != nil)
        }
    }

    /// Runs `body` in a read-only transaction. The transaction, and every pointer obtained
    /// through it, is valid only during the closure.
    public func read<R>(_ body: (Transaction) throws -> R) throws -> R {
        try transaction(readOnly: true, commit: false, body)
    }

    /// Runs `body` in the write transaction, committing when it returns and aborting when it
    /// throws. `body` may run more than once (after the map grows), so it must not have side
    /// effects outside the transaction. The transaction is valid only during the closure.
    public func write<R>(_ body: (Transaction) throws -> R) throws -> R {
        if let refusal = notWritable("this command writes to it (an append, a rebuild, or bringing projections made by another build, or a layout an older build wrote, up to date)") {
            throw refusal
        }
        return try writeLock.withLock {
            while true {
                do {
                    return try transaction(readOnly: false, commit: true, body)
                } catch LMDBError.mapFull {
                    reruns.add(1, ordering: .relaxed)
                    try growMap { mapSize, _ in mapSize * 2 }
                }
            }
        }
    }

    /// LMDB checks a few of its pages' invariants as it walks them, and aborts the process when
    /// one fails: a page overwritten with other bytes fails them (an audit: `verify` of a
    /// ledger with one page zeroed died of SIGABRT after `mdb.c:5921: Assertion 'IS_LEAF(mp)'
    /// failed`). The process ends with one line and exit 1 instead; an uncommitted write is
    /// lost, as it would have been.
    private static let damagedPageFound: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> Void = { env, message in
        var path: UnsafePointer<CChar>?
        if let env { _ = mdb_env_get_path(env, &path) }
        let folder = path.map { String(cString: $0) } ?? "the ledger"
        let what = message.map { String(cString: $0) } ?? "an assertion failed"
        let line = "Error: the ledger at '\(folder)' is damaged: LMDB found one of its pages broken (\(what)). "
            + "Restore it from a backup ('ledger backup' makes one)\n"
        _ = line.withCString { Glibc.write(2, $0, strlen($0)) }
        _exit(1)
    }

    /// Whether the calling thread has a transaction open: called from a SIGSEGV handler, which
    /// ends the process with one line naming the ledger's file when LMDB (or a read of what it
    /// hands back) faults inside one. A damaged page can make LMDB follow a node it takes for a
    /// sub-database into a null cursor (an audit: `log` of a ledger with one page overwritten
    /// died with SIGSEGV and no word). Async-signal-safe once `prepareFaultCheck` has run.
    public static var threadHasTransaction: Bool { pthread_getspecific(transactionDepthKey) != nil }

    /// Creates the key `threadHasTransaction` reads, so that the handler never creates it.
    public static func prepareFaultCheck() { _ = transactionDepthKey }

    private static func adjustTransactionDepth(by change: Int) {
        let depth = Int(bitPattern: pthread_getspecific(transactionDepthKey)) + change
        pthread_setspecific(transactionDepthKey, UnsafeRawPointer(bitPattern: depth))
    }

    private func transaction<R>(readOnly: Bool, commit: Bool, _ body: (Transaction) throws -> R) throws -> R {
        Environment.adjustTransactionDepth(by: 1)
        defer { Environment.adjustTransactionDepth(by: -1) }
        // A transaction begun while this thread holds a read transaction cannot adopt a map
        // another process grew (`MDB_MAP_RESIZED` needs none open here), and waited for ever
        // for this thread's own lock (`verify`, found by a stress test). Callers pass the
        // transaction they hold instead; debug builds (the tests) trap on one that does not.
        assert(Environment.readDepth == 0, "a transaction begun inside a read transaction on one thread")
        if readOnly { Environment.readDepth += 1 }
        defer { if readOnly { Environment.readDepth -= 1 } }
        var attempts = 0
        while true {
            try lockSharedMapped()
            var txn: OpaquePointer?
            let code = mdb_txn_begin(handle, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn)
            if code == MDB_MAP_RESIZED, attempts < 3 {
                // Another process grew the map: adopt its size, with no transaction open here.
                resizeLock.unlockShared()
                attempts += 1
                try adoptGrownMap()
                continue
            }
            defer { resizeLock.unlockShared() }
            try check(code, readOnly ? "mdb_txn_begin(read)" : "mdb_txn_begin(write)")
            guard let txn else { throw LMDBError(code: EINVAL, call: "mdb_txn_begin") }
            let transaction = Transaction(handle: txn, environment: readOnly ? nil : handle)
            do {
                let result = try body(transaction)
                if readOnly, isOnReadOnlyMedia { try checkUnchanged(since: txn) }
                if commit {
                    let code = mdb_txn_commit(txn)
                    // LMDB reports a short write as EIO: that is what a full disk gives.
                    if code == EIO, !readOnly, hasLittleRoomLeft() {
                        throw LMDBError(code: ENOSPC, call: "mdb_txn_commit")
                    }
                    try check(code, "mdb_txn_commit")
                } else {
                    mdb_txn_abort(txn)
                }
                return result
            } catch {
                // mdb_txn_commit frees the transaction even when it fails; abort only otherwise.
                if let lmdb = error as? LMDBError, lmdb.call == "mdb_txn_commit" { throw error }
                mdb_txn_abort(txn)
                throw error
            }
        }
    }

    /// Writes a consistent copy of the environment, as one read snapshot sees it, to `fd`:
    /// writers go on meanwhile. On read-only media (no lock, so a writer elsewhere may reuse
    /// the snapshot's pages) a copy during which a commit landed is refused, as reads are
    /// (`checkUnchanged`). Calls `mdb_env_copyfd2`, as `mdb_copy` does.
    func copy(to fd: Int32) throws {
        var attempts = 0
        while true {
            let before = info.lastTransaction
            try lockSharedMapped()
            let code = mdb_env_copyfd2(handle, fd, 0)
            resizeLock.unlockShared()
            if code == 0, isOnReadOnlyMedia, info.lastTransaction != before {
                throw LedgerError.readOnlyMedia(path: path, reason: "the ledger changed while it was copied without LMDB's lock (a process writes to it through another mount), so the copy may be torn and is not kept; copy it where it is writable")
            }
            if code == MDB_MAP_RESIZED, attempts < 3 {
                // Another process grew the map: adopt its size, as `transaction` does.
                attempts += 1
                try adoptGrownMap()
                continue
            }
            try check(code, "mdb_env_copyfd2")
            return
        }
    }

    /// On read-only media, without LMDB's lock, a writer elsewhere (through another mount,
    /// opened after the check in `init`) does not know of this process's snapshot: the second
    /// commit after it may rewrite its pages. A read is only used if no commit at all followed
    /// its snapshot while it ran (the first one writes no page of it, and the second cannot
    /// begin before the first is in the meta page read here).
    private func checkUnchanged(since txn: OpaquePointer) throws {
        let snapshot = Int(mdb_txn_id(txn))
        guard mappedInfo.lastTransaction == snapshot else {
            throw LedgerError.readOnlyMedia(path: path, reason: "the ledger changed while it was read without LMDB's lock (a process writes to it through another mount), so what was read may be torn and is not used; read it where it is writable")
        }
    }

    /// Whether the file system holding the environment has under 64 MiB free for this user:
    /// a commit that then fails with a short write (EIO) ran out of disk.
    func hasLittleRoomLeft() -> Bool {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return false }
        return Double(info.f_bavail) * Double(info.f_frsize) < 64 * 1024 * 1024
    }

    /// Grows the map, before writing, until it has room for `bytes` more than the data holds.
    ///
    /// A write transaction that fills the map is aborted and run again on a doubled map
    /// (`write`), which for one long streaming transaction means decoding and writing
    /// everything again, once per doubling. Callers that can estimate what they are about to
    /// write (an append of a file, an import) reserve it first. The map only reserves address
    /// space: the file grows as pages are written, not to the map's size.
    /// At most `reserveLimit` is reserved in one call: an estimate is only an estimate (a zip
    /// archive states its own uncompressed size), and a write that needs more still grows
    /// the map the slow way.
    public func reserve(_ bytes: Int) throws {
        try writeLock.withLock {
            try growMap(fallBack: true) { mapSize, used in
                let wanted = used + max(0, min(bytes, Environment.reserveLimit))
                var next = mapSize
                while next < wanted { next *= 2 }
                return next
            }
        }
    }

    public static let reserveLimit = 1 << 40

    /// Sets the map to `size(current map size, bytes in use)` when that is larger. Called with
    /// the write lock held and no write transaction open; waits for this process's readers to
    /// finish (`mdb_env_set_mapsize` requires none active). The size is read and set under the
    /// exclusive lock, so a reader adopting a map another process grew (`transaction`) cannot
    /// slip between the two.
    ///
    /// A size this process cannot map is refused before LMDB is asked (`canMap`): LMDB unmaps
    /// the old map first, and when the new one then fails it is left with none, where the next
    /// transaction faulted (a review, under `ulimit -v`: an import said the ledger's file was
    /// damaged, and left the ledger it had made). With `fallBack`, the largest size between
    /// the current one and the wanted one that can be mapped is taken instead (a reservation
    /// is an estimate; the map still doubles when full); without, `mapCannotGrow` is thrown.
    private func growMap(fallBack: Bool = false, _ size: (_ mapSize: Int, _ used: Int) -> Int) throws {
        try resizeLock.withExclusive {
            let state = mappedInfo
            var next = size(state.mapSize, (state.lastPage + 1) * pageSize)
            guard next > state.mapSize else { return }
            // LMDB lets the old map go before it makes the new one: what must fit beside the
            // old one now is the difference.
            while !Environment.canMap(next - state.mapSize) {
                guard fallBack, next / 2 > state.mapSize else {
                    if fallBack { return }
                    throw LedgerError.mapCannotGrow(path: path, bytes: next, reason: String(cString: strerror(ENOMEM)))
                }
                next /= 2
            }
            try setMapSize(next)
        }
    }

    /// Adopts the map size another process grew the map to (with the exclusive lock held).
    private func adoptGrownMap() throws {
        try resizeLock.withExclusive { try setMapSize(0) }
    }

    /// `mdb_env_set_mapsize`. When it fails the old map is gone with it (what `canMap` is
    /// there to prevent, unless another thread took the address space in between, or another
    /// process grew the map past it): no transaction may begin on this environment after.
    /// `bytes` 0 adopts the size in the file (what another process grew it to, unknown here).
    private func setMapSize(_ bytes: Int) throws {
        let code = mdb_env_set_mapsize(handle, bytes)
        guard code == MDB_SUCCESS else {
            unmapped.store(true, ordering: .relaxed)
            throw LedgerError.mapCannotGrow(path: path, bytes: bytes == 0 ? nil : bytes, reason: String(cString: mdb_strerror(code)))
        }
    }

    /// Takes `resizeLock` shared, as everything that reads the map does, and throws (holding
    /// nothing) when a failed resize left no map (`unmapped`).
    private func lockSharedMapped() throws {
        resizeLock.lockShared()
        guard unmapped.load(ordering: .relaxed) else { return }
        resizeLock.unlockShared()
        throw LedgerError.mapCannotGrow(path: path, bytes: nil, reason: "its map could not be made after a failed resize")
    }

    /// Whether `bytes` of address space can be mapped now, beside the map in use: asked of
    /// the kernel with a mapping that reserves nothing and is let go at once.
    private static func canMap(_ bytes: Int) -> Bool {
        guard let probe = mmap(nil, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0),
              probe != MAP_FAILED else { return false }
        munmap(probe, bytes)
        return true
    }

    /// The id of the newest transaction that a read transaction begun now sees.
    ///
    /// Not `mdb_env_info`'s last transaction id: a commit writes its meta page (which that id
    /// is read from) before it publishes the transaction to new readers, and with synchronous
    /// meta writes the two are a disk flush apart. A poller that saw the id move and then read
    /// could get the old snapshot and wait for the next commit with the change unread.
    public var visibleTransaction: Int {
        (try? read { Int(mdb_txn_id($0.handle)) }) ?? info.lastTransaction
    }

    /// Sizes and positions from `mdb_env_info`, read with `resizeLock` shared (LMDB reads them
    /// from its meta pages, which are in the map another thread may be replacing: `stats`
    /// read them unlocked).
    public var info: (mapSize: Int, lastPage: Int, lastTransaction: Int, readersUsed: Int) {
        guard (try? lockSharedMapped()) != nil else { return (0, 0, 0, 0) }
        defer { resizeLock.unlockShared() }
        return mappedInfo
    }

    /// `info`, with `resizeLock` held by the caller (either way).
    private var mappedInfo: (mapSize: Int, lastPage: Int, lastTransaction: Int, readersUsed: Int) {
        if unmapped.load(ordering: .relaxed) { return (0, 0, 0, 0) }
        var info = MDB_envinfo()
        mdb_env_info(handle, &info)
        return (info.me_mapsize, info.me_last_pgno, info.me_last_txnid, Int(info.me_numreaders))
    }

    /// This process's resident pages shared with others (the file-backed ones: the map's, and
    /// the binary's and libraries'), in bytes, from `/proc/self/statm`; nil where it cannot be
    /// read. What an import watches to call `releaseMappedPages` only when the map has grown.
    public static var residentSharedBytes: Int? {
        guard let statm = Environment.procText("/proc/self/statm") else { return nil }
        let fields = statm.split(separator: " ")
        guard fields.count > 2, let pages = Int(fields[2]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Drops this process's resident copies of the map's pages (`madvise(MADV_DONTNEED)` on the
    /// read-only shared mapping LMDB reads through). The data stays in the OS page cache and
    /// is faulted back in on the next read; long imports call this between batches so their
    /// RSS reflects their own memory rather than every page of the ledger they touched.
    public func releaseMappedPages() {
        for range in mapRanges {
            guard let address = UnsafeMutableRawPointer(bitPattern: range.lowerBound) else { continue }
            madvise(address, Int(range.upperBound - range.lowerBound), MADV_DONTNEED)
        }
    }

    /// This process's resident pages of this environment's map alone, in bytes, from the map's
    /// `Rss:` in `/proc/self/smaps` (a walk of the page tables, exact, and untouched by other
    /// environments or threads); nil where it cannot be read.
    public var residentMapBytes: Int? {
        guard let smaps = Environment.procText("/proc/self/smaps") else { return nil }
        var total = 0, inMap = false
        for line in smaps.split(separator: "\n") {
            let first = line.prefix { $0 != " " }
            if first.contains("-"), first.allSatisfy({ $0.isHexDigit || $0 == "-" }) {  // a mapping's header
                inMap = isDataFileMapping(line)
            } else if inMap, line.hasPrefix("Rss:") {
                guard let kB = Int(line.dropFirst(4).trimmingCharacters(in: .whitespaces).split(separator: " ")[0]) else { return nil }
                total += kB * 1024
            }
        }
        return total
    }

    /// Whether a line of `/proc/self/maps` (or a mapping's header in `smaps`) maps `data.mdb`.
    private func isDataFileMapping(_ line: Substring) -> Bool {
        // LMDB does not expose where it mapped the file (me_mapaddr is only set with
        // MDB_FIXEDMAP), so the mapping is found by the file's name.
        let dataFile = (path as NSString).appendingPathComponent("data.mdb")
        return line.hasSuffix(dataFile) || line.hasSuffix((dataFile as NSString).resolvingSymlinksInPath)
    }

    /// A file of `/proc`, read to its end. (`String(contentsOfFile:)` makes one read of a file
    /// whose size is 0, as `/proc`'s are, and so sees only their first 4 KB: the map's line in
    /// `maps` lies past it in a process with enough mappings, and most of `smaps` always does.)
    private static func procText(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.readToEnd() else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// The address ranges at which this process maps `data.mdb`, from `/proc/self/maps`.
    private var mapRanges: [Range<UInt>] {
        guard let maps = Environment.procText("/proc/self/maps") else { return [] }
        return maps.split(separator: "\n").filter(isDataFileMapping).compactMap { line in
            let range = line.prefix { $0 != " " }.split(separator: "-")
            guard range.count == 2, let start = UInt(range[0], radix: 16), let end = UInt(range[1], radix: 16),
                  start < end else { return nil }
            return start..<end
        }
    }

    /// The bytes `data.mdb` must hold for the root pages its newest meta page names, and the
    /// bytes it holds, when it holds fewer: a cut-off file (a failed copy) that LMDB would map
    /// and then fault on with SIGBUS at the first read past its end. Nil when the roots are in
    /// the file. (The last page in use is no test: a page freed in the commit that allocated it
    /// is never written, so a sound file may end before it.) The meta pages are read first and
    /// the size after, as the file only grows.
    public var truncation: (needed: Int, held: Int)? {
        let dataFile = (path as NSString).appendingPathComponent("data.mdb")
        let fd = open(dataFile, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // MDB_meta after the 16-byte page header: magic (u32) at 16, the free and main
        // databases' roots at 80 and 128, the transaction id at 144 (lmdb.h, data version 1).
        var newest: (txnid: UInt64, roots: [UInt64])?
        for page in 0..<2 {
            var bytes = [UInt8](repeating: 0, count: 152)
            guard pread(fd, &bytes, bytes.count, off_t(page * pageSize)) == bytes.count else { continue }
            func word(_ offset: Int) -> UInt64 {
                bytes[offset..<(offset + 8)].reversed().reduce(0) { $0 << 8 | UInt64($1) }
            }
            guard word(16) & 0xFFFF_FFFF == 0xBEEF_C0DE else { continue }
            if word(144) >= newest?.txnid ?? 0 { newest = (word(144), [word(80), word(128)]) }
        }
        var status = stat()
        guard let newest, fstat(fd, &status) == 0 else { return nil }
        let roots = newest.roots.filter { $0 != UInt64.max }  // P_INVALID: an empty database
        guard let highest = roots.max() else { return nil }
        let needed = (Int(clamping: highest) + 1) * pageSize
        return Int(status.st_size) < needed ? (needed, Int(status.st_size)) : nil
    }

    /// The page size (`mdb_env_stat`).
    public var pageSize: Int {
        // (Read from a meta page, in the map: the system's page size is LMDB's.)
        if unmapped.load(ordering: .relaxed) { return sysconf(Int32(_SC_PAGESIZE)) }
        var stat = MDB_stat()
        mdb_env_stat(handle, &stat)
        return Int(stat.ms_psize)
    }
}

/// A `pthread_rwlock_t`, for letting many readers run while one thread resizes the map.
final class ReadWriteLock: @unchecked Sendable {
    // @unchecked: the lock lives at a stable heap address and pthread_rwlock is thread-safe.
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(lock, nil)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    func lockShared() { pthread_rwlock_rdlock(lock) }
    func unlockShared() { pthread_rwlock_unlock(lock) }

    func withExclusive<R>(_ body: () throws -> R) rethrows -> R {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}
