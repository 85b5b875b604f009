/*
 * The API's unit of work without a socket: requests driven through
 * api_dispatch() with a test transport against a real store, the demo
 * topology and a real reconciler. A write commits with its audit row and
 * runs the commit hook, a refusal changes nothing but the audit trail, reads
 * take no transaction, ?wait= suspends and resumes from the event bus, and
 * the event stream is a bus subscriber writing through the transport.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "api/api.h"
#include "base/config.h"
#include "domain/demo.h"
#include "state/desired.h"
#include "base/events.h"
#include "base/worker.h"
#include "reconcile/reconcile.h"
#include "state/store_sql.h"

static char dir[64];
static char path[256];

/* A request as the test transport holds it. */
struct test_req {
	struct api_req api;
	char params[256];
	const char *query_key, *query_value;
	const char *extra_query;   /* another query parameter's name, or NULL */
	const char *last_event_id; /* the Last-Event-ID header, or NULL */
	const char *authorization; /* the Authorization header, or NULL */
	const char *content_type;  /* NULL: application/json */
	int resumed;
};

/* A stream as the test transport holds it: every byte written, kept. */
struct test_stream {
	struct api_stream api;
	char data[4096];
	size_t len;
	api_stream_close_fn on_close;
	void *arg;
};

static struct test_stream *last_stream;

static void t_resume(struct api_req *req)
{
	struct test_req *r = req->transport_arg;
	req->suspended = false;
	r->resumed++;
}

static const char *t_query(struct api_req *req, const char *key)
{
	struct test_req *r = req->transport_arg;
	return r->query_key && strcmp(key, r->query_key) == 0 ? r->query_value : NULL;
}

static const char *t_header(struct api_req *req, const char *name)
{
	struct test_req *r = req->transport_arg;
	if (strcasecmp(name, "Content-Type") == 0)
		return r->content_type ? r->content_type : "application/json";
	if (strcasecmp(name, "Authorization") == 0)
		return r->authorization;
	return strcasecmp(name, "Last-Event-ID") == 0 ? r->last_event_id : NULL;
}

static void t_query_names(struct api_req *req, bool (*fn)(void *arg, const char *name), void *arg)
{
	struct test_req *r = req->transport_arg;
	if (r->query_key && fn(arg, r->query_key) && r->extra_query)
		fn(arg, r->extra_query);
}

static struct api_stream *t_stream_start(struct api_req *req, const char *content_type,
                                         api_stream_close_fn on_close, void *arg);

static int t_stream_write(struct api_stream *s, const char *data, size_t len)
{
	struct test_stream *t = (struct test_stream *)s;
	if (t->len + len >= sizeof(t->data))
		return -ENOBUFS;
	memcpy(t->data + t->len, data, len);
	t->len += len;
	t->data[t->len] = '\0';
	return 0;
}

static void t_stream_end(struct api_stream *s)
{
	struct test_stream *t = (struct test_stream *)s;
	t->on_close(t->arg);
	if (last_stream == t)
		last_stream = NULL;
	free(t);
}

static const struct api_transport test_transport = {
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
	struct test_stream *t = calloc(1, sizeof(*t));
	assert_non_null(t);
	assert_string_equal(content_type, "text/event-stream");
	t->api.transport = &test_transport;
	t->on_close = on_close;
	t->arg = arg;
	req->status = 200;
	last_stream = t;
	return &t->api;
}

struct fixture {
	struct event_base *base;
	struct ofcd_config cfg;
	struct store *store;
	struct desired *desired;
	struct events *events;
	struct reconciler *reconciler;
	struct domain_units units;
	struct api_env env;
	int commits;
};

