import Foundation
import Testing
@testable import LedgerCore

private func decodeAll(_ text: String) throws(InputError) -> [(InputLocation, Event)] {
    try EventInput.decode(Array(text.utf8))
}

/// A valid sample line padded with an unknown field to exactly `length` bytes.
private func paddedLine(length: Int) -> String {
    let base = Fixture.sampleLine(extra: ",\"pad\":\"\"").utf8.count
    precondition(length >= base)
    return Fixture.sampleLine(extra: ",\"pad\":\"" + String(repeating: "x", count: length - base) + "\"")
}

@Suite("EventInput: shapes")
struct EventInputShapeTests {
    @Test("NDJSON with blank lines and CRLF endings keeps real line numbers")
    func ndjsonWithBlankLinesAndCRLF() throws {
        let text = Fixture.sampleLine(value: 1) + "\r\n"
            + "\r\n"
            + Fixture.sampleLine(value: 2) + "\r\n"
            + "  \t \r\n"
            + Fixture.sampleLine(value: 3)
        let events = try decodeAll(text)
        #expect(events.map { $0.0 } == [.line(1), .line(3), .line(5)])
        #expect(events.map { $0.1.payload.asSample?.value } == [1, 2, 3])
    }

    @Test("NDJSON with LF endings, a trailing newline and trailing blank lines")
    func ndjsonLF() throws {
        let text = Fixture.sampleLine(value: 1) + "\n" + Fixture.sampleLine(value: 2) + "\n\n\n"
        let events = try decodeAll(text)
        #expect(events.map { $0.0 } == [.line(1), .line(2)])
        #expect(Set(events.map { $0.1.id }).count == 2)
    }

    @Test("a single pretty-printed object is one event, located at its first line")
    func prettyPrintedObject() throws {
        let text = """
            {
              "kind": "sample",
              "type": "steps",
              "value": 42,
              "start": "2026-11-29T08:00:00Z",
              "end": "2026-11-29T08:10:00Z",
              "source": {
                "name": "iPhone"
              }
            }

            """
        let events = try decodeAll(text)
        #expect(events.count == 1)
        #expect(events.first?.0 == .line(1))
        #expect(events.first?.1.payload.asSample?.value == 42)

        let later = try decodeAll("\n\n   " + text)
        #expect(later.map { $0.0 } == [.line(3)])
    }

    /// It named the object's first line, which in a file of 9 lines said nothing of where to
    /// look (an audit).
    @Test("a pretty-printed object with a bad field names the field's line and the field; one without it, its first line")
    func prettyPrintedObjectError() throws {
        let text = "\n{\n  \"kind\": \"sample\",\n  \"type\": \"steps\",\n  \"value\": -5,\n  \"start\": \"2026-11-29T08:00:00Z\",\n  \"end\": \"2026-11-29T08:10:00Z\",\n  \"source\": \"iPhone\"\n}"
        let error = try #require(inputError(text))
        #expect(error.location == .line(5))
        #expect(error.field == "value")
        #expect(error.description.hasPrefix("line 5: 'value' must not be negative"))
        // A nested field, past a key of the same name in another object.
        let nested = "{\n  \"kind\": \"sample\", \"type\": \"steps\", \"value\": 5,\n  \"metadata\": {\"name\": \"x\"},\n  \"start\": \"2026-11-29T08:00:00Z\", \"end\": \"2026-11-29T08:10:00Z\",\n  \"source\": {\n    \"name\": \"\"\n  }\n}"
        let inSource = try #require(inputError(nested))
        #expect(inSource.field == "source.name")
        #expect(inSource.location == .line(6), "\(inSource)")
        // A field the object lacks is named at the object's first line.
        let missing = "\n\n{\n  \"kind\": \"sample\",\n  \"type\": \"steps\",\n  \"value\": 5,\n  \"start\": \"2026-11-29T08:00:00Z\",\n  \"end\": \"2026-11-29T08:10:00Z\"\n}"
        let lacking = try #require(inputError(missing))
        #expect(lacking.location == .line(3), "\(lacking)")
        #expect(EventInput.line(ofField: "end", in: Array(missing.utf8)) == 8)
        #expect(EventInput.line(ofField: "source", in: Array(missing.utf8)) == nil)
    }

