/*
 * The reconciler against the real sim driver and a real store: fabric states
 * (pending, applying, applied; degraded; failed and recovered), removals
 * before additions within a batch and across batches, batch splitting, drift
 * repair by the audit, isolation hold-back, and a deleted fabric's circuits
 * removed in its name; and randomized change sequences (fabric churn, device
 * failures, unit disconnects, drift, one-way and foreign entries) after which
 * the incremental bookkeeping must equal a full recomputation. Events are
 * observed on the bus, batches in the operation rows, what the unit holds
 * through reconcile_unit_json(). Every test runs in check mode: each state
 * update ends with a full recomputation, and teardown asserts it never
 * differed.
 *
 * Topology: o1 (sim, 64 ports) and o2 (sim, 16 ports); servers s1..s4 with
 * 2 devices of 2 ports, slot k of server i (1-based) cabled to o1 port
 * 4(i-1)+k+1; s5 the same on o2 ports 1..4. A fabric of two servers of o1
 * has one circuit, between their first ports.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "state/desired.h"
#include "base/events.h"
#include "domain/fabric.h"
#include "domain/fabric_state.h"
#include "log.h"
#include "plan.h"
#include "reconcile/reconcile.h"
#include "reconcile/reconcile_audit.h"
#include "reconcile/reconcile_core.h"
#include "reconcile/reconcile_ports.h"
#include "reconcile/reconcile_state.h"
#include "reconcile/reconcile_store.h"
#include "state/store_sql.h"
#include "domain/topo.h"

/* One event heard on the bus. */
struct heard {
	enum events_kind kind;
	json_t *data; /* a copy, owned */
};

struct fixture {
	char dir[64];
	char path[128];
	struct store *s;
	struct desired *d;
	struct events *ev;
	struct events_sub *sub;
	struct event_base *base;
	struct event *tick; /* bounds each loop iteration */
	struct reconciler *r;
	struct heard *heard;
	size_t nheard, capheard;
};

static void exec(struct fixture *f, const char *sql)
{
	char *err = NULL;
	int rc = sqlite3_exec(store_db(f->s), sql, NULL, NULL, &err);
	if (rc != SQLITE_OK)
		fail_msg("%s: %s", sql, err);
}

