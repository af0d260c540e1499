import Foundation
import Testing
@testable import LedgerCore

extension Event.Payload {
    var asSample: Sample? {
        if case .sample(let value) = self { return value }
        return nil
    }

    var asCorrection: Correction? {
        if case .correction(let value) = self { return value }
        return nil
    }

    var asGrant: AccessChange? {
        if case .grant(let value) = self { return value }
        return nil
    }

    var asRevoke: AccessChange? {
        if case .revoke(let value) = self { return value }
        return nil
    }

    var asProfile: Profile? {
        if case .profile(let value) = self { return value }
        return nil
    }
}

private let fixedID = UUID(uuidString: "00000000-0000-4000-8000-00000000abcd")!

/// 2026-11-29T00:00:00Z in microseconds.
private let nov29: Int64 = 1_795_910_400_000_000

private func decode(_ value: JSONValue) throws(FieldError) -> Event {
    try EventDecoder.decode(value, makeRandomID: { fixedID })
}

private func string(_ count: Int, _ character: Character = "x") -> JSONValue {
    .string(String(repeating: character, count: count))
}

@Suite("EventDecoder: envelope")
struct EventEnvelopeTests {
    @Test("the event must be an object")
    func notAnObject() {
        #expect(fieldError(.array([])) == FieldError(nil, "expected a JSON object, got an array"))
        #expect(fieldError(.string("sample")) == FieldError(nil, "expected a JSON object, got a string"))
        #expect(fieldError(.null) == FieldError(nil, "expected a JSON object, got null"))
    }

    @Test("'kind' is required, a string, and one of the five kinds")
    func kind() throws {
        #expect(fieldError(Fixture.sample(["kind": nil])) == FieldError("kind", "'kind' is required"))
        #expect(fieldError(Fixture.sample(["kind": .int(1)])) == FieldError("kind", "'kind' must be a string, got a number"))
        let unknown = try #require(fieldError(Fixture.sample(["kind": .string("sampel")])))
        #expect(unknown.field == "kind")
        #expect(unknown.message.hasPrefix("unknown kind 'sampel'"))
        #expect(fieldError(Fixture.sample(["kind": .string("Sample")]))?.field == "kind")
        #expect(fieldError(Fixture.sample(["kind": .string("")]))?.field == "kind")
    }

    @Test("an unknown kind that is huge or has control characters gives a one-line message")
    func clippedKind() throws {
        let error = try #require(fieldError(Fixture.sample(["kind": .string("bad\nkind" + String(repeating: "k", count: 5_000))])))
        #expect(error.field == "kind")
        #expect(!error.message.contains("\n"))
        #expect(error.message.count < 200)
    }

    @Test("a given 'id' must be a UUID string", arguments: [
        JSONValue.string("not-a-uuid"), .string(""), .string("6ba7b8109dad11d180b400c04fd430c8"),
        .string("6ba7b810-9dad-11d1-80b4-00c04fd430c8x"), .int(42), .null, .object([:]),
    ])
    func badID(id: JSONValue) {
        #expect(fieldError(Fixture.sample(["id": id]))?.field == "id")
        #expect(fieldError(Fixture.grant(["id": id]))?.field == "id")
    }

    @Test("exact messages for a bad 'id'")
    func badIDMessages() {
        #expect(fieldError(Fixture.sample(["id": .string("nope")])) == FieldError("id", "'id' is not a UUID: 'nope'"))
        #expect(fieldError(Fixture.sample(["id": .int(7)])) == FieldError("id", "'id' must be a UUID string, got a number"))
    }

    @Test("a given 'id' is used as is and stored in lower case")
    func givenID() throws {
        let text = "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"
        let event = try decode(Fixture.sample(["id": .string(text)]))
        #expect(event.id == UUID(uuidString: text))
        #expect(event.document["id"] == .string(text.lowercased()))
        #expect(event.kind == .sample)
    }
}

