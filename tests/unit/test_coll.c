/*
 * Collectives over the fabric: schedules, the checker, costs, the selector and the window
 * protocol of in-network aggregation (documents 001-004 of the spec page).
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
#include "plan.h"

static void expect_reject(const struct coll_schedule *s, const char *needle);

/* a=0 b=1 d=2 c=3 e=4 f=5 h=6 g=7 (bit 0 = x, bit 1 = y, bit 2 = z). */
enum { A = 0, B = 1, D = 2, C = 3, E = 4, F = 5, H = 6, G = 7 };

static void assert_close(double got, double want)
{
	double tol = 1e-9 * fmax(1.0, fabs(want));

	if (fabs(got - want) > tol)
		fail_msg("got %.12g, want %.12g", got, want);
}

static struct coll_schedule gen_ok(enum coll_collective c, enum coll_algorithm a, uint32_t M,
                                   uint32_t devices, uint64_t q, const struct coll_params *p)
{
	struct coll_schedule s;
	struct coll_error err = { 0 };
	int rc = coll_generate(c, a, M, devices, q, p, &s, &err);

	if (rc)
		fail_msg("generate %s/%s M=%u: %d %s", coll_collective_name(c),
		         coll_algorithm_name(a), M, rc, err.reason);
	return s;
}

/*
 * Generate, check, and hold the schedule to the closed form: rounds, messages, circuits
 * and time (q is chosen so that every chunk has the same size).
 */
static void gen_check_price(enum coll_collective c, enum coll_algorithm a, uint32_t M,
                            uint32_t devices, uint64_t q, const struct coll_params *p)
{
	struct coll_schedule s = gen_ok(c, a, M, devices, q, p);
	struct coll_error err = { 0 };
	struct coll_schedule_stats st;
	struct coll_estimate est;
	double us;
	int rc = coll_check(&s, &err);

	if (rc)
		fail_msg("check %s/%s M=%u devices=%u: %s", coll_collective_name(c),
		         coll_algorithm_name(a), M, devices, err.reason);
	assert_int_equal(coll_schedule_stats(&s, &st), 0);
	assert_int_equal(coll_predict(c, a, q, M, devices, p, &est, &err), 0);
	assert_int_equal(st.rounds, est.rounds);
	assert_int_equal(st.inter_messages, est.inter_messages);
	assert_int_equal(st.intra_messages, est.intra_messages);
	/* What the checker held every round to is what the busiest circuit carries. */
	if (st.inter_messages)
		assert_int_equal(st.max_circuit_load, s.circuit_load ? s.circuit_load : 1);
	if (c != COLL_ALLTOALL)
		assert_int_equal(st.max_degree, est.circuits);
	else
		assert_int_equal(est.circuits, M - 1);
	assert_true(est.scheduled);
	assert_int_equal(coll_schedule_cost(&s, p, &us), 0);
	assert_close(us, est.predicted_us);
	coll_schedule_free(&s);
}

