import Foundation
import Synchronization

/// The typed view of an event (`id` and `payload`) as compact bytes, stored next to the
/// canonical JSON in each record (formats 2 and 3, docs/STORAGE.md) so that rebuilds, replays and
/// subscriptions fold the log without parsing JSON or validating again.
///
/// Layout: id (16 bytes), kind (u8), then per kind fixed-width big-endian fields and strings
/// as a u32 length and UTF-8. Optional fields follow a presence bitmask, in its bit order.
/// `decode` trusts its input only as far as bounds: a short or malformed value throws.
public enum EventCodec {
    public struct Malformed: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    // MARK: - Encoding

    public static func encode(id: UUID, payload: Event.Payload) -> [UInt8] {
        if case .sample(var s) = payload { return withUnsafePointer(to: &s) { encode(id: id, sample: $0) } }
        var out = ByteWriter()
        out.bytes.reserveCapacity(256)
        out.uuid(id)
        switch payload {
        case .sample:
            preconditionFailure("a sample is encoded at its exact size, above")
        case .correction(let c):
            out.u8(2)
            out.uuid(c.target)
            out.u8(c.action == .retract ? 0 : 1)
            out.u8(bit(0, c.value != nil) | bit(1, c.unit != nil) | bit(2, c.start != nil) | bit(3, c.end != nil))
            out.string(c.reason)
            if let value = c.value { out.f64(value) }
            if let unit = c.unit { out.string(unit) }
            if let start = c.start { out.i64(start.microseconds) }
            if let end = c.end { out.i64(end.microseconds) }
        case .grant(let a), .revoke(let a):
            out.u8(payload.kind == .grant ? 3 : 4)
            out.string(a.user)
            out.string(a.client)
            out.types(a.read)
            out.types(a.share)
        case .profile(let p):
            out.u8(5)
            out.string(p.user)
            out.u8(bit(0, p.zone != nil) | bit(1, p.priority != nil))
            if let zone = p.zone { out.string(zone) }
            if let priority = p.priority {
                let types = priority.keys.sorted { $0.code < $1.code }
                out.u8(UInt8(types.count))
                for type in types {
                    out.u8(type.code)
                    out.u32(UInt32(priority[type]!.count))
                    priority[type]!.forEach { out.string($0) }
                }
            }
        }
        return out.bytes
    }

    /// A sample's typed form, written at its exact size: every appended or imported sample
    /// is encoded here. The same bytes as the general path's (`ByteWriter`) layout. The sample
    /// is read through a pointer: the closure writing it captured a copy otherwise.
    static func encode(id: UUID, sample: UnsafePointer<Sample>) -> [UInt8] {
        func size(_ text: String?) -> Int { text.map { 4 + $0.utf8.count } ?? 0 }
        let count = 16 + 1 + 1 + 8 + 8 + 8 + 1 + size(sample.pointee.user) + size(sample.pointee.unit) + size(sample.pointee.source.name) + size(sample.pointee.zone)
            + size(sample.pointee.syncId) + (sample.pointee.syncVersion == nil ? 0 : 8) + size(sample.pointee.source.bundle) + size(sample.pointee.source.device) + size(sample.pointee.source.version)
        return ByteCursor.exactly(count) { out in
            out.uuid(id)
            out.u8(1)
            out.u8(sample.pointee.type.code)
            out.f64(sample.pointee.value)
            out.i64(sample.pointee.start.microseconds)
            out.i64(sample.pointee.end.microseconds)
            out.u8(bit(0, sample.pointee.zone != nil) | bit(1, sample.pointee.syncId != nil) | bit(2, sample.pointee.syncVersion != nil)
                   | bit(3, sample.pointee.source.bundle != nil) | bit(4, sample.pointee.source.device != nil) | bit(5, sample.pointee.source.version != nil))
            out.string(sample.pointee.user)
            out.string(sample.pointee.unit)
            out.string(sample.pointee.source.name)
            if let zone = sample.pointee.zone { out.string(zone) }
            if let syncId = sample.pointee.syncId { out.string(syncId) }
            if let syncVersion = sample.pointee.syncVersion { out.i64(syncVersion) }
            if let bundle = sample.pointee.source.bundle { out.string(bundle) }
            if let device = sample.pointee.source.device { out.string(device) }
            if let version = sample.pointee.source.version { out.string(version) }
        }
    }