@Suite("EventDecoder: sample")
struct SampleDecodingTests {
    @Test("a minimal sample decodes with defaults filled in")
    func minimal() throws {
        let event = try decode(Fixture.sample())
        let sample = try #require(event.payload.asSample)
        #expect(sample == Sample(user: "default", type: .steps, value: 100, unit: "count",
                                 start: Timestamp(microseconds: nov29),
                                 end: Timestamp(microseconds: nov29 + 600_000_000),
                                 source: SampleSource(name: "iPhone")))
        #expect(event.user == "default")
        #expect(event.document["user"] == .string("default"))
        #expect(event.document["unit"] == .string("count"))
        #expect(event.document["id"] == .string(event.id.lowercased))
        // The original timestamps stay as given.
        #expect(event.document["start"] == .string("2026-11-29T08:00:00+08:00"))
    }

    @Test("HealthKit identifiers are normalized to the ledger's type names", arguments: [
        ("HKQuantityTypeIdentifierStepCount", QuantityType.steps, nil),
        ("HKQuantityTypeIdentifierDistanceWalkingRunning", .distance, "km"),
        ("HKQuantityTypeIdentifierFlightsClimbed", .flights, nil),
        ("HKQuantityTypeIdentifierActiveEnergyBurned", .activeEnergy, "kcal"),
        ("steps", .steps, "count"),
        ("distance", .distance, "m"),
        ("flights", .flights, "count"),
        ("active-energy", .activeEnergy, "kJ"),
    ] as [(String, QuantityType, String?)])
    func typeAliases(name: String, type: QuantityType, unit: String?) throws {
        let event = try decode(Fixture.sample(["type": .string(name), "unit": unit.map { .string($0) }]))
        let sample = try #require(event.payload.asSample)
        #expect(sample.type == type)
        #expect(event.document["type"] == .string(type.rawValue))
    }

    @Test("'type' is required and must be known")
    func badType() throws {
        #expect(fieldError(Fixture.sample(["type": nil])) == FieldError("type", "'type' is required"))
        #expect(fieldError(Fixture.sample(["type": .int(1)]))?.field == "type")
        let unknown = try #require(fieldError(Fixture.sample(["type": .string("HKQuantityTypeIdentifierHeartRate")])))
        #expect(unknown.field == "type")
        #expect(unknown.message.hasPrefix("unknown type 'HKQuantityTypeIdentifierHeartRate'"))
        #expect(fieldError(Fixture.sample(["type": .string("Steps")]))?.field == "type")
        #expect(fieldError(Fixture.sample(["type": string(129)]))?.field == "type")
    }

    @Test("'value' is required, a number, finite and not negative")
    func badValue() {
        #expect(fieldError(Fixture.sample(["value": nil])) == FieldError("value", "'value' is required"))
        #expect(fieldError(Fixture.sample(["value": .int(-1)])) == FieldError("value", "'value' must not be negative, got -1"))
        #expect(fieldError(Fixture.sample(["value": .double(-0.5)])) == FieldError("value", "'value' must not be negative, got -0.5"))
        // The value is quoted in its canonical form: -2.0 and -2 read the same.
        #expect(fieldError(Fixture.sample(["value": .double(-2.0)])) == FieldError("value", "'value' must not be negative, got -2"))
        #expect(fieldError(Fixture.sample(["value": .string("100")])) == FieldError("value", "'value' must be a number, got a string"))
        #expect(fieldError(Fixture.sample(["value": .null]))?.field == "value")
        #expect(fieldError(Fixture.sample(["value": .bool(true)]))?.field == "value")
        #expect(fieldError(Fixture.sample(["value": .array([.int(1)])]))?.field == "value")
        // JSON input cannot carry these, but a value built in code can.
        #expect(fieldError(Fixture.sample(["value": .double(.nan)])) == FieldError("value", "'value' must be finite"))
        #expect(fieldError(Fixture.sample(["value": .double(.infinity)])) == FieldError("value", "'value' must be finite"))
        #expect(fieldError(Fixture.sample(["value": .double(-.infinity)])) == FieldError("value", "'value' must be finite"))
    }

    @Test("a value over 1e15 once converted, or a sample over 366 days, is refused")
    func outOfRange() throws {
        // At the limit, in the canonical unit and converted.
        #expect(try decode(Fixture.sample(["value": .double(1e15)])).payload.asSample?.value == 1e15)
        #expect(fieldError(Fixture.sample(["value": .double(1.5e15)]))
            == FieldError("value", "'value' is too large: at most 1e15 count once converted, got 1500000000000000 count"))
        // 1e308 miles overflow to infinity in metres: the projections could not print it.
        #expect(fieldError(Fixture.sample(["type": .string("distance"), "unit": .string("mi"), "value": .double(1e308)]))?.field == "value")
        #expect(fieldError(Fixture.sample(["type": .string("distance"), "unit": .string("km"), "value": .double(2e12)]))?.field == "value")
        #expect(try decode(Fixture.sample(["type": .string("distance"), "unit": .string("ft"), "value": .double(3e15)])).payload.asSample != nil)
        // 366 days is the longest.
        #expect(try decode(Fixture.sample(["end": .string("2027-11-30T08:00:00+08:00")])).payload.asSample != nil)
        #expect(fieldError(Fixture.sample(["end": .string("2027-11-30T08:00:00.000001+08:00")]))
            == FieldError("end", "'end' is more than 366 days after 'start'"))
        #expect(fieldError(Fixture.sample(["start": .string("0001-01-01T00:00:00Z"), "end": .string("9999-12-31T23:59:59Z")]))?.field == "end")
    }

    @Test("zero and fractional values are fine")
    func goodValues() throws {
        #expect(try decode(Fixture.sample(["value": .int(0)])).payload.asSample?.value == 0)
        #expect(try decode(Fixture.sample(["value": .double(12.5)])).payload.asSample?.value == 12.5)
    }

    @Test("steps and flights default to 'count'")
    func unitDefaults() throws {
        let steps = try decode(Fixture.sample())
        #expect(steps.payload.asSample?.unit == "count")
        let flights = try decode(Fixture.sample(["type": .string("flights")]))
        #expect(flights.payload.asSample?.unit == "count")
        #expect(flights.document["unit"] == .string("count"))
    }

    @Test("distance and energy need a unit")
    func unitRequired() {
        #expect(fieldError(Fixture.sample(["type": .string("distance")]))
            == FieldError("unit", "'unit' is required for distance (one of m, km, mi, ft, yd)"))
        #expect(fieldError(Fixture.sample(["type": .string("active-energy")]))?.field == "unit")
        #expect(fieldError(Fixture.sample(["type": .string("HKQuantityTypeIdentifierDistanceWalkingRunning")]))?.field == "unit")
    }

    @Test("a unit must fit the type", arguments: [
        ("steps", "km"), ("steps", "m"), ("flights", "kcal"), ("distance", "count"), ("distance", "kcal"),
        ("distance", "KM"), ("distance", "meters"), ("active-energy", "m"), ("active-energy", "cal"),
        ("active-energy", "kj"), ("steps", ""),
    ])
    func unitNotFitting(type: String, unit: String) {
        #expect(fieldError(Fixture.sample(["type": .string(type), "unit": .string(unit)]))?.field == "unit", "\(type) in \(unit)")
    }

    @Test("exact message for a unit that does not fit")
    func unitMessage() {
        #expect(fieldError(Fixture.sample(["unit": .string("km")]))
            == FieldError("unit", "unit 'km' does not fit type 'steps' (expected count)"))
        #expect(fieldError(Fixture.sample(["unit": .int(3)])) == FieldError("unit", "'unit' must be a string, got a number"))
        #expect(fieldError(Fixture.sample(["unit": string(33)]))?.field == "unit")
    }

    @Test("every accepted unit is accepted and kept as given", arguments: [
        ("steps", "count"), ("flights", "count"), ("distance", "m"), ("distance", "km"), ("distance", "mi"),
        ("distance", "ft"), ("distance", "yd"), ("active-energy", "kcal"), ("active-energy", "Cal"),
        ("active-energy", "kJ"),
    ])
    func unitsAccepted(type: String, unit: String) throws {
        let event = try decode(Fixture.sample(["type": .string(type), "unit": .string(unit)]))
        #expect(event.payload.asSample?.unit == unit)
        #expect(event.document["unit"] == .string(unit))
    }

    @Test("'end' may not precede 'start'")
    func endBeforeStart() {
        #expect(fieldError(Fixture.sample(["end": .string("2026-11-29T07:59:59.999999+08:00")]))
            == FieldError("end", "'end' precedes 'start'"))
        // Instants are compared, not local clock readings: 01:00+02:00 is 23:00Z the day before.
        #expect(fieldError(Fixture.sample(["end": .string("2026-11-29T01:00:00+02:00")]))
            == FieldError("end", "'end' precedes 'start'"))
    }

    @Test("an end that reads earlier locally but is later as an instant is fine")
    func endLaterAsInstant() throws {
        let event = try decode(Fixture.sample(["end": .string("2026-11-28T23:30:00-01:00")]))
        #expect(event.payload.asSample?.end == Timestamp(microseconds: nov29 + 1_800_000_000))
    }

    @Test("a zero-length sample is allowed")
    func zeroLength() throws {
        let event = try decode(Fixture.sample(["end": .string("2026-11-29T00:00:00Z")]))
        let sample = try #require(event.payload.asSample)
        #expect(sample.start == sample.end)
    }

    @Test("'start' and 'end' are required RFC 3339 timestamps with an offset", arguments: ["start", "end"])
    func badTimestamps(field: String) throws {
        #expect(fieldError(Fixture.sample([field: nil])) == FieldError(field, "'\(field)' is required"))
        #expect(fieldError(Fixture.sample([field: .int(1_795_910_400)]))?.field == field)
        let noOffset = try #require(fieldError(Fixture.sample([field: .string("2026-11-29T08:00:00")])))
        #expect(noOffset.field == field)
        #expect(noOffset.message.hasPrefix("'\(field)' is not an RFC 3339 timestamp with an offset"))
        let impossible = try #require(fieldError(Fixture.sample([field: .string("2026-02-30T08:00:00Z")])))
        #expect(impossible.field == field)
        #expect(impossible.message.hasPrefix("'\(field)' is a date or time that does not exist"))
        #expect(fieldError(Fixture.sample([field: .string("2025-02-29T08:00:00Z")]))?.field == field)
        #expect(fieldError(Fixture.sample([field: .string("2026-11-29T25:00:00Z")]))?.field == field)
    }

    @Test("'zone' accepts IANA names and ±HH:MM", arguments: [
        "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Lord_Howe", "UTC",
        "+05:30", "-03:00", "+00:00", "-09:30", "+14:00",
    ])
    func zoneAccepted(zone: String) throws {
        let event = try decode(Fixture.sample(["zone": .string(zone)]))
        #expect(event.payload.asSample?.zone == zone)
        #expect(event.document["zone"] == .string(zone))
    }

    @Test("'zone' accepts canonical IANA names that Foundation knows but does not list", arguments: ["Asia/Kolkata", "Etc/UTC"])
    func zoneCanonicalButUnlisted(zone: String) throws {
        // On Linux TimeZone.knownTimeZoneIdentifiers omits Asia/Kolkata and every Etc/ zone,
        // although TimeZone(identifier:) resolves them; Zone accepts any resolvable IANA name.
        let event = try decode(Fixture.sample(["zone": .string(zone)]))
        #expect(event.payload.asSample?.zone == zone)
    }

    @Test("'zone' refuses anything else", arguments: [
        JSONValue.string("Mars/Olympus_Mons"), .string("europe/paris"), .string("Europe/Paris "),
        .string(""), .string("+25:00"), .string("+05:60"), .string("0530"), .string("+5:30"),
        .string("05:30"), .string("+05:30:00"), .string("local"), .string("Europe/"),
        .string(String(repeating: "A", count: 65)), .int(2), .null,
    ])
    func zoneRefused(zone: JSONValue) {
        #expect(fieldError(Fixture.sample(["zone": zone]))?.field == "zone", "\(zone)")
    }

    @Test("no zone is fine")
    func noZone() throws {
        #expect(try decode(Fixture.sample()).payload.asSample?.zone == nil)
    }

    @Test("a source given as a string is stored as {\"name\": …}")
    func sourceAsString() throws {
        let event = try decode(Fixture.sample(["source": .string("Apple Watch")]))
        #expect(event.payload.asSample?.source == SampleSource(name: "Apple Watch"))
        #expect(event.document["source"] == .object(["name": .string("Apple Watch")]))
    }

    @Test("a source object keeps its fields")
    func sourceAsObject() throws {
        let source = JSONValue.object([
            "name": .string("Watch"), "bundle": .string("com.apple.health"), "device": .string("Watch7,1"),
            "version": .string("11.1"), "extra": .int(1),
        ])
        let event = try decode(Fixture.sample(["source": source]))
        #expect(event.payload.asSample?.source == SampleSource(name: "Watch", bundle: "com.apple.health",
                                                              device: "Watch7,1", version: "11.1"))
        #expect(event.document["source"] == source)
    }

    @Test("a source must be there and have a name")
    func sourceMissing() {
        #expect(fieldError(Fixture.sample(["source": nil])) == FieldError("source", "'source' is required"))
        #expect(fieldError(Fixture.sample(["source": .object([:])])) == FieldError("source.name", "'source.name' is required"))
        #expect(fieldError(Fixture.sample(["source": .object(["bundle": .string("b")])]))?.field == "source.name")
        #expect(fieldError(Fixture.sample(["source": .object(["name": .int(1)])]))?.field == "source.name")
        #expect(fieldError(Fixture.sample(["source": .int(1)]))?.field == "source")
        #expect(fieldError(Fixture.sample(["source": .array([.string("x")])]))?.field == "source")
        #expect(fieldError(Fixture.sample(["source": .string("")])) == FieldError("source", "'source' must not be empty"))
        #expect(fieldError(Fixture.sample(["source": .object(["name": .string("")])]))?.field == "source.name")
        #expect(fieldError(Fixture.sample(["source": .object(["name": .string("x"), "bundle": .int(1)])]))?.field == "source.bundle")
    }

    @Test("source names up to 1 KiB of UTF-8 are fine; longer ones are refused")
    func sourceLength() throws {
        #expect(try decode(Fixture.sample(["source": string(1024)])).payload.asSample?.source.name.utf8.count == 1024)
        #expect(fieldError(Fixture.sample(["source": string(1025)])) == FieldError("source", "'source' is longer than 1 KiB"))
        #expect(try decode(Fixture.sample(["source": .object(["name": string(1024)])])).payload.asSample != nil)
        #expect(fieldError(Fixture.sample(["source": .object(["name": string(1025)])]))?.field == "source.name")
        // Bytes, not characters: 512 'é' are 1024 bytes, 513 are too many.
        #expect(try decode(Fixture.sample(["source": string(512, "é")])).payload.asSample != nil)
        #expect(fieldError(Fixture.sample(["source": string(513, "é")]))?.field == "source")
        #expect(fieldError(Fixture.sample(["source": .object(["name": .string("w"), "device": string(1025)])]))?.field == "source.device")
    }

    @Test("names with control characters are refused", arguments: ["i\nPhone", "tab\there", "nul\u{0}", "del\u{7F}", "\u{1B}[31m", "cr\r"])
    func controlCharacters(name: String) {
        #expect(fieldError(Fixture.sample(["source": .string(name)])) == FieldError("source", "'source' contains a control character"))
        #expect(fieldError(Fixture.sample(["source": .object(["name": .string(name)])]))?.field == "source.name")
        #expect(fieldError(Fixture.sample(["user": .string(name)]))?.field == "user")
        #expect(fieldError(Fixture.grant(["client": .string(name)]))?.field == "client")
        #expect(fieldError(Fixture.sample(["syncId": .string(name), "syncVersion": .int(1)]))?.field == "syncId")
    }

    @Test("non-ASCII names without control characters are fine")
    func unicodeNames() throws {
        let event = try decode(Fixture.sample(["source": .string("Montre de Zoë ⌚️"), "user": .string("zoë")]))
        #expect(event.payload.asSample?.source.name == "Montre de Zoë ⌚️")
        #expect(event.user == "zoë")
    }

    @Test("'user' defaults to 'default' and is checked like a name")
    func user() throws {
        #expect(try decode(Fixture.sample(["user": .string("alice")])).user == "alice")
        #expect(fieldError(Fixture.sample(["user": .string("")])) == FieldError("user", "'user' must not be empty"))
        #expect(fieldError(Fixture.sample(["user": string(1025)]))?.field == "user")
        #expect(fieldError(Fixture.sample(["user": .int(1)])) == FieldError("user", "'user' must be a string, got a number"))
    }

    @Test("'syncId' and 'syncVersion' come together")
    func syncPair() throws {
        #expect(fieldError(Fixture.sample(["syncVersion": .int(2)])) == FieldError("syncVersion", "'syncVersion' needs a 'syncId'"))
        #expect(fieldError(Fixture.sample(["syncId": .string("rec-1")])) == FieldError("syncVersion", "'syncVersion' is required with 'syncId'"))
        let event = try decode(Fixture.sample(["syncId": .string("rec-1"), "syncVersion": .int(2)]))
        #expect(event.payload.asSample?.syncId == "rec-1")
        #expect(event.payload.asSample?.syncVersion == 2)
        #expect(try decode(Fixture.sample(["syncId": .string("rec-1"), "syncVersion": .int(0)])).payload.asSample?.syncVersion == 0)
        // A whole number written as a decimal is the same version (and the same canonical content).
        let decimal = try decode(Fixture.sample(["syncId": .string("rec-1"), "syncVersion": .double(2.0)]))
        #expect(decimal.payload.asSample?.syncVersion == 2)
        #expect(decimal.document.canonicalBytes == event.document.canonicalBytes)
    }

    @Test("'syncVersion' is a whole number ≥ 0 and 'syncId' a name", arguments: [
        JSONValue.int(-1), .double(1.5), .string("3"), .null, .bool(true), .double(.nan), .double(.infinity),
    ])
    func badSyncVersion(version: JSONValue) {
        #expect(fieldError(Fixture.sample(["syncId": .string("rec-1"), "syncVersion": version]))?.field == "syncVersion", "\(version)")
    }

    @Test("a bad 'syncId' is named")
    func badSyncID() {
        #expect(fieldError(Fixture.sample(["syncId": .string(""), "syncVersion": .int(1)]))?.field == "syncId")
        #expect(fieldError(Fixture.sample(["syncId": .int(5), "syncVersion": .int(1)]))?.field == "syncId")
        #expect(fieldError(Fixture.sample(["syncId": string(1025), "syncVersion": .int(1)]))?.field == "syncId")
    }

    @Test("'metadata' holds strings and numbers")
    func metadataAccepted() throws {
        let metadata = JSONValue.object([
            "HKMetadataKeyWasUserEntered": .int(1), "note": .string("walk"), "ratio": .double(0.5),
            "long": string(16 * 1024),
        ])
        let event = try decode(Fixture.sample(["metadata": metadata]))
        #expect(event.document["metadata"] == metadata)
    }

    @Test("'metadata' refuses nested values and oversized strings, naming the key", arguments: [
        JSONValue.object(["b": .int(1)]), .array([.int(1)]), .bool(true), .null, string(16 * 1024 + 1),
    ])
    func metadataRefused(entry: JSONValue) {
        #expect(fieldError(Fixture.sample(["metadata": .object(["ok": .int(1), "a": entry])]))?.field == "metadata.a")
    }

    @Test("'metadata' must be an object with keys of at most 1 KiB")
    func metadataShape() {
        #expect(fieldError(Fixture.sample(["metadata": .string("x")])) == FieldError("metadata", "'metadata' must be an object, got a string"))
        #expect(fieldError(Fixture.sample(["metadata": .array([])]))?.field == "metadata")
        let longKey = String(repeating: "k", count: 1025)
        #expect(fieldError(Fixture.sample(["metadata": .object([longKey: .int(1)])]))?.field == "metadata")
    }

    @Test("the first problem in field order is the one reported")
    func firstProblemWins() {
        // 'value' is checked before 'unit', 'start' and 'source'.
        let error = fieldError(Fixture.sample(["value": .int(-1), "unit": .string("km"), "start": nil, "source": nil]))
        #expect(error?.field == "value")
    }

    @Test("unknown fields are kept in the document")
    func unknownFieldsKept() throws {
        let extra = JSONValue.object(["nested": .array([.int(1), .string("two")])])
        let event = try decode(Fixture.sample(["note": .string("hello"), "x-app": extra, "flag": .bool(false), "nothing": .null]))
        #expect(event.document["note"] == .string("hello"))
        #expect(event.document["x-app"] == extra)
        #expect(event.document["flag"] == .bool(false))
        #expect(event.document["nothing"] == .null)
        // Everything given is still there, plus the filled-in 'id', 'user' and 'unit'.
        let keys = Set(event.document.objectValue?.keys.map { $0 } ?? [])
        #expect(keys == ["kind", "type", "value", "start", "end", "source", "note", "x-app", "flag",
                         "nothing", "id", "user", "unit"])
    }

    @Test("the stored document is the same however an equivalent sample was spelled")
    func normalizedDocument() throws {
        let healthKit = try decode(Fixture.sample(["type": .string("HKQuantityTypeIdentifierStepCount"),
                                                   "source": .object(["name": .string("iPhone")]),
                                                   "value": .double(100.0)]))
        let plain = try decode(Fixture.sample(["unit": .string("count"), "user": .string("default")]))
        #expect(healthKit.document.canonicalBytes == plain.document.canonicalBytes)
        #expect(healthKit.id == plain.id)
    }
}

