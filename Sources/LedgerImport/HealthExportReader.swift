internal import CLibXML2
import Foundation
import LedgerCore

/// One `<Record>` of an Apple Health export, as written (attribute values are strings).
public struct HealthRecord: Sendable, Equatable {
    public var type: String
    public var unit: String?
    public var value: String?
    /// `sourceName`, or the legacy iOS 8 `source`.
    public var sourceName: String?
    public var sourceVersion: String?
    public var device: String? {
        get { deviceText?.text }
        set { deviceText = newValue.map(DeviceText.text) }
    }
    /// `device` as held: in Apple's form, in parts (`DeviceText`).
    var deviceText: DeviceText?
    public var startDate: String? {
        get { startText?.string }
        set { startText = newValue.map(AttributeText.init) }
    }
    public var endDate: String? {
        get { endText?.string }
        set { endText = newValue.map(AttributeText.init) }
    }
    public var creationDate: String? {
        get { creationText?.string }
        set { creationText = newValue.map(AttributeText.init) }
    }
    /// The three dates as held: inline, as an export's 25 bytes fit (`AttributeText`).
    var startText: AttributeText?, endText: AttributeText?, creationText: AttributeText?
    /// `MetadataEntry` children by key, of the keys the importer reads (`MetadataKey`).
    public var metadata: [String: String] {
        get {
            var entries: [String: String] = [:]
            for key in MetadataKey.allCases { if let value = metadata(key) { entries[key.rawValue] = value } }
            return entries
        }
        set {
            for key in MetadataKey.allCases { setMetadata(key, newValue[key.rawValue]) }
        }
    }
    /// The same entries, one field per key read: a record keeps at most three, and a list or
    /// dictionary made per record cost more than its lookups saved.
    private var timeZone: String?
    private var syncIdentifier: String?
    private var syncVersion: String?
    /// The line of the `<Record` tag, for errors.
    public var line: Int

    /// The metadata the importer reads. A record keeps no other entries: one with ten million
    /// of them held them all (347 MB).
    enum MetadataKey: String, CaseIterable {
        case timeZone = "HKTimeZone"
        case syncIdentifier = "HKMetadataKeySyncIdentifier"
        case syncVersion = "HKMetadataKeySyncVersion"
    }

    /// The value of the `MetadataEntry` with `key`, if any (the last one, when given twice).
    public func metadata(_ key: String) -> String? {
        MetadataKey(rawValue: key).flatMap(metadata)
    }

    func metadata(_ key: MetadataKey) -> String? {
        switch key {
        case .timeZone: timeZone
        case .syncIdentifier: syncIdentifier
        case .syncVersion: syncVersion
        }
    }

    /// Keeps `value` for `key` (a key given twice counts with its last value).
    mutating func setMetadata(_ key: MetadataKey, _ value: String?) {
        switch key {
        case .timeZone: timeZone = value
        case .syncIdentifier: syncIdentifier = value
        case .syncVersion: syncVersion = value
        }
    }

    /// An empty record, to move records in and out of lists with (`swap`) without copying.
    static var empty: HealthRecord { HealthRecord(line: 0) }

    fileprivate init(line: Int) {
        type = ""
        self.line = line
    }

    public static func == (a: HealthRecord, b: HealthRecord) -> Bool {
        a.type == b.type && a.unit == b.unit && a.value == b.value && a.sourceName == b.sourceName
            && a.sourceVersion == b.sourceVersion && a.device == b.device && a.startDate == b.startDate
            && a.endDate == b.endDate && a.creationDate == b.creationDate && a.line == b.line
            && a.metadata == b.metadata
    }

    public init(type: String, unit: String? = nil, value: String? = nil, sourceName: String? = nil,
                sourceVersion: String? = nil, device: String? = nil, startDate: String? = nil,
                endDate: String? = nil, creationDate: String? = nil, metadata: [String: String] = [:], line: Int) {
        self.type = type
        self.unit = unit
        self.value = value
        self.sourceName = sourceName
        self.sourceVersion = sourceVersion
        deviceText = device.map(DeviceText.text)
        startText = startDate.map(AttributeText.init)
        endText = endDate.map(AttributeText.init)
        creationText = creationDate.map(AttributeText.init)
        self.line = line
        self.metadata = metadata
    }
}

