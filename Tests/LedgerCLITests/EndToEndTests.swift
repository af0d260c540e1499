import Foundation
import LedgerCore
@testable import LedgerStore
import LedgerTestSupport
import Testing

/// Tests that run the built `ledger` executable as a separate process.
@Suite("End to end (the real binary)", .serialized)
struct EndToEndTests {
    @Test("append, log and verify through the binary; stdout, stderr and exit codes separate")
    func basics() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            let append = try runProcess(binary, ["append", "--db", db], stdin: Array(Fixtures.stepsFile(count: 3).utf8))
            #expect(append.status == 0)
            #expect(append.stdout == "appended 3, duplicates 0, superseded 0, head 3\n")
            #expect(append.stderr.isEmpty)
            let bad = try runProcess(binary, ["append", "--db", db], stdin: Array("{\"kind\":1}\n".utf8))
            #expect(bad.status == 65)
            #expect(bad.stdout.isEmpty)
            #expect(bad.stderr == "Error: line 1: 'kind' must be a string, got a number\n")
            let log = try runProcess(binary, ["log", "--db", db, "--limit", "2"])
            #expect(log.stdout.split(separator: "\n").count == 2)
            let verify = try runProcess(binary, ["verify"], environment: ["LEDGER_DB": db])
            #expect(verify.status == 0)
            #expect(verify.stdout.hasPrefix("ok: 3 events"))
        }
    }

    /// Copying `data.mdb` while a writer commits can tear it; `mdb_copy` is not installed with
    /// the ledger. `backup` takes one snapshot, whatever runs meanwhile.
    @Test("backup copies one consistent snapshot while appends go on, and the copy is a ledger with the same log")
    func backupWhileAppending() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            #expect(try runProcess(binary, ["append", "--db", db], stdin: Array(Fixtures.stepsFile(count: 2_000).utf8)).status == 0)
            #expect(try runProcess(binary, ["client", "add", "coach", "--db", db]).status == 0)
            let root = NSTemporaryDirectory() + "ledger-backups-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: false)
            defer { try? FileManager.default.removeItem(atPath: root) }
            // Another process appends small batches while three backups run.
            let writer = try SpawnedGroup(shell: #"i=0; while [ $i -lt 400 ]; do printf '{"kind":"sample","user":"w","type":"steps","value":1,"start":"2026-03-01T00:%02d:00Z","end":"2026-03-01T00:%02d:30Z","source":"s%d"}\n' $((i % 60)) $((i % 60)) $i | "$LEDGER" append --db "$DB" > /dev/null || exit 1; i=$((i+1)); done"#,
                                          environment: ["LEDGER": binary, "DB": db])
            defer { writer.killGroup() }
            // The backups start once the writer has committed, and run beside its next commits.
            var writing = false
            for _ in 0..<500 where !writing {
                writing = try !runProcess(binary, ["log", "--db", db, "--from", "2001", "--limit", "1"]).stdout.isEmpty
                if !writing { usleep(10_000) }
            }
            #expect(writing, "the writer never appended")
            var heads: [UInt64] = []
            for index in 0..<3 {
                let destination = root + "/copy\(index)"
                let backup = try runProcess(binary, ["backup", destination, "--db", db])
                #expect(backup.status == 0, "\(backup.stderr)")
                let words = backup.stdout.split(separator: " ").map(String.init)
                #expect(backup.stdout.hasPrefix("backed up to \(destination): ") && backup.stdout.hasSuffix("; the copy's hash chain checks from seq 1\n"), "\(backup.stdout)")
                let head = try #require(words.firstIndex(of: "seq").flatMap { UInt64(words[$0 + 1].dropLast()) })
                let hash = try #require(words.firstIndex(of: "hash").map { String(words[$0 + 1].dropLast()) })
                heads.append(head)
                // The copy holds the source's log up to its head, byte for byte, hash included.
                let copied = try runProcess(binary, ["log", "--db", destination])
                let source = try runProcess(binary, ["log", "--db", db, "--limit", "\(head)"])
                #expect(copied.stdout == source.stdout && !copied.stdout.isEmpty)
                #expect(copied.stdout.split(separator: "\n").last?.contains(#""hash":"\#(hash)""#) == true)
                // And it is a whole ledger: projections as the source's were at that seq, the
                // clients, and verify's every check.
                let rows = try runProcess(binary, ["project", "daily", "--db", destination])
                let then = try runProcess(binary, ["replay", "--to-seq", "\(head)", "--db", db])
                #expect(rows.stdout == then.stdout && rows.status == 0)
                #expect(try runProcess(binary, ["client", "list", "--db", destination]).stdout.contains(#""name":"coach""#))
                let verify = try runProcess(binary, ["verify", "--db", destination])
                #expect(verify.status == 0 && verify.stdout.hasPrefix("ok: \(head) events"), "\(verify.stdout)\(verify.stderr)")
                #expect(!FileManager.default.fileExists(atPath: destination + "/data.mdb.partial"))
            }
            #expect(heads.allSatisfy { $0 > 2_000 }, "\(heads)")
        }
    }

    @Test("backup refuses a destination that is not new or empty, writing nothing, and names a damaged source's seq")
    func backupRefusals() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            #expect(try runProcess(binary, ["append", "--db", db], stdin: Array(Fixtures.stepsFile(count: 20).utf8)).status == 0)
            let root = NSTemporaryDirectory() + "ledger-backups-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: root + "/full", withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: root) }
            try Data("keep".utf8).write(to: URL(fileURLWithPath: root + "/full/notes.txt"))
            let full = try runProcess(binary, ["backup", root + "/full", "--db", db])
            #expect(full.status == 1 && full.stderr == "Error: cannot back up to '\(root)/full': the directory is not empty (it holds notes.txt); a backup goes into a new or empty directory, so that it never mixes with or overwrites another; nothing was written there\n", "\(full.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/full") == ["notes.txt"])
            let file = try runProcess(binary, ["backup", root + "/full/notes.txt", "--db", db])
            #expect(file.status == 1 && file.stderr.contains("it is a file"))
            // A FIFO is named as one (a review: "it is a file").
            #expect(mkfifo(root + "/fifo", 0o600) == 0)
            let fifo = try runProcess(binary, ["backup", root + "/fifo", "--db", db])
            #expect(fifo.status == 1 && fifo.stderr.contains("': it is a FIFO; a backup goes into"), "\(fifo.stderr)")
            let under = try runProcess(binary, ["backup", root + "/full/notes.txt/copy", "--db", db])
            #expect(under.status == 1 && under.stderr.hasPrefix("Error: cannot back up to '\(root)/full/notes.txt/copy': Not a directory"), "\(under.stderr)")
            #expect(try runProcess(binary, ["backup", db, "--db", db]).status == 64)
            #expect(try runProcess(binary, ["backup", "--db", db]).status == 64)
            // The ledger itself however it is spelled, or a directory inside it, is refused
            // with nothing written (`DB/sub` made a copy inside the ledger: an audit).
            try FileManager.default.createSymbolicLink(atPath: root + "/link", withDestinationPath: db)
            let name = (db as NSString).lastPathComponent
            for (destination, message) in [(db + "/.", "DEST is the ledger itself"), (db + "/../" + name, "DEST is the ledger itself"),
                                           (root + "/link", "DEST is the ledger itself"), (db + "/sub", "DEST is inside the ledger's directory"),
                                           (root + "/link/sub", "DEST is inside the ledger's directory")] {
                let refused = try runProcess(binary, ["backup", destination, "--db", db])
                #expect(refused.status == 64 && refused.stderr.hasPrefix("Error: \(message); a backup goes into another directory\n"), "\(destination): \(refused.stderr)")
            }
            #expect(!FileManager.default.fileExists(atPath: db + "/sub"))
            // A symbolic link to nothing; a parent that does not exist, which is not made (a
            // failed backup left the parents it had made).
            try FileManager.default.createSymbolicLink(atPath: root + "/dangling", withDestinationPath: root + "/nowhere")
            let dangling = try runProcess(binary, ["backup", root + "/dangling", "--db", db])
            #expect(dangling.status == 1 && dangling.stderr.contains("it is a symbolic link to nothing"), "\(dangling.stderr)")
            let orphan = try runProcess(binary, ["backup", root + "/a/b", "--db", db])
            #expect(orphan.status == 1 && orphan.stderr.contains("its parent directory does not exist"), "\(orphan.stderr)")
            #expect(!FileManager.default.fileExists(atPath: root + "/a"))
            // The copy keeps the ledger's permissions (health data and token digests: one
            // copied 0644 from a 0600 ledger could be read by every local user).
            chmod(db, 0o700)
            chmod(db + "/data.mdb", 0o600)
            #expect(try runProcess(binary, ["backup", root + "/private", "--db", db]).status == 0)
            let modes = try [root + "/private", root + "/private/data.mdb"].map {
                try #require(FileManager.default.attributesOfItem(atPath: $0)[.posixPermissions] as? Int)
            }
            #expect(modes == [0o700, 0o600], "\(modes.map { String($0, radix: 8) })")
            // An empty directory is taken.
            try FileManager.default.createDirectory(atPath: root + "/empty", withIntermediateDirectories: false)
            #expect(try runProcess(binary, ["backup", root + "/empty", "--db", db]).status == 0)
            // A source whose seq 13 was altered: the copy mirrors it, and its check names the seq.
            do {
                let log = try EventLog(path: db, create: false)
                try log.environment.write { txn in
                    var bytes = try #require(try txn.get(log.events, UInt64(13).bigEndianBytes))
                    bytes[bytes.count - 5] ^= 0x01
                    try txn.put(log.events, UInt64(13).bigEndianBytes, bytes)
                }
            }
            let damaged = try runProcess(binary, ["backup", root + "/damaged", "--db", db])
            #expect(damaged.status == 1 && damaged.stderr.hasPrefix("Error: the copy at '\(root)/damaged' was written but does not check (seq 13 is corrupt: its hash does not match"), "\(damaged.stderr)")
            #expect(damaged.stderr.hasSuffix("the ledger it was copied from is likely damaged the same way: run 'ledger verify' on it\n"))
        }
    }

    /// A failing import removes a ledger it created when it holds nothing: checking only that
    /// let it delete one a second import, started at the same moment, had just committed to.
    @Test("a ledger is removed as untouched only while no other process has it open")
    func removalWaitsForOtherProcesses() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            _ = try EventLog(path: db, create: true)
            // Another process with the ledger open: a subscriber waiting for changes, holding
            // LMDB's lock on lock.mdb (seen in /proc/locks with its pid).
            let child = try SpawnedGroup(shell: #"exec "$LEDGER" subscribe daily --db "$DB""#, environment: ["LEDGER": binary, "DB": db])
            var holding = false
            for _ in 0..<500 where !holding {
                let locks = String(decoding: (try? FileHandle(forReadingAtPath: "/proc/locks")?.readToEnd()) ?? Data(), as: UTF8.self)
                holding = locks.split(separator: "\n").contains { $0.split(separator: " ").contains(Substring(String(child.pid))) }
                if !holding { usleep(10_000) }
            }
            #expect(holding, "the subscriber never locked the ledger")
            // Each attempt with its own EventLog: one that tried is done (its locks are gone).
            #expect(try !EventLog(path: db, create: false).removeIfUntouched())
            #expect(FileManager.default.fileExists(atPath: db + "/data.mdb"))
            child.killGroup()
            #expect(try EventLog(path: db, create: false).removeIfUntouched())
            #expect(!FileManager.default.fileExists(atPath: db))
        }
    }

    /// An audit: `yes 'not json' | ledger append` read until memory ran out before naming line
    /// 1. Input whose first byte can begin no event is read only to the end of that line.
    @Test("append of endless input that can hold no event stops at its first line")
    func endlessGarbage() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            let run = try runProcess("/bin/sh", ["-c", #"yes 'not json' | timeout 20 "$0" append --db "$1" -"#, binary, db])
            #expect(run.status == 65 && run.stderr == "Error: line 1: malformed JSON: invalid token near 'not' (column 3)\n", "\(run.status) \(run.stderr)")
            // Blank lines first: the line is still named by its number.
            let blanks = try runProcess("/bin/sh", ["-c", #"{ printf '\n\n'; yes '  garbage'; } | timeout 20 "$0" append --db "$1" -"#, binary, db])
            #expect(blanks.status == 65 && blanks.stderr.hasPrefix("Error: line 3: malformed JSON"), "\(blanks.status) \(blanks.stderr)")
            #expect(!FileManager.default.fileExists(atPath: db))
        }
    }

    /// A failed open (here no memory to map the new ledger) used to leave LMDB's two files
    /// behind, which read commands then took for a ledger.
    @Test("an import whose new ledger cannot be opened leaves nothing behind")
    func failedOpenLeavesNothing() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            let export = try exportBeside(db, "<HealthData/>\n")
            defer { try? FileManager.default.removeItem(atPath: export) }
            let run = try runProcess("/bin/sh", ["-c", #"ulimit -v 150000; exec "$0" import apple-health "$1" --db "$2""#, binary, export, db])
            #expect(run.status == 1 && run.stderr.contains("mdb_env_open"), "\(run.stderr)")
            #expect(!FileManager.default.fileExists(atPath: db))
        }
    }

    /// An audit: a process killed between LMDB's creation of data.mdb and its first write
    /// (1 `kill -9` in 60 to 92 of a first `init` or `append`) left an empty data.mdb, which
    /// every later command, `init` included, refused as a ledger cut to nothing. The kill is
    /// put exactly there by strace (its first `pwrite`, LMDB's meta pages); skipped without it.
    @Test("a first init killed while LMDB writes the new file leaves no ledger, and init again makes it")
    func killedCreation() throws {
        let binary = try ledgerBinary()
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            print("killedCreation: skipped, /usr/bin/strace is not installed")
            return
        }
        try withTemporaryLedger { db in
            let killed = try runProcess("/usr/bin/strace", ["-qq", "-f", "-o", "/dev/null", "-e", "trace=pwrite64",
                                                            "-e", "inject=pwrite64:signal=KILL:when=1",
                                                            binary, "init", "--db", db, "--timezone", "Europe/Paris"])
            #expect(killed.status != 0)
            #expect(!FileManager.default.fileExists(atPath: db + "/data.mdb"))
            let stats = try runProcess(binary, ["stats", "--db", db])
            #expect(stats.status == 1 && stats.stderr.contains("no ledger"), "\(stats.stderr)")
            let again = try runProcess(binary, ["init", "--db", db, "--timezone", "Europe/Paris"])
            #expect(again.status == 0, "\(again.stderr)")
            #expect(try EventLog(path: db, create: false).defaultZone().name == "Europe/Paris")
            // The killed run's folder is gone with it: the directory holds the ledger alone.
            #expect(Set(try FileManager.default.contentsOfDirectory(atPath: db)) == ["data.mdb", "lock.mdb"])
        }
        // Killed after the data file was moved in (at the directory's `fsync`, which only that
        // step calls): the ledger is whole, and the next command that writes clears the folder.
        try withTemporaryLedger { db in
            let killed = try runProcess("/usr/bin/strace", ["-qq", "-f", "-o", "/dev/null", "-e", "trace=fsync",
                                                            "-e", "inject=fsync:signal=KILL:when=1",
                                                            binary, "init", "--db", db, "--timezone", "Asia/Tokyo"])
            #expect(killed.status != 0)
            #expect(try FileManager.default.contentsOfDirectory(atPath: db).contains { $0.hasPrefix(".ledger-new-") })
            let sample = Fixtures.stepsFile(count: 1)
            let append = try runProcess(binary, ["append", "--db", db], stdin: Array(sample.utf8))
            #expect(append.status == 0, "\(append.stderr)")
            #expect(Set(try FileManager.default.contentsOfDirectory(atPath: db)) == ["data.mdb", "lock.mdb"])
            #expect(try EventLog(path: db, create: false).defaultZone().name == "Asia/Tokyo")
        }
    }

    /// An audit: the clean-up of staging folders left by killed creations followed a link
    /// named like one (and emptied the ledger it pointed to), and emptied a user's folder so
    /// named. Only a real folder holding nothing but LMDB's files, of a process gone, goes.
    @Test("creating a ledger removes only its own abandoned staging folders")
    func stagingCleanupIsNarrow() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            let other = db + "-other"
            defer { try? FileManager.default.removeItem(atPath: other) }
            let sample = Fixtures.stepsFile(count: 1)
            #expect(try runProcess(binary, ["append", "--db", other], stdin: Array(sample.utf8)).status == 0)
            let manager = FileManager.default
            try manager.createDirectory(atPath: db, withIntermediateDirectories: true)
            try manager.createSymbolicLink(atPath: db + "/.ledger-new-999999-1", withDestinationPath: other)
            try manager.createDirectory(atPath: db + "/.ledger-new-999998-2", withIntermediateDirectories: false)
            try manager.copyItem(atPath: other + "/data.mdb", toPath: db + "/.ledger-new-999998-2/data.mdb")
            try Data("mine".utf8).write(to: URL(fileURLWithPath: db + "/.ledger-new-999998-2/notes.txt"))
            try manager.createDirectory(atPath: db + "/.ledger-new-999997-3", withIntermediateDirectories: false)
            try Data().write(to: URL(fileURLWithPath: db + "/.ledger-new-999997-3/lock.mdb"))
            let made = try runProcess(binary, ["init", "--db", db])
            #expect(made.status == 0, "\(made.stderr)")
            #expect(Set(try manager.contentsOfDirectory(atPath: other)).isSuperset(of: ["data.mdb", "lock.mdb"]))
            #expect(try runProcess(binary, ["verify", "--db", other]).stdout.hasPrefix("ok: 1 events"))
            #expect(Set(try manager.contentsOfDirectory(atPath: db + "/.ledger-new-999998-2")) == ["data.mdb", "notes.txt"])
            #expect(!manager.fileExists(atPath: db + "/.ledger-new-999997-3"))
        }
    }

    /// An audit: on a full disk LMDB's write into a new lock.mdb (a new ledger, or a sound one
    /// copied without its lock file) was a SIGBUS, reported as a data.mdb cut short with the
    /// advice to restore a backup, which would lose every event since; `rebuild`'s full disk
    /// was "storage failure". Each now says the disk is full, and loses nothing.
    @Test("a full disk is said to be full when opening without a lock file, creating, and rebuilding")
    func fullDiskMessages() throws {
        let binary = try ledgerBinary()
        let ran = try withTinyDisk { db in
            let folder = (db as NSString).deletingLastPathComponent
            let sample = Fixtures.stepsFile(count: 1)
            #expect(try runProcess(binary, ["append", "--db", db], stdin: Array(sample.utf8)).status == 0)
            let copy = folder + "/copy.db"
            try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: false)
            try FileManager.default.copyItem(atPath: db + "/data.mdb", toPath: copy + "/data.mdb")
            let filler = folder + "/filler"
            _ = try runProcess("/bin/dd", ["if=/dev/zero", "of=" + filler, "bs=4096", "count=1000"])
            // A ledger with its lock file reads on the full disk (an audit: asking for the
            // lock file's blocks whole refused `stats` there).
            let stats = try runProcess(binary, ["stats", "--db", db])
            #expect(stats.status == 0, "\(stats.stderr)")
            for arguments in [["verify", "--db", copy], ["init", "--db", folder + "/new.db"], ["rebuild", "--db", db]] {
                let run = try runProcess(binary, arguments)
                #expect(run.status == 1, "\(arguments): \(run.stderr)")
                #expect(run.stderr.contains("is full") && !run.stderr.contains("SIGBUS") && !run.stderr.contains("backup"),
                        "\(arguments): \(run.stderr)")
            }
            #expect(!FileManager.default.fileExists(atPath: folder + "/new.db"))
            try FileManager.default.removeItem(atPath: filler)
            for ledger in [copy, db] {
                let verify = try runProcess(binary, ["verify", "--db", ledger])
                #expect(verify.status == 0 && verify.stdout.hasPrefix("ok: 1 events"), "\(verify.stdout)\(verify.stderr)")
            }
        }
        if !ran { print("fullDiskMessages: skipped, this process cannot mount a tmpfs") }
    }

    /// SIGINT or SIGTERM ended an import at once: whole batches were kept, but nothing said
    /// so. (SIGTERM here: a test runner's children may inherit SIGINT ignored.)
    @Test("SIGTERM stops an import between batches, says what is in the ledger, and a re-run finishes it")
    func interruptedImport() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            let count = 30_000
            let records = (0..<count).map { #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2022-09-30 10:00:00 +0200" endDate="2022-09-30 10:01:00 +0200" value="\#($0)"/>"# }
            let export = try exportBeside(db, "<HealthData>\n" + records.joined(separator: "\n") + "\n</HealthData>\n")
            defer { try? FileManager.default.removeItem(atPath: export) }
            let child = try SpawnedGroup(shell: #"exec "$LEDGER" import apple-health "$FILE" --db "$DB" --batch 100 2>&1"#,
                                         environment: ["LEDGER": binary, "FILE": export, "DB": db])
            // Interrupted once some batches are in, well before the end.
            var head: UInt64 = 0
            for _ in 0..<2_000 where head == 0 {
                usleep(5_000)
                head = (try? EventLog(path: db, create: false).head().seq) ?? 0
            }
            kill(child.pid, SIGTERM)
            var status: Int32 = 0
            waitpid(child.pid, &status, 0)
            let printed = child.readRemainingOutput()
            #expect((status >> 8) & 0xFF == 130, "\(printed)")
            let kept = try EventLog(path: db, create: false).head().seq
            #expect(kept > 0 && kept < UInt64(count), "\(kept) of \(count)")
            #expect(printed == "Interrupted: the \(kept) records read before are in the ledger (\(kept) events appended); run the same command again to finish (what is already imported counts as duplicates)\n")
            let rerun = try runProcess(binary, ["import", "apple-health", export, "--db", db])
            #expect(rerun.status == 0)
            #expect(rerun.stdout.hasPrefix("read \(count) records: appended \(UInt64(count) - kept), duplicates \(kept), "), "\(rerun.stdout)")
        }
    }

    /// An audit: signals were looked at only between the batches the writer is handed, so an
    /// import of a pipe that sends only records of skipped types, or that stalls, went on past
    /// SIGTERM to its end, or for ever (it needed SIGKILL).
    @Test("SIGTERM stops an import of a pipe that sends only skipped records, or that stalls", arguments: ["skipped", "stalled"])
    func interruptedPipeImport(_ feed: String) throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            let fifo = db + ".fifo"
            #expect(mkfifo(fifo, 0o600) == 0)
            defer { unlink(fifo) }
            // Heart rate is not imported: an endless stream of it hands the writer nothing.
            let writer = feed == "skipped"
                ? #"(exec > "$FIFO" 2>/dev/null; printf '<HealthData>\n'; exec yes '<Record type="HKQuantityTypeIdentifierHeartRate" sourceName="W" unit="count/min" startDate="2019-05-16 16:20:49 -0400" endDate="2019-05-16 16:20:49 -0400" value="60"/>') &"#
                : #"(exec > "$FIFO"; printf '<HealthData>\n<Record type="HKQuantityTypeIdentifierStepCount" sourceName="W" unit="count" startDate="2019-05-16 16:20:49 -0400" endDate="2019-05-16 16:21:49 -0400" value="60"/>\n'; exec sleep 120) &"#
            let child = try SpawnedGroup(shell: writer + #" exec "$LEDGER" import apple-health "$FIFO" --db "$DB" 2>&1"#,
                                         environment: ["LEDGER": binary, "FIFO": fifo, "DB": db])
            defer { child.killGroup() }
            // The ledger is made once the import has started reading, its handlers in place.
            for _ in 0..<2_000 where !FileManager.default.fileExists(atPath: db + "/data.mdb") { usleep(5_000) }
            usleep(300_000)
            kill(child.pid, SIGTERM)
            var status: Int32 = 0
            var exited = false
            for _ in 0..<1_000 where !exited {  // at most 10 s
                exited = waitpid(child.pid, &status, WNOHANG) == child.pid
                if !exited { usleep(10_000) }
            }
            #expect(exited, "the import was still running 10 s after SIGTERM")
            guard exited else { return }
            #expect((status >> 8) & 0xFF == 130)
            // The writer goes first: dash leaves it a copy of this test's end of the output.
            child.killGroup()
            #expect(child.readRemainingOutput() == "Interrupted: nothing was imported\n")
            #expect(!FileManager.default.fileExists(atPath: db))
        }
    }

    /// An audit: SIGINT or SIGTERM during a long `append`, `rebuild` or `verify` ended the
    /// process by the signal, with nothing said (nothing was committed, but nobody was told).
    /// Now each exits 130 with one line; the writers give up their transaction, and an append
    /// that created the ledger removes it. (SIGTERM: a test runner's children may inherit
    /// SIGINT ignored, which `ledger` then keeps ignoring.)
    @Test("SIGTERM stops append, rebuild and verify: exit 130, one line, nothing committed",
          arguments: ["append", "append-new", "rebuild", "rebuild-indexes", "verify"])
    func interruptedCommands(_ command: String) throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            let events = db + "-events.ndjson"
            try Fixtures.stepsFile(count: 20_000).write(toFile: events, atomically: false, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: events) }
            let target = command == "append-new" ? db + "-new" : db
            if command != "append-new" {
                #expect(try runProcess(binary, ["append", events, "--db", db]).status == 0)
                // The append below adds another user's 20,000, none of them a duplicate.
                try Fixtures.stepsFile(count: 20_000, user: "other").write(toFile: events, atomically: false, encoding: .utf8)
            }
            let before = command == "append-new" ? nil : try EventLog(path: db, create: false)
            let transaction = before?.lastTransactionID
            let arguments: String
            let expected: String
            switch command {
            case "append", "append-new":
                arguments = #"append "$EVENTS""#
                expected = "Interrupted: the append was stopped before its commit; nothing of it was written\n"
            case "rebuild":
                arguments = "rebuild"
                expected = "Interrupted: the rebuild was stopped before its commit; nothing was changed: the projections are as they were\n"
            case "rebuild-indexes":
                arguments = "rebuild --indexes"
                expected = "Interrupted: the rebuild was stopped before its commit; nothing was changed: the projections and the log's indexes are as they were\n"
            default:
                arguments = "verify"
                expected = "Interrupted: verify was stopped before it finished; the ledger was not checked to its end\n"
            }
            let child = try SpawnedGroup(shell: #"exec "$LEDGER" "# + arguments + #" --db "$DB" 2>&1"#,
                                         environment: ["LEDGER": binary, "EVENTS": events, "DB": target])
            defer { child.killGroup() }
            // Sent once the command catches SIGTERM (its handler is in place before the work
            // that takes seconds here begins), so that it lands in that work.
            #expect(waitUntilCatching(SIGTERM, child.pid), "the command never caught SIGTERM")
            kill(child.pid, SIGTERM)
            var status: Int32 = 0
            var exited = false
            for _ in 0..<1_000 where !exited {  // at most 10 s
                exited = waitpid(child.pid, &status, WNOHANG) == child.pid
                if !exited { usleep(10_000) }
            }
            #expect(exited, "\(command) was still running 10 s after SIGTERM")
            guard exited else { return }
            #expect((status & 0x7F) == 0 && (status >> 8) & 0xFF == 130, "status \(status)")
            #expect(child.readRemainingOutput() == expected)
            if let before, let transaction {
                // No transaction was committed: the log, its indexes and projections are the ones before.
                #expect(before.lastTransactionID == transaction)
                #expect(try before.head().seq == 20_000)
            } else {
                #expect(!FileManager.default.fileExists(atPath: target), "the ledger the append created was left")
            }
        }
    }

    /// Arguments are read as UTF-8: one that is not used to reach the command mangled, and
    /// an import said a file with U+FFFD in its name did not exist.
    @Test("an argument that is not UTF-8 is a usage error that says so")
    func argumentNotUTF8() throws {
        let binary = try ledgerBinary()
        let run = try runProcess("/bin/sh", ["-c", #"exec "$0" import apple-health "$(printf 'ok\377.xml')""#, binary])
        #expect(run.status == 64)
        // With the command's usage line, as every usage error has (SPEC §5; it had none).
        #expect(run.stderr.hasPrefix("Error: argument 3 is not valid UTF-8; ledger reads its arguments as UTF-8 (rename such a file, or link to it under a UTF-8 name)\nUsage: ledger import apple-health FILE"), "\(run.stderr)")
        let first = try runProcess("/bin/sh", ["-c", #"exec "$0" "$(printf 'x\377')""#, binary])
        #expect(first.status == 64 && first.stderr.hasSuffix("\nUsage: ledger <command> [options]\n"), "\(first.stderr)")
    }

    @Test("both binaries allocate with jemalloc (linked for speed, see Package.swift)", arguments: ["ledger", "ledger-dynamic"])
    func allocator(name: String) throws {
        let binary = name == "ledger" ? try ledgerBinary() : try ledgerDynamicBinary()
        // jemalloc prints its statistics at exit when told to; glibc's malloc ignores MALLOC_CONF.
        let run = try runProcess(binary, ["--version"], environment: ["MALLOC_CONF": "stats_print:true"])
        #expect(run.status == 0)
        #expect(run.stdout.hasPrefix("ledger "))
        #expect(run.stderr.contains("Begin jemalloc statistics"))
        // Loaded is not enough: the process's own allocations must go through it (were glibc's
        // malloc bound first, jemalloc would count next to nothing). Start-up alone allocates
        // some hundreds of KiB.
        let allocated = run.stderr.split(separator: "\n").first { $0.hasPrefix("Allocated: ") }
            .flatMap { Int($0.dropFirst("Allocated: ".count).prefix { $0.isNumber }) }
        #expect((allocated ?? 0) > 64 * 1024, "jemalloc's statistics: \(allocated.map(String.init) ?? "no 'Allocated:' line")")
    }

    /// `ledger` starts with no dynamic loader (Package.swift, `staticExecutable`): an ELF file
    /// with no interpreter to run it and no shared library needed, and still position
    /// independent (type ET_DYN, with a dynamic section for its own relocations), so that its
    /// address is randomised.
    @Test("ledger is a static position-independent executable: no interpreter, no shared library, randomised address, RELRO")
    func staticExecutable() throws {
        let elf = try ELFFile(path: try ledgerBinary())
        #expect(elf.type == 3, "e_type \(elf.type): 2 would be a fixed-address executable")
        #expect(!elf.segmentTypes.contains(3), "a PT_INTERP segment: the binary needs a dynamic loader")
        #expect(elf.segmentTypes.contains(2), "no PT_DYNAMIC segment: no relocations, so not position independent")
        #expect(elf.neededLibraries.isEmpty, "DT_NEEDED entries: \(elf.neededLibraries)")
        #expect(!elf.hasLibraryPath, "a DT_RUNPATH or DT_RPATH entry: glibc's static start-up asserts there is none")
        #expect(elf.segmentTypes.contains(0x6474_E552), "no PT_GNU_RELRO: the relocated pointers would stay writable")
        // And it runs: were the library path there, it would crash before main.
        let run = try runProcess(try ledgerBinary(), ["--version"])
        #expect(run.status == 0 && run.stdout.hasPrefix("ledger "), "\(run.status): \(run.stderr)")
    }

    @Test("ledger-dynamic loads no shared LMDB, libcrypto or Jansson (linked from their archives for start-up, see Package.swift)")
    func staticArchives() throws {
        let binary = try ledgerDynamicBinary()
        // What `ldd` does: the dynamic loader lists the shared objects it would load, and exits.
        let run = try runProcess(binary, ["--version"], environment: ["LD_TRACE_LOADED_OBJECTS": "1"])
        #expect(run.status == 0)
        let loaded = run.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(loaded.contains { $0.hasPrefix("libc.so") }, "the loader's list: \(run.stdout)")
        for name in ["liblmdb", "libcrypto", "libjansson"] {
            #expect(!loaded.contains { $0.hasPrefix(name) }, "\(name) is loaded: \(run.stdout)")
        }
    }

    /// `serve` and `import` open shared libraries, which the static `ledger` cannot: it runs them
    /// in `ledger-dynamic`, found next to the file it was started from, through symbolic links.
    @Test("ledger runs import and serve in ledger-dynamic next to it, through a link; alone, it says what is missing and writes nothing")
    func companion() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { ledger in
            // The folder as /proc/self/exe gives it (TMPDIR may pass through a link), as the messages quote it.
            let folder = URL(fileURLWithPath: ledger).deletingLastPathComponent().resolvingSymlinksInPath().path
            let export = folder + "/export.xml"
            let records = (1...2).map { #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2022-09-30 10:0\#($0):00 +0200" endDate="2022-09-30 10:0\#($0 + 1):00 +0200" value="\#($0 * 100)"/>"# }
            try ("<HealthData>\n" + records.joined(separator: "\n") + "\n</HealthData>\n").write(toFile: export, atomically: true, encoding: .utf8)

            // Through a symbolic link in another folder: the companion is the one next to the target.
            let linked = folder + "/linked-ledger"
            try FileManager.default.createSymbolicLink(atPath: linked, withDestinationPath: binary)
            let db = folder + "/a.db"
            let imported = try runProcess(linked, ["import", "apple-health", export, "--db", db])
            #expect(imported.status == 0, "\(imported.stderr)")
            #expect(imported.stdout.hasPrefix("read 2 records: appended 2"), "\(imported.stdout)")
            // A marker of another process (inherited, or copied from a server's environment) is
            // ignored: it would otherwise refuse the command as a loop.
            let foreign = try runProcess(linked, ["import", "apple-health", export, "--db", db],
                                         environment: ["LEDGER_STARTED_BY_STATIC_LEDGER": "1/ledger/\(folder)/ledger"])
            #expect(foreign.status == 0 && foreign.stdout.hasPrefix("read 2 records: appended 0, duplicates 2"), "\(foreign.stderr)")
            // The companion's messages name `ledger`, as the program the user ran.
            let usage = try runProcess(linked, ["serve", "--no-such-option"])
            #expect(usage.status == 64)
            #expect(usage.stderr.hasPrefix("Error: unknown option '--no-such-option'") && usage.stderr.contains("\nUsage: ledger serve"), "\(usage.stderr)")

            // Running, the companion goes by the static binary's name, as the process did before
            // (`pgrep -x ledger`, `killall ledger`), and keeps its pid.
            let server = try ServerProcess(binary: linked, db: db, arguments: ["--no-auth"])
            let comm = try String(contentsOfFile: "/proc/\(server.process.processIdentifier)/comm", encoding: .utf8)
            // The very process started, now running the companion's file: not a child of it.
            let running = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(server.process.processIdentifier)/exe")
            #expect(server.stop() == 0)
            #expect(comm == "linked-ledger\n")
            #expect(running.hasSuffix("/ledger-dynamic"), "\(running)")

            // A copy without its companion: every other command works; these two say what is missing,
            // and write nothing. Help and the option parser's usage errors are its own.
            let alone = folder + "/alone"
            try FileManager.default.createDirectory(atPath: alone, withIntermediateDirectories: false)
            try FileManager.default.copyItem(atPath: binary, toPath: alone + "/ledger")
            let project = try runProcess(alone + "/ledger", ["project", "daily-steps", "--db", db, "--format", "json"])
            #expect(project.status == 0 && project.stdout.contains("\"value\":"), "\(project.stderr)")
            let other = folder + "/b.db"
            for arguments in [["import", "apple-health", export, "--db", other], ["--db", other, "serve", "--listen", "127.0.0.1:0"]] {
                // Under `timeout`: a `serve` that started after all would fail the test, not hang it.
                let run = try runProcess("/usr/bin/timeout", ["20", alone + "/ledger"] + arguments)
                #expect(run.status == 1)
                let command = arguments.contains("serve") ? "serve" : "import"
                #expect(run.stderr == "Error: 'ledger \(command)' runs in ledger-dynamic, the same program linked with the shared libraries that \(command) opens, and it could not be run (No such file or directory) from \(alone)/ledger-dynamic. It is built with ledger and must be installed beside it, executable\n", "\(run.stderr)")
                #expect(!FileManager.default.fileExists(atPath: other))
                let help = try runProcess(alone + "/ledger", [command, "--help"])
                #expect(help.status == 0 && help.stdout.hasPrefix("OVERVIEW: "), "\(help.stderr)")
                let usage = try runProcess(alone + "/ledger", [command, "--no-such-option"])
                #expect(usage.status == 64 && usage.stderr.hasPrefix("Error: unknown option '--no-such-option'"), "\(usage.stderr)")
            }

            // A static ledger installed as its own companion (a link to it, or a copy) would run
            // itself for ever: it says so instead.
            for copy in [false, true] {
                let wrong = folder + (copy ? "/copied" : "/looped")
                try FileManager.default.createDirectory(atPath: wrong, withIntermediateDirectories: false)
                try FileManager.default.copyItem(atPath: binary, toPath: wrong + "/ledger")
                if copy {
                    try FileManager.default.copyItem(atPath: binary, toPath: wrong + "/ledger-dynamic")
                } else {
                    try FileManager.default.createSymbolicLink(atPath: wrong + "/ledger-dynamic", withDestinationPath: "ledger")
                }
                // Under `timeout`: were the loop back, the test would fail (124), not hang.
                let run = try runProcess("/usr/bin/timeout", ["20", wrong + "/ledger", "import", "apple-health", export, "--db", other])
                #expect(run.status == 1)
                #expect(run.stderr == "Error: 'ledger import' runs in ledger-dynamic, the same program linked with the shared libraries that import opens, but the ledger-dynamic in \(wrong) is a static ledger itself (a copy of ledger or a link to it). Install the ledger-dynamic built with ledger in its place\n", "\(run.stderr)")
                #expect(!FileManager.default.fileExists(atPath: other))
            }

            // A folder whose name is not UTF-8 (Latin-1 "café") is found all the same: the path was
            // read as a string, with U+FFFD in place of the byte, and named no folder.
            let latin1 = try runProcess("/bin/sh", ["-c", #"d="$1/$(printf 'caf\351')" && mkdir "$d" && cp "$2" "$3" "$d"/ && exec "$d"/ledger import apple-health "$4" --db "$5""#,
                                                    "sh", folder, binary, try ledgerDynamicBinary(), export, folder + "/c.db"])
            #expect(latin1.status == 0 && latin1.stdout.hasPrefix("read 2 records: appended 2"), "\(latin1.stderr)")
        }
    }

    /// An audit: `stats` read the data file's size through FileManager's attributes, which look
    /// up the owner's and group's names. For ids that /etc/passwd and /etc/group do not list,
    /// the static binary's glibc loaded another NSS module (libnss_systemd), which brought a
    /// second libc and crashed the process (SIGSEGV, nothing said): a ledger restored with its
    /// numeric owner, or read by a container's unnamed user.
    @Test("a ledger owned by a user and group with no name: every reading command works, run as root and as that user",
          .enabled(if: getuid() == 0, "chown needs root"))
    func unnamedOwner() throws {
        // The crash needed an NSS module besides `files` for passwd or group (here `systemd`);
        // where there is none, the test still runs, but could not have failed before the fix.
        let nsswitch = (try? String(contentsOfFile: "/etc/nsswitch.conf", encoding: .utf8)) ?? ""
        let modules = nsswitch.split(separator: "\n").filter { $0.hasPrefix("passwd:") || $0.hasPrefix("group:") }
            .flatMap { $0.split(separator: " ").dropFirst() }.filter { $0 != "files" && !$0.hasPrefix("[") }
        if modules.isEmpty { print("unnamedOwner: /etc/nsswitch.conf names no NSS module besides files; the case it guards cannot arise here") }
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            #expect(try runProcess(binary, ["append", "--db", db], stdin: Array(Fixtures.stepsFile(count: 3).utf8)).status == 0)
            let (uid, gid) = (Int(47_011), Int(47_013))
            #expect(getpwuid(uid_t(uid)) == nil && getgrgid(gid_t(gid)) == nil, "the ids must be unnamed here")
            #expect(try runProcess("/bin/chown", ["-R", "\(uid):\(gid)", db]).status == 0)
            let commands = [["stats"], ["verify"], ["log", "--limit", "1"], ["project", "daily-steps"]]
            for command in commands {
                let run = try runProcess(binary, command + ["--db", db])
                #expect(run.status == 0, "\(command): \(run.status) \(run.stderr)")
                if command == ["stats"] { #expect(run.stdout.contains("\"file_bytes\":") && !run.stdout.contains("\"file_bytes\":0,"), "\(run.stdout)") }
            }
            // Run as that user (its own ledger, so it may take the lock): setpriv is util-linux's.
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else { return }
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: URL(fileURLWithPath: db).deletingLastPathComponent().path)
            for command in commands {
                let run = try runProcess("/usr/bin/setpriv", ["--reuid", "\(uid)", "--regid", "\(gid)", "--clear-groups", binary] + command + ["--db", db])
                #expect(run.status == 0, "as \(uid): \(command): \(run.status) \(run.stderr)")
            }
        }
    }

    /// A review: a first append that met another process inside `mdb_env_open` (data.mdb made,
    /// its meta pages not yet written) called the new ledger damaged (4 runs in 360).
    @Test("six first appends at once to a new ledger, 15 times: each succeeds, none calls it damaged")
    func concurrentCreation() async throws {
        let binary = try ledgerBinary()
        try await withTemporaryLedger { folder in
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
            for round in 0..<15 {
                let db = folder + "/r\(round).db"
                try await withThrowingTaskGroup(of: ProcessOutput.self) { group in
                    for writer in 0..<6 {
                        group.addTask {
                            try runProcess(binary, ["append", "--db", db], stdin: Array(Fixtures.stepsFile(count: 1, user: "w\(writer)").utf8))
                        }
                    }
                    for try await output in group {
                        #expect(output.status == 0, "round \(round): \(output.stderr)")
                    }
                }
                #expect(try EventLog(path: db, create: false).head().seq == 6)
            }
        }
    }

    @Test("four appending processes at once lose nothing and the chain verifies")
    func concurrentWriters() async throws {
        let binary = try ledgerBinary()
        try await withTemporaryLedger { db in
            try await withThrowingTaskGroup(of: ProcessOutput.self) { group in
                for writer in 0..<4 {
                    group.addTask {
                        try runProcess(binary, ["append", "--db", db],
                                       stdin: Array(Fixtures.stepsFile(count: 500, user: "writer-\(writer)").utf8))
                    }
                }
                for try await output in group {
                    #expect(output.status == 0, "\(output.stderr)")
                }
            }
            let log = try EventLog(path: db, create: false)
            #expect(try log.head().seq == 2_000)
            #expect(try log.verifyChain().verified == 2_000)
        }
    }

    @Test("killed with SIGKILL mid-append 20 times: the ledger opens, verifies, and keeps every printed head")
    func crashSafety() throws {
        let binary = try ledgerBinary()
        var generator = SeededGenerator.fromEnvironment()
        try withTemporaryLedger { db in
            #expect(try runProcess(binary, ["init", "--db", db]).status == 0)
            var headsPrinted = 0
            for round in 0..<20 {
                // Each batch holds 50 new samples (distinct sources make distinct ids).
                let script = """
                i=0
                while :; do
                  i=$((i+1))
                  j=0
                  while [ $j -lt 50 ]; do
                    j=$((j+1))
                    printf '{"kind":"sample","type":"steps","value":%d,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:10:00Z","source":"r\(round)-b%d"}\\n' $j $i
                  done | "$LEDGER" append --db "$DB" || exit 1
                done
                """
                let child = try SpawnedGroup(shell: script, environment: ["LEDGER": binary, "DB": db])
                let delay = UInt32.random(in: 30_000...250_000, using: &generator)
                usleep(delay)
                child.killGroup()
                let printed = child.readRemainingOutput()
                let heads = printed.split(separator: "\n").compactMap { line -> UInt64? in
                    guard let range = line.range(of: "head ") else { return nil }
                    return UInt64(line[range.upperBound...])
                }
                headsPrinted += heads.count
                let log = try EventLog(path: db, create: false)
                let report = try log.verifyChain()
                let head = report.head.seq
                #expect(report.verified == head, "seed \(generator.seed), round \(round): gap in seq")
                for printedHead in heads {
                    #expect(printedHead <= head, "seed \(generator.seed), round \(round): head \(printedHead) was printed but the log ends at \(head)")
                }
                #expect(head % 50 == 0, "seed \(generator.seed), round \(round): a batch was half-written (head \(head))")
            }
            // The kills must have landed while batches were being committed, not before any.
            #expect(headsPrinted > 0)
            #expect(try EventLog(path: db, create: false).head().seq >= UInt64(headsPrinted) * 50)
        }
    }

    /// Opening checks the roots; a file cut after them but before other pages still in use is
    /// found only when a read reaches such a page, and LMDB's map then raises SIGBUS.
    @Test("a data.mdb cut after its roots: verify ends with one line and exit 1, not SIGBUS")
    func cutAfterRoots() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            #expect(try runProcess(binary, ["append", "--db", db], stdin: Array(Fixtures.stepsFile(count: 3000).utf8)).status == 0)
            // Small commits after a large one reuse freed pages, so the newest roots lie low.
            for day in 1...3 {
                let line = #"{"kind":"sample","user":"zed","type":"steps","value":\#(day),"start":"2026-03-0\#(day)T08:00:00Z","end":"2026-03-0\#(day)T08:10:00Z","source":"iPhone"}"#
                #expect(try runProcess(binary, ["append", "--db", db], stdin: Array(line.utf8)).status == 0)
            }
            let path = db + "/data.mdb"
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            let pageSize = 4096
            func word(_ page: Int, _ offset: Int) -> Int {
                data.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: page * pageSize + offset, as: UInt64.self)) }
            }
            // The newest of the two meta pages (transaction id at 144), and its free and main roots.
            let meta = word(0, 144) >= word(1, 144) ? 0 : 1
            let cut = max(word(meta, 80), word(meta, 128)) + 1
            try #require(cut < data.count / pageSize, "the newest roots are the file's last pages: nothing to cut after them")
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            try handle.truncate(atOffset: UInt64(cut * pageSize))
            try handle.close()
            let verify = try runProcess(binary, ["verify", "--db", db])
            #expect(verify.status == 1)
            #expect(verify.stderr == "Error: reading the ledger's map failed (SIGBUS): its data.mdb ends before a page it uses (the file was cut short). Restore it from a backup ('ledger backup' makes one)\n")
        }
    }

    /// LMDB trusts its pages: one overwritten with other bytes sent it through a null cursor
    /// (`log` died of SIGSEGV) or into one of its assertions (`verify` died of SIGABRT after
    /// `Assertion 'IS_LEAF(mp)' failed`), 89 deaths by signal in 804 runs over every page of
    /// a small ledger (an audit). Every page is damaged in turn, zeroed and filled with
    /// seeded random bytes; no command dies of a signal, and each says at most one line.
    @Test("every page of a ledger damaged in turn: log, verify and project end with exit 0 or 1 and one line, never a signal")
    func everyPageDamaged() throws {
        let binary = try ledgerBinary()
        let generator = (binary as NSString).deletingLastPathComponent + "/ledger-gen"
        try #require(FileManager.default.isExecutableFile(atPath: generator), "ledger-gen is built beside ledger")
        let events = try runProcess(generator, ["--days", "2", "--seed", "1"])
        try withTemporaryLedger { db in
            #expect(try runProcess(binary, ["init", "--db", db, "--timezone", "Europe/Berlin"]).status == 0)
            #expect(try runProcess(binary, ["append", "--db", db], stdin: Array(events.stdout.utf8)).status == 0)
            let original = try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb"))
            let pageSize = 4096
            let copy = db + ".damaged"
            defer { try? FileManager.default.removeItem(atPath: copy) }
            var random = SplitMix64(seed: 7)
            var outcomes: [Int32: Int] = [:]
            for page in 0..<(original.count / pageSize) {
                for fill in 0..<2 {
                    var damaged = original
                    for offset in 0..<pageSize {
                        damaged[page * pageSize + offset] = fill == 0 ? 0 : UInt8(truncatingIfNeeded: random.next())
                    }
                    try? FileManager.default.removeItem(atPath: copy)
                    try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: false)
                    try damaged.write(to: URL(fileURLWithPath: copy + "/data.mdb"))
                    for command in [["log", "--format", "ndjson"], ["verify"], ["project", "daily"]] {
                        let run = try runProcess(binary, command + ["--db", copy])
                        outcomes[run.status, default: 0] += 1
                        #expect(run.status == 0 || run.status == 1, "page \(page), fill \(fill), \(command): exit \(run.status), \(run.stderr)")
                        #expect(run.stderr.split(separator: "\n").count <= 1, "page \(page), fill \(fill), \(command): \(run.stderr)")
                    }
                }
            }
            // The damage is seen: most damaged copies fail verify.
            #expect(outcomes[1, default: 0] > outcomes.values.reduce(0, +) / 4, "\(outcomes)")
        }
    }

    /// An audit: LMDB opens lock.mdb by name and writes its lock table into it even for a
    /// reader, so a symbolic link there made `stats`, run as root, overwrite /etc/passwd.
    @Test("a lock.mdb or data.mdb that is a symbolic link is refused, by readers and writers, and its target is left as it was")
    func linkedFilesRefused() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            #expect(try runProcess(binary, ["append", "--db", db], stdin: Array((goodSample + "\n").utf8)).status == 0)
            let victim = db + ".victim"
            try "victim\n".write(toFile: victim, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: victim) }
            for file in ["lock.mdb", "data.mdb"] {
                let path = db + "/" + file
                let saved = path + ".saved"
                #expect(rename(path, saved) == 0)
                #expect(symlink(victim, path) == 0)
                for command in [["stats"], ["log"], ["verify"], ["append"]] {
                    let run = try runProcess(binary, command + ["--db", db], stdin: Array((goodSample + "\n").utf8))
                    #expect(run.status == 1, "\(command): \(run.stderr)")
                    #expect(run.stderr == "Error: the ledger at '\(db)' has a \(file) that is a symbolic link to '\(victim)', not a regular file: LMDB would write through it, so the ledger was not opened and nothing was written. Replace it with a regular file (a copy of the ledger made by 'ledger backup' or mdb_copy has both)\n")
                }
                #expect(try String(contentsOfFile: victim, encoding: .utf8) == "victim\n")
                #expect(unlink(path) == 0 && rename(saved, path) == 0)
            }
            #expect(try runProcess(binary, ["verify", "--db", db]).status == 0)
        }
    }

    @Test("Debian's mdb_stat reads the ledger directory")
    func mdbStat() throws {
        let binary = try ledgerBinary()
        let mdbStat = "/usr/bin/mdb_stat"
        try #require(FileManager.default.isExecutableFile(atPath: mdbStat), "install lmdb-utils (.ci/run does)")
        try withTemporaryLedger { db in
            _ = try runProcess(binary, ["append", "--db", db], stdin: Array(Fixtures.stepsFile(count: 7).utf8))
            let stat = try runProcess(mdbStat, ["-a", db])
            #expect(stat.status == 0, "\(stat.stderr)")
            #expect(stat.stdout.contains("Status of events\n"))
            let events = stat.stdout.components(separatedBy: "Status of events\n").last ?? ""
            #expect(events.contains("Entries: 7"))
        }
    }
}

