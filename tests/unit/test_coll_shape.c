/*
 * Collectives over HyperX and torus fabrics: the shape algorithms' schedules pass the checker
 * on the shape's circuits and cost what their formulas say; the full-mesh algorithms are
 * refused where their circuits are missing; the selection and the traffic profile.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "coll.h"

static void assert_close(double got, double want)
{
	if (fabs(got - want) > 1e-9 * fmax(1.0, fabs(want)))
		fail_msg("got %.12g, want %.12g", got, want);
}

static struct coll_params shaped(enum coll_topology t, uint32_t dims, uint32_t k0, uint32_t k1,
                                 uint32_t k2)
{
	struct coll_params p;

	coll_params_default(&p);
	p.shape.topology = t;
	p.shape.dims = dims;
	p.shape.k[0] = k0;
	p.shape.k[1] = k1;
	p.shape.k[2] = k2;
	return p;
}

static uint32_t servers_of(const struct coll_params *p)
{
	uint32_t m = 1;

	for (uint32_t i = 0; i < p->shape.dims; i++)
		m *= p->shape.k[i];
	return m;
}

/*
 * Generate on the shape, check (every transfer on one of its circuits, every server ends
 * with what it must), and hold the schedule to the formula: rounds, messages, circuits, time.
 */
static void gen_check_price(enum coll_collective c, enum coll_algorithm a,
                            const struct coll_params *p)
{
	uint32_t M = servers_of(p);
	/* Every chunk the same size: 2M chunks (torus halves) or M(M-1) blocks. */
	uint64_t q = (uint64_t)M * 2 * 1000;
	struct coll_schedule s;
	struct coll_error err = { 0 };
	struct coll_schedule_stats st;
	struct coll_estimate est;
	double us;
	int rc = coll_generate(c, a, M, 1, q, p, &s, &err);

	if (rc)
		fail_msg("generate %s/%s on %u: %d %s", coll_collective_name(c),
		         coll_algorithm_name(a), M, rc, err.reason);
	rc = coll_check(&s, &err);
	if (rc)
		fail_msg("check %s/%s on %u (%u x %u x %u): %s", coll_collective_name(c),
		         coll_algorithm_name(a), M, p->shape.k[0], p->shape.k[1], p->shape.k[2],
		         err.reason);
	assert_int_equal(coll_schedule_stats(&s, &st), 0);
	assert_int_equal(coll_predict(c, a, q, M, 1, p, &est, &err), 0);
	assert_int_equal(st.rounds, est.rounds);
	assert_int_equal(st.inter_messages, est.inter_messages);
	assert_int_equal(st.intra_messages, 0);
	assert_int_equal(st.max_circuit_load, 1);
	assert_int_equal(st.max_degree, est.circuits);
	assert_int_equal(est.circuits, coll_shape_degree(&p->shape, M));
	assert_true(est.scheduled);
	assert_int_equal(coll_schedule_cost(&s, p, &us), 0);
	assert_close(us, est.predicted_us);
	coll_schedule_free(&s);
}

static const uint32_t HYPERX[][3] = {
	{ 2, 2, 1 }, { 3, 4, 1 }, { 4, 4, 2 }, { 3, 1, 4 }, { 5, 1, 1 }, { 2, 3, 2 }, { 4, 4, 4 },
};
static const uint32_t TORUS[][3] = {
	{ 3, 3, 1 }, { 4, 4, 1 }, { 2, 3, 4 }, { 5, 1, 1 },
	{ 1, 4, 1 }, { 2, 2, 1 }, { 5, 3, 1 }, { 4, 4, 4 },
};

static uint32_t dims_of(const uint32_t k[3])
{
	return k[2] > 1 ? 3 : k[1] > 1 ? 2 : 1;
}

static void test_hyperx_schedules(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(HYPERX) / sizeof(HYPERX[0]); i++) {
		const uint32_t *k = HYPERX[i];
		struct coll_params p = shaped(COLL_TOPO_HYPERX, dims_of(k), k[0], k[1], k[2]);

		gen_check_price(COLL_ALLREDUCE, COLL_ALG_HYPERX_DIM, &p);
		gen_check_price(COLL_ALLGATHER, COLL_ALG_HYPERX_DIM, &p);
		gen_check_price(COLL_BROADCAST, COLL_ALG_HYPERX_DIM, &p);
		p.root = servers_of(&p) - 1;
		gen_check_price(COLL_BROADCAST, COLL_ALG_HYPERX_DIM, &p);
		if (servers_of(&p) <= 64)
			gen_check_price(COLL_ALLTOALL, COLL_ALG_HYPERX_A2A, &p);
	}
}

