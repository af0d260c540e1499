import Foundation
import Testing
@testable import LedgerCore

@Suite("JSON: canonical serialization")
struct JSONCanonicalTests {
    @Test("keys are sorted at every level and white space is dropped")
    func sortedKeys() throws {
        let value = try json("""
            { "b" : 1,
              "a" : [ true, false, null ],
              "c" : { "z" : "x", "y" : 1.5, "aa": {}, "a": [] } }
            """)
        #expect(value.canonicalString == #"{"a":[true,false,null],"b":1,"c":{"a":[],"aa":{},"y":1.5,"z":"x"}}"#)
    }

    @Test("keys sort by UTF-8 bytes, not by locale or UTF-16")
    func utf8KeyOrder() {
        // 'B' (0x42) < 'a' (0x61) < 'é' (0xC3 0xA9) < U+FF61 (0xEF…) < U+1F600 (0xF0…);
        // in UTF-16 U+1F600 (0xD83D…) would come before U+FF61.
        let value = JSONValue.object([
            "\u{1F600}": .int(5), "\u{FF61}": .int(4), "é": .int(3), "a": .int(2), "B": .int(1),
        ])
        #expect(value.canonicalString == "{\"B\":1,\"a\":2,\"é\":3,\"\u{FF61}\":4,\"\u{1F600}\":5}")
    }

    @Test("the same content gives the same bytes however it was written", arguments: [
        ("100", "100"), ("100.0", "100"), ("1e2", "100"), ("100.000", "100"), ("1.0E2", "100"),
        ("-0", "0"), ("-0.0", "0"), ("0.5", "0.5"), ("-2.5", "-2.5"), ("1.5e-7", "1.5e-07"),
        ("[1.0, 2.50]", "[1,2.5]"), ("{\"v\": 100.0}", "{\"v\":100}"),
        ("\"\\u00e9\"", "\"é\""), ("\"\\ud83d\\ude00\"", "\"\u{1F600}\""), ("\"\\/\"", "\"/\""),
    ])
    func sameContentSameBytes(input: String, canonical: String) throws {
        #expect(try json(input).canonicalString == canonical)
    }

    @Test("100 and 100.0 are the same bytes, whether parsed or built")
    func integralNumbers() throws {
        #expect(JSONValue.int(100).canonicalBytes == JSONValue.double(100.0).canonicalBytes)
        #expect(try json(#"{"value":100}"#).canonicalBytes == json(#"{"value":100.0}"#).canonicalBytes)
        #expect(try json(#"{"value":100}"#).canonicalBytes != json(#"{"value":100.5}"#).canonicalBytes)
        var out: [UInt8] = []
        JSONValue.writeNumber(42.0, to: &out)
        #expect(out == Array("42".utf8))
        out.removeAll()
        JSONValue.writeNumber(-7, to: &out)
        #expect(out == Array("-7".utf8))
        out.removeAll()
        JSONValue.writeNumber(0.1, to: &out)
        #expect(out == Array("0.1".utf8))
    }

    @Test("quotes, backslashes and control characters are escaped; nothing else is")
    func escaping() throws {
        let text = "q\"b\\s\nn\rr\tt\u{01}\u{1F}\u{08}\u{0C}/é\u{1F600}\u{7F}"
        let expected = "\"" + #"q\"b\\s\nn\rr\tt\u0001\u001f\u0008\u000c/é"# + "\u{1F600}\u{7F}\""
        #expect(JSONValue.string(text).canonicalString == expected)
        // Keys are escaped the same way.
        let object = JSONValue.object(["a\"\n": .null])
        #expect(object.canonicalString == #"{"a\"\n":null}"#)
        // And the escaped form parses back to the same string.
        #expect(try json(expected) == .string(text))
    }

    @Test("every control character is escaped and parses back")
    func allControlCharacters() throws {
        for scalar in 1..<0x20 {
            let text = "x" + String(Character(Unicode.Scalar(UInt8(scalar)))) + "y"
            let bytes = JSONValue.string(text).canonicalBytes
            #expect(!bytes.contains(where: { $0 < 0x20 }), "U+\(scalar) written raw")
            #expect(try JSONValue.parse(bytes) == .string(text), "U+\(scalar)")
        }
    }

