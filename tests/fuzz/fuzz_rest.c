/*
 * The REST API behind the transport: requests from the input go through the
 * request policy (api_begin: route, token, query, media type) and the
 * dispatch layer (api_dispatch) to the real handlers, a real store on the
 * demo topology (two sim units, eight servers) and a real reconciler, as
 * tests/unit/test_dispatch.c drives them,
 * without a socket (libmicrohttpd's own parsing is not ours to fuzz).
 *
 * Input: up to MAX_REQS requests, separated by a line "%%". Each is written
 * like HTTP:
 *     METHOD PATH[?QUERY]
 *     Header: value          (optional lines)
 *                            (an empty line, then the body, possibly empty)
 *     BODY
 * QUERY is NAME=VALUE pairs joined by '&', taken as they are. Headers: any
 * (handlers read Last-Event-ID); "Agent: SERVER" makes the request carry the
 * agent token of SERVER (otherwise it is unauthenticated, which without
 * configured tokens means admin, as in the daemon), and the role check of
 * http.c is applied. The body is parsed as http.c parses it.
 *
 * Every input starts from a fresh copy of a store migrated and loaded once
 * (in $TMPDIR, else /dev/shm), so a crash replays from its input alone. Between requests the loop
 * turns a few times, so the reconciler applies what a request changed on the sim units; a request
 * still suspended (?wait=) then is aborted as by a client that went away, and event streams end
 * with the input.
 *
 * Checked: every request is answered (or suspended), never with a 5xx; an
 * error reply has the documented shape; no transaction is left open; after
 * the last request the in-memory desired state (desired.c) equals the
 * circuit table and the port owners it mirrors (mirror.h).
 * Endpoints that would open real sockets (the openflow driver's "tcp:" and
 * "ptcp:") are left out: fuzz_openflow covers that driver.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/event.h>

#include "api/api.h"
#include "base/config.h"
#include "domain/demo.h"
#include "state/desired.h"
#include "base/events.h"
#include "fuzz.h"
#include "mirror.h"
#include "log.h"
#include "reconcile/reconcile.h"
#include "state/store_sql.h"

#define MAX_REQS    8
#define MAX_QUERY   8
#define MAX_HEADERS 8
#define MAX_STREAMS MAX_REQS
#define STREAM_CAP  (16 * 1024) /* queued bytes before a stream counts as too slow */
#define LOOP_TURNS  16

struct kv {
	char *key, *value;
};

/* A request as this transport holds it. */
struct fuzz_req {
	struct api_req api;
	char params[512];
	struct kv query[MAX_QUERY];
	size_t nquery;
	struct kv headers[MAX_HEADERS];
	size_t nheaders;
	struct auth_token token;
};

/* An event stream: bytes counted, never sent. */
struct fuzz_stream {
	struct api_stream api;
	size_t queued;
	bool ending;
	api_stream_close_fn on_close;
	void *arg;
};

static char dir[256];
static char db[300];
/* The store after migrations and the demo topology, made once: copied for each input. */
static char *template_db;
static size_t template_len;

static struct {
	struct event_base *base;
	struct ofcd_config cfg;
	struct store *store;
	struct desired *desired;
	struct events *events;
	struct reconciler *reconciler;
	struct domain_units units;
	struct api_env env;
	struct fuzz_stream *streams[MAX_STREAMS];
	size_t nstreams;
} w;

static void check(bool ok, const char *what, const struct api_req *req)
{
	if (!ok) {
		char *reply = req->reply ? json_dumps(req->reply, JSON_ENCODE_ANY) : NULL;
		fprintf(stderr, "fuzz_rest: %s: %s %s -> %u %s\n", what, req->method, req->path,
		        req->status, reply ? reply : "");
		free(reply);
		abort();
	}
}

static void t_resume(struct api_req *req)
{
	req->suspended = false;
}

static const char *lookup(const struct kv *v, size_t n, const char *key, bool nocase)
{
	for (size_t i = 0; i < n; i++)
		if (nocase ? strcasecmp(v[i].key, key) == 0 : strcmp(v[i].key, key) == 0)
			return v[i].value;
	return NULL;
}

static const char *t_query(struct api_req *req, const char *key)
{
	struct fuzz_req *r = req->transport_arg;
	return lookup(r->query, r->nquery, key, false);
}

static const char *t_header(struct api_req *req, const char *name)
{
	struct fuzz_req *r = req->transport_arg;
	const char *v = lookup(r->headers, r->nheaders, name, true);
	/* A body is JSON unless the input says otherwise: the handlers are the target. */
	return v || strcasecmp(name, "Content-Type") != 0 ? v : "application/json";
}

static void t_query_names(struct api_req *req, bool (*fn)(void *arg, const char *name), void *arg)
{
	struct fuzz_req *r = req->transport_arg;
	for (size_t i = 0; i < r->nquery && fn(arg, r->query[i].key); i++)
		;
}

