import Foundation

/// Two-stage pipelines over the machine's cores: `produce` runs on a thread of its own and hands
/// items to `consume`, which runs on the calling thread, in order, with at most `depth` items
/// waiting between them. Decoding input (JSON, XML) thus overlaps with appending it. Each
/// item is handed over, not copied: `consume` owns it (and may take it apart).
///
/// Items sent before `produce` throws are consumed first, then its error is rethrown. If
/// `consume` throws, the producer's next `emit` throws `Cancelled` so it stops, and `run`
/// waits for its thread before rethrowing: nothing outlives the call.
public enum Pipeline {
    public struct Cancelled: Error {}

    public static func run<Item: Sendable>(depth: Int = 4,
                                           produce: @escaping @Sendable (_ emit: (Item) throws -> Void) throws -> Void,
                                           consume: (consuming Item) throws -> Void) throws {
        let channel = Channel<Item>(depth: depth)
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            do {
                try produce { try channel.send($0) }
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
        while let item = try channel.receive() {
            // Moved in: a copy would share the item's storage, and `consume` taking it apart
            // would then copy it whole (an import's chunk of 10,000 events, every one retained).
            try consume(consume item)
        }
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

        func send(_ item: Item) throws {
            condition.lock()
            defer { condition.unlock() }
            while items.count >= depth, !cancelled { condition.wait() }
            if cancelled { throw Cancelled() }
            items.append(item)
            condition.broadcast()
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