    @Test("a single one-line object is line 1")
    func singleLine() throws {
        let events = try decodeAll("  " + Fixture.sampleLine() + "  ")
        #expect(events.map { $0.0 } == [.line(1)])
    }

    @Test("an array gives 0-based indexes, even when pretty-printed")
    func array() throws {
        let compact = try decodeAll("[" + Fixture.sampleLine(value: 1) + "," + Fixture.sampleLine(value: 2) + "]")
        #expect(compact.map { $0.0 } == [.index(0), .index(1)])
        #expect(compact.map { $0.1.payload.asSample?.value } == [1, 2])

        let pretty = try decodeAll("\n  [\n" + Fixture.sampleLine(value: 1) + ",\n\n" + Fixture.sampleLine(value: 2) + "\n]\n")
        #expect(pretty.map { $0.0 } == [.index(0), .index(1)])
    }

    @Test("an invalid array element is named by its index")
    func arrayErrorIndex() throws {
        let text = "[\n" + Fixture.sampleLine(value: 1) + ",\n" + Fixture.sampleLine(value: 2) + ",\n"
            + Fixture.sampleLine(start: "2026-11-29T09:00:00Z", end: "2026-11-29T08:00:00Z") + "\n]"
        let error = try #require(inputError(text))
        #expect(error.location == .index(2))
        #expect(error.field == "end")
        #expect(error.description == "index 2: 'end' precedes 'start'")
    }

    @Test("an array element that is not an object is named by its index")
    func arrayNonObject() throws {
        let error = try #require(inputError("[" + Fixture.sampleLine() + ", 42]"))
        #expect(error == InputError(location: .index(1), field: nil, message: "expected a JSON object, got a number"))
        #expect(error.description == "index 1: expected a JSON object, got a number")
    }

    @Test("malformed JSON inside an array names the line")
    func arrayMalformed() throws {
        let error = try #require(inputError("[\n" + Fixture.sampleLine() + ",\n{\"kind\": }\n]"))
        #expect(error.location == .line(3))
        #expect(error.field == nil)
        #expect(error.message.hasPrefix("malformed JSON: "))
    }

    @Test("no events: empty input and white space only", arguments: ["", " ", "\n", "\r\n\r\n", " \t\n  \n"])
    func noEvents(text: String) throws {
        let error = try #require(inputError(text))
        #expect(error == InputError(location: nil, message: "no events in input"))
        #expect(error.description == "no events in input")
    }

    @Test("no events: an empty array", arguments: ["[]", " [ ]\n", "[\n\n]"])
    func emptyArray(text: String) throws {
        let error = try #require(inputError(text))
        #expect(error == InputError(location: nil, message: "no events in input: the array is empty"))
    }

    @Test("a line that is JSON but not an object is named")
    func scalarLine() throws {
        let error = try #require(inputError(Fixture.sampleLine() + "\n42\n" + Fixture.sampleLine(value: 2)))
        #expect(error == InputError(location: .line(2), field: nil, message: "expected a JSON object, got a number"))
    }

    @Test("two objects on one line are malformed, on that line")
    func twoObjectsOnALine() throws {
        let error = try #require(inputError(Fixture.sampleLine(value: 1) + "\n" + Fixture.sampleLine(value: 2) + Fixture.sampleLine(value: 3)))
        #expect(error.location == .line(2))
        #expect(error.message.hasPrefix("malformed JSON: "))
    }

