import Foundation
import LedgerCLI
import LedgerCore
@testable import LedgerImport
import LedgerStore
import LedgerTestSupport
import Projections
import Synchronization
import Testing

/// The real exports in ../shared/data (see its README), relative to the package root.
enum SharedData {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("shared/data")

    static let files = [
        "ashtom__hkimport/Data/export.xml",
        "rgosdin__docs/apple_health_export/export.xml",
        "ericwolter__apple-healthkit-csv/test/export.xml",
        "tdda__applehealthdata/testdata/export6s3sample.xml",
        "simonw__healthkit-to-sqlite/tests/export.xml",
    ]

    static var available: Bool { FileManager.default.fileExists(atPath: root.appendingPathComponent(files[0]).path) }

    static func path(_ file: String) -> String { root.appendingPathComponent(file).path }
}

let keptTypes = ["HKQuantityTypeIdentifierStepCount", "HKQuantityTypeIdentifierDistanceWalkingRunning",
                 "HKQuantityTypeIdentifierFlightsClimbed", "HKQuantityTypeIdentifierActiveEnergyBurned"]

/// Counts kept records outside Correlations by reading the XML as text, independently of
/// the importer's libxml2 reader.
func independentCounts(_ path: String) throws -> [String: Int] {
    let text = try String(contentsOfFile: path, encoding: .utf8)
    var counts: [String: Int] = [:]
    var inCorrelation = false
    for line in text.split(separator: "\n") {
        let trimmed = line.drop { $0 == " " || $0 == "\t" }
        if trimmed.hasPrefix("<Correlation"), !trimmed.hasSuffix("/>") { inCorrelation = true }
        if trimmed.hasPrefix("</Correlation>") { inCorrelation = false }
        guard !inCorrelation, trimmed.hasPrefix("<Record "), let range = trimmed.range(of: "type=\"") else { continue }
        let type = trimmed[range.upperBound...].prefix { $0 != "\"" }
        if keptTypes.contains(String(type)) { counts[String(type), default: 0] += 1 }
    }
    return counts
}

/// The `imported TYPE: N` lines of an import summary.
func importedCounts(_ summary: String) -> [String: Int] {
    var counts: [String: Int] = [:]
    for line in summary.split(separator: "\n") where line.hasPrefix("  read ") {
        let parts = line.dropFirst("  read ".count).split(separator: ":")
        counts[String(parts[0])] = Int(parts[1].trimmingCharacters(in: .whitespaces))
    }
    return counts
}

@Suite("import apple-health", .serialized)
struct ImportTests {
    /// An export.xml holding `records` (each a `<Record …/>` line).
    static func export(_ records: [String]) -> String {
        (["<?xml version=\"1.0\" encoding=\"UTF-8\"?>", "<HealthData locale=\"en_US\">"] + records + ["</HealthData>"])
            .joined(separator: "\n") + "\n"
    }

    /// Writes `text` to `path` cut short just before `marker`, as a truncated export is.
    static func write(_ text: String, cutBefore marker: String, to path: String) throws {
        try String(text[..<text.range(of: marker)!.lowerBound]).write(toFile: path, atomically: true, encoding: .utf8)
    }

    @Test("every real export: counts match the XML, a second import appends nothing", arguments: SharedData.files)
    func realExports(file: String) throws {
        guard SharedData.available else {
            print("skipped: ../shared/data is absent (a clone outside the workspace has no real exports)")
            return
        }
        let path = SharedData.path(file)
        let expected = try independentCounts(path)
        withTemporaryLedger { db in
            let first = ledger(["import", "apple-health", path], db: db)
            #expect(first.status == 0, "\(file): \(first.stderr)")
            #expect(importedCounts(first.stdout) == expected, "\(file): \(first.stdout)")
            let second = ledger(["import", "apple-health", path], db: db)
            #expect(second.status == 0)
            #expect(second.stdout.hasPrefix("read "))
            #expect(second.stdout.contains(": appended 0, "), "\(file): \(second.stdout)")
            #expect(ledger(["verify"], db: db).status == 0)
        }
    }

