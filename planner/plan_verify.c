/*
 * Plan verifiers: the independent check the daemon runs on every plan before
 * storing or returning it. Written against the invariants, not against the
 * planner's algorithm, so a planner bug cannot hide behind the same mistake.
 * Flat bitmaps keep it O(circuits + edges / 8): no per-pair searching (for a
 * full mesh the edges are the M^2 pairs; for a HyperX, one bit per pair of
 * positions of each line; for a torus, one per ring position).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plan_internal.h"

static void ok(char *why, size_t len)
{
	if (why && len)
		why[0] = '\0';
}

/* First pair a < b not set in the pair bitmap; only called when one exists. */
static void first_uncovered(const uint64_t *pairs, uint32_t m, uint32_t *a, uint32_t *b)
{
	for (uint32_t i = 0; i < m; i++) {
		for (uint32_t j = i + 1; j < m; j++) {
			if (!plan_bit_get(pairs, plan_pair_index(m, i, j))) {
				*a = i;
				*b = j;
				return;
			}
		}
	}
	*a = 0;
	*b = 0;
}

/* First edge (a, b) of the grid not set in the edge bitmap; 0, 0 when none (or ENOMEM). */
static void first_uncovered_edge(const struct plan_grid *g, const uint64_t *edges, uint32_t *a,
                                 uint32_t *b)
{
	uint32_t *up = malloc((plan_grid_kmax(g) + 1) * sizeof(*up));
	size_t *bit = malloc((plan_grid_kmax(g) + 1) * sizeof(*bit));

	*a = 0;
	*b = 0;
	for (uint32_t i = 0; up && bit && i < g->m; i++) {
		uint32_t n = plan_grid_up(g, i, up, bit);

		for (uint32_t j = 0; j < n; j++) {
			if (!plan_bit_get(edges, bit[j])) {
				*a = i;
				*b = up[j];
				goto out;
			}
		}
	}
out:
	free(up);
	free(bit);
}

int plan_policy_verify(const struct plan_policy *pol, char *why, size_t len)
{
	uint64_t *pairs = NULL, *ports = NULL;
	size_t npairs;
	uint32_t m, r, p;
	int ret;

	if (!pol)
		return plan_refuse(why, len, "no policy");
	m = pol->servers;
	p = pol->ports_per_device;
	if (m < 1 || m > PLAN_MAX_SERVERS)
		return plan_refuse(why, len, "%u servers is outside 1..%u", m, PLAN_MAX_SERVERS);
	if (p < 1 || p > PLAN_MAX_PORTS)
		return plan_refuse(why, len, "%u ports per device is outside 1..%u", p,
		                   PLAN_MAX_PORTS);
	if ((pol->formula != 1 && pol->formula != 3) ||
	    plan_formula_resolve(m, (enum plan_formula)pol->formula) != pol->formula)
		return plan_refuse(why, len, "formula %d does not apply to %u servers",
		                   pol->formula, m);
	r = plan_planes(m, (enum plan_formula)pol->formula);
	if (pol->planes != r)
		return plan_refuse(why, len, "%u planes stated, formula %d over %u servers has %u",
		                   pol->planes, pol->formula, m, r);
	if (pol->nlinks && !pol->links)
		return plan_refuse(why, len, "%zu links stated, none given", pol->nlinks);

	npairs = (size_t)m * (m - 1) / 2;
	pairs = plan_bits_new((size_t)m * m);
	ports = plan_bits_new((size_t)m * r);
	if (!pairs || !ports) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < pol->nlinks; i++) {
		const struct plan_link *l = &pol->links[i];

		if (l->plane >= r) {
			ret = plan_refuse(why, len, "link %zu: plane %u is outside 0..%u", i,
			                  l->plane, r - 1);
			goto out;
		}
		if (l->a.server >= l->b.server || l->b.server >= m) {
			ret = plan_refuse(why, len,
			                  "link %zu: servers %u and %u are not a pair a < b < %u",
			                  i, l->a.server, l->b.server, m);
			goto out;
		}
		if (l->a.device != l->plane / p || l->b.device != l->plane / p ||
		    l->a.port != l->plane % p || l->b.port != l->plane % p) {
			ret = plan_refuse(
			    why, len, "link %zu: plane %u must use device %u port %u on both ends",
			    i, l->plane, l->plane / p, l->plane % p);
			goto out;
		}
		if (l->a.device >= pol->devices) {
			ret = plan_refuse(why, len, "link %zu: device %u is beyond the %u devices",
			                  i, l->a.device, pol->devices);
			goto out;
		}
		if (plan_bit_test_set(ports, (size_t)l->a.server * r + l->plane) ||
		    plan_bit_test_set(ports, (size_t)l->b.server * r + l->plane)) {
			ret = plan_refuse(why, len, "link %zu: a port of plane %u is in two links",
			                  i, l->plane);
			goto out;
		}
		if (plan_bit_test_set(pairs, plan_pair_index(m, l->a.server, l->b.server))) {
			ret = plan_refuse(why, len, "link %zu: servers %u and %u are joined twice",
			                  i, l->a.server, l->b.server);
			goto out;
		}
	}
	if (pol->nlinks != npairs) {
		uint32_t a, b;

		first_uncovered(pairs, m, &a, &b);
		ret = plan_refuse(why, len, "servers %u and %u are not joined", a, b);
		goto out;
	}
	ok(why, len);
	ret = 0;
