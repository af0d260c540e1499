import Foundation
import LedgerCore
import LedgerStore
import Synchronization

/// The one writer of the server: POSTed batches queue here, and a dedicated thread commits
/// everything queued so far in one LMDB write transaction (group commit), each batch in a
/// nested transaction so it stays all-or-nothing on its own. Many concurrent requests then
/// cost one fsync instead of one each.
///
/// `completion` callbacks run on the writer thread, after the commit is durable.
final class GroupCommitter: Sendable {
    struct Job: Sendable {
        /// Prepared (canonical JSON, typed form) on the request's thread, not the writer's.
        var events: [(InputLocation?, PreparedEvent)]
        var expectHead: UInt64?
        /// The POSTing client's token (its SHA-256), checked again in the commit's transaction.
        var tokenDigest: [UInt8]?
        /// A non-admin client's name: its `share` grants are checked again in the commit's
        /// transaction.
        var sharedBy: String?
        var completion: @Sendable (Result<EventLog.AppendResult, any Error>) -> Void
    }

    private let log: EventLog
    private let queue = Mutex<(jobs: [Job], running: Bool)>(([], true))
    private let wakeup = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let afterCommit: @Sendable () -> Void
    private let commitCount = Atomic<Int>(0)

    /// Write transactions committed so far (each holds one or more batches).
    var commits: Int { commitCount.load(ordering: .relaxed) }

    /// `afterCommit` runs on the writer thread after each group (the server wakes its streams).
    init(log: EventLog, afterCommit: @escaping @Sendable () -> Void) {
        self.log = log
        self.afterCommit = afterCommit
        let thread = Thread { [self] in run() }
        thread.name = "ledger-writer"
        thread.start()
    }

    /// Queues `job`, calling `suspend` first (under the queue's lock, so the job cannot be
    /// answered before it); false, with neither done, once `stop` has begun.
    func submit(suspend: () -> Void, _ job: Job) -> Bool {
        let accepted = queue.withLock { state -> Bool in
            guard state.running else { return false }
            suspend()
            state.jobs.append(job)
            return true
        }
        if accepted { wakeup.signal() }
        return accepted
    }

    /// Refuses new jobs, and returns once every job queued before has been committed and its
    /// completion has run.
    func stop() {
        let first = queue.withLock { state -> Bool in
            defer { state.running = false }
            return state.running
        }
        wakeup.signal()
        if first { finished.wait() }
    }

    private func run() {
        while true {
            wakeup.wait()
            let (jobs, running) = queue.withLock { state -> ([Job], Bool) in
                let jobs = state.jobs
                state.jobs.removeAll()
                return (jobs, state.running)
            }
            if !jobs.isEmpty {
                let results: [Result<EventLog.AppendResult, any Error>]
                do {
                    results = try log.appendGroup(jobs.map { ($0.events, $0.expectHead, $0.tokenDigest, $0.sharedBy) })
                    // Counted when it committed something: a group whose every batch was
                    // refused writes nothing, and one whose transaction failed committed
                    // nothing (an audit saw the count grow while no POST was appended).
                    if results.contains(where: { if case .success = $0 { true } else { false } }) {
                        commitCount.add(1, ordering: .relaxed)
                    }
                } catch {
                    results = Array(repeating: .failure(error), count: jobs.count)
                }
                for (job, result) in zip(jobs, results) { job.completion(result) }
                afterCommit()
            }
            if !running {
                finished.signal()
                return
            }
        }
    }
}
