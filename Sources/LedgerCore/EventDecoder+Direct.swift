import CJansson
import Foundation

extension EventDecoder {
    /// The prepared event for a `sample` of the usual shape, read straight from Jansson's tree:
    /// no `JSONValue` dictionary, no second pass to sort keys. Nil whenever the object holds
    /// anything this path does not handle (another kind, `metadata`, an unknown field, a value
    /// of an unexpected JSON type) or anything it would have to refuse: the caller then takes
    /// the general path (`decode`), which gives the same result or names the problem. The tests
    /// hold the two paths to the same id, canonical JSON and typed form on generated inputs.
    static func directSample(_ node: UnsafeMutablePointer<json_t>, digesting: Bool = true) -> PreparedEvent? {
        guard ledger_json_type(node) == JSON_OBJECT else { return nil }
        var kind: String?, idText: String?, user: String?, typeText: String?, unit: String?
        var start: String?, end: String?, zone: String?, syncId: String?
        var sourceName: String?, bundle: String?, device: String?, version: String?
        var value: (typed: Double, integer: Int64?)?
        var syncVersion: Int64?

        let understood = JSONValue.forEachMember(of: node) { key, field in
            guard let name = Field(rawValue: key) else { return false }
            switch name {
            case .value:
                switch ledger_json_type(field) {
                case JSON_INTEGER:
                    let number = Int64(json_integer_value(field))
                    value = (Double(number), number)
                case JSON_REAL: value = (JSONValue.positiveZero(json_real_value(field)), nil)
                default: return false
                }
            case .syncVersion:
                guard ledger_json_type(field) == JSON_INTEGER else { return false }
                syncVersion = Int64(json_integer_value(field))
            case .source:
                if let text = JSONValue.text(of: field) {
                    sourceName = text
                    return true
                }
                guard ledger_json_type(field) == JSON_OBJECT else { return false }
                return JSONValue.forEachMember(of: field) { member, memberValue in
                    guard let text = JSONValue.text(of: memberValue) else { return false }
                    switch member {
                    case "name": sourceName = text
                    case "bundle": bundle = text
                    case "device": device = text
                    case "version": version = text
                    default: return false
                    }
                    return true
                }
            case .kind, .id, .user, .type, .unit, .start, .end, .zone, .syncId:
                guard let text = JSONValue.text(of: field) else { return false }
                switch name {
                case .kind: kind = text
                case .id: idText = text
                case .user: user = text
                case .type: typeText = text
                case .unit: unit = text
                case .start: start = text
                case .end: end = text
                case .zone: zone = text
                default: syncId = text
                }
            }
            return true
        }
        guard understood else { return nil }

        // The checks of `decodeSample`, in the same terms; any failure goes the general way.
        guard kind == "sample", let typeText, typeText.utf8.count <= 128, let type = QuantityType(name: typeText),
              let value, value.typed.isFinite, value.typed >= 0,
              let start, let end,
              let startInstant = try? Timestamp.parseRFC3339(start).0,
              let endInstant = try? Timestamp.parseRFC3339(end).0, endInstant >= startInstant,
              let sourceName, isName(sourceName)
        else { return nil }
        let userName = user ?? "default"
        guard isName(userName) else { return nil }
        guard let unitName = sampleUnit(unit, of: type) else { return nil }
        guard Sample.rangeProblem(value: value.typed, unit: unitName, type: type, start: startInstant, end: endInstant) == nil
        else { return nil }
        if let zone { guard Zone.isValid(zone) else { return nil } }
        for optional in [bundle, device, version, syncId] {
            if let text = optional, !isName(text) { return nil }
        }
        guard (syncId == nil) == (syncVersion == nil), (syncVersion ?? 0) >= 0 else { return nil }
        let sample = Sample(user: userName, type: type, value: value.typed, unit: unitName, start: startInstant,
                            end: endInstant, zone: zone,
                            source: SampleSource(name: sourceName, bundle: bundle, device: device, version: version),
                            syncId: syncId, syncVersion: syncVersion)
        let id: UUID
        if let idText {
            guard let given = UUID(canonical: idText) else { return nil }
            id = given
        } else {
            id = derivedID(for: sample)
        }
        return .checkedSample(id: id, sample, start: start, end: end, integerValue: value.integer, digesting: digesting)
    }