    @Test("the injected random id reaches events decoded from input")
    func injectedRandomID() throws {
        let id = UUID(uuidString: "00000000-0000-4000-8000-000000000001")!
        let text = #"{"kind":"grant","client":"app","read":["steps"]}"# + "\n" + Fixture.sampleLine()
        var calls = 0
        let events = try EventInput.decode(Array(text.utf8), makeRandomID: { calls += 1; return id })
        #expect(calls == 1)
        #expect(events.first?.1.id == id)
        #expect(events.last?.1.id != id)
    }

    @Test("parse locates values without validating them as events")
    func parseOnly() throws {
        let values = try EventInput.parse(Array("{\"a\":1}\n\n[2]\n\"x\"".utf8))
        #expect(values.map { $0.0 } == [.line(1), .line(3), .line(4)])
        #expect(values.map { $0.1 } == [.object(["a": .int(1)]), .array([.int(2)]), .string("x")])
    }
}

@Suite("EventInput: errors")
struct EventInputErrorTests {
    @Test("the error names the line and the field: \"line 2: 'end' precedes 'start'\"")
    func descriptionFormat() throws {
        let text = Fixture.sampleLine() + "\n"
            + Fixture.sampleLine(start: "2026-11-29T09:00:00Z", end: "2026-11-29T08:00:00Z") + "\n"
            + Fixture.sampleLine(value: 3) + "\n"
        let error = try #require(inputError(text))
        #expect(error.description == "line 2: 'end' precedes 'start'")
        #expect(error.location == .line(2))
        #expect(error.field == "end")
        #expect(error.message == "'end' precedes 'start'")
    }

    @Test("line numbers count blank lines and survive CRLF")
    func lineNumbersWithBlanks() throws {
        let text = Fixture.sampleLine() + "\r\n\r\n\r\n" + #"{"kind":"sample","type":"sleep"}"# + "\r\n"
        let error = try #require(inputError(text))
        #expect(error.location == .line(4))
        #expect(error.field == "type")
        #expect(error.description.hasPrefix("line 4: unknown type 'sleep'"))
    }

