import Foundation
import LedgerImport
import LedgerTestSupport
import Testing

/// The export reader on hand-made XML: what it returns, what it skips, and where it says a
/// file breaks.
@Suite("export reader")
struct HealthExportReaderTests {
    func write(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("reader-\(UUID().uuidString).xml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func readAll(_ path: String) throws -> [HealthRecord] {
        let reader = try HealthExportReader(path: path)
        var records: [HealthRecord] = []
        while let record = try reader.next() { records.append(record) }
        return records
    }

    @Test("attributes, entities, metadata, correlations and nesting")
    func shapes() throws {
        let path = try write("""
        <?xml version="1.0" encoding="UTF-8"?>
        <HealthData locale="en_US">
         <ExportDate value="2024-03-01 10:00:00 +0100"/>
         <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Ann&apos;s iPhone" sourceVersion="17.1" unit="count" creationDate="2024-03-01 10:06:00 +0100" startDate="2024-03-01 10:00:00 +0100" endDate="2024-03-01 10:05:00 +0100" value="120" device="&lt;&lt;HKDevice: 0x1&gt;, name:iPhone&gt;">
          <MetadataEntry key="HKTimeZone" value="Europe/Paris"/>
          <Nested><MetadataEntry key="ignored" value="deeper than a child"/></Nested>
          <MetadataEntry key="HKMetadataKeySyncIdentifier" value="a&amp;b &amp;#38; &#38;&#x26;"/>
         </Record>
         <Correlation type="HKCorrelationTypeIdentifierFood">
          <Record type="HKQuantityTypeIdentifierStepCount" sourceName="inside" value="1"/>
         </Correlation>
         <Correlation type="HKCorrelationTypeIdentifierFood"/>
         <Record type="HKQuantityTypeIdentifierFlightsClimbed" source="legacy" value="3" startDate="20141018163235+0100"/>
         <Workout workoutActivityType="HKWorkoutActivityTypeWalking"><WorkoutEvent type="pause"/></Workout>
        </HealthData>
        """)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let records = try readAll(path)
        #expect(records.count == 2)
        let first = try #require(records.first)
        #expect(first.type == "HKQuantityTypeIdentifierStepCount")
        #expect(first.sourceName == "Ann's iPhone")
        #expect(first.sourceVersion == "17.1")
        #expect(first.device == "<<HKDevice: 0x1>, name:iPhone>")
        #expect(first.value == "120")
        #expect(first.unit == "count")
        #expect(first.startDate == "2024-03-01 10:00:00 +0100")
        #expect(first.endDate == "2024-03-01 10:05:00 +0100")
        #expect(first.creationDate == "2024-03-01 10:06:00 +0100")
        #expect(first.metadata == ["HKTimeZone": "Europe/Paris", "HKMetadataKeySyncIdentifier": "a&b &#38; &&"])
        #expect(first.line == 4)
        let legacy = try #require(records.last)
        #expect(legacy.sourceName == "legacy")
        #expect(legacy.unit == nil)
        #expect(legacy.metadata.isEmpty)
        #expect(legacy.line == 13)
    }

    @Test("after a DOCTYPE of many lines, records and breaks keep the file's line numbers")
    func linesAfterDoctype() throws {
        let path = try write("""
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE HealthData [
        <!ELEMENT HealthData (ExportDate,Me,(Record|Correlation)*)>
        <!ATTLIST Record
          type CDATA #REQUIRED
          value CDATA #IMPLIED
        >
        ]>
        <HealthData locale="en_US">
         <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" value="1"/>
         <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" value="2"<
        </HealthData>
        """)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try HealthExportReader(path: path)
        #expect(try reader.next()?.line == 10)
        #expect {
            _ = try reader.next()
        } throws: { error in
            guard case ImportError.malformed(_, let line, _) = error else { return false }
            return line == 11
        }
    }

    @Test("lines are counted past 65,535, and a break names its line after the records before it")
    func longFileBreaks() throws {
        var text = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<HealthData>\n"
        let count = 70_000
        for index in 0..<count {
            text += #" <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" value="\#(index)"/>"# + "\n"
        }
        text += " <Record type=\"broken\" value=\"1\"<\n</HealthData>\n"
        let path = try write(text)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try HealthExportReader(path: path)
        var read = 0
        var last: HealthRecord?
        do {
            while let record = try reader.next() {
                read += 1
                last = record
            }
            Issue.record("the broken record was not reported")
        } catch let error as ImportError {
            guard case .malformed(let errorPath, let line, _) = error else {
                Issue.record("unexpected error \(error)")
                return
            }
            #expect(errorPath == path)
            #expect(line == count + 3)
        }
        #expect(read == count)
        #expect(last?.value == String(count - 1))
        #expect(last?.line == count + 2)
    }
}
