/*
 * Fabric shapes (full mesh, HyperX, torus): which servers a shape joins, and whether an
 * algorithm's exchanges stay on its circuits. Derivations: docs/cost-model.md, "Collectives
 * over HyperX and torus fabrics".
 */
#include "coll_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int is_mesh(const struct coll_shape *sh)
{
	return !sh || sh->topology == COLL_TOPO_FULL_MESH;
}

int coll_shape_validate(const struct coll_shape *sh, uint32_t servers, struct coll_error *err)
{
	uint64_t prod = 1;

	if (is_mesh(sh))
		return 0;
	if ((unsigned)sh->topology >= COLL_TOPOLOGY__COUNT) {
		coll_err_set(err, "shape", "unknown topology %d", (int)sh->topology);
		return -EINVAL;
	}
	if (sh->dims < 1 || sh->dims > COLL_MAX_DIMS) {
		coll_err_set(err, "shape", "a %s has 1 to %u dimensions, got %u",
		             coll_topology_name(sh->topology), COLL_MAX_DIMS, sh->dims);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < sh->dims; i++) {
		if (!sh->k[i]) {
			coll_err_set(err, "shape", "dimension %u of the %s has size 0", i,
			             coll_topology_name(sh->topology));
			return -EINVAL;
		}
		prod *= sh->k[i];
		if (prod > UINT32_MAX)
			prod = (uint64_t)UINT32_MAX + 1; /* saturate: four factors fit no integer */
	}
	if (prod != servers) {
		coll_err_set(err, "shape", "the %s's dimensions make %llu%s servers, not %u",
		             coll_topology_name(sh->topology), (unsigned long long)prod,
		             prod > UINT32_MAX ? " or more" : "", servers);
		return -EINVAL;
	}
	return 0;
}

void coll_grid_of(const struct coll_shape *sh, uint32_t servers, struct coll_grid *g)
{
	uint32_t stride = 1;

	memset(g, 0, sizeof(*g));
	g->M = servers;
	if (is_mesh(sh)) {
		g->dims = 1;
		g->k[0] = servers;
		g->stride[0] = 1;
		return;
	}
	g->dims = sh->dims;
	for (uint32_t i = 0; i < sh->dims; i++) {
		g->k[i] = sh->k[i];
		g->stride[i] = stride;
		stride *= sh->k[i];
	}
}

/* Neighbours a torus dimension of k gives: none, one (k = 2: both ways are one server), two. */
static uint32_t torus_neighbours(uint32_t k)
{
	return k >= 3 ? 2 : k - 1;
}

uint32_t coll_shape_degree(const struct coll_shape *sh, uint32_t servers)
{
	uint32_t d = 0;

	if (is_mesh(sh))
		return servers ? servers - 1 : 0;
	for (uint32_t i = 0; i < sh->dims; i++)
		d += sh->topology == COLL_TOPO_HYPERX ? sh->k[i] - 1 : torus_neighbours(sh->k[i]);
	return d;
}

bool coll_shape_has_circuit(const struct coll_shape *sh, uint32_t servers, uint32_t a, uint32_t b)
{
	struct coll_grid g;
	uint32_t differ = 0, dim = 0;

	if (is_mesh(sh))
		return a != b;
	coll_grid_of(sh, servers, &g);
	for (uint32_t i = 0; i < g.dims; i++)
		if (coll_grid_coord(&g, a, i) != coll_grid_coord(&g, b, i)) {
			differ++;
			dim = i;
		}
	if (differ != 1)
		return false;
	if (sh->topology == COLL_TOPO_HYPERX)
		return true;
	uint32_t k = g.k[dim];
	uint32_t step = (coll_grid_coord(&g, b, dim) + k - coll_grid_coord(&g, a, dim)) % k;
	return step == 1 || step == k - 1;
}

