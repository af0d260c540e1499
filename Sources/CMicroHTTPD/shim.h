#ifndef LEDGER_CMICROHTTPD_SHIM_H
#define LEDGER_CMICROHTTPD_SHIM_H
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <microhttpd.h>

/* MHD_start_daemon is variadic, which Swift cannot call: this fixes the options ledger uses.
 * epoll in one internal thread, suspend/resume for SSE streams and queued POSTs, an explicit
 * bind address (port 0 picks a free one), a completion callback to free per-request state,
 * and a connection limit high enough for thousands of idle subscribers. */
static inline struct MHD_Daemon *ledger_mhd_start(const struct sockaddr *address,
                                                  MHD_AccessHandlerCallback handler, void *handler_cls,
                                                  MHD_RequestCompletedCallback completed, void *completed_cls,
                                                  unsigned int connection_limit) {
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
    if (address->sa_family == AF_INET6) flags |= MHD_USE_IPv6;
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_SOCK_ADDR, address,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_END);
}

/* The port the daemon is bound to (useful after asking for port 0). */
static inline uint16_t ledger_mhd_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

static inline int ledger_mhd_yes(void) { return MHD_YES; }
static inline int ledger_mhd_no(void) { return MHD_NO; }
#endif
