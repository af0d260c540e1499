import CMicroHTTPD
import Foundation
import LedgerBus
import LedgerCore
import LedgerStore
import Projections
import Synchronization

/// `ledger serve`: the HTTP API of SPEC §9 on libmicrohttpd (one internal epoll thread,
/// suspend/resume for streams and queued writes).
///
/// Threads: libmicrohttpd's thread runs the request handlers and SSE body callbacks; reads of
/// rows and of the log, and the parse of large bodies, run on up to `maxOffloaded` worker
/// threads (`offload`) with the connection suspended; streams catching up read their pages on
/// one more (`streamReads`); the writer thread (`GroupCommitter`) commits
/// POSTed batches;
/// the bus thread notices commits (also by other processes) and wakes streams; a heartbeat
/// thread wakes every stream at least every `heartbeat` so dead clients are found and reaped,
/// and every 0.1 s closes connections past `headerTimeout` or their body's deadline
/// (`closeSlowRequests`).
public final class HTTPServer: @unchecked Sendable {
    // @unchecked: `daemon` and `auditLog` are set once in `start` before any callback can run
    // and read-only after; everything mutable is behind a Mutex.
    public let log: EventLog
    let bus: ObserverBus
    let access: Access
    let authRequired: Bool
    private let heartbeat: Duration
    private var daemon: OpaquePointer?
    /// libmicrohttpd's functions, looked up by `start` (set once, before any callback runs).
    private(set) var mhd: LibMicroHTTPD!
    private var committer: GroupCommitter!
    private let streams = Mutex<[ObjectIdentifier: EventStream]>([:])
    /// Where streams catching up read and format their pages (`EventStream`), one at a time,
    /// off libmicrohttpd's thread: at most one core for catch-up however many streams do it.
    let streamReads = DispatchQueue(label: "ledger.stream-reads")
    private let running = Mutex(true)
    /// Work answered off libmicrohttpd's thread (`offload`): whether more is taken, the
    /// threads running it, and what waits for one (its connection suspended meanwhile).
    private let workers = Mutex<(open: Bool, count: Int, waiting: [OffloadedWork], running: [ObjectIdentifier: OffloadedWork])>((true, 0, [], [:]))

    /// A request's work and how to answer it when the server stops before it has run.
    private struct OffloadedWork: @unchecked Sendable {
        // @unchecked: `request` is touched by one thread at a time (see `Request`).
        let request: Request
        let suspended: SuspendedConnection
        let run: @Sendable () -> Void
    }
    /// Requests whose answer waits on another thread (an offloaded read, a queued POST) and
    /// that libmicrohttpd has not yet reported complete: `stop` lets them be sent first.
    private let unsent = Atomic<Int>(0)
    /// At most this many threads answer offloaded requests; more wait, suspended, in order.
    /// Few: the machine has few cores, and a replay of a large ledger holds hundreds of MB.
    static let maxOffloaded = 4
    /// How long `stop` waits for offloaded reads still running (a replay of a large ledger)
    /// before it answers them 503.
    static let stopGrace: Duration = .seconds(10)
    /// POST bodies larger than this are parsed on a thread of their own: parsing 60 MiB takes
    /// seconds, which on libmicrohttpd's thread held up every other client.
    static let inlineBodyLimit = 64 << 10
    let metrics = Metrics()

    /// Counters for `/metrics`.
    final class Metrics: Sendable {
        let values = Mutex<(appends: Int, duplicates: Int, rejects: Int, requests: Int)>((0, 0, 0, 0))
    }

    /// Seconds a connection may stay idle (no byte read or written) before it is closed: what
    /// reaps clients that stop halfway through their headers or body, and half-closed ones.
    /// Streams waiting for a change are suspended, which libmicrohttpd never times out; nor
    /// does it cut a stream with data queued for a client that reads slowly or not at all.
    private let idleTimeout: Int

    public static let defaultIdleTimeout = 90

    /// How long a connection may take to send a request's line and headers, from its opening
    /// or the end of its previous request (a keep-alive connection waits for its next request
    /// at most this long). The idle timeout restarts at every byte, so a client sending its
    /// headers a byte every minute held its connection for ever, and enough such clients
    /// (about 20,000, an audit found) used up the server's descriptors. A stream or a POST
    /// whose headers are in is not cut by it.
    private let headerTimeout: Duration

    public static let defaultHeaderTimeout = 30

    /// How long a request's body may take after its headers, plus one second for every
    /// `bodyBytesPerSecond` bytes of it received (as Apache's `mod_reqtimeout` allows), but
    /// never more than this ahead of now. The idle timeout restarts at every byte, so a
    /// client that sent a large Content-Length and then a byte a minute held its connection
    /// for ever; one that keeps sending at least that fast, with no pause longer than this,
    /// is never cut. A POST whose body is in is not cut by it, nor is a stream.
    private let bodyTimeout: Duration
    public static let defaultBodyTimeout = 30
    public static let bodyBytesPerSecond = 1_000

    /// Connections libmicrohttpd accepts at once, and at once from one address (0: no limit).
    public static let connectionLimit = 65_000
    private let perAddressLimit: Int

    /// Every open connection's socket, and by when each one sending a request's headers or
    /// body must have sent them (by the connection's address, `key(of:)`; none while its
    /// request is answered or streamed). Connections are added and removed by libmicrohttpd's
    /// notifications of their opening and closing — the closing one comes before it closes
    /// the socket, so a socket in here is still the connection's.
    private struct HeaderWatch {
        var sockets: [UInt: Int32] = [:]
        var deadlines: [UInt: ContinuousClock.Instant] = [:]
        /// Connections with a POST whose headers are in and that is not yet answered: `stop`
        /// waits for them, as libmicrohttpd 0.9.75 can answer a request only once its body is
        /// in, and sends a queued answer only after the handler returns.
        var receiving: Set<UInt> = []
    }
    private let headerWatch = Mutex(HeaderWatch())

    /// HTTPS: the private key and certificate chain, PEM, as `--tls-key` and `--tls-cert` gave
    /// them (nil: plain HTTP).
    public struct TLSFiles: Sendable {
        public var key: String
        public var certificate: String
        public init(key: String, certificate: String) {
            self.key = key
            self.certificate = certificate
        }
    }
    private let tls: TLSFiles?

    /// Where libmicrohttpd leaves its last message (`ledger_mhd_logger`): why a start failed.
    /// Allocated for the server's life, as the daemon may log into it until it stops.
    private let mhdLog: UnsafeMutablePointer<ledger_mhd_log> = {
        let log = UnsafeMutablePointer<ledger_mhd_log>.allocate(capacity: 1)
        log.initialize(to: ledger_mhd_log())
        return log
    }()

    /// Where `start` opens the audit log (`AuditLog`), if anywhere.
    private let auditLogPath: String?
    private var auditLog: AuditLog?

    public init(log: EventLog, authRequired: Bool, heartbeat: Duration = .seconds(15),
                idleTimeout: Int = HTTPServer.defaultIdleTimeout,
                headerTimeout: Int = HTTPServer.defaultHeaderTimeout, bodyTimeout: Int = HTTPServer.defaultBodyTimeout,
                perAddressLimit: Int = 0, tls: TLSFiles? = nil, auditLogPath: String? = nil,
                clientNamedSources: Bool = false) {
        self.auditLogPath = auditLogPath
        self.tls = tls
        self.log = log
        self.bus = ObserverBus(log: log)
        self.access = Access(log: log, clientNamedSources: clientNamedSources)
        self.authRequired = authRequired
        self.heartbeat = heartbeat
        self.idleTimeout = idleTimeout
        self.headerTimeout = .seconds(headerTimeout)
        self.bodyTimeout = .seconds(bodyTimeout)
        self.perAddressLimit = perAddressLimit
    }

    deinit {
        // A running daemon may still log into it; a server is stopped before it goes.
        if daemon == nil { mhdLog.deallocate() }
    }

