import CJansson
import Foundation

/// Splits what `ledger append` or `POST /v1/events` received into located JSON values.
///
/// Accepted shapes (SPEC §3.1): NDJSON (one object per line; blank lines skipped), a single
/// object (which may span lines), or an array of objects. Errors name the line, or for an
/// array the 0-based index, and never crash on hostile input.
public enum EventInput {
    /// A UTF-8 byte order mark, which may start the input (RFC 8259 §8.1 lets a parser ignore it).
    static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// The longest line (or single document) accepted.
    public static let maxLineBytes = 1 << 20

    /// Parses and validates every event in `bytes`; throws the first problem found.
    public static func decode(_ bytes: [UInt8],
                              makeRandomID: () -> UUID = { UUID() }) throws(InputError) -> [(InputLocation, Event)] {
        let values = try parse(bytes)
        var events: [(InputLocation, Event)] = []
        events.reserveCapacity(values.count)
        for (location, value) in values {
            do {
                events.append((location, try decodeEvent(value, at: location, makeRandomID: makeRandomID)))
            } catch {
                throw values.count == 1 ? relocated(error, in: bytes) : error
            }
        }
        return events
    }

    /// `error`, named at its field's line when `bytes` is one object spread over lines
    /// (pretty-printed) and the error is the object's: it named the object's first line, which
    /// in a file of 9 lines said nothing of where to look (an audit). A field the object lacks
    /// keeps the first line.
    static func relocated(_ error: InputError, in bytes: [UInt8]) -> InputError {
        guard let field = error.field, case .line(let at)? = error.location,
              case .single(_, let first)? = try? shape(of: bytes), first == at,
              let fieldLine = line(ofField: field, in: bytes) else { return error }
        var moved = error
        moved.location = .line(fieldLine)
        return moved
    }

    /// `EventDecoder.decode`, its error located.
    static func decodeEvent(_ value: JSONValue, at location: InputLocation,
                            makeRandomID: () -> UUID) throws(InputError) -> Event {
        do {
            return try EventDecoder.decode(value, makeRandomID: makeRandomID)
        } catch {
            throw InputError(error, at: location)
        }
    }

    /// Parses and validates the events of `bytes` one at a time, handing each to `body` before
    /// reading the next: NDJSON is never held in memory as parsed values. Throws the first
    /// problem found (an `InputError`) or whatever `body` throws; events before it have
    /// already been handed over, so callers make the whole run one transaction.
    public static func forEach(_ bytes: [UInt8], makeRandomID: () -> UUID = { UUID() },
                               _ body: (InputLocation, Event) throws -> Void) throws {
        try forEachValue(bytes) { location, value in
            try body(location, try decodeEvent(value, at: location, makeRandomID: makeRandomID))
        }
    }

    /// The located JSON values of `bytes`, not yet validated as events.
    public static func parse(_ bytes: [UInt8]) throws(InputError) -> [(InputLocation, JSONValue)] {
        var values: [(InputLocation, JSONValue)] = []
        do {
            try forEachValue(bytes) { values.append(($0, $1)) }
        } catch let error as InputError {
            throw error
        } catch {
            preconditionFailure("collecting values throws nothing else: \(error)")
        }
        return values
    }

    /// Parses and validates the events of `bytes` one at a time, like `forEach`, handing each
    /// over ready to append (canonical JSON and typed form made). NDJSON samples of the usual
    /// shape go straight from Jansson's tree to the prepared event
    /// (`EventDecoder.directSample`); everything else, and everything that path cannot vouch
    /// for, takes the general path, so errors and results are the same either way.
    /// With `digesting: false`, samples on the direct path come without their content digest
    /// (`PreparedEvent.computeContentDigest`).
    public static func forEachPrepared(_ bytes: [UInt8], makeRandomID: () -> UUID = { UUID() }, digesting: Bool = true,
                                       _ body: (InputLocation, PreparedEvent) throws -> Void) throws {
        try forEachValue(bytes, line: { location, node in
            guard let prepared = EventDecoder.directSample(node, digesting: digesting) else { return false }
            try body(location, prepared)
            return true
        }) { location, value in
            try body(location, PreparedEvent(try decodeEvent(value, at: location, makeRandomID: makeRandomID)))
        }
    }

