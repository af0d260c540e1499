import Foundation
import LedgerCore
import Synchronization

/// Turns export records into `sample` events (SPEC §3.1).
///
/// Kept: step count, walking and running distance, flights climbed and active energy, with
/// their units, `sourceName`, `sourceVersion` and `device`. `HKTimeZone` metadata becomes the
/// sample's `zone` (the offsets printed in an export are the export's, not the sample's);
/// `HKMetadataKeySyncIdentifier` / `SyncVersion` become `syncId` / `syncVersion`.
///
/// Exports carry no sample UUIDs, so each id is derived from the record: user, type, start,
/// end, value, unit, source name, source version, device and creation date (instants, not the
/// export's printed offsets). Importing a file twice, or an overlapping newer export, adds only
/// what is new. The creation date and version are in the id because real exports hold distinct
/// HealthKit samples with the same interval and value (an app writing a sample again later):
/// they stay distinct here too, while a record repeated to the letter is one sample. The device
/// string loses the object address HealthKit prints (`<<HKDevice: 0x…>, `), which changes
/// between exports.
///
/// Two id schemes exist, and a ledger keeps the one it started with (`EventLog.importIDScheme`),
/// so re-importing into an older ledger stays idempotent: scheme 1 is the hash of the identity
/// alone; scheme 2 (ledgers created from 2026-11-30) puts the sample's start time in front
/// (`UUID.derived(milliseconds:from:)`), so ids sort by time.
public struct AppleHealthConverter: Sendable {
    public var user: String
    /// The zone for records without `HKTimeZone` metadata (`--zone`), if any.
    public var zone: String?
    /// How ids are derived: 1 (hash only) or 2 (time-ordered).
    public var idScheme: Int
    /// Records whose `HKTimeZone` this machine's zone database does not know: they are
    /// counted in `zone` (else the ledger's), and the import's summary says how many.
    public let unknownZones = Tally()

    /// What the converter remembers from record to record (the reading thread's alone, behind
    /// a lock all the same): the last few cleaned device strings, by the bytes they come from.
    /// Records repeat them, and a device string made per record was a part of the conversion.
    private let memo = Memo()

    final class Memo: Sendable {
        private let devices = Mutex(RecentStrings())

        /// `make(bytes)`, or the string made last time from the same bytes.
        func device(_ bytes: UnsafeBufferPointer<UInt8>, _ make: (UnsafeBufferPointer<UInt8>) -> String) -> String {
            if let known = devices.withLock({ $0.string(for: bytes) }) { return known }
            let text = make(bytes)
            devices.withLock { $0.remember(bytes, as: text) }
            return text
        }
    }

    /// A count shared by the copies of a converter (it is bumped on the reading thread and read
    /// once the import is over).
    public final class Tally: Sendable {
        private let value = Atomic<Int>(0)
        public var count: Int { value.load(ordering: .relaxed) }
        func add() { value.add(1, ordering: .relaxed) }
    }

    public init(user: String = "default", zone: String? = nil, idScheme: Int = 2) {
        self.user = user
        self.zone = zone
        self.idScheme = idScheme
    }

    static let keptTypes: [String: QuantityType] = [
        "HKQuantityTypeIdentifierStepCount": .steps, "HKQuantityTypeIdentifierDistanceWalkingRunning": .distance,
        "HKQuantityTypeIdentifierFlightsClimbed": .flights, "HKQuantityTypeIdentifierActiveEnergyBurned": .activeEnergy,
    ]

    /// The prepared event for `record`, or nil when its type is not one the ledger keeps.
    ///
    /// The same result as `PreparedEvent(event(for:))` (the tests hold them byte for byte on
    /// every real export), built without the JSON object and `EventDecoder` in between: the
    /// sample is checked field by field and its canonical JSON written directly, keys in their
    /// sorted order. A record this path cannot vouch for (a negative or odd value, a bad date,
    /// a name with control characters, a unit that does not fit) goes through `event(for:)`,
    /// so errors read exactly the same.
    public func prepared(for record: HealthRecord) throws -> PreparedEvent? {
        try preparedSample(for: record)?.event
    }

