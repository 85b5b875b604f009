/*
 * The full recomputation: what the incremental bookkeeping should be, from
 * scratch, compared with what it is. The periodic audit runs it unit by unit
 * in slices of about RECONCILE_SLICE_US (then the fabrics), and in check mode
 * it runs after every state update. A difference is a bug of the incremental
 * path: it is logged, counted (ofcd_reconcile_audit_mismatches_total) and
 * repaired by rebuilding.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "reconcile_audit.h"
#include "reconcile_ports.h"
#include "reconcile_state.h"
#include "domain/topo.h"
#include "state/store.h"

/* One (fabric, unit) cell's counts, as recomputed or as kept. */
struct count {
	int64_t fabric;
	uint32_t desired, held, hold, owned;
};

static int count_cmp(const void *x, const void *y)
{
	int64_t a = ((const struct count *)x)->fabric, b = ((const struct count *)y)->fabric;
	return a < b ? -1 : a > b;
}

/*
 * The count of fabric in v, added when new (sorted after the fact). Runs of
 * the same fabric are the rule (neighbouring ports, a plan's circuits): the
 * last one found is tried first.
 */
static struct count *count_of(struct count *v, size_t *n, size_t *last, int64_t fabric)
{
	if (*last < *n && v[*last].fabric == fabric)
		return &v[*last];
	for (size_t i = 0; i < *n; i++)
		if (v[i].fabric == fabric)
			return &v[*last = i];
	v[*n] = (struct count){ .fabric = fabric };
	*last = *n;
	return &v[(*n)++];
}

static bool in_range(const struct unit *u, struct plan_xc xc)
{
	return xc.a >= 1 && xc.a < xc.b && xc.b <= u->ports;
}

static void mark(const struct unit *u, uint32_t *hold, uint32_t p)
{
	if (p >= 1 && p <= u->ports)
		hold[p]++;
}

/* Compares a kept set (unordered) with a recomputed one (sorted). */
static bool same_set(const struct plan_xc *kept, size_t nk, const struct plan_xc *want, size_t nw)
{
	if (nk != nw)
		return false;
	struct plan_xc *v = malloc((nk ? nk : 1) * sizeof(*v));
	if (!v)
		return true; /* cannot tell: not a mismatch */
	if (nk)
		memcpy(v, kept, nk * sizeof(*v));
	qsort(v, nk, sizeof(*v), plan_xc_cmp);
	bool same = nk == 0 || memcmp(v, want, nk * sizeof(*v)) == 0;
	free(v);
	return same;
}

static bool same_batch(const struct plan_batch *a, const struct plan_batch *b)
{
	return a->ndel == b->ndel && a->nadd == b->nadd &&
	       (!a->ndel || memcmp(a->del, b->del, a->ndel * sizeof(*a->del)) == 0) &&
	       (!a->nadd || memcmp(a->add, b->add, a->nadd * sizeof(*a->add)) == 0);
}

/*
 * The batch as the reconciler computed it before its bookkeeping was
 * incremental: the full desired set against the full read-back, one-way
 * entries counting as present unless desired and not whole (plan_diff()).
 */
static int full_batch(const struct unit *u, const struct desired_set *ds, struct plan_batch *b)
{
	size_t na = u->nactual + u->npartial, nd = 0;
	struct plan_xc *actual = malloc((na + 1) * sizeof(*actual));
	struct plan_xc *desired = malloc((ds->n + 1) * sizeof(*desired));
	int rc = -1;
	if (!actual || !desired)
		goto out;
	/* No cable reaches beyond the unit's ports: such a circuit is never sent. */
	for (size_t i = 0; i < ds->n; i++)
		if (in_range(u, ds->xc[i]))
			desired[nd++] = ds->xc[i];
	if (u->nactual)
		memcpy(actual, u->actual, u->nactual * sizeof(*actual));
	for (size_t i = 0; i < u->npartial; i++) {
		uint32_t x = u->partial[i].in_port, y = u->partial[i].out_port;
		actual[u->nactual + i] = (struct plan_xc){ x < y ? x : y, x < y ? y : x };
	}
	na = plan_xc_sort_unique(actual, na);
	size_t m = 0;
	for (size_t i = 0; i < na; i++) {
		bool whole = u->nactual && bsearch(&actual[i], u->actual, u->nactual,
		                                   sizeof(*actual), plan_xc_cmp) != NULL;
		if (whole || !nd ||
		    !bsearch(&actual[i], desired, nd, sizeof(*desired), plan_xc_cmp))
			actual[m++] = actual[i];
	}
	rc = plan_diff(desired, nd, actual, m, 0, b);
out:
	free(actual);
	free(desired);
	return rc;
}

