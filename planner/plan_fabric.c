/*
 * Cabled fabric planning: the abstract policy laid onto the real cabling of a
 * fabric, relocation of the pairs the cabling cannot serve, and the
 * least-disruption re-plan. Pure and reentrant.
 *
 * Both entry points work the same way: first decide which circuits stay (the
 * policy's links in plan_fabric_compute(), the previous plan's working circuits
 * in plan_fabric_replan()), marking their device ports used and their edges
 * covered; then walk every edge (a, b) of the shape in increasing order and
 * relocate each uncovered one. Walking the edge bitmap rather than a list of
 * "broken" pairs means nothing can be forgotten: whatever the previous plan
 * looked like, every edge ends up with a circuit or in missing.
 *
 * The edges are the pairs the shape joins (struct plan_grid): every pair for a
 * full mesh, whose edge bitmap is the old M x M pair bitmap; the pairs of each
 * line for a HyperX; ring neighbours for a torus. The unshaped entry points
 * are the shaped ones with the full mesh of M.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plan_internal.h"

/* A free healthy cabled slot of one server, as the relocation pool holds it. */
struct pool_ent {
	int32_t ocs;
	uint32_t slot;
};

/* The free slots of one server on one OCS unit: ent[head..end), lowest slot first. */
struct pool_grp {
	int32_t ocs;
	size_t head;
	size_t end;
};

/*
 * Relocation pool, built once the kept circuits are known. Per server, its free
 * slots sorted by (ocs, slot) and one group per OCS unit sorted by ocs. A
 * relocation always takes the lowest free slot of a group on both sides (had a
 * lower one matched, the search would have picked it), so consuming is just
 * advancing group heads and the search is a merge of two short group lists.
 */
struct pool {
	struct pool_ent *ent;
	struct pool_grp *grp;
	size_t *gfirst; /* m + 1 entries: groups of server i are grp[gfirst[i]..gfirst[i+1]) */
};

struct fab {
	const struct plan_server *srv;
	uint32_t m;
	struct plan_grid g;
	size_t *off;     /* m + 1 entries: global index of each server's slot 0 */
	uint64_t *used;  /* by global slot index */
	uint64_t *edges; /* by edge bit (plan_grid) */
	uint32_t *up;    /* room for plan_grid_up() */
	size_t *upbit;
	struct plan_circuit *c;
	size_t nc;
	struct plan_pair *miss;
	size_t nmiss;
	size_t capmiss;
	struct pool pool;
	bool pool_built;
};

static int check_servers(const struct plan_server *servers, uint32_t m, uint32_t maxm)
{
	if (!servers || m < 1 || m > maxm)
		return -EINVAL;
	for (uint32_t i = 0; i < m; i++) {
		const struct plan_server *s = &servers[i];

		if (s->devices > PLAN_MAX_DEVICES || s->ports_per_device < 1 ||
		    s->ports_per_device > PLAN_MAX_PORTS || (s->devices && !s->ports))
			return -EINVAL;
	}
	return 0;
}

/* The shape to plan: shape (checked against m), or the full mesh of m. */
static int resolve_shape(uint32_t m, const struct plan_shape *shape, struct plan_shape *out)
{
	if (!shape)
		return plan_shape_make(PLAN_TOPO_FULL_MESH, &m, 1, out, NULL, 0);
	if (plan_shape_check(shape, m, NULL, 0))
		return -EINVAL;
	*out = *shape;
	return 0;
}

/* Scalar fields shared by compute and re-plan. */
static void fill_scalars(const struct plan_server *servers, uint32_t m, const struct plan_shape *sh,
                         struct plan_fabric *out)
{
	uint32_t n = UINT32_MAX, p = UINT32_MAX, r = plan_shape_planes_total(sh);

