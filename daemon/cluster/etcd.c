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
	struct call *next; /* in c->calls, so that freeing the client frees it */
	char path[64];
	char *body;
	size_t tries; /* endpoints tried so far */
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
	struct etcd_watch *dead; /* watches freed from their own callback, freed later */
	struct event *reap;      /* frees them once the callbacks have returned */
};

struct etcd_watch {
	struct etcd_client *c;
	char *body;
	size_t ep;      /* endpoint this stream is on */
	size_t tries;   /* endpoints tried before any message arrived */
	bool streaming; /* a message arrived: no more failing over */
	bool ended;     /* the caller was told the stream is over */
	bool in_cb;     /* fn is running: freeing must wait until evhttp is done */
	bool dead;      /* etcd_watch_free() was called from fn */
	struct etcd_watch *next_dead;
	struct evhttp_connection *conn;
	struct evhttp_connection *stale; /* the previous endpoint's, freed outside its callback */
	struct evhttp_request *req;
	struct evbuffer *buf; /* part of a message not yet ended by a newline */
	etcd_event_fn fn;
	void *arg;
};

static void on_reap(evutil_socket_t fd, short what, void *arg);

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
	if (!(c->reap = event_new(base, -1, 0, on_reap, c))) {
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
	free(c->eps);
	free(c);
}

const char *etcd_endpoint(const struct etcd_client *c)
{
	return c->eps[c->cur].url;
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
		size_t next = (c->cur + 1) % c->n;
		log_debug("etcd", "%s%s: no answer (HTTP %d)%s", c->eps[c->cur].url, k->path,
		          req ? evhttp_request_get_response_code(req) : 0,
		          k->tries < c->n ? ", trying the next endpoint" : "");
		c->cur = next;
		if (k->tries < c->n) {
			call_send(k);
			return;
		}
		rc = -EHOSTUNREACH;
	} else {
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		size_t len = evbuffer_get_length(in);
		const char *body = (const char *)evbuffer_pullup(in, -1);
		rc = etcd_parse(body ? body : "", len, &res);
		if (rc == 0 && evhttp_request_get_response_code(req) != 200)
			rc = -EPROTO;
	}
	k->done(rc, &res, k->arg);
	etcd_result_free(&res);
	call_free(k);
}

static void call_send(struct call *k)
{
	struct etcd_client *c = k->c;
	struct endpoint *ep = &c->eps[c->cur];

	k->tries++;
	if (!ep->conn)
		ep->conn = connect_to(c, ep, c->timeout_s);
	if (!ep->conn || !post(ep->conn, ep, k->path, k->body, call_done, k)) {
		/* Out of memory here is not the endpoint's fault, but is handled alike. */
		call_done(NULL, k);
	}
}

int etcd_call(struct etcd_client *c, const char *path, char *body, etcd_done_fn done, void *arg)
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
	k->next = c->calls;
	c->calls = k;
	call_send(k);
	return 0;
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
	/* Set first: fn may run (and free w) before watch_open() returns. */
	*out = w;
	watch_open(w);
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
	watch_close(w);
	evbuffer_free(w->buf);
	free(w->body);
	free(w);
}
