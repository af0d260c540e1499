import CZip
import Foundation

/// Bytes of an `export.xml`, from the file itself or from inside the `export.zip` the Health
/// app writes, cleaned on the way for the XML parser:
///
/// - the internal DTD (`<!DOCTYPE HealthData [ … ]>`) is dropped: iOS 16 writes one that is
///   malformed, and the importer needs no DTD;
/// - control characters XML forbids (such as the stray `\x0b` some exports carry) become spaces;
/// - comments are dropped, all but their line breaks (so the parser's line numbers stay the
///   file's): libxml2's push parser looks for a comment's end again from its start on every
///   chunk, so a comment of megabytes took minutes. Only comments: CDATA sections, processing
///   instructions and tags are passed on untouched, `<!--` inside them included (one in a
///   processing instruction dropped everything up to the next `-->`, records too). A tag ends
///   at its first `>` outside a `"`- or `'`-quoted value: a `<!--` in an attribute value,
///   which XML forbids, reaches the parser, which refuses it.
/// - more than 1 MiB without markup boundary (`maximumGap`) is refused: a tag and the text
///   after it, a CDATA section, a processing instruction, or white space before the root. No
///   export has one, and on a pipe or a device such input never ended. Comments and the
///   DOCTYPE, dropped here, may be longer, up to 1 GiB (`maximumDropped`).
///
/// Reads are streamed in chunks; memory stays flat however large the file.
final class ExportStream {
    private enum Source {
        case file(Int32)
        case zip(LibZip, archive: OpaquePointer, file: OpaquePointer)
    }

    private let source: Source
    /// Uncompressed size of the XML (what progress is measured against).
    let totalBytes: Int64
    /// Uncompressed bytes read so far.
    private(set) var bytesRead: Int64 = 0
    /// Where in the DOCTYPE skip we are: nil outside one.
    private var doctype: DoctypeState = .searching
    private var carry: [UInt8] = []
    private var previousDoctypeByte: UInt8 = 0
    private var doctypeHasSubset = false

    private enum DoctypeState { case searching, inside, done }
    /// Where in the markup after the DOCTYPE we are: in a tag (after `<`, up to `>`), a
    /// processing instruction (`<?`, up to `?>`), a comment or a CDATA section, or in text.
    private enum Markup { case text, tag, instruction, comment, cdata }
    private var markup: Markup = .text
    /// Inside a tag, the quote (`"` or `'`) of the attribute value open there, or 0 outside
    /// one: a `>` in a value does not end the tag.
    private var quote: UInt8 = 0
    /// Bytes since the last `<` outside comments: one tag and the text after it, a CDATA
    /// section or a processing instruction.
    private var sinceTag = 0
    /// Why `read` returned -1 when the input itself is at fault, not the reading.
    private(set) var problem: String?
    /// Why `read` returned -1 when reading the file failed (`strerror`): an I/O error, not the data's.
    private(set) var readError: String?
    /// No Health export has a tag or a text this long. libxml2 checks each attribute against
    /// all before it, so one element of 400,000 attributes (4.7 MB) took minutes.
    static let maximumGap = 1 << 20
    /// What is dropped costs the parser nothing, whatever its length: this bound only ends an
    /// endless comment or DOCTYPE (from a pipe or a device). `defaultMaximumDropped` but in
    /// tests (`init`).
    let maximumDropped: Int
    static let defaultMaximumDropped = 1 << 30
    /// Bytes of the comment or DOCTYPE being dropped.
    private var dropped = 0
    private static let commentOpen = Array("<!--".utf8), commentClose = Array("-->".utf8)
    private static let cdataOpen = Array("<![CDATA[".utf8), cdataClose = Array("]]>".utf8)
    private static let instructionClose = Array("?>".utf8)