static struct api_stream *t_stream_start(struct api_req *req, const char *content_type,
                                         api_stream_close_fn on_close, void *arg);

static int t_stream_write(struct api_stream *s, const char *data, size_t len)
{
	struct fuzz_stream *st = (struct fuzz_stream *)s;
	(void)data;
	if (st->ending)
		return -EPIPE;
	if (st->queued + len > STREAM_CAP) {
		st->ending = true;
		return -ENOBUFS;
	}
	st->queued += len;
	return 0;
}

static void t_stream_end(struct api_stream *s)
{
	((struct fuzz_stream *)s)->ending = true;
}

static const struct api_transport fuzz_transport = {
	.resume = t_resume,
	.query = t_query,
	.header = t_header,
	.query_names = t_query_names,
	.stream_start = t_stream_start,
	.stream_write = t_stream_write,
	.stream_end = t_stream_end,
};

static struct api_stream *t_stream_start(struct api_req *req, const char *content_type,
                                         api_stream_close_fn on_close, void *arg)
{
	struct fuzz_stream *st = w.nstreams < MAX_STREAMS ? calloc(1, sizeof(*st)) : NULL;
	(void)content_type;
	if (!st) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		return NULL;
	}
	st->api.transport = &fuzz_transport;
	st->on_close = on_close;
	st->arg = arg;
	w.streams[w.nstreams++] = st;
	req->status = 200;
	return &st->api;
}

static void remove_db(void)
{
	static const char *const suffix[] = { "", "-wal", "-shm", "-journal" };
	char p[320];
	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", db, suffix[i]);
		unlink(p);
	}
}

static void turn_loop(void)
{
	for (int i = 0; i < LOOP_TURNS; i++)
		event_base_loop(w.base, EVLOOP_NONBLOCK);
}

static void fail_setup(const char *what, const char *err)
{
	fprintf(stderr, "fuzz_rest: %s: %s\n", what, err);
	exit(1);
}

static void write_db(void)
{
	FILE *f = fopen(db, "wb");
	if (!f || fwrite(template_db, 1, template_len, f) != template_len || fclose(f) != 0)
		fail_setup("write", db);
}

/* Migrating an empty store costs more than everything an input does: done once. */
static void make_template(void)
{
	struct store *st;
	char err[256] = "";
	long len = 0;
	remove_db();
	if (store_open(db, &st, err, sizeof(err)) < 0 || demo_load(st) < 0)
		fail_setup("template", err);
	store_close(st);
	FILE *f = fopen(db, "rb");
	if (!f || fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) < 0)
		fail_setup("template", db);
	template_len = (size_t)len;
	template_db = malloc(template_len);
	if (!template_db || fread(template_db, 1, template_len, f) != template_len)
		fail_setup("template", db);
	fclose(f);
}

/* The daemon's parts as ofcd.c composes them, on a copy of the template store. */
static void world_up(void)
{
	char err[256] = "";
	remove_db();
	write_db();
	w.base = event_base_new();
	if (!w.base || config_defaults(&w.cfg, err, sizeof(err)) < 0)
		fail_setup("setup", err);
	/* Fault injection is a route too. */
	w.cfg.debug_faults = true;
	if (store_open(db, &w.store, err, sizeof(err)) < 0)
		fail_setup("store_open", err);
	if (desired_open(w.store, &w.desired) < 0 || events_new(&w.events) < 0)
		fail_setup("setup", "desired state or events");
	struct reconcile_deps deps = {
		.base = w.base, .store = w.store, .desired = w.desired, .events = w.events
	};
	if (reconcile_init(&deps, &w.reconciler) < 0)
		fail_setup("setup", "reconciler");
	w.units = reconcile_domain_units(w.reconciler);
	w.env = (struct api_env){ .base = w.base,
		                  .cfg = &w.cfg,
		                  .store = w.store,
		                  .desired = w.desired,
		                  .reconciler = w.reconciler,
		                  .units = &w.units,
		                  .events = w.events };
	clock_gettime(CLOCK_MONOTONIC, &w.env.started);
	turn_loop();
}

