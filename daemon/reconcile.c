#include "reconcile.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "desired.h"
#include "events.h"
#include "log.h"
#include "metrics.h"
#include "plan_diff.h"
#include "plan_state.h"
#include "store_sql.h"

/* Largest batch: OVS takes thousands of flow mods at once; bounded so one batch cannot stall. */
#define BATCH_MAX_OPS  8192
#define RETRY_BASE_MS  100
#define RETRY_MAX_MS   10000
#define DOWN_GRACE_S   5 /* a unit down this long fails its fabrics */
#define FAILED_AFTER   5 /* consecutive failed batches before a fabric is "failed" */
#define STATES_TICK_MS 500

struct unit {
	struct reconciler *r;
	int64_t id;
	char name[65];
	char driver[33];
	char endpoint[257];
	uint32_t ports;
	bool seen; /* still in the topology at the last sync */

	const struct ocs_driver_ops *ops;
	struct ocs_handle *h;
	enum ocs_conn_state conn;
	struct timespec down_since;
	char last_error[256];

	bool busy;        /* an apply or read is in flight */
	bool have_actual; /* actual[] reflects a read since the last (re)connect */
	bool in_sync;     /* the last diff was empty */
	bool audit;       /* the read in flight is an audit */
	bool applied_since_read;
	bool actual_dirty;      /* actual[] not yet written to the store */
	struct plan_xc *actual; /* sorted */
	size_t nactual;
	uint32_t *peer;    /* peer[port] for actual, 0 when unjoined; ports + 1 entries */
	uint32_t *joining; /* the same for additions sent since the last read-back; ports + 1 */
	int64_t *owner;    /* see owners(); ports + 1 entries */
	struct plan_xc *violations; /* isolation violations at the last read-back */
	size_t nviolations;
	uint64_t owner_gen; /* r->changes when owner[] was loaded */
	struct ocs_flow *partial, *foreign;
	size_t npartial, nforeign;

	const char
	    *trigger;       /* why the next batch is sent: startup, change, connect, audit, retry */
	int64_t op_id;      /* operation in flight, 0 if none */
	json_t *op_fabrics; /* names of the fabrics it touches (owned), NULL if none */
	unsigned failures;  /* consecutive failed batches */
	struct event *retry;
	bool retry_pending;
	struct unit *next;
};

struct reconciler {
	struct reconcile_deps d; /* what it works with (borrowed) */
	struct unit *units;
	struct event *ev_pass;   /* deferred pass */
	struct event *ev_audit;  /* periodic audit */
	struct event *ev_states; /* deferred fabric state update, and its tick */
	struct event *ev_flush;  /* deferred write of read-back states to the store */
	uint64_t generation;     /* passes started */
	uint64_t changes;        /* kicks so far: caches of stored state are valid for one value */
	struct fab_view *fabs;   /* cached fabrics, see load_fabrics() */
	size_t nfabs;
	uint64_t fabs_gen; /* r->changes when loaded */
	bool fabs_valid;
};

struct fab_view;
static void drive(struct unit *u);
static void schedule_states(struct reconciler *r);
static void on_read(void *arg, int status, const char *err, const struct ocs_readback *rb);

static double since(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

static struct timespec work_start(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t;
}

/* The reconciler's own time (diff, batches, records, checks), never the units' switching time. */
static void work_end(struct timespec t0)
{
	metrics_counter_add(
	    "ofcd_reconcile_work_seconds_total",
	    "Time the reconciler spent on its own work (not waiting for OCS units).", NULL,
	    since(&t0));
}

static const char *conn_name(enum ocs_conn_state s)
{
	return s == OCS_CONN_UP ? "connected" : s == OCS_CONN_CONNECTING ? "connecting" : "down";
}

static json_t *xcs_json(const struct plan_xc *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a,
		                      json_pack("[I, I]", (json_int_t)v[i].a, (json_int_t)v[i].b));
	return a;
}

/*
 * The same list as JSON text ("[[1,2],[3,4]]"), printed directly: an operation
 * records every batch, and a jansson tree per pair costs more than the batch.
 */
static char *put_u32(char *p, uint32_t v)
{
	char digits[10];
	int n = 0;
	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n)
		*p++ = digits[--n];
	return p;
}

static char *xcs_text(const struct plan_xc *v, size_t n)
{
	char *buf = malloc(n * 24 + 3), *p = buf;
	if (!buf)
		return NULL;
	*p++ = '[';
	for (size_t i = 0; i < n; i++) {
		if (i)
			*p++ = ',';
		*p++ = '[';
		p = put_u32(p, v[i].a);
		*p++ = ',';
		p = put_u32(p, v[i].b);
		*p++ = ']';
	}
	*p++ = ']';
	*p = '\0';
	return buf;
}

static json_t *flows_json(const struct ocs_flow *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
		    a, json_pack("[I, I]", (json_int_t)v[i].in_port, (json_int_t)v[i].out_port));
	return a;
}

/* ---- store helpers (own short transactions) ------------------------------ */

static struct store *store_of(struct reconciler *r)
{
	return r->d.store;
}

static struct desired_set unit_desired(const struct unit *u)
{
	return desired_of(u->r->d.desired, u->id);
}

/* A walk of a sorted list of cross-connects along a desired set (one merge pass). */
struct desired_walk {
	const struct desired_set *ds;
	size_t k;
};

/* Index of xc in the set, or -1; xc must not be less than the one asked before. */
static ssize_t walk_index(struct desired_walk *w, const struct plan_xc *xc)
{
	while (w->k < w->ds->n && plan_xc_cmp(&w->ds->xc[w->k], xc) < 0)
		w->k++;
	return w->k < w->ds->n && plan_xc_cmp(&w->ds->xc[w->k], xc) == 0 ? (ssize_t)w->k : -1;
}

/*
 * Fabric owning each OCS port of a unit (0 = none), through cable and
 * membership. Owned by the unit. Ownership changes only with committed
 * writes, each of which starts a pass, so one load per pass is enough.
 */
static const int64_t *owners(struct reconciler *r, struct unit *u)
{
	if (u->owner && u->owner_gen == r->changes)
		return u->owner;
	if (!u->owner)
		u->owner = calloc((size_t)u->ports + 1, sizeof(*u->owner));
	if (!u->owner)
		return NULL;
	memset(u->owner, 0, ((size_t)u->ports + 1) * sizeof(*u->owner));
	sqlite3_stmt *st = store_stmt(
	    store_of(r), "SELECT c.ocs_port, fs.fabric_id FROM cable c JOIN "
	                 "fabric_server fs ON fs.server_id = c.server_id WHERE c.ocs_id = ?");
	sqlite3_bind_int64(st, 1, u->id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t port = sqlite3_column_int64(st, 0);
		if (port >= 1 && port <= u->ports)
			u->owner[port] = sqlite3_column_int64(st, 1);
	}
	sqlite3_reset(st);
	u->owner_gen = r->changes;
	return u->owner;
}

