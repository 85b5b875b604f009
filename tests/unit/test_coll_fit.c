/*
 * The hardware terms of the collective cost model and their calibration (coll_fit.h): each term
 * priced as docs/cost-model.md derives it, the per-round send counts against the generated
 * schedules, and fits that recover hidden parameters or say which they cannot.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coll.h"
#include "coll_fit.h"
#include "coll_internal.h"

#define MiB (1ull << 20)

static void assert_close(double got, double want, double rel)
{
	if (fabs(got - want) > rel * fmax(1e-9, fabs(want)))
		fail_msg("got %.12g, want %.12g", got, want);
}

static double price(enum coll_collective c, enum coll_algorithm a, uint64_t q, uint32_t M,
                    uint32_t D, const struct coll_params *p, struct coll_estimate *out)
{
	struct coll_estimate e;
	struct coll_error err = { 0 };
	int rc = coll_predict(c, a, q, M, D, p, &e, &err);

	if (rc)
		fail_msg("%s/%s: %d %s", coll_collective_name(c), coll_algorithm_name(a), rc,
		         err.reason);
	if (out)
		*out = e;
	return e.predicted_us;
}

/* Each term adds what its formula says, on a 4-server ring allreduce of 1 MiB. */
static void test_terms_on_a_ring(void **state)
{
	struct coll_params p;
	struct coll_estimate e;
	double n = (double)MiB, b, base;

	(void)state;
	coll_params_default(&p);
	base = price(COLL_ALLREDUCE, COLL_ALG_RING, MiB, 4, 8, &p, &e);
	assert_int_equal(e.sends, 6);
	assert_int_equal(e.fanout, 1);
	assert_int_equal(e.relay_hops, 5);
	assert_close(e.circuit_bytes, 2 * 0.75 * n, 1e-12);

	p.launch_us = 10;
	p.launch_alg_us[COLL_ALG_RING] = 2;
	p.launch_alg_us[COLL_ALG_RHD] = 1000; /* another algorithm's: not charged */
	p.overhead_us = 0.5;
	assert_close(price(COLL_ALLREDUCE, COLL_ALG_RING, MiB, 4, 8, &p, NULL), base + 12 + 3,
	             1e-12);

	coll_params_default(&p);
	p.link_efficiency = 0.5;
	b = 1 / (125.0 * 200);
	assert_close(price(COLL_ALLREDUCE, COLL_ALG_RING, MiB, 4, 8, &p, NULL),
	             base + 2 * 0.75 * n * b, 1e-12);

	/* A 100 Gb/s host link under a 200 Gb/s circuit: the circuit's bytes at the host rate. */
	coll_params_default(&p);
	p.device_link_gbps = 100;
	assert_close(price(COLL_ALLREDUCE, COLL_ALG_RING, MiB, 4, 8, &p, NULL),
	             base + 2 * 0.75 * n * b, 1e-12);
	/* A faster one does not count. */
	p.device_link_gbps = 400;
	assert_close(price(COLL_ALLREDUCE, COLL_ALG_RING, MiB, 4, 8, &p, NULL), base, 1e-12);

	coll_params_default(&p);
	p.relay = COLL_RELAY_STORE_FORWARD;
	assert_close(price(COLL_ALLREDUCE, COLL_ALG_RING, MiB, 4, 8, &p, NULL),
	             base + 5 * 1.0 + 5 * n / 4 / (125.0 * 400), 1e-12);
	/* Cut-through: the latency only, the mesh being faster than the circuit. */
	p.relay = COLL_RELAY_CUT_THROUGH;
	assert_close(price(COLL_ALLREDUCE, COLL_ALG_RING, MiB, 4, 8, &p, NULL), base + 5, 1e-12);
	/* One device per server has nothing to move. */
	p.relay = COLL_RELAY_STORE_FORWARD;
	coll_params_default(&p);
	base = price(COLL_ALLREDUCE, COLL_ALG_RING, MiB, 4, 1, &p, NULL);
	p.relay = COLL_RELAY_STORE_FORWARD;
	assert_close(price(COLL_ALLREDUCE, COLL_ALG_RING, MiB, 4, 1, &p, NULL), base, 1e-12);
}