/// Streams the `<Record>` elements of an `export.xml` with libxml2's SAX2 push parser: the
/// file is fed in chunks, and each record is built from the attribute values libxml2 hands the
/// start-element callback (pointers into its buffer), so no document node is built and only the
/// attributes the ledger reads become strings. Never more than one chunk's records are held.
/// Records nested in a `<Correlation>` are skipped: Apple writes each of them again at top level.
public final class HealthExportReader {
    private let stream: ExportStream
    private var parser: xmlParserCtxtPtr?
    private let xml: LibXML2
    private let path: String

    // What the callbacks build, read by `next()` from `readIndex` on: each record is swapped
    // out of the list and into it (`HealthRecord.empty`), so none is copied, and the list's
    // storage is kept from chunk to chunk.
    fileprivate var ready: [HealthRecord] = []
    private var readIndex = 0
    /// The record whose element is open (when `inRecord`).
    fileprivate var current = HealthRecord.empty
    fileprivate var inRecord = false
    fileprivate var currentDepth = 0
    fileprivate var depth = 0
    fileprivate var correlations = 0
    fileprivate var sawElement = false
    // Attribute values that repeat from record to record, each decoded once.
    private var recentTypes = RecentStrings(), recentUnits = RecentStrings(), recentSources = RecentStrings()
    private var recentVersions = RecentStrings(), recentDevices = RecentStrings()
    private var ended = false
    private var failure: ImportError?
    /// The parser's first error (`sax.serror`): its message and line.
    private var firstError: (message: String, line: Int, code: Int32)?
    /// The input's last byte other than white space: not `>` when it was cut inside a tag.
    private var lastByte: UInt8 = 0

    /// Opens `path` (an `export.xml` or the `export.zip` holding it). An archive's `export.xml`
    /// is read through once first, to check it (`ExportStream`); `checking` hears how far.
    public convenience init(path: String, checking: ((Int64, Int64) -> Void)? = nil) throws {
        try self.init(path: path, checking: checking, maximumDropped: ExportStream.defaultMaximumDropped)
    }