static int64_t port_owner(const struct unit *u, const int64_t *owner, uint32_t port)
{
	return port >= 1 && port <= u->ports ? owner[port] : 0;
}

/* Appends name to the array of names a unless it is there already (such lists are short). */
static void add_name(json_t *a, const char *name)
{
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v)
	{
		if (strcmp(json_string_value(v), name) == 0)
			return;
	}
	json_array_append_new(a, json_string(name));
}

static int id_cmp(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return a < b ? -1 : a > b;
}

/* Adds the names of fabrics ids[0..n) (0 = none) to a; sorts ids. */
static void add_fabric_names(struct reconciler *r, json_t *a, int64_t *ids, size_t n)
{
	sqlite3_stmt *st = store_stmt(store_of(r), "SELECT name FROM fabric WHERE id = ?");
	qsort(ids, n, sizeof(*ids), id_cmp);
	for (size_t i = 0; i < n; i++) {
		if (!ids[i] || (i && ids[i] == ids[i - 1]))
			continue;
		sqlite3_bind_int64(st, 1, ids[i]);
		if (sqlite3_step(st) == SQLITE_ROW)
			add_name(a, (const char *)sqlite3_column_text(st, 0));
		sqlite3_reset(st);
	}
}

/*
 * The read-back state is written to the store for operators and tools; a
 * restart reads every unit back and trusts the stored copy only for the server
 * reservation until then (last_known_view()), so it is written at most once a
 * second for all units together, off the reconfiguration path.
 */
static void flush_actual(struct reconciler *r)
{
	struct store *s = store_of(r);
	bool any = false;
	for (struct unit *u = r->units; u; u = u->next)
		any |= u->actual_dirty;
	if (!any || store_begin_relaxed(s) < 0)
		return;
	int rc = 0;
	for (struct unit *u = r->units; u && rc == 0; u = u->next) {
		if (!u->actual_dirty)
			continue;
		sqlite3_stmt *st = store_stmt(s, "DELETE FROM actual_xc WHERE ocs_id = ?");
		sqlite3_bind_int64(st, 1, u->id);
		rc = store_step_done(st);
		st = store_stmt(s, "INSERT INTO actual_xc(ocs_id, a, b) VALUES (?, ?, ?)");
		for (size_t i = 0; rc == 0 && i < u->nactual; i++) {
			sqlite3_bind_int64(st, 1, u->id);
			sqlite3_bind_int64(st, 2, u->actual[i].a);
			sqlite3_bind_int64(st, 3, u->actual[i].b);
			rc = store_step_done(st);
		}
	}
	if (rc == 0 && store_commit(s) == 0) {
		for (struct unit *u = r->units; u; u = u->next)
			u->actual_dirty = false;
	} else {
		store_rollback(s);
	}
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	flush_actual(arg);
}

/* ---- operations ---------------------------------------------------------- */

/*
 * The fabrics whose circuits a batch touches: an addition is desired, so its
 * fabric is known; a removal belongs to the fabric that last desired it or,
 * when that is unknown (a stray or a change by hand), to the owners of its
 * ports. NULL when memory is short.
 */
static json_t *batch_fabrics(struct reconciler *r, struct unit *u, const struct plan_batch *b)
{
	struct desired_set ds = unit_desired(u);
	int64_t *ids = malloc((b->nadd + 2 * b->ndel + 1) * sizeof(*ids));
	json_t *names = json_array();
	size_t n = 0;
	if (!ids || !names) {
		free(ids);
		json_decref(names);
		return NULL;
	}
	struct desired_walk w = { &ds, 0 };
	for (size_t i = 0; i < b->nadd; i++) {
		ssize_t k = walk_index(&w, &b->add[i]);
		if (k >= 0 && (n == 0 || ids[n - 1] != ds.fabric[k]))
			ids[n++] = ds.fabric[k];
	}
	const int64_t *owner = NULL;
	const char *last = NULL;
	for (size_t i = 0; i < b->ndel; i++) {
		const char *name =
		    desired_former_owner(r->d.desired, u->id, b->del[i].a, b->del[i].b);
		if (name) {
			if (name != last)
				add_name(names, name);
			last = name;
		} else if (owner || (owner = owners(r, u))) {
			ids[n++] = port_owner(u, owner, b->del[i].a);
			ids[n++] = port_owner(u, owner, b->del[i].b);
		}
	}
	add_fabric_names(r, names, ids, n);
	free(ids);
	return names;
}

static int64_t op_start(struct reconciler *r, struct unit *u, const struct plan_batch *b)
{
	struct store *s = store_of(r);
	json_decref(u->op_fabrics);
	u->op_fabrics = batch_fabrics(r, u, b);
	json_t *fabrics = u->op_fabrics;
	char *adds = xcs_text(b->add, b->nadd);
	char *dels = xcs_text(b->del, b->ndel);
	int64_t id = 0;
	if (adds && dels && store_begin_relaxed(s) == 0) {
		sqlite3_stmt *st =
		    store_stmt(s, "INSERT INTO operation(ocs, trigger, nadds, ndeletes, status) "
		                  "VALUES (?, ?, ?, ?, 'running')");
		sqlite3_bind_text(st, 1, u->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, u->trigger, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)b->nadd);
		sqlite3_bind_int64(st, 4, (sqlite3_int64)b->ndel);
		int rc = store_step_done(st);
		id = rc == 0 ? sqlite3_last_insert_rowid(store_db(s)) : 0;
		st = store_stmt(s, "INSERT INTO operation_xc(operation_id, adds, deletes) "
		                   "VALUES (?, ?, ?)");
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_text(st, 2, adds, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, dels, -1, SQLITE_STATIC);
		if (rc == 0)
			rc = store_step_done(st);
		size_t i;
		json_t *v;
		st = store_stmt(s,
		                "INSERT INTO operation_fabric(operation_id, fabric) VALUES (?, ?)");
		json_array_foreach(fabrics, i, v)
		{
			sqlite3_bind_int64(st, 1, id);
			sqlite3_bind_text(st, 2, json_string_value(v), -1, SQLITE_STATIC);
			if (rc == 0)
				rc = store_step_done(st);
		}
		/* Keep the history bounded. */
		st = store_stmt(s, "DELETE FROM operation WHERE id <= ? - 10000");
		sqlite3_bind_int64(st, 1, id);
		if (rc == 0)
			rc = store_step_done(st);
		if (rc == 0 && store_commit(s) == 0) {
			free(adds);
			free(dels);
			return id;
		}
		store_rollback(s);
	}
	free(adds);
	free(dels);
	return 0;
}

