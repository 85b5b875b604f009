/*
 * Shaped fabrics: the ring layout, shape making and checking, the automatic
 * choice (full mesh, HyperX, torus) with its vectors and its refusals, cabled
 * plans of HyperX and torus shapes on plane-per-OCS cabling (small ones
 * exhaustively, 1,024 servers as 32 x 32 and 8,192 as 32 x 16 x 16), the
 * least-disruption re-plan, and the verifier's rejection of broken shaped plans.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plan.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/*
 * A fabric's servers with plane-per-OCS cabling as the daemon lays it out:
 * slot j of every server on OCS unit j % units; OCS ports handed out in server
 * order from 1 (so with units == slots, the OCS port of server i is i + 1).
 */
struct cluster {
	uint32_t m;
	struct plan_server *srv;
	struct plan_port *ports;
};

static void cluster_init(struct cluster *cl, uint32_t m, uint32_t n, uint32_t p, uint32_t units)
{
	uint32_t slots = n * p;
	uint32_t *next = calloc(units, sizeof(*next));

	assert_non_null(next);
	cl->m = m;
	cl->srv = calloc(m, sizeof(*cl->srv));
	cl->ports = calloc((size_t)m * slots + 1, sizeof(*cl->ports));
	assert_non_null(cl->srv);
	assert_non_null(cl->ports);
	for (uint32_t i = 0; i < m; i++) {
		struct plan_port *ports = cl->ports + (size_t)i * slots;

		for (uint32_t s = 0; s < slots; s++) {
			ports[s].ocs = (int32_t)(s % units);
			ports[s].ocs_port = ++next[s % units];
			ports[s].healthy = true;
		}
		cl->srv[i] =
		    (struct plan_server){ .devices = n, .ports_per_device = p, .ports = ports };
	}
	free(next);
}

static void cluster_free(struct cluster *cl)
{
	free(cl->srv);
	free(cl->ports);
}

static struct plan_port *cluster_port(struct cluster *cl, uint32_t server, uint32_t slot)
{
	return (struct plan_port *)&cl->srv[server].ports[slot];
}

static void set_device(struct cluster *cl, uint32_t server, uint32_t device, bool healthy)
{
	uint32_t p = cl->srv[server].ports_per_device;

	for (uint32_t port = 0; port < p; port++)
		cluster_port(cl, server, device * p + port)->healthy = healthy;
}

static void assert_verified(const struct cluster *cl, const struct plan_shape *sh,
                            const struct plan_fabric *pl)
{
	char why[256];
	int ret = plan_verify_shape(cl->srv, cl->m, sh, pl, why, sizeof(why));

	if (ret)
		fail_msg("plan_verify_shape: %d: %s", ret, why);
	assert_string_equal(why, "");
}

static void assert_rejected(const struct cluster *cl, const struct plan_shape *sh,
                            const struct plan_fabric *pl, const char *reason)
{
	char why[256] = "";

	assert_int_equal(plan_verify_shape(cl->srv, cl->m, sh, pl, why, sizeof(why)), -EINVAL);
	if (!strstr(why, reason))
		fail_msg("expected \"%s\" in \"%s\"", reason, why);
}

static bool end_eq(const struct plan_end *x, const struct plan_end *y)
{
	return x->server == y->server && x->device == y->device && x->port == y->port &&
	       x->ocs == y->ocs && x->ocs_port == y->ocs_port;
}

static bool circuit_eq(const struct plan_circuit *x, const struct plan_circuit *y)
{
	return x->plane == y->plane && end_eq(&x->a, &y->a) && end_eq(&x->b, &y->b);
}

static bool end_on(const struct plan_end *e, uint32_t server, uint32_t device)
{
	return e->server == server && e->device == device;
}

static int cmp_pair(const void *x, const void *y)
{
	const struct plan_circuit *a = *(const struct plan_circuit *const *)x;
	const struct plan_circuit *b = *(const struct plan_circuit *const *)y;

	if (a->a.server != b->a.server)
		return a->a.server < b->a.server ? -1 : 1;
	return a->b.server < b->b.server ? -1 : a->b.server > b->b.server;
}

/*
 * Every circuit of old that does not touch (server, device) is in new,
 * unchanged. Sorted pointers and bsearch: no M x M table at 8,192 servers.
 */
static void assert_kept_except(const struct plan_fabric *old, const struct plan_fabric *new,
                               uint32_t server, uint32_t device)
{
	const struct plan_circuit **idx = calloc(new->ncircuits + 1, sizeof(*idx));

	assert_non_null(idx);
	for (size_t i = 0; i < new->ncircuits; i++)
		idx[i] = &new->circuits[i];
	qsort(idx, new->ncircuits, sizeof(*idx), cmp_pair);
	for (size_t i = 0; i < old->ncircuits; i++) {
		const struct plan_circuit *c = &old->circuits[i], **n;

		if (end_on(&c->a, server, device) || end_on(&c->b, server, device))
			continue;
		n = bsearch(&c, idx, new->ncircuits, sizeof(*idx), cmp_pair);
		if (!n || !circuit_eq(c, *n))
			fail_msg("circuit %u-%u (plane %u) moved", c->a.server, c->b.server,
			         c->plane);
	}
	free(idx);
}

