import Foundation
@testable import LedgerCore
import Testing

/// `EventDecoder.directSample` (Jansson's tree → prepared event) must agree with the general
/// path (`JSONValue` → `EventDecoder.decode` → `PreparedEvent`) wherever it answers, and leave
/// everything else to it.
@Suite("direct sample decoding")
struct DirectDecodeTests {
    /// A random sample-like object as JSON text: mostly valid, often slightly off, in random
    /// key order and spacing, so both paths see exactly the same bytes.
    static func randomObject(_ random: inout SeededGenerator) -> String {
        func pick<T>(_ options: [T]) -> T { options[Int(random.next() % UInt64(options.count))] }
        func chance(_ percent: UInt64) -> Bool { random.next() % 100 < percent }
        func quoted(_ text: String) -> String { JSONValue.string(text).canonicalString }
        // Half the objects are valid samples of varied shapes; the other half get odd values.
        let wild = chance(50)
        /// One of `valid`, or in a wild object now and then one of `odd`.
        func value(_ valid: [String], _ odd: [String]) -> String {
            wild && chance(25) ? pick(odd) : pick(valid)
        }
        func present(_ percent: UInt64) -> Bool { wild ? chance(percent) : true }
        var members: [(String, String)] = []
        members.append(("kind", value([quoted("sample")], [quoted("grant"), "1", quoted("Sample")])))
        let type = pick(["steps", "distance", "flights", "active-energy", "HKQuantityTypeIdentifierStepCount",
                         "HKQuantityTypeIdentifierDistanceWalkingRunning", "HKQuantityTypeIdentifierActiveEnergyBurned"])
        if present(90) { members.append(("type", value([quoted(type)], [quoted("heart"), "3"]))) }
        if present(90) { members.append(("value", value(["0", "-0", "-0.0", "12", "1121", "0.5", "1e3", "2.5e-7", "9007199254740993",
                                                         "1.0", "17.25", "1e15", "999999999999999"],
                                                        ["-3", quoted("12"), "null", "1e308", "123456789012345678", "1000000000000001"]))) }
        let units: [String]
        switch type {
        case "steps", "flights", "HKQuantityTypeIdentifierStepCount": units = ["count"]
        case "distance", "HKQuantityTypeIdentifierDistanceWalkingRunning": units = ["m", "km", "mi", "ft", "yd"]
        default: units = ["kcal", "Cal", "kJ"]
        }
        let unitNeeded = !units.contains("count")
        if unitNeeded ? present(95) : chance(50) {
            members.append(("unit", value(units.map(quoted), [quoted(""), quoted("furlong"), quoted("count"), "1"])))
        }
        let start = pick(["2026-11-29T08:00:00+08:00", "2026-11-29T00:00:00Z", "2026-11-29T08:00:00.123456+01:00",
                          "2026-03-29T01:30:00+00:00", "1969-12-31T23:59:59Z"])
        if present(95) { members.append(("start", value([quoted(start)], [quoted("2026-02-30T00:00:00Z"), quoted("2026-11-29 08:00:00"), "20261129"]))) }
        if present(95) { members.append(("end", value([quoted("2026-11-29T23:10:00+08:00"), quoted(start)],
                                                      [quoted("2026-11-29T07:59:00+08:00"), quoted("1969-01-01T00:00:00Z"), quoted("not a time"),
                                                       quoted("2027-12-01T00:00:00Z")]))) }
        if chance(40) { members.append(("zone", value([quoted("Europe/Paris"), quoted("UTC"), quoted("+05:30"), quoted("Asia/Kolkata")],
                                                      [quoted("Mars/Olympus"), quoted("EST"), "0"]))) }
        if present(95) {
            if chance(40) {
                members.append(("source", value([quoted("iPhone"), quoted("Ann's Watch \"2\" \\ ⌚︎")], [quoted(""), quoted("tab\there"), "7"])))
            } else {
                var inner: [String] = []
                if present(95) { inner.append("\"name\":" + value([quoted("iPhone"), quoted("Watch ⌚︎")], [quoted(""), "null"])) }
                if chance(40) { inner.append("\"bundle\":" + quoted("com.apple.health")) }
                if chance(40) { inner.append("\"device\":" + value([quoted("iPhone15,2"), quoted("Watch7,1")], [quoted("bad\u{7}")])) }
                if chance(30) { inner.append("\"version\":" + value([quoted("17.1")], ["17"])) }
                if wild && chance(10) { inner.append("\"extra\":" + quoted("kept")) }
                inner.shuffle(using: &random)
                members.append(("source", "{" + inner.joined(separator: ",") + "}"))
            }
        }
        if chance(20) {
            members.append(("syncId", value([quoted("walk-1")], [quoted(""), "5"])))
            if present(90) { members.append(("syncVersion", value(["0", "3"], ["-1", "2.0", quoted("1")]))) }
        } else if wild && chance(5) {
            members.append(("syncVersion", "1"))
        }
        if chance(50) {
            members.append(("id", value([quoted("9EC39033-D074-8F95-A509-22154D4A3D92"), quoted("9ec39033-d074-8f95-a509-22154d4a3d92")],
                                        [quoted("not-a-uuid"), "12"])))
        }
        if chance(30) { members.append(("user", value([quoted("ann"), quoted("Émile")], [quoted(""), quoted("a\u{85}b"), "null"]))) }
        if chance(5) { members.append(("metadata", "{\"HKWasUserEntered\":1}")) }
        if chance(5) { members.append(("note", quoted("an unknown field is kept"))) }
        members.shuffle(using: &random)
        let space = chance(30) ? " " : ""
        return "{" + space + members.map { "\"\($0.0)\":\(space)\($0.1)" }.joined(separator: "," + space) + space + "}"
    }