static void op_finish(struct reconciler *r, struct unit *u, int status, const char *err)
{
	struct store *s = store_of(r);
	if (!u->op_id)
		return;
	if (store_begin_relaxed(s) == 0) {
		sqlite3_stmt *st = store_stmt(s, "UPDATE operation SET status = ?, error = ?, "
		                                 "ended = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') "
		                                 "WHERE id = ?");
		/* -ESHUTDOWN: the daemon stopped cleanly with the batch in flight. */
		sqlite3_bind_text(st, 1,
		                  status == 0            ? "succeeded"
		                  : status == -ESHUTDOWN ? "interrupted"
		                                         : "failed",
		                  -1, SQLITE_STATIC);
		if (status)
			sqlite3_bind_text(st, 2, err ? err : strerror(-status), -1,
			                  SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 3, u->op_id);
		if (store_step_done(st) == 0)
			store_commit(s);
		else
			store_rollback(s);
	}
	metrics_counter_add("ofcd_reconcile_batches_total", "Batches sent to OCS units by result.",
	                    status == 0 ? "result=\"succeeded\"" : "result=\"failed\"", 1);
	json_t *fabrics = u->op_fabrics ? u->op_fabrics : json_array();
	u->op_fabrics = NULL;
	json_t *ev = json_pack("{s:I, s:s, s:s, s:o}", "id", (json_int_t)u->op_id, "ocs", u->name,
	                       "status", status == 0 ? "succeeded" : "failed", "fabrics", fabrics);
	if (status)
		json_object_set_new(ev, "error", json_string(err ? err : strerror(-status)));
	events_publish(r->d.events, EVENTS_OPERATION, ev);
	u->op_id = 0;
}

/* ---- driver callbacks ---------------------------------------------------- */

static void schedule_retry(struct unit *u)
{
	unsigned shift = u->failures < 7 ? u->failures : 7;
	unsigned ms = RETRY_BASE_MS << shift;
	if (ms > RETRY_MAX_MS)
		ms = RETRY_MAX_MS;
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	u->retry_pending = true;
	evtimer_add(u->retry, &tv);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct unit *u = arg;
	(void)fd;
	(void)what;
	u->retry_pending = false;
	u->trigger = "retry";
	drive(u);
}

static void start_read(struct unit *u, bool audit)
{
	u->audit = audit;
	u->busy = true;
	int rc = u->ops->read(u->h, on_read, u);
	if (rc < 0) {
		u->busy = false;
		u->have_actual = false;
		u->in_sync = false;
		snprintf(u->last_error, sizeof(u->last_error), "read back: %s", strerror(-rc));
	}
}

static void on_apply(void *arg, int status, const char *err)
{
	struct unit *u = arg;
	struct timespec t0 = work_start();
	u->busy = false;
	u->applied_since_read = true;
	op_finish(u->r, u, status, err);
	if (status < 0) {
		u->failures++;
		snprintf(u->last_error, sizeof(u->last_error), "%s", err ? err : strerror(-status));
		log_warn("reconcile", "%s: batch failed (%u in a row): %s", u->name, u->failures,
		         u->last_error);
		schedule_retry(u);
	} else {
		u->failures = 0;
		u->last_error[0] = '\0';
	}
	/* Whatever happened, learn what the unit now holds. */
	if (u->conn == OCS_CONN_UP)
		start_read(u, false);
	schedule_states(u->r);
	work_end(t0);
}

/*
 * Whether an entry ofcd did not make can carry light between ports of two
 * fabrics (or a fabric and a port of none): one that matches every port or
 * sends to every port does unless it sends nowhere else.
 */
static bool foreign_crosses(const struct unit *u, const int64_t *owner, const struct ocs_flow *f)
{
	if (f->out_port == 0)
		return false; /* dropped, or back to the controller or its own port */
	if (f->in_port == OCS_PORT_ANY || f->out_port == OCS_PORT_EVERY || f->in_port > u->ports ||
	    f->out_port > u->ports)
		return true;
	return owner[f->in_port] != owner[f->out_port];
}

/* Reports cross-connects that join two fabrics, or a fabric to a port of none. */
/* Violations are rare: a short list and a linear search. */
static bool pair_in(const struct plan_xc *v, size_t n, uint32_t a, uint32_t b)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].a == a && v[i].b == b)
			return true;
	return false;
}

/*
 * Reports an isolation violation the first time a read-back shows it (a
 * foreign entry nobody removes would otherwise be counted at every audit) and
 * remembers it in now[] (pairs; foreign entries as in -> out with kind 1).
 */
static void report_violation(struct reconciler *r, struct unit *u, const int64_t *owner, uint32_t a,
                             uint32_t b, bool foreign, struct plan_xc *now, size_t *nnow)
{
	struct plan_xc key = { a, foreign ? b | 0x80000000u : b };
	now[(*nnow)++] = key;
	if (pair_in(u->violations, u->nviolations, key.a, key.b))
		return;
	int64_t ids[2] = { port_owner(u, owner, a), port_owner(u, owner, b) };
	if (foreign)
		log_error("reconcile",
		          "%s: an entry ofcd did not make (%u -> %u) can join ports of different "
		          "fabrics; it is left alone, remove it by hand",
		          u->name, a, b);
	else
		log_error("reconcile",
		          "%s: cross-connect %u-%u breaks fabric isolation; removing it", u->name,
		          a, b);
	metrics_counter_add("ofcd_isolation_violations_total",
	                    "Cross-connects found joining two fabrics (or a fabric and no fabric).",
	                    NULL, 1);
	json_t *fabrics = json_array();
	add_fabric_names(r, fabrics, ids, 2);
	events_publish(r->d.events, EVENTS_ISOLATION_VIOLATION,
	               json_pack("{s:s, s:[I, I], s:b, s:o}", "ocs", u->name,
	                         foreign ? "foreign_entry" : "cross_connect", (json_int_t)a,
	                         (json_int_t)b, "foreign", foreign, "fabrics", fabrics));
}

static void check_isolation(struct reconciler *r, struct unit *u)
{
	const int64_t *owner = NULL;
	struct desired_set ds = unit_desired(u);
	struct plan_xc *now = malloc((u->nactual + u->nforeign + 1) * sizeof(*now));
	size_t nnow = 0;
	if (!now)
		return;
	struct desired_walk w = { &ds, 0 };
	for (size_t i = 0; i < u->nactual; i++) {
		uint32_t a = u->actual[i].a, b = u->actual[i].b;
		/* A desired cross-connect joins two ports of one fabric by construction. */
		if (walk_index(&w, &u->actual[i]) >= 0)
			continue;
		if (!owner && !(owner = owners(r, u)))
			goto out;
		if (port_owner(u, owner, a) != port_owner(u, owner, b))
			report_violation(r, u, owner, a, b, false, now, &nnow);
	}
	if (u->nforeign && !owner && !(owner = owners(r, u)))
		goto out;
	for (size_t i = 0; i < u->nforeign; i++)
		if (foreign_crosses(u, owner, &u->foreign[i]))
			report_violation(r, u, owner, u->foreign[i].in_port, u->foreign[i].out_port,
			                 true, now, &nnow);
	free(u->violations);
	u->violations = now;
	u->nviolations = nnow;
	return;
out:
	free(now);
}