static void test_torus_schedules(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(TORUS) / sizeof(TORUS[0]); i++) {
		const uint32_t *k = TORUS[i];
		struct coll_params p = shaped(COLL_TOPO_TORUS, dims_of(k), k[0], k[1], k[2]);

		gen_check_price(COLL_ALLREDUCE, COLL_ALG_TORUS_RING, &p);
		gen_check_price(COLL_ALLGATHER, COLL_ALG_TORUS_RING, &p);
		/* Roots at a corner, the far corner and inside: every ring's start differs. */
		for (uint32_t root = 0; root < servers_of(&p); root += servers_of(&p) / 3 + 1) {
			p.root = root;
			gen_check_price(COLL_BROADCAST, COLL_ALG_TORUS_RING, &p);
		}
		p.root = servers_of(&p) - 1;
		gen_check_price(COLL_BROADCAST, COLL_ALG_TORUS_RING, &p);
		if (servers_of(&p) <= 64)
			gen_check_price(COLL_ALLTOALL, COLL_ALG_TORUS_A2A, &p);
	}
}

/* 1 x 4 keeps its size-1 dimension first: the grid's strides skip it. */
static void test_size_one_dimension_first(void **state)
{
	struct coll_params p = shaped(COLL_TOPO_TORUS, 3, 1, 4, 3);

	(void)state;
	gen_check_price(COLL_ALLREDUCE, COLL_ALG_TORUS_RING, &p);
	gen_check_price(COLL_ALLTOALL, COLL_ALG_TORUS_A2A, &p);
	p.shape.topology = COLL_TOPO_HYPERX;
	gen_check_price(COLL_ALLREDUCE, COLL_ALG_HYPERX_DIM, &p);
	gen_check_price(COLL_ALLTOALL, COLL_ALG_HYPERX_A2A, &p);
}

static void test_circuits(void **state)
{
	struct coll_params h = shaped(COLL_TOPO_HYPERX, 2, 3, 4, 0);
	struct coll_params t = shaped(COLL_TOPO_TORUS, 3, 2, 3, 4);

	(void)state;
	/* 3 x 4 HyperX: 0 = (0,0) joins (1,0), (2,0) and (0,1..3), not (1,1). */
	assert_true(coll_shape_has_circuit(&h.shape, 12, 0, 2));
	assert_true(coll_shape_has_circuit(&h.shape, 12, 0, 9));
	assert_false(coll_shape_has_circuit(&h.shape, 12, 0, 4));
	assert_int_equal(coll_shape_degree(&h.shape, 12), 2 + 3);
	/* 2 x 3 x 4 torus: one neighbour on the 2, two on the 3 and on the 4. */
	assert_int_equal(coll_shape_degree(&t.shape, 24), 1 + 2 + 2);
	assert_true(coll_shape_has_circuit(&t.shape, 24, 0, 1));
	assert_true(coll_shape_has_circuit(&t.shape, 24, 0, 4));   /* (0,2,0): wraps */
	assert_true(coll_shape_has_circuit(&t.shape, 24, 0, 18));  /* (0,0,3): wraps */
	assert_false(coll_shape_has_circuit(&t.shape, 24, 0, 12)); /* (0,0,2): two steps */
	assert_false(coll_shape_has_circuit(&t.shape, 24, 0, 3));  /* (1,1,0) */
	assert_true(coll_shape_has_circuit(NULL, 24, 0, 12));
}

