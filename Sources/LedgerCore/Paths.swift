/// The folder holding `path`: what `NSString.deletingLastPathComponent` gives, which this
/// toolchain's Foundation traps on (SIGILL) for a name of one character with no `/` before
/// it ("A", ".", "A/", "é"): a review found `ledger --db A append` killed so. Trailing `/`s
/// are ignored; a name with no folder gives "", one in the root "/".
public func parentPath(_ path: String) -> String {
    var bytes = Array(path.utf8)
    while bytes.count > 1, bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
    guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return "" }
    var end = slash
    while end > 0, bytes[end - 1] == UInt8(ascii: "/") { end -= 1 }
    return end == 0 ? "/" : String(decoding: bytes[..<end], as: UTF8.self)
}