    /// With comments and the DOCTYPE bounded at `maximumDropped` bytes (tests use a small one).
    init(path: String, checking: ((Int64, Int64) -> Void)?, maximumDropped: Int) throws {
        self.path = path
        xml = try LibXML2.load(for: path)
        stream = try ExportStream(path: path, checking: checking, maximumDropped: maximumDropped)
        ledger_xml_silence(xml.setGenericErrorFunc)
        var sax = xmlSAXHandler()
        sax.initialized = UInt32(XML_SAX2_MAGIC)
        sax.startElementNs = { context, name, _, _, _, _, count, _, attributes in
            guard let context, let name else { return }
            Unmanaged<HealthExportReader>.fromOpaque(context).takeUnretainedValue()
                .start(name, attributes: attributes, count: Int(count))
        }
        sax.endElementNs = { context, name, _, _ in
            guard let context, let name else { return }
            Unmanaged<HealthExportReader>.fromOpaque(context).takeUnretainedValue().end(name)
        }
        ledger_xml_silence_handler(&sax)
        // libxml2 goes on after an error and reports what follows from it too ("Couldn't
        // find end of Start Tag" after the unquoted value that broke the tag): the first is
        // the one that names what is wrong, so it is kept.
        sax.serror = { context, error in
            guard let context, let error else { return }
            Unmanaged<HealthExportReader>.fromOpaque(context).takeUnretainedValue().heard(error.pointee)
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        parser = xml.createPushParserCtxt(&sax, context, nil, 0, path)
        guard let parser else { throw ImportError.cannotOpen(path: path, reason: "libxml2 could not start reading it") }
        _ = xml.ctxtUseOptions(parser, Int32(XML_PARSE_NONET.rawValue | XML_PARSE_HUGE.rawValue | XML_PARSE_NOBLANKS.rawValue))
    }

    deinit {
        if let parser {
            if let document = parser.pointee.myDoc { xml.freeDoc(document) }
            xml.freeParserCtxt(parser)
        }
    }

    /// Asked between waits on a pipe or a terminal (which may never send more): when it
    /// says true, `next` throws rather than wait on. Set before reading, on the reading thread.
    public var isInterrupted: (() -> Bool)? {
        get { stream.isInterrupted }
        set { stream.isInterrupted = newValue }
    }

    /// Uncompressed bytes of XML read so far, and in all.
    public var progress: (read: Int64, total: Int64) { (stream.bytesRead, stream.totalBytes) }

    /// The next record, or nil at the end of the document. Throws `ImportError.malformed`
    /// with the line when the XML is broken or truncated, after the records before the break.
    public func next() throws -> HealthRecord? {
        while readIndex == ready.count {
            ready.removeAll(keepingCapacity: true)
            readIndex = 0
            if ended {
                if let failure { throw failure }
                return nil
            }
            feed()
        }
        var record = HealthRecord.empty
        swap(&record, &ready[readIndex])
        readIndex += 1
        return record
    }

    /// Hands the parser the next chunk (or the end of the input); its callbacks fill `ready`.
    private func feed() {
        // libxml2's generic error handler is per thread, and the reading thread is not the
        // one that made the parser: unsilenced there, an encoding error printed its own line.
        ledger_xml_silence(xml.setGenericErrorFunc)
        // The stream's cleaned bytes are parsed where they are (a read's worth at a time).
        var status: Int32 = 0
        let count = stream.withNextBytes { bytes in
            if let last = bytes.last(where: { $0 > 0x20 }) { lastByte = last }
            status = bytes.withMemoryRebound(to: CChar.self) { xml.parseChunk(parser, $0.baseAddress, Int32($0.count), 0) }
        }
        if count < 0 {
            ended = true
            if let reason = stream.readError {
                failure = ImportError.readFailed(path: path, line: Int(ledger_xml_line(parser)), reason: reason)
            } else {
                failure = ImportError.malformed(path: path, line: Int(ledger_xml_line(parser)), message: stream.problem ?? "the file could not be read")
            }
            return
        }
        if count == 0 { status = xml.parseChunk(parser, nil, 0, 1) }
        if failure != nil || status != 0 || parser?.pointee.wellFormed == 0 {
            ended = true
            failure = failure ?? malformed(atEnd: count == 0)
        } else if count == 0 {
            ended = true
        }
    }

    /// Deeper than any export nests (a record's metadata is at depth 3): libxml2, asked for no
    /// limits (`XML_PARSE_HUGE`), keeps a stack entry per open element, and 30 million nested
    /// elements took 1.3 GB.
    static let maximumDepth = 64

    fileprivate func start(_ name: UnsafePointer<xmlChar>, attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?, count: Int) {
        depth += 1
        sawElement = true
        if depth > HealthExportReader.maximumDepth {
            if failure == nil {
                failure = ImportError.malformed(path: path, line: Int(ledger_xml_line(parser)),
                                                message: "elements are nested more than \(HealthExportReader.maximumDepth) deep (an export nests 3); the file is not an export, or is damaged")
                xml.stopParser(parser)
            }
            return
        }
        if depth == 1, !equals(name, "HealthData") {
            // Every export's root is HealthData, the legacy iOS 8 one's too: a file of records
            // under another root (a review imported `<Foo><Record …/></Foo>`) is not one.
            if failure == nil {
                let root = String(cString: name)
                failure = ImportError.malformed(path: path, line: Int(ledger_xml_line(parser)),
                                                message: "the root element is <\(visibleCharacters(root, limit: 60))>, not <HealthData>; the file is not an Apple Health export")
                xml.stopParser(parser)
            }
            return
        }
        if inRecord {
            // Inside a record only its own MetadataEntry children count, and of them only the
            // keys it reads: a key is compared as bytes, and only a read key's value becomes a
            // string.
            guard depth == currentDepth + 1, equals(name, "MetadataEntry"), let attributes else { return }
            var key: HealthRecord.MetadataKey?
            var known = true  // no key, or one the ledger reads
            var value: Int?
            for index in 0..<count {
                guard let attribute = attributes[index * 5] else { continue }
                if equals(attribute, "key") {
                    key = HealthExportReader.metadataKey(HealthExportReader.bytes(attributes, index))
                    known = key != nil
                } else if equals(attribute, "value") {
                    value = index
                }
            }
            if known, let key, let value { current.setMetadata(key, string(attributes, value)) }
            return
        }
        if equals(name, "Correlation") {
            correlations += 1
            return
        }
        guard correlations == 0, equals(name, "Record") else { return }
        current = HealthRecord(line: Int(ledger_xml_line(parser)))
        inRecord = true
        currentDepth = depth
        guard let attributes else { return }
        // Names are compared as C strings, each with the few names of its first letter: no
        // Swift string is made for a name, nor for the value of an attribute the ledger does
        // not read.
        for index in 0..<count {
            guard let name = attributes[index * 5] else { continue }
            switch name[0] {
            case UInt8(ascii: "t"):
                if equals(name, "type") { current.type = string(attributes, index, recent: &recentTypes) }
            case UInt8(ascii: "u"):
                if equals(name, "unit") { current.unit = string(attributes, index, recent: &recentUnits) }
            case UInt8(ascii: "v"):
                if equals(name, "value") { current.value = string(attributes, index) }
            case UInt8(ascii: "s"):
                if equals(name, "sourceName") || equals(name, "source") { current.sourceName = string(attributes, index, recent: &recentSources) }
                else if equals(name, "sourceVersion") { current.sourceVersion = string(attributes, index, recent: &recentVersions) }
                else if equals(name, "startDate") { current.startText = text(attributes, index) }
            case UInt8(ascii: "d"):
                if equals(name, "device") { current.deviceText = device(attributes, index) }
            case UInt8(ascii: "e"):
                if equals(name, "endDate") { current.endText = text(attributes, index) }
            case UInt8(ascii: "c"):
                if equals(name, "creationDate") { current.creationText = text(attributes, index) }
            default:
                break
            }
        }
    }

    /// The metadata key a `MetadataEntry`'s `key` attribute names; nil for a key the importer
    /// does not read. An ASCII key without `&` is compared as bytes; any other is made a string
    /// and compared as the importer always compared keys (a key holding `&#38;` is decoded
    /// first, and Swift's string equality takes a KELVIN SIGN for a K).
    private static func metadataKey(_ bytes: UnsafeBufferPointer<UInt8>) -> HealthRecord.MetadataKey? {
        if bytes.contains(where: { $0 == UInt8(ascii: "&") || $0 >= 0x80 }) { return HealthRecord.MetadataKey(rawValue: decoded(bytes)) }
        return metadataKeys.first { sameBytes($0.bytes, bytes) }?.key
    }

    /// Each key read and its bytes: compared with `memcmp`, where comparing a name's UTF-8
    /// view byte by byte took 600 instructions a `MetadataEntry` (callgrind).
    private static let metadataKeys = HealthRecord.MetadataKey.allCases.map { (key: $0, bytes: Array($0.rawValue.utf8)) }

    fileprivate func end(_ name: UnsafePointer<xmlChar>) {
        defer { depth -= 1 }
        if inRecord {
            if depth == currentDepth {
                var record = HealthRecord.empty
                swap(&record, &current)
                ready.append(consume record)
                inRecord = false
            }
            return
        }
        if equals(name, "Correlation"), correlations > 0 { correlations -= 1 }
    }

    fileprivate func heard(_ error: xmlError) {
        guard firstError == nil, error.level.rawValue >= XML_ERR_ERROR.rawValue else { return }
        // The column (libxml2's int2) finds the place in a line of many attributes.
        firstError = HealthExportReader.summary(of: error, column: true)
    }

    /// libxml2's error as one line (its message ends in a line break), with its line and code.
    private static func summary(of error: xmlError, column: Bool) -> (message: String, line: Int, code: Int32) {
        var message = "the XML is malformed"
        if let text = error.message {
            message = String(cString: text).split(whereSeparator: \.isNewline)
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.joined(separator: "; ")
        }
        if column, error.int2 > 0 { message += " (column \(error.int2))" }
        return (message, Int(error.line), Int32(error.code))
    }

    /// The parser's first error as one line. At the end of the input libxml2's push parser
    /// reports any unfinished document as "Extra content at the end of the document"; that is
    /// said plainly instead: no document at all, or one cut off inside an element.
    private func malformed(atEnd: Bool) -> ImportError {
        var line = Int(ledger_xml_line(parser))
        var message = "the XML is malformed"
        let last = xml.ctxtGetLastError(parser) ?? xml.getLastError()
        if let error = firstError ?? last.map({ HealthExportReader.summary(of: $0.pointee, column: false) }) {
            message = error.message
            if error.line > 0 { line = error.line }
            if atEnd, sawElement, depth > 0, lastByte != UInt8(ascii: ">") {
                // Cut inside a tag, as a truncated export nearly always is (a record is one
                // long line): libxml2's first word on it reads like a quoting error
                // ("AttValue: ' expected").
                message = "the file ends inside a tag, in an element left open (is it truncated?)"
            } else if atEnd, error.code == Int32(XML_ERR_DOCUMENT_END.rawValue) {
                if !sawElement {
                    message = "the file holds no XML document"
                } else if depth > 0 {
                    message = "the file ends inside the document, in an element left open (is it truncated?)"
                }
            }
        }
        return ImportError.malformed(path: path, line: line, message: message)
    }

    private func equals(_ pointer: UnsafePointer<xmlChar>, _ name: StaticString) -> Bool {
        strcmp(UnsafeRawPointer(pointer).assumingMemoryBound(to: CChar.self),
               UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)) == 0
    }

