internal import CLibXML2
import CZip
import LedgerCore

/// A library the importer opens on first use: its functions, looked up once.
protocol ImportLibrary {
    static var loaded: Result<Self, LazyLibrary.LoadError> { get }
}

extension ImportLibrary {
    /// The functions, or why the library cannot be used (said as an import error for `path`).
    static func load(for path: String) throws(ImportError) -> Self {
        do { return try loaded.get() } catch { throw ImportError.cannotOpen(path: path, reason: error.description) }
    }
}

/// The libxml2 functions the export reader calls, looked up once, on the first import
/// (libxml2 is opened with `dlopen`, not linked: see `LazyLibrary`).
struct LibXML2: ImportLibrary, @unchecked Sendable {
    // @unchecked: C function pointers, immutable once looked up.
    let createPushParserCtxt: ledger_xmlCreatePushParserCtxt_fn
    let ctxtUseOptions: ledger_xmlCtxtUseOptions_fn
    let parseChunk: ledger_xmlParseChunk_fn
    let ctxtGetLastError: ledger_xmlCtxtGetLastError_fn
    let getLastError: ledger_xmlGetLastError_fn
    let freeDoc: ledger_xmlFreeDoc_fn
    let freeParserCtxt: ledger_xmlFreeParserCtxt_fn
    let setGenericErrorFunc: ledger_xmlSetGenericErrorFunc_fn
    let stopParser: ledger_xmlStopParser_fn

    static let loaded = Result { () throws(LazyLibrary.LoadError) in try LibXML2() }

    private init() throws(LazyLibrary.LoadError) {
        let library = try LazyLibrary("libxml2", sonames: ["libxml2.so", "libxml2.so.2", "libxml2.so.16"], package: "libxml2")
        createPushParserCtxt = try library.function("xmlCreatePushParserCtxt", as: ledger_xmlCreatePushParserCtxt_fn.self)
        ctxtUseOptions = try library.function("xmlCtxtUseOptions", as: ledger_xmlCtxtUseOptions_fn.self)
        parseChunk = try library.function("xmlParseChunk", as: ledger_xmlParseChunk_fn.self)
        ctxtGetLastError = try library.function("xmlCtxtGetLastError", as: ledger_xmlCtxtGetLastError_fn.self)
        getLastError = try library.function("xmlGetLastError", as: ledger_xmlGetLastError_fn.self)
        freeDoc = try library.function("xmlFreeDoc", as: ledger_xmlFreeDoc_fn.self)
        freeParserCtxt = try library.function("xmlFreeParserCtxt", as: ledger_xmlFreeParserCtxt_fn.self)
        setGenericErrorFunc = try library.function("xmlSetGenericErrorFunc", as: ledger_xmlSetGenericErrorFunc_fn.self)
        stopParser = try library.function("xmlStopParser", as: ledger_xmlStopParser_fn.self)
    }
}

/// The libzip functions the export stream calls, looked up once, on the first zip import.
struct LibZip: ImportLibrary, @unchecked Sendable {
    // @unchecked: C function pointers, immutable once looked up.
    let open: ledger_zip_open_fn
    let fdopen: ledger_zip_fdopen_fn
    let getNumEntries: ledger_zip_get_num_entries_fn
    let getName: ledger_zip_get_name_fn
    let statInit: ledger_zip_stat_init_fn
    let statIndex: ledger_zip_stat_index_fn
    let fopenIndex: ledger_zip_fopen_index_fn
    let fread: ledger_zip_fread_fn
    let fclose: ledger_zip_fclose_fn
    let close: ledger_zip_close_fn
    let fileError: ledger_zip_file_strerror_fn
    let errorInit: ledger_zip_error_init_with_code_fn
    let errorText: ledger_zip_error_strerror_fn
    let errorFini: ledger_zip_error_fini_fn

    /// libzip's text for an error code `zip_open` gave ("Not a zip archive", "Premature end of
    /// file"): its number alone told the user nothing.
    func describe(_ code: Int32) -> String {
        var error = zip_error_t()
        errorInit(&error, code)
        defer { errorFini(&error) }
        return errorText(&error).map { String(cString: $0) } ?? "libzip error \(code)"
    }

    static let loaded = Result { () throws(LazyLibrary.LoadError) in try LibZip() }

    private init() throws(LazyLibrary.LoadError) {
        let library = try LazyLibrary("libzip", sonames: ["libzip.so", "libzip.so.5", "libzip.so.4"], package: "libzip4 (libzip5 on Debian 13)")
        open = try library.function("zip_open", as: ledger_zip_open_fn.self)
        fdopen = try library.function("zip_fdopen", as: ledger_zip_fdopen_fn.self)
        getNumEntries = try library.function("zip_get_num_entries", as: ledger_zip_get_num_entries_fn.self)
        getName = try library.function("zip_get_name", as: ledger_zip_get_name_fn.self)
        statInit = try library.function("zip_stat_init", as: ledger_zip_stat_init_fn.self)
        statIndex = try library.function("zip_stat_index", as: ledger_zip_stat_index_fn.self)
        fopenIndex = try library.function("zip_fopen_index", as: ledger_zip_fopen_index_fn.self)
        fread = try library.function("zip_fread", as: ledger_zip_fread_fn.self)
        fclose = try library.function("zip_fclose", as: ledger_zip_fclose_fn.self)
        close = try library.function("zip_close", as: ledger_zip_close_fn.self)
        fileError = try library.function("zip_file_strerror", as: ledger_zip_file_strerror_fn.self)
        errorInit = try library.function("zip_error_init_with_code", as: ledger_zip_error_init_with_code_fn.self)
        errorText = try library.function("zip_error_strerror", as: ledger_zip_error_strerror_fn.self)
        errorFini = try library.function("zip_error_fini", as: ledger_zip_error_fini_fn.self)
    }
}
