import Foundation
@testable import LedgerServer
import Testing

/// `HTTPServer.trimmed` reads header values on their UTF-8 bytes in place of Foundation's
/// `trimmingCharacters(in:)`: it must trim exactly what that call trims.
@Suite("header values")
struct HeaderValueTests {
    static let samples: [String] = [
        "", " ", "\t", " \t ", "Bearer abc", "  Bearer abc  ", "\tabc\t", "a b", " a\tb ", "12", " 12 ",
        "\u{A0}12\u{A0}", " \u{A0} 12 \u{3000}", "\u{2003}x", "x\u{2003}", "é", " é ", "\u{301}x ", " x\u{301}",
        "\u{200B}x\u{200B}", "\r12\r", "\n12\n", "\u{85}12", "\u{1680}12\u{202F}", "\u{FEFF}12", "x\u{0}", " 😀 ",
        "\u{205F}\u{3000}", "\t \u{A0}\t",
    ]

    @Test("optional white space: spaces and tabs, as trimmingCharacters(in: \" \\t\")", arguments: samples)
    func optionalWhiteSpace(text: String) {
        let expected = text.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
        #expect(HTTPServer.trimmed(text) == expected)
        #expect(HTTPServer.trimmed(Substring(text)) == expected)
    }

    @Test("Unicode spaces too, as trimmingCharacters(in: .whitespaces)", arguments: samples)
    func unicodeSpaces(text: String) {
        #expect(HTTPServer.trimmed(text, unicodeSpaces: true) == text.trimmingCharacters(in: .whitespaces))
    }
}
