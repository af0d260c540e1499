#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether two names (of users, sources, clients) are the same name: the same bytes, as the log
/// and every state key store them. Swift's `==` on strings is canonical equivalence, which
/// would make "Café" spelled with a precomposed é and with e and a combining accent one name,
/// while the log holds two.
///
/// The fold asks this for nearly every event, so native strings (small ones included) are
/// compared with one `memcmp` rather than byte by byte through `UTF8View`'s iterator; and
/// first by their two words: a name compared with itself, or with a copy of itself, has the
/// same ones (a small string holds its bytes in them, a large one its count and storage), and
/// those need neither the count nor the bytes read.
public func sameName(_ a: String, _ b: String) -> Bool {
    if unsafeBitCast(a, to: (UInt64, UInt64).self) == unsafeBitCast(b, to: (UInt64, UInt64).self) { return true }
    let (x, y) = (a.utf8, b.utf8)
    guard x.count == y.count else { return false }
    let compared: Bool?? = x.withContiguousStorageIfAvailable { p in
        y.withContiguousStorageIfAvailable { q in
            p.isEmpty || memcmp(p.baseAddress!, q.baseAddress!, p.count) == 0
        }
    }
    if case .some(.some(let result)) = compared { return result }
    return x.elementsEqual(y)
}
