#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "base/config.h"
#include "log.h"
#include "base/metrics.h"
#include "body_parse.h"
#include "monotonic.h"

#define HTTP_MAX_PATH 1024
/* Connections beyond [http] max_connections that only health probes and scrapes may use. */
#define HTTP_PROBE_RESERVE 8

struct http_server {
	struct api_env *env;
	const struct ofcd_config *cfg;
	bool quiesced;    /* stopping: every reply closes its connection */
	bool probes_only; /* [http] admin_listen: only the routes that need no token */
	struct MHD_Daemon *mhd;
	int listen_fd;
	unsigned port;
	struct event *ev_epoll; /* MHD's epoll fd is readable */
	struct event *ev_timer; /* follows MHD_get_timeout() */
	size_t inflight;
	unsigned open; /* connections open now */
	/* MHD_run must run again at once, whatever MHD's timeout says (see run_soon()). */
	bool run_again;
	struct http_req *suspended;  /* doubly linked list of suspended requests */
	struct body_parser *parser;  /* large bodies' (NULL: all parsed on the loop) */
	struct http_stream *streams; /* doubly linked list of open streams */
	struct http_conn *conns;     /* doubly linked list of open connections */
	size_t streams_queued;       /* bytes queued for all streams */
	struct event *ev_deadline;   /* every second: cut clients past their deadline */
	char *tls_cert, *tls_key;    /* PEM text read at start; MHD uses it while it runs */
};

#define STREAM_MAX_QUEUED (1024 * 1024)
/* Queued for all streams together: 64 stalled clients, not 1,024, reach it. */
#define STREAMS_MAX_QUEUED (64u * 1024 * 1024)
/* A stream's buffer above this is given back once drained. */
#define STREAM_KEEP_BUFFER (64 * 1024)

/*
 * One TCP connection, so the daemon notices a client that went away (its FIN
 * is an EV_CLOSED event) where MHD would wait for a timeout: MHD reads a
 * socket once per readiness edge, and misses a FIN that came with data.
 */
struct http_conn {
	struct http_server *h;
	struct MHD_Connection *conn;
	struct event *ev_closed;    /* the peer closed its side */
	struct http_req *req;       /* request in progress, or NULL */
	struct http_stream *stream; /* stream being sent, or NULL */
	int fd;                     /* its socket, -1 if unknown */
	/* What it is receiving, since when, and the header's deadline (see on_deadline_tick()). */
	enum { CONN_HEADER, CONN_BODY, CONN_OTHER } phase;
	struct timespec since;
	unsigned header_limit_s;
	size_t body_bytes; /* received in CONN_BODY */
	struct http_conn *next, *prev;
};

struct http_stream {
	struct api_stream api; /* first: what handlers hold */
	struct http_server *h;
	struct http_conn *c; /* its connection while both live */
	struct MHD_Connection *conn;
	const char *content_type;
	char *buf; /* queued bytes not yet handed to MHD */
	size_t len, cap;
	bool suspended; /* no data: the connection waits for a write */
	bool ending;    /* send what is queued, then end */
	api_stream_close_fn on_close;
	void *arg;
	struct http_stream *next, *prev;
};

enum req_state {
	REQ_RECEIVING, /* reading the body */
	REQ_PARSING,   /* its body is with the parser (r->parsing) */
	REQ_SUSPENDED, /* handler holds it */
	REQ_READY,     /* reply set, to be queued on the next access call */
	REQ_SENT,      /* response queued */
	REQ_GONE,      /* its client closed while it was held: ended, nothing to send */
};

struct http_req {
	struct api_req api;
	struct http_server *h;
	struct MHD_Connection *conn;
	enum req_state state;
	struct timespec t0;
	char method[8];
	char path[HTTP_MAX_PATH];   /* copy of the URL path, for logs and audit */
	char params[HTTP_MAX_PATH]; /* split copy the path parameters point into */
	char allow[64];
	char client[INET6_ADDRSTRLEN]; /* the peer's address, for the audit trail */
	bool streamed;                 /* the reply was a stream: its length is no latency */
	char *body;
	size_t body_len;
	bool too_large;
	bool close_after;           /* its framing was refused: take no further request */
	bool refused;               /* the reply is set: its body is read and dropped first */
	bool in_dispatch;           /* the handler runs: a resume now is sent when it returns */
	struct body_job *parsing;   /* while REQ_PARSING */
	struct http_stream *stream; /* set when the reply is a stream */
	struct http_conn *c;        /* its connection, NULL once that is gone */
	struct http_req *next, *prev;
};

/*
 * Warnings about clients' connections (libmicrohttpd's: refused at a limit,
 * aborted, a failed handshake; ours: a stream dropped for a slow client):
 * whoever opens connections controls how many there are. All are counted;
 * at most CLIENT_WARN_BURST are logged per CLIENT_WARN_WINDOW_S seconds,
 * then how many were not.
 */
#define HELP_WARNINGS                                                                              \
	"Warnings about clients' connections (refused at a limit, aborted, a failed TLS "          \
	"handshake, a stream dropped for a slow client); logged at most 10 per 10 s"
#define HELP_CUTS                                                                                  \
	"Connections cut for sending a header or a body too slowly ([http] header_timeout, "       \
	"body_min_rate), by what they were sending"
#define CLIENT_WARN_BURST    10
#define CLIENT_WARN_WINDOW_S 10

