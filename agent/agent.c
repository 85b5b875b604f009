/*
 * ofcd-agent: reports this server's RDMA inventory and link events to the
 * controller (see agent.h).
 *
 * Delivery rules. The inventory is sent whole, never as a delta, so any one
 * report that gets through makes the controller right. At most one inventory
 * PUT is in flight; a change meanwhile marks it dirty and the current state
 * (not the one of the moment of the change) goes next. A failure to reach the
 * controller (connection refused, timeout, 5xx) is retried with backoff from
 * 200 ms doubling to 5 s; heartbeats and events also send at once, so a
 * controller coming back is served within the backoff at worst. A 4xx means
 * the controller refuses this inventory: logged, and tried again at the next
 * heartbeat or change. Port events also send the device state PUT at once,
 * before the inventory; those are not retried, since the inventory that
 * follows carries the same state.
 *
 * Runs files ([agent] runs_dir) go on a connection of their own, so a large
 * one never holds up a device's state behind it: one POST at a time, the
 * directory listed at start and every heartbeat (a round), oldest first. A
 * file the controller takes goes to done/, one it refuses to rejected/ with
 * its .error; any other answer leaves it for a later round. A failure that is
 * not the file's (no answer, the token, an overloaded controller) ends the
 * round; one that may be the file's (a 500) skips it, so it cannot hold up the
 * files behind it.
 */
#include "agent.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "runs_dir.h"
#include "url.h"
#include "version.h"

#define AGENT_HTTP_TIMEOUT_S 5
#define AGENT_BACKOFF_MIN_MS 200
#define AGENT_BACKOFF_MAX_MS 5000
#define AGENT_RUNS_WARN_S    60    /* warnings about one runs file, at most one per this */
#define AGENT_REPLY_MAX      65536 /* of a refusal's body kept in its .error file */

struct agent;

/* One HTTP connection to the controller. */
struct agent_link {
	struct evhttp_connection *conn; /* NULL until first used */
	struct bufferevent *bev;        /* https: the TLS stream under conn (owned by conn) */
};

/* One of the controller's addresses, and the agent's connections to it. */
struct agent_target {
	const struct agent_controller *ctl;
	char hostport[300];     /* Host header */
	struct agent_link main; /* inventory and device states */
	struct agent_link bulk; /* runs files */
};

enum agent_call_kind { CALL_INVENTORY, CALL_DEVICE, CALL_RUNS };

/* One request to the controller, owned by the agent until its callback ran. */
struct agent_call {
	struct agent *a;
	struct agent_link *link; /* the connection it went on */
	size_t target;           /* the address it went to: a->targets[target] */
	enum agent_call_kind kind;
	int32_t device; /* device index of a device state */
	bool failed;    /* the state sent */
	unsigned round; /* runs: the round it was sent in */
	char why[192];  /* transport error, from the error callback */
	struct agent_call *next, *prev;
};

/*
 * A device's state for the controller: one PUT of it in flight at a time, and only
 * the newest state after it, so that a flapping port on a slow controller queues
 * nothing but its last word.
 */
struct device_report {
	int32_t index;
	bool inflight; /* a PUT of it is on its way */
	bool pending;  /* a newer state waits for that one's answer */
	bool failed;   /* the newer state */
};

struct agent {
	const struct agent_config *cfg;
	struct event_base *base;
	struct evdns_base *dns;
	/* Requests go to targets[cur]: the leader, as far as the agent knows. */
	struct agent_target targets[AGENT_CONTROLLERS_MAX];
	size_t ntargets, cur;
	char redirect_refused[300]; /* the last Location not followed, logged once */
	SSL_CTX *ssl_ctx;           /* https: the client context (certificate checks), else NULL */
	char inv_path[128];
	char runs_path[128];

	const struct rdma_source_ops *ops;
	struct rdma_source *src;
	json_t *report; /* the current inventory as sent, without "interval" */

	/* map = pci-order: fixed when first seen, extended when new ports appear */
	struct agent_map_entry *pmap;
	size_t npmap;

	bool inv_inflight;
	bool inv_dirty;
	struct device_report *devs; /* the devices whose state was sent, by first report */
	size_t ndevs;
	unsigned backoff_ms; /* 0 while the controller answers */
	char refused[320];   /* the last refusal, logged as an error once */
	struct agent_call *calls;

	/* [agent] runs_dir */
	int runs_fd;               /* the directory, -1 when not collecting */
	struct runs_file *runs;    /* its files as last listed, oldest first */
	size_t nruns, runs_next;   /* how many; the next one to try */
	unsigned runs_round;       /* rounds so far */
	unsigned runs_blocked;     /* a round the controller can take no file in */
	bool runs_inflight;        /* runs_cur is being sent */
	struct runs_file runs_cur; /* the file being sent */
	double runs_scan_warned;   /* the last warning that the directory cannot be listed */

	struct event *ev_heartbeat;
	struct event *ev_retry;
	struct event *ev_sig[3];
};

/* ---- device mapping ------------------------------------------------------ */

static int32_t map_lookup(const struct agent *a, const char *device, unsigned port)
{
	const struct agent_map_entry *m = a->cfg->pci_order ? a->pmap : a->cfg->map;
	size_t n = a->cfg->pci_order ? a->npmap : a->cfg->nmap;
	for (size_t i = 0; i < n; i++)
		if (m[i].port == port && strcmp(m[i].device, device) == 0)
			return (int32_t)m[i].index;
	return -1;
}