    @Test("parse → canonical → parse gives the same value; canonicalizing twice changes nothing")
    func roundTripDocument() throws {
        let text = """
            {"kind":"sample","value":12.75,"count":3,"nested":{"list":[1,-2,3.25,"é",null,true],
             "empty":{},"none":[]},"quote":"say \\"hi\\"\\n","big":9223372036854775807,"neg":-9223372036854775808}
            """
        let first = try json(text)
        let canonical = first.canonicalBytes
        let second = try JSONValue.parse(canonical)
        #expect(second == first)
        #expect(second.canonicalBytes == canonical)
    }

    @Test("random values round trip through canonical bytes (seeded)")
    func randomRoundTrip() throws {
        let seed: UInt64 = 0x0150_4E5E
        var generator = SeededGenerator(seed: seed)
        for iteration in 0..<300 {
            let value = randomValue(depth: 0, using: &generator)
            let bytes = value.canonicalBytes
            let parsed = try #require(try? JSONValue.parse(bytes), "seed \(seed), iteration \(iteration): \(value.canonicalString)")
            #expect(parsed == value, "seed \(seed), iteration \(iteration)")
            #expect(parsed.canonicalBytes == bytes, "seed \(seed), iteration \(iteration)")
        }
    }

    /// A random value without integral doubles (those canonicalize to integers, by design) and
    /// without NUL characters (which Jansson refuses, so they never come from input).
    private func randomValue(depth: Int, using generator: inout SeededGenerator) -> JSONValue {
        let choice = Int.random(in: 0..<(depth >= 3 ? 5 : 7), using: &generator)
        switch choice {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &generator))
        case 2: return .int(Int64.random(in: .min ... .max, using: &generator))
        case 3:
            var number: Double
            repeat {
                let sign: Double = Bool.random(using: &generator) ? 1 : -1
                let exponent = Double(Int.random(in: -900...900, using: &generator))
                number = sign * Double.random(in: 1..<2, using: &generator) * pow(2, exponent)
            } while number == number.rounded()
            return .double(number)
        case 4: return .string(randomString(using: &generator))
        case 5:
            let count = Int.random(in: 0..<5, using: &generator)
            return .array((0..<count).map { _ in randomValue(depth: depth + 1, using: &generator) })
        default:
            let count = Int.random(in: 0..<5, using: &generator)
            var members: [String: JSONValue] = [:]
            for _ in 0..<count {
                members[randomString(using: &generator)] = randomValue(depth: depth + 1, using: &generator)
            }
            return .object(members)
        }
    }

    private func randomString(using generator: inout SeededGenerator) -> String {
        let alphabet: [Unicode.Scalar] = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\r", "\t",
                                          "\u{01}", "\u{1F}", "\u{7F}", "é", "ß", "\u{2028}",
                                          "\u{FFFD}", "\u{1F600}", "中"]
        let count = Int.random(in: 0..<8, using: &generator)
        var text = ""
        for _ in 0..<count {
            text.unicodeScalars.append(alphabet[Int.random(in: 0..<alphabet.count, using: &generator)])
        }
        return text
    }
}

@Suite("JSON: parsing")
struct JSONParsingTests {
    @Test("any value is accepted at top level")
    func topLevelScalars() throws {
        #expect(try json("3") == .int(3))
        #expect(try json("-3") == .int(-3))
        #expect(try json("1.5") == .double(1.5))
        #expect(try json("\"x\"") == .string("x"))
        #expect(try json("null") == .null)
        #expect(try json("true") == .bool(true))
        #expect(try json(" false ") == .bool(false))
        #expect(try json("[]") == .array([]))
        #expect(try json("{}") == .object([:]))
    }

