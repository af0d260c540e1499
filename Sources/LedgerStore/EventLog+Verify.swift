import LedgerCore

extension EventLog {
    /// What `verify` found.
    public struct VerifyReport: Sendable, Equatable {
        /// Events whose chain hash was recomputed and matched.
        public var verified: UInt64
        public var head: Head
    }

    /// Recomputes the hash chain from `seq` 1 and checks that positions are gapless and that
    /// every stored event decodes. Throws `LedgerError.corrupt` naming the first bad `seq`.
    /// `progress` is called every `progressStep` (65,536) events with the count so far.
    ///
    /// Decoding each event's JSON (to compare it with its typed part) is most of the work, and
    /// it does not depend on the chain: a second thread walks the chain in order and checks
    /// the content of every other chunk of 4,096 records, while this thread checks the chunks
    /// in between. The first bad event is still the one reported: a chunk is handed over (or
    /// checked) before any later record's problem is raised (`Pipeline` consumes what was sent
    /// before rethrowing the producer's error).
    public func verifyChain(progress: ((UInt64) -> Void)? = nil) throws -> VerifyReport {
        enum Item: Sendable {
            /// Records for this thread to check.
            case records([EventRecord])
            /// The reading thread checked records up to this seq itself.
            case checked(UInt64)
            case end(VerifyReport)
        }
        var report = VerifyReport(verified: 0, head: Head(seq: 0, hash: EventRecord.genesisHash, recorded: nil))
        var reported: UInt64 = 0
        try Pipeline.run(depth: 4, produce: { (emit: (Item) throws -> Void) in
            var expected: UInt64 = 1
            var previousHash = EventRecord.genesisHash
            var last: EventRecord?
            var chunk: [EventRecord] = []
            var handOver = true
            do {
                try self.forEachRecord { record in
                    guard record.seq == expected else {
                        throw LedgerError.corrupt(seq: expected, reason: "missing from the log (the next stored seq is \(record.seq))")
                    }
                    let hash = record.chainHash(previous: previousHash)
                    guard hash == record.hash else {
                        throw LedgerError.corrupt(seq: record.seq, reason: "its hash does not match its content and the previous hash (the log was altered at or before this event's bytes)")
                    }
                    if let previous = last, record.recorded < previous.recorded {
                        throw LedgerError.corrupt(seq: record.seq, reason: "'recorded' goes back in time")
                    }
                    previousHash = hash
                    last = record
                    expected += 1
                    chunk.append(record)
                    if chunk.count == 4096 {
                        if handOver {
                            try emit(.records(chunk))
                        } else {
                            try EventLog.checkContent(chunk)
                            try emit(.checked(record.seq))
                        }
                        handOver.toggle()
                        chunk.removeAll(keepingCapacity: true)
                    }
                    return true
                }
            } catch let cancelled as Pipeline.Cancelled {
                throw cancelled  // this thread found a bad event first
            } catch {
                // Events before the one that broke the chain may themselves be bad, and they
                // come first.
                try EventLog.checkContent(chunk)
                throw error
            }
            if !chunk.isEmpty { try emit(.records(chunk)) }
            try emit(.end(VerifyReport(verified: expected - 1,
                                       head: Head(seq: last?.seq ?? 0, hash: previousHash, recorded: last?.recorded))))
        }, consume: { item in
            var seq: UInt64?
            switch item {
            case .records(let records):
                try EventLog.checkContent(records)
                seq = records.last?.seq
            case .checked(let last):
                seq = last
            case .end(let final):
                report = final
            }
            // Chunks come in order, so each multiple of 65,536 is passed exactly once.
            if let seq, seq / EventLog.progressStep > reported / EventLog.progressStep {
                reported = seq
                progress?(seq - seq % EventLog.progressStep)
            }
        })
        return report
    }

    /// Checks that each record's JSON decodes and that its typed part says what the JSON says.
    private static func checkContent(_ records: [EventRecord]) throws {
        for record in records {
            let event = try record.event()
            if record.format >= 2, EventCodec.encode(id: event.id, payload: event.payload) != record.typed {
                throw LedgerError.corrupt(seq: record.seq, reason: "its typed part does not say what its JSON says")
            }
        }
    }
}