/* PCI functions in address order first, then devices without a PCI address by name. */
static int cmp_pci(const void *x, const void *y)
{
	const struct rdma_device *a = x, *b = y;
	if (!a->pci[0] != !b->pci[0])
		return a->pci[0] ? -1 : 1;
	int c = strcmp(a->pci, b->pci);
	return c ? c : strcmp(a->name, b->name);
}

/*
 * Numbers every (device, port) not numbered yet after the ones that are, in
 * PCI order, so indices never shift while the agent runs (a device that dies
 * keeps its numbers).
 */
static int pci_order_extend(struct agent *a, const struct rdma_inventory *inv)
{
	struct rdma_device *sorted;
	if (!inv->ndevices)
		return 0;
	sorted = malloc(inv->ndevices * sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, inv->devices, inv->ndevices * sizeof(*sorted));
	qsort(sorted, inv->ndevices, sizeof(*sorted), cmp_pci);
	for (size_t i = 0; i < inv->ndevices; i++) {
		for (size_t k = 0; k < sorted[i].nports; k++) {
			unsigned port = sorted[i].ports[k].num;
			if (map_lookup(a, sorted[i].name, port) >= 0 ||
			    a->npmap >= RDMA_MAX_DEVICES)
				continue;
			struct agent_map_entry *v =
			    realloc(a->pmap, (a->npmap + 1) * sizeof(*a->pmap));
			if (!v) {
				free(sorted);
				return -ENOMEM;
			}
			a->pmap = v;
			struct agent_map_entry *m = &a->pmap[a->npmap];
			memset(m, 0, sizeof(*m));
			m->index = (uint32_t)a->npmap++;
			snprintf(m->device, sizeof(m->device), "%s", sorted[i].name);
			m->port = (uint8_t)port;
			log_info("agent", "map = pci-order: device %u = %s:%u%s%s", m->index,
			         m->device, port, sorted[i].pci[0] ? " at " : "", sorted[i].pci);
		}
	}
	free(sorted);
	return 0;
}

static void apply_map(struct agent *a, struct rdma_inventory *inv)
{
	if (a->cfg->pci_order && pci_order_extend(a, inv) < 0)
		log_error("agent", "out of memory extending the pci-order map");
	for (size_t i = 0; i < inv->ndevices; i++)
		for (size_t k = 0; k < inv->devices[i].nports; k++)
			inv->devices[i].ports[k].index =
			    map_lookup(a, inv->devices[i].name, inv->devices[i].ports[k].num);
}

/* ---- requests ------------------------------------------------------------ */

static void send_inventory(struct agent *a);

static void call_unlink(struct agent *a, struct agent_call *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		a->calls = c->next;
	if (c->next)
		c->next->prev = c->prev;
}

/* A failed TLS handshake says why (the certificate check, mostly) instead of "failed". */
static void tls_why(struct bufferevent *bev, char *why, size_t len)
{
	unsigned long e, last = 0;
	while ((e = bufferevent_get_openssl_error(bev)))
		last = e;
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	long verify = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
	if (verify != X509_V_OK)
		snprintf(why, len, "TLS: the controller's certificate: %s",
		         X509_verify_cert_error_string(verify));
	else if (last)
		snprintf(why, len, "TLS: %s", ERR_reason_error_string(last));
}

static void on_request_error(enum evhttp_request_error e, void *arg)
{
	struct agent_call *c = arg;
	static const char *const names[] = {
		[EVREQ_HTTP_TIMEOUT] = "timed out",
		[EVREQ_HTTP_EOF] = "connection closed",
		[EVREQ_HTTP_INVALID_HEADER] = "invalid reply header",
		[EVREQ_HTTP_BUFFER_ERROR] = "connection failed",
		[EVREQ_HTTP_REQUEST_CANCEL] = "cancelled",
		[EVREQ_HTTP_DATA_TOO_LONG] = "reply too long",
	};
	const char *n =
	    (unsigned)e < sizeof(names) / sizeof(names[0]) && names[e] ? names[e] : "failed";
	snprintf(c->why, sizeof(c->why), "%s", n);
	if (c->link->bev)
		tls_why(c->link->bev, c->why, sizeof(c->why));
}

/* The first max bytes at most of a reply's body, in *len; NULL when there is none. */
static const char *reply_body(struct evhttp_request *req, size_t max, size_t *len)
{
	struct evbuffer *in = req ? evhttp_request_get_input_buffer(req) : NULL;
	size_t n = in ? evbuffer_get_length(in) : 0;
	*len = n < max ? n : max;
	return *len ? (const char *)evbuffer_pullup(in, (ev_ssize_t)*len) : NULL;
}

/* A reply's body as JSON (a new reference), NULL when it is not. */
static json_t *reply_json(struct evhttp_request *req)
{
	size_t n;
	const char *text = reply_body(req, AGENT_REPLY_MAX, &n);
	return text ? json_loadb(text, n, 0, NULL) : NULL;
}

/* The controller's error message from a reply body, or its first bytes. */
static void reply_message(struct evhttp_request *req, char *out, size_t len)
{
	size_t n;
	const char *text = reply_body(req, 2048, &n);
	out[0] = '\0';
	if (!text)
		return;
	json_t *j = json_loadb(text, n, 0, NULL);
	json_t *e = json_object_get(j, "error");
	const char *msg = json_string_value(json_object_get(e, "message"));
	const char *field = json_string_value(json_object_get(e, "field"));
	if (msg)
		snprintf(out, len, "%s%s%s", field ? field : "", field ? ": " : "", msg);
	else if (text)
		snprintf(out, len, "%.*s", (int)(n < 200 ? n : 200), text);
	json_decref(j);
}

