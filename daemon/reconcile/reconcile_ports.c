/*
 * What each unit holds against what is desired of it, port by port, kept up
 * to date from the changes alone: a cross-connect that becomes desired or
 * stops being so, a port that changes owner, a read-back that differs from
 * the previous one. From it come the next batch, the isolation check and the
 * server reservation, none of which walks the unit's whole desired set.
 *
 * Per unit: peer[] (what the last read-back joins), the missing set (desired,
 * not held), the stray set (held, not desired), and hold[port], the number of
 * things nobody desires that touch a port: an end of a stray or out-of-range
 * cross-connect, an end of a one-way entry of ofcd's, an end of a foreign
 * entry. A fabric's cell on the unit sums the hold marks of the ports it
 * owns (reconcile_state.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/events.h"
#include "log.h"
#include "reconcile_ports.h"
#include "reconcile_state.h"
#include "reconcile_store.h"

/* ---- sets of cross-connects keyed by their lower port ----------------------- */

static bool xcset_has(const struct reconcile_xcset *s, struct plan_xc xc)
{
	uint32_t i = s->pos[xc.a];
	return i && s->v[i - 1].a == xc.a && s->v[i - 1].b == xc.b;
}

static int xcset_add(struct reconcile_xcset *s, struct plan_xc xc)
{
	uint32_t i = s->pos[xc.a];
	if (i) {
		/* A port in two entries is not physical: the newer one stands. */
		s->v[i - 1] = xc;
		return 0;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		struct plan_xc *t = realloc(s->v, cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		s->v = t;
		s->cap = cap;
	}
	s->v[s->n++] = xc;
	s->pos[xc.a] = (uint32_t)s->n;
	return 0;
}

static void xcset_del(struct reconcile_xcset *s, struct plan_xc xc)
{
	if (!xcset_has(s, xc))
		return;
	uint32_t i = s->pos[xc.a] - 1;
	s->pos[xc.a] = 0;
	if (i != s->n - 1) {
		s->v[i] = s->v[s->n - 1];
		s->pos[s->v[i].a] = i + 1;
	}
	s->n--;
}

static void xcset_free(struct reconcile_xcset *s)
{
	free(s->pos);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* ---- the deltas ------------------------------------------------------------- */

/* plan_xc_cmp() inlined: these compares run over whole read-backs. */
static inline int xc_cmp(const struct plan_xc *x, const struct plan_xc *y)
{
	return x->a != y->a ? (x->a < y->a ? -1 : 1) : x->b < y->b ? -1 : x->b > y->b;
}

static bool in_range(const struct unit *u, struct plan_xc xc)
{
	return xc.a >= 1 && xc.a < xc.b && xc.b <= u->ports;
}

/* A hold-back mark on port p of u comes (delta 1) or goes (-1); its owner's cell follows. */
static void hold_mark(struct reconciler *r, struct unit *u, uint32_t p, int delta)
{
	if (p < 1 || p > u->ports)
		return;
	u->hold[p] += (uint32_t)delta;
	reconcile_cell_add(r, u->owner[p], u, 0, 0, delta, 0);
}

static void set_fail(struct unit *u, int rc)
{
	/* The sets are incomplete: the next audit rebuilds them. */
	if (rc < 0)
		log_error("reconcile", "%s: out of memory in the port bookkeeping", u->name);
}

void reconcile_ports_desired(struct reconciler *r, struct unit *u, struct plan_xc xc,
                             int64_t fabric, bool added)
{
	bool in = in_range(u, xc), held = in && u->peer[xc.a] == xc.b;
	int s = added ? 1 : -1;
	reconcile_cell_add(r, fabric, u, s, held ? s : 0, 0, 0);
	if (held) {
		/* Held and desired, or held and a stray now. */
		if (added)
			xcset_del(&u->stray, xc);
		else
			set_fail(u, xcset_add(&u->stray, xc));
		hold_mark(r, u, xc.a, -s);
		hold_mark(r, u, xc.b, -s);
	} else if (in) {
		if (added)
			set_fail(u, xcset_add(&u->miss, xc));
		else
			xcset_del(&u->miss, xc);
	}
}

void reconcile_ports_owner(struct reconciler *r, struct unit *u, uint32_t port, int64_t before,
                           int64_t after)
{
	if (port < 1 || port > u->ports)
		return;
	u->owner[port] = after;
	reconcile_cell_add(r, before, u, 0, 0, -(int)u->hold[port], -1);
	reconcile_cell_add(r, after, u, 0, 0, (int)u->hold[port], 1);
}

/* Index of xc in the desired set, or -1. */
static ssize_t desired_index(const struct desired_set *ds, struct plan_xc xc)
{
	if (!ds->n)
		return -1;
	const struct plan_xc *k = bsearch(&xc, ds->xc, ds->n, sizeof(xc), plan_xc_cmp);
	return k ? k - ds->xc : -1;
}

static void oor_set(struct unit *u, struct plan_xc xc, bool added)
{
	if (added) {
		struct plan_xc *t = realloc(u->oor, (u->noor + 1) * sizeof(*t));
		if (!t) {
			set_fail(u, -ENOMEM);
			return;
		}
		u->oor = t;
		u->oor[u->noor++] = xc;
		return;
	}
	for (size_t i = 0; i < u->noor; i++) {
		if (plan_xc_cmp(&u->oor[i], &xc) == 0) {
			u->oor[i] = u->oor[--u->noor];
			return;
		}
	}
}

/* A cross-connect appears in (added) or leaves what u holds. */
static void actual_change(struct reconciler *r, struct unit *u, const struct desired_set *ds,
                          struct plan_xc xc, bool added)
{
	int s = added ? 1 : -1;
	if (!in_range(u, xc)) {
		/* Never desired (no cable reaches beyond the unit's ports): a stray. */
		oor_set(u, xc, added);
		hold_mark(r, u, xc.a, s);
		return;
	}
	if (added) {
		u->peer[xc.a] = xc.b;
		u->peer[xc.b] = xc.a;
	} else {
		if (u->peer[xc.a] == xc.b)
			u->peer[xc.a] = 0;
		if (u->peer[xc.b] == xc.a)
			u->peer[xc.b] = 0;
	}
	ssize_t k = desired_index(ds, xc);
	if (k >= 0) {
		reconcile_cell_add(r, ds->fabric[k], u, 0, s, 0, 0);
		if (added)
			xcset_del(&u->miss, xc);
		else
			set_fail(u, xcset_add(&u->miss, xc));
		return;
	}
	if (added)
		set_fail(u, xcset_add(&u->stray, xc));
	else
		xcset_del(&u->stray, xc);
	hold_mark(r, u, xc.a, s);
	hold_mark(r, u, xc.b, s);
}

/* The hold marks of entries that are not whole cross-connects come (1) or go (-1). */
static void flow_marks(struct reconciler *r, struct unit *u, const struct ocs_flow *v, size_t n,
                       bool foreign, int s)
{
	for (size_t i = 0; i < n; i++) {
		if (foreign && reconcile_flow_floods(&v[i])) {
			u->foreign_all += (unsigned)s;
			reconcile_unit_changed(r, u);
			continue;
		}
		hold_mark(r, u, v[i].in_port, s);
		if (v[i].out_port != v[i].in_port)
			hold_mark(r, u, v[i].out_port, s);
	}
}

static struct ocs_flow *flows_copy(const struct ocs_flow *v, size_t n)
{
	struct ocs_flow *c = malloc((n ? n : 1) * sizeof(*c));
	if (c && n)
		memcpy(c, v, n * sizeof(*c));
	return c;
}

bool reconcile_ports_set_actual(struct reconciler *r, struct unit *u,
                                const struct reconcile_readback *rb, const struct ocs_flow *partial,
                                size_t npartial, const struct ocs_flow *foreign, size_t nforeign)
{
	struct desired_set ds = reconcile_unit_desired(u);
	struct plan_xc *actual = rb->xcs;
	const struct plan_xc *old = u->actual;
	size_t n = rb->n, on = u->nactual, m = n < on ? n : on, i = 0, j = 0;
	/*
	 * A read-back differs from the previous one by the few cross-connects a
	 * batch or a hand changed: the common head and tail are skipped at the
	 * speed of a memory compare (from where the caller knows they agree), and
	 * only what lies between is merged.
	 */
	size_t head = rb->same_head <= m ? rb->same_head : 0;
	if (m > head) /* old is NULL before the first read-back */
		head += reconcile_xcs_head(actual + head, old + head, m - head);
	size_t tail = rb->same_tail <= m - head ? rb->same_tail : 0;
	if (n > head + tail && on > head + tail)
		tail += reconcile_xcs_tail(actual + head, n - head - tail, old + head,
		                           on - head - tail);
	bool changed = head + tail != n || n != on;
	for (i = j = head; changed && (i < on - tail || j < n - tail);) {
		int c = i == on - tail ? 1 : j == n - tail ? -1 : xc_cmp(&old[i], &actual[j]);
		if (c == 0)
			i++, j++;
		else if (c < 0)
			actual_change(r, u, &ds, old[i++], false);
		else
			actual_change(r, u, &ds, actual[j++], true);
	}
	free(u->spare);
	u->spare = u->actual;
	u->spare_cap = u->actual_cap;
	u->actual = actual;
	u->actual_cap = rb->cap;
	u->nactual = n;
	/* Entries that are not whole cross-connects are few: replaced as a whole. */
	struct ocs_flow *p = flows_copy(partial, npartial), *f = flows_copy(foreign, nforeign);
	if (!p || !f) {
		free(p);
		free(f);
		set_fail(u, -ENOMEM);
		return changed;
	}
	flow_marks(r, u, u->partial, u->npartial, false, -1);
	flow_marks(r, u, u->foreign, u->nforeign, true, -1);
	free(u->partial);
	free(u->foreign);
	u->partial = p;
	u->npartial = npartial;
	u->foreign = f;
	u->nforeign = nforeign;
	flow_marks(r, u, p, npartial, false, 1);
	flow_marks(r, u, f, nforeign, true, 1);
	return changed;
}

/* ---- the unit's arrays -------------------------------------------------------- */

/* The unit's port owners and desired circuits, from the desired state in memory. */
static void seed_from_desired(struct reconciler *r, struct unit *u)
{
	size_t nown;
	const int64_t *own = desired_owners(r->d.desired, u->id, &nown);
	for (uint32_t p = 1; p < nown && p <= u->ports; p++)
		if (own[p])
			reconcile_ports_owner(r, u, p, 0, own[p]);
	struct desired_set ds = reconcile_unit_desired(u);
	for (size_t k = 0; k < ds.n; k++)
		reconcile_ports_desired(r, u, ds.xc[k], ds.fabric[k], true);
}

int reconcile_ports_init(struct reconciler *r, struct unit *u)
{
	size_t n = (size_t)u->ports + 1;
	u->peer = calloc(n, sizeof(*u->peer));
	u->joining = calloc(n, sizeof(*u->joining));
	u->owner = calloc(n, sizeof(*u->owner));
	u->hold = calloc(n, sizeof(*u->hold));
	u->miss.pos = calloc(n, sizeof(*u->miss.pos));
	u->stray.pos = calloc(n, sizeof(*u->stray.pos));
	if (!u->peer || !u->joining || !u->owner || !u->hold || !u->miss.pos || !u->stray.pos)
		return -ENOMEM;
	seed_from_desired(r, u);
	return 0;
}

void reconcile_ports_rebuild(struct reconciler *r, struct unit *u)
{
	size_t n = (size_t)u->ports + 1;
	struct reconcile_readback rb = { .xcs = u->actual, .n = u->nactual, .cap = u->actual_cap };
	struct ocs_flow *partial = u->partial, *foreign = u->foreign;
	size_t npartial = u->npartial, nforeign = u->nforeign;
	reconcile_cells_drop(r, u);
	memset(u->peer, 0, n * sizeof(*u->peer));
	memset(u->owner, 0, n * sizeof(*u->owner));
	memset(u->hold, 0, n * sizeof(*u->hold));
	memset(u->miss.pos, 0, n * sizeof(*u->miss.pos));
	memset(u->stray.pos, 0, n * sizeof(*u->stray.pos));
	u->miss.n = u->stray.n = u->noor = 0;
	u->foreign_all = 0;
	u->actual = NULL;
	u->actual_cap = 0;
	u->partial = u->foreign = NULL;
	u->nactual = u->npartial = u->nforeign = 0;
	seed_from_desired(r, u);
	if (!rb.xcs) {
		rb.xcs = malloc(sizeof(*rb.xcs));
		rb.cap = 1;
	}
	if (rb.xcs)
		reconcile_ports_set_actual(r, u, &rb, partial, npartial, foreign, nforeign);
	free(partial);
	free(foreign);
	reconcile_unit_changed(r, u);
}

void reconcile_ports_free(struct reconciler *r, struct unit *u)
{
	reconcile_cells_drop(r, u);
	free(u->peer);
	free(u->joining);
	free(u->joined);
	free(u->owner);
	free(u->hold);
	xcset_free(&u->miss);
	xcset_free(&u->stray);
	free(u->oor);
	u->peer = u->joining = u->hold = u->joined = NULL;
	u->joined_cap = u->njoining = 0;
	u->joined_lost = false;
	u->owner = NULL;
	u->oor = NULL;
	u->noor = 0;
}

/* ---- what follows from it --------------------------------------------------- */

static struct plan_xc norm(uint32_t x, uint32_t y)
{
	return (struct plan_xc){ x < y ? x : y, x < y ? y : x };
}

int reconcile_ports_batch(struct unit *u, size_t max_ops, struct plan_batch *b)
{
	memset(b, 0, sizeof(*b));
	b->del = malloc((u->stray.n + u->noor + u->npartial + 1) * sizeof(*b->del));
	b->add = malloc((u->miss.n + 1) * sizeof(*b->add));
	if (!b->del || !b->add) {
		plan_batch_free(b);
		return -ENOMEM;
	}
	if (u->stray.n)
		memcpy(b->del, u->stray.v, u->stray.n * sizeof(*b->del));
	b->ndel = u->stray.n;
	if (u->noor)
		memcpy(b->del + b->ndel, u->oor, u->noor * sizeof(*b->del));
	b->ndel += u->noor;
	/*
	 * One-way entries of ofcd's own count as present-but-wrong: removed, or
	 * remade when desired (a desired one is missing, so it is added).
	 */
	for (size_t i = 0; i < u->npartial; i++) {
		struct plan_xc xc = norm(u->partial[i].in_port, u->partial[i].out_port);
		bool in = in_range(u, xc);
		if (in && (u->peer[xc.a] == xc.b || xcset_has(&u->miss, xc)))
			continue;
		b->del[b->ndel++] = xc;
	}
	b->ndel = plan_xc_sort_unique(b->del, b->ndel);
	if (u->miss.n)
		memcpy(b->add, u->miss.v, u->miss.n * sizeof(*b->add));
	b->nadd = plan_xc_sort_unique(b->add, u->miss.n);
	/* Removals before additions; only removals when they alone exceed a batch. */
	if (max_ops == 0 || b->ndel + b->nadd <= max_ops)
		return 0;
	if (b->ndel >= max_ops) {
		b->deferred = b->ndel - max_ops + b->nadd;
		b->ndel = max_ops;
		b->nadd = 0;
	} else {
		b->deferred = b->ndel + b->nadd - max_ops;
		b->nadd = max_ops - b->ndel;
	}
	return 0;
}

/*
 * Whether an entry ofcd did not make can carry light between ports of two
 * fabrics (or a fabric and a port of none): one that matches every port or
 * sends to every port does unless it sends nowhere else.
 */
static bool foreign_crosses(const struct unit *u, const struct ocs_flow *f)
{
	if (!reconcile_flow_leads_out(f))
		return false;
	if (reconcile_flow_floods(f) || f->in_port > u->ports || f->out_port > u->ports)
		return true;
	return reconcile_port_owner(u, f->in_port) != reconcile_port_owner(u, f->out_port);
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
static void report_violation(struct reconciler *r, struct unit *u, uint32_t a, uint32_t b,
                             bool foreign, struct plan_xc *now, size_t *nnow)
{
	struct plan_xc key = { a, foreign ? b | 0x80000000u : b };
	now[(*nnow)++] = key;
	if (pair_in(u->violations, u->nviolations, key.a, key.b))
		return;
	int64_t ids[2] = { reconcile_port_owner(u, a), reconcile_port_owner(u, b) };
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

/* A desired cross-connect joins two ports of one fabric by construction: only strays are judged. */
void reconcile_check_isolation(struct reconciler *r, struct unit *u)
{
	size_t ns = u->stray.n + u->noor;
	struct plan_xc *now = malloc((ns + u->nforeign + 1) * sizeof(*now));
	struct plan_xc *strays = malloc((ns + 1) * sizeof(*strays));
	size_t nnow = 0;
	if (!now || !strays) {
		free(now);
		free(strays);
		return;
	}
	if (u->stray.n)
		memcpy(strays, u->stray.v, u->stray.n * sizeof(*strays));
	if (u->noor)
		memcpy(strays + u->stray.n, u->oor, u->noor * sizeof(*strays));
	if (ns > 1)
		qsort(strays, ns, sizeof(*strays), plan_xc_cmp);
	for (size_t i = 0; i < ns; i++)
		if (reconcile_port_owner(u, strays[i].a) != reconcile_port_owner(u, strays[i].b))
			report_violation(r, u, strays[i].a, strays[i].b, false, now, &nnow);
	for (size_t i = 0; i < u->nforeign; i++)
		if (foreign_crosses(u, &u->foreign[i]))
			report_violation(r, u, u->foreign[i].in_port, u->foreign[i].out_port, true,
			                 now, &nnow);
	free(strays);
	free(u->violations);
	u->violations = now;
	u->nviolations = nnow;
}

bool reconcile_port_leftover(struct reconciler *r, struct unit *u, uint32_t port, char *why,
                             size_t len)
{
	if (port < 1 || port > u->ports)
		return false;
	uint32_t peer = u->peer[port] ? u->peer[port] : u->joining[port];
	if (peer) {
		struct plan_xc xc = norm(port, peer);
		/* Held: desired unless a stray. Being joined: desired while still missing. */
		bool desired = u->peer[port] ? in_range(u, xc) && !xcset_has(&u->stray, xc)
		                             : in_range(u, xc) && xcset_has(&u->miss, xc);
		if (desired)
			return false;
		const char *former = desired_former_owner(r->d.desired, u->id, xc.a, xc.b);
		snprintf(why, len, "OCS unit %s %s port %u to port %u%s%s%s", u->name,
		         u->peer[port] ? "still joins" : "is joining", port, peer,
		         former ? " (a circuit of fabric " : "", former ? former : "",
		         former ? ")" : "");
		return true;
	}
	if (u->foreign_all) {
		snprintf(
		    why, len,
		    "OCS unit %s holds an entry ofcd did not make that matches or floods every "
		    "port",
		    u->name);
		return true;
	}
	/* Only a port with a hold mark can be in a one-way entry, or in a foreign one. */
	for (size_t i = 0; u->hold[port] && i < u->npartial; i++) {
		if (u->partial[i].in_port == port || u->partial[i].out_port == port) {
			snprintf(why, len, "OCS unit %s still holds a one-way entry %u -> %u",
			         u->name, u->partial[i].in_port, u->partial[i].out_port);
			return true;
		}
	}
	for (size_t i = 0; u->hold[port] && i < u->nforeign; i++) {
		const struct ocs_flow *f = &u->foreign[i];
		if (!reconcile_flow_leads_out(f) || (f->in_port != port && f->out_port != port))
			continue;
		snprintf(why, len, "OCS unit %s holds an entry ofcd did not make, %u -> %u",
		         u->name, f->in_port, f->out_port);
		return true;
	}
	return reconcile_port_former(r, u->id, u, port, why, len);
}

/* u->former_peer[port], filled again when the mirror's former entries changed; 0 when none. */
static uint32_t former_peer(struct reconciler *r, struct unit *u, uint32_t port)
{
	uint64_t version = desired_former_version(r->d.desired, u->id);
	if (!u->former_peer || u->former_version != version) {
		if (!u->former_peer)
			u->former_peer = malloc(((size_t)u->ports + 1) * sizeof(*u->former_peer));
		if (!u->former_peer) {
			uint32_t peer;
			const char *fabric;
			return desired_former_at(r->d.desired, u->id, port, &peer, &fabric) ? peer
			                                                                    : 0;
		}
		desired_former_peers(r->d.desired, u->id, u->former_peer, u->ports);
		u->former_version = version;
	}
	return port <= u->ports ? u->former_peer[port] : 0;
}

bool reconcile_port_former(struct reconciler *r, int64_t ocs_id, struct unit *u, uint32_t port,
                           char *why, size_t len)
{
	/*
	 * Once read, the unit's answer is what counts. Before, a stored read-back
	 * may be old (a cluster member that never led has none), and additions
	 * in flight died with the process that sent them.
	 */
	if (u && u->read_once)
		return false;
	uint32_t peer = 0;
	const char *fabric = NULL;
	if (u) {
		/* Asked of every cabled port of a unit (?joined=true): not a scan each. */
		peer = desired_has_former(r->d.desired, u->id) ? former_peer(r, u, port) : 0;
		fabric = peer ? desired_former_owner(r->d.desired, u->id, port, peer) : NULL;
	} else {
		desired_former_at(r->d.desired, ocs_id, port, &peer, &fabric);
	}
	if (!peer)
		return false;
	char id[24];
	snprintf(id, sizeof(id), "%lld", (long long)ocs_id);
	snprintf(why, len,
	         "OCS unit %s may still join port %u to port %u (a circuit of fabric %s; the unit "
	         "%s)",
	         u ? u->name : id, port, peer, fabric ? fabric : "unknown",
	         u ? "has not been read back yet" : "is not open yet");
	return true;
}