/* The host link is shared by the circuits a device sends on at once: full-mesh-direct. */
static void test_host_link_shared(void **state)
{
	struct coll_params p;
	struct coll_estimate e;
	double base, b = 1 / (125.0 * 200), n = 8.0 * MiB;

	(void)state;
	coll_params_default(&p);
	base = price(COLL_ALLREDUCE, COLL_ALG_FULL_MESH_DIRECT, 8 * MiB, 8, 8, &p, &e);
	assert_int_equal(e.fanout, 7);
	p.device_link_gbps = 300;
	p.ports_per_device = 2; /* two circuits share each host link: 150 Gb/s each */
	assert_close(price(COLL_ALLREDUCE, COLL_ALG_FULL_MESH_DIRECT, 8 * MiB, 8, 8, &p, NULL),
	             base + 2 * n / 8 * (2 / (125.0 * 300) - b), 1e-12);
}

/* The counts the terms are charged on, against the schedules generated round by round. */
static void test_sends_match_schedules(void **state)
{
	static const struct {
		enum coll_collective c;
		enum coll_algorithm a;
	} algs[] = {
		{ COLL_ALLREDUCE, COLL_ALG_RING },
		{ COLL_ALLREDUCE, COLL_ALG_BIDIR_RING },
		{ COLL_ALLREDUCE, COLL_ALG_RHD },
		{ COLL_ALLREDUCE, COLL_ALG_FULL_MESH_DIRECT },
		{ COLL_ALLREDUCE, COLL_ALG_CUBE_300 },
		{ COLL_ALLREDUCE, COLL_ALG_CUBE_400 },
		{ COLL_ALLGATHER, COLL_ALG_RING },
		{ COLL_ALLGATHER, COLL_ALG_RECURSIVE_DOUBLING },
		{ COLL_ALLGATHER, COLL_ALG_FULL_MESH_DIRECT },
		{ COLL_BROADCAST, COLL_ALG_BINOMIAL_TREE },
		{ COLL_BROADCAST, COLL_ALG_FULL_MESH_DIRECT },
		{ COLL_BROADCAST, COLL_ALG_SCATTER_ALLGATHER },
	};
	static const uint32_t sizes[] = { 2, 3, 5, 8, 16 };

	(void)state;
	for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++)
		for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
			struct coll_schedule s;
			struct coll_estimate e;
			uint32_t M = sizes[z], most_fanout = 0;
			uint64_t sends = 0;

			if (coll_generate(algs[i].c, algs[i].a, M, 1, 1 << 20, NULL, &s, NULL))
				continue; /* does not fit this size */
			price(algs[i].c, algs[i].a, 1 << 20, M, 1, NULL, &e);
			for (uint32_t r = 0; r < s.nrounds; r++) {
				uint32_t *per = calloc(M, sizeof(*per)), most = 0;

				for (uint32_t t = 0; t < s.rounds[r].count; t++) {
					const struct coll_transfer *x =
					    coll_round_transfer(&s, r, t);
					if (++per[x->src] > most)
						most = per[x->src];
				}
				sends += most;
				if (most > most_fanout)
					most_fanout = most;
				free(per);
			}
			if (e.sends != sends || e.fanout != most_fanout)
				fail_msg("%s/%s on %u: priced %llu sends, fan-out %u; the schedule "
				         "has %llu, %u",
				         coll_collective_name(algs[i].c),
				         coll_algorithm_name(algs[i].a), M,
				         (unsigned long long)e.sends, e.fanout,
				         (unsigned long long)sends, most_fanout);
			coll_schedule_free(&s);
		}
}