/* The inventory's answer from targets[target]. */
static void inventory_done(struct agent *a, size_t target, int code, const char *why)
{
	a->inv_inflight = false;
	if (code >= 200 && code < 300) {
		if (a->backoff_ms)
			log_info("agent", "controller %s reachable again: inventory delivered",
			         a->targets[target].ctl->url);
		else
			log_debug("agent", "inventory delivered");
		a->backoff_ms = 0;
		a->refused[0] = '\0';
		if (a->inv_dirty)
			send_inventory(a);
		return;
	}
	if (code == 0 || code >= 500 || code == 408 || code == 429) {
		const char *url = a->targets[target].ctl->url;
		if (!a->backoff_ms)
			log_warn("agent", "controller %s: %s; resending the inventory with backoff",
			         url, why);
		else
			log_debug("agent", "controller %s: %s", url, why);
		/* A member that is gone, or knows no leader: another may answer. */
		if (target == a->cur)
			a->cur = (a->cur + 1) % a->ntargets;
		a->backoff_ms = a->backoff_ms ? a->backoff_ms * 2 : AGENT_BACKOFF_MIN_MS;
		if (a->backoff_ms > AGENT_BACKOFF_MAX_MS)
			a->backoff_ms = AGENT_BACKOFF_MAX_MS;
		struct timeval tv = { .tv_sec = a->backoff_ms / 1000,
			              .tv_usec = (suseconds_t)(a->backoff_ms % 1000) * 1000 };
		evtimer_add(a->ev_retry, &tv);
		return;
	}
	/* Sending the same body again cannot help: wait for a change or the next heartbeat. */
	if (strcmp(a->refused, why) != 0)
		log_error("agent", "controller refused the inventory of %s: %s", a->cfg->server,
		          why);
	else
		log_debug("agent", "controller still refuses the inventory: %s", why);
	snprintf(a->refused, sizeof(a->refused), "%s", why);
	a->backoff_ms = 0;
	if (a->inv_dirty)
		send_inventory(a);
}

static void runs_done(struct agent *a, const struct agent_call *c, struct evhttp_request *req,
                      int code, const char *why);
static void device_done(struct agent *a, const struct agent_call *c, int code, const char *why);

/*
 * A member of the controller's cluster that does not lead answers 307 with the leader's
 * URL: the agent moves there when it is one of its controller addresses (its token goes
 * to those only). True when it moved.
 */
static bool follow(struct agent *a, const struct agent_call *c, struct evhttp_request *req)
{
	const char *loc = evhttp_find_header(evhttp_request_get_input_headers(req), "Location");
	const char *rest = loc ? strstr(loc, "://") : NULL;
	size_t len = rest ? (size_t)(rest + 3 - loc) + strcspn(rest + 3, "/") : 0;
	char host[256];
	uint16_t port;
	bool tls;
	if (!rest || url_split(loc, len, &tls, host, sizeof(host), &port) < 0)
		return false;
	for (size_t i = 0; i < a->ntargets; i++) {
		const struct agent_controller *ctl = a->targets[i].ctl;
		if (tls != a->cfg->tls || port != ctl->port || strcasecmp(host, ctl->host) != 0)
			continue;
		if (i == c->target)
			return false; /* sent back to itself: no way on */
		if (i != a->cur)
			log_info("agent", "%s does not lead: following it to %s",
			         a->targets[c->target].ctl->url, ctl->url);
		a->cur = i; /* another call's 307 may have moved there already */
		return true;
	}
	if (strncmp(a->redirect_refused, loc, len) != 0 || a->redirect_refused[len]) {
		log_error("agent",
		          "%s redirects to %.*s, which is not one of [agent] controller: list "
		          "every member of the cluster there (the token goes to those only)",
		          a->targets[c->target].ctl->url, (int)len, loc);
		snprintf(a->redirect_refused, sizeof(a->redirect_refused), "%.*s", (int)len, loc);
	}
	return false;
}

static struct device_report *device_report(struct agent *a, int32_t index);
static void put_device(struct agent *a, struct device_report *d, int32_t index, bool failed);

/* A call redirected to the leader goes again at once, there. */
static void send_again(struct agent *a, const struct agent_call *c)
{
	if (c->kind == CALL_INVENTORY) {
		a->inv_inflight = false;
		send_inventory(a);
		return;
	}
	struct device_report *d = device_report(a, c->device);
	if (!d)
		return;
	d->inflight = false;
	/* A newer state that waited for this one's answer goes instead. */
	bool failed = d->pending ? d->failed : c->failed;
	d->pending = false;
	put_device(a, d, c->device, failed);
}

static void on_request_done(struct evhttp_request *req, void *arg)
{
	struct agent_call *c = arg;
	struct agent *a = c->a;
	int code = req ? evhttp_request_get_response_code(req) : 0;
	char why[320];

	call_unlink(a, c);
	/* A runs file goes to the leader with the next round, as after any refusal. */
	if ((code == 307 || code == 308) && follow(a, c, req) && c->kind != CALL_RUNS) {
		send_again(a, c);
		free(c);
		return;
	}
	if (code == 0)
		snprintf(why, sizeof(why), "%s", c->why[0] ? c->why : "connection failed");
	else {
		char msg[256];
		reply_message(req, msg, sizeof(msg));
		snprintf(why, sizeof(why), "HTTP %d%s%s", code, msg[0] ? ": " : "", msg);
	}
	if (c->kind == CALL_INVENTORY) {
		inventory_done(a, c->target, code, why);
	} else if (c->kind == CALL_RUNS) {
		runs_done(a, c, req, code, why);
	} else {
		device_done(a, c, code, why);
	}
	free(c);
}

