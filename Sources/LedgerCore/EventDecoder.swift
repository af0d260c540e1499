import Foundation

/// Turns one JSON object into a validated `Event` (SPEC §3.1), or a `FieldError` naming the field.
///
/// Checks here need nothing but the object itself. Checks against the log (duplicate ids,
/// correction targets, sync versions) are the log's, at append time.
public enum EventDecoder {
    /// Longest accepted name-like string (user, client, source fields, sync id), in UTF-8 bytes.
    public static let maxNameBytes = 1024
    /// Longest accepted correction reason and metadata string, in UTF-8 bytes.
    public static let maxTextBytes = 16 * 1024

    /// Validates and normalizes `value`. `makeRandomID` supplies ids for non-sample events sent
    /// without one (injected so tests can be deterministic).
    /// Fields of a stored event that the ledger assigns, never taken from input.
    public static let envelopeFields = ["seq", "recorded", "hash"]

    public static func decode(_ value: JSONValue,
                              makeRandomID: () -> UUID = { UUID() }) throws(FieldError) -> Event {
        guard var object = value.objectValue else {
            throw FieldError(nil, "expected a JSON object, got \(value.typeName)")
        }
        guard let kindValue = object["kind"] else { throw FieldError("kind", "'kind' is required") }
        guard let kindName = kindValue.stringValue else {
            throw FieldError("kind", "'kind' must be a string, got \(kindValue.typeName)")
        }
        guard let kind = EventKind(rawValue: kindName) else {
            throw FieldError("kind", "unknown kind '\(clip(kindName))' (expected sample, correction, grant, revoke or profile)")
        }
        // `seq`, `recorded` and `hash` are the ledger's to assign (SPEC §3): kept as unknown
        // fields they would be printed beside the ledger's own, and a reader taking the last
        // of two keys would take the client's. They are dropped, which also lets the output
        // of `ledger log` be appended to another ledger as it is.
        for envelope in EventDecoder.envelopeFields { object.removeValue(forKey: envelope) }
        var givenID: UUID?
        if let idValue = object["id"] {
            guard let text = idValue.stringValue else {
                throw FieldError("id", "'id' must be a UUID string, got \(idValue.typeName)")
            }
            guard let uuid = UUID(canonical: text) else {
                throw FieldError("id", "'id' is not a UUID: '\(clip(text))'")
            }
            givenID = uuid
        }

        let payload: Event.Payload
        switch kind {
        case .sample:
            let sample = try decodeSample(&object)
            payload = .sample(sample)
            if givenID == nil { givenID = derivedID(for: sample) }
        case .correction:
            payload = .correction(try decodeCorrection(&object))
        case .grant:
            payload = .grant(try decodeAccess(&object, kind: "grant"))
        case .revoke:
            payload = .revoke(try decodeAccess(&object, kind: "revoke"))
        case .profile:
            payload = .profile(try decodeProfile(&object))
        }
        let id = givenID ?? makeRandomID()
        object["id"] = .string(id.lowercased)
        return Event(id: id, payload: payload, document: .object(object))
    }

    /// The id of a sample sent without one: a hash of user, type, start, end, value, unit and
    /// source name, so re-sending the same sample is a duplicate, not a second sample.
    ///
    /// A sample with a `syncId` also hashes its `syncId` and `syncVersion`: versions of one
    /// record may share every other field (a version 3 that restores version 1's value), and
    /// two records of one source may too, yet each is its own event. Without them, version 3
    /// would get version 1's id and be refused as a conflict. Samples without a `syncId` keep
    /// the ids they always had.
    public static func derivedID(for sample: Sample) -> UUID {
        var name: [UInt8] = Array("ledger.sample.v1".utf8)
        func add(_ text: String) {
            name.append(0)
            name.append(contentsOf: text.utf8)
        }
        add(sample.user)
        add(sample.type.rawValue)
        add(String(sample.start.microseconds))
        add(String(sample.end.microseconds))
        var number: [UInt8] = []
        JSONValue.writeNumber(sample.value, to: &number)
        add(String(decoding: number, as: UTF8.self))
        add(sample.unit)
        add(sample.source.name)
        if let syncId = sample.syncId, let syncVersion = sample.syncVersion {
            add("sync")
            add(syncId)
            add(String(syncVersion))
        }
        return UUID.derived(from: name)
    }