out:
	free(pairs);
	free(ports);
	return ret;
}

/*
 * Set of (ocs, ocs_port) keys. A dense bitmap when the numbers are compact (the
 * usual case: OCS units 0..K-1, ports 1..ports), an open-addressing hash set
 * otherwise; both O(1) per key.
 */
struct ocs_set {
	uint64_t *bits;
	uint64_t *slots;
	size_t mask;
	uint64_t stride;
};

#define OCS_SET_EMPTY UINT64_MAX

static int ocs_set_init(struct ocs_set *s, size_t nkeys, uint32_t max_ocs, uint32_t max_port)
{
	uint64_t dense = ((uint64_t)max_ocs + 1) * ((uint64_t)max_port + 1);
	size_t cap = 16;

	memset(s, 0, sizeof(*s));
	if (dense <= 64 * (uint64_t)nkeys + 4096) {
		s->stride = (uint64_t)max_port + 1;
		s->bits = plan_bits_new((size_t)dense);
		return s->bits ? 0 : -ENOMEM;
	}
	while (cap < 2 * nkeys)
		cap *= 2;
	s->slots = malloc(cap * sizeof(*s->slots));
	if (!s->slots)
		return -ENOMEM;
	memset(s->slots, 0xff, cap * sizeof(*s->slots));
	s->mask = cap - 1;
	return 0;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* Adds (ocs, port), ocs >= 0; returns true when it was already there. */
static bool ocs_set_test_add(struct ocs_set *s, int32_t ocs, uint32_t port)
{
	uint64_t key = (uint64_t)(uint32_t)ocs << 32 | port;

	if (s->bits)
		return plan_bit_test_set(s->bits, (size_t)((uint64_t)ocs * s->stride + port));
	for (size_t h = mix64(key) & s->mask;; h = (h + 1) & s->mask) {
		if (s->slots[h] == key)
			return true;
		if (s->slots[h] == OCS_SET_EMPTY) {
			s->slots[h] = key;
			return false;
		}
	}
}

static void ocs_set_free(struct ocs_set *s)
{
	free(s->bits);
	free(s->slots);
}

struct vctx {
	const struct plan_server *srv;
	uint32_t m;
	struct plan_grid g;
	const char *shape; /* "HyperX 32x32", for the reasons */
	size_t *off;
	uint64_t *used;
	uint64_t *edges;
	char *why;
	size_t len;
};

/* The reason two servers are not an edge of the shape (never said of a full mesh). */
static const char *not_edge(const struct vctx *v)
{
	return v->g.ring ? "are not neighbours on one ring of the" : "are not in one line of the";
}

static int check_end(struct vctx *v, size_t i, const char *side, const struct plan_end *e)
{
	const struct plan_server *s = &v->srv[e->server];
	const struct plan_port *p;
	size_t slot;

	if (e->device >= s->devices || e->port >= s->ports_per_device)
		return plan_refuse(v->why, v->len,
		                   "circuit %zu: server %u has no device %u port %u", i, e->server,
		                   e->device, e->port);
	slot = (size_t)e->device * s->ports_per_device + e->port;
	p = &s->ports[slot];
	if (p->ocs < 0)
		return plan_refuse(v->why, v->len,
		                   "circuit %zu: device %u port %u of server %u is not cabled", i,
		                   e->device, e->port, e->server);
	if (p->ocs != e->ocs || p->ocs_port != e->ocs_port)
		return plan_refuse(v->why, v->len,
		                   "circuit %zu: end %s says OCS %d port %u, device %u port %u of "
		                   "server %u is cabled to OCS %d port %u",
		                   i, side, e->ocs, e->ocs_port, e->device, e->port, e->server,
		                   p->ocs, p->ocs_port);
	if (!p->healthy)
		return plan_refuse(v->why, v->len,
		                   "circuit %zu: device %u port %u of server %u is not healthy", i,
		                   e->device, e->port, e->server);
	if (plan_bit_test_set(v->used, v->off[e->server] + slot))
		return plan_refuse(v->why, v->len,
		                   "circuit %zu: device %u port %u of server %u is in two circuits",
		                   i, e->device, e->port, e->server);
	return 0;
}

static int check_circuit(struct vctx *v, size_t i, const struct plan_circuit *c)
{
	size_t edge;
	int ret;

	if (c->a.server >= v->m || c->b.server >= v->m)
		return plan_refuse(v->why, v->len,
		                   "circuit %zu: server %u is outside the fabric of %u servers", i,
		                   c->a.server >= v->m ? c->a.server : c->b.server, v->m);
	if (c->a.server == c->b.server)
		return plan_refuse(v->why, v->len, "circuit %zu: joins server %u to itself", i,
		                   c->a.server);
	if (c->a.server > c->b.server)
		return plan_refuse(v->why, v->len,
		                   "circuit %zu: a.server %u is not lower than b.server %u", i,
		                   c->a.server, c->b.server);
	edge = plan_grid_edge(&v->g, c->a.server, c->b.server);
	if (edge == SIZE_MAX)
		return plan_refuse(v->why, v->len, "circuit %zu: servers %u and %u %s %s", i,
		                   c->a.server, c->b.server, not_edge(v), v->shape);
	if (c->a.ocs != c->b.ocs)
		return plan_refuse(v->why, v->len,
		                   "circuit %zu: ends on different OCS units (%d and %d)", i,
		                   c->a.ocs, c->b.ocs);
	ret = check_end(v, i, "a", &c->a);
	if (!ret)
		ret = check_end(v, i, "b", &c->b);
	if (ret)
		return ret;
	if (plan_bit_test_set(v->edges, edge))
		return plan_refuse(v->why, v->len,
		                   "circuit %zu: servers %u and %u are joined twice", i,
		                   c->a.server, c->b.server);
	return 0;
}

static int check_missing(struct vctx *v, const struct plan_pair *miss, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct plan_pair *p = &miss[i];

		size_t edge;

		if (p->a >= p->b || p->b >= v->m)
			return plan_refuse(
			    v->why, v->len,
			    "missing %zu: (%u, %u) is not a pair a < b < %u of the fabric", i, p->a,
			    p->b, v->m);
		edge = plan_grid_edge(&v->g, p->a, p->b);
		if (edge == SIZE_MAX)
			return plan_refuse(v->why, v->len, "missing %zu: servers %u and %u %s %s",
			                   i, p->a, p->b, not_edge(v), v->shape);
		if (!plan_bit_test_set(v->edges, edge))
			continue;
		for (size_t j = 0; j < i; j++)
			if (miss[j].a == p->a && miss[j].b == p->b)
				return plan_refuse(
				    v->why, v->len,
				    "missing %zu: servers %u and %u are listed twice", i, p->a,
				    p->b);
		return plan_refuse(v->why, v->len,
		                   "missing %zu: servers %u and %u are listed missing but joined",
		                   i, p->a, p->b);
	}
	return 0;
}