/* What the reconciler hears: a commit changed what some unit should hold. */
static void on_changed(void *arg, struct desired *d)
{
	struct fixture *f = arg;
	(void)d;
	f->commits++;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char err[256];
	snprintf(dir, sizeof(dir), "/tmp/ofcd-dispatch-XXXXXX");
	if (!f || !mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/t.db", dir);
	f->base = event_base_new();
	if (!f->base || config_defaults(&f->cfg, err, sizeof(err)) < 0 ||
	    store_open(path, &f->store, err, sizeof(err)) < 0 ||
	    desired_open(f->store, &f->desired) < 0 || demo_load(f->store) < 0 ||
	    events_new(&f->events) < 0)
		return -1;
	struct reconcile_deps deps = {
		.base = f->base, .store = f->store, .desired = f->desired, .events = f->events
	};
	if (reconcile_init(&deps, &f->reconciler) < 0)
		return -1;
	f->units = reconcile_domain_units(f->reconciler);
	f->env = (struct api_env){ .base = f->base,
		                   .cfg = &f->cfg,
		                   .store = f->store,
		                   .desired = f->desired,
		                   .reconciler = f->reconciler,
		                   .units = &f->units,
		                   .events = f->events };
	if (desired_changed_hook_add(&desired_hooks(f->desired)->changed, on_changed, f) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	reconcile_free(f->reconciler);
	events_free(f->events);
	desired_free(f->desired);
	store_close(f->store);
	event_base_free(f->base);
	config_free(&f->cfg);
	free(f);
	char p[300];
	const char *suffix[] = { "", "-wal", "-shm" };
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
		unlink(p);
	}
	rmdir(dir);
	return 0;
}

/* A request as the transport hands it over, before api_begin(). */
static struct test_req *req_new(struct fixture *f, const char *method, const char *path_)
{
	struct test_req *r = calloc(1, sizeof(*r));
	assert_non_null(r);
	r->api.env = &f->env;
	r->api.transport = &test_transport;
	r->api.transport_arg = r;
	r->api.method = method;
	r->api.path = path_;
	r->api.client = "192.0.2.7"; /* what the transport gives: the peer's address */
	return r;
}

/* The request's policy (api_begin); the allowed methods of its path go to allow. */
static bool begin(struct test_req *r, char *allow, size_t len)
{
	return api_begin(&r->api, r->params, sizeof(r->params), allow, len);
}

/* Runs method path with body (JSON text or NULL) through the dispatch layer. */
static struct test_req *run_with(struct fixture *f, const char *method, const char *path_,
                                 const char *body, const char *last_event_id)
{
	struct test_req *r = req_new(f, method, path_);
	char allow[64];
	r->last_event_id = last_event_id;
	assert_true(begin(r, allow, sizeof(allow)));
	if (body) {
		r->api.body = json_loads(body, 0, NULL);
		assert_non_null(r->api.body);
	}
	api_dispatch(&r->api);
	return r;
}

static struct test_req *run(struct fixture *f, const char *method, const char *path_,
                            const char *body)
{
	return run_with(f, method, path_, body, NULL);
}

/* The reply's body as JSON, however the handler wrote it (new reference). */
static json_t *reply_of(const struct test_req *r)
{
	if (r->api.reply_text)
		return json_loadb(r->api.reply_text, r->api.reply_len, 0, NULL);
	return json_incref(r->api.reply);
}

static void done(struct test_req *r)
{
	api_req_release(&r->api);
	json_decref(r->api.body);
	json_decref(r->api.reply);
	api_reply_text_drop(&r->api);
	free(r);
}

static long long count(struct fixture *f, const char *sql)
{
	sqlite3_stmt *st = NULL;
	long long n = -1;
	assert_int_equal(sqlite3_prepare_v2(store_db(f->store), sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return n;
}

static void test_write_commits_with_audit_and_hook(void **state)
{
	struct fixture *f = *state;
	long long audit = count(f, "SELECT count(*) FROM audit");
	struct test_req *r = run(f, "POST", "/v1/servers", "{\"name\": \"extra\", \"devices\": 4}");
	assert_int_equal(r->api.status, 201);
	assert_false(store_in_txn(f->store));
	assert_int_equal(count(f, "SELECT count(*) FROM server WHERE name = 'extra'"), 1);
	assert_int_equal(count(f, "SELECT count(*) FROM audit"), audit + 1);
	assert_int_equal(count(f, "SELECT status FROM audit ORDER BY id DESC LIMIT 1"), 201);
	assert_int_equal(
	    count(f,
	          "SELECT count(*) FROM audit WHERE client = '192.0.2.7' AND path = '/v1/servers'"),
	    1);
	/* A server of no fabric changes nothing the units hold: no pass follows. */
	assert_int_equal(f->commits, 0);
	/* The reply headers the transport sends: where the server lives, and its version. */
	assert_string_equal(r->api.location, "/v1/servers/extra");
	assert_string_equal(r->api.etag, "\"1\"");
	done(r);
	/* A fabric does: the state it changed tells (once per commit). */
	r = run(f, "POST", "/v1/fabrics", "{\"name\": \"c\", \"servers\": [\"srv0\", \"srv1\"]}");
	assert_int_equal(r->api.status, 201);
	assert_int_equal(f->commits, 1);
	done(r);
}

static void test_refusal_changes_nothing_but_the_audit(void **state)
{
	struct fixture *f = *state;
	long long servers = count(f, "SELECT count(*) FROM server");
	/* Valid form, refused by the domain after it wrote nothing yet: a name taken. */
	struct test_req *r = run(f, "POST", "/v1/servers", "{\"name\": \"srv0\", \"devices\": 4}");
	assert_int_equal(r->api.status, 409);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(r->api.reply, "error"), "code")),
	    "conflict");
	assert_string_equal(r->api.etag, "");
	assert_string_equal(r->api.location, "");
	done(r);
	/* Refused half-way through a topology: the units it had deleted come back. */
	r = run(f, "PUT", "/v1/topology",
	        "{\"ocs\": [], \"servers\": [{\"name\": \"a\", \"devices\": 2}], "
	        "\"wiring\": {\"rule\": \"plane-per-ocs\"}}");
	assert_int_equal(r->api.status, 422);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(r->api.reply, "error"), "field")),
	    "wiring.rule");
	done(r);
	assert_false(store_in_txn(f->store));
	assert_int_equal(count(f, "SELECT count(*) FROM server"), servers);
	assert_int_equal(count(f, "SELECT count(*) FROM ocs"), 2);
	assert_int_equal(count(f, "SELECT status FROM audit ORDER BY id DESC LIMIT 1"), 422);
	assert_int_equal(f->commits, 0);
}

