/*
 * What the reconciler judges from the units' read-backs: which fabric owns
 * each OCS port, the isolation invariant (no cross-connect between two
 * fabrics, or a fabric and a port of none), and every fabric's derived state
 * (the transitions are planner/plan_state.c's; this file feeds them).
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "log.h"
#include "plan_state.h"
#include "reconcile_internal.h"
#include "store_sql.h"

#define DOWN_GRACE_S   5 /* a unit down this long fails its fabrics */
#define STATES_TICK_MS 500

/* ---- port owners and fabric names ---------------------------------------- */

/*
 * Ownership changes only with committed writes, each of which starts a pass,
 * so one load per pass is enough.
 */
const int64_t *reconcile_port_owners(struct reconciler *r, struct unit *u)
{
	if (u->owner && u->owner_gen == r->changes)
		return u->owner;
	if (!u->owner)
		u->owner = calloc((size_t)u->ports + 1, sizeof(*u->owner));
	if (!u->owner)
		return NULL;
	memset(u->owner, 0, ((size_t)u->ports + 1) * sizeof(*u->owner));
	sqlite3_stmt *st = store_stmt(
	    r->d.store, "SELECT c.ocs_port, fs.fabric_id FROM cable c JOIN "
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

/* Such lists are short: a linear search. */
void reconcile_add_name(json_t *a, const char *name)
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

void reconcile_add_fabric_names(struct reconciler *r, json_t *a, int64_t *ids, size_t n)
{
	sqlite3_stmt *st = store_stmt(r->d.store, "SELECT name FROM fabric WHERE id = ?");
	qsort(ids, n, sizeof(*ids), id_cmp);
	for (size_t i = 0; i < n; i++) {
		if (!ids[i] || (i && ids[i] == ids[i - 1]))
			continue;
		sqlite3_bind_int64(st, 1, ids[i]);
		if (sqlite3_step(st) == SQLITE_ROW)
			reconcile_add_name(a, (const char *)sqlite3_column_text(st, 0));
		sqlite3_reset(st);
	}
}

/* ---- isolation ------------------------------------------------------------ */

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
	int64_t ids[2] = { reconcile_port_owner(u, owner, a), reconcile_port_owner(u, owner, b) };
	if (foreign)
		log_error("reconcile",
		          "%s: an entry ofcd did not make (%u -> %u) can join ports of different "
		          "fabrics; it is left alone, remove it by hand",
		          u->name, a, b);
	else
		log_error("reconcile",
		          "%s: cross-connect %u-%u breaks fabric isolation; removing it", u->name,
		          a, b);
	metrics_counter_add("ofcd_isolation_violations_total", RECONCILE_HELP_ISOLATION, NULL, 1);
	json_t *fabrics = json_array();
	reconcile_add_fabric_names(r, fabrics, ids, 2);
	events_publish(r->d.events, EVENTS_ISOLATION_VIOLATION,
	               json_pack("{s:s, s:[I, I], s:b, s:o}", "ocs", u->name,
	                         foreign ? "foreign_entry" : "cross_connect", (json_int_t)a,
	                         (json_int_t)b, "foreign", foreign, "fabrics", fabrics));
}

void reconcile_check_isolation(struct reconciler *r, struct unit *u)
{
	const int64_t *owner = NULL;
	struct desired_set ds = reconcile_unit_desired(u);
	struct plan_xc *now = malloc((u->nactual + u->nforeign + 1) * sizeof(*now));
	size_t nnow = 0;
	if (!now)
		return;
	struct reconcile_walk w = { &ds, 0 };
	for (size_t i = 0; i < u->nactual; i++) {
		uint32_t a = u->actual[i].a, b = u->actual[i].b;
		/* A desired cross-connect joins two ports of one fabric by construction. */
		if (reconcile_walk_index(&w, &u->actual[i]) >= 0)
			continue;
		if (!owner && !(owner = reconcile_port_owners(r, u)))
			goto out;
		if (reconcile_port_owner(u, owner, a) != reconcile_port_owner(u, owner, b))
			report_violation(r, u, owner, a, b, false, now, &nnow);
	}
	if (u->nforeign && !owner && !(owner = reconcile_port_owners(r, u)))
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

/* ---- fabric states -------------------------------------------------------- */

/* A fabric as the state update sees it. */
struct reconcile_fab {
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
	struct store *s = r->d.store;
	if (r->fabs_valid && r->fabs_gen == r->changes)
		return 0;
	size_t nf = 0, capf = 16;
	struct reconcile_fab *f = malloc(capf * sizeof(*f));
	if (!f)
		return -ENOMEM;
	sqlite3_stmt *st = store_stmt(s, "SELECT f.id, f.name, f.state, coalesce(f.error, ''), "
	                                 "f.revision, (SELECT count(*) FROM missing_pair m WHERE "
	                                 "m.fabric_id = f.id), (SELECT count(*) FROM circuit c "
	                                 "WHERE c.fabric_id = f.id) FROM fabric f ORDER BY f.id");
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (nf == capf) {
			struct reconcile_fab *t = realloc(f, (capf *= 2) * sizeof(*f));
			if (!t) {
				sqlite3_reset(st);
				free(f);
				return -ENOMEM;
			}
			f = t;
		}
		struct reconcile_fab *v = &f[nf++];
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
	if (u->failures >= RECONCILE_FAILED_AFTER)
		snprintf(err, len, "OCS unit %s: %s%s", u->name, u->last_error, why);
	else if (u->conn != OCS_CONN_UP && reconcile_since(&u->down_since) > DOWN_GRACE_S)
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
			if ((owner = reconcile_port_owners(r, u)))
				mark_all_on(r, culprit, u, owner);
			continue;
		}
		struct desired_set ds = reconcile_unit_desired(u);
		struct reconcile_walk w = { &ds, 0 };
		for (size_t i = 0; i < u->nactual; i++) {
			if (reconcile_walk_index(&w, &u->actual[i]) >= 0)
				continue;
			if (!owner && !(owner = reconcile_port_owners(r, u)))
				break;
			mark(r, culprit, reconcile_port_owner(u, owner, u->actual[i].a), u);
			mark(r, culprit, reconcile_port_owner(u, owner, u->actual[i].b), u);
		}
		if ((u->npartial || u->nforeign) && !owner &&
		    !(owner = reconcile_port_owners(r, u)))
			continue;
		for (size_t i = 0; i < u->npartial; i++) {
			mark(r, culprit, reconcile_port_owner(u, owner, u->partial[i].in_port), u);
			mark(r, culprit, reconcile_port_owner(u, owner, u->partial[i].out_port), u);
		}
		for (size_t i = 0; i < u->nforeign; i++) {
			const struct ocs_flow *f = &u->foreign[i];
			if (f->in_port == OCS_PORT_ANY || f->out_port == OCS_PORT_EVERY) {
				mark_all_on(r, culprit, u, owner);
				continue;
			}
			mark(r, culprit, reconcile_port_owner(u, owner, f->in_port), u);
			mark(r, culprit, reconcile_port_owner(u, owner, f->out_port), u);
		}
	}
}

/*
 * Derives every fabric's state from what its units hold, stores the ones that
 * changed (one transaction), and publishes them.
 */
static void update_states(struct reconciler *r)
{
	struct store *s = r->d.store;
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
		struct desired_set ds = reconcile_unit_desired(u);
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
		struct reconcile_fab *fv = &r->fabs[i];
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

void reconcile_states_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct timespec t0 = reconcile_work_start();
	update_states(arg);
	reconcile_work_end(t0);
}

void reconcile_schedule_states(struct reconciler *r)
{
	struct timeval now = { 0, 0 };
	evtimer_add(r->ev_states, &now);
}