static void client_warn_v(const char *fmt, va_list ap)
{
	static time_t window;
	static unsigned logged, dropped;
	char msg[512];
	struct timespec now;
	metrics_counter_add("ofcd_http_warnings_total", HELP_WARNINGS, NULL, 1);
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec - window >= CLIENT_WARN_WINDOW_S) {
		if (dropped)
			log_warn("http",
			         "%u more warnings about clients in the last %d s were not logged",
			         dropped, CLIENT_WARN_WINDOW_S);
		window = now.tv_sec;
		logged = dropped = 0;
	}
	if (logged >= CLIENT_WARN_BURST) {
		dropped++;
		return;
	}
	logged++;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	size_t n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	log_warn("http", "%s", msg);
}

static void client_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void client_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	client_warn_v(fmt, ap);
	va_end(ap);
}

/* The connection now receives a header (within limit_s seconds), a body, or nothing. */
static void conn_phase(struct http_conn *c, int phase, unsigned limit_s)
{
	if (!c)
		return;
	c->phase = phase;
	c->header_limit_s = limit_s;
	c->body_bytes = 0;
	clock_gettime(CLOCK_MONOTONIC, &c->since);
}

static const char *method_name(const char *m)
{
	static const char *const known[] = { "GET",  "POST",  "PUT",    "DELETE",
		                             "HEAD", "PATCH", "OPTIONS" };
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(m, known[i]) == 0)
			return known[i];
	return "OTHER";
}

/*
 * At the connection limit MHD takes the listening socket out of its epoll set,
 * and puts it back only at the start of a later MHD_run(). When the last
 * connections close, nothing would call it again (no socket is ready, no
 * timeout is pending) and the listener would stay deaf for good: so a run in
 * which a connection closed is followed by another at once.
 */
static void schedule_run(struct http_server *h)
{
	MHD_UNSIGNED_LONG_LONG ms;
	if (h->run_again) {
		h->run_again = false;
		struct timeval now = { 0, 0 };
		evtimer_add(h->ev_timer, &now);
	} else if (MHD_get_timeout(h->mhd, &ms) == MHD_YES) {
		struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
			              .tv_usec = (suseconds_t)((ms % 1000) * 1000) };
		evtimer_add(h->ev_timer, &tv);
	} else {
		evtimer_del(h->ev_timer);
	}
}

/*
 * Runs MHD once more as soon as the loop is free: a resumed connection has
 * something to send. Called from inside MHD_run (an event published by a
 * request's handler wakes a stream), a bare timer would be reset by the
 * schedule_run() that follows, and the stream would wait for the next
 * activity of any connection (seconds, or the 15 s keep-alive comment).
 */
static void run_soon(struct http_server *h)
{
	struct timeval now = { 0, 0 };
	h->run_again = true;
	evtimer_add(h->ev_timer, &now);
}

static void on_mhd_ready(evutil_socket_t fd, short what, void *arg)
{
	struct http_server *h = arg;
	struct metrics_loop l = metrics_loop_enter("http");
	(void)fd;
	(void)what;
	MHD_run(h->mhd);
	schedule_run(h);
	metrics_loop_leave(l);
}

/*
 * Frees a stream's buffer and what it still held. glibc keeps freed heap
 * memory for reuse: after many large buffers it is handed back to the system
 * (malloc_trim), or a burst of stalled streams would stay in the RSS.
 */
static void stream_drop_buffer(struct http_stream *st)
{
	bool large = st->cap > STREAM_KEEP_BUFFER;
	st->h->streams_queued -= st->len;
	free(st->buf);
	st->buf = NULL;
	st->len = st->cap = 0;
	if (large)
		malloc_trim(0);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct http_stream *st = cls;
	(void)pos;
	if (st->len) {
		size_t n = st->len < max ? st->len : max;
		memcpy(buf, st->buf, n);
		memmove(st->buf, st->buf + n, st->len - n);
		st->len -= n;
		st->h->streams_queued -= n;
		if (!st->len && st->cap > STREAM_KEEP_BUFFER)
			stream_drop_buffer(st);
		return (ssize_t)n;
	}
	if (st->ending)
		return MHD_CONTENT_READER_END_OF_STREAM;
	/* Nothing to send: park the connection until the next write, no polling. */
	st->suspended = true;
	MHD_suspend_connection(st->conn);
	return 0;
}

static void stream_free(void *cls)
{
	struct http_stream *st = cls;
	if (st->prev)
		st->prev->next = st->next;
	else if (st->h->streams == st)
		st->h->streams = st->next;
	if (st->next)
		st->next->prev = st->prev;
	if (st->c)
		st->c->stream = NULL;
	if (st->on_close)
		st->on_close(st->arg);
	stream_drop_buffer(st);
	free(st);
}

/* MHD's inactivity timeout of one connection, in seconds. */
static void set_timeout(struct MHD_Connection *conn, unsigned seconds)
{
	MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

static void stream_wake(struct http_stream *st)
{
	if (!st->suspended)
		return;
	st->suspended = false;
	MHD_resume_connection(st->conn);
	run_soon(st->h);
}

static void stream_end(struct api_stream *s);

static struct api_stream *stream_start(struct api_req *req, const char *content_type,
                                       api_stream_close_fn on_close, void *arg)
{
	struct http_req *r = req->transport_arg;
	struct http_stream *st = calloc(1, sizeof(*st));
	if (!st) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		return NULL;
	}
	st->api.transport = req->transport;
	st->h = r->h;
	st->conn = r->conn;
	st->c = r->c;
	if (st->c)
		st->c->stream = st;
	set_timeout(r->conn, r->h->cfg->idle_timeout_s); /* keep-alive comments keep it busy */
	st->content_type = content_type;
	st->on_close = on_close;
	st->arg = arg;
	st->next = r->h->streams;
	if (st->next)
		st->next->prev = st;
	r->h->streams = st;
	r->stream = st;
	req->status = 200;
	return &st->api;
}

