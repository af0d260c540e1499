import LedgerCore

/// What a fold may know besides the events: injected, never read from the process.
public struct FoldContext: Sendable {
    /// The ledger's default zone (SPEC §4.1), used when neither the sample nor the user's
    /// profile names one.
    public var defaultZone: Zone

    public init(defaultZone: Zone) {
        self.defaultZone = defaultZone
    }
}

/// An event as a fold sees it: its position, commit time and typed content.
public struct LoggedEvent: Sendable, Equatable {
    public var seq: UInt64
    public var recorded: Timestamp
    public var event: Event

    public init(seq: UInt64, recorded: Timestamp, event: Event) {
        self.seq = seq
        self.recorded = recorded
        self.event = event
    }
}

/// A projection: a pure, deterministic fold over the log in `seq` order (SPEC §4).
///
/// Conformers hold their whole state as a value; `apply` must not perform I/O or read the
/// clock, so the same events always give the same rows. The store persists the state together
/// with the last applied `seq` in one transaction.
public protocol Projection: Sendable {
    /// The name users pass to `ledger project`.
    static var name: String { get }
    /// Bumped whenever the fold's logic or state layout changes; a stored projection with
    /// another version is rebuilt from the log.
    static var version: Int { get }

    /// Folds one event into the state.
    mutating func apply(_ event: LoggedEvent, context: FoldContext)
}