@Suite("EventDecoder: derived sample ids")
struct DerivedIDTests {
    @Test("the same content always gives the same id, pinned across releases")
    func stable() throws {
        let first = try decode(Fixture.sample())
        let second = try decode(Fixture.sample())
        #expect(first.id == second.id)
        // Computed independently: SHA-256 of "ledger.sample.v1" and the NUL-prefixed fields,
        // first 16 bytes, version 8. Changing this breaks idempotent re-imports of old files.
        #expect(first.id == UUID(uuidString: "05b13e27-a86d-8dd9-b9cb-4e5ea2ecb41f"))
        #expect(first.document["id"] == .string("05b13e27-a86d-8dd9-b9cb-4e5ea2ecb41f"))
    }

    @Test("a derived id is a version 8, RFC 9562 variant UUID")
    func versionAndVariant() throws {
        let bytes = try decode(Fixture.sample()).id.bytes
        #expect(bytes[6] >> 4 == 8)
        #expect(bytes[8] >> 6 == 0b10)
    }

    @Test("equivalent spellings of the same sample give the same id", arguments: [
        ["type": JSONValue.string("HKQuantityTypeIdentifierStepCount")],
        ["value": .double(100.0)],
        ["unit": .string("count")],
        ["user": .string("default")],
        ["source": .object(["name": .string("iPhone"), "bundle": .string("com.example")])],
        ["start": .string("2026-11-29T00:00:00Z"), "end": .string("2026-11-29T00:10:00.000Z")],
        ["start": .string("2026-11-28T19:00:00-05:00")],
        ["note": .string("unknown fields are not content")],
    ] as [[String: JSONValue]])
    func sameContent(changes: [String: JSONValue]) throws {
        let base = try decode(Fixture.sample())
        let other = try decode(Fixture.sample(changes.mapValues { Optional($0) }))
        #expect(other.id == base.id, "\(changes)")
    }

