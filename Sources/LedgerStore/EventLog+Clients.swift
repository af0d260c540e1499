import Foundation
import LedgerCore

/// An API client of `ledger serve` (SPEC §9.1).
public struct APIClient: Sendable, Equatable {
    public var name: String
    public var admin: Bool
    public var created: Timestamp
    /// The SHA-256 of its token: what `tokenWorks` looks up again.
    public var tokenDigest: [UInt8]
}

/// API clients live in the `clients` database, beside the log but not in it: they are
/// server configuration, not facts about activity. Only a SHA-256 digest of each token is
/// stored; the token itself is shown once, by `ledger client add`.
///
/// Keys: `n` ‖ SHA-256(name) → admin (1 byte) ‖ token digest (32) ‖ created (8) ‖ name;
/// `t` ‖ token digest → SHA-256(name).
extension EventLog {
    public enum ClientError: Error, Equatable, CustomStringConvertible {
        case exists(String)
        /// No client has these bytes as its name; `similar` is one whose name reads the same
        /// (another Unicode spelling: a precomposed "é" and "e" with a combining accent).
        case unknown(String, similar: String? = nil)
        case invalidName(String)
        /// `add` of a name that reads as an existing client's, spelled with other characters.
        case lookAlike(String, existing: String)
        /// A POST's client was removed, or its token rotated, before its batch was committed.
        case tokenGone
        /// A non-admin client's batch holds an event it may not append as of its commit (a
        /// revoke committed before it); `message` names the line and why.
        case notShared(location: InputLocation?, message: String)

        /// `name` with every character outside ASCII as its code point (`cafe\u{301}`): two
        /// spellings that read the same are told apart.
        static func spelled(_ name: String) -> String {
            name.unicodeScalars.map { $0.isASCII ? String($0) : "\\u{\(String($0.value, radix: 16, uppercase: true))}" }.joined()
        }

        public var description: String {
            switch self {
            case .tokenGone: "the token was removed or replaced before this batch was committed; nothing was written"
            case .notShared(_, let message): message
            case .exists(let name): "a client named '\(name)' already exists; 'ledger client rotate \(name)' gives it a new token"
            case .unknown(let name, let similar):
                "no client named '\(name)'" + (similar.map { " (names are told apart by their characters: '\($0)' reads the same but is spelled \(ClientError.spelled($0)), and the name given \(ClientError.spelled(name)))" } ?? "")
            case .lookAlike(let name, let existing):
                "client '\(existing)' exists, spelled \(ClientError.spelled(existing)), and '\(name)' reads the same spelled \(ClientError.spelled(name)): two such clients could not be told apart in 'client list'; choose another name"
            case .invalidName(let reason): reason
            }
        }
    }

    private func nameKey(_ name: String) -> [UInt8] { [UInt8(ascii: "n")] + Digest.sha256(Array(name.utf8)) }
    private func tokenKey(_ digest: [UInt8]) -> [UInt8] { [UInt8(ascii: "t")] + digest }