/* The store's circuits of a unit, walked against the mirror's (both sorted). */
struct circuits_walk {
	const struct unit *u;
	const struct desired_set *ds;
	size_t k;
	unsigned bad;
};

static int compare_circuit(void *arg, uint32_t x, uint32_t y, int64_t fabric)
{
	struct circuits_walk *w = arg;
	const struct desired_set *ds = w->ds;
	bool same = w->k < ds->n && ds->xc[w->k].a == x && ds->xc[w->k].b == y &&
	            ds->fabric[w->k] == fabric;
	w->k++;
	if (!same && !w->bad++)
		log_error("reconcile",
		          "audit: %s: the desired circuits in memory differ from the store",
		          w->u->name);
	return 0;
}

/* What the store says: each port's owner and the unit's circuits, against the mirror. */
static unsigned audit_store(struct reconciler *r, const struct unit *u,
                            const struct desired_set *ds)
{
	unsigned bad = 0;
	size_t nown;
	const int64_t *own = desired_owners(r->d.desired, u->id, &nown);
	size_t n = nown + (size_t)u->ports + 1;
	int64_t *want = calloc(n, sizeof(*want));
	if (!want || topo_unit_owners(r->d.store, u->id, want, n) < 0) {
		free(want);
		return 0;
	}
	for (size_t p = 0; p < n; p++)
		if (want[p] != (p < nown ? own[p] : 0) && !bad++)
			log_error("reconcile",
			          "audit: %s port %zu: the store says fabric %lld owns it, "
			          "memory says %lld",
			          u->name, p, (long long)want[p],
			          (long long)(p < nown ? own[p] : 0));
	free(want);
	struct circuits_walk w = { .u = u, .ds = ds, .bad = bad };
	if (topo_unit_circuits_each(r->d.store, u->id, compare_circuit, &w) < 0)
		return bad;
	bad = w.bad;
	if (w.k != ds->n && !bad++)
		log_error("reconcile", "audit: %s: %zu circuits in the store, %zu in memory",
		          u->name, w.k, ds->n);
	if (bad) {
		/* Reloaded by the pass this starts. */
		desired_resync(r->d.desired);
		event_active(r->ev_pass, 0, 0);
	}
	return bad;
}

static void report(struct reconciler *r, const struct unit *u, unsigned bad, const char *first)
{
	if (!bad)
		return;
	log_error("reconcile",
	          "audit: %s: %u differences from a full recomputation (first: %s); "
	          "rebuilt",
	          u ? u->name : "fabrics", bad, first);
	metrics_counter_add("ofcd_reconcile_audit_mismatches_total", RECONCILE_HELP_AUDIT, NULL,
	                    bad);
	r->audit_mismatches += bad;
}