static void test_rounds_8_servers(void **state)
{
	static const struct {
		enum coll_algorithm a;
		uint32_t rounds;
	} want[] = {
		{ COLL_ALG_RING, 14 },    { COLL_ALG_BIDIR_RING, 14 },
		{ COLL_ALG_CUBE_300, 8 }, { COLL_ALG_CUBE_400, 6 },
		{ COLL_ALG_RHD, 6 },      { COLL_ALG_FULL_MESH_DIRECT, 2 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct coll_schedule s = gen_ok(COLL_ALLREDUCE, want[i].a, 8, 1, 12000, NULL);
		struct coll_estimate est;

		assert_int_equal(s.nrounds, want[i].rounds);
		assert_int_equal(coll_check(&s, NULL), 0);
		assert_int_equal(
		    coll_predict(COLL_ALLREDUCE, want[i].a, 12000, 8, 1, NULL, &est, NULL), 0);
		assert_int_equal(est.rounds, want[i].rounds);
		coll_schedule_free(&s);
	}
}

/* Does round r hold transfer src->dst, and which segment (chunk / 4) does it carry? */
static int find_transfer(const struct coll_schedule *s, uint32_t r, uint32_t src, uint32_t dst)
{
	for (uint32_t i = 0; i < s->rounds[r].count; i++) {
		const struct coll_transfer *t = coll_round_transfer(s, r, i);

		if (t->src == src && t->dst == dst)
			return (int)(coll_transfer_chunks(s, t)[0] / 4);
	}
	return -1;
}

static void test_cube_faces(void **state)
{
	(void)state;
	for (int m = 0; m < 2; m++) {
		enum coll_algorithm a = m ? COLL_ALG_CUBE_400 : COLL_ALG_CUBE_300;
		struct coll_schedule s = gen_ok(COLL_ALLREDUCE, a, 8, 1, 12000, NULL);
		struct coll_schedule_stats st;

		/* adeh (segment 0) turns a->e->h->d->a, not the raw text's a->d->h->e. */
		assert_int_equal(find_transfer(&s, 0, A, E), 0);
		assert_int_equal(find_transfer(&s, 0, E, H), 0);
		assert_int_equal(find_transfer(&s, 0, H, D), 0);
		assert_int_equal(find_transfer(&s, 0, D, A), 0);
		/* abcd (segment 2) a->d->c->b, abef (segment 1) a->b->f->e. */
		assert_int_equal(find_transfer(&s, 0, A, D), 2);
		assert_int_equal(find_transfer(&s, 0, D, C), 2);
		assert_int_equal(find_transfer(&s, 0, A, B), 1);
		assert_int_equal(find_transfer(&s, 0, F, E), 1);
		/* Every round uses each of the 24 directed edges once, and only cube edges. */
		for (uint32_t r = 0; r < s.nrounds; r++) {
			assert_int_equal(s.rounds[r].count, 24);
			for (uint32_t i = 0; i < 24; i++) {
				const struct coll_transfer *t = coll_round_transfer(&s, r, i);
				int back = find_transfer(&s, r, t->dst, t->src);

				assert_int_equal(__builtin_popcount(t->src ^ t->dst), 1);
				assert_true(back >= 0);
				/* Ring rounds: the two faces sharing an edge go opposite ways. */
				if (r < 3)
					assert_int_not_equal(
					    back, (int)coll_transfer_chunks(&s, t)[0] / 4);
			}
		}
		assert_int_equal(coll_schedule_stats(&s, &st), 0);
		assert_int_equal(st.max_degree, 3);
		assert_int_equal(coll_check(&s, NULL), 0);
		coll_schedule_free(&s);
	}
}

/* The raw text's adeh ring a->d->h->e would share directed edges with abcd and abef. */
static void test_cube_raw_text_direction_rejected(void **state)
{
	struct coll_schedule s = gen_ok(COLL_ALLREDUCE, COLL_ALG_CUBE_300, 8, 1, 12000, NULL);
	uint32_t face = 1u << A | 1u << D | 1u << E | 1u << H;

	(void)state;
	for (uint32_t i = 0; i < s.rounds[0].count; i++) {
		struct coll_transfer *t = &s.transfers[s.rounds[0].first + i];

		if (coll_transfer_chunks(&s, t)[0] / 4 == 0 && (face >> t->src & 1) &&
		    (face >> t->dst & 1)) {
			uint32_t x = t->src;

			t->src = t->dst;
			t->dst = x;
		}
	}
	expect_reject(&s, "link direction already used");
	coll_schedule_free(&s);
}

static void test_check_allreduce_every_size(void **state)
{
	(void)state;
	for (uint32_t M = 2; M <= 64; M++) {
		uint64_t q = (uint64_t)M * 2 * 1000;

		gen_check_price(COLL_ALLREDUCE, COLL_ALG_RING, M, 1, q, NULL);
		gen_check_price(COLL_ALLREDUCE, COLL_ALG_FULL_MESH_DIRECT, M, 1, q, NULL);
		if (M >= 3)
			gen_check_price(COLL_ALLREDUCE, COLL_ALG_BIDIR_RING, M, 1, q, NULL);
		if (!(M & (M - 1)))
			gen_check_price(COLL_ALLREDUCE, COLL_ALG_RHD, M, 1, q, NULL);
	}
	gen_check_price(COLL_ALLREDUCE, COLL_ALG_CUBE_300, 8, 1, 12000, NULL);
	gen_check_price(COLL_ALLREDUCE, COLL_ALG_CUBE_400, 8, 1, 12000, NULL);
	/* Uneven chunks still check (the formula is then only approximate). */
	for (uint32_t M = 2; M <= 9; M++) {
		struct coll_schedule s = gen_ok(COLL_ALLREDUCE, COLL_ALG_RING, M, 1, 7, NULL);

		assert_int_equal(coll_check(&s, NULL), 0);
		coll_schedule_free(&s);
	}
}

static void test_check_allgather_broadcast_every_size(void **state)
{
	struct coll_params p;

	(void)state;
	coll_params_default(&p);
	for (uint32_t M = 2; M <= 64; M++) {
		uint64_t q = (uint64_t)M * 1000;

		gen_check_price(COLL_ALLGATHER, COLL_ALG_RING, M, 1, q, NULL);
		gen_check_price(COLL_ALLGATHER, COLL_ALG_FULL_MESH_DIRECT, M, 1, q, NULL);
		if (!(M & (M - 1)))
			gen_check_price(COLL_ALLGATHER, COLL_ALG_RECURSIVE_DOUBLING, M, 1, q, NULL);
		for (p.root = 0; p.root < M; p.root += M - 1) {
			gen_check_price(COLL_BROADCAST, COLL_ALG_BINOMIAL_TREE, M, 1, q, &p);
			gen_check_price(COLL_BROADCAST, COLL_ALG_FULL_MESH_DIRECT, M, 1, q, &p);
			gen_check_price(COLL_BROADCAST, COLL_ALG_SCATTER_ALLGATHER, M, 1, q, &p);
		}
	}
}

static void test_alltoall_counts(void **state)
{
	uint64_t inter, intra;

	(void)state;
	/* FIG. 4: 2 nodes x 4 accelerators. */
	assert_int_equal(coll_alltoall_counts(COLL_ALG_DIRECT, 2, 4, &inter, &intra), 0);
	assert_int_equal(inter, 32);
	assert_int_equal(coll_alltoall_counts(COLL_ALG_PLANE_RELAYED, 2, 4, &inter, &intra), 0);
	assert_int_equal(inter, 8);
	assert_int_equal(intra, 24);
	/* FIG. 5: 8 nodes x 4 accelerators. */
	assert_int_equal(coll_alltoall_counts(COLL_ALG_DIRECT, 8, 4, &inter, &intra), 0);
	assert_int_equal(inter, 896);
	assert_int_equal(coll_alltoall_counts(COLL_ALG_PLANE_RELAYED, 8, 4, &inter, &intra), 0);
	assert_int_equal(inter, 224);
	assert_int_equal(intra, 96);
	/* Any size, without overflow up to the 32-bit limits. */
	assert_int_equal(coll_alltoall_counts(COLL_ALG_PLANE_RELAYED, 1000, 16, &inter, &intra), 0);
	assert_int_equal(inter, 16ull * 1000 * 999);
	assert_int_equal(intra, 1000ull * 16 * 15);
	assert_int_equal(
	    coll_alltoall_counts(COLL_ALG_DIRECT, UINT32_MAX, UINT32_MAX, &inter, &intra),
	    -EOVERFLOW);
	assert_int_equal(coll_alltoall_counts(COLL_ALG_RING, 2, 4, &inter, &intra), -EINVAL);
	assert_int_equal(coll_alltoall_counts(COLL_ALG_DIRECT, 0, 4, &inter, &intra), -EINVAL);
}

/* Formulas 1 and 3 put every pair of servers on one plane: the device of both ends. */
static void test_plan_circuit_device(void **state)
{
	(void)state;
	for (uint32_t M = 2; M <= 40; M++) {
		int f = M % 2 ? 1 : 3;

		for (uint32_t s = 0; s < M; s++)
			for (uint32_t d = 0; d < plan_planes(M, PLAN_FORMULA_AUTO); d++) {
				uint32_t t = f == 1 ? plan_formula1_dst(M, s, d)
				                    : plan_formula3_dst(M, s, d);

				if (t == s)
					continue;
				assert_int_equal(coll_plan_circuit_device(M, s, t), d);
				assert_int_equal(coll_plan_circuit_device(M, t, s), d);
			}
	}
}

static void test_alltoall_schedules(void **state)
{
	static const uint32_t sizes[][2] = { { 2, 4 }, { 3, 3 },  { 3, 4 }, { 4, 3 }, { 4, 4 },
		                             { 5, 5 }, { 6, 5 },  { 8, 7 }, { 8, 8 }, { 1, 4 },
		                             { 2, 1 }, { 4, 16 }, { 2, 32 } };
	struct coll_params p;

	(void)state;
	coll_params_default(&p);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t S = sizes[i][0], Dv = sizes[i][1];
		uint64_t q = (uint64_t)S * Dv * 1000;

		gen_check_price(COLL_ALLTOALL, COLL_ALG_DIRECT, S, Dv, q, NULL);
		gen_check_price(COLL_ALLTOALL, COLL_ALG_PLANE_RELAYED, S, Dv, q, NULL);
		/* In-server links slower than the circuits: the hops decide. */
		p.intra_gbps = 50;
		gen_check_price(COLL_ALLTOALL, COLL_ALG_DIRECT, S, Dv, q * 1000, &p);
		gen_check_price(COLL_ALLTOALL, COLL_ALG_PLANE_RELAYED, S, Dv, q * 1000, &p);
		p.intra_gbps = 400;
	}
	{
		/*
		 * Circuits moved off their planes (after a re-plan): 4 servers of 4 devices,
		 * every circuit on device 3 of its lower server and device 0 of the other. The
		 * price follows the map, and still equals the schedule's.
		 */
		uint32_t map[16];

		for (uint32_t a = 0; a < 4; a++)
			for (uint32_t b = 0; b < 4; b++)
				map[a * 4 + b] = a < b ? 3 : 0;
		p.circuit_device = map;
		gen_check_price(COLL_ALLTOALL, COLL_ALG_DIRECT, 4, 4, 16000, &p);
		gen_check_price(COLL_ALLTOALL, COLL_ALG_PLANE_RELAYED, 4, 4, 16000000, &p);
		p.circuit_device = NULL;
	}
	{
		/* FIG. 5: the counts hold whatever the circuits (no price without them). */
		struct coll_schedule s =
		    gen_ok(COLL_ALLTOALL, COLL_ALG_PLANE_RELAYED, 8, 4, 3200, NULL);
		struct coll_schedule_stats st;

		assert_int_equal(coll_check(&s, NULL), 0);
		assert_int_equal(coll_schedule_stats(&s, &st), 0);
		assert_int_equal(st.inter_messages, 224);
		assert_int_equal(st.intra_messages, 96);
		assert_int_equal(st.rounds, 3 + 7);
		/* 4 relays over 7 circuits: one message each per round. */
		assert_int_equal(st.max_circuit_load, 1);
		coll_schedule_free(&s);
		s = gen_ok(COLL_ALLTOALL, COLL_ALG_DIRECT, 8, 4, 3200, NULL);
		assert_int_equal(coll_schedule_stats(&s, &st), 0);
		assert_int_equal(st.inter_messages, 896);
		coll_schedule_free(&s);
	}
}

/* Copy @s through the builder, leaving out transfer @skip (global index). */
static void copy_without(const struct coll_schedule *s, uint32_t skip, struct coll_schedule *out)
{
	assert_int_equal(coll_schedule_init(out, s->collective, s->algorithm, s->servers,
	                                    s->devices, s->nchunks),
	                 0);
	out->circuit_load = s->circuit_load;
	memcpy(out->chunks, s->chunks, s->nchunks * sizeof(*s->chunks));
	for (uint32_t r = 0; r < s->nrounds; r++) {
		assert_int_equal(coll_schedule_add_round(out), 0);
		for (uint32_t i = 0; i < s->rounds[r].count; i++) {
			const struct coll_transfer *t = coll_round_transfer(s, r, i);

			if (s->rounds[r].first + i == skip)
				continue;
			assert_int_equal(coll_schedule_add_transfer(out, t->src, t->dst, t->op,
			                                            coll_transfer_chunks(s, t),
			                                            t->nchunks),
			                 0);
		}
	}
}

static void expect_reject(const struct coll_schedule *s, const char *needle)
{
	struct coll_error err = { 0 };

	assert_int_equal(coll_check(s, &err), -EINVAL);
	if (!strstr(err.reason, needle))
		fail_msg("reason \"%s\" lacks \"%s\"", err.reason, needle);
}