    /// Parses, validates and prepares every event of `bytes`; throws the first problem found.
    public static func prepare(_ bytes: [UInt8],
                               makeRandomID: () -> UUID = { UUID() }) throws(InputError) -> [(InputLocation, PreparedEvent)] {
        var prepared: [(InputLocation, PreparedEvent)] = []
        do {
            try forEachPrepared(bytes, makeRandomID: makeRandomID) { prepared.append(($0, $1)) }
        } catch let error as InputError {
            throw error
        } catch {
            preconditionFailure("collecting events throws nothing else: \(error)")
        }
        return prepared
    }

    /// How a document is laid out (SPEC §3.1).
    enum Shape {
        case array
        /// A whole document that is one object (possibly pretty-printed), at this line.
        case single(JSONValue, line: Int)
        case lines
    }

    static func shape(of bytes: [UInt8]) throws(InputError) -> Shape {
        guard let first = bytes.firstIndex(where: { !isSpace($0) }) else {
            throw InputError(location: nil, message: "no events in input")
        }
        if bytes[first] == UInt8(ascii: "[") { return .array }
        guard bytes[first] == UInt8(ascii: "{") else { return .lines }
        // An object on one line, what an HTTP client POSTs, is read as NDJSON of that one line:
        // the same event and the same errors (a line that does not parse as a whole went that
        // way already), parsed once and prepared straight from Jansson's tree, where reading it
        // as a single document built its `JSONValue` first and took the general decoder (a
        // quarter of a POST's instructions on libmicrohttpd's thread, callgrind).
        if let last = bytes.lastIndex(where: { !isSpace($0) }), !bytes[first...last].contains(0x0A) { return .lines }
        let line = bytes[..<first].count(where: { $0 == 0x0A }) + 1
        let whole = bytes.count <= maxLineBytes ? Result { () throws(JSONValue.SyntaxError) in try JSONValue.parse(bytes) } : nil
        if case .success(let value)? = whole, case .object = value { return .single(value, line: line) }
        // Not one object. NDJSON when its first line is a value on its own; otherwise it is one
        // object spread over lines (pretty-printed), and the problem is said for the whole.
        // (A bad first line followed by a good one is NDJSON too: the line reader names line 1.)
        func parsesAlone(from start: Int) -> (parses: Bool, end: Int) {
            let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
            let parses = bytes.withUnsafeBytes { raw in
                (try? JSONValue.parse(UnsafeRawBufferPointer(rebasing: raw[start..<end]))) != nil
            }
            return (parses, end)
        }
        let firstLine = parsesAlone(from: first)
        if firstLine.parses { return .lines }
        // One line and nothing after it but blanks is NDJSON too, so that a truncated last
        // line is named as line 1, not as the line after its newline.
        guard let second = bytes[firstLine.end...].firstIndex(where: { !isSpace($0) }) else { return .lines }
        if parsesAlone(from: second).parses { return .lines }
        switch whole {
        case .failure(let error)?:
            throw InputError(location: .line(error.line), message: bytes.withUnsafeBytes { malformed(error, column: error.column, in: $0) })
        case nil:
            throw InputError(location: .line(line), message: "the object is longer than 1 MiB (\(bytes.count) bytes read)")
        case .success?:
            return .lines  // a value that is not an object: the line reader says what is wrong
        }
    }

    /// Hands each located JSON value of `bytes` to `body`, in order. An NDJSON line's tree is
    /// first offered to `line`, which returns true when it dealt with it.
    static func forEachValue(_ bytes: [UInt8],
                             line: (InputLocation, UnsafeMutablePointer<json_t>) throws -> Bool = { _, _ in false },
                             _ body: (InputLocation, JSONValue) throws -> Void) throws {
        // A byte order mark (Windows editors write one) becomes spaces, so columns and lines stay.
        var bytes = bytes
        if bytes.starts(with: byteOrderMark) { bytes.replaceSubrange(0..<3, with: [0x20, 0x20, 0x20]) }
        switch try shape(of: bytes) {
        case .array:
            try forEachArrayElement(bytes, body)
        case .single(let value, let at):
            do {
                try body(.line(at), value)
            } catch let error as InputError {
                throw relocated(error, in: bytes)
            }
        case .lines:
            try parseLineTrees(bytes) { location, node in
                if try line(location, node) { return }
                try body(location, JSONValue.convert(node))
            }
        }
    }

