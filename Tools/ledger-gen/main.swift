import Foundation
import LedgerCore

// ledger-gen: deterministic, realistic activity events as NDJSON, for demos and benchmarks.
//
// Each user walks a few times a day. An iPhone reports each walk in ~10-minute samples and an
// Apple Watch reports the same walk in 1–5 minute samples, so the two sources overlap the way
// they do in life (a naive sum double-counts). Steps, distance, flights and active energy,
// a grant per user, and a few corrections. The same seed always gives the same bytes.

let usage = """
USAGE: ledger-gen [--users N] [--days N] [--seed N] [--start YYYY-MM-DD] [--zone ZONE] [--ids] [--format F]

Writes events to standard output.
  --users N      users to generate (default 1)
  --days N       days per user (default 7)
  --seed N       random seed (default 1)
  --start DATE   first day (default 2026-01-01)
  --zone ZONE    users' home zone, written in each sample (default UTC)
  --ids          give every event an explicit id (so other stores can index the same key)
  --format F     ndjson (default), json (one array), or export-xml (an Apple Health
                 export.xml of the samples; grants and corrections are left out)

"""

struct Options {
    var users = 1
    var days = 7
    var seed: UInt64 = 1
    var start = CivilDate(year: 2026, month: 1, day: 1)
    var zone = "UTC"
    var ids = false
    var format = "ndjson"
}

func parseOptions() -> Options {
    var options = Options()
    var arguments = Array(CommandLine.arguments.dropFirst())
    func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("Error: \(message)\n\(usage)".utf8))
        exit(64)
    }
    while !arguments.isEmpty {
        let name = arguments.removeFirst()
        if name == "--help" || name == "-h" {
            print(usage, terminator: "")
            exit(0)
        }
        if name == "--ids" {
            options.ids = true
            continue
        }
        guard !arguments.isEmpty else { fail("option '\(name)' needs a value") }
        let value = arguments.removeFirst()
        switch name {
        case "--users":
            guard let number = Int(value), number > 0 else { fail("--users needs a number > 0") }
            options.users = number
        case "--days":
            guard let number = Int(value), number > 0 else { fail("--days needs a number > 0") }
            options.days = number
        case "--seed":
            guard let number = UInt64(value) else { fail("--seed needs a number") }
            options.seed = number
        case "--start":
            guard let date = CivilDate(parsing: value) else { fail("--start needs YYYY-MM-DD") }
            options.start = date
        case "--format":
            guard ["ndjson", "json", "export-xml"].contains(value) else { fail("--format is ndjson, json or export-xml") }
            options.format = value
        case "--zone":
            guard Zone(value) != nil else { fail("unknown zone '\(value)'") }
            options.zone = value
        default: fail("unknown option '\(name)'")
        }
    }
    return options
}

/// Draws from LedgerCore's SplitMix64, so a seed gives the same bytes everywhere.
extension SplitMix64 {
    mutating func int(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.count))
    }
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}

let options = parseOptions()
var random = SplitMix64(seed: options.seed)
let zone = Zone(options.zone)!
var out: [UInt8] = []
out.reserveCapacity(1 << 22)
var emitted = 0

switch options.format {
case "json": out.append(UInt8(ascii: "["))
case "export-xml":
    out += Array("""
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE HealthData [
    <!ELEMENT HealthData (ExportDate,Me,(Record|Correlation|Workout|ActivitySummary)*)>
    ]>
    <HealthData locale="en_US">
     <ExportDate value="2026-11-29 12:00:00 +0000"/>

    """.utf8)
default: break
}

/// HealthKit's identifier and export date form for XML output.
let healthKitTypes = ["steps": "HKQuantityTypeIdentifierStepCount", "distance": "HKQuantityTypeIdentifierDistanceWalkingRunning",
                      "flights": "HKQuantityTypeIdentifierFlightsClimbed", "active-energy": "HKQuantityTypeIdentifierActiveEnergyBurned"]

@MainActor func exportDate(_ value: JSONValue?) -> String {
    guard let text = value?.stringValue, let (instant, _) = try? Timestamp.parseRFC3339(text) else { return "" }
    let utc = instant.format(offsetSeconds: 0, alwaysFraction: false)
    return String(utc.prefix(10)) + " " + String(utc.dropFirst(11).prefix(8)) + " +0000"
}

@MainActor func emit(_ fields: [(String, JSONValue)]) {
    var fields = fields
    let isSample = fields.contains { $0.0 == "kind" && $0.1 == .string("sample") }
    if options.format == "export-xml" {
        guard isSample else { return }
        let object = Dictionary(uniqueKeysWithValues: fields)
        var number: [UInt8] = []
        JSONValue.writeNumber(object["value"]?.numberValue ?? 0, to: &number)
        let source = object["source"]?.objectValue?["name"]?.stringValue ?? "iPhone"
        let device = object["source"]?.objectValue?["device"]?.stringValue ?? ""
        let start = exportDate(object["start"])
        let line = " <Record type=\"\(healthKitTypes[object["type"]?.stringValue ?? ""] ?? "")\" sourceName=\"\(source)\" "
            + "sourceVersion=\"17.1\" device=\"&lt;&lt;HKDevice: 0x6000\(emitted % 1000)&gt;, name:\(source), model:\(device)&gt;\" "
            + "unit=\"\(object["unit"]?.stringValue ?? "count")\" creationDate=\"\(start)\" startDate=\"\(start)\" "
            + "endDate=\"\(exportDate(object["end"]))\" value=\"\(String(decoding: number, as: UTF8.self))\">\n"
            + "  <MetadataEntry key=\"HKTimeZone\" value=\"\(options.zone)\"/>\n </Record>\n"
        out += Array(line.utf8)
    } else {
        if options.ids, !fields.contains(where: { $0.0 == "id" }) {
            fields.append(("id", .string(UUID.derived(from: Array("gen-\(options.seed)-\(emitted)".utf8)).lowercased)))
        }
        if options.format == "json", emitted > 0 { out.append(UInt8(ascii: ",")) }
        JSONValue.object(Dictionary(uniqueKeysWithValues: fields)).write(to: &out)
        if options.format == "ndjson" { out.append(0x0A) }
    }
    emitted += 1
    if out.count >= 1 << 22 {
        FileHandle.standardOutput.write(Data(out))
        out.removeAll(keepingCapacity: true)
    }
}