static struct plan_shape make(enum plan_topology t, uint32_t k0, uint32_t k1, uint32_t k2,
                              uint32_t k3)
{
	uint32_t k[PLAN_MAX_DIMS] = { k0, k1, k2, k3 };
	uint32_t dims = k3 ? 4 : k2 ? 3 : k1 ? 2 : 1;
	struct plan_shape sh;
	char why[256];

	if (plan_shape_make(t, k, dims, &sh, why, sizeof(why)))
		fail_msg("plan_shape_make: %s", why);
	return sh;
}

static void assert_k(const struct plan_shape *sh, enum plan_topology t, uint32_t dims, uint32_t k0,
                     uint32_t k1, uint32_t k2)
{
	char name[64];

	if (sh->topology != t || sh->dims != dims || sh->k[0] != k0 ||
	    (dims > 1 && sh->k[1] != k1) || (dims > 2 && sh->k[2] != k2))
		fail_msg("got %s (%u dims)", plan_shape_format(sh, name, sizeof(name)), sh->dims);
}

/* ---- ring layout ---------------------------------------------------------- */

static void test_ring_layout(void **state)
{
	(void)state;
	assert_int_equal(plan_ring_planes(1), 0);
	assert_int_equal(plan_ring_planes(2), 1);
	assert_int_equal(plan_ring_planes(3), 3);
	assert_int_equal(plan_ring_planes(4), 2);
	assert_int_equal(plan_ring_planes(7), 3);
	assert_int_equal(plan_ring_planes(64), 2);
	/* k = 8: plane 0 joins 2j with 2j+1, plane 1 2j+1 with 2j+2, 7 with 0 */
	assert_int_equal(plan_ring_dst(8, 0, 0), 1);
	assert_int_equal(plan_ring_dst(8, 0, 1), 7);
	assert_int_equal(plan_ring_dst(8, 7, 1), 0);
	assert_int_equal(plan_ring_dst(8, 3, 1), 4);
	/* k = 5: {0,1} {2,3} | {1,2} {3,4} | {4,0} */
	assert_int_equal(plan_ring_dst(5, 4, 0), 4);
	assert_int_equal(plan_ring_dst(5, 0, 1), 0);
	assert_int_equal(plan_ring_dst(5, 3, 1), 4);
	assert_int_equal(plan_ring_dst(5, 4, 2), 0);
	assert_int_equal(plan_ring_dst(5, 2, 2), 2);

	for (uint32_t k = 1; k <= 41; k++) {
		uint32_t joined = 0, r = plan_ring_planes(k);
		uint8_t *seen = calloc((size_t)k * k + 1, 1);

		assert_non_null(seen);
		for (uint32_t d = 0; d < r + 1; d++) {
			for (uint32_t s = 0; s < k; s++) {
				uint32_t t = plan_ring_dst(k, s, d);

				assert_true(t < k);
				assert_int_equal(plan_ring_dst(k, t, d), s);
				if (t <= s)
					continue;
				assert_true(d < r); /* planes past the layout idle */
				/* only ring neighbours, each once */
				assert_true(t == s + 1 || (s == 0 && t == k - 1));
				assert_int_equal(seen[s * k + t]++, 0);
				joined++;
			}
		}
		assert_int_equal(joined, k >= 3 ? k : k - 1);
		free(seen);
	}
}

/* ---- making and checking shapes ------------------------------------------ */