/// libxml2, libzip and libmicrohttpd are opened with dlopen by `import` and `serve` only.
/// A `ledger subscribe daily` process on `db`, its output discarded: it holds the ledger open
/// until terminated.
func startSubscriber(_ binary: String, db: String) throws -> Process {
    let subscriber = Process()
    subscriber.executableURL = URL(fileURLWithPath: binary)
    subscriber.arguments = ["subscribe", "daily", "--db", db]
    subscriber.standardOutput = FileHandle.nullDevice
    subscriber.standardError = FileHandle.nullDevice
    try subscriber.run()
    return subscriber
}

@Suite("Libraries loaded on demand")
struct LazyLibraryTests {
    /// The files (shared objects, the ledger's data.mdb) mapped into process `pid`, by name.
    static func mappedFiles(_ pid: Int32) throws -> Set<String> {
        // Read to the end: /proc files report a size of 0, which String(contentsOfFile:) trusts.
        guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/maps") else { return [] }
        defer { try? handle.close() }
        let maps = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        return Set(maps.split(separator: "\n").compactMap { line in
            line.contains("/") ? line.split(separator: "/").last.map(String.init) : nil
        })
    }

    static func isLazy(_ library: String) -> Bool {
        ["libxml2.so", "libzip.so", "libmicrohttpd.so", "libgnutls.so", "libicuuc.so"].contains { library.hasPrefix($0) }
    }

