import Foundation
import LedgerCore
import LedgerStore
import Projections

/// Who may do what (SPEC §9.1). With `client == nil` (the server runs with `--no-auth`)
/// everything is allowed, as for an admin.
///
/// A non-admin client may read and subscribe to a user's data only for the types that user
/// granted it `read` (per the `grants` projection as it stands when the data is read, so a
/// revoke stops delivery at once), may see `grants` rows naming itself, and may append only
/// samples, for users and types that granted it `share`.
struct Access: Sendable {
    let log: EventLog
    /// `serve --client-named-sources`: a non-admin client's samples must name itself as their
    /// source, so that it cannot write as a user's device (SPEC §9.1's `share` lets it write
    /// under any source name, and so supersede a device's sync versions, since `syncId` is
    /// per user and source).
    var clientNamedSources = false

    /// What `client` may read, for one read (a page of changes, a set of rows).
    func readCheck(for client: APIClient?) -> ReadCheck { ReadCheck(log: log, client: client) }

    /// What one client may do, its grants looked up once per user for as long as the check
    /// is kept: one read (a page of changes, a set of rows) or one POSTed batch asks the log
    /// once per user, not once per row, change or event (a year of a user's rows was hundreds
    /// of read transactions). Kept for one of these only, so a revoke takes effect from the
    /// next.
    final class ReadCheck {
        let log: EventLog
        let client: APIClient?
        private var grants: [[UInt8]: (read: Set<QuantityType>, share: Set<QuantityType>)] = [:]

        init(log: EventLog, client: APIClient?) {
            self.log = log
            self.client = client
        }

        /// What `user` granted the (non-admin) client, as the `grants` projection has it now.
        func grant(user: String) -> (read: Set<QuantityType>, share: Set<QuantityType>) {
            guard let client else { return ([], []) }
            let key = Array(user.utf8)  // users are told apart by their bytes
            if let grant = grants[key] { return grant }
            let grant = (try? log.grant(user: user, client: client.name)) ?? ([], [])
            grants[key] = grant
            return grant
        }

        func mayRead(user: String, type: QuantityType) -> Bool {
            guard let client, !client.admin else { return true }
            return grant(user: user).read.contains(type)
        }

        /// For a read or subscription: nil when it may go ahead (rows are then filtered one
        /// by one), else why not. A non-admin client must name a user, and that user must
        /// have granted it `read` on the type asked for (or on some type, when none is named).
        func refusal(projection: ProjectionName, user: String?, type: QuantityType?) -> String? {
            guard let client, !client.admin, projection != .grants else { return nil }
            guard let user else { return "client '\(client.name)' is not admin: name the user (?user=…)" }
            let readable = grant(user: user).read
            if let type {
                return readable.contains(type) ? nil : "user '\(user)' has not granted client '\(client.name)' read on \(type.rawValue)"
            }
            return readable.isEmpty ? "user '\(user)' has not granted client '\(client.name)' read on any type" : nil
        }

        func mayRead(_ change: StoredChange) -> Bool {
            guard let client, !client.admin else { return true }
            guard let type = change.type else {
                // A grants row: visible to the client it names (grants changes are rare; parse it).
                guard let object = (try? JSONValue.parse(change.json))?.objectValue else { return false }
                let row = object["row"]?.objectValue ?? object["previous"]?.objectValue
                return row?["client"]?.stringValue.map { sameName($0, client.name) } ?? false
            }
            return mayRead(user: change.user, type: type)
        }

        func mayRead(_ row: Row) -> Bool {
            guard let client, !client.admin else { return true }
            if row.projection == .grants { return row.values["client"]?.stringValue.map { sameName($0, client.name) } ?? false }
            guard let user = row.values["user"]?.stringValue,
                  let type = row.values["type"]?.stringValue.flatMap(QuantityType.init(name:)) else { return false }
            return mayRead(user: user, type: type)
        }
    }

    /// Nil when allowed, else why not.
    func mayAppend(_ events: [(InputLocation, PreparedEvent)], client: APIClient?) -> (location: InputLocation, message: String)? {
        guard let client, !client.admin else { return nil }
        let check = readCheck(for: client)
        for (location, event) in events {
            guard case .sample(let sample) = event.payload else {
                return (location, "\(location): client '\(client.name)' may append only samples; \(event.payload.kind.rawValue) events need an admin client")
            }
            guard check.grant(user: sample.user).share.contains(sample.type) else {
                return (location, "\(location): user '\(sample.user)' has not granted client '\(client.name)' share on \(sample.type.rawValue)")
            }
            if clientNamedSources, !sameName(sample.source.name, client.name) {
                return (location, "\(location): client '\(client.name)' may append only samples whose source is named '\(client.name)' (this server runs with --client-named-sources), got '\(sample.source.name)'")
            }
        }
        return nil
    }
}