	for (uint32_t i = 0; i < m; i++) {
		if (servers[i].devices < n)
			n = servers[i].devices;
		if (servers[i].ports_per_device < p)
			p = servers[i].ports_per_device;
	}
	memset(out, 0, sizeof(*out));
	out->servers = m;
	out->devices = n;
	out->ports_per_device = p;
	out->formula =
	    sh->topology == PLAN_TOPO_FULL_MESH ? plan_formula_resolve(m, PLAN_FORMULA_AUTO) : 0;
	out->planes = r;
	out->min_devices = r / p + (r % p != 0);
	out->shape = *sh;
}

static void fab_release(struct fab *f)
{
	free(f->off);
	free(f->used);
	free(f->edges);
	free(f->up);
	free(f->upbit);
	free(f->c);
	free(f->miss);
	free(f->pool.ent);
	free(f->pool.grp);
	free(f->pool.gfirst);
}

static int fab_init(struct fab *f, const struct plan_server *servers, uint32_t m,
                    const struct plan_shape *sh)
{
	size_t nedges;

	memset(f, 0, sizeof(*f));
	f->srv = servers;
	f->m = m;
	plan_grid_init(&f->g, sh);
	nedges = f->g.nedges;
	f->off = malloc((m + 1) * sizeof(*f->off));
	if (!f->off)
		return -ENOMEM;
	f->off[0] = 0;
	for (uint32_t i = 0; i < m; i++)
		f->off[i + 1] =
		    f->off[i] + (size_t)servers[i].devices * servers[i].ports_per_device;
	f->used = plan_bits_new(f->off[m]);
	f->edges = plan_bits_new(f->g.base[f->g.dims]);
	f->up = malloc((plan_grid_kmax(&f->g) + 1) * sizeof(*f->up));
	f->upbit = malloc((plan_grid_kmax(&f->g) + 1) * sizeof(*f->upbit));
	if (nedges)
		f->c = malloc(nedges * sizeof(*f->c));
	if (!f->used || !f->edges || !f->up || !f->upbit || (nedges && !f->c))
		return -ENOMEM;
	return 0;
}

static struct plan_end make_end(const struct fab *f, uint32_t server, uint32_t slot)
{
	const struct plan_server *s = &f->srv[server];
	const struct plan_port *p = &s->ports[slot];

	return (struct plan_end){
		.server = server,
		.device = slot / s->ports_per_device,
		.port = slot % s->ports_per_device,
		.ocs = p->ocs,
		.ocs_port = p->ocs_port,
	};
}

static bool port_usable(const struct plan_port *p)
{
	return p->healthy && p->ocs >= 0;
}

/* Keep circuit c of edge bit `edge` (uncovered so far, its ports free). */
static void keep(struct fab *f, const struct plan_circuit *c, size_t edge)
{
	const struct plan_server *sa = &f->srv[c->a.server], *sb = &f->srv[c->b.server];

	plan_bit_set(f->used,
	             f->off[c->a.server] + (size_t)c->a.device * sa->ports_per_device + c->a.port);
	plan_bit_set(f->used,
	             f->off[c->b.server] + (size_t)c->b.device * sb->ports_per_device + c->b.port);
	plan_bit_set(f->edges, edge);
	f->c[f->nc++] = *c;
}

static int cmp_pool_ent(const void *x, const void *y)
{
	const struct pool_ent *a = x, *b = y;

	if (a->ocs != b->ocs)
		return a->ocs < b->ocs ? -1 : 1;
	return a->slot < b->slot ? -1 : a->slot > b->slot;
}