static void on_read(void *arg, int status, const char *err, const struct ocs_readback *rb)
{
	struct unit *u = arg;
	struct reconciler *r = u->r;
	struct timespec t0 = work_start();
	u->busy = false;
	if (status < 0) {
		snprintf(u->last_error, sizeof(u->last_error), "read back: %s",
		         err ? err : strerror(-status));
		log_warn("reconcile", "%s: %s", u->name, u->last_error);
		/* What we knew may be stale now: nothing is sent before a read succeeds. */
		u->have_actual = false;
		u->in_sync = false;
		if (!u->retry_pending)
			schedule_retry(u);
		schedule_states(r);
		return;
	}
	struct plan_xc *actual = malloc((rb->nxcs ? rb->nxcs : 1) * sizeof(*actual));
	struct ocs_flow *partial = malloc((rb->npartial ? rb->npartial : 1) * sizeof(*partial));
	struct ocs_flow *foreign = malloc((rb->nforeign ? rb->nforeign : 1) * sizeof(*foreign));
	if (!actual || !partial || !foreign) {
		free(actual);
		free(partial);
		free(foreign);
		return;
	}
	size_t n = 0;
	for (size_t i = 0; i < rb->nxcs; i++) {
		uint32_t x = rb->xcs[i].a, y = rb->xcs[i].b;
		actual[n++] = (struct plan_xc){ x < y ? x : y, x < y ? y : x };
	}
	n = plan_xc_sort_unique(actual, n);
	bool changed = !u->have_actual || n != u->nactual ||
	               (n && memcmp(actual, u->actual, n * sizeof(*actual)) != 0);
	/* A change nobody asked for: someone touched the unit behind our back. */
	if (changed && u->have_actual && u->in_sync && !u->applied_since_read) {
		log_warn("reconcile", "%s: drift: the unit changed behind the controller's back",
		         u->name);
		metrics_counter_add(
		    "ofcd_drift_repairs_total",
		    "Audits that found an OCS unit changed by hand and repaired it.", NULL, 1);
		events_publish(r->d.events, EVENTS_DRIFT,
		               json_pack("{s:s, s:I, s:I}", "ocs", u->name, "held_before",
		                         (json_int_t)u->nactual, "held_now", (json_int_t)n));
		u->trigger = "audit";
	}
	memcpy(partial, rb->partial, rb->npartial * sizeof(*partial));
	memcpy(foreign, rb->foreign, rb->nforeign * sizeof(*foreign));
	free(u->actual);
	free(u->partial);
	free(u->foreign);
	u->actual = actual;
	u->nactual = n;
	u->partial = partial;
	u->npartial = rb->npartial;
	u->foreign = foreign;
	u->nforeign = rb->nforeign;
	memset(u->peer, 0, ((size_t)u->ports + 1) * sizeof(*u->peer));
	memset(u->joining, 0, ((size_t)u->ports + 1) * sizeof(*u->joining));
	for (size_t i = 0; i < u->nactual; i++) {
		if (u->actual[i].b <= u->ports) {
			u->peer[u->actual[i].a] = u->actual[i].b;
			u->peer[u->actual[i].b] = u->actual[i].a;
		}
	}
	u->have_actual = true;
	u->applied_since_read = false;
	if (changed && !u->actual_dirty) {
		u->actual_dirty = true;
		if (!evtimer_pending(r->ev_flush, NULL)) {
			struct timeval sec = { 1, 0 };
			evtimer_add(r->ev_flush, &sec);
		}
	}
	desired_prune(r->d.desired, u->id, u->actual, u->nactual);
	check_isolation(r, u);
	drive(u);
	schedule_states(r);
	work_end(t0);
}

static void on_conn_state(void *arg, enum ocs_conn_state state, const char *err)
{
	struct unit *u = arg;
	struct reconciler *r = u->r;
	enum ocs_conn_state old = u->conn;
	u->conn = state;
	if (err)
		snprintf(u->last_error, sizeof(u->last_error), "%s", err);
	if (state == old)
		return;
	log_info("reconcile", "%s: %s%s%s", u->name, conn_name(state), err ? ": " : "",
	         err ? err : "");
	json_t *ev = json_pack("{s:s, s:s}", "ocs", u->name, "state", conn_name(state));
	if (err)
		json_object_set_new(ev, "error", json_string(err));
	events_publish(r->d.events, EVENTS_OCS_CONNECTION, ev);
	if (state == OCS_CONN_UP) {
		/* Whatever the unit held while we were away: read it before changing it. */
		u->have_actual = false;
		u->in_sync = false;
		u->trigger = "connect";
		/* A backoff from before the disconnect must not delay the fresh start. */
		evtimer_del(u->retry);
		u->retry_pending = false;
		reconcile_kick(r);
	} else if (old == OCS_CONN_UP) {
		clock_gettime(CLOCK_MONOTONIC, &u->down_since);
	}
	schedule_states(r);
}

static void on_port_state(void *arg, uint32_t port, bool up)
{
	struct unit *u = arg;
	struct store *s = store_of(u->r);
	if (store_begin_relaxed(s) < 0)
		return;
	sqlite3_stmt *st = store_stmt(s, up ? "DELETE FROM ocs_port_down WHERE ocs_id = ? AND "
	                                      "port = ?"
	                                    : "INSERT OR IGNORE INTO ocs_port_down(ocs_id, port) "
	                                      "VALUES (?, ?)");
	sqlite3_bind_int64(st, 1, u->id);
	sqlite3_bind_int64(st, 2, port);
	if (store_step_done(st) == 0)
		store_commit(s);
	else
		store_rollback(s);
	log_info("reconcile", "%s: port %u link %s", u->name, port, up ? "up" : "down");
	events_publish(u->r->d.events, EVENTS_PORT_STATE,
	               json_pack("{s:s, s:I, s:s}", "ocs", u->name, "port", (json_int_t)port,
	                         "link", up ? "up" : "down"));
}

/* ---- units --------------------------------------------------------------- */

static void unit_close(struct unit *u, bool shutdown)
{
	if (u->h)
		u->ops->close(u->h); /* pending callbacks are never called after close */
	u->h = NULL;
	u->busy = false;
	if (u->op_id)
		op_finish(u->r, u, shutdown ? -ESHUTDOWN : -ECANCELED,
		          shutdown ? "the daemon stopped before the batch completed"
		                   : "the OCS unit was removed or reconfigured");
}