unsigned reconcile_audit_unit(struct reconciler *r, struct unit *u, bool store)
{
	/* Flags that changed in this very callback (a read-back) are taken in first. */
	reconcile_unit_retrouble(r, u);
	struct desired_set ds = reconcile_unit_desired(u);
	size_t n = (size_t)u->ports + 1, nown;
	const int64_t *own = desired_owners(r->d.desired, u->id, &nown);
	uint32_t *peer = calloc(n, sizeof(*peer)), *hold = calloc(n, sizeof(*hold));
	struct plan_xc *miss = malloc((ds.n + 1) * sizeof(*miss));
	struct plan_xc *stray = malloc((u->nactual + 1) * sizeof(*stray));
	struct plan_xc *oor = malloc((u->nactual + 1) * sizeof(*oor));
	struct count *want = malloc((ds.n + n + 1) * sizeof(*want));
	struct count *have = malloc((ds.n + n + 1) * sizeof(*have));
	size_t nmiss = 0, nstray = 0, noor = 0, nwant = 0, nhave = 0, last = 0;
	unsigned bad = 0, foreign_all = 0;
	const char *first = "";
	if (!peer || !hold || !miss || !stray || !oor || !want || !have)
		goto out;
#define DIFF(cond, what)                                                                           \
	do {                                                                                       \
		if (cond) {                                                                        \
			if (!bad++)                                                                \
				first = what;                                                      \
		}                                                                                  \
	} while (0)

	for (uint32_t p = 1; p < n; p++)
		DIFF(u->owner[p] != (p < nown ? own[p] : 0), "port owner");
	for (size_t i = 0; i < u->nactual; i++) {
		struct plan_xc xc = u->actual[i];
		if (in_range(u, xc)) {
			peer[xc.a] = xc.b;
			peer[xc.b] = xc.a;
		}
	}
	for (uint32_t p = 1; p < n; p++)
		DIFF(u->peer[p] != peer[p], "peer");
	/* One merge of desired and held. */
	size_t i = 0, j = 0;
	while (i < ds.n || j < u->nactual) {
		int c = i == ds.n         ? 1
		        : j == u->nactual ? -1
		                          : plan_xc_cmp(&ds.xc[i], &u->actual[j]);
		if (c <= 0) {
			struct count *k = count_of(want, &nwant, &last, ds.fabric[i]);
			k->desired++;
			if (c == 0 && in_range(u, ds.xc[i]))
				k->held++;
			else if (c < 0 && in_range(u, ds.xc[i]))
				miss[nmiss++] = ds.xc[i];
		}
		if (c > 0 || (c == 0 && !in_range(u, u->actual[j]))) {
			struct plan_xc xc = u->actual[j];
			if (in_range(u, xc)) {
				stray[nstray++] = xc;
				mark(u, hold, xc.b);
			} else {
				oor[noor++] = xc;
			}
			mark(u, hold, xc.a);
		}
		i += c <= 0;
		j += c >= 0;
	}
	for (size_t k = 0; k < u->npartial; k++) {
		mark(u, hold, u->partial[k].in_port);
		if (u->partial[k].out_port != u->partial[k].in_port)
			mark(u, hold, u->partial[k].out_port);
	}
	for (size_t k = 0; k < u->nforeign; k++) {
		const struct ocs_flow *f = &u->foreign[k];
		if (reconcile_flow_floods(f)) {
			foreign_all++;
			continue;
		}
		mark(u, hold, f->in_port);
		if (f->out_port != f->in_port)
			mark(u, hold, f->out_port);
	}
	for (uint32_t p = 1; p < n; p++) {
		DIFF(u->hold[p] != hold[p], "hold marks");
		int64_t f = p < nown ? own[p] : 0;
		if (f) {
			struct count *k = count_of(want, &nwant, &last, f);
			k->owned++;
			k->hold += hold[p];
		}
	}
	DIFF(u->foreign_all != foreign_all, "foreign entries on every port");
	DIFF(!same_set(u->miss.v, u->miss.n, miss, nmiss), "missing set");
	DIFF(!same_set(u->stray.v, u->stray.n, stray, nstray), "stray set");
	qsort(oor, noor, sizeof(*oor), plan_xc_cmp);
	DIFF(!same_set(u->oor, u->noor, oor, noor), "out-of-range set");
	/* Cells: the kept ones against the recomputed ones, by fabric. */
	for (const struct reconcile_cell *c = u->cells; c; c = c->unext) {
		have[nhave++] =
		    (struct count){ c->fab->id, c->desired, c->held, c->hold, c->owned };
		DIFF(c->troubled != reconcile_cell_troubled(c), "troubled flag");
	}
	qsort(want, nwant, sizeof(*want), count_cmp);
	qsort(have, nhave, sizeof(*have), count_cmp);
	DIFF(nwant != nhave || (nwant && memcmp(want, have, nwant * sizeof(*want)) != 0), "cells");
	/* The next batch, both ways. */
	if (u->have_actual && !bad) {
		struct plan_batch inc, full;
		if (reconcile_ports_batch(u, 0, &inc) == 0) {
			if (full_batch(u, &ds, &full) == 0) {
				DIFF(!same_batch(&inc, &full), "next batch");
				plan_batch_free(&full);
			}
			plan_batch_free(&inc);
		}
	}
#undef DIFF
	if (store && desired_usable(r->d.desired)) {
		unsigned s = audit_store(r, u, &ds);
		if (s)
			report(r, u, s, "the in-memory desired state against the store");
	}
	report(r, u, bad, first);
	if (bad)
		reconcile_ports_rebuild(r, u);
out:
	free(peer);
	free(hold);
	free(miss);
	free(stray);
	free(oor);
	free(want);
	free(have);
	return bad;
}

unsigned reconcile_audit_fabrics(struct reconciler *r)
{
	unsigned bad = 0;
	for (size_t i = 0; i < r->nfabs; i++) {
		struct reconcile_fab *f = r->fabs[i];
		uint32_t desired = 0, troubled = 0;
		for (const struct reconcile_cell *c = f->cells; c; c = c->fnext) {
			desired += c->desired;
			troubled += c->troubled;
		}
		if (desired == f->ndesired && troubled == f->ntroubled)
			continue;
		bad++;
		f->ndesired = desired;
		f->ntroubled = troubled;
		f->row_stale = true;
		reconcile_fabric_touched(r, f->id);
	}
	report(r, NULL, bad, "a fabric's sums");
	return bad;
}

unsigned reconcile_audit_all(struct reconciler *r)
{
	unsigned bad = 0;
	for (struct unit *u = r->units; u; u = u->next)
		bad += reconcile_audit_unit(r, u, false);
	return bad + reconcile_audit_fabrics(r);
}