    /// Hands each element of the array `bytes` holds to `body`, parsed one at a time and
    /// handed over before the next is read: an array whose first event is bad is refused
    /// there, and memory holds one element's tree, not the whole array's. (An audit: a 60 MB
    /// body of 20 million `{}` took 7 GB and 37 s before its first element was refused; a
    /// whole array's tree takes about a hundred times its text.) Errors are Jansson's, at
    /// their line and column in the whole input, as when the array was parsed in one piece.
    static func forEachArrayElement(_ bytes: [UInt8], _ body: (InputLocation, JSONValue) throws -> Void) throws {
        try bytes.withUnsafeBytes { raw in
            let count = raw.count
            var offset = 0
            var line = 1
            var lineStart = 0
            /// Moves `offset` to `end`, counting the lines it passes.
            func advance(to end: Int) {
                while offset < end {
                    if raw[offset] == 0x0A {
                        line += 1
                        lineStart = offset + 1
                    }
                    offset += 1
                }
            }
            func skipSpace() {
                var end = offset
                while end < count, isSpace(raw[end]) { end += 1 }
                advance(to: end)
            }
            /// Jansson's words for a structural error at `offset`: what was expected, near the
            /// token there.
            func expected(_ what: String) -> InputError {
                var end = offset
                if end < count, !"[]{},:".utf8.contains(raw[end]) {
                    while end < count, !isSpace(raw[end]), !"[]{},:".utf8.contains(raw[end]) { end += 1 }
                } else if end < count {
                    end += 1
                }
                let near = offset >= count ? "end of file" : "'\(visibleCharacters(String(decoding: raw[offset..<end], as: UTF8.self)))'"
                return InputError(location: .line(line), message: "malformed JSON: \(what) expected near \(near) (column \(offset - lineStart + 1))")
            }
            skipSpace()
            offset += 1  // the `[` that made this an array
            var index = 0
            while true {
                skipSpace()
                if index == 0, offset < count, raw[offset] == UInt8(ascii: "]") {
                    offset += 1
                    skipSpace()
                    guard offset >= count else { throw expected("end of file") }
                    throw InputError(location: nil, message: "no events in input: the array is empty")
                }
                let parsed: (root: UnsafeMutablePointer<json_t>, count: Int)
                do {
                    parsed = try JSONValue.parseLeadingTree(UnsafeRawBufferPointer(rebasing: raw[offset...]))
                } catch let error as JSONValue.SyntaxError {
                    let column = error.line == 1 ? offset - lineStart + error.column : error.column
                    throw InputError(location: .line(line + error.line - 1),
                                     message: malformed(error, column: column, in: UnsafeRawBufferPointer(rebasing: raw[offset...])))
                }
                let value = JSONValue.convert(parsed.root)
                json_decref(parsed.root)
                advance(to: offset + parsed.count)
                // Each event is held to the size of an NDJSON line, written compactly.
                var written: [UInt8] = []
                value.write(to: &written)
                if written.count > maxLineBytes {
                    throw InputError(location: .index(index), message: "the event is longer than 1 MiB (\(written.count) bytes written compactly)")
                }
                try body(.index(index), value)
                skipSpace()
                guard offset < count else { throw expected("']'") }
                if raw[offset] == UInt8(ascii: ",") {
                    offset += 1
                    index += 1
                    continue
                }
                guard raw[offset] == UInt8(ascii: "]") else { throw expected("']'") }
                offset += 1
                skipSpace()
                guard offset >= count else { throw expected("end of file") }
                return
            }
        }
    }

    /// Jansson's syntax error, with the field it is in when it follows a key (`"value":NaN`
    /// said only "invalid token near 'NaN'": an audit, as SPEC §3.2 wants the field named).
    static func malformed(_ error: JSONValue.SyntaxError, column: Int, in text: UnsafeRawBufferPointer) -> String {
        // Jansson checks a `\u` escape's surrogates once the string is read: the position is
        // then just past its closing quote.
        let inString = error.message.hasPrefix("invalid Unicode") ? error.position - 1 : error.position
        // A key's whole path (`metadata.a`), as a value's errors name it.
        let key = keyBefore(error.position, in: text).map { key in fieldOfString(at: error.position, in: text, inValue: true) ?? key }
        let field = (key ?? fieldOfString(at: inString, in: text)).map { " in '\($0)'" } ?? ""
        return "malformed JSON\(field): \(error.message) (column \(column))"
    }