    @Test("any change of content gives a different id", arguments: [
        ["value": JSONValue.int(101)],
        ["value": .double(100.5)],
        ["user": .string("alice")],
        ["type": .string("flights")],
        ["start": .string("2026-11-29T08:00:01+08:00")],
        ["end": .string("2026-11-29T08:10:00.000001+08:00")],
        ["source": .string("Watch")],
        ["type": .string("distance"), "unit": .string("m")],
    ] as [[String: JSONValue]])
    func differentContent(changes: [String: JSONValue]) throws {
        let base = try decode(Fixture.sample())
        let other = try decode(Fixture.sample(changes.mapValues { Optional($0) }))
        #expect(other.id != base.id, "\(changes)")
    }

    @Test("the unit is content: 1 km and 1000 m are different samples")
    func unitIsContent() throws {
        let km = try decode(Fixture.sample(["type": .string("distance"), "value": .int(1), "unit": .string("km")]))
        let m = try decode(Fixture.sample(["type": .string("distance"), "value": .int(1), "unit": .string("m")]))
        #expect(km.id != m.id)
    }

    @Test("samples never ask for a random id; a given id wins over the derived one")
    func noRandomIDForSamples() throws {
        var calls = 0
        let derived = try EventDecoder.decode(Fixture.sample(), makeRandomID: { calls += 1; return fixedID })
        #expect(calls == 0)
        #expect(derived.id != fixedID)
        let given = UUID(uuidString: "6ba7b810-9dad-11d1-80b4-00c04fd430c8")!
        let explicit = try EventDecoder.decode(Fixture.sample(["id": .string(given.uuidString)]), makeRandomID: { calls += 1; return fixedID })
        #expect(calls == 0)
        #expect(explicit.id == given)
    }

