import Foundation
import LedgerCore

/// Runs `body` with the path of a fresh, not yet created ledger directory inside a new
/// temporary folder, and removes the folder afterwards, whatever `body` does.
public func withTemporaryLedger<R>(_ body: (String) throws -> R) rethrows -> R {
    let folder = FileManager.default.temporaryDirectory
        .appendingPathComponent("ledger-test-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    return try body(folder.appendingPathComponent("ledger.db").path)
}

/// The async form of `withTemporaryLedger`.
public func withTemporaryLedger<R>(_ body: (String) async throws -> R) async rethrows -> R {
    let folder = FileManager.default.temporaryDirectory
        .appendingPathComponent("ledger-test-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    return try await body(folder.appendingPathComponent("ledger.db").path)
}

/// The seeded generator of property tests (LedgerCore's SplitMix64): print `seed` on failure
/// and rerun with `LEDGER_TEST_SEED` to reproduce.
public typealias SeededGenerator = SplitMix64

extension SplitMix64 {
    /// A seed from `LEDGER_TEST_SEED` when set (to reproduce a failure), else a random one.
    public static func fromEnvironment() -> SplitMix64 {
        if let text = ProcessInfo.processInfo.environment["LEDGER_TEST_SEED"], let seed = UInt64(text) {
            return SplitMix64(seed: seed)
        }
        return SplitMix64(seed: UInt64.random(in: 1...UInt64.max))
    }
}

/// Builds NDJSON sample lines for tests.
public enum Fixtures {
    /// A step sample as one NDJSON line.
    public static func stepLine(id: String? = nil, user: String = "default", value: Double, start: String,
                                end: String, source: String = "iPhone", zone: String? = nil) -> String {
        var fields = [
            "\"kind\":\"sample\"", "\"type\":\"steps\"", "\"value\":\(value)", "\"unit\":\"count\"",
            "\"start\":\"\(start)\"", "\"end\":\"\(end)\"", "\"source\":\"\(source)\"", "\"user\":\"\(user)\"",
        ]
        if let id { fields.append("\"id\":\"\(id)\"") }
        if let zone { fields.append("\"zone\":\"\(zone)\"") }
        return "{" + fields.joined(separator: ",") + "}"
    }

    /// `count` distinct step samples, one per minute from 2026-01-01, as NDJSON.
    public static func stepsFile(count: Int, user: String = "default", value: Double = 10) -> String {
        var lines: [String] = []
        lines.reserveCapacity(count)
        let base = 1_767_225_600  // 2026-01-01T00:00:00Z
        for index in 0..<count {
            let start = base + index * 60
            lines.append(stepLine(user: user, value: value, start: iso(start), end: iso(start + 60)))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Seconds since 1970 as `YYYY-MM-DDTHH:MM:SSZ`.
    public static func iso(_ seconds: Int) -> String {
        Timestamp(seconds: Int64(seconds)).format(offsetSeconds: 0, alwaysFraction: false)
    }
}

/// Runs `body` with the path of a ledger directory (not yet created) on a 640 KiB tmpfs
/// mounted at a temporary folder, when this process may mount one (root, as in CI); returns
/// false when it may not (the caller says it skipped).
public func withTinyDisk(_ body: (String) throws -> Void) throws -> Bool {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-tiny-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/bin/mount"),
          try runProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=640k", "tmpfs", folder]).status == 0 else { return false }
    defer { _ = try? runProcess("/bin/umount", [folder]) }
    try body(folder + "/ledger.db")
    return true
}