static int pool_build(struct fab *f)
{
	struct pool *pl = &f->pool;
	size_t nent = 0, ngrp = 0;

	/* count first so that two flat arrays hold every server's pool */
	for (uint32_t i = 0; i < f->m; i++) {
		const struct plan_server *s = &f->srv[i];

		for (size_t k = 0; k < f->off[i + 1] - f->off[i]; k++)
			if (port_usable(&s->ports[k]) && !plan_bit_get(f->used, f->off[i] + k))
				nent++;
	}
	pl->ent = malloc((nent ? nent : 1) * sizeof(*pl->ent));
	pl->grp = malloc((nent ? nent : 1) * sizeof(*pl->grp));
	pl->gfirst = malloc((f->m + 1) * sizeof(*pl->gfirst));
	if (!pl->ent || !pl->grp || !pl->gfirst)
		return -ENOMEM;

	nent = 0;
	for (uint32_t i = 0; i < f->m; i++) {
		const struct plan_server *s = &f->srv[i];
		size_t first = nent;

		for (size_t k = 0; k < f->off[i + 1] - f->off[i]; k++)
			if (port_usable(&s->ports[k]) && !plan_bit_get(f->used, f->off[i] + k))
				pl->ent[nent++] = (struct pool_ent){ s->ports[k].ocs, (uint32_t)k };
		qsort(pl->ent + first, nent - first, sizeof(*pl->ent), cmp_pool_ent);
		pl->gfirst[i] = ngrp;
		for (size_t e = first; e < nent; e++) {
			if (e == first || pl->ent[e].ocs != pl->ent[e - 1].ocs)
				pl->grp[ngrp++] = (struct pool_grp){ pl->ent[e].ocs, e, e };
			pl->grp[ngrp - 1].end = e + 1;
		}
	}
	pl->gfirst[f->m] = ngrp;
	f->pool_built = true;
	return 0;
}

