import Foundation
import Testing
@testable import LedgerCore

/// The seeded generator property tests use (every failing expectation carries the seed).
typealias SeededGenerator = SplitMix64

/// Parses JSON text, failing the test (not crashing) when the fixture itself is malformed.
func json(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONValue {
    do {
        return try JSONValue.parse(Array(text.utf8))
    } catch {
        Issue.record("fixture is not JSON: \(error.message): \(text)", sourceLocation: sourceLocation)
        throw error
    }
}

/// The error `JSONValue.parse` throws for `bytes`, or nil when it parses.
func syntaxError(_ bytes: [UInt8]) -> JSONValue.SyntaxError? {
    do {
        _ = try JSONValue.parse(bytes)
        return nil
    } catch {
        return error
    }
}

func syntaxError(_ text: String) -> JSONValue.SyntaxError? {
    syntaxError(Array(text.utf8))
}

/// The error `EventDecoder.decode` throws for `value`, or nil when it decodes.
func fieldError(_ value: JSONValue) -> FieldError? {
    do {
        _ = try EventDecoder.decode(value, makeRandomID: { UUID() })
        return nil
    } catch {
        return error
    }
}

/// The error `EventInput.decode` throws for `text`, or nil when it decodes.
func inputError(_ bytes: [UInt8]) -> InputError? {
    do {
        _ = try EventInput.decode(bytes)
        return nil
    } catch {
        return error
    }
}

func inputError(_ text: String) -> InputError? {
    inputError(Array(text.utf8))
}

/// Builders for event objects: a valid event of each kind, with fields replaced (`.some`)
/// or removed (`nil`) by `changes`.
enum Fixture {
    static let sampleFields: [String: JSONValue] = [
        "kind": .string("sample"),
        "type": .string("steps"),
        "value": .int(100),
        "start": .string("2026-11-29T08:00:00+08:00"),
        "end": .string("2026-11-29T08:10:00+08:00"),
        "source": .string("iPhone"),
    ]

    static let correctionFields: [String: JSONValue] = [
        "kind": .string("correction"),
        "target": .string("6BA7B810-9DAD-11D1-80B4-00C04FD430C8"),
        "action": .string("retract"),
        "reason": .string("duplicate import"),
    ]

    static let grantFields: [String: JSONValue] = [
        "kind": .string("grant"),
        "user": .string("alice"),
        "client": .string("coach-app"),
        "read": .array([.string("steps")]),
    ]

    static let profileFields: [String: JSONValue] = [
        "kind": .string("profile"),
        "user": .string("alice"),
        "zone": .string("Europe/Paris"),
    ]

    static func apply(_ base: [String: JSONValue], _ changes: [String: JSONValue?]) -> JSONValue {
        var object = base
        for (key, value) in changes {
            object[key] = value
        }
        return .object(object)
    }

    static func sample(_ changes: [String: JSONValue?] = [:]) -> JSONValue { apply(sampleFields, changes) }
    static func correction(_ changes: [String: JSONValue?] = [:]) -> JSONValue { apply(correctionFields, changes) }
    static func grant(_ changes: [String: JSONValue?] = [:]) -> JSONValue { apply(grantFields, changes) }
    static func profile(_ changes: [String: JSONValue?] = [:]) -> JSONValue { apply(profileFields, changes) }

    /// A valid steps sample as one line of NDJSON.
    static func sampleLine(value: Int = 100, start: String = "2026-11-29T08:00:00Z",
                           end: String = "2026-11-29T08:10:00Z", extra: String = "") -> String {
        #"{"kind":"sample","type":"steps","value":\#(value),"start":"\#(start)","end":"\#(end)","source":"iPhone"\#(extra)}"#
    }
}

extension JSONValue {
    /// A member of an object, for reading back normalized documents.
    subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }
}