    @Test("derivedID(for:) agrees with decoding")
    func directDerivation() throws {
        let event = try decode(Fixture.sample())
        let sample = try #require(event.payload.asSample)
        #expect(EventDecoder.derivedID(for: sample) == event.id)
    }
}

@Suite("EventDecoder: correction")
struct CorrectionDecodingTests {
    @Test("a retraction decodes; the target is stored in lower case")
    func retract() throws {
        let event = try decode(Fixture.correction())
        #expect(event.payload.asCorrection == Correction(target: UUID(uuidString: "6ba7b810-9dad-11d1-80b4-00c04fd430c8")!,
                                                       action: .retract, reason: "duplicate import"))
        #expect(event.document["target"] == .string("6ba7b810-9dad-11d1-80b4-00c04fd430c8"))
        #expect(event.user == "")
    }

    @Test("a retraction with amendment fields is refused, naming the field", arguments: ["value", "unit", "start", "end"])
    func retractWithAmendFields(field: String) {
        let value: JSONValue = switch field {
        case "value": .int(5)
        case "unit": .string("count")
        default: .string("2026-11-29T08:00:00Z")
        }
        #expect(fieldError(Fixture.correction([field: value]))
            == FieldError(field, "'\(field)' has no meaning in a retraction; use action 'amend'"))
    }

    @Test("an amendment must change something")
    func amendNothing() {
        #expect(fieldError(Fixture.correction(["action": .string("amend")]))
            == FieldError("action", "an amendment must change at least one of 'value', 'unit', 'start', 'end'"))
    }

    @Test("an amendment carries the changed fields")
    func amend() throws {
        let event = try decode(Fixture.correction([
            "action": .string("amend"), "value": .double(120.5), "unit": .string("count"),
            "start": .string("2026-11-29T08:00:00+08:00"), "end": .string("2026-11-29T00:30:00Z"),
        ]))
        let correction = try #require(event.payload.asCorrection)
        #expect(correction.action == .amend)
        #expect(correction.value == 120.5)
        #expect(correction.unit == "count")
        #expect(correction.start == Timestamp(microseconds: nov29))
        #expect(correction.end == Timestamp(microseconds: nov29 + 1_800_000_000))

        let valueOnly = try decode(Fixture.correction(["action": .string("amend"), "value": .int(0)]))
        #expect(valueOnly.payload.asCorrection?.value == 0)
        #expect(valueOnly.payload.asCorrection?.unit == nil)
        #expect(valueOnly.payload.asCorrection?.start == nil)
    }

    @Test("amended fields are validated like a sample's")
    func amendValidation() {
        func amend(_ changes: [String: JSONValue?]) -> FieldError? {
            var all = changes
            all["action"] = .string("amend")
            return fieldError(Fixture.correction(all))
        }
        #expect(amend(["value": .int(-3)])?.field == "value")
        #expect(amend(["value": .string("3")])?.field == "value")
        #expect(amend(["unit": .int(3)])?.field == "unit")
        #expect(amend(["start": .string("2026-02-30T00:00:00Z")])?.field == "start")
        #expect(amend(["end": .string("yesterday")])?.field == "end")
        #expect(amend(["start": .string("2026-11-29T01:00:00Z"), "end": .string("2026-11-29T00:00:00Z")])
            == FieldError("end", "'end' precedes 'start'"))
    }

    @Test("'reason' is required and must not be empty", arguments: [
        JSONValue?.none, .some(.string("")), .some(.string("   \n\t")), .some(.int(1)), .some(.null),
        .some(string(16 * 1024 + 1)),
    ])
    func badReason(reason: JSONValue?) {
        #expect(fieldError(Fixture.correction(["reason": reason]))?.field == "reason", "\(String(describing: reason))")
    }

    @Test("exact message for an empty reason")
    func emptyReasonMessage() {
        #expect(fieldError(Fixture.correction(["reason": .string("")]))
            == FieldError("reason", "'reason' is required and must not be empty: corrections are for auditors"))
    }

    @Test("'target' must be a UUID and 'action' retract or amend")
    func targetAndAction() {
        #expect(fieldError(Fixture.correction(["target": nil])) == FieldError("target", "'target' is required"))
        #expect(fieldError(Fixture.correction(["target": .string("sample-1")]))?.field == "target")
        #expect(fieldError(Fixture.correction(["target": .int(1)]))?.field == "target")
        #expect(fieldError(Fixture.correction(["action": nil])) == FieldError("action", "'action' is required (retract or amend)"))
        #expect(fieldError(Fixture.correction(["action": .string("delete")]))?.field == "action")
        #expect(fieldError(Fixture.correction(["action": .string("Retract")]))?.field == "action")
        #expect(fieldError(Fixture.correction(["action": .int(1)]))?.field == "action")
    }

    @Test("a correction without an id gets the injected random id")
    func randomID() throws {
        var calls = 0
        let event = try EventDecoder.decode(Fixture.correction(), makeRandomID: { calls += 1; return fixedID })
        #expect(calls == 1)
        #expect(event.id == fixedID)
        #expect(event.document["id"] == .string(fixedID.lowercased))
    }
}