static void world_down(void)
{
	for (size_t i = 0; i < w.nstreams; i++) {
		w.streams[i]->on_close(w.streams[i]->arg);
		free(w.streams[i]);
	}
	w.nstreams = 0;
	reconcile_free(w.reconciler);
	events_free(w.events);
	desired_free(w.desired);
	store_close(w.store);
	event_base_free(w.base);
	config_free(&w.cfg);
	memset(&w, 0, sizeof(w));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "%s/ofcd-fuzz-rest-XXXXXX",
	         tmp && *tmp ? tmp : (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"));
	if (!mkdtemp(dir))
		fail_setup("mkdtemp", dir);
	snprintf(db, sizeof(db), "%s/fuzz.db", dir);
	/* Refusals are the daemon's everyday work here: only errors are worth a line. */
	log_set_level(LOG_LVL_ERROR);
	make_template();
	return 0;
}

static void cleanup(void) __attribute__((destructor));
static void cleanup(void)
{
	if (!dir[0])
		return;
	free(template_db);
	remove_db();
	rmdir(dir);
}

/* Splits "k=v&k2=v2" (in place) into r->query. */
static void parse_query(struct fuzz_req *r, char *q)
{
	for (char *save = NULL, *kv = strtok_r(q, "&", &save); kv && r->nquery < MAX_QUERY;
	     kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		if (eq)
			*eq++ = '\0';
		r->query[r->nquery++] = (struct kv){ kv, eq ? eq : "" };
	}
}

/* "Name: value" lines up to an empty one; returns the rest (the body). */
static char *parse_headers(struct fuzz_req *r, char *p)
{
	while (p && *p && *p != '\n') {
		char *nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		char *colon = strchr(p, ':');
		if (colon && r->nheaders < MAX_HEADERS) {
			*colon++ = '\0';
			while (*colon == ' ')
				colon++;
			r->headers[r->nheaders++] = (struct kv){ p, colon };
		}
		p = nl ? nl + 1 : NULL;
	}
	return p && *p == '\n' ? p + 1 : p;
}

/* What the tests' agent header stands for (an AGENT token), and the body parse of http.c. */
static bool admit(struct fuzz_req *r, const char *body, size_t body_len)
{
	struct api_req *a = &r->api;
	const char *agent = lookup(r->headers, r->nheaders, "Agent", true);
	if (agent) {
		snprintf(r->token.name, sizeof(r->token.name), "agent");
		snprintf(r->token.server, sizeof(r->token.server), "%s", agent);
		r->token.role = AUTH_AGENT;
		a->token = &r->token;
		if (a->route->role > AUTH_AGENT)
			return false;
	}
	if (body_len) {
		json_error_t jerr;
		a->body =
		    json_loadb(body, body_len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
		if (!a->body)
			return false;
		char *text = json_dumps(a->body, JSON_ENCODE_ANY);
		bool sockets = text && strstr(text, "tcp:");
		free(text);
		if (sockets)
			return false;
	}
	return true;
}

static void check_reply(const struct api_req *a)
{
	check(a->status >= 200 && a->status < 500, "status out of range", a);
	check(!store_in_txn(w.store), "a transaction left open", a);
	if (a->status >= 400) {
		json_t *e = json_object_get(a->reply, "error");
		check(json_is_string(json_object_get(e, "code")) &&
		          json_is_string(json_object_get(e, "message")),
		      "an error without code and message", a);
	}
}

static void run_one(char *text, size_t len)
{
	struct fuzz_req *r = calloc(1, sizeof(*r));
	char allow[128];

	if (!r)
		return;
	char *nl = memchr(text, '\n', len);
	char *body = nl ? parse_headers(r, nl + 1) : NULL;
	if (nl)
		*nl = '\0';
	size_t body_len = body ? len - (size_t)(body - text) : 0;
	char *sp = strchr(text, ' ');
	if (!sp)
		goto out;
	*sp = '\0';
	char *path = sp + 1;
	char *q = strchr(path, '?');
	if (q) {
		*q++ = '\0';
		parse_query(r, q);
	}
	struct api_req *a = &r->api;
	a->env = &w.env;
	a->transport = &fuzz_transport;
	a->transport_arg = r;
	a->method = text;
	a->path = path;
	a->client = "192.0.2.1";
	if (!api_begin(a, r->params, sizeof(r->params), allow, sizeof(allow))) {
		check(a->status >= 200 && a->status < 500, "a refusal before the body is a 5xx", a);
		goto out;
	}
	if (!admit(r, body, body_len))
		goto out;
	api_dispatch(a);
	check(a->status != 0, "no reply", a);
	turn_loop();
	if (a->suspended) {
		/* The client gives up, as http.c reports a closed connection. */
		a->suspended = false;
		if (a->on_abort)
			a->on_abort(a, true);
	} else {
		check_reply(a);
	}
out:
	api_req_release(&r->api);
	json_decref(r->api.body);
	json_decref(r->api.reply);
	api_reply_text_drop(&r->api);
	free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* NUL-terminated, with room to cut requests apart in place. */
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	world_up();
	char *p = text;
	for (int n = 0; n < MAX_REQS && p; n++) {
		char *sep = strstr(p, "\n%%\n");
		size_t len = sep ? (size_t)(sep - p) : strlen(p);
		p[len] = '\0';
		run_one(p, len);
		p = sep ? sep + 4 : NULL;
	}
	mirror_check("fuzz_rest", w.store, w.desired);
	world_down();
	free(text);
	return 0;
}