static void free_body(const void *data, size_t len, void *extra)
{
	(void)len;
	(void)extra;
	free((void *)data);
}

static struct agent_link *link_of(struct agent *a, bool bulk);

/*
 * Queues method (PUT or POST) path with body, a JSON text of len bytes (stolen), to the
 * current target, on its bulk link (runs files) or the main one; c (stolen) is called
 * back in on_request_done(). Returns 0 or -errno (c and body freed).
 */
static int request(struct agent *a, bool bulk, struct agent_call *c, enum evhttp_cmd_type method,
                   const char *path, char *body, size_t len)
{
	struct agent_link *l = link_of(a, bulk);
	struct evhttp_request *req = l ? evhttp_request_new(on_request_done, c) : NULL;
	int rc = -ENOMEM;
	if (!req || !body)
		goto fail;
	evhttp_request_set_error_cb(req, on_request_error);
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Host", a->targets[a->cur].hostport);
	evhttp_add_header(h, "Content-Type", "application/json");
	if (a->cfg->token[0]) {
		char auth[AUTH_SECRET_MAX + 16];
		snprintf(auth, sizeof(auth), "Bearer %s", a->cfg->token);
		evhttp_add_header(h, "Authorization", auth);
		explicit_bzero(auth, sizeof(auth));
	}
	/* By reference: a runs file may be 16 MiB, not worth a copy. */
	if (len && evbuffer_add_reference(evhttp_request_get_output_buffer(req), body, len,
	                                  free_body, NULL) < 0)
		goto fail;
	if (!len)
		free(body);
	body = NULL;
	c->a = a;
	c->link = l;
	c->target = a->cur;
	c->next = a->calls;
	if (c->next)
		c->next->prev = c;
	a->calls = c;
	if (evhttp_make_request(l->conn, req, method, path) < 0) {
		/* The request is freed by libevent; ours is unlinked here. */
		call_unlink(a, c);
		rc = -EIO;
		req = NULL;
		goto fail;
	}
	return 0;
fail:
	if (req)
		evhttp_request_free(req);
	free(body);
	free(c);
	return rc;
}

static void send_inventory(struct agent *a)
{
	if (a->inv_inflight) {
		a->inv_dirty = true;
		return;
	}
	a->inv_dirty = false;
	evtimer_del(a->ev_retry);
	struct agent_call *c = calloc(1, sizeof(*c));
	json_t *body = json_deep_copy(a->report);
	if (body)
		json_object_set_new(body, "interval", json_integer(a->cfg->heartbeat_s));
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!c) {
		free(text);
		log_error("agent", "out of memory");
		return;
	}
	c->kind = CALL_INVENTORY;
	a->inv_inflight = true;
	if (request(a, false, c, EVHTTP_REQ_PUT, a->inv_path, text, text ? strlen(text) : 0) < 0) {
		a->inv_inflight = false;
		log_error("agent", "cannot queue the inventory request");
		/* Try again like after a failed delivery, not in a tight loop. */
		inventory_done(a, a->cur, 0, "cannot queue the request");
	}
}

/* The device's report slot, added when new; NULL when out of memory. */
static struct device_report *device_report(struct agent *a, int32_t index)
{
	for (size_t i = 0; i < a->ndevs; i++)
		if (a->devs[i].index == index)
			return &a->devs[i];
	struct device_report *v = realloc(a->devs, (a->ndevs + 1) * sizeof(*v));
	if (!v)
		return NULL;
	a->devs = v;
	v[a->ndevs] = (struct device_report){ .index = index };
	return &v[a->ndevs++];
}

static void put_device(struct agent *a, struct device_report *d, int32_t index, bool failed)
{
	char path[160];
	struct agent_call *c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->kind = CALL_DEVICE;
	c->device = index;
	c->failed = failed;
	snprintf(path, sizeof(path), "/v1/servers/%s/devices/%d", a->cfg->server, index);
	json_t *j = json_pack("{s:s}", "state", failed ? "failed" : "ok");
	char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (request(a, false, c, EVHTTP_REQ_PUT, path, body, body ? strlen(body) : 0) < 0)
		log_warn("agent", "cannot queue the state of device %d", index);
	else if (d)
		d->inflight = true;
}

static void send_device(struct agent *a, int32_t index, bool failed)
{
	struct device_report *d = device_report(a, index);
	if (d && d->inflight) {
		d->pending = true; /* goes when the one in flight is answered */
		d->failed = failed;
		return;
	}
	put_device(a, d, index, failed);
}

static void device_done(struct agent *a, const struct agent_call *c, int code, const char *why)
{
	if (code >= 200 && code < 300)
		log_info("agent", "device %d reported %s", c->device, c->failed ? "failed" : "ok");
	else
		log_warn("agent", "device %d state not delivered (%s); the inventory carries it",
		         c->device, why);
	struct device_report *d = device_report(a, c->device);
	if (!d)
		return;
	d->inflight = false;
	if (d->pending) {
		d->pending = false;
		put_device(a, d, d->index, d->failed);
	}
}