@MainActor func time(_ instant: Timestamp) -> JSONValue {
    .string(instant.format(offsetSeconds: zone.offset(at: instant), alwaysFraction: false))
}

func rounded(_ value: Double, _ places: Double = 1000) -> Double { (value * places).rounded() / places }

let phone: JSONValue = .object(["name": .string("iPhone"), "bundle": .string("com.apple.health"),
                                "device": .string("iPhone15,2")])
let watch: JSONValue = .object(["name": .string("Apple Watch"), "bundle": .string("com.apple.health"),
                                "device": .string("Watch6,1")])
var sampleIDs: [String] = []
var watchSamples = 0

for userIndex in 0..<options.users {
    let user = "user-\(userIndex + 1)"
    emit([("kind", .string("grant")), ("user", .string(user)), ("client", .string("coach-app")),
          ("id", .string(UUID.derived(from: Array("grant-\(user)-\(options.seed)".utf8)).lowercased)),
          ("read", .array(QuantityType.allCases.map { .string($0.rawValue) })), ("share", .array([.string("steps")]))])
    for dayIndex in 0..<options.days {
        let day = options.start.adding(days: dayIndex)
        let midnight = Int64(day.daysSinceEpoch) * 86_400
        let walks = random.int(2...6)
        for _ in 0..<walks {
            let minuteOfDay = random.int(6 * 60...21 * 60)
            let minutes = random.int(8...55)
            let start = midnight + Int64(minuteOfDay * 60) - Int64(zone.offset(at: Timestamp(seconds: midnight)))
            let cadence = Double(random.int(90...120))  // steps per minute
            let stride = 0.70 + random.unit() * 0.1  // metres per step
            // The iPhone: ~10-minute windows over the whole walk.
            var cursor = start
            let end = start + Int64(minutes * 60)
            while cursor < end {
                let sampleEnd = min(end, cursor + 600)
                let seconds = Double(sampleEnd - cursor)
                let steps = (cadence * seconds / 60 * (0.9 + random.unit() * 0.2)).rounded()
                let base: [(String, JSONValue)] = [("kind", .string("sample")), ("user", .string(user)),
                                                   ("start", time(Timestamp(seconds: cursor))),
                                                   ("end", time(Timestamp(seconds: sampleEnd))),
                                                   ("source", phone), ("zone", .string(options.zone))]
                emit(base + [("type", .string("steps")), ("value", .double(steps)), ("unit", .string("count"))])
                emit(base + [("type", .string("distance")), ("value", .double(rounded(steps * stride / 1000, 10000))), ("unit", .string("km"))])
                if random.int(0...3) == 0 {
                    emit(base + [("type", .string("flights")), ("value", .double(Double(random.int(1...4)))), ("unit", .string("count"))])
                }
                cursor = sampleEnd
            }
            // The Watch: 1–5 minute samples over the same walk, counting slightly differently.
            cursor = start + Int64(random.int(0...90))
            while cursor < end {
                let sampleEnd = min(end, cursor + Int64(random.int(1...5) * 60))
                let seconds = Double(sampleEnd - cursor)
                let steps = (cadence * seconds / 60 * (0.95 + random.unit() * 0.1)).rounded()
                let base: [(String, JSONValue)] = [("kind", .string("sample")), ("user", .string(user)),
                                                   ("start", time(Timestamp(seconds: cursor))),
                                                   ("end", time(Timestamp(seconds: sampleEnd))),
                                                   ("source", watch), ("zone", .string(options.zone))]
                watchSamples += 1
                let stepsID = UUID.derived(from: Array("watch-\(user)-\(watchSamples)-\(options.seed)".utf8)).lowercased
                sampleIDs.append(stepsID)
                emit(base + [("id", .string(stepsID)), ("type", .string("steps")), ("value", .double(steps)), ("unit", .string("count"))])
                emit(base + [("type", .string("active-energy")), ("value", .double(rounded(steps * 0.045, 100))), ("unit", .string("kcal"))])
                cursor = sampleEnd
            }
        }
    }
    // A few corrections: an auditor retracts one Watch sample per user and amends another.
    if sampleIDs.count >= 2 {
        let retracted = sampleIDs[random.int(0...(sampleIDs.count - 1))]
        emit([("kind", .string("correction")), ("target", .string(retracted)), ("action", .string("retract")),
              ("reason", .string("duplicate upload")),
              ("id", .string(UUID.derived(from: Array("retract-\(retracted)".utf8)).lowercased))])
        if let amended = sampleIDs.first(where: { $0 != retracted }) {
            emit([("kind", .string("correction")), ("target", .string(amended)), ("action", .string("amend")),
                  ("value", .double(0)), ("reason", .string("watch worn by someone else")),
                  ("id", .string(UUID.derived(from: Array("amend-\(amended)".utf8)).lowercased))])
        }
    }
    sampleIDs.removeAll()
}
switch options.format {
case "json": out += Array("]\n".utf8)
case "export-xml": out += Array("</HealthData>\n".utf8)
default: break
}
FileHandle.standardOutput.write(Data(out))
