import Foundation

/// A minimal HTTP/1.1 client over a loopback TCP socket, for tests of `ledger serve`:
/// one request per connection, chunked bodies decoded, Server-Sent Events parsed.
public struct HTTPResponse: Sendable {
    public var status: Int
    /// Header names in lower case.
    public var headers: [String: String]
    public var body: String
}

public struct HTTPClientError: Error, CustomStringConvertible {
    public var description: String
}

/// A connected socket with a read buffer.
final class Connection {
    let fd: Int32
    var buffer: [UInt8] = []

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HTTPClientError(description: "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            // Not closed here: a class whose initializer throws once every property is set is
            // deinitialised, and `deinit` closes it. Closing it here too closed the number a
            // second time, by then often another test's new pipe: a child spawned meanwhile got
            // one pipe as both stdin and stdout, and waited for input forever.
            throw HTTPClientError(description: "connect to port \(port): \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { Foundation.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw HTTPClientError(description: "send: \(String(cString: strerror(errno)))") }
            offset += sent
        }
    }

    /// Reads more bytes into the buffer; false at end of stream; throws on timeout.
    func fill(timeout: Double) throws -> Bool {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, Int32(timeout * 1000))
        guard ready > 0 else { throw HTTPClientError(description: "timed out after \(timeout) s waiting for the server") }
        let before = buffer.count
        buffer.reserveCapacity(before + 65_536)
        // Receive straight into the buffer's spare capacity: no scratch array, no zeroing.
        var count = 0
        buffer.append(contentsOf: [UInt8](unsafeUninitializedCapacity: 65_536) { raw, initialized in
            count = recv(fd, raw.baseAddress, raw.count, 0)
            initialized = max(count, 0)
        })
        return count > 0
    }

    /// The next CRLF-terminated line, without the CRLF.
    func line(timeout: Double) throws -> String? {
        while true {
            if let index = buffer.firstIndex(of: 0x0A) {
                var line = Array(buffer[..<index])
                buffer.removeFirst(index + 1)
                if line.last == 0x0D { line.removeLast() }
                return String(decoding: line, as: UTF8.self)
            }
            guard try fill(timeout: timeout) else { return nil }
        }
    }

    func bytes(_ count: Int, timeout: Double) throws -> [UInt8] {
        while buffer.count < count {
            guard try fill(timeout: timeout) else { throw HTTPClientError(description: "connection closed mid-body") }
        }
        let result = Array(buffer[..<count])
        buffer.removeFirst(count)
        return result
    }

    /// Status line and headers.
    func head(timeout: Double) throws -> (Int, [String: String]) {
        guard let status = try line(timeout: timeout) else { throw HTTPClientError(description: "no response") }
        let parts = status.split(separator: " ")
        guard parts.count >= 2, let code = Int(parts[1]) else { throw HTTPClientError(description: "bad status line '\(status)'") }
        var headers: [String: String] = [:]
        while let header = try line(timeout: timeout), !header.isEmpty {
            guard let colon = header.firstIndex(of: ":") else { continue }
            headers[header[..<colon].lowercased()] = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (code, headers)
    }
}

func requestBytes(_ method: String, path: String, headers: [String: String], body: [UInt8],
                  keepAlive: Bool = false) -> [UInt8] {
    var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n" + (keepAlive ? "" : "Connection: close\r\n")
    for (name, value) in headers { text += "\(name): \(value)\r\n" }
    if !body.isEmpty || method == "POST" { text += "Content-Length: \(body.count)\r\n" }
    text += "\r\n"
    return Array(text.utf8) + body
}

/// One request; the whole response.
public func http(_ method: String, port: UInt16, path: String, headers: [String: String] = [:],
                 body: [UInt8] = [], timeout: Double = 30) throws -> HTTPResponse {
    try http(raw: requestBytes(method, path: path, headers: headers, body: body), port: port, timeout: timeout)
}

/// One request sent exactly as `raw` (for requests `http` cannot build: repeated headers, a
/// NUL in the target); the whole response.
public func http(raw: [UInt8], port: UInt16, timeout: Double = 30) throws -> HTTPResponse {
    let connection = try Connection(port: port)
    try connection.send(raw)
    let (status, responseHeaders) = try connection.head(timeout: timeout)
    var body: [UInt8] = []
    if raw.starts(with: Array("HEAD ".utf8)) {
        // A response to HEAD has no body, whatever its Content-Length says.
    } else if responseHeaders["transfer-encoding"]?.lowercased() == "chunked" {
        while let sizeLine = try connection.line(timeout: timeout), let size = Int(sizeLine.split(separator: ";")[0], radix: 16), size > 0 {
            body += try connection.bytes(size, timeout: timeout)
            _ = try connection.line(timeout: timeout)
        }
    } else if let length = responseHeaders["content-length"].flatMap({ Int($0) }) {
        body = try connection.bytes(length, timeout: timeout)
    } else {
        while try connection.fill(timeout: timeout) {}
        body = connection.buffer
    }
    return HTTPResponse(status: status, headers: responseHeaders, body: String(decoding: body, as: UTF8.self))
}

/// A persistent HTTP/1.1 connection (keep-alive), as an ordinary HTTP client library keeps
/// one: requests go one after another on the same socket. Responses must carry Content-Length.
public final class KeepAliveConnection {
    private let connection: Connection