static int stream_write(struct api_stream *s, const char *data, size_t len)
{
	struct http_stream *st = (struct http_stream *)s;
	if (st->ending)
		return -EPIPE;
	if (st->len + len > STREAM_MAX_QUEUED || st->h->streams_queued + len > STREAMS_MAX_QUEUED) {
		client_warn("event stream client too slow: %zu bytes queued (%zu for all), "
		            "dropping it",
		            st->len, st->h->streams_queued);
		/* Drop what it did not read: a slow client must not pin its queue. */
		stream_drop_buffer(st);
		stream_end(s);
		return -ENOBUFS;
	}
	if (st->len + len > st->cap) {
		size_t cap = st->cap ? st->cap : 4096;
		while (cap < st->len + len)
			cap *= 2;
		char *b = realloc(st->buf, cap);
		if (!b)
			return -ENOMEM;
		st->buf = b;
		st->cap = cap;
	}
	memcpy(st->buf + st->len, data, len);
	st->len += len;
	st->h->streams_queued += len;
	stream_wake(st);
	return 0;
}

static void stream_end(struct api_stream *s)
{
	struct http_stream *st = (struct http_stream *)s;
	st->ending = true;
	stream_wake(st);
}

void http_end_streams(struct http_server *h)
{
	for (struct http_stream *st = h ? h->streams : NULL; st; st = st->next)
		stream_end(&st->api);
}

/* The response for a finished request: JSON (with a newline for curl) or raw text. */
static enum MHD_Result send_reply(struct http_req *r)
{
	struct api_req *a = &r->api;
	struct MHD_Response *resp;
	r->state = REQ_SENT;

	if (r->stream && strcmp(r->method, "HEAD") == 0) {
		/* HEAD of a stream: its headers, and no stream behind them. */
		resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
		if (!resp)
			return MHD_NO;
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
		                        r->stream->content_type);
		stream_free(r->stream);
		r->stream = NULL;
		enum MHD_Result ret = MHD_queue_response(r->conn, a->status, resp);
		MHD_destroy_response(resp);
		return ret;
	}
	if (r->stream) {
		r->streamed = true;
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read,
		                                         r->stream, stream_free);
		if (!resp)
			return MHD_NO;
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
		                        r->stream->content_type);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
		r->stream = NULL; /* owned by the response from now on */
		enum MHD_Result ret = MHD_queue_response(r->conn, a->status, resp);
		MHD_destroy_response(resp);
		return ret;
	}
	if (a->status == 204) {
		resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	} else if (a->reply_text) {
		resp = a->reply_text_free
		           ? MHD_create_response_from_buffer_with_free_callback_cls(
		                 a->reply_len, a->reply_text, a->reply_text_free, a->reply_text_cls)
		           : MHD_create_response_from_buffer(a->reply_len, a->reply_text,
		                                             MHD_RESPMEM_MUST_FREE);
		if (resp) { /* MHD's now */
			a->reply_text = NULL;
			a->reply_text_free = NULL;
		}
	} else {
		size_t len;
		char *buf = api_json_text(a->reply, &len);
		if (!buf)
			return MHD_NO;
		resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
		if (!resp)
			free(buf);
	}
	if (!resp)
		return MHD_NO;
	if (a->status != 204)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
		                        a->content_type ? a->content_type : "application/json");
	/* Answered: what follows is keep-alive, which may idle longer than a request may take. */
	set_timeout(r->conn, r->h->cfg->idle_timeout_s);
	if (a->status == 405 || strcmp(r->method, "OPTIONS") == 0)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
	if (a->etag[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, a->etag);
	if (a->location[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, a->location);
	if (a->status == 401)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
		                        "Bearer realm=\"ofcd\"");
	/* A client whose body was dropped may still be writing: take no further request. */
	if (r->h->quiesced || r->too_large || r->close_after)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	enum MHD_Result ret = MHD_queue_response(r->conn, a->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* Largest body read only to be dropped before a 413 (see check_headers). */
static unsigned long long linger_limit(const struct ofcd_config *cfg)
{
	unsigned long long floor = 8ull << 20;
	return 4ull * cfg->max_body > floor ? 4ull * cfg->max_body : floor;
}

/*
 * What the transport checks of the headers beside the API's policy
 * (api_begin): its own limits. Sets an error reply when the request must stop
 * here.
 */
/* What check_framing() counts of a request's headers. */
struct framing {
	unsigned content_length, transfer_encoding, host;
	bool chunked_only; /* every Transfer-Encoding is exactly "chunked" */
	const char *bad_name;
};

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
	struct framing *f = cls;
	(void)kind;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
		f->content_length++;
	else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
		f->host++;
	else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
		f->transfer_encoding++;
		f->chunked_only = f->chunked_only && value && strcasecmp(value, "chunked") == 0;
	}
	if (!f->bad_name && strpbrk(key, " \t"))
		f->bad_name = key;
	return MHD_YES;
}

/*
 * RFC 9112's framing, strictly: where a request ends must not be in doubt,
 * or a proxy in front that reads it otherwise sees two requests in one
 * (request smuggling). MHD 0.9.75 accepts these; a refusal also closes the
 * connection. (Folded header lines and bare LF line ends are unfolded and
 * accepted by MHD before this sees the headers.)
 */
