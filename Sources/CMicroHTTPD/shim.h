#ifndef LEDGER_CMICROHTTPD_SHIM_H
#define LEDGER_CMICROHTTPD_SHIM_H
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <microhttpd.h>
#include <gnutls/x509.h>

/* libmicrohttpd (and GnuTLS behind it) is not linked: `serve` opens it with dlopen
 * (LazyLibrary), so that every other command starts without it. These are the types of the
 * functions it looks up, from libmicrohttpd's own declarations. */
typedef __typeof__(&MHD_start_daemon) ledger_MHD_start_daemon_fn;
typedef __typeof__(&MHD_get_daemon_info) ledger_MHD_get_daemon_info_fn;
typedef __typeof__(&MHD_stop_daemon) ledger_MHD_stop_daemon_fn;
typedef __typeof__(&MHD_suspend_connection) ledger_MHD_suspend_connection_fn;
typedef __typeof__(&MHD_resume_connection) ledger_MHD_resume_connection_fn;
typedef __typeof__(&MHD_create_response_from_callback) ledger_MHD_create_response_from_callback_fn;
typedef __typeof__(&MHD_create_response_from_buffer) ledger_MHD_create_response_from_buffer_fn;
typedef __typeof__(&MHD_destroy_response) ledger_MHD_destroy_response_fn;
typedef __typeof__(&MHD_add_response_header) ledger_MHD_add_response_header_fn;
typedef __typeof__(&MHD_queue_response) ledger_MHD_queue_response_fn;
typedef __typeof__(&MHD_lookup_connection_value) ledger_MHD_lookup_connection_value_fn;
typedef __typeof__(&MHD_get_connection_values_n) ledger_MHD_get_connection_values_n_fn;
typedef __typeof__(&MHD_get_connection_info) ledger_MHD_get_connection_info_fn;
typedef __typeof__(&MHD_is_feature_supported) ledger_MHD_is_feature_supported_fn;

/* GnuTLS (loaded with libmicrohttpd, and opened again by name for these): the validity of the
 * server's certificate, said at start. */
typedef __typeof__(&gnutls_x509_crt_init) ledger_gnutls_crt_init_fn;
typedef __typeof__(&gnutls_x509_crt_import) ledger_gnutls_crt_import_fn;
typedef __typeof__(&gnutls_x509_crt_get_activation_time) ledger_gnutls_crt_activation_fn;
typedef __typeof__(&gnutls_x509_crt_get_expiration_time) ledger_gnutls_crt_expiration_fn;
typedef __typeof__(&gnutls_x509_crt_deinit) ledger_gnutls_crt_deinit_fn;

/* The first certificate of `pem`: its notBefore and notAfter (seconds since 1970). 0, or -1
 * when it does not parse. */
static inline int ledger_gnutls_validity(ledger_gnutls_crt_init_fn init, ledger_gnutls_crt_import_fn import,
                                         ledger_gnutls_crt_activation_fn activation,
                                         ledger_gnutls_crt_expiration_fn expiration,
                                         ledger_gnutls_crt_deinit_fn deinit,
                                         const char *pem, unsigned int size,
                                         long long *not_before, long long *not_after) {
    gnutls_x509_crt_t certificate;
    if (init(&certificate) < 0) return -1;
    gnutls_datum_t datum = {(unsigned char *)pem, size};
    int result = import(certificate, &datum, GNUTLS_X509_FMT_PEM);
    if (result >= 0) {
        *not_before = (long long)activation(certificate);
        *not_after = (long long)expiration(certificate);
    }
    deinit(certificate);
    return result < 0 ? -1 : 0;
}

static inline int ledger_mhd_supports_tls(ledger_MHD_is_feature_supported_fn supported) {
    return supported(MHD_FEATURE_TLS) == MHD_YES;
}

