import Foundation
import LedgerCore
import Synchronization

/// Where a command writes: a file descriptor (the real stdout/stderr) or memory (tests).
public final class OutputSink: Sendable {
    private enum Target { case descriptor(Int32), memory }
    private let target: Target
    private let buffer = Mutex<[UInt8]>([])
    /// Whether this is a terminal (decides the default format and the progress bar).
    public let isTerminal: Bool

    public static let standardOutput = OutputSink(descriptor: STDOUT_FILENO)
    public static let standardError = OutputSink(descriptor: STDERR_FILENO)

    public init(descriptor: Int32) {
        self.target = .descriptor(descriptor)
        self.isTerminal = isatty(descriptor) == 1
    }

    /// The process started with this descriptor closed (`ledger log >&-`; `main` then opened
    /// /dev/null on it, so that no file the ledger opens takes its number): every write fails
    /// with EBADF, as it would have, instead of vanishing into /dev/null with exit 0.
    public func startedClosed() {
        closedAtStart.store(true, ordering: .relaxed)
    }
    private let closedAtStart = Atomic<Bool>(false)

    /// An in-memory sink; `text` returns what was written.
    public init(isTerminal: Bool = false) {
        self.target = .memory
        self.isTerminal = isTerminal
    }

    public func write(_ text: String) {
        write(bytes: Array(text.utf8))
    }

    /// Writes all of `bytes`. Writes to a descriptor are unbuffered, so each line a command
    /// prints is out before the next begins (subscribers rely on this).
    ///
    /// Once SIGINT or SIGTERM has been caught (`catchInterrupts`), the rest is written only
    /// while the reader takes it: a reader that takes nothing for `drainTimeout` seconds has
    /// stopped reading, and the rest is given up. (It was given up at once, so a reader that
    /// was still reading, slowly, got a line cut in two and lost changes on resuming.) A
    /// write that fails (EPIPE: the reader went away) sets `failed`.
    public func write(bytes: [UInt8]) {
        switch target {
        case .memory:
            buffer.withLock { $0.append(contentsOf: bytes) }
        case .descriptor(let fd):
            // Once a reader has taken nothing for `drainTimeout` after a signal, nothing more
            // is written: each write of a command that writes many (`subscribe events`, one a
            // record) would wait that long again.
            guard !drainGaveUp.load(ordering: .relaxed) else { return }
            if closedAtStart.load(ordering: .relaxed) {
                if !bytes.isEmpty { recordFailure(EBADF) }
                return
            }
            bytes.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    var count = raw.count - offset
                    if OutputSink.draining {
                        // A pipe with room for PIPE_BUF bytes takes that many without blocking.
                        guard OutputSink.waitWritable(fd, seconds: OutputSink.drainTimeout) else {
                            drainGaveUp.store(true, ordering: .relaxed)
                            return
                        }
                        count = min(count, Int(PIPE_BUF))
                    }
                    let written = Foundation.write(fd, raw.baseAddress! + offset, count)
                    if written < 0 {
                        if errno == EINTR { continue }
                        // A descriptor the caller made non-blocking: wait for room rather than
                        // spin on the write (when draining, the next turn waits, with its bound).
                        if errno == EAGAIN {
                            if !OutputSink.draining { _ = OutputSink.waitWritable(fd, seconds: nil) }
                            continue
                        }
                        recordFailure(errno)
                        return
                    }
                    offset += written
                }
            }
        }
    }

    /// How long a write after SIGINT or SIGTERM waits for the reader to take more.
    static let drainTimeout = 2.0
    /// Whether writes now go on only while the reader takes them: after a signal, in a command
    /// that asked for it (`catchInterrupts(interruptingWrites:)`).
    private static var draining: Bool {
        interrupted.load(ordering: .relaxed) && writesDrainAfterInterrupt.load(ordering: .relaxed)
    }
    private let drainGaveUp = Atomic<Bool>(false)

    /// Whether `fd` can take bytes within `seconds` (nil: however long it takes).
    private static func waitWritable(_ fd: Int32, seconds: Double?) -> Bool {
        var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        let result = poll(&ready, 1, seconds.map { Int32($0 * 1000) } ?? -1)
        return result == 1
    }

    private let failure = Mutex<Int32?>(nil)

    private func recordFailure(_ code: Int32) {
        failure.withLock { $0 = $0 ?? code }
    }

    /// Why a write failed (`strerror`), once one has: the reader went away (EPIPE), the
    /// device is full (ENOSPC), or the descriptor was closed at start (EBADF).
    public var failed: String? { failure.withLock { $0 }.map { String(cString: strerror($0)) } }

    /// Forgets a failed write: for output whose loss does not fail the command (`serve`'s
    /// "listening on" line).
    public func forgetFailure() {
        failure.withLock { $0 = nil }
    }

    /// Why a write failed, unless it was only the reader going away (EPIPE: `ledger log | head`
    /// ends quietly, as with SIGPIPE): output that never arrived anywhere (`> /dev/full`, a
    /// closed descriptor) must not end with exit 0.
    public var lostOutput: String? {
        guard let code = failure.withLock({ $0 }), code != EPIPE else { return nil }
        return String(cString: strerror(code))
    }

    /// Why nothing more can be written, found before anything more is: a write failed
    /// (`failed`), the descriptor was closed at start, or its reader went away (`poll` says
    /// POLLERR, as a pipe does, or POLLHUP, as a socket whose peer closed does). A command
    /// with nothing to write yet can then end too.
    public var unwritable: String? {
        if let failed { return failed }
        guard case .descriptor(let fd) = target else { return nil }
        if closedAtStart.load(ordering: .relaxed) { return String(cString: strerror(EBADF)) }
        var state = pollfd(fd: fd, events: 0, revents: 0)
        let gone = poll(&state, 1, 0) == 1 && state.revents & Int16(POLLERR | POLLHUP) != 0
        return gone ? "its reader closed it" : nil
    }

    /// Everything written to an in-memory sink, as text.
    public var text: String {
        buffer.withLock { String(decoding: $0, as: UTF8.self) }
    }
}