@Suite("EventDecoder: grant and revoke")
struct AccessDecodingTests {
    @Test("a grant decodes")
    func grant() throws {
        let event = try decode(Fixture.grant(["share": .array([.string("distance")])]))
        #expect(event.payload.asGrant == AccessChange(user: "alice", client: "coach-app", read: [.steps], share: [.distance]))
        #expect(event.kind == .grant)
        #expect(event.user == "alice")
    }

    @Test("a revoke decodes, with 'user' defaulting to 'default'")
    func revoke() throws {
        let event = try decode(Fixture.grant(["kind": .string("revoke"), "user": nil]))
        #expect(event.payload.asRevoke == AccessChange(user: "default", client: "coach-app", read: [.steps], share: []))
        #expect(event.document["user"] == .string("default"))
        #expect(event.kind == .revoke)
    }

    @Test("a grant or revoke must name at least one type", arguments: ["grant", "revoke"])
    func noTypes(kind: String) {
        let expected = FieldError("read", "a \(kind) must name at least one type in 'read' or 'share'")
        #expect(fieldError(Fixture.grant(["kind": .string(kind), "read": nil])) == expected)
        #expect(fieldError(Fixture.grant(["kind": .string(kind), "read": .array([])])) == expected)
        #expect(fieldError(Fixture.grant(["kind": .string(kind), "read": .array([]), "share": .array([])])) == expected)
    }