    /// The value of the `index`-th attribute: libxml2 gives it as the bytes from its 4th to
    /// its 5th pointer, with character references and predefined entities replaced except
    /// `&amp;`, which it keeps as `&#38;` when not told to substitute entities (and it is not:
    /// an export's DTD is dropped, and entity substitution stays off so no file can turn it
    /// on). A raw `&` cannot appear in XML text, so every `&#38;` here stands for one `&`.
    private func string(_ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>, _ index: Int) -> String {
        HealthExportReader.decoded(HealthExportReader.bytes(attributes, index))
    }

    /// `string(attributes, index)`, held inline when short (`AttributeText`): no string is
    /// made of a date.
    private func text(_ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>, _ index: Int) -> AttributeText {
        let bytes = HealthExportReader.bytes(attributes, index)
        if bytes.contains(UInt8(ascii: "&")) { return AttributeText(HealthExportReader.decoded(bytes)) }
        return AttributeText(bytes: bytes)
    }

    /// The `index`-th attribute's value as libxml2 hands it over (empty when it gives none).
    private static func bytes(_ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>, _ index: Int) -> UnsafeBufferPointer<UInt8> {
        guard let start = attributes[index * 5 + 3], let end = attributes[index * 5 + 4] else { return UnsafeBufferPointer(start: nil, count: 0) }
        return UnsafeBufferPointer(start: start, count: end - start)
    }