static void test_checker_dropped_transfer(void **state)
{
	static const enum coll_algorithm algs[] = { COLL_ALG_RING, COLL_ALG_CUBE_400,
		                                    COLL_ALG_FULL_MESH_DIRECT };

	(void)state;
	for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
		struct coll_schedule s = gen_ok(COLL_ALLREDUCE, algs[a], 8, 1, 12000, NULL);

		/* Whichever transfer goes missing, the checker notices. */
		for (uint32_t k = 0; k < s.ntransfers; k++) {
			struct coll_schedule broken;

			copy_without(&s, k, &broken);
			assert_int_equal(coll_check(&broken, NULL), -EINVAL);
			coll_schedule_free(&broken);
		}
		coll_schedule_free(&s);
	}
	{
		struct coll_schedule s = gen_ok(COLL_ALLREDUCE, COLL_ALG_RING, 5, 1, 5000, NULL);
		struct coll_schedule broken;

		copy_without(&s, 0, &broken);
		expect_reject(&broken, "with 4 of 5 contributions");
		coll_schedule_free(&broken);
		coll_schedule_free(&s);
	}
	{
		struct coll_schedule s =
		    gen_ok(COLL_ALLTOALL, COLL_ALG_PLANE_RELAYED, 2, 4, 800, NULL);
		struct coll_schedule broken;

		copy_without(&s, s.ntransfers - 1, &broken);
		expect_reject(&broken, "with 0 of 1 contributions");
		coll_schedule_free(&broken);
		coll_schedule_free(&s);
	}
}

/*
 * Transfers between two servers share their one circuit, whichever devices they join: a
 * schedule that puts more on a circuit than it says it needs is refused. Document 002's
 * relays all sending to the same server in one round (3 servers of 4 devices: 4 messages on
 * one circuit while the other idles) is what the spread schedule avoids.
 */
static void test_checker_circuit_sharing(void **state)
{
	struct coll_schedule s = gen_ok(COLL_ALLTOALL, COLL_ALG_PLANE_RELAYED, 3, 4, 1200, NULL);
	struct coll_schedule same;
	struct coll_schedule_stats st;
	uint32_t P = 12;

	(void)state;
	assert_int_equal(s.circuit_load, 2);
	assert_int_equal(coll_check(&s, NULL), 0);
	assert_int_equal(coll_schedule_init(&same, COLL_ALLTOALL, -1, 3, 4, s.nchunks), 0);
	same.circuit_load = 2;
	memcpy(same.chunks, s.chunks, s.nchunks * sizeof(*s.chunks));
	/* Phase 1 as generated, then phase 2 in the order of document 002: server s + r. */
	for (uint32_t r = 0; r < 3; r++) {
		assert_int_equal(coll_schedule_add_round(&same), 0);
		for (uint32_t i = 0; i < s.rounds[r].count; i++) {
			const struct coll_transfer *t = coll_round_transfer(&s, r, i);

			assert_int_equal(coll_schedule_add_transfer(&same, t->src, t->dst, t->op,
			                                            coll_transfer_chunks(&s, t),
			                                            t->nchunks),
			                 0);
		}
	}
	for (uint32_t r = 1; r < 3; r++) {
		assert_int_equal(coll_schedule_add_round(&same), 0);
		for (uint32_t y = 0; y < P; y++) {
			uint32_t z = ((y / 4 + r) % 3) * 4 + y % 4, blocks[4];

			for (uint32_t d = 0; d < 4; d++) {
				uint32_t i = y / 4 * 4 + d;

				blocks[d] = i * (P - 1) + (z < i ? z : z - 1);
			}
			assert_int_equal(
			    coll_schedule_add_transfer(&same, y, z, COLL_OP_COPY, blocks, 4), 0);
		}
	}
	assert_int_equal(coll_schedule_stats(&same, &st), 0);
	assert_int_equal(st.max_circuit_load, 4);
	expect_reject(&same, "circuit 0->1 already carries 2 transfers in this round, the "
	                     "schedule allows 2");
	same.circuit_load = 4;
	assert_int_equal(coll_check(&same, NULL), 0);
	coll_schedule_free(&same);
	coll_schedule_free(&s);
}

static void test_checker_doubled_link(void **state)
{
	struct coll_schedule s;
	uint32_t c0 = 0;

	(void)state;
	/* Hand-built: two transfers over 0->1 in one round. */
	assert_int_equal(coll_schedule_init(&s, COLL_ALLGATHER, -1, 3, 1, 3), 0);
	for (uint32_t c = 0; c < 3; c++) {
		s.chunks[c].origin = c;
		s.chunks[c].bytes = 10;
	}
	assert_int_equal(coll_schedule_add_transfer(&s, 0, 1, COLL_OP_COPY, &c0, 1), 0);
	assert_int_equal(coll_schedule_add_transfer(&s, 0, 1, COLL_OP_COPY, &c0, 1), 0);
	expect_reject(&s, "round 0, transfer 1 (0->1): link direction already used by transfer 0");
	coll_schedule_free(&s);

	/* A generated schedule with one destination bent onto a used link. */
	s = gen_ok(COLL_ALLREDUCE, COLL_ALG_FULL_MESH_DIRECT, 4, 1, 4000, NULL);
	s.transfers[1].dst = s.transfers[0].dst;
	expect_reject(&s, "link direction already used");
	coll_schedule_free(&s);

	/* The reverse direction of a circuit is another link: allowed. */
	s = gen_ok(COLL_ALLREDUCE, COLL_ALG_RING, 2, 1, 2000, NULL);
	assert_int_equal(s.rounds[0].count, 2);
	assert_int_equal(coll_check(&s, NULL), 0);
	coll_schedule_free(&s);
}

static void test_checker_double_count(void **state)
{
	struct coll_schedule s;
	uint32_t c0 = 0;

	(void)state;
	assert_int_equal(coll_schedule_init(&s, COLL_ALLREDUCE, -1, 2, 1, 1), 0);
	s.chunks[0].bytes = 8;
	assert_int_equal(coll_schedule_add_transfer(&s, 0, 1, COLL_OP_REDUCE, &c0, 1), 0);
	assert_int_equal(coll_schedule_add_round(&s), 0);
	assert_int_equal(coll_schedule_add_transfer(&s, 0, 1, COLL_OP_REDUCE, &c0, 1), 0);
	expect_reject(&s, "round 1, transfer 0 (0->1): reduce of chunk 0 would count the "
	                  "contribution of participant 0 twice");
	coll_schedule_free(&s);

	/* Ring allreduce with its allgather turned into reductions. */
	s = gen_ok(COLL_ALLREDUCE, COLL_ALG_RING, 4, 1, 4000, NULL);
	for (uint32_t i = 0; i < s.ntransfers; i++)
		s.transfers[i].op = COLL_OP_REDUCE;
	expect_reject(&s, "twice");
	coll_schedule_free(&s);
}

static void test_checker_not_yet_held(void **state)
{
	struct coll_schedule s;
	uint32_t c0 = 0;

	(void)state;
	assert_int_equal(coll_schedule_init(&s, COLL_ALLGATHER, -1, 3, 1, 3), 0);
	for (uint32_t c = 0; c < 3; c++)
		s.chunks[c].origin = c;
	assert_int_equal(coll_schedule_add_transfer(&s, 1, 2, COLL_OP_COPY, &c0, 1), 0);
	expect_reject(&s, "sends chunk 0, which participant 1 does not hold yet");
	coll_schedule_free(&s);

	/* Relaying within one round: 1 only holds chunk 0 after the round. */
	assert_int_equal(coll_schedule_init(&s, COLL_ALLGATHER, -1, 3, 1, 3), 0);
	for (uint32_t c = 0; c < 3; c++)
		s.chunks[c].origin = c;
	assert_int_equal(coll_schedule_add_transfer(&s, 0, 1, COLL_OP_COPY, &c0, 1), 0);
	assert_int_equal(coll_schedule_add_transfer(&s, 1, 2, COLL_OP_COPY, &c0, 1), 0);
	expect_reject(&s, "round 0, transfer 1 (1->2): sends chunk 0");
	coll_schedule_free(&s);
}