static int64_t query_int(struct fixture *f, const char *sql)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -1;
	assert_int_equal(sqlite3_prepare_v2(store_db(f->s), sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* The text of the first column of the first row of sql, in buf ("" when none). */
static const char *query_text(struct fixture *f, const char *sql, char *buf, size_t len)
{
	sqlite3_stmt *st = NULL;
	buf[0] = '\0';
	assert_int_equal(sqlite3_prepare_v2(store_db(f->s), sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		snprintf(buf, len, "%s", sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return buf;
}

static void on_event(void *arg, const struct events_msg *msg)
{
	struct fixture *f = arg;
	if (f->nheard == f->capheard) {
		f->capheard = f->capheard ? 2 * f->capheard : 64;
		f->heard = realloc(f->heard, f->capheard * sizeof(*f->heard));
		assert_non_null(f->heard);
	}
	f->heard[f->nheard++] = (struct heard){ msg->kind, json_deep_copy(msg->data) };
}

static void forget_heard(struct fixture *f)
{
	for (size_t i = 0; i < f->nheard; i++)
		json_decref(f->heard[i].data);
	f->nheard = 0;
}

static void noop(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

/* Runs the loop until cond holds or timeout_ms pass; returns whether it holds. */
static bool run_until(struct fixture *f, bool (*cond)(struct fixture *, const void *),
                      const void *arg, unsigned timeout_ms)
{
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (cond(f, arg))
			return true;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >
		    (long)timeout_ms)
			return false;
		struct timeval tv = { 0, 2000 };
		evtimer_add(f->tick, &tv);
		event_base_loop(f->base, EVLOOP_ONCE);
	}
}

static bool in_sync(struct fixture *f, const void *arg)
{
	(void)arg;
	return reconcile_all_in_sync(f->r);
}

/* A fabric and the state it should reach: "name=state". */
static bool fabric_in(struct fixture *f, const void *arg)
{
	char name[65], want[16], state[16];
	assert_int_equal(sscanf(arg, "%64[^=]=%15s", name, want), 2);
	return topo_fabric_state(f->s, name, state, sizeof(state)) == 0 && strcmp(state, want) == 0;
}

static bool heard_kind(struct fixture *f, const void *arg)
{
	const enum events_kind *kind = arg;
	for (size_t i = 0; i < f->nheard; i++)
		if (f->heard[i].kind == *kind)
			return true;
	return false;
}

/* Whether a unit may still join one of the server's ports to another (as POST /v1/fabrics asks). */
static bool server_joined(struct fixture *f, const char *server, char *why, size_t len)
{
	sqlite3_stmt *st = NULL;
	bool joined = false;
	assert_int_equal(
	    sqlite3_prepare_v2(store_db(f->s),
	                       "SELECT c.ocs_id, c.ocs_port FROM cable c JOIN server s "
	                       "ON s.id = c.server_id WHERE s.name = ?",
	                       -1, &st, NULL),
	    SQLITE_OK);
	sqlite3_bind_text(st, 1, server, -1, SQLITE_STATIC);
	while (!joined && sqlite3_step(st) == SQLITE_ROW)
		joined = reconcile_port_joined(f->r, sqlite3_column_int64(st, 0),
		                               (uint32_t)sqlite3_column_int64(st, 1), why, len);
	sqlite3_finalize(st);
	return joined;
}

/* The operations journal is written (batches are recorded once per loop iteration or so). */
static bool journal_written(struct fixture *f, const void *arg)
{
	(void)arg;
	return f->r->njournal == 0;
}

/* The named unit was read back holding nothing. */
static bool empty(struct fixture *f, const void *ocs)
{
	return reconcile_unit_held(f->r, topo_ocs_id(f->s, ocs)) == 0;
}

/* Waits for every fabric in states[] and for every unit to be in sync. */
static void settle(struct fixture *f, const char *const *states)
{
	for (; states && *states; states++)
		if (!run_until(f, fabric_in, *states, 2000))
			fail_msg("fabric never reached %s", *states);
	assert_true(run_until(f, in_sync, NULL, 2000));
}

/* The states fabric went through, as published, joined by spaces. */
static const char *states_heard(struct fixture *f, const char *fabric, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < f->nheard; i++) {
		json_t *d = f->heard[i].data;
		if (f->heard[i].kind != EVENTS_FABRIC_STATE ||
		    strcmp(json_string_value(json_object_get(d, "fabric")), fabric) != 0)
			continue;
		n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? " " : "",
		                      json_string_value(json_object_get(d, "state")));
		assert_true(n < len);
	}
	return buf;
}

/* The states a fabric went through are "name=state state ...". */
static bool states_are(struct fixture *f, const void *arg)
{
	char name[65], buf[256];
	const char *want = strchr(arg, '=');
	snprintf(name, sizeof(name), "%.*s", (int)(want - (const char *)arg), (const char *)arg);
	return strcmp(states_heard(f, name, buf, sizeof(buf)), want + 1) == 0;
}

static size_t count_heard(struct fixture *f, enum events_kind kind)
{
	size_t n = 0;
	for (size_t i = 0; i < f->nheard; i++)
		n += f->heard[i].kind == kind;
	return n;
}

/* What unit ocs holds, as "[[a,b],...]" (compact JSON). */
static const char *held(struct fixture *f, const char *ocs, char *buf, size_t len)
{
	json_t *u = reconcile_unit_json(f->r, topo_ocs_id(f->s, ocs));
	assert_non_null(u);
	char *t = json_dumps(json_object_get(u, "actual"), JSON_COMPACT);
	snprintf(buf, len, "%s", t);
	free(t);
	json_decref(u);
	return buf;
}

/* The stored circuits of unit ocs, in the form held() gives. */
static const char *stored(struct fixture *f, const char *ocs, char *buf, size_t len)
{
	char sql[400];
	snprintf(sql, sizeof(sql),
	         "SELECT '[' || coalesce(group_concat(p, ','), '') || ']' FROM (SELECT '[' || "
	         "min(a_ocs_port, b_ocs_port) || ',' || max(a_ocs_port, b_ocs_port) || ']' AS p "
	         "FROM circuit c JOIN ocs o ON o.id = c.ocs_id WHERE o.name = '%s' ORDER BY "
	         "min(a_ocs_port, b_ocs_port))",
	         ocs);
	return query_text(f, sql, buf, len);
}

/* Makes a fabric of the named servers as POST /v1/fabrics does, and kicks. */
static int64_t create_fabric(struct fixture *f, const char *name, const char *const *servers)
{
	int64_t ids[8];
	uint32_t m = 0;
	struct topo_input in = { 0 };
	struct plan_fabric plan = { 0 };
	char why[256];
	for (; servers[m]; m++)
		assert_true((ids[m] = topo_server_id(f->s, servers[m])) > 0);
	assert_int_equal(store_begin(f->s), 0);
	assert_int_equal(topo_input_load(f->s, ids, m, &in), 0);
	assert_int_equal(plan_fabric_compute(in.servers, in.m, &plan), 0);
	assert_int_equal(plan_verify(in.servers, in.m, &plan, why, sizeof(why)), 0);
	sqlite3_stmt *st = store_stmt(f->s, "INSERT INTO fabric(name, state, formula, planes, "
	                                    "min_devices) VALUES (?, 'pending', ?, ?, ?)");
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, plan.formula);
	sqlite3_bind_int64(st, 3, plan.planes);
	sqlite3_bind_int64(st, 4, plan.min_devices);
	assert_int_equal(store_step_done(st), 0);
	int64_t fid = sqlite3_last_insert_rowid(store_db(f->s));
	st = store_stmt(f->s, "INSERT INTO fabric_server(fabric_id, position, server_id) "
	                      "VALUES (?, ?, ?)");
	for (uint32_t i = 0; i < m; i++) {
		sqlite3_bind_int64(st, 1, fid);
		sqlite3_bind_int64(st, 2, i);
		sqlite3_bind_int64(st, 3, ids[i]);
		assert_int_equal(store_step_done(st), 0);
	}
	assert_int_equal(topo_plan_save(f->s, fid, &in, NULL, &plan, "pending", false), 0);
	assert_int_equal(store_commit(f->s), 0);
	plan_fabric_free(&plan);
	topo_input_free(&in);
	reconcile_kick(f->r);
	return fid;
}

/* Deletes a fabric as DELETE /v1/fabrics/NAME does, and kicks. */
static void delete_fabric(struct fixture *f, int64_t fid)
{
	assert_int_equal(store_begin(f->s), 0);
	sqlite3_stmt *st = store_stmt(f->s, "DELETE FROM fabric WHERE id = ?");
	sqlite3_bind_int64(st, 1, fid);
	assert_int_equal(store_step_done(st), 0);
	assert_int_equal(store_commit(f->s), 0);
	reconcile_kick(f->r);
}

static void inject(struct fixture *f, const char *ocs, struct ocs_fault fault)
{
	assert_int_equal(reconcile_inject(f->r, topo_ocs_id(f->s, ocs), &fault), 0);
}

/*
 * A switching delay of a few milliseconds per batch: without one the sim
 * answers on the next loop iteration and the coalesced state update only
 * sees the end (pending straight to applied).
 */
static void switching_delay(struct fixture *f, const char *ocs)
{
	inject(f, ocs, (struct ocs_fault){ .kind = OCS_FAULT_DELAY, .count = 10 });
}

/* The audit timer firing now, without waiting for its interval. */
static void audit_now(struct fixture *f)
{
	event_active(f->r->ev_audit, EV_TIMEOUT, 1);
}

static struct unit *unit_named(struct fixture *f, const char *name)
{
	for (struct unit *u = f->r->units; u; u = u->next)
		if (strcmp(u->name, name) == 0)
			return u;
	fail_msg("no unit %s", name);
	return NULL;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char err[256];
	assert_non_null(f);
	strcpy(f->dir, "/tmp/ofcd-reconcile-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/t.db", f->dir);
	assert_int_equal(store_open(f->path, &f->s, err, sizeof(err)), 0);
	exec(f, "INSERT INTO ocs(id, name, driver, ports, endpoint) VALUES "
	        "(1, 'o1', 'sim', 64, 'sim'), (2, 'o2', 'sim', 16, 'sim');"
	        "INSERT INTO server(id, name, devices, ports_per_device) VALUES "
	        "(1, 's1', 2, 2), (2, 's2', 2, 2), (3, 's3', 2, 2), (4, 's4', 2, 2), "
	        "(5, 's5', 2, 2);"
	        "WITH RECURSIVE k(v) AS (SELECT 0 UNION ALL SELECT v + 1 FROM k WHERE v < 3) "
	        "INSERT INTO cable(server_id, device, port, ocs_id, ocs_port) "
	        "SELECT s.id, k.v / 2, k.v % 2, CASE WHEN s.id = 5 THEN 2 ELSE 1 END, "
	        "CASE WHEN s.id = 5 THEN k.v + 1 ELSE 4 * (s.id - 1) + k.v + 1 END "
	        "FROM server s, k");
	assert_int_equal(desired_open(f->s, &f->d), 0);
	assert_int_equal(events_new(&f->ev), 0);
	f->sub = events_subscribe(f->ev, EVENTS_PUBLIC, on_event, f);
	assert_non_null(f->sub);
	f->base = event_base_new();
	assert_non_null(f->base);
	f->tick = evtimer_new(f->base, noop, NULL);
	struct reconcile_deps deps = {
		.base = f->base,
		.store = f->s,
		.desired = f->d,
		.events = f->ev,
		.audit_interval_s = 60, /* the tests run audits themselves */
		.check = true           /* every state update ends with a full recomputation */
	};
	assert_int_equal(reconcile_init(&deps, &f->r), 0);
	/* Both units up and read back, holding nothing. */
	settle(f, NULL);
	forget_heard(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	/* The incremental bookkeeping never differed from a full recomputation. */
	assert_int_equal(reconcile_audit_all(f->r), 0);
	assert_int_equal(f->r->audit_mismatches, 0);
	reconcile_free(f->r);
	event_free(f->tick);
	event_base_free(f->base);
	events_unsubscribe(f->ev, f->sub);
	events_free(f->ev);
	forget_heard(f);
	free(f->heard);
	desired_free(f->d);
	store_close(f->s);
	const char *suffix[] = { "", "-wal", "-shm" };
	for (int i = 0; i < 3; i++) {
		char p[160];
		snprintf(p, sizeof(p), "%s%s", f->path, suffix[i]);
		unlink(p);
	}
	rmdir(f->dir);
	free(f);
	return 0;
}

/* ---- tests ---------------------------------------------------------------- */

static const char *const s1234[] = { "s1", "s2", "s3", "s4", NULL };
static const char *const s12[] = { "s1", "s2", NULL };
static const char *const s34[] = { "s3", "s4", NULL };

static void test_applied(void **state)
{
	struct fixture *f = *state;
	char buf[256], want[256];
	/* A batch takes a while, as on a real unit: applying lasts until it is read back. */
	switching_delay(f, "o1");
	/* Four servers, three planes: six circuits on o1, one per pair. */
	create_fabric(f, "A", s1234);
	settle(f, (const char *const[]){ "A=applied", NULL });
	assert_string_equal(states_heard(f, "A", buf, sizeof(buf)), "applying applied");
	assert_int_equal(query_int(f, "SELECT count(*) FROM circuit"), 6);
	/* The unit holds exactly the stored circuits. */
	assert_string_equal(held(f, "o1", buf, sizeof(buf)), stored(f, "o1", want, sizeof(want)));
	/* One batch of six additions, recorded and published with its fabric. */
	assert_int_equal(query_int(f, "SELECT count(*) FROM operation"), 1);
	assert_string_equal(query_text(f,
	                               "SELECT ocs || ' ' || trigger || ' ' || status || ' ' || "
	                               "nadds || ' ' || ndeletes FROM operation",
	                               buf, sizeof(buf)),
	                    "o1 change succeeded 6 0");
	assert_string_equal(
	    query_text(f, "SELECT group_concat(fabric) FROM operation_fabric", buf, sizeof(buf)),
	    "A");
	assert_int_equal(count_heard(f, EVENTS_OPERATION), 1);
	for (size_t i = 0; i < f->nheard; i++) {
		if (f->heard[i].kind != EVENTS_OPERATION)
			continue;
		char *t = json_dumps(json_object_get(f->heard[i].data, "fabrics"), JSON_COMPACT);
		assert_string_equal(t, "[\"A\"]");
		free(t);
		assert_string_equal(json_string_value(json_object_get(f->heard[i].data, "status")),
		                    "succeeded");
	}
	assert_int_equal(reconcile_unit_held(f->r, topo_ocs_id(f->s, "o1")), 6);
	assert_int_equal(reconcile_unit_held(f->r, topo_ocs_id(f->s, "o2")), 0);
}

/* The history is at most 10,000 operations. */
static bool history_bounded(struct fixture *f, const void *arg)
{
	(void)arg;
	return query_int(f, "SELECT count(*) FROM operation") <= 10000;
}

/*
 * The history is pruned off the path of a change: a batch only records itself, and the
 * oldest operations go in bulk a second later, a turn's worth at a time, down to 10,000.
 */
static void test_history_pruned_in_bulk(void **state)
{
	struct fixture *f = *state;
	int64_t oldest;
	exec(f, "WITH RECURSIVE k(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM k WHERE v < 10600) "
	        "INSERT INTO operation(id, ocs, trigger, nadds, ndeletes, status) "
	        "SELECT v, 'o1', 'change', 0, 0, 'succeeded' FROM k; "
	        "INSERT INTO operation_xc(operation_id, adds, deletes) "
	        "SELECT id, '[]', '[]' FROM operation");
	f->r->next_op_id = 10601;
	create_fabric(f, "A", s1234);
	assert_true(run_until(f, journal_written, NULL, 5000));
	assert_true(run_until(f, history_bounded, NULL, 10000));
	oldest = query_int(f, "SELECT min(id) FROM operation");
	assert_int_equal(query_int(f, "SELECT count(*) FROM operation"), 10000);
	assert_int_equal(query_int(f, "SELECT max(id) - min(id) + 1 FROM operation"), 10000);
	assert_true(oldest > 600);
	assert_int_equal(query_int(f, "SELECT count(*) FROM operation_xc WHERE operation_id < "
	                              "(SELECT min(id) FROM operation)"),
	                 0);
	settle(f, (const char *const[]){ "A=applied", NULL });
}

static void test_degraded(void **state)
{
	struct fixture *f = *state;
	char buf[256], want[256];
	switching_delay(f, "o1");
	/* s5 shares no unit with s1 and s2: two of its three pairs cannot have a circuit. */
	create_fabric(f, "D", (const char *const[]){ "s1", "s2", "s5", NULL });
	settle(f, (const char *const[]){ "D=degraded", NULL });
	assert_int_equal(query_int(f, "SELECT count(*) FROM missing_pair"), 2);
	assert_int_equal(query_int(f, "SELECT count(*) FROM circuit"), 1);
	assert_string_equal(held(f, "o1", buf, sizeof(buf)), stored(f, "o1", want, sizeof(want)));
	assert_string_equal(held(f, "o2", buf, sizeof(buf)), "[]");
	assert_string_equal(states_heard(f, "D", buf, sizeof(buf)), "applying degraded");
}

/* More than *arg operations failed. */
static bool ops_failed(struct fixture *f, const void *arg)
{
	return query_int(f, "SELECT count(*) FROM operation WHERE status = 'failed'") >
	       *(const int64_t *)arg;
}

static const int64_t zero;

static void test_failed_and_recovered(void **state)
{
	struct fixture *f = *state;
	char buf[256];
	/* The refused batch is in flight for a while, as on a real unit. */
	switching_delay(f, "o1");
	inject(f, "o1", (struct ocs_fault){ .kind = OCS_FAULT_FAIL_BATCHES, .count = 1000 });
	create_fabric(f, "A", s12);
	assert_true(run_until(f, ops_failed, &zero, 2000));
	/* A batch was sent, nothing is held: applying, not failing yet. */
	assert_true(run_until(f, fabric_in, "A=applying", 1000));
	/*
	 * As if the unit had refused RECONCILE_FAILED_AFTER batches in a row
	 * (the backoff would take seconds). Its retry is armed; it will succeed.
	 */
	struct unit *u = unit_named(f, "o1");
	assert_true(u->retry_pending);
	u->failures = RECONCILE_FAILED_AFTER;
	inject(f, "o1", (struct ocs_fault){ .kind = OCS_FAULT_FAIL_BATCHES, .count = 0 });
	reconcile_kick(f->r);
	assert_true(run_until(f, fabric_in, "A=failed", 2000));
	assert_string_equal(
	    query_text(f, "SELECT error FROM fabric WHERE name = 'A'", buf, sizeof(buf)),
	    "OCS unit o1: injected fault: batch refused");
	assert_string_equal(
	    query_text(f, "SELECT error FROM operation WHERE id = 1", buf, sizeof(buf)),
	    "injected fault: batch refused");
	/* The retry applies the fabric. */
	settle(f, (const char *const[]){ "A=applied", NULL });
	assert_string_equal(states_heard(f, "A", buf, sizeof(buf)), "applying failed applied");
	assert_string_equal(query_text(f,
	                               "SELECT trigger || ' ' || status FROM operation "
	                               "ORDER BY id DESC LIMIT 1",
	                               buf, sizeof(buf)),
	                    "retry succeeded");
	assert_int_equal(query_int(f, "SELECT error IS NULL FROM fabric WHERE name = 'A'"), 1);
	assert_string_equal(held(f, "o1", buf, sizeof(buf)), "[[1,5]]");
}

static void test_drift_repaired_break_before_make(void **state)
{
	struct fixture *f = *state;
	char buf[256];
	const enum events_kind drift = EVENTS_DRIFT;
	create_fabric(f, "A", s12);
	settle(f, (const char *const[]){ "A=applied", NULL });
	switching_delay(f, "o1");
	forget_heard(f);
	/* By hand: port 1 now goes to port 6 (still fabric A's) instead of port 5. */
	inject(f, "o1", (struct ocs_fault){ .kind = OCS_FAULT_SET_XC, .a = 1, .b = 6 });
	/* The public knob, not audit_now(): the audit timer itself finds it. */
	reconcile_set_audit_interval(f->r, 1);
	assert_true(run_until(f, heard_kind, &drift, 2500));
	assert_true(run_until(f, states_are, "A=applying applied", 2000));
	settle(f, NULL);
	json_t *d = NULL;
	for (size_t i = 0; i < f->nheard && !d; i++)
		if (f->heard[i].kind == EVENTS_DRIFT)
			d = f->heard[i].data;
	assert_string_equal(json_string_value(json_object_get(d, "ocs")), "o1");
	assert_int_equal(json_integer_value(json_object_get(d, "held_before")), 1);
	assert_int_equal(json_integer_value(json_object_get(d, "held_now")), 1);
	/*
	 * One batch: the stray removed before the circuit is made again on the
	 * same port (the sim refuses an addition on a joined port, so success
	 * shows the order).
	 */
	assert_string_equal(query_text(f,
	                               "SELECT o.trigger || ' ' || o.status || ' ' || x.deletes "
	                               "|| ' ' || x.adds FROM operation o JOIN operation_xc x "
	                               "ON x.operation_id = o.id ORDER BY o.id DESC LIMIT 1",
	                               buf, sizeof(buf)),
	                    "audit succeeded [[1,6]] [[1,5]]");
	assert_string_equal(held(f, "o1", buf, sizeof(buf)), "[[1,5]]");
	assert_string_equal(states_heard(f, "A", buf, sizeof(buf)), "applying applied");
	assert_int_equal(count_heard(f, EVENTS_ISOLATION_VIOLATION), 0);
}

static void test_isolation_holds_back(void **state)
{
	struct fixture *f = *state;
	char buf[256];
	const enum events_kind violation = EVENTS_ISOLATION_VIOLATION;
	create_fabric(f, "A", s12);
	create_fabric(f, "B", s34);
	settle(f, (const char *const[]){ "A=applied", "B=applied", NULL });
	assert_string_equal(held(f, "o1", buf, sizeof(buf)), "[[1,5],[9,13]]");
	forget_heard(f);
	/* Unused ports of s1 (fabric A) and s3 (fabric B) joined by hand; removal refused. */
	inject(f, "o1", (struct ocs_fault){ .kind = OCS_FAULT_FAIL_BATCHES, .count = 1000 });
	inject(f, "o1", (struct ocs_fault){ .kind = OCS_FAULT_SET_XC, .a = 4, .b = 12 });
	audit_now(f);
	assert_true(run_until(f, heard_kind, &violation, 2000));
	assert_true(run_until(f, ops_failed, &zero, 2000));
	json_t *v = NULL;
	for (size_t i = 0; i < f->nheard && !v; i++)
		if (f->heard[i].kind == EVENTS_ISOLATION_VIOLATION)
			v = f->heard[i].data;
	char *t = json_dumps(v, JSON_COMPACT);
	assert_non_null(strstr(t, "\"ocs\":\"o1\""));
	assert_non_null(strstr(t, "\"cross_connect\":[4,12]"));
	assert_non_null(strstr(t, "\"foreign\":false"));
	assert_non_null(strstr(t, "\"fabrics\":[\"A\",\"B\"]"));
	free(t);
	/* Both fabrics' circuits are held, yet neither is applied while the stray stays. */
	assert_true(run_until(f, fabric_in, "A=applying", 1000));
	assert_true(run_until(f, fabric_in, "B=applying", 1000));
	assert_string_equal(held(f, "o1", buf, sizeof(buf)), "[[1,5],[4,12],[9,13]]");
	/* Nor may s1 join a new fabric: the unit still joins its port. */
	assert_true(server_joined(f, "s1", buf, sizeof(buf)));
	assert_string_equal(buf, "OCS unit o1 still joins port 4 to port 12");
	assert_false(server_joined(f, "s2", buf, sizeof(buf)));
	/* Reported once, however many read-backs show it (each retry reads back). */
	int64_t failed = query_int(f, "SELECT count(*) FROM operation WHERE status = 'failed'");
	assert_true(run_until(f, ops_failed, &failed, 1000));
	assert_int_equal(count_heard(f, EVENTS_ISOLATION_VIOLATION), 1);
	/* Removal allowed again: the retry removes the stray and both are applied. */
	inject(f, "o1", (struct ocs_fault){ .kind = OCS_FAULT_FAIL_BATCHES, .count = 0 });
	settle(f, (const char *const[]){ "A=applied", "B=applied", NULL });
	assert_string_equal(held(f, "o1", buf, sizeof(buf)), "[[1,5],[9,13]]");
	assert_string_equal(query_text(f,
	                               "SELECT o.status || ' ' || x.deletes || ' ' || x.adds || "
	                               "' ' || (SELECT group_concat(fabric) FROM (SELECT fabric "
	                               "FROM operation_fabric WHERE operation_id = o.id ORDER "
	                               "BY fabric)) FROM operation o JOIN operation_xc x ON "
	                               "x.operation_id = o.id ORDER BY o.id DESC LIMIT 1",
	                               buf, sizeof(buf)),
	                    "succeeded [[4,12]] [] A,B");
}

static void test_deleted_fabric_removed(void **state)
{
	struct fixture *f = *state;
	char buf[256];
	int64_t fid = create_fabric(f, "A", s12);
	settle(f, (const char *const[]){ "A=applied", NULL });
	delete_fabric(f, fid);
	/* Until the unit is seen without it, the circuit still binds s1's port. */
	assert_true(server_joined(f, "s1", buf, sizeof(buf)));
	assert_string_equal(buf,
	                    "OCS unit o1 still joins port 1 to port 5 (a circuit of fabric A)");
	assert_true(run_until(f, empty, "o1", 2000));
	settle(f, NULL);
	assert_false(server_joined(f, "s1", buf, sizeof(buf)));
	assert_string_equal(held(f, "o1", buf, sizeof(buf)), "[]");
	/* The removal is recorded (by the journal, soon) in the name of the fabric that is gone. */
	assert_true(run_until(f, journal_written, NULL, 1000));
	assert_string_equal(query_text(f,
	                               "SELECT x.deletes || ' ' || f.fabric FROM operation o "
	                               "JOIN operation_xc x ON x.operation_id = o.id JOIN "
	                               "operation_fabric f ON f.operation_id = o.id ORDER BY "
	                               "o.id DESC LIMIT 1",
	                               buf, sizeof(buf)),
	                    "[[1,5]] A");
}

/* Sets the unit's read-back to what it holds plus foreign entries v[0..n). */
static void read_with_foreign(struct fixture *f, struct unit *u, const struct ocs_flow *v, size_t n)
{
	struct plan_xc *held = malloc((u->nactual + 1) * sizeof(*held));
	assert_non_null(held);
	if (u->nactual)
		memcpy(held, u->actual, u->nactual * sizeof(*held));
	struct reconcile_readback rb = { .xcs = held, .n = u->nactual, .cap = u->nactual + 1 };
	reconcile_ports_set_actual(f->r, u, &rb, NULL, 0, v, n);
	reconcile_unit_changed(f->r, u);
}

static void test_an_entry_ofcd_did_not_make_joins_its_ports(void **state)
{
	struct fixture *f = *state;
	char buf[256];
	create_fabric(f, "B", s34);
	settle(f, (const char *const[]){ "B=applied", NULL });
	struct unit *u = unit_named(f, "o1");
	/* An OpenFlow entry made by hand: free s1's port 1 copied to fabric B's port 9. */
	const struct ocs_flow one_way[] = { { 1, 9 } };
	read_with_foreign(f, u, one_way, 1);
	assert_true(reconcile_unit_may_join(f->r, 1));
	assert_true(server_joined(f, "s1", buf, sizeof(buf)));
	assert_string_equal(buf, "OCS unit o1 holds an entry ofcd did not make, 1 -> 9");
	/* Dropping, or back to the controller, leads nowhere else: s2 stays free. */
	const struct ocs_flow drops[] = { { 5, 0 }, { OCS_PORT_ANY, 0 } };
	read_with_foreign(f, u, drops, 2);
	assert_false(server_joined(f, "s2", buf, sizeof(buf)));
	assert_int_equal(u->foreign_all, 0); /* a table-miss entry holds no fabric back */
	assert_false(reconcile_unit_may_join(f->r, 1));
	/* One that floods reaches every port. */
	const struct ocs_flow floods[] = { { 6, OCS_PORT_EVERY } };
	read_with_foreign(f, u, floods, 1);
	assert_true(server_joined(f, "s2", buf, sizeof(buf)));
	assert_string_equal(buf, "OCS unit o1 holds an entry ofcd did not make that matches or "
	                         "floods every port");
	read_with_foreign(f, u, NULL, 0);
	assert_false(server_joined(f, "s1", buf, sizeof(buf)));
	assert_false(server_joined(f, "s2", buf, sizeof(buf)));
}

static bool read_once(struct fixture *f, const void *name)
{
	return unit_named(f, name)->read_once;
}

/*
 * A cluster member that starts leading has no read-back of its own (its
 * stored one is empty, or old) while a unit does not answer; a deleted
 * fabric's circuits the log told it of may still be there. Until the unit
 * is read, its servers are not free.
 */
static void test_a_new_leader_trusts_no_port_a_former_circuit_used(void **state)
{
	struct fixture *f = *state;
	char buf[256];
	int64_t fid = create_fabric(f, "A", s12);
	settle(f, (const char *const[]){ "A=applied", NULL });
	struct reconcile_deps deps = f->r->d;
	reconcile_free(f->r); /* the leader goes */
	f->r = NULL;
	exec(f, "DELETE FROM actual_xc");
	exec(f, "UPDATE ocs SET driver = 'openflow', endpoint = 'tcp:127.0.0.1:1' WHERE id = 1");
	/* Applied as a follower applies the log: no reconciler runs. */
	delete_fabric(f, fid);
	assert_int_equal(reconcile_init(&deps, &f->r), 0);
	/* What a unit not opened yet is asked (the first pass opens them all, in slices). */
	assert_true(reconcile_port_former(f->r, 1, NULL, 5, buf, sizeof(buf)));
	assert_string_equal(buf, "OCS unit 1 may still join port 5 to port 1 (a circuit of "
	                         "fabric A; the unit is not open yet)");
	assert_true(reconcile_unit_may_join(f->r, 1));
	assert_true(run_until(f, read_once, "o2", 2000));
	assert_false(read_once(f, "o1"));
	assert_true(server_joined(f, "s1", buf, sizeof(buf)));
	assert_string_equal(buf, "OCS unit o1 may still join port 1 to port 5 (a circuit of "
	                         "fabric A; the unit has not been read back yet)");
	assert_false(server_joined(f, "s3", buf, sizeof(buf)));
	/* It stops leading and leads again, the unit still silent: what it knew stays. */
	reconcile_free(f->r);
	f->r = NULL;
	assert_int_equal(reconcile_init(&deps, &f->r), 0);
	assert_true(run_until(f, read_once, "o2", 2000));
	assert_true(server_joined(f, "s1", buf, sizeof(buf)));
	/* Read back without it: free. */
	exec(f, "UPDATE ocs SET driver = 'sim', endpoint = 'sim' WHERE id = 1");
	reconcile_kick(f->r);
	assert_true(run_until(f, read_once, "o1", 2000));
	settle(f, NULL);
	assert_false(server_joined(f, "s1", buf, sizeof(buf)));
	assert_false(reconcile_unit_may_join(f->r, 1));
}

/* ---- many circuits: batch splitting and removals before additions --------- */

#define BIG_CIRCUITS 9000 /* more than one batch (8192 operations) */

/* Fabric 'big' on unit o3 gets circuits (2i + shift + 1, 2i + shift + 2), i < BIG_CIRCUITS. */
static void big_plan(struct fixture *f, int64_t fid, uint32_t shift)
{
	struct plan_xc *v = calloc(BIG_CIRCUITS, sizeof(*v));
	assert_non_null(v);
	for (uint32_t i = 0; i < BIG_CIRCUITS; i++)
		v[i] = (struct plan_xc){ 2 * i + shift + 1, 2 * i + shift + 2 };
	assert_int_equal(store_begin(f->s), 0);
	sqlite3_stmt *st = store_stmt(f->s, "DELETE FROM circuit WHERE fabric_id = ?");
	sqlite3_bind_int64(st, 1, fid);
	assert_int_equal(store_step_done(st), 0);
	st = store_stmt(f->s, "INSERT INTO circuit(fabric_id, plane, a_pos, a_device, a_port, "
	                      "b_pos, b_device, b_port, ocs_id, a_ocs_port, b_ocs_port) "
	                      "VALUES (?, ?, 0, 0, 0, 1, 0, 0, 3, ?, ?)");
	for (uint32_t i = 0; i < BIG_CIRCUITS; i++) {
		sqlite3_bind_int64(st, 1, fid);
		sqlite3_bind_int64(st, 2, i);
		sqlite3_bind_int64(st, 3, v[i].a);
		sqlite3_bind_int64(st, 4, v[i].b);
		assert_int_equal(store_step_done(st), 0);
	}
	st = store_stmt(f->s, "UPDATE fabric SET state = 'pending' WHERE id = ?");
	sqlite3_bind_int64(st, 1, fid);
	assert_int_equal(store_step_done(st), 0);
	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(desired_reloads(f->d), 0);
	free(v);
	reconcile_kick(f->r);
}

/* "ndeletes/nadds" of every batch on o3 from operation first on, in order. */
static const char *batches(struct fixture *f, int64_t first, char *buf, size_t len)
{
	char sql[256];
	snprintf(sql, sizeof(sql),
	         "SELECT group_concat(b, ' ') FROM (SELECT ndeletes || '/' || nadds AS b FROM "
	         "operation WHERE ocs = 'o3' AND status = 'succeeded' AND id >= %lld ORDER BY id)",
	         (long long)first);
	return query_text(f, sql, buf, len);
}

/* The ids of the EVENTS_OPERATION heard, in order, must be increasing. */
static void assert_operations_in_order(struct fixture *f)
{
	json_int_t last = 0;
	for (size_t i = 0; i < f->nheard; i++) {
		if (f->heard[i].kind != EVENTS_OPERATION)
			continue;
		json_int_t id = json_integer_value(json_object_get(f->heard[i].data, "id"));
		assert_true(id > last);
		assert_string_equal(json_string_value(json_object_get(f->heard[i].data, "status")),
		                    "succeeded");
		last = id;
	}
}

static void test_batches_split_removals_first(void **state)
{
	struct fixture *f = *state;
	char buf[256];
	exec(f, "INSERT INTO ocs(id, name, driver, ports, endpoint) VALUES "
	        "(3, 'o3', 'sim', 20000, 'sim');"
	        "INSERT INTO fabric(id, name, state, formula, planes, min_devices) VALUES "
	        "(9, 'big', 'pending', 1, 1, 1)");
	reconcile_kick(f->r);
	assert_true(run_until(f, empty, "o3", 2000));
	switching_delay(f, "o3");
	big_plan(f, 9, 0);
	settle(f, (const char *const[]){ "big=applied", NULL });
	/* 9000 additions: a full batch, then the rest. */
	assert_string_equal(batches(f, 1, buf, sizeof(buf)), "0/8192 0/808");
	assert_int_equal(reconcile_unit_held(f->r, 3), BIG_CIRCUITS);
	assert_operations_in_order(f);

	/*
	 * Re-planned one port along: every new circuit shares a port with an old
	 * one. More removals than a batch takes: a batch of removals only, and
	 * no addition sent before they are acknowledged and read back.
	 */
	int64_t next = query_int(f, "SELECT max(id) + 1 FROM operation");
	forget_heard(f);
	big_plan(f, 9, 1);
	settle(f, (const char *const[]){ "big=applied", NULL });
	assert_string_equal(batches(f, next, buf, sizeof(buf)), "8192/0 808/7384 0/1616");
	assert_int_equal(query_int(f, "SELECT count(*) FROM operation WHERE status != "
	                              "'succeeded'"),
	                 0);
	assert_operations_in_order(f);
	assert_int_equal(count_heard(f, EVENTS_OPERATION), 3);
	assert_string_equal(states_heard(f, "big", buf, sizeof(buf)), "applying applied");
	json_t *u = reconcile_unit_json(f->r, 3);
	json_t *actual = json_object_get(u, "actual");
	assert_int_equal(json_array_size(actual), BIG_CIRCUITS);
	assert_int_equal(json_integer_value(json_array_get(json_array_get(actual, 0), 0)), 2);
	assert_int_equal(json_integer_value(json_array_get(json_array_get(actual, 0), 1)), 3);
	json_decref(u);
}

/* ---- randomized change sequences --------------------------------------------- */

#define RANDOM_SERVERS 15 /* s1..s4 and x1..x10 on o1 (ports 1..56), s5 on o2 */
#define RANDOM_STEPS   400

static uint32_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)(*s >> 11);
}

