import Foundation
import Testing
@testable import LedgerCore

@Suite("QuantityType")
struct QuantityTypeTests {
    @Test("names and HealthKit aliases", arguments: [
        ("steps", QuantityType.steps), ("HKQuantityTypeIdentifierStepCount", .steps),
        ("distance", .distance), ("HKQuantityTypeIdentifierDistanceWalkingRunning", .distance),
        ("flights", .flights), ("HKQuantityTypeIdentifierFlightsClimbed", .flights),
        ("active-energy", .activeEnergy), ("HKQuantityTypeIdentifierActiveEnergyBurned", .activeEnergy),
    ])
    func names(name: String, type: QuantityType) {
        #expect(QuantityType(name: name) == type)
    }

    @Test("unknown names", arguments: ["", "Steps", "activeEnergy", "active_energy", "HKQuantityTypeIdentifierHeartRate", "steps "])
    func unknownNames(name: String) {
        #expect(QuantityType(name: name) == nil)
    }

    @Test("canonical units and conversion factors")
    func units() throws {
        #expect(QuantityType.steps.canonicalUnit == "count")
        #expect(QuantityType.flights.canonicalUnit == "count")
        #expect(QuantityType.distance.canonicalUnit == "m")
        #expect(QuantityType.activeEnergy.canonicalUnit == "kcal")
        #expect(QuantityType.distance.factor(from: "km") == 1000)
        #expect(QuantityType.distance.factor(from: "mi") == 1609.344)
        #expect(QuantityType.distance.factor(from: "ft") == 0.3048)
        #expect(QuantityType.distance.factor(from: "yd") == 0.9144)
        #expect(QuantityType.activeEnergy.factor(from: "Cal") == 1)
        let kJ = try #require(QuantityType.activeEnergy.factor(from: "kJ"))
        #expect(abs(kJ * 4.184 - 1) < 1e-12)
        for type in QuantityType.allCases {
            #expect(type.factor(from: type.canonicalUnit) == 1, "\(type)")
            #expect(type.acceptedUnits.contains(type.canonicalUnit), "\(type)")
        }
    }

    @Test("a unit has a factor exactly when the type accepts it")
    func factorsMatchAcceptedUnits() {
        let allUnits = Set(QuantityType.allCases.flatMap(\.acceptedUnits)).union(["", "KM", "cal", "kj", "steps"])
        for type in QuantityType.allCases {
            for unit in allUnits {
                #expect((type.factor(from: unit) != nil) == type.acceptedUnits.contains(unit), "\(type) in \(unit)")
            }
        }
    }

    @Test("codes are stable and round trip")
    func codes() {
        #expect(QuantityType.allCases.map(\.code) == [1, 2, 3, 4])
        for type in QuantityType.allCases {
            #expect(QuantityType(code: type.code) == type)
        }
        #expect(QuantityType(code: 0) == nil)
        #expect(QuantityType(code: 5) == nil)
        #expect(QuantityType(code: 255) == nil)
    }

    @Test("types sort by name")
    func ordering() {
        #expect(QuantityType.allCases.sorted() == [.activeEnergy, .distance, .flights, .steps])
        #expect(QuantityType.activeEnergy.rawValue == "active-energy")
    }

    @Test("a sample's canonical value converts its unit")
    func canonicalValue() {
        func sample(_ type: QuantityType, _ value: Double, _ unit: String) -> Sample {
            Sample(user: "u", type: type, value: value, unit: unit, start: Timestamp(seconds: 0),
                   end: Timestamp(seconds: 60), source: SampleSource(name: "s"))
        }
        #expect(sample(.distance, 2, "km").canonicalValue == 2000)
        #expect(sample(.distance, 1, "mi").canonicalValue == 1609.344)
        #expect(sample(.distance, 10, "m").canonicalValue == 10)
        #expect(sample(.steps, 120, "count").canonicalValue == 120)
        #expect(abs(sample(.activeEnergy, 4184, "kJ").canonicalValue - 1000) < 1e-9)
        #expect(sample(.activeEnergy, 5, "Cal").canonicalValue == 5)
    }
}

@Suite("Zone")
struct ZoneTests {
    @Test("fixed offsets", arguments: [
        ("+08:00", 28_800), ("-05:30", -19_800), ("+00:00", 0), ("-00:00", 0), ("+14:00", 50_400), ("-12:00", -43_200),
    ])
    func offsets(text: String, seconds: Int) throws {
        #expect(Zone.parseOffset(text) == seconds)
        let zone = try #require(Zone(text))
        #expect(zone.name == text)
        #expect(zone.description == text)
        #expect(zone.offset(at: Timestamp(seconds: 1_795_910_400)) == seconds)
        #expect(zone.offset(at: Timestamp(seconds: 1_782_907_200)) == seconds)
    }

