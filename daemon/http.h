/*
 * The REST server: libmicrohttpd driven from the daemon's libevent loop.
 *
 * MHD runs with no thread of its own (MHD_USE_EPOLL, external select): its
 * epoll fd is one libevent read event that calls MHD_run(), and a libevent
 * timer follows MHD_get_timeout(). Connections can be suspended and resumed
 * (api_suspend/api_resume). Loop thread only.
 */
#ifndef OFCD_HTTP_H
#define OFCD_HTTP_H

#include <stddef.h>

struct ofcd;
struct http_server;

/**
 * Binds [http] listen and starts serving on d->base. Returns 0 or -errno with
 * a message in err. The server is owned by the caller (http_destroy).
 */
int http_start(struct ofcd *d, struct http_server **out, char *err, size_t errlen);

/** Stops accepting new connections (the listening socket is closed). */
void http_quiesce(struct http_server *h);

/** Number of requests received and not yet answered and sent. */
size_t http_inflight(const struct http_server *h);

/**
 * Ends every suspended request early (their on_abort runs with
 * conn_closed = false), for shutdown.
 */
void http_abort_suspended(struct http_server *h);

struct api_req;
struct http_stream;

/** Called once when a stream's client is gone or the server ends it. */
typedef void (*http_stream_close_fn)(void *arg);

/**
 * Answers req with a response that never ends by itself (200, chunked, of the
 * given content type, e.g. text/event-stream): data is sent as it is written.
 * The stream is owned by http.c; on_close(arg) runs once when it is over, after
 * which the pointer is invalid. Returns NULL on allocation failure (then req
 * carries a 500).
 */
struct http_stream *http_stream_start(struct api_req *req, const char *content_type,
                                      http_stream_close_fn on_close, void *arg);

/**
 * Queues data on the stream. A client that lets more than 1 MiB pile up is too
 * slow: its stream is ended and -ENOBUFS returned. Returns 0 otherwise.
 */
int http_stream_write(struct http_stream *s, const char *data, size_t len);

/** Ends a stream once its queued data is sent. */
void http_stream_end(struct http_stream *s);

/** Ends every stream (shutdown). */
void http_end_streams(struct http_server *h);

/** Stops the server, closing every connection. NULL is fine. */
void http_destroy(struct http_server *h);

/** The port actually bound (useful with port 0). */
unsigned http_port(const struct http_server *h);

#endif