static void test_read_takes_no_transaction(void **state)
{
	struct fixture *f = *state;
	long long audit = count(f, "SELECT count(*) FROM audit");
	struct test_req *r = run(f, "GET", "/v1/servers/srv3", NULL);
	assert_int_equal(r->api.status, 200);
	assert_string_equal(json_string_value(json_object_get(r->api.reply, "name")), "srv3");
	assert_int_equal(count(f, "SELECT count(*) FROM audit"), audit);
	assert_int_equal(f->commits, 0);
	done(r);
}

static void test_draining_refuses_writes_at_admission(void **state)
{
	struct fixture *f = *state;
	struct test_req *r = req_new(f, "POST", "/v1/servers");
	char allow[64];
	f->env.draining = true;
	assert_false(begin(r, allow, sizeof(allow)));
	assert_int_equal(r->api.status, 503);
	f->env.draining = false;
	done(r);
}

/* The code of the error reply of r. */
static const char *error_code(const struct test_req *r)
{
	return json_string_value(json_object_get(json_object_get(r->api.reply, "error"), "code"));
}

/* Route matching belongs to dispatch: 404, 405 with the Allow list, OPTIONS. */
static void test_begin_matches_the_route(void **state)
{
	struct fixture *f = *state;
	char allow[64];
	struct test_req *r = req_new(f, "GET", "/v1/nowhere");
	assert_false(begin(r, allow, sizeof(allow)));
	assert_int_equal(r->api.status, 404);
	done(r);
	r = req_new(f, "PATCH", "/v1/fabrics");
	assert_false(begin(r, allow, sizeof(allow)));
	assert_int_equal(r->api.status, 405);
	assert_non_null(strstr(allow, "POST"));
	done(r);
	r = req_new(f, "OPTIONS", "/v1/fabrics");
	assert_false(begin(r, allow, sizeof(allow)));
	assert_int_equal(r->api.status, 204);
	done(r);
	r = req_new(f, "GET", "/v1/fabrics/job-a");
	assert_true(begin(r, allow, sizeof(allow)));
	assert_string_equal(r->api.params[0], "job-a");
	done(r);
}

