import CLibXML2
import Foundation

/// One `<Record>` of an Apple Health export, as written (attribute values are strings).
public struct HealthRecord: Sendable, Equatable {
    public var type: String
    public var unit: String?
    public var value: String?
    /// `sourceName`, or the legacy iOS 8 `source`.
    public var sourceName: String?
    public var sourceVersion: String?
    public var device: String?
    public var startDate: String?
    public var endDate: String?
    public var creationDate: String?
    /// `MetadataEntry` children by key.
    public var metadata: [String: String] = [:]
    /// The line of the `<Record` tag, for errors.
    public var line: Int

    public init(type: String, unit: String? = nil, value: String? = nil, sourceName: String? = nil,
                sourceVersion: String? = nil, device: String? = nil, startDate: String? = nil,
                endDate: String? = nil, creationDate: String? = nil, metadata: [String: String] = [:], line: Int) {
        self.type = type
        self.unit = unit
        self.value = value
        self.sourceName = sourceName
        self.sourceVersion = sourceVersion
        self.device = device
        self.startDate = startDate
        self.endDate = endDate
        self.creationDate = creationDate
        self.metadata = metadata
        self.line = line
    }
}

/// Streams the top-level `<Record>` elements of an `export.xml` with libxml2's reader
/// (`xmlTextReader`), never holding more than one record. Records nested in a `<Correlation>`
/// are skipped: Apple writes each of them again at top level.
public final class HealthExportReader {
    private let stream: ExportStream
    private var reader: xmlTextReaderPtr?
    private let path: String
    private var correlationDepth: Int?