static void test_shape_make(void **state)
{
	struct plan_shape sh, bad;
	uint32_t k[4] = { 32, 32, 0, 0 };
	char why[256], name[64];

	(void)state;
	sh = make(PLAN_TOPO_HYPERX, 32, 32, 0, 0);
	assert_int_equal(sh.planes[0], 31);
	assert_int_equal(sh.planes[1], 31);
	assert_int_equal(sh.first_plane[0], 0);
	assert_int_equal(sh.first_plane[1], 31);
	assert_int_equal(sh.diameter, 2);
	assert_int_equal(sh.degree, 62);
	assert_int_equal(plan_shape_planes_total(&sh), 62);
	assert_int_equal(plan_shape_bisection(&sh), 1024 * 32 / 4);
	assert_string_equal(plan_shape_format(&sh, name, sizeof(name)), "HyperX 32x32");
	assert_int_equal(plan_shape_check(&sh, 1024, why, sizeof(why)), 0);

	sh = make(PLAN_TOPO_HYPERX, 32, 16, 16, 0);
	assert_int_equal(plan_shape_planes_total(&sh), 61);
	assert_int_equal(sh.diameter, 3);
	assert_int_equal(sh.degree, 61);
	assert_int_equal(plan_shape_bisection(&sh), 8192 * 16 / 4);

	/* odd k: formula 1, k planes; a dimension of 1 costs nothing */
	sh = make(PLAN_TOPO_HYPERX, 5, 1, 3, 0);
	assert_int_equal(sh.planes[0], 5);
	assert_int_equal(sh.planes[1], 0);
	assert_int_equal(sh.planes[2], 3);
	assert_int_equal(sh.first_plane[2], 5);
	assert_int_equal(sh.diameter, 2);
	assert_int_equal(sh.degree, 6);
	assert_int_equal(plan_shape_bisection(&sh), 5 * 1 * 2); /* across k = 3: 5 lines of 2 */

	sh = make(PLAN_TOPO_TORUS, 16, 16, 0, 0);
	assert_int_equal(plan_shape_planes_total(&sh), 4);
	assert_int_equal(sh.diameter, 16);
	assert_int_equal(sh.degree, 4);
	assert_int_equal(plan_shape_bisection(&sh), 32);
	sh = make(PLAN_TOPO_TORUS, 5, 2, 0, 0);
	assert_int_equal(sh.planes[0], 3);
	assert_int_equal(sh.planes[1], 1);
	assert_int_equal(sh.diameter, 3);
	assert_int_equal(sh.degree, 3);
	assert_int_equal(plan_shape_bisection(&sh), 4); /* across the ring of 5: 2 rings x 2 */

	sh = make(PLAN_TOPO_FULL_MESH, 64, 0, 0, 0);
	assert_int_equal(sh.planes[0], 63);
	assert_int_equal(sh.diameter, 1);
	assert_int_equal(sh.degree, 63);
	assert_int_equal(plan_shape_bisection(&sh), 32 * 32);

	/* refusals */
	assert_int_equal(plan_shape_make(PLAN_TOPO_AUTO, k, 2, &sh, why, sizeof(why)), -EINVAL);
	assert_int_equal(plan_shape_make(PLAN_TOPO_FULL_MESH, k, 2, &sh, why, sizeof(why)),
	                 -EINVAL);
	assert_non_null(strstr(why, "one dimension"));
	assert_int_equal(plan_shape_make(PLAN_TOPO_HYPERX, k, 5, &sh, why, sizeof(why)), -EINVAL);
	k[0] = 1024;
	k[1] = 2;
	assert_int_equal(plan_shape_make(PLAN_TOPO_HYPERX, k, 2, &sh, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "at most 512"));
	assert_int_equal(plan_shape_make(PLAN_TOPO_TORUS, k, 2, &sh, why, sizeof(why)), 0);
	k[1] = 0;
	assert_int_equal(plan_shape_make(PLAN_TOPO_TORUS, k, 2, &sh, why, sizeof(why)), -EINVAL);
	k[1] = 65;
	assert_int_equal(plan_shape_make(PLAN_TOPO_TORUS, k, 2, &sh, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "more than 65536"));

	/* check: every derived field is held to the grid */
	sh = make(PLAN_TOPO_HYPERX, 32, 32, 0, 0);
	assert_int_equal(plan_shape_check(&sh, 1000, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "holds 1024 servers"));
	bad = sh;
	bad.diameter = 1;
	assert_int_equal(plan_shape_check(&bad, 1024, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "claims diameter 1, it has 2"));
	bad = sh;
	bad.degree = 63;
	assert_int_equal(plan_shape_check(&bad, 1024, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "degree"));
	bad = sh;
	bad.first_plane[1] = 30;
	assert_int_equal(plan_shape_check(&bad, 1024, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "share planes"));
	bad = sh;
	bad.planes[0] = 32;
	assert_int_equal(plan_shape_check(&bad, 1024, why, sizeof(why)), -EINVAL);
	/* another plane layout is fine as long as dimensions do not overlap */
	bad = sh;
	bad.first_plane[0] = 33;
	bad.first_plane[1] = 0;
	assert_int_equal(plan_shape_check(&bad, 1024, why, sizeof(why)), 0);
	assert_int_equal(plan_shape_planes_total(&bad), 64);

	assert_string_equal(plan_topology_name(PLAN_TOPO_HYPERX), "hyperx");
	{
		enum plan_topology t;

		assert_int_equal(plan_topology_parse("torus", &t), 0);
		assert_int_equal(t, PLAN_TOPO_TORUS);
		assert_int_equal(plan_topology_parse("ring", &t), -EINVAL);
	}
}

/* ---- the choice ------------------------------------------------------------ */

