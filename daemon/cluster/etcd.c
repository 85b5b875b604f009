#include "etcd.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "url.h"

/* A watch stream may stay silent for as long as nothing changes. */
#define WATCH_IDLE_S (24 * 3600)

struct endpoint {
	char url[128];
	char host[128];
	uint16_t port;
	struct evhttp_connection *conn; /* for calls; created on first use */
};

struct call {
	struct etcd_client *c;
	struct call *next;   /* in c->calls, so that freeing the client frees it */
	struct call *unsent; /* in c->unsent until its first send */
	char path[64];
	char *body;
	size_t ep;      /* endpoint this try went to */
	size_t tries;   /* endpoints tried so far */
	bool elsewhere; /* the first try goes past the current endpoint */
	etcd_done_fn done;
	void *arg;
};

struct etcd_client {
	struct event_base *base;
	struct endpoint *eps;
	size_t n;
	size_t cur; /* endpoint calls go to */
	unsigned timeout_s;
	struct call *calls;
	/*
	 * Calls made but not sent yet, oldest first: sent from the loop, never
	 * from etcd_call(), since evhttp fails a request that cannot connect
	 * (no socket left) from inside evhttp_make_request(), and done would
	 * run before its caller had returned.
	 */
	struct call *unsent, **unsent_tail;
	struct event *send; /* sends them */
	/*
	 * Every watch not yet freed. A call that gets no answer from an endpoint
	 * ends the watches on it too (hung members keep their streams open and
	 * silent): their owners open them again where calls now go.
	 */
	struct etcd_watch *watches;
	struct event *fail;      /* ends the watches marked failing */
	struct etcd_watch *dead; /* watches freed from their own callback, freed later */
	struct event *reap;      /* frees them once the callbacks have returned */
};

struct etcd_watch {
	struct etcd_client *c;
	char *body;
	size_t ep;               /* endpoint this stream is on */
	size_t tries;            /* endpoints tried before any message arrived */
	bool streaming;          /* a message arrived: no more failing over */
	bool ended;              /* the caller was told the stream is over */
	bool in_cb;              /* fn is running: freeing must wait until evhttp is done */
	bool dead;               /* etcd_watch_free() was called from fn */
	bool failing;            /* a call to its endpoint got no answer: to be ended */
	struct etcd_watch *next; /* in c->watches */
	struct etcd_watch *next_dead;
	struct evhttp_connection *conn;
	struct evhttp_connection *stale; /* the previous endpoint's, freed outside its callback */
	struct event *open;              /* opens the stream from the loop, as calls are sent */
	struct evhttp_request *req;
	struct evbuffer *buf; /* part of a message not yet ended by a newline */
	etcd_event_fn fn;
	void *arg;
};

static void on_reap(evutil_socket_t fd, short what, void *arg);
static void on_send(evutil_socket_t fd, short what, void *arg);
static void on_fail(evutil_socket_t fd, short what, void *arg);

static int parse_endpoint(const char *url, struct endpoint *ep)
{
	bool tls;
	/* The host comes out without an IPv6 address's brackets, as evhttp wants it. */
	if (strlen(url) >= sizeof(ep->url) ||
	    url_split(url, strlen(url), &tls, ep->host, sizeof(ep->host), &ep->port) < 0 || tls)
		return -EINVAL;
	snprintf(ep->url, sizeof(ep->url), "%s", url);
	return 0;
}

int etcd_client_new(struct event_base *base, const char (*endpoints)[128], size_t n,
                    unsigned timeout_s, struct etcd_client **out)
{
	struct etcd_client *c = calloc(1, sizeof(*c));
	if (!c || n == 0 || !(c->eps = calloc(n, sizeof(*c->eps)))) {
		free(c);
		return n == 0 ? -EINVAL : -ENOMEM;
	}
	c->base = base;
	c->unsent_tail = &c->unsent;
	c->reap = event_new(base, -1, 0, on_reap, c);
	c->send = event_new(base, -1, 0, on_send, c);
	c->fail = event_new(base, -1, 0, on_fail, c);
	if (!c->reap || !c->send || !c->fail) {
		if (c->reap)
			event_free(c->reap);
		if (c->send)
			event_free(c->send);
		if (c->fail)
			event_free(c->fail);
		free(c->eps);
		free(c);
		return -ENOMEM;
	}
	c->n = n;
	c->timeout_s = timeout_s;
	for (size_t i = 0; i < n; i++) {
		if (parse_endpoint(endpoints[i], &c->eps[i]) < 0) {
			etcd_client_free(c);
			return -EINVAL;
		}
	}
	*out = c;
	return 0;
}