/// Where `append` reads when no file is given.
public enum InputSource: Sendable {
    case standardInput
    case bytes([UInt8])

    /// Reads everything. Calls `read(2)` on standard input until end of file.
    func readAll(limitingLines: Bool = false) throws -> [UInt8] {
        switch self {
        case .bytes(let bytes):
            return bytes
        case .standardInput:
            return try readDescriptor(STDIN_FILENO, name: "standard input", limitingLines: limitingLines)
        }
    }
}

/// Reads `fd` to its end. With `limitingLines`, input stops being read as soon as what was
/// read decides its error (`LineLimit`), instead of being read whole first: `append
/// /dev/zero` ran until memory was gone.
func readDescriptor(_ fd: Int32, name: String, expectedSize: Int = 0, limitingLines: Bool = false) throws -> [UInt8] {
    var result: [UInt8] = []
    // A file's size is known: one buffer of that size, rather than doublings that briefly hold
    // the input twice.
    result.reserveCapacity(expectedSize)
    var chunk = [UInt8](repeating: 0, count: 1 << 20)
    var lines = limitingLines ? LineLimit() : nil
    var checked = 0
    while true {
        let count = chunk.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
        if count < 0 {
            if errno == EINTR { continue }
            throw CLIError.runtime("cannot read \(name): \(String(cString: strerror(errno)))")
        }
        if count == 0 { return result }
        result.append(contentsOf: chunk[0..<count])
        // The first bytes wait until a byte order mark split across reads is whole, so that
        // `LineLimit` sees it as one.
        if checked == 0, result.count < LineLimit.byteOrderMark.count,
           LineLimit.byteOrderMark.starts(with: result) { continue }
        if let stop = try lines?.check(result[checked...]) {
            result.removeSubrange(stop.end...)
            // A blank line after the line that decides the error, so that the parser does not
            // call it a truncated last line: more followed it.
            if stop.morePending { result.append(0x0A) }
            return result
        }
        checked = result.count
    }
}