    /// An attribute value's text, each `&#38;` read as `&` (see `string`).
    private static func decoded(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        guard bytes.contains(UInt8(ascii: "&")) else { return String(decoding: bytes, as: UTF8.self) }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "&"), bytes[index...].starts(with: HealthExportReader.escapedAmpersand) {
                decoded.append(UInt8(ascii: "&"))
                index += HealthExportReader.escapedAmpersand.count
            } else {
                decoded.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: decoded, as: UTF8.self)
    }

    private static let escapedAmpersand = Array("&#38;".utf8)

    /// A `device` attribute: in Apple's form, its name taken from `recentDevices` when the
    /// same came lately, and the text before it inline; as a string otherwise.
    private func device(_ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>, _ index: Int) -> DeviceText {
        let bytes = HealthExportReader.bytes(attributes, index)
        guard !bytes.contains(UInt8(ascii: "&")), let range = AppleHealthConverter.deviceName(in: bytes) else {
            return .text(HealthExportReader.decoded(bytes))
        }
        let text = recentDevices.string(for: UnsafeBufferPointer(rebasing: bytes[range])) { String(decoding: $0, as: UTF8.self) }
        return .parts(head: AttributeText(bytes: UnsafeBufferPointer(rebasing: bytes[..<range.lowerBound])), name: text,
                      closed: range.upperBound < bytes.count)
    }

    /// `string(attributes, index)`, taken from `recent` when the same bytes came lately.
    private func string(_ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>, _ index: Int,
                        recent: inout RecentStrings) -> String {
        recent.string(for: HealthExportReader.bytes(attributes, index), HealthExportReader.decoded)
    }
}

/// An attribute's text, held inline when it fits a `ShortText` (32 bytes), else as a string: an
/// export's dates are 25 bytes, past the 15 a `String` holds without an allocation, and a
/// record's three were three allocations and frees (about 4 % of an import's reading thread).
struct AttributeText: Sendable {
    private var short = ShortText { _ in 0 }
    private var long: String?

    /// `bytes` as they are (valid UTF-8: libxml2 checks the encoding).
    init(bytes: UnsafeBufferPointer<UInt8>) {
        if bytes.count <= ShortText.capacity {
            short = ShortText { out in
                _ = out.initialize(from: bytes)
                return bytes.count
            }
        } else {
            long = String(decoding: bytes, as: UTF8.self)
        }
    }

    init(_ text: String) {
        if text.utf8.count > ShortText.capacity {
            long = text
        } else {
            self = text.withUTF8Bytes { AttributeText(bytes: $0) }
        }
    }

    var string: String { long ?? short.withBytes { String(decoding: $0, as: UTF8.self) } }

    /// The text's length in UTF-8 bytes.
    var count: Int { long?.utf8.count ?? short.count }

    func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        if let long { return try long.withUTF8Bytes(body) }
        return try short.withBytes(body)
    }
}

