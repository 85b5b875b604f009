/*
 * The reconciler's core (see reconcile.h and reconcile_core.h): a driver
 * instance per OCS unit of the topology, the driver callbacks, the pass that
 * turns each unit's difference into batches, the audit's rounds, the
 * desired state's deltas handed on, and the public API. Operations and
 * read-back copies go through reconcile_store.c; the per-port bookkeeping,
 * batches and isolation are reconcile_ports.c's, fabric states
 * reconcile_state.c's, the full recomputation reconcile_audit.c's.
 */
#include "reconcile.h"

#include <errno.h>
#include <event2/event.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "state/desired.h"
#include "base/events.h"
#include "log.h"
#include "plan_diff.h"
#include "reconcile_audit.h"
#include "reconcile_core.h"
#include "reconcile_ports.h"
#include "reconcile_state.h"
#include "reconcile_store.h"
#include "domain/topo.h"
#include "state/store.h"
#include "state/store_changes.h"

/* Largest batch: OVS takes thousands of flow mods at once; bounded so one batch cannot stall. */
/* A read-back's entries are read as cross-connects where they already are in order. */
_Static_assert(sizeof(struct ocs_xc) == sizeof(struct plan_xc) &&
                   offsetof(struct ocs_xc, a) == offsetof(struct plan_xc, a) &&
                   offsetof(struct ocs_xc, b) == offsetof(struct plan_xc, b),
               "struct ocs_xc and struct plan_xc share a layout");

#define BATCH_MAX_OPS 8192
#define RETRY_BASE_MS 100
#define RETRY_MAX_MS  10000

static void drive(struct unit *u);
static void on_read(void *arg, int status, const char *err, const struct ocs_readback *rb);

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

static json_t *flows_json(const struct ocs_flow *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
		    a, json_pack("[I, I]", (json_int_t)v[i].in_port, (json_int_t)v[i].out_port));
	return a;
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
	struct metrics_loop l = metrics_loop_enter("reconcile");
	(void)fd;
	(void)what;
	u->retry_pending = false;
	u->trigger = "retry";
	drive(u);
	metrics_loop_leave(l);
}

/*
 * Whether this daemon may send to units now (a cluster leader whose lease is
 * live); when not, the pass comes back in a moment, by which time the member
 * has renewed its lease or stopped leading (and freed this reconciler).
 */
static bool may_send(struct reconciler *r)
{
	if (!r->d.may_send || r->d.may_send(r->d.may_send_arg))
		return true;
	struct timeval soon = { 0, 100 * 1000 };
	event_add(r->ev_pass, &soon);
	return false;
}

static void start_read(struct unit *u, bool audit)
{
	if (!may_send(u->r))
		return;
	u->busy = true;
	u->audit_read = audit;
	/*
	 * What the read may tell followers of (prune_formers()): none when no one
	 * listens, when the unit has no former entry yet (one it gets later is
	 * younger than the read), or when the store cannot say (-1 is before all).
	 */
	u->read_since =
	    hook_empty(&u->r->formers_hook) || !desired_has_former(u->r->d.desired, u->id)
	        ? -1
	        : store_applied_revision(u->r->d.store);
	if (u->read_since < 0)
		u->read_since = -1;
	int rc = u->ops->read(u->h, on_read, u);
	if (rc < 0) {
		u->busy = false;
		u->have_actual = false;
		u->in_sync = false;
		snprintf(u->last_error, sizeof(u->last_error), "read back: %s", strerror(-rc));
	}
	/*
	 * The audit's reads leave the fabrics' states alone unless they fail or
	 * find something (read_done()).
	 */
	if (!audit || rc < 0)
		reconcile_unit_changed(u->r, u);
}

/*
 * A batch is over, answered by the unit or refused by its driver before
 * sending: its operation's end and, after a failure, the next try backs off
 * (a batch refused every time must not be remade on every pass).
 */
static void batch_over(struct unit *u, int status, const char *err)
{
	u->busy = false;
	u->applied_since_read = true;
	reconcile_op_finish(u->r, u, status, err);
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
	/* Whatever happened, learn what the unit now holds (and what no longer joins). */
	if (u->conn == OCS_CONN_UP)
		start_read(u, false);
	reconcile_unit_changed(u->r, u);
}

static void on_apply(void *arg, int status, const char *err)
{
	struct metrics_loop l = metrics_loop_enter("reconcile");
	struct reconcile_work t0 = reconcile_work_start();
	batch_over(arg, status, err);
	reconcile_work_end(t0);
	metrics_loop_leave(l);
}

/* Ports a and b are being joined by a batch sent: until the next read-back. */
static void join(struct unit *u, uint32_t a, uint32_t b)
{
	u->joining[a] = b;
	u->joining[b] = a;
	if (u->njoining + 2 > u->joined_cap && !u->joined_lost) {
		size_t cap = u->joined_cap ? 2 * u->joined_cap : 64;
		uint32_t *p = realloc(u->joined, cap * sizeof(*p));
		if (p) {
			u->joined = p;
			u->joined_cap = cap;
		} else {
			u->joined_lost = true;
		}
	}
	if (!u->joined_lost) {
		u->joined[u->njoining] = a;
		u->joined[u->njoining + 1] = b;
	}
	u->njoining += 2;
}