    @Test("not offsets", arguments: [
        "", "08:00", "+8:00", "+08:0", "+0800", "+08-00", "+0a:00", "+-1:00", "++1:00", "+08:00 ", "+24:00",
        "+23:60", "−08:00", "UTC",
    ])
    func notOffsets(text: String) {
        #expect(Zone.parseOffset(text) == nil)
    }

    @Test("IANA zones follow daylight saving")
    func iana() throws {
        let paris = try #require(Zone("Europe/Paris"))
        #expect(paris.name == "Europe/Paris")
        let winter = Timestamp(seconds: 1_768_478_400)   // 2026-01-15T12:00:00Z
        let summer = Timestamp(seconds: 1_782_907_200)   // 2026-07-01T12:00:00Z
        #expect(paris.offset(at: winter) == 3_600)
        #expect(paris.offset(at: summer) == 7_200)
        // Clocks go forward at 2026-03-29T01:00:00Z.
        #expect(paris.offset(at: Timestamp(seconds: 1_774_746_000 - 1)) == 3_600)
        #expect(paris.offset(at: Timestamp(seconds: 1_774_746_000)) == 7_200)
        let newYork = try #require(Zone("America/New_York"))
        #expect(newYork.offset(at: winter) == -18_000)
        #expect(newYork.offset(at: summer) == -14_400)
        #expect(Zone("UTC")?.offset(at: summer) == 0)
        #expect(Zone.utc.name == "UTC")
        #expect(Zone.utc.offset(at: summer) == 0)
    }

    @Test("anything else is refused", arguments: [
        "", "Mars/Olympus_Mons", "europe/paris", "Europe/Paris ", "Europe", "+24:00", "local",
        String(repeating: "A", count: 65),
    ])
    func refused(text: String) {
        #expect(Zone(text) == nil)
    }
}

@Suite("Digest and UUID helpers")
struct DigestTests {
    @Test("SHA-256 test vectors")
    func vectors() {
        #expect(Digest.sha256(Array("abc".utf8)).hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Digest.sha256([]).hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Digest.sha256(parts: []).hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Digest.byteCount == 32)
    }

    @Test("parts are hashed as their concatenation")
    func parts() {
        let whole = Digest.sha256(Array("hello, ledger".utf8))
        #expect(Digest.sha256(Array("hello".utf8), Array(", ".utf8), Array("ledger".utf8)) == whole)
        #expect(Digest.sha256(parts: [[], Array("hello, ledger".utf8), []]) == whole)
        #expect(Digest.sha256(Array("hello, ledgeR".utf8)) != whole)
    }

    @Test("random bytes have the asked length and differ")
    func random() {
        #expect(Digest.randomBytes(0).isEmpty)
        let a = Digest.randomBytes(32), b = Digest.randomBytes(32)
        #expect(a.count == 32)
        #expect(a != b)
    }

    @Test("constant-time comparison")
    func constantTime() {
        #expect(Digest.constantTimeEqual([1, 2, 3], [1, 2, 3]))
        #expect(!Digest.constantTimeEqual([1, 2, 3], [1, 2, 4]))
        #expect(!Digest.constantTimeEqual([1, 2, 3], [1, 2]))
        #expect(Digest.constantTimeEqual([], []))
    }

    @Test("hex is lower case and zero-padded")
    func hex() {
        #expect([0x00, 0x0F, 0xA5, 0xFF].hex == "000fa5ff")
        #expect([UInt8]().hex == "")
    }

    @Test("name-based UUIDs are stable, version 8 and distinct per name")
    func derivedUUID() {
        let a = UUID.derived(from: Array("a".utf8))
        #expect(a == UUID.derived(from: Array("a".utf8)))
        #expect(a != UUID.derived(from: Array("b".utf8)))
        #expect(a.bytes[6] >> 4 == 8)
        #expect(a.bytes[8] >> 6 == 0b10)
        // The other bits are the digest's.
        let digest = Digest.sha256(Array("a".utf8))
        #expect(Array(a.bytes[0..<6]) == Array(digest[0..<6]))
        #expect(a.bytes[6] & 0x0F == digest[6] & 0x0F)
        #expect(Array(a.bytes[9..<16]) == Array(digest[9..<16]))
    }