    @Test("'share' alone is enough")
    func shareOnly() throws {
        let event = try decode(Fixture.grant(["read": nil, "share": .array([.string("active-energy")])]))
        #expect(event.payload.asGrant?.share == [.activeEnergy])
        #expect(event.payload.asGrant?.read == [])
    }

    @Test("unknown types in 'read' or 'share' are refused, naming the list", arguments: ["read", "share"])
    func unknownType(field: String) throws {
        let error = try #require(fieldError(Fixture.grant([field: .array([.string("steps"), .string("sleep")])])))
        #expect(error.field == field)
        #expect(error.message.hasPrefix("unknown type 'sleep' in '\(field)'"))
        #expect(fieldError(Fixture.grant([field: .string("steps")]))?.field == field)
        #expect(fieldError(Fixture.grant([field: .array([.int(1)])]))?.field == field)
    }

    @Test("aliases are normalized and repeats dropped, in order")
    func normalizedTypes() throws {
        let event = try decode(Fixture.grant(["read": .array([
            .string("HKQuantityTypeIdentifierFlightsClimbed"), .string("steps"),
            .string("HKQuantityTypeIdentifierStepCount"), .string("flights"),
        ])]))
        #expect(event.payload.asGrant?.read == [.flights, .steps])
        #expect(event.document["read"] == .array([.string("flights"), .string("steps")]))
    }

