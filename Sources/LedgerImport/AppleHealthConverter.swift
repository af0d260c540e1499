import Foundation
import LedgerCore

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

    public init(user: String = "default", zone: String? = nil, idScheme: Int = 2) {
        self.user = user
        self.zone = zone
        self.idScheme = idScheme
    }

    static let keptTypes: Set<String> = [
        "HKQuantityTypeIdentifierStepCount", "HKQuantityTypeIdentifierDistanceWalkingRunning",
        "HKQuantityTypeIdentifierFlightsClimbed", "HKQuantityTypeIdentifierActiveEnergyBurned",
    ]

    /// The event for `record`, or nil when its type is not one the ledger keeps.
    public func event(for record: HealthRecord) throws -> Event? {
        guard AppleHealthConverter.keptTypes.contains(record.type) else { return nil }
        func invalid(_ message: String) -> ImportError { .invalidRecord(line: record.line, message: message) }
        guard let valueText = record.value, let value = Double(valueText), value.isFinite else {
            throw invalid("'value' is not a number: '\(record.value ?? "")'")
        }
        guard let start = record.startDate.flatMap(AppleHealthConverter.rfc3339),
              let end = record.endDate.flatMap(AppleHealthConverter.rfc3339) else {
            throw invalid("'startDate' or 'endDate' is not a date: '\(record.startDate ?? "")', '\(record.endDate ?? "")'")
        }
        guard let sourceName = record.sourceName, !sourceName.isEmpty else { throw invalid("'sourceName' is missing") }
        var source: [String: JSONValue] = ["name": .string(sourceName)]
        if let version = record.sourceVersion, !version.isEmpty { source["version"] = .string(version) }
        if let device = record.device.map(AppleHealthConverter.cleanDevice), !device.isEmpty { source["device"] = .string(device) }
        var object: [String: JSONValue] = [
            "kind": .string("sample"), "user": .string(user), "type": .string(record.type),
            "value": .double(value), "start": .string(start), "end": .string(end), "source": .object(source),
        ]
        if let unit = record.unit, !unit.isEmpty { object["unit"] = .string(unit) }
        if let zoneName = record.metadata["HKTimeZone"], Zone(zoneName) != nil {
            object["zone"] = .string(zoneName)
        } else if let zone {
            object["zone"] = .string(zone)
        }
        if let syncId = record.metadata["HKMetadataKeySyncIdentifier"], !syncId.isEmpty {
            object["syncId"] = .string(syncId)
            object["syncVersion"] = .int(Int64(record.metadata["HKMetadataKeySyncVersion"] ?? "") ?? 0)
        }
        var identity: [UInt8] = Array("ledger.import.apple-health.v1".utf8)
        for part in [user, record.type, instant(start), instant(end), valueText, record.unit ?? "", sourceName,
                     record.sourceVersion ?? "", record.device.map(AppleHealthConverter.cleanDevice) ?? "",
                     record.creationDate.flatMap(AppleHealthConverter.rfc3339).map(instant) ?? ""] {
            identity.append(0)
            identity.append(contentsOf: part.utf8)
        }
        let id: UUID
        if idScheme >= 2, let startInstant = try? Timestamp.parseRFC3339(start) {
            id = UUID.derived(milliseconds: startInstant.0.microseconds.floorDivided(by: 1000).quotient, from: identity)
        } else {
            id = UUID.derived(from: identity)
        }
        object["id"] = .string(id.lowercased)
        do {
            return try EventDecoder.decode(.object(object))
        } catch {
            throw invalid(error.message)
        }
    }

    /// The instant of an RFC 3339 string, as microseconds, for identities.
    private func instant(_ text: String) -> String {
        (try? Timestamp.parseRFC3339(text)).map { String($0.0.microseconds) } ?? text
    }

    /// `2017-01-22 18:57:52 +0200` (current exports) or `20141018163235+0100` (iOS 8) →
    /// `2017-01-22T18:57:52+02:00`. Nil when neither.
    static func rfc3339(_ text: String) -> String? {
        let bytes = Array(text.utf8)
        func digits(_ range: Range<Int>) -> Bool { range.allSatisfy { $0 < bytes.count && bytes[$0] >= 48 && bytes[$0] <= 57 } }
        func slice(_ range: Range<Int>) -> String { String(decoding: bytes[range], as: UTF8.self) }
        if bytes.count == 25, digits(0..<4), bytes[10] == 32, bytes[19] == 32, digits(21..<25),
           bytes[20] == UInt8(ascii: "+") || bytes[20] == UInt8(ascii: "-") {
            return "\(slice(0..<10))T\(slice(11..<19))\(slice(20..<23)):\(slice(23..<25))"
        }
        if bytes.count == 19, digits(0..<14), digits(15..<19),
           bytes[14] == UInt8(ascii: "+") || bytes[14] == UInt8(ascii: "-") {
            return "\(slice(0..<4))-\(slice(4..<6))-\(slice(6..<8))T\(slice(8..<10)):\(slice(10..<12)):\(slice(12..<14))\(slice(14..<17)):\(slice(17..<19))"
        }
        if (try? Timestamp.parseRFC3339(text)) != nil { return text }
        return nil
    }

    /// `<<HKDevice: 0x174294140>, name:iPhone, …, software:10.0>` → `name:iPhone, …, software:10.0`.
    static func cleanDevice(_ text: String) -> String {
        guard text.hasPrefix("<<HKDevice:"), let close = text.range(of: ">, ") else { return text }
        var rest = String(text[close.upperBound...])
        if rest.hasSuffix(">") { rest.removeLast() }
        return rest
    }
}