    @Test("objects, arrays and Unicode escapes convert faithfully")
    func structure() throws {
        let value = try json(#"{"a":[1,2.5,"\u00e9\ud83d\ude00",{"b":null}],"c":false}"#)
        #expect(value == .object([
            "a": .array([.int(1), .double(2.5), .string("é\u{1F600}"), .object(["b": .null])]),
            "c": .bool(false),
        ]))
    }

    @Test("NaN and the infinities are not JSON", arguments: [
        #"{"value": NaN}"#, #"{"value": nan}"#, #"{"value": Infinity}"#, #"{"value": -Infinity}"#,
        "NaN", "Infinity", "-Infinity", "[1e400]", "[-1e400]",
    ])
    func nonFinite(text: String) {
        #expect(syntaxError(text) != nil, "\(text)")
    }

    @Test("trailing garbage after the document is refused", arguments: [
        #"{"a":1} x"#, #"{"a":1}{"b":2}"#, #"{"a":1},"#, "[1] [2]", "1 2", #"{"a":1}}"#, "null null",
        "{\"a\":1}\n{\"b\":2}",
    ])
    func trailingGarbage(text: String) {
        #expect(syntaxError(text) != nil, "\(text)")
    }

    @Test("duplicate keys are refused, however they are spelled, at any depth", arguments: [
        #"{"a":1,"a":2}"#, #"{"a":1,"a":1}"#, #"{"a":1,"\u0061":2}"#, #"{"x":{"k":1,"k":null}}"#,
        #"[{"id":1,"b":0,"id":1}]"#,
    ])
    func duplicateKeys(text: String) {
        #expect(syntaxError(text) != nil, "\(text)")
    }

    @Test("invalid UTF-8 is refused, in strings, keys and between tokens", arguments: [
        [0x22, 0xFF, 0x22],                    // never valid in UTF-8
        [0x22, 0xC3, 0x28, 0x22],              // bad continuation byte
        [0x22, 0xC0, 0xAF, 0x22],              // overlong '/'
        [0x22, 0xED, 0xA0, 0x80, 0x22],        // an encoded surrogate
        [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],  // above U+10FFFF
        [0x22, 0xE2, 0x82],                    // cut in the middle of a sequence
        [0x7B, 0x22, 0xFE, 0x22, 0x3A, 0x31, 0x7D],  // in a key
        [0x5B, 0x31, 0x2C, 0xFF, 0x5D],        // between tokens
    ] as [[UInt8]])
    func invalidUTF8(bytes: [UInt8]) {
        #expect(syntaxError(bytes) != nil, "\(bytes)")
    }

    @Test("empty input is its own error")
    func empty() throws {
        let error = try #require(syntaxError([UInt8]()))
        #expect(error == JSONValue.SyntaxError(message: "empty input", line: 1, column: 1))
        #expect(syntaxError(" \n\t ") != nil)
    }

    @Test("other malformed documents are refused, never crash", arguments: [
        "{", "}", "[", "[1,]", #"{"a":1,}"#, "{a:1}", "{'a':1}", #"{"a" 1}"#, #"{"a":}"#, "01", "+1",
        ".5", "1.", "tru", "nul", #""\x""#, #""\u12""#, #""\ud800""#, #""\u0000""#, #"{"\u0000":1}"#,
        "\"a\nb\"", "\"unterminated", "99999999999999999999", "-99999999999999999999",
        String(repeating: "[", count: 100_000), String(repeating: "{\"a\":", count: 10_000),
    ])
    func malformed(text: String) {
        #expect(syntaxError(text) != nil, "\(text.prefix(40))")
    }

    @Test("nesting deeper than a realistic document but within Jansson's limit is fine")
    func moderateNesting() throws {
        let text = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        var value = try json(text)
        var depth = 0
        while case .array(let items) = value, let first = items.first {
            value = first
            depth += 1
        }
        #expect(depth == 499)
        #expect(value == .array([]))
    }

    @Test("errors carry Jansson's line and column")
    func positions() throws {
        let trailingComma = try #require(syntaxError("{\n\"a\": 1,\n}"))
        #expect(trailingComma.line == 3)
        let garbage = try #require(syntaxError("{\"a\":1} x"))
        #expect(garbage.line == 1)
        #expect(garbage.column > 1)
        #expect(garbage.message.contains("end of file expected"))
        #expect(!garbage.message.isEmpty)
    }
}

@Suite("JSON: accessors")
struct JSONAccessorTests {
    @Test("typeName reads as English in messages")
    func typeNames() {
        #expect(JSONValue.null.typeName == "null")
        #expect(JSONValue.bool(true).typeName == "a boolean")
        #expect(JSONValue.int(1).typeName == "a number")
        #expect(JSONValue.double(1.5).typeName == "a number")
        #expect(JSONValue.string("").typeName == "a string")
        #expect(JSONValue.array([]).typeName == "an array")
        #expect(JSONValue.object([:]).typeName == "an object")
    }