static bool check_framing(struct http_req *r, const char *version)
{
	struct framing f = { .chunked_only = true };
	const char *why = NULL;
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_header, &f);
	if (f.content_length && f.transfer_encoding)
		why = "Content-Length and Transfer-Encoding together";
	else if (f.content_length > 1)
		why = "Content-Length more than once";
	else if (f.transfer_encoding && (f.transfer_encoding > 1 || !f.chunked_only))
		why = "a Transfer-Encoding other than a single \"chunked\"";
	else if (f.host != 1 && strcmp(version, MHD_HTTP_VERSION_1_1) == 0)
		why = f.host ? "Host more than once" : "no Host header";
	else if (f.bad_name)
		why = "a space or tab in a header name";
	if (!why)
		return true;
	r->close_after = true;
	api_error(&r->api, OFCD_E_BAD_REQUEST, NULL,
	          "malformed request: %s; the connection is closed", why);
	return false;
}

static bool check_headers(struct http_req *r, const char *url, const char *version)
{
	struct http_server *h = r->h;
	struct api_req *a = &r->api;
	const struct ofcd_config *cfg = h->cfg;

	snprintf(r->path, sizeof(r->path), "%s", url);
	if (!check_framing(r, version))
		return false;
	if (!api_begin(a, r->params, sizeof(r->params), r->allow, sizeof(r->allow)))
		return false;
	if (h->probes_only && a->route->role != AUTH_NONE) {
		api_error(
		    a, OFCD_E_NOT_FOUND, NULL,
		    "%s is served on [http] listen; [http] admin_listen serves the routes that "
		    "need no token only",
		    r->path);
		return false;
	}
	if (h->open > cfg->max_connections && a->route->role != AUTH_NONE) {
		api_error(a, OFCD_E_OVERLOADED, NULL,
		          "all %u connections are in use; try again later", cfg->max_connections);
		return false;
	}
	const char *cl =
	    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl) {
		/* MHD has refused a malformed length itself before calling us. */
		unsigned long long v = strtoull(cl, NULL, 10);
		/*
		 * A body over the limit is read and dropped, and 413 sent at its end:
		 * answering while the client still writes makes its kernel see a reset
		 * instead of the reply (nginx's lingering close does the same). Only a
		 * body too large even to drop is refused at once.
		 */
		/* A client that waits for "100 Continue" sends nothing more until told. */
		const char *expect =
		    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
		bool waits = expect && strcasecmp(expect, "100-continue") == 0;
		if (v > linger_limit(cfg) || (waits && v > cfg->max_body)) {
			r->close_after = waits;
			api_error(a, OFCD_E_BODY_TOO_LARGE, NULL,
			          "request body over the limit of %zu bytes", cfg->max_body);
			return false;
		}
	}
	return true;
}

/* A request with no body, or a Content-Length within max_body (not chunked). */
static bool small_body(struct http_req *r)
{
	const char *te = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
	                                             MHD_HTTP_HEADER_TRANSFER_ENCODING);
	const char *cl =
	    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	return !te && (!cl || strtoull(cl, NULL, 10) <= r->h->cfg->max_body);
}

static void add_body(struct http_req *r, const char *data, size_t len)
{
	size_t max = r->h->cfg->max_body;
	if (r->too_large)
		return;
	if (r->body_len + len > max) {
		/* Chunked bodies have no length up front: stop keeping data once over. */
		r->too_large = true;
		free(r->body);
		r->body = NULL;
		return;
	}
	char *b = realloc(r->body, r->body_len + len + 1);
	if (!b) {
		r->too_large = true;
		return;
	}
	memcpy(b + r->body_len, data, len);
	r->body = b;
	r->body_len += len;
}

/* Bodies from this size up are parsed off the loop (about 2.5 ms of jansson's time). */
#define PARSE_OFF_LOOP (64 * 1024)

#define PARSE_FLAGS (JSON_DECODE_ANY | JSON_REJECT_DUPLICATES)

enum body_state {
	BODY_READY,   /* parsed, or none: dispatch it */
	BODY_REFUSED, /* the reply is set */
	BODY_PARSING, /* on_parsed() dispatches it */
};

/* The body's value, or the reply that says why it is not JSON. */
static enum body_state set_body(struct http_req *r, json_t *value, const json_error_t *jerr)
{
	r->api.body = value;
	if (value)
		return BODY_READY;
	api_error(&r->api, OFCD_E_INVALID_JSON, NULL, "malformed JSON at line %d, column %d: %s",
	          jerr->line, jerr->column, jerr->text);
	return BODY_REFUSED;
}

static void on_parsed(void *arg, struct body_parsed *parsed);

static enum body_state parse_body(struct http_req *r)
{
	json_error_t jerr;
	if (r->too_large) {
		api_error(&r->api, OFCD_E_BODY_TOO_LARGE, NULL,
		          "request body over the limit of %zu bytes", r->h->cfg->max_body);
		return BODY_REFUSED;
	}
	if (r->body_len == 0)
		return BODY_READY;
	if (r->h->parser && r->body_len >= PARSE_OFF_LOOP) {
		r->parsing =
		    body_parser_submit(r->h->parser, r->body, r->body_len, PARSE_FLAGS,
		                       r->api.route ? r->api.route->prepare : NULL, on_parsed, r);
		if (r->parsing) {
			r->body = NULL; /* the parser's now */
			return BODY_PARSING;
		}
	}
	return set_body(r, json_loadb(r->body, r->body_len, PARSE_FLAGS, &jerr), &jerr);
}

/*
 * Answers before the body is read (or while it arrives): MHD then closes the
 * connection instead of reading the rest.
 */
static enum MHD_Result refuse_early(struct http_req *r)
{
	api_audit_refusal(&r->api);
	return send_reply(r);
}