/* ---- inventory ----------------------------------------------------------- */

static void summarize(const struct rdma_inventory *inv, char *out, size_t len)
{
	size_t mapped = 0, up = 0;
	if (!inv->rdma) {
		snprintf(out, len, "no RDMA: %s", inv->reason);
		return;
	}
	for (size_t i = 0; i < inv->ndevices; i++) {
		for (size_t k = 0; k < inv->devices[i].nports; k++) {
			const struct rdma_port *p = &inv->devices[i].ports[k];
			if (p->index < 0)
				continue;
			mapped++;
			up += rdma_port_is_up(&inv->devices[i], p);
		}
	}
	snprintf(out, len, "%zu devices, %zu mapped ports, %zu of them up", inv->ndevices, mapped,
	         up);
}

/* Reads the source; sends when the inventory changed or force is set. */
static void refresh(struct agent *a, bool force, const char *why)
{
	struct rdma_inventory inv;
	char sum[RDMA_REASON_MAX + 32];

	if (a->ops->query(a->src, &inv) < 0) {
		log_error("agent", "cannot read the RDMA inventory: out of memory");
		return;
	}
	apply_map(a, &inv);
	json_t *j = rdma_inventory_to_json(&inv, RDMA_JSON_REPORT);
	summarize(&inv, sum, sizeof(sum));
	rdma_inventory_free(&inv);
	if (!j) {
		log_error("agent", "cannot build the inventory report: out of memory");
		return;
	}
	bool changed = !a->report || !json_equal(j, a->report);
	json_decref(a->report);
	a->report = j;
	if (changed)
		log_info("agent", "inventory (%s): %s", why, sum);
	if (changed || force)
		send_inventory(a);
}

static void on_rdma_event(void *arg, const char *device, unsigned port, enum rdma_event_kind kind)
{
	struct agent *a = arg;
	bool failed = kind != RDMA_EV_PORT_ACTIVE;
	const struct agent_map_entry *m = a->cfg->pci_order ? a->pmap : a->cfg->map;
	size_t n = a->cfg->pci_order ? a->npmap : a->cfg->nmap;

	for (size_t i = 0; i < n; i++) {
		if (strcmp(m[i].device, device) != 0 ||
		    (kind != RDMA_EV_DEVICE_FATAL && m[i].port != port))
			continue;
		log_info("agent", "%s port %u %s: device %u %s", device, m[i].port,
		         rdma_event_name(kind), m[i].index, failed ? "failed" : "ok");
		send_device(a, (int32_t)m[i].index, failed);
	}
	refresh(a, false, rdma_event_name(kind));
}

/* ---- runs files ---------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A file that keeps failing is warned about once a minute, not at every round. */
static void runs_defer(struct runs_file *mark, unsigned round, const char *why)
{
	double t = now_s();
	bool warn = !mark->warned || t - mark->warned >= AGENT_RUNS_WARN_S;
	mark->round = round;
	if (warn)
		mark->warned = t;
	log_msg(warn ? LOG_LVL_WARN : LOG_LVL_DEBUG, "agent",
	        "runs file %s not sent (%s); trying again at a later scan", mark->name, why);
}

/* After a file was handled: one that could not be moved must not go again. */
static void runs_moved(struct runs_file *mark, const struct runs_file *f, int rc, const char *sub)
{
	if (rc == 0 || rc == -ENOENT) /* moved, or removed by someone meanwhile */
		return;
	if (rc == -ESTALE) {
		log_warn(
		    "agent",
		    "runs file %s was replaced while it was sent; the new one goes at a later scan",
		    f->name);
		return;
	}
	log_error("agent",
	          "runs file %s: cannot move it into %s/: %s; not sent again until "
	          "the agent restarts",
	          f->name, sub, strerror(-rc));
	mark->held = true;
	mark->dev = f->dev;
	mark->ino = f->ino;
}

/* rejected/ with the .error holding line, the len bytes of the reason. */
static void runs_reject(struct agent *a, struct runs_file *mark, const struct runs_file *f,
                        const char *line, size_t len)
{
	int rc = runs_dir_write_error(a->runs_fd, f, line, len);
	if (rc < 0)
		log_error("agent", "runs file %s: cannot write rejected/%s.error: %s", f->name,
		          f->name, strerror(-rc));
	runs_moved(mark, f, runs_dir_move(a->runs_fd, f, "rejected"), "rejected");
}

static void runs_reject_local(struct agent *a, struct runs_file *f, const char *why)
{
	char line[256];
	snprintf(line, sizeof(line), "agent: %s", why);
	log_info("agent", "runs file %s rejected without sending it: %s", f->name, why);
	runs_reject(a, f, f, line, strlen(line));
}

/* "HTTP CODE BODY": the controller's whole refusal for the .error file. */
static void runs_reject_reply(struct agent *a, struct runs_file *mark, const struct runs_file *f,
                              struct evhttp_request *req, int code, const char *why)
{
	size_t n;
	const char *body = reply_body(req, AGENT_REPLY_MAX, &n);
	char head[32];
	int h = snprintf(head, sizeof(head), "HTTP %d%s", code, n ? " " : "");
	char *line = malloc((size_t)h + n);
	log_info("agent", "runs file %s rejected: %s", f->name, why);
	if (!line) {
		runs_reject(a, mark, f, head, (size_t)h);
		return;
	}
	memcpy(line, head, (size_t)h);
	if (n)
		memcpy(line + h, body, n);
	runs_reject(a, mark, f, line, (size_t)h + n);
	free(line);
}

