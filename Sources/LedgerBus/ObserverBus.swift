import Foundation
import LedgerCore
import LedgerStore
import Projections
import Synchronization

/// Tells subscribers, in this process, that the log's head moved — and nothing else.
///
/// Guarantees (the EventStoreDB / CouchDB `_changes` model): subscribers read committed
/// changes from the log themselves, from their own position, so
/// - a subscription sees every change after its starting `seq`, in `seq` order, with no gap and
///   no duplicate across the catch-up to live hand-over (both are the same read);
/// - a slow subscriber never slows appends and loses nothing: it is only ever behind;
/// - writes by other processes are noticed: a thread polls LMDB's last transaction id every
///   `pollInterval` (10 ms by default), and in-process writers may call `headMoved()` to skip
///   the wait. Signals are coalesced: one wake-up may stand for many commits.
///
/// Callbacks registered with `observe` run on the bus's thread; they must not block.
public final class ObserverBus: Sendable {
    public let log: EventLog
    private let pollInterval: Duration

    private struct State {
        var lastTransaction = -1
        var observers: [UInt64: @Sendable () -> Void] = [:]
        var waiters: [UInt64: (after: Int, continuation: CheckedContinuation<Void, Never>)] = [:]
        var nextID: UInt64 = 0
        var running = false
    }

    private let state = Mutex(State())

    public init(log: EventLog, pollInterval: Duration = .milliseconds(10)) {
        self.log = log
        self.pollInterval = pollInterval
    }

    /// Starts the polling thread. Idempotent.
    public func start() {
        let shouldStart = state.withLock { state -> Bool in
            guard !state.running else { return false }
            state.running = true
            state.lastTransaction = log.lastTransactionID
            return true
        }
        guard shouldStart else { return }
        let thread = Thread { [self] in
            while state.withLock({ $0.running }) {
                headMoved()
                Thread.sleep(forTimeInterval: Double(pollInterval.components.attoseconds) / 1e18
                             + Double(pollInterval.components.seconds))
            }
        }
        thread.name = "ledger-bus"
        thread.start()
    }

    /// Stops the polling thread and wakes every waiter.
    public func stop() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.running = false
            let all = state.waiters.values.map(\.continuation)
            state.waiters.removeAll()
            return all
        }
        waiters.forEach { $0.resume() }
    }

    /// Checks the log's last transaction now and, if it moved, wakes waiters and observers.
    public func headMoved() {
        let current = log.lastTransactionID
        let (observers, ready) = state.withLock { state -> ([@Sendable () -> Void], [CheckedContinuation<Void, Never>]) in
            guard current != state.lastTransaction else { return ([], []) }
            state.lastTransaction = current
            var ready: [CheckedContinuation<Void, Never>] = []
            for (id, waiter) in state.waiters where waiter.after != current {
                ready.append(waiter.continuation)
                state.waiters[id] = nil
            }
            return (Array(state.observers.values), ready)
        }
        // Never call out while holding the lock.
        ready.forEach { $0.resume() }
        observers.forEach { $0() }
    }

    /// A registration made by `observe`; pass it to `removeObserver`.
    public struct Observation: Sendable, Hashable { let id: UInt64 }

    /// Calls `callback` on the bus's thread whenever the head moves (coalesced).
    public func observe(_ callback: @escaping @Sendable () -> Void) -> Observation {
        state.withLock { state in
            state.nextID += 1
            state.observers[state.nextID] = callback
            return Observation(id: state.nextID)
        }
    }

    public func removeObserver(_ observation: Observation) {
        _ = state.withLock { $0.observers.removeValue(forKey: observation.id) }
    }

    public var observerCount: Int { state.withLock { $0.observers.count } }

    /// Returns once LMDB's last transaction id differs from `transaction`, the bus stops, or
    /// the task is cancelled.
    public func waitForCommit(after transaction: Int) async {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if !state.running || state.lastTransaction != transaction || Task.isCancelled { return true }
                    state.waiters[id] = (transaction, continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.continuation.resume()
        }
    }

    /// Changes after `seq` that pass `filter`: first the committed backlog, then live ones.
    /// Starts the bus if it is not running.
    public func changes(after seq: UInt64, filter: ChangeFilter = ChangeFilter()) -> ChangeSubscription {
        start()
        return ChangeSubscription(bus: self, cursor: seq, filter: filter)
    }
}

/// An `AsyncSequence` of committed changes from a position (see `ObserverBus`). Iteration
/// reads the log in chunks as it is consumed, so a consumer that stops reading holds no
/// buffer and costs the writers nothing. Ends when the task is cancelled or the bus stops.
public struct ChangeSubscription: AsyncSequence, Sendable {
    public typealias Element = StoredChange
    let bus: ObserverBus
    let cursor: UInt64
    let filter: ChangeFilter

    public func makeAsyncIterator() -> Iterator {
        Iterator(bus: bus, cursor: cursor, filter: filter)
    }

    public struct Iterator: AsyncIteratorProtocol {
        let bus: ObserverBus
        /// The last seq whose changes have all been read.
        public private(set) var cursor: UInt64
        let filter: ChangeFilter
        var buffer: [StoredChange] = []

        init(bus: ObserverBus, cursor: UInt64, filter: ChangeFilter) {
            self.bus = bus
            self.cursor = cursor
            self.filter = filter
        }

        public mutating func next() async throws -> StoredChange? {
            while buffer.isEmpty {
                if Task.isCancelled { return nil }
                // Note the transaction before reading: a commit after the read moves it, so the
                // wait below cannot miss it.
                let transaction = bus.log.lastTransactionID
                let (changes, through) = try bus.log.changes(after: cursor, filter: filter)
                // A page with no match for the filter still moves the cursor: read on at once
                // rather than wait for a commit that may never come.
                let moved = through != cursor
                cursor = through
                buffer = changes
                if buffer.isEmpty, !moved {
                    await bus.waitForCommit(after: transaction)
                    if Task.isCancelled { return nil }
                }
            }
            return buffer.removeFirst()
        }
    }
}