static void test_checker_malformed(void **state)
{
	struct coll_schedule s;
	uint32_t c0 = 0, c9 = 9;

	(void)state;
	assert_int_equal(coll_check(NULL, NULL), -EINVAL);

	s = gen_ok(COLL_ALLREDUCE, COLL_ALG_RING, 4, 1, 4000, NULL);
	s.transfers[2].bytes++;
	expect_reject(&s, "its chunks hold 1000 bytes but it says 1001");
	s.transfers[2].bytes--;
	s.transfers[3].dst = 9;
	expect_reject(&s, "participant out of range");
	s.transfers[3].dst = s.transfers[3].src;
	expect_reject(&s, "sends to itself");
	coll_schedule_free(&s);

	assert_int_equal(coll_schedule_init(&s, COLL_ALLREDUCE, -1, 2, 1, 1), 0);
	assert_int_equal(coll_schedule_add_transfer(&s, 0, 1, COLL_OP_COPY, &c9, 1), 0);
	expect_reject(&s, "chunk 9 out of range");
	coll_schedule_free(&s);

	/* A copy and a reduce into the same chunk of one participant in one round. */
	assert_int_equal(coll_schedule_init(&s, COLL_ALLREDUCE, -1, 3, 1, 1), 0);
	assert_int_equal(coll_schedule_add_transfer(&s, 0, 2, COLL_OP_COPY, &c0, 1), 0);
	assert_int_equal(coll_schedule_add_transfer(&s, 1, 2, COLL_OP_REDUCE, &c0, 1), 0);
	expect_reject(&s, "already copied into in this round");
	coll_schedule_free(&s);

	assert_int_equal(coll_schedule_init(&s, COLL_ALLREDUCE, -1, 2, 1, 1), 0);
	assert_int_equal(coll_schedule_add_transfer(&s, 0, 1, COLL_OP_COPY, &c0, 0), -EINVAL);
	s.participants = 3;
	expect_reject(&s, "schedule shape");
	coll_schedule_free(&s);

	assert_int_equal(coll_schedule_init(&s, COLL_ALLREDUCE, -1, 0, 1, 1), -EINVAL);
	assert_int_equal(coll_schedule_init(&s, COLL_ALLREDUCE, -1, 257, 1, 1), -EINVAL);
	coll_schedule_free(&s);
	coll_schedule_free(NULL);
}

static void test_generate_errors(void **state)
{
	struct coll_schedule s;
	struct coll_error err = { 0 };
	struct coll_params p;

	(void)state;
	coll_params_default(&p);
	assert_int_equal(
	    coll_generate(COLL_ALLREDUCE, COLL_ALG_CUBE_400, 6, 1, 1000, NULL, &s, &err), -EDOM);
	assert_non_null(strstr(err.reason, "exactly 8 servers"));
	assert_int_equal(coll_generate(COLL_ALLREDUCE, COLL_ALG_RHD, 12, 1, 1000, NULL, &s, &err),
	                 -EDOM);
	assert_non_null(strstr(err.reason, "power-of-two"));
	assert_int_equal(
	    coll_generate(COLL_ALLREDUCE, COLL_ALG_BIDIR_RING, 2, 1, 1000, NULL, &s, &err), -EDOM);
	assert_int_equal(
	    coll_generate(COLL_ALLREDUCE, COLL_ALG_NIC_OFFLOAD, 8, 1, 1000, NULL, &s, &err),
	    -EOPNOTSUPP);
	assert_int_equal(coll_generate(COLL_ALLREDUCE, COLL_ALG_INA, 8, 1, 1000, NULL, &s, &err),
	                 -EOPNOTSUPP);
	assert_int_equal(
	    coll_generate(COLL_ALLGATHER, COLL_ALG_CUBE_300, 8, 1, 1000, NULL, &s, &err), -EINVAL);
	assert_string_equal(err.field, "algorithm");
	assert_int_equal(coll_generate(COLL_ALLREDUCE, COLL_ALG_RING, 1, 1, 1000, NULL, &s, &err),
	                 -EINVAL);
	assert_string_equal(err.field, "servers");
	assert_int_equal(coll_generate(COLL_ALLTOALL, COLL_ALG_DIRECT, 17, 4, 1000, NULL, &s, &err),
	                 -E2BIG);
	assert_int_equal(coll_generate(COLL_ALLREDUCE, COLL_ALG_RING, 300, 1, 1000, NULL, &s, &err),
	                 -E2BIG);
	p.root = 5;
	assert_int_equal(
	    coll_generate(COLL_BROADCAST, COLL_ALG_BINOMIAL_TREE, 5, 1, 1000, &p, &s, &err),
	    -EINVAL);
	assert_string_equal(err.field, "root");
	assert_int_equal(coll_generate(COLL_ALLREDUCE, COLL_ALG_RING, 4, 1, 1000, NULL, NULL, &err),
	                 -EINVAL);
	/* The largest server-level schedule still generates and checks. */
	s = gen_ok(COLL_ALLREDUCE, COLL_ALG_BIDIR_RING, 256, 1, 1 << 20, NULL);
	assert_int_equal(coll_check(&s, NULL), 0);
	coll_schedule_free(&s);
}

/*
 * Formulas by hand. alpha = 2 µs, 8 Gbit/s = 1000 bytes/µs (beta = 0.001 µs/byte),
 * gamma = 1 ns/byte = 0.001 µs/byte, n = 8000 bytes, p = 8 servers; so n*beta = n*gamma = 8.
 */
static void test_formulas_by_hand(void **state)
{
	static const struct {
		enum coll_collective c;
		enum coll_algorithm a;
		double us;
	} want[] = {
		/* 2*7*2 + 2*(7/8)*8 + (7/8)*8 = 28 + 14 + 7 */
		{ COLL_ALLREDUCE, COLL_ALG_RING, 49 },
		/* 28 + (7/8)*8 + 7: doc 001's 14a + 7q/(8b) = 35 plus gamma */
		{ COLL_ALLREDUCE, COLL_ALG_BIDIR_RING, 42 },
		/* 2*3*2 + 14 + 7 */
		{ COLL_ALLREDUCE, COLL_ALG_RHD, 33 },
		/* 2*2 + 2*(8000/8)*0.001 + 7 */
		{ COLL_ALLREDUCE, COLL_ALG_FULL_MESH_DIRECT, 13 },
		/* 8*2 + (2/3)*8 + 8 */
		{ COLL_ALLREDUCE, COLL_ALG_CUBE_300, 16 + 16.0 / 3 + 8 },
		/* 6*2 + (2/3)*8 + 1.25*8 */
		{ COLL_ALLREDUCE, COLL_ALG_CUBE_400, 12 + 16.0 / 3 + 10 },
		/* 7*2 + (7/8)*8 */
		{ COLL_ALLGATHER, COLL_ALG_RING, 21 },
		/* 3*2 + 7 */
		{ COLL_ALLGATHER, COLL_ALG_RECURSIVE_DOUBLING, 13 },
		/* 2 + 1 */
		{ COLL_ALLGATHER, COLL_ALG_FULL_MESH_DIRECT, 3 },
		/* 3*(2 + 8) */
		{ COLL_BROADCAST, COLL_ALG_BINOMIAL_TREE, 30 },
		/* 2 + 8 */
		{ COLL_BROADCAST, COLL_ALG_FULL_MESH_DIRECT, 10 },
		/* 2*2 + 2*1 */
		{ COLL_BROADCAST, COLL_ALG_SCATTER_ALLGATHER, 6 },
	};
	struct coll_params p;
	struct coll_estimate est;

	(void)state;
	coll_params_default(&p);
	p.alpha_us = 2;
	p.link_gbps = 8;
	p.gamma_ns_per_byte = 1;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		assert_int_equal(coll_predict(want[i].c, want[i].a, 8000, 8, 1, &p, &est, NULL), 0);
		assert_close(est.predicted_us, want[i].us);
	}
	/* Doc 001 with gamma 0: 2 one-way rings 14a + 7q/(8b) = 28 + 7; cube 6a + 2q/(3b). */
	p.gamma_ns_per_byte = 0;
	assert_int_equal(
	    coll_predict(COLL_ALLREDUCE, COLL_ALG_BIDIR_RING, 8000, 8, 1, &p, &est, NULL), 0);
	assert_close(est.predicted_us, 35);
	assert_int_equal(
	    coll_predict(COLL_ALLREDUCE, COLL_ALG_CUBE_400, 8000, 8, 1, &p, &est, NULL), 0);
	assert_close(est.predicted_us, 12 + 16.0 / 3);

	/* NIC offload, segment = mtu 4096: tree 2*2 + (8000 + 4096)*0.001; ring 28 + 14. */
	p.offload = true;
	p.offload_switch = true;
	assert_int_equal(
	    coll_predict(COLL_ALLREDUCE, COLL_ALG_NIC_OFFLOAD, 8000, 8, 1, &p, &est, NULL), 0);
	assert_close(est.predicted_us, 16.096);
	assert_int_equal(est.rounds, 2);
	assert_false(est.scheduled);
	p.offload_switch = false;
	assert_int_equal(
	    coll_predict(COLL_ALLREDUCE, COLL_ALG_NIC_OFFLOAD, 8000, 8, 1, &p, &est, NULL), 0);
	assert_close(est.predicted_us, 42);
	assert_int_equal(est.rounds, 14);

	/*
	 * In-network aggregation, 2 messages of 4096: rtt = 2*2 + 2*4.096 = 12.192. W = 32:
	 * period = max(4.096, 12.192/32) = 4.096, t = 4.096 + 12.192. W = 1: t = 2 * 12.192.
	 */
	p.aggregating_switch = true;
	assert_int_equal(coll_predict(COLL_ALLREDUCE, COLL_ALG_INA, 8000, 8, 1, &p, &est, NULL), 0);
	assert_close(est.predicted_us, 16.288);
	p.window = 1;
	assert_int_equal(coll_predict(COLL_ALLREDUCE, COLL_ALG_INA, 8000, 8, 1, &p, &est, NULL), 0);
	assert_close(est.predicted_us, 24.384);

	/*
	 * All-to-all, 2 servers x 4 devices, 8000 bytes per device: blocks of 1000. In-server
	 * alpha 1, 16 Gbit/s (0.0005 µs/byte). The one circuit ends on device 0 of both servers
	 * (formula 3 of 2 servers), so a message between other devices hops at both ends
	 * (alpha 2 + 2 * 1).
	 * direct: 3 in-server rounds of 1 + 0.5; then 4 rounds with all 4 devices of a server on
	 * the circuit, 4000 bytes: round j = 0: device 0 starts at 2, the others at 4:
	 * max(2 + 4, 4 + 3) = 7; j > 0: one starts at 3 (a hop at one end), another at 3, two
	 * at 4: max(3 + 4, 4 + 2) = 7. 4.5 + 4 * 7 = 32.5.
	 * plane-relayed: 3 * (1 + 2000*0.0005) = 6; then the 4 relays' messages of 4000 on the
	 * circuit: relay 0 at 2, the others at 4: max(2 + 16, 4 + 12) = 18. 6 + 18 = 24.
	 */
	p.intra_alpha_us = 1;
	p.intra_gbps = 16;
	assert_int_equal(coll_predict(COLL_ALLTOALL, COLL_ALG_DIRECT, 8000, 2, 4, &p, &est, NULL),
	                 0);
	assert_close(est.predicted_us, 32.5);
	assert_int_equal(est.circuits, 1);
	assert_int_equal(
	    coll_predict(COLL_ALLTOALL, COLL_ALG_PLANE_RELAYED, 8000, 2, 4, &p, &est, NULL), 0);
	assert_close(est.predicted_us, 24);
	assert_int_equal(est.inter_messages, 8);
	assert_int_equal(est.intra_messages, 24);
}

