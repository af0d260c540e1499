import Foundation
import Synchronization
import Testing
@testable import LedgerCore

@Suite("Pipeline: a producer thread feeding the calling thread")
struct PipelineTests {
    struct Boom: Error, Equatable { var at: Int }

    @Test("every item arrives once, in order, with a small queue")
    func order() throws {
        var seen: [Int] = []
        try Pipeline.run(depth: 2, produce: { emit in
            for item in 0..<10_000 { try emit(item) }
        }, consume: { seen.append($0) })
        #expect(seen == Array(0..<10_000))
    }

    @Test("a producer error comes after the items sent before it")
    func producerError() {
        var seen: [Int] = []
        #expect(throws: Boom(at: 50)) {
            try Pipeline.run(depth: 3, produce: { emit in
                for item in 0..<50 { try emit(item) }
                throw Boom(at: 50)
            }, consume: { seen.append($0) })
        }
        #expect(seen == Array(0..<50))
    }

    @Test("the producer is told how many items wait for the consumer")
    func waiting() throws {
        // The consumer takes the first item, then holds until the producer has seen the
        // queue fill to its depth behind it.
        let seenFull = DispatchSemaphore(value: 0)
        let counts = Mutex<[Int]>([])
        var seen: [Int] = []
        try Pipeline.run(depth: 3, produce: { (emit: (consuming Int) throws -> Void, waiting: () -> Int) in
            counts.withLock { $0.append(waiting()) }
            try emit(0)
            // Item 0 may or may not be taken yet; items 1-3 fill the queue once it is. (A
            // `waiting` that never came back to 0 fails here, after 10 s, rather than hangs.)
            var tries = 0
            while waiting() > 0, tries < 100_000 {
                usleep(100)
                tries += 1
            }
            for item in 1...3 { try emit(item) }
            counts.withLock { $0.append(waiting()) }
            seenFull.signal()
            try emit(4)
        }, drain: { next in
            while let item = try next() {
                if item == 0 { seenFull.wait() }
                seen.append(item)
            }
        })
        #expect(seen == [0, 1, 2, 3, 4])
        #expect(counts.withLock { $0 } == [0, 3])
    }

    @Test("a consumer error stops the producer and nothing hangs")
    func consumerError() {
        let produced = Atomic<Int>(0)
        #expect(throws: Boom(at: 7)) {
            try Pipeline.run(depth: 2, produce: { emit in
                for item in 0..<1_000_000 {
                    try emit(item)
                    produced.add(1, ordering: .relaxed)
                }
            }, consume: { item in
                if item == 7 { throw Boom(at: 7) }
            })
        }
        // The producer ran at most the queue's depth (plus the item in hand) past the failure.
        #expect(produced.load(ordering: .relaxed) < 20)
    }
}

@Suite("EventCodec: the typed form stored beside each event's JSON")
struct EventCodecTests {
    @Test("every kind round-trips, optional fields present or not")
    func roundTrip() throws {
        let lines = [
            #"{"kind":"sample","type":"steps","value":12,"start":"2026-01-01T10:00:00Z","end":"2026-01-01T10:05:00Z","source":"iPhone"}"#,
            #"{"kind":"sample","user":"ann","type":"distance","value":1.5,"unit":"km","start":"2026-01-01T10:00:00+01:00","end":"2026-01-01T10:05:00+01:00","zone":"Europe/Paris","source":{"name":"Watch","bundle":"com.apple.health","device":"Watch6,1","version":"10.1"},"syncId":"w-1","syncVersion":3}"#,
            #"{"kind":"correction","target":"0b68590f-b97d-82fb-85a3-e7368cac5268","action":"retract","reason":"duplicate"}"#,
            #"{"kind":"correction","target":"0b68590f-b97d-82fb-85a3-e7368cac5268","action":"amend","value":7,"unit":"count","start":"2026-01-01T10:00:00Z","end":"2026-01-01T10:01:00Z","reason":"fix"}"#,
            #"{"kind":"grant","user":"ann","client":"coach","read":["steps","distance"],"share":["steps"]}"#,
            #"{"kind":"revoke","user":"ann","client":"coach","read":["distance"],"share":[]}"#,
            #"{"kind":"profile","user":"ann","zone":"America/New_York","priority":{"steps":["Watch","iPhone"],"distance":["iPhone"]}}"#,
        ]
        for line in lines {
            let event = try #require(try EventInput.decode(Array(line.utf8)).first?.1)
            let bytes = EventCodec.encode(id: event.id, payload: event.payload)
            let decoded = try bytes.withUnsafeBytes { try EventCodec.decode($0) }
            #expect(decoded.id == event.id, "\(line)")
            #expect(decoded.payload == event.payload, "\(line)")
        }
    }