static void peer_address(struct MHD_Connection *conn, char *buf, size_t len)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	buf[0] = '\0';
	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf,
		          (socklen_t)len);
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf,
		          (socklen_t)len);
}

static void unlink_suspended(struct http_req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else if (r->h->suspended == r)
		r->h->suspended = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->next = r->prev = NULL;
}

/* The API's turn: the handler, or the audit of a request its body refused. */
static void dispatch(struct http_req *r, enum body_state body)
{
	if (body == BODY_READY) {
		r->in_dispatch = true;
		api_dispatch(&r->api);
		r->in_dispatch = false;
	} else {
		api_audit_refusal(&r->api);
	}
}

/*
 * Held, its connection suspended, until its reply or its client's end: the
 * drain and a closing client find it in h->suspended.
 */
static void hold(struct http_req *r, enum req_state state)
{
	struct http_server *h = r->h;
	r->state = state;
	r->next = h->suspended;
	if (h->suspended)
		h->suspended->prev = r;
	h->suspended = r;
	set_timeout(r->conn, h->cfg->idle_timeout_s); /* ?wait= holds it up to a minute */
}

/* Its body is not parsed, or its value not wanted, any more. */
static void stop_parsing(struct http_req *r)
{
	if (r->parsing)
		body_parser_cancel(r->parsing);
	r->parsing = NULL;
}

static void req_resume(struct api_req *req);
static const char *req_query(struct api_req *req, const char *key);
static const char *req_header(struct api_req *req, const char *name);
static void req_query_names(struct api_req *req, bool (*fn)(void *arg, const char *name),
                            void *arg);

static const struct api_transport http_transport = {
	.resume = req_resume,
	.query = req_query,
	.header = req_header,
	.query_names = req_query_names,
	.stream_start = stream_start,
	.stream_write = stream_write,
	.stream_end = stream_end,
};

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
	struct http_server *h = cls;
	struct http_req *r = *con_cls;

	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		*con_cls = r;
		h->inflight++;
		r->h = h;
		r->conn = conn;
		r->api.env = h->env;
		r->api.transport = &http_transport;
		r->api.transport_arg = r;
		const union MHD_ConnectionInfo *ci =
		    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		r->c = ci ? ci->socket_context : NULL;
		if (r->c)
			r->c->req = r;
		conn_phase(r->c, CONN_BODY, 0);
		set_timeout(conn, h->cfg->request_timeout_s);
		clock_gettime(CLOCK_MONOTONIC, &r->t0);
		snprintf(r->method, sizeof(r->method), "%s", method_name(method));
		r->api.method = r->method;
		r->api.path = r->path;
		peer_address(conn, r->client, sizeof(r->client));
		r->api.client = r->client[0] ? r->client : NULL;
		if (!check_headers(r, url, version)) {
			/*
			 * MHD closes a connection answered before its request is read
			 * whole: a refusal (401, 404, ...) of a request with no body,
			 * or a body within max_body, is sent once that is read (and
			 * dropped), so a client may try again on the same connection.
			 */
			if (!r->close_after && r->api.status != 413 && small_body(r)) {
				r->refused = true;
				return MHD_YES;
			}
			conn_phase(r->c, CONN_OTHER, 0);
			return refuse_early(r);
		}
		return MHD_YES;
	}
	if (r->state == REQ_READY)
		return send_reply(r);
	if (r->state == REQ_GONE)
		return MHD_NO; /* MHD closes the connection */
	if (r->state != REQ_RECEIVING)
		return MHD_YES;
	if (*upload_data_size) {
		if (r->c)
			r->c->body_bytes += *upload_data_size;
		if (!r->refused)
			add_body(r, upload_data, *upload_data_size);
		/* MHD takes no reply while it hands over body data: an oversized chunked
		 * body is discarded as it arrives and answered 413 at its end. */
		*upload_data_size = 0;
		return MHD_YES;
	}
	conn_phase(r->c, CONN_OTHER, 0);
	if (r->refused)
		return refuse_early(r);
	enum body_state body = parse_body(r);
	if (body != BODY_PARSING)
		dispatch(r, body);
	if (body == BODY_PARSING || r->api.suspended) {
		hold(r, body == BODY_PARSING ? REQ_PARSING : REQ_SUSPENDED);
		MHD_suspend_connection(conn);
		return MHD_YES;
	}
	return send_reply(r);
}

/*
 * A body the parser is done with: the request's turn, as on_access() would
 * have given it, its body read by its route's prepare already.
 */
static void on_parsed(void *arg, struct body_parsed *parsed)
{
	struct metrics_loop l = metrics_loop_enter("http");
	struct http_req *r = arg;
	r->parsing = NULL;
	unlink_suspended(r);
	enum body_state body = set_body(r, parsed->value, &parsed->err);
	r->api.prepared = parsed->prepared;
	/* A refusal is the handler's to give, in its order of checks (api_prepared()). */
	if (body == BODY_READY && parsed->refusal.err != OFCD_OK &&
	    (r->api.prepare_refusal = malloc(sizeof(*r->api.prepare_refusal)))) {
		*r->api.prepare_refusal = parsed->refusal;
		parsed->refusal = (struct ofcd_error){ 0 };
	}
	dispatch(r, body);
	if (r->api.suspended) {
		hold(r, REQ_SUSPENDED); /* its connection is still suspended */
	} else {
		r->state = REQ_READY;
		MHD_resume_connection(r->conn);
		run_soon(r->h);
	}
	metrics_loop_leave(l);
}