    /// A control (DEL and C1 too), a line or paragraph separator, or a format character other
    /// than the two joiners and the tag characters.
    static func isHiddenInName(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: return true
        case .format: return !(scalar.value == 0x200C || scalar.value == 0x200D || (0xE0020...0xE007F).contains(scalar.value))
        default: return false
        }
    }

    /// Creates a client and returns its token (`ldg_` and 64 hex digits), which is not stored.
    public func addClient(name: String, admin: Bool) throws -> String {
        guard !name.isEmpty, name.utf8.count <= EventDecoder.maxNameBytes,
              !name.unicodeScalars.contains(where: { $0.value < 0x20 }) else {
            throw ClientError.invalidName("a client name must be 1 byte to 1 KiB with no control characters")
        }
        // Nor characters that print as nothing or reorder the text (a review: 'ops', 'o\u{200B}ps'
        // and 'ops\u{2060}' were three rows reading 'ops' in `client list`, and U+202E turned
        // the line around). The joiners that shape a name (U+200C, U+200D: Persian, emoji
        // sequences) and tag characters (flags) are letters of it, and stay allowed.
        if let hidden = name.unicodeScalars.first(where: EventLog.isHiddenInName) {
            throw ClientError.invalidName("a client name must not hold characters that print as nothing or reorder the text: '\(visibleCharacters(name, limit: 60))' holds U+\(String(hidden.value, radix: 16, uppercase: true))")
        }
        let token = "ldg_" + Digest.randomBytes(32).hex
        let digest = Digest.sha256(Array(token.utf8))
        try environment.write { txn in
            guard try txn.get(clientsDatabase, nameKey(name)) == nil else { throw ClientError.exists(name) }
            if let similar = try lookAlike(of: name, in: txn) { throw ClientError.lookAlike(name, existing: similar) }
            let value = [admin ? 1 : 0] + digest + UInt64(bitPattern: clock().microseconds).bigEndianBytes + Array(name.utf8)
            try txn.put(clientsDatabase, nameKey(name), value)
            try txn.put(clientsDatabase, tokenKey(digest), Digest.sha256(Array(name.utf8)))
        }
        return token
    }

    /// Gives the client `name` a new token and returns it with the digest of the token it
    /// replaces (for `restoreClientToken`). The old token stops working at once, as on
    /// `removeClient` (a stream opened with it ends); the name, admin flag, creation time and
    /// grants (which name the client, not its token) stay.
    public func rotateClient(name: String) throws -> (token: String, previousDigest: [UInt8]) {
        let token = "ldg_" + Digest.randomBytes(32).hex
        let previous = try replaceTokenDigest(of: name, with: Digest.sha256(Array(token.utf8)), ifCurrent: nil)
        return (token, previous)
    }

    /// Puts back the token `rotateClient` replaced, when the new one reached no one; only if
    /// the new one is still the client's (nothing rotated or removed it since).
    public func restoreClientToken(name: String, previousDigest: [UInt8], replacing token: String) throws {
        _ = try replaceTokenDigest(of: name, with: previousDigest, ifCurrent: Digest.sha256(Array(token.utf8)))
    }

    /// Makes `digest` the client's token in one transaction and returns the one it replaced.
    private func replaceTokenDigest(of name: String, with digest: [UInt8], ifCurrent current: [UInt8]?) throws -> [UInt8] {
        try environment.write { txn in
            guard let stored = try txn.get(clientsDatabase, nameKey(name)) else { throw try unknownClient(name, in: txn) }
            var value = try checkedClient(stored)
            let previous = Array(value[1..<33])
            if let current, previous != current { return previous }  // changed since: left as it is
            value.replaceSubrange(1..<33, with: digest)
            try txn.delete(clientsDatabase, tokenKey(previous))
            try txn.put(clientsDatabase, nameKey(name), value)
            try txn.put(clientsDatabase, tokenKey(digest), Digest.sha256(Array(name.utf8)))
            return previous
        }
    }

    public func clients() throws -> [APIClient] {
        try environment.read { txn in
            var result: [APIClient] = []
            try txn.scan(clientsDatabase, from: [UInt8(ascii: "n")]) { key, value in
                guard key.first == UInt8(ascii: "n") else { return false }
                result.append(try decodeClient(Array(value)))
                return true
            }
            return result.sorted { $0.name < $1.name }
        }
    }

    /// The name of a client that reads as `name` (Swift's `==` is canonical equivalence),
    /// whether spelled as it or otherwise; nil when there is none.
    private func lookAlike(of name: String, in txn: Transaction) throws -> String? {
        var similar: String?
        try txn.scan(clientsDatabase, from: [UInt8(ascii: "n")]) { key, value in
            guard key.first == UInt8(ascii: "n") else { return false }
            let client = try decodeClient(Array(value))
            if client.name == name { similar = client.name }
            return similar == nil
        }
        return similar
    }

    /// `ClientError.unknown` for `name`, naming a client whose name reads the same if there is one.
    private func unknownClient(_ name: String, in txn: Transaction) throws -> ClientError {
        .unknown(name, similar: try lookAlike(of: name, in: txn))
    }

    /// Removes a client; its token stops working at once.
    public func removeClient(name: String) throws {
        try environment.write { txn in
            guard let value = try txn.get(clientsDatabase, nameKey(name)) else { throw try unknownClient(name, in: txn) }
            try txn.delete(clientsDatabase, tokenKey(Array(try checkedClient(value)[1..<33])))
            try txn.delete(clientsDatabase, nameKey(name))
        }
    }

    /// The client a bearer token belongs to, or nil. The token's digest is looked up, then
    /// compared in constant time.
    public func client(forToken token: String) throws -> APIClient? {
        let digest = Digest.sha256(Array(token.utf8))
        return try environment.read { txn in
            guard let nameDigest = try txn.get(clientsDatabase, tokenKey(digest)),
                  let value = try txn.get(clientsDatabase, [UInt8(ascii: "n")] + nameDigest),
                  Digest.constantTimeEqual(Array(try checkedClient(value)[1..<33]), digest) else { return nil }
            return try decodeClient(value)
        }
    }

    /// Whether the token whose SHA-256 is `digest` is still a client's, in `txn`.
    func tokenExists(_ digest: [UInt8], in txn: Transaction) throws -> Bool {
        try txn.get(clientsDatabase, tokenKey(digest)) != nil
    }

    /// Whether `client`'s token still works: false once `removeClient` has removed it (a
    /// stream opened with it then ends).
    public func tokenWorks(for client: APIClient) throws -> Bool {
        try environment.read { txn in try tokenExists(client.tokenDigest, in: txn) }
    }

    /// A client record: admin flag (1 byte), the token's SHA-256 (32), created (8), the name.
    /// Clients are not in the log, so a damaged one can only be restored from a backup.
    private func checkedClient(_ value: [UInt8]) throws -> [UInt8] {
        guard value.count >= 41 else {
            throw LedgerError.damaged(path: path, reason: "a client record in 'clients' is \(value.count) bytes, shorter than 41")
        }
        return value
    }

    private func decodeClient(_ value: [UInt8]) throws -> APIClient {
        let value = try checkedClient(value)
        let created = Int64(bitPattern: UInt64(bigEndianBytes: Array(value[33..<41])))
        return APIClient(name: String(decoding: value[41...], as: UTF8.self), admin: value[0] == 1,
                         created: Timestamp(microseconds: created), tokenDigest: Array(value[1..<33]))
    }
}