static int add_missing(struct fab *f, uint32_t a, uint32_t b)
{
	if (f->nmiss == f->capmiss) {
		size_t cap = f->capmiss ? f->capmiss * 2 : 16;
		struct plan_pair *n = realloc(f->miss, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		f->miss = n;
		f->capmiss = cap;
	}
	f->miss[f->nmiss++] = (struct plan_pair){ a, b };
	return 0;
}

/* Move edge (a, b), a < b, to free ports on a common OCS unit, or list it missing. */
static int relocate(struct fab *f, uint32_t a, uint32_t b, size_t edge)
{
	struct pool *pl = &f->pool;
	struct pool_grp *best_a = NULL, *best_b = NULL;
	size_t ga, gb, gae, gbe;
	uint32_t sa, sb;
	int ret;

	if (!f->pool_built) {
		ret = pool_build(f);
		if (ret)
			return ret;
	}
	ga = pl->gfirst[a];
	gae = pl->gfirst[a + 1];
	gb = pl->gfirst[b];
	gbe = pl->gfirst[b + 1];
	while (ga < gae && gb < gbe) {
		struct pool_grp *x = &pl->grp[ga], *y = &pl->grp[gb];

		if (x->ocs < y->ocs) {
			ga++;
		} else if (x->ocs > y->ocs) {
			gb++;
		} else {
			if (x->head < x->end && y->head < y->end &&
			    (!best_a || pl->ent[x->head].slot < pl->ent[best_a->head].slot)) {
				best_a = x;
				best_b = y;
			}
			ga++;
			gb++;
		}
	}
	if (!best_a)
		return add_missing(f, a, b);

	sa = pl->ent[best_a->head++].slot;
	sb = pl->ent[best_b->head++].slot;
	plan_bit_set(f->used, f->off[a] + sa);
	plan_bit_set(f->used, f->off[b] + sb);
	plan_bit_set(f->edges, edge);
	f->c[f->nc++] = (struct plan_circuit){
		.plane = sa,
		.a = make_end(f, a, sa),
		.b = make_end(f, b, sb),
	};
	return 0;
}

static int fill_uncovered(struct fab *f)
{
	for (uint32_t a = 0; a < f->m; a++) {
		uint32_t n = plan_grid_up(&f->g, a, f->up, f->upbit);

		for (uint32_t i = 0; i < n; i++) {
			int ret;

			if (plan_bit_get(f->edges, f->upbit[i]))
				continue;
			ret = relocate(f, a, f->up[i], f->upbit[i]);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static int cmp_circuit(const struct plan_circuit *x, const struct plan_circuit *y)
{
	if (x->plane != y->plane)
		return x->plane < y->plane ? -1 : 1;
	if (x->a.server != y->a.server)
		return x->a.server < y->a.server ? -1 : 1;
	if (x->a.device != y->a.device)
		return x->a.device < y->a.device ? -1 : 1;
	return x->a.port < y->a.port ? -1 : x->a.port > y->a.port;
}

static int cmp_circuit_qsort(const void *x, const void *y)
{
	return cmp_circuit(x, y);
}

/* Hand the arrays over to out; f keeps nothing. */
static void fab_finish(struct fab *f, struct plan_fabric *out)
{
	bool sorted = true;

	for (size_t i = 1; i < f->nc && sorted; i++)
		sorted = cmp_circuit(&f->c[i - 1], &f->c[i]) < 0;
	if (!sorted)
		qsort(f->c, f->nc, sizeof(*f->c), cmp_circuit_qsort);
	out->circuits = f->c;
	out->ncircuits = f->nc;
	out->missing = f->miss;
	out->nmissing = f->nmiss;
	if (!f->nc) {
		free(f->c);
		out->circuits = NULL;
	}
	f->c = NULL;
	f->miss = NULL;
}

/* Lay policy link (k, s, t) onto the cabling; keep it when both ports can carry it. */
static void try_policy_link(struct fab *f, uint32_t p, uint32_t k, uint32_t s, uint32_t t,
                            size_t edge)
{
	const struct plan_server *ss = &f->srv[s], *st = &f->srv[t];
	uint32_t slot_s = (k / p) * ss->ports_per_device + k % p;
	uint32_t slot_t = (k / p) * st->ports_per_device + k % p;
	const struct plan_port *ps = &ss->ports[slot_s], *pt = &st->ports[slot_t];
	struct plan_circuit c;

	if (!port_usable(ps) || !port_usable(pt) || ps->ocs != pt->ocs)
		return;
	c.plane = k;
	c.a = make_end(f, s, slot_s);
	c.b = make_end(f, t, slot_t);
	keep(f, &c, edge);
}

/*
 * The policy of every line: on plane first_plane[i] + d, position j of a line of
 * dimension i joins position t (formula 1/3 of k[i], or the ring layout). Plane
 * by plane, server by server, so the circuits come out sorted when the
 * dimensions' planes are in order (always, for the shapes the planner makes).
 */
static void lay_policy(struct fab *f, const struct plan_shape *sh, uint32_t p)
{
	const struct plan_grid *g = &f->g;

	for (uint32_t i = 0; i < g->dims; i++) {
		uint32_t k = g->k[i], stride = g->stride[i];
		int formula = plan_formula_resolve(k, PLAN_FORMULA_AUTO);

		for (uint32_t d = 0; d < sh->planes[i]; d++) {
			uint32_t plane = sh->first_plane[i] + d;

			for (uint32_t s = 0; s < f->m; s++) {
				uint32_t j = plan_grid_coord(g, s, i);
				uint32_t t =
				    g->ring ? plan_ring_dst(k, j, d) : plan_dst(k, formula, j, d);

				if (t <= j)
					continue;
				try_policy_link(
				    f, p, plane, s, s + (t - j) * stride,
				    plan_grid_edge_at(g, i, plan_grid_line(g, s, i), j, t));
			}
		}
	}
}

int plan_fabric_compute_shape(const struct plan_server *servers, uint32_t m,
                              const struct plan_shape *shape, struct plan_fabric *out)
{
	struct plan_shape sh;
	struct plan_fabric res;
	struct fab f;
	int ret;

	if (!out)
		return -EINVAL;
	ret = check_servers(servers, m, shape ? PLAN_MAX_SHAPED_SERVERS : PLAN_MAX_SERVERS);
	if (!ret)
		ret = resolve_shape(m, shape, &sh);
	if (ret)
		return ret;
	fill_scalars(servers, m, &sh, &res);
	if (res.min_devices > res.devices) {
		*out = res;
		return -EDOM;
	}

	ret = fab_init(&f, servers, m, &sh);
	if (ret)
		goto out;
	lay_policy(&f, &sh, res.ports_per_device);
	ret = fill_uncovered(&f);
	if (ret)
		goto out;
	fab_finish(&f, &res);
	*out = res;
out:
	fab_release(&f);
	return ret;
}

int plan_fabric_compute(const struct plan_server *servers, uint32_t m, struct plan_fabric *out)
{
	return plan_fabric_compute_shape(servers, m, NULL, out);
}

/* Is end e of a previous circuit still the same working, unused port? */
static bool prev_end_ok(const struct fab *f, const struct plan_end *e)
{
	const struct plan_server *s = &f->srv[e->server];
	const struct plan_port *p;
	size_t slot;

	if (e->device >= s->devices || e->port >= s->ports_per_device)
		return false;
	slot = (size_t)e->device * s->ports_per_device + e->port;
	p = &s->ports[slot];
	return port_usable(p) && p->ocs == e->ocs && p->ocs_port == e->ocs_port &&
	       !plan_bit_get(f->used, f->off[e->server] + slot);
}

static int check_prev(const struct plan_fabric *prev, uint32_t m)
{
	if (!prev || prev->servers != m || (prev->ncircuits && !prev->circuits) ||
	    (prev->nmissing && !prev->missing))
		return -EINVAL;
	for (size_t i = 0; i < prev->ncircuits; i++) {
		const struct plan_circuit *c = &prev->circuits[i];

		if (c->a.server >= m || c->b.server >= m || c->a.server == c->b.server)
			return -EINVAL;
	}
	for (size_t i = 0; i < prev->nmissing; i++) {
		const struct plan_pair *p = &prev->missing[i];

		if (p->a >= m || p->b >= m || p->a == p->b)
			return -EINVAL;
	}
	return 0;
}

int plan_fabric_replan_shape(const struct plan_server *servers, uint32_t m,
                             const struct plan_shape *shape, const struct plan_fabric *prev,
                             struct plan_fabric *out)
{
	struct plan_shape sh;
	struct plan_fabric res;
	struct fab f;
	int ret;

	if (!out)
		return -EINVAL;
	ret = check_servers(servers, m, shape ? PLAN_MAX_SHAPED_SERVERS : PLAN_MAX_SERVERS);
	if (!ret)
		ret = check_prev(prev, m);
	if (!ret)
		ret = resolve_shape(m, shape, &sh);
	if (ret)
		return ret;
	fill_scalars(servers, m, &sh, &res);

	ret = fab_init(&f, servers, m, &sh);
	if (ret)
		goto out;
	for (size_t i = 0; i < prev->ncircuits; i++) {
		struct plan_circuit c = prev->circuits[i];
		size_t edge;

		if (c.a.server > c.b.server) {
			struct plan_end e = c.a;

			c.a = c.b;
			c.b = e;
		}
		/* not an edge of this shape: prev was laid out in another one; drop it */
		edge = plan_grid_edge(&f.g, c.a.server, c.b.server);
		if (edge == SIZE_MAX)
			continue;
		/* a port taken by an earlier circuit of prev means prev was corrupt: relocate */
		if (c.a.ocs != c.b.ocs || !prev_end_ok(&f, &c.a) || !prev_end_ok(&f, &c.b) ||
		    plan_bit_get(f.edges, edge))
			continue;
		keep(&f, &c, edge);
	}
	ret = fill_uncovered(&f);
	if (ret)
		goto out;
	fab_finish(&f, &res);
	*out = res;
out:
	fab_release(&f);
	return ret;
}

int plan_fabric_replan(const struct plan_server *servers, uint32_t m,
                       const struct plan_fabric *prev, struct plan_fabric *out)
{
	return plan_fabric_replan_shape(servers, m, NULL, prev, out);
}

void plan_fabric_free(struct plan_fabric *plan)
{
	if (!plan)
		return;
	free(plan->circuits);
	free(plan->missing);
	memset(plan, 0, sizeof(*plan));
}