/* So does authentication: no token 401, a bad one 401, too weak a role 403. */
static void test_begin_authenticates(void **state)
{
	struct fixture *f = *state;
	char allow[64];
	assert_int_equal(auth_tokens_add(&f->cfg.tokens, "ro", AUTH_READ, "read-secret-0123456789"),
	                 0);
	assert_int_equal(
	    auth_tokens_add(&f->cfg.tokens, "op", AUTH_ADMIN, "admin-secret-0123456789"), 0);
	struct test_req *r = req_new(f, "GET", "/v1/fabrics");
	assert_false(begin(r, allow, sizeof(allow)));
	assert_int_equal(r->api.status, 401);
	done(r);
	r = req_new(f, "GET", "/v1/fabrics");
	r->authorization = "Bearer wrong-secret-0123456789";
	assert_false(begin(r, allow, sizeof(allow)));
	assert_int_equal(r->api.status, 401);
	done(r);
	r = req_new(f, "POST", "/v1/fabrics");
	r->authorization = "Bearer read-secret-0123456789";
	assert_false(begin(r, allow, sizeof(allow)));
	assert_int_equal(r->api.status, 403);
	assert_string_equal(error_code(r), "forbidden");
	done(r);
	r = req_new(f, "POST", "/v1/fabrics");
	r->authorization = "Bearer admin-secret-0123456789";
	assert_true(begin(r, allow, sizeof(allow)));
	assert_string_equal(r->api.token->name, "op");
	assert_string_equal(r->api.token->secret, ""); /* the copy carries no secret */
	done(r);
	/* A probe needs no token. */
	r = req_new(f, "GET", "/v1/health");
	assert_true(begin(r, allow, sizeof(allow)));
	done(r);
}

/* And the query's names and the body's media type. */
static void test_begin_checks_query_and_media_type(void **state)
{
	struct fixture *f = *state;
	char allow[64];
	struct test_req *r = req_new(f, "DELETE", "/v1/fabrics/x");
	r->query_key = "wiat";
	assert_false(begin(r, allow, sizeof(allow)));
	assert_int_equal(r->api.status, 400);
	assert_non_null(strstr(
	    json_string_value(json_object_get(json_object_get(r->api.reply, "error"), "message")),
	    "unknown query parameter wiat"));
	done(r);
	r = req_new(f, "DELETE", "/v1/fabrics/x");
	r->query_key = r->extra_query = "wait";
	assert_false(begin(r, allow, sizeof(allow)));
	assert_int_equal(r->api.status, 400);
	done(r);
	r = req_new(f, "POST", "/v1/fabrics");
	r->content_type = "text/plain";
	assert_false(begin(r, allow, sizeof(allow)));
	assert_int_equal(r->api.status, 415);
	done(r);
	r = req_new(f, "POST", "/v1/fabrics");
	r->content_type = "application/json; charset=utf-8";
	assert_true(begin(r, allow, sizeof(allow)));
	done(r);
}

/* A fabric whose state the test sets: what the reconciler would do, without units. */
static void set_state(struct fixture *f, const char *name, const char *state)
{
	char sql[128];
	snprintf(sql, sizeof(sql), "UPDATE fabric SET state = '%s' WHERE name = '%s'", state, name);
	assert_int_equal(sqlite3_exec(store_db(f->store), sql, NULL, NULL, NULL), SQLITE_OK);
}