    @Test("agrees with the general path on 20,000 generated objects", arguments: [UInt64(1), 2, 3, 4])
    func agrees(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        var direct = 0, general = 0, refused = 0
        for _ in 0..<5_000 {
            let text = Self.randomObject(&random)
            let bytes = Array(text.utf8)
            let (fast, value) = try JSONValue.withTree(bytes) { tree in (EventDecoder.directSample(tree), JSONValue.convert(tree)) }
            let reference = Result { () throws(FieldError) in
                PreparedEvent(try EventDecoder.decode(value, makeRandomID: { UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }))
            }
            switch (fast, reference) {
            case (let fast?, .success(let reference)):
                direct += 1
                #expect(fast.id == reference.id, "\(text)")
                #expect(fast.body == reference.body, "\(text)\n\(String(decoding: fast.body, as: UTF8.self))\n\(String(decoding: reference.body, as: UTF8.self))")
                #expect(fast.typed == reference.typed, "\(text)")
            case (_?, .failure(let error)):
                Issue.record("the direct path accepted what the general path refuses (\(error.message)): \(text)")
            case (nil, .success):
                general += 1
            case (nil, .failure):
                refused += 1
            }
        }
        // Each kind of outcome happens, so the comparison above is not vacuous.
        #expect(direct > 1_000, "direct \(direct), general \(general), refused \(refused)")
        #expect(general > 100, "direct \(direct), general \(general), refused \(refused)")
        #expect(refused > 500, "direct \(direct), general \(general), refused \(refused)")
    }

    @Test("a zone spelled with a look-alike character is refused on both paths, even after the real one")
    func lookAlikeZone() throws {
        let real = #"{"kind":"sample","type":"steps","value":1,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:01:00Z","source":"x","zone":"Asia/Kolkata"}"#
        let kelvin = real.replacingOccurrences(of: "Kolkata", with: "\u{212A}olkata")
        #expect(Zone.isValid("Asia/Kolkata"))
        #expect(!Zone.isValid("Asia/\u{212A}olkata"))
        #expect(Zone("Asia/\u{212A}olkata") == nil)
        for prepare in [{ try EventInput.prepare($0) }, { try EventInput.decode($0).map { ($0.0, PreparedEvent($0.1)) } }] as [([UInt8]) throws -> [(InputLocation, PreparedEvent)]] {
            #expect(throws: InputError.self) { try prepare(Array((real + "\n" + kelvin).utf8)) }
            #expect(try prepare(Array((real + "\n" + real).utf8)).count == 2)
        }
    }

    @Test("forEachPrepared without digests: the direct path's samples come without one, and computing it gives the eager digest")
    func deferredDigests() throws {
        let lines = [
            #"{"kind":"sample","id":"9e797660-1cf9-4857-8722-526d474a60c7","type":"steps","value":12,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:01:00Z","source":"x"}"#,
            #"{"kind":"sample","type":"distance","value":1.5,"unit":"km","start":"2026-11-29T08:00:00+01:00","end":"2026-11-29T08:05:00+01:00","source":{"name":"Watch","device":"Watch6,1"},"zone":"Europe/Paris"}"#,
            // Not the direct path's (metadata): prepared in full, digest included.
            #"{"kind":"sample","type":"steps","value":3,"start":"2026-11-29T09:00:00Z","end":"2026-11-29T09:01:00Z","source":"x","metadata":{"k":"v"}}"#,
            #"{"kind":"grant","user":"ann","client":"coach","read":["steps"],"share":[]}"#,
        ]
        let bytes = Array(lines.joined(separator: "\n").utf8)
        let fixedID = { UUID(uuid: (1, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0)) }
        var eager: [PreparedEvent] = [], left: [PreparedEvent] = []
        try EventInput.forEachPrepared(bytes, makeRandomID: fixedID) { eager.append($1) }
        try EventInput.forEachPrepared(bytes, makeRandomID: fixedID, digesting: false) { left.append($1) }
        #expect(eager.count == 4 && left.count == 4)
        #expect(eager.allSatisfy { $0.contentDigest != nil })
        #expect(left.map { $0.contentDigest == nil } == [true, true, false, false])
        for (index, var event) in left.enumerated() {
            #expect(event.body == eager[index].body && event.typed == eager[index].typed)
            event.computeContentDigest()
            #expect(event.contentDigest == eager[index].contentDigest)
        }
    }