    /// The key of the member whose value ends at byte `position` of `text` (`"key": token`),
    /// when there is one.
    static func keyBefore(_ position: Int, in text: UnsafeRawBufferPointer) -> String? {
        var index = min(position, text.count) - 1
        func isTokenByte(_ byte: UInt8) -> Bool {
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-")
        }
        let tokenEnd = index
        while index >= 0, isTokenByte(text[index]) { index -= 1 }
        guard index < tokenEnd else { return nil }  // no token: the error is about something else
        while index >= 0, isSpace(text[index]) { index -= 1 }
        guard index >= 0, text[index] == UInt8(ascii: ":") else { return nil }
        index -= 1
        while index >= 0, isSpace(text[index]) { index -= 1 }
        guard index >= 0, text[index] == UInt8(ascii: "\"") else { return nil }
        let close = index
        index -= 1
        while index >= 0, text[index] != UInt8(ascii: "\"") || (index > 0 && text[index - 1] == UInt8(ascii: "\\")) {
            index -= 1
            if close - index > EventDecoder.maxNameBytes { return nil }
        }
        guard index >= 0 else { return nil }
        return visibleCharacters(String(decoding: UnsafeRawBufferPointer(rebasing: text[(index + 1)..<close]), as: UTF8.self))
    }

    /// The objects and arrays open at a point of JSON text: each object's current key once it
    /// has been read.
    typealias OpenContainers = [(isObject: Bool, key: String?)]

    /// Scans `text[0..<end]` from its start, keeping the containers open (`OpenContainers`),
    /// and calls `visit` for each string: with the containers open after it (a key recorded in
    /// its object), whether it was a key, its opening quote's offset, and its closing quote's,
    /// nil when the string runs past `end` (then the scan stops). `visit` returns false to stop.
    /// Returns the containers open at `end`, or nil when the scan stopped.
    static func scanStrings(_ text: UnsafeRawBufferPointer, upTo end: Int,
                            _ visit: (_ open: OpenContainers, _ isKey: Bool, _ start: Int, _ close: Int?) -> Bool) -> OpenContainers? {
        var open: OpenContainers = []
        var index = 0
        while index < end {
            switch text[index] {
            case UInt8(ascii: "\""):
                var close = index + 1
                while close < end, text[close] != UInt8(ascii: "\"") { close += text[close] == UInt8(ascii: "\\") ? 2 : 1 }
                let isKey = open.last.map { $0.isObject && $0.key == nil } ?? false
                guard close < end else {
                    _ = visit(open, isKey, index, nil)
                    return nil
                }
                if isKey {
                    open[open.count - 1].key = String(decoding: UnsafeRawBufferPointer(rebasing: text[(index + 1)..<close]), as: UTF8.self)
                }
                guard visit(open, isKey, index, close) else { return nil }
                index = close + 1
                continue
            case UInt8(ascii: "{"): open.append((true, nil))
            case UInt8(ascii: "["): open.append((false, nil))
            case UInt8(ascii: "}"), UInt8(ascii: "]"): if !open.isEmpty { open.removeLast() }
            case UInt8(ascii: ","): if let last = open.last, last.isObject { open[open.count - 1].key = nil }
            default: break
            }
            index += 1
        }
        return open
    }

    /// The keys of `open` as a dotted path (`source.name`), shown with `visibleCharacters`.
    private static func path(_ open: OpenContainers) -> String {
        open.compactMap(\.key).map { visibleCharacters($0) }.joined(separator: ".")
    }

    /// The field whose string value byte `position` of `text` lies in (an invalid byte, escape
    /// or control character, or the end of a cut-off line, inside `"user":"b\xffc"`), as a path
    /// of keys (`source.name`), read by scanning the valid JSON before it; nil when `position`
    /// is in no string or in a key. (Such errors named no field: an audit.) `inValue`: the
    /// position is just past a member's value that is not a string (`"a":NaN`), whose path
    /// this names (nil if the scan finds none).
    static func fieldOfString(at position: Int, in text: UnsafeRawBufferPointer, inValue: Bool = false) -> String? {
        var found: String?
        let atEnd = scanStrings(text, upTo: min(position, text.count)) { open, isKey, _, close in
            // The error is inside a string that runs past it: a value's names its field.
            if close == nil, !isKey, !path(open).isEmpty { found = path(open) }
            return true
        }
        guard let atEnd else { return found }
        guard inValue, atEnd.last?.key != nil else { return nil }
        return path(atEnd)
    }