/*
 * Past 2^17 messages in all, an all-to-all price is the closed-form bound: every inter-server
 * round as its worst, m = ceil(D / (S - 1)) messages on the busiest circuit, each hopping at
 * both ends, two on an in-server link. Near the limit it sits just above the exact sum.
 */
static void test_alltoall_bound(void **state)
{
	struct coll_params p;
	struct coll_estimate est, exact;
	double a = 3, ai = 1, b = 1.0 / 25000, bi = 1.0 / 50000; /* 200 and 400 Gbit/s */

	(void)state;
	coll_params_default(&p);
	/* 64 x 64 direct: 4096 * 4095 messages. b = 2^30 / 4096, m = 2. */
	{
		double blk = (double)(1 << 30) / 4096;
		double want = 63 * (ai + blk * bi) +
		              63.0 * 64 * (a + 2 * ai + fmax(2 * blk * b, 2 * blk * bi));

		assert_int_equal(
		    coll_predict(COLL_ALLTOALL, COLL_ALG_DIRECT, 1 << 30, 64, 64, &p, &est, NULL),
		    0);
		assert_close(est.predicted_us, want);
	}
	/* 32 x 32 relayed is summed; its bound by hand (m = 2) is no lower, and close. */
	{
		double q = 1 << 30,
		       want = 31 * (ai + q / 32 * bi) +
		              31 * (a + 2 * ai + fmax(2 * q / 32 * b, 2 * q / 32 * bi));

		assert_int_equal(coll_predict(COLL_ALLTOALL, COLL_ALG_PLANE_RELAYED, 1 << 30, 32,
		                              32, &p, &exact, NULL),
		                 0);
		print_message("  32 x 32 relayed: summed %.3f µs, bound %.3f µs\n",
		              exact.predicted_us, want);
		assert_true(exact.predicted_us <= want * (1 + 1e-12));
		assert_true(exact.predicted_us >= want - 31 * ai);
	}
	/* Without the circuits of a map, the plan must exist: 8 servers need 7 devices. */
	assert_int_equal(
	    coll_predict(COLL_ALLTOALL, COLL_ALG_DIRECT, 1 << 20, 8, 4, &p, &est, NULL), -EDOM);
}

/*
 * Without the barrier (sync "pairwise" or "dataflow") an all-to-all is its messages replayed as
 * flows sharing links max-min fairly. One message each way alone on its circuit is latency plus
 * bytes; the full meshes of 7 and 8 servers of 8 devices (one port each) against SimGrid's
 * replay of the same schedules (make fidelity-free, 2026-11-27): at 16 MiB the barrier's sum
 * picks plane-relayed, pairwise direct, dataflow plane-relayed again.
 */
