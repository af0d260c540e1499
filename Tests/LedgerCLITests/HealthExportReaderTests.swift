import Foundation
@testable import LedgerImport
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

    @Test("comments are skipped, however long and wherever the reads split them; CDATA is kept")
    func comments() throws {
        func record(_ value: Int) -> String {
            #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="a" value="\#(value)"/>"#
        }
        // A comment holding markup, one of 3 MB over many lines (libxml2's push parser alone
        // took seconds on such), and comments placed so each delimiter straddles a read of
        // 256 KiB: the first starts 2 bytes before the boundary, the next ends across it.
        let big = String(repeating: "lorem ipsum <Record value=\"99\"/> --\n", count: 80_000)
        // A comment before the root holding markup, then a malformed DTD that must still be
        // found and dropped after it.
        var head = "<?xml version=\"1.0\"?>\n<!-- <Note> " + String(repeating: "x", count: 300_000) + " -->\n"
            + "<!DOCTYPE HealthData [\n<!ATTLIST Broken\n]>\n"
        head += "<HealthData>\n <!-- " + record(98) + " -->\n " + record(1) + "\n"
        let boundary = (head.utf8.count / (1 << 18) + 1) * (1 << 18)  // the next 256 KiB read
        head += String(repeating: " ", count: boundary - 2 - head.utf8.count) + "<!-- split -->\n"
        let xml = head + " " + record(2) + "\n <!--" + big + "-->\n <Note><![CDATA[ <!-- kept --> ]]></Note>\n " + record(3)
            + "\n <!-- unterminated -- fine --><!---->\n" + record(4) + "\n</HealthData>\n"
        let path = try write(xml)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let records = try readAll(path)
        #expect(records.map(\.value) == ["1", "2", "3", "4"])
        // Line numbers count the comments' lines.
        let lineOf4 = xml.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains("value=\"4\"") }! + 1
        #expect(records.last?.line == lineOf4)
        // A comment that never ends is an error at the end, not a silent success.
        let open = try write("<HealthData>\n" + record(1) + "\n<!-- no end\n</HealthData>\n")
        defer { try? FileManager.default.removeItem(atPath: open) }
        #expect(throws: ImportError.self) { try readAll(open) }
    }

    /// Comments and the DOCTYPE are dropped before the parser, up to 1 GiB, so that one that
    /// never ends (from a pipe or a device) is refused rather than read for ever. A gigabyte
    /// takes too long in a debug build: the bound is the one `import` uses, made small here.
    @Test("a comment or a DOCTYPE longer than the bound is refused; one under it is dropped")
    func droppedBound() throws {
        let record = #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="a" value="1"/>"#
        let filler = String(repeating: "x", count: 80) + "\n"
        let long = String(repeating: filler, count: 1_000)  // 81,000 bytes
        for (open, close) in [("<!--", "-->"), ("<!DOCTYPE HealthData [\n<!--", "-->\n]>")] {
            let refused = try write("<?xml version=\"1.0\"?>\n" + open + long + close + "\n<HealthData>\n" + record + "\n</HealthData>\n")
            defer { try? FileManager.default.removeItem(atPath: refused) }
            #expect {
                let reader = try HealthExportReader(path: refused, checking: nil, maximumDropped: 64 << 10)
                while try reader.next() != nil {}
            } throws: { error in
                guard case ImportError.malformed(_, let line, let message) = error else { return false }
                // The line the parser had reached: the one before the comment.
                return line == 1 && message == "a comment or the DOCTYPE runs past 64 KiB; the file is not an export, or is damaged"
            }
            let reader = try HealthExportReader(path: refused, checking: nil, maximumDropped: 128 << 10)
            var values: [String?] = []
            while let next = try reader.next() { values.append(next.value) }
            #expect(values == ["1"])
        }
    }

    /// The pre-pass reads 256 KiB at a time and holds back what may begin a delimiter: every
    /// delimiter of a processing instruction, a CDATA section, a comment and a tag is put
    /// across the first read's end, byte by byte.
    @Test("markup split across reads: every record is read, once")
    func splitAcrossReads() throws {
        func record(_ value: Int) -> String {
            #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="a > b &gt; c" value="\#(value)"/>"#
        }
        let body = "<?foo <!-- > ?>" + record(1) + "<![CDATA[ <!-- ?> --> ]]>" + record(2) + "<!-- c ]]> ?> <Record -->" + record(3)
        let prefix = "<HealthData>\n"
        let bodyBytes = Array(body.utf8)
        // Each delimiter's place in the body.
        var places: [Int] = []
        for delimiter in ["<?", "?>", "<![CDATA[", "]]>", "<!--", "-->", "<Record", "/>", "\"a > b", "b &gt; c\""] {
            var from = 0
            while let found = bodyBytes[from...].firstRange(of: Array(delimiter.utf8)) {
                places.append(found.lowerBound)
                from = found.lowerBound + 1
            }
        }
        let read = 1 << 18
        for place in Set(places) {
            for within in 0...(min(9, bodyBytes.count - place)) {
                // The first read ends `within` bytes into the delimiter at `place`.
                let padding = String(repeating: " ", count: read - prefix.utf8.count - place - within)
                let path = try write(prefix + padding + body + "\n</HealthData>\n")
                defer { try? FileManager.default.removeItem(atPath: path) }
                let values = try readAll(path).map { $0.value ?? "" }
                #expect(values == ["1", "2", "3"], "split \(within) bytes into the delimiter at \(place)")
            }
        }
    }

    /// A read of plain tags goes out whole (`lastOrdinaryTag`), and only the markup from its
    /// last `<` on is followed: the state the next read starts in must still be the one tag
    /// by tag gives. Two reads of records (the second starting inside one), then markup that
    /// needs that state (a comment holding a record, a record whose quoted value holds `>`, a
    /// CDATA section, an instruction, a `<` in a value) at every offset around the second
    /// read's end.
    @Test("reads of plain tags passed whole: the markup after them is read as before")
    func plainReads() throws {
        func record(_ value: Int, source: String = "phone") -> String {
            #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="\#(source)" value="\#(value)"/>"#
        }
        let read = 1 << 18
        let prefix = "<HealthData>\n"
        var count = 0
        var filler = ""
        while filler.utf8.count < 2 * read - 200 {
            filler += record(count) + "\n"
            count += 1
        }
        let plain = (0..<count).map(String.init)
        let tails: [(markup: String, values: [String]?)] = [
            // Comments hold `--`, which libxml2 refuses: only one dropped before it is read passes.
            ("<!-- -- " + record(-1) + " -->" + record(1_000_001), ["1000001"]),
            (record(1_000_003, source: "a > b") + "<!-- -- -->" + record(1_000_004), ["1000003", "1000004"]),
            ("<![CDATA[ " + record(-2) + " ]]>" + record(1_000_005), ["1000005"]),
            ("<?pi " + record(-3) + " ?>" + record(1_000_006), ["1000006"]),
            (record(1_000_002, source: "a > b <!-- c -->"), nil),  // malformed: a `<` in a value
        ]
        for (markup, expected) in tails {
            for shift in -12...12 {
                let padding = String(repeating: " ", count: 2 * read + shift - prefix.utf8.count - filler.utf8.count)
                let path = try write(prefix + padding + filler + markup + "\n</HealthData>\n")
                defer { try? FileManager.default.removeItem(atPath: path) }
                if let expected {
                    let values = try readAll(path).map { $0.value ?? "" }
                    #expect(values == plain + expected, "markup \(shift) bytes from the read's end: \(markup)")
                } else {
                    #expect(throws: ImportError.self, "markup \(shift) bytes from the read's end: \(markup)") { try readAll(path) }
                }
            }
        }
    }

    /// The reader holds a device in Apple's form in parts (`DeviceText`): the record's
    /// `device` must still be the attribute's text, and the name the ledger keeps the one
    /// `cleanDevice` finds in that text, for every form, odd ones included.
    /// A `'`-quoted value holding a `"` is followed as one value: the `"` opens nothing. (Only
    /// `"` were once counted, and such a tag left the count odd, what followed taken for the
    /// inside of a tag until another odd tag.) Reads of plain tags passed whole must leave the
    /// same state, wherever the reads end: a review found the outcome depended on where such
    /// tags fell (tags skipped before a read's last `<` were not followed).
    @Test("a '-quoted value holding a quote: the same outcome wherever the reads end")
    func singleQuotedValues() throws {
        func record(_ value: Int) -> String {
            #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="phone" value="\#(value)"/>"#
        }
        let records = (0..<13_000).map { record($0) + "\n" }.joined()  // about 1.1 MB
        for padding in [0, 1_000, 100_000, 262_000] {
            let pad = String(repeating: " ", count: padding)
            let one = try write("<HealthData>\n" + pad + "<Me a='\"'/>\n" + records + "</HealthData>\n")
            defer { try? FileManager.default.removeItem(atPath: one) }
            #expect(try readAll(one).count == 13_000, "padding \(padding)")
            let two = try write("<HealthData>\n" + pad + "<Me a='\"'/>\n" + record(-1) + "\n<Me b='\"'/>\n" + records + "</HealthData>\n")
            defer { try? FileManager.default.removeItem(atPath: two) }
            #expect(try readAll(two).count == 13_001, "padding \(padding)")
            // A `'` value holding `>` and `<!--`, with a record after it: the `<` is refused.
            let lookalike = try write("<HealthData>\n" + pad + records + "<Me a='\"> <!-- '/>\n" + record(-2) + "\n<Me b='-->'/>\n</HealthData>\n")
            defer { try? FileManager.default.removeItem(atPath: lookalike) }
            #expect(throws: ImportError.self, "padding \(padding)") { try readAll(lookalike) }
        }
    }

    /// A `<` inside a `"`-quoted value as a read's last bytes, and `!--` after it in the next
    /// read: a review found the `<` held back as the start of markup (the read's last `<`, taken
    /// for a tag's start without following the tags before it), the comment then dropped with
    /// the `<` the parser would have refused, and the records up to a later `-->` lost, exit 0.
    @Test("a '<!--' inside a quoted value split across reads is refused at every split")
    func lookalikeCommentAcrossReads() throws {
        func record(_ value: Int) -> String {
            #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="phone" value="\#(value)"/>"#
        }
        let read = 1 << 18
        for boundary in [read, 2 * read] {
            for shift in -10...10 {
                let head = "<HealthData>\n" + record(1) + "\n"
                let opening = #"<Me a=" "#
                let padding = String(repeating: " ", count: boundary + shift - head.utf8.count - opening.utf8.count)
                let text = head + padding + opening + #"<!-- "/>"# + "\n" + record(2) + "\n" + record(3) + "\n" + #"<Me b=" --> "/>"# + "\n" + record(4) + "\n</HealthData>\n"
                let path = try write(text)
                defer { try? FileManager.default.removeItem(atPath: path) }
                #expect(throws: ImportError.self, "the '<' at \(shift) from a read's end") { try readAll(path) }
            }
        }
    }

    @Test("device attributes: the text kept, and the name cleaned from it, in every form")
    func devices() throws {
        let devices = [
            "<<HKDevice: 0x60000>, name:iPhone, model:iPhone15,2>",
            "<<HKDevice: 0x60001>, name:iPhone, model:iPhone15,2>",  // the same name again
            "<<HKDevice: 0x1>, name:Watch>", "<<HKDevice: 0x1>, >", "<<HKDevice: 0x1>, x", "<<HKDevice: 0x1>>",
            "<<HKDevice:>, a, b>, c>", "<<HKDevice:", "<<HKDevice:é 0x1>, name:x>", "<<HKDevice:\u{301} 0x1>, name:x>",
            "<<HKDevice: 0x1>, name:a&b>", "<<HKDevice: 0x1>, name:\(String(repeating: "n", count: 100))>",
            "<<HKDevice: 0x\(String(repeating: "f", count: 40))>, name:long head>", "plain", "",
        ]
        func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&#38;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
        }
        let records = devices.enumerated().map { index, device in
            #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="phone" value="\#(index)" device="\#(escaped(device))"/>"#
        }
        let path = try write("<HealthData>\n" + records.joined(separator: "\n") + "\n</HealthData>\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let read = try readAll(path)
        #expect(read.map(\.device) == devices)
        for (record, device) in zip(read, devices) {
            #expect(record.deviceText?.cleaned() == AppleHealthConverter.cleanDevice(device), "\(device)")
        }
        #expect(read[0].deviceText?.cleaned() == "name:iPhone, model:iPhone15,2")
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

    @Test("a metadata key spelled with a look-alike character is read as Swift's string equality reads it, as before its keys were compared as bytes")
    func lookAlikeMetadataKey() throws {
        // U+212A KELVIN SIGN is canonically equivalent to K: the importer always took this key
        // for HKTimeZone (a review found the byte comparison had stopped doing so).
        let path = try write("""
        <?xml version="1.0" encoding="UTF-8"?>
        <HealthData locale="en_US">
         <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" value="5">
          <MetadataEntry key="H&#x212A;TimeZone" value="Asia/Tokyo"/>
          <MetadataEntry key="HKMetadataKeySyncIdentifier" value="s-1"/>
         </Record>
        </HealthData>
        """)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let record = try #require(try readAll(path).first)
        #expect(record.metadata == ["HKTimeZone": "Asia/Tokyo", "HKMetadataKeySyncIdentifier": "s-1"])
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

    @Test("hostile files: empty, cut off, not UTF-8, content after the end — each a one-line error naming its line")
    func hostileFiles() throws {
        let cases: [(text: [UInt8], line: Int, message: String)] = [
            ([], 1, "the file holds no XML document"),
            // Cut inside the DOCTYPE, which the parser never sees (an audit: it said the file
            // held no document).
            (Array("<?xml version=\"1.0\"?>\n<!DOCTYPE HealthData [\n<!ELEMENT HealthData (Record)*>\n<!ATTLIST Rec".utf8), 4,
             "the file ends inside its DOCTYPE, before the document (is it truncated?)"),
            (Array("<?xml version=\"1.0\"?>\n<HealthData>\n <Record type=\"t\" value=\"1\">\n".utf8), 3,
             "the file ends inside the document, in an element left open (is it truncated?)"),
            // Cut inside a tag, as a truncated export nearly always is: libxml2's first error
            // reads like a quoting error ("AttValue: ' expected").
            (Array("<?xml version=\"1.0\"?>\n<HealthData>\n <Record type=\"t\" value=\"1\"/>\n <Record type=\"t\" val".utf8), 4,
             "the file ends inside a tag, in an element left open (is it truncated?)"),
            (Array("<?xml version=\"1.0\"?>\n<HealthData>\n <Record sourceName=\"caf".utf8) + [0xE9] + Array("\"/>\n</HealthData>\n".utf8), 3,
             "Input is not proper UTF-8, indicate encoding !; Bytes: 0xE9 0x22 0x2F 0x3E (column 25)"),
            (Array("<?xml version=\"1.0\"?>\n<HealthData>\n</HealthData>\n<Record type=\"t\"/>\n".utf8), 4,
             "Extra content at the end of the document (column 1)"),
            // libxml2's first error, not what followed from it ("Couldn't find end of Start
            // Tag Record"), with the column of the unquoted value.
            (Array("<HealthData>\n <Record type=\"t\" sourceName=iPhone value=\"1\"/>\n</HealthData>\n".utf8), 2,
             "AttValue: \" or ' expected (column 30)"),
            // Records under another root are not an export (a review imported them).
            (Array("<?xml version=\"1.0\"?>\n\n<Foo>\n <Record type=\"HKQuantityTypeIdentifierStepCount\" value=\"1\"/>\n</Foo>\n".utf8), 3,
             "the root element is <Foo>, not <HealthData>; the file is not an Apple Health export"),
            (Array("<Record type=\"HKQuantityTypeIdentifierStepCount\" value=\"1\"/>\n".utf8), 1,
             "the root element is <Record>, not <HealthData>; the file is not an Apple Health export"),
            (Array(("<" + String(repeating: "r", count: 100) + "/>").utf8), 1,
             "the root element is <" + String(repeating: "r", count: 60) + "… (40 more characters)>, not <HealthData>; the file is not an Apple Health export"),
        ]
        for (text, line, message) in cases {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("hostile-\(UUID().uuidString).xml").path
            #expect(FileManager.default.createFile(atPath: path, contents: Data(text)))
            defer { try? FileManager.default.removeItem(atPath: path) }
            #expect {
                _ = try readAll(path)
            } throws: { error in
                guard case ImportError.malformed(_, let gotLine, let gotMessage) = error else { return false }
                #expect(gotLine == line, "\(gotMessage)")
                #expect(gotMessage == message)
                return !gotMessage.contains("\n")
            }
        }
    }

    @Test("lines ending in a carriage return alone or with a line feed are counted as the file's lines, across reads and comments")
    func carriageReturnLines() throws {
        func record(_ value: Int, source: String = "a") -> String {
            #"<Record type="HKQuantityTypeIdentifierStepCount" sourceName="\#(source)" value="\#(value)"/>"#
        }
        for end in ["\r", "\r\n", "\n"] {
            // Records on lines 3 and 6 (a comment of two line ends between), then a broken tag
            // on line 7.
            let text = "<?xml version=\"1.0\"?>" + end + "<HealthData>" + end + " " + record(1) + end
                + "<!-- a" + end + "b -->" + end + " " + record(2) + end + " <Record type=\"t\" sourceName=iPhone/>" + end
            let path = try write(text)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let reader = try HealthExportReader(path: path)
            let first = try reader.next()
            #expect(first?.line == 3, "\(Array(end.utf8))")
            #expect(try reader.next()?.line == 6, "\(Array(end.utf8))")
            #expect {
                _ = try reader.next()
            } throws: { error in
                guard case ImportError.malformed(_, let line, let message) = error else { return false }
                #expect(line == 7, "\(Array(end.utf8)): \(message)")
                return true
            }
        }
        // A carriage return inside a value ends a line too (XML's line ends come before its
        // values), and the value holds a space for it, as libxml2 gave before.
        do {
            let path = try write("<HealthData>\n " + record(1, source: "a\rb") + "\n <Record sourceName=x/>\n</HealthData>\n")
            defer { try? FileManager.default.removeItem(atPath: path) }
            let reader = try HealthExportReader(path: path)
            let first = try reader.next()
            #expect(first?.sourceName == "a b")
            #expect(first?.line == 3)  // where its tag ends
            #expect {
                _ = try reader.next()
            } throws: { error in
                guard case ImportError.malformed(_, let line, _) = error else { return false }
                #expect(line == 4)
                return true
            }
        }
        // A carriage return that ends one read (of 256 KiB) with its line feed beginning the
        // next is one line end, and one alone at the end of a read is one.
        for pair in [true, false] {
            var text = "<HealthData>\r\n " + record(1) + "\r\n"  // the record on line 2
            // Line 3, blank, ends with the read.
            text += String(repeating: " ", count: (1 << 18) - 1 - text.utf8.count) + "\r" + (pair ? "\n" : "")
            text += " " + record(2) + "\r\n <Record sourceName=x/>\r\n"  // lines 4 and 5
            let path = try write(text)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let reader = try HealthExportReader(path: path)
            #expect(try reader.next()?.line == 2)
            #expect(try reader.next()?.line == 4, "pair: \(pair)")
            #expect {
                _ = try reader.next()
            } throws: { error in
                guard case ImportError.malformed(_, let line, _) = error else { return false }
                #expect(line == 5, "pair: \(pair)")
                return true
            }
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
