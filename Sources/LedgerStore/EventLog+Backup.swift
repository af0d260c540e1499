import Foundation
import LedgerCore

extension EventLog {
    /// Copies the ledger, as one read snapshot sees it, into `destination`: a directory that
    /// does not exist yet (it is made) or is empty. Appends and a server go on meanwhile; the
    /// copy is a ledger of its own (`--db DESTINATION`), with the log, its indexes, the
    /// projections and the API clients. Returns the bytes of the copy's `data.mdb`.
    ///
    /// The copy is written as `data.mdb.partial`, flushed, then renamed to `data.mdb` and the
    /// directory flushed: a backup cut short (a crash, a full disk) leaves no `data.mdb` that
    /// could pass for a whole one. On failure what was written is removed, and a directory
    /// the backup made.
    public func backup(to destination: String) throws -> Int64 {
        func fail(_ reason: String) -> LedgerError { .backupFailed(path: destination, reason: reason) }
        var isDirectory: ObjCBool = false
        let manager = FileManager.default
        var made = false
        if manager.fileExists(atPath: destination, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw fail("it is a file; a backup goes into a new or empty directory") }
            let entries = (try? manager.contentsOfDirectory(atPath: destination)) ?? []
            guard entries.isEmpty else {
                throw fail("the directory is not empty (it holds \(entries.sorted().prefix(3).joined(separator: ", "))\(entries.count > 3 ? ", …" : "")); a backup goes into a new or empty directory, so that it never mixes with or overwrites another")
            }
        } else {
            if let failure = EventLog.makeDirectory(destination) { throw fail(String(cString: strerror(failure))) }
            made = true
        }
        let partial = (destination as NSString).appendingPathComponent("data.mdb.partial")
        let final = (destination as NSString).appendingPathComponent("data.mdb")
        let fd = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            if made { rmdir(destination) }
            throw fail(reason)
        }
        var open = true
        do {
            do {
                try environment.copy(to: fd)
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
            unlink(partial)
            if made { rmdir(destination) }
            throw error
        }
    }
}