    // MARK: - Decoding

    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(Malformed) -> (id: UUID, payload: Event.Payload) {
        var reader = Reader(bytes: bytes)
        let id = try reader.uuid()
        let kind = try reader.u8()
        let payload: Event.Payload
        switch kind {
        case 1:
            let type = try reader.type()
            let value = Double(bitPattern: try reader.u64())
            let start = Timestamp(microseconds: try reader.i64())
            let end = Timestamp(microseconds: try reader.i64())
            let present = try reader.u8()
            let user = try reader.string()
            let unit = try reader.string()
            var source = SampleSource(name: try reader.string())
            let zone = present & 1 != 0 ? try reader.string() : nil
            let syncId = present & 2 != 0 ? try reader.string() : nil
            let syncVersion = present & 4 != 0 ? try reader.i64() : nil
            if present & 8 != 0 { source.bundle = try reader.string() }
            if present & 16 != 0 { source.device = try reader.string() }
            if present & 32 != 0 { source.version = try reader.string() }
            payload = .sample(Sample(user: user, type: type, value: value, unit: unit, start: start, end: end,
                                     zone: zone, source: source, syncId: syncId, syncVersion: syncVersion))
        case 2:
            let target = try reader.uuid()
            let action: Correction.Action = try reader.u8() == 0 ? .retract : .amend
            let present = try reader.u8()
            var correction = Correction(target: target, action: action, reason: try reader.string())
            if present & 1 != 0 { correction.value = Double(bitPattern: try reader.u64()) }
            if present & 2 != 0 { correction.unit = try reader.string() }
            if present & 4 != 0 { correction.start = Timestamp(microseconds: try reader.i64()) }
            if present & 8 != 0 { correction.end = Timestamp(microseconds: try reader.i64()) }
            payload = .correction(correction)
        case 3, 4:
            let change = AccessChange(user: try reader.string(), client: try reader.string(),
                                      read: try reader.types(), share: try reader.types())
            payload = kind == 3 ? .grant(change) : .revoke(change)
        case 5:
            var profile = Profile(user: try reader.string())
            let present = try reader.u8()
            if present & 1 != 0 { profile.zone = try reader.string() }
            if present & 2 != 0 {
                var priority: [QuantityType: [String]] = [:]
                for _ in 0..<(try reader.u8()) {
                    let type = try reader.type()
                    var names: [String] = []
                    for _ in 0..<(try reader.u32()) { names.append(try reader.string()) }
                    priority[type] = names
                }
                profile.priority = priority
            }
            payload = .profile(profile)
        default:
            throw Malformed(description: "unknown event kind code \(kind)")
        }
        guard reader.offset == bytes.count else {
            throw Malformed(description: "\(bytes.count - reader.offset) bytes left after the event")
        }
        return (id, payload)
    }

    /// An encoded event's id and kind, read from its first fields without decoding the rest
    /// (`verify` checks each id comes once and counts the kinds). Nil when malformed.
    public static func header(of bytes: UnsafeRawBufferPointer) -> (id: UUID, kind: EventKind)? {
        var reader = Reader(bytes: bytes)
        do throws(Malformed) {
            let id = try reader.uuid()
            let code = Int(try reader.u8())  // 1…5, in the order of `EventKind`'s cases
            guard (1...EventKind.allCases.count).contains(code) else { return nil }
            return (id, EventKind.allCases[code - 1])
        } catch {
            return nil
        }
    }

    /// Whom an encoded event concerns (`Event.Payload.subject`), read from its first fields
    /// without decoding the rest: for scoping a replay to some users. Nil when malformed.
    public static func subject(of bytes: UnsafeRawBufferPointer) -> EventSubject? {
        var reader = Reader(bytes: bytes)
        do throws(Malformed) {
            _ = try reader.take(16)  // id
            switch try reader.u8() {
            case 1:  // type, value, start, end, presence mask, then the user
                _ = try reader.take(1 + 8 + 8 + 8 + 1)
                return .user(try reader.string())
            case 2:
                return .target(try reader.uuid())
            case 3, 4, 5:
                return .user(try reader.string())
            default:
                return nil
            }
        } catch {
            return nil
        }
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        /// The offset of the next `count` bytes, which it then passes; throws when fewer are
        /// left. Each field is checked once here and then read in place (a slice per field, and
        /// integers folded byte by byte out of it, were a tenth of a rebuild's decoding thread).
        private mutating func advance(_ count: Int) throws(Malformed) -> Int {
            guard count >= 0, bytes.count - offset >= count else {
                throw Malformed(description: "value ends inside a field at byte \(offset)")
            }
            defer { offset += count }
            return offset
        }

        mutating func take(_ count: Int) throws(Malformed) -> UnsafeRawBufferPointer {
            let start = try advance(count)
            return UnsafeRawBufferPointer(start: bytes.baseAddress.map { $0 + start }, count: count)
        }

        mutating func u8() throws(Malformed) -> UInt8 { bytes[try advance(1)] }

        mutating func u32() throws(Malformed) -> UInt32 {
            UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: try advance(4), as: UInt32.self))
        }

        mutating func u64() throws(Malformed) -> UInt64 {
            UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: try advance(8), as: UInt64.self))
        }

        mutating func i64() throws(Malformed) -> Int64 { Int64(bitPattern: try u64()) }

        mutating func uuid() throws(Malformed) -> UUID {
            UUID(uuid: bytes.loadUnaligned(fromByteOffset: try advance(16), as: uuid_t.self))
        }

        mutating func string() throws(Malformed) -> String {
            let count = Int(try u32())
            return String(decoding: try take(count), as: UTF8.self)
        }

        mutating func type() throws(Malformed) -> QuantityType {
            let code = try u8()
            guard let type = QuantityType(code: code) else { throw Malformed(description: "unknown type code \(code)") }
            return type
        }

        mutating func types() throws(Malformed) -> [QuantityType] {
            var types: [QuantityType] = []
            for _ in 0..<(try u8()) { types.append(try type()) }
            return types
        }
    }
}

