/// Where in the input an event came from: a line of NDJSON or an index of an array.
public enum InputLocation: Sendable, Equatable, CustomStringConvertible {
    case line(Int)
    case index(Int)

    public var description: String {
        switch self {
        case .line(let number): "line \(number)"
        case .index(let number): "index \(number)"
        }
    }
}

/// A problem with one field of one event, before its position in the input is known.
public struct FieldError: Error, Sendable, Equatable {
    /// The field, dotted for nested ones (`source.name`); nil when the event as a whole is wrong.
    public var field: String?
    public var message: String

    public init(_ field: String?, _ message: String) {
        self.field = field
        self.message = message
    }
}

/// Invalid input: names the line (or array index) and the field. Exit code 65.
///
/// `description` is the one-line message the CLI prints after `Error: `, e.g.
/// `line 17: 'end' precedes 'start'`.
public struct InputError: Error, Sendable, Equatable, CustomStringConvertible {
    public var location: InputLocation?
    public var field: String?
    public var message: String
    /// The message for a client that may not read the whole log (a non-admin API client),
    /// when `message` says more than it may know: an id conflict names the seq of an event
    /// that may be another user's.
    public var messageForReader: String?

    public init(location: InputLocation?, field: String? = nil, message: String, messageForReader: String? = nil) {
        self.location = location
        self.field = field
        self.message = message
        self.messageForReader = messageForReader
    }

    public init(_ error: FieldError, at location: InputLocation?) {
        self.init(location: location, field: error.field, message: error.message)
    }

    public var description: String {
        guard let location else { return message }
        return "\(location): \(message)"
    }
}

/// `text` with characters that print as nothing or break the line (controls, a byte order
/// mark, other format characters) written as `\u{…}`, and cut after `limit` characters: what
/// an error message quotes must show what was there and stay on one line.
public func visibleCharacters(_ text: String, limit: Int = 4_096) -> String {
    var out = ""
    var count = 0
    for scalar in text.unicodeScalars {
        count += 1
        guard count <= limit else { continue }
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .unassigned, .surrogate, .privateUse:
            out += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
        // A space other than U+0020 (a no-break space, say) looks like one and is not JSON's
        // white space: "near ' '" named nothing one could see (an audit).
        case .spaceSeparator where scalar != " ":
            out += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
        default:
            out.unicodeScalars.append(scalar)
        }
    }
    if count > limit { out += "… (\(count - limit) more characters)" }
    return out
}
