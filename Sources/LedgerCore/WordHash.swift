/// The hash of keys the fold looks up for nearly every event (`_rawHashValue(seed:)`, which
/// `Dictionary` and `Set` ask of a key; SipHash-1-3 by default, whose finalization alone is
/// about 60 instructions). Such a key is one word of fields the ledger numbers itself (a
/// type's code, a user's number, a day), mixed with the table's seed by MurmurHash3's 64-bit
/// finalizer: a bijection whose low bits, the ones a table's buckets take, depend on every bit
/// of the word. The seed is the table's, made from one drawn at random per process: keys
/// cannot be chosen to collide without knowing it.
public enum WordHash {
    @inlinable
    public static func mix(_ word: UInt64, seed: Int) -> Int {
        var x = word ^ UInt64(bitPattern: Int64(seed))
        x ^= x >> 33
        x &*= 0xFF51_AFD7_ED55_8CCD
        x ^= x >> 33
        x &*= 0xC4CE_B9FE_1A85_EC53
        x ^= x >> 33
        return Int(truncatingIfNeeded: x)
    }
}