    /// The fields a sample may have on this path.
    private enum Field: String {
        case kind, id, user, type, unit, value, start, end, zone, source, syncId, syncVersion
    }

    /// The unit `decodeSample` stores for `given` (nil: none given): `given` if it fits the
    /// type, `count` by default for steps and flights; nil when it would refuse the sample.
    public static func sampleUnit(_ given: String?, of type: QuantityType) -> String? {
        if let given {
            return given.utf8.count <= 32 && type.factor(from: given) != nil ? given : nil
        }
        return type == .steps || type == .flights ? "count" : nil
    }

    /// What `checkName` accepts: non-empty, at most 1 KiB, no control characters.
    public static func isName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= maxNameBytes && !containsControlCharacter(text)
    }
}

extension PreparedEvent {
    /// A sample whose fields were checked as `EventDecoder.decodeSample` checks them, with its
    /// canonical JSON written directly — keys in UTF-8 order, as `JSONValue.write` sorts them,
    /// and the document normalized as `decode` normalizes it (type by its name, default user
    /// and unit, the source as an object). `start` and `end` are the texts as given, and
    /// `integerValue` the value when the input wrote it as a JSON integer. With
    /// `digesting: false` the content digest is left for later (`computeContentDigest`, or the
    /// appending thread).
    public static func checkedSample(id: UUID, _ sample: consuming Sample, start: String, end: String,
                                     integerValue: Int64? = nil, digesting: Bool = true) -> PreparedEvent {
        checkedSample(id: id, consume sample, integerValue: integerValue, lengths: (start.utf8.count, end.utf8.count),
                      start: { $0.jsonString(start) }, end: { $0.jsonString(end) }, digesting: digesting)
    }

    /// `checkedSample` with `start` and `end` held inline (an import rewrites each export date
    /// into RFC 3339 without making a string of it). With `digesting: false` the content digest
    /// is left for later (`computeContentDigest`, or the appending thread).
    public static func checkedSample(id: UUID, _ sample: consuming Sample, start: ShortText, end: ShortText,
                                     digesting: Bool = true) -> PreparedEvent {
        checkedSample(id: id, consume sample, lengths: (start.count, end.count),
                      start: { out in start.withBytes { out.jsonString(utf8: $0) } },
                      end: { out in end.withBytes { out.jsonString(utf8: $0) } }, digesting: digesting)
    }

    /// Both forms of the sample, made through a pointer to it before it moves into the event.
    private static func checkedSample(id: UUID, _ sample: consuming Sample, integerValue: Int64? = nil, lengths: (start: Int, end: Int),
                                      start: (inout ByteCursor) -> Void, end: (inout ByteCursor) -> Void,
                                      digesting: Bool = true) -> PreparedEvent {
        let (body, typed) = withUnsafePointer(to: &sample) { sample in
            (canonicalSample(id: id, sample, integerValue: integerValue, lengths: lengths, start: start, end: end),
             EventCodec.encode(id: id, sample: sample))
        }
        return PreparedEvent(id: id, payload: .sample(consume sample), canonicalBody: body, typed: typed, digesting: digesting)
    }

