import Foundation

/// Two-stage pipelines over the machine's cores: `produce` runs on a thread of its own and hands
/// items to `consume` (or `drain`), which runs on the calling thread, in order, with at most
/// `depth` items waiting between them. Decoding input (JSON, XML) thus overlaps with appending it. Each
/// item is handed over, not copied: `consume` owns it (and may take it apart).
///
/// Items sent before `produce` throws are consumed first, then its error is rethrown. If
/// `consume` throws, the producer's next `emit` throws `Cancelled` so it stops, and `run`
/// waits for its thread before rethrowing: nothing outlives the call.
public enum Pipeline {
    public struct Cancelled: Error {}

    public static func run<Item: Sendable>(depth: Int = 4,
                                           produce: @escaping @Sendable (_ emit: (consuming Item) throws -> Void) throws -> Void,
                                           consume: (consuming Item) throws -> Void) throws {
        try run(depth: depth, produce: produce, drain: { next in
            while let item = try next() {
                // Moved in: a copy would share the item's storage, and `consume` taking it
                // apart would then copy it whole (an import's chunk of 10,000 events, every
                // one retained).
                try consume(consume item)
            }
        })
    }

    /// The same pipeline with the consumer pulling: `drain` calls `next` for each item (nil
    /// once `produce` has returned and every item is taken; the producer's error, rethrown,
    /// after the items sent before it). An import takes a batch's pieces one by one into one
    /// transaction this way, so the writer starts on a piece while the reader makes the next.
    public static func run<Item: Sendable>(depth: Int = 4,
                                           produce: @escaping @Sendable (_ emit: (consuming Item) throws -> Void) throws -> Void,
                                           drain: (_ next: () throws -> Item?) throws -> Void) throws {
        try run(depth: depth, produce: { emit, _ in try produce(emit) }, drain: drain)
    }

    /// The same pipeline with the producer told, through `waiting`, how many items it has sent
    /// that the consumer has not yet taken: work either thread may do (an import's content
    /// digests) is done by the producer while the consumer has items in hand, and left to the
    /// consumer when it would otherwise wait.
    public static func run<Item: Sendable>(depth: Int = 4,
                                           produce: @escaping @Sendable (_ emit: (consuming Item) throws -> Void, _ waiting: () -> Int) throws -> Void,
                                           drain: (_ next: () throws -> Item?) throws -> Void) throws {
        let channel = Channel<Item>(depth: depth)
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            do {
                try produce({ item in try channel.send(consume item) }, { channel.waiting })
                channel.finish(nil)
            } catch is Cancelled {
                channel.finish(nil)
            } catch {
                channel.finish(error)
            }
            finished.signal()
        }
        thread.name = "ledger-decode"
        thread.stackSize = 8 << 20
        thread.start()
        defer {
            channel.cancel()
            finished.wait()
        }
        try drain { try channel.receive() }
    }

    private final class Channel<Item>: @unchecked Sendable {
        // @unchecked: every field is read and written only with `condition` locked.
        private let condition = NSCondition()
        /// At most `depth` waiting items, so removing from the front is cheap.
        private var items: [Item] = []
        private var done = false
        private var failure: (any Error)?
        private var cancelled = false
        private let depth: Int

        init(depth: Int) { self.depth = max(1, depth) }

        /// Takes `item` over: the producer keeps no reference to it once it is queued, so the
        /// consumer may take it apart in place (a reference the producer still held until its
        /// `emit` returned made that copy the whole item).
        func send(_ item: consuming Item) throws {
            condition.lock()
            defer { condition.unlock() }
            while items.count >= depth, !cancelled { condition.wait() }
            if cancelled { throw Cancelled() }
            items.append(consume item)
            condition.broadcast()
        }

        /// Items sent and not yet received.
        var waiting: Int {
            condition.lock()
            defer { condition.unlock() }
            return items.count
        }

        func finish(_ error: (any Error)?) {
            condition.lock()
            done = true
            failure = error
            condition.broadcast()
            condition.unlock()
        }

        func cancel() {
            condition.lock()
            cancelled = true
            condition.broadcast()
            condition.unlock()
        }

        func receive() throws -> Item? {
            condition.lock()
            defer { condition.unlock() }
            while items.isEmpty, !done { condition.wait() }
            if !items.isEmpty {
                let item = items.removeFirst()
                condition.broadcast()
                return item
            }
            if let failure { throw failure }
            return nil
        }
    }
}