static void unit_free(struct unit *u, bool shutdown)
{
	unit_close(u, shutdown);
	if (u->retry)
		event_free(u->retry);
	free(u->actual);
	free(u->partial);
	free(u->foreign);
	free(u->peer);
	free(u->joining);
	free(u->owner);
	free(u->violations);
	json_decref(u->op_fabrics);
	desired_forget(u->r->d.desired, u->id);
	free(u);
}

static void unit_open(struct reconciler *r, struct unit *u)
{
	char err[256];
	struct ocs_open_params p = { .name = u->name, .endpoint = u->endpoint, .ports = u->ports };
	struct ocs_events ev = { .conn_state = on_conn_state,
		                 .port_state = on_port_state,
		                 .arg = u };
	u->ops = ocs_driver_find(u->driver);
	u->conn = OCS_CONN_DOWN;
	clock_gettime(CLOCK_MONOTONIC, &u->down_since);
	if (!u->ops) {
		snprintf(u->last_error, sizeof(u->last_error), "unknown driver %s", u->driver);
		return;
	}
	int rc = u->ops->open(r->d.base, &p, &ev, &u->h, err, sizeof(err));
	if (rc < 0) {
		u->h = NULL;
		snprintf(u->last_error, sizeof(u->last_error), "%s", err);
		log_error("reconcile", "%s: cannot open %s driver at \"%s\": %s", u->name,
		          u->driver, u->endpoint, err);
	}
}

/*
 * What the unit held when it was last read back, as stored (by a previous run,
 * up to a second behind). Only the server reservation trusts it, and only
 * until the first read-back: a unit unreachable after a restart may still
 * hold a deleted fabric's circuits.
 */
static void last_known_view(struct reconciler *r, struct unit *u)
{
	sqlite3_stmt *st = store_stmt(store_of(r), "SELECT a, b FROM actual_xc WHERE ocs_id = ?");
	sqlite3_bind_int64(st, 1, u->id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t a = sqlite3_column_int64(st, 0), b = sqlite3_column_int64(st, 1);
		if (a >= 1 && b >= 1 && a <= u->ports && b <= u->ports) {
			u->peer[a] = (uint32_t)b;
			u->peer[b] = (uint32_t)a;
		}
	}
	sqlite3_reset(st);
}

static struct unit *unit_new(struct reconciler *r, sqlite3_stmt *st)
{
	struct unit *u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->r = r;
	u->id = sqlite3_column_int64(st, 0);
	snprintf(u->name, sizeof(u->name), "%s", sqlite3_column_text(st, 1));
	snprintf(u->driver, sizeof(u->driver), "%s", sqlite3_column_text(st, 2));
	snprintf(u->endpoint, sizeof(u->endpoint), "%s", sqlite3_column_text(st, 3));
	u->ports = (uint32_t)sqlite3_column_int64(st, 4);
	u->trigger = "startup";
	u->peer = calloc((size_t)u->ports + 1, sizeof(*u->peer));
	u->joining = calloc((size_t)u->ports + 1, sizeof(*u->joining));
	u->retry = evtimer_new(r->d.base, on_retry, u);
	if (!u->peer || !u->joining || !u->retry) {
		unit_free(u, false);
		return NULL;
	}
	last_known_view(r, u);
	unit_open(r, u);
	return u;
}

/* Opens, reopens and closes driver instances to follow the ocs table. */
static void sync_units(struct reconciler *r)
{
	for (struct unit *u = r->units; u; u = u->next)
		u->seen = false;
	sqlite3_stmt *st =
	    store_stmt(store_of(r), "SELECT id, name, driver, endpoint, ports FROM ocs");
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);
		struct unit **pu = &r->units;
		while (*pu && (*pu)->id != id)
			pu = &(*pu)->next;
		struct unit *u = *pu;
		if (u && (strcmp(u->driver, (const char *)sqlite3_column_text(st, 2)) != 0 ||
		          strcmp(u->endpoint, (const char *)sqlite3_column_text(st, 3)) != 0 ||
		          u->ports != (uint32_t)sqlite3_column_int64(st, 4))) {
			*pu = u->next;
			unit_free(u, false);
			u = NULL;
		}
		if (!u) {
			r->fabs_valid = false; /* the cache holds unit pointers */
			u = unit_new(r, st);
			if (!u)
				continue;
			u->next = r->units;
			r->units = u;
		}
		u->seen = true;
	}
	sqlite3_reset(st);
	for (struct unit **pu = &r->units; *pu;) {
		struct unit *u = *pu;
		if (u->seen) {
			pu = &u->next;
			continue;
		}
		*pu = u->next;
		unit_free(u, false);
		r->fabs_valid = false;
	}
}

/* ---- the pass ------------------------------------------------------------ */

static void drive(struct unit *u)
{
	struct reconciler *r = u->r;
	if (!u->h || u->conn != OCS_CONN_UP || u->busy || u->retry_pending)
		return;
	if (!u->have_actual) {
		start_read(u, false);
		return;
	}
	/* A mirror that failed to load may miss circuits: sending its diff would tear them down. */
	if (!desired_usable(r->d.desired))
		return;
	struct plan_xc *actual = NULL;
	size_t na = 0;
	struct plan_batch b = { 0 };
	struct desired_set ds = unit_desired(u);
	const struct plan_xc *desired = ds.xc;
	size_t nd = ds.n;
	/* One-way entries of ofcd's own count as present-but-wrong: remove or remake them. */
	na = u->nactual + u->npartial;
	actual = malloc((na ? na : 1) * sizeof(*actual));
	if (!actual)
		goto out;
	memcpy(actual, u->actual, u->nactual * sizeof(*actual));
	for (size_t i = 0; i < u->npartial; i++) {
		uint32_t x = u->partial[i].in_port, y = u->partial[i].out_port;
		actual[u->nactual + i] = (struct plan_xc){ x < y ? x : y, x < y ? y : x };
	}
	/* A partial entry that is also desired must be remade: drop it from "actual". */
	if (u->npartial) {
		na = plan_xc_sort_unique(actual, na);
		size_t m = 0;
		for (size_t i = 0; i < na; i++) {
			bool full = actual[i].b <= u->ports && u->peer[actual[i].a] == actual[i].b;
			if (full || !nd ||
			    !bsearch(&actual[i], desired, nd, sizeof(*desired), plan_xc_cmp))
				actual[m++] = actual[i];
		}
		na = m;
	}
	if (plan_diff(desired, nd, actual, na, BATCH_MAX_OPS, &b) < 0) {
		log_error("reconcile", "%s: cannot compute the batch", u->name);
		goto out;
	}
	u->in_sync = b.ndel + b.nadd == 0;
	if (u->in_sync) {
		/* Whatever set the trigger needed nothing: the next batch comes from a change. */
		u->trigger = "change";
		goto out;
	}

	u->op_id = op_start(r, u, &b);
	u->trigger = "change";
	struct ocs_xc *del = malloc((b.ndel ? b.ndel : 1) * sizeof(*del));
	struct ocs_xc *add = malloc((b.nadd ? b.nadd : 1) * sizeof(*add));
	if (del && add) {
		for (size_t i = 0; i < b.ndel; i++)
			del[i] = (struct ocs_xc){ b.del[i].a, b.del[i].b };
		for (size_t i = 0; i < b.nadd; i++)
			add[i] = (struct ocs_xc){ b.add[i].a, b.add[i].b };
		struct ocs_batch batch = { .del = del, .ndel = b.ndel, .add = add, .nadd = b.nadd };
		log_debug("reconcile", "%s: batch of %zu removals, %zu additions (%s)", u->name,
		          b.ndel, b.nadd, u->trigger);
		u->busy = true;
		for (size_t i = 0; i < b.nadd; i++) {
			if (b.add[i].b <= u->ports) {
				u->joining[b.add[i].a] = b.add[i].b;
				u->joining[b.add[i].b] = b.add[i].a;
			}
		}
		int rc = u->ops->apply(u->h, &batch, on_apply, u);
		if (rc < 0) {
			u->busy = false;
			op_finish(r, u, rc, strerror(-rc));
			snprintf(u->last_error, sizeof(u->last_error), "apply: %s", strerror(-rc));
		}
	}
	free(del);
	free(add);
	schedule_states(r);
out:
	plan_batch_free(&b);
	free(actual);
}

