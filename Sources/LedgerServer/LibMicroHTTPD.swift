import CMicroHTTPD
import LedgerCore

/// The libmicrohttpd functions the server calls, looked up once, when `serve` starts
/// (libmicrohttpd and GnuTLS behind it are opened with `dlopen`, not linked: see `LazyLibrary`).
/// The two variadic functions come as plain pointers, for the C shim to call.
struct LibMicroHTTPD: @unchecked Sendable {
    // @unchecked: C function pointers, immutable once looked up.
    let startDaemon: ledger_MHD_start_daemon_fn
    let getDaemonInfo: ledger_MHD_get_daemon_info_fn
    let stopDaemon: ledger_MHD_stop_daemon_fn
    let suspendConnection: ledger_MHD_suspend_connection_fn
    let resumeConnection: ledger_MHD_resume_connection_fn
    let createResponseFromCallback: ledger_MHD_create_response_from_callback_fn
    let createResponseFromBuffer: ledger_MHD_create_response_from_buffer_fn
    let destroyResponse: ledger_MHD_destroy_response_fn
    let addResponseHeader: ledger_MHD_add_response_header_fn
    let queueResponse: ledger_MHD_queue_response_fn
    let lookupConnectionValue: ledger_MHD_lookup_connection_value_fn
    let getConnectionValues: ledger_MHD_get_connection_values_n_fn
    let getConnectionInfo: ledger_MHD_get_connection_info_fn
    let isFeatureSupported: ledger_MHD_is_feature_supported_fn

    private static let loaded = Result { () throws(LazyLibrary.LoadError) in try LibMicroHTTPD() }

    static func load() throws(LazyLibrary.LoadError) -> LibMicroHTTPD { try loaded.get() }

    private init() throws(LazyLibrary.LoadError) {
        let library = try LazyLibrary("libmicrohttpd", sonames: ["libmicrohttpd.so", "libmicrohttpd.so.12"], package: "libmicrohttpd12")
        startDaemon = try library.function("MHD_start_daemon", as: ledger_MHD_start_daemon_fn.self)
        getDaemonInfo = try library.function("MHD_get_daemon_info", as: ledger_MHD_get_daemon_info_fn.self)
        stopDaemon = try library.function("MHD_stop_daemon", as: ledger_MHD_stop_daemon_fn.self)
        suspendConnection = try library.function("MHD_suspend_connection", as: ledger_MHD_suspend_connection_fn.self)
        resumeConnection = try library.function("MHD_resume_connection", as: ledger_MHD_resume_connection_fn.self)
        createResponseFromCallback = try library.function("MHD_create_response_from_callback", as: ledger_MHD_create_response_from_callback_fn.self)
        createResponseFromBuffer = try library.function("MHD_create_response_from_buffer", as: ledger_MHD_create_response_from_buffer_fn.self)
        destroyResponse = try library.function("MHD_destroy_response", as: ledger_MHD_destroy_response_fn.self)
        addResponseHeader = try library.function("MHD_add_response_header", as: ledger_MHD_add_response_header_fn.self)
        queueResponse = try library.function("MHD_queue_response", as: ledger_MHD_queue_response_fn.self)
        lookupConnectionValue = try library.function("MHD_lookup_connection_value", as: ledger_MHD_lookup_connection_value_fn.self)
        getConnectionValues = try library.function("MHD_get_connection_values_n", as: ledger_MHD_get_connection_values_n_fn.self)
        getConnectionInfo = try library.function("MHD_get_connection_info", as: ledger_MHD_get_connection_info_fn.self)
        isFeatureSupported = try library.function("MHD_is_feature_supported", as: ledger_MHD_is_feature_supported_fn.self)
    }
}

/// The GnuTLS functions that read a certificate's dates, looked up when `serve` starts HTTPS
/// (libmicrohttpd has loaded GnuTLS by then; this opens it again by name).
struct GnuTLSCertificates: @unchecked Sendable {
    // @unchecked: C function pointers, immutable once looked up.
    let initialize: ledger_gnutls_crt_init_fn
    let importPEM: ledger_gnutls_crt_import_fn
    let activation: ledger_gnutls_crt_activation_fn
    let expiration: ledger_gnutls_crt_expiration_fn
    let deinitialize: ledger_gnutls_crt_deinit_fn

    init() throws(LazyLibrary.LoadError) {
        let library = try LazyLibrary("libgnutls", sonames: ["libgnutls.so", "libgnutls.so.30"], package: "libgnutls30")
        initialize = try library.function("gnutls_x509_crt_init", as: ledger_gnutls_crt_init_fn.self)
        importPEM = try library.function("gnutls_x509_crt_import", as: ledger_gnutls_crt_import_fn.self)
        activation = try library.function("gnutls_x509_crt_get_activation_time", as: ledger_gnutls_crt_activation_fn.self)
        expiration = try library.function("gnutls_x509_crt_get_expiration_time", as: ledger_gnutls_crt_expiration_fn.self)
        deinitialize = try library.function("gnutls_x509_crt_deinit", as: ledger_gnutls_crt_deinit_fn.self)
    }

    /// The first certificate of `pem`'s validity, as seconds since 1970; nil when it does not parse.
    func validity(of pem: String) -> (notBefore: Int64, notAfter: Int64)? {
        var notBefore: Int64 = 0, notAfter: Int64 = 0
        let parsed = pem.withCString { text in
            ledger_gnutls_validity(initialize, importPEM, activation, expiration, deinitialize,
                                   text, UInt32(pem.utf8.count), &notBefore, &notAfter)
        }
        return parsed == 0 ? (notBefore, notAfter) : nil
    }
}