static void runs_delivered(struct agent *a, struct runs_file *mark, const struct runs_file *f,
                           struct evhttp_request *req)
{
	json_t *j = reply_json(req);
	json_t *added = json_object_get(j, "added");
	if (json_is_integer(added))
		log_info("agent", "runs file %s sent: %" JSON_INTEGER_FORMAT " runs added", f->name,
		         json_integer_value(added));
	else
		log_info("agent", "runs file %s sent", f->name);
	json_decref(j);
	runs_moved(mark, f, runs_dir_move(a->runs_fd, f, "done"), "done");
}

/*
 * The controller refuses the file itself: sending it again cannot help. A 404 is never the
 * file's: this server not declared yet, or a controller older than the runs route.
 */
static bool runs_refused(int code)
{
	return code == 400 || code == 413 || code == 422;
}

/* The listed entry of the file sent (a scan may have listed it again meanwhile). */
static struct runs_file *runs_current(struct agent *a)
{
	size_t start = a->runs_next ? a->runs_next - 1 : 0; /* where it mostly is */
	for (size_t k = 0; k < a->nruns; k++) {
		struct runs_file *f = &a->runs[(start + k) % a->nruns];
		if (strcmp(f->name, a->runs_cur.name) == 0)
			return f;
	}
	return &a->runs_cur;
}

/*
 * The runs route with ?batch= the body's SHA-256: a file sent again after its answer was lost
 * (a controller that failed over, a 504) is taken once.
 */
static void runs_batch_path(const struct agent *a, const char *body, size_t len, char *path,
                            size_t pathlen)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	int at = snprintf(path, pathlen, "%s", a->runs_path);

	if (EVP_Digest(body, len, md, &mdlen, EVP_sha256(), NULL) != 1)
		return; /* without a batch: sent again, it would be taken twice */
	at += snprintf(path + at, pathlen - (size_t)at, "?batch=sha256-");
	for (unsigned i = 0; i < mdlen && (size_t)at + 2 < pathlen; i++)
		at += snprintf(path + at, pathlen - (size_t)at, "%02x", md[i]);
}

/* Starts the POST of f, or rejects, skips or defers it. */
static void runs_send(struct agent *a, struct runs_file *f)
{
	char why[160];
	char *body;
	size_t len;
	int rc = runs_dir_body(a->runs_fd, f, &body, &len, why, sizeof(why));
	if (rc == -ENOENT) /* gone since the scan */
		return;
	if (rc == -EFBIG || rc == -EILSEQ) {
		runs_reject_local(a, f, why);
		return;
	}
	if (rc < 0) {
		runs_defer(f, a->runs_round, why);
		return;
	}
	struct agent_call *c = calloc(1, sizeof(*c));
	if (!c) {
		free(body);
		runs_defer(f, a->runs_round, "out of memory");
		return;
	}
	c->kind = CALL_RUNS;
	c->round = a->runs_round;
	a->runs_cur = *f;
	a->runs_inflight = true;
	char path[sizeof(a->runs_path) + 80];
	runs_batch_path(a, body, len, path, sizeof(path));
	if (request(a, true, c, EVHTTP_REQ_POST, path, body, len) < 0) {
		a->runs_inflight = false;
		a->runs_blocked = a->runs_round;
		runs_defer(f, a->runs_round, "cannot queue the request");
		return;
	}
	log_debug("agent", "runs file %s: sending %zu bytes", f->name, len);
}

/* The next file of the round that is still to be tried, if the round goes on. */
static void runs_send_next(struct agent *a)
{
	while (!a->runs_inflight && a->runs_blocked != a->runs_round && a->runs_next < a->nruns) {
		struct runs_file *f = &a->runs[a->runs_next++];
		if (!f->held && f->round != a->runs_round)
			runs_send(a, f);
	}
}

static void runs_done(struct agent *a, const struct agent_call *c, struct evhttp_request *req,
                      int code, const char *why)
{
	struct runs_file *mark = runs_current(a);
	const struct runs_file *f = &a->runs_cur;

	a->runs_inflight = false;
	if (code >= 200 && code < 300) {
		runs_delivered(a, mark, f, req);
	} else if (runs_refused(code)) {
		runs_reject_reply(a, mark, f, req, code, why);
	} else {
		runs_defer(mark, c->round, why);
		/* A 500 may be this file's doing: the next goes on. The rest is no file's. */
		if (code != 500)
			a->runs_blocked = c->round;
	}
	runs_send_next(a);
}

static int cmp_name(const void *x, const void *y)
{
	return strcmp(((const struct runs_file *)x)->name, ((const struct runs_file *)y)->name);
}

/* What the agent knows of each file goes over to a new listing (old is reordered). */
static void runs_carry(struct runs_file *old, size_t nold, struct runs_file *files, size_t n)
{
	if (nold)
		qsort(old, nold, sizeof(*old), cmp_name);
	for (size_t i = 0; nold && i < n; i++) {
		const struct runs_file *o = bsearch(&files[i], old, nold, sizeof(*old), cmp_name);
		if (!o)
			continue;
		files[i].round = o->round;
		files[i].warned = o->warned;
		/* Held is for that file: one renamed over it is a new one. */
		files[i].held = o->held && o->dev == files[i].dev && o->ino == files[i].ino;
	}
}