/// Bit `index` of a presence mask (the byte whose bit n says whether the n-th optional field
/// follows), set when that field is `present`. Masks are OR-ed from these rather than built
/// from an array of flags, which cost an allocation per event.
private func bit(_ index: Int, _ present: Bool) -> UInt8 { present ? 1 << index : 0 }

private extension ByteWriter {
    mutating func types(_ types: [QuantityType]) {
        u8(UInt8(types.count))
        types.forEach { u8($0.code) }
    }
}

/// An event with the two stored forms computed: its canonical JSON and its typed bytes. Made
/// where the event is decoded (possibly on another thread, see `Pipeline`), so that appending
/// only checks, hashes and writes.
/// The JSON document itself is not kept: it is only needed to make `body`.
public struct PreparedEvent: Sendable {
    public let id: UUID
    public let payload: Event.Payload
    public let body: [UInt8]
    public let typed: [UInt8]
    /// The SHA-256 of the content its record will store (`ContentDigest`), which the record's
    /// chain hash covers: computed where the event is made (a request's thread), or nil, for
    /// the appending thread to compute, when the maker left it (`digesting: false`) and did not
    /// come back to it (`computeContentDigest`): the decoding threads of `import` and `append`
    /// digest what they hand over only while the writer has work in hand
    /// (`backlogForDigests`).
    public private(set) var contentDigest: ContentDigest?

    public init(_ event: Event) {
        self.init(id: event.id, payload: event.payload, canonicalBody: event.document.canonicalBytes)
    }

    /// For producers that validate and write the canonical JSON themselves
    /// (`PreparedEvent.checkedSample`, which the tests hold byte-identical to `init(_:)`).
    public init(id: UUID, payload: Event.Payload, canonicalBody: [UInt8]) {
        self.init(id: id, payload: payload, canonicalBody: canonicalBody, typed: EventCodec.encode(id: id, payload: payload))
    }

    /// With the typed form made by the caller (`checkedSample`, from the sample before it is
    /// moved into the payload).
    init(id: UUID, payload: Event.Payload, canonicalBody: [UInt8], typed: [UInt8], digesting: Bool = true) {
        self.id = id
        self.payload = payload
        body = canonicalBody
        self.typed = typed
        contentDigest = digesting ? ContentDigest(body: canonicalBody, typed: typed) : nil
    }

    /// How many items waiting for the writer (`Pipeline`'s `waiting`) make a decoding thread
    /// digest the events it hands over itself; with fewer, it leaves them to the writer, which
    /// would otherwise wait. `import` and `append` both go by it. Which thread digests changes
    /// nothing stored, so the tests move it (0: the decoding thread always digests; `Int.max`:
    /// never) to run both ways.
    public static let backlogForDigests = Atomic<Int>(2)

    /// Whether a decoding thread with `waiting` items not yet taken by the writer digests the
    /// next it hands over itself (`backlogForDigests`).
    public static func producerDigests(waiting: Int) -> Bool {
        waiting >= backlogForDigests.load(ordering: .relaxed)
    }

    /// Computes the content digest if it was left (`digesting: false`).
    public mutating func computeContentDigest() {
        if contentDigest == nil { contentDigest = ContentDigest(body: body, typed: typed) }
    }
}