    /// `prepared(for:)` with the sample's type, whose HealthKit name is the record's `type`
    /// (`healthKitName`): what an import counts records by, without comparing their names.
    /// With `digesting: false`, an event made on the direct path comes without its content
    /// digest (`PreparedEvent.computeContentDigest`).
    public func preparedSample(for record: HealthRecord, digesting: Bool = true) throws -> (event: PreparedEvent, type: QuantityType)? {
        guard let type = AppleHealthConverter.keptTypes[record.type] else { return nil }
        if let prepared = directlyPrepared(record, type: type, digesting: digesting) { return (prepared, type) }
        return try event(for: record).map { (PreparedEvent($0), type) }
    }

    /// The HealthKit type name the importer reads as `type`.
    public static func healthKitName(of type: QuantityType) -> String {
        healthKitNames[Int(type.code)]
    }

    /// `keptTypes`' names by type code.
    private static let healthKitNames: [String] = {
        var names = Array(repeating: "", count: QuantityType.codeLimit)
        for (name, type) in keptTypes { names[Int(type.code)] = name }
        return names
    }()

    private func directlyPrepared(_ record: HealthRecord, type: QuantityType, digesting: Bool) -> PreparedEvent? {
        let plainName = EventDecoder.isName
        guard let valueText = record.value, let value = AppleHealthConverter.decimal(valueText), value.isFinite, value >= 0,
              let (startText, start) = record.startText.flatMap({ $0.withBytes(AppleHealthConverter.exportDateText(utf8:)) }),
              let (endText, end) = record.endText.flatMap({ $0.withBytes(AppleHealthConverter.exportDateText(utf8:)) }), end >= start,
              let sourceName = record.sourceName, plainName(sourceName), plainName(user)
        else { return nil }
        guard let unit = EventDecoder.sampleUnit(record.unit.flatMap { $0.isEmpty ? nil : $0 }, of: type) else { return nil }
        guard Sample.rangeProblem(value: value, unit: unit, type: type, start: start, end: end) == nil else { return nil }
        let version = record.sourceVersion.flatMap { $0.isEmpty ? nil : $0 }
        let cleanedDevice = record.deviceText.map { $0.cleaned(memo: memo) }
        let device = cleanedDevice.flatMap { $0.isEmpty ? nil : $0 }
        if let version, !plainName(version) { return nil }
        if let device, !plainName(device) { return nil }
        var syncId: String?
        var syncVersion: Int64?
        if let given = record.metadata(.syncIdentifier), !given.isEmpty {
            guard let version = AppleHealthConverter.syncVersion(record), plainName(given), version >= 0 else { return nil }
            syncId = given
            syncVersion = version
        }
        // Decided last, so that a record this path passes on to `event(for:)` is not counted
        // twice in `unknownZones` (`--zone` is checked before an import starts).
        let zoneName = sampleZone(record)
        if let zoneName, zoneName == zone, !Zone.isValid(zoneName) { return nil }
        // Both dates are instants: the identity holds each as its microseconds, not its text.
        let id = derivedID(record, start: ("", start), end: ("", end), valueText: valueText,
                           sourceName: sourceName, device: cleanedDevice)
        let sample = Sample(user: user, type: type, value: value, unit: unit, start: start, end: end, zone: zoneName,
                            source: SampleSource(name: sourceName, device: device, version: version),
                            syncId: syncId, syncVersion: syncVersion)

        return .checkedSample(id: id, consume sample, start: startText, end: endText, digesting: digesting)
    }

    private static let identityPrefix = Array("ledger.import.apple-health.v1".utf8)