    /// Opens `path`: a `.zip` holding `…/export.xml`, or the XML itself.
    /// Calls `open(2)`/`fstat(2)`, or libzip's `zip_open`, `zip_get_name`, `zip_stat_index`, `zip_fopen_index`.
    /// `checking` hears how far the read-through of an archive's `export.xml` has got (bytes
    /// read, of how many), about every 64 MB, and before it, for an archive from a pipe, how
    /// much of it has been saved (bytes saved, of 0: the total is not known).
    init(path: String, checking: ((Int64, Int64) -> Void)? = nil, maximumDropped: Int = defaultMaximumDropped) throws {
        self.maximumDropped = maximumDropped
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw ImportError.cannotOpen(path: path, reason: String(cString: strerror(errno))) }
        var magic = [UInt8](repeating: 0, count: 4)
        let count = Foundation.read(fd, &magic, 4)
        var info = stat()
        fstat(fd, &info)
        let regular = (info.st_mode & S_IFMT) == S_IFREG
        // An archive's first entry, or the end of an archive with no entry at all.
        if count == 4, magic == [0x50, 0x4B, 0x03, 0x04] || magic == [0x50, 0x4B, 0x05, 0x06] {
            // libzip reads an archive's directory at its end, and the entry is read through
            // before the import (below): an archive from a pipe is saved first, to a file
            // nobody else can open (`spool`), which libzip then reads as any other.
            let zip = try LibZip.load(for: path)
            let (archiveFD, size) = regular ? (fd, Int64(info.st_size)) : try ExportStream.spool(fd, first: magic, path: path, saving: checking)
            if let entries = ExportStream.zipEntryCount(archiveFD, size: size), entries > ExportStream.maximumEntries {
                close(archiveFD)
                throw ImportError.unusableArchive(path: path, reason: "it lists \(entries) entries, and an export has a few thousand at most (libzip holds the whole directory in memory: a million took 295 MB)")
            }
            var code: Int32 = 0
            // A saved pipe has no name to open by: libzip takes its descriptor (and closes
            // it with the archive).
            let opened = regular ? zip.open(path, ZIP_RDONLY, &code) : zip.fdopen(archiveFD, ZIP_RDONLY, &code)
            if regular || opened == nil { close(archiveFD) }
            guard let archive = opened else {
                // It began as an archive does (above), so a missing directory is nearly always
                // a cut copy or download: a zip keeps its directory at its end.
                let cut = code == ZIP_ER_NOZIP ? ": it begins as a zip archive but has no directory at its end (is it truncated? a cut download or copy ends so)" : ""
                throw ImportError.unusableArchive(path: path, reason: "not a readable zip archive (\(zip.describe(code)))\(cut)")
            }
            var names: [(index: Int64, name: String)] = []
            for candidate in 0..<max(0, zip.getNumEntries(archive, 0)) {
                guard let name = zip.getName(archive, UInt64(candidate), 0) else { continue }
                names.append((candidate, String(cString: name)))
            }
            let found = ExportStream.exportEntries(names) { ExportStream.startsAsHealthData(zip, archive, $0) }
            guard let index = found.first?.index, found.count == 1 else {
                zip.close(archive)
                // Two exports in one archive: importing either one silently would leave the
                // other out, and which one is meant is the user's to say.
                throw ImportError.unusableArchive(path: path, reason: found.isEmpty
                    ? "the archive holds no export.xml (nor an export under another name: an .xml file, other than export_cda.xml, whose document is <HealthData>)"
                    : "the archive holds \(found.count) Health exports (\(found.map(\.name).joined(separator: ", "))); unzip the one to import and import that file")
            }
            // Its own name in what follows: `export.xml`, or the name a phone in another
            // language gave it.
            let entry = ExportStream.fileName(found[0].name)
            var stat = zip_stat_t()
            zip.statInit(&stat)
            zip.statIndex(archive, UInt64(index), 0, &stat)
            func openEntry() throws -> OpaquePointer {
                guard let file = zip.fopenIndex(archive, UInt64(index), 0) else {
                    zip.close(archive)
                    throw ImportError.unusableArchive(path: path, reason: "\(entry) inside it cannot be read (encrypted, or compressed with a method libzip lacks)")
                }
                return file
            }
            // libzip checks the entry's CRC-32 only when its last byte is read, and by then the
            // import has committed every batch before: a damaged byte that still parses (a
            // digit) would be in the ledger, and the good file's record, re-imported, a second
            // sample beside it. So the entry is read through once first; nothing is committed
            // from an archive that fails its own check.
            let checked = try openEntry()
            // A wide encoding is named here too, as for a plain file: libxml2 says only
            // "Document is empty" (an audit). The read-through goes on from these bytes.
            var first = [UInt8](repeating: 0, count: 4)
            let firstCount = first.withUnsafeMutableBytes { zip.fread(checked, $0.baseAddress, 4) }
            if firstCount == 4, let encoding = ExportStream.wideEncoding(first) {
                zip.fclose(checked)
                zip.close(archive)
                throw ImportError.unusableArchive(path: path, reason: "its \(entry) is \(encoding), and Apple Health exports are UTF-8; unzip it and convert \(entry) first (iconv -f \(encoding) -t UTF-8)")
            }
            if let damage = ExportStream.readThrough(checked, zip, size: Int64(stat.size), checking: checking) {
                zip.fclose(checked)
                zip.close(archive)
                throw ImportError.unusableArchive(path: path, reason: "\(entry) inside it is damaged (\(damage)); nothing was imported")
            }
            zip.fclose(checked)
            source = .zip(zip, archive: archive, file: try openEntry())
            totalBytes = Int64(stat.size)
        } else {
            if (info.st_mode & S_IFMT) == S_IFDIR {
                close(fd)
                throw ImportError.cannotOpen(path: path, reason: "it is a directory")
            }
            // A byte order mark, or `<?` spelled in wide characters: libxml2 would say only
            // "Document is empty".
            if count == 4, let encoding = ExportStream.wideEncoding(magic) {
                close(fd)
                throw ImportError.wrongEncoding(path: path, encoding: encoding)
            }
            // A compressed export.xml: libxml2 would say only "Document is empty" (an audit).
            if count == 4, let (format, tool) = ExportStream.compression(magic) {
                close(fd)
                throw ImportError.unusableArchive(path: path, reason: "it is \(format)-compressed, and an export is read as XML or as the Health app's zip; decompress it first (\(tool) -dc FILE | ledger import apple-health -)")
            }
            if regular {
                lseek(fd, 0, SEEK_SET)
            } else if count > 0 {
                unread = Array(magic[0..<count])  // a pipe cannot seek back: hand these over first
            }
            source = .file(fd)
            waitsForInput = !regular
            totalBytes = regular ? Int64(info.st_size) : 0
        }
    }

    /// The entries of an archive that hold the export. `export.xml` in English; a phone in
    /// another language names it in that language (`exportar.xml`, `eksport.xml`, `vienti.xml`,
    /// `导出.xml`) beside an `export_cda.xml` that keeps its English name. So: the entries named
    /// `export.xml`, and the other `.xml` entries but `export_cda.xml` whose document
    /// `isHealthData` finds is `<HealthData>`.
    ///
    /// Both kinds count together, so an archive of `a/export.xml` and `b/exportar.xml` is two
    /// exports, as two `export.xml` are. `isHealthData` answers nil for an entry it cannot
    /// read (encrypted, say), which counts as one, so that its own error names it.
    static func exportEntries(_ names: [(index: Int64, name: String)],
                              isHealthData: (Int64) -> Bool?) -> [(index: Int64, name: String)] {
        names.filter { entry in
            let name = fileName(entry.name)
            if name == "export.xml" { return true }
            return name.lowercased().hasSuffix(".xml") && name != "export_cda.xml" && isHealthData(entry.index) != false
        }
    }

    /// An archive entry's name without its folders (`apple_health_export/exportar.xml`: `exportar.xml`).
    static func fileName(_ entry: String) -> String {
        String(entry.split(separator: "/", omittingEmptySubsequences: false).last ?? "")
    }

    /// Whether the entry at `index` begins as an export does: its first 4 KiB name the
    /// `HealthData` document (in the DOCTYPE or as the root element); nil when it cannot be read.
    private static func startsAsHealthData(_ zip: LibZip, _ archive: OpaquePointer, _ index: Int64) -> Bool? {
        guard let file = zip.fopenIndex(archive, UInt64(index), 0) else { return nil }
        defer { zip.fclose(file) }
        var head = [UInt8](repeating: 0, count: 4096)
        let count = head.withUnsafeMutableBytes { zip.fread(file, $0.baseAddress, UInt64($0.count)) }
        guard count >= 0 else { return nil }
        return namesHealthData(head[0..<Int(count)])
    }

    /// Whether `head`, an XML file's first bytes, holds `<!DOCTYPE HealthData` or `<HealthData`.
    static func namesHealthData(_ head: ArraySlice<UInt8>) -> Bool {
        let marks = [Array("<!DOCTYPE HealthData".utf8), Array("<HealthData".utf8)]
        return marks.contains { mark in
            head.count >= mark.count && (head.startIndex...(head.endIndex - mark.count)).contains { start in
                head[start..<(start + mark.count)].elementsEqual(mark)
            }
        }
    }

    /// The largest archive a pipe may bring: more than any Health export's (a heavy user's is
    /// a few GB), and a bound on the disk an endless input takes.
    static let maximumSpooled: Int64 = 32 << 30

    /// Saves the archive arriving on `fd` (a pipe, whose first bytes, `first`, were read
    /// already) to a temporary file in `$TMPDIR` (else /tmp), removed from the directory as
    /// soon as it is made, so it goes away with the process however that ends. Closes `fd`;
    /// returns the file, at its start, and its size. `saving` hears the bytes saved so far,
    /// about every 64 MB.
    static func spool(_ fd: Int32, first: [UInt8], path: String, saving: ((Int64, Int64) -> Void)?) throws -> (Int32, Int64) {
        defer { close(fd) }
        let directory = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(directory)/ledger-import-XXXXXX".utf8CString)
        let file = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard file >= 0 else {
            throw ImportError.cannotOpen(path: path, reason: "a zip archive from a pipe is saved to a temporary file first, and none could be made in \(directory) (\(String(cString: strerror(errno)))); set TMPDIR to a directory with room, or save the archive and import the file")
        }
        unlink(template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        func fail(_ reason: String) -> ImportError {
            close(file)
            return .cannotOpen(path: path, reason: reason)
        }
        var buffer = first + [UInt8](repeating: 0, count: 1 << 20)
        var pending = first.count, saved: Int64 = 0
        while true {
            var offset = 0
            while offset < pending {
                let written = buffer.withUnsafeBytes { Foundation.write(file, $0.baseAddress! + offset, pending - offset) }
                if written < 0 {
                    if errno == EINTR { continue }
                    throw fail("a zip archive from a pipe is saved to a temporary file in \(directory) first, and writing it failed after \(saved >> 20) MB (\(String(cString: strerror(errno)))); set TMPDIR to a directory with room, or save the archive and import the file")
                }
                offset += written
            }
            if (saved + Int64(pending)) >> 26 > saved >> 26 { saving?(saved + Int64(pending), 0) }
            saved += Int64(pending)
            if saved > maximumSpooled {
                throw fail("more than \(maximumSpooled >> 30) GiB arrived, and a Health export's archive is a few GB at most")
            }
            pending = buffer.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress!, $0.count) }
            if pending < 0 {
                if errno == EINTR { pending = 0; continue }
                throw fail(String(cString: strerror(errno)))
            }
            if pending == 0 { break }
        }
        lseek(file, 0, SEEK_SET)
        return (file, saved)
    }

    /// More entries than any export.zip has (its `export.xml`, `export_cda.xml`, a route per
    /// workout, an ECG per recording).
    static let maximumEntries: UInt64 = 100_000

    /// The number of entries the zip archive open as `fd` says it has (its end of central
    /// directory record, or the ZIP64 one), read before libzip reads the whole directory;
    /// nil when no such record is found (libzip then says what is wrong).
    static func zipEntryCount(_ fd: Int32, size: Int64) -> UInt64? {
        // The record is 22 bytes and a comment of up to 65,535 follows it.
        let length = Int(min(size, 22 + 65_535 + 20))
        var tail = [UInt8](repeating: 0, count: length)
        guard pread(fd, &tail, length, off_t(size) - off_t(length)) == length else { return nil }
        func u16(_ at: Int) -> UInt64 { UInt64(tail[at]) | UInt64(tail[at + 1]) << 8 }
        func u32(_ at: Int) -> UInt64 { u16(at) | u16(at + 2) << 16 }
        var at = length - 22
        while at >= 0, !(tail[at] == 0x50 && tail[at + 1] == 0x4B && tail[at + 2] == 0x05 && tail[at + 3] == 0x06) { at -= 1 }
        guard at >= 0 else { return nil }
        let count = u16(at + 10)
        // 0xFFFF: the count is in the ZIP64 record, which the locator just before names.
        guard count == 0xFFFF, at >= 20, u32(at - 20) == 0x0706_4B50 else { return count }
        let record = u32(at - 20 + 8) | u32(at - 20 + 12) << 32
        var zip64 = [UInt8](repeating: 0, count: 40)
        guard record < UInt64(size), pread(fd, &zip64, 40, off_t(record)) == 40,
              zip64[0] == 0x50, zip64[1] == 0x4B, zip64[2] == 0x06, zip64[3] == 0x06 else { return nil }
        return (0..<8).reduce(UInt64(0)) { $0 | UInt64(zip64[32 + $1]) << (8 * UInt64($1)) }
    }

    /// Reads `file` (an entry of an archive) to its end, which makes libzip check its CRC-32.
    /// Returns libzip's reason when a read fails, nil when the entry is whole.
    static func readThrough(_ file: OpaquePointer, _ zip: LibZip, size: Int64,
                            checking: ((Int64, Int64) -> Void)?) -> String? {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var read: Int64 = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { zip.fread(file, $0.baseAddress, UInt64($0.count)) }
            if count == 0 { return nil }
            if count < 0 { return zip.fileError(file).map { String(cString: $0) } ?? "a read failed" }
            if (read + count) >> 26 > read >> 26 { checking?(read + count, size) }
            read += count
        }
    }

    /// The name of the UTF-16 or UTF-32 encoding the first four bytes of a file show, if any.
    static func wideEncoding(_ first: [UInt8]) -> String? {
        switch (first[0], first[1], first[2], first[3]) {
        case (0x00, 0x00, 0xFE, 0xFF), (0x00, 0x00, 0x00, 0x3C): "UTF-32BE"
        case (0xFF, 0xFE, 0x00, 0x00), (0x3C, 0x00, 0x00, 0x00): "UTF-32LE"
        case (0xFE, 0xFF, _, _), (0x00, 0x3C, 0x00, 0x3F): "UTF-16BE"
        case (0xFF, 0xFE, _, _), (0x3C, 0x00, 0x3F, 0x00): "UTF-16LE"
        default: nil
        }
    }

    /// The compression format whose magic number `first` (4 bytes) begins with, and its tool.
    static func compression(_ first: [UInt8]) -> (format: String, tool: String)? {
        switch (first[0], first[1], first[2], first[3]) {
        case (0x1F, 0x8B, _, _): ("gzip", "gzip")
        case (0x42, 0x5A, 0x68, _): ("bzip2", "bzip2")
        case (0xFD, 0x37, 0x7A, 0x58): ("xz", "xz")
        case (0x28, 0xB5, 0x2F, 0xFD): ("zstd", "zstd")
        default: nil
        }
    }

    deinit {
        switch source {
        case .file(let fd):
            close(fd)
        case .zip(let zip, let archive, let file):
            zip.fclose(file)
            zip.close(archive)
        }
    }

    /// Cleaned bytes not yet handed to the parser.
    private var pending: [UInt8] = []
    private var pendingOffset = 0
    private var finished = false
    private var raw = [UInt8](repeating: 0, count: 1 << 18)
    /// Bytes read from a pipe to tell a zip from XML, not yet handed over.
    private var unread: [UInt8] = []
    /// Whether the last byte read was a carriage return (`normalizeLineEnds`).
    private var afterCarriageReturn = false

    /// Whether the import was asked to stop (SIGINT or SIGTERM): a pipe, a terminal or a
    /// socket is waited on in short polls that ask it between them, since a read blocked on a
    /// stalled pipe never returned to the importer's check (an audit: a stalled `… | ledger
    /// import apple-health -` ignored SIGTERM until killed). A regular file's reads do not block.
    var isInterrupted: (() -> Bool)?
    /// Whether reads may block for ever (not a regular file).
    private var waitsForInput = false

    /// Waits until `fd` has bytes (or its end) to read; false, with `problem` set, when the
    /// import was asked to stop first.
    private func awaitInput(_ fd: Int32) -> Bool {
        guard waitsForInput, let isInterrupted else { return true }
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while !isInterrupted() {
            // A quarter of a second between checks; a signal delivered to this thread ends
            // the wait at once (EINTR), one delivered to another is seen at the next check.
            let ready = poll(&entry, 1, 250)
            if ready > 0 || (ready < 0 && errno != EINTR) { return true }  // an error is read's to report
        }
        problem = "the import was interrupted"
        return false
    }

    /// Lends `body` the cleaned bytes not yet handed over, all of them (a read's worth), and
    /// returns their count: 0 at the end, -1 on a read error (`body` is not called for either).
    /// The parser reads them where they are: copied into a buffer of its own first, every
    /// byte of an export was copied once more.
    func withNextBytes(_ body: (UnsafeBufferPointer<UInt8>) -> Void) -> Int {
        guard fill() else { return finished && pendingOffset >= pending.count ? 0 : -1 }
        let count = pending.count - pendingOffset
        pending.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0[pendingOffset...])) }
        pendingOffset = pending.count
        return count
    }

    /// Reads and cleans until some bytes are pending; false at the end or on an error.
    private func fill() -> Bool {
        while pendingOffset >= pending.count {
            if finished { return false }
            let count: Int
            switch source {
            case .file(let fd):
                if !unread.isEmpty {
                    raw.replaceSubrange(0..<unread.count, with: unread)
                    count = unread.count
                    unread = []
                } else {
                    guard awaitInput(fd) else { return false }
                    var read: Int
                    repeat {
                        read = raw.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
                    } while read < 0 && errno == EINTR
                    // The machine's fault, not the file's (exit 1, as `append` says it).
                    if read < 0 { readError = String(cString: strerror(errno)) }
                    count = read
                }
            case .zip(let zip, _, let file):
                count = Int(raw.withUnsafeMutableBytes { zip.fread(file, $0.baseAddress, UInt64($0.count)) })
                // The entry passed its checksum before the import began: a read that fails
                // now is the machine's (exit 1, as for a plain file), not the data's.
                if count < 0 { readError = zip.fileError(file).map { "the archive could not be read: " + String(cString: $0) } ?? "the archive could not be read" }
            }
            if count < 0 { return false }
            if count == 0 {
                // Cut inside the DOCTYPE (a truncated export: iOS 16's is about 9 KB): the
                // parser, which never sees it, would say the file holds no document.
                if doctype == .inside {
                    problem = "the file ends inside its DOCTYPE, before the document (is it truncated?)"
                    return false
                }
                // What was held back while looking for a DOCTYPE is plain text after all.
                finished = true
                // Inside an unfinished comment, the parser is told of it, and says so.
                pending = markup == .comment ? ExportStream.commentOpen : carry.map(cleanByte)
                carry = []
            } else {
                bytesRead += Int64(count)
                let count = normalizeLineEnds(count)
                // The read is cleaned where it is, unless bytes held back go before it.
                if carry.isEmpty {
                    pending = clean(raw[0..<count])
                } else {
                    let input = carry + raw[0..<count]
                    carry = []
                    pending = clean(input[...])
                }
                if problem != nil { return false }
            }
            pendingOffset = 0
        }
        return true
    }

    private static let doctypeOpen = Array("<!DOCTYPE".utf8)

    /// Turns the first `count` bytes of `raw` into XML's line ends, in place, and returns how
    /// many there are now: a carriage return and the line feed after it become one line feed,
    /// and a carriage return alone becomes one (XML 1.0 §2.11, what the parser does itself).
    /// Done before anything else, so that line numbers, which libxml2 counts by line feeds,
    /// are the file's in a file whose lines end with a carriage return alone (every error of
    /// such a file named line 1), comments' kept line breaks included. A pair split between
    /// two reads is one line end too.
    private func normalizeLineEnds(_ count: Int) -> Int {
        raw.withUnsafeMutableBufferPointer { buffer -> Int in
            guard let base = buffer.baseAddress, count > 0 else { return count }
            // The line feed of a pair the last read ended inside is dropped.
            var read = afterCarriageReturn && base[0] == 0x0A ? 1 : 0
            afterCarriageReturn = false
            var write = 0
            if read == 0 {
                // The bytes before the first carriage return stay where they are.
                guard let first = memchr(base, 0x0D, count) else { return count }
                read = UnsafeMutableRawPointer(first).assumingMemoryBound(to: UInt8.self) - base
                write = read
            }
            while read < count {
                let byte = base[read]
                read += 1
                if byte == 0x0D {
                    base[write] = 0x0A
                    if read == count {
                        afterCarriageReturn = true
                    } else if base[read] == 0x0A {
                        read += 1
                    }
                } else {
                    base[write] = byte
                }
                write += 1
            }
            return write
        }
    }

    /// Drops the DOCTYPE and replaces forbidden control characters. Holds back a tail that
    /// might be the start of `<!DOCTYPE` split across reads.
    private func clean(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if doctype == .searching, markup == .comment {
                guard let end = skipComment(bytes[index...], to: &out) else { return out }
                index = end
                continue
            }
            switch doctype {
            case .searching:
                if bytes[index] == UInt8(ascii: "<") {
                    let remaining = bytes.count - index
                    if remaining < ExportStream.doctypeOpen.count {
                        carry = Array(bytes[index...])
                        return out
                    }
                    if Array(bytes[index..<(index + ExportStream.doctypeOpen.count)]) == ExportStream.doctypeOpen {
                        doctype = .inside
                        dropped = 0
                        index += ExportStream.doctypeOpen.count
                        continue
                    }
                    if bytes[index...].starts(with: ExportStream.commentOpen) {
                        // A comment before the root: dropped as later ones are, still looking
                        // for the DOCTYPE after it.
                        dropped = 0
                        markup = .comment
                        index += ExportStream.commentOpen.count
                        continue
                    }
                    if bytes[index + 1] == UInt8(ascii: "?") {
                        // A processing instruction (the XML declaration): passed on whole, a
                        // `<!--` in it included.
                        let (end, _) = ExportStream.search(ExportStream.instructionClose, in: bytes[(index + 2)...])
                        guard let end else {
                            if bytes.count - index > ExportStream.maximumGap { tooLong() } else { carry = Array(bytes[index...]) }
                            return out
                        }
                        out.append(contentsOf: bytes[index..<(end + 2)].map(cleanByte))
                        index = end + 2
                        continue
                    }
                    // The root element comes before any DOCTYPE can: stop looking once it does.
                    if bytes[index + 1] != UInt8(ascii: "?"), bytes[index + 1] != UInt8(ascii: "!") {
                        doctype = .done
                    }
                    sinceTag = 0
                } else {
                    // Before the root only white space may stand between markup, and NULs
                    // count as such (they become spaces): /dev/zero was read for ever.
                    sinceTag += 1
                    if sinceTag > ExportStream.maximumGap {
                        tooLong()
                        return out
                    }
                }
                out.append(cleanByte(bytes[index]))
                index += 1
            case .inside:
                // The internal subset ends with "]>" (or the DOCTYPE with ">" when it has none).
                // Its line breaks stay (as blank lines, which XML allows before the root), so
                // the parser's line numbers are the file's.
                if bytes[index] == 0x0A { out.append(0x0A) }
                if bytes[index] == UInt8(ascii: "[") { doctypeHasSubset = true }
                if bytes[index] == UInt8(ascii: ">"), !doctypeHasSubset || previousDoctypeByte == UInt8(ascii: "]") {
                    doctype = .done
                }
                if bytes[index] > 0x20 { previousDoctypeByte = bytes[index] }
                dropped += 1
                if dropped > maximumDropped {
                    droppedTooLong()
                    return out
                }
                index += 1
            case .done:
                appendMarkup(bytes[index...], to: &out)
                return out
            }
        }
        return out
    }

    /// Passes `bytes` on, cleaned, without comments; holds back in `carry` a tail that might
    /// be the start of `<!--`, `<![CDATA[`, `-->`, `]]>` or `?>` split across reads. Markup
    /// that is passed on goes out in as few appends as possible (a tag and the text after it
    /// in one): this runs for every byte of the export.
    private func appendMarkup(_ bytes: ArraySlice<UInt8>, to out: inout [UInt8]) {
        var index = bytes.startIndex
        /// Bytes before this are in `out` (or were dropped, as comments are).
        var emitted = bytes.startIndex
        func emit(upTo end: Int) {
            guard end > emitted else { return }
            let part = bytes[emitted..<end]
            if ExportStream.hasForbiddenControl(part) {
                out.append(contentsOf: part.map(cleanByte))
            } else {
                out.append(contentsOf: part)
            }
            emitted = end
        }
        func hold(from start: Int) {
            emit(upTo: start)
            carry = Array(bytes[start...])
        }
        /// Counts `count` more bytes since the last `<`; false (with `problem` set) past 1 MiB.
        func within(_ count: Int) -> Bool {
            sinceTag += count
            if sinceTag > ExportStream.maximumGap { tooLong() }
            return sinceTag <= ExportStream.maximumGap
        }
        /// These bytes end inside text or a tag: the rest goes out (counted).
        func passToEnd() {
            if within(bytes.endIndex - index) { emit(upTo: bytes.endIndex) }
        }
        /// Moves past `close` (`]]>`, `?>`), which ends the markup; false when these bytes end
        /// first (what may begin `close` is held back).
        func pass(until close: [UInt8]) -> Bool {
            let (end, stop) = ExportStream.search(close, in: bytes[index...])
            guard within((end.map { $0 + close.count } ?? stop) - index) else { return false }
            guard let end else {
                hold(from: stop)
                return false
            }
            markup = .text
            index = end + close.count
            return true
        }
        // Bytes with no `<!` or `<?` in them hold no comment, CDATA section or instruction:
        // they go out whole, and only the markup from their last `<` on is followed tag by
        // tag (what state the next bytes start in). Every gap in them is shorter than they
        // are; the first is counted with what came before. Nearly every read of an export is
        // such, and following each of its tags was a twentieth of reading it. (Tried at the
        // first text of these bytes: a read nearly always begins inside a tag.)
        var plain = bytes.endIndex - index <= ExportStream.maximumGap
        while index < bytes.endIndex {
            switch markup {
            case .text:
                guard let open = ExportStream.firstIndex(of: UInt8(ascii: "<"), in: bytes[index...]) else {
                    return passToEnd()
                }
                guard within(open - index) else { return }
                sinceTag = 0
                if plain {
                    plain = false
                    if let last = ExportStream.lastOrdinaryTag(in: bytes[open...]), last > open {
                        index = last
                        continue
                    }
                }
                // A tag, as nearly every `<` begins: what follows it is known, and none of the
                // checks below can hold (each needs a `!` or a `?` next, or `<` alone at the end).
                if open + 1 < bytes.endIndex, bytes[open + 1] != UInt8(ascii: "!"), bytes[open + 1] != UInt8(ascii: "?") {
                    markup = .tag
                    quote = 0
                    index = open + 1
                    continue
                }
                let rest = bytes[open...]
                if rest.count < ExportStream.cdataOpen.count,
                   ExportStream.commentOpen.starts(with: rest.prefix(4)) || ExportStream.cdataOpen.starts(with: rest) {
                    hold(from: open)  // could still become "<!--", "<![CDATA[" or "<?"
                    return
                }
                if rest.starts(with: ExportStream.commentOpen) {
                    emit(upTo: open)
                    dropped = 0
                    markup = .comment
                    index = open + ExportStream.commentOpen.count
                    emitted = index
                } else if rest.starts(with: ExportStream.cdataOpen) {
                    markup = .cdata
                    index = open + ExportStream.cdataOpen.count
                } else if rest.dropFirst().first == UInt8(ascii: "?") {
                    markup = .instruction
                    index = open + 2  // its `?>` comes after its `<?`, as before the root
                } else {
                    markup = .tag
                    quote = 0
                    index = open + 1
                }
            case .tag:
                // The first `>` outside a quoted value ends it (XML allows `>` in a value; a
                // `<!--` after one, in the value, was taken for a comment). Values are quoted
                // with `"` or `'` (a review: a `'`-quoted one, of which only `"` were counted,
                // ended at its `>`, and a `<!--` in it dropped a record and was never refused).
                guard let close = ExportStream.firstIndex(of: UInt8(ascii: ">"), in: bytes[index...]) else {
                    followQuotes(bytes[index...])
                    return passToEnd()
                }
                followQuotes(bytes[index..<close])
                guard within(close + 1 - index) else { return }
                index = close + 1
                if quote == 0 { markup = .text }
            case .instruction:
                guard pass(until: ExportStream.instructionClose) else { return }
            case .comment:
                guard let end = skipComment(bytes[index...], to: &out) else { return }
                index = end
                emitted = end
            case .cdata:
                // libxml2's push parser also looks for a CDATA section's end from its start on
                // every chunk: 40 MB of one took 15 s, and 200 MB eight minutes.
                guard pass(until: ExportStream.cdataClose) else { return }
            }
        }
        emit(upTo: bytes.endIndex)
    }

    private func tooLong() {
        problem = "an element, a text, a CDATA section or a processing instruction runs past 1 MiB (no Health export has one); the file is not an export, or is damaged"
    }

    private func droppedTooLong() {
        let bound = maximumDropped >= 1 << 30 ? "\(maximumDropped >> 30) GiB" : "\(maximumDropped >> 10) KiB"
        problem = "a comment or the DOCTYPE runs past \(bound); the file is not an export, or is damaged"
    }

    /// Inside a comment: drops `bytes` up to and including `-->`, all but their line breaks, and
    /// returns the index after it (the markup is text again). Nil when the comment goes on past
    /// these bytes; their last two are then held in `carry`, as they may begin `-->`.
    private func skipComment(_ bytes: ArraySlice<UInt8>, to out: inout [UInt8]) -> Int? {
        let (end, stop) = ExportStream.search(ExportStream.commentClose, in: bytes)
        dropped += (end ?? stop) - bytes.startIndex
        if dropped > maximumDropped {
            droppedTooLong()
            return nil
        }
        for byte in bytes[bytes.startIndex..<stop] where byte == 0x0A { out.append(0x0A) }
        guard let end else {
            carry = Array(bytes[stop...])
            return nil
        }
        markup = .text
        return end + ExportStream.commentClose.count
    }

    /// Where `close` (`-->`, `]]>`) begins in `bytes`, and where the bytes before it end. With
    /// no `close` here, `stop` leaves out the last `close.count - 1` bytes: they may begin it.
    private static func search(_ close: [UInt8], in bytes: ArraySlice<UInt8>) -> (end: Int?, stop: Int) {
        var from = bytes.startIndex
        while let candidate = firstIndex(of: close[0], in: bytes[from...]) {
            if bytes[candidate...].starts(with: close) { return (candidate, candidate) }
            if bytes.endIndex - candidate < close.count { break }
            from = candidate + 1
        }
        return (nil, max(bytes.startIndex, bytes.endIndex - (close.count - 1)))
    }

    /// Follows `quote` over these bytes of a tag. Apple quotes values with `"` only: bytes
    /// without a `'` toggle it by their count of `"` (a tag holds a dozen or more, and a
    /// `memchr` per quote cost more than reading them all); others are walked byte by byte.
    private func followQuotes(_ bytes: ArraySlice<UInt8>) {
        let (doubles, singles) = ExportStream.quotes(in: bytes)
        if singles == 0 {
            // (Inside a `'`-quoted value, every `"` is part of it.)
            if quote != UInt8(ascii: "'"), doubles % 2 == 1 { quote = quote == 0 ? UInt8(ascii: "\"") : 0 }
            return
        }
        for byte in bytes {
            if quote == 0 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") { quote = byte }
            } else if byte == quote {
                quote = 0
            }
        }
    }

    /// How many `"` and `'` occur in `bytes`: a loop the compiler vectorizes.
    private static func quotes(in bytes: ArraySlice<UInt8>) -> (doubles: Int, singles: Int) {
        bytes.withUnsafeBufferPointer { buffer in
            var doubles = 0, singles = 0
            for value in buffer {
                doubles &+= value == UInt8(ascii: "\"") ? 1 : 0
                singles &+= value == UInt8(ascii: "'") ? 1 : 0
            }
            return (doubles, singles)
        }
    }

    /// Whether `bytes` hold a control character XML forbids (below 0x20 but tab, line feed and
    /// carriage return), read eight bytes at a time: a word with no byte below 0x20 (most of
    /// them) needs no look at its bytes. This runs over every byte of the export.
    static func hasForbiddenControl(_ bytes: ArraySlice<UInt8>) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return false }
            func forbidden(_ byte: UInt8) -> Bool { byte < 0x20 && byte != 0x09 && byte != 0x0A && byte != 0x0D }
            let raw = UnsafeRawPointer(base)
            var index = 0
            while index + 8 <= buffer.count {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                // Non-zero exactly when some byte of the word is below 0x20.
                if (word &- 0x2020_2020_2020_2020) & ~word & 0x8080_8080_8080_8080 != 0 {
                    for offset in index..<(index + 8) where forbidden(buffer[offset]) { return true }
                }
                index += 8
            }
            while index < buffer.count {
                if forbidden(buffer[index]) { return true }
                index += 1
            }
            return false
        }
    }

    /// The last `<` of `bytes` when none of them begins `<!` or `<?` (nor may one that ends
    /// them: the markup from their first `<` on is then followed as before) and none is a `'`:
    /// the tags skipped are taken to leave the text state at their last `<`, which only tags
    /// quoted as Apple quotes them are trusted to (a `'` sends the read tag by tag).
    private static func lastOrdinaryTag(in bytes: ArraySlice<UInt8>) -> Int? {
        bytes.withUnsafeBufferPointer { buffer -> Int? in
            guard let base = buffer.baseAddress, memchr(base, Int32(UInt8(ascii: "'")), buffer.count) == nil else { return nil }
            let end = base + buffer.count
            var from = base
            var last: UnsafePointer<UInt8>?
            while from < end, let found = memchr(from, Int32(UInt8(ascii: "<")), end - from) {
                let open = UnsafePointer(found.assumingMemoryBound(to: UInt8.self))
                if open + 1 < end, open[1] == UInt8(ascii: "!") || open[1] == UInt8(ascii: "?") { return nil }
                last = open
                from = open + 1
            }
            // A `<` this close to the end may begin a `<!--`, `<![CDATA[` or `<?` with the next
            // read, and is taken for one only from the text before it: one inside a value (which
            // the parser refuses) was held back as markup, and with the next read's `!--` taken
            // for a comment and dropped, the `<` with it, and the records up to a `-->` (a review).
            if let found = last, end - found < ExportStream.cdataOpen.count { return nil }
            return last.map { bytes.startIndex + ($0 - base) }
        }
    }

    /// `bytes.firstIndex(of: byte)` with `memchr`.
    private static func firstIndex(of byte: UInt8, in bytes: ArraySlice<UInt8>) -> Int? {
        bytes.withUnsafeBufferPointer { buffer -> Int? in
            guard let base = buffer.baseAddress, let found = memchr(base, Int32(byte), buffer.count) else { return nil }
            return bytes.startIndex + (UnsafeRawPointer(found) - UnsafeRawPointer(base))
        }
    }

    private func cleanByte(_ byte: UInt8) -> UInt8 {
        byte < 0x20 && byte != 0x09 && byte != 0x0A && byte != 0x0D ? 0x20 : byte
    }
}
