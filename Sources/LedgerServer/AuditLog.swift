import Foundation
import LedgerCore
import LedgerStore
import Synchronization

/// `serve --audit-log PATH`: one NDJSON line per `POST /v1/events` that appended events —
/// when, which API client, and which seqs — so that "who wrote seq 18?" has an answer. The
/// events themselves are as SPEC §3 defines them and carry no writer.
///
/// The line is the server's account beside the log, not part of it nor of the hash chain. It
/// is queued after the commit and written by a thread of its own, so a destination that
/// blocks (a pipe nobody reads, a hung network mount) never holds up appends: past
/// `maximumQueued` lines waiting, further ones are dropped, which is said once on standard
/// error. A crash loses what was queued and not yet written.
final class AuditLog: Sendable {
    private let descriptor: Int32
    private let ownsDescriptor: Bool
    private let state = Mutex<(lines: [[UInt8]], closed: Bool, dropped: Bool, failed: Bool)>(([], false, false, false))
    private let ready = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    static let maximumQueued = 100_000

    struct OpenError: Error, CustomStringConvertible {
        let description: String
    }

    /// Opens `path` for appending, creating it (mode 0640) if need be; `-` is standard error.
    /// A FIFO with no reader is refused (`O_NONBLOCK` at open) rather than waited for.
    init(path: String) throws(OpenError) {
        if path == "-" {
            descriptor = 2
            ownsDescriptor = false
        } else {
            let opened = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0o640)
            guard opened >= 0 else {
                throw OpenError(description: "cannot open the audit log \(path): \(String(cString: strerror(errno)))")
            }
            // Blocking from here on: the writing thread may wait, appends do not.
            _ = fcntl(opened, F_SETFL, fcntl(opened, F_GETFL) & ~O_NONBLOCK)
            descriptor = opened
            ownsDescriptor = true
        }
        let thread = Thread { [self] in drain() }
        thread.name = "ledger-audit-log"
        thread.start()
    }

    /// Records that `client` (nil with `--no-auth`) appended the events of `result`. Returns
    /// at once (called on the writer thread, right after the commit).
    func record(client: APIClient?, _ result: EventLog.AppendResult) {
        let seqs = result.outcomes.compactMap { outcome -> UInt64? in
            if case .appended(let seq) = outcome { seq } else { nil }
        }
        guard let first = seqs.first, let last = seqs.last else { return }
        let line = JSONValue.object([
            "time": .string(EventLog.systemClock().rfc3339),
            "client": client.map { .string($0.name) } ?? .null,
            "appended": .int(Int64(seqs.count)),
            "first": .int(Int64(first)),
            "last": .int(Int64(last)),
        ]).canonicalBytes + [0x0A]
        let (queued, firstDrop) = state.withLock { state -> (Bool, Bool) in
            guard !state.closed else { return (false, false) }
            guard state.lines.count < AuditLog.maximumQueued else {
                defer { state.dropped = true }
                return (false, !state.dropped)
            }
            state.lines.append(line)
            return (true, false)
        }
        if queued { ready.signal() }
        if firstDrop {
            report("its destination takes no more (\(AuditLog.maximumQueued) lines wait); lines are dropped, appends go on")
        }
    }

    /// Writes what is queued, then stops the thread (`serve`'s stop, after the last commit).
    func close() {
        guard state.withLock({ state -> Bool in
            defer { state.closed = true }
            return !state.closed
        }) else { return }
        ready.signal()
        // A destination that blocks is not waited for long (2 s).
        _ = finished.wait(timeout: .now() + 2)
    }

    private func drain() {
        while true {
            ready.wait()
            let (lines, closed) = state.withLock { state in
                defer { state.lines.removeAll() }
                return (state.lines, state.closed)
            }
            for line in lines { write(line) }
            if closed {
                if ownsDescriptor { Glibc.close(descriptor) }
                finished.signal()
                return
            }
        }
    }

    /// Writes one whole line (resuming after a partial write); a failure is said once.
    private func write(_ line: [UInt8]) {
        var offset = 0
        while offset < line.count {
            let written = line.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, line.count - offset) }
            if written > 0 {
                offset += written
            } else if written < 0, errno == EINTR {
                continue
            } else {
                let reason = written < 0 ? String(cString: strerror(errno)) : "nothing written"
                if !state.withLock({ state in defer { state.failed = true }; return state.failed }) {
                    report("cannot write to it (\(reason)); lines are lost until it can, appends go on")
                }
                return
            }
        }
    }

    private func report(_ message: String) {
        FileHandle.standardError.write(Data("ledger serve: the audit log: \(message)\n".utf8))
    }
}