    @Test("time-ordered name-based UUIDs: biased milliseconds first, then the digest's bits")
    func timeOrderedUUID() {
        let name = Array("a".utf8)
        let epoch = UUID.derived(milliseconds: 0, from: name)
        #expect(Array(epoch.bytes[0..<6]) == [0x80, 0, 0, 0, 0, 0])
        #expect(epoch.bytes[6] >> 4 == 8 && epoch.bytes[8] >> 6 == 0b10)
        let digest = Digest.sha256(name)
        #expect(Array(epoch.bytes[9..<16]) == Array(digest[9..<16]))
        #expect(Array(UUID.derived(milliseconds: 1, from: name).bytes[0..<6]) == [0x80, 0, 0, 0, 0, 1])
        #expect(Array(UUID.derived(milliseconds: -1, from: name).bytes[0..<6]) == [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        // Ids sort as their instants, across 1970, whatever the name; out-of-range instants clamp.
        let instants: [Int64] = [Int64.min, -300_000_000_000, -1, 0, 1, 1_700_000_000_000, Int64.max]
        let ids = instants.enumerated().map { UUID.derived(milliseconds: $0.element, from: Array("n\($0.offset)".utf8)) }
        #expect(zip(ids, ids.dropFirst()).allSatisfy { $0.precedes($1) })
    }

    @Test("UUID bytes round trip and print in lower case")
    func uuidBytes() {
        let bytes: [UInt8] = [0x6B, 0xA7, 0xB8, 0x10, 0x9D, 0xAD, 0x11, 0xD1, 0x80, 0xB4, 0x00, 0xC0, 0x4F, 0xD4, 0x30, 0xC8]
        let id = UUID(bytes: bytes)
        #expect(id.bytes == bytes)
        #expect(id.lowercased == "6ba7b810-9dad-11d1-80b4-00c04fd430c8")
        #expect(UUID(uuidString: "6BA7B810-9DAD-11D1-80B4-00C04FD430C8") == id)
    }
}

@Suite("Event")
struct EventModelTests {
    @Test("kinds")
    func kinds() {
        #expect(EventKind.allCases.map(\.rawValue) == ["sample", "correction", "grant", "revoke", "profile"])
    }

    @Test("user and kind follow the payload")
    func userAndKind() {
        let change = AccessChange(user: "bob", client: "c", read: [.steps], share: [])
        let id = UUID()
        #expect(Event(id: id, payload: .grant(change), document: .null).user == "bob")
        #expect(Event(id: id, payload: .revoke(change), document: .null).kind == .revoke)
        #expect(Event(id: id, payload: .profile(Profile(user: "carol", zone: "UTC")), document: .null).user == "carol")
        let correction = Correction(target: id, action: .retract, reason: "r")
        #expect(Event(id: id, payload: .correction(correction), document: .null).user == "")
        #expect(Event(id: id, payload: .correction(correction), document: .null).kind == .correction)
    }
}

@Test("types and kinds are equal, and hash, exactly when they are the same case")
func enumIdentity() {
    for a in QuantityType.allCases {
        for b in QuantityType.allCases {
            #expect((a == b) == (a.rawValue == b.rawValue))
            #expect(Set([a, b]).count == (a.rawValue == b.rawValue ? 1 : 2))
        }
    }
    for a in EventKind.allCases {
        for b in EventKind.allCases {
            #expect((a == b) == (a.rawValue == b.rawValue))
            #expect(Set([a, b]).count == (a.rawValue == b.rawValue ? 1 : 2))
        }
    }
}

@Suite("WordHash")
struct WordHashTests {
    /// Keys shaped as the fold's are (a user's number, a type's code and a day in one word,
    /// `DayKey`), a million of them, fill the low 16 bits a table of 65,536 buckets takes
    /// evenly, under several seeds: a mix that left those bits to a few fields would crowd
    /// them into a fraction of the buckets. And the mix is a bijection: no two collide whole.
    @Test("fold-shaped keys spread over a table's buckets, and never collide whole")
    func spreads() {
        for seed in [0, 1, -1, 0x5EED, Int.max] {
            var buckets = [Int](repeating: 0, count: 1 << 16)
            var whole = Set<Int>()
            for user in 0..<64 as Range<UInt64> {
                for code in 1...4 as ClosedRange<UInt64> {
                    for day in 0..<4096 as Range<UInt64> {
                        let hash = WordHash.mix(user << 35 ^ code << 32 ^ day, seed: seed)
                        buckets[hash & 0xFFFF] += 1
                        whole.insert(hash)
                    }
                }
            }
            // 1,048,576 keys: 16 a bucket on average.
            #expect(whole.count == 1 << 20, "seed \(seed)")
            #expect(buckets.allSatisfy { $0 > 0 } && buckets.max()! <= 48, "seed \(seed): \(buckets.min()!)...\(buckets.max()!)")
        }
        #expect(WordHash.mix(7, seed: 1) != WordHash.mix(7, seed: 2))
    }
}
