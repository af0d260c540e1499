import CJansson

/// A parsed JSON value.
///
/// Parsing goes through Jansson (Debian's `libjansson`), which rejects NaN, infinities,
/// duplicate keys (with `JSON_REJECT_DUPLICATES`) and trailing garbage. Serialization is
/// ours, because the log needs one *canonical* form: keys sorted by their UTF-8 bytes, no
/// white space, integral numbers written without a fraction. Two inputs that mean the same
/// thing serialize to the same bytes, which is what idempotency compares.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Why a JSON document could not be parsed, with Jansson's position.
    public struct SyntaxError: Error, Sendable, Equatable {
        /// One-line description, e.g. `end of file expected near '}'`.
        public var message: String
        /// 1-based line within the parsed text.
        public var line: Int
        /// 1-based column within that line.
        public var column: Int
        /// Whether the text ended in the middle of a value (Jansson's
        /// `json_error_premature_end_of_input`): a truncated document.
        public var isPrematureEnd: Bool = false
        /// Jansson's byte position of the error within the parsed text.
        public var position: Int = 0
    }

    /// Parses one JSON document (any value at top level) with Jansson.
    ///
    /// Calls `json_loadb`.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(SyntaxError) -> JSONValue {
        let root = try parseTree(bytes)
        defer { json_decref(root) }
        return convert(root)
    }

    /// Hands Jansson's tree of `bytes` to `body`, and frees it after.
    static func withTree<R>(_ bytes: [UInt8], _ body: (UnsafeMutablePointer<json_t>) throws -> R) throws -> R {
        let root = try bytes.withUnsafeBytes { raw throws(SyntaxError) in try parseTree(raw) }
        defer { json_decref(root) }
        return try body(root)
    }

    /// Jansson's tree of one document; the caller owns it (`json_decref`).
    static func parseTree(_ bytes: UnsafeRawBufferPointer) throws(SyntaxError) -> UnsafeMutablePointer<json_t> {
        try parseTree(bytes, flags: Int(JSON_REJECT_DUPLICATES | JSON_DECODE_ANY)).root
    }

    /// Jansson's tree of the value `bytes` begin with, and how many bytes it took: what
    /// follows it is left unread (`JSON_DISABLE_EOF_CHECK`). From a buffer (`json_loadb`)
    /// the count is exact for every value: the character a number or a keyword is ended by
    /// is looked at and given back (`1,2` takes 1 byte, `true]` 4).
    static func parseLeadingTree(_ bytes: UnsafeRawBufferPointer) throws(SyntaxError) -> (root: UnsafeMutablePointer<json_t>, count: Int) {
        try parseTree(bytes, flags: Int(JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK))
    }

    private static func parseTree(_ bytes: UnsafeRawBufferPointer, flags: Int) throws(SyntaxError) -> (root: UnsafeMutablePointer<json_t>, count: Int) {
        var error = json_error_t()
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: CChar.self),
              let root = json_loadb(base, bytes.count, flags, &error)
        else {
            if bytes.isEmpty {
                throw SyntaxError(message: "empty input", line: 1, column: 1)
            }
            // Jansson stops at a NUL byte and calls it "end of file" or an "invalid token":
            // name the byte instead.
            if let nul = bytes.firstIndex(of: 0), nul <= Int(error.position) {
                let lineStart = bytes[..<nul].lastIndex(of: 0x0A).map { $0 + 1 } ?? 0
                throw SyntaxError(message: "a raw NUL byte (NUL is not allowed in an event, escaped or not)",
                                  line: bytes[..<nul].count(where: { $0 == 0x0A }) + 1, column: nul - lineStart + 1)
            }
            let text = withUnsafeBytes(of: &error.text) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            let code = ledger_json_error_code(&error)
            let premature = code == Int32(json_error_premature_end_of_input.rawValue)
            // Jansson's own words name its flags and types: say what is wrong with the input.
            let message = switch code {
            case Int32(json_error_null_character.rawValue), Int32(json_error_null_byte_in_key.rawValue):
                "a \\u0000 escape (NUL is not allowed in an event, escaped or not)"
            case Int32(json_error_numeric_overflow.rawValue):
                "a number too large to read (\(visibleCharacters(text)): whole numbers up to 2^63, others up to about 1.8e308)"
            default:
                visibleCharacters(text)
            }
            throw SyntaxError(message: message, line: Int(error.line), column: Int(error.column), isPrematureEnd: premature,
                              position: Int(error.position))
        }
        return (root, Int(error.position))
    }

    /// Parses one JSON document held in `bytes`.
    public static func parse(_ bytes: [UInt8]) throws(SyntaxError) -> JSONValue {
        do {
            return try bytes.withUnsafeBytes { raw in try parse(raw) }
        } catch let error as SyntaxError {
            throw error
        } catch {
            fatalError("unreachable: parse throws only SyntaxError")
        }
    }

    /// Hands each member of the object `node` to `body`, in order, until it returns false.
    /// Returns whether every member was handed over.
    @discardableResult
    static func forEachMember(of node: UnsafeMutablePointer<json_t>,
                              _ body: (_ key: String, _ value: UnsafeMutablePointer<json_t>) -> Bool) -> Bool {
        var iterator = json_object_iter(node)
        while let member = iterator {
            let length = json_object_iter_key_len(member)
            let key = json_object_iter_key(member).withMemoryRebound(to: UInt8.self, capacity: length) {
                String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
            }
            guard body(key, json_object_iter_value(member)) else { return false }
            iterator = json_object_iter_next(node, member)
        }
        return true
    }

    /// The text of a string node; nil for any other JSON type.
    static func text(of node: UnsafeMutablePointer<json_t>) -> String? {
        guard ledger_json_type(node) == JSON_STRING, let chars = json_string_value(node) else { return nil }
        let length = json_string_length(node)
        return chars.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }

    static func convert(_ node: UnsafeMutablePointer<json_t>) -> JSONValue {
        switch ledger_json_type(node) {
        case JSON_OBJECT:
            var result: [String: JSONValue] = [:]
            result.reserveCapacity(json_object_size(node))
            forEachMember(of: node) { key, value in
                result[key] = convert(value)
                return true
            }
            return .object(result)
        case JSON_ARRAY:
            let count = json_array_size(node)
            var items: [JSONValue] = []
            items.reserveCapacity(count)
            for index in 0..<count {
                items.append(convert(json_array_get(node, index)))
            }
            return .array(items)
        case JSON_STRING:
            return .string(text(of: node) ?? "")
        case JSON_INTEGER:
            return .int(Int64(json_integer_value(node)))
        case JSON_REAL:
            return .double(JSONValue.positiveZero(json_real_value(node)))
        case JSON_TRUE:
            return .bool(true)
        case JSON_FALSE:
            return .bool(false)
        default:
            return .null
        }
    }
}