/// Follows input as it is read (see `readDescriptor`), so that input which can hold no
/// events, or whose error is already decided, is not read to its end (an audit: `(echo '[';
/// yes ' ') | ledger append` took 6 GB in 16 s, and an object left open on its first line
/// followed by endless blank lines grew the same way).
///
/// - NDJSON and single objects (first byte `{`): no line may pass 1 MiB. Once more than
///   1 MiB is read the input cannot be one object, so it must be NDJSON, where every
///   non-blank line is an object on its own: a line that does not start with `{` and end
///   with `}` cannot be, and reading stops at the end of the line that settles what
///   `EventInput.shape` makes of the input (the first two non-blank lines decide whether it
///   is NDJSON or one object over 1 MiB).
/// - Arrays (first byte `[`), whose lines may be long: more than 1 MiB of white space in a
///   row, or an element of more than 8 MiB (its bytes other than white space; an event may
///   take 1 MiB written compactly), is refused as it is read; a raw control character in a
///   string, which JSON forbids, ends the reading there, and the parser names it.
/// - Anything else (first byte neither): read to the end of its first line, whose error it is.
struct LineLimit {
    /// What the first byte that is neither white space nor a byte order mark makes the input;
    /// nil until it is read.
    private enum Form {
        /// `{`: NDJSON, or one object.
        case lines
        /// `[`.
        case array
        /// Anything else, which can begin no event: the parser's error is then about the
        /// line it is on, whatever follows, and reading stops at that line's end. (An audit:
        /// `yes 'not json' | ledger append` and `append /dev/urandom` read until memory ran
        /// out before saying "line 1: …", and a 500 MB file of such lines took 3 s and 532 MB.)
        case notEvents
    }
    private var form: Form?
    private var line = 1
    private var length = 0
    /// Bytes checked so far.
    private var total = 0
    /// The current line's first and last bytes other than white space (`{`-input).
    private var lineFirst: UInt8?
    private var lineLast: UInt8?
    /// Complete non-blank lines so far, and whether one of them cannot be an event alone.
    private var nonBlank = 0
    private var sawLoneless = false
    /// Bytes of blank lines after the first non-blank line, before a second.
    private var blankAfterFirst = 0
    /// Bytes of the blank lines in a row that end at the current line (and of the current line
    /// while it is blank): more than 1 MiB of them is refused, as it is in an array (an
    /// audit: `yes ''`, or one event and then endless blank lines, grew until memory ran out).
    private var blankRun = 0
    /// Whether any bytes were checked (`total` counts only `{`-input's).
    private var started = false
    private var array = ArrayScan()

    /// Checks the next bytes read. Returns where reading may stop (the input up to that index
    /// decides the error), or nil to read on.
    mutating func check(_ bytes: ArraySlice<UInt8>) throws(InputError) -> (end: Int, morePending: Bool)? {
        // A byte order mark at the very start is white space to the parser (it reads it as
        // three spaces), so it is here too: read as bytes, it made the first line one that
        // cannot be an event, and reading stopped after 1 MiB of NDJSON that parsed, so that
        // the rest of the file was never appended and nothing said so (an audit).
        defer { started = true }
        if !started, bytes.starts(with: LineLimit.byteOrderMark) {
            let mark = bytes.startIndex + LineLimit.byteOrderMark.count
            _ = try check([UInt8](repeating: 0x20, count: LineLimit.byteOrderMark.count)[...])
            return try check(bytes[mark...])
        }
        var rest = bytes
        if form == nil {
            // Blank lines count too: endless spaces are refused as any long line is.
            let first = bytes.firstIndex { !EventInput.isSpace($0) && !LineLimit.byteOrderMark.contains($0) } ?? bytes.endIndex
            try count(bytes[..<first])
            guard first < bytes.endIndex else { return nil }
            form = switch bytes[first] {
            case UInt8(ascii: "{"): .lines
            case UInt8(ascii: "["): .array
            default: .notEvents
            }
            rest = bytes[first...]
        }
        switch form! {
        case .array:
            return try array.scan(rest).map { ($0, false) }
        case .notEvents:
            try count(rest)
            if let newline = rest.firstIndex(of: 0x0A) { return (newline + 1, false) }
            return nil
        case .lines:
            return try count(rest)
        }
    }

    static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// Counts `bytes` into the current line, and a new line after each newline. Returns where
    /// reading may stop, after a line that settles the input's error (`{`-input).
    @discardableResult
    private mutating func count(_ bytes: ArraySlice<UInt8>) throws(InputError) -> (end: Int, morePending: Bool)? {
        var index = bytes.startIndex
        while let newline = bytes[index...].firstIndex(of: 0x0A) {
            length += newline - index
            try refuseLong()
            note(bytes[index..<newline])
            total += newline + 1 - index
            if endLine(length: length) { return (newline + 1, true) }
            try refuseBlankRun(partial: 0)
            line += 1
            length = 0
            index = newline + 1
        }
        length += bytes.endIndex - index
        total += bytes.endIndex - index
        try refuseLong()
        note(bytes[index...])
        if lineFirst == nil { try refuseBlankRun(partial: length) }
        return nil
    }

    private func refuseBlankRun(partial: Int) throws(InputError) {
        guard blankRun + partial > EventInput.maxLineBytes else { return }
        throw InputError(location: .line(line), message: "more than 1 MiB of blank lines in a row, which no file of events holds")
    }

    /// Keeps the first and last bytes of the current line other than white space.
    private mutating func note(_ piece: ArraySlice<UInt8>) {
        guard let last = piece.lastIndex(where: { !EventInput.isSpace($0) }) else { return }
        if lineFirst == nil { lineFirst = piece.first { !EventInput.isSpace($0) } }
        lineLast = piece[last]
    }