static void test_full_mesh_algorithms_on_shapes(void **state)
{
	struct coll_params p = shaped(COLL_TOPO_HYPERX, 2, 3, 4, 0);
	struct coll_estimate est;
	struct coll_error err = { 0 };
	struct coll_schedule s;

	(void)state;
	/* The ring 0 -> 1 -> 2 -> 3: (2,0) -> (0,1) is no line. */
	assert_int_equal(coll_predict(COLL_ALLREDUCE, COLL_ALG_RING, 1200, 12, 1, &p, &est, &err),
	                 -EDOM);
	assert_non_null(strstr(err.reason, "between servers 2 and 3"));
	assert_non_null(strstr(err.reason, "3 x 4 HyperX"));
	assert_int_equal(
	    coll_predict(COLL_ALLREDUCE, COLL_ALG_FULL_MESH_DIRECT, 1200, 12, 1, &p, &est, &err),
	    -EDOM);
	assert_int_equal(
	    coll_generate(COLL_ALLREDUCE, COLL_ALG_FULL_MESH_DIRECT, 12, 1, 1200, &p, &s, &err),
	    -EDOM);
	assert_int_equal(coll_predict(COLL_ALLTOALL, COLL_ALG_DIRECT, 1200, 12, 11, &p, &est, &err),
	                 -EDOM);
	assert_int_equal(
	    coll_predict(COLL_ALLGATHER, COLL_ALG_FULL_MESH_DIRECT, 1200, 12, 1, &p, &est, &err),
	    -EDOM);

	/* Recursive halving on a 4 x 4 HyperX flips one bit of one coordinate: on a line. */
	p = shaped(COLL_TOPO_HYPERX, 2, 4, 4, 0);
	assert_int_equal(coll_predict(COLL_ALLREDUCE, COLL_ALG_RHD, 3200, 16, 1, &p, &est, &err),
	                 0);
	assert_int_equal(coll_generate(COLL_ALLREDUCE, COLL_ALG_RHD, 16, 1, 3200, &p, &s, &err), 0);
	assert_int_equal(coll_check(&s, &err), 0);
	coll_schedule_free(&s);
	/* ... but on a 4 x 4 torus the partner two steps away is no neighbour. */
	p.shape.topology = COLL_TOPO_TORUS;
	assert_int_equal(coll_predict(COLL_ALLREDUCE, COLL_ALG_RHD, 3200, 16, 1, &p, &est, &err),
	                 -EDOM);
	/* A one-dimensional torus is a ring. */
	p = shaped(COLL_TOPO_TORUS, 1, 7, 0, 0);
	assert_int_equal(coll_predict(COLL_ALLREDUCE, COLL_ALG_RING, 1400, 7, 1, &p, &est, &err),
	                 0);
	assert_int_equal(est.circuits, 2);

	/* A shape algorithm runs on its own shape only. */
	coll_params_default(&p);
	assert_int_equal(
	    coll_predict(COLL_ALLREDUCE, COLL_ALG_HYPERX_DIM, 1600, 16, 1, &p, &est, &err), -EDOM);
	assert_non_null(strstr(err.reason, "runs on a HyperX fabric"));
	assert_int_equal(
	    coll_generate(COLL_ALLREDUCE, COLL_ALG_TORUS_RING, 16, 1, 1600, &p, &s, &err), -EDOM);
}

static void test_checker_refuses_missing_circuit(void **state)
{
	struct coll_schedule s;
	struct coll_error err = { 0 };

	(void)state;
	assert_int_equal(
	    coll_generate(COLL_ALLREDUCE, COLL_ALG_FULL_MESH_DIRECT, 16, 1, 1600, NULL, &s, &err),
	    0);
	assert_int_equal(coll_check(&s, &err), 0);
	s.shape.topology = COLL_TOPO_HYPERX;
	s.shape.dims = 2;
	s.shape.k[0] = s.shape.k[1] = 4;
	assert_int_equal(coll_check(&s, &err), -EINVAL);
	assert_non_null(strstr(err.reason, "no circuit joins servers 0 and 5 in the 4 x 4 HyperX"));
	s.shape.k[1] = 5;
	assert_int_equal(coll_check(&s, &err), -EINVAL);
	assert_string_equal(err.field, "shape");
	coll_schedule_free(&s);
}

static void test_shape_validation(void **state)
{
	struct coll_params p = shaped(COLL_TOPO_HYPERX, 2, 4, 4, 0);
	struct coll_selection sel;
	struct coll_error err = { 0 };

	(void)state;
	assert_int_equal(coll_select(COLL_ALLREDUCE, 1024, 12, 1, &p, &sel, &err), -EINVAL);
	assert_string_equal(err.field, "shape");
	assert_non_null(strstr(err.reason, "16 servers, not 12"));
	p.shape.dims = 0;
	assert_int_equal(coll_shape_validate(&p.shape, 16, &err), -EINVAL);
	p.shape.dims = 5;
	assert_int_equal(coll_shape_validate(&p.shape, 16, &err), -EINVAL);
	p.shape.dims = 2;
	p.shape.k[1] = 0;
	assert_int_equal(coll_shape_validate(&p.shape, 16, &err), -EINVAL);
	p.shape.topology = (enum coll_topology)7;
	assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
	assert_string_equal(err.field, "shape");
	assert_int_equal(coll_shape_validate(NULL, 16, &err), 0);
}

static const struct coll_candidate *cand(const struct coll_selection *sel, enum coll_algorithm a)
{
	for (uint32_t i = 0; i < sel->ncandidates; i++)
		if (sel->candidates[i].algorithm == a)
			return &sel->candidates[i];
	fail_msg("no candidate %s", coll_algorithm_name(a));
	return NULL;
}