/* MHD_start_daemon is variadic, which Swift cannot call: this fixes the options ledger uses.
 * epoll in one internal thread, suspend/resume for SSE streams and queued POSTs, an explicit
 * bind address (port 0 picks a free one), a completion callback to free per-request state,
 * a callback told of each connection's opening and closing (before its socket is closed),
 * a connection limit high enough for thousands of idle subscribers, a limit per client
 * address (0: none; libmicrohttpd closes a connection past it as soon as it is accepted), and
 * an idle timeout (seconds without a byte read or written; suspended connections, such as
 * streams waiting for a change, never time out); with a key and certificate, HTTPS. */
/* GnuTLS's choice of protocols and ciphers for HTTPS: TLS 1.2 and 1.3 only (RFC 8996
 * deprecates 1.0 and 1.1), no static RSA key exchange (no forward secrecy), and AEAD ciphers
 * only (no CBC with HMAC), as Mozilla's "intermediate" profile, in the server's order. Finite
 * field DHE is left out too, which Mozilla keeps for old clients: ECDHE serves every client
 * this API has. */
static const char ledger_tls_priorities[] =
    "SECURE128:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-RSA:-DHE-RSA:-SHA1:-SHA256:-SHA384"
    ":-AES-128-CBC:-AES-256-CBC:-CAMELLIA-128-CBC:-CAMELLIA-256-CBC:%SERVER_PRECEDENCE";

/* libmicrohttpd's messages (why a start failed: "Failed to bind to port 0: Address already in
 * use", "Failed to setup x509 certificate/key pair: …" then "Failed to initialize TLS support."),
 * kept by `ledger_mhd_logger` for the caller to show, each after the one before, as many as
 * fit. Written on whichever thread libmicrohttpd logs from; read only after a start failed,
 * when no other thread has it. */
struct ledger_mhd_log { char text[1024]; };

static void ledger_mhd_logger(void *cls, const char *format, va_list arguments) {
    struct ledger_mhd_log *log = cls;
    size_t used = strnlen(log->text, sizeof log->text - 1);
    if (used > 0 && used + 2 < sizeof log->text) {
        log->text[used++] = ' ';
    }
    if (used + 1 < sizeof log->text) vsnprintf(log->text + used, sizeof log->text - used, format, arguments);
}

static inline struct MHD_Daemon *ledger_mhd_start(ledger_MHD_start_daemon_fn start_daemon,
                                                  const struct sockaddr *address,
                                                  MHD_AccessHandlerCallback handler, void *handler_cls,
                                                  MHD_RequestCompletedCallback completed, void *completed_cls,
                                                  MHD_NotifyConnectionCallback connections, void *connections_cls,
                                                  unsigned int connection_limit, unsigned int per_address_limit,
                                                  unsigned int idle_timeout,
                                                  const char *tls_key, const char *tls_cert,
                                                  struct ledger_mhd_log *log) {
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (address->sa_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_OptionItem options[12];
    unsigned int n = 0;
    options[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)ledger_mhd_logger, log};
    options[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, (void *)address};
    options[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, completed_cls};
    options[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)connections, connections_cls};
    options[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, connection_limit, NULL};
    options[n++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_address_limit, NULL};
    options[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, idle_timeout, NULL};
    if (tls_key && tls_cert) {
        /* HTTPS with GnuTLS: the key and certificate chain in PEM, in memory. */
        flags |= MHD_USE_TLS;
        options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)tls_key};
        options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)tls_cert};
        options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)ledger_tls_priorities};
    }
    options[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    return start_daemon(flags, 0, NULL, NULL, handler, handler_cls,
                        MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

/* The connection's socket, or -1. */
static inline int ledger_mhd_connection_socket(ledger_MHD_get_connection_info_fn get_connection_info,
                                               struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

static inline int ledger_mhd_connection_started(enum MHD_ConnectionNotificationCode code) {
    return code == MHD_CONNECTION_NOTIFY_STARTED;
}

/* The port the daemon is bound to (useful after asking for port 0). */
static inline uint16_t ledger_mhd_port(ledger_MHD_get_daemon_info_fn get_daemon_info, struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

static inline int ledger_mhd_yes(void) { return MHD_YES; }
static inline int ledger_mhd_no(void) { return MHD_NO; }
#endif
