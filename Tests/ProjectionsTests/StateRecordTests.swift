import Foundation
import LedgerCore
@testable import Projections
import Testing

@Suite("state records")
struct StateRecordTests {
    @Test("a bucket's latest end, read without decoding its entries, is the decoded entries' latest end")
    func latestEnd() {
        var random = SplitMix64(seed: 31)
        let names = ["", "iPhone", "Apple Watch de Zoë", "🏃 tracker", String(repeating: "x", count: 300)]
        #expect(BucketEntry.latestEnd(BucketEntry.encode([])) == nil)
        for _ in 0..<500 {
            let entries = (0..<Int(random.next() % 40)).map { _ in
                BucketEntry(id: UUID(bytes: (0..<16).map { _ in UInt8(truncatingIfNeeded: random.next()) }),
                            source: names[Int(random.next() % UInt64(names.count))],
                            zone: names[Int(random.next() % UInt64(names.count))],
                            start: Int64(bitPattern: random.next()) >> 8,
                            end: Int64(bitPattern: random.next()) >> 8,
                            value: Double(random.next() % 10_000) / 7)
            }
            let bytes = BucketEntry.encode(entries)
            #expect(BucketEntry.latestEnd(bytes) == BucketEntry.decode(bytes).map(\.end).max())
            #expect(BucketEntry.latestEnd(bytes) == entries.map(\.end).max())
        }
    }
}