    @Test("a command that needs none of them starts without them; serve loads libmicrohttpd")
    func notMappedUntilNeeded() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            _ = try runProcess(binary, ["init", "--db", db, "--timezone", "UTC"])
            // `subscribe` runs until stopped, so its mappings can be read while it waits.
            let subscriber = try startSubscriber(binary, db: db)
            defer { subscriber.terminate(); subscriber.waitUntilExit() }
            var libraries: Set<String> = []
            // LMDB is linked into the binary: the ledger's map shows the subscriber has opened it.
            for _ in 0..<100 where !libraries.contains("data.mdb") {
                Thread.sleep(forTimeInterval: 0.02)
                libraries = try LazyLibraryTests.mappedFiles(subscriber.processIdentifier)
            }
            #expect(libraries.contains("data.mdb"))  // the maps were read, the ledger open
            #expect(libraries.filter(LazyLibraryTests.isLazy).isEmpty, "\(libraries.sorted())")

            let server = try ServerProcess(binary: binary, db: db)
            defer { _ = server.stop() }
            let served = try LazyLibraryTests.mappedFiles(server.process.processIdentifier)
            #expect(served.contains { $0.hasPrefix("libmicrohttpd.so") }, "\(served.sorted())")
            #expect(!served.contains { $0.hasPrefix("libxml2.so") })
        }
    }

    @Test("a library that is not installed, or lacks a function, is said plainly")
    func clearErrors() throws {
        do {
            _ = try LazyLibrary("libnothing", sonames: ["libnothing-ledger-test.so.9"], package: "libnothing9")
            Issue.record("a library that does not exist was loaded")
        } catch {
            #expect(error.description.hasPrefix("libnothing is not installed ("))
            #expect(error.description.hasSuffix("install the Debian package libnothing9, or run Tools/deps.sh"))
        }
        let libc = try LazyLibrary("libc", sonames: ["libc.so.6"], package: "libc6")
        do {
            _ = try libc.function("no_such_function_here", as: OpaquePointer.self)
            Issue.record("a missing function was found")
        } catch {
            #expect(error.description == "libc has no function no_such_function_here: is the installed version too old?")
        }
        typealias Strlen = @convention(c) (UnsafePointer<CChar>?) -> Int
        let strlen = try libc.function("strlen", as: Strlen.self)
        #expect(strlen("twelve bytes") == 12)
    }
}