    // MARK: - Kinds

    static func decodeSample(_ object: inout [String: JSONValue]) throws(FieldError) -> Sample {
        let user = try name(object, "user") ?? "default"
        object["user"] = .string(user)
        let type = try quantityType(object, "type", required: true)!
        object["type"] = .string(type.rawValue)
        let value = try number(object, "value", required: true)!
        let unit: String
        if let given = try string(object, "unit", limit: 32) {
            guard type.factor(from: given) != nil else {
                throw FieldError("unit", "unit '\(clip(given))' does not fit type '\(type.rawValue)' (expected \(type.acceptedUnits.joined(separator: ", ")))")
            }
            unit = given
        } else if type == .steps || type == .flights {
            unit = "count"
            object["unit"] = .string(unit)
        } else {
            throw FieldError("unit", "'unit' is required for \(type.rawValue) (one of \(type.acceptedUnits.joined(separator: ", ")))")
        }
        let start = try timestamp(object, "start", required: true)!
        let end = try timestamp(object, "end", required: true)!
        guard end >= start else { throw FieldError("end", "'end' precedes 'start'") }
        if let problem = Sample.rangeProblem(value: value, unit: unit, type: type, start: start, end: end) {
            throw FieldError(problem.field, problem.message)
        }
        let zone = try zoneName(object, "zone")
        let source = try decodeSource(&object)
        let syncId = try name(object, "syncId")
        var syncVersion: Int64?
        if let versionValue = object["syncVersion"] {
            var whole: Int64?
            switch versionValue {
            case .int(let number): whole = number
            case .double(let number) where number.isFinite && number == number.rounded() && abs(number) < 9e15:
                whole = Int64(number)
            default: whole = nil
            }
            guard let version = whole, version >= 0 else {
                throw FieldError("syncVersion", "'syncVersion' must be a whole number ≥ 0, got \(describe(versionValue))")
            }
            guard syncId != nil else {
                throw FieldError("syncVersion", "'syncVersion' needs a 'syncId'")
            }
            syncVersion = version
        } else if syncId != nil {
            throw FieldError("syncVersion", "'syncVersion' is required with 'syncId'")
        }
        if let metadata = object["metadata"] {
            guard let members = metadata.objectValue else {
                throw FieldError("metadata", "'metadata' must be an object, got \(metadata.typeName)")
            }
            for (key, entry) in members {
                guard key.utf8.count <= maxNameBytes else {
                    throw FieldError("metadata", "a 'metadata' key is longer than 1 KiB")
                }
                switch entry {
                case .string(let text) where text.utf8.count <= maxTextBytes: continue
                case .string:
                    throw FieldError("metadata.\(clip(key))", "'metadata.\(clip(key))' is longer than 16 KiB")
                case .int, .double: continue
                default:
                    throw FieldError("metadata.\(clip(key))", "'metadata.\(clip(key))' must be a string (up to 16 KiB) or a number, got \(entry.typeName)")
                }
            }
        }
        return Sample(user: user, type: type, value: value, unit: unit, start: start, end: end,
                      zone: zone, source: source, syncId: syncId, syncVersion: syncVersion)
    }