static void test_wait_suspends_until_the_bus_says_so(void **state)
{
	struct fixture *f = *state;
	struct test_req *r = req_new(f, "POST", "/v1/fabrics");
	char allow[64];
	r->query_key = "wait";
	r->query_value = "30";
	assert_true(begin(r, allow, sizeof(allow)));
	r->api.body = json_loads("{\"name\": \"w\", \"servers\": [\"srv0\", \"srv1\"]}", 0, NULL);
	api_dispatch(&r->api);
	assert_int_equal(r->api.status, 201);
	assert_true(r->api.suspended);
	assert_int_equal(f->commits, 1);

	/* Settled, but the fabric is not final yet: still held. */
	events_publish(f->events, EVENTS_SETTLED, NULL);
	assert_int_equal(r->resumed, 0);
	set_state(f, "w", "applied");
	events_publish(f->events, EVENTS_SETTLED, NULL);
	assert_int_equal(r->resumed, 1);
	assert_false(r->api.suspended);
	assert_int_equal(r->api.status, 201);
	json_t *view = reply_of(r);
	assert_string_equal(json_string_value(json_object_get(view, "state")), "applied");
	json_decref(view);
	done(r);
}

/* Runs the loop until r is resumed (the worker's delivery wakes it). */
static void until_resumed(struct fixture *f, struct test_req *r)
{
	for (int i = 0; i < 10000 && !r->resumed; i++)
		event_base_loop(f->base, EVLOOP_ONCE);
	assert_int_equal(r->resumed, 1);
}

static void test_long_replies_are_made_off_the_loop(void **state)
{
	struct fixture *f = *state;
	const char *grid = "{\"servers\": 65536, \"devices\": 8, \"ports_per_device\": 8}";

	/* Without a worker the work runs at once: the reference. */
	struct test_req *ref = run(f, "POST", "/v1/plan", grid);
	assert_int_equal(ref->api.status, 200);
	assert_false(ref->api.suspended);
	assert_non_null(json_object_get(ref->api.reply, "shape"));
	size_t want_len;
	char *want = api_json_text(ref->api.reply, &want_len);
	assert_non_null(want);

	f->env.compute = worker_new(f->base, "test-compute", 2);
	assert_non_null(f->env.compute);
	struct test_req *a = run(f, "POST", "/v1/plan", grid);
	struct test_req *b = run(f, "POST", "/v1/plan", grid);
	struct test_req *c = run(f, "POST", "/v1/plan", grid);
	/* Two in hand, suspended with the reply a shutdown would give; a third refused. */
	assert_true(a->api.suspended);
	assert_true(b->api.suspended);
	assert_int_equal(a->api.status, 503);
	assert_false(c->api.suspended);
	assert_int_equal(c->api.status, 503);
	json_t *refusal = reply_of(c);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(refusal, "error"), "code")),
	    "overloaded");
	json_decref(refusal);

	/* b's client goes: it is never resumed, and its job is freed (ASan). */
	b->api.on_abort(&b->api, true);
	until_resumed(f, a);
	/* The same bytes as the loop would have sent. */
	assert_int_equal(a->api.status, 200);
	assert_int_equal(a->api.reply_len, want_len);
	assert_memory_equal(a->api.reply_text, want, want_len);

	/* A refusal made off the loop is the same refusal. */
	struct test_req *bad = run(f, "POST", "/v1/plan", "{\"servers\": 65536, \"devices\": 1}");
	until_resumed(f, bad);
	assert_int_equal(bad->api.status, 422);
	assert_int_equal(b->resumed, 0);
	free(want);
	done(ref);
	/* Their texts go back to the worker that wrote them: before it stops. */
	done(a);
	done(b);
	done(c);
	done(bad);
	worker_free(f->env.compute);
	f->env.compute = NULL;
}