void coll_shape_describe(const struct coll_shape *sh, uint32_t servers, char *buf, size_t len)
{
	size_t n = 0;

	if (is_mesh(sh)) {
		snprintf(buf, len, "full mesh of %u", servers);
		return;
	}
	buf[0] = 0;
	for (uint32_t i = 0; i < sh->dims && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%u", i ? " x " : "", sh->k[i]);
	if (n < len)
		snprintf(buf + n, len - n, " %s",
		         sh->topology == COLL_TOPO_HYPERX ? "HyperX" : "torus");
}

/* The first pair a -> b an existing algorithm exchanges over that @sh does not join. */
struct pairs {
	const struct coll_shape *sh;
	uint32_t M;
	uint32_t a, b;
};

static int lacks(struct pairs *q, uint32_t a, uint32_t b)
{
	if (a == b || coll_shape_has_circuit(q->sh, q->M, a, b))
		return 0;
	q->a = a;
	q->b = b;
	return 1;
}

/* Every pair (an all-to-all exchange, or from @from when it is below M): degree M - 1. */
static int lacks_all(struct pairs *q, uint32_t from)
{
	uint32_t a = from < q->M ? from : 0;

	if (coll_shape_degree(q->sh, q->M) == q->M - 1)
		return 0;
	for (uint32_t b = 0; b < q->M; b++)
		if (lacks(q, a, b))
			return 1;
	return 0;
}

static int lacks_ring(struct pairs *q)
{
	for (uint32_t i = 0; i < q->M; i++)
		if (lacks(q, i, (i + 1) % q->M))
			return 1;
	return 0;
}

static int lacks_xor(struct pairs *q, uint32_t below)
{
	for (uint32_t d = 1; d < below; d *= 2)
		for (uint32_t i = 0; i < q->M; i++)
			if ((i ^ d) < q->M && lacks(q, i, i ^ d))
				return 1;
	return 0;
}

static int lacks_binomial(struct pairs *q, uint32_t root)
{
	for (uint64_t span = 1; span < q->M; span *= 2)
		for (uint32_t v = 0; v < span && v + span < q->M; v++)
			if (lacks(q, (uint32_t)((root + v) % q->M),
			          (uint32_t)((root + v + span) % q->M)))
				return 1;
	return 0;
}

static int lacks_pairs(enum coll_collective c, enum coll_algorithm a, const struct coll_params *p,
                       struct pairs *q)
{
	switch (a) {
	case COLL_ALG_RING:
	case COLL_ALG_BIDIR_RING:
		return lacks_ring(q);
	case COLL_ALG_NIC_OFFLOAD:
		/* The NICs' ring runs over the circuits; the switch's tree does not. */
		return p->offload_switch ? 0 : lacks_ring(q);
	case COLL_ALG_INA:
		return 0;
	case COLL_ALG_RHD:
	case COLL_ALG_RECURSIVE_DOUBLING:
		return lacks_xor(q, q->M);
	case COLL_ALG_CUBE_300:
	case COLL_ALG_CUBE_400:
		return lacks_xor(q, 8);
	case COLL_ALG_BINOMIAL_TREE:
		return lacks_binomial(q, p->root);
	case COLL_ALG_FULL_MESH_DIRECT:
		return lacks_all(q, c == COLL_BROADCAST ? p->root : UINT32_MAX);
	default: /* scatter-allgather, direct, plane-relayed: every pair */
		return lacks_all(q, UINT32_MAX);
	}
}

int coll_shape_fit(enum coll_collective c, enum coll_algorithm a, uint32_t servers,
                   const struct coll_params *p, struct coll_error *err)
{
	const struct coll_shape *sh = &p->shape;
	enum coll_topology want;
	char what[64];
	int rc = coll_shape_validate(sh, servers, err);

	if (rc)
		return rc;
	coll_shape_describe(sh, servers, what, sizeof(what));
	if (!coll_is_shape_alg(a)) {
		struct pairs q = { .sh = sh, .M = servers };

		if (is_mesh(sh) || !lacks_pairs(c, a, p, &q))
			return 0;
		coll_err_set(err, NULL,
		             "%s needs a circuit between servers %u and %u, which the %s does "
		             "not have",
		             coll_algorithm_name(a), q.a, q.b, what);
		return -EDOM;
	}
	want = a == COLL_ALG_HYPERX_DIM || a == COLL_ALG_HYPERX_A2A ? COLL_TOPO_HYPERX
	                                                            : COLL_TOPO_TORUS;
	if (sh->topology != want) {
		coll_err_set(err, NULL, "%s runs on a %s fabric; this one is a %s",
		             coll_algorithm_name(a), want == COLL_TOPO_HYPERX ? "HyperX" : "torus",
		             what);
		return -EDOM;
	}
	if (servers < 2) {
		coll_err_set(err, "servers", "%s needs at least 2 servers, got %u",
		             coll_algorithm_name(a), servers);
		return -EINVAL;
	}
	return 0;
}