static void test_select_on_shapes(void **state)
{
	struct coll_params p = shaped(COLL_TOPO_HYPERX, 2, 4, 4, 0);
	struct coll_selection sel;
	struct coll_error err = { 0 };

	(void)state;
	assert_int_equal(coll_select(COLL_ALLREDUCE, 64 << 20, 16, 1, &p, &sel, &err), 0);
	assert_int_equal(sel.ncandidates, 10);
	assert_string_equal(sel.candidates[sel.chosen].name, "hyperx-dim-ordered");
	assert_false(cand(&sel, COLL_ALG_FULL_MESH_DIRECT)->eligible);
	assert_false(cand(&sel, COLL_ALG_RING)->eligible);
	assert_true(cand(&sel, COLL_ALG_RHD)->eligible);
	assert_false(cand(&sel, COLL_ALG_TORUS_RING)->eligible);
	assert_non_null(strstr(cand(&sel, COLL_ALG_TORUS_RING)->reason, "runs on a torus"));

	assert_int_equal(coll_select(COLL_ALLTOALL, 1 << 20, 16, 1, &p, &sel, &err), 0);
	assert_int_equal(sel.ncandidates, 4);
	assert_string_equal(sel.candidates[sel.chosen].name, "hyperx-dim-ordered-a2a");

	p.shape.topology = COLL_TOPO_TORUS;
	assert_int_equal(coll_select(COLL_ALLREDUCE, 64 << 20, 16, 1, &p, &sel, &err), 0);
	assert_string_equal(sel.candidates[sel.chosen].name, "torus-ring");
	assert_int_equal(coll_select(COLL_ALLTOALL, 1 << 20, 16, 1, &p, &sel, &err), 0);
	assert_string_equal(sel.candidates[sel.chosen].name, "torus-dim-ordered-a2a");
	/* Broadcast on a 4 x 4 torus: binomial from 0 needs 0 -> 2; the rings carry it. */
	assert_int_equal(coll_select(COLL_BROADCAST, 1 << 20, 16, 1, &p, &sel, &err), 0);
	assert_false(cand(&sel, COLL_ALG_BINOMIAL_TREE)->eligible);
	assert_string_equal(sel.candidates[sel.chosen].name, "torus-ring");
}

/*
 * The worked example of docs/cost-model.md: 1,024 servers as 32 x 32, 64 MiB allreduce with
 * the defaults: 4 alpha + 2 (n/32 + n/1024) beta + (1023/1024) n gamma.
 */
static void test_formulas_by_hand(void **state)
{
	struct coll_params p = shaped(COLL_TOPO_HYPERX, 2, 32, 32, 0);
	const double n = 64.0 * (1 << 20), b = 1.0 / (125.0 * 200), g = 0.01 / 1000;
	struct coll_estimate est;

	(void)state;
	assert_int_equal(
	    coll_predict(COLL_ALLREDUCE, COLL_ALG_HYPERX_DIM, 64ull << 20, 1024, 1, &p, &est, NULL),
	    0);
	assert_close(est.predicted_us, 4 * 3.0 + 2 * (n / 32 + n / 1024) * b + n * 1023 / 1024 * g);
	assert_int_equal(est.rounds, 4);
	assert_int_equal(est.circuits, 62);
	assert_int_equal(est.inter_messages, 2ull * 1024 * 31 * 2);
	/* All-to-all of 64 MiB per server: two hops of q/32 each. */
	assert_int_equal(
	    coll_predict(COLL_ALLTOALL, COLL_ALG_HYPERX_A2A, 64ull << 20, 1024, 1, &p, &est, NULL),
	    0);
	assert_close(est.predicted_us, 2 * (3.0 + n / 32 * b));
	/* Devices carry their buffers through their server. */
	assert_int_equal(
	    coll_predict(COLL_ALLTOALL, COLL_ALG_HYPERX_A2A, 64ull << 20, 1024, 4, &p, &est, NULL),
	    0);
	assert_close(est.predicted_us, 2 * (3.0 + 4 * n / 32 * b));
	/* 32 x 32 torus: per dimension 31 steps each way of n_i/64; the a2a 16 steps. */
	p.shape.topology = COLL_TOPO_TORUS;
	assert_int_equal(
	    coll_predict(COLL_ALLREDUCE, COLL_ALG_TORUS_RING, 64ull << 20, 1024, 1, &p, &est, NULL),
	    0);
	assert_close(est.predicted_us, 4 * 31 * 3.0 + 2 * 31 * (n / 64 + n / 32 / 64) * b +
	                                   31 * (n / 32 + n / 1024) * g);
	assert_int_equal(
	    coll_predict(COLL_ALLTOALL, COLL_ALG_TORUS_A2A, 64ull << 20, 1024, 1, &p, &est, NULL),
	    0);
	assert_close(est.predicted_us, 2 * (16 * 3.0 + 16 * 17 / 2 * (n / 32) * b));
	assert_int_equal(est.rounds, 32);
}