static void call_free(struct call *k)
{
	struct call **pp = &k->c->calls;
	while (*pp != k)
		pp = &(*pp)->next;
	*pp = k->next;
	free(k->body);
	free(k);
}

void etcd_client_free(struct etcd_client *c)
{
	if (!c)
		return;
	/* Freeing a connection drops its queued requests without their callbacks. */
	for (size_t i = 0; i < c->n; i++)
		if (c->eps[i].conn)
			evhttp_connection_free(c->eps[i].conn);
	while (c->calls)
		call_free(c->calls);
	on_reap(-1, 0, c);
	event_free(c->reap);
	event_free(c->send);
	event_free(c->fail);
	free(c->eps);
	free(c);
}

const char *etcd_endpoint(const struct etcd_client *c)
{
	return c->eps[c->cur].url;
}

size_t etcd_endpoints(const struct etcd_client *c)
{
	return c->n;
}

static struct evhttp_connection *connect_to(struct etcd_client *c, struct endpoint *ep,
                                            unsigned timeout_s)
{
	struct evhttp_connection *conn =
	    evhttp_connection_base_new(c->base, NULL, ep->host, ep->port);
	if (conn) {
		evhttp_connection_set_timeout(conn, (int)timeout_s);
		evhttp_connection_set_retries(conn, 0);
	}
	return conn;
}

static struct evhttp_request *post(struct evhttp_connection *conn, const struct endpoint *ep,
                                   const char *path, const char *body,
                                   void (*cb)(struct evhttp_request *, void *), void *arg)
{
	struct evhttp_request *req = evhttp_request_new(cb, arg);
	if (!req)
		return NULL;
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Host", ep->host);
	evhttp_add_header(h, "Content-Type", "application/json");
	evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
	if (evhttp_make_request(conn, req, EVHTTP_REQ_POST, path) < 0)
		return NULL; /* evhttp freed req */
	return req;
}

static void call_send(struct call *k);
static void fail_watches(struct etcd_client *c, size_t ep);

/* The whole reply of a call, or NULL when the endpoint did not give one. */
static bool answered(struct evhttp_request *req)
{
	int code = req ? evhttp_request_get_response_code(req) : 0;
	return code > 0 && code < 500;
}

static void call_done(struct evhttp_request *req, void *arg)
{
	struct call *k = arg;
	struct etcd_client *c = k->c;
	struct etcd_result res = { 0 };
	int rc;

	if (!answered(req)) {
		size_t next = (k->ep + 1) % c->n;
		log_debug("etcd", "%s%s: no answer (HTTP %d)%s", c->eps[k->ep].url, k->path,
		          req ? evhttp_request_get_response_code(req) : 0,
		          k->tries < c->n ? ", trying the next endpoint" : "");
		/* Past the endpoint this call used: calls failing together move on once. */
		if (c->cur == k->ep)
			c->cur = next;
		fail_watches(c, k->ep);
		k->ep = next;
		if (k->tries < c->n) {
			call_send(k);
			return;
		}
		rc = -EHOSTUNREACH;
	} else {
		/* A try sent past a member that had not answered was: calls go there now. */
		if (k->elsewhere)
			c->cur = k->ep;
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		size_t len = evbuffer_get_length(in);
		const char *body = (const char *)evbuffer_pullup(in, -1);
		rc = etcd_parse(body ? body : "", len, &res);
		if (rc == 0 && evhttp_request_get_response_code(req) != 200)
			rc = -EPROTO;
	}
	res.resent = k->tries > 1;
	k->done(rc, &res, k->arg);
	etcd_result_free(&res);
	call_free(k);
}