// MARK: - Accessors

extension JSONValue {
    /// The name of this value's JSON type, for error messages ("expected a string, got a number").
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .int, .double: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The value as a Double, for either JSON number form.
    public var numberValue: Double? {
        switch self {
        case .int(let value): Double(value)
        case .double(let value): value
        default: nil
        }
    }
}

// MARK: - Canonical serialization

extension JSONValue {
    /// The canonical bytes of this value: sorted keys, no white space, shortest numbers.
    public var canonicalBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(to: &out)
        return out
    }

    /// The canonical form as a String.
    public var canonicalString: String {
        String(decoding: canonicalBytes, as: UTF8.self)
    }

    public func write(to out: inout [UInt8]) {
        switch self {
        case .null:
            out.append(contentsOf: "null".utf8)
        case .bool(let value):
            out.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value):
            JSONValue.writeInteger(value, to: &out)
        case .double(let value):
            JSONValue.writeNumber(value, to: &out)
        case .string(let value):
            JSONValue.writeString(value, to: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                item.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            // Sorting by UTF-8 bytes gives the same order on every platform and locale.
            let keys = members.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            for (index, key) in keys.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                members[key]!.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Each name as it opens a member of an object, `"name":`: made once for the many objects
    /// written with the same keys (rows, whose columns have an order), by `writeObject`.
    public static func objectKeys(_ names: [String]) -> [[UInt8]] {
        names.map { name in
            var key: [UInt8] = []
            writeString(name, to: &key)
            key.append(UInt8(ascii: ":"))
            return key
        }
    }

    /// Writes an object of `values` under `keys` (from `objectKeys`), in that order; nil
    /// values are left out.
    public static func writeObject(_ values: [JSONValue?], keys: [[UInt8]], to out: inout [UInt8]) {
        precondition(values.count == keys.count)
        writeObject(keys: keys, value: { values[$0] }, to: &out)
    }

    /// `writeObject` with the value under `keys[index]` given by `value(index)`: no list of
    /// the values is made (a row's, for every change a commit stores).
    public static func writeObject(keys: [[UInt8]], value: (Int) -> JSONValue?, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        var first = true
        for index in keys.indices {
            guard let value = value(index) else { continue }
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(contentsOf: keys[index])
            value.write(to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Appends `value`'s decimal digits, as `String(value)` spells them, with no string made.
    public static func writeInteger(_ value: Int64, to out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        writeInteger(value.magnitude, to: &out)
    }

    /// `writeInteger` of an unsigned value.
    public static func writeInteger(_ value: UInt64, to out: inout [UInt8]) {
        var magnitude = value
        // 20 digits at most (UInt64.max), written from the end of a scratch space on the stack.
        var scratch: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &scratch) { digits in
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: digits[start...]))
        }
    }

    /// `value`, with -0.0 (`-0.0`, `-0e0`, or a negative number too small to represent, as
    /// `-1e-400`) as 0: JSON writes both as `0`, and a -0.0 kept in an event's typed form made
    /// `verify` call the record corrupt, its typed part no longer saying what its JSON says.
    @inline(__always)
    public static func positiveZero(_ value: Double) -> Double {
        value == 0 ? 0 : value
    }

    /// Writes a finite number; integral values below 2^53 are written without a fraction,
    /// so `100` and `100.0` are the same content.
    public static func writeNumber(_ value: Double, to out: inout [UInt8]) {
        if isWhole(value) {
            writeInteger(Int64(value), to: &out)
        } else {
            out.append(contentsOf: value.description.utf8)
        }
    }

    /// Whether `writeNumber` writes `value` as an integer: a whole number that a double holds
    /// exactly.
    static func isWhole(_ value: Double) -> Bool {
        precondition(value.isFinite, "JSON cannot hold \(value); validation must reject it first")
        return value == value.rounded() && abs(value) < 9_007_199_254_740_992
    }

    public static func writeString(_ value: String, to out: inout [UInt8]) {
        value.withUTF8Bytes { writeString(utf8: $0, to: &out) }
    }

    /// `writeString` for text already in UTF-8 bytes.
    public static func writeString(utf8 bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        // Most strings need no escaping: copy them whole.
        if needsNoEscape(bytes) {
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: bytes)
            out.append(UInt8(ascii: "\""))
        } else {
            out.append(contentsOf: ByteCursor.withScratch(capacity: ByteCursor.jsonStringBound(bytes.count)) { $0.jsonString(utf8: bytes) })
        }
    }

    /// Whether `bytes` go into a JSON string as they are: no control character, `"` or `\\`.
    static func needsNoEscape(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        func escaped(_ byte: UInt8) -> Bool { byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") }
        // Eight bytes at a time, then the rest one by one.
        var index = 0
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 8 <= bytes.count {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                if ByteScan.hasByte(below: 0x20, in: word) || ByteScan.hasByte(UInt8(ascii: "\""), in: word)
                    || ByteScan.hasByte(UInt8(ascii: "\\"), in: word) { return false }
                index += 8
            }
        }
        return !bytes[index...].contains(where: escaped)
    }
}