static void on_pass(evutil_socket_t fd, short what, void *arg)
{
	struct reconciler *r = arg;
	(void)fd;
	(void)what;
	struct timespec t0 = work_start();
	r->generation++;
	desired_refresh(r->d.desired);
	sync_units(r);
	for (struct unit *u = r->units; u; u = u->next)
		drive(u);
	work_end(t0);
	schedule_states(r);
}

void reconcile_kick(struct reconciler *r)
{
	if (!r)
		return;
	/* Every committed change kicks: from now on what was read from the store may be stale. */
	r->changes++;
	event_active(r->ev_pass, 0, 0);
}

static void on_audit(evutil_socket_t fd, short what, void *arg)
{
	struct reconciler *r = arg;
	(void)fd;
	(void)what;
	desired_refresh(r->d.desired);
	for (struct unit *u = r->units; u; u = u->next)
		if (u->h && u->conn == OCS_CONN_UP && !u->busy)
			start_read(u, true);
}

void reconcile_set_audit_interval(struct reconciler *r, unsigned seconds)
{
	struct timeval tv = { seconds ? seconds : 30, 0 };
	event_del(r->ev_audit);
	event_add(r->ev_audit, &tv);
}

/* ---- fabric states ------------------------------------------------------- */

static struct unit *unit_by_id(struct reconciler *r, int64_t id)
{
	for (struct unit *u = r->units; u; u = u->next)
		if (u->id == id)
			return u;
	return NULL;
}

/* A fabric as the state update sees it. */
struct fab_view {
	int64_t id;
	char name[65];
	char state[16];
	char err[400];
	int64_t revision;
	int64_t nmissing;
	int64_t ncircuits; /* stored circuits: all must be seen through the units' desired sets */
};

/*
 * Loads every fabric once per change (the state update runs after every batch
 * and read-back; fabrics only change with commits). Their circuits are not
 * loaded: each unit's desired set (desired.h) already carries its fabric.
 */
static int load_fabrics(struct reconciler *r)
{
	struct store *s = store_of(r);
	if (r->fabs_valid && r->fabs_gen == r->changes)
		return 0;
	size_t nf = 0, capf = 16;
	struct fab_view *f = malloc(capf * sizeof(*f));
	if (!f)
		return -ENOMEM;
	sqlite3_stmt *st = store_stmt(s, "SELECT f.id, f.name, f.state, coalesce(f.error, ''), "
	                                 "f.revision, (SELECT count(*) FROM missing_pair m WHERE "
	                                 "m.fabric_id = f.id), (SELECT count(*) FROM circuit c "
	                                 "WHERE c.fabric_id = f.id) FROM fabric f ORDER BY f.id");
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (nf == capf) {
			struct fab_view *t = realloc(f, (capf *= 2) * sizeof(*f));
			if (!t) {
				sqlite3_reset(st);
				free(f);
				return -ENOMEM;
			}
			f = t;
		}
		struct fab_view *v = &f[nf++];
		memset(v, 0, sizeof(*v));
		v->id = sqlite3_column_int64(st, 0);
		snprintf(v->name, sizeof(v->name), "%s", sqlite3_column_text(st, 1));
		snprintf(v->state, sizeof(v->state), "%s", sqlite3_column_text(st, 2));
		snprintf(v->err, sizeof(v->err), "%s", sqlite3_column_text(st, 3));
		v->revision = sqlite3_column_int64(st, 4);
		v->nmissing = sqlite3_column_int64(st, 5);
		v->ncircuits = sqlite3_column_int64(st, 6);
	}
	sqlite3_reset(st);
	free(r->fabs);
	r->fabs = f;
	r->nfabs = nf;
	r->fabs_gen = r->changes;
	r->fabs_valid = true;
	return 0;
}

/* Why a unit holds a fabric back, once it has failed long enough to say so. */
static void blame(const struct unit *u, char *err, size_t len, const char *why)
{
	if (u->failures >= FAILED_AFTER)
		snprintf(err, len, "OCS unit %s: %s%s", u->name, u->last_error, why);
	else if (u->conn != OCS_CONN_UP && since(&u->down_since) > DOWN_GRACE_S)
		snprintf(err, len, "OCS unit %s is not connected%s%s%s", u->name,
		         u->last_error[0] ? ": " : "", u->last_error, why);
}

/* Index of a fabric in r->fabs (sorted by id), or -1. */
static ssize_t fab_index(const struct reconciler *r, int64_t fabric)
{
	size_t lo = 0, hi = r->nfabs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (r->fabs[mid].id < fabric)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->nfabs && r->fabs[lo].id == fabric ? (ssize_t)lo : -1;
}

static void mark(struct reconciler *r, struct unit **culprit, int64_t fabric, struct unit *u)
{
	ssize_t i = fabric ? fab_index(r, fabric) : -1;
	if (i >= 0 && !culprit[i])
		culprit[i] = u;
}

static void mark_all_on(struct reconciler *r, struct unit **culprit, struct unit *u,
                        const int64_t *owner)
{
	for (uint32_t p = 1; p <= u->ports; p++)
		mark(r, culprit, owner[p], u);
}

/*
 * A fabric is only applied when no unit cabled to its ports may join them to
 * anything but its own circuits: a unit not read back (it may hold anything,
 * e.g. a deleted fabric's circuits while it was unreachable), or one holding a
 * cross-connect that is not desired, a one-way entry of ours, or a foreign
 * entry on its ports, holds the fabric back (culprit[i] for r->fabs[i]).
 */