    @Test("a kept type spelled with a look-alike character is imported and counted with the type it reads as")
    func lookAlikeTypeName() throws {
        let kelvin = "H\u{212A}QuantityTypeIdentifierStepCount"
        let xml = """
        <?xml version="1.0" encoding="UTF-8"?>
        <HealthData locale="en_US">
         <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2024-03-01 10:00:00 +0100" endDate="2024-03-01 10:05:00 +0100" value="10"/>
         <Record type="\(kelvin)" sourceName="iPhone" unit="count" startDate="2024-03-01 11:00:00 +0100" endDate="2024-03-01 11:05:00 +0100" value="20"/>
        </HealthData>
        """
        try withTemporaryLedger { db in
            let file = db + ".xml"
            try Data(xml.utf8).write(to: URL(fileURLWithPath: file))
            defer { try? FileManager.default.removeItem(atPath: file) }
            let run = ledger(["import", "apple-health", file], db: db)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.contains("appended 2,"), "\(run.stdout)")
            // As the binary before this session printed it (its counts were merged by Swift's
            // string equality, which takes a KELVIN SIGN for a K).
            #expect(run.stdout.hasSuffix("  read HKQuantityTypeIdentifierStepCount: 2\n"), "\(run.stdout)")
        }
    }

    @Test("real exports: daily never exceeds the per-source sum, and equals it on single-source days")
    func dailyAgainstPerSource() throws {
        guard SharedData.available else {
            print("skipped: ../shared/data is absent")
            return
        }
        for file in SharedData.files.prefix(4) {
            try withTemporaryLedger { db in
                #expect(ledger(["import", "apple-health", SharedData.path(file)], db: db).status == 0)
                let log = try EventLog(path: db, create: false)
                let daily = try log.rows(.daily, filter: RowFilter())
                var perSource: [String: [Double]] = [:]
                for row in try log.rows(.perSource, filter: RowFilter()) {
                    let key = "\(row.values["user"]!.stringValue!) \(row.values["type"]!.stringValue!) \(row.values["date"]!.stringValue!)"
                    perSource[key, default: []].append(row.values["value"]!.numberValue!)
                }
                var singleSourceDays = 0
                for row in daily {
                    let key = "\(row.values["user"]!.stringValue!) \(row.values["type"]!.stringValue!) \(row.values["date"]!.stringValue!)"
                    let value = row.values["value"]!.numberValue!
                    let sources = try #require(perSource[key], "\(file) \(key): daily row without per-source rows")
                    let sum = sources.reduce(0, +)
                    #expect(value <= sum * (1 + 1e-9) + 1e-9, "\(file) \(key): daily \(value) > per-source sum \(sum)")
                    if sources.count == 1 {
                        singleSourceDays += 1
                        #expect(abs(value - sum) <= 1e-9 * max(1, sum), "\(file) \(key): daily \(value) ≠ its only source \(sum)")
                    }
                }
                #expect(singleSourceDays > 0, "\(file): no single-source day to check")
            }
        }
    }

    @Test("the ashtom export merges its iPhone with Garmin: merged total below the sum on overlapping days")
    func overlappingSources() throws {
        guard SharedData.available else { return }
        try withTemporaryLedger { db in
            #expect(ledger(["import", "apple-health", SharedData.path(SharedData.files[0])], db: db).status == 0)
            let log = try EventLog(path: db, create: false)
            let daily = try log.rows(.daily, filter: RowFilter(type: .steps))
            let merged = daily.map { $0.values["value"]!.numberValue! }.reduce(0, +)
            let summed = try log.rows(.perSource, filter: RowFilter(type: .steps)).map { $0.values["value"]!.numberValue! }.reduce(0, +)
            // The export holds 174 step records that overlap another source's: merging removes steps.
            #expect(merged < summed)
            #expect(daily.contains { $0.values["sources"] == .int(2) })
        }
    }

    /// libzip checks an entry's CRC-32 only at its end: an import that committed batches as it
    /// went kept a damaged record, and the good file's, re-imported, counted beside it.
    @Test("a damaged archive, one with two exports, one with no entry and one with too many are refused with nothing imported, from a file or a pipe")
    func damagedArchives() throws {
        try withTemporaryLedger { db in
            let folder = URL(fileURLWithPath: db).deletingLastPathComponent().path
            let records = [700, 800, 900].enumerated().map { index, value in
                #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2022-09-30 1\#(index):00:00 +0200" endDate="2022-09-30 1\#(index):10:00 +0200" value="\#(value)"/>"#
            }
            let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<HealthData>\n" + records.joined(separator: "\n") + "\n</HealthData>\n"
            let made = try runProcess("/usr/bin/env", ["python3", "-c", """
                import sys, zipfile
                folder, xml = sys.argv[1], sys.argv[2].encode()
                with zipfile.ZipFile(folder + "/good.zip", "w", zipfile.ZIP_STORED) as z:
                    z.writestr("apple_health_export/export.xml", xml)
                data = open(folder + "/good.zip", "rb").read()
                open(folder + "/damaged.zip", "wb").write(data.replace(b'value="800"', b'value="801"'))
                with zipfile.ZipFile(folder + "/two.zip", "w") as z:
                    z.writestr("other/export.xml", xml)
                    z.writestr("apple_health_export/export.xml", xml)
                zipfile.ZipFile(folder + "/none.zip", "w").close()
                # A phone in Spanish names the export exportar.xml, beside an export_cda.xml.
                with zipfile.ZipFile(folder + "/exportar.zip", "w") as z:
                    z.writestr("apple_health_export/export_cda.xml", b"<?xml version='1.0'?><ClinicalDocument/>")
                    z.writestr("apple_health_export/exportar.xml", xml)
                with zipfile.ZipFile(folder + "/notes.zip", "w") as z:
                    z.writestr("apple_health_export/export_cda.xml", xml)
                    z.writestr("apple_health_export/notes.xml", b"<?xml version='1.0'?><notes/>")
                with zipfile.ZipFile(folder + "/mixed.zip", "w") as z:
                    z.writestr("a/export.xml", xml)
                    z.writestr("b/exportar.xml", xml)
                with zipfile.ZipFile(folder + "/two-languages.zip", "w") as z:
                    z.writestr("apple_health_export/exportar.xml", xml)
                    z.writestr("apple_health_export/eksport.xml", xml)
                import gzip
                open(folder + "/export.xml.gz", "wb").write(gzip.compress(xml))
                open(folder + "/cut.zip", "wb").write(data[:60])
                with zipfile.ZipFile(folder + "/wide.zip", "w") as z:
                    z.writestr("apple_health_export/export.xml", b"\\xff\\xfe" + xml.decode().replace("UTF-8", "UTF-16").encode("utf-16-le"))
                # More entries than 65,535: the count is in the ZIP64 record.
                with zipfile.ZipFile(folder + "/many.zip", "w", zipfile.ZIP_STORED) as z:
                    z.writestr("apple_health_export/export.xml", xml)
                    for n in range(100_000):
                        z.writestr(f"workout-routes/route_{n}.gpx", b"")
                """, folder, xml])
            try #require(made.status == 0, "python3 zipfile: \(made.stderr)")
            #expect(ledger(["import", "apple-health", folder + "/good.zip", "--batch", "1"], db: db).status == 0)
            let head = try EventLog(path: db, create: false).head().seq
            #expect(head == 3)
            // The export of a phone in another language is the same export: all duplicates (it
            // was refused as an archive without export.xml: an audit).
            let spanish = ledger(["import", "apple-health", folder + "/exportar.zip"], db: db)
            #expect(spanish.status == 0 && spanish.stdout.hasPrefix("read 3 records: appended 0, duplicates 3,"), "\(spanish.stdout) \(spanish.stderr)")
            let refusals = [
                ("damaged.zip", "export.xml inside it is damaged (CRC error); nothing was imported"),
                ("two.zip", "the archive holds 2 Health exports (other/export.xml, apple_health_export/export.xml); unzip the one to import and import that file"),
                ("none.zip", "the archive holds no export.xml (nor an export under another name: an .xml file, other than export_cda.xml, whose document is <HealthData>)"),
                // Not an export by its name or its document.
                ("notes.zip", "the archive holds no export.xml (nor an export under another name: an .xml file, other than export_cda.xml, whose document is <HealthData>)"),
                // An English and a localized export are two as well.
                ("mixed.zip", "the archive holds 2 Health exports (a/export.xml, b/exportar.xml); unzip the one to import and import that file"),
                ("two-languages.zip", "the archive holds 2 Health exports (apple_health_export/exportar.xml, apple_health_export/eksport.xml); unzip the one to import and import that file"),
                // libzip's own words for what is wrong, not its error number (it said "libzip
                // error 19"), and what a missing directory nearly always means.
                ("cut.zip", "not a readable zip archive (Not a zip archive): it begins as a zip archive but has no directory at its end (is it truncated? a cut download or copy ends so)"),
                // libxml2 said "Document is empty" (an audit).
                ("export.xml.gz", "it is gzip-compressed, and an export is read as XML or as the Health app's zip; decompress it first (gzip -dc FILE | ledger import apple-health -)"),
                // As a plain file's encoding is named (it said "Document is empty": an audit).
                ("wide.zip", "its export.xml is UTF-16LE, and Apple Health exports are UTF-8; unzip it and convert export.xml first (iconv -f UTF-16LE -t UTF-8)"),
                // libzip holds the whole directory in memory: a million entries took 295 MB.
                ("many.zip", "it lists 100001 entries, and an export has a few thousand at most (libzip holds the whole directory in memory: a million took 295 MB)"),
            ]
            for (name, reason) in refusals {
                let run = ledger(["import", "apple-health", folder + "/" + name, "--batch", "1"], db: db)
                #expect(run.status == 65, "\(name): \(run.stderr)")
                #expect(run.stderr == "Error: '\(folder)/\(name)' cannot be imported: \(reason)\n")
                #expect(try EventLog(path: db, create: false).head().seq == head, "\(name)")
            }
            // From a pipe as from the file: the archive is saved to a temporary file in TMPDIR
            // first (libzip reads its directory at its end), which nothing leaves behind.
            let binary = try ledgerBinary()
            let spool = folder + "/spool"
            try FileManager.default.createDirectory(atPath: spool, withIntermediateDirectories: true)
            var environment = ProcessInfo.processInfo.environment
            environment["TMPDIR"] = spool
            func bytes(_ name: String) throws -> [UInt8] { try Array(Data(contentsOf: URL(fileURLWithPath: folder + "/" + name))) }
            for (name, reason) in refusals {
                let run = try runProcess(binary, ["import", "apple-health", "-", "--db", db, "--batch", "1"], stdin: try bytes(name), environment: environment)
                #expect(run.status == 65 && run.stderr == "Error: '/dev/stdin' cannot be imported: \(reason)\n", "\(name): \(run.stderr)")
            }
            #expect(try EventLog(path: db, create: false).head().seq == head)
            let piped = folder + "/piped.db"
            let good = try runProcess(binary, ["import", "apple-health", "-", "--db", piped], stdin: try bytes("good.zip"), environment: environment)
            #expect(good.status == 0 && good.stdout.hasPrefix("read 3 records: appended 3,"), "\(good.stdout) \(good.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: spool).isEmpty)
            environment["TMPDIR"] = folder + "/missing"
            let nowhere = try runProcess(binary, ["import", "apple-health", "-", "--db", folder + "/nowhere.db"], stdin: try bytes("good.zip"), environment: environment)
            #expect(nowhere.status == 1 && nowhere.stderr.contains("none could be made in \(folder)/missing (No such file or directory)"), "\(nowhere.stderr)")
            #expect(!FileManager.default.fileExists(atPath: folder + "/nowhere.db"))
            // A full disk while saving: said, naming the directory, and nothing written.
            let ran = try withTinyDisk { tiny in
                environment["TMPDIR"] = URL(fileURLWithPath: tiny).deletingLastPathComponent().path
                // 100,001 entries, about 11 MB, through `cat`: the import stops reading at the
                // full disk, and the writer gets the SIGPIPE (this process would die of it).
                let full = try runProcess("/bin/sh", ["-c", #"cat "$1" | exec "$2" import apple-health - --db "$3""#, "sh",
                                                      folder + "/many.zip", binary, folder + "/full.db"], environment: environment)
                #expect(full.status == 1 && full.stderr.contains("and writing it failed after 0 MB (No space left on device); set TMPDIR"), "\(full.stderr)")
                #expect(!FileManager.default.fileExists(atPath: folder + "/full.db"))
                #expect(try FileManager.default.contentsOfDirectory(atPath: environment["TMPDIR"]!).isEmpty)
            }
            if !ran { print("damagedArchives: the full-disk case skipped (mounting a tmpfs needs root)") }
        }
    }

    @Test("a zip archive, a broken DTD and stray control characters")
    func zipAndQuirks() throws {
        try withTemporaryLedger { db in
            let folder = URL(fileURLWithPath: db).deletingLastPathComponent()
            // An iOS 16 style export: a malformed internal DTD and a \u{0b} inside an attribute.
            let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE HealthData [
            <!ELEMENT HealthData (ExportDate,Me,(Record|Correlation)*)>
            <!ATTLIST Record type CDATA #REQUIRED unit CDATA #IMPLIED value CDATA #IMPLIED
            <!ATTLIST Broken
            ]>
            <HealthData locale="en_US">
             <ExportDate value="2022-10-01 10:00:00 +0200"/>
             <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Ann\u{0b}s iPhone" unit="count" creationDate="2022-09-30 21:00:00 +0200" startDate="2022-09-30 20:00:00 +0200" endDate="2022-09-30 20:10:00 +0200" value="700">
              <MetadataEntry key="HKTimeZone" value="Europe/Paris"/>
              <MetadataEntry key="HKMetadataKeySyncIdentifier" value="walk-1"/>
              <MetadataEntry key="HKMetadataKeySyncVersion" value="2"/>
             </Record>
             <Correlation type="HKCorrelationTypeIdentifierFood" sourceName="App" startDate="2022-09-30 08:00:00 +0200" endDate="2022-09-30 08:00:00 +0200">
              <Record type="HKQuantityTypeIdentifierActiveEnergyBurned" sourceName="App" unit="kJ" startDate="2022-09-30 08:00:00 +0200" endDate="2022-09-30 08:00:00 +0200" value="418.4"/>
             </Correlation>
             <Record type="HKQuantityTypeIdentifierActiveEnergyBurned" sourceName="App" unit="kJ" startDate="2022-09-30 08:00:00 +0200" endDate="2022-09-30 08:00:00 +0200" value="418.4"/>
            </HealthData>

            """
            let xmlPath = folder.appendingPathComponent("export.xml").path
            try xml.write(toFile: xmlPath, atomically: true, encoding: .utf8)
            let zipPath = folder.appendingPathComponent("export.zip").path
            let zipped = try runProcess("/usr/bin/env", ["python3", "-c", """
                import sys, zipfile
                with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as z:
                    z.write(sys.argv[1], "apple_health_export/export.xml")
                """, xmlPath, zipPath])
            try #require(zipped.status == 0, "python3 zipfile: \(zipped.stderr)")

            let run = ledger(["import", "apple-health", zipPath, "--user", "ann"], db: db)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(importedCounts(run.stdout) == ["HKQuantityTypeIdentifierStepCount": 1, "HKQuantityTypeIdentifierActiveEnergyBurned": 1])
            let log = try EventLog(path: db, create: false)
            let samples = try log.records().map { try $0.event() }
            let steps = try #require(samples.compactMap { event -> Sample? in
                if case .sample(let sample) = event.payload, sample.type == .steps { return sample }
                return nil
            }.first)
            #expect(steps.zone == "Europe/Paris")
            #expect(steps.syncId == "walk-1")

            // An archive without an export, or whose export cannot be read: the data is at
            // fault (exit 65), not the machine.
            let empty = folder.appendingPathComponent("empty.zip").path
            let noExport = try runProcess("/usr/bin/env", ["python3", "-c", """
                import sys, zipfile
                with zipfile.ZipFile(sys.argv[1], "w") as z:
                    z.writestr("apple_health_export/export_cda.xml", "<x/>")
                """, empty])
            try #require(noExport.status == 0, "python3 zipfile: \(noExport.stderr)")
            let refused = ledger(["import", "apple-health", empty], db: db)
            #expect(refused.status == 65)
            #expect(refused.stderr == "Error: '\(empty)' cannot be imported: the archive holds no export.xml (nor an export under another name: an .xml file, other than export_cda.xml, whose document is <HealthData>)\n")
            #expect(steps.syncVersion == 2)
            #expect(steps.source.name == "Ann s iPhone")
            let energy = try log.rows(.daily, filter: RowFilter(type: .activeEnergy))
            #expect(energy.first?.values["value"]?.numberValue.map { abs($0 - 100) < 1e-9 } == true)  // 418.4 kJ = 100 kcal
            // The XML file itself imports to the same events: all duplicates.
            #expect(ledger(["import", "apple-health", xmlPath, "--user", "ann"], db: db).stdout.contains("appended 0, duplicates 2"))
            // A later export made in winter prints the same instants at +0100: still duplicates.
            let winter = xml.replacingOccurrences(of: "2022-09-30 20:", with: "2022-09-30 19:")
                .replacingOccurrences(of: "2022-09-30 08:", with: "2022-09-30 07:")
                .replacingOccurrences(of: "2022-09-30 21:", with: "2022-09-30 20:")
                .replacingOccurrences(of: " +0200", with: " +0100")
            try winter.write(toFile: xmlPath, atomically: true, encoding: .utf8)
            let again = ledger(["import", "apple-health", xmlPath, "--user", "ann"], db: db)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(again.stdout.contains("appended 0, duplicates 2"), "\(again.stdout)")
        }
    }

    /// The decoding threads of `import` and `append` digest what they hand over only while the
    /// writer has work waiting, which depends on the two threads' speeds; the threshold is moved
    /// here so that each way runs in full: every digest on the decoding thread (0) and every
    /// one left to the writer (`Int.max`).
    @Test("whichever thread makes the content digests, import and append store the same records, and they verify")
    func digestsOnEitherThread() throws {
        let records = (0..<2_500).map { index in
            let start = String(format: "2022-09-%02d %02d:%02d:00 +0200", 1 + index / 1440, index / 60 % 24, index % 60)
            let end = String(format: "2022-09-%02d %02d:%02d:30 +0200", 1 + index / 1440, index / 60 % 24, index % 60)
            return #" <Record type="HKQuantityTypeIdentifierStepCount" sourceName="\#(index % 4 == 0 ? "Watch" : "iPhone")" unit="count" creationDate="\#(end)" startDate="\#(start)" endDate="\#(end)" value="\#(index % 90)"/>"#
        }
        let lines = (0..<2_500).map { index in
            let start = String(format: "2026-09-%02dT%02d:%02d:00Z", 1 + index / 1440, index / 60 % 24, index % 60)
            let end = String(format: "2026-09-%02dT%02d:%02d:30Z", 1 + index / 1440, index / 60 % 24, index % 60)
            return #"{"kind":"sample","type":"steps","value":\#(index % 90),"start":"\#(start)","end":"\#(end)","source":"\#(index % 4 == 0 ? "Watch" : "iPhone")"}"#
        }
        defer { PreparedEvent.backlogForDigests.store(2, ordering: .relaxed) }
        var stored: [[[UInt8]]] = []
        for threshold in [0, Int.max] {
            PreparedEvent.backlogForDigests.store(threshold, ordering: .relaxed)
            var contents: [[UInt8]] = []
            for command in ["import", "append"] {
                try withTemporaryLedger { db in
                    let folder = URL(fileURLWithPath: db).deletingLastPathComponent()
                    let run: Run
                    if command == "import" {
                        let path = folder.appendingPathComponent("export.xml").path
                        try ImportTests.export(records).write(toFile: path, atomically: true, encoding: .utf8)
                        run = ledger(["import", "apple-health", path, "--batch", "1500"], db: db)
                    } else {
                        run = ledger(["append"], stdin: lines.joined(separator: "\n"), db: db)
                    }
                    #expect(run.status == 0, "\(command) with threshold \(threshold): \(run.stderr)")
                    let log = try EventLog(path: db, create: false)
                    #expect(try log.walkChain().verified == 2_500, "\(command) with threshold \(threshold)")
                    #expect(try log.verifyChain().verified == 2_500, "\(command) with threshold \(threshold)")
                    for seq in UInt64(1)...2_500 {
                        let record = try #require(try log.record(at: seq))
                        contents.append(record.body + record.typed)
                    }
                }
            }
            stored.append(contents)
        }
        #expect(stored.count == 2 && stored[0].count == 5_000 && stored[0] == stored[1])
    }

    @Test("a truncated file stops naming a line, keeps whole batches, and a re-run completes it")
    func truncated() throws {
        try withTemporaryLedger { db in
            let folder = URL(fileURLWithPath: db).deletingLastPathComponent()
            let full = ImportTests.export((0..<10).map { minute in
                #" <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" creationDate="2022-09-30 21:00:00 +0200" startDate="2022-09-30 20:0\#(minute):00 +0200" endDate="2022-09-30 20:0\#(minute):30 +0200" value="\#(100 + minute)"/>"#
            })
            let path = folder.appendingPathComponent("export.xml").path
            // Cut in the middle of the 9th record.
            try ImportTests.write(full, cutBefore: "value=\"108\"", to: path)

            let broken = ledger(["import", "apple-health", path, "--batch", "3"], db: db)
            #expect(broken.status == 65)
            #expect(broken.stderr.hasPrefix("Error: \(path) line "), "\(broken.stderr)")
            #expect(broken.stderr.contains("fix the file and re-run"))
            let head = try EventLog(path: db, create: false).head().seq
            #expect(head == 6, "two whole batches of three: \(broken.stderr)")

            try full.write(toFile: path, atomically: true, encoding: .utf8)
            let rerun = ledger(["import", "apple-health", path, "--batch", "3"], db: db)
            #expect(rerun.status == 0, "\(rerun.stderr)")
            #expect(rerun.stdout.hasPrefix("read 10 records: appended 4, duplicates 6, "))
        }
    }

    @Test("a batch handed over in pieces is committed whole or not at all: a file cut inside one keeps the batches before it")
    func truncatedInsideAPiecedBatch() throws {
        try withTemporaryLedger { db in
            let folder = URL(fileURLWithPath: db).deletingLastPathComponent()
            // 2,600 records, each its own second; batches of 1,500 go over in pieces of at most
            // 1,000 (ImportChunk.pieceSize): 1,000 and 500, then 1,000 and 100.
            let full = ImportTests.export((0..<2_600).map { second in
                let (minute, rest) = second.quotientAndRemainder(dividingBy: 60)
                let (hour, minuteOfHour) = minute.quotientAndRemainder(dividingBy: 60)
                let time = "2022-09-30 \(String(format: "%02d:%02d:%02d", 10 + hour, minuteOfHour, rest)) +0200"
                return #" <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="\#(time)" endDate="\#(time)" value="\#(second + 1)"/>"#
            })
            let path = folder.appendingPathComponent("export.xml").path
            // Cut inside record 2,550: the second batch's first piece (records 1,501-2,500) was
            // handed over and appended, and the batch was never finished.
            try ImportTests.write(full, cutBefore: "value=\"2550\"", to: path)

            let broken = ledger(["import", "apple-health", path, "--batch", "1500"], db: db)
            #expect(broken.status == 65)
            #expect(broken.stderr.hasPrefix("Error: \(path) line "), "\(broken.stderr)")
            #expect(try EventLog(path: db, create: false).head().seq == 1_500, "the first batch alone: \(broken.stderr)")

            try full.write(toFile: path, atomically: true, encoding: .utf8)
            let rerun = ledger(["import", "apple-health", path, "--batch", "1500"], db: db)
            #expect(rerun.status == 0, "\(rerun.stderr)")
            #expect(rerun.stdout.hasPrefix("read 2600 records: appended 1100, duplicates 1500, "), "\(rerun.stdout)")
            #expect(try EventLog(path: db, create: false).head().seq == 2_600)
        }
    }

    @Test("a record's HKTimeZone this machine does not know is counted in the summary, not dropped silently")
    func unknownRecordZone() throws {
        try withTemporaryLedger { db in
            let path = URL(fileURLWithPath: db).deletingLastPathComponent().appendingPathComponent("export.xml").path
            func record(_ minute: Int, zone: String) -> String {
                #" <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2022-09-30 20:0\#(minute):00 +0200" endDate="2022-09-30 20:0\#(minute):30 +0200" value="10"><MetadataEntry key="HKTimeZone" value="\#(zone)"/></Record>"#
            }
            try (["<HealthData>", record(1, zone: "Europe/Paris"), record(2, zone: "Mars/Olympus"), record(3, zone: "+25:00"), "</HealthData>"]
                .joined(separator: "\n")).write(toFile: path, atomically: true, encoding: .utf8)
            let run = ledger(["import", "apple-health", path], db: db)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.contains("\n  2 records name a time zone (HKTimeZone) this machine's zone database does not know: their days are counted in the user's profile zone, else the ledger's (UTC)\n"), "\(run.stdout)")
            let zones = try EventLog(path: db, create: false).records().map { try $0.event() }.map { event -> String in
                if case .sample(let sample) = event.payload { return sample.zone ?? "none" }
                return "not a sample"
            }
            #expect(zones == ["Europe/Paris", "none", "none"])
            let named = ledger(["import", "apple-health", path, "--zone", "Asia/Tokyo", "--user", "bo"], db: db)
            #expect(named.stdout.contains("counted in --zone Asia/Tokyo\n"), "\(named.stdout)")
        }
    }

    /// An audit: `value="-0"` was kept as -0.0 in the typed part while the JSON said 0, and
    /// `verify` then called the imported record corrupt.
    @Test("a record valued -0 imports as 0 and verifies")
    func negativeZeroValue() throws {
        try withTemporaryLedger { db in
            let path = URL(fileURLWithPath: db).deletingLastPathComponent().appendingPathComponent("export.xml").path
            try """
                <HealthData>
                 <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2022-09-30 20:00:00 +0200" endDate="2022-09-30 20:01:00 +0200" value="-0"/>
                 <Record type="HKQuantityTypeIdentifierDistanceWalkingRunning" sourceName="iPhone" unit="km" startDate="2022-09-30 20:00:00 +0200" endDate="2022-09-30 20:01:00 +0200" value="-0.0e3"/>
                </HealthData>
                """.write(toFile: path, atomically: true, encoding: .utf8)
            let run = ledger(["import", "apple-health", path], db: db)
            #expect(run.status == 0 && run.stdout.contains("appended 2"), "\(run.stdout) \(run.stderr)")
            let verify = ledger(["verify"], db: db)
            #expect(verify.status == 0, "\(verify.stderr)")
        }
    }

    /// What an import keeps of a file grows with the export, not with what a hostile file
    /// repeats: nesting, metadata a record does not use, names of types it skips.
    @Test("deep nesting is refused; unread metadata and skipped type names are bounded")
    func boundedByTheExport() throws {
        try withTemporaryLedger { db in
            let path = URL(fileURLWithPath: db).deletingLastPathComponent().appendingPathComponent("export.xml").path
            let deep = String(repeating: "<a>", count: 70) + String(repeating: "</a>", count: 70)
            try "<HealthData>\n\(deep)\n</HealthData>\n".write(toFile: path, atomically: true, encoding: .utf8)
            let nested = ledger(["import", "apple-health", path], db: db)
            #expect(nested.status == 65 && nested.stderr.hasPrefix("Error: \(path) line 2: elements are nested more than 64 deep"), "\(nested.stderr)")

            // 5,000 metadata entries the importer does not read, around the one it does.
            let unread = (0..<5_000).map { #"<MetadataEntry key="k\#($0)" value="v"/>"# }.joined()
            let skippedTypes = (0..<1_100).map { #"<Record type="T\#($0)" value="1"/>"# }.joined(separator: "\n")
            let long = #"<Record type="\#(String(repeating: "L", count: 300))" value="1"/>"#
            try """
            <HealthData>
            <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2022-09-30 10:00:00 +0200" endDate="2022-09-30 10:01:00 +0200" value="5">\(unread)<MetadataEntry key="HKTimeZone" value="Asia/Tokyo"/>\(unread)</Record>
            \(skippedTypes)
            \(long)
            \(long)
            <Record value="1"/>
            </HealthData>
            """.write(toFile: path, atomically: true, encoding: .utf8)
            let run = ledger(["import", "apple-health", path], db: db)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.hasPrefix("read 1104 records: appended 1, duplicates 0, superseded 0, skipped 1103 of other types"), "\(run.stdout)")
            let lines = run.stdout.split(separator: "\n")
            #expect(lines.filter { $0.hasPrefix("  skipped T") }.count == 1_000)
            #expect(lines.contains("  skipped (more types than the 1,000 named above): 100"))
            #expect(lines.contains("  skipped (type names over 200 bytes): 2"))
            #expect(lines.contains("  skipped (records without a type): 1"))  // it said "skipped : 1"
            let zones = try EventLog(path: db, create: false).records().map { try $0.event() }.compactMap { event -> String? in
                if case .sample(let sample) = event.payload { return sample.zone }
                return nil
            }
            #expect(zones == ["Asia/Tokyo"])
        }
    }

    /// Each batch capped its own type names at 1,000 before the summary added them up: a type
    /// the summary names lost the records a later batch held past its own 1,000th name.
    @Test("a skipped type the summary names counts all its records, whatever batch they are in")
    func skippedCountsAcrossBatches() throws {
        try withTemporaryLedger { db in
            let path = URL(fileURLWithPath: db).deletingLastPathComponent().appendingPathComponent("export.xml").path
            func step(_ minute: Int) -> String {
                #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2022-09-30 10:0\#(minute):00 +0200" endDate="2022-09-30 10:0\#(minute):30 +0200" value="5"/>"#
            }
            // With --batch 1 the first batch ends after the first step: A, then 1,000 other
            // names before A again, in the second.
            let others = (0..<1_000).map { #"<Record type="B\#($0)" value="1"/>"# }
            try (["<HealthData>", #"<Record type="A" value="1"/>"#, step(1)] + others + [#"<Record type="A" value="1"/>"#, step(2), "</HealthData>"])
                .joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
            let run = ledger(["import", "apple-health", path, "--batch", "1"], db: db)
            #expect(run.status == 0, "\(run.stderr)")
            let lines = run.stdout.split(separator: "\n")
            #expect(lines.contains("  skipped A: 2"), "\(run.stdout.prefix(300))")
            #expect(lines.contains("  skipped (more types than the 1,000 named above): 1"))
        }
    }

    /// Comments are dropped before libxml2 sees the file; a `<!--` inside a processing
    /// instruction was taken for one, and every record up to the next `-->` was lost.
    @Test("markup that holds <!-- (a processing instruction, CDATA) loses no record")
    func commentLookalikes() throws {
        try withTemporaryLedger { db in
            let path = URL(fileURLWithPath: db).deletingLastPathComponent().appendingPathComponent("export.xml").path
            func record(_ value: Int) -> String {
                #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2022-09-30 10:0\#(value):00 +0200" endDate="2022-09-30 10:0\#(value):30 +0200" value="\#(value)"/>"#
            }
            try ["<?xml version=\"1.0\"?>", "<?before <!-- ?>", "<HealthData>", "<?foo <!-- ?>", record(1),
                 "<![CDATA[ <!-- ]]>", record(2), "<?foo --> ?>", record(3), "<!-- a real comment -->", record(4), "</HealthData>"]
                .joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
            let run = ledger(["import", "apple-health", path], db: db)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.hasPrefix("read 4 records: appended 4, "), "\(run.stdout)")
            // A `>` and a `<!--` in a `'`-quoted value are inside the tag: the `<` is refused by
            // the parser, as in a `"`-quoted one. A review: the tag was taken to end at the `>`,
            // the comment to run to the `-->` in a later value, and the record between was
            // dropped with exit 0. A `'`-quoted `>` alone is allowed, and the record is kept.
            let quoted = URL(fileURLWithPath: db).deletingLastPathComponent().appendingPathComponent("quoted.xml").path
            for (quote, lookalike) in [("'", true), ("\"", true), ("'", false)] {
                let value = lookalike ? "x> <!-- " : "x> y"
                let first = record(1).replacingOccurrences(of: "/>", with: " device=\(quote)\(value)\(quote)/>")
                let last = record(2).replacingOccurrences(of: "/>", with: lookalike ? " device='-->'/>" : "/>")
                try ["<HealthData>", first, record(3), last, "</HealthData>"].joined(separator: "\n")
                    .write(toFile: quoted, atomically: true, encoding: .utf8)
                let fresh = db + "-" + (quote == "'" ? "single" : "double") + (lookalike ? "" : "-plain")
                let run = ledger(["import", "apple-health", quoted], db: fresh)
                if lookalike {
                    #expect(run.status == 65, "\(quote): \(run.stdout)")
                    #expect(run.stderr.hasPrefix("Error: \(quoted) line 2: ") && run.stderr.contains("nothing was imported"), "\(quote): \(run.stderr)")
                    #expect(!FileManager.default.fileExists(atPath: fresh))
                } else {
                    #expect(run.status == 0 && run.stdout.hasPrefix("read 3 records: appended 3, "), "\(run.stdout) \(run.stderr)")
                }
            }
        }
    }

    /// Import ids leave the zone out, and `--zone` gives the zone of records without
    /// `HKTimeZone`: an overlapping export imported with another `--zone` (or none) stopped on
    /// the first record imported before ("same id, different content"), and once a batch of
    /// it had committed the import could be finished neither with `--zone` nor without.
    @Test("re-importing with another --zone, or none, keeps the zones imported before and finishes")
    func reimportWithAnotherZone() throws {
        try withTemporaryLedger { db in
            let folder = URL(fileURLWithPath: db).deletingLastPathComponent()
            func record(_ hour: Int, zone: String? = nil) -> String {
                let metadata = zone.map { #"<MetadataEntry key="HKTimeZone" value="\#($0)"/>"# } ?? ""
                return #" <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2022-09-30 \#(10 + hour):00:00 +0200" endDate="2022-09-30 \#(10 + hour):30:00 +0200" value="\#(100 + hour)">\#(metadata)</Record>"#
            }
            func export(_ name: String, _ hours: ClosedRange<Int>) throws -> String {
                let path = folder.appendingPathComponent(name).path
                // Hour 0 carries its own zone: it is the same in every import.
                try (["<HealthData>"] + hours.map { record($0, zone: $0 == 0 ? "Europe/Paris" : nil) } + ["</HealthData>"])
                    .joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
                return path
            }
            let older = try export("older.xml", 0...3)
            let newer = try export("newer.xml", 0...7)
            #expect(ledger(["import", "apple-health", older], db: db).status == 0)
            // The newer export with a zone, in batches of 2: before this, its first record
            // imported before stopped it at once.
            let zoned = ledger(["import", "apple-health", newer, "--zone", "Asia/Tokyo", "--batch", "2"], db: db)
            #expect(zoned.status == 0, "\(zoned.stderr)")
            #expect(zoned.stdout.hasPrefix("read 8 records: appended 4, duplicates 4, "), "\(zoned.stdout)")
            #expect(zoned.stdout.contains("\n  3 of the duplicates were imported before with another zone and keep it: this import's zone applies only to the records it appended\n"), "\(zoned.stdout)")
            // Again without a zone: everything is there, with the zone each record came in with.
            let plain = ledger(["import", "apple-health", newer], db: db)
            #expect(plain.status == 0, "\(plain.stderr)")
            #expect(plain.stdout.hasPrefix("read 8 records: appended 0, duplicates 8, "), "\(plain.stdout)")
            #expect(plain.stdout.contains("\n  4 of the duplicates were imported before with another zone"), "\(plain.stdout)")
            let zones = try EventLog(path: db, create: false).records().map { try $0.event() }.map { event -> String in
                if case .sample(let sample) = event.payload { return "\(Int(sample.value)) \(sample.zone ?? "none")" }
                return "not a sample"
            }
            #expect(zones == ["100 Europe/Paris", "101 none", "102 none", "103 none",
                              "104 Asia/Tokyo", "105 Asia/Tokyo", "106 Asia/Tokyo", "107 Asia/Tokyo"])
            // A record's own zone (HKTimeZone) other than the one it came in with (after a zone
            // database update, its zone was `--zone`'s at first): the same, it keeps its zone.
            // Given twice in one file with two zones, it is a conflict: which is meant is unclear.
            let ownZone = folder.appendingPathComponent("own.xml").path
            try ["<HealthData>", record(0, zone: "Asia/Tokyo"), "</HealthData>"].joined(separator: "\n")
                .write(toFile: ownZone, atomically: true, encoding: .utf8)
            let own = ledger(["import", "apple-health", ownZone], db: db)
            #expect(own.status == 0 && own.stdout.hasPrefix("read 1 records: appended 0, duplicates 1, "), "\(own.stderr)")
            #expect(own.stdout.contains("\n  1 of the duplicates were imported before with another zone and keep it"), "\(own.stdout)")
            let twice = folder.appendingPathComponent("twice.xml").path
            try ["<HealthData>", record(9, zone: "America/New_York"), record(9, zone: "Asia/Tokyo"), "</HealthData>"]
                .joined(separator: "\n").write(toFile: twice, atomically: true, encoding: .utf8)
            let repeated = ledger(["import", "apple-health", twice], db: db)
            #expect(repeated.status == 65 && repeated.stderr.contains("given twice in this batch with different content"), "\(repeated.stderr)")
            // Appends keep the exact rule: the same id with another zone is a conflict.
            let log = try EventLog(path: db, create: false)
            guard case .object(var object) = try log.records()[1].event().document else { Issue.record("not an object"); return }
            object["zone"] = .string("Asia/Tokyo")
            var line: [UInt8] = []
            JSONValue.object(object).write(to: &line)
            let events = try EventInput.decode(line).map { (Optional($0.0), $0.1) }
            #expect(performing: { try log.append(events) }, throws: { error in
                (error as? InputError)?.message.contains("is already in the log at seq 2 with different content") ?? false
            })
        }
    }

    @Test("a record that makes no valid sample names the file and line; a ledger the import made is removed")
    func invalidRecordNamesFile() throws {
        try withTemporaryLedger { db in
            let folder = URL(fileURLWithPath: db).deletingLastPathComponent()
            let path = folder.appendingPathComponent("export.xml").path
            try """
            <?xml version="1.0" encoding="UTF-8"?>
            <HealthData locale="en_US">
             <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2022-09-30 20:00:00 +0200" endDate="2022-09-30 20:01:00 +0200" value="-5"/>
            </HealthData>
            """.write(toFile: path, atomically: true, encoding: .utf8)
            let refused = ledger(["import", "apple-health", path], db: db)
            #expect(refused.status == 65)
            #expect(refused.stderr == "Error: \(path) line 3: 'value' must not be negative, got -5; nothing was imported; fix the file and re-run\n")
            #expect(!FileManager.default.fileExists(atPath: db), "the ledger this import created is removed")
            // Into an existing ledger: it stays, unchanged.
            #expect(ledger(["init"], db: db).status == 0)
            let again = ledger(["import", "apple-health", path], db: db)
            #expect(again.status == 65)
            #expect(FileManager.default.fileExists(atPath: db))
            #expect(try EventLog(path: db, create: false).head().seq == 0)
        }
    }

    /// Makes `db` look like a ledger from before the `importIds` setting: format 2, no setting.
    /// Makes the ledger at `db` look as an older binary left it. The environment is closed
    /// on return: LMDB must not be open twice in one process, and the tests run commands in
    /// process.
    func makeFormat2WithoutImportIDs(_ db: String) throws {
        let environment = try Environment(path: db)
        let meta = try #require(try environment.openDatabases(["meta"])["meta"])
        try environment.write { txn in
            _ = try txn.delete(meta, Array("importIds".utf8))
            try txn.put(meta, Array("format".utf8), Array("2".utf8))
        }
    }

    /// The ledger's `format` in `meta`, read through an environment closed on return.
    func storedFormat(_ db: String) throws -> [UInt8]? {
        let environment = try Environment(path: db)
        let meta = try #require(try environment.openDatabases(["meta"])["meta"])
        return try environment.read { try $0.get(meta, Array("format".utf8)) }
    }

    @Test("ids sort by start time in a new ledger; a ledger that had events before keeps hash-only ids")
    func idSchemes() throws {
        // Records out of time order in the file, crossing 1970 (the 48-bit prefix is biased).
        var lines = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>", "<HealthData locale=\"en_US\">"]
        for (index, year) in [2021, 1965, 2003, 1970, 1969, 2030].enumerated() {
            lines.append(#" <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="\#(year)-03-01 10:00:00 +0000" endDate="\#(year)-03-01 10:10:00 +0000" value="\#(100 + index)"/>"#)
        }
        lines.append("</HealthData>")
        func importedIDs(_ db: String) throws -> [(id: UUID, start: Int64)] {
            try EventLog(path: db, create: false).records().map { try $0.event() }.compactMap { event in
                guard case .sample(let sample) = event.payload else { return nil }
                return (event.id, sample.start.microseconds)
            }
        }
        var timeOrdered: Set<UUID> = []
        try withTemporaryLedger { db in
            let path = URL(fileURLWithPath: db).deletingLastPathComponent().appendingPathComponent("export.xml").path
            try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
            #expect(ledger(["import", "apple-health", path], db: db).status == 0)
            timeOrdered = Set(try importedIDs(db).map(\.id))
            #expect(try EventLog(path: db, create: false).importIDScheme() == 2)
            // Format 4 (a new ledger's), which binaries that know only the hash-only ids, or
            // only format 2 records, refuse to open.
            #expect(try storedFormat(db) == Array("4".utf8))
            let ids = try importedIDs(db)
            #expect(ids.count == 6)
            let byID = ids.sorted { $0.id.precedes($1.id) }.map(\.start)
            #expect(byID == ids.map(\.start).sorted(), "ids sort as their start times")
            let again = ledger(["import", "apple-health", path], db: db)
            #expect(again.stdout.contains("appended 0, duplicates 6"), "\(again.stderr)")
        }
        try withTemporaryLedger { db in
            let path = URL(fileURLWithPath: db).deletingLastPathComponent().appendingPathComponent("export.xml").path
            try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
            // A ledger from before the setting existed: events, and no `importIds` in meta.
            let event = #"{"kind":"sample","type":"steps","value":1,"unit":"count","start":"2020-01-01T00:00:00Z","end":"2020-01-01T00:01:00Z","source":"x"}"#
            #expect(ledger(["append"], stdin: event, db: db).status == 0)
            try makeFormat2WithoutImportIDs(db)
            #expect(try EventLog(path: db, create: false).importIDScheme() == 1)
            #expect(try storedFormat(db) == Array("2".utf8), "asking the scheme leaves the format as it is")
            #expect(ledger(["import", "apple-health", path], db: db).status == 0)
            let appended = try Timestamp.parseRFC3339("2020-01-01T00:00:00Z").0.microseconds
            let identity = try importedIDs(db).filter { $0.start != appended }
            #expect(identity.count == 6)
            #expect(Set(identity.map(\.id)).isDisjoint(with: timeOrdered), "scheme 1 derives other ids")
            #expect(ledger(["import", "apple-health", path], db: db).stdout.contains("appended 0, duplicates 6"))
            #expect(try EventLog(path: db, create: false).importIDScheme() == 1)
            // The import wrote format 3 records: the ledger is format 4 now, its ids still scheme 1.
            #expect(try storedFormat(db) == Array("4".utf8))
        }
        try withTemporaryLedger { db in
            // An empty ledger of format 2 (made by an older binary) takes scheme 2 and format 4
            // at its first import.
            _ = try EventLog(path: db, create: true)
            try makeFormat2WithoutImportIDs(db)
            #expect(try EventLog(path: db, create: false).importIDScheme() == 2)
            #expect(try storedFormat(db) == Array("4".utf8))
        }
    }

    @Test("the direct path prepares every record byte for byte as the JSON path does", arguments: SharedData.files)
    func directPathMatches(file: String) throws {
        guard SharedData.available else { return }
        let kept = try independentCounts(SharedData.path(file)).values.reduce(0, +)
        for (scheme, zone) in [(2, nil), (1, "Europe/Paris")] as [(Int, String?)] {
            do {
                let converter = AppleHealthConverter(user: "ann", zone: zone, idScheme: scheme)
                let reader = try HealthExportReader(path: SharedData.path(file))
                var compared = 0
                while let record = try reader.next() {
                    let direct = try converter.prepared(for: record)
                    let reference = try converter.event(for: record).map(PreparedEvent.init)
                    #expect(direct?.id == reference?.id, "line \(record.line)")
                    #expect(direct?.body == reference?.body, "line \(record.line): \(String(decoding: direct?.body ?? [], as: UTF8.self))")
                    #expect(direct?.typed == reference?.typed, "line \(record.line)")
                    if reference != nil { compared += 1 }
                }
                #expect(compared == kept)
            }
        }
    }

    @Test("the direct path and the JSON path agree on odd records, and fail with the same message")
    func directPathOddRecords() throws {
        func record(_ change: (inout HealthRecord) -> Void) -> HealthRecord {
            var record = HealthRecord(type: "HKQuantityTypeIdentifierStepCount", unit: "count", value: "12",
                                      sourceName: "Ann's iPhone", sourceVersion: "17.1",
                                      device: "<<HKDevice: 0x2837>, name:iPhone, model:iPhone>",
                                      startDate: "2024-03-01 10:00:00 +0100", endDate: "2024-03-01 10:05:00 +0100",
                                      creationDate: "2024-03-01 10:06:00 +0100", line: 7)
            change(&record)
            return record
        }
        let cases: [HealthRecord] = [
            record { _ in },
            record { $0.unit = nil },                                         // steps default to count
            record { $0.type = "HKQuantityTypeIdentifierDistanceWalkingRunning"; $0.unit = "km"; $0.value = "0.25" },
            record { $0.type = "HKQuantityTypeIdentifierDistanceWalkingRunning"; $0.unit = nil },  // unit required
            record { $0.type = "HKQuantityTypeIdentifierActiveEnergyBurned"; $0.unit = "kJ"; $0.value = "1e-3" },
            record { $0.unit = "km" },                                        // does not fit steps
            record { $0.value = "-3" },
            record { $0.value = "1e400" },
            record { $0.value = "-0" },
            record { $0.value = "twelve" },
            record { $0.endDate = "2024-03-01 09:00:00 +0100" },             // ends before it starts
            record { $0.startDate = "2024-02-30 10:00:00 +0100" },           // no such day
            record { $0.startDate = "20141018163235+0100"; $0.endDate = "20141018163735+0100" },  // iOS 8
            // Dates already in RFC 3339: short, at ShortText's 32 bytes, and past them (which
            // the direct path leaves to the JSON path), alone or beside an export date.
            record { $0.startDate = "2024-03-01T10:00:00Z"; $0.endDate = "2024-03-01T10:05:00Z" },
            record { $0.startDate = "2024-03-01T10:00:00.123456+01:00"; $0.endDate = "2024-03-01T10:05:00.123456+01:00" },
            record { $0.startDate = "2024-03-01T10:00:00.1234567+01:00"; $0.endDate = "2024-03-01T10:05:00.1234567+01:00" },
            record { $0.endDate = "2024-03-01T10:05:00.123456789012+01:00" },
            record { $0.sourceName = "tab\there" },
            record { $0.sourceName = "" },
            record { $0.sourceName = String(repeating: "x", count: 1025) },
            record { $0.sourceVersion = "" ; $0.device = nil },
            record { $0.device = "<<HKDevice: 0x1>>" },
            record { $0.device = "plain device \"quoted\" \\ name" },
            record { $0.metadata = ["HKTimeZone": "Asia/Kolkata"] },
            record { $0.metadata = ["HKTimeZone": "Mars/Olympus"] },          // unknown: falls back
            record { $0.metadata = ["HKMetadataKeySyncIdentifier": "abc", "HKMetadataKeySyncVersion": "3"] },
            record { $0.metadata = ["HKMetadataKeySyncIdentifier": "abc", "HKMetadataKeySyncVersion": "-1"] },
            record { $0.metadata = ["HKMetadataKeySyncIdentifier": "abc"] },
            record { $0.metadata = ["HKMetadataKeySyncIdentifier": "a\u{7}b", "HKMetadataKeySyncVersion": "1"] },
            record { $0.type = "HKQuantityTypeIdentifierHeartRate" },
        ]
        for user in ["ann", "émile ünïcode"] {
            for zone in [nil, "+05:30", "America/New_York"] as [String?] {
                let converter = AppleHealthConverter(user: user, zone: zone)
                for (index, record) in cases.enumerated() {
                    let direct = Result { try converter.prepared(for: record) }
                    let reference = Result { try converter.event(for: record).map(PreparedEvent.init) }
                    switch (direct, reference) {
                    case (.success(let a), .success(let b)):
                        #expect(a?.id == b?.id && a?.body == b?.body && a?.typed == b?.typed,
                                "case \(index): \(String(decoding: a?.body ?? [], as: UTF8.self)) vs \(String(decoding: b?.body ?? [], as: UTF8.self))")
                    case (.failure(let a), .failure(let b)):
                        #expect("\(a)" == "\(b)", "case \(index)")
                    default:
                        Issue.record("case \(index): \(direct) vs \(reference)")
                    }
                }
            }
        }
    }

    @Test("hostile input: missing file, unknown format, a value that is not a number")
    func hostile() throws {
        try withTemporaryLedger { db in
            let missing = ledger(["import", "apple-health", "/nonexistent/export.xml"], db: db)
            #expect(missing.status == 1)
            #expect(missing.stderr.hasPrefix("Error: cannot read '/nonexistent/export.xml': "))
            // A read that fails (EIO: /proc/self/mem at address 0) is the machine's fault, exit 1
            // as `append` says it, not bad data to fix (it said "the file could not be read",
            // exit 65: an audit).
            let unreadable = ledger(["import", "apple-health", "/proc/self/mem"], db: db)
            #expect(unreadable.status == 1)
            #expect(unreadable.stderr == "Error: cannot read '/proc/self/mem' after line 1: Input/output error; nothing was imported; re-run\n", "\(unreadable.stderr)")
            #expect(ledger(["import", "fitbit", "x"], db: db).status == 64)
            #expect(ledger(["import", "apple-health"], db: db).status == 64)
            let folder = URL(fileURLWithPath: db).deletingLastPathComponent()
            let path = folder.appendingPathComponent("bad.xml").path
            try """
            <HealthData>
             <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2022-09-30 20:00:00 +0200" endDate="2022-09-30 20:05:00 +0200" value="lots"/>
            </HealthData>
            """.write(toFile: path, atomically: true, encoding: .utf8)
            let bad = ledger(["import", "apple-health", path], db: db)
            #expect(bad.status == 65)
            #expect(bad.stderr.hasPrefix("Error: \(path) line 2: 'value' is not a number: 'lots'"), "\(bad.stderr)")
            try """
            <HealthData>
             <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2022-09-30 20:00:00 +0200" endDate="2022-09-30 20:05:00 +0200"/>
            </HealthData>
            """.write(toFile: path, atomically: true, encoding: .utf8)
            let valueless = ledger(["import", "apple-health", path], db: db)
            #expect(valueless.status == 65)
            #expect(valueless.stderr.hasPrefix("Error: \(path) line 2: the record has no 'value'"), "\(valueless.stderr)")

            // Values Swift's Double(_:) would read but an export never writes; a value too
            // large for the projections; a sync version that is not a number; a newline in a
            // value (shown as ?, so the error stays one line).
            func record(value: String, unit: String = "count", type: String = "StepCount", sync: String? = nil) -> String {
                let metadata = sync.map { """
                 <MetadataEntry key="HKMetadataKeySyncIdentifier" value="w"/><MetadataEntry key="HKMetadataKeySyncVersion" value="\($0)"/>
                """ } ?? ""
                return """
                <HealthData>
                 <Record type="HKQuantityTypeIdentifier\(type)" sourceName="iPhone" unit="\(unit)" startDate="2022-09-30 20:00:00 +0200" endDate="2022-09-30 20:05:00 +0200" value="\(value)">\(metadata)</Record>
                </HealthData>
                """
            }
            for (xml, message) in [
                (record(value: "0x10"), "'value' is not a number: '0x10'"),
                (record(value: "inf"), "'value' is not a number: 'inf'"),
                (record(value: "1e308", unit: "mi", type: "DistanceWalkingRunning"), "'value' is too large"),
                (record(value: "10", sync: "abc"), "'HKMetadataKeySyncVersion' is not a whole number: 'abc'"),
                // A sync identifier alone was imported as version 0 (an audit).
                (record(value: "10", sync: "1").replacingOccurrences(of: #"<MetadataEntry key="HKMetadataKeySyncVersion" value="1"/>"#, with: ""),
                 "the record has an 'HKMetadataKeySyncIdentifier' and no 'HKMetadataKeySyncVersion' (HealthKit saves them together)"),
                (record(value: "6&#10;1"), "'value' is not a number: '6?1'"),
                // Fields named as the export spells them, dates quoted as it wrote them.
                (record(value: "10").replacingOccurrences(of: "startDate=\"2022-09-30", with: "startDate=\"2022-09-31"),
                 "'startDate' is a date or time that does not exist: '2022-09-31 20:00:00 +0200'"),
                (record(value: "10").replacingOccurrences(of: "endDate=\"2022-09-30 20:05", with: "endDate=\"2022-09-30 19:05"),
                 "'endDate' precedes 'startDate'"),
                // Each end named alone, with an example of an export's dates, not of RFC 3339's.
                (record(value: "10").replacingOccurrences(of: "startDate=\"2022-09-30 20:00:00", with: "startDate=\"2022-09-30 20:00 00"),
                 "'startDate' is not a date: '2022-09-30 20:00 00 +0200' (exports write them like 2022-09-30 20:00:00 +0200)"),
                (record(value: "10").replacingOccurrences(of: "endDate=\"2022-09-30 20:05:00 +0200", with: "endDate=\"soon"),
                 "'endDate' is not a date: 'soon' (exports write them like 2022-09-30 20:00:00 +0200)"),
            ] {
                try xml.write(toFile: path, atomically: true, encoding: .utf8)
                let run = ledger(["import", "apple-health", path], db: db)
                #expect(run.status == 65, "\(xml)")
                #expect(run.stderr.hasPrefix("Error: \(path) line 2: \(message)"), "\(run.stderr)")
                #expect(run.stderr.split(separator: "\n").count == 1, "\(run.stderr)")
            }
            // What the committed batches added is said beside the records read: records of
            // skipped types add no event (it read "the 3 records … are in the ledger").
            func line(_ type: String, _ value: String) -> String {
                #" <Record type="HKQuantityTypeIdentifier\#(type)" sourceName="iPhone" unit="count" startDate="2022-09-30 20:00:00 +0200" endDate="2022-09-30 20:05:00 +0200" value="\#(value)"/>"#
            }
            try (["<HealthData>", line("StepCount", "1"), line("HeartRate", "60"), line("StepCount", "2"), line("HeartRate", "61"),
                  line("StepCount", "lots"), "</HealthData>"].joined(separator: "\n")).write(toFile: path, atomically: true, encoding: .utf8)
            let partialDB = db + "-partial"
            defer { try? FileManager.default.removeItem(atPath: partialDB) }
            let partial = ledger(["import", "apple-health", path, "--batch", "2"], db: partialDB)
            #expect(partial.status == 65)
            #expect(partial.stderr.hasSuffix("the 3 records read before the last committed batch are in the ledger (2 events appended; 1 duplicates or records of types not imported); fix the file and re-run to finish (what is already imported counts as duplicates)\n"), "\(partial.stderr)")
            #expect(ledger(["import", "apple-health", path, "--user", ""], db: db).status == 64)
            #expect(ledger(["import", "apple-health", path, "--batch", "9223372036854775808"], db: db).status == 64)
            // UTF-16 (with its byte order mark): said plainly, not "Document is empty".
            let wide = [UInt8]([0xFF, 0xFE]) + Array("<?xml version=\"1.0\" encoding=\"UTF-16\"?>\n<HealthData/>\n".utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
            try Data(wide).write(to: URL(fileURLWithPath: path))
            let utf16 = ledger(["import", "apple-health", path], db: db)
            #expect(utf16.status == 65)
            #expect(utf16.stderr == "Error: '\(path)' is UTF-16LE, and Apple Health exports are UTF-8; convert it first (iconv -f UTF-16LE -t UTF-8)\n")
            // An encoding libxml2 cannot convert: the real binary's stderr is our one line only
            // (libxml2 printed its own from the reading thread before).
            try """
            <?xml version="1.0" encoding="EBCDIC-US"?>
            <HealthData><Record type="HKQuantityTypeIdentifierStepCount" value="\u{00E9}"/></HealthData>
            """.write(toFile: path, atomically: true, encoding: .utf8)
            let ebcdic = try runProcess(try ledgerBinary(), ["import", "apple-health", path, "--db", db])
            #expect(ebcdic.status == 65)
            #expect(ebcdic.stderr.hasPrefix("Error: \(path) line ") && ebcdic.stderr.split(separator: "\n").count == 1, "\(ebcdic.stderr)")
            // A tag past 1 MiB (here 100,000 attributes) is refused as it is read: libxml2
            // compares each attribute with all before it, and 400,000 took minutes.
            let attributes = (0..<100_000).map { "a\($0)=\"1\"" }.joined(separator: " ")
            try "<?xml version=\"1.0\"?>\n<HealthData>\n<Record \(attributes)/>\n</HealthData>\n".write(toFile: path, atomically: true, encoding: .utf8)
            let wideTag = ledger(["import", "apple-health", path], db: db)
            #expect(wideTag.status == 65)
            #expect(wideTag.stderr.hasPrefix("Error: \(path) line 3: an element, a text, a CDATA section or a processing instruction runs past 1 MiB"), "\(wideTag.stderr)")
            // So is a CDATA section past 1 MiB (libxml2 took eight minutes over 200 MB of one),
            // and white space before the root (/dev/zero, whose NULs become spaces, was read
            // for ever).
            let cdata = "<![CDATA[" + String(repeating: "x", count: 1_100_000) + "]]>"
            try "<?xml version=\"1.0\"?>\n<HealthData>\n\(cdata)\n</HealthData>\n".write(toFile: path, atomically: true, encoding: .utf8)
            let longCDATA = ledger(["import", "apple-health", path], db: db)
            #expect(longCDATA.status == 65 && longCDATA.stderr.contains(" line 3: an element, a text, a CDATA section or a processing instruction runs past 1 MiB"), "\(longCDATA.stderr)")
            try Data(repeating: 0, count: 1_200_000).write(to: URL(fileURLWithPath: path))
            let zeros = ledger(["import", "apple-health", path], db: db)
            #expect(zeros.status == 65 && zeros.stderr.contains("runs past 1 MiB"), "\(zeros.stderr)")
            // A `<!--` in an attribute value is malformed XML: refused, not taken for a comment.
            try "<HealthData>\n<Record type=\"HKQuantityTypeIdentifierStepCount\" sourceName=\"a<!--x-->b\" unit=\"count\" startDate=\"2022-09-30 10:00:00 +0200\" endDate=\"2022-09-30 10:01:00 +0200\" value=\"5\"/>\n</HealthData>\n"
                .write(toFile: path, atomically: true, encoding: .utf8)
            let inValue = ledger(["import", "apple-health", path], db: db)
            #expect(inValue.status == 65 && inValue.stderr.hasPrefix("Error: \(path) line 2: "), "\(inValue.stderr)")
            // Also after a `>` in the value (which XML allows): the tag does not end there.
            try "<HealthData>\n<Record type=\"HKQuantityTypeIdentifierStepCount\" sourceName=\"a><!--x-->b\" unit=\"count\" startDate=\"2022-09-30 10:00:00 +0200\" endDate=\"2022-09-30 10:01:00 +0200\" value=\"5\"/>\n</HealthData>\n"
                .write(toFile: path, atomically: true, encoding: .utf8)
            let afterGreater = ledger(["import", "apple-health", path], db: db)
            #expect(afterGreater.status == 65 && afterGreater.stderr.hasPrefix("Error: \(path) line 2: "), "\(afterGreater.stderr)")
            // Every refusal left no ledger behind: none existed, and none was committed to.
            #expect(!FileManager.default.fileExists(atPath: db))
        }
    }

    @Test("a batch that fills the map is appended whole after the map grows, piped in with no size to reserve for")
    func mapFillsInsideABatch() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            // A review: the transaction runs again on a grown map, and the pieces of the batch it
            // had taken from the reader were gone: 2,000 of 3,000 records were lost, exit 0.
            #expect(try runProcess(binary, ["init", "--db", db, "--map-size", "64KiB"]).status == 0)
            let records = (0..<3_000).map { index in
                let start = Timestamp(microseconds: (1_700_000_000 + Int64(index) * 60) * 1_000_000)
                let end = Timestamp(microseconds: start.microseconds + 30_000_000)
                func exportDate(_ time: Timestamp) -> String { time.format(offsetSeconds: 0, alwaysFraction: false).replacingOccurrences(of: "T", with: " ").replacingOccurrences(of: "Z", with: " +0000") }
                return #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="\#(exportDate(start))" endDate="\#(exportDate(end))" value="\#(index % 90 + 1)"/>"#
            }
            let bytes = Array(ImportTests.export(records).utf8)
            for batch in ["3000", "1500"] {
                let run = try runProcess(binary, ["import", "apple-health", "-", "--db", db, "--batch", batch], stdin: bytes)
                #expect(run.status == 0, "\(run.stderr)")
                #expect(run.stdout.contains(batch == "3000" ? "appended 3000, duplicates 0" : "appended 0, duplicates 3000"), "\(run.stdout)")
            }
            let verify = try runProcess(binary, ["verify", "--db", db])
            #expect(verify.status == 0 && verify.stdout.contains("3000"), "\(verify.stdout)")
        }
        // Two batches, the second filling the map: the first is committed once, the second whole.
        try withTemporaryLedger { db in
            #expect(try runProcess(binary, ["init", "--db", db, "--map-size", "64KiB"]).status == 0)
            let records = (0..<2_000).map { index in
                #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="Watch" unit="count" startDate="2025-03-0\#(1 + index / 1_000) 0\#(index % 1_000 / 120):\#(String(format: "%02d", index % 60)):\#(String(format: "%02d", index % 120 / 60 * 30)) +0000" endDate="2025-03-0\#(1 + index / 1_000) 0\#(index % 1_000 / 120):\#(String(format: "%02d", index % 60)):\#(String(format: "%02d", index % 120 / 60 * 30 + 20)) +0000" value="7"/>"#
            }
            let run = try runProcess(binary, ["import", "apple-health", "-", "--db", db, "--batch", "1000"], stdin: Array(ImportTests.export(records).utf8))
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.contains("appended 2000, duplicates 0"), "\(run.stdout)")
        }
    }

    @Test("under a limit on address space, a reservation the process cannot map is cut down, and a refused import leaves nothing")
    func limitedAddressSpace() throws {
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            // A 4 GB file (sparse: one bad record, then a hole) asks for a map of 16 GiB, which
            // 1 GB of address space cannot hold. A review: LMDB, asked for it, unmapped the old map
            // and mapped none, and the clean-up's read of the new ledger faulted: "data.mdb is
            // damaged", exit 1, the ledger left behind. Now the largest map that fits is
            // reserved, the record is refused as without the limit, and the ledger removed.
            let folder = URL(fileURLWithPath: db).deletingLastPathComponent().path
            let path = folder + "/sparse.xml"
            let head = ImportTests.export([#"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" startDate="2025-01-01 10:00:00 +0000" endDate="2025-01-01 10:01:00 +0000" value="NaN"/>"#])
            try head.replacingOccurrences(of: "</HealthData>\n", with: "").write(toFile: path, atomically: false, encoding: .utf8)
            let file = try #require(FileHandle(forWritingAtPath: path))
            try file.truncate(atOffset: 4 << 30)
            try file.close()
            let run = try runProcess("/bin/sh", ["-c", #"ulimit -v 1000000 && exec "$0" "$@""#, binary,
                                                 "import", "apple-health", path, "--db", db])
            #expect(run.status == 65, "\(run.stderr)")
            #expect(run.stderr == "Error: \(path) line 3: 'value' is not a number: 'NaN'; nothing was imported; fix the file and re-run\n", "\(run.stderr)")
            #expect(!FileManager.default.fileExists(atPath: db), "the ledger the import made is left")
        }
    }

    @Test("an export piped in (a FIFO, /dev/stdin, -) imports as the file does, a zip too")
    func piped() throws {
        guard SharedData.available else {
            print("piped: skipped, ../shared/data is absent")
            return
        }
        let binary = try ledgerBinary()
        try withTemporaryLedger { db in
            let export = try #require(SharedData.files.first)
            let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: SharedData.path(export))))
            let piped = try runProcess(binary, ["import", "apple-health", "/dev/stdin", "--db", db], stdin: bytes)
            #expect(piped.status == 0, "\(piped.stderr)")
            let direct = try runProcess(binary, ["import", "apple-health", SharedData.path(export), "--db", db])
            #expect(direct.stdout.contains("appended 0,"), "\(direct.stdout)")
            // `-` is standard input, as for `append`.
            let dash = try runProcess(binary, ["import", "apple-health", "-", "--db", db], stdin: bytes)
            #expect(dash.status == 0 && dash.stdout.contains("appended 0,"), "\(dash.stderr)")
            // A zip is saved first, then read as a file is (the damaged-archives test pipes whole ones).
            let zip = try runProcess(binary, ["import", "apple-health", "/dev/stdin", "--db", db], stdin: [0x50, 0x4B, 0x03, 0x04, 0, 0])
            #expect(zip.status == 65)
            #expect(zip.stderr == "Error: '/dev/stdin' cannot be imported: not a readable zip archive (Not a zip archive): it begins as a zip archive but has no directory at its end (is it truncated? a cut download or copy ends so)\n", "\(zip.stderr)")
        }
    }
}

@Suite("export dates and identity bytes")
struct ExportDateTests {
    @Test("export dates become RFC 3339 text; other text only when it already is RFC 3339")
    func rfc3339() {
        #expect(AppleHealthConverter.rfc3339("2017-01-22 18:57:52 +0200") == "2017-01-22T18:57:52+02:00")
        #expect(AppleHealthConverter.rfc3339("2017-01-22 18:57:52 -0930") == "2017-01-22T18:57:52-09:30")
        #expect(AppleHealthConverter.rfc3339("20141018163235+0100") == "2014-10-18T16:32:35+01:00")
        #expect(AppleHealthConverter.rfc3339("20141018163235-0000") == "2014-10-18T16:32:35-00:00")
        #expect(AppleHealthConverter.rfc3339("2017-01-22T18:57:52Z") == "2017-01-22T18:57:52Z")
        // Shapes are rewritten as they are; whether the date exists is the parser's to say.
        #expect(AppleHealthConverter.rfc3339("2017-02-30 18:57:52 +0200") == "2017-02-30T18:57:52+02:00")
        for text in ["", "2017-01-22 18:57:52 0200", "2017-01-22 18:57:52 +02:00", "2017-01-22", "20141018163235 0100",
                     "2O17-01-22 18:57:52 +0200", "2017-01-22 18:57:52 +02O0", "201410181632350100", "yesterday"] {
            #expect(AppleHealthConverter.rfc3339(text) == nil, "\(text)")
        }
    }

    @Test("a record keeps its dates exactly as given, short (held inline) or long, from the XML as from its init")
    func datesKept() throws {
        let texts = ["2017-01-22 18:57:52 +0200", "", "é", String(repeating: "9", count: 32), String(repeating: "9", count: 33),
                     "2017-01-22 18:57:52 +0200, and more text than 32 bytes hold", "a&b"]
        for text in texts {
            var record = HealthRecord(type: "t", startDate: text, endDate: text, creationDate: text, line: 1)
            #expect(record.startDate == text && record.endDate == text && record.creationDate == text, "\(text)")
            record.endDate = nil
            #expect(record.endDate == nil && record.startDate == text)
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("dates-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("export.xml").path
        let escaped = texts.map { $0.replacingOccurrences(of: "&", with: "&amp;") }
        try (["<HealthData>"] + escaped.map { #"<Record type="t" startDate="\#($0)" endDate="\#($0)" creationDate="\#($0)"/>"# } + ["</HealthData>"])
            .joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let reader = try HealthExportReader(path: path)
        var read: [String?] = []
        while let record = try reader.next() {
            #expect(record.endDate == record.startDate && record.creationDate == record.startDate)
            read.append(record.startDate)
        }
        #expect(read == texts)
    }

    @Test("derived ids stay what they were: pinned for both date layouts and odd creation dates")
    func pinnedIDs() throws {
        // Ids are how a re-import finds what it already has: if a change to the conversion
        // moved one byte of a record's identity, every ledger would import its exports twice.
        // These were made by the binary of commit 3ebbe01 (`ledger import` and `ledger append`).
        func record(_ start: String, _ end: String, _ creation: String?, value: Int) -> HealthRecord {
            HealthRecord(type: "HKQuantityTypeIdentifierStepCount", unit: "count", value: String(value),
                         sourceName: "Ann's iPhone", sourceVersion: "17.1",
                         device: "<<HKDevice: 0x2837>, name:iPhone, model:iPhone>",
                         startDate: start, endDate: end, creationDate: creation, line: 1)
        }
        let (start, end) = ("2024-03-01 10:00:00 +0100", "2024-03-01 10:05:00 +0100")
        let (legacyStart, legacyEnd) = ("20141018163235+0100", "20141018163735+0100")
        let pinned: [(HealthRecord, String)] = [
            (record(start, end, "2024-03-01 10:06:00 +0100", value: 12), "818df93d-e680-82df-bd82-4e05e9e34ddf"),
            (record(start, end, "2024-13-01 10:06:00 +0100", value: 13), "818df93d-e680-88c1-b9be-ff18ab212cd3"),  // no month 13
            (record(start, end, "2024-02-30 10:06:00 +0100", value: 14), "818df93d-e680-8cef-ba2c-490b83216c81"),  // nor Feb 30
            (record(start, end, "2024-03-01T10:06:00+01:00", value: 15), "818df93d-e680-8779-b931-b31ad91cecd6"),  // RFC 3339
            (record(start, end, "garbage", value: 16), "818df93d-e680-8e3c-8444-1fd3c8a5e46e"),
            (record(start, end, nil, value: 17), "818df93d-e680-80ee-9730-1454f97a856b"),
            (record(legacyStart, legacyEnd, "20141018163835+0100", value: 18), "814923e3-8a38-8125-8e39-cb735669d965"),
            (record(legacyStart, legacyEnd, "20141318163835+0100", value: 19), "814923e3-8a38-80ca-84e9-8db9b31b5b3f"),
        ]
        let converter = AppleHealthConverter(user: "ann", idScheme: 2)
        for (record, id) in pinned {
            #expect(try converter.prepared(for: record)?.id.lowercased == id, "value \(record.value ?? "")")
            #expect(try converter.event(for: record)?.id.lowercased == id, "value \(record.value ?? "")")
        }
        // A sample sent without an id gets one derived from its content (`UUID.derived(from:)`).
        let sample = #"{"kind":"sample","user":"ann","type":"steps","value":12,"unit":"count","start":"2024-03-01T10:00:00+01:00","end":"2024-03-01T10:05:00+01:00","source":"Ann's iPhone"}"#
        let event = try EventDecoder.decode(try JSONValue.parse(Array(sample.utf8)))
        #expect(event.id.lowercased == "35e84115-3fcf-85b0-9b63-70098c1ff2f1")
        // One with a syncId also hashes its syncId and syncVersion (since 2026-11-30).
        let synced = String(sample.dropLast()) + #","syncId":"w-1","syncVersion":2}"#
        #expect(try EventDecoder.decode(try JSONValue.parse(Array(synced.utf8))).id.lowercased == "a1e05813-21c0-8aab-80e5-67229268445f")
    }

    @Test("the word-at-a-time control character check is the byte-by-byte one")
    func forbiddenControl() {
        var random = SplitMix64(seed: 21)
        let forbidden = { (byte: UInt8) in byte < 0x20 && byte != 0x09 && byte != 0x0A && byte != 0x0D }
        for round in 0..<3_000 {
            let length = Int(random.next() % 40)
            // Mostly text, line breaks and tabs, now and then a forbidden byte or a high one.
            let bytes: [UInt8] = (0..<length).map { _ in
                switch random.next() % 20 {
                case 0: UInt8(random.next() % 0x20)
                case 1: 0x80 | UInt8(random.next() % 0x80)
                case 2: [0x09, 0x0A, 0x0D][Int(random.next() % 3)]
                default: 0x20 + UInt8(random.next() % 0x5F)
                }
            }
            let start = length == 0 ? 0 : Int(random.next() % UInt64(length))
            let slice = bytes[start...]
            #expect(ExportStream.hasForbiddenControl(slice) == slice.contains(where: forbidden), "round \(round): \(Array(slice))")
        }
    }

    @Test("ByteCursor.decimal writes String(value)'s bytes")
    func decimal() {
        var values: [Int64] = [0, 1, -1, 9, 10, -10, 11, 99, -99, 100, -100, 101, 1_000, 999_999_999_999_999, 1_000_000_000_000_000, 1_700_000_000_000_000,
                               -62_135_596_800_000_000, .max, .min, .max - 1, .min + 1]
        var random = SplitMix64(seed: 5)
        for _ in 0..<2_000 { values.append(Int64(bitPattern: random.next()) >> Int64(random.next() % 63)) }
        for value in values {
            let out = ByteCursor.withScratch(capacity: 32) { cursor in
                cursor.u8(7)
                cursor.decimal(value)
            }
            #expect(out == [7] + Array(String(value).utf8), "\(value)")
        }
    }
}