    @Test("typed views are nil for other types")
    func typedViews() {
        #expect(JSONValue.object(["a": .null]).objectValue == ["a": .null])
        #expect(JSONValue.array([]).objectValue == nil)
        #expect(JSONValue.string("s").stringValue == "s")
        #expect(JSONValue.int(1).stringValue == nil)
        #expect(JSONValue.int(7).numberValue == 7)
        #expect(JSONValue.double(2.5).numberValue == 2.5)
        #expect(JSONValue.string("7").numberValue == nil)
        #expect(JSONValue.bool(true).numberValue == nil)
    }
}

/// The byte-level helpers of the hot paths against the plain definitions they replace.
@Suite("byte-level helpers")
struct ByteLevelHelperTests {
    /// Scalars around every boundary the helpers care about: C0 controls, DEL, the C1 controls
    /// (C2 80–C2 9F in UTF-8), their neighbours (C2 A0, C3 80), quotes, backslashes, and
    /// three- and four-byte characters.
    static let pool: [Unicode.Scalar] = [
        "a", "Z", "0", " ", "\"", "\\", "/", "\u{00}", "\u{08}", "\u{09}", "\u{0A}", "\u{0D}", "\u{1F}",
        "\u{7E}", "\u{7F}", "\u{80}", "\u{85}", "\u{9F}", "\u{A0}", "\u{C2}", "\u{C0}", "é", "\u{212A}",
        "\u{2028}", "😀",
    ]

    static func randomStrings(count: Int, seed: UInt64) -> [String] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in
            let length = Int(random.next() % 12)
            var text = ""
            for _ in 0..<length { text += String(Character(pool[Int(random.next() % UInt64(pool.count))])) }
            return text
        }
    }

    /// Short strings and, joined three to seven at a time, long ones: the checks read eight
    /// bytes at a time (`ByteScan`), so a long string has words and a tail.
    static func shortAndLongStrings(seed: UInt64) -> [String] {
        let short = randomStrings(count: 5_000, seed: seed)
        var random = SplitMix64(seed: seed &+ 1)
        let long = (0..<3_000).map { _ in (0..<(3 + Int(random.next() % 5))).map { _ in short[Int(random.next() % 5_000)] }.joined() }
        return short + long
    }

    @Test("needsNoEscape is the byte-by-byte definition, for short and long strings")
    func noEscape() {
        for text in ByteLevelHelperTests.shortAndLongStrings(seed: 17) {
            var text = text
            text.withUTF8 { bytes in
                let reference = !bytes.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
                #expect(JSONValue.needsNoEscape(bytes) == reference, "\(Array(bytes))")
            }
        }
    }

    @Test("containsControlCharacter reads the bytes as the scalar definition reads the text")
    func controlCharacters() {
        for text in ByteLevelHelperTests.shortAndLongStrings(seed: 11) {
            let reference = text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }
            #expect(EventDecoder.containsControlCharacter(text) == reference, "\(Array(text.utf8))")
        }
        #expect(EventDecoder.containsControlCharacter("caf\u{E9}") == false)
        #expect(EventDecoder.containsControlCharacter("x\u{85}") == true)
        #expect(EventDecoder.containsControlCharacter("\u{A0}\u{C2}") == false)
    }

    @Test("sameName is byte equality, for small, long and look-alike names")
    func sameNameIsByteEquality() {
        let short = ByteLevelHelperTests.randomStrings(count: 300, seed: 13)
        // Past the 15 bytes a small string holds inline, and with a shared prefix.
        let long = short.map { "Apple Watch of someone with a long name " + $0 }
        for names in [short, long] {
            for (a, b) in Array(zip(names, names.shuffled())) + Array(zip(names, names)) {
                #expect(sameName(a, b) == Array(a.utf8).elementsEqual(Array(b.utf8)), "\(Array(a.utf8)) \(Array(b.utf8))")
            }
            // The same bytes in storage of their own (a long name's words then differ: the
            // comparison of its bytes decides), and a name with itself (the words decide).
            for a in names {
                let copy = String(decoding: Array(a.utf8), as: UTF8.self)
                #expect(sameName(a, copy) && sameName(copy, a) && sameName(a, a), "\(Array(a.utf8))")
            }
        }
        #expect(sameName("Caf\u{E9}", "Cafe\u{301}") == false)  // equal as Strings
        #expect(sameName("", "") == true)
        #expect(sameName("", "a") == false)
        #expect(sameName(String(repeating: "x", count: 40) + "y", String(repeating: "x", count: 40) + "z") == false)
    }

    @Test("writeString round-trips through Jansson and escapes exactly what must be escaped")
    func writeString() throws {
        for text in ByteLevelHelperTests.randomStrings(count: 5_000, seed: 12) {
            var out: [UInt8] = []
            JSONValue.writeString(text, to: &out)
            // The escapes JSON requires, written out the long way.
            var reference = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": reference += "\\\""
                case "\\": reference += "\\\\"
                case "\n": reference += "\\n"
                case "\r": reference += "\\r"
                case "\t": reference += "\\t"
                case _ where scalar.value < 0x20: reference += String(format: "\\u%04x", scalar.value)
                default: reference.unicodeScalars.append(scalar)
                }
            }
            reference += "\""
            #expect(String(decoding: out, as: UTF8.self) == reference)
            // Jansson reads it back as the same text (it refuses \u0000 by policy).
            if !text.contains("\u{0}") {
                #expect(try JSONValue.parse(Array("[".utf8) + out + Array("]".utf8)) == .array([.string(text)]))
            }
        }
        var out: [UInt8] = []
        JSONValue.writeString("a\"b\\c\n\u{01}", to: &out)
        #expect(String(decoding: out, as: UTF8.self) == #""a\"b\\c\n\u0001""#)
    }

    @Test("writeLowercased writes the UUID's canonical text in lower case")
    func lowercasedUUID() {
        var random = SplitMix64(seed: 13)
        for _ in 0..<1_000 {
            let bytes = (0..<16).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let id = UUID(bytes: bytes)
            var out: [UInt8] = []
            id.writeLowercased(to: &out)
            #expect(String(decoding: out, as: UTF8.self) == id.uuidString.lowercased())
            #expect(id.lowercased == id.uuidString.lowercased())
        }
    }
}

