/*
 * Planner benchmark: plan + verify time per circuit of a cabled fabric.
 *
 * Each case is M servers of N = min_devices devices with P ports each, cabled
 * plane-per-ocs with one OCS unit per slot (K = N * P units of M ports each,
 * OCS ports handed out in server order), all healthy: plan_fabric_compute()
 * followed by plan_verify() and plan_fabric_free(), as the daemon does for a
 * new fabric. Cost per circuit must stay flat across sizes (largest/smallest
 * <= 2). Each case runs in batches of at least 50 ms; the best batch counts.
 *
 * Also the stateless policy that POST /v1/plan computes for M = 65, P = 8
 * (plan_policy_compute + plan_policy_verify), in microseconds, for the share
 * of that request spent planning (bench/rest_plan.py).
 *
 * Output: one `name: value unit` line per measurement.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "plan.h"

#define BATCH_NS 50000000.0
#define BATCHES  5

struct bench_case {
	const char *name;
	uint32_t m;
	uint32_t p;
};

static const struct bench_case cases[] = {
	{ "plan_verify_m8_p1", 8, 1 },
	{ "plan_verify_m65_p8", 65, 8 },
	{ "plan_verify_m257_p32", 257, 32 },
};

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* One plan + verify; returns circuits planned or 0 on failure. */
static size_t run_once(const struct plan_server *srv, uint32_t m)
{
	struct plan_fabric pl;
	char why[256];
	size_t n;

	if (plan_fabric_compute(srv, m, &pl)) {
		fprintf(stderr, "bench_plan: plan of %u servers failed\n", m);
		return 0;
	}
	if (plan_verify(srv, m, &pl, why, sizeof(why))) {
		fprintf(stderr, "bench_plan: verify of %u servers failed: %s\n", m, why);
		plan_fabric_free(&pl);
		return 0;
	}
	n = pl.ncircuits;
	plan_fabric_free(&pl);
	return n;
}

/* Best ns per circuit over BATCHES batches, or a negative value on failure. */
static double bench_case(const struct bench_case *bc, size_t *circuits)
{
	uint32_t n = plan_min_devices(bc->m, bc->p, PLAN_FORMULA_AUTO);
	uint32_t slots = n * bc->p;
	struct plan_server *srv = calloc(bc->m, sizeof(*srv));
	struct plan_port *ports = calloc((size_t)bc->m * slots, sizeof(*ports));
	double best = -1.0, t0;
	unsigned reps = 1;

	if (!srv || !ports)
		goto out;
	for (uint32_t i = 0; i < bc->m; i++) {
		for (uint32_t k = 0; k < slots; k++)
			ports[(size_t)i * slots + k] = (struct plan_port){ .ocs = (int32_t)k,
				                                           .ocs_port = i + 1,
				                                           .healthy = true };
		srv[i] = (struct plan_server){ .devices = n,
			                       .ports_per_device = bc->p,
			                       .ports = ports + (size_t)i * slots };
	}

	*circuits = run_once(srv, bc->m);
	if (!*circuits)
		goto out;
	/* size the batch so that timer resolution and noise stay negligible */
	for (;;) {
		t0 = now_ns();
		for (unsigned r = 0; r < reps; r++)
			run_once(srv, bc->m);
		if (now_ns() - t0 >= BATCH_NS / 10)
			break;
		reps *= 2;
	}
	reps = (unsigned)(reps * (BATCH_NS / (now_ns() - t0))) + 1;
	for (int b = 0; b < BATCHES; b++) {
		double per;

		t0 = now_ns();
		for (unsigned r = 0; r < reps; r++)
			run_once(srv, bc->m);
		per = (now_ns() - t0) / reps / (double)*circuits;
		if (best < 0 || per < best)
			best = per;
	}
out:
	free(srv);
	free(ports);
	return best;
}

/* Best batch time of the stateless policy for m servers, p ports, in ns per policy. */
static double bench_policy(uint32_t m, uint32_t p)
{
	double best = 0;
	for (int b = 0; b < BATCHES; b++) {
		size_t reps = 0;
		double t0 = now_ns(), t1;
		do {
			struct plan_policy pol;
			char why[128];
			if (plan_policy_compute(m, plan_min_devices(m, p, PLAN_FORMULA_AUTO), p,
			                        PLAN_FORMULA_AUTO, &pol) < 0 ||
			    plan_policy_verify(&pol, why, sizeof(why)) < 0)
				return -1;
			plan_policy_free(&pol);
			reps++;
			t1 = now_ns();
		} while (t1 - t0 < BATCH_NS);
		double per = (t1 - t0) / (double)reps;
		if (b == 0 || per < best)
			best = per;
	}
	return best;
}

int main(void)
{
	double lo = 0, hi = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t circuits = 0;
		double ns = bench_case(&cases[i], &circuits);

		if (ns < 0) {
			fprintf(stderr, "bench_plan: %s failed\n", cases[i].name);
			return 1;
		}
		printf("%s_circuits: %zu circuits\n", cases[i].name, circuits);
		printf("%s: %.1f ns/circuit\n", cases[i].name, ns);
		if (!i || ns < lo)
			lo = ns;
		if (!i || ns > hi)
			hi = ns;
	}
	printf("plan_verify_ratio: %.2f largest/smallest (target <= 2)\n", hi / lo);
	double pol = bench_policy(65, 8);
	if (pol < 0) {
		fprintf(stderr, "bench_plan: policy of 65 servers failed\n");
		return 1;
	}
	printf("policy_m65_p8: %.1f us\n", pol / 1e3);
	return 0;
}
