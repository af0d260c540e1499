extension FixedWidthInteger {
    /// `text` as a whole number written in ASCII decimal digits alone, or nil: no sign, no
    /// space, no underscore. Swift's own `init?(_:)` also reads `+5` (an audit: `Last-Event-ID:
    /// +5` resumed a stream, `If-Match: +5` checked the head), which no option, header or query
    /// argument of the ledger documents; every number a user or client writes goes through here.
    public init?(digits text: some StringProtocol) {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 &- 0x30 < 10 }) else { return nil }
        self.init(text, radix: 10)
    }
}