static void test_alltoall_pairwise(void **state)
{
	static const struct {
		enum coll_sync sync;
		uint32_t servers;
		uint64_t bytes;
		double direct, relayed; /* SimGrid, µs */
	} simgrid[] = {
		{ COLL_SYNC_PAIRWISE, 7, 16 << 20, 916.692, 963.179 },
		{ COLL_SYNC_PAIRWISE, 8, 16 << 20, 996.686, 1016.25 },
		{ COLL_SYNC_PAIRWISE, 7, 1 << 20, 382.141, 114.461 },
		{ COLL_SYNC_DATAFLOW, 7, 16 << 20, 948.699, 943.497 },
		{ COLL_SYNC_DATAFLOW, 8, 16 << 20, 1005.17, 992.329 },
		{ COLL_SYNC_DATAFLOW, 8, 1 << 20, 423.602, 116.704 },
	};
	struct coll_params p;
	struct coll_estimate est, barrier;
	struct coll_selection sel;

	(void)state;
	coll_params_default(&p);
	p.sync = COLL_SYNC_PAIRWISE;
	assert_int_equal(
	    coll_predict(COLL_ALLTOALL, COLL_ALG_DIRECT, 1 << 20, 2, 1, &p, &est, NULL), 0);
	assert_close(est.predicted_us, 3.0 + (1 << 19) / 25000.0);

	p.alpha_us = 3;
	p.link_gbps = 400;
	p.intra_alpha_us = 2;
	p.intra_gbps = 512;
	for (size_t i = 0; i < sizeof(simgrid) / sizeof(simgrid[0]); i++) {
		uint32_t S = simgrid[i].servers;

		p.sync = simgrid[i].sync;
		assert_int_equal(coll_predict(COLL_ALLTOALL, COLL_ALG_DIRECT, simgrid[i].bytes, S,
		                              8, &p, &est, NULL),
		                 0);
		assert_true(fabs(est.predicted_us / simgrid[i].direct - 1) < 1e-3);
		assert_int_equal(coll_predict(COLL_ALLTOALL, COLL_ALG_PLANE_RELAYED,
		                              simgrid[i].bytes, S, 8, &p, &est, NULL),
		                 0);
		assert_true(fabs(est.predicted_us / simgrid[i].relayed - 1) < 1e-3);
		assert_int_equal(coll_select(COLL_ALLTOALL, simgrid[i].bytes, S, 8, &p, &sel, NULL),
		                 0);
		assert_int_equal(sel.candidates[sel.chosen].algorithm,
		                 simgrid[i].direct < simgrid[i].relayed ? COLL_ALG_DIRECT
		                                                        : COLL_ALG_PLANE_RELAYED);
	}
	p.sync = COLL_SYNC_PAIRWISE;
	/* The schedule route's price of the same schedule is its selection's. */
	{
		struct coll_schedule sch;
		double us;

		assert_int_equal(coll_generate(COLL_ALLTOALL, COLL_ALG_PLANE_RELAYED, 8, 8,
		                               16 << 20, &p, &sch, NULL),
		                 0);
		assert_int_equal(coll_schedule_cost(&sch, &p, &us), 0);
		assert_true(fabs(us / 1016.25 - 1) < 1e-3);
		coll_schedule_free(&sch);
	}
	/*
	 * Host links (device_link_gbps) are on the route: far faster than the circuit they change
	 * nothing; slower, every message through a circuit's device is held to them. A map of the
	 * circuits that is the plan's prices as the plan.
	 */
	{
		struct coll_params q = p;
		double plain, fast, slow, mapped;
		uint32_t map[8 * 8];

		for (uint32_t a = 0; a < 8; a++)
			for (uint32_t b = 0; b < 8; b++)
				map[a * 8 + b] = a == b ? 0 : coll_plan_circuit_device(8, a, b);
		assert_int_equal(
		    coll_predict(COLL_ALLTOALL, COLL_ALG_DIRECT, 16 << 20, 8, 8, &q, &est, NULL),
		    0);
		plain = est.predicted_us;
		q.device_link_gbps = 1e6;
		assert_int_equal(
		    coll_predict(COLL_ALLTOALL, COLL_ALG_DIRECT, 16 << 20, 8, 8, &q, &est, NULL),
		    0);
		fast = est.predicted_us;
		q.device_link_gbps = 100;
		assert_int_equal(
		    coll_predict(COLL_ALLTOALL, COLL_ALG_DIRECT, 16 << 20, 8, 8, &q, &est, NULL),
		    0);
		slow = est.predicted_us;
		assert_true(fabs(fast / plain - 1) < 1e-4);
		/* Every circuit's messages through a host link of a quarter of its rate. */
		assert_true(slow > 2 * plain);
		q = p;
		q.circuit_device = map;
		assert_int_equal(
		    coll_predict(COLL_ALLTOALL, COLL_ALG_DIRECT, 16 << 20, 8, 8, &q, &est, NULL),
		    0);
		mapped = est.predicted_us;
		assert_close(mapped, plain);
	}
	/* With the barrier, 16 MiB on 8 servers picks plane-relayed: the pick the sync changes. */
	p.sync = COLL_SYNC_BARRIER;
	assert_int_equal(coll_select(COLL_ALLTOALL, 16 << 20, 8, 8, &p, &sel, NULL), 0);
	assert_int_equal(sel.candidates[sel.chosen].algorithm, COLL_ALG_PLANE_RELAYED);

	/* Past COLL_FLOW_MAX messages (16 x 16 direct: 65,280) the barrier's price stands. */
	assert_int_equal(
	    coll_predict(COLL_ALLTOALL, COLL_ALG_DIRECT, 1 << 20, 16, 16, &p, &barrier, NULL), 0);
	p.sync = COLL_SYNC_PAIRWISE;
	assert_int_equal(
	    coll_predict(COLL_ALLTOALL, COLL_ALG_DIRECT, 1 << 20, 16, 16, &p, &est, NULL), 0);
	assert_close(est.predicted_us, barrier.predicted_us);
}

/* A hand-made all-to-all of @rounds rounds of @P transfers on one server, priced with @sync. */
static int price_made(uint32_t P, uint32_t nrounds, const uint32_t (*t)[5],
                      const struct coll_chunk *chunks, uint32_t nchunks, enum coll_sync sync,
                      double *us)
{
	struct coll_schedule s;
	struct coll_params p;
	int rc;

	coll_params_default(&p);
	p.sync = sync;
	/* Priced as the generators' plane-relayed schedules are. */
	assert_int_equal(
	    coll_schedule_init(&s, COLL_ALLTOALL, COLL_ALG_PLANE_RELAYED, 1, P, nchunks), 0);
	memcpy(s.chunks, chunks, nchunks * sizeof(*chunks));
	for (uint32_t r = 0; r < nrounds; r++) {
		assert_int_equal(coll_schedule_add_round(&s), 0);
		for (uint32_t i = 0; i < P; i++) {
			const uint32_t *x = t[r * P + i];

			assert_int_equal(coll_schedule_add_transfer(&s, x[0], x[1], COLL_OP_COPY,
			                                            x + 2,
			                                            x[4] == UINT32_MAX ? 1 : 3),
			                 0);
		}
	}
	rc = coll_schedule_cost(&s, &p, us);
	coll_schedule_free(&s);
	return rc;
}

/*
 * What each convention waits for, on a hand-made schedule of three devices of one server
 * (intra alpha 1 µs, 400 Gbit/s: a 1 MiB chunk takes B = 20.97152 µs, a 1-byte one d). Device
 * 0 sends the big chunk 0 to 1 in round 0; in round 2, 1 relays it to 2 between two small
 * ones (5, which 2 sent it in round 1, and 8, its own), having sent only small chunks of its
 * own in between. Dataflow: the relay waits for the big chunk alone, 1 + B, and ends 1 µs +
 * B + 2d later. Pairwise: 1's round 1 send already waited for the big chunk, so the relay
 * starts a round later still. A chunk sent by a participant that does not hold it, or an index
 * out of range, is refused.
 */
static void test_alltoall_sync_waits(void **state)
{
	static const uint32_t none = UINT32_MAX;
	/* src, dst, chunks (one, or three) */
	static const uint32_t t[9][5] = {
		{ 0, 1, 0, 0, none }, { 1, 2, 1, 0, none }, { 2, 0, 2, 0, none },
		{ 0, 2, 3, 0, none }, { 1, 0, 4, 0, none }, { 2, 1, 5, 0, none },
		{ 1, 2, 5, 0, 8 },    { 2, 0, 6, 0, none }, { 0, 1, 7, 0, none },
	};
	static const uint32_t origin[9] = { 0, 1, 2, 0, 1, 2, 2, 0, 1 };
	const double big = (1 << 20) / 50000.0, d = 1 / 50000.0;
	struct coll_chunk chunks[9];
	uint32_t bad[9][5];
	double us;

	(void)state;
	for (uint32_t c = 0; c < 9; c++)
		chunks[c] =
		    (struct coll_chunk){ .origin = origin[c], .dest = 0, .bytes = c ? 1 : 1 << 20 };
	assert_int_equal(price_made(3, 3, t, chunks, 9, COLL_SYNC_DATAFLOW, &us), 0);
	assert_true(fabs(us - (2 + 2 * big + 2 * d)) < 1e-6);
	assert_int_equal(price_made(3, 3, t, chunks, 9, COLL_SYNC_PAIRWISE, &us), 0);
	assert_true(fabs(us - (3 + 2 * big + 3 * d)) < 1e-6);
	/* Round 2's device 2 sends chunk 0, which device 1 holds then. */
	memcpy(bad, t, sizeof(bad));
	bad[7][2] = 0;
	assert_int_equal(price_made(3, 3, bad, chunks, 9, COLL_SYNC_DATAFLOW, &us), -EINVAL);
	/* A chunk the schedule does not have; a device it does not have. */
	memcpy(bad, t, sizeof(bad));
	bad[3][2] = 9;
	assert_int_equal(price_made(3, 3, bad, chunks, 9, COLL_SYNC_PAIRWISE, &us), -EINVAL);
	memcpy(bad, t, sizeof(bad));
	bad[3][1] = 3;
	assert_int_equal(price_made(3, 3, bad, chunks, 9, COLL_SYNC_PAIRWISE, &us), -EINVAL);
}

static const struct coll_candidate *cand(const struct coll_selection *sel, enum coll_algorithm a)
{
	for (uint32_t i = 0; i < sel->ncandidates; i++)
		if (sel->candidates[i].algorithm == a)
			return &sel->candidates[i];
	fail_msg("no candidate %s", coll_algorithm_name(a));
	return NULL;
}