/* What was joining is read back: cleared port by port, not the unit's whole array. */
static void unjoin_all(struct unit *u)
{
	if (u->joined_lost)
		memset(u->joining, 0, ((size_t)u->ports + 1) * sizeof(*u->joining));
	else
		for (size_t i = 0; i < u->njoining; i++)
			u->joining[u->joined[i]] = 0;
	u->njoining = 0;
	u->joined_lost = false;
}

/*
 * Forgets the former owners of cross-connects the unit no longer holds: half
 * of one (a one-way entry) is still held.
 */
static void prune_formers(struct unit *u)
{
	struct plan_xc *held = u->actual;
	size_t n = u->nactual;
	if (u->npartial) {
		held = malloc((u->nactual + u->npartial) * sizeof(*held));
		if (!held)
			return; /* kept: the next read-back prunes them */
		memcpy(held, u->actual, u->nactual * sizeof(*held));
		for (size_t i = 0; i < u->npartial; i++) {
			uint32_t a = u->partial[i].in_port, b = u->partial[i].out_port;
			held[n++] = (struct plan_xc){ a < b ? a : b, a < b ? b : a };
		}
		qsort(held, n, sizeof(*held), plan_xc_cmp);
	}
	struct reconciler *r = u->r;
	struct plan_xc *gone = NULL;
	size_t ngone = desired_prune(r->d.desired, u->id, held, n, u->read_since,
	                             hook_empty(&r->formers_hook) ? NULL : &gone);
	if (ngone)
		reconcile_formers_gone_hook_call(&r->formers_hook, u->id, u->read_since, gone,
		                                 ngone);
	free(gone);
	if (held != u->actual)
		free(held);
}

static void read_done(struct unit *u, int status, const char *err, const struct ocs_readback *rb)
{
	struct reconciler *r = u->r;
	bool audit = u->audit_read;
	struct reconcile_work t0 = reconcile_work_begin(audit);
	u->busy = false;
	u->audit_read = false;
	if (!audit || status < 0)
		reconcile_unit_changed(r, u);
	if (status < 0) {
		snprintf(u->last_error, sizeof(u->last_error), "read back: %s",
		         err ? err : strerror(-status));
		log_warn("reconcile", "%s: %s", u->name, u->last_error);
		/* What we knew may be stale now: nothing is sent before a read succeeds. */
		u->have_actual = false;
		u->in_sync = false;
		if (!u->retry_pending)
			schedule_retry(u);
		reconcile_work_end(t0);
		return;
	}
	/* The room of the read-back before: no allocation, on a heap a carve fragmented. */
	size_t cap = u->spare_cap;
	struct plan_xc *actual = u->spare;
	if (cap < rb->nxcs || !actual) {
		cap = rb->nxcs ? rb->nxcs : 1;
		actual = realloc(u->spare, cap * sizeof(*actual));
		if (!actual) {
			reconcile_work_end(t0);
			return;
		}
	}
	u->spare = NULL;
	u->spare_cap = 0;
	size_t n = rb->nxcs, before = u->nactual;
	/*
	 * What equals the previous read-back (normalized, in order) at both ends
	 * is copied as it is; only what lies between is normalized and checked.
	 */
	const struct plan_xc *raw = (const struct plan_xc *)rb->xcs;
	size_t head = reconcile_xcs_head(raw, u->actual, n < before ? n : before);
	size_t tail =
	    before > head && n > head
	        ? reconcile_xcs_tail(raw + head, n - head, u->actual + head, before - head)
	        : 0;
	bool in_order = true;
	uint64_t last = 0;
	if (head)
		memcpy(actual, raw, head * sizeof(*actual));
	for (size_t i = head; i < n - tail; i++) {
		uint32_t x = raw[i].a, y = raw[i].b, lo = x < y ? x : y, hi = x < y ? y : x;
		actual[i] = (struct plan_xc){ lo, hi };
	}
	if (tail)
		memcpy(actual + n - tail, raw + n - tail, tail * sizeof(*actual));
	/* Drivers list in port order as a rule: checked where it may not hold, sorted if not. */
	for (size_t i = head ? head - 1 : 0; i < n - (tail ? tail - 1 : 0); i++) {
		uint64_t key = (uint64_t)actual[i].a << 32 | actual[i].b;
		in_order &= i == (head ? head - 1 : 0) || key > last;
		last = key;
	}
	if (!in_order)
		n = plan_xc_sort_unique(actual, n);
	/* In order, what was copied as it was is known to agree: not compared again. */
	struct reconcile_readback got = { .xcs = actual,
		                          .n = n,
		                          .cap = cap,
		                          .same_head = in_order ? head : 0,
		                          .same_tail = in_order ? tail : 0 };
	bool changed = reconcile_ports_set_actual(r, u, &got, rb->partial, rb->npartial,
	                                          rb->foreign, rb->nforeign) ||
	               !u->have_actual;
	/* A change nobody asked for: someone touched the unit behind our back. */
	if (changed && u->have_actual && u->in_sync && !u->applied_since_read) {
		log_warn("reconcile", "%s: drift: the unit changed behind the controller's back",
		         u->name);
		metrics_counter_add("ofcd_drift_repairs_total", RECONCILE_HELP_DRIFT, NULL, 1);
		events_publish(r->d.events, EVENTS_DRIFT,
		               json_pack("{s:s, s:I, s:I}", "ocs", u->name, "held_before",
		                         (json_int_t)before, "held_now", (json_int_t)n));
		u->trigger = "audit";
	}
	unjoin_all(u);
	u->have_actual = true;
	u->read_once = true;
	free(u->former_peer);
	u->former_peer = NULL;
	u->applied_since_read = false;
	if (changed)
		reconcile_actual_changed(r, u);
	if (changed && audit)
		reconcile_unit_changed(r, u); /* what it found counts now */
	prune_formers(u);
	reconcile_check_isolation(r, u);
	drive(u);
	/*
	 * The unit is not busy any more, and what it owes is sent (drive()
	 * judged its sync): a ?wait= for every unit in sync looks again.
	 */
	if (audit && !changed)
		events_publish(r->d.events, EVENTS_SETTLED, NULL);
	reconcile_work_end(t0);
}