    @Test("'client' is required and checked like a name")
    func client() {
        #expect(fieldError(Fixture.grant(["client": nil])) == FieldError("client", "'client' is required"))
        #expect(fieldError(Fixture.grant(["client": .string("")]))?.field == "client")
        #expect(fieldError(Fixture.grant(["client": string(1025)]))?.field == "client")
        #expect(fieldError(Fixture.grant(["client": .array([])]))?.field == "client")
    }

    @Test("a grant without an id gets the injected random id; with one, it keeps it")
    func randomID() throws {
        var calls = 0
        let event = try EventDecoder.decode(Fixture.grant(), makeRandomID: { calls += 1; return fixedID })
        #expect(calls == 1)
        #expect(event.id == fixedID)
        #expect(event.document["id"] == .string("00000000-0000-4000-8000-00000000abcd"))

        let given = UUID(uuidString: "6ba7b810-9dad-11d1-80b4-00c04fd430c8")!
        let withID = try EventDecoder.decode(Fixture.grant(["id": .string(given.uuidString)]),
                                             makeRandomID: { calls += 1; return fixedID })
        #expect(calls == 1)
        #expect(withID.id == given)
    }

    @Test("the default random id differs between two identical grants")
    func defaultRandomIDs() throws {
        let first = try EventDecoder.decode(Fixture.grant())
        let second = try EventDecoder.decode(Fixture.grant())
        #expect(first.id != second.id)
    }
}

@Suite("EventDecoder: profile")
struct ProfileDecodingTests {
    @Test("a profile with a zone decodes")
    func zone() throws {
        let event = try decode(Fixture.profile())
        #expect(event.payload.asProfile == Profile(user: "alice", zone: "Europe/Paris"))
        #expect(event.user == "alice")
    }

    @Test("a profile must set a zone or priorities")
    func neither() {
        #expect(fieldError(Fixture.profile(["zone": nil])) == FieldError("zone", "a profile must set 'zone' or 'priority'"))
    }

    @Test("priorities are normalized to the ledger's type names")
    func priority() throws {
        let event = try decode(Fixture.profile(["zone": nil, "priority": .object([
            "HKQuantityTypeIdentifierStepCount": .array([.string("Watch"), .string("iPhone")]),
            "distance": .array([]),
        ])]))
        let profile = try #require(event.payload.asProfile)
        #expect(profile.zone == nil)
        #expect(profile.priority == [.steps: ["Watch", "iPhone"], .distance: []])
        #expect(event.document["priority"] == .object([
            "steps": .array([.string("Watch"), .string("iPhone")]), "distance": .array([]),
        ]))
    }

    @Test("an unknown type in 'priority' is refused")
    func unknownPriorityType() throws {
        let error = try #require(fieldError(Fixture.profile(["priority": .object(["sleep": .array([.string("Watch")])])])))
        #expect(error.field == "priority")
        #expect(error.message.hasPrefix("unknown type 'sleep' in 'priority'"))
    }

    @Test("bad priority lists are refused, naming the type")
    func badPriorityLists() {
        func error(_ priority: JSONValue) -> FieldError? {
            fieldError(Fixture.profile(["priority": priority]))
        }
        #expect(error(.array([]))?.field == "priority")
        #expect(error(.string("Watch"))?.field == "priority")
        #expect(error(.object(["steps": .string("Watch")]))?.field == "priority.steps")
        #expect(error(.object(["steps": .array([.int(1)])]))?.field == "priority.steps")
        #expect(error(.object(["steps": .array([.string("Watch"), .string("Watch")])]))?.field == "priority.steps")
        #expect(error(.object(["steps": .array([.string("")])]))?.field == "priority.steps")
        #expect(error(.object(["flights": .array([.string("a\nb")])]))?.field == "priority.flights")
        #expect(error(.object(["steps": .array([]), "HKQuantityTypeIdentifierStepCount": .array([])]))?.field == "priority.steps")
    }

    @Test("a bad profile zone is refused")
    func badZone() {
        #expect(fieldError(Fixture.profile(["zone": .string("Nowhere/Special")]))?.field == "zone")
        #expect(fieldError(Fixture.profile(["zone": .string("+24:00")]))?.field == "zone")
    }

    @Test("a profile without an id gets the injected random id")
    func randomID() throws {
        #expect(try decode(Fixture.profile()).id == fixedID)
    }
}