    /// Opens `path` (an `export.xml` or the `export.zip` holding it).
    public init(path: String) throws {
        self.path = path
        stream = try ExportStream(path: path)
        ledger_xml_silence()
        let context = Unmanaged.passUnretained(stream).toOpaque()
        let options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_HUGE.rawValue | XML_PARSE_NOBLANKS.rawValue)
        reader = xmlReaderForIO({ context, buffer, length in
            guard let context, let buffer else { return -1 }
            let stream = Unmanaged<ExportStream>.fromOpaque(context).takeUnretainedValue()
            return Int32(buffer.withMemoryRebound(to: UInt8.self, capacity: Int(length)) {
                stream.read(into: $0, capacity: Int(length))
            })
        }, nil, context, path, nil, options)
        guard reader != nil else { throw ImportError.cannotOpen(path: path, reason: "libxml2 could not start reading it") }
    }

    deinit {
        xmlFreeTextReader(reader)
    }

    /// Uncompressed bytes of XML read so far, and in all.
    public var progress: (read: Int64, total: Int64) { (stream.bytesRead, stream.totalBytes) }

    /// The next top-level record, or nil at the end of the document.
    /// Throws `ImportError.malformed` with the line when the XML is broken or truncated.
    public func next() throws -> HealthRecord? {
        while true {
            let status = xmlTextReaderRead(reader)
            if status == 0 { return nil }
            if status < 0 { throw malformed() }
            let nodeType = xmlTextReaderNodeType(reader)
            let depth = Int(xmlTextReaderDepth(reader))
            guard let namePointer = xmlTextReaderConstLocalName(reader) else { continue }
            if nodeType == Int32(XML_READER_TYPE_END_ELEMENT.rawValue) {
                if let start = correlationDepth, depth == start, equals(namePointer, "Correlation") { correlationDepth = nil }
                continue
            }
            guard nodeType == Int32(XML_READER_TYPE_ELEMENT.rawValue) else { continue }
            if equals(namePointer, "Correlation") {
                if xmlTextReaderIsEmptyElement(reader) != 1 { correlationDepth = depth }
                continue
            }
            guard correlationDepth == nil, equals(namePointer, "Record") else { continue }
            return try readRecord(depth: depth)
        }
    }

    private func readRecord(depth: Int) throws -> HealthRecord {
        // The node's own line: the parser's line may already be past it.
        let nodeLine = xmlTextReaderCurrentNode(reader).map { Int(xmlGetLineNo($0)) } ?? 0
        let line = nodeLine > 0 ? nodeLine : Int(xmlTextReaderGetParserLineNumber(reader))
        var record = HealthRecord(type: "", line: line)
        while xmlTextReaderMoveToNextAttribute(reader) == 1 {
            // Names are compared as C strings: no Swift string is made for a name, nor for the
            // value of an attribute the ledger does not read.
            guard let name = xmlTextReaderConstLocalName(reader) else { continue }
            let value = { self.string(xmlTextReaderConstValue(self.reader)) }
            if equals(name, "type") { record.type = value() }
            else if equals(name, "unit") { record.unit = value() }
            else if equals(name, "value") { record.value = value() }
            else if equals(name, "sourceName") || equals(name, "source") { record.sourceName = value() }
            else if equals(name, "sourceVersion") { record.sourceVersion = value() }
            else if equals(name, "device") { record.device = value() }
            else if equals(name, "startDate") { record.startDate = value() }
            else if equals(name, "endDate") { record.endDate = value() }
            else if equals(name, "creationDate") { record.creationDate = value() }
        }
        xmlTextReaderMoveToElement(reader)
        guard xmlTextReaderIsEmptyElement(reader) != 1 else { return record }
        // Children: MetadataEntry key/value pairs, until the record's end tag.
        while true {
            let status = xmlTextReaderRead(reader)
            if status == 0 { return record }
            if status < 0 { throw malformed() }
            let nodeType = xmlTextReaderNodeType(reader)
            let childDepth = Int(xmlTextReaderDepth(reader))
            if nodeType == Int32(XML_READER_TYPE_END_ELEMENT.rawValue), childDepth == depth { return record }
            guard nodeType == Int32(XML_READER_TYPE_ELEMENT.rawValue), childDepth == depth + 1,
                  let name = xmlTextReaderConstLocalName(reader), equals(name, "MetadataEntry") else { continue }
            if let key = xmlTextReaderGetAttribute(reader, "key"), let value = xmlTextReaderGetAttribute(reader, "value") {
                record.metadata[string(key)] = string(value)
                ledger_xml_free(key)
                ledger_xml_free(value)
            }
        }
    }

    private func malformed() -> ImportError {
        var line = Int(xmlTextReaderGetParserLineNumber(reader))
        var message = "the XML is malformed"
        if let error = xmlGetLastError() {
            if let text = error.pointee.message {
                message = String(cString: text).trimmingCharacters(in: .whitespacesAndNewlines)
            }
            if error.pointee.line > 0 { line = Int(error.pointee.line) }
        }
        return ImportError.malformed(path: path, line: line, message: message)
    }

    private func equals(_ pointer: UnsafePointer<xmlChar>, _ name: StaticString) -> Bool {
        strcmp(UnsafeRawPointer(pointer).assumingMemoryBound(to: CChar.self),
               UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)) == 0
    }

    private func string(_ pointer: UnsafePointer<xmlChar>?) -> String {
        guard let pointer else { return "" }
        return String(cString: pointer)
    }

    private func string(_ pointer: UnsafeMutablePointer<xmlChar>) -> String {
        String(cString: pointer)
    }
}

/// Why an import stopped.
public enum ImportError: Error, Sendable, Equatable, CustomStringConvertible {
    case cannotOpen(path: String, reason: String)
    /// Broken or truncated XML at `line`.
    case malformed(path: String, line: Int, message: String)
    /// A record of a kept type that does not make a valid sample.
    case invalidRecord(line: Int, message: String)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let reason):
            "cannot read '\(path)': \(reason)"
        case .malformed(let path, let line, let message):
            "\(path) line \(line): \(message)"
        case .invalidRecord(let line, let message):
            "line \(line): \(message)"
        }
    }
}
