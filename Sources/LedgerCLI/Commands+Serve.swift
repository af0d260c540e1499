import Foundation
import LedgerCore
import LedgerServer
import LedgerStore

extension Commands {
    static let serveCommand = Command(
        name: "serve",
        abstract: "Serve the HTTP API: events, projections, replay, SSE subscriptions, metrics.",
        usage: "ledger serve [--db PATH] [--listen HOST:PORT] [--no-auth] [--heartbeat SECONDS] [--idle-timeout SECONDS] [--header-timeout SECONDS] [--body-timeout SECONDS] [--per-address-limit N] [--tls-cert PEM --tls-key PEM] [--audit-log PATH] [--client-named-sources]",
        discussion: """
        Prints 'listening on http://HOST:PORT' (https with --tls-cert and --tls-key) on stdout \
        once it accepts connections (port 0 picks a free one). Every request needs 'Authorization: Bearer <token>' from 'ledger \
        client add'; --no-auth is refused unless HOST is a loopback address. Stops cleanly on \
        SIGINT (exit 130; not when started with it ignored, as a script's 'ledger serve &' is) or \
        SIGTERM (exit 0): streams end, queued writes finish.
        """,
        options: [helpOption, dbOption,
                  OptionSpec(name: "listen", value: "HOST:PORT", help: "Address to listen on (default: 127.0.0.1:8080; [::1]:PORT for IPv6)."),
                  OptionSpec(name: "no-auth", value: nil, help: "Accept requests without a token (loopback addresses only, for local development)."),
                  OptionSpec(name: "heartbeat", value: "SECONDS", help: "Seconds between SSE heartbeats, 0.1 to 15 (default: 15)."),
                  OptionSpec(name: "idle-timeout", value: "SECONDS",
                             help: "Close a connection after this many seconds with no byte read or written (default: \(HTTPServer.defaultIdleTimeout); streams are not cut; a connection between requests waits at most --header-timeout)."),
                  OptionSpec(name: "header-timeout", value: "SECONDS",
                             help: "Close a connection that takes longer than this to send a request's line and headers, from its opening or its previous request's end (default: \(HTTPServer.defaultHeaderTimeout))."),
                  OptionSpec(name: "body-timeout", value: "SECONDS",
                             help: "Close a connection whose request body is not in this many seconds after its headers, plus one second per \(HTTPServer.bodyBytesPerSecond) bytes received, never more than this many seconds ahead (default: \(HTTPServer.defaultBodyTimeout))."),
                  OptionSpec(name: "per-address-limit", value: "N",
                             help: "Accept at most N connections at once from one client address; more are closed as they open (default: 0, no limit)."),
                  OptionSpec(name: "tls-cert", value: "PEM",
                             help: "Serve HTTPS with this certificate chain (PEM, the server's certificate first); needs --tls-key."),
                  OptionSpec(name: "tls-key", value: "PEM",
                             help: "The certificate's private key (PEM, not encrypted); needs --tls-cert."),
                  OptionSpec(name: "audit-log", value: "PATH",
                             help: "Append a line to PATH (- for stderr) for each POST that appended events: when, which client, which seqs."),
                  OptionSpec(name: "client-named-sources", value: nil,
                             help: "A non-admin client may append only samples whose source is named as the client (so it cannot write as a user's device).")]
    ) { arguments, context in
        let usage = arguments.usage
        let listen = arguments.value("listen") ?? "127.0.0.1:8080"
        guard let separator = listen.lastIndex(of: ":"), let port = UInt16(digits: listen[listen.index(after: separator)...]) else {
            throw CLIError.usage("'--listen' needs HOST:PORT, like 127.0.0.1:8080, got '\(listen)'", usage: usage)
        }
        var host = String(listen[..<separator])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        // A host that is no address is the argument's fault, said before the ledger is opened
        // (it was a runtime failure, exit 1: an audit).
        var address = in6_addr()
        guard host == "localhost" || inet_pton(host.contains(":") ? AF_INET6 : AF_INET, host, &address) == 1 else {
            throw CLIError.usage("'--listen' needs HOST:PORT with HOST an IPv4 or IPv6 address or localhost, like 127.0.0.1:8080 or [::1]:8080, got '\(listen)'", usage: usage)
        }
        let loopback = host == "localhost" || host == "::1" || host.hasPrefix("127.")
        if arguments.has("no-auth"), !loopback {
            throw CLIError.usage("--no-auth is allowed only on a loopback address (127.0.0.1, ::1, localhost), not '\(host)'", usage: usage)
        }
        var heartbeat: Duration = .seconds(15)
        if let text = arguments.value("heartbeat") {
            // At least a tenth of a second: 0.0000001 was taken, rounded to no wait at all, and
            // one stream got 50 KB of heartbeats a second with the server at 93 % CPU (an audit).
            guard let seconds = decimalNumber(text), seconds >= 0.1, seconds <= 15 else {
                throw CLIError.usage("'--heartbeat' needs seconds from 0.1 to 15, got '\(text)'", usage: usage)
            }
            heartbeat = .milliseconds(Int(seconds * 1000))
        }
        /// A whole number of `name` from `range`, or `default`.
        func number(_ name: String, _ range: ClosedRange<Int>, what: String, default value: Int) throws -> Int {
            guard let text = arguments.value(name) else { return value }
            guard let number = Int(digits: text), range.contains(number) else {
                throw CLIError.usage("'--\(name)' needs \(what) from \(range.lowerBound) to \(range.upperBound), got '\(text)'", usage: usage)
            }
            return number
        }
        let idleTimeout = try number("idle-timeout", 1...86_400, what: "whole seconds", default: HTTPServer.defaultIdleTimeout)
        let headerTimeout = try number("header-timeout", 1...86_400, what: "whole seconds", default: HTTPServer.defaultHeaderTimeout)
        let bodyTimeout = try number("body-timeout", 1...86_400, what: "whole seconds", default: HTTPServer.defaultBodyTimeout)
        let perAddressLimit = try number("per-address-limit", 0...HTTPServer.connectionLimit, what: "a whole number", default: 0)
        // An empty path (a script's unset variable) is a usage error, as an empty --db is.
        for option in ["tls-cert", "tls-key", "audit-log"] where arguments.value(option)?.isEmpty == true {
            throw CLIError.usage("'--\(option)' must not be empty", usage: usage)
        }
        var tls: HTTPServer.TLSFiles?
        switch (arguments.value("tls-cert"), arguments.value("tls-key")) {
        case (let certificate?, let key?): tls = HTTPServer.TLSFiles(key: key, certificate: certificate)
        case (nil, nil): break
        case (nil, _?): throw CLIError.usage("--tls-key needs --tls-cert, the certificate it belongs to", usage: usage)
        case (_?, nil): throw CLIError.usage("--tls-cert needs --tls-key, the certificate's private key", usage: usage)
        }
        // Thousands of idle streams need thousands of descriptors.
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        let log = try context.openLog(arguments, create: true)
        let server = HTTPServer(log: log, authRequired: !arguments.has("no-auth"), heartbeat: heartbeat,
                                idleTimeout: idleTimeout, headerTimeout: headerTimeout, bodyTimeout: bodyTimeout,
                                perAddressLimit: perAddressLimit, tls: tls,
                                auditLogPath: arguments.value("audit-log"), clientNamedSources: arguments.has("client-named-sources"))
        let bound: UInt16
        do {
            bound = try server.start(host: host, port: port)
        } catch let error as HTTPServer.StartError {
            throw CLIError.runtime(error.description)
        }
        catchInterrupts()
        let shown = host.contains(":") ? "[\(host)]" : host
        context.stdout.write("listening on http\(tls == nil ? "" : "s")://\(shown):\(bound)\n")
        // A server is often started with its output closed or discarded: the line is for a
        // person or a script that wants the port, and losing it does not fail the server.
        context.stdout.forgetFailure()
        for note in server.certificateNotes { context.stderr.write("note: \(note)\n") }
        if tls == nil, !loopback {
            context.stderr.write("note: plain HTTP on \(shown), not a loopback address: bearer tokens and every user's data cross the network in clear; give --tls-cert and --tls-key, or put a TLS proxy in front\n")
        }
        if !arguments.has("no-auth"), try log.clients().isEmpty {
            context.stderr.write("note: no API clients yet; create one with 'ledger client add NAME --admin'\n")
        }
        while !interrupted.load(ordering: .relaxed) {
            usleep(50_000)
        }
        server.stop()
        return terminatedBySIGTERM.load(ordering: .relaxed) ? 0 : 130
    }
}