/* The window: the first W messages go back to back (K <= W), later windows one rtt apart. */
static void test_ina_window_corrected(void **state)
{
	struct coll_params p;
	double b = 1 / (125.0 * 200), m = 4096, rtt = 2 * 3.0 + 2 * m * b;

	(void)state;
	coll_params_default(&p);
	p.aggregating_switch = true;
	p.window = 32;
	/* K = W = 32 messages: they all leave at the link's rate. */
	assert_close(price(COLL_ALLREDUCE, COLL_ALG_INA, 32 * 4096, 4, 1, &p, NULL),
	             31 * m * b + rtt, 1e-12);
	/* K = 100: three full windows one rtt apart, then 3 more at the link's rate. */
	assert_close(price(COLL_ALLREDUCE, COLL_ALG_INA, 100 * 4096, 4, 1, &p, NULL),
	             3 * rtt + 3 * m * b + rtt, 1e-12);
	/* A switch hop's latency is on both ways of the round trip. */
	p.switch_alpha_us = 2;
	assert_close(price(COLL_ALLREDUCE, COLL_ALG_INA, 4096, 4, 1, &p, NULL), rtt + 4, 1e-12);
}

static void test_terms_validated(void **state)
{
	struct coll_params p;
	struct coll_error err = { 0 };

	(void)state;
	coll_params_default(&p);
	p.link_efficiency = 0;
	assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
	assert_string_equal(err.field, "link_efficiency");
	coll_params_default(&p);
	p.intra_efficiency = 1.5;
	assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
	assert_string_equal(err.field, "intra_efficiency");
	coll_params_default(&p);
	p.overhead_us = -1;
	assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
	assert_string_equal(err.field, "overhead_us");
	coll_params_default(&p);
	p.relay = COLL_RELAY__COUNT;
	assert_int_equal(coll_params_validate(&p, &err), -EINVAL);
	assert_string_equal(err.field, "relay");
}

/* Runs measured on a platform the model describes exactly, with hidden parameters. */
static uint32_t measure(const struct coll_params *hidden, struct coll_run *runs, uint32_t max)
{
	static const struct {
		enum coll_collective c;
		enum coll_algorithm a;
	} algs[] = {
		{ COLL_ALLREDUCE, COLL_ALG_RING },
		{ COLL_ALLREDUCE, COLL_ALG_RHD },
		{ COLL_ALLREDUCE, COLL_ALG_FULL_MESH_DIRECT },
		{ COLL_ALLGATHER, COLL_ALG_RING },
		{ COLL_BROADCAST, COLL_ALG_BINOMIAL_TREE },
		{ COLL_BROADCAST, COLL_ALG_SCATTER_ALLGATHER },
		{ COLL_ALLTOALL, COLL_ALG_DIRECT },
	};
	static const uint64_t bytes[] = { 8, 64 << 10, 16 << 20, 1ull << 30 };
	static const uint32_t servers[] = { 4, 8 };
	uint32_t n = 0;

	for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++)
		for (size_t z = 0; z < sizeof(servers) / sizeof(servers[0]); z++)
			for (size_t q = 0; q < sizeof(bytes) / sizeof(bytes[0]) && n < max; q++) {
				struct coll_run *r = &runs[n];

				*r = (struct coll_run){ .collective = algs[i].c,
					                .algorithm = algs[i].a,
					                .servers = servers[z],
					                .devices = 8,
					                .bytes = bytes[q] };
				r->measured_us = price(r->collective, r->algorithm, r->bytes,
				                       r->servers, r->devices, hidden, NULL);
				n++;
			}
	return n;
}