    /// Ends the current line; true when reading may stop after it.
    private mutating func endLine(length: Int) -> Bool {
        defer { lineFirst = nil; lineLast = nil }
        guard let first = lineFirst else {
            if nonBlank == 1 { blankAfterFirst += length + 1 }
            blankRun += length + 1
            return decided
        }
        blankRun = 0
        nonBlank += 1
        if first != UInt8(ascii: "{") || lineLast != UInt8(ascii: "}") { sawLoneless = true }
        return decided
    }

    /// Past 1 MiB, with a line that cannot stand alone, once the first two non-blank lines
    /// are in (or the first is followed by more than 1 MiB of blank lines): the parser's
    /// error no longer depends on what follows.
    private var decided: Bool {
        total > EventInput.maxLineBytes + 1 && sawLoneless
            && (nonBlank >= 2 || blankAfterFirst > EventInput.maxLineBytes)
    }

    /// A CR before the newline is not counted, as the parser does not count it.
    private func refuseLong() throws(InputError) {
        guard length > EventInput.maxLineBytes + 1 else { return }
        throw InputError(location: .line(line), message: "line is longer than 1 MiB (more than \(EventInput.maxLineBytes) bytes)")
    }
}

/// Follows a JSON array as it is read (see `LineLimit`): strings, nesting and elements.
struct ArrayScan {
    private var inString = false
    private var escaped = false
    private var depth = 0
    private var closed = false
    private var index = 0
    private var elementBytes = 0
    private var whiteRun = 0
    private var line = 1
    /// Bytes other than white space an element may take as written: 8 times an event's
    /// compact 1 MiB, room for any escapes and spacing it could be written with.
    static let maximumElement = 8 << 20

    /// Returns where reading may stop (the parser's error is already in the input), or nil.
    mutating func scan(_ bytes: ArraySlice<UInt8>) throws(InputError) -> Int? {
        for position in bytes.indices {
            let byte = bytes[position]
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                } else if byte < 0x20 {
                    return position + 1
                }
                elementBytes += 1
            } else {
                switch byte {
                case 0x20, 0x09, 0x0D, 0x0A:
                    whiteRun += 1
                    if byte == 0x0A { line += 1 }
                    if whiteRun > EventInput.maxLineBytes {
                        throw InputError(location: .line(line), message: "more than 1 MiB of white space in a row, which no file of events holds")
                    }
                    continue
                default:
                    whiteRun = 0
                }
                // Anything after the array is the parser's error, which quotes the token there.
                if closed { return min(position + 256, bytes.endIndex) }
                switch byte {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "["), UInt8(ascii: "{"): depth += 1
                case UInt8(ascii: "]"), UInt8(ascii: "}"):
                    depth -= 1
                    if depth <= 0 { closed = true }
                case UInt8(ascii: ",") where depth == 1:
                    index += 1
                    elementBytes = 0
                    continue
                default: break
                }
                elementBytes += 1
            }
            if elementBytes > ArrayScan.maximumElement {
                throw InputError(location: .index(index), message: "the event is longer than 1 MiB (more than 8 MiB of it read, white space aside)")
            }
        }
        return nil
    }
}

/// Reads a whole file, with an error that names it.
func readFile(_ path: String, limitingLines: Bool = false) throws -> [UInt8] {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else {
        throw CLIError.runtime("cannot open '\(path)': \(String(cString: strerror(errno)))")
    }
    defer { close(fd) }
    var info = stat()
    let known = fstat(fd, &info) == 0
    if known, (info.st_mode & S_IFMT) == S_IFDIR {
        throw CLIError.runtime("'\(path)' is a directory, not a file of events")
    }
    let size = known && (info.st_mode & S_IFMT) == S_IFREG ? Int(info.st_size) + 1 : 0
    return try readDescriptor(fd, name: "'\(path)'", expectedSize: size, limitingLines: limitingLines)
}

/// A count redrawn in place on stderr (`\r…`) while a long command works, when stderr is a
/// terminal: `init` gives nil otherwise, so scripts and logs get no progress text. `finish`
/// ends the line, once, if anything was drawn, so what follows starts on a line of its own.
final class ProgressLine {
    private let sink: OutputSink
    private let text: (UInt64) -> String
    private var drawn = false
    private var counted: UInt64 = 0

    init?(sink: OutputSink, text: @escaping (UInt64) -> String) {
        guard sink.isTerminal else { return nil }
        self.sink = sink
        self.text = text
    }

    func show(_ count: UInt64) {
        sink.write("\r" + text(count))
        drawn = true
    }

    /// Counts `added` more, and shows the count each time it passes a multiple of `step`.
    func count(_ added: Int, step: UInt64) {
        let before = counted
        counted += UInt64(added)
        if counted / step > before / step { show(counted - counted % step) }
    }

    func finish() {
        if drawn { sink.write("\n") }
        drawn = false
    }
}
