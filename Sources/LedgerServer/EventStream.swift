import CMicroHTTPD
import Foundation
import LedgerCore
import LedgerStore
import Projections
import Synchronization

/// One Server-Sent Events response (`GET /v1/subscribe/NAME`).
///
/// libmicrohttpd asks for body bytes through `fill`, on its own thread. With something to send
/// (changes after the cursor, or a due heartbeat) it copies them out; with nothing, it suspends
/// the connection and returns 0, and `wake` — called by the bus when the head moves, or by the
/// heartbeat timer — resumes it. `lock` makes "nothing to send, so suspend" and "wake up"
/// exclusive, so a commit between the read and the suspend cannot be missed.
///
/// A stream behind the head by more than a short page (catching up from `Last-Event-ID` or
/// `?from=`) reads and formats its pages on the server's `streamReads` queue, its connection
/// suspended meanwhile, and `fill` only copies them out: read on libmicrohttpd's one thread,
/// fifty streams catching up at once held every other request's answer for hundreds of
/// milliseconds (SPEC §8: a slow subscriber never slows the others). A stream at the head
/// reads its few changes inline, saving the hop.
///
/// Each event carries one change (`event: change`, `data: <change>`, SPEC §9), so a client
/// can parse each event's data as JSON. The last change of a seq that the stream's filter
/// selects (nearly always its only one) has `id: <seq>`; when one seq changed several rows,
/// the ones before have `id: <seq>.<k>`, k the change's place, from 0, among the seq's changes
/// the filter selects. It does not depend on what the client may read: counted among the
/// changes it could read, a grant or revoke committed between a disconnect and the reconnect
/// moved k onto another change, and the resumed stream repeated or lost changes (an audit).
/// A client that reconnects with `Last-Event-ID` set to either receives exactly what came
/// after it. A stream whose client is removed (`ledger client remove`), or may no longer read
/// any type it subscribed to (revoked), ends.
///
/// With `rawEvents` (`GET /v1/subscribe/events`, admin clients) it carries the events
/// themselves, as `ledger subscribe events` prints them: `id: <seq>`, `event: event`,
/// `data: <the event as stored, with seq, recorded and hash>`, filtered by `filter.user` and
/// `filter.type` as `eventPasses` reads them.
final class EventStream: @unchecked Sendable {
    // @unchecked: `connection` is only used on libmicrohttpd's thread or under `lock`;
    // `pending` and `cursor` are touched only from `fill`, which MHD calls on its one thread.
    let connection: OpaquePointer
    let server: HTTPServer
    private let filter: ChangeFilter
    private let rawEvents: Bool
    private let client: APIClient?
    private var cursor: UInt64
    /// Changes of seq `cursor + 1` the client already has (from a `SEQ.K` event id).
    private var sentOfNext: Int
    private var pending: [UInt8] = []
    private var pendingOffset = 0
    /// The changes formatted into `pending`, in order, where a non-admin client reads them:
    /// each is checked against the client's grants again on every `fill` until it is sent.
    private var marks: [Mark] = []
    /// What each user of `marks` let the client read when they were formatted (by the user's
    /// bytes): while no set has lost a type, `marks` need no look (`dropRevoked`).
    private var markedReads: [[UInt8]: (user: String, read: Set<QuantityType>)] = [:]
    /// Set by `end(because:)`: once `pending` is sent, the stream ends.
    private var ended = false
    /// The last read stopped at its page's limit: the next one goes to `streamReads`.
    private var catchingUp = false
    /// Changes or records read inline, on libmicrohttpd's thread; past them, a page is read
    /// on `streamReads`, of `pageLimit`.
    static let inlineLimit = 32
    static let pageLimit = 512

    private struct WakeState {
        var suspended = false
        /// Suspended while `streamReads` reads the next page (`wake` does not resume it then).
        var reading = false
        var woken = false
        var heartbeatDue = false
        var closing = false
    }
    private let lock = Mutex(WakeState())

    /// One change in `pending`: where its bytes begin, its place in the log (`seq`, and `k`
    /// among the seq's changes the filter selects), and its user and type (nil for a `grants`
    /// row naming the client, which no revoke hides).
    private struct Mark {
        var start: Int
        var seq: UInt64
        var k: Int
        var user: String
        var type: QuantityType?
    }

    init(connection: OpaquePointer, server: HTTPServer, filter: ChangeFilter, rawEvents: Bool = false,
         client: APIClient?, cursor: UInt64, sentOfNext: Int = 0) {
        self.connection = connection
        self.server = server
        self.filter = filter
        self.rawEvents = rawEvents
        self.client = client
        self.cursor = cursor
        self.sentOfNext = sentOfNext
        // The stream opens with a comment so the client sees the headers at once. It names the
        // position resumed from as the client gave it: a seq, or inside one (`1.0`, which said
        // `seq 0` before: true of whole seqs, but not where the stream goes on).
        let from = sentOfNext > 0 ? "\(cursor + 1).\(sentOfNext - 1)" : "\(cursor)"
        pending = Array(": stream from seq \(from)\n\n".utf8)
    }