    static func decodeSource(_ object: inout [String: JSONValue]) throws(FieldError) -> SampleSource {
        guard let value = object["source"] else { throw FieldError("source", "'source' is required") }
        switch value {
        case .string(let nameText):
            try checkName(nameText, field: "source")
            object["source"] = .object(["name": .string(nameText)])
            return SampleSource(name: nameText)
        case .object(let members):
            guard members["name"] != nil else { throw FieldError("source.name", "'source.name' is required") }
            let sourceName = try name(members, "name", prefix: "source.")!
            let bundle = try name(members, "bundle", prefix: "source.")
            let device = try name(members, "device", prefix: "source.")
            let version = try name(members, "version", prefix: "source.")
            return SampleSource(name: sourceName, bundle: bundle, device: device, version: version)
        default:
            throw FieldError("source", "'source' must be a name or an object with a 'name', got \(value.typeName)")
        }
    }

    static func decodeCorrection(_ object: inout [String: JSONValue]) throws(FieldError) -> Correction {
        guard let targetValue = object["target"] else { throw FieldError("target", "'target' is required") }
        guard let targetText = targetValue.stringValue, let target = UUID(canonical: targetText) else {
            throw FieldError("target", "'target' must be the UUID of a sample, got \(describe(targetValue))")
        }
        object["target"] = .string(target.lowercased)
        guard let actionText = try string(object, "action", limit: 32) else {
            throw FieldError("action", "'action' is required (retract or amend)")
        }
        guard let action = Correction.Action(rawValue: actionText) else {
            throw FieldError("action", "unknown action '\(clip(actionText))' (expected retract or amend)")
        }
        guard let reason = try string(object, "reason", limit: maxTextBytes),
              !reason.allSatisfy(\.isWhitespace)
        else { throw FieldError("reason", "'reason' is required and must not be empty: corrections are for auditors") }
        var correction = Correction(target: target, action: action, reason: reason)
        let amendFields = ["value", "unit", "start", "end"]
        switch action {
        case .retract:
            if let field = amendFields.first(where: { object[$0] != nil }) {
                throw FieldError(field, "'\(field)' has no meaning in a retraction; use action 'amend'")
            }
        case .amend:
            guard amendFields.contains(where: { object[$0] != nil }) else {
                throw FieldError("action", "an amendment must change at least one of 'value', 'unit', 'start', 'end'")
            }
            correction.value = try number(object, "value", required: false)
            correction.unit = try string(object, "unit", limit: 32)
            correction.start = try timestamp(object, "start", required: false)
            correction.end = try timestamp(object, "end", required: false)
            if let start = correction.start, let end = correction.end, end < start {
                throw FieldError("end", "'end' precedes 'start'")
            }
        }
        return correction
    }

    static func decodeAccess(_ object: inout [String: JSONValue], kind: String) throws(FieldError) -> AccessChange {
        let user = try name(object, "user") ?? "default"
        object["user"] = .string(user)
        guard let client = try name(object, "client") else { throw FieldError("client", "'client' is required") }
        let read = try typeList(&object, "read")
        let share = try typeList(&object, "share")
        guard !read.isEmpty || !share.isEmpty else {
            throw FieldError("read", "a \(kind) must name at least one type in 'read' or 'share'")
        }
        return AccessChange(user: user, client: client, read: read, share: share)
    }