static void test_a_write_computes_first_off_the_loop(void **state)
{
	struct fixture *f = *state;
	const char *body = "{\"name\": \"%s\", \"runs\": [{\"collective\": \"allreduce\", "
	                   "\"algorithm\": \"ring\", \"servers\": 4, \"devices\": 8, "
	                   "\"bytes\": 1024, \"measured_us\": 30.0}]}";
	char b[512];
	long long audit = count(f, "SELECT count(*) FROM audit");

	/* Without a worker the fit runs at once, in the write's own turn. */
	snprintf(b, sizeof(b), body, "inline");
	struct test_req *now = run(f, "POST", "/v1/cost/calibrate", b);
	assert_int_equal(now->api.status, 201);
	assert_false(now->api.suspended);

	f->env.compute = worker_new(f->base, "test-compute", 2);
	assert_non_null(f->env.compute);
	snprintf(b, sizeof(b), body, "later");
	struct test_req *r = run(f, "POST", "/v1/cost/calibrate", b);
	assert_true(r->api.suspended);
	assert_true(r->api.computing);
	/* Its transaction is dropped while it computes: another write goes through. */
	struct test_req *other = run(f, "POST", "/v1/ocs", "{\"name\": \"ox\", \"ports\": 8}");
	assert_int_equal(other->api.status, 201);
	until_resumed(f, r);
	assert_int_equal(r->api.status, 201);
	assert_false(r->api.computing);
	assert_int_equal(count(f, "SELECT count(*) FROM cost_param_set"), 2);
	/* Refused by the fit: audited, nothing stored. */
	struct test_req *bad = run(f, "POST", "/v1/cost/calibrate",
	                           "{\"name\": \"bad\", \"runs\": [{\"collective\": "
	                           "\"alltoall\", \"algorithm\": \"direct\", \"servers\": 4, "
	                           "\"devices\": 8, \"bytes\": 1024, \"measured_us\": 30.0}], "
	                           "\"params\": {\"sync\": \"pairwise\"}}");
	until_resumed(f, bad);
	assert_int_equal(bad->api.status, 422);
	assert_int_equal(count(f, "SELECT count(*) FROM cost_param_set"), 2);
	assert_int_equal(count(f, "SELECT count(*) FROM audit"), audit + 4);
	assert_int_equal(count(f, "SELECT status FROM audit ORDER BY id DESC LIMIT 1"), 422);
	/* Ended while it computes: its client gone (499), or a drain (503): audited, not made. */
	snprintf(b, sizeof(b), body, "gone");
	struct test_req *gone = run(f, "POST", "/v1/cost/calibrate", b);
	snprintf(b, sizeof(b), body, "stopped");
	struct test_req *stopped = run(f, "POST", "/v1/cost/calibrate", b);
	assert_true(gone->api.suspended && stopped->api.suspended);
	gone->api.on_abort(&gone->api, true);
	assert_int_equal(count(f, "SELECT status FROM audit ORDER BY id DESC LIMIT 1"), 499);
	stopped->api.on_abort(&stopped->api, false);
	assert_int_equal(stopped->api.status, 503);
	assert_int_equal(count(f, "SELECT status FROM audit ORDER BY id DESC LIMIT 1"), 503);
	for (int i = 0; i < 50; i++)
		event_base_loop(f->base, EVLOOP_NONBLOCK);
	assert_int_equal(gone->resumed + stopped->resumed, 0);
	assert_int_equal(count(f, "SELECT count(*) FROM cost_param_set"), 2);
	done(now);
	done(r);
	done(other);
	done(bad);
	done(gone);
	done(stopped);
	worker_free(f->env.compute);
	f->env.compute = NULL;
}

static void test_events_stream_through_the_transport(void **state)
{
	struct fixture *f = *state;
	struct test_req *r = run(f, "GET", "/v1/events", NULL);
	assert_int_equal(r->api.status, 200);
	struct test_stream *s = last_stream;
	assert_non_null(s);
	assert_non_null(strstr(s->data, ": ofcd events"));
	events_publish(f->events, EVENTS_FABRIC_STATE,
	               json_pack("{s:s, s:s}", "fabric", "x", "state", "applied"));
	/* Internal kinds are not streamed, and take no id. */
	events_publish(f->events, EVENTS_SETTLED, NULL);
	events_publish(f->events, EVENTS_DRIFT, json_pack("{s:s}", "ocs", "ocs0"));
	assert_non_null(strstr(s->data, "event: fabric_state\ndata: {\"fabric\":\"x\""));
	assert_null(strstr(s->data, "settled"));
	/* Ids are INSTANCE-N, N without gaps. */
	char want[64];
	snprintf(want, sizeof(want), "id: %s-", events_instance(f->events));
	const char *first = strstr(s->data, want);
	assert_non_null(first);
	unsigned long long a = strtoull(first + strlen(want), NULL, 10);
	const char *second = strstr(first + strlen(want), want);
	assert_non_null(second);
	assert_int_equal(strtoull(second + strlen(want), NULL, 10), a + 1);
	/* The client goes: the subscriber leaves the bus. */
	t_stream_end(&s->api);
	events_publish(f->events, EVENTS_DRIFT, json_pack("{s:s}", "ocs", "ocs1"));
	done(r);
}

