import Foundation

/// What a finished child process left behind.
public struct ProcessOutput: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

/// The built `ledger` executable, for end-to-end tests: `$LEDGER_BIN` when set, else the
/// `ledger` next to the running test bundle (SwiftPM puts both in the same build folder).
public func ledgerBinary() throws -> String {
    _ = childrenStartWithInterruptsEnabled
    if let path = ProcessInfo.processInfo.environment["LEDGER_BIN"] { return path }
    var folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = folder.appendingPathComponent("ledger").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        folder.deleteLastPathComponent()
    }
    let bundle = Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("ledger").path
    if FileManager.default.isExecutableFile(atPath: bundle) { return bundle }
    throw BinaryNotFound(searchedFrom: CommandLine.arguments[0])
}

/// A test runner may be started with SIGINT ignored (a CI job's shell does that to background
/// jobs), and children inherit an ignored signal — which `ledger` then keeps ignored, as a
/// program should. Tests that interrupt a child need it default: a handler that does nothing
/// leaves this process as unmoved by the signal as before, while a child starts with the
/// default (exec resets handled signals, not ignored ones). Once, on first use of
/// `ledgerBinary()`, which every test that starts `ledger` calls.
private let childrenStartWithInterruptsEnabled: Void = {
    var current = sigaction()
    guard sigaction(SIGINT, nil, &current) == 0, let handler = current.__sigaction_handler.sa_handler,
          unsafeBitCast(handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self) else { return }
    var action = sigaction()
    action.__sigaction_handler.sa_handler = { _ in }
    sigemptyset(&action.sa_mask)
    action.sa_flags = Int32(SA_RESTART)
    sigaction(SIGINT, &action, nil)
}()

public struct BinaryNotFound: Error, CustomStringConvertible {
    public var searchedFrom: String
    public var description: String {
        "the ledger executable was not found near \(searchedFrom); run 'swift build' first or set LEDGER_BIN"
    }
}

/// Runs `executable` to completion with `stdin` as its input and returns its exit status and
/// output. Output is read concurrently, so a chatty child never blocks on a full pipe.
public func runProcess(_ executable: String, _ arguments: [String], stdin: [UInt8] = [],
                       environment: [String: String]? = nil) throws -> ProcessOutput {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let input = Pipe(), output = Pipe(), errors = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    let collected = CollectedOutput()
    let group = DispatchGroup()
    for (handle, isError) in [(output.fileHandleForReading, false), (errors.fileHandleForReading, true)] {
        group.enter()
        DispatchQueue.global().async {
            let data = handle.readDataToEndOfFile()
            collected.set(data, isError: isError)
            group.leave()
        }
    }
    input.fileHandleForWriting.write(Data(stdin))
    try? input.fileHandleForWriting.close()
    process.waitUntilExit()
    group.wait()
    return ProcessOutput(status: process.terminationStatus, stdout: collected.out, stderr: collected.err)
}

private final class CollectedOutput: @unchecked Sendable {
    // @unchecked: both fields are written under `lock` and read after the readers finished.
    private let lock = NSLock()
    private(set) var out = ""
    private(set) var err = ""

    func set(_ data: Data, isError: Bool) {
        lock.withLock {
            if isError { err = String(decoding: data, as: UTF8.self) } else { out = String(decoding: data, as: UTF8.self) }
        }
    }
}

/// A child started in its own process group, so that it and everything it starts can be
/// killed at once (`kill(-pid, SIGKILL)`). Its stdout is readable line by line.
public final class SpawnedGroup: @unchecked Sendable {
    // @unchecked: `pid` and `stdoutFD` are set once in init; reads happen from one thread.
    public let pid: pid_t
    private let stdoutFD: Int32
    private var pending: [UInt8] = []

    /// Starts `/bin/sh -c script` with `environment` added to this process's environment.
    public init(shell script: String, environment: [String: String] = [:]) throws {
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw POSIXError(.EMFILE) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 1)
        posix_spawn_file_actions_addclose(&actions, pipeFDs[0])
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        let argv: [UnsafeMutablePointer<CChar>?] = (["/bin/sh", "-c", script] as [String]).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { (key: String, value: String) in strdup(key + "=" + value) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let code = posix_spawn(&child, "/bin/sh", &actions, &attributes, argv, envp)
        close(pipeFDs[1])
        guard code == 0 else {
            close(pipeFDs[0])
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EINVAL)
        }
        self.pid = child
        self.stdoutFD = pipeFDs[0]
    }

    /// Kills the whole group with SIGKILL and reaps the shell.
    public func killGroup() {
        kill(-pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }

    /// Reads what is left on stdout (after `killGroup`) until end of file.
    public func readRemainingOutput() -> String {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(stdoutFD, &buffer, buffer.count)
            if count <= 0 { break }
            pending += buffer[0..<count]
        }
        close(stdoutFD)
        return String(decoding: pending, as: UTF8.self)
    }
}