static void test_profile(void **state)
{
	struct coll_shape shapes[3] = {
		{ .topology = COLL_TOPO_FULL_MESH },
		{ .topology = COLL_TOPO_HYPERX, .dims = 2, .k = { 4, 4 } },
		{ .topology = COLL_TOPO_TORUS, .dims = 2, .k = { 4, 4 } },
	};
	struct coll_shape_price out[3];
	struct coll_error err = { 0 };
	enum coll_traffic t;
	int best;

	(void)state;
	/* 16 servers of 15 devices: the full mesh can be built and wins. */
	assert_int_equal(
	    coll_profile_shapes(COLL_TRAFFIC_MIXED, shapes, 3, 16, 15, NULL, out, &best, &err), 0);
	assert_int_equal(best, 0);
	for (int i = 0; i < 3; i++) {
		assert_true(out[i].eligible);
		assert_close(out[i].predicted_us, out[i].allreduce_us + out[i].alltoall_us);
	}
	assert_int_equal(out[1].allreduce, COLL_ALG_HYPERX_DIM);
	assert_int_equal(out[2].alltoall, COLL_ALG_TORUS_A2A);
	assert_true(out[1].predicted_us < out[2].predicted_us);
	/* One device per server: no full-mesh all-to-all (the plan needs 15 devices). */
	assert_int_equal(
	    coll_profile_shapes(COLL_TRAFFIC_ALLTOALL, shapes, 3, 16, 1, NULL, out, &best, &err),
	    0);
	assert_false(out[0].eligible);
	assert_non_null(strstr(out[0].reason, "no alltoall algorithm fits"));
	assert_int_equal(best, 1);
	assert_close(out[1].allreduce_us, 0);
	assert_int_equal(
	    coll_profile_shapes(COLL_TRAFFIC_ALLREDUCE, shapes, 3, 16, 1, NULL, out, &best, &err),
	    0);
	assert_int_equal(out[1].alltoall, COLL_ALGORITHM__COUNT);
	/* A shape of the wrong size is an error, not a price. */
	assert_int_equal(
	    coll_profile_shapes(COLL_TRAFFIC_ALLREDUCE, shapes, 3, 12, 1, NULL, out, &best, &err),
	    -EINVAL);
	assert_string_equal(err.field, "shape");
	assert_int_equal(coll_traffic_from_name("mixed", &t), 0);
	assert_int_equal(t, COLL_TRAFFIC_MIXED);
	assert_int_equal(coll_traffic_from_name("bogus", &t), -EINVAL);
	assert_string_equal(coll_traffic_name(COLL_TRAFFIC_ALLTOALL), "alltoall");
}

static void test_names(void **state)
{
	enum coll_algorithm a;
	enum coll_topology t;

	(void)state;
	assert_int_equal(coll_algorithm_from_name("hyperx-dim-ordered", &a), 0);
	assert_int_equal(a, COLL_ALG_HYPERX_DIM);
	assert_string_equal(coll_algorithm_name(COLL_ALG_HYPERX_A2A), "hyperx-dim-ordered-a2a");
	assert_string_equal(coll_algorithm_name(COLL_ALG_TORUS_RING), "torus-ring");
	assert_string_equal(coll_algorithm_name(COLL_ALG_TORUS_A2A), "torus-dim-ordered-a2a");
	assert_int_equal(coll_topology_from_name("torus", &t), 0);
	assert_int_equal(t, COLL_TOPO_TORUS);
	assert_string_equal(coll_topology_name(COLL_TOPO_HYPERX), "hyperx");
	assert_null(coll_topology_name(COLL_TOPOLOGY__COUNT));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hyperx_schedules),
		cmocka_unit_test(test_torus_schedules),
		cmocka_unit_test(test_size_one_dimension_first),
		cmocka_unit_test(test_circuits),
		cmocka_unit_test(test_full_mesh_algorithms_on_shapes),
		cmocka_unit_test(test_checker_refuses_missing_circuit),
		cmocka_unit_test(test_shape_validation),
		cmocka_unit_test(test_select_on_shapes),
		cmocka_unit_test(test_formulas_by_hand),
		cmocka_unit_test(test_profile),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