@Suite("byte scans eight bytes at a time")
struct ByteScanTests {
    /// Byte strings of every length up to 40, mostly printable ASCII, with the bytes the scans
    /// look for (and their neighbours) placed at random: each word-at-a-time answer is held to
    /// a byte-by-byte one.
    @Test("needsNoEscape and containsControlCharacter answer as byte-by-byte scans do")
    func againstBytewise() {
        var random = SplitMix64(seed: 2026_12_02)
        let special: [UInt8] = [0x00, 0x01, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7E, 0x7F, 0x80,
                                0x9F, 0xA0, 0xC1, 0xC2, 0xC3, 0xE2, 0xFF]
        var escapes = 0, controls = 0
        for _ in 0..<20_000 {
            let count = Int(random.next() % 41)
            var bytes = (0..<count).map { _ in UInt8(0x20 + random.next() % 0x5F) }
            for _ in 0..<Int(random.next() % 3) where count > 0 {
                bytes[Int(random.next() % UInt64(count))] = special[Int(random.next() % UInt64(special.count))]
            }
            let expectedNoEscape = !bytes.contains { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }
            var expectedControl = false
            for index in bytes.indices {
                if bytes[index] < 0x20 || bytes[index] == 0x7F { expectedControl = true }
                if bytes[index] == 0xC2, index + 1 < bytes.count, (0x80...0x9F).contains(bytes[index + 1]) { expectedControl = true }
            }
            bytes.withUnsafeBufferPointer { buffer in
                #expect(JSONValue.needsNoEscape(buffer) == expectedNoEscape, "\(bytes)")
            }
            // As a string: its bytes when they are UTF-8, else what repairing them gives.
            let text = String(decoding: bytes, as: UTF8.self)
            var textControl = false
            let utf8 = Array(text.utf8)
            for index in utf8.indices {
                if utf8[index] < 0x20 || utf8[index] == 0x7F { textControl = true }
                if utf8[index] == 0xC2, index + 1 < utf8.count, (0x80...0x9F).contains(utf8[index + 1]) { textControl = true }
            }
            #expect(EventDecoder.containsControlCharacter(text) == textControl, "\(utf8)")
            if !expectedNoEscape { escapes += 1 }
            if expectedControl { controls += 1 }
        }
        // Both answers come out both ways often, so the comparison is not vacuous.
        #expect(escapes > 2_000 && escapes < 18_000 && controls > 2_000 && controls < 18_000, "\(escapes) \(controls)")
    }
}