static void test_select_allreduce(void **state)
{
	struct coll_selection sel;
	struct coll_error err = { 0 };
	struct coll_params p;
	const uint64_t q = 64ull << 20;

	(void)state;
	coll_params_default(&p);
	/* A full interconnection of 8: every circuit at once wins. */
	assert_int_equal(coll_select(COLL_ALLREDUCE, q, 8, 7, &p, &sel, &err), 0);
	assert_int_equal(sel.ncandidates, 8);
	assert_string_equal(sel.candidates[sel.chosen].name, "full-mesh-direct");
	assert_true(cand(&sel, COLL_ALG_CUBE_400)->eligible);
	assert_false(cand(&sel, COLL_ALG_NIC_OFFLOAD)->eligible);
	assert_non_null(strstr(cand(&sel, COLL_ALG_NIC_OFFLOAD)->reason, "offload-capable"));
	assert_false(cand(&sel, COLL_ALG_INA)->eligible);
	assert_false(cand(&sel, COLL_ALG_INA)->scheduled);
	assert_non_null(strstr(cand(&sel, COLL_ALG_INA)->reason, "aggregating switch"));

	/*
	 * Three ports per server (document 001's premise): a cube method wins. 400 saves two
	 * rounds (2 alpha) but reduces q/4 more bytes per server, so it wins below
	 * q = 8 alpha / gamma = 2.4 MB and 300 wins above.
	 */
	p.ports_per_server = 3;
	assert_int_equal(coll_select(COLL_ALLREDUCE, 1 << 20, 8, 7, &p, &sel, &err), 0);
	assert_string_equal(sel.candidates[sel.chosen].name, "cube-400");
	assert_int_equal(sel.candidates[sel.chosen].rounds, 6);
	assert_int_equal(sel.candidates[sel.chosen].circuits, 3);
	assert_int_equal(coll_select(COLL_ALLREDUCE, q, 8, 7, &p, &sel, &err), 0);
	assert_string_equal(sel.candidates[sel.chosen].name, "cube-300");
	assert_int_equal(sel.candidates[sel.chosen].rounds, 8);
	assert_false(cand(&sel, COLL_ALG_FULL_MESH_DIRECT)->eligible);
	assert_non_null(
	    strstr(cand(&sel, COLL_ALG_FULL_MESH_DIRECT)->reason, "needs 7 circuits per server"));
	assert_true(cand(&sel, COLL_ALG_RHD)->eligible);
	assert_int_equal(cand(&sel, COLL_ALG_RING)->rounds, 14);

	/* 6 servers: no cube, no recursive halving. */
	assert_int_equal(coll_select(COLL_ALLREDUCE, q, 6, 5, NULL, &sel, &err), 0);
	assert_false(cand(&sel, COLL_ALG_CUBE_300)->eligible);
	assert_non_null(strstr(cand(&sel, COLL_ALG_CUBE_300)->reason, "exactly 8 servers"));
	assert_false(cand(&sel, COLL_ALG_RHD)->eligible);
	assert_true(cand(&sel, COLL_ALG_RING)->eligible);

	/* Offload and aggregation become candidates when the topology has them. */
	coll_params_default(&p);
	p.offload = true;
	p.aggregating_switch = true;
	assert_int_equal(coll_select(COLL_ALLREDUCE, q, 64, 1, &p, &sel, &err), 0);
	assert_true(cand(&sel, COLL_ALG_NIC_OFFLOAD)->eligible);
	assert_true(cand(&sel, COLL_ALG_INA)->eligible);
	assert_non_null(strstr(cand(&sel, COLL_ALG_NIC_OFFLOAD)->reason, "ring among"));

	/* Nothing fits one port per server. */
	coll_params_default(&p);
	p.ports_per_server = 1;
	assert_int_equal(coll_select(COLL_ALLREDUCE, q, 4, 3, &p, &sel, &err), -ENOENT);
	assert_int_equal(sel.chosen, -1);
	assert_int_equal(sel.ncandidates, 8);
}

static void test_select_other_collectives(void **state)
{
	struct coll_selection sel;
	struct coll_error err = { 0 };

	(void)state;
	assert_int_equal(coll_select(COLL_ALLTOALL, 1024, 8, 7, NULL, &sel, &err), 0);
	assert_int_equal(sel.ncandidates, 2);
	assert_string_equal(sel.candidates[sel.chosen].name, "plane-relayed");
	assert_int_equal(cand(&sel, COLL_ALG_DIRECT)->inter_messages, 7 * 7 * 8 * 7);
	assert_int_equal(cand(&sel, COLL_ALG_PLANE_RELAYED)->inter_messages, 7 * 8 * 7);
	assert_int_equal(cand(&sel, COLL_ALG_PLANE_RELAYED)->intra_messages, 8 * 7 * 6);
	/* Large blocks: the extra in-server hand-off no longer pays. */
	assert_int_equal(coll_select(COLL_ALLTOALL, 1ull << 30, 8, 7, NULL, &sel, &err), 0);
	assert_string_equal(sel.candidates[sel.chosen].name, "direct");
	/* Servers too small for the plan: neither fits. */
	assert_int_equal(coll_select(COLL_ALLTOALL, 1024, 8, 4, NULL, &sel, &err), -ENOENT);
	assert_non_null(strstr(cand(&sel, COLL_ALG_DIRECT)->reason, "needs 7 devices"));

	assert_int_equal(coll_select(COLL_ALLGATHER, 1 << 20, 16, 1, NULL, &sel, &err), 0);
	assert_int_equal(sel.ncandidates, 3);
	assert_string_equal(sel.candidates[sel.chosen].name, "full-mesh-direct");
	assert_int_equal(coll_select(COLL_BROADCAST, 1 << 20, 16, 1, NULL, &sel, &err), 0);
	assert_string_equal(sel.candidates[sel.chosen].name, "scatter-allgather");
	/* A tiny broadcast: one round beats two. */
	assert_int_equal(coll_select(COLL_BROADCAST, 8, 16, 1, NULL, &sel, &err), 0);
	assert_string_equal(sel.candidates[sel.chosen].name, "full-mesh-direct");

	/* Prices work far beyond what is scheduled. */
	assert_int_equal(
	    coll_select(COLL_ALLREDUCE, 1 << 30, COLL_MAX_SERVERS, 1, NULL, &sel, &err), 0);
	assert_int_equal(cand(&sel, COLL_ALG_RING)->rounds, 2 * (COLL_MAX_SERVERS - 1));
	assert_int_equal(coll_select(COLL_ALLTOALL, 1 << 30, COLL_MAX_SERVERS, COLL_MAX_DEVICES,
	                             NULL, &sel, &err),
	                 0);
	assert_int_equal(cand(&sel, COLL_ALG_DIRECT)->rounds, UINT32_MAX);
	assert_int_equal(coll_select(COLL_ALLREDUCE, 8, COLL_MAX_SERVERS + 1, 1, NULL, &sel, &err),
	                 -EINVAL);
	assert_string_equal(err.field, "servers");
	assert_int_equal(coll_select(COLL_ALLREDUCE, 8, 4, 1, NULL, NULL, &err), -EINVAL);
	assert_int_equal(coll_predict(COLL_ALLREDUCE, COLL_ALG_RING, 8, 4, 1, NULL, NULL, &err),
	                 -EINVAL);
	assert_int_equal(coll_select(COLL_ALLREDUCE, 8, 1, 1, NULL, &sel, &err), -EINVAL);
	assert_string_equal(err.field, "servers");
	assert_int_equal(coll_select(COLL_COLLECTIVE__COUNT, 8, 4, 1, NULL, &sel, &err), -EINVAL);
	assert_int_equal(coll_select(COLL_ALLTOALL, 8, 1, 1, NULL, &sel, &err), -EINVAL);
}

static void test_params(void **state)
{
	struct coll_params p;
	struct coll_error err = { 0 };
	struct coll_selection sel;

	(void)state;
	coll_params_default(&p);
	assert_int_equal(coll_params_validate(&p, &err), 0);
	p.aggregating_switch = true;
	assert_int_equal(coll_params_validate(&p, &err), 0);

	p.window = 80;
	assert_int_equal(coll_params_validate(&p, &err), -ENOBUFS);
	assert_string_equal(err.field, "window");
	assert_non_null(strstr(err.reason, "W=80"));
	assert_non_null(strstr(err.reason, "B=64"));
	assert_int_equal(coll_select(COLL_ALLREDUCE, 1 << 20, 8, 7, &p, &sel, &err), -ENOBUFS);
	p.window = 0;
	assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
	assert_string_equal(err.field, "window");
	p.window = 8;
	p.switch_buffer = 0;
	assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
	assert_string_equal(err.field, "switch_buffer");

	coll_params_default(&p);
	p.link_gbps = 0;
	assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
	assert_string_equal(err.field, "link_gbps");
	coll_params_default(&p);
	p.alpha_us = NAN;
	assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
	assert_string_equal(err.field, "alpha_us");
	coll_params_default(&p);
	p.intra_gbps = -1;
	assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
	assert_string_equal(err.field, "intra_gbps");
	coll_params_default(&p);
	p.gamma_ns_per_byte = INFINITY;
	assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
	assert_string_equal(err.field, "gamma_ns_per_byte");
	coll_params_default(&p);
	p.intra_alpha_us = -0.5;
	assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
	assert_string_equal(err.field, "intra_alpha_us");
	coll_params_default(&p);
	p.mtu = 100;
	assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
	assert_string_equal(err.field, "mtu");
	coll_params_default(&p);
	p.segment_bytes = 9000;
	assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
	assert_string_equal(err.field, "segment_bytes");
	assert_non_null(strstr(err.reason, "9000"));
	assert_int_equal(coll_params_validate(NULL, &err), -EINVAL);
	assert_int_equal(coll_ina_check_window(3, 3, NULL), 0);
	assert_int_equal(coll_ina_check_window(4, 3, NULL), -ENOBUFS);
}