static void test_choose_vectors(void **state)
{
	struct plan_shape sh;
	char why[256];

	(void)state;
	/* 64 servers on 8 x 8 ports: the full mesh, 63 planes, as today */
	assert_int_equal(
	    plan_shape_choose(64, 8, 8, PLAN_TOPO_AUTO, NULL, 0, &sh, why, sizeof(why)), 0);
	assert_k(&sh, PLAN_TOPO_FULL_MESH, 1, 64, 0, 0);
	assert_int_equal(sh.planes[0], 63);
	assert_int_equal(sh.diameter, 1);

	/* 65: formula 1 needs 65 planes of 64; 65 = 13 x 5, 18 planes */
	assert_int_equal(
	    plan_shape_choose(65, 8, 8, PLAN_TOPO_AUTO, NULL, 0, &sh, why, sizeof(why)), 0);
	assert_k(&sh, PLAN_TOPO_HYPERX, 2, 13, 5, 0);
	assert_int_equal(plan_shape_planes_total(&sh), 18);
	assert_non_null(strstr(why, "needs 65 planes, the servers have 64"));

	/* 1,024: 32 x 32, 62 planes, diameter 2 */
	assert_int_equal(
	    plan_shape_choose(1024, 8, 8, PLAN_TOPO_AUTO, NULL, 0, &sh, why, sizeof(why)), 0);
	assert_k(&sh, PLAN_TOPO_HYPERX, 2, 32, 32, 0);
	assert_int_equal(sh.diameter, 2);
	assert_int_equal(plan_shape_planes_total(&sh), 62);
	assert_non_null(strstr(why, "HyperX 32x32 (diameter 2, bisection 8192 links, 62 planes)"));

	/* 8,192: no two-dimensional grid fits 64 planes; 32 x 16 x 16 does (61) */
	assert_int_equal(
	    plan_shape_choose(8192, 8, 8, PLAN_TOPO_AUTO, NULL, 0, &sh, why, sizeof(why)), 0);
	assert_k(&sh, PLAN_TOPO_HYPERX, 3, 32, 16, 16);
	assert_int_equal(sh.diameter, 3);
	assert_true(plan_shape_planes_total(&sh) <= 64);

	/* 512: full mesh refused (511 planes); of the 2-D grids only 32 x 16 fits */
	assert_int_equal(
	    plan_shape_choose(512, 8, 8, PLAN_TOPO_AUTO, NULL, 0, &sh, why, sizeof(why)), 0);
	assert_k(&sh, PLAN_TOPO_HYPERX, 2, 32, 16, 0);

	/* bisection breaks the tie between diameters: 8 x 8 over 16 x 4 */
	assert_int_equal(
	    plan_shape_choose(64, 8, 8, PLAN_TOPO_HYPERX, NULL, 0, &sh, why, sizeof(why)), 0);
	assert_k(&sh, PLAN_TOPO_HYPERX, 2, 8, 8, 0);

	/* a prime beyond the full mesh: no HyperX, a ring */
	assert_int_equal(
	    plan_shape_choose(67, 8, 8, PLAN_TOPO_AUTO, NULL, 0, &sh, why, sizeof(why)), 0);
	assert_k(&sh, PLAN_TOPO_TORUS, 1, 67, 0, 0);
	assert_int_equal(plan_shape_planes_total(&sh), 3);
	assert_non_null(strstr(why, "no HyperX fits"));

	/* scarce ports: a torus. 1,024 on 4 planes: 32 x 32, diameter 32 */
	assert_int_equal(
	    plan_shape_choose(1024, 2, 2, PLAN_TOPO_AUTO, NULL, 0, &sh, why, sizeof(why)), 0);
	assert_k(&sh, PLAN_TOPO_TORUS, 2, 32, 32, 0);
	assert_int_equal(sh.diameter, 32);
	/* with 8 planes, four dimensions: 8 x 8 x 4 x 4, diameter 12 */
	assert_int_equal(
	    plan_shape_choose(1024, 8, 1, PLAN_TOPO_TORUS, NULL, 0, &sh, why, sizeof(why)), 0);
	assert_int_equal(sh.dims, 4);
	assert_int_equal(sh.diameter, 12);

	/* one server needs nothing, whatever the family */
	assert_int_equal(plan_shape_choose(1, 0, 1, PLAN_TOPO_AUTO, NULL, 0, &sh, why, sizeof(why)),
	                 0);
	assert_k(&sh, PLAN_TOPO_FULL_MESH, 1, 1, 0, 0);
	assert_int_equal(
	    plan_shape_choose(1, 0, 1, PLAN_TOPO_TORUS, NULL, 0, &sh, why, sizeof(why)), 0);
	assert_int_equal(sh.diameter, 0);
}

static void test_choose_infeasible(void **state)
{
	struct plan_shape sh;
	char why[256];

	(void)state;
	/* two planes carry even rings only; 5001 = 3 x 1667 is odd */
	assert_int_equal(
	    plan_shape_choose(5001, 2, 1, PLAN_TOPO_AUTO, NULL, 0, &sh, why, sizeof(why)), -EDOM);
	assert_non_null(strstr(why, "no topology of 5001 servers fits 2 planes per server "
	                            "(2 devices x 1 ports)"));
	assert_non_null(strstr(why, "a full mesh holds at most 512 servers, no HyperX grid"));
	assert_non_null(strstr(why, "torus 5001 needs 3; 5000 would fit (torus 5000)"));
	assert_true(strlen(why) < sizeof(why) - 1);
	/* out: the candidate needing the fewest planes */
	assert_k(&sh, PLAN_TOPO_TORUS, 1, 5001, 0, 0);

	/* one plane joins two servers */
	assert_int_equal(plan_shape_choose(3, 1, 1, PLAN_TOPO_AUTO, NULL, 0, &sh, why, sizeof(why)),
	                 -EDOM);
	assert_non_null(strstr(why, "full mesh 3 needs 3"));
	assert_non_null(strstr(why, "2 would fit (full mesh 2)"));

	/* a family alone */
	assert_int_equal(
	    plan_shape_choose(65, 8, 8, PLAN_TOPO_FULL_MESH, NULL, 0, &sh, why, sizeof(why)),
	    -EDOM);
	assert_non_null(strstr(why, "no full mesh of 65 servers fits 64 planes"));
	assert_non_null(strstr(why, "full mesh 65 needs 65; 64 would fit (full mesh 64)"));
	assert_int_equal(
	    plan_shape_choose(8192, 4, 8, PLAN_TOPO_HYPERX, NULL, 0, &sh, why, sizeof(why)), -EDOM);
	assert_non_null(strstr(why, "no HyperX of 8192 servers fits 32 planes per server"));
	assert_non_null(strstr(why, "HyperX 16x8x8x8 needs 36; 6400 would fit (HyperX 10x10x8x8)"));
	/* the walk down is bounded: no claim rather than a wrong one */
	assert_int_equal(
	    plan_shape_choose(65536, 1, 10, PLAN_TOPO_HYPERX, NULL, 0, &sh, why, sizeof(why)),
	    -EDOM);
	assert_null(strstr(why, "would fit"));
	assert_int_equal(
	    plan_shape_choose(1024, 8, 8, PLAN_TOPO_FULL_MESH, NULL, 0, &sh, why, sizeof(why)),
	    -EINVAL);
	assert_non_null(strstr(why, "at most 512"));

	/* out of range */
	assert_int_equal(plan_shape_choose(0, 8, 8, PLAN_TOPO_AUTO, NULL, 0, &sh, why, sizeof(why)),
	                 -EINVAL);
	assert_int_equal(
	    plan_shape_choose(65537, 8, 8, PLAN_TOPO_AUTO, NULL, 0, &sh, why, sizeof(why)),
	    -EINVAL);
	assert_int_equal(plan_shape_choose(8, 8, 0, PLAN_TOPO_AUTO, NULL, 0, &sh, why, sizeof(why)),
	                 -EINVAL);
	assert_int_equal(
	    plan_shape_choose(8, 8, 8, (enum plan_topology)7, NULL, 0, &sh, why, sizeof(why)),
	    -EINVAL);
	assert_int_equal(
	    plan_shape_choose(8, 8, 8, PLAN_TOPO_AUTO, NULL, 0, NULL, why, sizeof(why)), -EINVAL);
}