    /// The record's id (the type's documentation says what goes into it). Each date comes as
    /// its RFC 3339 text and, when that parses, its instant; `device` is the cleaned device.
    private func derivedID(_ record: HealthRecord, start: (text: String, instant: Timestamp?),
                           end: (text: String, instant: Timestamp?), valueText: String, sourceName: String,
                           device: String?) -> UUID {
        // The identity is written into scratch space and hashed there (no array per record):
        // each field is a 0 byte and its text, or an instant's at most 20 digits and sign, or
        // a date's RFC 3339 text (25 bytes, from the 19 of a legacy one).
        func size(count: Int) -> Int { 1 + max(32, count) }
        func size(_ text: String?) -> Int { size(count: text?.utf8.count ?? 0) }
        let capacity = AppleHealthConverter.identityPrefix.count + size(user) + size(record.type) + size(start.text)
            + size(end.text) + size(valueText) + size(record.unit) + size(sourceName) + size(record.sourceVersion)
            + size(device) + size(count: record.creationText?.count ?? 0)
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { scratch in
            var identity = ByteCursor(scratch.baseAddress!, capacity: capacity)
            AppleHealthConverter.identityPrefix.withUnsafeBufferPointer { identity.bytes($0) }
            func add(_ text: String) {
                identity.u8(0)
                identity.utf8(text)
            }
            // An instant goes in as its microseconds in decimal; text that is no instant, as it is.
            func add(_ date: (text: String, instant: Timestamp?)) {
                guard let instant = date.instant else { return add(date.text) }
                identity.u8(0)
                identity.decimal(instant.microseconds)
            }
            add(user)
            add(record.type)
            add(start)
            add(end)
            add(valueText)
            add(record.unit ?? "")
            add(sourceName)
            add(record.sourceVersion ?? "")
            add(device ?? "")
            if let instant = record.creationText.flatMap({ $0.withBytes(AppleHealthConverter.exportInstant(utf8:)) }) {
                add(("", instant))  // as the branch below adds it, without the text in between
            } else if let creation = record.creationDate.flatMap(AppleHealthConverter.rfc3339) {
                add((creation, try? Timestamp.parseRFC3339(creation).0))
            } else {
                add("")
            }
            let bytes = UnsafeRawBufferPointer(start: scratch.baseAddress, count: identity.count)
            if idScheme >= 2, let startInstant = start.instant {
                return UUID.derived(milliseconds: startInstant.microseconds.floorDivided(by: 1000).quotient, from: bytes)
            }
            return UUID.derived(from: bytes)
        }
    }