    /// The canonical JSON of the sample `checkedSample` moves into its event, read through a
    /// pointer (the closures that write it captured the sample by copy otherwise, every
    /// string retained: 6 % of an import's reading thread).
    /// `lengths` are the start's and end's texts' in bytes, and `start` and `end` write each as
    /// a JSON string.
    private static func canonicalSample(id: UUID, _ sample: UnsafePointer<Sample>, integerValue: Int64? = nil, lengths: (start: Int, end: Int),
                                        start writeStart: (inout ByteCursor) -> Void,
                                        end writeEnd: (inout ByteCursor) -> Void) -> [UInt8] {
        // Keys, punctuation, the id and two numbers fit in 320 bytes; each string in its size
        // (`jsonStringSize`, exact when it needs no escape, as nearly every one does), the dates
        // in their bound. Under 1 KiB the scratch space is on the stack: with every string at
        // its bound, an export's sample needed about 1.2 KiB, allocated and freed per record.
        func bound(_ text: String?) -> Int { text.map(ByteCursor.jsonStringSize) ?? 0 }
        let capacity = 320 + ByteCursor.jsonStringBound(lengths.start) + ByteCursor.jsonStringBound(lengths.end) + bound(sample.pointee.type.rawValue) + bound(sample.pointee.unit) + bound(sample.pointee.user)
            + bound(sample.pointee.source.name) + bound(sample.pointee.source.bundle) + bound(sample.pointee.source.device) + bound(sample.pointee.source.version) + bound(sample.pointee.syncId)
            + bound(sample.pointee.zone)
        let body = ByteCursor.withScratch(capacity: capacity) { out in
            func key(_ name: StaticString, first: Bool = false) {
                if !first { out.u8(UInt8(ascii: ",")) }
                out.u8(UInt8(ascii: "\""))
                out.bytes(name)
                out.u8(UInt8(ascii: "\""))
                out.u8(UInt8(ascii: ":"))
            }
            out.u8(UInt8(ascii: "{"))
            key("end", first: true); writeEnd(&out)
            key("id"); out.u8(UInt8(ascii: "\"")); out.lowercased(id); out.u8(UInt8(ascii: "\""))
            key("kind"); out.bytes("\"sample\"")
            key("source")
            // As canonical JSON has the source: its present fields in key order.
            out.u8(UInt8(ascii: "{"))
            var firstSourceField = true
            func sourceField(_ name: StaticString, _ value: String?) {
                guard let value else { return }
                key(name, first: firstSourceField)
                firstSourceField = false
                out.jsonString(value)
            }
            sourceField("bundle", sample.pointee.source.bundle)
            sourceField("device", sample.pointee.source.device)
            sourceField("name", sample.pointee.source.name)
            sourceField("version", sample.pointee.source.version)
            out.u8(UInt8(ascii: "}"))
            key("start"); writeStart(&out)
            if let syncId = sample.pointee.syncId, let syncVersion = sample.pointee.syncVersion {
                key("syncId"); out.jsonString(syncId)
                key("syncVersion"); out.jsonInteger(syncVersion)
            }
            key("type"); out.jsonString(sample.pointee.type.rawValue)
            key("unit"); out.jsonString(sample.pointee.unit)
            key("user"); out.jsonString(sample.pointee.user)
            key("value")
            if let integerValue { out.jsonInteger(integerValue) } else { out.jsonNumber(sample.pointee.value) }
            if let zone = sample.pointee.zone { key("zone"); out.jsonString(zone) }
            out.u8(UInt8(ascii: "}"))
        }
        return body
    }
}

/// Up to 32 bytes of text held inline, with no storage of its own: an RFC 3339 timestamp an
/// import makes for every sample's start and end.
public struct ShortText: Sendable {
    public static let capacity = 32
    private var storage: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    public private(set) var count = 0

    /// Fills the text with `write`, which gets room for `capacity` bytes and returns how many it
    /// wrote.
    public init(_ write: (UnsafeMutableBufferPointer<UInt8>) -> Int) {
        count = withUnsafeMutableBytes(of: &storage) { write($0.assumingMemoryBound(to: UInt8.self)) }
        precondition(count <= ShortText.capacity)
    }

    /// Calls `body` with the text's bytes.
    public func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: storage) { try body(UnsafeBufferPointer(rebasing: $0.assumingMemoryBound(to: UInt8.self)[..<count])) }
    }
}