static void test_fit_recovers_hidden_parameters(void **state)
{
	struct coll_params start, hidden;
	struct coll_fit_request req;
	struct coll_fit_result res;
	struct coll_run runs[64];
	double resid[64];
	uint32_t n;

	(void)state;
	coll_params_default(&start);
	start.ports_per_device = 2;
	hidden = start;
	hidden.alpha_us = 7;
	hidden.launch_us = 12;
	hidden.overhead_us = 1.5;
	hidden.link_efficiency = 0.85;
	hidden.intra_efficiency = 0.9;
	hidden.device_link_gbps = 300;
	hidden.relay = COLL_RELAY_STORE_FORWARD;
	hidden.gamma_ns_per_byte = 0.02;
	n = measure(&hidden, runs, 64);
	coll_fit_request_default(&req);
	assert_int_equal(coll_fit(runs, n, &start, &req, &res, resid, NULL), 0);
	assert_true(res.start_rms > 0.2);
	assert_true(res.rms < 1e-4);
	assert_int_equal(res.within_5, n);
	assert_int_equal(res.params.relay, COLL_RELAY_STORE_FORWARD);
	assert_true(res.relay_determined);
	assert_close(res.params.alpha_us, 7, 1e-3);
	assert_close(res.params.launch_us, 12, 1e-3);
	assert_close(res.params.overhead_us, 1.5, 1e-3);
	assert_close(res.params.link_efficiency, 0.85, 1e-3);
	assert_close(res.params.device_link_gbps, 300, 1e-3);
	assert_close(res.params.gamma_ns_per_byte, 0.02, 1e-3);
	assert_int_equal(res.why[COLL_FIT_ALPHA], COLL_FIT_DETERMINED);
	/* Nothing here goes through a switch, and the per-algorithm launches were not asked. */
	assert_int_equal(res.why[COLL_FIT_SWITCH_ALPHA], COLL_FIT_UNUSED);
	assert_int_equal(res.why[COLL_FIT_LAUNCH_ALG + COLL_ALG_RING], COLL_FIT_NOT_ASKED);
	for (uint32_t i = 0; i < n; i++)
		assert_true(fabs(resid[i]) < 1e-3);
}

/* One algorithm at one size cannot tell the launch from the step latency. */
static void test_fit_says_what_it_cannot_tell(void **state)
{
	struct coll_params p;
	struct coll_fit_request req;
	struct coll_fit_result res;
	struct coll_run run = { .collective = COLL_ALLREDUCE,
		                .algorithm = COLL_ALG_RING,
		                .servers = 4,
		                .devices = 1,
		                .bytes = 8,
		                .measured_us = 100 };

	(void)state;
	coll_params_default(&p);
	memset(&req, 0, sizeof(req));
	req.fit[COLL_FIT_LAUNCH] = req.fit[COLL_FIT_ALPHA] = true;
	req.fit[COLL_FIT_INTRA_ALPHA] = true;
	assert_int_equal(coll_fit(&run, 1, &p, &req, &res, NULL, NULL), 0);
	assert_true(res.why[COLL_FIT_LAUNCH] == COLL_FIT_CONFOUNDED ||
	            res.why[COLL_FIT_ALPHA] == COLL_FIT_CONFOUNDED);
	/* One device per server: no in-server step. */
	assert_int_equal(res.why[COLL_FIT_INTRA_ALPHA], COLL_FIT_UNUSED);
	assert_close(res.params.intra_alpha_us, p.intra_alpha_us, 0);
	assert_true(res.rms < 1e-6);
	assert_false(res.relay_determined);
}

static void test_fit_refuses_bad_runs(void **state)
{
	struct coll_params p;
	struct coll_fit_request req;
	struct coll_fit_result res;
	struct coll_error err = { 0 };
	struct coll_run run = { .collective = COLL_ALLREDUCE,
		                .algorithm = COLL_ALG_CUBE_300,
		                .servers = 6,
		                .devices = 1,
		                .bytes = 8,
		                .measured_us = 100 };

	(void)state;
	coll_params_default(&p);
	coll_fit_request_default(&req);
	assert_int_equal(coll_fit(&run, 1, &p, &req, &res, NULL, &err), -EINVAL);
	assert_string_equal(err.field, "runs");
	assert_non_null(strstr(err.reason, "run 0"));
	run.algorithm = COLL_ALG_RING;
	run.measured_us = 0;
	assert_int_equal(coll_run_check(&run, &p, &err), -EINVAL);
	assert_string_equal(err.field, "measured_us");
	run.measured_us = 1;
	run.servers = 1;
	assert_int_equal(coll_run_check(&run, &p, &err), -EINVAL);
	assert_string_equal(err.field, "servers");
	assert_int_equal(coll_fit(&run, 0, &p, &req, &res, NULL, &err), -EINVAL);
}