/// A ledger on a read-only file system (a snapshot, a read-only volume): LMDB cannot open
/// its lock file there. The read-only view is a bind mount of a writable directory, remounted
/// read-only, as a container's `:ro` volume is. Needs root, to mount; skipped elsewhere.
@Suite("A ledger on read-only media", .serialized)
struct ReadOnlyMediaTests {
    /// Whether this process may make a read-only bind mount (root, and a kernel that lets it).
    static let canMount: Bool = {
        guard geteuid() == 0, let (source, view) = try? makeFolders() else { return false }
        defer { cleanUp(source, view) }
        return (try? readOnlyView(of: source, at: view)) == true
    }()

    static func makeFolders() throws -> (source: String, view: String) {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-ro-\(UUID().uuidString)").path
        for folder in [base + "/source", base + "/view"] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        return (base + "/source", base + "/view")
    }

    static func readOnlyView(of source: String, at view: String) throws -> Bool {
        guard try runProcess("/bin/mount", ["--bind", source, view]).status == 0 else { return false }
        return try runProcess("/bin/mount", ["-o", "remount,bind,ro", view]).status == 0
    }

    static func cleanUp(_ source: String, _ view: String) {
        _ = try? runProcess("/bin/umount", [view])
        try? FileManager.default.removeItem(atPath: (source as NSString).deletingLastPathComponent)
    }