extension ByteCursor {
    /// The most bytes `jsonString` writes for `utf8Count` bytes of text: quotes, and each byte
    /// at most as `\u00XX`.
    package static func jsonStringBound(_ utf8Count: Int) -> Int { 2 + 6 * utf8Count }

    /// The bytes `jsonString` writes for `text` when it needs no escape (quotes and its
    /// UTF-8), its bound otherwise.
    package static func jsonStringSize(_ text: String) -> Int {
        text.utf8.withContiguousStorageIfAvailable { JSONValue.needsNoEscape($0) ? $0.count + 2 : jsonStringBound($0.count) }
            ?? jsonStringBound(text.utf8.count)
    }

    /// `JSONValue.writeString`, through the cursor.
    package mutating func jsonString(_ value: String) {
        value.withUTF8Bytes { jsonString(utf8: $0) }
    }

    /// The one place JSON strings are escaped (`JSONValue.writeString` comes here for any
    /// string that needs it).
    package mutating func jsonString(utf8 bytes: UnsafeBufferPointer<UInt8>) {
        u8(UInt8(ascii: "\""))
        if JSONValue.needsNoEscape(bytes) {
            self.bytes(bytes)
            u8(UInt8(ascii: "\""))
            return
        }
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): u8(92); u8(34)
            case UInt8(ascii: "\\"): u8(92); u8(92)
            case 0x0A: u8(92); u8(UInt8(ascii: "n"))
            case 0x0D: u8(92); u8(UInt8(ascii: "r"))
            case 0x09: u8(92); u8(UInt8(ascii: "t"))
            case 0..<0x20:
                u8(92); u8(UInt8(ascii: "u")); u8(48); u8(48); u8(hexDigit(byte >> 4)); u8(hexDigit(byte & 15))
            default:
                u8(byte)
            }
        }
        u8(UInt8(ascii: "\""))
    }

    /// The most bytes `jsonNumber` writes.
    package static let jsonNumberBound = 40

    /// `JSONValue.writeNumber`, through the cursor.
    /// A whole number's digits are written without a string in between.
    package mutating func jsonNumber(_ value: Double) {
        if JSONValue.isWhole(value) { decimal(Int64(value)) } else { utf8(value.description) }
    }

    /// An integer as `JSONValue.int` writes it.
    package mutating func jsonInteger(_ value: Int64) {
        decimal(value)
    }
}

