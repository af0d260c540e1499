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