static void on_read(void *arg, int status, const char *err, const struct ocs_readback *rb)
{
	struct metrics_loop l = metrics_loop_enter("reconcile");
	read_done(arg, status, err, rb);
	metrics_loop_leave(l);
}

static void conn_changed(struct unit *u, enum ocs_conn_state state, const char *err);

static void on_conn_state(void *arg, enum ocs_conn_state state, const char *err)
{
	struct metrics_loop l = metrics_loop_enter("reconcile");
	conn_changed(arg, state, err);
	metrics_loop_leave(l);
}

/*
 * The words a driver's error may start with ("hostkey: ...") that name why a
 * connection is down, for ofcd_ocs_connection_downs_total; anything else is
 * "other". Same order as unit.downs[].
 */
static const char *const down_reasons[] = { "unreachable", "hostkey", "auth",       "closed",
	                                    "netconf",     "fenced",  "connection", "other" };

static size_t down_reason(const char *err)
{
	size_t n = sizeof(down_reasons) / sizeof(down_reasons[0]);
	size_t len = err ? strcspn(err, ":") : 0;
	for (size_t i = 0; err && i + 1 < n; i++)
		if (strlen(down_reasons[i]) == len && strncmp(err, down_reasons[i], len) == 0)
			return i;
	return n - 1;
}

static void conn_changed(struct unit *u, enum ocs_conn_state state, const char *err)
{
	struct reconciler *r = u->r;
	enum ocs_conn_state old = u->conn;
	u->conn = state;
	if (err)
		snprintf(u->last_error, sizeof(u->last_error), "%s", err);
	if (state == old)
		return;
	if (state == OCS_CONN_DOWN)
		u->downs[down_reason(err)]++;
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
	reconcile_unit_changed(r, u);
}

static void on_port_state(void *arg, uint32_t port, bool up)
{
	struct unit *u = arg;
	struct metrics_loop l = metrics_loop_enter("reconcile");
	reconcile_store_port_state(u->r, u, port, up);
	metrics_loop_leave(l);
}

/* ---- units --------------------------------------------------------------- */

static void unit_close(struct unit *u, bool shutdown)
{
	if (u->h)
		u->ops->close(u->h); /* pending callbacks are never called after close */
	u->h = NULL;
	u->busy = false;
	if (u->op_id)
		reconcile_op_finish(u->r, u, shutdown ? -ESHUTDOWN : -ECANCELED,
		                    shutdown ? "the daemon stopped before the batch completed"
		                             : "the OCS unit was removed or reconfigured");
}

static void unit_free(struct unit *u, bool shutdown)
{
	unit_close(u, shutdown);
	if (u->retry)
		event_free(u->retry);
	reconcile_ports_free(u->r, u);
	free(u->actual);
	free(u->spare);
	free(u->partial);
	free(u->foreign);
	free(u->flushed);
	free(u->former_peer);
	free(u->violations);
	json_decref(u->op_fabrics);
	u->r->units_closed++;
	free(u);
}

/* ocs_open_params.setting: the daemon's settings of u's driver for u. */
static const char *unit_setting(void *arg, const char *key)
{
	struct unit *u = arg;
	const struct reconcile_deps *d = &u->r->d;
	return d->setting ? d->setting(d->setting_arg, u->driver, u->name, key) : NULL;
}