    /// The subscriber's position: every change up to it was sent.
    var position: UInt64 { cursor }

    /// Called by MHD for the next bytes of the body.
    func fill(_ buffer: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        // A removed client's token stops working at once, for the streams it opened too, and
        // what they had read but not yet sent is not sent.
        if let client, (try? server.log.tokenWorks(for: client)) != true { return -1 }  // MHD_CONTENT_READER_END_OF_STREAM
        // So does one whose client may read nothing it asked for any more (every type revoked):
        // it heard only heartbeats, as a stream with nothing new does, and could not tell that
        // its access was gone (an audit). Its reconnect is told why (403). A stream that can
        // still read some of its types goes on, without the revoked ones' changes.
        // One look at the client's grants serves this check and the one of the changes
        // formatted but not yet sent.
        let check = server.access.readCheck(for: client)
        if let projection = filter.projection, check.refusal(projection: projection, user: filter.user, type: filter.type) != nil {
            return -1
        }
        dropRevoked(check)
        while pendingOffset >= pending.count {
            pending.removeAll(keepingCapacity: true)
            pendingOffset = 0
            marks.removeAll(keepingCapacity: true)
            markedReads.removeAll()
            if ended || lock.withLock({ $0.closing }) { return -1 }
            if catchingUp { return readOffThread() }
            let moved = read(limit: EventStream.inlineLimit)
            if !pending.isEmpty || catchingUp { continue }
            // Changes the filter or the client's grants left out still moved the cursor: read
            // on rather than suspend until the next commit or heartbeat.
            if moved { continue }
            let heartbeat = lock.withLock { state -> Bool in
                defer { state.heartbeatDue = false }
                return state.heartbeatDue
            }
            if heartbeat {
                pending = Array(": heartbeat \((try? server.log.head().seq) ?? 0)\n\n".utf8)
                break
            }
            let suspend = lock.withLock { state -> Bool in
                if state.woken || state.heartbeatDue || state.closing {
                    state.woken = false
                    return false
                }
                server.mhd.suspendConnection(connection)
                state.suspended = true
                return true
            }
            if suspend { return 0 }
        }
        let count = min(capacity, pending.count - pendingOffset)
        pending.withUnsafeBytes { source in
            UnsafeMutableRawPointer(buffer).copyMemory(from: source.baseAddress! + pendingOffset, byteCount: count)
        }
        pendingOffset += count
        return count
    }

    /// Suspends the connection and reads the next page on `streamReads` (until it has
    /// something to send or has reached the head), then resumes it; returns 0, for `fill`.
    /// Not once the stream is closing: `stop` waits for the reads already queued, and none
    /// may queue after (a connection still suspended when libmicrohttpd stops aborts it).
    private func readOffThread() -> Int {
        let queued = lock.withLock { state -> Bool in
            if state.closing { return false }
            server.mhd.suspendConnection(connection)
            state.suspended = true
            state.reading = true
            return true
        }
        guard queued else { return -1 }
        server.streamReads.async { [self] in
            while read(limit: EventStream.pageLimit), pending.isEmpty, catchingUp,
                  !lock.withLock({ $0.closing }) {}
            lock.withLock { state in
                state.reading = false
                state.suspended = false
                server.mhd.resumeConnection(connection)
            }
        }
        return 0
    }

    /// Reads up to `limit` changes or events after the cursor into `pending`, setting
    /// `catchingUp` when the page was cut at its limit. Returns whether the cursor moved.
    private func read(limit: Int) -> Bool {
        rawEvents ? readEvents(limit: limit) : readChanges(limit: limit)
    }