static void req_resume(struct api_req *req)
{
	struct http_req *r = req->transport_arg;
	req->suspended = false;
	if (r->in_dispatch || r->state != REQ_SUSPENDED)
		return; /* still inside the handler: on_access sends it on return */
	unlink_suspended(r);
	r->state = REQ_READY;
	MHD_resume_connection(r->conn);
	/* Even if the resume signal's edge was already consumed. */
	run_soon(r->h);
}

static const char *req_query(struct api_req *req, const char *key)
{
	struct http_req *r = req->transport_arg;
	const char *v = NULL;
	/* "?wait" without "=" is given, empty: not the same as absent. */
	if (MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, key, strlen(key), &v,
	                                  NULL) != MHD_YES)
		return NULL;
	return v ? v : "";
}

static const char *req_header(struct api_req *req, const char *name)
{
	struct http_req *r = req->transport_arg;
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

struct names_walk {
	bool (*fn)(void *arg, const char *name);
	void *arg;
};

static enum MHD_Result each_name(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
	struct names_walk *w = cls;
	(void)kind;
	(void)value;
	return w->fn(w->arg, key) ? MHD_YES : MHD_NO;
}

static void req_query_names(struct api_req *req, bool (*fn)(void *arg, const char *name), void *arg)
{
	struct http_req *r = req->transport_arg;
	struct names_walk w = { fn, arg };
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, each_name, &w);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct http_server *h = cls;
	struct http_req *r = *con_cls;
	(void)conn;
	(void)toe;
	if (!r)
		return;
	if (r->state == REQ_SUSPENDED || r->state == REQ_PARSING) {
		unlink_suspended(r);
		stop_parsing(r);
		if (r->api.on_abort)
			r->api.on_abort(&r->api, true);
	}
	if (r->state == REQ_GONE) {
		log_debug("http", "%s %s: its client went away before the reply", r->method,
		          r->path);
	} else if (r->api.status) {
		double s = mono_since(&r->t0);
		/* A stream lasts as long as its client: its length says nothing of latency. */
		metrics_request(r->api.route ? r->api.route->pattern : "unmatched", r->method,
		                r->api.status, r->streamed ? -1 : s);
		log_debug("http", "%s %s -> %u (%.3f ms)", r->method, r->path, r->api.status,
		          s * 1e3);
	}
	if (r->c) {
		r->c->req = NULL;
		/* A kept-alive connection's next header: within the idle timeout, bytes or not. */
		conn_phase(r->c, CONN_HEADER, h->cfg->idle_timeout_s);
	}
	if (r->stream) /* never handed to MHD */
		stream_free(r->stream);
	api_req_release(&r->api);
	json_decref(r->api.body);
	json_decref(r->api.reply);
	api_reply_text_drop(&r->api);
	free(r->body);
	free(r);
	*con_cls = NULL;
	h->inflight--;
}

/*
 * The client closed its side. Whatever the connection waits for (the rest of
 * a request, an event for a held request or a stream) can no longer reach
 * it: shut the socket down so MHD's next read sees the end, and wake what is
 * parked so that read happens now. A reply being sent is left to finish.
 */
static void on_peer_closed(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *c = arg;
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	/*
	 * Woken by data as well: a reset (a client closing with unread data) is
	 * reported as readable, never as EV_CLOSED. Only a closed side counts.
	 */
	if (!(what & EV_CLOSED) &&
	    (poll(&p, 1, 0) != 1 || !(p.revents & (POLLRDHUP | POLLHUP | POLLERR))))
		return;
	if (c->req && c->req->state == REQ_SENT && !c->stream)
		return;
	log_debug("http", "client closed its connection; ending it");
	/* Once is enough, and our own shutdown would wake us again. */
	event_del(c->ev_closed);
	shutdown(fd, SHUT_RDWR);
	if (c->stream) {
		stream_end(&c->stream->api);
	} else if (c->req && (c->req->state == REQ_SUSPENDED || c->req->state == REQ_PARSING)) {
		/*
		 * Its holder hears now, not when its wait or write ends: a large
		 * create whose client left is undone rather than made for no one.
		 */
		struct http_req *r = c->req;
		unlink_suspended(r);
		stop_parsing(r);
		r->state = REQ_GONE;
		r->api.suspended = false;
		if (r->api.on_abort)
			r->api.on_abort(&r->api, true);
		r->api.on_abort = NULL;
		MHD_resume_connection(c->conn);
	}
	run_soon(c->h);
}

/*
 * MHD's timeout counts from the last byte, so a client sending one byte a
 * second holds its connection for ever. Here the whole header must arrive
 * within [http] header_timeout of the connection (a kept-alive one's next
 * header within idle_timeout of the last reply), and a body at
 * body_min_rate bytes a second on average once header_timeout has passed, or
 * the connection is cut (its socket shut down: MHD then closes it). Streams
 * and requests waiting for their reply have no deadline here.
 */
static void on_deadline_tick(evutil_socket_t fd, short what, void *arg)
{
	struct http_server *h = arg;
	struct timespec now;
	(void)fd;
	(void)what;
	clock_gettime(CLOCK_MONOTONIC, &now);
	for (struct http_conn *c = h->conns; c; c = c->next) {
		double age = mono_diff(&c->since, &now);
		double grace = h->cfg->header_timeout_s;
		const char *cut = NULL;
		if (c->phase == CONN_HEADER && age > c->header_limit_s)
			cut = "phase=\"header\"";
		else if (c->phase == CONN_BODY && age > grace &&
		         (double)c->body_bytes < (double)h->cfg->body_min_rate * (age - grace))
			cut = "phase=\"body\"";
		if (!cut || c->fd < 0)
			continue;
		metrics_counter_add("ofcd_http_deadline_cuts_total", HELP_CUTS, cut, 1);
		c->phase = CONN_OTHER;
		shutdown(c->fd, SHUT_RDWR);
	}
}

