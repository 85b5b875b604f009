/*
 * Shaped fabrics: the ring layout, shape making and checking, the automatic
 * choice (full mesh, HyperX, torus) with its vectors and its refusals.
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_layout),     cmocka_unit_test(test_shape_make),
		cmocka_unit_test(test_choose_vectors),  cmocka_unit_test(test_choose_infeasible),
		cmocka_unit_test(test_choose_explicit), cmocka_unit_test(test_candidates),
	};

	return cmocka_run_group_tests_name("plan_shape", tests, NULL, NULL);
}