static void unit_open(struct reconciler *r, struct unit *u)
{
	char err[256];
	struct ocs_open_params p = { .name = u->name,
		                     .endpoint = u->endpoint,
		                     .ports = u->ports,
		                     .master_generation = (uint64_t)r->d.master_generation,
		                     .may_send = r->d.may_send,
		                     .may_send_arg = r->d.may_send_arg,
		                     .setting = unit_setting,
		                     .setting_arg = u };
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
 * Sets u's read-back to the one the previous run stored, for the server
 * reservation until the first read-back (see reconcile_port_joined()): a
 * unit unreachable after a restart may still hold a deleted fabric's
 * circuits. u->have_actual stays false.
 */
static void last_known(struct reconciler *r, struct unit *u)
{
	struct plan_xc *held;
	size_t n;
	if (reconcile_store_last_known(r, u, &held, &n) < 0)
		return;
	struct reconcile_readback rb = { .xcs = held, .n = n, .cap = n };
	reconcile_ports_set_actual(r, u, &rb, NULL, 0, NULL, 0);
	reconcile_store_flushed(u);
}

static struct unit *unit_new(struct reconciler *r, const struct topo_unit_row *row)
{
	struct unit *u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->r = r;
	u->id = row->id;
	snprintf(u->name, sizeof(u->name), "%s", row->name);
	snprintf(u->driver, sizeof(u->driver), "%s", row->driver);
	snprintf(u->endpoint, sizeof(u->endpoint), "%s", row->endpoint);
	u->ports = row->ports;
	u->trigger = "startup";
	u->retry = evtimer_new(r->d.base, on_retry, u);
	if (!u->retry || reconcile_ports_init(r, u) < 0) {
		unit_free(u, false);
		return NULL;
	}
	last_known(r, u);
	unit_open(r, u);
	return u;
}

static int unit_id_cmp(const void *x, const void *y)
{
	int64_t a = (*(struct unit *const *)x)->id, b = (*(struct unit *const *)y)->id;
	return a < b ? -1 : a > b;
}

/* The units by id, for the lookups of every change. */
static void index_units(struct reconciler *r)
{
	size_t n = 0;
	for (struct unit *u = r->units; u; u = u->next)
		n++;
	struct unit **v = malloc((n ? n : 1) * sizeof(*v));
	if (!v) {
		r->units_synced = false; /* tried again at the next pass */
		return;
	}
	n = 0;
	for (struct unit *u = r->units; u; u = u->next)
		v[n++] = u;
	qsort(v, n, sizeof(*v), unit_id_cmp);
	free(r->byid);
	r->byid = v;
	r->nunits = n;
}

struct unit *reconcile_unit_by_id(struct reconciler *r, int64_t id)
{
	if (!r)
		return NULL; /* a cluster follower drives no unit */
	size_t lo = 0, hi = r->nunits;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (r->byid[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->nunits && r->byid[lo]->id == id ? r->byid[lo] : NULL;
}

struct units_walk {
	struct reconciler *r;
	const struct reconcile_work *t0;
};

/* One row of the ocs table: its unit kept, reopened (its driver changed) or opened. */
static int sync_unit(void *arg, const struct topo_unit_row *row)
{
	struct units_walk *w = arg;
	struct reconciler *r = w->r;
	struct unit **pu = &r->units;
	while (*pu && (*pu)->id != row->id)
		pu = &(*pu)->next;
	struct unit *u = *pu;
	if (u && (strcmp(u->driver, row->driver) != 0 || strcmp(u->endpoint, row->endpoint) != 0 ||
	          u->ports != row->ports)) {
		*pu = u->next;
		unit_free(u, false);
		u = NULL;
	}
	if (!u && mono_since(&w->t0->wall) * 1e6 > RECONCILE_SLICE_US) {
		r->units_synced = false;
		return 0;
	}
	if (!u) {
		u = unit_new(r, row);
		if (!u) {
			r->units_synced = false;
			return 0;
		}
		u->next = r->units;
		r->units = u;
	}
	u->seen = true;
	return 0;
}

/*
 * Opens, reopens and closes driver instances to follow the ocs table, when it
 * changed since the last time. A new unit reads its ports' owners, desired
 * set and last read-back (at 8,192 servers, about a millisecond each): after
 * a slice's worth the others wait for the next pass, on the next iteration.
 */
static void sync_units(struct reconciler *r, const struct reconcile_work *t0)
{
	uint64_t version = desired_units_version(r->d.desired);
	if (r->units_synced && version == r->units_version)
		return;
	r->units_synced = true;
	r->units_version = version;
	/* The index may hold units freed below until it is rebuilt. */
	r->nunits = 0;
	for (struct unit *u = r->units; u; u = u->next)
		u->seen = false;
	struct units_walk w = { r, t0 };
	bool read = topo_units_each(r->d.store, sync_unit, &w) == 0;
	if (!read)
		r->units_synced = false;
	for (struct unit **pu = &r->units; *pu;) {
		struct unit *u = *pu;
		/* A read that failed half-way says nothing of the units it did not reach. */
		if (u->seen || !read) {
			pu = &u->next;
			continue;
		}
		*pu = u->next;
		/*
		 * Its former entries go with its row (desired.c); a unit closed
		 * otherwise keeps them.
		 */
		unit_free(u, false);
	}
	index_units(r);
	if (!r->units_synced) {
		/* A timer, not event_active(): what else is ready gets its turn first. */
		struct timeval now = { 0, 0 };
		event_add(r->ev_pass, &now);
	}
}

/* ---- the pass ------------------------------------------------------------ */

/*
 * The fabrics whose circuits a batch touches: an addition is desired, so its
 * fabric is known; a removal belongs to the fabric that last desired it or,
 * when that is unknown (a stray or a change by hand), to the owners of its
 * ports. NULL when memory is short.
 */
static json_t *batch_fabrics(struct reconciler *r, struct unit *u, const struct plan_batch *b)
{
	struct desired_set ds = reconcile_unit_desired(u);
	int64_t *ids = malloc((b->nadd + 2 * b->ndel + 1) * sizeof(*ids));
	json_t *names = json_array();
	size_t n = 0;
	if (!ids || !names) {
		free(ids);
		json_decref(names);
		return NULL;
	}
	/* Looked up, not walked to: a small batch on a big unit costs its own size. */
	for (size_t i = 0; ds.n && i < b->nadd; i++) {
		const struct plan_xc *x = bsearch(&b->add[i], ds.xc, ds.n, sizeof(*x), plan_xc_cmp);
		int64_t fabric = x ? ds.fabric[x - ds.xc] : 0;
		if (fabric && (n == 0 || ids[n - 1] != fabric))
			ids[n++] = fabric;
	}
	const char *last = NULL;
	for (size_t i = 0; i < b->ndel; i++) {
		const char *name =
		    desired_former_owner(r->d.desired, u->id, b->del[i].a, b->del[i].b);
		if (name) {
			if (name != last)
				reconcile_add_name(names, name);
			last = name;
		} else {
			ids[n++] = reconcile_port_owner(u, b->del[i].a);
			ids[n++] = reconcile_port_owner(u, b->del[i].b);
		}
	}
	reconcile_add_fabric_names(r, names, ids, n);
	free(ids);
	return names;
}

static void drive(struct unit *u)
{
	struct reconciler *r = u->r;
	if (!u->h || u->conn != OCS_CONN_UP || u->busy || u->retry_pending || !may_send(r))
		return;
	if (!u->have_actual) {
		start_read(u, false);
		return;
	}
	/* A mirror that failed to load may miss circuits: sending its diff would tear them down. */
	if (!desired_usable(r->d.desired))
		return;
	if (!u->stray.n && !u->noor && !u->npartial && !u->miss.n) {
		/* Whatever set the trigger needed nothing: the next batch comes from a change. */
		u->in_sync = true;
		u->trigger = "change";
		return;
	}
	struct plan_batch b = { 0 };
	if (reconcile_ports_batch(u, BATCH_MAX_OPS, &b) < 0) {
		log_error("reconcile", "%s: cannot compute the batch", u->name);
		goto out;
	}
	u->in_sync = b.ndel + b.nadd == 0;
	if (u->in_sync) {
		/* Whatever set the trigger needed nothing: the next batch comes from a change. */
		u->trigger = "change";
		goto out;
	}

	json_decref(u->op_fabrics);
	u->op_fabrics = batch_fabrics(r, u, &b);
	u->op_id = reconcile_op_start(r, u, &b);
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
		for (size_t i = 0; i < b.nadd; i++)
			if (b.add[i].b <= u->ports)
				join(u, b.add[i].a, b.add[i].b);
		int rc = u->ops->apply(u->h, &batch, on_apply, u);
		if (rc < 0) {
			char why[80];
			snprintf(why, sizeof(why), "the driver refused the batch: %s",
			         strerror(-rc));
			batch_over(u, rc, why);
		}
	}
	free(del);
	free(add);
	reconcile_unit_changed(r, u);
out:
	plan_batch_free(&b);
}

static void on_pass(evutil_socket_t fd, short what, void *arg)
{
	struct reconciler *r = arg;
	struct metrics_loop l = metrics_loop_enter("reconcile");
	(void)fd;
	(void)what;
	struct reconcile_work t0 = reconcile_work_start();
	r->generation++;
	desired_refresh(r->d.desired);
	sync_units(r, &t0);
	/* A unit with nothing to change costs a look at its sets. */
	for (struct unit *u = r->units; u; u = u->next)
		drive(u);
	reconcile_work_end(t0);
	reconcile_schedule_states(r);
	metrics_loop_leave(l);
}

void reconcile_kick(struct reconciler *r)
{
	if (r)
		event_active(r->ev_pass, 0, 0);
}

/*
 * Each round reads every unit back (drift is found within one interval) and
 * recomputes a share of the units' bookkeeping (below).
 */
static void on_audit(evutil_socket_t fd, short what, void *arg)
{
	struct reconciler *r = arg;
	struct metrics_loop l = metrics_loop_enter("reconcile");
	struct reconcile_work t0 = reconcile_work_begin(true);
	(void)fd;
	(void)what;
	desired_refresh(r->d.desired);
	for (struct unit *u = r->units; u; u = u->next)
		if (u->h && u->conn == OCS_CONN_UP && !u->busy)
			start_read(u, true);
	r->audit_ports_left = (uint64_t)RECONCILE_AUDIT_PORTS_PER_S * r->audit_interval_s;
	r->audit_round_units = 0;
	metrics_counter_add("ofcd_reconcile_audit_rounds_total", RECONCILE_HELP_AUDIT_ROUNDS, NULL,
	                    1);
	struct timeval now = { 0, 0 };
	evtimer_add(r->ev_audit_slice, &now);
	reconcile_work_end(t0);
	metrics_loop_leave(l);
}

/*
 * The audit's full recomputation (reconcile_audit.c), unit by unit in id
 * order, for about a slice at a time (at 32,768 servers one unit takes tens
 * of milliseconds), then re-armed. A round recomputes units until their ports
 * use its budget, at least one, and the next round goes on from there: the
 * cost per round is bounded whatever the cluster's size, and every unit is
 * recomputed within ceil(total ports / budget) rounds. The fabrics' sums
 * (cheap) every round.
 */
static void on_audit_slice(evutil_socket_t fd, short what, void *arg)
{
	struct reconciler *r = arg;
	struct metrics_loop l = metrics_loop_enter("reconcile");
	struct reconcile_work t0 = reconcile_work_begin(true);
	(void)fd;
	(void)what;
	size_t i = 0;
	while (i < r->nunits && r->byid[i]->id < r->audit_next)
		i++;
	bool more = r->audit_round_units < r->nunits;
	for (size_t done = 0; more; done++) {
		if (done && mono_since(&t0.wall) * 1e6 >= RECONCILE_SLICE_US)
			break;
		if (i == r->nunits)
			i = 0; /* round the units again */
		struct unit *u = r->byid[i++];
		reconcile_audit_unit(r, u, true);
		r->audit_next = i < r->nunits ? r->byid[i]->id : 0;
		r->audit_round_units++;
		metrics_counter_add("ofcd_reconcile_audit_units_total", RECONCILE_HELP_AUDIT_UNITS,
		                    NULL, 1);
		if (i == r->nunits)
			metrics_counter_add("ofcd_reconcile_audit_cycles_total",
			                    RECONCILE_HELP_AUDIT_CYCLES, NULL, 1);
		uint64_t cost = (uint64_t)u->ports + 1;
		r->audit_ports_left -= cost < r->audit_ports_left ? cost : r->audit_ports_left;
		more = r->audit_ports_left && r->audit_round_units < r->nunits;
	}
	if (more) {
		struct timeval now = { 0, 0 };
		evtimer_add(r->ev_audit_slice, &now);
	} else {
		reconcile_audit_fabrics(r);
	}
	reconcile_work_end(t0);
	metrics_loop_leave(l);
}

void reconcile_set_audit_interval(struct reconciler *r, unsigned seconds)
{
	if (!r)
		return; /* a follower: its reconciler takes the interval when it leads */
	r->audit_interval_s = seconds ? seconds : 30;
	struct timeval tv = { r->audit_interval_s, 0 };
	event_del(r->ev_audit);
	event_add(r->ev_audit, &tv);
}

/* ---- metrics ------------------------------------------------------------- */

static int unit_cmp(const void *a, const void *b)
{
	return strcmp((*(struct unit *const *)a)->name, (*(struct unit *const *)b)->name);
}

static bool unit_in_sync(const struct unit *u)
{
	return u->conn == OCS_CONN_UP && u->have_actual && u->in_sync && !u->busy;
}

/*
 * What operators alert on: each unit's connection and sync (by name, so a
 * scrape reads the same order every time) and the fabrics in each state.
 */
static void collect_metrics(void *arg, struct metrics_out *out)
{
	struct reconciler *r = arg;
	size_t n = 0;
	for (struct unit *u = r->units; u; u = u->next)
		n++;
	struct unit **v = malloc((n ? n : 1) * sizeof(*v));
	if (v) {
		n = 0;
		for (struct unit *u = r->units; u; u = u->next)
			v[n++] = u;
		qsort(v, n, sizeof(*v), unit_cmp);
		char label[96];
		metrics_family(out, "ofcd_ocs_connected", "gauge",
		               "1 while the controller is connected to the OCS unit, else 0.");
		for (size_t i = 0; i < n; i++) {
			snprintf(label, sizeof(label), "ocs=\"%s\"", v[i]->name);
			metrics_sample(out, "ofcd_ocs_connected", label, v[i]->conn == OCS_CONN_UP);
		}
		metrics_family(out, "ofcd_ocs_in_sync", "gauge",
		               "1 while the OCS unit holds exactly the cross-connects the fabrics "
		               "ask of it (read back), else 0.");
		for (size_t i = 0; i < n; i++) {
			snprintf(label, sizeof(label), "ocs=\"%s\"", v[i]->name);
			metrics_sample(out, "ofcd_ocs_in_sync", label, unit_in_sync(v[i]));
		}
		metrics_family(out, "ofcd_ocs_connection_downs_total", "counter",
		               "Times the connection to the OCS unit went down (or an attempt "
		               "failed), by reason: the first word of the driver's error.");
		char label2[160];
		for (size_t i = 0; i < n; i++) {
			/* every reason from 0, so that an alert on an increase sees the first */
			for (size_t k = 0; k < sizeof(down_reasons) / sizeof(down_reasons[0]);
			     k++) {
				snprintf(label2, sizeof(label2), "ocs=\"%s\",reason=\"%s\"",
				         v[i]->name, down_reasons[k]);
				metrics_sample(out, "ofcd_ocs_connection_downs_total", label2,
				               (double)v[i]->downs[k]);
			}
		}
		free(v);
	}
	uint64_t counts[PLAN_STATE__COUNT];
	if (topo_fabric_state_counts(r->d.store, counts) == 0) {
		char label[48];
		metrics_family(out, "ofcd_fabrics", "gauge", "Fabrics in each state.");
		for (int st = 0; st < PLAN_STATE__COUNT; st++) {
			snprintf(label, sizeof(label), "state=\"%s\"", plan_state_name(st));
			metrics_sample(out, "ofcd_fabrics", label, (double)counts[st]);
		}
	}
}

/* ---- what the desired state says changed ------------------------------------ */

static void on_desired_circuit(void *arg, int64_t ocs_id, struct plan_xc xc, int64_t fabric,
                               bool added)
{
	struct reconciler *r = arg;
	struct unit *u = reconcile_unit_by_id(r, ocs_id);
	/* A unit not opened yet reads the whole desired state when it is. */
	if (u)
		reconcile_ports_desired(r, u, xc, fabric, added);
}

static void on_desired_owner(void *arg, int64_t ocs_id, uint32_t port, int64_t before,
                             int64_t after)
{
	struct reconciler *r = arg;
	struct unit *u = reconcile_unit_by_id(r, ocs_id);
	if (u)
		reconcile_ports_owner(r, u, port, before, after);
}

static void on_desired_fabric(void *arg, int64_t fabric_id)
{
	reconcile_fabric_touched(arg, fabric_id);
}

/* Every committed change may alter what some OCS unit should hold; its own states do not. */
static void on_desired_changed(void *arg, struct desired *d)
{
	struct reconciler *r = arg;
	(void)d;
	if (!r->muted)
		reconcile_kick(r);
}

/*
 * The fabric state update, then (in check mode, when it got through every
 * changed fabric) the full recomputation, then the word that states or units'
 * sync may have changed, on which ?wait= requests look again.
 */
static void on_states(evutil_socket_t fd, short what, void *arg)
{
	struct reconciler *r = arg;
	struct metrics_loop l = metrics_loop_enter("reconcile");
	(void)fd;
	(void)what;
	if (reconcile_states_update(r) && r->d.check)
		reconcile_audit_all(r);
	events_publish(r->d.events, EVENTS_SETTLED, NULL);
	metrics_loop_leave(l);
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
	r->ev_flush = evtimer_new(d->base, reconcile_flush_cb, r);
	r->ev_journal = evtimer_new(d->base, reconcile_journal_cb, r);
	r->ev_audit_slice = evtimer_new(d->base, on_audit_slice, r);
	if (!r->ev_pass || !r->ev_audit || !r->ev_states || !r->ev_flush || !r->ev_journal ||
	    !r->ev_audit_slice) {
		reconcile_free(r);
		return -ENOMEM;
	}
	reconcile_store_interrupted(r);
	r->next_op_id = reconcile_store_next_op(r);
	reconcile_set_audit_interval(r, d->audit_interval_s);
	/* Every counter shown from 0, so the first increase is an increase to alert on. */
	metrics_counter_add("ofcd_drift_repairs_total", RECONCILE_HELP_DRIFT, NULL, 0);
	metrics_counter_add("ofcd_isolation_violations_total", RECONCILE_HELP_ISOLATION, NULL, 0);
	metrics_counter_add("ofcd_reconcile_audit_mismatches_total", RECONCILE_HELP_AUDIT, NULL, 0);
	metrics_counter_add("ofcd_reconcile_audit_rounds_total", RECONCILE_HELP_AUDIT_ROUNDS, NULL,
	                    0);
	metrics_counter_add("ofcd_reconcile_audit_units_total", RECONCILE_HELP_AUDIT_UNITS, NULL,
	                    0);
	metrics_counter_add("ofcd_reconcile_audit_cycles_total", RECONCILE_HELP_AUDIT_CYCLES, NULL,
	                    0);
	/* The work counters from the start, so that a rate over any window has both ends. */
	reconcile_work_end(reconcile_work_begin(true));
	reconcile_work_end(reconcile_work_begin(false));
	metrics_counter_add("ofcd_reconcile_batches_total", RECONCILE_HELP_BATCHES,
	                    "result=\"succeeded\"", 0);
	metrics_counter_add("ofcd_reconcile_batches_total", RECONCILE_HELP_BATCHES,
	                    "result=\"failed\"", 0);
	metrics_collector_add(collect_metrics, r);
	*out = r;
	struct desired_hooks *hooks = desired_hooks(d->desired);
	if (desired_circuit_hook_add(&hooks->circuit, on_desired_circuit, r) < 0 ||
	    desired_owner_hook_add(&hooks->owner, on_desired_owner, r) < 0 ||
	    desired_fabric_hook_add(&hooks->fabric, on_desired_fabric, r) < 0 ||
	    desired_changed_hook_add(&hooks->changed, on_desired_changed, r) < 0) {
		reconcile_free(r);
		*out = NULL;
		return -ENOMEM;
	}
	r->rows_stale = true;
	struct reconcile_work t0 = reconcile_work_start();
	sync_units(r, &t0);
	reconcile_kick(r);
	return 0;
}

void reconcile_free(struct reconciler *r)
{
	if (!r)
		return;
	metrics_collector_remove(collect_metrics, r);
	struct desired_hooks *hooks = desired_hooks(r->d.desired);
	desired_circuit_hook_del(&hooks->circuit, on_desired_circuit, r);
	desired_owner_hook_del(&hooks->owner, on_desired_owner, r);
	desired_fabric_hook_del(&hooks->fabric, on_desired_fabric, r);
	desired_changed_hook_del(&hooks->changed, on_desired_changed, r);
	hook_clear(&r->states_hook);
	hook_clear(&r->formers_hook);
	reconcile_flush_actual(r);
	r->nunits = 0;
	while (r->units) {
		struct unit *u = r->units;
		r->units = u->next;
		unit_free(u, true);
	}
	/* The batches the units just ended as interrupted. */
	reconcile_journal_flush(r);
	free(r->journal);
	free(r->byid);
	reconcile_state_free(r);
	if (r->ev_pass)
		event_free(r->ev_pass);
	if (r->ev_audit)
		event_free(r->ev_audit);
	if (r->ev_states)
		event_free(r->ev_states);
	if (r->ev_flush)
		event_free(r->ev_flush);
	if (r->ev_journal)
		event_free(r->ev_journal);
	if (r->ev_audit_slice)
		event_free(r->ev_audit_slice);
	free(r);
}

json_t *reconcile_unit_json(struct reconciler *r, int64_t ocs_id)
{
	struct unit *u = reconcile_unit_by_id(r, ocs_id);
	if (!u)
		return NULL;
	json_t *down = reconcile_store_ports_down(r, ocs_id);
	return json_pack("{s:s, s:s?, s:b, s:b, s:o, s:o, s:o, s:o}", "state", conn_name(u->conn),
	                 "last_error", u->last_error[0] ? u->last_error : NULL, "read_back",
	                 u->have_actual, "in_sync", unit_in_sync(u), "actual",
	                 xcs_json(u->actual, u->nactual), "partial",
	                 flows_json(u->partial, u->npartial), "foreign",
	                 flows_json(u->foreign, u->nforeign), "ports_down", down);
}

bool reconcile_all_in_sync(struct reconciler *r)
{
	/* Units still to open may hold anything. */
	if (!r || !r->units_synced)
		return false;
	for (struct unit *u = r->units; u; u = u->next)
		if (!unit_in_sync(u) || u->op_id)
			return false;
	return true;
}

/* desired_held_fn: what the unit held at its last read-back, or was sent since. */
static bool unit_may_hold(void *arg, int64_t ocs_id, uint32_t a, uint32_t b)
{
	struct unit *u = reconcile_unit_by_id(arg, ocs_id);
	if (!u)
		return false; /* no longer this daemon's to drive */
	if (!u->have_actual)
		return true;
	if (a > u->ports || b > u->ports)
		return false;
	if (u->peer[a] == b || u->joining[a] == b)
		return true;
	for (size_t i = 0; i < u->npartial; i++)
		if (u->partial[i].in_port == a || u->partial[i].in_port == b ||
		    u->partial[i].out_port == a || u->partial[i].out_port == b)
			return true;
	return false;
}

uint64_t reconcile_units_closed(const struct reconciler *r)
{
	return r ? r->units_closed : 0;
}

bool reconcile_fabric_removed(struct reconciler *r, const char *fabric, uint64_t closed)
{
	if (!r || reconcile_all_in_sync(r))
		return r != NULL;
	/*
	 * The former entries say what may be left of the fabric only while every
	 * unit is open and none was closed since (closing one loses what its
	 * read-back said), and while the mirror follows the store.
	 */
	return r->units_synced && r->units_closed == closed && desired_usable(r->d.desired) &&
	       !desired_former_left(r->d.desired, fabric, unit_may_hold, r);
}

bool reconcile_port_joined(struct reconciler *r, int64_t ocs_id, uint32_t port, char *why,
                           size_t len)
{
	struct unit *u = reconcile_unit_by_id(r, ocs_id);
	if (u)
		return reconcile_port_leftover(r, u, port, why, len);
	/* Not opened yet (a pass away): only ofcd's own record can say. */
	return reconcile_port_former(r, ocs_id, NULL, port, why, len);
}

long reconcile_unit_held(struct reconciler *r, int64_t ocs_id)
{
	struct unit *u = reconcile_unit_by_id(r, ocs_id);
	if (!u || !u->have_actual)
		return -1;
	/* Additions sent since the last read-back may be on the unit already (a batch in flight).
	 */
	return (long)(u->nactual + u->npartial + (u->njoining + 1) / 2);
}

bool reconcile_unit_may_join(struct reconciler *r, int64_t ocs_id)
{
	struct unit *u = reconcile_unit_by_id(r, ocs_id);
	/*
	 * reconcile_port_leftover()'s cases: strays held, additions in flight,
	 * one-way entries, entries ofcd did not make, and ofcd's own record of
	 * what it made there until the unit is read.
	 */
	if (u && (u->stray.n || u->noor || u->njoining || u->npartial || u->foreign_all))
		return true;
	for (size_t i = 0; u && i < u->nforeign; i++)
		if (reconcile_flow_leads_out(&u->foreign[i]))
			return true;
	return (!u || !u->read_once) && desired_has_former(r->d.desired, ocs_id);
}

static bool units_may_join(void *arg, int64_t ocs_id)
{
	return reconcile_unit_may_join(arg, ocs_id);
}

static bool units_port_joined(void *arg, int64_t ocs_id, uint32_t port, char *why, size_t len)
{
	return reconcile_port_joined(arg, ocs_id, port, why, len);
}

static long units_held(void *arg, int64_t ocs_id)
{
	return reconcile_unit_held(arg, ocs_id);
}

struct domain_units reconcile_domain_units(struct reconciler *r)
{
	return (struct domain_units){ .port_joined = units_port_joined,
		                      .unit_may_join = units_may_join,
		                      .unit_held = units_held,
		                      .arg = r };
}

struct hook *reconcile_states_hook(struct reconciler *r)
{
	return &r->states_hook;
}

struct hook *reconcile_formers_gone_hook(struct reconciler *r)
{
	return &r->formers_hook;
}

uint64_t reconcile_generation(const struct reconciler *r)
{
	return r ? r->generation : 0;
}

int reconcile_inject(struct reconciler *r, int64_t ocs_id, const struct ocs_fault *fault)
{
	struct unit *u = reconcile_unit_by_id(r, ocs_id);
	if (!u || !u->h)
		return -ENOENT;
	if (!u->ops->inject)
		return -EOPNOTSUPP;
	int rc = u->ops->inject(u->h, fault);
	/* A change behind the controller's back is found by the audit, not announced. */
	return rc;
}