    /// Reads changes after the cursor into `pending`, grouped by seq, keeping only what this
    /// client may read now. Returns whether the cursor moved.
    private func readChanges(limit: Int) -> Bool {
        guard let (changes, through, cut) = try? server.log.changePage(after: cursor, limit: limit, filter: filter) else {
            catchingUp = false
            return false
        }
        // The grants are looked up after the page is read, each page anew: a revoke committed
        // before any change of the page is seen. Looked up once before a catch-up's pages, a
        // stream walking a revoked user's pages sent the revoked type, changes committed after
        // the revoke included (a review).
        let check = server.access.readCheck(for: client)
        let marking = client.map { !$0.admin } ?? false
        catchingUp = cut
        var bySeq: [(UInt64, [StoredChange])] = []
        for change in changes {
            if bySeq.last?.0 == change.seq {
                bySeq[bySeq.count - 1].1.append(change)
            } else {
                bySeq.append((change.seq, [change]))
            }
        }
        for (seq, group) in bySeq {
            let skip = seq == cursor &+ 1 ? sentOfNext : 0
            for (k, change) in group.enumerated() where k >= skip && check.mayRead(change) {
                let id = k == group.count - 1 ? "\(seq)" : "\(seq).\(k)"
                if marking {
                    marks.append(Mark(start: pending.count, seq: seq, k: k, user: change.user, type: change.type))
                    let key = Array(change.user.utf8)  // users are told apart by their bytes
                    if markedReads[key] == nil { markedReads[key] = (change.user, check.grant(user: change.user).read) }
                }
                pending += Array("id: \(id)\nevent: change\ndata: ".utf8) + change.json + [0x0A, 0x0A]
            }
        }
        if through > cursor { sentOfNext = 0 }
        defer { cursor = through }
        return through != cursor
    }

    /// Takes out of `pending` the changes not yet begun to be sent from the first one `check`
    /// no longer lets the client read on (its type revoked since the page was read), and moves
    /// the cursor back to it: the next read formats what comes after it with the grants as
    /// they are now. A page of up to `pageLimit` changes is sent over many `fill`s, and a
    /// revoke committed meanwhile stopped delivery only from the next page (a review; SPEC
    /// §9.1: the moment a revoke is committed). A change already partly sent is finished.
    /// Only when some user's grants lost a type since the marks were formatted are they
    /// looked at: a page holds whole seqs, and one seq can change thousands of rows (a zone
    /// change re-buckets a user's every day), which `fill`, 16 KB at a time, looked through
    /// again and again on libmicrohttpd's one thread (a review).
    private func dropRevoked(_ check: Access.ReadCheck) {
        guard !marks.isEmpty,
              markedReads.values.contains(where: { !check.grant(user: $0.user).read.isSuperset(of: $0.read) }) else { return }
        // What the marks left after this are formatted under: all of them readable now.
        defer {
            for (key, value) in markedReads { markedReads[key] = (value.user, check.grant(user: value.user).read) }
        }
        // The first change not yet begun (marks are in the order of their bytes).
        var low = 0, high = marks.count
        while low < high {
            let middle = (low + high) / 2
            if marks[middle].start >= pendingOffset { high = middle } else { low = middle + 1 }
        }
        guard let revoked = marks[low...].firstIndex(where: { mark in
                  mark.type.map { !check.mayRead(user: mark.user, type: $0) } ?? false
              }) else { return }
        let mark = marks[revoked]
        pending.removeSubrange(mark.start...)
        marks.removeSubrange(revoked...)
        cursor = mark.seq - 1
        sentOfNext = mark.k
    }

    /// Reads events after the cursor into `pending`, those the filter passes. Returns whether
    /// the cursor moved. A record that cannot be read or filtered ends the stream (`ended`),
    /// after a comment naming it: skipped, the client would lose the event without knowing;
    /// retried, the page was read again for ever on libmicrohttpd's one thread (a review).
    private func readEvents(limit: Int) -> Bool {
        let before = cursor
        let page: [EventRecord]
        do {
            page = try server.log.records(after: cursor, limit: limit)
        } catch {
            return end(because: "the log cannot be read after seq \(cursor) (\(error))")
        }
        catchingUp = page.count == limit
        for record in page {
            if filter.user != nil || filter.type != nil {
                let passes: Bool
                do {
                    passes = try server.log.eventPasses(try record.typedEvent(), user: filter.user, type: filter.type)
                } catch {
                    return end(because: "seq \(record.seq) cannot be read (\(error))")
                }
                if !passes {
                    cursor = record.seq
                    continue
                }
            }
            pending += Array("id: \(record.seq)\nevent: event\ndata: ".utf8) + record.json + [0x0A, 0x0A]
            cursor = record.seq
        }
        return cursor != before
    }

    /// Ends the stream once `pending` is sent, with a comment saying why. Returns true: the
    /// stream has something to send.
    private func end(because reason: String) -> Bool {
        pending += Array(": \(reason.replacingOccurrences(of: "\n", with: " ")); the stream ends\n\n".utf8)
        ended = true
        return true
    }

    /// Wakes the stream: resumes it if suspended, or makes its next `fill` look again.
    func wake(heartbeat: Bool = false, closing: Bool = false) {
        lock.withLock { state in
            if heartbeat { state.heartbeatDue = true }
            if closing { state.closing = true }
            if state.suspended, !state.reading {
                state.suspended = false
                server.mhd.resumeConnection(connection)
            } else {
                state.woken = true
            }
        }
    }
}