static struct http_conn *conn_new(struct http_server *h, struct MHD_Connection *conn)
{
	struct http_conn *c = calloc(1, sizeof(*c));
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!c)
		return NULL;
	c->h = h;
	c->conn = conn;
	c->fd = ci ? ci->connect_fd : -1;
	conn_phase(c, CONN_HEADER, h->cfg->header_timeout_s);
	c->next = h->conns;
	if (h->conns)
		h->conns->prev = c;
	h->conns = c;
	if (ci)
		c->ev_closed =
		    event_new(h->env->base, ci->connect_fd,
		              EV_READ | EV_ET | EV_CLOSED | EV_PERSIST, on_peer_closed, c);
	if (c->ev_closed && event_add(c->ev_closed, NULL) < 0) {
		event_free(c->ev_closed);
		c->ev_closed = NULL;
	}
	return c;
}

static void conn_free(struct http_conn *c)
{
	if (!c)
		return;
	if (c->req)
		c->req->c = NULL;
	if (c->stream)
		c->stream->c = NULL;
	if (c->ev_closed)
		event_free(c->ev_closed);
	if (c->prev)
		c->prev->next = c->next;
	else
		c->h->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
	struct http_server *h = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		h->open++;
		*socket_context = conn_new(h, conn);
		metrics_connections(1);
		return;
	}
	h->open--;
	h->run_again = true;
	conn_free(*socket_context);
	*socket_context = NULL;
	metrics_connections(-1);
}

/*
 * Percent-decoding in place would turn "%00" into a NUL that silently cuts a
 * name short ("srv1%00x" would address srv1): leave such a string undecoded,
 * so it fails the name rules instead.
 */
static size_t on_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
	(void)cls;
	(void)conn;
	if (strstr(s, "%00"))
		return strlen(s);
	return MHD_http_unescape(s);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	/*
	 * A stream's end that its client did not stay for (an event stream
	 * closed by its reader): a client leaving, not a warning.
	 */
	if (strncmp(fmt, "Failed to send the footers", 26) == 0)
		return;
	client_warn_v(fmt, ap);
}

static int bind_listener(const char *listen_host, unsigned listen_port, int *fd_out, char *err,
                         size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
		                  .ai_socktype = SOCK_STREAM,
		                  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char port[8];
	int fd = -1, one = 1, rc;

	snprintf(port, sizeof(port), "%u", listen_port);
	rc = getaddrinfo(listen_host, port, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "[http] listen: cannot resolve %s: %s", listen_host,
		         gai_strerror(rc));
		return -EINVAL;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
		rc = -errno;
		snprintf(err, errlen, "[http] listen: cannot listen on %s:%u: %s", listen_host,
		         listen_port, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return rc;
	}
	freeaddrinfo(res);
	*fd_out = fd;
	return 0;
}

