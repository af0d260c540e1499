import LedgerCore

/// Names in order of first insertion, each with its position, told apart by their bytes
/// (`sameName`). A user and a day nearly always have a few sources, found fastest by a linear
/// search; past `hashedFrom` names they are hashed, so input with thousands of distinct
/// sources (an import, or a client posting one source per sample) costs a lookup per sample,
/// not a search of every name seen — which made folding such input quadratic. (`import`'s
/// counts of record types use it too.)
public struct NameIndex: Sendable {
    public private(set) var names: [String] = []
    /// By UTF-8 bytes; built once there are `hashedFrom` names.
    private var positions: [[UInt8]: Int]?

    public static let hashedFrom = 16

    public init() {}

    public init(_ names: [String]) {
        for name in names { insert(name) }
    }

    public var count: Int { names.count }

    public func position(of name: String) -> Int? {
        if let positions { return positions[Array(name.utf8)] }
        return names.firstIndex { sameName($0, name) }
    }

    /// Adds `name` unless it is there; its position either way, and whether it was added.
    @discardableResult
    public mutating func insert(_ name: String) -> (position: Int, added: Bool) {
        if let known = position(of: name) { return (known, false) }
        names.append(name)
        if positions != nil {
            positions![Array(name.utf8)] = names.count - 1
        } else if names.count >= NameIndex.hashedFrom {
            positions = Dictionary(names.enumerated().map { (Array($0.element.utf8), $0.offset) },
                                   uniquingKeysWith: { first, _ in first })
        }
        return (names.count - 1, true)
    }
}

extension NameIndex: ExpressibleByArrayLiteral {
    public init(arrayLiteral names: String...) { self.init(names) }
}

extension NameIndex: Equatable {
    public static func == (a: NameIndex, b: NameIndex) -> Bool {
        a.names.count == b.names.count && zip(a.names, b.names).allSatisfy { sameName($0, $1) }
    }
}
