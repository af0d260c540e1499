import Foundation
import LedgerCore
import Projections

/// A committed change of a projection row (SPEC §8), as stored.
public struct StoredChange: Sendable, Equatable {
    public var seq: UInt64
    public var projection: ProjectionName
    public var user: String
    /// Nil for `grants` rows, which span types.
    public var type: QuantityType?
    /// `{"seq":N,"projection":…,"row":…,"previous":…}`
    public var json: [UInt8]
}

/// Which changes a subscriber wants. Nil fields match everything.
public struct ChangeFilter: Sendable, Equatable {
    public var projection: ProjectionName?
    public var user: String?
    public var type: QuantityType?

    public init(projection: ProjectionName? = nil, user: String? = nil, type: QuantityType? = nil) {
        self.projection = projection
        self.user = user
        self.type = type
    }

    public func matches(_ change: StoredChange) -> Bool {
        if let projection, projection != change.projection { return false }
        if let user, !sameName(user, change.user) { return false }
        if let type, let changeType = change.type, type != changeType { return false }
        return true
    }
}

extension ProjectionName {
    var code: UInt8 {
        switch self {
        case .daily: 1
        case .perSource: 2
        case .lastKnown: 3
        case .grants: 4
        }
    }

    init?(code: UInt8) {
        guard let match = ProjectionName.allCases.first(where: { $0.code == code }) else { return nil }
        self = match
    }
}

/// The `changes` database: `seq` (8 bytes) ‖ index within the seq (4 bytes) → projection code
/// (1 byte), type code (1 byte, 0 for grants), user length (4 bytes), user, change JSON.
/// Written in the transaction that commits the events, so a subscriber can resume from any
/// `seq` and nothing is lost if it is slow or gone. Derived from the log: rebuilt with the
/// projections.
extension EventLog {
    func storeChanges(_ changes: [RowChange], in txn: Transaction) throws {
        try EventLog.encodeChanges(changes) { key, value in
            try txn.put(changesDatabase, key, value, append: true)
        }
    }

    /// The `changes` table's entries for `changes` (one flush of the fold), in key order: the
    /// key is the seq and the change's index within it; the value the projection, type and
    /// user (for filters) and the change's JSON. What appends store and `verify` compares.
    static func encodeChanges(_ changes: [RowChange],
                              _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Void) rethrows {
        var index: UInt32 = 0
        var lastSeq: UInt64 = 0
        for change in changes {
            if change.seq != lastSeq {
                index = 0
                lastSeq = change.seq
            }
            let row = change.row ?? change.previous
            let user = row?.values["user"]?.stringValue ?? ""
            let type = row?.values["type"]?.stringValue.flatMap(QuantityType.init(name:))
            let json = change.jsonBytes
            // Made in one list of its final size (appending the parts one by one grew it
            // three times).
            var value: [UInt8] = []
            value.reserveCapacity(6 + user.utf8.count + json.count)
            value.append(change.projection.code)
            value.append(type?.code ?? 0)
            withUnsafeBytes(of: UInt32(truncatingIfNeeded: user.utf8.count).bigEndian) { value.append(contentsOf: $0) }
            value.append(contentsOf: user.utf8)
            value.append(contentsOf: json)
            var key = change.seq.bigEndianBytes
            withUnsafeBytes(of: index.bigEndian) { key.append(contentsOf: $0) }
            try body(key, value)
            index += 1
        }
    }

    /// Changes with `seq > after` that pass `filter`, whole seqs at a time: reading stops at a
    /// seq boundary once `limit` changes were examined. Returns them with the last seq
    /// examined (`through`), so a subscriber whose filter matches nothing still moves on.
    public func changes(after: UInt64, limit: Int = 1024, filter: ChangeFilter = ChangeFilter())
        throws -> (changes: [StoredChange], through: UInt64) {
        let page = try changePage(after: after, limit: limit, filter: filter)
        return (page.changes, page.through)
    }