static bool never(struct fixture *f, const void *arg)
{
	(void)f;
	(void)arg;
	return false;
}

/* A live fabric of the random test. */
struct live {
	char name[16];
	int64_t id;
	const char *servers[5];
	uint32_t m;
};

static const char *server_name(uint32_t i)
{
	static const char *const names[RANDOM_SERVERS] = { "s1", "s2", "s3", "s4", "s5",
		                                           "x1", "x2", "x3", "x4", "x5",
		                                           "x6", "x7", "x8", "x9", "x10" };
	return names[i];
}

static bool in_live(const struct live *v, size_t n, const char *server)
{
	for (size_t i = 0; i < n; i++)
		for (uint32_t k = 0; k < v[i].m; k++)
			if (strcmp(v[i].servers[k], server) == 0)
				return true;
	return false;
}

/* One write as the API does it: a transaction, committed when fn succeeds, then a kick. */
static bool write_txn(struct fixture *f, bool ok)
{
	if (ok && store_commit(f->s) == 0) {
		reconcile_kick(f->r);
		return true;
	}
	store_rollback(f->s);
	return false;
}

static void random_create(struct fixture *f, uint64_t *seed, struct live *v, size_t *n,
                          unsigned serial)
{
	struct domain_units u = reconcile_domain_units(f->r);
	struct fabric_ctx c = { f->s, f->d, &u };
	struct ofcd_error e = { 0 };
	struct live l = { 0 };
	uint32_t want = 2 + rnd(seed) % 3;
	for (uint32_t tries = 0; tries < 40 && l.m < want; tries++) {
		const char *sv = server_name(rnd(seed) % RANDOM_SERVERS);
		bool dup = in_live(v, *n, sv);
		for (uint32_t k = 0; k < l.m; k++)
			dup |= strcmp(l.servers[k], sv) == 0;
		if (!dup)
			l.servers[l.m++] = sv;
	}
	if (l.m < 2)
		return;
	snprintf(l.name, sizeof(l.name), "r%u", serial);
	assert_int_equal(store_begin(f->s), 0);
	int64_t id = fabric_create(&c, l.name, l.servers, l.m, &FABRIC_LAYOUT_FULL_MESH, NULL, &e);
	ofcd_error_clear(&e);
	/* A server still joined by a unit is refused (409): nothing happened. */
	if (write_txn(f, id > 0)) {
		l.id = id;
		v[(*n)++] = l;
	}
}

