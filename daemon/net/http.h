/*
 * The REST server: libmicrohttpd driven from the daemon's libevent loop.
 *
 * MHD runs with no thread of its own (MHD_USE_EPOLL, external select): its
 * epoll fd is one libevent read event that calls MHD_run(), and a libevent
 * timer follows MHD_get_timeout(). Connections can be suspended and resumed
 * (api_suspend/api_resume). It is the transport only: requests are parsed,
 * authenticated and handed to api_dispatch(), which decides the unit of work;
 * this file knows neither the store nor the reconciler. Loop thread only.
 */
#ifndef OFCD_HTTP_H
#define OFCD_HTTP_H

#include <stdbool.h>
#include <stddef.h>

struct api_env;
struct http_server;

/**
 * Binds [http] listen of env->cfg (probes_only: [http] admin_listen, plain
 * HTTP, its own few connections, only the routes that need no token) and
 * starts serving on env->base, handing every parsed request to
 * api_dispatch() with env (borrowed: it must outlive the server). Returns 0 or
 * -errno with a message in err. The server is owned by the caller
 * (http_destroy).
 */
int http_start(struct api_env *env, bool probes_only, struct http_server **out, char *err,
               size_t errlen);

/** Stops accepting new connections (the listening socket is closed). */
void http_quiesce(struct http_server *h);

/** Number of requests received and not yet answered and sent. */
size_t http_inflight(const struct http_server *h);

/**
 * Ends every suspended request early (their on_abort runs with
 * conn_closed = false), for shutdown; a cluster write whose change the log
 * has in hand (api_req.replicating), and a request whose body is still being
 * parsed (refused 503), only when replicating_too is set: the drain lets them
 * end on their own.
 */
void http_abort_suspended(struct http_server *h, bool replicating_too);

/** Ends every stream (shutdown). */
void http_end_streams(struct http_server *h);

/** Stops the server, closing every connection. NULL is fine. */
void http_destroy(struct http_server *h);

/** The port actually bound (useful with port 0). */
unsigned http_port(const struct http_server *h);

#endif
