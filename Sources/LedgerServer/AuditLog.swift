import Foundation
import LedgerCore
import LedgerStore
import Synchronization

/// `serve --audit-log PATH`: one NDJSON line per `POST /v1/events` that appended events —
/// when, which API client, and which seqs — so that "who wrote seq 18?" has an answer. The
/// events themselves are as SPEC §3 defines them and carry no writer.
///
/// The line is written after the commit (a crash between the two loses it), to a file opened
/// for appending (`-`: standard error), and is not covered by the hash chain: it is the
/// server's account of its requests, beside the log, not part of it.
final class AuditLog: Sendable {
    private let descriptor: Int32
    private let ownsDescriptor: Bool
    /// Whether a write has failed (said once on standard error, not for every request).
    private let failed = Atomic<Bool>(false)

    struct OpenError: Error, CustomStringConvertible {
        let description: String
    }

    /// Opens `path` for appending, creating it (mode 0640) if need be; `-` is standard error.
    init(path: String) throws(OpenError) {
        if path == "-" {
            descriptor = 2
            ownsDescriptor = false
            return
        }
        let opened = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
        guard opened >= 0 else {
            throw OpenError(description: "cannot open the audit log \(path): \(String(cString: strerror(errno)))")
        }
        descriptor = opened
        ownsDescriptor = true
    }

    deinit {
        if ownsDescriptor { close(descriptor) }
    }

    /// Records that `client` (nil with `--no-auth`) appended the events of `result`.
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
        // One write of one line: with O_APPEND, lines of concurrent writers do not interleave.
        let written = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written != line.count, !failed.exchange(true, ordering: .relaxed) {
            let reason = written < 0 ? String(cString: strerror(errno)) : "a short write"
            FileHandle.standardError.write(Data("ledger serve: cannot write to the audit log (\(reason)); appends go on, unrecorded there\n".utf8))
        }
    }
}