    static func decodeProfile(_ object: inout [String: JSONValue]) throws(FieldError) -> Profile {
        let user = try name(object, "user") ?? "default"
        object["user"] = .string(user)
        let zone = try zoneName(object, "zone")
        var priority: [QuantityType: [String]]?
        if let value = object["priority"] {
            guard let members = value.objectValue else {
                throw FieldError("priority", "'priority' must be an object from type to a list of source names, got \(value.typeName)")
            }
            var result: [QuantityType: [String]] = [:]
            var normalized: [String: JSONValue] = [:]
            for (key, list) in members {
                guard let type = QuantityType(name: key) else {
                    throw FieldError("priority", "unknown type '\(clip(key))' in 'priority' (expected \(QuantityType.acceptedNames))")
                }
                guard result[type] == nil else {
                    throw FieldError("priority.\(type.rawValue)", "'priority' names \(type.rawValue) twice")
                }
                guard case .array(let items) = list else {
                    throw FieldError("priority.\(type.rawValue)", "'priority.\(type.rawValue)' must be a list of source names, got \(list.typeName)")
                }
                var names: [String] = []
                var seen: Set<[UInt8]> = []  // by bytes (`sameName`), and in constant time per name
                for item in items {
                    guard let sourceName = item.stringValue else {
                        throw FieldError("priority.\(type.rawValue)", "'priority.\(type.rawValue)' must hold source names, got \(item.typeName)")
                    }
                    try checkName(sourceName, field: "priority.\(type.rawValue)")
                    guard seen.insert(Array(sourceName.utf8)).inserted else {
                        throw FieldError("priority.\(type.rawValue)", "'priority.\(type.rawValue)' names '\(clip(sourceName))' twice")
                    }
                    names.append(sourceName)
                }
                result[type] = names
                normalized[type.rawValue] = .array(names.map { .string($0) })
            }
            priority = result
            object["priority"] = .object(normalized)
        }
        guard zone != nil || priority != nil else {
            throw FieldError("zone", "a profile must set 'zone' or 'priority'")
        }
        return Profile(user: user, zone: zone, priority: priority)
    }

    // MARK: - Fields

    static func string(_ object: [String: JSONValue], _ field: String, prefix: String = "",
                       limit: Int) throws(FieldError) -> String? {
        guard let value = object[field] else { return nil }
        guard let text = value.stringValue else {
            throw FieldError(prefix + field, "'\(prefix + field)' must be a string, got \(value.typeName)")
        }
        guard text.utf8.count <= limit else {
            throw FieldError(prefix + field, "'\(prefix + field)' is longer than \(limit >= 1024 ? "\(limit / 1024) KiB" : "\(limit) bytes")")
        }
        return text
    }

    /// A name-like string: non-empty, at most 1 KiB, no control characters.
    static func name(_ object: [String: JSONValue], _ field: String, prefix: String = "") throws(FieldError) -> String? {
        guard let text = try string(object, field, prefix: prefix, limit: maxNameBytes) else { return nil }
        try checkName(text, field: prefix + field)
        return text
    }

    public static func checkName(_ text: String, field: String) throws(FieldError) {
        guard !text.isEmpty else { throw FieldError(field, "'\(field)' must not be empty") }
        guard text.utf8.count <= maxNameBytes else { throw FieldError(field, "'\(field)' is longer than 1 KiB") }
        guard !containsControlCharacter(text) else {
            throw FieldError(field, "'\(field)' contains a control character")
        }
    }

    /// What `checkName` would refuse in `text`, or nil: for filters (`--user`, `?user=`).
    public static func nameProblem(_ text: String, field: String) -> String? {
        do throws(FieldError) { try checkName(text, field: field) } catch { return error.message }
        return nil
    }

    static func containsControlCharacter(_ text: String) -> Bool {
        // In UTF-8, U+0000–U+001F and U+007F are single bytes, U+0080–U+009F are C2 80–C2 9F.
        return text.withUTF8Bytes { bytes in
            // Eight ASCII bytes at a time while they last (names nearly always are); from the
            // first word holding a byte of 0x80 or more, one byte at a time, which also sees a
            // C2 and the byte after it together.
            var index = ByteScan.asciiPrefix(of: bytes) { ByteScan.hasByte(below: 0x20, in: $0) || ByteScan.hasByte(0x7F, in: $0) }
            if index < 0 { return true }
            while index < bytes.count {
                let byte = bytes[index]
                if byte < 0x20 || byte == 0x7F { return true }
                if byte == 0xC2, index + 1 < bytes.count, bytes[index + 1] >= 0x80, bytes[index + 1] <= 0x9F { return true }
                index += 1
            }
            return false
        }
    }

