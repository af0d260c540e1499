// Near-miss suggestions for names people type: options, commands, query arguments.

/// ` Did you mean '--from'?` when a candidate is within a small edit distance, else "".
public func suggestion(for word: String, among candidates: [String]) -> String {
    // Case is no distance: `--FORMAT` is `--format` typed with caps lock on.
    let scored = candidates.map { ($0, editDistance(word.lowercased(), $0.lowercased())) }.filter { $0.1 <= max(2, word.count / 3) }
    guard let best = scored.min(by: { $0.1 < $1.1 }) else { return "" }
    return ". Did you mean '\(best.0)'?"
}

/// Levenshtein distance.
public func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}