static void find_unclean(struct reconciler *r, struct unit **culprit)
{
	for (struct unit *u = r->units; u; u = u->next) {
		/* Port owners are only needed when there is something to judge. */
		const int64_t *owner = NULL;
		if (!u->have_actual) {
			if ((owner = owners(r, u)))
				mark_all_on(r, culprit, u, owner);
			continue;
		}
		struct desired_set ds = unit_desired(u);
		struct desired_walk w = { &ds, 0 };
		for (size_t i = 0; i < u->nactual; i++) {
			if (walk_index(&w, &u->actual[i]) >= 0)
				continue;
			if (!owner && !(owner = owners(r, u)))
				break;
			mark(r, culprit, port_owner(u, owner, u->actual[i].a), u);
			mark(r, culprit, port_owner(u, owner, u->actual[i].b), u);
		}
		if ((u->npartial || u->nforeign) && !owner && !(owner = owners(r, u)))
			continue;
		for (size_t i = 0; i < u->npartial; i++) {
			mark(r, culprit, port_owner(u, owner, u->partial[i].in_port), u);
			mark(r, culprit, port_owner(u, owner, u->partial[i].out_port), u);
		}
		for (size_t i = 0; i < u->nforeign; i++) {
			const struct ocs_flow *f = &u->foreign[i];
			if (f->in_port == OCS_PORT_ANY || f->out_port == OCS_PORT_EVERY) {
				mark_all_on(r, culprit, u, owner);
				continue;
			}
			mark(r, culprit, port_owner(u, owner, f->in_port), u);
			mark(r, culprit, port_owner(u, owner, f->out_port), u);
		}
	}
}

/*
 * Derives every fabric's state from what its units hold, stores the ones that
 * changed (one transaction), and tells events and waiters.
 */
static void update_states(struct reconciler *r)
{
	struct store *s = store_of(r);
	json_t *changes = json_array();
	bool unsettled = false;

	if (load_fabrics(r) < 0) {
		json_decref(changes);
		return;
	}
	/* Per fabric: a unit that holds it back (culprit), one that misses its circuits. */
	struct unit **culprit = calloc(2 * (r->nfabs + 1), sizeof(*culprit));
	if (!culprit) {
		json_decref(changes);
		return;
	}
	struct unit **missing_on = culprit + r->nfabs + 1;
	bool *busy_on = calloc(r->nfabs + 1, sizeof(*busy_on));
	int64_t *seen = calloc(r->nfabs + 1, sizeof(*seen));
	if (!busy_on || !seen) {
		free(culprit);
		free(busy_on);
		free(seen);
		json_decref(changes);
		return;
	}
	find_unclean(r, culprit);
	/* Each unit's desired set carries the fabric of every circuit: no query per circuit. */
	for (struct unit *u = r->units; u; u = u->next) {
		struct desired_set ds = unit_desired(u);
		for (size_t k = 0; k < ds.n; k++) {
			uint32_t a = ds.xc[k].a, b = ds.xc[k].b;
			ssize_t i = fab_index(r, ds.fabric[k]);
			if (i < 0)
				continue;
			seen[i]++;
			if (u->have_actual && b <= u->ports && u->peer[a] == b)
				continue;
			busy_on[i] |= u->busy || u->op_id;
			/* Blame the unit that is failing, if one is. */
			char probe[8] = "";
			blame(u, probe, sizeof(probe), "");
			if (!missing_on[i] || probe[0])
				missing_on[i] = u;
		}
	}
	for (size_t i = 0; i < r->nfabs; i++) {
		struct fab_view *fv = &r->fabs[i];
		/* A circuit on a unit not opened yet was never seen: not held either. */
		bool all = !missing_on[i] && seen[i] == fv->ncircuits, busy = busy_on[i];
		char err[400] = "";
		if (missing_on[i])
			blame(missing_on[i], err, sizeof(err), "");
		if (culprit[i]) {
			struct unit *u = culprit[i];
			all = false;
			busy |= u->busy || u->op_id;
			if (!err[0])
				blame(u, err, sizeof(err),
				      " (it may still join this fabric's ports to others)");
		}
		enum plan_state cur = PLAN_STATE_APPLYING;
		plan_state_parse(fv->state, &cur);
		struct plan_state_input in = { .current = cur,
			                       .all_held = all,
			                       .missing_pairs = (size_t)fv->nmissing,
			                       .unit_failing = err[0] != '\0',
			                       .busy = busy };
		enum plan_state next = plan_state_next(&in);
		const char *state = plan_state_name(next);
		/* Failed fabrics are re-checked too: they recover when retries succeed. */
		if (!plan_state_final(next) || next == PLAN_STATE_FAILED)
			unsettled = true;
		if (strcmp(state, fv->state) == 0 && strcmp(err, fv->err) == 0)
			continue;
		json_array_append_new(changes, json_pack("{s:I, s:s, s:s, s:s, s:I}", "id",
		                                         (json_int_t)fv->id, "fabric", fv->name,
		                                         "state", state, "error", err, "revision",
		                                         (json_int_t)fv->revision));
		/* Stored below; if that fails the cache is dropped and re-read. */
		snprintf(fv->state, sizeof(fv->state), "%s", state);
		snprintf(fv->err, sizeof(fv->err), "%s", err);
	}

	if (json_array_size(changes) && store_begin_relaxed(s) == 0) {
		size_t i;
		json_t *c;
		int rc = 0;
		sqlite3_stmt *up =
		    store_stmt(s, "UPDATE fabric SET state = ?, error = ?, updated = "
		                  "strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?");
		json_array_foreach(changes, i, c)
		{
			const char *e = json_string_value(json_object_get(c, "error"));
			sqlite3_bind_text(up, 1, json_string_value(json_object_get(c, "state")), -1,
			                  SQLITE_TRANSIENT);
			if (e[0])
				sqlite3_bind_text(up, 2, e, -1, SQLITE_TRANSIENT);
			sqlite3_bind_int64(up, 3, json_integer_value(json_object_get(c, "id")));
			if (rc == 0)
				rc = store_step_done(up);
		}
		if (rc == 0 && store_commit(s) == 0) {
			json_array_foreach(changes, i, c)
			{
				json_t *ev = json_deep_copy(c);
				json_object_del(ev, "id");
				if (!json_string_value(json_object_get(ev, "error"))[0])
					json_object_del(ev, "error");
				log_info("reconcile", "fabric %s: %s",
				         json_string_value(json_object_get(c, "fabric")),
				         json_string_value(json_object_get(c, "state")));
				events_publish(r->d.events, EVENTS_FABRIC_STATE, ev);
			}
		} else {
			store_rollback(s);
			r->fabs_valid = false;
		}
	} else if (json_array_size(changes)) {
		r->fabs_valid = false;
	}
	free(culprit);
	free(busy_on);
	free(seen);
	json_decref(changes);
	events_publish(r->d.events, EVENTS_SETTLED, NULL);
	if (unsettled) {
		struct timeval tick = { 0, STATES_TICK_MS * 1000 };
		evtimer_add(r->ev_states, &tick);
	}
}