static void test_choose_explicit(void **state)
{
	static const uint32_t k3232[] = { 32, 32 }, k1664[] = { 16, 64 }, bad0[] = { 32, 0 };
	static const uint32_t k31[] = { 31, 33 }, k5[] = { 2, 2, 2, 2, 64 }, k1024[] = { 1024 };
	struct plan_shape sh;
	char why[256];

	(void)state;
	assert_int_equal(
	    plan_shape_choose(1024, 8, 8, PLAN_TOPO_HYPERX, k3232, 2, &sh, why, sizeof(why)), 0);
	assert_k(&sh, PLAN_TOPO_HYPERX, 2, 32, 32, 0);
	assert_non_null(strstr(why, "as asked"));
	/* 32 planes do not hold it: -EDOM, the shape still filled */
	assert_int_equal(
	    plan_shape_choose(1024, 4, 8, PLAN_TOPO_HYPERX, k3232, 2, &sh, why, sizeof(why)),
	    -EDOM);
	assert_non_null(strstr(why, "the HyperX 32x32 needs 62 planes per server, the servers "
	                            "have 32"));
	assert_int_equal(sh.planes[1], 31);
	/* auto with a grid: a HyperX if it fits (78 planes do not), else a torus */
	assert_int_equal(
	    plan_shape_choose(1024, 8, 8, PLAN_TOPO_AUTO, k1664, 2, &sh, why, sizeof(why)), 0);
	assert_k(&sh, PLAN_TOPO_TORUS, 2, 16, 64, 0);
	assert_int_equal(
	    plan_shape_choose(1024, 8, 8, PLAN_TOPO_AUTO, k3232, 2, &sh, why, sizeof(why)), 0);
	assert_k(&sh, PLAN_TOPO_HYPERX, 2, 32, 32, 0);
	/* a ring of 1,024 as asked */
	assert_int_equal(
	    plan_shape_choose(1024, 1, 2, PLAN_TOPO_TORUS, k1024, 1, &sh, why, sizeof(why)), 0);
	assert_int_equal(sh.diameter, 512);

	/* errors */
	assert_int_equal(
	    plan_shape_choose(1000, 8, 8, PLAN_TOPO_HYPERX, k3232, 2, &sh, why, sizeof(why)),
	    -EINVAL);
	assert_non_null(strstr(why, "multiply to more than 1000 servers"));
	assert_int_equal(
	    plan_shape_choose(1024, 8, 8, PLAN_TOPO_HYPERX, k31, 2, &sh, why, sizeof(why)),
	    -EINVAL);
	assert_non_null(strstr(why, "multiply to 1023 servers"));
	assert_int_equal(
	    plan_shape_choose(1024, 8, 8, PLAN_TOPO_HYPERX, bad0, 2, &sh, why, sizeof(why)),
	    -EINVAL);
	assert_non_null(strstr(why, "no servers"));
	assert_int_equal(
	    plan_shape_choose(1024, 8, 8, PLAN_TOPO_HYPERX, k5, 5, &sh, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "1 to 4 dimensions"));
	assert_int_equal(
	    plan_shape_choose(1024, 8, 8, PLAN_TOPO_HYPERX, k3232, 0, &sh, why, sizeof(why)),
	    -EINVAL);
	assert_int_equal(
	    plan_shape_choose(1024, 8, 8, PLAN_TOPO_FULL_MESH, k3232, 2, &sh, why, sizeof(why)),
	    -EINVAL);
	assert_non_null(strstr(why, "one dimension"));
	assert_int_equal(
	    plan_shape_choose(1024, 1024, 8, PLAN_TOPO_HYPERX, k1024, 1, &sh, why, sizeof(why)),
	    -EINVAL);
	assert_non_null(strstr(why, "at most 512"));
}

static void test_candidates(void **state)
{
	struct plan_shape v[512], best;
	size_t n, nfit;

	(void)state;
	assert_int_equal(
	    plan_shape_candidates(1024, 8, 8, PLAN_TOPO_AUTO, v, ARRAY_LEN(v), &n, &nfit), 0);
	assert_true(n <= ARRAY_LEN(v));
	assert_true(nfit >= 2 && nfit < n);
	assert_int_equal(plan_shape_choose(1024, 8, 8, PLAN_TOPO_AUTO, NULL, 0, &best, NULL, 0), 0);
	assert_memory_equal(&v[0], &best, sizeof(best));
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(plan_shape_check(&v[i], 1024, NULL, 0), 0);
		assert_true((plan_shape_planes_total(&v[i]) <= 64) == (i < nfit));
		/* fitting ones in order: HyperX before torus, then diameter */
		if (i && i < nfit && v[i].topology == v[i - 1].topology)
			assert_true(v[i].diameter >= v[i - 1].diameter);
		if (i && i < nfit)
			assert_true(v[i].topology >= v[i - 1].topology);
	}
	/* a count without room, and a family alone */
	assert_int_equal(plan_shape_candidates(65536, 8, 8, PLAN_TOPO_AUTO, NULL, 0, &n, NULL), 0);
	assert_true(n > 0 && n < 1000);
	assert_int_equal(plan_shape_candidates(64, 8, 8, PLAN_TOPO_FULL_MESH, v, 4, &n, &nfit), 0);
	assert_int_equal(n, 1);
	assert_int_equal(nfit, 1);
	assert_int_equal(plan_shape_candidates(64, 8, 8, PLAN_TOPO_AUTO, v, 4, NULL, NULL),
	                 -EINVAL);
}