/* A new round: lists the directory and sends its files, oldest first. */
static void runs_scan(struct agent *a)
{
	struct runs_file *files;
	size_t n;
	if (a->runs_fd < 0)
		return;
	int rc = runs_dir_scan(a->runs_fd, &files, &n);
	if (rc < 0) {
		double t = now_s();
		if (!a->runs_scan_warned || t - a->runs_scan_warned >= AGENT_RUNS_WARN_S) {
			log_warn("agent", "[agent] runs_dir %s: cannot list it: %s",
			         a->cfg->runs_dir, strerror(-rc));
			a->runs_scan_warned = t;
		}
		return;
	}
	runs_carry(a->runs, a->nruns, files, n);
	free(a->runs);
	a->runs = files;
	a->nruns = n;
	a->runs_next = 0;
	a->runs_round++;
	runs_send_next(a);
}

/* ---- loop ---------------------------------------------------------------- */

static void on_heartbeat(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	refresh(arg, true, "heartbeat");
	runs_scan(arg);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	(void)fd;
	(void)what;
	/* Re-read first: the retry carries the state of now, not of the failed attempt. */
	refresh(a, false, "retry");
	if (!a->inv_inflight)
		send_inventory(a);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct agent *a = arg;
	(void)what;
	if (sig == SIGHUP) {
		log_info("agent", "SIGHUP: reading and sending the inventory now");
		refresh(a, true, "SIGHUP");
		runs_scan(a);
		return;
	}
	log_info("agent", "stopping on signal %d", (int)sig);
	sd_notify(0, "STOPPING=1");
	event_base_loopbreak(a->base);
}