    @Test("a batch is all or nothing: one bad event fails the whole input")
    func allOrNothing() throws {
        var lines = (1...50).map { Fixture.sampleLine(value: $0) }
        lines[36] = Fixture.sampleLine(value: 37, extra: #","unit":"km""#)
        let error = try #require(inputError(lines.joined(separator: "\n")))
        #expect(error.location == .line(37))
        #expect(error.field == "unit")
    }

    /// Cases for `errorInString`: the input, with `<FF>` standing for a byte 0xFF (not UTF-8),
    /// and the start of the message.
    static let inString: [(String, String)] = [
        (#"{"kind":"sample","user":"b<FF>c"}"#, "malformed JSON in 'user': unable to decode byte 0xff"),
        (#"{"kind":"sample","user":"b\ud800c"}"#, #"malformed JSON in 'user': invalid Unicode '\uD800'"#),
        (#"{"kind":"sample","source":{"name":"a\qb"}}"#, "malformed JSON in 'source.name': invalid escape"),
        ("{\"kind\":\"sample\",\"metadata\":{\"k\":\"v\u{1}\"}}", "malformed JSON in 'metadata.k': control character 0x1"),
        (#"{"kind":"grant","read":["steps","x<FF>"]}"#, "malformed JSON in 'read': unable to decode byte 0xff"),
        (#"{"a":"q\"x,{[","user":"\ud800"}"#, "malformed JSON in 'user': invalid Unicode"),
        // A token that is no value names its member's whole path, as a string's error does (it
        // named only 'a' and 'version': an audit).
        (#"{"kind":"sample","metadata":{"a":NaN}}"#, "malformed JSON in 'metadata.a': invalid token near 'NaN'"),
        (#"{"kind":"sample","source":{"name":"w","version":Infinity}}"#, "malformed JSON in 'source.version': invalid token near 'Infinity'"),
        (#"{"kind":"sample","value":NaN}"#, "malformed JSON in 'value': invalid token near 'NaN'"),
        // Not in a value: in a key, or outside any string, no field is named.
        (#"{"kind":"sample","na<FF>me":1}"#, "malformed JSON: unable to decode byte 0xff"),
        (#"{"a":1 "b":2}"#, "malformed JSON: '}' expected"),
    ]

    /// Errors inside a string value named no field: Jansson stops in the string, where the
    /// key before it is not next to the error (an audit: "unable to decode byte 0xff").
    @Test("an error inside a string value names its field, as a path of keys", arguments: 0..<EventInputErrorTests.inString.count)
    func errorInString(_ index: Int) throws {
        let (text, expected) = EventInputErrorTests.inString[index]
        let parts = text.components(separatedBy: "<FF>").map { Array($0.utf8) }
        let bytes = parts.dropFirst().reduce(parts[0]) { $0 + [0xFF] + $1 }
        let error = try #require(inputError(bytes))
        #expect(error.location == .line(1))
        #expect(error.message.hasPrefix(expected), "\(error.message)")
    }

    @Test("malformed JSON in a middle line names that line, without a truncation hint")
    func malformedMiddleLine() throws {
        let text = Fixture.sampleLine() + "\n{\"kind\": sample}\n" + Fixture.sampleLine(value: 3)
        let error = try #require(inputError(text))
        #expect(error.location == .line(2))
        #expect(error.field == nil)
        // The member the bad token is the value of is named (SPEC §3.2: line and field).
        #expect(error.message.hasPrefix("malformed JSON in 'kind': invalid token near 'sample'"), "\(error.message)")
        #expect(error.message.contains("(column "))
        #expect(!error.message.contains("truncated"))
    }

    @Test("a truncated last line names the last line and says it looks truncated", arguments: ["", "\n", "\r\n"])
    func truncatedLastLine(ending: String) throws {
        let text = Fixture.sampleLine(value: 1) + "\n" + Fixture.sampleLine(value: 2) + "\n"
            + #"{"kind":"sample","type":"steps","value":3,"# + ending
        let error = try #require(inputError(text))
        #expect(error.location == .line(3))
        #expect(error.message.hasPrefix("malformed JSON: "))
        #expect(error.message.hasSuffix("(the last line looks truncated)"))
    }

    @Test("a last line cut inside a string names the last line")
    func truncatedInsideString() throws {
        let text = Fixture.sampleLine(value: 1) + "\n" + #"{"kind":"sample","source":"iPh"#
        let error = try #require(inputError(text))
        #expect(error.location == .line(2))
        #expect(error.message.hasPrefix("malformed JSON in 'source': premature end of input"), "\(error.message)")
    }

    @Test("a last line cut inside a string gets the truncation hint too")
    func truncatedInsideStringHint() throws {
        let text = Fixture.sampleLine(value: 1) + "\n" + #"{"kind":"sample","source":"iPh"#
        let error = try #require(inputError(text))
        // Jansson says "premature end of input" here: the hint keys on that error code.
        #expect(error.message.hasSuffix("(the last line looks truncated)"))
    }

    @Test("a complete last line with trailing garbage is not called truncated")
    func trailingGarbageNotTruncated() throws {
        let text = Fixture.sampleLine(value: 1) + "\n" + Fixture.sampleLine(value: 2) + " x"
        let error = try #require(inputError(text))
        #expect(error.location == .line(2))
        #expect(error.message.hasPrefix("malformed JSON: "))
        // Jansson's "end of file expected near 'x'" is trailing garbage, not a truncation.
        #expect(!error.message.contains("truncated"))
    }

    @Test("a line over 1 MiB is refused, naming its line")
    func oversizedLine() throws {
        let long = paddedLine(length: EventInput.maxLineBytes + 1)
        #expect(long.utf8.count == EventInput.maxLineBytes + 1)
        let text = Fixture.sampleLine() + "\n" + long + "\n" + Fixture.sampleLine(value: 3)
        let error = try #require(inputError(text))
        #expect(error.location == .line(2))
        #expect(error.message == "line is longer than 1 MiB (1048577 bytes)")
        #expect(error.description == "line 2: line is longer than 1 MiB (1048577 bytes)")
    }

    @Test("a single object over 1 MiB on one line is refused as line 1")
    func oversizedSingleObject() throws {
        let error = try #require(inputError(paddedLine(length: EventInput.maxLineBytes + 10)))
        #expect(error.location == .line(1))
        #expect(error.message.hasPrefix("line is longer than 1 MiB"))
    }

    @Test("a line of exactly 1 MiB is accepted, and its CR is not counted")
    func lineAtLimit() throws {
        let exact = paddedLine(length: EventInput.maxLineBytes)
        let text = Fixture.sampleLine() + "\r\n" + exact + "\r\n"
        let events = try decodeAll(text)
        #expect(events.map { $0.0 } == [.line(1), .line(2)])
        #expect(events.last?.1.document["pad"]?.stringValue?.utf8.count ?? 0 > 1_000_000)
    }

    @Test("hostile bytes never crash: every input decodes or names a problem (seeded)")
    func fuzz() {
        let seed: UInt64 = 0xF022_0001
        var generator = SeededGenerator(seed: seed)
        let valid = Array((Fixture.sampleLine(value: 1) + "\n" + Fixture.sampleLine(value: 2) + "\n").utf8)
        let interesting: [UInt8] = Array("{}[]\":,\n\r\t \\0123456789.-eEtruefalsn".utf8) + [0x00, 0xC3, 0xFF, 0x80]
        for iteration in 0..<400 {
            var bytes = valid
            if iteration % 4 == 0 {
                let count = Int.random(in: 0..<64, using: &generator)
                bytes = (0..<count).map { _ in interesting[Int.random(in: 0..<interesting.count, using: &generator)] }
            } else {
                for _ in 0..<Int.random(in: 1...4, using: &generator) {
                    let index = Int.random(in: 0..<bytes.count, using: &generator)
                    bytes[index] = interesting[Int.random(in: 0..<interesting.count, using: &generator)]
                }
            }
            do {
                let events = try EventInput.decode(bytes)
                #expect(!events.isEmpty, "seed \(seed), iteration \(iteration)")
            } catch {
                #expect(!error.description.isEmpty, "seed \(seed), iteration \(iteration)")
                #expect(!error.description.contains("\n"), "seed \(seed), iteration \(iteration): \(error.description)")
            }
        }
    }
}

@Suite("InputError and InputLocation")
struct InputErrorTests {
    @Test("descriptions")
    func descriptions() {
        #expect(InputLocation.line(17).description == "line 17")
        #expect(InputLocation.index(0).description == "index 0")
        let located = InputError(FieldError("end", "'end' precedes 'start'"), at: .line(17))
        #expect(located.description == "line 17: 'end' precedes 'start'")
        #expect(located.field == "end")
        #expect(InputError(FieldError(nil, "boom"), at: nil).description == "boom")
        #expect(InputError(location: .index(3), message: "m").field == nil)
    }
}

@Suite("Lines of array elements")
struct ArrayElementLineTests {
    @Test("the line each top-level element starts on, past strings, escapes and nesting")
    func lines() {
        // Raw: the JSON holds the escapes \\ and \" and \n, and a "]" and "," inside a string.
        let body = Array(#"""
        [ {"a": "x\\\"]\n,["},
          {"b": [1,
                 2]}, 3,

          "four"
        ]
        """#.utf8)
        #expect(EventInput.lineOfArrayElement(body, index: 0) == 1)
        #expect(EventInput.lineOfArrayElement(body, index: 1) == 2)
        #expect(EventInput.lineOfArrayElement(body, index: 2) == 3)
        #expect(EventInput.lineOfArrayElement(body, index: 3) == 5)
        #expect(EventInput.lineOfArrayElement(body, index: 4) == nil)
        #expect(EventInput.lineOfArrayElement(Array("{\"a\":1}".utf8), index: 0) == nil)
        #expect(EventInput.lineOfArrayElement(Array("[]".utf8), index: 0) == nil)
        #expect(EventInput.lineOfArrayElement(Array("\n\n[1]".utf8), index: 0) == 3)
        #expect(EventInput.lineOfArrayElement([0xEF, 0xBB, 0xBF] + Array("[1,\n2]".utf8), index: 1) == 2)
    }
}

@Suite("Hostile layouts")
struct HostileLayoutTests {
    @Test("an array element over 1 MiB is refused by its index, as an NDJSON line would be")
    func hugeArrayElement() {
        let big = String(repeating: "x", count: 1 << 20)
        let text = "[" + #"{"kind":"sample","type":"steps","value":1,"start":"2026-01-01T00:00:00Z","end":"2026-01-01T00:01:00Z","source":"a","extra":""# + big + #""}]"#
        #expect { try EventInput.decode(Array(text.utf8)) } throws: { error in
            let input = error as? InputError
            return input?.location == .index(0) && input?.message.hasPrefix("the event is longer than 1 MiB") == true
        }
    }

    @Test("a pretty-printed object that is broken is named at the broken line, not as NDJSON line 1")
    func brokenPrettyObject() {
        let text = "{\n  \"kind\": \"sample\",\n  \"type\": \"steps\",\n  \"value\": NaN\n}\n"
        #expect { try EventInput.decode(Array(text.utf8)) } throws: { error in
            let input = error as? InputError
            return input?.location == .line(4) && input?.message.contains("NaN") == true
        }
        // NDJSON whose first line is whole still reads line by line.
        let lines = #"{"kind":"sample","type":"steps","value":1,"start":"2026-01-01T00:00:00Z","end":"2026-01-01T00:01:00Z","source":"a"}"# + "\n{bad\n"
        #expect { try EventInput.decode(Array(lines.utf8)) } throws: { ($0 as? InputError)?.location == .line(2) }
        // A bad first line before good ones is NDJSON whose line 1 is broken, whatever the size.
        let good = #"{"kind":"sample","type":"steps","value":1,"start":"2026-01-01T00:00:00Z","end":"2026-01-01T00:01:00Z","source":"a"}"#
        for rest in [good, Array(repeating: good, count: 12_000).joined(separator: "\n")] {
            #expect { try EventInput.decode(Array(("{\"kind\":\"sample\",\n" + rest).utf8)) } throws: { error in
                let input = error as? InputError
                return input?.location == .line(1) && input?.message.hasPrefix("malformed JSON") == true
            }
        }
    }

    @Test("a UTF-8 byte order mark at the start is ignored; lines and columns stay")
    func byteOrderMark() throws {
        let line = #"{"kind":"sample","type":"steps","value":1,"start":"2026-01-01T00:00:00Z","end":"2026-01-01T00:01:00Z","source":"a"}"#
        #expect(try EventInput.decode([0xEF, 0xBB, 0xBF] + Array((line + "\n" + line.replacingOccurrences(of: "\"a\"", with: "\"b\"")).utf8)).count == 2)
        #expect { try EventInput.decode([0xEF, 0xBB, 0xBF] + Array((line + "\n{bad").utf8)) } throws: { ($0 as? InputError)?.location == .line(2) }
        #expect(try EventInput.decode([0xEF, 0xBB, 0xBF] + Array("[\(line)]".utf8)).count == 1)
    }

    @Test("a priority list of 50,000 names is checked for repeats in linear time, by bytes")
    func longPriority() throws {
        let names = (0..<50_000).map { "\"s\($0)\"" }.joined(separator: ",")
        let profile = #"{"kind":"profile","priority":{"steps":["# + names + "]}}"
        #expect(try EventInput.decode(Array(profile.utf8)).count == 1)
        let repeated = #"{"kind":"profile","priority":{"steps":["# + names + #","s49999"]}}"#
        #expect { try EventInput.decode(Array(repeated.utf8)) } throws: { ($0 as? InputError)?.message.contains("twice") == true }
    }
}

