/*
 * Every fabric's derived state, kept from per-(fabric, unit) counts that the
 * rest of the reconciler updates as cross-connects, owners and read-backs
 * change (the transitions are planner/plan_state.c's; this file feeds them).
 *
 * A cell holds what one fabric has on one unit: its desired circuits, how
 * many of them the unit held at its last read-back, the hold-back marks on
 * its ports (something nobody desires joins them) and how many ports it owns
 * there. A cell is troubled when it keeps the fabric from applied; a fabric
 * with no troubled cell and all its stored circuits on known units is held.
 * Only the fabrics whose cells, row or units changed are derived again, and a
 * troubled fabric is judged by walking its own cells (one per unit it
 * touches), never the cluster.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/events.h"
#include "log.h"
#include "plan_state.h"
#include "reconcile_state.h"
#include "reconcile_store.h"
#include "domain/fabric_state.h"
#include "state/store.h"
#include "state/store_changes.h"

#define DOWN_GRACE_S   5 /* a unit down this long fails its fabrics */
#define STATES_TICK_MS 500

/* ---- fabrics ---------------------------------------------------------------- */

/* Index of the first fabric in r->fabs whose id is not below id. */
static size_t fab_lower(const struct reconciler *r, int64_t id)
{
	size_t lo = 0, hi = r->nfabs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (r->fabs[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct reconcile_fab *fab_find(const struct reconciler *r, int64_t id)
{
	size_t i = fab_lower(r, id);
	return i < r->nfabs && r->fabs[i]->id == id ? r->fabs[i] : NULL;
}

static void mark_dirty(struct reconciler *r, struct reconcile_fab *f)
{
	if (f->dirty)
		return;
	if (r->ndirty == r->capdirty) {
		size_t cap = r->capdirty ? 2 * r->capdirty : 64;
		struct reconcile_fab **t = realloc(r->dirty, cap * sizeof(*t));
		if (!t) {
			/* Re-derived at the next audit instead. */
			log_error("reconcile", "out of memory: fabric %s not re-derived now",
			          f->name);
			return;
		}
		r->dirty = t;
		r->capdirty = cap;
	}
	r->dirty[r->ndirty++] = f;
	f->dirty = true;
	reconcile_schedule_states(r);
}

/* The record of fabric id, made (with its row to read) when unknown. NULL when out of memory. */
static struct reconcile_fab *fab_get(struct reconciler *r, int64_t id)
{
	size_t i = fab_lower(r, id);
	if (i < r->nfabs && r->fabs[i]->id == id)
		return r->fabs[i];
	if (r->nfabs == r->capfabs) {
		size_t cap = r->capfabs ? 2 * r->capfabs : 64;
		struct reconcile_fab **t = realloc(r->fabs, cap * sizeof(*t));
		if (!t)
			return NULL;
		r->fabs = t;
		r->capfabs = cap;
	}
	struct reconcile_fab *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->id = id;
	f->row_stale = true;
	memmove(r->fabs + i + 1, r->fabs + i, (r->nfabs - i) * sizeof(*r->fabs));
	r->fabs[i] = f;
	r->nfabs++;
	mark_dirty(r, f);
	return f;
}

/* Forgets a fabric that has neither row nor cells (not on the dirty list). */
static void fab_free(struct reconciler *r, struct reconcile_fab *f)
{
	size_t i = fab_lower(r, f->id);
	memmove(r->fabs + i, r->fabs + i + 1, (r->nfabs - i - 1) * sizeof(*r->fabs));
	r->nfabs--;
	if (f->unsettled)
		r->nunsettled--;
	free(f);
}

const char *reconcile_fabric_name(struct reconciler *r, int64_t fabric_id)
{
	const struct reconcile_fab *f = fab_find(r, fabric_id);
	return f && f->row ? f->name : NULL;
}

void reconcile_fabric_touched(struct reconciler *r, int64_t fabric_id)
{
	/* The reconciler's own state updates: nothing it does not know. */
	if (r->muted)
		return;
	if (fabric_id == 0) {
		r->rows_stale = true;
		reconcile_schedule_states(r);
		return;
	}
	struct reconcile_fab *f = fab_get(r, fabric_id);
	if (!f) {
		r->rows_stale = true;
		reconcile_schedule_states(r);
		return;
	}
	f->row_stale = true;
	mark_dirty(r, f);
}

static void row_take(struct reconcile_fab *f, const struct fabric_row *row)
{
	snprintf(f->name, sizeof(f->name), "%s", row->name);
	snprintf(f->state, sizeof(f->state), "%s", row->state);
	snprintf(f->err, sizeof(f->err), "%s", row->err);
	f->revision = row->revision;
	f->nmissing = row->nmissing;
	f->ncircuits = row->ncircuits;
	f->row = true;
	f->row_stale = false;
}

/* Reads one fabric's row (a plan changed: its counts with it). */
static void load_row(struct reconciler *r, struct reconcile_fab *f)
{
	struct fabric_row row;
	int rc = fabric_row_get(r->d.store, f->id, &row);
	if (rc > 0)
		row_take(f, &row);
	else if (rc == 0)
		f->row = f->row_stale = false; /* deleted */
}

static int take_row(void *arg, const struct fabric_row *row)
{
	struct reconciler *r = arg;
	struct reconcile_fab *f = fab_get(r, row->id);
	if (!f)
		return -ENOMEM;
	row_take(f, row);
	mark_dirty(r, f);
	return 0;
}

/* Reads every fabric's row (at start, or after another process changed the store). */
static void load_rows(struct reconciler *r)
{
	for (size_t i = 0; i < r->nfabs; i++)
		r->fabs[i]->row_stale = true;
	if (fabric_rows_each(r->d.store, take_row, r) != 0)
		return; /* tried again at the next update */
	r->rows_stale = false;
	/* Rows the walk did not meet are gone. */
	for (size_t i = 0; i < r->nfabs; i++) {
		struct reconcile_fab *f = r->fabs[i];
		if (f->row_stale) {
			f->row = f->row_stale = false;
			mark_dirty(r, f);
		}
	}
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
	qsort(ids, n, sizeof(*ids), id_cmp);
	for (size_t i = 0; i < n; i++) {
		if (!ids[i] || (i && ids[i] == ids[i - 1]))
			continue;
		const char *name = reconcile_fabric_name(r, ids[i]);
		if (name) {
			reconcile_add_name(a, name);
			continue;
		}
		char stored[65];
		if (fabric_name_get(r->d.store, ids[i], stored, sizeof(stored)) > 0)
			reconcile_add_name(a, stored);
	}
}

/* ---- cells ------------------------------------------------------------------ */

static size_t cell_hash(int64_t fabric, int64_t unit)
{
	uint64_t h =
	    (uint64_t)fabric * 0x9e3779b97f4a7c15ull ^ (uint64_t)unit * 0xc2b2ae3d27d4eb4full;
	return (size_t)(h ^ h >> 29);
}

/* Slot of (fabric, unit) in the table: the cell, or the empty slot where it would go. */
static size_t cell_slot(const struct reconciler *r, int64_t fabric, int64_t unit)
{
	size_t mask = r->capcells - 1, i = cell_hash(fabric, unit) & mask;
	while (r->cells[i] && (r->cells[i]->fab->id != fabric || r->cells[i]->u->id != unit))
		i = (i + 1) & mask;
	return i;
}

struct reconcile_cell *reconcile_cell_find(struct reconciler *r, int64_t fabric,
                                           const struct unit *u)
{
	return r->capcells ? r->cells[cell_slot(r, fabric, u->id)] : NULL;
}

static int cells_grow(struct reconciler *r)
{
	size_t cap = r->capcells ? 2 * r->capcells : 256;
	struct reconcile_cell **old = r->cells, **t = calloc(cap, sizeof(*t));
	size_t oldcap = r->capcells;
	if (!t)
		return -ENOMEM;
	r->cells = t;
	r->capcells = cap;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i])
			r->cells[cell_slot(r, old[i]->fab->id, old[i]->u->id)] = old[i];
	free(old);
	return 0;
}

/* Removes a cell from the table; later cells of its probe run move back (linear probing). */
static void cells_remove(struct reconciler *r, struct reconcile_cell *c)
{
	size_t mask = r->capcells - 1, i = cell_slot(r, c->fab->id, c->u->id), j = i;
	r->cells[i] = NULL;
	for (;;) {
		j = (j + 1) & mask;
		if (!r->cells[j])
			break;
		size_t k = cell_hash(r->cells[j]->fab->id, r->cells[j]->u->id) & mask;
		/* Move j back to i unless its home k lies cyclically in (i, j]. */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		r->cells[i] = r->cells[j];
		r->cells[j] = NULL;
		i = j;
	}
	r->ncells--;
}

bool reconcile_cell_troubled(const struct reconcile_cell *c)
{
	const struct unit *u = c->u;
	/* Not read back since it connected: it may hold anything on the fabric's ports. */
	if (!u->have_actual)
		return c->desired || c->owned;
	return c->held < c->desired || c->hold || (u->foreign_all && c->owned);
}

/* Sets c->troubled, keeping its fabric's sum and its unit's list. */
static void set_troubled(struct reconcile_cell *c, bool t)
{
	struct unit *u = c->u;
	c->troubled = t;
	if (t) {
		c->fab->ntroubled++;
		c->tprev = NULL;
		c->tnext = u->troubled_cells;
		if (c->tnext)
			c->tnext->tprev = c;
		u->troubled_cells = c;
		return;
	}
	c->fab->ntroubled--;
	if (c->tprev)
		c->tprev->tnext = c->tnext;
	else
		u->troubled_cells = c->tnext;
	if (c->tnext)
		c->tnext->tprev = c->tprev;
	c->tnext = c->tprev = NULL;
}

/* What of u its cells' troubled flags depend on (see reconcile_unit_retrouble()). */
static unsigned trouble_basis(const struct unit *u)
{
	return 1u + u->have_actual + 2u * (u->foreign_all != 0);
}

/* Sets c->troubled from its counts. */
static void retrouble(struct reconciler *r, struct reconcile_cell *c)
{
	/* Judged by flags its unit's other cells were not: they are all judged again. */
	if (c->u->trouble_basis != trouble_basis(c->u))
		c->u->trouble_basis = 0;
	bool t = reconcile_cell_troubled(c);
	if (t == c->troubled)
		return;
	set_troubled(c, t);
	mark_dirty(r, c->fab);
}

static void cell_free(struct reconciler *r, struct reconcile_cell *c)
{
	struct reconcile_fab *f = c->fab;
	f->ndesired -= c->desired;
	if (c->troubled)
		set_troubled(c, false);
	if (c->fprev)
		c->fprev->fnext = c->fnext;
	else
		f->cells = c->fnext;
	if (c->fnext)
		c->fnext->fprev = c->fprev;
	if (c->uprev)
		c->uprev->unext = c->unext;
	else
		c->u->cells = c->unext;
	if (c->unext)
		c->unext->uprev = c->uprev;
	cells_remove(r, c);
	mark_dirty(r, f);
	free(c);
}

int reconcile_cell_add(struct reconciler *r, int64_t fabric, struct unit *u, int desired, int held,
                       int hold, int owned)
{
	if (!fabric || (!desired && !held && !hold && !owned))
		return 0;
	struct reconcile_cell *c = reconcile_cell_find(r, fabric, u);
	if (!c) {
		struct reconcile_fab *f = fab_get(r, fabric);
		if (!f || (2 * (r->ncells + 1) > r->capcells && cells_grow(r) < 0) ||
		    !(c = calloc(1, sizeof(*c)))) {
			log_error("reconcile", "out of memory: fabric %lld on %s not counted",
			          (long long)fabric, u->name);
			return -ENOMEM;
		}
		c->fab = f;
		c->u = u;
		c->fnext = f->cells;
		if (f->cells)
			f->cells->fprev = c;
		f->cells = c;
		c->unext = u->cells;
		if (u->cells)
			u->cells->uprev = c;
		u->cells = c;
		r->cells[cell_slot(r, fabric, u->id)] = c;
		r->ncells++;
	}
	c->desired += (uint32_t)desired;
	c->held += (uint32_t)held;
	c->hold += (uint32_t)hold;
	c->owned += (uint32_t)owned;
	c->fab->ndesired += (uint32_t)desired;
	mark_dirty(r, c->fab);
	if (!c->desired && !c->held && !c->hold && !c->owned)
		cell_free(r, c);
	else
		retrouble(r, c);
	return 0;
}

void reconcile_cells_drop(struct reconciler *r, struct unit *u)
{
	while (u->cells)
		cell_free(r, u->cells);
}

void reconcile_unit_changed(struct reconciler *r, struct unit *u)
{
	u->touched = true;
	reconcile_schedule_states(r);
}

/* ---- derivation ------------------------------------------------------------- */

static bool failing(const struct unit *u)
{
	return u->failures >= RECONCILE_FAILED_AFTER ||
	       (u->conn != OCS_CONN_UP && mono_since(&u->down_since) > DOWN_GRACE_S);
}

/* Why a unit holds a fabric back, once it has failed long enough to say so. */
static void blame(const struct unit *u, char *err, size_t len, const char *why)
{
	if (u->failures >= RECONCILE_FAILED_AFTER)
		snprintf(err, len, "OCS unit %s: %s%s", u->name, u->last_error, why);
	else if (u->conn != OCS_CONN_UP && mono_since(&u->down_since) > DOWN_GRACE_S)
		snprintf(err, len, "OCS unit %s is not connected%s%s%s", u->name,
		         u->last_error[0] ? ": " : "", u->last_error, why);
}

/* The unit to name: a failing one first, then the lowest id (the same whatever the order). */
static struct unit *pick(struct unit *cur, struct unit *u)
{
	if (!cur)
		return u;
	bool fc = failing(cur), fu = failing(u);
	if (fc != fu)
		return fu ? u : cur;
	return u->id < cur->id ? u : cur;
}

/*
 * A fabric is only applied when every circuit is held and no unit cabled to
 * its ports may join them to anything but its own circuits: a unit not read
 * back (it may hold anything, e.g. a deleted fabric's circuits while it was
 * unreachable), or one holding a cross-connect that is not desired, a one-way
 * entry of ours, or a foreign entry on its ports, holds the fabric back.
 */
static enum plan_state derive(const struct reconcile_fab *f, char *err, size_t len)
{
	bool all = f->ntroubled == 0 && (int64_t)f->ndesired == f->ncircuits, busy = false;
	struct unit *missing_on = NULL, *culprit = NULL;
	err[0] = '\0';
	for (const struct reconcile_cell *c = f->ntroubled ? f->cells : NULL; c; c = c->fnext) {
		struct unit *u = c->u;
		if (!c->troubled)
			continue;
		bool miss = u->have_actual ? c->held < c->desired : c->desired > 0;
		bool cul = u->have_actual ? c->hold || (u->foreign_all && c->owned) : c->owned > 0;
		if (miss) {
			busy |= u->busy || u->op_id;
			missing_on = pick(missing_on, u);
		}
		if (cul)
			culprit = pick(culprit, u);
	}
	if (missing_on)
		blame(missing_on, err, len, "");
	if (culprit) {
		all = false;
		busy |= culprit->busy || culprit->op_id;
		if (!err[0])
			blame(culprit, err, len,
			      " (it may still join this fabric's ports to others)");
	}
	enum plan_state cur = PLAN_STATE_APPLYING;
	plan_state_parse(f->state, &cur);
	struct plan_state_input in = { .current = cur,
		                       .all_held = all,
		                       .missing_pairs = (size_t)f->nmissing,
		                       .unit_failing = err[0] != '\0',
		                       .busy = busy };
	return plan_state_next(&in);
}

/* Stores the changed states in one transaction; false when that failed (rows re-read). */
static bool store_changes(struct reconciler *r, json_t *changes)
{
	struct store *s = r->d.store;
	size_t i;
	json_t *c;
	int rc = 0;
	struct store_capture *cap = NULL;
	void *cs = NULL;
	size_t cs_len = 0;
	if (!hook_empty(&r->states_hook) && store_capture_start(s, "fabric", &cap) < 0)
		return false;
	if (store_begin_relaxed(s) < 0) {
		store_capture_free(cap);
		return false;
	}
	/* The batches that made these states, in the same transaction. */
	rc = reconcile_journal_write(r);
	struct fabric_state_change *v = calloc(json_array_size(changes) + 1, sizeof(*v));
	if (!v)
		rc = -ENOMEM;
	json_array_foreach(changes, i, c)
	{
		if (v)
			v[i] = (struct fabric_state_change){
				.id = json_integer_value(json_object_get(c, "id")),
				.state = json_string_value(json_object_get(c, "state")),
				.error = json_string_value(json_object_get(c, "error"))
			};
	}
	if (rc == 0)
		rc = fabric_states_write(s, v, json_array_size(changes));
	free(v);
	if (rc == 0 && cap)
		rc = store_capture_take(cap, &cs, &cs_len);
	store_capture_free(cap);
	/* The fabric rows this commit touches are the reconciler's own writes. */
	r->muted = true;
	bool ok = rc == 0 && store_commit(s) == 0;
	if (!ok)
		store_rollback(s);
	r->muted = false;
	if (ok && cs)
		reconcile_states_hook_call(&r->states_hook, cs, cs_len);
	free(cs);
	reconcile_journal_done(r);
	return ok;
}

/*
 * A cell's troubled flag follows its counts (kept as they change) and two of
 * its unit's flags: only when those differ from what all the unit's cells
 * were last judged by (or a cell was judged by others since) are they all
 * (a cell per fabric on the unit, hundreds in a large cluster) judged again. The
 * troubled cells' fabrics are derived again whatever changed: how the unit
 * fares (busy, failing, down) is part of their state.
 */
void reconcile_unit_retrouble(struct reconciler *r, struct unit *u)
{
	if (!u->touched)
		return;
	u->touched = false;
	unsigned basis = trouble_basis(u);
	if (basis != u->trouble_basis) {
		u->trouble_basis = basis;
		for (struct reconcile_cell *c = u->cells; c; c = c->unext)
			retrouble(r, c);
	}
	for (struct reconcile_cell *c = u->troubled_cells; c; c = c->tnext)
		mark_dirty(r, c->fab);
}

/* Re-judges the units whose flags changed: their troubled cells' fabrics are derived again. */
static void take_touched_units(struct reconciler *r)
{
	for (struct unit *u = r->units; u; u = u->next)
		reconcile_unit_retrouble(r, u);
}

/*
 * Derives the state of the dirty fabrics, for at most RECONCILE_SLICE_US (a unit that
 * reconnects makes every fabric on it dirty), stores the ones that changed
 * (one transaction), and publishes them.
 */
bool reconcile_states_update(struct reconciler *r)
{
	struct reconcile_work t0 = reconcile_work_start();
	json_t *changes = json_array();

	/* The tick: fabrics still on their way, or failed, may move with time alone. */
	if (r->nunsettled && mono_since(&r->last_tick) * 1000 >= STATES_TICK_MS) {
		r->last_tick = t0.wall;
		for (size_t i = 0; i < r->nfabs; i++)
			if (r->fabs[i]->unsettled)
				mark_dirty(r, r->fabs[i]);
	}
	take_touched_units(r);
	if (r->rows_stale)
		load_rows(r);
	while (r->ndirty && mono_since(&t0.wall) * 1e6 < RECONCILE_SLICE_US) {
		struct reconcile_fab *f = r->dirty[--r->ndirty];
		f->dirty = false;
		if (f->row_stale)
			load_row(r, f);
		if (!f->row) {
			if (!f->cells && !f->row_stale)
				fab_free(r, f);
			continue;
		}
		char err[400];
		enum plan_state next = derive(f, err, sizeof(err));
		const char *state = plan_state_name(next);
		/* Failed fabrics are re-checked too: they recover when retries succeed. */
		bool unsettled = !plan_state_final(next) || next == PLAN_STATE_FAILED;
		if (unsettled != f->unsettled) {
			f->unsettled = unsettled;
			r->nunsettled += unsettled ? 1 : (size_t)-1;
		}
		if (strcmp(state, f->state) == 0 && strcmp(err, f->err) == 0)
			continue;
		json_array_append_new(changes, json_pack("{s:I, s:s, s:s, s:s, s:I}", "id",
		                                         (json_int_t)f->id, "fabric", f->name,
		                                         "state", state, "error", err, "revision",
		                                         (json_int_t)f->revision));
		/* Stored below; if that fails the row is read again. */
		snprintf(f->state, sizeof(f->state), "%s", state);
		snprintf(f->err, sizeof(f->err), "%s", err);
	}

	/* Batches that ended are written before waiters hear settled: lists are current then. */
	if (!json_array_size(changes) && reconcile_journal_ended(r))
		reconcile_journal_flush(r);
	if (json_array_size(changes) && store_changes(r, changes)) {
		size_t i;
		json_t *c;
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
	} else if (json_array_size(changes)) {
		size_t i;
		json_t *c;
		json_array_foreach(changes, i, c)
		{
			struct reconcile_fab *f =
			    fab_find(r, json_integer_value(json_object_get(c, "id")));
			if (f) {
				f->row_stale = true;
				mark_dirty(r, f);
			}
		}
	}
	json_decref(changes);
	reconcile_work_end(t0);
	if (r->ndirty) {
		/* More next time round the loop: whatever waits meanwhile gets its turn. */
		reconcile_schedule_states(r);
		return false;
	}
	if (r->nunsettled) {
		struct timeval tick = { 0, STATES_TICK_MS * 1000 };
		evtimer_add(r->ev_states, &tick);
	}
	return true;
}

void reconcile_schedule_states(struct reconciler *r)
{
	struct timeval now = { 0, 0 };
	evtimer_add(r->ev_states, &now);
}

void reconcile_state_free(struct reconciler *r)
{
	for (size_t i = 0; i < r->capcells; i++)
		free(r->cells[i]);
	free(r->cells);
	for (size_t i = 0; i < r->nfabs; i++)
		free(r->fabs[i]);
	free(r->fabs);
	free(r->dirty);
}