/// Questions about eight bytes at once, asked of a word loaded from them (the usual bit tricks:
/// a byte below `n` borrows when `n` is taken from it, and its top bit, clear before, is set
/// after). Each says exactly whether some byte of the word is so: a borrow that spreads to a
/// higher byte starts from a byte that is.
enum ByteScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let tops: UInt64 = 0x8080_8080_8080_8080

    /// Whether a byte of `word` is below `limit` (at most 0x80).
    @inline(__always)
    static func hasByte(below limit: UInt8, in word: UInt64) -> Bool {
        (word &- ones &* UInt64(limit)) & ~word & tops != 0
    }

    /// Whether a byte of `word` is `byte`.
    @inline(__always)
    static func hasByte(_ byte: UInt8, in word: UInt64) -> Bool {
        hasByte(below: 1, in: word ^ (ones &* UInt64(byte)))
    }

    /// Whether every byte of `word` is ASCII (below 0x80).
    @inline(__always)
    static func isASCII(_ word: UInt64) -> Bool { word & tops == 0 }

    /// Walks `bytes` eight at a time while each word is ASCII: -1 as soon as `found` holds for
    /// one, else the offset of the first byte not yet looked at (a word with a byte of 0x80 or
    /// more, or the last few bytes).
    @inline(__always)
    static func asciiPrefix(of bytes: UnsafeBufferPointer<UInt8>, _ found: (UInt64) -> Bool) -> Int {
        guard let base = bytes.baseAddress else { return 0 }
        let raw = UnsafeRawPointer(base)
        var index = 0
        while index + 8 <= bytes.count {
            let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            guard isASCII(word) else { return index }
            if found(word) { return -1 }
            index += 8
        }
        return index
    }
}