    /// `changes(after:limit:filter:)`, and whether reading stopped at `limit` (`cut`: more
    /// may follow) rather than at the head.
    public func changePage(after: UInt64, limit: Int, filter: ChangeFilter = ChangeFilter())
        throws -> (changes: [StoredChange], through: UInt64, cut: Bool) {
        try environment.read { txn in
            var result: [StoredChange] = []
            var through = after
            var examined = 0
            // The changes are the projections': past the head (events removed from the log's
            // end) or behind it, they are not served (a review: `subscribe` sent the changes of
            // removed events that every folding command refused).
            let head = try head(in: txn).seq
            _ = try checkedProjectionVersion(in: txn, head: head)
            guard after < UInt64.max else { return ([], after, false) }  // no seq comes after the last one
            try txn.scan(changesDatabase, from: (after + 1).bigEndianBytes) { key, value in
                guard key.count >= 8 else {
                    throw LedgerError.damaged(path: path, reason: "'changes' holds a key of \(key.count) bytes; 'ledger rebuild' writes them again")
                }
                let seq = UInt64(bigEndianBytes: key)
                if examined >= limit, seq != through { return false }
                examined += 1
                through = seq
                guard value.count >= 6, let projection = ProjectionName(code: value[0]) else { return true }
                let length = Int(UInt32(value[2]) << 24 | UInt32(value[3]) << 16 | UInt32(value[4]) << 8 | UInt32(value[5]))
                guard length <= value.count - 6 else {
                    throw DamagedState(reason: "a stored change of seq \(seq) names a user of \(length) bytes in \(value.count - 6)")
                }
                let user = String(decoding: value[6..<(6 + length)], as: UTF8.self)
                let change = StoredChange(seq: seq, projection: projection, user: user,
                                          type: QuantityType(code: value[1]), json: Array(value[(6 + length)...]))
                if filter.matches(change) { result.append(change) }
                return true
            }
            // Seqs with no change at all (duplicates-only batches never get one) are passed too.
            if examined < limit { through = max(through, head) }
            return (result, through, examined >= limit)
        }
    }

    /// The id of the last transaction committed by any process that a read begun now sees: it
    /// moves whenever one commits, and once it has moved every read sees that commit.
    public var lastTransactionID: Int { environment.visibleTransaction }
}

/// Where a subscriber resumes: after seq `after`, skipping the first `sentOfNext` changes (of
/// those it receives) of the seq after. The text is an SSE event id or a `subscribe --from`:
/// `SEQ` (everything of SEQ was received) or `SEQ.K` (its changes 0…K were).
public struct ChangePosition: Equatable, Sendable {
    public var after: UInt64
    public var sentOfNext = 0

    /// Why resuming from this position (as `given`) cannot be honoured by a log whose head is
    /// `head`, or nil. A position past the head was never sent by this ledger: it was restored
    /// from an older copy, or is another ledger, and the changes its next seqs bring would be
    /// taken for ones the reader already had, and silently skipped.
    public func pastHead(_ head: UInt64, given: String) -> String? {
        let last = sentOfNext > 0 ? after + 1 : after
        guard last > head else { return nil }
        return "resume position \(given) is past this ledger's head (seq \(head)): it was not sent by this ledger as it stands (restored from an older copy, or another ledger), and its next changes would be skipped; resume from the head, or from 0 to read every change again"
    }

    public init(after: UInt64, sentOfNext: Int = 0) {
        self.after = after
        self.sentOfNext = sentOfNext
    }

    public init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard let seq = parts.first.flatMap({ UInt64(digits: $0) }) else { return nil }
        switch parts.count {
        case 1:
            after = seq
        case 2:
            guard seq > 0, let k = Int(digits: parts[1]), k < Int.max else { return nil }
            after = seq - 1
            sentOfNext = k + 1
        default:
            return nil
        }
    }
}

extension EventLog {
    /// Whether `event` passes a stream of events' `user` and `type` (`subscribe events`,
    /// `GET /v1/subscribe/events`): whose and of which type it is as `log --user` reads it. A
    /// correction is its target sample's; a grant or revoke is of the types it names; a
    /// profile of the types whose priority it sets, and of every type when it sets a zone
    /// (which moves every day). (An audit: corrections of the user's samples were dropped, and
    /// `--type steps` passed every event that was not a sample.) A correction's target is read
    /// when the correction comes, not remembered: the stream runs for ever.
    public func eventPasses(_ event: (id: UUID, payload: Event.Payload), user: String?, type: QuantityType?) throws -> Bool {
        var subject = event.payload.user
        var types: [QuantityType]?  // nil: every type
        switch event.payload {
        case .sample(let sample):
            types = [sample.type]
        case .correction(let correction):
            guard case .sample(let sample)? = try record(id: correction.target)?.typedEvent().payload else { return false }
            subject = sample.user
            types = [sample.type]
        case .grant(let change), .revoke(let change):
            types = change.read + change.share
        case .profile(let profile):
            types = profile.zone != nil ? nil : Array((profile.priority ?? [:]).keys)
        }
        if let user, !sameName(subject, user) { return false }
        if let type, let types, !types.contains(type) { return false }
        return true
    }
}