static void call_send(struct call *k)
{
	struct etcd_client *c = k->c;
	struct endpoint *ep = &c->eps[k->ep];

	k->tries++;
	if (!ep->conn)
		ep->conn = connect_to(c, ep, c->timeout_s);
	if (!ep->conn || !post(ep->conn, ep, k->path, k->body, call_done, k)) {
		/* Out of memory here is not the endpoint's fault, but is handled alike. */
		call_done(NULL, k);
	}
}

static int call(struct etcd_client *c, const char *path, char *body, bool elsewhere,
                etcd_done_fn done, void *arg)
{
	struct call *k = body ? calloc(1, sizeof(*k)) : NULL;
	if (!k || strlen(path) >= sizeof(k->path)) {
		free(body);
		free(k);
		return k ? -EINVAL : -ENOMEM;
	}
	k->c = c;
	snprintf(k->path, sizeof(k->path), "%s", path);
	k->body = body;
	k->done = done;
	k->arg = arg;
	k->elsewhere = elsewhere;
	k->next = c->calls;
	c->calls = k;
	*c->unsent_tail = k;
	c->unsent_tail = &k->unsent;
	event_active(c->send, EV_TIMEOUT, 1);
	return 0;
}

int etcd_call(struct etcd_client *c, const char *path, char *body, etcd_done_fn done, void *arg)
{
	return call(c, path, body, false, done, arg);
}

int etcd_call_elsewhere(struct etcd_client *c, const char *path, char *body, etcd_done_fn done,
                        void *arg)
{
	return call(c, path, body, true, done, arg);
}

static void on_send(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_client *c = arg;
	(void)fd;
	(void)what;
	while (c->unsent) {
		struct call *k = c->unsent;
		c->unsent = k->unsent;
		if (!c->unsent)
			c->unsent_tail = &c->unsent;
		k->ep = k->elsewhere ? (c->cur + 1) % c->n : c->cur;
		call_send(k);
	}
}

static void watch_close(struct etcd_watch *w)
{
	if (w->req)
		evhttp_cancel_request(w->req);
	w->req = NULL;
	if (w->conn)
		evhttp_connection_free(w->conn);
	if (w->stale)
		evhttp_connection_free(w->stale);
	w->conn = w->stale = NULL;
	if (w->open)
		event_free(w->open);
	w->open = NULL;
}

static void watch_destroy(struct etcd_watch *w);

/* Calls fn; returns false when fn freed the watch (its freeing is then deferred). */
static bool deliver(struct etcd_watch *w, int rc, const struct etcd_result *res)
{
	w->in_cb = true;
	w->fn(rc, res, w->arg);
	w->in_cb = false;
	if (!w->dead)
		return true;
	w->ended = true;
	w->next_dead = w->c->dead;
	w->c->dead = w;
	event_active(w->c->reap, EV_TIMEOUT, 1);
	return false;
}

/* Marks the streaming watches on endpoint ep to be ended from the loop (see watches). */
static void fail_watches(struct etcd_client *c, size_t ep)
{
	for (struct etcd_watch *w = c->watches; w; w = w->next)
		if (w->ep == ep && w->streaming && !w->ended) {
			w->failing = true;
			event_active(c->fail, EV_TIMEOUT, 1);
		}
}

static void on_fail(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_client *c = arg;
	(void)fd;
	(void)what;
	/* Again from the head after each: the owner may free or open watches meanwhile. */
	for (;;) {
		struct etcd_watch *w = c->watches;
		while (w && !w->failing)
			w = w->next;
		if (!w)
			break;
		w->failing = false;
		if (w->ended)
			continue;
		log_warn("etcd", "%s: ending a watch there, a call got no answer from it",
		         c->eps[w->ep].url);
		w->ended = true;
		deliver(w, -EHOSTUNREACH, NULL);
	}
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_client *c = arg;
	(void)fd;
	(void)what;
	while (c->dead) {
		struct etcd_watch *w = c->dead;
		c->dead = w->next_dead;
		watch_destroy(w);
	}
}