/* The whole of a PEM file as a string (malloc'd), or NULL with the reason in err. */
static char *read_pem(const char *key, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	int why = f ? EIO : errno;
	char *buf = NULL;
	size_t len = 0;
	if (f) {
		FILE *m = open_memstream(&buf, &len);
		char chunk[4096];
		size_t n;
		while (m && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
			fwrite(chunk, 1, n, m);
		if (ferror(f) || !m || fclose(m) != 0) {
			free(buf);
			buf = NULL;
		}
		fclose(f);
	}
	if (!buf || !strstr(buf, "-----BEGIN ")) {
		snprintf(err, errlen, "[http] %s: cannot read a PEM file from %s%s%s", key, path,
		         buf ? "" : ": ", buf ? "" : strerror(why));
		free(buf);
		return NULL;
	}
	return buf;
}

static void free_secret(char *s)
{
	if (s)
		explicit_bzero(s, strlen(s));
	free(s);
}

/* Connections of the probe listener ([http] admin_listen), from all addresses and from one. */
#define HTTP_PROBE_CONNECTIONS 32

int http_start(struct api_env *env, bool probes_only, struct http_server **out, char *err,
               size_t errlen)
{
	struct http_server *h = calloc(1, sizeof(*h));
	int rc;
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	h->env = env;
	h->cfg = env->cfg;
	h->listen_fd = -1;
	h->probes_only = probes_only;
	/* The probes' bodies are small (their routes take none): parsed where they arrive. */
	if (!probes_only && !(h->parser = body_parser_new(env->base)))
		log_warn("http",
		         "cannot start the body parser's thread: bodies are parsed on the loop");
	/* Every counter shown from 0, so the first increase is an increase to alert on. */
	metrics_counter_add("ofcd_http_warnings_total", HELP_WARNINGS, NULL, 0);
	metrics_counter_add("ofcd_http_deadline_cuts_total", HELP_CUTS, "phase=\"header\"", 0);
	metrics_counter_add("ofcd_http_deadline_cuts_total", HELP_CUTS, "phase=\"body\"", 0);
	rc = probes_only ? bind_listener(h->cfg->admin_listen_host, h->cfg->admin_listen_port,
	                                 &h->listen_fd, err, errlen)
	                 : bind_listener(h->cfg->listen_host, h->cfg->listen_port, &h->listen_fd,
	                                 err, errlen);
	if (rc < 0)
		goto fail;

	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getsockname(h->listen_fd, (struct sockaddr *)&ss, &sl) == 0)
		h->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
		                                         : ((struct sockaddr_in *)&ss)->sin_port);

	/* HTTPS: MHD's GnuTLS, fed the PEM text; the rest of the options are the same. */
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	struct MHD_OptionItem tls[] = { { MHD_OPTION_END, 0, NULL },
		                        { MHD_OPTION_END, 0, NULL },
		                        { MHD_OPTION_END, 0, NULL },
		                        { MHD_OPTION_END, 0, NULL } };
	if (h->cfg->tls_cert[0] && !probes_only) {
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			snprintf(err, errlen,
			         "[http] tls_cert: this libmicrohttpd has no TLS support");
			rc = -ENOTSUP;
			goto fail;
		}
		h->tls_cert = read_pem("tls_cert", h->cfg->tls_cert, err, errlen);
		h->tls_key = h->tls_cert ? read_pem("tls_key", h->cfg->tls_key, err, errlen) : NULL;
		if (!h->tls_key) {
			rc = -EINVAL;
			goto fail;
		}
		flags |= MHD_USE_TLS;
		tls[0] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, h->tls_cert };
		tls[1] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, h->tls_key };
		/* MHD only reads it (gnutls_priority_init()). */
		tls[2] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_PRIORITIES, 0,
			                          (void *)h->cfg->tls_priorities };
	}
	h->mhd = MHD_start_daemon(
	    flags, 0, NULL, NULL, on_access, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
	    MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, h, MHD_OPTION_LISTEN_SOCKET, h->listen_fd,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION,
	    on_connection, h, MHD_OPTION_CONNECTION_LIMIT,
	    probes_only ? HTTP_PROBE_CONNECTIONS : h->cfg->max_connections + HTTP_PROBE_RESERVE,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT,
	    probes_only ? HTTP_PROBE_CONNECTIONS : h->cfg->max_connections_per_ip,
	    MHD_OPTION_CONNECTION_TIMEOUT, h->cfg->request_timeout_s, MHD_OPTION_ARRAY, tls,
	    MHD_OPTION_END);
	if (!h->mhd) {
		snprintf(err, errlen, "cannot start the HTTP server (libmicrohttpd)%s",
		         h->tls_cert
		             ? ": are [http] tls_cert and tls_key a certificate and its key, "
		               "and tls_priorities a GnuTLS priority string?"
		             : "");
		rc = -EIO;
		goto fail;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info) {
		snprintf(err, errlen, "libmicrohttpd has no epoll support");
		rc = -ENOTSUP;
		goto fail;
	}
	h->ev_epoll = event_new(env->base, info->epoll_fd, EV_READ | EV_PERSIST, on_mhd_ready, h);
	h->ev_timer = evtimer_new(env->base, on_mhd_ready, h);
	h->ev_deadline = event_new(env->base, -1, EV_PERSIST, on_deadline_tick, h);
	struct timeval second = { 1, 0 };
	if (!h->ev_epoll || !h->ev_timer || !h->ev_deadline || event_add(h->ev_epoll, NULL) < 0 ||
	    event_add(h->ev_deadline, &second) < 0) {
		snprintf(err, errlen, "cannot register the HTTP server with the event loop");
		rc = -ENOMEM;
		goto fail;
	}
	schedule_run(h);
	*out = h;
	return 0;
fail:
	http_destroy(h);
	return rc;
}

void http_quiesce(struct http_server *h)
{
	if (!h || !h->mhd || h->listen_fd < 0)
		return;
	h->quiesced = true;
	MHD_socket fd = MHD_quiesce_daemon(h->mhd);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
	h->listen_fd = -1;
	schedule_run(h);
}

size_t http_inflight(const struct http_server *h)
{
	return h ? h->inflight : 0;
}

void http_abort_suspended(struct http_server *h, bool replicating_too)
{
	struct http_req *r = h ? h->suspended : NULL;
	while (r) {
		/* A write the cluster's log has in hand is answered by the log, within the drain.
		 */
		if (r->api.replicating && !replicating_too) {
			r = r->next;
			continue;
		}
		/*
		 * Those still parsing, or whose reply is being made off the loop, are
		 * let finish during the drain, as their handlers would be; a write
		 * whose work is off the loop has written nothing, and is refused as
		 * one waiting its turn is.
		 */
		if ((r->state == REQ_PARSING || (r->api.offloaded && !r->api.computing)) &&
		    !replicating_too) {
			r = r->next;
			continue;
		}
		if (r->state == REQ_PARSING) {
			/* Not handed to the API yet: refused as a request arriving now would be. */
			stop_parsing(r);
			api_error(&r->api, OFCD_E_SHUTTING_DOWN, NULL,
			          "the daemon is shutting down");
			api_audit_refusal(&r->api);
			r->state = REQ_SUSPENDED;
		}
		if (r->api.on_abort)
			r->api.on_abort(&r->api, false);
		req_resume(&r->api); /* unlinks it */
		r = h->suspended;
	}
}

unsigned http_port(const struct http_server *h)
{
	return h->port;
}

void http_destroy(struct http_server *h)
{
	if (!h)
		return;
	http_abort_suspended(h, true);
	/* MHD must not be stopped with suspended connections: wake and end the streams. */
	http_end_streams(h);
	if (h->mhd && h->streams)
		MHD_run(h->mhd);
	if (h->ev_epoll)
		event_free(h->ev_epoll);
	if (h->ev_timer)
		event_free(h->ev_timer);
	if (h->ev_deadline)
		event_free(h->ev_deadline);
	if (h->mhd)
		MHD_stop_daemon(h->mhd);
	else if (h->listen_fd >= 0)
		close(h->listen_fd);
	body_parser_free(h->parser);
	free(h->tls_cert);
	free_secret(h->tls_key);
	free(h);
}