/* An all-to-all's profile prices as the round-by-round price does, host links included. */
static void test_alltoall_profile_prices_as_predicted(void **state)
{
	static const double alphas[] = { 0, 3, 20 }, effs[] = { 1, 0.7 }, hosts[] = { 0, 150, 900 };
	struct coll_params p;
	struct coll_profile pr;

	(void)state;
	coll_params_default(&p);
	for (int a = 0; a < 2; a++) {
		enum coll_algorithm alg = a ? COLL_ALG_PLANE_RELAYED : COLL_ALG_DIRECT;

		assert_int_equal(coll_alltoall_profile(alg, &p, 1 << 20, 5, 6, &pr), 0);
		for (size_t i = 0; i < 3; i++)
			for (size_t j = 0; j < 2; j++)
				for (size_t k = 0; k < 3; k++) {
					struct coll_params q = p;
					struct coll_estimate e;

					q.alpha_us = alphas[i];
					q.intra_alpha_us = alphas[2 - i];
					q.link_efficiency = effs[j];
					q.device_link_gbps = hosts[k];
					price(COLL_ALLTOALL, alg, 1 << 20, 5, 6, &q, &e);
					assert_close(coll_profile_price(&pr, &q), e.predicted_us,
					             1e-12);
				}
		coll_profile_free(&pr);
	}
}

/* All-to-all work past the bound is refused before anything is priced. */
static void test_fit_bounds_its_work(void **state)
{
	struct coll_params p;
	struct coll_fit_request req;
	struct coll_fit_result res;
	struct coll_error err = { 0 };
	static struct coll_run runs[40];

	(void)state;
	coll_params_default(&p);
	coll_fit_request_default(&req);
	for (unsigned i = 0; i < 40; i++)
		runs[i] = (struct coll_run){ .collective = COLL_ALLTOALL,
			                     .algorithm = COLL_ALG_DIRECT,
			                     .servers = 16,
			                     .devices = 16,
			                     .bytes = 1 << 20,
			                     .measured_us = 1000 };
	assert_int_equal(coll_fit(runs, 40, &p, &req, &res, NULL, &err), -E2BIG);
	assert_string_equal(err.field, "runs");
	assert_int_equal(coll_fit_work(runs, 30, NULL), 0);
}

static void test_term_names(void **state)
{
	enum coll_fit_term t;

	(void)state;
	for (unsigned i = 0; i < COLL_FIT__COUNT; i++) {
		assert_non_null(coll_fit_term_name((enum coll_fit_term)i));
		assert_int_equal(
		    coll_fit_term_from_name(coll_fit_term_name((enum coll_fit_term)i), &t), 0);
		assert_int_equal(t, i);
	}
	assert_string_equal(coll_fit_term_name(COLL_FIT_LAUNCH_ALG + COLL_ALG_TORUS_A2A),
	                    "launch_us.torus-dim-ordered-a2a");
	assert_int_equal(coll_fit_term_from_name("link_gbps", &t), -EINVAL);
	assert_null(coll_fit_term_name(COLL_FIT__COUNT));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_terms_on_a_ring),
		cmocka_unit_test(test_host_link_shared),
		cmocka_unit_test(test_sends_match_schedules),
		cmocka_unit_test(test_ina_window_corrected),
		cmocka_unit_test(test_terms_validated),
		cmocka_unit_test(test_fit_recovers_hidden_parameters),
		cmocka_unit_test(test_fit_says_what_it_cannot_tell),
		cmocka_unit_test(test_fit_refuses_bad_runs),
		cmocka_unit_test(test_alltoall_profile_prices_as_predicted),
		cmocka_unit_test(test_fit_bounds_its_work),
		cmocka_unit_test(test_term_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