static void random_delete(struct fixture *f, uint64_t *seed, struct live *v, size_t *n)
{
	struct domain_units u = reconcile_domain_units(f->r);
	struct fabric_ctx c = { f->s, f->d, &u };
	struct ofcd_error e = { 0 };
	size_t i = rnd(seed) % *n;
	assert_int_equal(store_begin(f->s), 0);
	assert_true(write_txn(f, fabric_delete(&c, v[i].name, NULL, &e) == 0));
	v[i] = v[--*n];
}

static void random_device(struct fixture *f, uint64_t *seed, const struct live *v, size_t n)
{
	struct domain_units u = reconcile_domain_units(f->r);
	struct fabric_ctx c = { f->s, f->d, &u };
	struct ofcd_error e = { 0 };
	const struct live *l = &v[rnd(seed) % n];
	const char *sv = l->servers[rnd(seed) % l->m];
	uint32_t dev = rnd(seed) % 2;
	bool failed = rnd(seed) % 3 != 0, changed;
	json_t *fj = NULL;
	assert_int_equal(store_begin(f->s), 0);
	int rc = fabric_devices_set(&c, topo_server_id(f->s, sv), sv, 1, &dev, &failed, &changed,
	                            &fj, &e);
	json_decref(fj);
	ofcd_error_clear(&e);
	write_txn(f, rc == 0);
}

