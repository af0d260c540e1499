import Foundation
import LedgerCore
import Synchronization

extension EventLog {
    /// Why `backup`, `walkChain` or `rebuildProjections` stopped before it was done:
    /// `isInterrupted` said so.
    public struct Interrupted: Error {}

    /// Copies the ledger, as one read snapshot sees it, into `destination`: a directory that
    /// does not exist yet (it is made, with the ledger directory's permissions; its parent
    /// must exist) or is empty. Appends and a server go on meanwhile; the copy is a ledger of
    /// its own (`--db DESTINATION`), with the log, its indexes, the projections and the API
    /// clients. Returns the bytes of the copy's `data.mdb`.
    ///
    /// The copy is written as `data.mdb.partial`, with the permissions of the ledger's own
    /// `data.mdb` (health data and token digests: an audit found a 0600 ledger copied 0644),
    /// flushed, then renamed to `data.mdb` and the directory flushed: a backup cut short (a
    /// crash, a full disk) leaves no `data.mdb` that could pass for a whole one. On failure,
    /// or when `isInterrupted` says so (it is asked every 20 ms while LMDB copies, on another
    /// thread), what was written is removed, and the directory if the backup made it.
    public func backup(to destination: String, isInterrupted: @escaping () -> Bool = { false }) throws -> Int64 {
        func fail(_ reason: String) -> LedgerError { .backupFailed(path: destination, reason: reason) }
        var status = stat()
        var made = false
        if lstat(destination, &status) == 0 {
            switch status.st_mode & S_IFMT {
            case S_IFDIR: break
            case S_IFLNK:
                var target = stat()
                guard stat(destination, &target) == 0, target.st_mode & S_IFMT == S_IFDIR else {
                    throw fail("it is a symbolic link to \(stat(destination, &target) == 0 ? "something that is not a directory" : "nothing"); a backup goes into a new or empty directory")
                }
            default:
                throw fail("it is \(EventLog.kindOfFile(destination)); a backup goes into a new or empty directory")
            }
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: destination)) ?? []
            guard entries.isEmpty else {
                let leftover = entries == ["data.mdb.partial"] ? " (a backup cut short left it: remove the directory and run the backup again)" : ""
                throw fail("the directory is not empty (it holds \(entries.sorted().prefix(3).joined(separator: ", "))\(entries.count > 3 ? ", …" : "")\(leftover)); a backup goes into a new or empty directory, so that it never mixes with or overwrites another")
            }
        } else {
            // DEST itself only, not its parents: a failed backup then leaves nothing behind.
            var source = stat()
            let mode = stat(path, &source) == 0 ? mode_t(source.st_mode & 0o7777) : 0o700
            guard mkdir(destination, mode) == 0 else {
                let failure = errno
                let parent = parentPath(destination)
                let missing = failure == ENOENT && !FileManager.default.fileExists(atPath: parent.isEmpty ? "." : parent)
                throw fail(missing ? "its parent directory does not exist" : String(cString: strerror(failure)))
            }
            chmod(destination, mode)  // as the ledger's, whatever the umask
            made = true
        }
        var source = stat()
        let fileMode = stat((path as NSString).appendingPathComponent("data.mdb"), &source) == 0
            ? mode_t(source.st_mode & 0o7777) : 0o600
        let partial = (destination as NSString).appendingPathComponent("data.mdb.partial")
        let final = (destination as NSString).appendingPathComponent("data.mdb")
        let fd = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, fileMode)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            if made { rmdir(destination) }
            throw fail(reason)
        }
        fchmod(fd, fileMode)
        func removeWritten() {
            unlink(partial)
            if made { rmdir(destination) }
        }
        // LMDB copies in one call, which nothing can cut short: it runs on a thread of its own
        // while this one watches for an interruption. On one, what was written is removed and
        // the backup returns, abandoning the copy: its thread goes on writing into the removed
        // file (holding a read snapshot of the ledger) until LMDB returns, or the process ends,
        // and then closes `fd` itself. Whichever side finishes last closes it, so its number
        // cannot be given to another file while the copy may still write to it.
        let outcome = Mutex<(result: Result<Void, any Error>?, abandoned: Bool)>((nil, false))
        let environment = environment
        let copier = Thread {
            let result = Result { try environment.copy(to: fd) }
            let abandoned = outcome.withLock { state -> Bool in
                state.result = result
                return state.abandoned
            }
            if abandoned { close(fd) }
        }
        copier.start()
        while outcome.withLock({ $0.result }) == nil {
            if isInterrupted(), outcome.withLock({ state -> Bool in
                if state.result == nil { state.abandoned = true }
                return state.abandoned
            }) {
                removeWritten()
                throw Interrupted()
            }
            usleep(20_000)
        }
        var open = true
        do {
            do {
                try outcome.withLock { $0.result! }.get()
            } catch let error as LMDBError {
                throw fail(error.message)
            }
            guard fsync(fd) == 0 else { throw fail("flushing the copy: \(String(cString: strerror(errno)))") }
            var info = stat()
            fstat(fd, &info)
            close(fd)
            open = false
            guard rename(partial, final) == 0 else { throw fail("naming the copy data.mdb: \(String(cString: strerror(errno)))") }
            let directory = Foundation.open(destination, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if directory >= 0 {
                fsync(directory)
                close(directory)
            }
            return Int64(info.st_size)
        } catch {
            if open { close(fd) }
            removeWritten()
            throw error
        }
    }
}