/* The text of a stream opened with Last-Event-ID last (or NULL), ended at once. */
static void stream_from(struct fixture *f, const char *last, char *out, size_t len)
{
	struct test_req *r = run_with(f, "GET", "/v1/events", NULL, last);
	assert_int_equal(r->api.status, 200);
	snprintf(out, len, "%s", last_stream->data);
	t_stream_end(&last_stream->api);
	done(r);
}

static void test_events_resume_after_last_event_id(void **state)
{
	struct fixture *f = *state;
	char text[4096], last[64];
	for (int i = 0; i < 3; i++)
		events_publish(f->events, EVENTS_DRIFT,
		               json_pack("{s:s, s:i}", "ocs", "ocs0", "n", i));
	snprintf(last, sizeof(last), "%s-1", events_instance(f->events));
	stream_from(f, last, text, sizeof(text));
	/* Events 2 and 3 again, not 1, and no reset. */
	assert_null(strstr(text, "\"n\":0"));
	assert_non_null(strstr(text, "\"n\":1"));
	assert_non_null(strstr(text, "\"n\":2"));
	assert_null(strstr(text, "event: reset"));
	/* Up to date: nothing replayed. */
	snprintf(last, sizeof(last), "%s-3", events_instance(f->events));
	stream_from(f, last, text, sizeof(text));
	assert_null(strstr(text, "event: "));
	/* Another run's id, an id from the future, garbage: reset. */
	stream_from(f, "0-1", text, sizeof(text));
	assert_non_null(strstr(text, "event: reset\ndata: {\"reason\":\"restart\"}"));
	snprintf(last, sizeof(last), "%s-99", events_instance(f->events));
	stream_from(f, last, text, sizeof(text));
	assert_non_null(strstr(text, "event: reset\ndata: {\"reason\":\"history\"}"));
	snprintf(last, sizeof(last), "%s-x", events_instance(f->events));
	stream_from(f, last, text, sizeof(text));
	assert_non_null(strstr(text, "event: reset"));
	/* Older than the history. */
	for (int i = 0; i < EVENTS_HISTORY; i++)
		events_publish(f->events, EVENTS_DRIFT, NULL);
	snprintf(last, sizeof(last), "%s-2", events_instance(f->events));
	stream_from(f, last, text, sizeof(text));
	assert_non_null(strstr(text, "event: reset\ndata: {\"reason\":\"history\"}"));
}

static void test_instances_differ(void **state)
{
	struct fixture *f = *state;
	struct events *other;
	assert_int_equal(events_new(&other), 0);
	assert_string_not_equal(events_instance(other), events_instance(f->events));
	events_free(other);
}