/* A read-back of u as it is, with one-way and foreign entries of its own invention. */
static void random_flows(struct fixture *f, uint64_t *seed)
{
	struct unit *u = unit_named(f, rnd(seed) % 2 ? "o1" : "o2");
	struct plan_xc *actual = malloc((u->nactual + 1) * sizeof(*actual));
	struct ocs_flow partial[2], foreign[2];
	size_t np = rnd(seed) % 3, nf = rnd(seed) % 3;
	assert_non_null(actual);
	memcpy(actual, u->actual, u->nactual * sizeof(*actual));
	for (size_t i = 0; i < np; i++)
		partial[i] =
		    (struct ocs_flow){ 1 + rnd(seed) % u->ports, 1 + rnd(seed) % u->ports };
	for (size_t i = 0; i < nf; i++) {
		uint32_t k = rnd(seed) % 4;
		foreign[i] =
		    (struct ocs_flow){ k == 0 ? OCS_PORT_ANY : 1 + rnd(seed) % u->ports,
			               k == 1 ? OCS_PORT_EVERY : rnd(seed) % (u->ports + 1) };
	}
	/* The same cross-connects: any head and tail said to agree do. */
	size_t head = rnd(seed) % (u->nactual + 1), tail = rnd(seed) % (u->nactual - head + 1);
	struct reconcile_readback rb = { .xcs = actual,
		                         .n = u->nactual,
		                         .cap = u->nactual + 1,
		                         .same_head = head,
		                         .same_tail = tail };
	reconcile_ports_set_actual(f->r, u, &rb, partial, np, foreign, nf);
	reconcile_unit_changed(f->r, u);
}