    @Test("NDJSON through forEachPrepared: same events and the same first error as forEach")
    func sameStream() throws {
        var random = SeededGenerator(seed: 99)
        for _ in 0..<200 {
            let lines = (0..<Int(random.next() % 6 + 1)).map { _ in Self.randomObject(&random) }
            let bytes = Array(lines.joined(separator: "\n").utf8)
            struct Failure: Error, Equatable { var text: String }
            func collect(_ run: (([UInt8]) throws -> [(InputLocation, PreparedEvent)])) -> Result<[(InputLocation, PreparedEvent)], Failure> {
                do { return .success(try run(bytes)) } catch { return .failure(Failure(text: "\(error)")) }
            }
            let ids = (0..<64).map { UUID(uuid: (UInt8($0), 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0)) }
            let fast = collect { bytes in
                var next = 0
                return try EventInput.prepare(bytes, makeRandomID: { defer { next += 1 }; return ids[next] })
            }
            let general = collect { bytes in
                var next = 0
                return try EventInput.decode(bytes, makeRandomID: { defer { next += 1 }; return ids[next] }).map { ($0.0, PreparedEvent($0.1)) }
            }
            switch (fast, general) {
            case (.success(let a), .success(let b)):
                #expect(a.map { $0.0 } == b.map { $0.0 })
                #expect(a.map { $0.1.body } == b.map { $0.1.body })
                #expect(a.map { $0.1.typed } == b.map { $0.1.typed })
            case (.failure(let a), .failure(let b)):
                #expect(a == b)
            default:
                Issue.record("\(fast) vs \(general) for\n\(lines.joined(separator: "\n"))")
            }
        }
    }
}

/// An object on one line is read as NDJSON of one line (`EventInput.shape`), what an HTTP
/// client POSTs: it must give what the same object read as a single document gives.
@Suite("one-line objects")
struct OneLineObjectTests {
    @Test("an object on one line gives the event, or the error, it gives spread over lines", arguments: [UInt64(5), 6])
    func sameAsSpread(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        var events = 0, errors = 0
        for _ in 0..<2_000 {
            let text = DirectDecodeTests.randomObject(&random)
            // The same tokens with line feeds inside the braces: read as one document.
            let spread = "{\n" + text.dropFirst().dropLast() + "\n}"
            func prepared(_ text: String) -> Result<[(InputLocation, PreparedEvent)], InputError> {
                Result { () throws(InputError) in
                    try EventInput.prepare(Array(text.utf8), makeRandomID: { UUID(uuid: (7, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0)) })
                }
            }
            switch (prepared(text), prepared(spread)) {
            case (.success(let a), .success(let b)):
                events += 1
                #expect(a.map(\.0) == b.map(\.0) && a.map(\.0) == [.line(1)], "\(text)")
                #expect(a.map(\.1.id) == b.map(\.1.id) && a.map(\.1.body) == b.map(\.1.body) && a.map(\.1.typed) == b.map(\.1.typed), "\(text)")
            case (.failure(let a), .failure(let b)):
                errors += 1
                #expect(a.message == b.message && a.field == b.field, "\(text)")
                // Spread over lines, a field's problem is named at that field's line.
                let fieldLine = b.field.flatMap { EventInput.line(ofField: $0, in: Array(spread.utf8)) }
                #expect(b.location == (fieldLine.map { .line($0) } ?? a.location), "\(text)")
            case (let a, let b):
                Issue.record("one line: \(a); spread: \(b); for \(text)")
            }
        }
        #expect(events > 500 && errors > 500, "events \(events), errors \(errors)")
    }

    @Test("white space and blank lines around a one-line object keep its line number")
    func surrounded() throws {
        let object = #"{"kind":"sample","type":"steps","value":-1,"start":"2026-11-29T08:00:00Z","end":"2026-11-29T08:01:00Z","source":"x"}"#
        for (text, line) in [("\n\n  " + object + "  \r\n\n", 3), (" \t" + object, 1), (object + "\n", 1)] {
            #expect(throws: InputError.self) { try EventInput.prepare(Array(text.utf8)) }
            do {
                _ = try EventInput.prepare(Array(text.utf8))
            } catch {
                #expect(error.description == "line \(line): 'value' must not be negative, got -1")
            }
        }
    }
}
