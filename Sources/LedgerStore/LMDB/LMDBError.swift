import CLMDB
import Foundation

/// A non-zero LMDB (or errno) return code, with the call that returned it.
///
/// Catch a particular code with a pattern: `catch LMDBError.mapFull { … }`.
public struct LMDBError: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: Int32
    /// The C function that failed, e.g. `mdb_txn_commit`.
    public let call: String

    public init(code: Int32, call: String) {
        self.code = code
        self.call = call
    }

    public static let notFound = LMDBError(code: MDB_NOTFOUND, call: "")
    public static let keyExists = LMDBError(code: MDB_KEYEXIST, call: "")
    public static let mapFull = LMDBError(code: MDB_MAP_FULL, call: "")
    public static let mapResized = LMDBError(code: MDB_MAP_RESIZED, call: "")
    public static let readersFull = LMDBError(code: MDB_READERS_FULL, call: "")
    public static let diskFull = LMDBError(code: ENOSPC, call: "")

    /// Matches on the code alone, so `LMDBError.mapFull` matches whichever call returned it.
    public static func ~= (pattern: LMDBError, error: any Error) -> Bool {
        (error as? LMDBError)?.code == pattern.code
    }

    public static func == (lhs: LMDBError, rhs: LMDBError) -> Bool { lhs.code == rhs.code }

    /// LMDB's own message for the code (`mdb_strerror`, which also covers errno values).
    public var message: String { String(cString: mdb_strerror(code)) }

    public var description: String { "\(call) failed: \(message)" }
}

/// The one checked path from an LMDB return code to a thrown error.
@inline(__always)
func check(_ code: Int32, _ call: @autoclosure () -> String) throws {
    if code != 0 { throw LMDBError(code: code, call: call()) }
}