/* ---- cabled plans ------------------------------------------------------------ */

/* Plan, fail device `dev` of server `s`, recover; check each step. */
static void check_shape_fabric(const struct plan_shape *sh, uint32_t n, uint32_t p, uint32_t units,
                               bool spare)
{
	struct plan_fabric pl, failed, back;
	struct cluster cl;
	uint32_t m = 1, s, dev = 0;
	size_t edges;

	for (uint32_t i = 0; i < sh->dims; i++)
		m *= sh->k[i];
	edges = (size_t)m * sh->degree / 2;
	s = m / 2;
	cluster_init(&cl, m, n, p, units);
	assert_int_equal(plan_fabric_compute_shape(cl.srv, m, sh, &pl), 0);
	assert_verified(&cl, sh, &pl);
	assert_int_equal(pl.ncircuits, edges);
	assert_int_equal(pl.nmissing, 0);
	assert_int_equal(pl.planes, plan_shape_planes_total(sh));
	assert_memory_equal(&pl.shape, sh, sizeof(*sh));
	/* every circuit on its dimension's policy plane: the cabling serves them all */
	for (size_t i = 0; i < pl.ncircuits; i++)
		assert_true(pl.circuits[i].plane < pl.planes);
	if (m < 2) {
		plan_fabric_free(&pl);
		cluster_free(&cl);
		return;
	}

	set_device(&cl, s, dev, false);
	assert_int_equal(plan_fabric_replan_shape(cl.srv, m, sh, &pl, &failed), 0);
	assert_verified(&cl, sh, &failed);
	assert_kept_except(&pl, &failed, s, dev);
	assert_int_equal(failed.ncircuits + failed.nmissing, edges);
	if (spare)
		assert_int_equal(failed.nmissing, 0);

	set_device(&cl, s, dev, true);
	assert_int_equal(plan_fabric_replan_shape(cl.srv, m, sh, &failed, &back), 0);
	assert_verified(&cl, sh, &back);
	assert_kept_except(&failed, &back, UINT32_MAX, UINT32_MAX);
	assert_int_equal(back.nmissing, 0);
	assert_int_equal(back.ncircuits, edges);

	plan_fabric_free(&pl);
	plan_fabric_free(&failed);
	plan_fabric_free(&back);
	cluster_free(&cl);
}

static void test_fabric_small_shapes(void **state)
{
	static const uint32_t grids[][4] = {
		{ 2, 2, 0, 0 }, { 3, 2, 0, 0 }, { 4, 4, 0, 0 }, { 5, 3, 2, 0 }, { 2, 2, 2, 2 },
		{ 6, 1, 4, 0 }, { 7, 0, 0, 0 }, { 8, 0, 0, 0 }, { 3, 3, 3, 0 }, { 4, 3, 2, 2 },
		{ 1, 0, 0, 0 }, { 2, 0, 0, 0 }, { 5, 4, 0, 0 },
	};
	static const enum plan_topology tops[] = { PLAN_TOPO_HYPERX, PLAN_TOPO_TORUS };
	static const uint32_t ps[] = { 1, 2, 4 }, units[] = { 1, 2, 3 };

	(void)state;
	for (size_t t = 0; t < ARRAY_LEN(tops); t++) {
		for (size_t g = 0; g < ARRAY_LEN(grids); g++) {
			const uint32_t *k = grids[g];
			struct plan_shape sh = make(tops[t], k[0], k[1], k[2], k[3]);
			uint32_t r = plan_shape_planes_total(&sh);

			for (size_t i = 0; i < ARRAY_LEN(ps); i++) {
				uint32_t n = r / ps[i] + (r % ps[i] != 0);

				for (size_t u = 0; u < ARRAY_LEN(units); u++) {
					check_shape_fabric(&sh, n ? n : 1, ps[i], units[u], false);
					check_shape_fabric(&sh, n + 1, ps[i], units[u], true);
				}
			}
		}
	}
}

/* The shaped entry points with no shape are the full-mesh ones. */
static void test_fabric_null_shape(void **state)
{
	struct plan_fabric a, b;
	struct plan_shape mesh;
	struct cluster cl;
	char why[256];

	(void)state;
	cluster_init(&cl, 9, 9, 1, 2);
	set_device(&cl, 4, 2, false);
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &a), 0);
	assert_int_equal(plan_fabric_compute_shape(cl.srv, cl.m, NULL, &b), 0);
	assert_int_equal(a.ncircuits, b.ncircuits);
	assert_int_equal(a.nmissing, b.nmissing);
	assert_memory_equal(a.circuits, b.circuits, a.ncircuits * sizeof(*a.circuits));
	mesh = make(PLAN_TOPO_FULL_MESH, 9, 0, 0, 0);
	assert_memory_equal(&a.shape, &mesh, sizeof(mesh));
	assert_int_equal(a.formula, 1);
	assert_verified(&cl, &mesh, &a);
	assert_int_equal(plan_verify(cl.srv, cl.m, &b, why, sizeof(why)), 0);
	plan_fabric_free(&a);
	plan_fabric_free(&b);
	cluster_free(&cl);
}