    /// A record's value: decimal digits with an optional sign, point and exponent, as Apple
    /// writes them. Swift's `Double(_:)` would also read hexadecimal (`0x10`), `inf` and `nan`.
    static func decimal(_ text: String) -> Double? {
        guard !text.isEmpty, text.utf8.allSatisfy({ (48...57).contains($0) || $0 == UInt8(ascii: ".")
            || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") })
        else { return nil }
        return Double(text).map(JSONValue.positiveZero)  // "-0" is 0, as JSON writes it
    }

    /// The sample's zone: the record's `HKTimeZone` when this machine knows it, else `zone`
    /// (nil: the user's, else the ledger's). A zone named but not known is counted in
    /// `unknownZones`.
    private func sampleZone(_ record: HealthRecord) -> String? {
        guard let recorded = record.metadata(.timeZone) else { return zone }
        if Zone.isValid(recorded) { return recorded }
        unknownZones.add()
        return zone
    }

    /// `HKMetadataKeySyncVersion` as a whole number, 0 when the record has none (or an empty
    /// one), nil when it has one that is not a whole number.
    /// The record's `HKMetadataKeySyncVersion`, nil when it has none or it is not a whole
    /// number. HealthKit saves a sync identifier only with a version; a record with one and
    /// not the other is refused, as `append` refuses a `syncId` without a `syncVersion` (it
    /// was imported as version 0, so that a second record of that id was silently dropped
    /// as superseded: an audit).
    static func syncVersion(_ record: HealthRecord) -> Int64? {
        guard let text = record.metadata(.syncVersion), !text.isEmpty else { return nil }
        return Int64(text)
    }

    /// The event for `record`, or nil when its type is not one the ledger keeps.
    public func event(for record: HealthRecord) throws -> Event? {
        guard AppleHealthConverter.keptTypes[record.type] != nil else { return nil }
        func invalid(_ message: String) -> ImportError { .invalidRecord(line: record.line, message: message) }
        guard let valueText = record.value else { throw invalid("the record has no 'value'") }
        guard let value = AppleHealthConverter.decimal(valueText), value.isFinite else {
            throw invalid("'value' is not a number: '\(valueText)'")
        }
        // Each end named on its own (it said "'startDate' or 'endDate'", quoting both: an audit).
        func date(_ text: String?, _ name: String) throws -> String {
            guard let text else { throw invalid("the record has no '\(name)'") }
            guard let converted = AppleHealthConverter.rfc3339(text) else {
                throw invalid("'\(name)' is not a date: '\(EventDecoder.clip(text))' (\(AppleHealthConverter.exportDateExample))")
            }
            return converted
        }
        let start = try date(record.startDate, "startDate")
        let end = try date(record.endDate, "endDate")
        guard let sourceName = record.sourceName, !sourceName.isEmpty else { throw invalid("'sourceName' is missing") }
        var source: [String: JSONValue] = ["name": .string(sourceName)]
        if let version = record.sourceVersion, !version.isEmpty { source["version"] = .string(version) }
        if let device = record.deviceText.map({ $0.cleaned() }), !device.isEmpty { source["device"] = .string(device) }
        var object: [String: JSONValue] = [
            "kind": .string("sample"), "user": .string(user), "type": .string(record.type),
            "value": .double(value), "start": .string(start), "end": .string(end), "source": .object(source),
        ]
        if let unit = record.unit, !unit.isEmpty { object["unit"] = .string(unit) }
        if let zoneName = sampleZone(record) { object["zone"] = .string(zoneName) }
        if let syncId = record.metadata("HKMetadataKeySyncIdentifier"), !syncId.isEmpty {
            object["syncId"] = .string(syncId)
            guard let version = AppleHealthConverter.syncVersion(record) else {
                let given = record.metadata("HKMetadataKeySyncVersion") ?? ""
                throw invalid(given.isEmpty
                    ? "the record has an 'HKMetadataKeySyncIdentifier' and no 'HKMetadataKeySyncVersion' (HealthKit saves them together)"
                    : "'HKMetadataKeySyncVersion' is not a whole number: '\(given)'")
            }
            object["syncVersion"] = .int(version)
        }
        let id = derivedID(record, start: (start, try? Timestamp.parseRFC3339(start).0),
                           end: (end, try? Timestamp.parseRFC3339(end).0), valueText: valueText,
                           sourceName: sourceName, device: record.deviceText.map { $0.cleaned() })
        object["id"] = .string(id.lowercased)
        do {
            return try EventDecoder.decode(.object(object))
        } catch {
            throw invalid(AppleHealthConverter.inExportTerms(error, record: record, start: start, end: end))
        }
    }

    /// The event's field names in an error, as the export spells them: a user reading
    /// "'start' …" looks in vain for a `start` attribute in `export.xml`.
    static let exportNames: [String: String] = [
        "start": "startDate", "end": "endDate", "source.name": "sourceName", "source.version": "sourceVersion",
        "source.device": "device", "zone": "HKTimeZone", "syncId": "HKMetadataKeySyncIdentifier",
        "syncVersion": "HKMetadataKeySyncVersion",
    ]

    /// `error`'s message with the field it names spelled as in the export, and dates quoted as
    /// the record wrote them rather than as converted (`start` and `end`, in RFC 3339).
    /// What an export's dates look like, for errors about one.
    static let exportDateExample = "exports write them like 2022-09-30 20:00:00 +0200"

    static func inExportTerms(_ error: FieldError, record: HealthRecord, start: String, end: String) -> String {
        guard let field = error.field else { return error.message }
        var message = error.message
        // The JSON's example would mislead about a date the export wrote (an audit).
        message = message.replacingOccurrences(of: "is not an RFC 3339 timestamp with an offset", with: "is not a date")
            .replacingOccurrences(of: "(like 2026-11-29T08:00:00+08:00)", with: "(\(exportDateExample))")
        // A date's errors may name both ends ("'end' precedes 'start'").
        let named = field == "start" || field == "end" ? ["start", "end"] : [field]
        for name in named {
            if let exportName = exportNames[name] { message = message.replacingOccurrences(of: "'\(name)'", with: "'\(exportName)'") }
        }
        if field == "start", let text = record.startDate { message = message.replacingOccurrences(of: "'\(start)'", with: "'\(text)'") }
        if field == "end", let text = record.endDate { message = message.replacingOccurrences(of: "'\(end)'", with: "'\(text)'") }
        return message
    }

    /// `2017-01-22 18:57:52 +0200` (current exports) or `20141018163235+0100` (iOS 8) →
    /// `2017-01-22T18:57:52+02:00`. Nil when neither.
    static func rfc3339(_ text: String) -> String? {
        let converted = text.withUTF8Bytes { bytes -> String? in
            guard let layout = layout(of: bytes) else { return nil }
            return String(unsafeUninitializedCapacity: layout.count) { rewrite(bytes, as: layout, into: $0) }
        }
        if let converted { return converted }
        if (try? Timestamp.parseRFC3339(text)) != nil { return text }
        return nil
    }

    /// `rfc3339` of the date in `bytes` and the instant it names, nil when either is nil, with the text held
    /// inline (no string is made of it: every record's start and end come here); nil also when
    /// it is longer than a `ShortText` (only one already in RFC 3339 can be: `event(for:)` then
    /// takes the record).
    static func exportDateText(utf8 bytes: UnsafeBufferPointer<UInt8>) -> (ShortText, Timestamp)? {
        let layout = layout(of: bytes)
        guard (layout?.count ?? bytes.count) <= ShortText.capacity else { return nil }
        let short = ShortText { out in
            guard let layout else {
                _ = out.initialize(from: bytes)
                return bytes.count
            }
            return rewrite(bytes, as: layout, into: out)
        }
        guard let instant = short.withBytes({ try? Timestamp.parseRFC3339(utf8: $0).0 }) else { return nil }
        return (short, instant)
    }

    /// The instant of an export's date (either layout `rfc3339` converts), read without making
    /// its RFC 3339 text; nil when the text has neither layout or names no valid instant.
    static func exportInstant(utf8 bytes: UnsafeBufferPointer<UInt8>) -> Timestamp? {
        guard let layout = layout(of: bytes) else { return nil }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: layout.count) { out in
            let count = rewrite(bytes, as: layout, into: out)
            return try? Timestamp.parseRFC3339(utf8: UnsafeBufferPointer(rebasing: out[..<count])).0
        }
    }

    /// Writes the RFC 3339 text of `bytes`, which have `layout`, to `out` (at least
    /// `layout.count` bytes); returns the count. Runs of bytes are copied whole: the date's
    /// text was made a byte at a time through a table, each index checked, 2 % of an import.
    private static func rewrite(_ bytes: UnsafeBufferPointer<UInt8>, as layout: DateLayout,
                                into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        precondition(out.count >= layout.count && bytes.count == layout.sourceCount)
        let from = bytes.baseAddress!, to = out.baseAddress!
        switch layout {
        case .current:
            // `2017-01-22 18:57:52 +0200` → `2017-01-22T18:57:52+02:00`.
            to.initialize(from: from, count: 10)
            to[10] = UInt8(ascii: "T")
            (to + 11).initialize(from: from + 11, count: 8)
            (to + 19).initialize(from: from + 20, count: 3)
            to[22] = UInt8(ascii: ":")
            (to + 23).initialize(from: from + 23, count: 2)
        case .legacy:
            // `20141018163235+0100` → `2014-10-18T16:32:35+01:00`.
            to.initialize(from: from, count: 4)
            to[4] = UInt8(ascii: "-")
            (to + 5).initialize(from: from + 4, count: 2)
            to[7] = UInt8(ascii: "-")
            (to + 8).initialize(from: from + 6, count: 2)
            to[10] = UInt8(ascii: "T")
            (to + 11).initialize(from: from + 8, count: 2)
            to[13] = UInt8(ascii: ":")
            (to + 14).initialize(from: from + 10, count: 2)
            to[16] = UInt8(ascii: ":")
            (to + 17).initialize(from: from + 12, count: 5)
            to[22] = UInt8(ascii: ":")
            (to + 23).initialize(from: from + 17, count: 2)
        }
        return layout.count
    }

    /// The two layouts of an export's dates; both become 25 bytes of RFC 3339.
    private enum DateLayout {
        /// `2017-01-22 18:57:52 +0200` (current exports).
        case current
        /// `20141018163235+0100` (iOS 8).
        case legacy

        var count: Int { 25 }
        var sourceCount: Int { self == .current ? 25 : 19 }
    }

    /// Which layout an export date has; nil for neither.
    private static func layout(of bytes: UnsafeBufferPointer<UInt8>) -> DateLayout? {
        func digits(_ range: Range<Int>) -> Bool { range.allSatisfy { bytes[$0] >= 48 && bytes[$0] <= 57 } }
        func sign(_ index: Int) -> Bool { bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") }
        if bytes.count == 25, digits(0..<4), bytes[10] == 32, bytes[19] == 32, digits(21..<25), sign(20) {
            return .current
        }
        if bytes.count == 19, digits(0..<14), digits(15..<19), sign(14) {
            return .legacy
        }
        return nil
    }

    /// `<<HKDevice: 0x174294140>, name:iPhone, …, software:10.0>` → `name:iPhone, …, software:10.0`.
    static func cleanDevice(_ text: String, memo: Memo? = nil) -> String {
        guard text.hasPrefix("<<HKDevice:") else { return text }
        return text.withUTF8Bytes { bytes -> String? in
            guard let range = nameAfterDevice(in: bytes) else { return nil }
            let name = UnsafeBufferPointer(rebasing: bytes[range])
            let make = { (name: UnsafeBufferPointer<UInt8>) in String(decoding: name, as: UTF8.self) }
            return memo.map { $0.device(name, make) } ?? make(name)
        } ?? text
    }

    private static let devicePrefix = Array("<<HKDevice:".utf8)

    /// Where `cleanDevice` finds the name in a device's bytes, or nil when it keeps them as
    /// they are. Only for bytes whose prefix `String.hasPrefix` would take too: followed by
    /// an ASCII byte, which no combining mark can join to the prefix's `:`.
    static func deviceName(in bytes: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        guard bytes.count > devicePrefix.count, bytes.starts(with: devicePrefix), bytes[devicePrefix.count] < 0x80 else { return nil }
        return nameAfterDevice(in: bytes)
    }

    /// After the first `>, ` (found in the bytes: Foundation's range(of:) cost more than the
    /// rest of a record), up to a last `>`; nil without one.
    private static func nameAfterDevice(in bytes: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        var index = 0
        while index + 2 < bytes.count,
              !(bytes[index] == UInt8(ascii: ">") && bytes[index + 1] == UInt8(ascii: ",") && bytes[index + 2] == UInt8(ascii: " ")) {
            index += 1
        }
        guard index + 2 < bytes.count else { return nil }
        var end = bytes.count
        if end > index + 3, bytes[end - 1] == UInt8(ascii: ">") { end -= 1 }
        return (index + 3)..<end
    }
}

