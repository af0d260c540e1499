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

/// `ledger-dynamic`, the dynamically linked build that the static `ledger` runs `serve` and
/// `import` in: the one next to `ledgerBinary()`.
public func ledgerDynamicBinary() throws -> String {
    let binary = try ledgerBinary()
    let path = URL(fileURLWithPath: binary).deletingLastPathComponent().appendingPathComponent("ledger-dynamic").path
    guard FileManager.default.isExecutableFile(atPath: path) else { throw BinaryNotFound(searchedFrom: binary) }
    return path
}

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
    writeKeepingSIGPIPE(stdin, to: input.fileHandleForWriting.fileDescriptor)
    try? input.fileHandleForWriting.close()
    process.waitUntilExit()
    group.wait()
    return ProcessOutput(status: process.terminationStatus, stdout: collected.out, stderr: collected.err)
}

/// Writes `bytes` to a child's standard input. A child that exits without reading all of it (a
/// usage error, a refused file: since `ledger` is static it starts, fails and exits within a
/// millisecond, before this process had written its input) closes the pipe, and the write
/// raised SIGPIPE, which killed the whole test run. So SIGPIPE is blocked on this thread while
/// it writes (the write then fails with EPIPE, and what was not read is dropped, as the child
/// chose), and one the write raised is taken off the thread's pending signals before the mask
/// is put back. Ignoring SIGPIPE for the process instead would pass the ignored signal on to
/// every child (exec keeps it), changing what `cat … | ledger` tests see.
private func writeKeepingSIGPIPE(_ bytes: [UInt8], to descriptor: Int32) {
    var pipeSignal = sigset_t()
    sigemptyset(&pipeSignal)
    sigaddset(&pipeSignal, SIGPIPE)
    var previous = sigset_t()
    pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
    defer {
        var pending = sigset_t()
        if sigpending(&pending) == 0, sigismember(&pending, SIGPIPE) == 1 {
            var noWait = timespec()
            _ = sigtimedwait(&pipeSignal, nil, &noWait)
        }
        pthread_sigmask(SIG_SETMASK, &previous, nil)
    }
    var offset = 0
    bytes.withUnsafeBytes { buffer in
        while offset < buffer.count {
            let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
            if written > 0 {
                offset += written
            } else if written < 0, errno == EINTR {
                continue
            } else {
                return  // EPIPE: the child is gone or stopped reading
            }
        }
    }
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

/// Waits, at most `seconds`, until process `pid` is `ledger` (its name once a shell has
/// exec'd it) and has a handler for `signal` (`SigCgt` in /proc/PID/status): a signal sent then
/// reaches the command's own handling, not the shell or the default action. False if it did not.
public func waitUntilCatching(_ signal: Int32, _ pid: pid_t, seconds: Double = 20) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if let name = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8), name == "ledger\n",
           let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
           let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigCgt:") }),
           let mask = UInt64(line.dropFirst("SigCgt:".count).trimmingCharacters(in: .whitespaces), radix: 16),
           mask & (1 << UInt64(signal - 1)) != 0 {
            return true
        }
        usleep(2_000)
    }
    return false
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