static void on_states(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct timespec t0 = work_start();
	update_states(arg);
	work_end(t0);
}

static void schedule_states(struct reconciler *r)
{
	struct timeval now = { 0, 0 };
	evtimer_add(r->ev_states, &now);
}

/* ---- public -------------------------------------------------------------- */

int reconcile_init(const struct reconcile_deps *d, struct reconciler **out)
{
	struct reconciler *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->d = *d;
	r->ev_pass = event_new(d->base, -1, 0, on_pass, r);
	r->ev_audit = event_new(d->base, -1, EV_PERSIST, on_audit, r);
	r->ev_states = evtimer_new(d->base, on_states, r);
	r->ev_flush = evtimer_new(d->base, on_flush, r);
	if (!r->ev_pass || !r->ev_audit || !r->ev_states || !r->ev_flush) {
		reconcile_free(r);
		return -ENOMEM;
	}
	struct store *s = d->store;
	if (store_begin(s) == 0) {
		sqlite3_stmt *st =
		    store_stmt(s, "UPDATE operation SET status = 'interrupted', "
		                  "error = 'the daemon stopped before the batch "
		                  "completed', ended = strftime('%Y-%m-%dT%H:%M:%fZ', "
		                  "'now') WHERE status = 'running'");
		if (store_step_done(st) == 0)
			store_commit(s);
		else
			store_rollback(s);
	}
	reconcile_set_audit_interval(r, d->audit_interval_s);
	*out = r;
	sync_units(r);
	reconcile_kick(r);
	return 0;
}

void reconcile_free(struct reconciler *r)
{
	if (!r)
		return;
	flush_actual(r);
	while (r->units) {
		struct unit *u = r->units;
		r->units = u->next;
		unit_free(u, true);
	}
	if (r->ev_pass)
		event_free(r->ev_pass);
	if (r->ev_audit)
		event_free(r->ev_audit);
	if (r->ev_states)
		event_free(r->ev_states);
	if (r->ev_flush)
		event_free(r->ev_flush);
	free(r->fabs);
	free(r);
}

json_t *reconcile_unit_json(struct reconciler *r, int64_t ocs_id)
{
	struct unit *u = unit_by_id(r, ocs_id);
	if (!u)
		return NULL;
	json_t *down = json_array();
	sqlite3_stmt *st =
	    store_stmt(store_of(r), "SELECT port FROM ocs_port_down WHERE ocs_id = ? "
	                            "ORDER BY port");
	sqlite3_bind_int64(st, 1, ocs_id);
	while (sqlite3_step(st) == SQLITE_ROW)
		json_array_append_new(down, json_integer(sqlite3_column_int64(st, 0)));
	sqlite3_reset(st);
	return json_pack(
	    "{s:s, s:s?, s:b, s:b, s:o, s:o, s:o, s:o}", "state", conn_name(u->conn), "last_error",
	    u->last_error[0] ? u->last_error : NULL, "read_back", u->have_actual, "in_sync",
	    u->conn == OCS_CONN_UP && u->have_actual && u->in_sync && !u->busy, "actual",
	    xcs_json(u->actual, u->nactual), "partial", flows_json(u->partial, u->npartial),
	    "foreign", flows_json(u->foreign, u->nforeign), "ports_down", down);
}

bool reconcile_all_in_sync(struct reconciler *r)
{
	for (struct unit *u = r->units; u; u = u->next)
		if (u->conn != OCS_CONN_UP || !u->have_actual || !u->in_sync || u->busy || u->op_id)
			return false;
	return true;
}

/*
 * Why port of u may be joined to another port though nothing desires it, in
 * why; false when it is free as far as ofcd knows.
 */
static bool port_leftover(struct reconciler *r, struct unit *u, uint32_t port, char *why,
                          size_t len)
{
	if (port < 1 || port > u->ports)
		return false;
	uint32_t peer = u->peer[port] ? u->peer[port] : u->joining[port];
	if (peer) {
		struct plan_xc xc = { port < peer ? port : peer, port < peer ? peer : port };
		struct desired_set ds = unit_desired(u);
		if (ds.n && bsearch(&xc, ds.xc, ds.n, sizeof(xc), plan_xc_cmp))
			return false;
		const char *former = desired_former_owner(r->d.desired, u->id, xc.a, xc.b);
		snprintf(why, len, "OCS unit %s %s port %u to port %u%s%s%s", u->name,
		         u->peer[port] ? "still joins" : "is joining", port, peer,
		         former ? " (a circuit of fabric " : "", former ? former : "",
		         former ? ")" : "");
		return true;
	}
	for (size_t i = 0; i < u->npartial; i++) {
		if (u->partial[i].in_port == port || u->partial[i].out_port == port) {
			snprintf(why, len, "OCS unit %s still holds a one-way entry %u -> %u",
			         u->name, u->partial[i].in_port, u->partial[i].out_port);
			return true;
		}
	}
	return false;
}

bool reconcile_server_joined(struct reconciler *r, int64_t server_id, char *why, size_t len)
{
	sqlite3_stmt *st =
	    store_stmt(store_of(r), "SELECT ocs_id, ocs_port FROM cable WHERE server_id = ?");
	bool joined = false;
	sqlite3_bind_int64(st, 1, server_id);
	while (!joined && sqlite3_step(st) == SQLITE_ROW) {
		struct unit *u = unit_by_id(r, sqlite3_column_int64(st, 0));
		if (u)
			joined =
			    port_leftover(r, u, (uint32_t)sqlite3_column_int64(st, 1), why, len);
	}
	sqlite3_reset(st);
	return joined;
}

long reconcile_unit_held(struct reconciler *r, int64_t ocs_id)
{
	struct unit *u = unit_by_id(r, ocs_id);
	if (!u || !u->have_actual)
		return -1;
	return (long)(u->nactual + u->npartial);
}

uint64_t reconcile_generation(const struct reconciler *r)
{
	return r->generation;
}

int reconcile_inject(struct reconciler *r, int64_t ocs_id, const struct ocs_fault *fault)
{
	struct unit *u = unit_by_id(r, ocs_id);
	if (!u || !u->h)
		return -ENOENT;
	if (!u->ops->inject)
		return -EOPNOTSUPP;
	int rc = u->ops->inject(u->h, fault);
	/* A change behind the controller's back is found by the audit, not announced. */
	return rc;
}