    /// A ledger of one sample in a writable folder and its read-only view: runs `body` with
    /// the binary and both ledger paths, and unmounts and removes them afterwards.
    /// `prepare` may change the writable ledger before the view is made.
    static func withReadOnlyView(prepare: (_ writable: String) throws -> Void = { _ in },
                                 _ body: (_ binary: String, _ writable: String, _ readOnly: String) throws -> Void) throws {
        let binary = try ledgerBinary()
        let (source, view) = try makeFolders()
        defer { cleanUp(source, view) }
        #expect(try runProcess(binary, ["append", "--db", source + "/ledger.db"], stdin: Array((goodSample + "\n").utf8)).status == 0)
        try prepare(source + "/ledger.db")
        try #require(try readOnlyView(of: source, at: view))
        try body(binary, source + "/ledger.db", view + "/ledger.db")
    }

    @Test("reading commands work on a read-only file system; a write says why it cannot",
          .enabled(if: ReadOnlyMediaTests.canMount, "needs root to mount"))
    func readOnlyMedia() throws {
        try ReadOnlyMediaTests.withReadOnlyView { binary, _, db in
            let project = try runProcess(binary, ["project", "daily", "--db", db, "--format", "ndjson"])
            #expect(project.status == 0, "\(project.stderr)")
            #expect(project.stdout.contains("\"value\":100"))
            for command in [["log"], ["stats"], ["verify"], ["replay", "--to-seq", "1"]] {
                let run = try runProcess(binary, command + ["--db", db])
                #expect(run.status == 0, "\(command): \(run.stderr)")
            }
            let append = try runProcess(binary, ["append", "--db", db], stdin: Array((goodSample + "\n").utf8))
            #expect(append.status == 1)
            #expect(append.stderr.hasPrefix("Error: the ledger at '\(db)' is on a read-only file system: this command writes to it"))
        }
    }