static void random_step(struct fixture *f, uint64_t *seed, struct live *v, size_t *n, unsigned step)
{
	switch (rnd(seed) % 10) {
	case 0:
	case 1:
	case 2:
		if (*n < 5)
			random_create(f, seed, v, n, step);
		break;
	case 3:
	case 4:
		if (*n)
			random_delete(f, seed, v, n);
		break;
	case 5:
		if (*n)
			random_device(f, seed, v, *n);
		break;
	case 6:
		inject(f, rnd(seed) % 2 ? "o1" : "o2",
		       (struct ocs_fault){ .kind = OCS_FAULT_DISCONNECT });
		break;
	case 7: {
		/* By hand: a cross-connect made or broken behind the controller's back. */
		uint32_t a = 1 + rnd(seed) % 56, b = 1 + rnd(seed) % 56;
		if (a != b)
			reconcile_inject(f->r, 1,
			                 &(struct ocs_fault){ rnd(seed) % 2 ? OCS_FAULT_SET_XC
			                                                    : OCS_FAULT_CLEAR_XC,
			                                      0, a, b });
		break;
	}
	case 8:
		random_flows(f, seed);
		break;
	default:
		audit_now(f);
		break;
	}
	run_until(f, never, NULL, rnd(seed) % 15);
}

static void test_random_changes(void **state)
{
	struct fixture *f = *state;
	struct live v[5];
	size_t n = 0;
	exec(f, "WITH RECURSIVE x(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM x WHERE v < 10) "
	        "INSERT INTO server(id, name, devices, ports_per_device) "
	        "SELECT 5 + v, 'x' || v, 2, 2 FROM x;"
	        "WITH RECURSIVE k(v) AS (SELECT 0 UNION ALL SELECT v + 1 FROM k WHERE v < 3) "
	        "INSERT INTO cable(server_id, device, port, ocs_id, ocs_port) "
	        "SELECT s.id, k.v / 2, k.v % 2, 1, 16 + 4 * (s.id - 6) + k.v + 1 "
	        "FROM server s, k WHERE s.id > 5");
	inject(f, "o1", (struct ocs_fault){ .kind = OCS_FAULT_DELAY, .count = 2 });
	for (uint64_t run = 1; run <= 3; run++) {
		uint64_t seed = 0x9e3779b97f4a7c15ull * run;
		for (unsigned step = 0; step < RANDOM_STEPS; step++) {
			random_step(f, &seed, v, &n, step + 1000 * (unsigned)run);
			if (f->r->audit_mismatches)
				fail_msg("run %llu step %u: the bookkeeping differs from a full "
				         "recomputation",
				         (unsigned long long)run, step);
		}
		/* Quiet again (the last kick's pass first): compared with the store too. */
		run_until(f, never, NULL, 50);
		settle(f, NULL);
		for (struct unit *u = f->r->units; u; u = u->next)
			assert_int_equal(reconcile_audit_unit(f->r, u, true), 0);
		assert_int_equal(reconcile_audit_fabrics(f->r), 0);
		forget_heard(f);
	}
	while (n)
		random_delete(f, &(uint64_t){ 1 }, v, &n);
	assert_true(run_until(f, empty, "o1", 2000));
	assert_true(run_until(f, empty, "o2", 2000));
}