    /// Why the server could not start.
    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Binds `host:port` (port 0 picks a free one) and starts serving. Returns the bound port.
    public func start(host: String, port: UInt16) throws -> UInt16 {
        do { mhd = try LibMicroHTTPD.load() } catch { throw StartError(description: error.description) }
        var pem: (key: String, certificate: String)?
        if let tls {
            guard ledger_mhd_supports_tls(mhd.isFeatureSupported) != 0 else {
                throw StartError(description: "this system's libmicrohttpd was built without TLS; serve plain HTTP behind a TLS proxy instead")
            }
            pem = (try HTTPServer.readPEM(tls.key, option: "--tls-key", marker: "PRIVATE KEY-----"),
                   try HTTPServer.readPEM(tls.certificate, option: "--tls-cert", marker: "-----BEGIN CERTIFICATE-----"))
            if pem!.key.contains("BEGIN ENCRYPTED PRIVATE KEY") || pem!.key.contains("Proc-Type: 4,ENCRYPTED") {
                throw StartError(description: "--tls-key \(tls.key) is encrypted, and the server cannot ask for its passphrase; decrypt it (openssl pkey -in KEY -out PLAIN) and keep that file readable only by the server's user")
            }
        }
        if let auditLogPath {
            do { auditLog = try AuditLog(path: auditLogPath) } catch { throw StartError(description: error.description) }
        }
        try log.ensureProjectionsCurrent()
        committer = GroupCommitter(log: log) { [weak self] in self?.bus.headMoved() }
        var storage = sockaddr_storage()
        let length = try withUnsafeMutableBytes(of: &storage) { raw -> Int in
            if host.contains(":") {
                var address = sockaddr_in6()
                address.sin6_family = sa_family_t(AF_INET6)
                address.sin6_port = port.bigEndian
                guard inet_pton(AF_INET6, host, &address.sin6_addr) == 1 else {
                    throw StartError(description: "'\(host)' is not an IPv4 or IPv6 address")
                }
                raw.storeBytes(of: address, as: sockaddr_in6.self)
                return MemoryLayout<sockaddr_in6>.size
            }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            guard inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host, &address.sin_addr) == 1 else {
                throw StartError(description: "'\(host)' is not an IPv4 or IPv6 address")
            }
            raw.storeBytes(of: address, as: sockaddr_in.self)
            return MemoryLayout<sockaddr_in>.size
        }
        _ = length
        let context = Unmanaged.passUnretained(self).toOpaque()
        func startDaemon(key: UnsafePointer<CChar>?, certificate: UnsafePointer<CChar>?) -> OpaquePointer? {
            withUnsafePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                    ledger_mhd_start(mhd.startDaemon, address, accessHandler, context, requestCompleted, context,
                                     connectionNotified, context, UInt32(HTTPServer.connectionLimit), UInt32(perAddressLimit),
                                     UInt32(idleTimeout), key, certificate, mhdLog)
                }
            }
        }
        if let pem {
            // GnuTLS reads both when the daemon starts.
            daemon = pem.key.withCString { key in pem.certificate.withCString { startDaemon(key: key, certificate: $0) } }
        } else {
            daemon = startDaemon(key: nil, certificate: nil)
        }
        guard let daemon else {
            // libmicrohttpd's own reason: the address ("Failed to bind to port …: Address already
            // in use"), or GnuTLS's refusal of the key and certificate.
            let reason = withUnsafeBytes(of: &mhdLog.pointee.text) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                .replacingOccurrences(of: "\n", with: " ").trimmingCharacters(in: .whitespaces)
            if reason.contains("Failed to bind") || reason.isEmpty || tls == nil {
                // (libmicrohttpd names port 0: the address comes in a sockaddr, not as a port.)
                let why = reason.contains("Address already in use") ? "the address is in use"
                    : reason.contains("Permission denied") ? "not allowed (a port below 1024 needs privileges)"
                    : reason.isEmpty ? "address in use, or not allowed" : "libmicrohttpd says \"\(reason)\""
                throw StartError(description: "cannot listen on \(host):\(port): \(why)")
            }
            throw StartError(description: "cannot serve HTTPS with --tls-key \(tls!.key) and --tls-cert \(tls!.certificate): libmicrohttpd says \"\(reason)\" (a PEM private key and the certificate chain it belongs to, the server's certificate first, are needed)")
        }
        if let pem { certificateNotes = HTTPServer.notes(onCertificate: pem.certificate, now: Date()) }
        bus.start()
        _ = bus.observe { [weak self] in self?.wakeStreams(heartbeat: false) }
        let thread = Thread { [weak self] in
            while let self, self.running.withLock({ $0 }) {
                let seconds = Double(self.heartbeat.components.seconds) + Double(self.heartbeat.components.attoseconds) / 1e18
                // Sleep in short steps so that stopping is prompt.
                var slept = 0.0
                while slept < seconds, self.running.withLock({ $0 }) {
                    Thread.sleep(forTimeInterval: min(0.1, seconds - slept))
                    slept += 0.1
                    self.closeSlowRequests()
                }
                self.wakeStreams(heartbeat: true)
            }
        }
        thread.name = "ledger-heartbeat"
        thread.start()
        return ledger_mhd_port(mhd.getDaemonInfo, daemon)
    }

    /// What an operator should hear about the HTTPS certificate once `start` returns: that it
    /// has expired, is not valid yet, or expires within 30 days (GnuTLS serves it all the
    /// same; clients refuse it). Empty for plain HTTP.
    public private(set) var certificateNotes: [String] = []

    static func notes(onCertificate pem: String, now: Date) -> [String] {
        guard let dates = try? GnuTLSCertificates(), let (notBefore, notAfter) = dates.validity(of: pem) else { return [] }
        let nowSeconds = Int64(now.timeIntervalSince1970)
        func day(_ seconds: Int64) -> String {
            Timestamp(microseconds: seconds * 1_000_000).rfc3339.replacingOccurrences(of: ".000000Z", with: "Z")
        }
        if notAfter < nowSeconds {
            return ["the --tls-cert certificate expired at \(day(notAfter)); clients will refuse it"]
        }
        if notBefore > nowSeconds {
            return ["the --tls-cert certificate is not valid before \(day(notBefore)); clients will refuse it until then"]
        }
        if notAfter - nowSeconds < 30 * 86_400 {
            let days = (notAfter - nowSeconds) / 86_400
            return ["the --tls-cert certificate expires at \(day(notAfter)), in \(days) day\(days == 1 ? "" : "s"); renew it and restart serve"]
        }
        return []
    }

    /// The text of a PEM file given as `option`, which must hold `marker`: a regular file (a
    /// FIFO would hold the start for ever) of less than 1 MiB.
    static func readPEM(_ path: String, option: String, marker: String) throws -> String {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw StartError(description: "cannot read \(option) \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size < 1 << 20 else {
            throw StartError(description: "\(option) \(path) is not a PEM file (\(info.st_mode & S_IFMT == S_IFREG ? "it holds 1 MiB or more" : "not a regular file"))")
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count == bytes.count else {
            throw StartError(description: "cannot read \(option) \(path): \(count < 0 ? String(cString: strerror(errno)) : "it changed while read")")
        }
        guard let text = String(validating: bytes, as: UTF8.self), text.contains(marker), !text.contains("\0") else {
            throw StartError(description: "\(option) \(path) is not a PEM \(option == "--tls-key" ? "private key" : "certificate") (no '\(marker.trimmingCharacters(in: CharacterSet(charactersIn: "-")))' in it)")
        }
        return text
    }

    /// Ends every stream, finishes queued writes (answering each), and stops the daemon.
    ///
    /// libmicrohttpd aborts the process when it is stopped with a connection still suspended,
    /// so every suspended connection is resumed first: streams are told to close (one that
    /// opens from now on closes at once), and the writer commits and answers every queued POST
    /// before `stop` returns (a POST that arrives from now on gets a 503 without suspending).
    public func stop() {
        // New work is refused from here on: a POST (inline or offloaded) and a read get a 503.
        let waiting = workers.withLock { state -> [OffloadedWork] in
            running.withLock { $0 = false }
            state.open = false
            defer { state.waiting.removeAll() }
            return state.waiting
        }
        let all = streams.withLock { Array($0.values) }
        all.forEach { $0.wake(closing: true) }
        // A stream reading a page on `streamReads` is suspended until the read ends; none
        // queues another once closing, so this waits for the last.
        streamReads.sync {}
        // Offloaded work that has not started is answered 503 now; what runs may finish (a
        // large POST parsed there is then queued, or refused) for `stopGrace`.
        for work in waiting {
            deliver(.shuttingDown, to: work.request, work.suspended)
        }
        // A body still arriving is awaited too (within the body timeout, which closes a stalled
        // one here, the heartbeat thread having stopped): once in, its POST is answered 503
        // with nothing written. Stopping the daemon first closed such a connection with no
        // answer at all (an audit).
        let graceEnds = ContinuousClock.now + HTTPServer.stopGrace
        while workers.withLock({ $0.count }) > 0 || !headerWatch.withLock({ $0.receiving.isEmpty }),
              ContinuousClock.now < graceEnds {
            Thread.sleep(forTimeInterval: 0.005)
            closeSlowRequests()
        }
        committer?.stop()
        // Every commit is done: what the audit log has queued is written (for up to 2 s).
        auditLog?.close()
        // What still runs past the grace (a long replay) is answered 503 now, after the writer
        // stopped: a POST it was parsing can then no longer be committed. Its worker's own
        // answer, later, is dropped (`deliver`), so nothing resumes a connection after the
        // daemon stops; the worker keeps the server alive until it ends.
        let overdue = workers.withLock { Array($0.running.values) }
        for work in overdue {
            deliver(.stopping("the server stopped before this request was answered; nothing was written"),
                    to: work.request, work.suspended)
        }
        // Every queued POST is now committed and its connection resumed with the answer, but
        // the answer is sent by libmicrohttpd's thread: stopping the daemon at once closed
        // such connections with nothing sent, so a client could not tell a committed batch
        // from a lost one. Wait (a few seconds at most: a client may not read) until sent.
        let deadline = ContinuousClock.now + .seconds(5)
        while unsent.load(ordering: .acquiring) > 0, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.005)
        }
        bus.stop()
        // Every suspended connection has been resumed: libmicrohttpd aborts if stopped with one.
        if let daemon { mhd.stopDaemon(daemon) }
        daemon = nil
    }

    /// Closes the connections that have been sending a request's headers for longer than
    /// `headerTimeout`, or its body past its deadline: `shutdown` makes libmicrohttpd's next
    /// read of the socket fail, and it closes the connection itself. (Under the lock, so that
    /// the socket cannot be closed, and its number given to a new connection, in between;
    /// `shutdown` does not block.)
    private func closeSlowRequests() {
        let now = ContinuousClock.now
        headerWatch.withLock { watch in
            for (key, deadline) in watch.deadlines where now > deadline {
                if let socket = watch.sockets[key] { shutdown(socket, Int32(SHUT_RDWR)) }
                watch.deadlines[key] = nil
            }
        }
    }

    private func key(of connection: OpaquePointer) -> UInt {
        UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection)))
    }

    /// libmicrohttpd opened (`started`) or is closing `connection`.
    fileprivate func connection(_ connection: OpaquePointer, started: Bool) {
        let key = key(of: connection)
        if started {
            let socket = ledger_mhd_connection_socket(mhd.getConnectionInfo, connection)
            guard socket >= 0 else { return }
            headerWatch.withLock { watch in
                watch.sockets[key] = socket
                watch.deadlines[key] = ContinuousClock.now + headerTimeout
            }
        } else {
            headerWatch.withLock { watch in
                watch.sockets[key] = nil
                watch.deadlines[key] = nil  // the key (the connection's address) is reused
                watch.receiving.remove(key)
            }
        }
    }

    /// The headers of a request on `connection` are in (`true`: its body, if any, is awaited
    /// until `bodyTimeout`), or its request ended and the next one's are awaited.
    private func headersArrived(on connection: OpaquePointer, _ arrived: Bool) {
        let key = key(of: connection)
        headerWatch.withLock { watch in
            guard watch.sockets[key] != nil else { return }
            watch.deadlines[key] = ContinuousClock.now + (arrived ? bodyTimeout : headerTimeout)
        }
    }

    /// `count` more bytes of the body on `connection` came in (the deadline moves on by their
    /// share of a second), or (0) all of it has. (Called only once the headers are in, so the
    /// deadline here is the body's.)
    private func bodyReceived(on connection: OpaquePointer, _ count: Int) {
        let key = key(of: connection)
        headerWatch.withLock { watch in
            guard let deadline = watch.deadlines[key] else { return }
            // Never more than `bodyTimeout` ahead: bytes sent fast do not buy a long silence
            // later (an audit kept a connection for minutes on 200 kB sent at once).
            watch.deadlines[key] = count == 0 ? nil
                : min(deadline + .milliseconds(count * 1_000 / HTTPServer.bodyBytesPerSecond), ContinuousClock.now + bodyTimeout)
        }
    }

    private func wakeStreams(heartbeat: Bool) {
        let all = streams.withLock { Array($0.values) }
        all.forEach { $0.wake(heartbeat: heartbeat) }
    }

    func register(_ stream: EventStream) {
        // Under `running`'s lock, so a stream is either seen by `stop` or told to close here.
        let open = running.withLock { running in
            streams.withLock { $0[ObjectIdentifier(stream)] = stream }
            return running
        }
        if !open { stream.wake(closing: true) }
    }

    func unregister(_ stream: EventStream) {
        _ = streams.withLock { $0.removeValue(forKey: ObjectIdentifier(stream)) }
    }

    var subscriberCount: Int { streams.withLock { $0.count } }

    /// The lowest position among subscribers, for the lag metric.
    var slowestSubscriber: UInt64? { streams.withLock { $0.values.map(\.position).min() } }

    // MARK: - Requests

    /// Per-request state, kept in libmicrohttpd's `con_cls` from the first call to completion.
    final class Request: @unchecked Sendable {
        // @unchecked: touched by one thread at a time: libmicrohttpd's, or while the
        // connection is suspended an offload worker (which reads `body`) and the writer
        // thread, which only set the response under `lock` before resuming it.
        var body: [UInt8] = []
        var bodyTooLarge = false
        /// Bytes of a body over the limit read and not kept.
        var dropped = 0
        var submitted = false
        /// Who sent it (nil with --no-auth), found from the headers before any body is read.
        var client: APIClient?
        /// The request's target in origin form (`originForm`), found at the same time.
        var target = ""
        let lock = Mutex<Response?>(nil)
    }

    /// A response ready to queue.
    struct Response: Sendable {
        var status: Int
        var body: [UInt8]
        var contentType = "application/json"
        var headers: [(String, String)] = []

        static func json(_ status: Int, _ value: JSONValue) -> Response {
            Response(status: status, body: value.canonicalBytes + [0x0A])
        }

        /// What a request gets once a stop has begun: nothing of it was written. A client may
        /// try again once the server is back (`Retry-After`, RFC 9110 §10.2.3).
        static var shuttingDown: Response { stopping("the server is shutting down; nothing was written") }

        /// A 503 of a stopping server, saying `message`, with `Retry-After`.
        static func stopping(_ message: String) -> Response {
            var response = Response.error(503, message)
            response.headers.append(("Retry-After", "5"))
            return response
        }

        /// A JSON error. The message is one line whatever a request put in it: what a query
        /// argument or a path brings (`?type=a%0ab`) has its control and invisible characters
        /// written as `\u{…}` (`visibleCharacters`), as the CLI shows them (an audit found a
        /// decoded newline and a U+202E echoed raw). A 401 says how to authenticate
        /// (`WWW-Authenticate: Bearer`, RFC 9110 §11.6.1 and RFC 6750 §3: an audit).
        static func error(_ status: Int, _ message: String, extra: [String: JSONValue] = [:]) -> Response {
            var object = extra
            object["error"] = .string(visibleCharacters(message))
            var response = json(status, .object(object))
            if status == 401 { response.headers.append(("WWW-Authenticate", #"Bearer realm="ledger""#)) }
            return response
        }
    }

    static let maxBody = 64 << 20
    /// The most events one `GET /v1/events` returns.
    static let eventsPage = 10_000

    func handle(connection: OpaquePointer, url: String, method: String, version: String,
                upload: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>,
                state: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> MHD_Result {
        if state.pointee == nil {
            headersArrived(on: connection, true)
            // Once a stop has begun a new request is answered before its body is read, so
            // that the stop need not wait for it.
            if !running.withLock({ $0 }) {
                metrics.values.withLock { $0.requests += 1 }
                return queue(.shuttingDown, on: connection)
            }
            // Refused before any body is read, and before authentication: what libmicrohttpd
            // accepts but would leave the handlers guessing (`requestProblem`).
            if let refusal = requestProblem(connection, version: version) {
                metrics.values.withLock { $0.requests += 1 }
                return queue(refusal, on: connection)
            }
            // Who may send a body is known from the headers: a request without a valid token
            // is answered before its body is read (and without `100 Continue`), not after up
            // to 64 MiB of it was held in memory (an audit held 600 MB with ten such requests).
            let request = Request()
            let (target, authority) = HTTPServer.originForm(url)
            // libmicrohttpd splits the query off at the first '?' as sent, then decodes the
            // path: a '?' left in it was sent as %3F, and reading a query from there dropped it
            // silently (`/v1/projections/daily%3Fuser=bob` answered every user: an audit).
            if target.contains("?") {
                metrics.values.withLock { $0.requests += 1 }
                return queue(.error(400, "the path '\(target)' holds a '?' sent as %3F, which ends no path here: a query begins at a '?' sent as it is"), on: connection)
            }
            request.target = target
            switch authenticate(connection, targetAuthority: authority) {
            case .success(let found): request.client = found
            case .failure(let failure):
                metrics.values.withLock { $0.requests += 1 }
                return queue(failure.response, on: connection)
            }
            state.pointee = Unmanaged.passRetained(request).toOpaque()
            // From here until it is answered (`completed`), `stop` waits for a POST: a stop
            // between these headers and the body's first bytes closed it with no answer, and
            // so did one between its 503 being queued and libmicrohttpd sending it.
            if method == "POST" { headerWatch.withLock { _ = $0.receiving.insert(key(of: connection)) } }
            return .YES
        }
        let request = Unmanaged<Request>.fromOpaque(state.pointee!).takeUnretainedValue()
        if uploadSize.pointee > 0 {
            bodyReceived(on: connection, uploadSize.pointee)
            if request.body.count + uploadSize.pointee > HTTPServer.maxBody {
                // Only a chunked body gets here (a Content-Length over the limit is refused
                // before its body). Its 413 can be sent only once it ends (libmicrohttpd
                // 0.9.75 queues no answer mid-body): the rest is read and dropped for another
                // 64 MiB, then the connection is closed. It read 14.8 GB in 20 s (an audit).
                request.bodyTooLarge = true
                request.dropped += uploadSize.pointee
                if request.dropped > HTTPServer.maxBody { return .NO }
            } else if let upload {
                upload.withMemoryRebound(to: UInt8.self, capacity: uploadSize.pointee) {
                    request.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: uploadSize.pointee))
                }
            }
            uploadSize.pointee = 0
            return .YES
        }
        bodyReceived(on: connection, 0)  // the whole request is in
        // A write that finished while the connection was suspended.
        if request.submitted {
            guard let response = request.lock.withLock({ $0 }) else { return .YES }
            return queue(response, on: connection)
        }
        metrics.values.withLock { $0.requests += 1 }
        let client = request.client
        // The token was checked when the headers came; a body sent slowly may end after its
        // client was removed or its token rotated (an audit appended 20 s after a removal).
        if method == "POST", let client, (try? log.tokenWorks(for: client)) != true {
            return queue(.error(401, "the token was removed or replaced while this request was being sent; nothing was written"), on: connection)
        }
        let target = request.target
        let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
        let parts = path.split(separator: "/").map(String.init)
        let route = parts.count == 3 ? "\(parts[0])/\(parts[1])/*" : parts.joined(separator: "/")
        let name = parts.count == 3 ? parts[2] : ""
        if let accepted = HTTPServer.queryArguments[route],
           let problem = queryArgumentProblem(connection, accepted: accepted, path: { "/" + route.replacingOccurrences(of: "*", with: name) }) {
            return queue(.error(400, problem), on: connection)
        }
        // HEAD is GET without the body (RFC 9110 §9.3.2), which libmicrohttpd leaves out; not
        // for a stream, which has no end to measure.
        let method = method == "HEAD" && route != "v1/subscribe/*" ? "GET" : method
        switch (method, route) {
        case ("POST", "v1/events"):
            if request.bodyTooLarge { return queue(.error(413, "the body is larger than 64 MiB"), on: connection) }
            // A body without a length: RFC 9112 §6.3 reads it as empty, and "no events in
            // input" answered events that were sent (an audit). 411 says what is missing.
            if value(connection, kind: .HEADER_KIND, "Content-Length") == nil, value(connection, kind: .HEADER_KIND, "Transfer-Encoding") == nil {
                return queue(.error(411, "a POST needs its body's length: send 'Content-Length' or 'Transfer-Encoding: chunked'"), on: connection)
            }
            return post(request, connection: connection, client: client)
        case ("GET", "v1/events"):
            if let client, !client.admin {
                return queue(.error(403, "the raw event log is for admin clients; read projections instead"), on: connection)
            }
            let arguments = queryArguments(connection)
            return offload(request, connection: connection) { $0(self.getEvents(arguments)) }
        case ("GET", "v1/projections/*"), ("GET", "v1/replay/*"):
            // Reads take a read transaction and may take seconds (a replay of a large ledger):
            // answered on a thread of their own, not libmicrohttpd's, which serves everyone.
            let arguments = queryArguments(connection)
            let replay = route == "v1/replay/*"
            return offload(request, connection: connection) { $0(self.getRows(name, arguments: arguments, client: client, replay: replay)) }
        case ("GET", "v1/subscribe/*"):
            return subscribe(name, connection: connection, client: client)
        case ("GET", "v1/health"):
            let head = (try? log.head().seq) ?? 0
            return queue(.json(200, .object(["status": .string("ok"), "head": .int(Int64(head))])), on: connection)
        case ("GET", "metrics"):
            // Counts across every user (appends, rejects, the head): not any one user's to grant.
            if let client, !client.admin {
                return queue(.error(403, "metrics are for admin clients"), on: connection)
            }
            return queue(metricsResponse(), on: connection)
        case (_, "v1/events"), (_, "v1/projections/*"), (_, "v1/replay/*"), (_, "v1/subscribe/*"), (_, "v1/health"), (_, "metrics"):
            // RFC 9110 §15.5.6: a 405 says which methods the resource takes.
            var refusal = Response.error(405, "\(method) is not allowed on \(path)")
            refusal.headers = [("Allow", route == "v1/events" ? "GET, HEAD, POST" : route == "v1/subscribe/*" ? "GET" : "GET, HEAD")]
            return queue(refusal, on: connection)
        case ("OPTIONS", "*") where target == "*":
            // RFC 9110 §9.3.7: a question about the server as a whole (it was a 404).
            var answer = Response.json(200, .object(["methods": .array(["GET", "HEAD", "POST"].map(JSONValue.string))]))
            answer.headers = [("Allow", "GET, HEAD, POST")]
            return queue(answer, on: connection)
        default:
            return queue(.error(404, "no such endpoint: \(path)"), on: connection)
        }
    }

    func completed(_ connection: OpaquePointer?, _ state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) {
        if let connection {
            headersArrived(on: connection, false)
            headerWatch.withLock { _ = $0.receiving.remove(key(of: connection)) }
        }
        guard let state, let pointer = state.pointee else { return }
        let request = Unmanaged<Request>.fromOpaque(pointer).takeRetainedValue()
        if request.submitted { unsent.subtract(1, ordering: .releasing) }
        state.pointee = nil
    }

    /// Answers `request` off libmicrohttpd's thread, the connection suspended meanwhile, so
    /// that a slow read or a large body never holds up that thread (which serves every other
    /// request, stream and small POST). Up to `maxOffloaded` threads run such work; more waits
    /// its turn, suspended. `work` calls its argument once, from any thread and at any time
    /// (a POST's, once the writer has committed it), with the answer.
    private func offload(_ request: Request, connection: OpaquePointer,
                         _ work: @escaping @Sendable (_ answer: @escaping @Sendable (Response) -> Void) -> Void) -> MHD_Result {
        let suspended = SuspendedConnection(pointer: connection)
        let job = OffloadedWork(request: request, suspended: suspended) { [self] in
            work { response in self.deliver(response, to: request, suspended) }
        }
        enum Admission { case refused, run, wait }
        let admission = workers.withLock { state -> Admission in
            guard state.open else { return .refused }
            // Suspended under the lock, before any worker can take the job and answer it.
            suspend(request, connection)
            if state.count < HTTPServer.maxOffloaded {
                state.count += 1
                return .run
            }
            state.waiting.append(job)
            return .wait
        }
        if admission == .refused {
            return queue(.shuttingDown, on: connection)
        }
        if admission == .run {
            let thread = Thread { [self] in
                var next: OffloadedWork? = job
                while let current = next {
                    let key = ObjectIdentifier(current.request)
                    workers.withLock { $0.running[key] = current }
                    current.run()
                    next = workers.withLock { state -> OffloadedWork? in
                        state.running[key] = nil
                        guard !state.waiting.isEmpty else {
                            state.count -= 1
                            return nil
                        }
                        return state.waiting.removeFirst()
                    }
                }
            }
            thread.name = "ledger-request"
            thread.start()
        }
        return .YES
    }

    /// Suspends a request whose answer will come from another thread (`deliver`), counted in
    /// `unsent` until libmicrohttpd reports it complete. Called on libmicrohttpd's thread.
    private func suspend(_ request: Request, _ connection: OpaquePointer) {
        request.submitted = true
        unsent.add(1, ordering: .relaxed)
        mhd.suspendConnection(connection)
    }

    /// Stores the answer of a suspended request and resumes its connection, whose next
    /// handler call queues it; an answer after the first is dropped.
    private func deliver(_ response: Response, to request: Request, _ suspended: SuspendedConnection) {
        let first = request.lock.withLock { stored -> Bool in
            guard stored == nil else { return false }
            stored = response
            return true
        }
        if first { mhd.resumeConnection(suspended.pointer) }
    }

    /// The request's query arguments, names in lower case (libmicrohttpd's lookups ignore
    /// case), read on libmicrohttpd's thread for work done on another.
    private func queryArguments(_ connection: OpaquePointer) -> [String: String] {
        final class Found { var arguments: [String: String] = [:] }
        let found = Found()
        let context = Unmanaged.passUnretained(found).toOpaque()
        _ = mhd.getConnectionValues(connection, .GET_ARGUMENT_KIND, { context, _, key, keySize, value, valueSize in
            let found = Unmanaged<Found>.fromOpaque(context!).takeUnretainedValue()
            guard let value else { return .YES }
            found.arguments[String(decoding: asciiLowercased(cBytes(key, keySize)), as: UTF8.self)] =
                String(decoding: cBytes(value, valueSize), as: UTF8.self)
            return .YES
        }, context)
        return found.arguments
    }

    /// The target of a request in absolute form (`GET http://host/v1/health`, which RFC 9112
    /// §3.2.2 says a server must accept; it was a 404) as its path, with its authority; any
    /// other target as it is.
    static func originForm(_ target: String) -> (path: String, authority: String?) {
        for scheme in ["http://", "https://"] where target.lowercased().hasPrefix(scheme) {
            let rest = target.dropFirst(scheme.count)
            let end = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
            let path = String(rest[end...])
            return (path.hasPrefix("/") ? path : "/" + path, String(rest[..<end]))
        }
        return (target, nil)
    }

    private func authenticate(_ connection: OpaquePointer, targetAuthority: String?) -> Result<APIClient?, ResponseFailure> {
        guard authRequired else {
            // A target in absolute form names the host itself, in place of `Host` (RFC 9112
            // §3.2.2): it is held to the same rule.
            if let targetAuthority, !HTTPServer.isLoopback(authority: targetAuthority) {
                return .failure(ResponseFailure(response: .error(403, "--no-auth answers only requests addressed to a loopback name or address, not '\(targetAuthority)'")))
            }
            // --no-auth serves the programs of this machine, and a web page open in its
            // browser is not one: a cross-site form or fetch (which sends `Origin`) could
            // append to a log that can never be rewritten, and DNS rebinding (a foreign name
            // in `Host` that resolves to 127.0.0.1) could read it. Both are refused.
            if let host = value(connection, kind: .HEADER_KIND, "Host"), !HTTPServer.isLoopback(authority: host) {
                return .failure(ResponseFailure(response: .error(403, "--no-auth answers only requests addressed to a loopback name or address, not '\(host)'")))
            }
            if let origin = value(connection, kind: .HEADER_KIND, "Origin"),
               !HTTPServer.isLoopback(authority: origin.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first.map(String.init) ?? "") {
                return .failure(ResponseFailure(response: .error(403, "--no-auth refuses requests from web pages of another origin ('\(origin)'); start the server with tokens to serve them")))
            }
            return .success(nil)
        }
        // The scheme's name is case-insensitive (RFC 9110 §11.1): "bearer" is "Bearer".
        guard let header = value(connection, kind: .HEADER_KIND, "Authorization"),
              header.prefix(7).lowercased() == "bearer " else {
            return .failure(ResponseFailure(response: .error(401, "missing 'Authorization: Bearer <token>'")))
        }
        // One or more spaces after the scheme (RFC 6750 §2.1); white space around a header's
        // value is not part of it (RFC 9110 §5.5): a token with a trailing space was
        // "unknown or revoked" (an audit).
        let token = HTTPServer.trimmed(header.dropFirst(7))
        guard let client = try? log.client(forToken: token) else {
            return .failure(ResponseFailure(response: .error(401, "unknown or revoked token")))
        }
        return .success(client)
    }

    struct ResponseFailure: Error { var response: Response }

    /// Whether `authority` (`host`, `host:port`, `[v6]:port`) names this machine: `localhost`
    /// and names under it (RFC 6761), Debian's `ip6-localhost`, 127.0.0.0/8, ::1 and
    /// ::ffff:127.0.0.0/104, with one trailing dot allowed. Anything after the host but a port
    /// refuses it.
    static func isLoopback(authority: String) -> Bool {
        let text = Substring(trimmed(authority, unicodeSpaces: true))
        var host: Substring
        var rest: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return false }
            host = text[text.index(after: text.startIndex)..<close]
            rest = text[text.index(after: close)...]
        } else if let colon = text.firstIndex(of: ":") {
            (host, rest) = (text[..<colon], text[colon...])
        } else {
            (host, rest) = (text, "")
        }
        guard rest.isEmpty || (rest.first == ":" && rest.count <= 6 && rest.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber })) else { return false }
        if text.hasPrefix("[") {
            var address = in6_addr()
            guard inet_pton(AF_INET6, String(host), &address) == 1 else { return false }
            let bytes = withUnsafeBytes(of: address) { Array($0) }
            if bytes == Array(repeating: 0, count: 15) + [1] { return true }
            return bytes.prefix(12) == Array(repeating: 0, count: 10) + [0xFF, 0xFF] && bytes[12] == 127
        }
        if host.hasSuffix(".") { host = host.dropLast() }
        let name = host.lowercased()
        if name == "localhost" || name.hasSuffix(".localhost") || name == "ip6-localhost" { return true }
        var address = in_addr()
        return inet_pton(AF_INET, name, &address) == 1 && UInt32(bigEndian: address.s_addr) >> 24 == 127
    }

    private func post(_ request: Request, connection: OpaquePointer, client: APIClient?) -> MHD_Result {
        // A compressed body was parsed as it came, and refused as malformed JSON, or worse
        // taken (an audit): say what is wrong (RFC 9110 §15.5.16).
        if let coding = value(connection, kind: .HEADER_KIND, "Content-Encoding"), !coding.isEmpty, coding.lowercased() != "identity" {
            return queue(.error(415, "Content-Encoding '\(visibleCharacters(coding))' is not supported; send the body uncompressed"), on: connection)
        }
        var expectHead: UInt64?
        // `If-Match: *` asks only that the resource exist (RFC 9110 §13.1.1), and the log
        // always does. A seq may be quoted, as an entity tag is.
        if let match = value(connection, kind: .HEADER_KIND, "If-Match"), match != "*" {
            let quoted = match.utf8.count >= 2 && match.hasPrefix("\"") && match.hasSuffix("\"")
            guard let seq = UInt64(digits: quoted ? match.dropFirst().dropLast() : Substring(match)) else {
                return queue(.error(400, "'If-Match' must be the expected head seq (or *), got '\(visibleCharacters(match))'"), on: connection)
            }
            expectHead = seq
        }
        // Once a stop has begun, a new batch is refused (what is queued is still committed).
        guard running.withLock({ $0 }) else {
            return queue(.shuttingDown, on: connection)
        }
        if request.body.count > HTTPServer.inlineBodyLimit {
            return offload(request, connection: connection) { [expectHead] answer in
                if let refusal = self.submit(request, client: client, expectHead: expectHead, suspend: {}, answer: answer) {
                    answer(refusal)
                }
            }
        }
        let suspended = SuspendedConnection(pointer: connection)
        let refusal = submit(request, client: client, expectHead: expectHead, suspend: { self.suspend(request, connection) },
                             answer: { response in self.deliver(response, to: request, suspended) })
        return refusal.map { queue($0, on: connection) } ?? .YES
    }

    /// Parses a POSTed body, checks the client may append it, and queues it for the writer,
    /// calling `suspend` once the writer has taken it (under its lock: a stopping writer
    /// refuses it, and a connection suspended with nobody to resume it would abort
    /// libmicrohttpd's shutdown) and `answer` once it is committed or refused. Returns the
    /// answer instead when the batch never reaches the writer.
    private func submit(_ request: Request, client: APIClient?, expectHead: UInt64?, suspend: () -> Void,
                        answer: @escaping @Sendable (Response) -> Void) -> Response? {
        let batch: [(InputLocation, PreparedEvent)]
        do {
            batch = try EventInput.prepare(request.body)
        } catch {
            metrics.values.withLock { $0.rejects += 1 }
            return .error(400, error.description, extra: location(error.location, in: request.body))
        }
        if let denied = access.mayAppend(batch, client: client) {
            metrics.values.withLock { $0.rejects += 1 }
            return .error(403, denied.message, extra: location(denied.location, in: request.body))
        }
        let metrics = self.metrics
        let auditLog = self.auditLog
        let accepted = committer.submit(suspend: suspend, GroupCommitter.Job(events: batch.map { (Optional($0.0), $0.1) }, expectHead: expectHead,
                                                                                 tokenDigest: client?.tokenDigest,
                                                                                 sharedBy: client.flatMap { $0.admin ? nil : $0.name }) { result in
            let response: Response
            switch result {
            case .success(let appended):
                auditLog?.record(client: client, appended)
                metrics.values.withLock {
                    $0.appends += appended.appended
                    $0.duplicates += appended.duplicates
                }
                response = .json(200, .object([
                    "appended": .int(Int64(appended.appended)), "duplicates": .int(Int64(appended.duplicates)),
                    "superseded": .int(Int64(appended.superseded)), "head": .int(Int64(appended.head)),
                ]))
            case .failure(let error as InputError):
                metrics.values.withLock { $0.rejects += 1 }
                let status = error.field == "id" && error.message.contains("already in the log") ? 409 : 400
                // A conflict with the log names the other event's seq for admins only: it may
                // be another user's, which a client sees nothing of (SPEC §9.1).
                var shown = error
                if let client, !client.admin, let message = error.messageForReader { shown.message = message }
                response = .error(status, shown.description, extra: self.location(error.location, in: request.body))
            case .failure(EventLog.ClientError.notShared(let location, let message)):
                metrics.values.withLock { $0.rejects += 1 }
                response = .error(403, message, extra: self.location(location, in: request.body))
            case .failure(EventLog.ClientError.tokenGone):
                metrics.values.withLock { $0.rejects += 1 }
                response = .error(401, EventLog.ClientError.tokenGone.description)
            case .failure(let error as LedgerError):
                metrics.values.withLock { $0.rejects += 1 }
                if case .headMismatch = error {
                    response = .error(409, error.description)
                } else if case .readOnlyMedia = error {
                    // Not the server's failure, nor the client's: this ledger takes no appends.
                    response = .error(503, "the ledger this server reads is on a read-only file system: it answers reads but takes no appends; nothing was written")
                } else if case .notWritable = error {
                    response = .error(503, "the server may read its ledger but not write it (the permissions of data.mdb): it answers reads but takes no appends; nothing was written")
                } else {
                    response = .error(500, error.description)
                }
            case .failure(let error):
                response = .error(500, "\(error)")
            }
            answer(response)
        })
        return accepted ? nil : .shuttingDown
    }

    /// A suspended connection handed to the writer thread, which only resumes it.
    struct SuspendedConnection: @unchecked Sendable {
        // @unchecked: MHD_resume_connection may be called from any thread.
        let pointer: OpaquePointer
    }

    /// Where in the body the error is: `line` always (SPEC §9; `null` when the error is the
    /// whole body's, as an empty one), and for an array body also the element's 0-based `index`.
    private func location(_ location: InputLocation?, in body: [UInt8]) -> [String: JSONValue] {
        switch location {
        case .line(let line)?:
            return ["line": .int(Int64(line))]
        case .index(let index)?:
            var fields: [String: JSONValue] = ["index": .int(Int64(index))]
            if let line = EventInput.lineOfArrayElement(body, index: index) { fields["line"] = .int(Int64(line)) }
            return fields
        case nil:
            return ["line": .null]
        }
    }

    /// `GET /v1/events`, for admin clients (others are refused before).
    private func getEvents(_ arguments: [String: String]) -> Response {
        let from = arguments["from"].map { UInt64(digits: $0) } ?? 1
        let limit = arguments["limit"].map { Int(digits: $0) } ?? 1000
        // As `log --limit`: 0 asks for nothing (an empty list). More than a page is refused
        // rather than cut short, which a pager would take for the end of the log.
        guard let from else { return .error(400, "'from' needs a seq (a whole number)") }
        guard let limit, (0...HTTPServer.eventsPage).contains(limit) else {
            return .error(400, "'limit' needs a whole number from 0 to \(HTTPServer.eventsPage) (page on with 'from')")
        }
        // As `log --kind` and `log --user` (a correction is its target's user's).
        var kind: EventKind?
        if let text = arguments["kind"] {
            guard let parsed = EventKind(rawValue: text) else {
                return .error(400, "unknown kind '\(text)' (expected sample, correction, grant, revoke or profile)")
            }
            kind = parsed
        }
        // As `log --id`: the event with that id and its history (`EventHistory`).
        var id: UUID?
        if let text = arguments["id"] {
            guard let parsed = UUID(uuidString: text) else { return .error(400, "'id' needs a UUID, got '\(text)'") }
            id = parsed
        }
        let user = arguments["user"]
        if let user, let problem = EventDecoder.nameProblem(user, field: "user") { return .error(400, problem) }
        let after: UInt64
        let window: RecordedWindow
        do {
            // As `log --since` and `--until`: by the time each event was recorded.
            let since = arguments["since"].map(HTTPServer.offsetPlusRestored), until = arguments["until"].map(HTTPServer.offsetPlusRestored)
            switch try log.recordedWindow(since: since, until: until, name: { "'\($0)'" }) {
            case .success(let found): window = found
            case .failure(let problem): return .error(400, problem.message)
            }
            guard let found = try log.walkAfter(from: from, id: id, since: window.since) else {
                return .error(404, "no event in this ledger has id \(id!.lowercased)")
            }
            after = found
        } catch {
            return .error(500, "\(error)")
        }
        var known: [UUID: String] = [:]
        var history = id.map(EventHistory.init(of:))
        var out: [UInt8] = [UInt8(ascii: "[")]
        var count = 0
        do {
            try log.forEachRecord(after: after) { record in
                if count >= limit || window.isPast(record.recorded) { return false }
                if kind != nil || user != nil || history != nil {
                    let event = try record.typedEvent()
                    if history?.includes(event) == false || record.seq < from || !window.contains(record.recorded) { return true }
                    if let kind, event.payload.kind != kind { return true }
                    if let user {
                        // `known` keeps only the asked user's samples (at most a page): a
                        // correction of anyone else's is looked up in the log instead.
                        guard sameName(try log.user(of: event, known: &known), user) else {
                            known[event.id] = nil
                            return true
                        }
                    }
                }
                if count > 0 { out.append(UInt8(ascii: ",")) }
                out += record.json
                count += 1
                return true
            }
        } catch {
            return .error(500, "\(error)")
        }
        out += Array("]\n".utf8)
        return Response(status: 200, body: out)
    }

    private func getRows(_ name: String, arguments: [String: String], client: APIClient?, replay: Bool) -> Response {
        guard let (projection, impliedType) = ProjectionName.parse(name) else {
            return .error(404, "unknown projection '\(name)' (expected daily, daily-steps, per-source, last-known or grants)")
        }
        func argument(_ name: String) -> String? { arguments[name] }
        if let user = argument("user"), let problem = EventDecoder.nameProblem(user, field: "user") { return .error(400, problem) }
        var filter = RowFilter(user: argument("user"), type: impliedType)
        if let text = argument("type") {
            guard let type = QuantityType(name: text) else { return .error(400, "unknown type '\(text)' (expected \(QuantityType.acceptedNames))") }
            if let conflict = ProjectionName.typeConflict(implied: impliedType, given: type, spelled: "'\(text)'", option: "type") {
                return .error(400, conflict)
            }
            filter.type = type
        }
        // A replay's arguments on a projection would be ignored (unknown arguments are, unless
        // near a known one): the rows would not be the ones asked for.
        if !replay, let name = ["to_date", "to_seq"].first(where: { argument($0) != nil }) {
            return .error(400, "'\(name)' is an argument of /v1/replay, not of /v1/projections (whose last day is 'to')")
        }
        let (dateText, toText, toSeqText) = (argument("date"), argument("to"), argument("to_seq"))
        // As the CLI: one day, or a range, not both (the day would silently win).
        let upper = replay ? "to_date" : "to"
        if dateText != nil, argument("from") != nil || argument(upper) != nil {
            return .error(400, "'date' cannot be combined with 'from' or '\(upper)'")
        }
        // As the CLI: a grant has no day, so a day given would be ignored, and the rows not
        // the ones asked for.
        if projection == .grants, let parameter = ["date", "from", upper].first(where: { argument($0) != nil }) {
            return .error(400, "grants rows have no date; '\(parameter)' does not apply to them")
        }
        var today = false
        // In a replay `to` is the replay point, and `to_date` the last day (as `--to-date`).
        for (parameter, text, keyPath) in [("from", argument("from"), \RowFilter.from), ("to", toText, \RowFilter.to),
                                           ("to_date", replay ? argument("to_date") : nil, \RowFilter.to),
                                           ("date", dateText, \RowFilter.from)] {
            guard let text, !(replay && parameter == "to") else { continue }
            if parameter == "date", text == "today" {
                today = true
                continue
            }
            guard let date = CivilDate(parsing: text) else {
                return .error(400, "'\(parameter)' must be a date YYYY-MM-DD\(parameter == "date" ? " or today" : ""), got '\(text)'")
            }
            filter[keyPath: keyPath] = date
            if parameter == "date" { filter.to = date }
        }
        // As the CLI: days that cannot hold a row are an error, not an empty list (an audit).
        if let from = filter.from, let to = filter.to, to < from {
            return .error(400, "'\(replay ? "to_date" : "to")' \(to) precedes 'from' \(from)")
        }
        // As `project --fallback` (SPEC §4.4): daily rows of one day, else each last-known row.
        var fallback = false
        if let text = argument("fallback") {
            guard text == "true" || text == "false" else { return .error(400, "'fallback' must be true or false, got '\(text)'") }
            fallback = text == "true"
            if fallback, projection != .daily || dateText == nil {
                return .error(400, "'fallback' works with daily (or daily-steps) and 'date'")
            }
        }
        if replay, toSeqText != nil, toText != nil {
            return .error(400, "give either 'to' or 'to_seq', not both")
        }
        let check = access.readCheck(for: client)  // the refusal and the rows' filter
        if let refusal = check.refusal(projection: projection, user: filter.user, type: filter.type) {
            return .error(403, refusal)
        }
        do {
            let now = EventLog.systemClock()
            // `date=today` in the user's profile zone: as the replay has it, for a replay.
            func resolveToday(_ filter: inout RowFilter, in query: ProjectionQuery?) throws {
                guard today else { return }
                let day = try log.today(for: filter.user, now: now, in: query)
                filter.from = day
                filter.to = day
            }
            var rows: [Row]
            var headers: [(String, String)] = []
            if replay {
                let target: ReplayTarget
                if let seq = toSeqText {
                    guard let number = UInt64(digits: seq) else { return .error(400, "'to_seq' must be a whole number") }
                    target = .seq(number)
                } else if let typed = toText {
                    let when = HTTPServer.offsetPlusRestored(typed)
                    guard let instant = try log.replayInstant(when) else {
                        let problem = EventLog.replayPointProblem(when) ?? "is no replay point"
                        return .error(400, "'to' \(problem), got '\(visibleCharacters(when))' (a '+' in it may be written %2B)")
                    }
                    target = .recorded(instant)
                } else {
                    return .error(400, "replay needs 'to' or 'to_seq'")
                }
                (rows, headers) = try log.withReplay(to: target, users: filter.user.map { [$0] }) { point, query in
                    var filter = filter
                    try resolveToday(&filter, in: query)
                    return (try Row.rows(projection, filter: filter, fallback: fallback) { try query.rows($0, filter: $1) },
                            [("Ledger-As-Of", "seq \(point.seq), recorded \(point.recorded?.rfc3339 ?? "-"), hash \(point.hash.hex)")])
                }
            } else {
                try resolveToday(&filter, in: nil)
                rows = try Row.rows(projection, filter: filter, fallback: fallback) { try log.rows($0, filter: $1) }
            }
            rows = rows.filter { check.mayRead($0) }
            var out: [UInt8] = [UInt8(ascii: "[")]
            for (index, row) in rows.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                out += fallback ? row.jsonBytes(columns: Row.fallbackColumns) : row.jsonBytes
            }
            out += Array("]\n".utf8)
            return Response(status: 200, body: out, headers: headers)
        } catch {
            return .error(500, "\(error)")
        }
    }

    private func subscribe(_ name: String, connection: OpaquePointer, client: APIClient?) -> MHD_Result {
        if name == "events" { return subscribeToEvents(connection: connection, client: client) }
        guard let (projection, impliedType) = ProjectionName.parse(name) else {
            return queue(.error(404, "unknown projection '\(name)' (or events)"), on: connection)
        }
        let user = value(connection, kind: .GET_ARGUMENT_KIND, "user")
        if let user, let problem = EventDecoder.nameProblem(user, field: "user") { return queue(.error(400, problem), on: connection) }
        var filter = ChangeFilter(projection: projection, user: user, type: impliedType)
        if let text = value(connection, kind: .GET_ARGUMENT_KIND, "type") {
            guard let type = QuantityType(name: text) else { return queue(.error(400, "unknown type '\(text)' (expected \(QuantityType.acceptedNames))"), on: connection) }
            if let conflict = ProjectionName.typeConflict(implied: impliedType, given: type, spelled: "'\(text)'", option: "type") {
                return queue(.error(400, conflict), on: connection)
            }
            filter.type = type
        }
        if let refusal = access.readCheck(for: client).refusal(projection: projection, user: filter.user, type: filter.type) {
            return queue(.error(403, refusal), on: connection)
        }
        switch streamStart(connection, withinSeq: true) {
        case .success(let position):
            return openStream(EventStream(connection: connection, server: self, filter: filter, client: client,
                                          cursor: position.after, sentOfNext: position.sentOfNext), on: connection)
        case .failure(let refusal):
            return queue(refusal.response, on: connection)
        }
    }

    /// A request refused with `response`, as an error.
    struct Refusal: Error {
        var response: Response
    }

    /// Where a stream starts: after the `Last-Event-ID` header's position, else after
    /// `lastEventId` (EventSource polyfills put it in the query when they reconnect), else
    /// after `from`; at the head for `now` or none. A position inside a seq (`SEQ.K`) only
    /// `withinSeq` (changes: an event is one seq). Refused past the head (409).
    private func streamStart(_ connection: OpaquePointer, withinSeq: Bool) -> Result<ChangePosition, Refusal> {
        // Whitespace around a header's value is not part of it (RFC 9110 §5.5): `value`
        // trims every header's, where libmicrohttpd drops only the leading.
        // An empty `Last-Event-ID` (or `lastEventId`) is none (the SSE standard's "no last
        // event id"; proxies and polyfills send it so): it was refused with a 400 (an audit).
        func given(_ kind: MHD_ValueKind, _ name: String) -> String? {
            value(connection, kind: kind, name).flatMap { $0.isEmpty ? nil : $0 }
        }
        // Which input the position came from, for its error (they said "'from' / 'Last-Event-ID'"
        // and not the value: an audit).
        let (resume, input): (String?, String) = if let header = given(.HEADER_KIND, "Last-Event-ID") {
            (header, "header 'Last-Event-ID'")
        } else if let argument = given(.GET_ARGUMENT_KIND, "lastEventId") {
            (argument, "'lastEventId'")
        } else {
            (value(connection, kind: .GET_ARGUMENT_KIND, "from"), "'from'")
        }
        let head = (try? log.head().seq) ?? 0
        guard let resume, resume != "now" else { return .success(ChangePosition(after: head, sentOfNext: 0)) }
        guard let position = ChangePosition(resume), withinSeq || position.sentOfNext == 0 else {
            return .failure(Refusal(response: .error(400, withinSeq ? "\(input) must be a seq (or an event id this server sent, SEQ.K), got '\(resume)'"
                                                                   : "\(input) must be a seq (or now), got '\(resume)'")))
        }
        if let refusal = position.pastHead(head, given: resume) { return .failure(Refusal(response: .error(409, refusal))) }
        return .success(position)
    }

    /// `GET /v1/subscribe/events`: the events themselves as they are committed, for admin
    /// clients (as `GET /v1/events`), from `from` / `Last-Event-ID` (a seq) or now, filtered by
    /// `user` and `type` as `ledger subscribe events` filters.
    private func subscribeToEvents(connection: OpaquePointer, client: APIClient?) -> MHD_Result {
        if let client, !client.admin {
            return queue(.error(403, "the raw event log is for admin clients; subscribe to projections instead"), on: connection)
        }
        let user = value(connection, kind: .GET_ARGUMENT_KIND, "user")
        if let user, let problem = EventDecoder.nameProblem(user, field: "user") { return queue(.error(400, problem), on: connection) }
        var filter = ChangeFilter(user: user)
        if let text = value(connection, kind: .GET_ARGUMENT_KIND, "type") {
            guard let type = QuantityType(name: text) else { return queue(.error(400, "unknown type '\(text)' (expected \(QuantityType.acceptedNames))"), on: connection) }
            filter.type = type
        }
        switch streamStart(connection, withinSeq: false) {
        case .success(let position):
            return openStream(EventStream(connection: connection, server: self, filter: filter, rawEvents: true,
                                          client: client, cursor: position.after), on: connection)
        case .failure(let refusal):
            return queue(refusal.response, on: connection)
        }
    }

    /// Registers `stream` and answers `connection` with it, as Server-Sent Events.
    private func openStream(_ stream: EventStream, on connection: OpaquePointer) -> MHD_Result {
        register(stream)
        let context = Unmanaged.passRetained(stream).toOpaque()
        guard let response = mhd.createResponseFromCallback(UInt64.max, 16 * 1024, { context, _, buffer, max in
            guard let context, let buffer else { return -2 }
            let stream = Unmanaged<EventStream>.fromOpaque(context).takeUnretainedValue()
            return stream.fill(buffer, capacity: max)
        }, context, { context in
            guard let context else { return }
            let stream = Unmanaged<EventStream>.fromOpaque(context).takeRetainedValue()
            stream.server.unregister(stream)
        }) else {
            return queue(.error(500, "cannot create the stream"), on: connection)
        }
        defer { mhd.destroyResponse(response) }
        _ = mhd.addResponseHeader(response, "Content-Type", "text/event-stream")
        _ = mhd.addResponseHeader(response, "Cache-Control", "no-cache")
        _ = mhd.addResponseHeader(response, "X-Accel-Buffering", "no")
        return mhd.queueResponse(connection, 200, response)
    }

    private func metricsResponse() -> Response {
        let values = metrics.values.withLock { $0 }
        let head = (try? log.head().seq) ?? 0
        let lag = slowestSubscriber.map { head > $0 ? head - $0 : 0 } ?? 0
        let text = """
        # HELP ledger_appended_events_total Events appended through the HTTP API.
        # TYPE ledger_appended_events_total counter
        ledger_appended_events_total \(values.appends)
        # HELP ledger_commits_total Write transactions committed for POSTed batches (group commit: one may hold many).
        # TYPE ledger_commits_total counter
        ledger_commits_total \(committer?.commits ?? 0)
        # HELP ledger_duplicate_events_total Events POSTed that were already in the log.
        # TYPE ledger_duplicate_events_total counter
        ledger_duplicate_events_total \(values.duplicates)
        # HELP ledger_rejected_batches_total Batches refused (invalid, forbidden, conflicting).
        # TYPE ledger_rejected_batches_total counter
        ledger_rejected_batches_total \(values.rejects)
        # HELP ledger_requests_total Requests handled.
        # TYPE ledger_requests_total counter
        ledger_requests_total \(values.requests)
        # HELP ledger_subscribers Open SSE subscriptions.
        # TYPE ledger_subscribers gauge
        ledger_subscribers \(subscriberCount)
        # HELP ledger_head_seq The log's last seq.
        # TYPE ledger_head_seq gauge
        ledger_head_seq \(head)
        # HELP ledger_subscriber_lag_events How far the slowest subscriber is behind the head.
        # TYPE ledger_subscriber_lag_events gauge
        ledger_subscriber_lag_events \(lag)

        """
        return Response(status: 200, body: Array(text.utf8), contentType: "text/plain; version=0.0.4")
    }

    /// Why the request's framing, headers or query cannot be trusted, if they cannot, as the
    /// response to send instead of reading it:
    /// - a header name with white space before its colon (`Content-Length : 5`, which
    ///   libmicrohttpd takes for another header, so the body would be read as a request);
    /// - more than one `Content-Length`, or one with `Transfer-Encoding` (RFC 9112 §6.1, §6.3:
    ///   the framing is ambiguous), a transfer coding other than `chunked` (501), or a declared
    ///   body over the limit (413, before it is read);
    /// - `Authorization`, `If-Match` or `Last-Event-ID` given twice (the first would win);
    /// - an HTTP/1.1 request (`version`) without `Host`;
    /// - a query argument given twice (names compare ignoring ASCII case, as libmicrohttpd's
    ///   lookups do, so `user=a&User=b` is a repeat), or a key or value holding a NUL byte
    ///   (`%00`), which every C-string lookup would cut short. Empty segments (`?a=1&&b=2`,
    ///   `&=`) name nothing and are ignored, as the lookups do.
    func requestProblem(_ connection: OpaquePointer, version: String) -> Response? {
        final class Found {
            var headers: [[UInt8]: [[UInt8]]] = [:]
            var arguments: Set<[UInt8]> = []
            var spaced: String?
            var problem: String?
        }
        let found = Found()
        let context = Unmanaged.passUnretained(found).toOpaque()
        _ = mhd.getConnectionValues(connection, .HEADER_KIND, { context, _, key, keySize, value, valueSize in
            let found = Unmanaged<Found>.fromOpaque(context!).takeUnretainedValue()
            let name = cBytes(key, keySize)
            if name.contains(0x20) || name.contains(0x09) {
                found.spaced = String(decoding: name, as: UTF8.self)
            }
            found.headers[asciiLowercased(name), default: []].append(cBytes(value, valueSize))
            return .YES
        }, context)
        if let spaced = found.spaced {
            return .error(400, "header name '\(spaced)' has white space before its colon")
        }
        // libmicrohttpd 0.9.75 appends a folded continuation line (obs-fold, RFC 9112 §5.2) to
        // the header's name: `If-Match: 1` + ` x` arrives as a header `If-Matchx`, and the
        // check it carried would silently vanish. Names that extend one the server reads are
        // refused. (A NUL in a header value cannot be refused here: libmicrohttpd ends the
        // value at it before the server sees it.)
        for name in found.headers.keys {
            if let read = HTTPServer.readHeaders.first(where: { name.starts(with: $0) && name.count > $0.count }) {
                // The rest is not echoed: folded from the value, it may be a bearer token (a
                // review found one in the answer, where proxies and clients log error bodies).
                return .error(400, "a header name extends '\(String(decoding: read, as: UTF8.self))' by \(name.count - read.count) more bytes (not shown): folded onto a second line, or misspelled; send each header on one line")
            }
        }
        func rawValues(_ name: String) -> [String] {
            (found.headers[Array(name.utf8)] ?? []).map { String(decoding: $0, as: UTF8.self) }
        }
        func values(_ name: String) -> [String] { rawValues(name).map { HTTPServer.trimmed($0, unicodeSpaces: true) } }
        // RFC 9112 §3.2: an HTTP/1.1 request without `Host` is refused (HTTP/1.0 sends none).
        if version == "HTTP/1.1", rawValues("host").isEmpty {
            return .error(400, "an HTTP/1.1 request needs a 'Host' header")
        }
        let lengths = values("content-length")
        let codings = rawValues("transfer-encoding")
        if lengths.count > 1 {
            return .error(400, "the request has \(lengths.count) 'Content-Length' headers; send exactly one")
        }
        if !codings.isEmpty, !lengths.isEmpty {
            return .error(400, "the request has both 'Transfer-Encoding' and 'Content-Length'; send one")
        }
        // As libmicrohttpd reads it: `chunked` in any case after the leading white space it
        // drops, and nothing after (it would not decode `chunked ` and wait for the body).
        if codings.count > 1 || codings.contains(where: { $0.drop(while: { $0 == " " || $0 == "\t" }).lowercased() != "chunked" }) {
            return .error(501, "the only transfer coding accepted is 'Transfer-Encoding: chunked'")
        }
        if let length = lengths.first, let size = UInt64(length), size > UInt64(HTTPServer.maxBody) {
            return .error(413, "the body is larger than 64 MiB")
        }
        // `Host` too (RFC 9112 §3.2: 400): --no-auth checks the first, and a second could name
        // another host.
        for name in ["Host", "Authorization", "If-Match", "Last-Event-ID"] where values(name.lowercased()).count > 1 {
            return .error(400, "header '\(name)' is given more than once")
        }
        _ = mhd.getConnectionValues(connection, .GET_ARGUMENT_KIND, { context, _, key, keySize, value, valueSize in
            let found = Unmanaged<Found>.fromOpaque(context!).takeUnretainedValue()
            let name = cBytes(key, keySize)
            let shown = String(decoding: name.prefix { $0 != 0 }, as: UTF8.self)
            if name.contains(0) || cBytes(value, valueSize).contains(0) {
                found.problem = "query argument '\(shown)' contains a NUL byte (%00)"
                return .NO
            }
            // Read as UTF-8, bytes that are not were replaced, and `user=%ff` answered the rows
            // of a user named "\u{FFFD}" (an audit); the CLI refuses such arguments too.
            if String(validating: name, as: UTF8.self) == nil || String(validating: cBytes(value, valueSize), as: UTF8.self) == nil {
                found.problem = "query argument '\(visibleCharacters(shown))' is not UTF-8 (after its %-escapes are decoded)"
                return .NO
            }
            guard !name.isEmpty else { return .YES }
            guard found.arguments.insert(asciiLowercased(name)).inserted else {
                found.problem = "query argument '\(shown)' is given more than once"
                return .NO
            }
            return .YES
        }, context)
        return found.problem.map { .error(400, $0) }
    }

    /// A time typed with an offset, `…T02:43:03+01:00`, in a query: its `+` arrives as a space
    /// (form encoding), and no offset begins with one, so it is read as the `+` meant (`to=`,
    /// and `since=` and `until=`, which refused it: a review).
    static func offsetPlusRestored(_ when: String) -> String {
        guard when.utf8.count > 6, when.utf8.dropLast(5).last == UInt8(ascii: " ") else { return when }
        return String(when.dropLast(6)) + "+" + String(when.suffix(5))
    }

    /// The request headers the server reads, lower-cased.
    static let readHeaders: [[UInt8]] = ["authorization", "if-match", "last-event-id", "content-length", "transfer-encoding"]
        .map { Array($0.utf8) }

    /// The query arguments each route reads. An unknown one within two edits of these is
    /// refused with a 400 naming the one meant: `?form=5` for `?from=5` would otherwise quietly
    /// return everything. Others are ignored, as HTTP clients add their own (`_=` to defeat
    /// caches, an EventSource polyfill's `lastEventId`, which a stream reads, `utm_…`).
    static let queryArguments: [String: [String]] = [
        "v1/events": ["from", "limit", "user", "kind", "id", "since", "until"],
        "v1/projections/*": ["user", "type", "from", "to", "date", "fallback"],
        "v1/replay/*": ["user", "type", "from", "to", "to_seq", "to_date", "date", "fallback"],
        "v1/subscribe/*": ["user", "type", "from", "lastEventId"],
        "v1/health": [],
        "metrics": [],
    ]

    /// What is wrong with the request's query arguments, if anything: one that is not in
    /// `accepted` but near one of them (three characters or more, at most two edits away),
    /// named with the one meant; or one of `accepted` with no value at all (`?fallback`, which
    /// read as absent would quietly answer without the stale rows asked for). Names compare
    /// ignoring ASCII case, as libmicrohttpd's lookups do.
    /// `path` names the endpoint in the message; it is made only when there is a problem.
    private func queryArgumentProblem(_ connection: OpaquePointer, accepted: [String], path: @escaping () -> String) -> String? {
        final class Found {
            var accepted: [String] = []
            var path: () -> String = { "" }
            var problem: String?
        }
        let found = Found()
        found.accepted = accepted.map { $0.lowercased() }
        found.path = path
        let context = Unmanaged.passUnretained(found).toOpaque()
        _ = mhd.getConnectionValues(connection, .GET_ARGUMENT_KIND, { context, _, key, keySize, value, _ in
            let found = Unmanaged<Found>.fromOpaque(context!).takeUnretainedValue()
            let name = String(decoding: asciiLowercased(cBytes(key, keySize)), as: UTF8.self)
            let shown = String(decoding: cBytes(key, keySize), as: UTF8.self)
            if found.accepted.contains(name) {
                guard value == nil else { return .YES }
                found.problem = name == "fallback"
                    ? "query argument '\(shown)' has no value: give fallback=true (or false)"
                    : "query argument '\(shown)' has no value: give \(shown)=…"
                return .NO
            }
            guard name.count >= 3,
                  let near = found.accepted.map({ ($0, editDistance(name, $0)) }).filter({ $0.1 <= 2 }).min(by: { $0.1 < $1.1 })
            else { return .YES }
            found.problem = "unknown query argument '\(shown)' on \(found.path()). Did you mean '\(near.0)'?"
            return .NO
        }, context)
        return found.problem
    }

    private func value(_ connection: OpaquePointer, kind: MHD_ValueKind, _ key: String) -> String? {
        let text = mhd.lookupConnectionValue(connection, kind, key).map { String(cString: $0) }
        // A header's value is what lies between its optional white space (RFC 9110 §5.5).
        return kind == .HEADER_KIND ? text.map { HTTPServer.trimmed($0) } : text
    }

    /// `text` without the spaces and tabs around it (HTTP's optional white space, RFC 9110
    /// §5.5), or with `unicodeSpaces` without every character of `CharacterSet.whitespaces`
    /// (tab and Unicode's space separators) around it: what `trimmingCharacters(in:)` gives
    /// with those sets, read on the UTF-8 bytes. Foundation's call goes through `NSString`
    /// and UTF-16, and the few header values a POST reads made it a third of the
    /// instructions libmicrohttpd's thread spent on the request (callgrind).
    static func trimmed(_ text: some StringProtocol, unicodeSpaces: Bool = false) -> String {
        var bytes = Substring(text).utf8
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes.removeFirst() }
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes.removeLast() }
        // The only ASCII characters in `.whitespaces` are the space and the tab: an end that is
        // another ASCII byte is where Foundation would stop too. A non-ASCII end may be a
        // space separator (U+00A0, U+3000, …): that rare value goes to Foundation.
        if unicodeSpaces, let first = bytes.first, let last = bytes.last, first >= 0x80 || last >= 0x80 {
            return Substring(bytes).trimmingCharacters(in: .whitespaces)
        }
        return String(Substring(bytes))
    }

    private func queue(_ response: Response, on connection: OpaquePointer) -> MHD_Result {
        let made = response.body.withUnsafeBytes { raw in
            mhd.createResponseFromBuffer(raw.count, UnsafeMutableRawPointer(mutating: raw.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let made else { return .NO }
        defer { mhd.destroyResponse(made) }
        _ = mhd.addResponseHeader(made, "Content-Type", response.contentType)
        for (name, value) in response.headers { _ = mhd.addResponseHeader(made, name, value) }
        return mhd.queueResponse(connection, UInt32(response.status), made)
    }
}

// libmicrohttpd's callbacks: plain C functions that find the server through their closure pointer.

/// The `count` bytes at `pointer` (libmicrohttpd's keys and values, which may hold NULs).
private func cBytes(_ pointer: UnsafePointer<CChar>?, _ count: Int) -> [UInt8] {
    pointer.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
}

/// `bytes` with ASCII letters in lower case: how HTTP compares header and argument names.
private func asciiLowercased(_ bytes: [UInt8]) -> [UInt8] {
    bytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
}

private let accessHandler: MHD_AccessHandlerCallback = { context, connection, url, method, version, upload, uploadSize, state in
    guard let context, let connection, let url, let method, let uploadSize, let state else { return .NO }
    let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
    return server.handle(connection: connection, url: String(cString: url), method: String(cString: method),
                         version: version.map { String(cString: $0) } ?? "",
                         upload: upload, uploadSize: uploadSize, state: state)
}

private let requestCompleted: MHD_RequestCompletedCallback = { context, connection, state, _ in
    guard let context else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
    server.completed(connection, state)
}

private let connectionNotified: MHD_NotifyConnectionCallback = { context, connection, _, code in
    guard let context, let connection else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
    server.connection(connection, started: ledger_mhd_connection_started(code) != 0)
}