    /// A server on a read-only view answers reads; an append is a 503 that says why.
    @Test("serve on a read-only file system answers reads and refuses appends with a 503",
          .enabled(if: ReadOnlyMediaTests.canMount, "needs root to mount"))
    func serveReadOnly() throws {
        var admin = ""
        try ReadOnlyMediaTests.withReadOnlyView(prepare: { writable in
            let add = try runProcess(try ledgerBinary(), ["client", "add", "admin", "--admin", "--db", writable])
            try #require(add.status == 0, "\(add.stderr)")
            admin = add.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }) { binary, _, db in
            let server = try ServerProcess(binary: binary, db: db)
            defer { server.stop() }
            let auth = ["Authorization": "Bearer \(admin)"]
            let rows = try http("GET", port: server.port, path: "/v1/projections/daily", headers: auth)
            #expect(rows.status == 200 && rows.body.contains("\"value\":100"), "\(rows.body)")
            let post = try http("POST", port: server.port, path: "/v1/events", headers: auth, body: Array(goodSample.utf8))
            #expect(post.status == 503)
            #expect(post.body.contains("on a read-only file system: it answers reads but takes no appends"), "\(post.body)")
        }
    }

    /// Projections of another fold version are rebuilt on first use, which writes: on
    /// read-only media that is said, with the replay that needs no write.
    @Test("stale projections on a read-only file system: the error names replay, which works",
          .enabled(if: ReadOnlyMediaTests.canMount, "needs root to mount"))
    func staleProjectionsReadOnly() throws {
        try ReadOnlyMediaTests.withReadOnlyView(prepare: { writable in
            let environment = try Environment(path: writable)
            let meta = try #require(try environment.openDatabases(["meta"])["meta"])
            try environment.write { try $0.put(meta, Array("projections.version".utf8), UInt64(1).bigEndianBytes) }
        }) { binary, _, db in
            let project = try runProcess(binary, ["project", "daily", "--db", db])
            #expect(project.status == 1)
            #expect(project.stderr.hasPrefix("Error: the ledger at '\(db)' is on a read-only file system: its stored projections are of another build's fold version"), "\(project.stderr)")
            #expect(project.stderr.contains("'ledger replay --to-seq N', with N the head 'ledger stats' prints"))
            let replay = try runProcess(binary, ["replay", "--to-seq", "1", "--projection", "daily", "--format", "ndjson", "--db", db])
            #expect(replay.status == 0, "\(replay.stderr)")
            #expect(replay.stdout.contains("\"value\":100"))
            // `today` is read from the replay's own profile, not the stale live one.
            let today = try runProcess(binary, ["replay", "--to-seq", "1", "--user", "default", "--date", "today", "--db", db])
            #expect(today.status == 0, "\(today.stderr)")
            #expect(today.stderr.hasPrefix("as of seq 1, "), "\(today.stderr)")
        }
    }