/*
 * A small fabric asked for in parts is written at once (fabric.h); one a
 * stopped daemon left marked partial is dropped at the next start, its
 * members and circuits with it. Large ones: tests/unit/test_dispatch.c and
 * tests/integration/test_large_writes.py.
 */
static void test_small_fabric_at_once_and_partial_dropped(void **state)
{
	struct fixture *f = *state;
	static const char *const servers[] = { "s1", "s2", "s3", "s4" };
	struct domain_units u = reconcile_domain_units(f->r);
	struct fabric_ctx c = { f->s, f->d, &u };
	struct ofcd_error e = { 0 };
	struct fabric_parts *b = NULL;
	assert_int_equal(store_begin(f->s), 0);
	int64_t id = fabric_create(&c, "small", servers, 4, &FABRIC_LAYOUT_FULL_MESH, &b, &e);
	assert_true(write_txn(f, id > 0));
	assert_null(b);
	assert_int_equal(topo_fabric_id(f->s, "small"), id);
	settle(f, (const char *[]){ "small=applied", NULL });
	assert_int_equal(query_int(f, "SELECT count(*) FROM fabric WHERE partial"), 0);
	/* As a daemon killed mid-write leaves one: out of sight, then gone at the start. */
	exec(f, "UPDATE fabric SET partial = 1");
	struct fabric_row row;
	assert_int_equal(topo_fabric_id(f->s, "small"), 0);
	assert_int_equal(fabric_row_get(f->s, id, &row), 0);
	assert_int_equal(store_begin(f->s), 0);
	assert_int_equal(fabric_drop_unfinished(f->s), 0);
	assert_true(write_txn(f, true));
	assert_int_equal(query_int(f, "SELECT count(*) FROM fabric"), 0);
	assert_int_equal(query_int(f, "SELECT count(*) FROM fabric_server"), 0);
	assert_int_equal(query_int(f, "SELECT count(*) FROM circuit"), 0);
	settle(f, (const char *[]){ NULL });
}

