/// Whether two names (of users, sources, clients) are the same name: the same bytes, as the log
/// and every state key store them. Swift's `==` on strings is canonical equivalence, which
/// would make "Café" spelled with a precomposed é and with e and a combining accent one name,
/// while the log holds two.
public func sameName(_ a: String, _ b: String) -> Bool {
    a.utf8.elementsEqual(b.utf8)
}