    /// An empty ledger has nothing to fold: read-only media must not stop its reads, whether
    /// `init` made it (with its fold version) or an older build did (without one). The second
    /// was refused as "of another build's fold version" (an audit).
    @Test("an empty ledger, with or without a stored fold version, is read on a read-only file system",
          .enabled(if: ReadOnlyMediaTests.canMount, "needs root to mount"), arguments: [false, true])
    func emptyReadOnly(olderBuild: Bool) throws {
        let binary = try ledgerBinary()
        let (source, view) = try ReadOnlyMediaTests.makeFolders()
        defer { ReadOnlyMediaTests.cleanUp(source, view) }
        #expect(try runProcess(binary, ["init", "--db", source + "/ledger.db"]).status == 0)
        if olderBuild {
            let environment = try Environment(path: source + "/ledger.db")
            let meta = try #require(try environment.openDatabases(["meta"])["meta"])
            try environment.write { txn in
                for key in ["projections.version", "projections.position"] { _ = try txn.delete(meta, Array(key.utf8)) }
            }
        }
        try #require(try ReadOnlyMediaTests.readOnlyView(of: source, at: view))
        for command in [["project", "daily"], ["verify"], ["stats"], ["replay", "--to-seq", "0"]] {
            let run = try runProcess(binary, command + ["--db", view + "/ledger.db"])
            #expect(run.status == 0, "\(command): \(run.stderr)")
        }
    }

