import CJansson
import Foundation

extension EventDecoder {
    /// The prepared event for a `sample` of the usual shape, read straight from Jansson's tree:
    /// no `JSONValue` dictionary, no second pass to sort keys. Nil whenever the object holds
    /// anything this path does not handle (another kind, `metadata`, an unknown field, a value
    /// of an unexpected JSON type) or anything it would have to refuse: the caller then takes
    /// the general path (`decode`), which gives the same result or names the problem. The tests
    /// hold the two paths to the same id, canonical JSON and typed form on generated inputs.
    static func directSample(_ node: UnsafeMutablePointer<json_t>) -> PreparedEvent? {
        guard ledger_json_type(node) == JSON_OBJECT else { return nil }
        var kind: String?, idText: String?, user: String?, typeText: String?, unit: String?
        var start: String?, end: String?, zone: String?, syncId: String?
        var sourceName: String?, bundle: String?, device: String?, version: String?
        var value: (typed: Double, integer: Int64?)?
        var syncVersion: Int64?

        var iterator = json_object_iter(node)
        while let it = iterator {
            let field = json_object_iter_value(it)!
            let keyLength = json_object_iter_key_len(it)
            let key = json_object_iter_key(it).withMemoryRebound(to: UInt8.self, capacity: keyLength) {
                UnsafeBufferPointer(start: $0, count: keyLength)
            }
            switch Field(key) {
            case .kind: guard let text = string(field) else { return nil }; kind = text
            case .id: guard let text = string(field) else { return nil }; idText = text
            case .user: guard let text = string(field) else { return nil }; user = text
            case .type: guard let text = string(field) else { return nil }; typeText = text
            case .unit: guard let text = string(field) else { return nil }; unit = text
            case .start: guard let text = string(field) else { return nil }; start = text
            case .end: guard let text = string(field) else { return nil }; end = text
            case .zone: guard let text = string(field) else { return nil }; zone = text
            case .syncId: guard let text = string(field) else { return nil }; syncId = text
            case .syncVersion:
                guard ledger_json_type(field) == JSON_INTEGER else { return nil }
                syncVersion = Int64(json_integer_value(field))
            case .value:
                switch ledger_json_type(field) {
                case JSON_INTEGER:
                    let number = Int64(json_integer_value(field))
                    value = (Double(number), number)
                case JSON_REAL: value = (json_real_value(field), nil)
                default: return nil
                }
            case .source:
                switch ledger_json_type(field) {
                case JSON_STRING:
                    sourceName = string(field)
                case JSON_OBJECT:
                    var inner = json_object_iter(field)
                    while let member = inner {
                        let memberValue = json_object_iter_value(member)!
                        let length = json_object_iter_key_len(member)
                        let name = json_object_iter_key(member).withMemoryRebound(to: UInt8.self, capacity: length) {
                            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
                        }
                        guard let text = string(memberValue) else { return nil }
                        switch name {
                        case "name": sourceName = text
                        case "bundle": bundle = text
                        case "device": device = text
                        case "version": version = text
                        default: return nil
                        }
                        inner = json_object_iter_next(field, member)
                    }
                default: return nil
                }
            case nil:
                return nil
            }
            iterator = json_object_iter_next(node, it)
        }

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
        if let zone { guard zone.utf8.count <= 64, Zone.isValid(zone) else { return nil } }
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
        return .checkedSample(id: id, sample, start: start, end: end, integerValue: value.integer)
    }

    /// The fields a sample may have on this path.
    private enum Field {
        case kind, id, user, type, unit, value, start, end, zone, source, syncId, syncVersion

        init?(_ key: UnsafeBufferPointer<UInt8>) {
            switch String(decoding: key, as: UTF8.self) {
            case "kind": self = .kind
            case "id": self = .id
            case "user": self = .user
            case "type": self = .type
            case "unit": self = .unit
            case "value": self = .value
            case "start": self = .start
            case "end": self = .end
            case "zone": self = .zone
            case "source": self = .source
            case "syncId": self = .syncId
            case "syncVersion": self = .syncVersion
            default: return nil
            }
        }
    }

    /// A JSON string's text, or nil for any other JSON type.
    private static func string(_ node: UnsafeMutablePointer<json_t>) -> String? {
        guard ledger_json_type(node) == JSON_STRING, let chars = json_string_value(node) else { return nil }
        let length = json_string_length(node)
        return chars.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
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
    /// `integerValue` the value when the input wrote it as a JSON integer.
    public static func checkedSample(id: UUID, _ sample: Sample, start: String, end: String,
                                     integerValue: Int64? = nil) -> PreparedEvent {
        var out: [UInt8] = []
        out.reserveCapacity(384)
        func key(_ name: StaticString, first: Bool = false) {
            if !first { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            name.withUTF8Buffer { out.append(contentsOf: $0) }
            out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        }
        out.append(UInt8(ascii: "{"))
        key("end", first: true); JSONValue.writeString(end, to: &out)
        key("id"); JSONValue.writeString(id.lowercased, to: &out)
        key("kind"); JSONValue.writeString("sample", to: &out)
        key("source"); out.append(UInt8(ascii: "{"))
        let source = sample.source
        var first = true
        for (name, text) in [("bundle", source.bundle), ("device", source.device), ("name", source.name), ("version", source.version)] {
            guard let text else { continue }
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            JSONValue.writeString(name, to: &out)
            out.append(UInt8(ascii: ":"))
            JSONValue.writeString(text, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        key("start"); JSONValue.writeString(start, to: &out)
        if let syncId = sample.syncId, let syncVersion = sample.syncVersion {
            key("syncId"); JSONValue.writeString(syncId, to: &out)
            key("syncVersion"); out.append(contentsOf: String(syncVersion).utf8)
        }
        key("type"); JSONValue.writeString(sample.type.rawValue, to: &out)
        key("unit"); JSONValue.writeString(sample.unit, to: &out)
        key("user"); JSONValue.writeString(sample.user, to: &out)
        key("value")
        if let integerValue { out.append(contentsOf: String(integerValue).utf8) } else { JSONValue.writeNumber(sample.value, to: &out) }
        if let zone = sample.zone { key("zone"); JSONValue.writeString(zone, to: &out) }
        out.append(UInt8(ascii: "}"))
        return PreparedEvent(id: id, payload: .sample(sample), canonicalBody: out)
    }
}