/* A fabric re-planned into another shape keeps the circuits the two shapes share. */
static void test_fabric_reshape(void **state)
{
	struct plan_shape hx = make(PLAN_TOPO_HYPERX, 4, 4, 0, 0);
	struct plan_fabric mesh, grid;
	struct cluster cl;
	size_t kept = 0;

	(void)state;
	cluster_init(&cl, 16, 16, 1, 1);
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &mesh), 0);
	assert_int_equal(plan_fabric_replan_shape(cl.srv, cl.m, &hx, &mesh, &grid), 0);
	assert_verified(&cl, &hx, &grid);
	assert_int_equal(grid.ncircuits, 16 * 6 / 2);
	assert_int_equal(grid.formula, 0);
	for (size_t i = 0; i < grid.ncircuits; i++)
		for (size_t j = 0; j < mesh.ncircuits; j++)
			kept +=
			    !memcmp(&grid.circuits[i], &mesh.circuits[j], sizeof(mesh.circuits[j]));
	assert_int_equal(kept, grid.ncircuits); /* one OCS unit: every line pair stays */
	plan_fabric_free(&mesh);
	plan_fabric_free(&grid);
	cluster_free(&cl);
}

static void test_fabric_shape_args(void **state)
{
	struct plan_shape hx = make(PLAN_TOPO_HYPERX, 4, 4, 0, 0);
	struct plan_fabric pl;
	struct cluster cl;

	(void)state;
	/* 6 planes needed, 2 x 2 = 4 given */
	cluster_init(&cl, 16, 2, 2, 1);
	assert_int_equal(plan_fabric_compute_shape(cl.srv, cl.m, &hx, &pl), -EDOM);
	assert_int_equal(pl.planes, 6);
	assert_int_equal(pl.min_devices, 3);
	assert_int_equal(pl.devices, 2);
	assert_null(pl.circuits);
	assert_int_equal(pl.shape.topology, PLAN_TOPO_HYPERX);
	plan_fabric_free(&pl);
	/* a shape of another fabric size, or a broken one */
	assert_int_equal(plan_fabric_compute_shape(cl.srv, 15, &hx, &pl), -EINVAL);
	hx.diameter = 3;
	assert_int_equal(plan_fabric_compute_shape(cl.srv, cl.m, &hx, &pl), -EINVAL);
	cluster_free(&cl);
}

/* ---- the verifier on shaped plans --------------------------------------------- */

static void test_verify_shape_rejects(void **state)
{
	struct plan_shape hx = make(PLAN_TOPO_HYPERX, 4, 3, 0, 0), bad;
	struct plan_shape tor = make(PLAN_TOPO_TORUS, 4, 3, 0, 0);
	struct plan_fabric pl;
	struct plan_circuit save;
	struct plan_pair miss[1];
	struct cluster cl;

	(void)state;
	cluster_init(&cl, 12, 3, 2, 6);
	assert_int_equal(plan_fabric_compute_shape(cl.srv, cl.m, &hx, &pl), 0);
	assert_verified(&cl, &hx, &pl);
	assert_int_equal(pl.ncircuits, 12 * 5 / 2);

	/* a port used twice */
	{
		/* same server and slot twice, on a line pair: the port check fires */
		size_t i = 0, j;

		for (j = 1; j < pl.ncircuits; j++)
			if (pl.circuits[j].a.server == pl.circuits[i].a.server)
				break;
		assert_true(j < pl.ncircuits);
		save = pl.circuits[j];
		pl.circuits[j].a.device = pl.circuits[i].a.device;
		pl.circuits[j].a.port = pl.circuits[i].a.port;
		pl.circuits[j].a.ocs = pl.circuits[i].a.ocs;
		pl.circuits[j].a.ocs_port = pl.circuits[i].a.ocs_port;
		pl.circuits[j].b.ocs = pl.circuits[i].a.ocs;
		assert_rejected(&cl, &hx, &pl, "in two circuits");
		pl.circuits[j] = save;
	}

	/* a pair outside every line: servers 0 (0,0) and 5 (1,1) */
	save = pl.circuits[0];
	pl.circuits[0].a.server = 0;
	pl.circuits[0].b.server = 5;
	assert_rejected(&cl, &hx, &pl, "servers 0 and 5 are not in one line of the HyperX 4x3");
	pl.circuits[0] = save;

	/* a line pair dropped and not listed; listed, it is fine; listed outside a line, not */
	pl.ncircuits--;
	save = pl.circuits[pl.ncircuits];
	assert_rejected(&cl, &hx, &pl, "neither joined nor listed missing");
	miss[0] = (struct plan_pair){ save.a.server, save.b.server };
	pl.missing = miss;
	pl.nmissing = 1;
	assert_verified(&cl, &hx, &pl);
	miss[0] = (struct plan_pair){ 1, 4 };
	assert_rejected(&cl, &hx, &pl, "missing 0: servers 1 and 4 are not in one line");
	pl.missing = NULL;
	pl.nmissing = 0;
	pl.ncircuits++;
	assert_verified(&cl, &hx, &pl);

	/* a wrong diameter (or degree) claim */
	bad = hx;
	bad.diameter = 3;
	assert_rejected(&cl, &bad, &pl, "claims diameter 3, it has 2");
	bad = hx;
	bad.degree = 6;
	assert_rejected(&cl, &bad, &pl, "claims degree 6");
	/* the plan's own shape differs from the fabric's */
	bad = make(PLAN_TOPO_HYPERX, 3, 4, 0, 0);
	assert_rejected(&cl, &bad, &pl, "laid out as the HyperX 4x3, the fabric as the HyperX 3x4");
	/* ... and without a stated shape, the HyperX is no full mesh */
	pl.shape = (struct plan_shape){ 0 };
	assert_rejected(&cl, NULL, &pl, "neither joined nor listed missing");
	assert_rejected(&cl, &tor, &pl, "30 circuits and 0 missing pairs for 24 pairs");
	plan_fabric_free(&pl);

	/* a torus: 0-2 share a ring of 4 but are not neighbours */
	assert_int_equal(plan_fabric_compute_shape(cl.srv, cl.m, &tor, &pl), 0);
	assert_verified(&cl, &tor, &pl);
	assert_int_equal(pl.ncircuits, 12 * 4 / 2); /* degree 2 + 2 */
	save = pl.circuits[0];
	pl.circuits[0].a.server = 0;
	pl.circuits[0].b.server = 2;
	assert_rejected(&cl, &tor, &pl, "servers 0 and 2 are not neighbours on one ring");
	pl.circuits[0] = save;
	assert_verified(&cl, &tor, &pl);
	plan_fabric_free(&pl);
	cluster_free(&cl);
}