    /// A writer that opens the ledger through another mount after the check does not know of
    /// a lockless reader: a read during which a commit landed is not used.
    @Test("a read on read-only media during which the ledger changed is refused, not used",
          .enabled(if: ReadOnlyMediaTests.canMount, "needs root to mount"))
    func changedDuringRead() throws {
        try ReadOnlyMediaTests.withReadOnlyView { binary, writable, readOnly in
            let environment = try Environment(path: readOnly)
            #expect(environment.isOnReadOnlyMedia)
            let unchanged = try environment.read { _ in 1 }
            #expect(unchanged == 1)  // nothing changed: the read stands
            #expect(performing: {
                _ = try environment.read { _ in
                    for minute in 20..<22 {
                        let line = goodSample.replacingOccurrences(of: "08:00:00Z", with: "09:\(minute):00Z")
                            .replacingOccurrences(of: "08:10:00Z", with: "09:\(minute):30Z")
                        let appended = try runProcess(binary, ["append", "--db", writable], stdin: Array((line + "\n").utf8))
                        #expect(appended.status == 0, "\(appended.stderr)")
                    }
                }
            }, throws: { error in
                "\(error)".contains("the ledger changed while it was read without LMDB's lock")
            })
        }
    }

    /// Without LMDB's lock, a writer does not know of a reader's snapshot and may reuse its
    /// pages: a process holding the ledger open through a writable path must stop the read.
    @Test("a read-only view of a ledger another process has open is refused",
          .enabled(if: ReadOnlyMediaTests.canMount, "needs root to mount"))
    func liveWriterElsewhere() throws {
        try ReadOnlyMediaTests.withReadOnlyView { binary, writable, readOnly in
            // `subscribe` holds the ledger open (and its lock) until stopped.
            let subscriber = try startSubscriber(binary, db: writable)
            var refused = try runProcess(binary, ["stats", "--db", readOnly])
            for _ in 0..<100 where refused.status == 0 {  // until the subscriber has it open
                Thread.sleep(forTimeInterval: 0.02)
                refused = try runProcess(binary, ["stats", "--db", readOnly])
            }
            #expect(refused.status == 1)
            #expect(refused.stderr.hasPrefix("Error: the ledger at '\(readOnly)' is on a read-only file system: LMDB cannot take its lock there, and another process has the ledger open"))
            subscriber.terminate()
            subscriber.waitUntilExit()
            #expect(try runProcess(binary, ["stats", "--db", readOnly]).status == 0)
        }
    }
}

/// A ledger the user may read but not write (an auditor given read permission): LMDB opens
/// `data.mdb` read-only, its lock still taken in `lock.mdb`. Needs root, to run the binary as
/// another user (`setpriv`); skipped elsewhere.
@Suite("A ledger this user may only read")
struct ReadOnlyPermissionTests {
    static let canSwitchUser = geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")

    @Test("reading commands work on a ledger whose data.mdb this user may only read; a write says why it cannot",
          .enabled(if: ReadOnlyPermissionTests.canSwitchUser, "needs root, to run as another user"))
    func readOnlyPermission() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            #expect(try runProcess(binary, ["append", "--db", db], stdin: Array((goodSample + "\n").utf8)).status == 0)
            let folder = (db as NSString).deletingLastPathComponent
            for (path, mode) in [(folder, 0o755), (db, 0o555), (db + "/data.mdb", 0o444), (db + "/lock.mdb", 0o666)] {
                #expect(chmod(path, mode_t(mode)) == 0)
            }
            defer { _ = chmod(db, 0o755) }
            func asNobody(_ arguments: [String], stdin: [UInt8] = []) throws -> ProcessOutput {
                try runProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", binary] + arguments + ["--db", db], stdin: stdin)
            }
            // Each of these said "storage failure: mdb_env_open(…) failed: Permission denied" (an audit).
            let project = try asNobody(["project", "daily", "--format", "ndjson"])
            #expect(project.status == 0 && project.stdout.contains("\"value\":100"), "\(project.stderr)")
            for command in [["log"], ["stats"], ["verify"], ["replay", "--to-seq", "1"]] {
                let run = try asNobody(command)
                #expect(run.status == 0, "\(command): \(run.stderr)")
            }
            let append = try asNobody(["append"], stdin: Array((goodSample.replacingOccurrences(of: "08:", with: "09:") + "\n").utf8))
            #expect(append.status == 1 && append.stderr.hasPrefix("Error: the ledger at '\(db)' may be read but not written by this user: this command writes to it"), "\(append.stderr)")
            #expect(try runProcess(binary, ["stats", "--db", db]).stdout.contains("\"head\":1,"))
            // Without write access to lock.mdb LMDB cannot register a reader: said plainly.
            #expect(chmod(db + "/lock.mdb", 0o644) == 0)
            let locked = try asNobody(["log"])
            #expect(locked.status == 1 && locked.stderr.hasPrefix("Error: cannot open the ledger at '\(db)': permission denied on its directory or its files: even a reader must be able to write lock.mdb"), "\(locked.stderr)")
            // A directory this user may not search is permission denied too, for readers as
            // for writers: reading commands said "no ledger at …; create one with 'ledger
            // init'" (an audit).
            #expect(chmod(db, 0o000) == 0)
            for command in [["stats"], ["log"], ["project", "daily"], ["append"]] {
                let run = try asNobody(command, stdin: Array((goodSample + "\n").utf8))
                #expect(run.status == 1, "\(command): \(run.stderr)")
                #expect(run.stderr.hasPrefix("Error: cannot open the ledger at '\(db)': permission denied on its directory or its files:"), "\(command): \(run.stderr)")
                #expect(run.stderr.split(separator: "\n").count == 1)
            }
        }
    }
}

/// Writes `xml` as an export beside the temporary ledger `db` (outside its directory, which
/// the tests expect to see created or not); the caller removes it.
private func exportBeside(_ db: String, _ xml: String) throws -> String {
    let path = db + ".xml"
    try xml.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// What `staticExecutable` reads of an ELF64 file (little-endian, as x86-64's): its type, its
/// program headers' types, and its dynamic section's needed libraries and library paths.
private struct ELFFile {
    var type: UInt16
    var segmentTypes: [UInt32]
    var neededLibraries: [UInt64] = []
    var hasLibraryPath = false

    init(path: String) throws {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
        func read<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
            bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: T.self) }
        }
        guard bytes.count > 64, bytes.prefix(4) == Data([0x7F, 0x45, 0x4C, 0x46]), bytes[4] == 2 else {
            throw CocoaError(.fileReadCorruptFile)
        }
        type = read(UInt16.self, at: 16)
        let (headers, size, count) = (Int(read(UInt64.self, at: 32)), Int(read(UInt16.self, at: 54)), Int(read(UInt16.self, at: 56)))
        segmentTypes = []
        for index in 0..<count {
            let header = headers + index * size
            let segment = read(UInt32.self, at: header)
            segmentTypes.append(segment)
            guard segment == 2 else { continue }  // PT_DYNAMIC: (tag, value) pairs to DT_NULL
            let (start, length) = (Int(read(UInt64.self, at: header + 8)), Int(read(UInt64.self, at: header + 32)))
            for entry in stride(from: start, to: start + length, by: 16) {
                let tag = read(Int64.self, at: entry)
                if tag == 0 { break }
                if tag == 1 { neededLibraries.append(read(UInt64.self, at: entry + 8)) }  // DT_NEEDED
                if tag == 15 || tag == 29 { hasLibraryPath = true }  // DT_RPATH, DT_RUNPATH
            }
        }
    }
}