static bool host_is_numeric(const char *host)
{
	unsigned char buf[sizeof(struct in6_addr)];
	return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

/* The client context for https: certificates checked against ca_file or the system's CAs. */
static int tls_context(struct agent *a)
{
	const struct agent_config *cfg = a->cfg;
	a->ssl_ctx = SSL_CTX_new(TLS_client_method());
	if (!a->ssl_ctx) {
		log_error("agent", "cannot set up TLS to %s: %s", cfg->controller,
		          ERR_reason_error_string(ERR_get_error()));
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(a->ssl_ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(a->ssl_ctx, SSL_VERIFY_PEER, NULL);
	if (cfg->ca_file[0] ? SSL_CTX_load_verify_locations(a->ssl_ctx, cfg->ca_file, NULL) != 1
	                    : SSL_CTX_set_default_verify_paths(a->ssl_ctx) != 1) {
		log_error("agent", "[agent] ca_file: cannot load CA certificates from %s: %s",
		          cfg->ca_file[0] ? cfg->ca_file : "the system's store",
		          ERR_reason_error_string(ERR_get_error()));
		return -EINVAL;
	}
	return 0;
}

/*
 * An HTTPS connection: libevent's HTTP client over an OpenSSL bufferevent, the
 * controller's certificate checked against the host name or address of its
 * address in the controller setting.
 */
static int tls_link(struct agent *a, const struct agent_controller *ctl, struct agent_link *l)
{
	SSL *ssl = SSL_new(a->ssl_ctx);

	if (!ssl)
		goto fail;
	/* The certificate must name what the agent was told to reach. */
	if (host_is_numeric(ctl->host)
	        ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ctl->host) != 1
	        : SSL_set1_host(ssl, ctl->host) != 1 ||
	              SSL_set_tlsext_host_name(ssl, ctl->host) != 1)
		goto fail;
	l->bev = bufferevent_openssl_socket_new(a->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
	                                        BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (!l->bev)
		goto fail;
	ssl = NULL; /* the bufferevent's now */
	/* libmicrohttpd may close a connection without a TLS close_notify. */
	bufferevent_openssl_set_allow_dirty_shutdown(l->bev, 1);
	l->conn =
	    evhttp_connection_base_bufferevent_new(a->base, a->dns, l->bev, ctl->host, ctl->port);
	if (!l->conn) {
		bufferevent_free(l->bev);
		l->bev = NULL;
		goto fail;
	}
	return 0;
fail:
	SSL_free(ssl);
	log_error("agent", "cannot set up TLS to %s: %s", ctl->url,
	          ERR_reason_error_string(ERR_get_error()));
	return -ENOMEM;
}

/*
 * The current target's connection for runs files (bulk) or the rest, made on first use,
 * http or https; NULL when it cannot be made.
 */
static struct agent_link *link_of(struct agent *a, bool bulk)
{
	struct agent_target *t = &a->targets[a->cur];
	struct agent_link *l = bulk ? &t->bulk : &t->main;
	if (l->conn)
		return l;
	if (a->cfg->tls ? tls_link(a, t->ctl, l) < 0
	                : !(l->conn = evhttp_connection_base_new(a->base, a->dns, t->ctl->host,
	                                                         t->ctl->port))) {
		log_error("agent", "cannot create the HTTP client for %s", t->ctl->url);
		return NULL;
	}
	evhttp_connection_set_timeout(l->conn, AGENT_HTTP_TIMEOUT_S);
	return l;
}

/* [agent] runs_dir: the directory, with done/ and rejected/, and a connection for it. */
static int runs_open(struct agent *a)
{
	char err[1200];
	int fd = runs_dir_open(a->cfg->runs_dir, err, sizeof(err));
	if (fd < 0) {
		log_error("agent", "[agent] runs_dir %s", err);
		return fd;
	}
	a->runs_fd = fd;
	snprintf(a->runs_path, sizeof(a->runs_path), "/v1/servers/%s/runs", a->cfg->server);
	return 0;
}

static int agent_start(struct agent *a, const struct agent_config *cfg)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
	struct rdma_source_conf sc = {
		.inventory_path = cfg->recorded_inventory,
		.events_path = cfg->recorded_events[0] ? cfg->recorded_events : NULL,
	};
	char err[768];
	int rc;

	a->cfg = cfg;
	a->runs_fd = -1;
	snprintf(a->inv_path, sizeof(a->inv_path), "/v1/servers/%s/inventory", cfg->server);
	bool names = false;
	for (size_t i = 0; i < cfg->ncontrollers; i++) {
		const struct agent_controller *ctl = &cfg->controllers[i];
		struct agent_target *t = &a->targets[a->ntargets++];
		t->ctl = ctl;
		snprintf(t->hostport, sizeof(t->hostport),
		         strchr(ctl->host, ':') ? "[%s]:%u" : "%s:%u", ctl->host, ctl->port);
		names = names || !host_is_numeric(ctl->host);
	}
	a->base = event_base_new();
	if (!a->base) {
		log_error("agent", "cannot create the event loop");
		return -ENOMEM;
	}
	/*
	 * First: a stop asked for while the agent starts (it may make runs_dir's directories)
	 * ends it with status 0 once its loop runs, rather than by the signal's default.
	 */
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		a->ev_sig[i] = evsignal_new(a->base, sigs[i], on_signal, a);
		if (!a->ev_sig[i] || event_add(a->ev_sig[i], NULL) < 0)
			return -ENOMEM;
	}
	if (names) {
		/* Resolving on the loop keeps events flowing while DNS is slow. */
		a->dns = evdns_base_new(a->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
		                                     EVDNS_BASE_DISABLE_WHEN_INACTIVE);
		if (!a->dns)
			log_warn("agent", "no asynchronous resolver; resolving %s blocks the loop",
			         cfg->controller);
	}
	rc = cfg->tls ? tls_context(a) : 0;
	if (rc == 0 && !link_of(a, false))
		rc = -ENOMEM;
	/* Runs go on a connection of their own: a large file never holds up a device's state. */
	if (rc == 0 && cfg->runs_dir[0])
		rc = runs_open(a);
	if (rc < 0)
		return rc;

	a->ops = cfg->source;
	rc = a->ops->open(a->base, &sc, on_rdma_event, a, &a->src, err, sizeof(err));
	if (rc < 0) {
		log_error("agent", "RDMA source %s: %s", a->ops->name, err);
		return rc;
	}
	a->ev_heartbeat = event_new(a->base, -1, EV_PERSIST, on_heartbeat, a);
	a->ev_retry = evtimer_new(a->base, on_retry, a);
	struct timeval hb = { .tv_sec = cfg->heartbeat_s, .tv_usec = 0 };
	if (!a->ev_heartbeat || !a->ev_retry || event_add(a->ev_heartbeat, &hb) < 0)
		return -ENOMEM;
	log_info("agent", "ofcd-agent %s: server %s, controller %s, source %s, heartbeat %u s, %s",
	         OFCD_VERSION, cfg->server, cfg->controller, a->ops->name, cfg->heartbeat_s,
	         cfg->pci_order ? "map = pci-order" : "device.N map");
	for (size_t i = 0; i < cfg->nmap; i++)
		log_info("agent", "device %u = %s:%u", cfg->map[i].index, cfg->map[i].device,
		         cfg->map[i].port);
	if (cfg->runs_dir[0])
		log_info("agent", "sending measured runs from %s", cfg->runs_dir);
	refresh(a, true, "start");
	runs_scan(a);
	return 0;
}

static void agent_stop(struct agent *a)
{
	/*
	 * Freeing a connection (and its TLS bufferevent) drops its requests without
	 * calling back: free ours too.
	 */
	for (size_t i = 0; i < a->ntargets; i++) {
		if (a->targets[i].main.conn)
			evhttp_connection_free(a->targets[i].main.conn);
		if (a->targets[i].bulk.conn)
			evhttp_connection_free(a->targets[i].bulk.conn);
	}
	if (a->runs_fd >= 0)
		close(a->runs_fd);
	free(a->runs);
	if (a->ssl_ctx)
		SSL_CTX_free(a->ssl_ctx);
	while (a->calls) {
		struct agent_call *c = a->calls;
		a->calls = c->next;
		free(c);
	}
	if (a->dns)
		evdns_base_free(a->dns, 0);
	if (a->ops)
		a->ops->close(a->src);
	if (a->ev_heartbeat)
		event_free(a->ev_heartbeat);
	if (a->ev_retry)
		event_free(a->ev_retry);
	for (size_t i = 0; i < sizeof(a->ev_sig) / sizeof(a->ev_sig[0]); i++)
		if (a->ev_sig[i])
			event_free(a->ev_sig[i]);
	json_decref(a->report);
	free(a->pmap);
	free(a->devs);
	if (a->base)
		event_base_free(a->base);
	memset(a, 0, sizeof(*a));
}

int agent_run(const struct agent_config *cfg)
{
	struct agent a;
	memset(&a, 0, sizeof(a));
	log_set_level(cfg->log_level);
	signal(SIGPIPE, SIG_IGN);
	int rc = agent_start(&a, cfg);
	if (rc == 0) {
		sd_notify(0, "READY=1");
		event_base_dispatch(a.base);
		log_info("agent", "stopped");
	}
	agent_stop(&a);
	return rc;
}