/* ---- large fabrics: 8 devices x 8 ports, slot j on OCS unit j, port = server ---- */

static void check_large(uint32_t m, const struct plan_shape *sh, uint32_t fail_server)
{
	struct plan_fabric pl, failed;
	struct cluster cl;
	size_t edges = (size_t)m * sh->degree / 2;

	cluster_init(&cl, m, 8, 8, 64);
	assert_int_equal(plan_fabric_compute_shape(cl.srv, m, sh, &pl), 0);
	assert_int_equal(pl.ncircuits, edges);
	assert_int_equal(pl.nmissing, 0);
	assert_verified(&cl, sh, &pl);
	/* slot j on OCS j, ports in server order: the circuit of plane j joins OCS ports a+1, b+1
	 */
	for (size_t i = 0; i < pl.ncircuits; i += 997) {
		const struct plan_circuit *c = &pl.circuits[i];

		assert_int_equal(c->a.ocs, (int32_t)c->plane);
		assert_int_equal(c->a.ocs_port, c->a.server + 1);
		assert_int_equal(c->b.ocs_port, c->b.server + 1);
	}

	set_device(&cl, fail_server, 3, false);
	assert_int_equal(plan_fabric_replan_shape(cl.srv, m, sh, &pl, &failed), 0);
	assert_verified(&cl, sh, &failed);
	assert_kept_except(&pl, &failed, fail_server, 3);
	assert_int_equal(failed.ncircuits + failed.nmissing, edges);
	/* 8 circuits lost; the spare slots past the shape's planes take what they can */
	assert_true(failed.nmissing <= 8);
	assert_true((int64_t)failed.nmissing >= 8 - (64 - (int64_t)plan_shape_planes_total(sh)));
	for (size_t i = 0; i < failed.nmissing; i++)
		assert_true(failed.missing[i].a == fail_server ||
		            failed.missing[i].b == fail_server);
	plan_fabric_free(&pl);
	plan_fabric_free(&failed);
	cluster_free(&cl);
}

static void test_fabric_hyperx_1024(void **state)
{
	struct plan_shape sh;

	(void)state;
	assert_int_equal(plan_shape_choose(1024, 8, 8, PLAN_TOPO_AUTO, NULL, 0, &sh, NULL, 0), 0);
	check_large(1024, &sh, 100);
}

static void test_fabric_hyperx_8192(void **state)
{
	struct plan_shape sh;

	(void)state;
	assert_int_equal(plan_shape_choose(8192, 8, 8, PLAN_TOPO_AUTO, NULL, 0, &sh, NULL, 0), 0);
	assert_k(&sh, PLAN_TOPO_HYPERX, 3, 32, 16, 16);
	check_large(8192, &sh, 5000);
}

static void test_fabric_torus_large(void **state)
{
	struct plan_shape sh;

	(void)state;
	assert_int_equal(plan_shape_choose(8192, 8, 8, PLAN_TOPO_TORUS, NULL, 0, &sh, NULL, 0), 0);
	assert_int_equal(sh.topology, PLAN_TOPO_TORUS);
	check_large(8192, &sh, 77);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_layout),
		cmocka_unit_test(test_shape_make),
		cmocka_unit_test(test_choose_vectors),
		cmocka_unit_test(test_choose_infeasible),
		cmocka_unit_test(test_choose_explicit),
		cmocka_unit_test(test_candidates),
		cmocka_unit_test(test_fabric_small_shapes),
		cmocka_unit_test(test_fabric_null_shape),
		cmocka_unit_test(test_fabric_reshape),
		cmocka_unit_test(test_fabric_shape_args),
		cmocka_unit_test(test_verify_shape_rejects),
		cmocka_unit_test(test_fabric_hyperx_1024),
		cmocka_unit_test(test_fabric_hyperx_8192),
		cmocka_unit_test(test_fabric_torus_large),
	};

	return cmocka_run_group_tests_name("plan_shape", tests, NULL, NULL);
}