static int check_ocs_ports(const struct plan_fabric *plan, char *why, size_t len)
{
	uint32_t max_ocs = 0, max_port = 0;
	struct ocs_set set;
	int ret = 0;

	for (size_t i = 0; i < plan->ncircuits; i++) {
		const struct plan_circuit *c = &plan->circuits[i];
		uint32_t hi = c->a.ocs_port > c->b.ocs_port ? c->a.ocs_port : c->b.ocs_port;

		/* a.ocs == b.ocs >= 0 was checked against the cabling */
		if ((uint32_t)c->a.ocs > max_ocs)
			max_ocs = (uint32_t)c->a.ocs;
		if (hi > max_port)
			max_port = hi;
	}
	if (ocs_set_init(&set, 2 * plan->ncircuits, max_ocs, max_port))
		return -ENOMEM;
	for (size_t i = 0; i < plan->ncircuits && !ret; i++) {
		const struct plan_circuit *c = &plan->circuits[i];

		if (ocs_set_test_add(&set, c->a.ocs, c->a.ocs_port))
			ret = plan_refuse(why, len, "circuit %zu: OCS %d port %u is used twice", i,
			                  c->a.ocs, c->a.ocs_port);
		else if (ocs_set_test_add(&set, c->b.ocs, c->b.ocs_port))
			ret = plan_refuse(why, len, "circuit %zu: OCS %d port %u is used twice", i,
			                  c->b.ocs, c->b.ocs_port);
	}
	ocs_set_free(&set);
	return ret;
}