    /// The line (from 1) of the member at `path` (`end`, `source.name`) in the one JSON object
    /// `bytes` holds, found by scanning its text (`scanStrings`); nil when there is none (a
    /// field the event lacks, whose absence is the problem).
    static func line(ofField path: String, in bytes: [UInt8]) -> Int? {
        let target = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var found: Int?
        bytes.withUnsafeBytes { raw in
            _ = scanStrings(raw, upTo: raw.count) { open, isKey, start, close in
                // Only objects' keys make a path; a member inside an array has none.
                guard close != nil, isKey, open.allSatisfy(\.isObject), open.map({ $0.key! }) == target else { return true }
                // A JSON string holds no raw line feed: each one before is a line's end.
                found = bytes[..<start].count(where: { $0 == 0x0A }) + 1
                return false
            }
        }
        return found
    }

    /// Hands Jansson's tree of each non-blank line to `body` (valid only during the call).
    static func parseLineTrees(_ bytes: [UInt8], _ body: (InputLocation, UnsafeMutablePointer<json_t>) throws -> Void) throws {
        var found = 0
        var lineNumber = 0
        var start = 0
        let count = bytes.count
        while start < count {
            lineNumber += 1
            var end = start
            while end < count, bytes[end] != 0x0A { end += 1 }
            let next = end + 1
            var stop = end
            if stop > start, bytes[stop - 1] == 0x0D { stop -= 1 }
            if stop - start > maxLineBytes {
                throw InputError(location: .line(lineNumber), message: "line is longer than 1 MiB (\(stop - start) bytes)")
            }
            var blank = true
            for index in start..<stop where !isSpace(bytes[index]) {
                blank = false
                break
            }
            if !blank {
                let parsed: Result<UnsafeMutablePointer<json_t>, JSONValue.SyntaxError> = bytes.withUnsafeBytes { raw in
                    let slice = UnsafeRawBufferPointer(rebasing: raw[start..<stop])
                    return Result { () throws(JSONValue.SyntaxError) in try JSONValue.parseTree(slice) }
                }
                switch parsed {
                case .success(let node):
                    found += 1
                    defer { json_decref(node) }
                    try body(.line(lineNumber), node)
                case .failure(let error):
                    let truncated = next >= count && error.isPrematureEnd
                    let hint = truncated ? " (the last line looks truncated)" : ""
                    let message = bytes.withUnsafeBytes { raw in
                        malformed(error, column: error.column, in: UnsafeRawBufferPointer(rebasing: raw[start..<stop]))
                    }
                    throw InputError(location: .line(lineNumber), message: message + hint)
                }
            }
            start = next
        }
        guard found > 0 else { throw InputError(location: nil, message: "no events in input") }
    }

    public static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }
}

extension EventInput {
    /// The 1-based line of `body` on which the `index`-th element (0-based) of its top-level
    /// JSON array begins, for errors that must name a line (an HTTP 400 carries `line`, SPEC §9)
    /// when the input was an array. Nil when `body` is no array or has fewer elements.
    /// Only strings and nesting are followed: the body has already been parsed.
    public static func lineOfArrayElement(_ body: [UInt8], index: Int) -> Int? {
        var line = 1, depth = 0, element = -1
        var inString = false, escaped = false, expectingElement = false
        for byte in body.starts(with: byteOrderMark) ? body.dropFirst(byteOrderMark.count) : body[...] {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                if byte == UInt8(ascii: "\n") { line += 1 }
                continue
            }
            switch byte {
            case UInt8(ascii: "\n"):
                line += 1
                continue
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                continue
            default:
                break
            }
            if depth == 1, expectingElement, byte != UInt8(ascii: "]") {
                element += 1
                if element == index { return line }
                expectingElement = false
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth == 1 { guard byte == UInt8(ascii: "[") else { return nil }; expectingElement = true }
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                depth -= 1
                if depth == 0 { return nil }
            case UInt8(ascii: ","):
                if depth == 1 { expectingElement = true }
            default:
                if depth == 0 { return nil }
            }
        }
        return nil
    }
}