static void test_names(void **state)
{
	(void)state;
	for (int i = 0; i < COLL_ALGORITHM__COUNT; i++) {
		enum coll_algorithm a;

		assert_int_equal(coll_algorithm_from_name(coll_algorithm_name(i), &a), 0);
		assert_int_equal(a, i);
	}
	for (int i = 0; i < COLL_COLLECTIVE__COUNT; i++) {
		enum coll_collective c;

		assert_int_equal(coll_collective_from_name(coll_collective_name(i), &c), 0);
		assert_int_equal(c, i);
	}
	{
		enum coll_algorithm a;
		enum coll_collective c;

		assert_int_equal(coll_algorithm_from_name("cube-500", &a), -EINVAL);
		assert_int_equal(coll_algorithm_from_name(NULL, &a), -EINVAL);
		assert_int_equal(coll_collective_from_name("reduce", &c), -EINVAL);
		assert_null(coll_algorithm_name(COLL_ALGORITHM__COUNT));
		assert_null(coll_collective_name(COLL_COLLECTIVE__COUNT));
		assert_string_equal(coll_algorithm_name(COLL_ALG_INA), "in-network-aggregation");
	}
	{
		enum coll_sync s;
		enum coll_relay r;
		struct coll_params p;
		struct coll_error err = { 0 };

		assert_int_equal(coll_sync_from_name("pairwise", &s), 0);
		assert_int_equal(s, COLL_SYNC_PAIRWISE);
		assert_int_equal(coll_sync_from_name("dataflow", &s), 0);
		assert_int_equal(s, COLL_SYNC_DATAFLOW);
		assert_string_equal(coll_sync_name(COLL_SYNC_BARRIER), "barrier");
		assert_int_equal(coll_sync_from_name("free", &s), -EINVAL);
		assert_null(coll_sync_name(COLL_SYNC__COUNT));
		assert_int_equal(coll_relay_from_name("cut-through", &r), 0);
		assert_int_equal(r, COLL_RELAY_CUT_THROUGH);
		coll_params_default(&p);
		assert_int_equal(p.sync, COLL_SYNC_BARRIER);
		p.sync = COLL_SYNC__COUNT;
		assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
		assert_string_equal(err.field, "sync");
	}
}

/* Document 004: mean over N=3 senders with inputs (1,2,3), (4,5,6), (7,8,9). */
static void test_ina_window_example(void **state)
{
	static const double values[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	double agg[6];
	uint32_t sent[3];
	struct coll_ina_sim sim = {
		.senders = 3,
		.messages = 3,
		.values = values,
		.window = 3,
		.switch_buffer = 3,
		.op = COLL_RED_MEAN,
	};
	struct coll_ina_result res = { .aggregates = agg, .sent = sent };
	struct coll_error err = { 0 };

	(void)state;
	assert_int_equal(coll_ina_simulate(&sim, &res, &err), 0);
	assert_false(res.stalled);
	assert_int_equal(res.completed, 3);
	assert_close(agg[0], 4); /* (1, 4, 7) */
	assert_close(agg[1], 5); /* (2, 5, 8) */
	assert_close(agg[2], 6); /* (3, 6, 9) */
	assert_true(res.peak_buffer <= sim.window);

	/* W = 1: every aggregate releases exactly the next message. */
	sim.window = 1;
	assert_int_equal(coll_ina_simulate(&sim, &res, &err), 0);
	assert_int_equal(res.steps, 3);
	assert_int_equal(res.peak_buffer, 1);
	assert_int_equal(res.max_outstanding, 1);

	sim.op = COLL_RED_SUM;
	assert_int_equal(coll_ina_simulate(&sim, &res, &err), 0);
	assert_close(agg[0], 12);
	sim.op = COLL_RED_MIN;
	assert_int_equal(coll_ina_simulate(&sim, &res, &err), 0);
	assert_close(agg[1], 2);
	sim.op = COLL_RED_MAX;
	assert_int_equal(coll_ina_simulate(&sim, &res, &err), 0);
	assert_close(agg[2], 9);

	/* W > B is refused, naming both. */
	sim.window = 4;
	assert_int_equal(coll_ina_simulate(&sim, &res, &err), -ENOBUFS);
	assert_non_null(strstr(err.reason, "W=4 exceeds switch_buffer B=3"));
	sim.senders = 0;
	assert_int_equal(coll_ina_simulate(&sim, &res, &err), -EINVAL);
}

/* The 7 never arrives: with W = 3 every sender stalls after 3 outstanding messages. */
static void test_ina_missing_contribution_stalls(void **state)
{
	/* Six messages each, so a sender would have more to send. */
	static const double values[] = { 1,  2,  3,  10, 11, 12, 4,  5,  6,
		                         13, 14, 15, 7,  8,  9,  16, 17, 18 };
	bool lost[18] = { false };
	double agg[6];
	uint32_t sent[3];
	struct coll_ina_sim sim = {
		.senders = 3,
		.messages = 6,
		.values = values,
		.lost = lost,
		.window = 3,
		.switch_buffer = 3,
		.op = COLL_RED_MEAN,
	};
	struct coll_ina_result res = { .aggregates = agg, .sent = sent };

	(void)state;
	lost[2 * 6 + 0] = true; /* sender 2, message 0: the 7 */
	assert_int_equal(coll_ina_simulate(&sim, &res, NULL), 0);
	assert_true(res.stalled);
	for (int s = 0; s < 3; s++)
		assert_int_equal(sent[s], 3);
	assert_int_equal(res.max_outstanding, 3);
	assert_true(isnan(agg[0]));
	/* Later messages still aggregate, but cannot slide the window past message 0. */
	assert_close(agg[1], 5);
	assert_close(agg[2], 6);
	assert_int_equal(res.completed, 2);
	for (int i = 3; i < 6; i++)
		assert_true(isnan(agg[i]));
	assert_true(res.peak_buffer <= 3);

	/* Delivered, the same sequences complete: 3 + 3 messages in two window turns. */
	lost[12] = false;
	assert_int_equal(coll_ina_simulate(&sim, &res, NULL), 0);
	assert_false(res.stalled);
	assert_int_equal(res.completed, 6);
	assert_close(agg[3], 13);
	assert_int_equal(res.steps, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rounds_8_servers),
		cmocka_unit_test(test_cube_faces),
		cmocka_unit_test(test_cube_raw_text_direction_rejected),
		cmocka_unit_test(test_check_allreduce_every_size),
		cmocka_unit_test(test_check_allgather_broadcast_every_size),
		cmocka_unit_test(test_alltoall_counts),
		cmocka_unit_test(test_plan_circuit_device),
		cmocka_unit_test(test_alltoall_schedules),
		cmocka_unit_test(test_alltoall_bound),
		cmocka_unit_test(test_alltoall_pairwise),
		cmocka_unit_test(test_alltoall_sync_waits),
		cmocka_unit_test(test_checker_circuit_sharing),
		cmocka_unit_test(test_checker_dropped_transfer),
		cmocka_unit_test(test_checker_doubled_link),
		cmocka_unit_test(test_checker_double_count),
		cmocka_unit_test(test_checker_not_yet_held),
		cmocka_unit_test(test_checker_malformed),
		cmocka_unit_test(test_generate_errors),
		cmocka_unit_test(test_formulas_by_hand),
		cmocka_unit_test(test_select_allreduce),
		cmocka_unit_test(test_select_other_collectives),
		cmocka_unit_test(test_params),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_ina_window_example),
		cmocka_unit_test(test_ina_missing_contribution_stalls),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