/// A record's `device`. Apple writes `<<HKDevice: ADDRESS>, NAME>`, the address new in every
/// record and the name the same from record to record, and the ledger keeps the name alone
/// (`AppleHealthConverter.cleanDevice`): held as the text before the name (inline) and the
/// name (a string the reader shares between records), a record's device takes no string of
/// its own (it was one allocation per record). Any other text is held as it is.
enum DeviceText: Sendable {
    case text(String)
    case parts(head: AttributeText, name: String, closed: Bool)

    /// The attribute's text.
    var text: String {
        switch self {
        case .text(let text): text
        case .parts(let head, let name, let closed): head.string + name + (closed ? ">" : "")
        }
    }

    /// `AppleHealthConverter.cleanDevice(text)`.
    func cleaned(memo: AppleHealthConverter.Memo? = nil) -> String {
        switch self {
        case .text(let text): AppleHealthConverter.cleanDevice(text, memo: memo)
        case .parts(_, let name, _): name
        }
    }
}

/// The last few distinct values of one attribute, by their bytes as libxml2 gave them: type
/// names, units and source names repeat from record to record, so each is decoded (and, past
/// 15 bytes, allocated) once rather than per record.
struct RecentStrings {
    private var entries: [(bytes: [UInt8], text: String)] = []
    private var oldest = 0
    private static let capacity = 8

    func string(for bytes: UnsafeBufferPointer<UInt8>) -> String? {
        for entry in entries where sameBytes(entry.bytes, bytes) { return entry.text }
        return nil
    }

    /// `string(for: bytes)`, or `make(bytes)`, remembered.
    mutating func string(for bytes: UnsafeBufferPointer<UInt8>, _ make: (UnsafeBufferPointer<UInt8>) -> String) -> String {
        if let known = string(for: bytes) { return known }
        let text = make(bytes)
        remember(bytes, as: text)
        return text
    }

    mutating func remember(_ bytes: UnsafeBufferPointer<UInt8>, as text: String) {
        if entries.count < RecentStrings.capacity {
            entries.append((Array(bytes), text))
        } else {
            entries[oldest] = (Array(bytes), text)
            oldest = (oldest + 1) % RecentStrings.capacity
        }
    }
}

/// Whether `bytes` are `known`'s bytes (`memcmp`, after the counts).
private func sameBytes(_ known: [UInt8], _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    guard known.count == bytes.count else { return false }
    guard let base = bytes.baseAddress, !bytes.isEmpty else { return true }
    return known.withUnsafeBufferPointer { memcmp($0.baseAddress!, base, bytes.count) == 0 }
}

/// Why an import stopped.
public enum ImportError: Error, Sendable, Equatable, CustomStringConvertible {
    case cannotOpen(path: String, reason: String)
    /// A zip archive that opens but holds no readable export (exit 65: the data is at fault).
    case unusableArchive(path: String, reason: String)
    /// A file in an encoding libxml2 would misread (exit 65).
    case wrongEncoding(path: String, encoding: String)
    /// Broken or truncated XML at `line`.
    case malformed(path: String, line: Int, message: String)
    /// A record of a kept type that does not make a valid sample.
    case invalidRecord(line: Int, message: String)
    /// Reading the file failed after `line` (an I/O error: exit 1, the data is not at fault).
    case readFailed(path: String, line: Int, reason: String)

    /// `description`, naming `path` where the error does not name its file itself (a record's
    /// error comes from the converter, which does not know the file).
    public func description(in path: String) -> String {
        guard case .invalidRecord(let line, let message) = self else { return description }
        return ImportError.malformed(path: path, line: line, message: message).description
    }

    /// One line: control characters in a file name or a quoted value (`&#10;` in an
    /// attribute) are shown as `?`.
    public var description: String {
        let text = switch self {
        case .cannotOpen(let path, let reason):
            "cannot read '\(path)': \(reason)"
        case .unusableArchive(let path, let reason):
            "'\(path)' cannot be imported: \(reason)"
        case .wrongEncoding(let path, let encoding):
            "'\(path)' is \(encoding), and Apple Health exports are UTF-8; convert it first (iconv -f \(encoding) -t UTF-8)"
        case .malformed(let path, let line, let message):
            "\(path) line \(line): \(message)"
        case .invalidRecord(let line, let message):
            "line \(line): \(message)"
        case .readFailed(let path, let line, let reason):
            "cannot read '\(path)' after line \(line): \(reason)"
        }
        return String(String.UnicodeScalarView(text.unicodeScalars.map {
            $0.value < 0x20 || (0x7F...0x9F).contains($0.value) ? "?" : $0
        }))
    }
}