    static func number(_ object: [String: JSONValue], _ field: String, required: Bool) throws(FieldError) -> Double? {
        guard let value = object[field] else {
            if required { throw FieldError(field, "'\(field)' is required") }
            return nil
        }
        guard let number = value.numberValue else {
            throw FieldError(field, "'\(field)' must be a number, got \(value.typeName)")
        }
        guard number.isFinite else { throw FieldError(field, "'\(field)' must be finite") }
        guard number >= 0 else { throw FieldError(field, "'\(field)' must not be negative, got \(describe(value))") }
        return number
    }

    static func timestamp(_ object: [String: JSONValue], _ field: String, required: Bool) throws(FieldError) -> Timestamp? {
        guard let value = object[field] else {
            if required { throw FieldError(field, "'\(field)' is required") }
            return nil
        }
        guard let text = value.stringValue else {
            throw FieldError(field, "'\(field)' must be an RFC 3339 timestamp string, got \(value.typeName)")
        }
        let instant: Timestamp
        do {
            instant = try Timestamp.parseRFC3339(text).0
        } catch .malformed {
            throw FieldError(field, "'\(field)' is not an RFC 3339 timestamp with an offset: '\(clip(text))' (like 2026-11-29T08:00:00+08:00)")
        } catch {
            throw FieldError(field, "'\(field)' is a date or time that does not exist: '\(clip(text))'")
        }
        if let problem = Timestamp.rangeProblem(instant, field: field, spelled: clip(text)) { throw FieldError(field, problem) }
        return instant
    }

    static func zoneName(_ object: [String: JSONValue], _ field: String) throws(FieldError) -> String? {
        guard let text = try string(object, field, limit: 64) else { return nil }
        guard Zone.isValid(text) else {
            throw FieldError(field, "'\(field)' is an unknown time zone: '\(clip(text))' (expected an IANA name like Europe/Paris, or ±HH:MM)")
        }
        return text
    }

    static func quantityType(_ object: [String: JSONValue], _ field: String, required: Bool) throws(FieldError) -> QuantityType? {
        guard let text = try string(object, field, limit: 128) else {
            if required { throw FieldError(field, "'\(field)' is required") }
            return nil
        }
        guard let type = QuantityType(name: text) else {
            throw FieldError(field, "unknown type '\(clip(text))' (expected \(QuantityType.acceptedNames))")
        }
        return type
    }

    static func typeList(_ object: inout [String: JSONValue], _ field: String) throws(FieldError) -> [QuantityType] {
        guard let value = object[field] else { return [] }
        guard case .array(let items) = value else {
            throw FieldError(field, "'\(field)' must be a list of types, got \(value.typeName)")
        }
        var types: [QuantityType] = []
        for item in items {
            guard let text = item.stringValue else {
                throw FieldError(field, "'\(field)' must hold type names, got \(item.typeName)")
            }
            guard let type = QuantityType(name: text) else {
                throw FieldError(field, "unknown type '\(clip(text))' in '\(field)' (expected \(QuantityType.acceptedNames))")
            }
            if !types.contains(type) { types.append(type) }
        }
        object[field] = .array(types.map { .string($0.rawValue) })
        return types
    }

    static func describe(_ value: JSONValue) -> String {
        switch value {
        case .string(let text): "'\(clip(text))'"
        case .int(let number): String(number)
        case .double(let number) where !number.isFinite:
            String(number)
        case .double(let number):
            {
                var bytes: [UInt8] = []
                JSONValue.writeNumber(number, to: &bytes)
                return String(decoding: bytes, as: UTF8.self)
            }()
        default: value.typeName
        }
    }

    /// Keeps error messages to one readable line however long the offending value is.
    public static func clip(_ text: String) -> String {
        var clean = String(text.unicodeScalars.map { $0.value < 0x20 ? "?" : Character($0) })
        if clean.count > 60 { clean = String(clean.prefix(57)) + "..." }
        return clean
    }
}