/* A re-plan around a failed device writes the circuits that moved, not every circuit again. */
static void test_replan_writes_what_moved(void **state)
{
	struct fixture *f = *state;
	static const char *const servers[] = { "s1", "s2", "s3", "s4" };
	struct domain_units u = reconcile_domain_units(f->r);
	struct fabric_ctx c = { f->s, f->d, &u };
	struct ofcd_error e = { 0 };
	assert_int_equal(store_begin(f->s), 0);
	assert_true(write_txn(
	    f, fabric_create(&c, "r", servers, 4, &FABRIC_LAYOUT_FULL_MESH, NULL, &e) > 0));
	settle(f, (const char *[]){ "r=applied", NULL });
	int64_t circuits = query_int(f, "SELECT count(*) FROM circuit");
	int before = sqlite3_total_changes(store_db(f->s));
	uint32_t dev = 0;
	bool failed = true, changed;
	json_t *fj = NULL;
	assert_int_equal(store_begin(f->s), 0);
	assert_true(write_txn(f, fabric_devices_set(&c, topo_server_id(f->s, "s1"), "s1", 1, &dev,
	                                            &failed, &changed, &fj, &e) == 0));
	assert_true(changed);
	assert_int_equal(json_integer_value(json_object_get(fj, "revision")), 2);
	json_decref(fj);
	/* Every circuit again would be 2 x circuits rows, and the rest besides. */
	assert_true(sqlite3_total_changes(store_db(f->s)) - before < 2 * circuits);
	assert_int_equal(query_int(f, "SELECT count(*) FROM circuit WHERE a_pos = 0 AND "
	                              "a_device = 0"),
	                 0);
	settle(f, (const char *[]){ "r=degraded", NULL });
}

int main(void)
{
	log_set_level(LOG_LVL_ERROR);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_applied, setup, teardown),
		cmocka_unit_test_setup_teardown(test_history_pruned_in_bulk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_degraded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_and_recovered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drift_repaired_break_before_make, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_isolation_holds_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deleted_fabric_removed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_an_entry_ofcd_did_not_make_joins_its_ports,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_a_new_leader_trusts_no_port_a_former_circuit_used, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batches_split_removals_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random_changes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_small_fabric_at_once_and_partial_dropped,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(test_replan_writes_what_moved, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