/* The plan's own shape, when it states one, is the fabric's. */
static int check_plan_shape(const struct plan_fabric *plan, const struct plan_shape *sh, char *why,
                            size_t len)
{
	const struct plan_shape *ps = &plan->shape;
	char a[64], b[64];
	bool same = ps->topology == sh->topology && ps->dims == sh->dims;

	if (ps->topology == PLAN_TOPO_AUTO)
		return 0;
	for (uint32_t i = 0; same && i < sh->dims && i < PLAN_MAX_DIMS; i++)
		same = ps->k[i] == sh->k[i] && ps->planes[i] == sh->planes[i] &&
		       ps->first_plane[i] == sh->first_plane[i];
	if (same && ps->diameter == sh->diameter && ps->degree == sh->degree)
		return 0;
	return plan_refuse(why, len, "the plan is laid out as the %s, the fabric as the %s",
	                   plan_shape_format(ps, a, sizeof(a)),
	                   plan_shape_format(sh, b, sizeof(b)));
}

int plan_verify_shape(const struct plan_server *servers, uint32_t m, const struct plan_shape *shape,
                      const struct plan_fabric *plan, char *why, size_t len)
{
	struct vctx v = { .srv = servers, .m = m, .why = why, .len = len };
	uint32_t maxm = shape ? PLAN_MAX_SHAPED_SERVERS : PLAN_MAX_SERVERS;
	struct plan_shape sh;
	char name[64];
	int ret;

	if (!plan || !servers)
		return plan_refuse(why, len, "no plan or no servers");
	if (m < 1 || m > maxm)
		return plan_refuse(why, len, "%u servers is outside 1..%u", m, maxm);
	if (plan->servers != m)
		return plan_refuse(why, len, "plan is for %u servers, the fabric has %u",
		                   plan->servers, m);
	if (shape) {
		ret = plan_shape_check(shape, m, why, len);
		if (ret)
			return ret;
		sh = *shape;
	} else if (plan_shape_make(PLAN_TOPO_FULL_MESH, &m, 1, &sh, why, len)) {
		return -EINVAL;
	}
	ret = check_plan_shape(plan, &sh, why, len);
	if (ret)
		return ret;
	plan_grid_init(&v.g, &sh);
	v.shape = plan_shape_format(&sh, name, sizeof(name));
	if ((plan->ncircuits && !plan->circuits) || (plan->nmissing && !plan->missing))
		return plan_refuse(why, len, "plan states entries it does not hold");
	for (uint32_t i = 0; i < m; i++)
		if (servers[i].devices > PLAN_MAX_DEVICES || servers[i].ports_per_device < 1 ||
		    servers[i].ports_per_device > PLAN_MAX_PORTS ||
		    (servers[i].devices && !servers[i].ports))
			return plan_refuse(why, len, "server %u: bad device or port count", i);

	if (plan->ncircuits > v.g.nedges || plan->nmissing > v.g.nedges)
		return plan_refuse(why, len, "%zu circuits and %zu missing pairs for %zu pairs",
		                   plan->ncircuits, plan->nmissing, v.g.nedges);

	v.off = malloc((m + 1) * sizeof(*v.off));
	if (!v.off)
		return -ENOMEM;
	v.off[0] = 0;
	for (uint32_t i = 0; i < m; i++)
		v.off[i + 1] = v.off[i] + (size_t)servers[i].devices * servers[i].ports_per_device;
	v.used = plan_bits_new(v.off[m]);
	v.edges = plan_bits_new(v.g.base[v.g.dims]);
	if (!v.used || !v.edges) {
		ret = -ENOMEM;
		goto out;
	}

	for (size_t i = 0; i < plan->ncircuits; i++) {
		ret = check_circuit(&v, i, &plan->circuits[i]);
		if (ret)
			goto out;
	}
	ret = check_missing(&v, plan->missing, plan->nmissing);
	if (ret)
		goto out;
	/* every entry set a distinct edge bit, so a short count means a gap */
	if (plan->ncircuits + plan->nmissing != v.g.nedges) {
		uint32_t a, b;

		first_uncovered_edge(&v.g, v.edges, &a, &b);
		ret = plan_refuse(why, len,
		                  "servers %u and %u are neither joined nor listed missing", a, b);
		goto out;
	}
	ret = check_ocs_ports(plan, why, len);
	if (!ret)
		ok(why, len);
out:
	free(v.off);
	free(v.used);
	free(v.edges);
	return ret;
}

int plan_verify(const struct plan_server *servers, uint32_t m, const struct plan_fabric *plan,
                char *why, size_t len)
{
	return plan_verify_shape(servers, m, NULL, plan, why, len);
}