    public init(port: UInt16) throws { connection = try Connection(port: port) }

    /// Sends raw bytes (a request cut short, say).
    public func send(_ bytes: [UInt8]) throws { try connection.send(bytes) }

    /// The next line the server sends (without its CRLF), or nil when it closed the connection:
    /// an interim `HTTP/1.1 100 Continue`, say.
    public func readLine(timeout: Double = 10) throws -> String? { try connection.line(timeout: timeout) }

    /// Whether the server closes the connection within `timeout` seconds (reading and
    /// dropping whatever it sends first).
    public func waitForClose(timeout: Double) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            do {
                guard try connection.fill(timeout: max(0.01, deadline.timeIntervalSinceNow)) else { return true }
            } catch is HTTPClientError {
                return false
            }
        }
        return false
    }

    public func request(_ method: String, path: String, headers: [String: String] = [:], body: [UInt8] = [],
                        timeout: Double = 30) throws -> HTTPResponse {
        try connection.send(requestBytes(method, path: path, headers: headers, body: body, keepAlive: true))
        let (status, responseHeaders) = try connection.head(timeout: timeout)
        guard let length = responseHeaders["content-length"].flatMap({ Int($0) }) else {
            throw HTTPClientError(description: "a keep-alive response needs Content-Length")
        }
        let body = try connection.bytes(length, timeout: timeout)
        return HTTPResponse(status: status, headers: responseHeaders, body: String(decoding: body, as: UTF8.self))
    }
}

/// One Server-Sent Event, or a comment line (`: heartbeat 12`).
public struct SSEEvent: Sendable, Equatable {
    public var id: String?
    public var event: String?
    public var data: [String] = []
    public var comment: String?
}

/// A streaming `GET` whose body is read as Server-Sent Events.
public final class SSEStream {
    private let connection: Connection
    public let status: Int
    public let headers: [String: String]
    private var decoded: [UInt8] = []
    private let chunked: Bool

    public init(port: UInt16, path: String, headers: [String: String] = [:], timeout: Double = 30) throws {
        connection = try Connection(port: port)
        try connection.send(requestBytes("GET", path: path, headers: headers, body: []))
        (status, self.headers) = try connection.head(timeout: timeout)
        chunked = self.headers["transfer-encoding"]?.lowercased() == "chunked"
    }

    /// Decodes what chunked transfer encoding has delivered so far into `decoded`.
    private func pump(timeout: Double) throws -> Bool {
        guard chunked else {
            guard try connection.fill(timeout: timeout) else { return false }
            decoded += connection.buffer
            connection.buffer.removeAll()
            return true
        }
        guard let sizeLine = try connection.line(timeout: timeout), let size = Int(sizeLine.split(separator: ";")[0], radix: 16) else { return false }
        if size == 0 { return false }
        decoded += try connection.bytes(size, timeout: timeout)
        _ = try connection.line(timeout: timeout)
        return true
    }

    private func line(timeout: Double) throws -> String? {
        while true {
            if let index = decoded.firstIndex(of: 0x0A) {
                let line = String(decoding: decoded[..<index], as: UTF8.self)
                decoded.removeFirst(index + 1)
                return line
            }
            guard try pump(timeout: timeout) else { return nil }
        }
    }

    /// The next event or comment; nil when the stream ended; throws on timeout.
    public func next(timeout: Double = 10) throws -> SSEEvent? {
        var event = SSEEvent()
        var started = false
        while let line = try line(timeout: timeout) {
            if line.isEmpty {
                if started { return event }
                continue
            }
            started = true
            if line.hasPrefix(":") {
                event.comment = line.dropFirst().trimmingCharacters(in: .whitespaces)
            } else if line.hasPrefix("id: ") {
                event.id = String(line.dropFirst(4))
            } else if line.hasPrefix("event: ") {
                event.event = String(line.dropFirst(7))
            } else if line.hasPrefix("data: ") {
                event.data.append(String(line.dropFirst(6)))
            }
        }
        return started ? event : nil
    }

    /// The next event that is not a comment, within `timeout` seconds in all (heartbeats do
    /// not extend it).
    public func nextChange(timeout: Double = 10) throws -> SSEEvent? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw HTTPClientError(description: "no change within \(timeout) s") }
            guard let event = try next(timeout: left) else { return nil }
            if event.comment == nil { return event }
        }
    }
}

/// `ledger serve` running as a child process on a free loopback port.
public final class ServerProcess {
    public let process = Process()
    public let port: UInt16
    private let output = Pipe()

    public init(binary: String, db: String, heartbeat: Int = 1, arguments: [String] = []) throws {
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve", "--db", db, "--listen", "127.0.0.1:0", "--heartbeat", "\(heartbeat)"] + arguments
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line: [UInt8] = []
        let handle = output.fileHandleForReading
        while true {
            let byte = handle.readData(ofLength: 1)
            guard let first = byte.first else { throw HTTPClientError(description: "the server exited before listening") }
            if first == 0x0A { break }
            line.append(first)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard let port = text.split(separator: ":").last.flatMap({ UInt16($0) }) else {
            throw HTTPClientError(description: "unexpected first line '\(text)'")
        }
        self.port = port
    }

    /// Sends `signal` and waits for the exit status.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM) -> Int32 {
        if process.isRunning { kill(process.processIdentifier, signal) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