/* Each message of the stream is one JSON object on a line of its own. */
static void watch_chunk(struct evhttp_request *req, void *arg)
{
	struct etcd_watch *w = arg;
	char *line;
	size_t len;

	w->streaming = true;
	if (w->ended) {
		evbuffer_drain(evhttp_request_get_input_buffer(req), (size_t)-1);
		return;
	}
	evbuffer_add_buffer(w->buf, evhttp_request_get_input_buffer(req));
	while ((line = evbuffer_readln(w->buf, &len, EVBUFFER_EOL_LF))) {
		struct etcd_result res = { 0 };
		int rc = len ? etcd_parse(line, len, &res) : 0;
		free(line);
		bool alive = !len || rc < 0 || deliver(w, 0, &res);
		etcd_result_free(&res);
		if (!alive)
			return;
		if (rc < 0) {
			/* Not etcd's stream: reported once, the rest of it ignored. */
			w->ended = true;
			deliver(w, -EPROTO, NULL);
			return;
		}
	}
}

static void watch_open(struct etcd_watch *w);

static void watch_done(struct evhttp_request *req, void *arg)
{
	struct etcd_watch *w = arg;
	struct etcd_client *c = w->c;
	(void)req;
	w->req = NULL; /* evhttp frees it once this returns */
	if (!w->streaming && w->tries < c->n) {
		log_debug("etcd", "%s: watch not opened, trying the next endpoint",
		          c->eps[w->ep].url);
		if (w->stale)
			evhttp_connection_free(w->stale);
		w->stale = w->conn;
		w->conn = NULL;
		w->ep = (w->ep + 1) % c->n;
		watch_open(w);
		return;
	}
	if (!w->ended) {
		w->ended = true;
		deliver(w, -EHOSTUNREACH, NULL);
	}
}

static void on_open(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	watch_open(arg);
}

static void watch_open(struct etcd_watch *w)
{
	struct endpoint *ep = &w->c->eps[w->ep];
	w->tries++;
	w->conn = connect_to(w->c, ep, WATCH_IDLE_S);
	w->req = w->conn ? evhttp_request_new(watch_done, w) : NULL;
	if (!w->req) {
		watch_done(NULL, w);
		return;
	}
	evhttp_request_set_chunked_cb(w->req, watch_chunk);
	struct evkeyvalq *h = evhttp_request_get_output_headers(w->req);
	evhttp_add_header(h, "Host", ep->host);
	evhttp_add_header(h, "Content-Type", "application/json");
	/*
	 * etcd's require-leader (gRPC metadata through the gateway): a member cut
	 * off from its quorum ends the stream instead of leaving it silent, and
	 * the watcher hears it and goes on elsewhere.
	 */
	evhttp_add_header(h, "Grpc-Metadata-hasleader", "true");
	evbuffer_add(evhttp_request_get_output_buffer(w->req), w->body, strlen(w->body));
	if (evhttp_make_request(w->conn, w->req, EVHTTP_REQ_POST, "/v3/watch") < 0) {
		w->req = NULL;
		watch_done(NULL, w);
	}
}

int etcd_watch(struct etcd_client *c, char *body, etcd_event_fn fn, void *arg,
               struct etcd_watch **out)
{
	struct etcd_watch *w = body ? calloc(1, sizeof(*w)) : NULL;
	if (!w || !(w->buf = evbuffer_new())) {
		free(body);
		free(w);
		return -ENOMEM;
	}
	w->c = c;
	w->body = body;
	w->ep = c->cur;
	w->fn = fn;
	w->arg = arg;
	/* Opened from the loop: fn never runs before its caller has returned (see unsent). */
	if (!(w->open = event_new(c->base, -1, 0, on_open, w))) {
		watch_destroy(w);
		return -ENOMEM;
	}
	event_active(w->open, EV_TIMEOUT, 1);
	w->next = c->watches;
	c->watches = w;
	*out = w;
	return 0;
}

void etcd_watch_free(struct etcd_watch *w)
{
	if (!w)
		return;
	if (w->in_cb) {
		w->dead = true;
		return;
	}
	watch_destroy(w);
}

static void watch_destroy(struct etcd_watch *w)
{
	struct etcd_watch **pp = &w->c->watches;
	while (*pp && *pp != w)
		pp = &(*pp)->next;
	if (*pp)
		*pp = w->next;
	watch_close(w);
	evbuffer_free(w->buf);
	free(w->body);
	free(w);
}