    @Test("a sample's typed form is docs/STORAGE.md's layout, byte for byte, with and without its optionals")
    func sampleLayout() throws {
        let id = UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16))
        func be<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
        func text(_ value: String) -> [UInt8] { be(UInt32(value.utf8.count)) + Array(value.utf8) }
        let start = Timestamp(microseconds: 1_767_261_600_000_000), end = Timestamp(microseconds: 1_767_261_900_000_000)
        let bare = Sample(user: "ann", type: .steps, value: 12, unit: "count", start: start, end: end, zone: nil,
                          source: SampleSource(name: "iPhone", device: nil, version: nil), syncId: nil, syncVersion: nil)
        let head = (1...16).map(UInt8.init) + [1, 1] + be((12.0).bitPattern)
            + be(UInt64(bitPattern: start.microseconds)) + be(UInt64(bitPattern: end.microseconds))
        #expect(EventCodec.encode(id: id, payload: .sample(bare)) == head + [0] + text("ann") + text("count") + text("iPhone"))
        var full = bare
        full.zone = "Europe/Paris"
        full.syncId = "w-1"
        full.syncVersion = 3
        full.source = SampleSource(name: "Watch", bundle: "com.apple.health", device: "Watch6,1", version: "10.1")
        #expect(EventCodec.encode(id: id, payload: .sample(full)) == head + [0b11_1111] + text("ann") + text("count") + text("Watch")
            + text("Europe/Paris") + text("w-1") + be(UInt64(3)) + text("com.apple.health") + text("Watch6,1") + text("10.1"))
    }

    @Test("truncated or unknown bytes are refused, never read past the end")
    func malformed() throws {
        let line = #"{"kind":"sample","type":"steps","value":12,"start":"2026-01-01T10:00:00Z","end":"2026-01-01T10:05:00Z","source":"iPhone"}"#
        let event = try #require(try EventInput.decode(Array(line.utf8)).first?.1)
        let bytes = EventCodec.encode(id: event.id, payload: event.payload)
        for length in 0..<bytes.count {
            #expect(throws: EventCodec.Malformed.self) {
                try Array(bytes[..<length]).withUnsafeBytes { try EventCodec.decode($0) }
            }
        }
        var unknownKind = bytes
        unknownKind[16] = 9
        #expect(throws: EventCodec.Malformed.self) { try unknownKind.withUnsafeBytes { try EventCodec.decode($0) } }
        #expect(throws: EventCodec.Malformed.self) { try (bytes + [0]).withUnsafeBytes { try EventCodec.decode($0) } }
    }
}

@Suite("ByteCursor: bytes written through a pointer")
struct ByteCursorTests {
    @Test("JSON strings and numbers are JSONValue's, escapes included, within their bounds")
    func json() {
        var random = SplitMix64(seed: 11)
        let alphabet: [UInt8] = Array("ab\"\\\n\r\t/é".utf8) + [0, 1, 0x1F, 0x7F]
        for round in 0..<500 {
            let length = Int(random.next() % 40)
            let bytes = (0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }
            let text = String(decoding: bytes, as: UTF8.self)
            var expected: [UInt8] = []
            JSONValue.writeString(text, to: &expected)
            let written = ByteCursor.withScratch(capacity: ByteCursor.jsonStringBound(text.utf8.count)) { $0.jsonString(text) }
            #expect(written == expected, "round \(round): \(Array(text.utf8))")
            let number = [0, -0.5, 12, 1e21, 0.1, 123_456.789, -3][round % 7] * Double(round)
            var expectedNumber: [UInt8] = []
            JSONValue.writeNumber(number, to: &expectedNumber)
            #expect(ByteCursor.withScratch(capacity: ByteCursor.jsonNumberBound) { $0.jsonNumber(number) } == expectedNumber)
        }
        // Either side of the largest whole number written as an integer, and signed zeros.
        for number in [9_007_199_254_740_991, -9_007_199_254_740_991, 9_007_199_254_740_992, -9_007_199_254_740_992, 0, -0.0, 1e15, 4.5e15 + 0.5] as [Double] {
            var expected: [UInt8] = []
            JSONValue.writeNumber(number, to: &expected)
            #expect(ByteCursor.withScratch(capacity: ByteCursor.jsonNumberBound) { $0.jsonNumber(number) } == expected, "\(number)")
        }
    }

    @Test("a write past the space sized for it stops the process rather than write beyond it")
    func pastTheEnd() async {
        await #expect(processExitsWith: .failure) {
            _ = ByteCursor.withScratch(capacity: 3) { out in
                out.u8(1)
                out.u32(2)  // 5 bytes in 3
            }
        }
        await #expect(processExitsWith: .failure) {
            _ = ByteCursor.exactly(4) { $0.string("four") }  // 8 bytes in 4
        }
    }

    @Test("exactly(n) holds what was written, and the fixed-width fields are big-endian")
    func fields() {
        let bytes = ByteCursor.exactly(4 + 8 + 1 + 4 + 3) { out in
            out.u32(0x0102_0304)
            out.i64(-2)
            out.u8(9)
            out.string("hé")
        }
        #expect(bytes == [1, 2, 3, 4, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 9, 0, 0, 0, 3, 0x68, 0xC3, 0xA9])
        var writer = ByteWriter()
        writer.u32(0x0102_0304)
        writer.i64(-2)
        writer.u8(9)
        writer.string("hé")
        #expect(bytes == writer.bytes)
    }
}
