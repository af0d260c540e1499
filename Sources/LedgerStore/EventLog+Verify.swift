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
    /// `progress` is called every 65,536 events with the count so far.
    public func verifyChain(progress: ((UInt64) -> Void)? = nil) throws -> VerifyReport {
        var expected: UInt64 = 1
        var previousHash = EventRecord.genesisHash
        var last: EventRecord?
        try forEachRecord { record in
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
            let event = try record.event()
            if record.format >= 2, EventCodec.encode(id: event.id, payload: event.payload) != record.typed {
                throw LedgerError.corrupt(seq: record.seq, reason: "its typed part does not say what its JSON says")
            }
            previousHash = hash
            last = record
            if record.seq % 65_536 == 0 { progress?(record.seq) }
            expected += 1
            return true
        }
        let head = Head(seq: last?.seq ?? 0, hash: previousHash, recorded: last?.recorded)
        return VerifyReport(verified: expected - 1, head: head)
    }
}
