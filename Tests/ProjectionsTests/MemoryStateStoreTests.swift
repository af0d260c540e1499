import Foundation
import LedgerCore
import Projections
import Testing

/// `MemoryStateStore` against a plain model (a dictionary, sorted when scanned) under random
/// puts, overwrites, deletes, gets and prefix scans, for a hashed table and for `samples`,
/// which is kept in sorted arrays.
@Suite("Memory state store")
struct MemoryStateStoreTests {
    @Test("every table behaves as an ordered map", arguments: [StateTable.samples, .daily, .userSamples])
    func orderedMap(table: StateTable) throws {
        var random = SplitMix64(seed: 77 &+ UInt64(StateTable.allCases.firstIndex(of: table)!))
        let store = MemoryStateStore()
        var model: [[UInt8]: [UInt8]] = [:]
        // Keys share their first bytes, as the fold's do (a user, a type), so prefixes matter.
        func key() -> [UInt8] {
            let length = table == .samples ? 8 : 9
            return (0..<length).map { index in index < 4 ? 0 : UInt8(random.next() % (index < 6 ? 3 : 256)) }
        }
        func sorted(_ prefix: [UInt8]) -> [([UInt8], [UInt8])] {
            model.filter { $0.key.starts(with: prefix) }
                .sorted { $0.key.lexicographicallyPrecedes($1.key) }.map { ($0.key, $0.value) }
        }
        var keys: [[UInt8]] = []
        for step in 0..<4_000 {
            // Mostly ascending keys (as a fold writes seqs), some out of order.
            var next = key()
            if random.next() % 4 != 0, let last = keys.last, table == .samples {
                let previous = last.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                next = withUnsafeBytes(of: (previous &+ 1 &+ random.next() % 5).bigEndian) { Array($0) }
            }
            switch random.next() % 10 {
            case 0..<6:
                let value = [UInt8(step & 255), UInt8(step >> 8)]
                store.put(table, next, value)
                model[next] = value
                keys.append(next)
            case 6..<8 where !keys.isEmpty:
                let victim = keys[Int(random.next() % UInt64(keys.count))]
                store.delete(table, victim)
                model[victim] = nil
                if random.next() % 3 == 0 {
                    // Written again after its delete (a sample amended back, say).
                    store.put(table, victim, [9, UInt8(step & 255)])
                    model[victim] = [9, UInt8(step & 255)]
                }
            default:
                let probe = keys.isEmpty || random.next() % 2 == 0 ? next : keys[Int(random.next() % UInt64(keys.count))]
                #expect(store.get(table, probe) == model[probe])
            }
            if step % 500 == 0 {
                for prefix in [[], [0, 0, 0, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0, 2, 1]] as [[UInt8]] {
                    for reverse in [false, true] {
                        var seen: [([UInt8], [UInt8])] = []
                        try store.scan(table, prefix: prefix, reverse: reverse) { k, v in seen.append((k, v)); return true }
                        let expected = reverse ? sorted(prefix).reversed() : sorted(prefix)
                        #expect(seen.map(\.0) == expected.map(\.0))
                        #expect(seen.map(\.1) == expected.map(\.1))
                        // A scan stops when its body says so.
                        var first: [UInt8]?
                        try store.scan(table, prefix: prefix, reverse: reverse) { k, _ in first = k; return false }
                        #expect(first == expected.first?.0)
                    }
                }
            }
        }
        let entries = store.entries(table)
        #expect(entries.count == model.count)
        #expect(entries.filter { model[$0.key] != $0.value }.isEmpty, "entries that differ from the model")
    }
}

@Test("a state table's ordinal is its place in allCases (stores index their tables by it)")
func stateTableOrdinals() {
    #expect(StateTable.allCases.map(\.ordinal) == Array(StateTable.allCases.indices))
}