/* Turns of the loop until req is answered (a write in parts, a turn a part). */
static void loop_until_resumed(struct fixture *f, struct test_req *r)
{
	for (int i = 0; i < 10000 && !r->resumed; i++)
		event_base_loop(f->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	assert_int_equal(r->resumed, 1);
}

/*
 * PUTs n servers of 2 devices x 2 ports on 4 units, one plane each, and
 * returns the body of a create of them all as fabric name (caller frees).
 */
static char *large_topology(struct fixture *f, size_t n, const char *name)
{
	json_t *t =
	    json_pack("{s:[], s:[], s:{s:s}}", "ocs", "servers", "wiring", "rule", "plane-per-ocs");
	json_t *fab = json_pack("{s:s, s:[]}", "name", name, "servers");
	for (int u = 0; u < 4; u++) {
		char unit[16];
		snprintf(unit, sizeof(unit), "u%d", u);
		json_array_append_new(json_object_get(t, "ocs"),
		                      json_pack("{s:s, s:s, s:I}", "name", unit, "driver", "sim",
		                                "ports", (json_int_t)n + 8));
	}
	for (size_t i = 0; i < n; i++) {
		char sv[16];
		snprintf(sv, sizeof(sv), "b%zu", i);
		json_array_append_new(
		    json_object_get(t, "servers"),
		    json_pack("{s:s, s:i, s:i}", "name", sv, "devices", 2, "ports_per_device", 2));
		json_array_append_new(json_object_get(fab, "servers"), json_string(sv));
	}
	char *text = json_dumps(t, JSON_COMPACT);
	struct test_req *r = run(f, "PUT", "/v1/topology", text);
	assert_int_equal(r->api.status, 200);
	done(r);
	free(text);
	json_decref(t);
	text = json_dumps(fab, JSON_COMPACT);
	json_decref(fab);
	return text;
}

/*
 * A create of 300 servers goes in parts: held while later turns store it,
 * invisible until whole, a write that comes meanwhile served after it; the
 * delete goes out of sight at once; a create whose client leaves is undone.
 */
static void test_large_writes_go_in_parts(void **state)
{
	struct fixture *f = *state;
	char *body = large_topology(f, 300, "big");
	struct test_req *r = run(f, "POST", "/v1/fabrics", body);
	assert_true(r->api.suspended);
	assert_true(r->api.replicating);
	struct test_req *g = run(f, "GET", "/v1/fabrics/big", NULL);
	assert_int_equal(g->api.status, 404);
	done(g);
	struct test_req *w = run(f, "POST", "/v1/servers", "{\"name\": \"late\", \"devices\": 1}");
	assert_true(w->api.suspended); /* its turn comes after */
	loop_until_resumed(f, r);
	assert_int_equal(r->api.status, 201);
	json_t *view = reply_of(r);
	assert_string_equal(json_string_value(json_object_get(view, "topology")), "torus");
	assert_int_equal(json_array_size(json_object_get(view, "links")), 600);
	json_decref(view);
	assert_int_equal(w->resumed, 1);
	assert_int_equal(w->api.status, 201);
	assert_int_equal(count(f, "SELECT count(*) FROM fabric WHERE partial"), 0);
	assert_int_equal(count(f, "SELECT count(*) FROM audit WHERE path = '/v1/fabrics' AND "
	                          "status = 201"),
	                 1);
	done(r);
	done(w);

	/* Its 600 circuits may all go in the first turn, or not. */
	r = run(f, "DELETE", "/v1/fabrics/big", NULL);
	assert_int_equal(r->api.status, 202);
	g = run(f, "GET", "/v1/fabrics/big", NULL);
	assert_int_equal(g->api.status, 404); /* out of sight at once */
	done(g);
	if (r->api.suspended)
		loop_until_resumed(f, r);
	assert_int_equal(r->api.status, 202);
	assert_int_equal(count(f, "SELECT count(*) FROM fabric"), 0);
	assert_int_equal(count(f, "SELECT count(*) FROM circuit"), 0);
	done(r);

	/* The client goes away after the first part: the create is undone. */
	r = run(f, "POST", "/v1/fabrics", body);
	assert_true(r->api.suspended);
	r->api.on_abort(&r->api, true);
	for (int i = 0; i < 100 && f->env.writes.current; i++)
		event_base_loop(f->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	assert_null(f->env.writes.current);
	assert_int_equal(count(f, "SELECT count(*) FROM fabric"), 0);
	assert_int_equal(count(f, "SELECT count(*) FROM fabric_server"), 0);
	done(r);
	free(body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_commits_with_audit_and_hook, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_refusal_changes_nothing_but_the_audit, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_read_takes_no_transaction, setup, teardown),
		cmocka_unit_test_setup_teardown(test_begin_matches_the_route, setup, teardown),
		cmocka_unit_test_setup_teardown(test_begin_authenticates, setup, teardown),
		cmocka_unit_test_setup_teardown(test_begin_checks_query_and_media_type, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_draining_refuses_writes_at_admission, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_wait_suspends_until_the_bus_says_so, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_long_replies_are_made_off_the_loop, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_a_write_computes_first_off_the_loop, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_events_stream_through_the_transport, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_events_resume_after_last_event_id, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_instances_differ, setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_writes_go_in_parts, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
